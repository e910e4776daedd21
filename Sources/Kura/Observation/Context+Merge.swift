// Context+Merge: bringing a context up to date with saves made elsewhere
// (Core Data's mergeChanges(fromContextDidSave:) and automatic merging).
//
// A merge takes a `ContextDidSave` (from another context of this process, or
// built from the persistent history for another process's save) and, for the
// objects this context has registered:
//   - updated elsewhere: an object without pending changes here is reloaded
//     (a fault stays a fault: it loads the new values when touched); an object
//     with pending changes follows the context's merge policy (below);
//   - deleted elsewhere: the object leaves the context (observers hear it as
//     deleted), whatever its pending changes (its row is gone);
//   - inserted elsewhere: the object is registered as a fault and reported as
//     inserted, so observers (a fetched-results controller) can decide whether
//     it belongs to what they show.
// It then posts the objects-did-change batch at once.
//
// An object with pending changes, updated elsewhere, by merge policy:
//   .error                        untouched: it keeps the version it read, so
//                                 its next save reports the conflict;
//   .mergeByPropertyObjectTrump,
//   .overwrite                    rebased on the store's version, keeping its
//                                 changed properties (they win at save);
//   .mergeByPropertyStoreTrump    rebased; properties changed in the store take
//                                 the store's values, the others keep this
//                                 context's;
//   .rollback                     reloaded, its changes dropped.
//
// Automatic merging (`automaticallyMergesChangesFromStore`): the container
// delivers every other context's did-save into this context's inbox (a locked
// queue, filled on the saving thread), and the store watcher (StoreWatcher.swift)
// other processes' saves (on its thread). The context drains it on its own
// thread at the start of each fetch, save and `processPendingChanges()`, or
// when `mergePendingChanges()` is called (pull); a context with an executor
// (view context, BackgroundContext; ContextActors.swift) also gets a merge
// scheduled on its actor when a save arrives in an empty inbox (push).

import Foundation
import KuraEngine

/// Did-saves waiting to be merged into one context, filled from any thread,
/// and whether another process committed changes the history cannot name
/// (then the context re-checks its objects' versions; StoreWatcher.swift).
final class MergeInbox: @unchecked Sendable {
    // @unchecked Sendable: `notes` and `recheck` are read and written only
    // with `lock` held.
    private let lock = NSLock()
    private var notes: [ContextDidSave] = []
    private var recheck = false

    /// Queues `note`; true if the inbox was empty (a push merge is due).
    @discardableResult
    func append(_ note: ContextDidSave) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        let wasEmpty = notes.isEmpty && !recheck
        notes.append(note)
        return wasEmpty
    }

    /// Asks for a version re-check; true if the inbox was empty.
    @discardableResult
    func requestRecheck() -> Bool {
        lock.lock()
        defer { lock.unlock() }
        let wasEmpty = notes.isEmpty && !recheck
        recheck = true
        return wasEmpty
    }

    func takeAll() -> (notes: [ContextDidSave], recheck: Bool) {
        lock.lock()
        defer { lock.unlock() }
        let out = (notes, recheck)
        notes = []
        recheck = false
        return out
    }

    var isEmpty: Bool {
        lock.lock()
        defer { lock.unlock() }
        return notes.isEmpty && !recheck
    }
}

extension ManagedObjectContext {
    /// Merges a save made by another context (or process) into this context
    /// and posts the resulting objects-did-change batch (Core Data's
    /// `mergeChanges(fromContextDidSave:)`): objects updated elsewhere are
    /// reloaded (by ``mergePolicy`` if they have pending changes here; see
    /// the policy table in Context+Merge.swift), deleted ones leave this
    /// context, inserted ones are registered (as faults) and reported.
    ///
    /// Use it on this context's thread. A save of this context itself merges
    /// as a no-op.
    ///
    /// - Throws: engine read errors while reloading objects (the objects
    ///   merged before the error stay merged; the rest are left as they were
    ///   and report the error when next read).
    public func mergeChanges(fromContextDidSave note: ContextDidSave) throws(KuraError) {
        guard note.sourceContext != identity else { return }
        try merge(note)
        processPendingChanges()
    }

    /// Merges the saves waiting in this context's inbox (only filled while
    /// ``automaticallyMergesChangesFromStore`` is on) and posts the changes.
    /// Fetches, saves and `processPendingChanges()` do it first on their own.
    ///
    /// - Throws: engine read errors while reloading objects.
    public func mergePendingChanges() throws(KuraError) {
        try drainInbox()
        processPendingChanges()
    }

    func drainInbox() throws(KuraError) {
        guard let inbox = mergeInbox, !inbox.isEmpty else { return }
        let (notes, recheck) = inbox.takeAll()
        // Every queued save is merged even if one fails (they are taken out
        // of the inbox); the first error is thrown after.
        var firstError: KuraError?
        for note in notes where note.sourceContext != identity {
            do { try merge(note) } catch { if firstError == nil { firstError = error } }
        }
        if recheck {
            do { try recheckRegisteredObjects() } catch { if firstError == nil { firstError = error } }
        }
        if let firstError { throw firstError }
    }

