// Context+Parent: child contexts (Core Data's nested contexts) and permanent
// IDs obtained early.
//
// A child context's "store" is its parent: everything it would read from the
// store it reads from the parent's current state instead, pending changes
// included, and its save pushes its changes into the parent as the parent's
// own pending changes. Chains nest (grandchild -> child -> parent -> store);
// only a context without a parent writes to the store.
//
// Reading through the parent:
//   - loading a fault (`load`): the parent's instance of the object, loaded
//     (from its parent, or the store), is copied: values, to-one keys and
//     order positions become this context's current and saved state, so
//     `hasChanges` and `changedValues()` in the child are relative to the
//     parent's state when the child read it;
//   - to-many members (`parentMembers`): the parent's members (its pending
//     changes included), then corrected by this context's own changes, as a
//     store-backed context corrects the store's rows;
//   - fetches (`childMatching`): the parent runs the attribute-only AND
//     conjuncts of the predicate (its pending changes included); this context
//     drops the candidates it changed or deleted, adds its inserted and
//     changed objects, and evaluates the whole predicate on its own objects
//     (relationships through itself), then sorts, offsets and limits. Clean
//     objects take the parent's current values, as a store fetch refreshes
//     clean objects from the store's rows.
//
// Transient properties are per context (Core Data's nested contexts move
// snapshots, which hold persistent properties only): a child reading an
// object from its parent gives its transient attributes their defaults, as a
// fault firing from the store does, and a push carries no transient
// attribute values (an object inserted in the child starts with the defaults
// in the parent) and no transient relationship links. Set transient values
// in the context that uses them (`awakeFromFetch`, `awakeFromInsert`).
//
// Uniquing: one instance per ID per context; a child's instance of a parent
// object is a different object with the same ID (`child.object(with: id)`).
// Objects the parent inserted keep their temporary IDs in the child, which
// resolves them through the parent (`knows`).
//
// Pushing (`push(into:)`, what a child's `save()` does): willSave hooks run,
// then the parent's instances of every updated and deleted object are looked
// up and loaded first, so a failure (an object deleted in the parent since,
// a row gone from the store) changes neither context. Then, into the parent:
// inserted objects as new inserted objects with the same temporary (or
// early-permanent) IDs; for updated objects the attributes, to-one keys and
// order positions this context changed (only those: what the parent changed
// meanwhile in other properties stays; in properties this context changed,
// the child's values overwrite the parent's in-memory ones, as in Core
// Data); join-table edits and the pending positions of ordered join tables
// (each side the child renumbered replaces that side's position in the
// parent); deletes (the delete rules already ran in the
// child, their effects are among the pushed changes). Every parent change
// goes through the parent's change recording (`willChange`, `setJoinEdit`,
// `recordPresence`), so the parent's undo manager records the push as one
// group (the parent's open group is closed first) and its observers hear the
// pushed objects at the end of the push. No validation runs at a push (as in
// Core Data): the store save of the last ancestor validates, naming the same
// IDs; subscript-write errors travel with the objects to be reported there.
// The child then takes what it pushed as its saved state, posts its did-save
// to its own observers only (nothing reached the store; other contexts do not
// merge it), and calls didSave on the pushed objects.
//
// Temporary IDs: an object inserted in a child keeps its temporary ID in the
// child and the parent until the parent's store save, which gives the
// parent's instance its permanent ID; the child's instance keeps the
// temporary one (Core Data's behaviour). `obtainPermanentIDs(for:)` before
// the child's save avoids that: it reserves row IDs in the store (one small
// write transaction, no rows) and renames the objects in this context and its
// ancestors, so every context of the chain uses the permanent ID.

import KuraEngine

