// AtomicFlag: a Bool that one thread may set while others read it, each under
// no lock of its own (Synchronization's `Atomic` where the platform has it:
// Linux, and Apple platforms from macOS 15 / iOS 18; a mutex elsewhere).

import Synchronization

/// A flag read and written atomically (sequentially consistent).
///
/// Thread rules: any thread may load or store it at any time. Failure modes:
/// none.
final class AtomicFlag: @unchecked Sendable {
    // @unchecked Sendable: `word` is accessed only through `Atomic` loads and
    // stores; on platforms without `Atomic`, `value` only under `fallback`.
    private let word: UnsafeMutableRawPointer
    private let fallback = ThreadLock()
    private var value = false

    init() {
        word = .allocate(byteCount: 8, alignment: 8)
        // Zero bytes are an `Atomic<UInt64>` holding 0.
        word.initializeMemory(as: UInt64.self, repeating: 0, count: 1)
    }

    deinit { word.deallocate() }

    func load() -> Bool {
        guard #available(macOS 15.0, iOS 18.0, *) else { return fallback.withLock { value } }
        return word.assumingMemoryBound(to: Atomic<UInt64>.self).pointee.load(ordering: .sequentiallyConsistent) != 0
    }

    func store(_ newValue: Bool) {
        guard #available(macOS 15.0, iOS 18.0, *) else {
            fallback.withLock { value = newValue }
            return
        }
        word.assumingMemoryBound(to: Atomic<UInt64>.self).pointee.store(newValue ? 1 : 0, ordering: .sequentiallyConsistent)
    }
}
