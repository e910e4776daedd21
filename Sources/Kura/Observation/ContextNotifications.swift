// ContextNotifications: what a context tells its observers (Core Data's
// NSManagedObjectContextObjectsDidChange and DidSave notifications).
//
// Objects did change. Every mutation of the context's object graph is noted as
// it happens (insert, a property set with its key, a relationship edit on both
// sides, a delete, a refresh or removal by a merge) into one pending batch.
// `processPendingChanges()` posts the batch and starts a new one; it runs
// first in `save()` and in every fetch, and apps (or a UI run loop) call it
// whenever they want observers to catch up. Within a batch an object is in at
// most one of inserted/deleted: inserted-then-deleted cancels out (Core Data
// does the same), deleted wins over updated, an inserted object's later edits
// stay "inserted". Refreshed and invalidated are reported as they are.
//
// Did save. After a save commits, the context posts the IDs it saved (inserted
// with their permanent IDs, updated with the changed property names, deleted)
// to its own observers and to its container's, on the saving thread. That
// value is `Sendable`; other contexts merge it (`mergeChanges(fromContextDidSave:)`).
//
// Delivery: observer closures run synchronously on the thread (or actor) that
// caused the post, which for a context is the one it is used on (the main
// actor for the view context, its actor for a BackgroundContext, including
// the batches of push merges; ContextActors.swift); async sequences buffer
// every value (an observer that falls behind loses nothing).

import Foundation
import KuraEngine

/// The objects a context's last batch of changes touched (Core Data's
/// `NSManagedObjectContextObjectsDidChange` user info). Holds the objects, so
/// it is not `Sendable`: use it on the context's thread; ``ids`` is the
/// sendable form.
public struct ContextObjectsDidChange {
    /// Objects inserted (not yet saved, or just merged in from elsewhere).
    public internal(set) var inserted: [ManagedObject] = []
    /// Objects whose properties changed; ``changedKeys(of:)`` names them.
    public internal(set) var updated: [ManagedObject] = []
    /// Objects deleted in this context, or removed because another context
    /// (or process) deleted them.
    public internal(set) var deleted: [ManagedObject] = []
    /// Objects whose values were reloaded from the store (a merge or
    /// `refresh(_:mergeChanges:)`).
    public internal(set) var refreshed: [ManagedObject] = []
    /// Objects that left the context without being deleted here (their row
    /// is gone from the store, or the context was reset); treat them as gone.
    public internal(set) var invalidated: [ManagedObject] = []
    /// Whether every object was invalidated (`reset()`).
    public internal(set) var invalidatedAll = false
    /// The keys noted for each updated or refreshed object (`NotedKeys`: one
    /// name without a set, the common case, or a set).
    var keys: [ObjectIdentifier: NotedKeys] = [:]

    /// The names of the properties that changed on an updated (or refreshed)
    /// object: attributes, to-one and to-many relationships. Empty for an
    /// object not in ``updated`` or ``refreshed``.
    public func changedKeys(of object: ManagedObject) -> Set<String> { keys[ObjectIdentifier(object)]?.names ?? [] }

    /// Whether nothing is in the batch.
    public var isEmpty: Bool {
        inserted.isEmpty && updated.isEmpty && deleted.isEmpty && refreshed.isEmpty && invalidated.isEmpty && !invalidatedAll
    }

    /// The same changes as object IDs (temporary IDs for unsaved inserts).
    public var ids: ObjectIDChanges {
        ObjectIDChanges(inserted: inserted.map(\.objectID),
                        updated: Dictionary(updated.map { ($0.objectID, changedKeys(of: $0)) }, uniquingKeysWith: { a, b in a.union(b) }),
                        deleted: deleted.map(\.objectID),
                        refreshed: Dictionary(refreshed.map { ($0.objectID, changedKeys(of: $0)) }, uniquingKeysWith: { a, b in a.union(b) }),
                        invalidated: invalidated.map(\.objectID), invalidatedAll: invalidatedAll)
    }
}

/// The names of the properties noted as changed on one object of a batch
/// (`ContextObjectsDidChange.keys`): most objects change one property, or
/// one several times, between two batches, and a set per object (an
/// allocation and a hash of the name) was most of the cost of noting a
/// change; one name is kept as it is, a set made at the second name.
enum NotedKeys {
    /// None yet (what a new entry starts as).
    case empty
    case one(String)
    case many(Set<String>)

