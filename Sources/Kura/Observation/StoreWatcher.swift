// StoreWatcher: brings saves made by other processes on the same store to this
// container's auto-merging contexts (issue 11, "cross-process merging").
//
// Lifetime. One per container, idle until a context turns on
// `automaticallyMergesChangesFromStore`; then it observes the engine's commit
// watcher (CommitWatcher.swift: a thread asleep in poll(2) on inotify / a
// vnode source and a pipe; no polling, no CPU while the store is idle) until
// the last auto-merging context turns it off or goes away.
//
// Telling this process's commits from others'. The change counter goes up by
// exactly one per commit. A context's save notes, inside its write
// transaction, the counter its commit will produce (and its history token),
// and takes the note back if the commit fails; so when the watcher hears
// that the counter moved from L to C, the commits L+1...C that are not noted
// are other processes' (or engine-level writes of this process, which do no
// harm: they cost one extra look). The notes are dropped once the watcher has
// passed them. (A save already in its transaction when the first context
// turns auto-merging on is not noted and counts as another process's: its
// objects are refreshed once more, which is harmless.)
//
// What another process changed:
//   - with persistent history tracking on (`PersistentContainer(...,
//     persistentHistoryTracking: true)`), the watcher reads the history after
//     the last token it processed, skips the transactions this process saved
//     (their tokens were noted), and turns each other transaction into a
//     `ContextDidSave` (sourceContext 0) delivered to every auto-merging
//     context exactly like an in-process save: inserts, updates with their
//     keys and deletes are reported precisely;
//   - without history (this container does not track it, or another commit
//     left no history row: a process that does not track history, an
//     engine-level write, a purge past the last token), a commit cannot say
//     which objects changed. Each auto-merging context then re-checks its
//     registered, loaded objects against the store's row versions
//     (`_version`): a changed row is merged like an update (by merge policy;
//     reported refreshed with the properties whose values differ), a gone row
//     is evicted (reported deleted). It cannot report objects inserted
//     elsewhere (they show up at the next fetch), nor faults (they load the
//     current values when fired), and it costs one row read per loaded object.
//
// Thread rules: `register` and the own-commit notes are called on any thread;
// `commitsArrived` runs on the commit watcher's thread, one call at a time.
// Deliveries go into each context's locked `MergeInbox`; a context with an
// executor gets a push (ContextActors.swift), others drain at their next
// fetch/save/processPendingChanges (Context+Merge.swift).

import Foundation
import KuraEngine

/// Keeps one auto-merging context subscribed to in-process saves and to the
/// store watcher; cancelled when merging is turned off or the context goes.
final class MergeRegistration: Sendable {
    private let watcher: StoreWatcher
    private let id: Int
    private let local: SaveObservation

    init(_ watcher: StoreWatcher, _ id: Int, _ local: SaveObservation) {
        self.watcher = watcher
        self.id = id
        self.local = local
    }

    func cancel() {
        local.cancel()
        watcher.unregister(id)
    }

    deinit { cancel() }
}

/// The container's watcher of other processes' commits. See the header comment.
final class StoreWatcher: @unchecked Sendable {
    // @unchecked Sendable: every `var` below is read and written only with
    // `lock` held; `database`, `broadcaster` and `tracksHistory` are immutable.
    private let lock = NSLock()
    private let database: Database
    private let broadcaster: SaveBroadcaster
    private let tracksHistory: Bool

    private struct Merger {
        let inbox: MergeInbox
        let push: (@Sendable () -> Void)?
    }
    private var mergers: [Int: Merger] = [:]
    private var nextID = 0
    private var observation: CommitObservation?
    /// The change counter up to which commits have been looked at.
    private var lastCounter: UInt64 = 0
    /// The newest history transaction looked at.
    private var lastToken: HistoryToken?
    /// Counters and history tokens of this process's commits not yet passed.
    private var ownCounters: Set<UInt64> = []
    private var ownTokens: Set<HistoryToken> = []

    init(database: Database, broadcaster: SaveBroadcaster, tracksHistory: Bool) {
        self.database = database
        self.broadcaster = broadcaster
        self.tracksHistory = tracksHistory
    }

    /// Whether other processes' commits are being watched (some context
    /// merges automatically and the watcher could start).
    var isWatching: Bool {
        lock.lock()
        defer { lock.unlock() }
        return active
    }