extension ManagedObjectContext {
    /// A new child context of this context (Core Data's context whose
    /// `parent` is this one): see ``init(parent:)``.
    ///
    /// The child reads through this context (its pending changes included),
    /// and its `save()` pushes the child's changes into this context as
    /// pending changes, not to the store; save this context (and its
    /// ancestors) to store them. Discarding the child (dropping it without
    /// saving, or `rollback()`) costs nothing and leaves this context as it
    /// was.
    ///
    /// Lifetime: the child keeps this context alive. Thread rules: use the
    /// child on this context's thread or actor.
    public func newChildContext() -> ManagedObjectContext { ManagedObjectContext(parent: self) }

    /// Whether this context or an ancestor has an object with `id` registered
    /// (how a child resolves its parent's temporary IDs).
    func knows(_ id: ManagedObjectID) -> Bool {
        registered(id) != nil || (parent?.knows(id) ?? false)
    }

    /// The context that saves to the store (this one if it has no parent).
    var rootContext: ManagedObjectContext {
        var c = self
        while let p = c.parent { c = p }
        return c
    }

    /// Makes `o` (this context's instance) show `p`'s (the parent's) current
    /// state as its saved state.
    /// Transient attributes are this context's: a fault's take their
    /// defaults, a loaded object's keep their values (see the header comment).
    func adopt(_ p: ManagedObject, into o: ManagedObject) {
        var values = Self.withTransientDefaults(p.values, o.entity)
        if !o.isFault {
            for (i, a) in o.entity.attributes.enumerated() where a.isTransient { values[ordinal: i] = o.values[ordinal: i] ?? .null }
        }
        o.values = values
        o.toOne = p.toOne
        o.order = p.order
        o.savedValues = o.values
        o.savedToOne = p.toOne
        o.savedOrder = p.order
        o.version = p.version
        o.isFault = false
        o.clearReadError()
    }

    /// `values` with every transient attribute of `e` at its default.
    static func withTransientDefaults(_ values: AttributeValues, _ e: EntityDescription) -> AttributeValues {
        var out = values
        for (i, a) in e.attributes.enumerated() where a.isTransient { out[ordinal: i] = a.defaultValue.map { a.type.stored($0) } ?? .null }
        return out
    }

    /// The parent's instance of `o`, which must exist there and not be deleted.
    func parentInstance(of o: ManagedObject, in parent: ManagedObjectContext) throws(KuraError) -> ManagedObject {
        if o.objectID.isTemporary && !parent.knows(o.objectID) {
            throw KuraError(.notFound, "\(o.objectID) is no longer in the parent context (it was saved there and has a permanent ID now, or rolled back); fetch it again (obtainPermanentIDs before pushing avoids this)")
        }
        let p = try parent.object(with: o.objectID, canonical: true)
        if p.isDeleted {
            throw KuraError(.notFound, "\(o.objectID) is deleted in the parent context (not saved yet)")
        }
        try parent.load(p)
        return p
    }

    /// Loads a child's fault from its parent.
    func loadFromParent(_ o: ManagedObject, _ parent: ManagedObjectContext) throws(KuraError) {
        let p = try parentInstance(of: o, in: parent)
        adopt(p, into: o)
        o.awakeFromFetch()
    }

    /// The members of `o`'s to-many `r` as the parent sees them now (as this
    /// context's instances); empty for an object inserted here.
    func parentMembers(_ o: ManagedObject, _ r: RelationshipDescription, _ parent: ManagedObjectContext) throws(KuraError) -> [ManagedObject] {
        guard !o.isNew else { return [] }
        if o.objectID.isTemporary && !parent.knows(o.objectID) { return [] }
        let p = try parent.object(with: o.objectID, canonical: true)
        guard !p.isDeleted else { return [] }
        var out: [ManagedObject] = []
        for pm in try parent.relatedObjects(p, r) {
            let m = try object(with: pm.objectID, canonical: true)
            if m.isFault {
                adopt(pm, into: m)
                m.awakeFromFetch()
            }
            out.append(m)
        }
        return out
    }