    /// The names as a set.
    var names: Set<String> {
        switch self {
        case .empty: return []
        case .one(let k): return [k]
        case .many(let s): return s
        }
    }

    /// Adds `key`.
    mutating func insert(_ key: String) {
        switch self {
        case .empty:
            self = .one(key)
        case .one(let k):
            if k != key { self = .many([k, key]) }
        case .many(var s):
            // Emptied first, so the set is uniquely referenced and grows in place.
            self = .many([])
            s.insert(key)
            self = .many(s)
        }
    }

    /// Adds `keys`.
    mutating func formUnion(_ keys: Set<String>) {
        guard !keys.isEmpty else {
            // An empty union changes nothing (the entry exists all the same).
            return
        }
        var s = names
        self = .many([])
        s.formUnion(keys)
        self = .many(s)
    }
}

/// A context's batch of changes as object IDs: the `Sendable` form of
/// ``ContextObjectsDidChange``, delivered by ``ManagedObjectContext/objectChanges()``.
public struct ObjectIDChanges: Sendable, Equatable {
    /// Objects inserted.
    public var inserted: [ManagedObjectID]
    /// Objects updated, with the names of the properties that changed.
    public var updated: [ManagedObjectID: Set<String>]
    /// Objects deleted.
    public var deleted: [ManagedObjectID]
    /// Objects reloaded from the store, with the properties whose values changed.
    public var refreshed: [ManagedObjectID: Set<String>]
    /// Objects that left the context without being deleted here.
    public var invalidated: [ManagedObjectID]
    /// Whether every object was invalidated (`reset()`).
    public var invalidatedAll: Bool
}

/// What one save committed (Core Data's `NSManagedObjectContextDidSave` user
/// info, as IDs). `Sendable`: hand it to other contexts, tasks or actors and
/// merge it with ``ManagedObjectContext/mergeChanges(fromContextDidSave:)``.
public struct ContextDidSave: Sendable, Equatable {
    /// The IDs of the inserted objects (their permanent IDs), in insertion order.
    public var inserted: [ManagedObjectID]
    /// The updated objects with the names of the properties the save wrote
    /// differently (attributes, to-one and to-many relationships).
    public var updated: [ManagedObjectID: Set<String>]
    /// The deleted objects.
    public var deleted: [ManagedObjectID]
    /// The saving context's `name` and `transactionAuthor`.
    public var contextName: String?
    public var author: String?
    /// The save's entry in the persistent history (nil when the container
    /// does not track history).
    public var historyToken: HistoryToken?
    /// The identity of the saving context in this process (0 for a save read
    /// from the persistent history): a context does not merge its own saves.
    var sourceContext: Int64 = 0

    /// Whether the save wrote no object (a save with no changes posts nothing).
    public var isEmpty: Bool { inserted.isEmpty && updated.isEmpty && deleted.isEmpty }
}

/// Keeps an observer registered; the observer is removed when `cancel()` is
/// called or when the last copy of this token is released. Not `Sendable` for
/// context observers (cancel it on the context's thread).
public final class ObservationToken {
    private var onCancel: (() -> Void)?

    init(_ onCancel: @escaping () -> Void) { self.onCancel = onCancel }

    /// Stops the observation (idempotent).
    public func cancel() {
        let f = onCancel
        onCancel = nil
        f?()
    }

    deinit { onCancel?() }
}

/// The list of the pending batch an object is in (`cancelled`: inserted and
/// deleted within the batch, so in none).
enum NoteList {
    case inserted, updated, deleted, refreshed, invalidated, cancelled
}