    /// A push merge, run on the context's actor: merges what waits in the
    /// inbox and posts; an error goes to ``pendingError`` (nobody awaits a
    /// push).
    func mergePushed() {
        guard let inbox = mergeInbox, !inbox.isEmpty else { return }
        do { try mergePendingChanges() } catch { if pendingError == nil { pendingError = error } }
    }

    /// Applies one did-save to the registered objects (no post).
    func merge(_ note: ContextDidSave) throws(KuraError) {
        dropPrefetched()
        // Merged changes are not undoable (Core Data disables registration too).
        undo?.disableUndoRegistration()
        defer { undo?.enableUndoRegistration() }
        var firstError: KuraError?
        for id in note.deleted {
            guard let o = registered(id), o.managedObjectContext === self else { continue }
            evict(o)
        }
        for (id, keys) in note.updated.sorted(by: { Self.idOrder($0.key, $1.key) }) {
            if registered(id) == nil, notices.watchedEntities[id.entityName, default: 0] > 0, model.entitiesByName[id.entityName] != nil,
               let o = try? object(with: id) {  // cannot fail: the entity exists and `id` is permanent
                // Not loaded here, but a fetched-results controller may now want it.
                noteRefreshed(o, keys)
                continue
            }
            guard let o = registered(id), o.managedObjectContext === self else { continue }
            do { try mergeUpdate(o, keys) } catch where error.code == .notFound && o.managedObjectContext === self && registered(id) === o {
                // A later save (queued behind this one) deleted its row.
                evict(o)
            } catch {
                if firstError == nil { firstError = error }
            }
        }
        for id in note.inserted where registered(id) == nil {
            // An unknown entity (a model this container lacks) is not ours to show.
            guard model.entitiesByName[id.entityName] != nil else { continue }
            if let o = try? object(with: id) {  // cannot fail: the entity exists and `id` is permanent
                noteInserted(o)
            }
        }
        if let firstError { throw firstError }
    }

    /// Brings one registered object up to the store's version.
    func mergeUpdate(_ o: ManagedObject, _ savedKeys: Set<String>) throws(KuraError) {
        let toManyKeys = savedKeys.filter { o.entity.relationshipsByName[$0]?.isToMany == true }
        if o.isFault {
            // Nothing loaded to replace: the next access loads the new values.
            noteRefreshed(o, savedKeys)
            return
        }
        let before = (o.values, o.toOne)
        var events: SnapshotEvents = .refresh
        if !o.hasChangedValues && !o.isDeleted {
            // A merge keeps transient attributes (TransientAttributes.swift)
            // and links (Context+TransientRelationships.swift); a failed
            // `reload` changed nothing, so putting them back is harmless.
            let links = o.transientRelated
            var failure: KuraError?
            o.keepingTransients {
                do throws(KuraError) { try reload(o, mergeChanges: false) } catch { failure = error }
            }
            o.transientRelated = links
            if let failure { throw failure }
        } else {
            switch mergePolicy {
            case .error:
                // Kept as read: the next save reports the conflict.
                return
            case .mergeByPropertyObjectTrump, .overwrite:
                events.insert(.mergePolicy)
                try reload(o, mergeChanges: true)
            case .rollback:
                events.insert(.mergePolicy)
                try reload(o, mergeChanges: false)
                o.isDeleted = false
                deleted.removeAll { $0 === o }
            case .mergeByPropertyStoreTrump:
                events.insert(.mergePolicy)
                let read = (o.savedValues ?? AttributeValues(o.entity), o.savedToOne)
                try reload(o, mergeChanges: true)
                // Properties the store changed since this context read them take the store's values.
                let stored = (o.savedValues ?? AttributeValues(o.entity), o.savedToOne)
                for i in o.entity.attributes.indices where read.0[ordinal: i] != stored.0[ordinal: i] { o.values[ordinal: i] = stored.0[ordinal: i] }
                for r in o.entity.relationships where !r.isToMany && read.1[r.name] != stored.1[r.name] { o.toOne[r.name] = stored.1[r.name] }
            }
        }
        noteRefreshed(o, o.differingKeys(values: before.0, toOne: before.1).union(toManyKeys))
        if !o.isFault && o.managedObjectContext === self { o.awakeFromSnapshotEvents(events) }
    }

    /// Removes an object whose row is gone from the store: it leaves the
    /// context and its pending lists, and observers hear it as deleted.
    func evict(_ o: ManagedObject) {
        noteDeleted(o)
        o.isDeleted = true
        registry[o.objectID] = nil
        batchGroups[o.objectID] = nil
        o.isTouched = false
        touchedOrder.removeAll { $0 === o }
        clearPendingIndexes()  // they track `touchedOrder` by position
        deleted.removeAll { $0 === o }
        o.managedObjectContext = nil
    }
}