    /// A child context's fetch (see the header comment).
    func childMatching<T: ManagedObject>(_ request: FetchRequest<T>, _ e: EntityDescription, limit: Int?, parent: ManagedObjectContext) throws(KuraError) -> Matches {
        let narrowing = request.predicate.map { p -> KuraPredicate? in
            let parts = QueryPlannerConjuncts.split(p).filter { Self.onlyAttributes($0, e) }
            return parts.isEmpty ? nil : (parts.count == 1 ? parts[0] : .and(parts))
        } ?? nil
        var upward = FetchRequest<ManagedObject>(entityName: e.name, predicate: narrowing)
        upward.includesSubentities = request.includesSubentities
        upward.includesPendingChanges = request.includesPendingChanges
        var candidates: [ManagedObject] = []
        var seen = Set<ObjectIdentifier>()
        for p in try parent.matching(upward).objects {
            let o = try object(with: p.objectID, canonical: true)
            if o.isFault {
                adopt(p, into: o)
                o.awakeFromFetch()
            } else if !o.isNew && !o.isDeleted && !o.hasChangedValues {
                adopt(p, into: o)
            }
            if request.includesPendingChanges && (o.isDeleted || o.hasChangedValues) { continue }
            if seen.insert(ObjectIdentifier(o)).inserted { candidates.append(o) }
        }
        return try objectMatches(request, e, candidates: candidates, seen: seen, limit: limit)
    }

