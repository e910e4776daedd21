// TransactionGate: what makes `Database.close()` safe while other threads are
// inside transactions.
//
// Every transaction (read, write, checkpoint, compaction) enters the gate before it
// touches the pager and leaves it when it is done. `close()` shuts the gate: no
// transaction may enter afterwards (they throw `misuse`), and the files are closed
// only once the last transaction inside has left, so no descriptor is ever read or
// written after it was closed (a reused descriptor number could belong to another
// file by then).
//
// State machine (the state is one atomic word: bit 0 "shut", the rest the
// number of transactions inside; `enter` and `leave` change it with one atomic
// operation each and take `lock` only to wake a waiting `close` or run a
// deferred one):
//
//     open --close() with nobody inside--> closed        (caller closes the files)
//     open --close() with others inside--> draining      (caller waits)
//     draining --last one leaves--> closed               (waiting caller closes)
//     open --close() from inside a transaction--> closing-deferred
//     closing-deferred --last one leaves--> closed       (that thread closes)
//
// A thread that calls `close()` from inside one of this database's own
// transactions cannot wait for itself: then the close is deferred to the moment the
// last transaction leaves, and `close()` returns at once.

// Which transactions the calling thread is inside is kept per thread
// (`ThreadGates`, a pthread key), so that `close()` can tell the deferred case
// without a list of threads under a lock.
//
// Ordering: `close()` sets "shut" while holding `lock`, and stores the deferred
// close under it in the same hold; a `leave` that takes the count to zero with
// "shut" set takes `lock` after its atomic decrement, so it runs after that
// hold and finds the deferred close (or wakes the waiting `close`, which
// checks the count under `lock` before each wait: no wake-up is lost).
// `enter` adds itself with a compare-and-swap that fails once "shut" is set,
// so no transaction enters after `close()` has seen the count.

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

final class TransactionGate: @unchecked Sendable {
    // @unchecked Sendable: `word` is accessed only through `Atomic`
    // operations; `deferredClose` and (on platforms without `Atomic`)
    // `fallbackWord` only under `lock`, so no runtime access checks on them.
    /// An `Atomic<UInt>`: bit 0 shut, bits 1... the transactions inside.
    private let word: UnsafeMutableRawPointer
    private let lock = ThreadLock()
    @exclusivity(unchecked) private var deferredClose: (() -> Void)?
    @exclusivity(unchecked) private var fallbackWord: UInt = 0
    private static let shutBit: UInt = 1
    private static let one: UInt = 2

    init() {
        word = .allocate(byteCount: 8, alignment: 8)
        // Zero bytes are an `Atomic<UInt>` holding 0: open, nobody inside.
        word.initializeMemory(as: UInt.self, repeating: 0, count: 1)
    }

    deinit { word.deallocate() }

    /// This gate's identity in the per-thread lists.
    private var id: UInt { UInt(bitPattern: Unmanaged.passUnretained(self).toOpaque()) }

    /// Adds one transaction unless the gate is shut. Returns whether it did.
    @inline(__always)
    private func add() -> Bool {
        guard #available(macOS 15.0, iOS 18.0, *) else {
            return lock.withLock {
                if fallbackWord & Self.shutBit != 0 { return false }
                fallbackWord += Self.one
                return true
            }
        }
        let a = word.assumingMemoryBound(to: Atomic<UInt>.self)
        var s = a.pointee.load(ordering: .relaxed)
        while s & Self.shutBit == 0 {
            let (done, now) = a.pointee.compareExchange(expected: s, desired: s &+ Self.one, ordering: .acquiringAndReleasing)
            if done { return true }
            s = now
        }
        return false
    }

    /// Removes one transaction; returns the state after.
    @inline(__always)
    private func remove() -> UInt {
        guard #available(macOS 15.0, iOS 18.0, *) else {
            return lock.withLock {
                fallbackWord -= Self.one
                return fallbackWord
            }
        }
        return word.assumingMemoryBound(to: Atomic<UInt>.self).pointee.wrappingSubtract(Self.one, ordering: .acquiringAndReleasing).newValue
    }

    /// Sets "shut"; returns the state before. Caller holds `lock`.
    private func setShut() -> UInt {
        guard #available(macOS 15.0, iOS 18.0, *) else {
            let old = fallbackWord
            fallbackWord |= Self.shutBit
            return old
        }
        return word.assumingMemoryBound(to: Atomic<UInt>.self).pointee.bitwiseOr(Self.shutBit, ordering: .acquiringAndReleasing).oldValue
    }

    /// The state now (on platforms without `Atomic`, the caller holds `lock`).
    private func current() -> UInt {
        guard #available(macOS 15.0, iOS 18.0, *) else { return fallbackWord }
        return word.assumingMemoryBound(to: Atomic<UInt>.self).pointee.load(ordering: .acquiring)
    }

    /// Enters a transaction. Throws `misuse` after `close()`.
    func enter(path: String) throws(KuraError) {
        guard add() else { throw KuraError(.misuse, "the database was closed; open it again to use it", path: path) }
        ThreadGates.push(id)
    }

    /// Leaves a transaction entered on this thread.
    func leave() {
        guard ThreadGates.pop(id) else {
            preconditionFailure("TransactionGate.leave on a thread that did not enter")
        }
        // Nobody inside any more and shut: wake `close`, or run its deferred part.
        guard remove() == Self.shutBit else { return }
        let action: (() -> Void)? = lock.withLock {
            lock.broadcast()
            let a = deferredClose
            deferredClose = nil
            return a
        }
        action?()
    }

    /// Shuts the gate and runs `finish` exactly once, when no transaction is
    /// inside: now, after waiting for other threads' transactions, or (if the
    /// calling thread is itself inside one) when the last one leaves. Returns false
    /// if the gate was already shut (then `finish` is not run).
    @discardableResult
    func close(_ finish: @escaping () -> Void) -> Bool {
        lock.lock()
        if setShut() & Self.shutBit != 0 {
            lock.unlock()
            return false
        }
        if ThreadGates.contains(id) {
            // The count includes this thread's own transaction: the last
            // `leave` (after this hold ends) runs it.
            deferredClose = finish
            lock.unlock()
            return true
        }
        while current() != Self.shutBit { lock.wait() }
        lock.unlock()
        finish()
        return true
    }

    /// Whether `close()` was called.
    var isShut: Bool {
        guard #available(macOS 15.0, iOS 18.0, *) else { return lock.withLock { fallbackWord & Self.shutBit != 0 } }
        return current() & Self.shutBit != 0
    }
}