/// The pending batch and the observers of one context (stored in the context).
struct ContextNoticeState {
    var batch = ContextObjectsDidChange()
    /// The batch's number: an object's note (`ManagedObject.notedList`)
    /// counts only while its `notedBatch` is this one, so starting a batch
    /// forgets every note at once, without touching the objects.
    var batchNumber: UInt64 = 1
    /// Objects inserted and deleted within the batch (reported as neither),
    /// kept alive until the batch is posted (so their notes outlive the batch's
    /// lists, as the other objects' do).
    var cancelled: [ManagedObject] = []
    var nextToken = 0
    /// Whether `processPendingChanges` is delivering a batch now.
    var posting = false
    /// Saved objects whose to-many relationships changed since the last save
    /// (their `willSave()` runs though their own rows do not change).
    var toManyTouched: [ObjectIdentifier: ManagedObject] = [:]
    var changeObservers: [(Int, (ContextObjectsDidChange) -> Void)] = []
    var saveObservers: [(Int, (ContextDidSave) -> Void)] = []
    var changeStreams: [Int: AsyncStream<ObjectIDChanges>.Continuation] = [:]
    var saveStreams: [Int: AsyncStream<ContextDidSave>.Continuation] = [:]
    /// Entities whose objects a merge reports as refreshed even when this
    /// context has not registered them (fetched-results controllers need to
    /// see objects that start matching their predicate), with how many
    /// controllers ask for each.
    var watchedEntities: [String: Int] = [:]

    var isObserved: Bool { !changeObservers.isEmpty || !changeStreams.isEmpty }
}

extension ManagedObjectContext {
    // MARK: Observing

    /// Calls `handler` with every batch of object changes this context posts
    /// (see ``processPendingChanges()``), synchronously on the thread or actor
    /// that uses the context, until the returned token is cancelled or
    /// released. The handler must not re-enter `processPendingChanges()`;
    /// it may read and change objects (changes go to the next batch).
    public func observeObjectsDidChange(_ handler: @escaping (ContextObjectsDidChange) -> Void) -> ObservationToken {
        let id = notices.nextToken
        notices.nextToken += 1
        notices.changeObservers.append((id, handler))
        return ObservationToken { [weak self] in
            // Edited on a copy, then stored: the handler released with the old
            // array (and whatever app object it held, whose deinit may observe
            // this context again) goes after the store, outside any edit of
            // `notices` (unchecked exclusivity: ManagedObjectContext.registry).
            guard let self else { return }
            var kept = self.notices.changeObservers
            kept.removeAll { $0.0 == id }
            self.notices.changeObservers = kept
        }
    }

    /// Calls `handler` after each save of this context commits, with what it
    /// saved, synchronously on the saving thread, until the token is cancelled
    /// or released. (To hear every context's saves, use
    /// ``PersistentContainer/observeSaves(_:)``.)
    public func observeDidSave(_ handler: @escaping (ContextDidSave) -> Void) -> ObservationToken {
        let id = notices.nextToken
        notices.nextToken += 1
        notices.saveObservers.append((id, handler))
        return ObservationToken { [weak self] in
            // Edited on a copy, then stored: the handler released with the old
            // array (and whatever app object it held, whose deinit may observe
            // this context again) goes after the store, outside any edit of
            // `notices` (unchecked exclusivity: ManagedObjectContext.registry).
            guard let self else { return }
            var kept = self.notices.saveObservers
            kept.removeAll { $0.0 == id }
            self.notices.saveObservers = kept
        }
    }

    /// Every batch of object changes this context posts from now on, as IDs
    /// (``ObjectIDChanges``), buffered without limit. The sequence ends when
    /// the context is deallocated or the iterating task is cancelled.
    public func objectChanges() -> AsyncStream<ObjectIDChanges> {
        let (stream, continuation) = AsyncStream<ObjectIDChanges>.makeStream()
        let id = notices.nextToken
        notices.nextToken += 1
        notices.changeStreams[id] = continuation
        return stream
    }

    /// What each save of this context commits from now on, buffered without
    /// limit. The sequence ends when the context is deallocated or the
    /// iterating task is cancelled.
    public func didSaveNotifications() -> AsyncStream<ContextDidSave> {
        let (stream, continuation) = AsyncStream<ContextDidSave>.makeStream()
        let id = notices.nextToken
        notices.nextToken += 1
        notices.saveStreams[id] = continuation
        return stream
    }

    // MARK: Posting

