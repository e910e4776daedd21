// CommitWatcher: tells observers that a transaction committed to the store, by any
// connection of any process, without a polling loop.
//
// Every commit appends to the store's log (`PATH-wal`), and every checkpoint
// rewrites it, so a change of the log file is the cross-process signal; the
// store's change counter (page 1, FORMAT.md "The header page") says whether it
// was a commit. The watcher is one thread per `Database`, started by the first
// observer, that sleeps in `poll(2)` until:
//
//   - the kernel reports a change of the log file (Linux: inotify IN_MODIFY;
//     Darwin: a vnode dispatch source on the log's descriptor), or
//   - this connection committed (`Database.write` wakes it through a pipe, which
//     also covers stores without a real file, such as in-memory ones), or
//   - it is stopped (last observer cancelled, `close()`, or the `Database` is
//     released).
//
// Then it reads the change counter in a read transaction (which also picks up the
// other processes' commits) and, if it moved, calls every observer with the new
// value. Bursts of commits coalesce: observers get the newest counter, not one
// call per commit. An idle watcher uses no CPU.
//
// Thread rules: observers are called on the watcher thread, one call at a time,
// in increasing counter order. The watcher holds its `Database` weakly, so it
// never keeps a connection open.

import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
import Dispatch
#endif

/// A registration made with ``Database/observeCommits(_:)``. Calls stop after
/// ``cancel()`` or when the value is released.
public final class CommitObservation: Sendable {
    private let stop: @Sendable () -> Void

    init(stop: @escaping @Sendable () -> Void) { self.stop = stop }

    deinit { stop() }

    /// Stops the calls. A call in progress finishes; no call starts afterwards.
    public func cancel() { stop() }
}

extension Database {
    /// The store's change counter: it increases with every commit, by any
    /// connection of any process (as SQLite's `data_version`). Compare two
    /// readings to tell whether anything was committed in between.
    ///
    /// - Throws: what a read transaction throws (`.misuse` after ``close()``).
    public func changeCounter() throws(KuraError) -> UInt64 {
        try Database.typed { try read { tx in try tx.changeCounter } }
    }

    /// Calls `handler` with the store's new change counter after transactions
    /// commit, by this connection, by other connections in this process, and by
    /// other processes (Linux and Darwin; elsewhere only this connection's).
    ///
    /// The calls come on a background thread of the connection, one at a time,
    /// in increasing counter order; a burst of commits may give one call with the
    /// newest counter. Keep `handler` short, or hand the work to a queue or task.
    /// An idle store costs no CPU: the thread sleeps until the kernel reports a
    /// change of the log file.
    ///
    /// Lifetime: calls stop when the returned observation is cancelled or
    /// released, and when the connection is closed or released.
    ///
    /// - Throws: `.misuse` after ``close()``; `.io` if the watcher cannot be
    ///   started (no inotify instance, no pipe).
    public func observeCommits(_ handler: @escaping @Sendable (UInt64) -> Void) throws(KuraError) -> CommitObservation {
        let watcher = try commitWatcher()
        let id = watcher.add(handler)
        return CommitObservation { [weak watcher] in watcher?.remove(id) }
    }

    /// The store's change counter after each commit (see
    /// ``observeCommits(_:)``), as an async sequence. Only the newest value waits
    /// to be consumed: a slow consumer sees the latest counter, not every one.
    /// The sequence ends when the connection closes.
    public func commits() throws(KuraError) -> AsyncStream<UInt64> {
        let (stream, continuation) = AsyncStream.makeStream(of: UInt64.self, bufferingPolicy: .bufferingNewest(1))
        let observation = try observeCommits { continuation.yield($0) }
        continuation.onTermination = { _ in observation.cancel() }
        try commitWatcher().onStop { continuation.finish() }
        return stream
    }

    /// The connection's watcher, started on first use.
    func commitWatcher() throws(KuraError) -> CommitWatcher {
        if gate.isShut { throw KuraError(.misuse, "the database was closed; open it again to use it", path: path) }
        return try watcherSlot.get { () throws(KuraError) in try CommitWatcher(database: self) }
    }
}

/// Holds a connection's watcher (none until the first observer).
final class CommitWatcherSlot: @unchecked Sendable {
    // @unchecked Sendable: `watcher` is guarded by `lock`.
    private let lock = ThreadLock()
    private var watcher: CommitWatcher?

    func get(_ make: () throws(KuraError) -> CommitWatcher) throws(KuraError) -> CommitWatcher {
        try lock.withLock { () throws(KuraError) -> CommitWatcher in
            if let watcher { return watcher }
            let w = try make()
            watcher = w
            return w
        }
    }

    /// The watcher if one runs (commits wake it; close stops it).
    var current: CommitWatcher? { lock.withLock { watcher } }
}

/// One connection's watcher thread. See the header comment.
final class CommitWatcher: @unchecked Sendable {
    // @unchecked Sendable: `handlers`, `stopActions`, `nextID`, `stopped` and
    // `descriptorsOpen` are guarded by `lock`; the descriptors are immutable
    // after init and closed, under `lock`, only by the watcher thread as it exits.
    private let lock = ThreadLock()
    private var handlers: [Int: @Sendable (UInt64) -> Void] = [:]
    private var stopActions: [@Sendable () -> Void] = []
    private var nextID = 0
    private var stopped = false
    private let wakeRead: Int32
    private let wakeWrite: Int32
    #if os(Linux)
    private let inotify: Int32
    #elseif canImport(Darwin)
    private let source: DispatchSourceFileSystemObject?
    private let logDescriptor: Int32
    #endif

