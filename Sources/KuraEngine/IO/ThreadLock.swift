// ThreadLock: a pthread mutex and condition variable, the only in-process
// synchronisation primitive the engine uses (Foundation's NSLock would do, but this
// keeps KuraEngine's hot paths free of Objective-C bridging on Darwin).

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A mutex with an attached condition variable.
final class ThreadLock: @unchecked Sendable {
    // @unchecked Sendable: the pthread mutex itself is the lock; it is allocated
    // once, never moved, and destroyed in deinit when no thread can hold it.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let cond: UnsafeMutablePointer<pthread_cond_t>

    init() {
        mutex = .allocate(capacity: 1)
        cond = .allocate(capacity: 1)
        #if canImport(Glibc)
        // Adaptive: a thread that finds the mutex taken spins briefly before it
        // sleeps. The engine holds its mutexes for a few dozen instructions, so
        // a waiter (a reader starting a transaction while another ends one)
        // usually gets it without a futex wait and wake.
        var attr = pthread_mutexattr_t()
        pthread_mutexattr_init(&attr)
        pthread_mutexattr_settype(&attr, Int32(PTHREAD_MUTEX_ADAPTIVE_NP))
        pthread_mutex_init(mutex, &attr)
        pthread_mutexattr_destroy(&attr)
        #else
        pthread_mutex_init(mutex, nil)
        #endif
        pthread_cond_init(cond, nil)
    }

    deinit {
        pthread_cond_destroy(cond)
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
        cond.deallocate()
    }

    @inline(__always) func lock() { pthread_mutex_lock(mutex) }
    @inline(__always) func unlock() { pthread_mutex_unlock(mutex) }
    /// Takes the lock if it is free, without waiting. Returns whether it did.
    @inline(__always) func tryLock() -> Bool { pthread_mutex_trylock(mutex) == 0 }

    @inline(__always)
    func withLock<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// Waits on the condition; the caller holds the lock.
    func wait() { pthread_cond_wait(cond, mutex) }

    /// Waits at most `seconds`; the caller holds the lock. Returns false on timeout.
    func wait(seconds: Double) -> Bool {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let total = Double(now.tv_sec) + Double(now.tv_nsec) / 1e9 + seconds
        var deadline = timespec()
        deadline.tv_sec = Int(total)
        deadline.tv_nsec = Int((total - Double(Int(total))) * 1e9)
        return pthread_cond_timedwait(cond, mutex, &deadline) == 0
    }

    func broadcast() { pthread_cond_broadcast(cond) }
}

/// A readers-writer lock (pthread_rwlock).
final class ReadWriteLock: @unchecked Sendable {
    // @unchecked Sendable: the pthread rwlock is the lock; allocated once, never moved.
    private let rw: UnsafeMutablePointer<pthread_rwlock_t>

    init() {
        rw = .allocate(capacity: 1)
        #if canImport(Glibc)
        // Writer-preferring: glibc's default lets new readers in while a
        // writer waits, so a connection's readers, overlapping one another,
        // kept its writer from ever taking the pager's state lock (W9 commits
        // fell to a quarter). Non-recursive is safe: no thread takes a
        // ReadWriteLock shared while it already holds it (Pager.swift's lock
        // order; TableHandleCache's bodies take no lock).
        var attr = pthread_rwlockattr_t()
        pthread_rwlockattr_init(&attr)
        pthread_rwlockattr_setkind_np(&attr, Int32(PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP))
        pthread_rwlock_init(rw, &attr)
        pthread_rwlockattr_destroy(&attr)
        #else
        // Darwin's rwlocks already make new readers wait behind a waiting writer.
        pthread_rwlock_init(rw, nil)
        #endif
    }

    deinit {
        pthread_rwlock_destroy(rw)
        rw.deallocate()
    }

    @inline(__always) func lockShared() { pthread_rwlock_rdlock(rw) }
    @inline(__always) func lockExclusive() { pthread_rwlock_wrlock(rw) }
    @inline(__always) func unlock() { pthread_rwlock_unlock(rw) }

    /// Runs `body` holding the lock exclusively.
    @inline(__always)
    func withLock<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        pthread_rwlock_wrlock(rw)
        defer { pthread_rwlock_unlock(rw) }
        return try body()
    }

    /// Runs `body` holding the lock shared (with any number of other sharers).
    @inline(__always)
    func withShared<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        pthread_rwlock_rdlock(rw)
        defer { pthread_rwlock_unlock(rw) }
        return try body()
    }
}