    /// Posts the changes made since the last post to the observers (Core
    /// Data's `processPendingChanges`): inserted, updated with their changed
    /// keys, deleted, refreshed and invalidated objects. `save()` and fetches
    /// call it first; call it when observers (a fetched-results controller, a
    /// UI) should catch up with edits made without a save. Does nothing when
    /// there is nothing new.
    ///
    /// Called from inside an observer (directly, or by a fetch or save the
    /// observer runs), it returns at once: changes the observers make are
    /// posted as a further batch when the current one has been delivered.
    public func processPendingChanges() {
        guard !notices.posting else { return }
        undo?.eventEnded()
        do { try drainInbox() } catch { if pendingError == nil { pendingError = error } }
        notices.posting = true
        defer { notices.posting = false }
        // Each round delivers what the previous round's observers changed;
        // observers that keep changing objects in reply to every batch would
        // loop, so the rounds are bounded (the rest waits for the next call).
        var rounds = 0
        while !notices.batch.isEmpty && rounds < 16 {
            rounds += 1
            let batch = notices.batch
            notices.batch = ContextObjectsDidChange()
            notices.batchNumber &+= 1
            notices.cancelled = []
            for (_, handler) in notices.changeObservers { handler(batch) }
            if !notices.changeStreams.isEmpty {
                let ids = batch.ids
                for (id, c) in notices.changeStreams {
                    if case .terminated = c.yield(ids) { notices.changeStreams[id] = nil }
                }
            }
        }
    }

    /// Posts a save's result to this context's observers and the container's.
    /// Posts a did-save to this context's observers and, unless
    /// `toContainer` is false (a child context's push, which reached no
    /// store: Context+Parent.swift), to the container's (other contexts merge it).
    func postDidSave(_ note: ContextDidSave, toContainer: Bool = true) {
        guard !note.isEmpty else { return }
        for (_, handler) in notices.saveObservers { handler(note) }
        for (id, c) in notices.saveStreams {
            if case .terminated = c.yield(note) { notices.saveStreams[id] = nil }
        }
        if toContainer { container.saveBroadcaster.post(note) }
    }

    /// Ends the async sequences (the context is going away).
    func finishStreams() {
        for c in notices.changeStreams.values { c.finish() }
        for c in notices.saveStreams.values { c.finish() }
    }

    // MARK: Noting changes

    /// The list of the pending batch `o` is in (nil: not noted in this batch).
    @inline(__always)
    func noted(_ o: ManagedObject) -> NoteList? {
        o.notedBatch == notices.batchNumber ? o.notedList : nil
    }

    @inline(__always)
    func setNoted(_ o: ManagedObject, _ list: NoteList) {
        o.notedList = list
        o.notedBatch = notices.batchNumber
    }

    func noteInserted(_ o: ManagedObject) {
        if noted(o) == nil {
            notices.batch.inserted.append(o)
            setNoted(o, .inserted)
        }
    }

    /// Notes that `key` of `o` changed (no-op for an object inserted or
    /// deleted in this batch: those are reported as such).
    func noteUpdated(_ o: ManagedObject, _ key: String, attribute: Bool = false, toMany: Bool? = nil) {
        let k = ObjectIdentifier(o)
        // `toMany`: whether `key` names a to-many relationship, when the
        // caller knows (no description copied out of the entity's table).
        // An inserted object is saved anyway (and leaves `isNew` only when
        // a save or push forgets the pending changes, this list included):
        // only objects that are not new are kept for the will-save pass.
        if !attribute, !o.isNew, toMany ?? (o.entity.relationshipsByName[key]?.isToMany == true) { notices.toManyTouched[k] = o }
        switch noted(o) {
        case nil:
            notices.batch.updated.append(o)
            setNoted(o, .updated)
            notices.batch.keys[k, default: .empty].insert(key)
        case .updated?, .refreshed?:
            notices.batch.keys[k, default: .empty].insert(key)
        default:
            return
        }
    }

    func noteDeleted(_ o: ManagedObject) {
        let k = ObjectIdentifier(o)
        switch noted(o) {
        case .inserted?:
            // Inserted and deleted within one batch: observers never saw it.
            notices.batch.inserted.removeAll { $0 === o }
            setNoted(o, .cancelled)
            notices.cancelled.append(o)
        case .updated?:
            notices.batch.updated.removeAll { $0 === o }
            notices.batch.keys[k] = nil
            notices.batch.deleted.append(o)
            setNoted(o, .deleted)
        case .refreshed?:
            notices.batch.refreshed.removeAll { $0 === o }
            notices.batch.keys[k] = nil
            notices.batch.deleted.append(o)
            setNoted(o, .deleted)
        case nil:
            notices.batch.deleted.append(o)
            setNoted(o, .deleted)
        default:
            return
        }
    }