/// The gates the calling thread is inside (a stack, innermost last), for
/// every connection: one buffer per thread behind a process-wide pthread key,
/// freed when the thread exits. Word 0 of the buffer is its capacity in
/// entries, word 1 the count, then the entries (gate identities).
///
/// Thread rules: each thread touches only its own buffer. Failure modes:
/// none (a failed allocation traps, as Swift's own allocations do).
enum ThreadGates {
    private static let key: pthread_key_t = {
        var k = pthread_key_t()
        // Run at a thread's exit with its buffer (never nil there).
        let rc = pthread_key_create(&k) { p in free(p) }
        // Only fails when the process is out of keys (PTHREAD_KEYS_MAX, at
        // least 128, and Kura creates one): no thread could be tracked.
        precondition(rc == 0, "pthread_key_create failed (\(rc))")
        return k
    }()

    /// This thread's buffer, made on first use.
    @inline(__always)
    private static func buffer() -> UnsafeMutablePointer<UInt> {
        if let p = pthread_getspecific(key) { return p.assumingMemoryBound(to: UInt.self) }
        return grow(nil)
    }

    /// A buffer with room for at least one more entry, the old one's entries
    /// copied (`realloc`), set as this thread's.
    private static func grow(_ old: UnsafeMutablePointer<UInt>?) -> UnsafeMutablePointer<UInt> {
        let capacity: UInt = old.map { $0[0] * 2 } ?? 8
        guard let raw = realloc(old.map { UnsafeMutableRawPointer($0) }, Int(capacity + 2) * MemoryLayout<UInt>.stride) else {
            preconditionFailure("out of memory for the thread's transaction list")
        }
        let p = raw.assumingMemoryBound(to: UInt.self)
        p[0] = capacity
        if old == nil { p[1] = 0 }
        pthread_setspecific(key, raw)
        return p
    }

    /// Notes that this thread entered gate `id`.
    @inline(__always)
    static func push(_ id: UInt) {
        var p = buffer()
        if p[1] == p[0] { p = grow(p) }
        p[Int(p[1]) + 2] = id
        p[1] += 1
    }

    /// Notes that this thread left gate `id` (its innermost entry of it);
    /// false if the thread is not inside it.
    @inline(__always)
    static func pop(_ id: UInt) -> Bool {
        let p = buffer()
        let n = Int(p[1])
        if n > 0 && p[n + 1] == id {
            p[1] -= 1
            return true
        }
        // Not the innermost: remove the innermost entry of `id` anyway.
        var i = n - 1
        while i >= 0 && p[i + 2] != id { i -= 1 }
        guard i >= 0 else { return false }
        while i + 1 < n {
            p[i + 2] = p[i + 3]
            i += 1
        }
        p[1] -= 1
        return true
    }

    /// Whether this thread is inside gate `id`.
    static func contains(_ id: UInt) -> Bool {
        let p = buffer()
        for i in 0..<Int(p[1]) where p[i + 2] == id { return true }
        return false
    }
}