    /// A child context's save: pushes its changes into `parent` (see the
    /// header comment for the order and what a failure leaves).
    func push(into parent: ManagedObjectContext) throws(KuraError) {
        try throwPendingError()
        if hasChanges { try runWillSave() }
        processPendingChanges()
        lastMergeConflicts = []
        guard hasChanges else { return }
        let ins = inserted.filter { !$0.isDeleted }
        let upd = updatedObjects
        let del = deletedObjects

        // The parent's instances first: a failure here changes nothing.
        var targets: [ObjectIdentifier: ManagedObject] = [:]
        for o in upd + del { targets[ObjectIdentifier(o)] = try parentInstance(of: o, in: parent) }

        // What the did-save reports, taken before the objects change state.
        var note = ContextDidSave(inserted: ins.map(\.objectID), updated: [:], deleted: del.map(\.objectID),
                                  contextName: name, author: transactionAuthor, historyToken: nil)
        note.sourceContext = identity
        for c in savedChanges(inserted: [], updated: upd, deleted: del) where c.kind == .update {
            note.updated[c.objectID, default: []].formUnion(c.updatedProperties)
        }

        // The push is a change batch (and undo group) of its own in the parent.
        parent.processPendingChanges()
        for o in ins {
            let p = o.entity.objectClass.init(entity: o.entity, objectID: o.objectID)
            p.managedObjectContext = parent
            p.isNew = true
            p.values = Self.withTransientDefaults(o.values, o.entity)
            p.toOne = o.toOne
            p.order = o.order
            p.deferredErrors = o.deferredErrors
            parent.inserted.append(p)  // a new instance: not deleted (ManagedObjectContext.insertedMayHoldDeleted)
            parent.track(p, as: p.objectID)
            parent.noteInserted(p)
            parent.recordPresence(.inserted, p)
            for r in o.entity.relationships where !r.isToMany {
                if let t = o.toOne[r.name], let inv = inverse(of: r), inv.isToMany, let owner = parent.registered(t) { parent.noteUpdated(owner, inv.name) }
            }
        }
        for o in upd {
            guard let p = targets[ObjectIdentifier(o)] else { continue }
            for (i, a) in o.entity.attributes.enumerated() where !a.isTransient && o.savedValues?[ordinal: i] != o.values[ordinal: i] {
                parent.willChangeAttribute(p, key: a.name)
                p.values[ordinal: i] = o.values[ordinal: i] ?? .null
            }
            for r in o.entity.relationships where !r.isToMany {
                let orderKey = r.name + "_order"
                guard o.savedToOne[r.name] != o.toOne[r.name] || o.savedOrder[orderKey] != o.order[orderKey] else { continue }
                parent.willChange(p, key: r.name)
                let old = p.toOne[r.name]
                p.toOne[r.name] = o.toOne[r.name]
                p.order[orderKey] = o.order[orderKey]
                if let inv = inverse(of: r), inv.isToMany {
                    if let old, let owner = parent.registered(old) { parent.noteUpdated(owner, inv.name) }
                    if let now = o.toOne[r.name], let owner = parent.registered(now) { parent.noteUpdated(owner, inv.name) }
                }
            }
            p.deferredErrors += o.deferredErrors
        }
        func noteJoinOwners(_ table: String, _ pair: JoinPair) {
            for id in [pair.source, pair.target] {
                guard let x = parent.registered(id) else { continue }
                for r in x.entity.relationships where r.isToMany {
                    if case .joinTable(let t, _) = model.storage(of: r, in: x.entity), t == table { parent.noteUpdated(x, r.name) }
                }
            }
        }
        for (table, edits) in joinEdits {
            for (pair, present) in edits {
                parent.setJoinEdit(table, pair, present)
                // A removed pair takes no position with it (as removeRelated does).
                if !present && parent.joinPositions[table]?[pair] != nil { parent.setJoinPositions(table, pair, nil) }
                noteJoinOwners(table, pair)
            }
        }
        // Pending positions of ordered join tables: each side this context
        // renumbered replaces the parent's position of that side (the child
        // renumbered every member of the list it changed, read through the
        // parent, so the parent's list takes the child's order whole).
        for (table, positions) in joinPositions {
            for (pair, p) in positions where joinEdits[table]?[pair] != false {
                let had = parent.joinPositions[table]?[pair]
                let now = JoinPositions(position: p.position ?? had?.position, inversePosition: p.inversePosition ?? had?.inversePosition)
                guard now != had else { continue }
                parent.setJoinPositions(table, pair, now)
                noteJoinOwners(table, pair)
            }
        }
        for o in del {
            guard let p = targets[ObjectIdentifier(o)] else { continue }
            p.isDeleted = true
            parent.deleted.append(p)
            parent.noteDeleted(p)
            parent.recordPresence(.deleted, p)
        }

        // This context now stands on what it pushed.
        for o in ins { o.isNew = false }
        for o in ins + upd {
            o.savedValues = o.values
            o.savedToOne = o.toOne
            o.savedOrder = o.order
            o.deferredErrors = []
        }
        for o in deleted {
            if registered(o.objectID) === o { registry[o.objectID] = nil }
            o.managedObjectContext = nil
        }
        forgetPendingChanges()
        processPendingChanges()
        parent.processPendingChanges()
        for o in ins + upd + del { o.didSave() }
        postDidSave(note, toContainer: false)
    }