    /// Notes that `o` was reloaded from the store and `keys` took new values.
    func noteRefreshed(_ o: ManagedObject, _ keys: Set<String>) {
        let k = ObjectIdentifier(o)
        switch noted(o) {
        case nil:
            notices.batch.refreshed.append(o)
            setNoted(o, .refreshed)
            notices.batch.keys[k] = .many(keys)
        case .updated?, .refreshed?:
            notices.batch.keys[k, default: .empty].formUnion(keys)
        default:
            return
        }
    }

    /// Notes that `o` left the context without a delete here.
    func noteInvalidated(_ o: ManagedObject) {
        let k = ObjectIdentifier(o)
        switch noted(o) {
        case .inserted?: notices.batch.inserted.removeAll { $0 === o }
        case .updated?: notices.batch.updated.removeAll { $0 === o }
        case .deleted?: notices.batch.deleted.removeAll { $0 === o }
        case .refreshed?: notices.batch.refreshed.removeAll { $0 === o }
        case .invalidated?: return
        default: break
        }
        notices.batch.keys[k] = nil
        notices.batch.invalidated.append(o)
        setNoted(o, .invalidated)
    }

    /// Notes that every object was invalidated (`reset()`): earlier notes are
    /// dropped (their objects are gone too).
    func noteInvalidatedAll() {
        notices.batch = ContextObjectsDidChange()
        notices.batch.invalidatedAll = true
        notices.batchNumber &+= 1
        notices.cancelled = []
    }
}

/// The container's fan-out of every context's did-save (thread-safe).
final class SaveBroadcaster: @unchecked Sendable {
    // @unchecked Sendable: `next`, `observers` and `streams` are read and
    // written only with `lock` held.
    private let lock = NSLock()
    private var next = 0
    private var observers: [Int: @Sendable (ContextDidSave) -> Void] = [:]
    private var streams: [Int: AsyncStream<ContextDidSave>.Continuation] = [:]

    /// Delivers `note` to every observer, outside the lock (an observer may
    /// add or remove observers).
    func post(_ note: ContextDidSave) {
        lock.lock()
        let handlers = observers.sorted { $0.key < $1.key }.map(\.value)
        let continuations = Array(streams.values)
        lock.unlock()
        for h in handlers { h(note) }
        for c in continuations { c.yield(note) }
    }

    func add(_ handler: @escaping @Sendable (ContextDidSave) -> Void) -> Int {
        lock.lock()
        defer { lock.unlock() }
        next += 1
        observers[next] = handler
        return next
    }

    func remove(_ id: Int) {
        lock.lock()
        observers[id] = nil
        lock.unlock()
    }

    func stream() -> AsyncStream<ContextDidSave> {
        let (stream, continuation) = AsyncStream<ContextDidSave>.makeStream()
        lock.lock()
        next += 1
        let id = next
        streams[id] = continuation
        lock.unlock()
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            self.lock.lock()
            self.streams[id] = nil
            self.lock.unlock()
        }
        return stream
    }
}

/// A container-level observation; the observer is removed by `cancel()` or
/// when the token is released. `Sendable`: cancel it from any thread.
public final class SaveObservation: Sendable {
    private let broadcaster: SaveBroadcaster
    private let id: Int

    init(_ broadcaster: SaveBroadcaster, _ id: Int) {
        self.broadcaster = broadcaster
        self.id = id
    }

    /// Stops the observation (idempotent).
    public func cancel() { broadcaster.remove(id) }

    deinit { broadcaster.remove(id) }
}

extension PersistentContainer {
    /// Calls `handler` after every save of any of this container's contexts
    /// commits, with what it saved, synchronously on the saving thread (keep
    /// it short; hop to your context's actor to merge). Until the returned
    /// observation is cancelled or released. Other processes' saves are not
    /// posted here; contexts that merge automatically receive them
    /// (StoreWatcher.swift).
    public func observeSaves(_ handler: @escaping @Sendable (ContextDidSave) -> Void) -> SaveObservation {
        SaveObservation(saveBroadcaster, saveBroadcaster.add(handler))
    }

    /// What every save of this container's contexts commits from now on,
    /// buffered without limit, until the iterating task is cancelled.
    public func saves() -> AsyncStream<ContextDidSave> { saveBroadcaster.stream() }
}
