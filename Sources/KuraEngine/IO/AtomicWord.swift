// AtomicWord: an integer that threads read and change under no lock of their
// own (Synchronization's `Atomic` where the platform has it: Linux, and Apple
// platforms from macOS 15 / iOS 18; one process-wide mutex elsewhere).

import Synchronization

/// An `Int` loaded and changed atomically (acquire and release ordering).
///
/// Used by the pager for what every transaction's start and end changes: a
/// snapshot's users and the connection's open transactions, so that they
/// take no lock (Pager.swift).
///
/// Thread rules: any thread, any time. Failure modes: none (a failed
/// allocation traps, as Swift's own do).
final class AtomicWord: @unchecked Sendable {
    // @unchecked Sendable: `word` is accessed only through `Atomic`
    // operations; on platforms without `Atomic`, only under `fallback`.
    private let word: UnsafeMutableRawPointer
    /// Guards `word` on platforms without `Atomic` (one lock for every
    /// instance: a snapshot, made per commit, does not make a mutex).
    private static let fallback = ThreadLock()

    init(_ value: Int = 0) {
        word = .allocate(byteCount: 8, alignment: 8)
        // An `Atomic<Int>`'s storage is the Int itself.
        word.initializeMemory(as: Int.self, repeating: value, count: 1)
    }

    deinit { word.deallocate() }

    @inline(__always)
    func load() -> Int {
        guard #available(macOS 15.0, iOS 18.0, *) else {
            return Self.fallback.withLock { word.load(as: Int.self) }
        }
        return word.assumingMemoryBound(to: Atomic<Int>.self).pointee.load(ordering: .acquiring)
    }

    /// Adds `delta` (wrapping); returns the new value.
    @inline(__always)
    @discardableResult
    func add(_ delta: Int) -> Int {
        guard #available(macOS 15.0, iOS 18.0, *) else {
            return Self.fallback.withLock {
                let v = word.load(as: Int.self) &+ delta
                word.storeBytes(of: v, as: Int.self)
                return v
            }
        }
        return word.assumingMemoryBound(to: Atomic<Int>.self).pointee.wrappingAdd(delta, ordering: .acquiringAndReleasing).newValue
    }

    /// Sets the bits of `mask`; returns the value before.
    @inline(__always)
    @discardableResult
    func setBits(_ mask: Int) -> Int {
        guard #available(macOS 15.0, iOS 18.0, *) else {
            return Self.fallback.withLock {
                let v = word.load(as: Int.self)
                word.storeBytes(of: v | mask, as: Int.self)
                return v
            }
        }
        return word.assumingMemoryBound(to: Atomic<Int>.self).pointee.bitwiseOr(mask, ordering: .acquiringAndReleasing).oldValue
    }

    /// Replaces `expected` with `desired` if the word holds `expected`;
    /// returns whether it did, and the value it found.
    @inline(__always)
    func compareExchange(expected: Int, desired: Int) -> (exchanged: Bool, found: Int) {
        guard #available(macOS 15.0, iOS 18.0, *) else {
            return Self.fallback.withLock {
                let v = word.load(as: Int.self)
                if v == expected { word.storeBytes(of: desired, as: Int.self) }
                return (v == expected, v)
            }
        }
        let r = word.assumingMemoryBound(to: Atomic<Int>.self).pointee.compareExchange(expected: expected, desired: desired, ordering: .acquiringAndReleasing)
        return (r.exchanged, r.original)
    }
}