    init(database: Database) throws(KuraError) {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw posixError(errno, "pipe", database.path) }
        wakeRead = fds[0]
        wakeWrite = fds[1]
        _ = fcntl(wakeWrite, F_SETFL, fcntl(wakeWrite, F_GETFL) | O_NONBLOCK)
        let last = try database.changeCounter()
        let logPath = database.path + "-wal"
        #if os(Linux)
        inotify = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
        if inotify < 0 {
            let e = errno
            _ = close(wakeRead)
            _ = close(wakeWrite)
            throw posixError(e, "inotify_init1", database.path)
        }
        // A store without a real log file (in memory) has nothing to watch: then
        // only this connection's own commits wake the watcher.
        if database.options.fileSystem is PosixFileSystem {
            if inotify_add_watch(inotify, logPath, UInt32(IN_MODIFY)) < 0 {
                let e = errno
                _ = close(inotify)
                _ = close(wakeRead)
                _ = close(wakeWrite)
                throw posixError(e, "inotify_add_watch", logPath)
            }
        }
        #elseif canImport(Darwin)
        logDescriptor = database.options.fileSystem is PosixFileSystem ? open(logPath, O_EVTONLY) : -1
        if logDescriptor >= 0 {
            let s = DispatchSource.makeFileSystemObjectSource(fileDescriptor: logDescriptor, eventMask: [.write, .extend], queue: DispatchQueue.global())
            source = s
        } else {
            source = nil
        }
        #endif
        #if canImport(Darwin)
        source?.setEventHandler { [weak self] in self?.poke() }
        source?.resume()
        #endif
        let target = WeakDatabase(database)
        let thread = Thread { [self] in self.run(target, last: last) }
        thread.name = "Kura commit watcher"
        thread.start()
    }

    func add(_ handler: @escaping @Sendable (UInt64) -> Void) -> Int {
        lock.withLock {
            nextID += 1
            handlers[nextID] = handler
            return nextID
        }
    }

    func remove(_ id: Int) { _ = lock.withLock { handlers.removeValue(forKey: id) } }

    /// Runs `action` when the watcher stops (at once if it has).
    func onStop(_ action: @escaping @Sendable () -> Void) {
        let now = lock.withLock { () -> Bool in
            if stopped { return true }
            stopActions.append(action)
            return false
        }
        if now { action() }
    }

    /// Wakes the thread to look at the change counter (after this connection's
    /// commits).
    func poke() {
        lock.withLock {
            guard descriptorsOpen else { return }
            var b: UInt8 = 1
            _ = write(wakeWrite, &b, 1)  // non-blocking: a full pipe already wakes the thread
        }
    }

    /// False once the thread closed its descriptors (guarded by `lock`): nothing
    /// may write to a descriptor number that may belong to another file by then.
    private var descriptorsOpen = true

    /// Stops the thread (it closes its descriptors as it exits).
    func stop() {
        lock.withLock { stopped = true }
        poke()
    }

    private func run(_ target: WeakDatabase, last start: UInt64) {
        var last = start
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            #if os(Linux)
            var fds = [pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0), pollfd(fd: inotify, events: Int16(POLLIN), revents: 0)]
            #else
            var fds = [pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
            #endif
            let n = poll(&fds, nfds_t(fds.count), -1)
            if n < 0 && errno != EINTR { break }
            for f in fds where f.revents != 0 {
                // Drain: the descriptors are non-blocking (the pipe's read end is
                // drained by reading what poll said is there).
                _ = buffer.withUnsafeMutableBytes { read(f.fd, $0.baseAddress, $0.count) }
            }
            if lock.withLock({ stopped }) { break }
            guard let db = target.database else { break }
            let counter: UInt64
            do { counter = try db.changeCounter() } catch {
                // Closed (`misuse`) or unreadable: observers learn of the error
                // from their own next transaction; the watcher ends.
                break
            }
            guard counter != last else { continue }
            last = counter
            let calls = lock.withLock { Array(handlers.values) }
            for h in calls { h(counter) }
        }
        let actions = lock.withLock { () -> [@Sendable () -> Void] in
            stopped = true
            defer { stopActions.removeAll() }
            return stopActions
        }
        for a in actions { a() }
        #if canImport(Darwin)
        source?.cancel()
        #endif
        lock.withLock {
            descriptorsOpen = false
            #if os(Linux)
            _ = close(inotify)
            #elseif canImport(Darwin)
            if logDescriptor >= 0 { _ = close(logDescriptor) }
            #endif
            _ = close(wakeRead)
            _ = close(wakeWrite)
        }
    }
}

/// A connection held weakly, so that the watcher thread never keeps it open.
final class WeakDatabase: @unchecked Sendable {
    // @unchecked Sendable: `database` is a weak reference, set once in init; weak
    // loads are atomic in Swift.
    weak var database: Database?
    init(_ database: Database) { self.database = database }
}