    /// Whether commits are looked at (set once the start point is read).
    private var active = false
    /// Whether a `register` is starting the watch (outside the lock).
    private var starting = false

    /// Subscribes an auto-merging context: in-process saves of other contexts
    /// and other processes' saves go into `inbox`, and `push` (if any) is
    /// called when a save arrives in an empty inbox. Starts watching the
    /// store with the first subscriber; if that fails, in-process saves still
    /// arrive and the error is returned beside the registration.
    ///
    /// No engine call runs with `lock` held: saves take `lock` inside their
    /// write transactions (`willCommit`), so the order is always engine
    /// locks, then `lock`.
    func register(identity: Int64, inbox: MergeInbox, push: (@Sendable () -> Void)?) -> (MergeRegistration, KuraError?) {
        let local = broadcaster.add { note in
            guard note.sourceContext != identity else { return }
            if inbox.append(note) { push?() }
        }
        lock.lock()
        nextID += 1
        let id = nextID
        mergers[id] = Merger(inbox: inbox, push: push)
        let mustStart = !active && !starting
        if mustStart { starting = true }
        lock.unlock()
        let registration = MergeRegistration(self, id, SaveObservation(broadcaster, local))
        guard mustStart else { return (registration, nil) }
        do {
            try start()
            return (registration, nil)
        } catch {
            lock.lock()
            starting = false
            active = false
            let stale = observation
            observation = nil
            lock.unlock()
            stale?.cancel()
            return (registration, error)
        }
    }

    /// Reads the start point and observes commits (called by the one
    /// `register` that set `starting`, without `lock`).
    private func start() throws(KuraError) {
        let counter = try database.changeCounter()
        var token: HistoryToken?
        if tracksHistory {
            token = try read { tx throws(KuraError) -> HistoryToken? in
                guard try tx.tableExists(PersistentHistoryStore.tableName) else { return nil }
                let rows = try tx.rows(in: try tx.table(PersistentHistoryStore.tableName), reverse: true)
                return try rows.next().map { HistoryToken($0.rowID) }
            }
        }
        lock.lock()
        lastCounter = counter
        lastToken = token
        ownCounters = []
        ownTokens = []
        active = true
        lock.unlock()
        let o = try database.observeCommits { [weak self] counter in self?.commitsArrived(counter) }
        lock.lock()
        starting = false
        // Every subscriber may have left while the watch was starting.
        let keep = !mergers.isEmpty
        if keep { observation = o } else { active = false }
        lock.unlock()
        if !keep { o.cancel() }
    }

    func unregister(_ id: Int) {
        lock.lock()
        let stopping = mergers.removeValue(forKey: id) != nil && mergers.isEmpty && !starting
        let stopped = stopping ? observation : nil
        if stopping {
            observation = nil
            active = false
            ownCounters = []
            ownTokens = []
        }
        lock.unlock()
        stopped?.cancel()
    }

    /// A save of this process is about to commit with change counter
    /// `counter` (and history `token`): called inside its write transaction.
    func willCommit(counter: UInt64, token: HistoryToken?) {
        lock.lock()
        if active {
            ownCounters.insert(counter)
            if let token { ownTokens.insert(token) }
        }
        lock.unlock()
    }

    /// The save noted by `willCommit` failed: nothing was committed.
    func didNotCommit(counter: UInt64, token: HistoryToken?) {
        lock.lock()
        ownCounters.remove(counter)
        if let token { ownTokens.remove(token) }
        lock.unlock()
    }

