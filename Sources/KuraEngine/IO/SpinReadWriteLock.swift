// SpinReadWriteLock: a readers-writer lock for critical sections of a few
// hundred instructions that many threads enter at a high rate (the pager's
// `state`: every page lookup shares it, every commit takes it exclusively).
// Waiters spin, then yield, then nap; no one ever makes a system call to wake
// them. A pthread rwlock (ReadWriteLock) puts a reader that arrives while a
// writer waits to sleep in the kernel, and the writer's unlock then wakes it
// with a futex call: in W9 (two readers, one writer on one connection) those
// sleeps and wakes took about a quarter of the writer's time.

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A writer-preferring, non-recursive readers-writer lock for short holds.
///
/// One word: bit 62 says a writer holds the lock or waits for its readers to
/// leave; the bits below count the readers inside. A reader enters only while
/// bit 62 is clear, so a waiting writer lets no new reader in, and gets the
/// lock once those inside leave. Holds that do I/O (a checkpoint's rare page
/// load under the lock) only make waiters nap after a while.
///
/// Thread rules: any thread; a thread never takes the lock again while it
/// holds it (in either mode): that waits forever, as with a pthread rwlock.
/// Each `lockShared` is matched by one `unlockShared`, each `lockExclusive` by
/// one `unlockExclusive`, on the thread that locked. Failure modes:
/// none.
///
/// On Apple systems without Synchronization's `Atomic` (before macOS 15 / iOS
/// 18) it is a pthread rwlock.
final class SpinReadWriteLock: @unchecked Sendable {
    // @unchecked Sendable: `word` changes only through atomic operations; where
    // `Atomic` is missing, `legacy` (a pthread rwlock) is the lock itself.
    private let word = AtomicWord()
    private let legacy: UnsafeMutablePointer<pthread_rwlock_t>?

    private static let writerBit = 1 << 62
    private static let readerMask = writerBit - 1

    init() {
        if #available(macOS 15.0, iOS 18.0, *) {
            legacy = nil
        } else {
            let rw = UnsafeMutablePointer<pthread_rwlock_t>.allocate(capacity: 1)
            pthread_rwlock_init(rw, nil)
            legacy = rw
        }
    }

    deinit {
        if let legacy {
            pthread_rwlock_destroy(legacy)
            legacy.deallocate()
        }
    }

    /// Waits while the lock is held exclusively or a writer waits, then enters
    /// as one more reader.
    @inline(__always)
    func lockShared() {
        if let legacy { pthread_rwlock_rdlock(legacy); return }
        let v = word.load()
        if v & Self.writerBit == 0, word.compareExchange(expected: v, desired: v + 1).exchanged { return }
        lockSharedSlow()
    }

    @inline(never)
    private func lockSharedSlow() {
        var waits = 0
        while true {
            let v = word.load()
            if v & Self.writerBit == 0 {
                if word.compareExchange(expected: v, desired: v + 1).exchanged { return }
            } else {
                Self.pause(&waits)
            }
        }
    }

    /// Waits for any other writer, bars new readers, then waits for the
    /// readers inside to leave.
    @inline(__always)
    func lockExclusive() {
        if let legacy { pthread_rwlock_wrlock(legacy); return }
        if word.compareExchange(expected: 0, desired: Self.writerBit).exchanged { return }
        lockExclusiveSlow()
    }

    @inline(never)
    private func lockExclusiveSlow() {
        var waits = 0
        // Claim the writer bit (another writer may hold it)...
        while true {
            let v = word.load()
            if v & Self.writerBit == 0 {
                if word.compareExchange(expected: v, desired: v | Self.writerBit).exchanged { break }
            } else {
                Self.pause(&waits)
            }
        }
        // ...then wait for the readers already inside.
        waits = 0
        while word.load() & Self.readerMask != 0 { Self.pause(&waits) }
    }

    /// Leaves the lock taken with `lockShared`.
    @inline(__always)
    func unlockShared() {
        if let legacy { pthread_rwlock_unlock(legacy); return }
        word.add(-1)
    }

    /// Leaves the lock taken with `lockExclusive`.
    @inline(__always)
    func unlockExclusive() {
        if let legacy { pthread_rwlock_unlock(legacy); return }
        word.add(-Self.writerBit)
    }

    /// Runs `body` holding the lock exclusively.
    @inline(__always)
    func withLock<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        lockExclusive()
        defer { unlockExclusive() }
        return try body()
    }

    /// Runs `body` holding the lock shared (with any number of other sharers).
    @inline(__always)
    func withShared<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        lockShared()
        defer { unlockShared() }
        return try body()
    }

    /// One wait step: spin first (the holder is usually running on the other
    /// core and leaves within a microsecond), then give the processor to
    /// another thread (the holder may have been preempted on this one), then
    /// nap (a hold that reads from disk).
    @inline(never)
    private static func pause(_ waits: inout Int) {
        waits += 1
        if waits <= 100 { return }
        if waits <= 1_100 {
            sched_yield()
            return
        }
        usleep(50)
    }
}
