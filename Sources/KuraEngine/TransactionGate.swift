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
// State machine (transitions under `lock`):
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

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

final class TransactionGate: @unchecked Sendable {
    // @unchecked Sendable: every field is guarded by `lock`.
    private let lock = ThreadLock()
    private var inside: [pthread_t] = []
    private var shut = false
    private var deferredClose: (() -> Void)?

    /// Enters a transaction. Throws `misuse` after `close()`.
    func enter(path: String) throws(KuraError) {
        try lock.withLock { () throws(KuraError) in
            if shut { throw KuraError(.misuse, "the database was closed; open it again to use it", path: path) }
            inside.append(pthread_self())
        }
    }

    /// Leaves a transaction entered on this thread.
    func leave() {
        let action: (() -> Void)? = lock.withLock {
            let me = pthread_self()
            if let i = inside.lastIndex(where: { pthread_equal($0, me) != 0 }) {
                inside.remove(at: i)
            } else {
                preconditionFailure("TransactionGate.leave on a thread that did not enter")
            }
            guard inside.isEmpty, shut else { return nil }
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
        if shut {
            lock.unlock()
            return false
        }
        shut = true
        let me = pthread_self()
        if inside.contains(where: { pthread_equal($0, me) != 0 }) {
            deferredClose = finish
            lock.unlock()
            return true
        }
        while !inside.isEmpty { lock.wait() }
        lock.unlock()
        finish()
        return true
    }

    /// Whether `close()` was called.
    var isShut: Bool { lock.withLock { shut } }
}