    /// Gives `objects` (inserted in this context, not yet saved) their
    /// permanent IDs now, before they are saved (Core Data's
    /// `obtainPermanentIDs(for:)`): row IDs are reserved in the store in one
    /// small write transaction (no rows are written; an ID whose object is
    /// never saved stays unused, as row IDs are never reused), and the
    /// objects are renamed in this context and in every ancestor context
    /// that holds them, so the IDs are the ones the store save will use.
    /// Objects that already have permanent IDs are skipped.
    ///
    /// Use it in a child context before its save, so that objects inserted
    /// there are known by their permanent IDs everywhere (otherwise the
    /// child keeps their temporary IDs after the parent's store save), or to
    /// hand an unsaved object's ID to another context or process.
    ///
    /// Thread rules: this context's. Other child contexts of this context's
    /// ancestors (siblings) still holding the temporary IDs do not see the
    /// rename (as in Core Data, where each context holds its own IDs): a
    /// sibling's push of such an object fails with `.notFound` naming it, and
    /// changes nothing; fetch the object again in the sibling.
    ///
    /// - Throws: `.invalidArgument` for an object of another context;
    ///   `.readOnly` for a store opened read-only; engine errors (`.busy`,
    ///   `.io`, `.diskFull`) from the reservation, after which nothing changed.
    public func obtainPermanentIDs(for objects: [ManagedObject]) throws(KuraError) {
        var todo: [ManagedObject] = []
        var seen = Set<ObjectIdentifier>()
        for o in objects {
            guard o.managedObjectContext === self else {
                throw KuraError(.invalidArgument, "\(o) belongs to another context (or none); obtain its ID in its own context")
            }
            if o.objectID.isTemporary && seen.insert(ObjectIdentifier(o)).inserted { todo.append(o) }
        }
        guard !todo.isEmpty else { return }
        try container.refuseWritesIfReadOnly("obtain permanent IDs")
        var tables: [String] = []
        var counts: [String: Int64] = [:]
        for o in todo {
            let t = o.entity.hierarchy.table
            if counts[t] == nil { tables.append(t) }
            counts[t, default: 0] += 1
        }
        var firsts: [String: Int64] = [:]
        var ownCommit: UInt64?
        do {
            try database.write { tx in
                for t in tables { firsts[t] = try tx.reserveRowIDs(counts[t] ?? 0, in: try tx.table(t)) }
                // The commit advances the change counter: the store watcher
                // must not take it for another process's (StoreWatcher.swift).
                let counter = try tx.changeCounter &+ 1
                ownCommit = counter
                self.container.storeWatcher.willCommit(counter: counter, token: nil)
            }
        } catch let e as KuraError {
            if let ownCommit { container.storeWatcher.didNotCommit(counter: ownCommit, token: nil) }
            throw e
        } catch {
            if let ownCommit { container.storeWatcher.didNotCommit(counter: ownCommit, token: nil) }
            throw KuraError(.io, "\(error)")
        }
        var renamed: [ManagedObjectID: ManagedObjectID] = [:]
        for o in todo {
            let t = o.entity.hierarchy.table
            guard let rid = firsts[t] else { continue }  // every table was reserved above
            firsts[t] = rid + 1
            renamed[o.objectID] = ManagedObjectID(entity: o.entity.name, rowID: rid)
        }
        var c: ManagedObjectContext? = self
        while let context = c {
            context.rename(renamed)
            c = context.parent
        }
    }

    /// Renames objects (temporary to permanent IDs) in this context: the
    /// registry, every to-one key, join edit and pending join position
    /// naming them, and the undo manager's recorded groups.
    func rename(_ renamed: [ManagedObjectID: ManagedObjectID]) {
        var moved: [ManagedObject] = []
        for (old, _) in renamed {
            guard let o = registered(old) else { continue }
            registry[old] = nil
            batchGroups[old] = nil
            moved.append(o)
        }
        for o in moved {
            if let id = renamed[o.objectID] {
                o.objectID = id
                track(o, as: id)
            }
        }
        for u in registry.values {
            let o = u.takeUnretainedValue()
            for (k, v) in o.toOne { if let n = renamed[v] { o.toOne[k] = n } }
            for (k, v) in o.savedToOne { if let n = renamed[v] { o.savedToOne[k] = n } }
        }
        for (table, edits) in joinEdits {
            var out: [JoinPair: Bool] = [:]
            for (pair, present) in edits {
                out[JoinPair(source: renamed[pair.source] ?? pair.source, target: renamed[pair.target] ?? pair.target)] = present
            }
            joinEdits[table] = out
        }
        for (table, positions) in joinPositions {
            var out: [JoinPair: JoinPositions] = [:]
            for (pair, p) in positions {
                out[JoinPair(source: renamed[pair.source] ?? pair.source, target: renamed[pair.target] ?? pair.target)] = p
            }
            joinPositions[table] = out
        }
        undo?.rename(renamed)
    }
}