    /// The commit watcher saw the change counter reach `counter`.
    private func commitsArrived(_ counter: UInt64) {
        lock.lock()
        guard active, counter > lastCounter else {
            lock.unlock()
            return
        }
        // Commits lastCounter+1 ... counter that this process did not note.
        var foreign = 0
        var c = lastCounter
        while c < counter {
            c += 1
            if ownCounters.remove(c) == nil { foreign += 1 }
        }
        ownCounters = ownCounters.filter { $0 > counter }
        lastCounter = counter
        let after = lastToken
        let targets = Array(mergers.values)
        if foreign == 0 {
            // Only this process's saves, already delivered in process: skip
            // their history rows.
            if let newest = ownTokens.max(), newest > (lastToken ?? HistoryToken(Int64.min)) { lastToken = newest }
            ownTokens = ownTokens.filter { $0 > (lastToken ?? HistoryToken(Int64.min)) }
            lock.unlock()
            return
        }
        lock.unlock()

        var notes: [ContextDidSave] = []
        var recheck = !tracksHistory
        if tracksHistory {
            do {
                let transactions = try read { tx throws(KuraError) in
                    try PersistentHistoryStore.read(tx, after: after, limit: nil)
                }
                lock.lock()
                var found = 0
                for t in transactions {
                    if lastToken.map({ t.token > $0 }) ?? true { lastToken = t.token }
                    if ownTokens.remove(t.token) != nil { continue }
                    found += 1
                    notes.append(Self.didSave(t))
                }
                ownTokens = ownTokens.filter { $0 > (lastToken ?? HistoryToken(Int64.min)) }
                lock.unlock()
                // Commits with no history row of their own cannot be named.
                if found < foreign { recheck = true }
            } catch {
                // The history cannot be read: fall back to the version check.
                recheck = true
            }
        }
        // Every inbox is filled before any push runs, so a context that
        // hears of a merge can count on the others having it queued.
        var pushes: [@Sendable () -> Void] = []
        for m in targets {
            var due = false
            for note in notes { if m.inbox.append(note) { due = true } }
            if recheck && m.inbox.requestRecheck() { due = true }
            if due, let push = m.push { pushes.append(push) }
        }
        for push in pushes { push() }
    }

    /// Runs an engine read, keeping typed errors.
    private func read<T>(_ body: (ReadTransaction) throws(KuraError) -> T) throws(KuraError) -> T {
        do {
            return try database.read { tx in try body(tx) }
        } catch let e as KuraError {
            throw e
        } catch {
            throw KuraError(.io, "\(error)", path: database.path)
        }
    }

    /// A history transaction as a did-save from "another context" (0).
    static func didSave(_ t: PersistentHistoryTransaction) -> ContextDidSave {
        var note = ContextDidSave(inserted: [], updated: [:], deleted: [], contextName: t.contextName, author: t.author, historyToken: t.token)
        note.sourceContext = 0
        for c in t.changes {
            switch c.kind {
            case .insert: note.inserted.append(c.objectID)
            case .update: note.updated[c.objectID, default: []].formUnion(c.updatedProperties)
            case .delete: note.deleted.append(c.objectID)
            }
        }
        return note
    }
}

extension PersistentContainer {
    /// Whether the container is watching the store for other processes'
    /// commits (true while at least one context merges automatically).
    package var isWatchingStore: Bool { storeWatcher.isWatching }
}

extension ManagedObjectContext {
    /// The fallback merge for commits the history cannot name: every
    /// registered, loaded object is compared with its row's version; changed
    /// ones are merged as updates (by merge policy), gone ones evicted.
    /// Faults and inserted objects are left alone.
    func recheckRegisteredObjects() throws(KuraError) {
        var byEntity: [String: [ManagedObject]] = [:]
        for u in registry.values {
            let o = u.takeUnretainedValue()
            guard !o.isFault, !o.isNew, o.managedObjectContext === self else { continue }
            byEntity[o.entity.name, default: []].append(o)
        }
        guard !byEntity.isEmpty else { return }
        let entities = byEntity.keys.sorted()
        let found = try read { tx throws(KuraError) -> [[(ManagedObject, Int64?)]] in
            var out: [[(ManagedObject, Int64?)]] = []
            for name in entities {
                let objects = byEntity[name] ?? []
                let t = try tx.table(name)
                let column = self.layout(of: objects[0].entity).version
                var versions: [(ManagedObject, Int64?)] = []
                for o in objects {
                    // A missing row reads as nil; a row without the version
                    // column (older store) as version 0, as `apply` does.
                    let row = try tx.values(in: t, rowID: o.objectID.rowID)
                    versions.append((o, row.map { column < $0.count ? $0[column].integerValue ?? 0 : 0 }))
                }
                out.append(versions)
            }
            return out
        }
        var firstError: KuraError?
        for (o, version) in found.joined().sorted(by: { Self.idOrder($0.0.objectID, $1.0.objectID) }) {
            guard o.managedObjectContext === self else { continue }
            guard let version else {
                evict(o)
                continue
            }
            guard version != o.version else { continue }
            do { try mergeUpdate(o, []) } catch { if firstError == nil { firstError = error } }
        }
        if let firstError { throw firstError }
    }
}
