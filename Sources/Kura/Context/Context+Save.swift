// Context+Save: validation, then one atomic engine transaction.
//
// Order inside the transaction: row IDs for inserted objects are taken from
// each table's next row ID (so foreign keys between new objects can be written
// at once); every updated and deleted object is checked against its stored
// row's version and resolved by the merge policy (Context+Conflicts.swift)
// before anything is written; then inserts, updates, deletes (with their join
// rows) and join edits. Inserted rows are written grouped by table (tables in
// the order each first comes, insertion order within a table: `tableOrder`),
// so that objects of several entities inserted in turn do not switch the
// engine's table per row; row IDs still follow insertion order within each
// table, and the history and the did-save list inserts in insertion order.
// Temporary IDs resolve to their objects' positions by the numbers the
// context gave them (`InsertedPositions`), not through a hash table. If validation, the conflict check or any write fails,
// the transaction rolls back and the context keeps all its changes (and
// temporary IDs) as they were; the context's objects change only after the
// commit.

extension ManagedObjectContext {
    /// Saves every pending change in one atomic transaction.
    ///
    /// Optimistic locking: an object this context updates or deletes that was
    /// changed or deleted in the store since this context read it (by another
    /// context or process) is a conflict, resolved by ``mergePolicy`` (see
    /// ``MergePolicy``); the conflicts met are in ``lastMergeConflicts``.
    /// After a resolved save the objects hold the values actually saved.
    ///
    /// - Throws: first, the pending error of a non-throwing accessor
    ///   (``pendingError``), with its own code; `KuraError.validation` listing
    ///   every problem (object, property, rule) before anything is written;
    ///   `KuraError.mergeConflict` listing each conflicting object, property,
    ///   this context's value and the store's, when the policy refuses; engine
    ///   errors (`.busy`, `.diskFull`, `.io`, `.corrupt`, `.constraintViolation`)
    ///   if reading or writing fails. On any error nothing is saved and the
    ///   context keeps its changes.
    public func save() throws(KuraError) {
        if let parent { return try push(into: parent) }  // a child context (Context+Parent.swift)
        try throwPendingError()
        try drainInbox()
        if hasChanges {
            try runWillSave()
            try computeDerivedAttributes()
        }
        processPendingChanges()
        lastMergeConflicts = []
        guard hasChanges else { return }
        dropPrefetched()
        try container.refuseWritesIfReadOnly("save")
        var ins = liveInserted
        let upd = updatedObjects
        let del = deletedObjects

        /// The row ID of each inserted object, parallel to `ins` (filled
        /// first thing in the transaction, or as the rows are written).
        let assigned = AssignedRowIDs(count: ins.count)
        /// The order in which the inserted rows are written: positions in
        /// `ins`, grouped by table (in the order each table first comes),
        /// in insertion order within a table (`tableOrder`). Row IDs are
        /// assigned in insertion order all the same; grouped, consecutive
        /// rows go to one table (the engine's table handle and the row
        /// array are reused, not switched per object when the inserted
        /// objects alternate entities).
        // The inserted objects' IDs are taken in the same pass (each
        // object read once: in a large save each visit is a cache miss)
        // when rows or join rows may name inserted objects.
        let needsPositions = model.hasToOneRelationships || !joinEdits.isEmpty || !joinPositions.isEmpty
        let (order, insertedIDs) = Self.tableOrder(ins, takingIDs: needsPositions)
        /// The permanent ID of each inserted object, parallel to `ins`
        /// (made as its row is written, where its entity is at hand: the
        /// history record and the objects after the commit take them).
        var newIDs = [ManagedObjectID](repeating: ManagedObjectID(entity: "", rowID: 0), count: ins.count)
        /// Each inserted object's values as its row was written, in write
        /// order (`order`), which become its saved values after the commit
        /// (SavedValuesStash: taken while the object's values are in cache).
        let stash = SavedValuesStash(capacity: ins.count)
        /// The position in `ins` of each inserted object's temporary ID
        /// (InsertedPositions: by number for the IDs this context made,
        /// not hashed), made when a row first names one.
        let positions = InsertedPositions(ins, ids: insertedIDs, numbering: registry.numbering)
        /// The updated, then the deleted objects (the context's order): what
        /// the save checks against the store, and `outcomes` is parallel to.
        let changed = Self.joined(upd, del)
        /// What the check found and the write did for each of `changed`, by
        /// position (an array, not a dictionary by object: see `CheckOutcome`).
        var outcomes = [CheckOutcome](repeating: .unchecked, count: changed.count)
        var conflicts: [MergeConflict] = []
        let policy = mergePolicy
        var refused = false
        /// The save's updates and deletes, for the history and the did-save
        /// (its inserts are `newIDs`: a change each is made only for the
        /// history, when it is tracked).
        var record: [PersistentHistoryChange] = []
        var historyToken: HistoryToken?
        var ownCommit: UInt64?

        do {
            try database.write { tx in
                // Validation reads (uniqueness, relationship counts) run in this
                // transaction: no read transaction of their own per object, and
                // what they check is what this transaction writes over.
                let outer = self.enclosingTransaction
                self.enclosingTransaction = tx
                defer { self.enclosingTransaction = outer }
                try self.validate(Self.joined(ins, upd), deleted: del)
                self.enclosingTransaction = outer
                // Table handles, resolved once per save, kept by entity (a
                // few compared by identity: objects of several entities
                // hash no name) and by table name.
                var tables: [String: TableInfo] = [:]
                var byEntity: [(entity: EntityDescription, info: TableInfo)] = []
                func table(_ e: EntityDescription) throws(KuraError) -> TableInfo {
                    for l in byEntity where l.entity === e { return l.info }
                    let t: TableInfo
                    if let known = tables[e.hierarchy.table] { t = known } else {
                        t = try tx.table(e.hierarchy.table)
                        tables[e.hierarchy.table] = t
                    }
                    if byEntity.count < 16 { byEntity.append((e, t)) }
                    return t
                }
                // The next row ID by table (a hierarchy's entities share row
                // IDs); the current run's table is kept aside.
                var next: [String: Int64] = [:]
                var run: (table: String, next: Int64)?
                func assign(_ k: Int) throws(KuraError) {
                    let o = ins[k]
                    // An ID made permanent early (obtainPermanentIDs) names its reserved row.
                    if !o.objectID.isTemporary {
                        assigned[k] = o.objectID.rowID
                        return
                    }
                    let t = o.entity.hierarchy.table
                    var r: (table: String, next: Int64)
                    if let current = run, current.table == t { r = current } else {
                        if let current = run { next[current.table] = current.next }
                        if let n = next[t] { r = (t, n) } else { r = (t, try table(o.entity).nextRowID) }
                    }
                    assigned[k] = r.next
                    r.next += 1
                    run = r
                }
                // Row IDs are assigned before any row is written, so that rows
                // can name inserted objects by to-one keys, and before the
                // conflict check, so that a refused save writes nothing. A save
                // that only inserts, in a model without to-one relationships,
                // needs neither: it assigns each row ID as it writes the row
                // (one pass over the inserted objects, not two).
                let assignWhileWriting = upd.isEmpty && del.isEmpty && !self.model.hasToOneRelationships
                if !assignWhileWriting {
                    // In write order (`order`): one table's objects in a
                    // row, in insertion order, so each table's row IDs
                    // follow insertion order as they did.
                    for j in order.indices { try assign(order[j]) }
                    if let current = run { next[current.table] = current.next }
                }
                func rowID(_ id: ManagedObjectID) -> Int64? {
                    guard id.isTemporary else { return id.rowID }
                    return positions.position(of: id).map { assigned[$0] }
                }
                /// The row ID a to-one key naming `id` stores: nil for a
                /// deleted target. An inserted object of this save is not
                /// deleted (`ins` holds live ones), so its row ID is taken
                /// without looking it up in the registry.
                func targetRowID(_ id: ManagedObjectID) -> Int64? {
                    if id.isTemporary, let k = positions.position(of: id) { return assigned[k] }
                    return self.registered(id)?.isDeleted == true ? nil : rowID(id)
                }
                // Check every saved object against its stored row first, so a
                // refusal writes nothing.
                // In table and row-ID order (consecutive rows mostly share a
                // leaf, which the engine then reads without descending);
                // conflicts are reported in the context's order all the same.
                let checked = Self.storageOrder(changed)
                var numbered: [(Int, MergeConflict)] = []
                // By runs of one entity: its table and version column are
                // taken once a run, not per object.
                var runStart = 0
                while runStart < checked.count {
                    let e = checked[runStart].1.entity
                    let t = try table(e)
                    let versionColumn = self.layout(of: e).version
                    var k = runStart
                    while k < checked.count, checked[k].1.entity === e {
                        let (position, o) = checked[k]
                        k += 1
                        // The common case: the stored row is at the version
                        // this context read. Only its version column is
                        // decoded; the whole stored row and the row as read
                        // are built for a conflict (or an old record without
                        // the column) alone, and the row to write when it is
                        // written.
                        let check = try self.storedVersion(tx, t, o.objectID.rowID, column: versionColumn)
                        if let check, let version = check.version, version == o.version {
                            outcomes[position] = .current(check.record)
                            continue
                        }
                        let row = o.isDeleted ? nil : try self.row(o, rowID)
                        let stored = try tx.values(in: t, rowID: o.objectID.rowID)
                        let (conflict, resolution) = self.resolve(o, stored: stored, row: row, original: self.originalRow(o))
                        if let conflict { numbered.append((position, conflict)) }
                        if let resolution { outcomes[position] = .resolved(resolution) } else { refused = true }
                    }
                    runStart = k
                }
                conflicts.append(contentsOf: numbered.sorted { $0.0 < $1.0 }.map(\.1))
                if refused { throw Self.conflictError(conflicts, policy: policy) }
                // By runs of one entity: its layout and table are taken once a run.
                var start = 0
                // One row array for all inserts (RowLayout.fill).
                var row: [Value] = []
                while start < order.count {
                    let e = ins[order[start]].entity
                    var end = start + 1
                    while end < order.count && ins[order[end]].entity === e { end += 1 }
                    let layout = self.layout(of: e)
                    let t = try table(e)
                    let entityName = e.name
                    // assignWhileWriting: the row IDs `assign` gives, with the
                    // run's table and next row ID found at its first temporary
                    // ID (not per object), kept in plain locals.
                    var runTable: String?
                    var runNext: Int64 = 0
                    /// The row ID of the run's next object that has a
                    /// temporary ID (one made permanent early by
                    /// obtainPermanentIDs names its reserved row instead).
                    func nextRunRowID() -> Int64 {
                        if runTable == nil {
                            let name = e.hierarchy.table
                            if let current = run, current.table == name { runNext = current.next } else {
                                if let current = run { next[current.table] = current.next }
                                runNext = next[name] ?? t.nextRowID
                            }
                            runTable = name
                        }
                        runNext += 1
                        return runNext - 1
                    }
                    if assignWhileWriting, let direct = layout.directColumns {
                        // A plain layout (RowLayout.directColumns) in an
                        // insert-only save: what `fill` and the loop below
                        // do, in one visit without their per-row work. Each
                        // object's slots go to their columns as they are;
                        // they cover every column but the version's, which
                        // holds 1 in every new row (written once).
                        if row.count != layout.columns.count { row = [Value](repeating: .null, count: layout.columns.count) }
                        row[layout.version] = .integer(1)
                        for j in start..<end {
                            let k = order[j]
                            let o = ins[k]
                            let rid = o.objectID.isTemporary ? nextRunRowID() : o.objectID.rowID
                            assigned[k] = rid
                            o.writeValues(into: &row, columns: direct)
                            try tx.insertRow(row, into: t, rowID: rid)
                            newIDs[k] = ManagedObjectID(entity: entityName, rowID: rid)
                            stash.append(o.values)
                        }
                        if let runTable { run = (runTable, runNext) }
                        start = end
                        continue
                    }
                    for j in start..<end {
                        let k = order[j]
                        let o = ins[k]
                        if assignWhileWriting {
                            assigned[k] = o.objectID.isTemporary ? nextRunRowID() : o.objectID.rowID
                        }
                        layout.fill(&row, o, saved: false, targetRowID: targetRowID)
                        row[layout.version] = .integer(1)
                        try tx.insertRow(row, into: t, rowID: assigned[k])
                        newIDs[k] = ManagedObjectID(entity: entityName, rowID: assigned[k])
                        stash.append(o.values)
                    }
                    if let runTable { run = (runTable, runNext) }
                    start = end
                }
                /// The row ID a written row's to-one key holds for `id`
                /// (nil: no key, the target being deleted), as `row` gives it.
                func keyRowID(_ id: ManagedObjectID) -> Int64? {
                    self.registered(id)?.isDeleted == true ? nil : rowID(id)
                }
                // The updated objects in the check's order (`checked` is
                // `changed` in storage order; a deleted object is never one
                // of `upd`), by runs of one entity (its table and layout
                // taken once a run). Each row is built now, not kept from the
                // check; one whose values become the object's saved state as
                // they are (`takesValuesAsSaved`) is built in one reused
                // array.
                var written: [Value] = []
                var wrun = 0
                while wrun < checked.count {
                    let e = checked[wrun].1.entity
                    var end = wrun
                    while end < checked.count, checked[end].1.entity === e { end += 1 }
                    defer { wrun = end }
                    guard checked[wrun..<end].contains(where: { !$0.1.isDeleted }) else { continue }
                    let t = try table(e)
                    let layout = self.layout(of: e)
                    for k in wrun..<end {
                        let (position, o) = checked[k]
                        if o.isDeleted { continue }
                        switch outcomes[position] {
                        case .current(let current):
                            let version = Value.integer(o.version + 1)
                            if Self.takesValuesAsSaved(o, layout) {
                                layout.fill(&written, o, saved: false, targetRowID: keyRowID)
                                written[layout.version] = version
                                try tx.update(written, in: t, rowID: o.objectID.rowID, current: current)
                                outcomes[position] = .wroteValues
                            } else {
                                var row = layout.row(o, saved: false, targetRowID: keyRowID)
                                row[layout.version] = version
                                try tx.update(row, in: t, rowID: o.objectID.rowID, current: current)
                                outcomes[position] = .resolved(.write(row))
                            }
                        case .resolved(.write(let row)):
                            try tx.update(row, in: t, rowID: o.objectID.rowID)
                        default:
                            break
                        }
                    }
                }
                // The deleted objects, by runs of one entity in the check's
                // order: the rows whose check passed go to the engine
                // together with the records the check read (`deleteRows`:
                // each index's entries in key order, then the rows in row-ID
                // order, mostly in the leaf the previous one left), the
                // others one by one; then each one's join rows.
                wrun = 0
                while wrun < checked.count {
                    let e = checked[wrun].1.entity
                    var end = wrun
                    while end < checked.count, checked[end].1.entity === e { end += 1 }
                    defer { wrun = end }
                    guard checked[wrun..<end].contains(where: { $0.1.isDeleted }) else { continue }
                    let t = try table(e)
                    var rowIDs: [Int64] = []
                    var records: [[UInt8]] = []
                    var deleted: [ManagedObject] = []
                    for k in wrun..<end {
                        let (position, o) = checked[k]
                        guard o.isDeleted else { continue }
                        switch outcomes[position] {
                        case .current(let current):
                            rowIDs.append(o.objectID.rowID)
                            records.append(current)
                            deleted.append(o)
                        case .resolved(.delete):
                            try tx.delete(from: t, rowID: o.objectID.rowID, current: nil)
                            deleted.append(o)
                        default:
                            break
                        }
                    }
                    if !rowIDs.isEmpty { _ = try tx.deleteRows(rowIDs, records: records, from: t) }
                    var joins: [(table: String, forward: Bool)] = []
                    for r in e.relationships {
                        if case .joinTable(let table, let forward) = self.model.storage(of: r, in: e) { joins.append((table, forward)) }
                    }
                    for o in deleted {
                        for j in joins {
                            try tx.delete(from: j.table, where: .comparison(KuraComparison(.keyPath([j.forward ? "source" : "target"]), .equalTo, .constant(.integer(o.objectID.rowID)))))
                        }
                    }
                }
                try self.writeJoinEdits(tx, rowID)
                // The objects written, for the history and the did-save.
                var savedUpdates: [ManagedObject] = []
                var savedDeletes: [ManagedObject] = []
                for p in changed.indices {
                    switch outcomes[p] {
                    case .wroteValues, .resolved(.write): savedUpdates.append(changed[p])
                    case .current, .resolved(.delete): savedDeletes.append(changed[p])
                    default: break
                    }
                }
                record = self.savedChanges(inserted: [], updated: savedUpdates, deleted: savedDeletes)
                let wroteRows = !ins.isEmpty || !record.isEmpty
                if self.container.persistentHistoryTracking && wroteRows {
                    // Inserts first, as savedChanges orders them.
                    let changes = newIDs.map { PersistentHistoryChange(kind: .insert, objectID: $0) } + record
                    historyToken = try PersistentHistoryStore.append(tx, author: self.transactionAuthor, contextName: self.name, changes: changes)
                }
                if wroteRows {
                    // Rows were written, so the commit advances the change
                    // counter by one: the store watcher must not take this
                    // commit for another process's (StoreWatcher.swift).
                    let counter = try tx.changeCounter &+ 1
                    ownCommit = counter
                    self.container.storeWatcher.willCommit(counter: counter, token: historyToken)
                }
            }
        } catch let e as KuraError {
            if let ownCommit { container.storeWatcher.didNotCommit(counter: ownCommit, token: historyToken) }
            lastMergeConflicts = conflicts
            throw e
        } catch {
            if let ownCommit { container.storeWatcher.didNotCommit(counter: ownCommit, token: historyToken) }
            throw KuraError(.io, "\(error)")
        }
        lastMergeConflicts = conflicts

        // Committed: make the context match the store. Inserted objects have
        // no resolution: what they hold is what was written, and becomes
        // their saved state, after their to-one keys naming inserted objects
        // took the new IDs. A model without to-one relationships has no such
        // keys: then each inserted object is settled in one visit (one pass
        // over what may be many objects, not two).
        let renames = !ins.isEmpty && model.hasToOneRelationships
        // The new IDs in runs of one entity and consecutive row IDs, each
        // registered in an array by row ID (ObjectRegistry.openRun). In
        // write order, where an entity's rows are together (one run for
        // each, in the common case).
        var runStart = 0
        while runStart < order.count {
            let first = newIDs[order[runStart]]
            var runEnd = runStart + 1
            while runEnd < order.count && newIDs[order[runEnd]].rowID == newIDs[order[runEnd - 1]].rowID + 1
                    && newIDs[order[runEnd]].entityName == first.entityName { runEnd += 1 }
            registry.openRun(entity: first.entityName, first: first.rowID, count: runEnd - runStart)
            runStart = runEnd
        }
        precondition(order.count == ins.count && stash.count == ins.count, "a committed save wrote every inserted row (a Kura bug)")
        // The temporary IDs' positions, taken before the objects change
        // their IDs (made here if no row named one).
        if renames { positions.prepare() }
        // In write order, the order of the stashed values.
        for j in order.indices {
            let o = ins[order[j]]
            o.isNew = false
            let id = newIDs[order[j]]
            registry.moveInserted(o, to: id)
            o.objectID = id
            o.version = 1
            if !renames { o.takeSavedState(values: stash.take(j)) }
        }
        if renames {
            // To-one keys naming an inserted object (by its temporary ID) take its new ID.
            for u in registry.values {
                let o = u.takeUnretainedValue()
                guard o.toOne.holdsTemporaryID else { continue }
                o.toOne.rename { id in positions.position(of: id).map { newIDs[$0] } }
            }
            for j in order.indices { ins[order[j]].takeSavedState(values: stash.take(j)) }
        }
        var gone: [ManagedObject] = []
        var tookStore: [(ManagedObject, Set<String>)] = []
        for p in changed.indices {
            let o = changed[p]
            switch outcomes[p] {
            case .wroteValues:
                o.takeWrittenValues()
            case .resolved(.write(let row)):
                o.keepingTransients { apply(row, to: o) }
            case .resolved(.takeStore(let row)):
                let before = (o.values, o.toOne)
                o.keepingTransients { apply(row, to: o) }
                o.isDeleted = false
                tookStore.append((o, o.differingKeys(values: before.0, toOne: before.1)))
            case .resolved(.gone):
                gone.append(o)
            case .current, .resolved(.delete), .unchecked:
                o.savedValues = o.values
                o.savedToOne = o.toOne
                o.savedOrder = o.order
            }
            o.deferredErrors = []
        }
        for o in gone { o.isDeleted = true }
        for o in deleted.filter(\.isDeleted) + gone {
            registry[o.objectID] = nil
            o.managedObjectContext = nil
        }
        forgetPendingChanges()

        // Conflicts the merge policy settled for the store: observers hear
        // those objects as refreshed (or invalidated if their row is gone).
        for (o, keys) in tookStore { noteRefreshed(o, keys) }
        for o in gone { noteInvalidated(o) }
        processPendingChanges()
        // In insertion order, each object leaving the list as its hook
        // returns: its reference is dropped while the object is in cache,
        // not in a pass of its own when the list is freed (a cache miss per
        // object in a large save). The context no longer holds the list
        // (forgetPendingChanges), so reversing it copies nothing; reversed
        // through its buffer, whose swaps move the references (an array's
        // own swaps retain and release both objects, touching each one).
        // Moved out of `ins` first: the transaction's closure captures `ins`,
        // so each change of it would pay a dynamic exclusivity check.
        positions.release()
        var done = ins
        ins = []
        done.withUnsafeMutableBufferPointer { $0.reverse() }
        while let o = done.popLast() { o.didSave() }
        for p in changed.indices {
            switch outcomes[p] {
            case .wroteValues, .current, .resolved(.write), .resolved(.delete): changed[p].didSave()
            default: break
            }
        }
        // Objects whose values the merge policy settled against the store
        // (a delete the policy undid included).
        if !conflicts.isEmpty {
            let settled = Set(conflicts.map(\.objectID))
            for o in changed where settled.contains(o.objectID) && o.managedObjectContext === self && !o.isDeleted {
                o.awakeFromSnapshotEvents(.mergePolicy)
            }
        }
        // The inserted IDs in insertion order (the array the save made them in).
        var note = ContextDidSave(inserted: newIDs, updated: [:], deleted: [], contextName: name, author: transactionAuthor, historyToken: historyToken)
        note.sourceContext = identity
        note.addChanges(record)
        postDidSave(note)
    }

    /// What a save writes, for the persistent history and the did-save
    /// notification (computed in the save's transaction, before the objects
    /// take their saved state): inserts, updates with the attribute and to-one
    /// names they change, deletes. Objects whose only change is a to-many
    /// membership (join table) are updates of that relationship.
    func savedChanges(inserted: [ManagedObjectID], updated: [ManagedObject], deleted: [ManagedObject]) -> [PersistentHistoryChange] {
        // Join-table edits: the saved objects whose to-many relationship changed.
        var joinUpdates: [ManagedObjectID: Set<String>] = [:]
        if !joinEdits.isEmpty || !joinPositions.isEmpty {
            for e in model.entities {
                for r in e.relationships {
                    guard case .joinTable(let t, let forward) = model.storage(of: r, in: e) else { continue }
                    for pair in (joinEdits[t] ?? [:]).keys {
                        let id = forward ? pair.source : pair.target
                        if !id.isTemporary && registered(id)?.isNew != true { joinUpdates[id, default: []].insert(r.name) }
                    }
                    // A reorder changes the side whose position moved (Context+Relationships.swift, "Ordering").
                    for (pair, p) in joinPositions[t] ?? [:] where (forward ? p.position : p.inversePosition) != nil {
                        let id = forward ? pair.source : pair.target
                        if !id.isTemporary && joinEdits[t]?[pair] != false { joinUpdates[id, default: []].insert(r.name) }
                    }
                }
            }
        }
        var changes = inserted.map { PersistentHistoryChange(kind: .insert, objectID: $0) }
        changes.reserveCapacity(inserted.count + updated.count + deleted.count + joinUpdates.count)
        let memo = SavedChangeNames()
        for o in updated {
            var keys = memo.changedKeys(of: o)
            if !joinUpdates.isEmpty, let more = joinUpdates.removeValue(forKey: o.objectID) { keys = Set(keys).union(more).sorted() }
            changes.append(PersistentHistoryChange(kind: .update, objectID: o.objectID, updatedProperties: keys))
        }
        if !joinUpdates.isEmpty {
            for o in deleted { joinUpdates[o.objectID] = nil }
        }
        // Ordered by entity name, then row ID: the record is the same in every run.
        let ordered = joinUpdates.sorted { a, b in
            a.key.entityName != b.key.entityName ? a.key.entityName < b.key.entityName : Self.idOrder(a.key, b.key)
        }
        for (id, names) in ordered {
            changes.append(PersistentHistoryChange(kind: .update, objectID: id, updatedProperties: names.sorted()))
        }
        for o in deleted {
            // Core Data's tombstone: the preserved attributes' last saved values.
            let preserved = memo.keys(of: o.entity).preserved
            if preserved.isEmpty {
                changes.append(PersistentHistoryChange(kind: .delete, objectID: o.objectID))
                continue
            }
            var tombstone: [String: Value] = [:]
            for (i, a) in preserved {
                tombstone[a.name] = a.type.engineValue((o.savedValues ?? o.values)[ordinal: i] ?? .null)
            }
            changes.append(PersistentHistoryChange(kind: .delete, objectID: o.objectID, tombstone: tombstone))
        }
        return changes
    }

    /// `objects` with their positions, in the order their rows lie in the
    /// store: by table, then row ID (the order in which the engine reads and
    /// writes them with the fewest descents). Already in order: unchanged.
    static func storageOrder(_ objects: [ManagedObject]) -> [(Int, ManagedObject)] {
        func precedes(_ a: ManagedObject, _ b: ManagedObject) -> Bool {
            // Objects of one entity share its table (no names compared).
            if a.entity !== b.entity {
                let ta = a.entity.hierarchy.table, tb = b.entity.hierarchy.table
                if ta != tb { return ta < tb }
            }
            return a.objectID.rowID < b.objectID.rowID
        }
        var out: [(Int, ManagedObject)] = []
        out.reserveCapacity(objects.count)
        var sorted = true
        for k in objects.indices {
            if sorted, k > 0, precedes(objects[k], objects[k - 1]) { sorted = false }
            out.append((k, objects[k]))
        }
        if !sorted { out.sort { precedes($0.1, $1.1) } }
        return out
    }

    /// The stored row of an object: attributes, then each to-one key (and
    /// order), then the version this context read (RowLayout.row).
    func row(_ o: ManagedObject, _ rowID: (ManagedObjectID) -> Int64?) throws(KuraError) -> [Value] {
        layout(of: o.entity).row(o, saved: false) { id in registered(id)?.isDeleted == true ? nil : rowID(id) }
    }

    /// The version column (`v`) of row `rowID`, decoded alone; nil if the row
    /// is gone or the column holds no integer (a record ending before it reads
    /// null): then `resolve` judges the whole row, padded with the column defaults.
    ///
    /// - Throws: `.corrupt` for a malformed record; engine read errors.
    func storedVersion(_ tx: WriteTransaction, _ t: TableInfo, _ rowID: Int64, column v: Int) throws(KuraError) -> (version: Int64?, record: [UInt8])? {
        guard let bytes = try tx.currentRecord(in: t, rowID: rowID) else { return nil }
        let decoded = bytes.withUnsafeBytes { buf -> Result<Value, KuraError> in
            do throws(KuraError) { return .success(try RecordCodec.value(at: v, in: buf)) } catch { return .failure(error) }
        }
        // A null (also what a record ending before the column reads as) goes the whole-row way.
        return (try decoded.get().integerValue, bytes)
    }

    /// The row as this context read it (its saved state).
    func originalRow(_ o: ManagedObject) -> [Value] {
        layout(of: o.entity).row(o, saved: true) { $0.rowID }
    }

    /// Checks what save promises to check; throws one error listing all problems.
    ///
    /// The problems are listed in this order: the model's rules of each
    /// object, deny rules, uniqueness, then the validation hooks
    /// (ManagedObject+Lifecycle.swift). Each saved object's hooks are called
    /// in the same visit as its model rules are checked (one pass over what
    /// may be many objects, not two); their problems are kept apart and
    /// listed last all the same.
    func validate(_ objects: [ManagedObject], deleted: [ManagedObject]) throws(KuraError) {
        var problems: [String] = []
        var hookLines: [String] = []
        // Whether the last entity seen has model rules to check per object
        // (required or validated attributes, relationship rules): a run of
        // objects of an entity without any skips those loops.
        var lastEntity: EntityDescription?
        var entityHasRules = true
        // The last entity's attribute types (`hookProblems`' check of values
        // whose conversion could fail, made here for an object whose class
        // has no validation hook).
        var types: [AttributeType?] = []
        let validationHooks: HookOverrides = [.validateValue, .validateForInsert, .validateForUpdate]
        for o in objects {
            if o.hasDeferredErrors {
                for e in o.deferredErrors { problems.append("\(o.objectID): \(e.message)") }
            }
            let e = o.entity
            if e !== lastEntity {
                lastEntity = e
                entityHasRules = !e.requiredOrdinals.isEmpty || !e.ruleOrdinals.isEmpty || e.relationships.contains { r in
                    r.isToMany ? r.minCount != nil || r.maxCount != nil || !r.isOptional : !r.isOptional
                }
                types = e.attributeStorageTypes
            }
            if !entityHasRules {
                // No rule, and, for a class without validation hooks and
                // values all of plain types (their conversion cannot fail),
                // nothing for `hookProblems` either.
                if !hooks(of: o).isDisjoint(with: validationHooks) || !o.values.holdsPlainValues(of: types) {
                    hookProblems(of: o, into: &hookLines)
                }
                continue
            }
            // By ordinal, only the attributes with a rule (iterating the
            // descriptions would copy each one).
            for i in e.requiredOrdinals where (o.values[ordinal: i] ?? .null).isNull {
                problems.append("\(o.objectID): attribute \"\(e.attributes[i].name)\" is required (rule: not optional) but is nil")
            }
            for i in e.ruleOrdinals { problems += e.attributes[i].validationProblems(o.values[ordinal: i] ?? .null, of: o.objectID) }
            for r in o.entity.relationships {
                if !r.isToMany {
                    if !r.isOptional, try relatedObject(o, r) == nil {
                        problems.append("\(o.objectID): relationship \"\(r.name)\" is required (rule: not optional) but is nil")
                    }
                    continue
                }
                guard r.minCount != nil || r.maxCount != nil || !r.isOptional else { continue }
                let n = try relatedObjects(o, r).count
                if let mn = r.minCount, n < mn { problems.append("\(o.objectID): relationship \"\(r.name)\" holds \(n) objects (rule: at least \(mn))") }
                if let mx = r.maxCount, n > mx { problems.append("\(o.objectID): relationship \"\(r.name)\" holds \(n) objects (rule: at most \(mx))") }
                if !r.isOptional && n == 0 { problems.append("\(o.objectID): relationship \"\(r.name)\" is required (rule: not optional) but is empty") }
            }
            hookProblems(of: o, into: &hookLines)
        }
        // Only deny rules refuse a delete (a model without them has nothing to check here).
        for o in model.hasDenyRules ? deleted + inserted.filter(\.isDeleted) : [] {
            for r in o.entity.relationships where r.deleteRule == .deny {
                o.isDeleted = false
                defer { o.isDeleted = true }
                let n = try (r.isToMany ? relatedObjects(o, r) : (relatedObject(o, r).map { [$0] } ?? [])).filter { !$0.isDeleted }.count
                if n > 0 { problems.append("\(o.objectID): cannot delete: relationship \"\(r.name)\" has delete rule deny and holds \(n) object\(n == 1 ? "" : "s")") }
            }
        }
        problems += try uniquenessProblems(objects)
        problems += hookLines
        deleteHookProblems(deleted, into: &problems)
        if !problems.isEmpty {
            throw KuraError(.validation, "save refused, nothing was written:\n  " + problems.joined(separator: "\n  "))
        }
    }

    /// Objects whose uniqueness-constrained values clash with another pending
    /// object or with a stored row that is not being changed or deleted.
    ///
    /// - Throws: read errors of the store (never taken as "no clash").
    func uniquenessProblems(_ objects: [ManagedObject]) throws(KuraError) -> [String] {
        // A model without constraints has nothing to check (no pass over the objects).
        guard model.hasUniquenessConstraints else { return [] }
        var problems: [String] = []
        var pendingSeen: [String: ManagedObjectID] = [:]
        for o in objects {
            for (i, group) in o.entity.uniquenessConstraints.enumerated() {
                let values = group.map { o.storedValue(named: $0) ?? .null }
                if values.contains(where: \.isNull) { continue }
                // The constraint spans the entity that declares it and its subentities.
                let scope = i < o.entity.hierarchy.uniquenessScopes.count ? o.entity.hierarchy.uniquenessScopes[i] : o.entity.name
                let key = scope + "|" + group.joined(separator: ",") + "|" + values.map(\.description).joined(separator: "\u{1}")
                let shown = zip(group, values).map { "\($0) = \($1)" }.joined(separator: ", ")
                if let other = pendingSeen[key] {
                    problems.append("\(o.objectID): uniqueness constraint (\(group.joined(separator: ", "))) violated: \(other) has \(shown) too")
                    continue
                }
                pendingSeen[key] = o.objectID
                let ids = try storedIDs(matching: zip(group, values).map { k, v in
                                            .comparison(KuraComparison(.keyPath([k]), .equalTo, .constant(o.entity.attributesByName[k]?.type.engineValue(v) ?? v))) },
                                        of: model.entitiesByName[scope] ?? o.entity)
                for id in ids where id.rowID != o.objectID.rowID || o.objectID.isTemporary {
                    if let other = registered(id), other.isDeleted || zip(group, values).contains(where: { other.storedValue(named: $0) != $1 }) { continue }
                    problems.append("\(o.objectID): uniqueness constraint (\(group.joined(separator: ", "))) violated: \(id) already has \(shown)")
                }
            }
        }
        return problems
    }
}

extension ManagedObjectContext {
    /// What a save's check found, and its write did, for one updated or
    /// deleted object (kept in an array by the object's position in the
    /// save's list: a dictionary by object hashed each one twice or more).
    enum CheckOutcome {
        /// Not checked yet.
        case unchecked
        /// The stored row is at the version this context read; this is its
        /// record as read then (no row is written twice in a save, so it is
        /// still the row's record when the object's write comes). An
        /// updated object's row is not built yet; a deleted object stays
        /// in this state through the commit.
        case current([UInt8])
        /// Written from the object's values, which become its saved state
        /// as they are after the commit (`takesValuesAsSaved`).
        case wroteValues
        /// What the merge policy decided for a conflict (or a record without
        /// the version column), or the row written for an object whose saved
        /// state comes from it (`.write`).
        case resolved(Resolution)
    }

    /// Whether, once `o`'s row is written as `layout.fill` makes it from
    /// its values, taking those values as its saved state
    /// (`ManagedObject.takeWrittenValues`) leaves the object exactly as
    /// `apply` of that row (in `keepingTransients`) would: a plain layout
    /// (`RowLayout.directColumns`: each value written as it is, no to-one
    /// key, order or entity column, no conversion), every value slot set
    /// (`apply` would read a slot never set back as null), no to-one key
    /// held (`apply` would find none in the row), and not a fault.
    static func takesValuesAsSaved(_ o: ManagedObject, _ layout: RowLayout) -> Bool {
        guard layout.directColumns != nil, !o.isFault, o.toOne.isEmpty, o.savedToOne.isEmpty else { return false }
        let values = o.values
        for i in 0..<values.count where values[ordinal: i] == nil { return false }
        return true
    }
}

extension ManagedObject {
    /// After a save wrote this object's row from its values at the next
    /// version (`ManagedObjectContext.takesValuesAsSaved` held): what
    /// `apply` of that row does, without building the values again. The
    /// values become the saved ones, the version moves on; the orders and
    /// the read error are cleared as a load clears them.
    @inline(__always)
    func takeWrittenValues() {
        savedValues = values
        version += 1
        if hasExtras {
            order = [:]
            savedOrder = [:]
            clearReadError()
        }
    }

    /// Makes the current values, to-one keys and positions the saved ones
    /// (an inserted object after its save wrote them) and drops the deferred
    /// write errors the save's validation reported. `values` is the object's
    /// `values` (a copy taken earlier, `SavedValuesStash`).
    @inline(__always)
    func takeSavedState(values: AttributeValues) {
        savedValues = values
        // Most objects have no to-one key and no extras: nothing to copy.
        if !toOne.isEmpty || !savedToOne.isEmpty { savedToOne = toOne }
        if hasExtras {
            savedOrder = order
            if !deferredErrors.isEmpty { deferredErrors = [] }
        }
    }
}

/// The values of a save's inserted objects, copied as each row is written
/// and moved into the objects' saved values after the commit.
///
/// Why: copying an object's values retains their buffer, an atomic write to
/// its header; made right after the row was written from that buffer, the
/// write hits the cache, where after the commit (a pass over every inserted
/// object, long since evicted in a large save) it was a cache miss per
/// object. An array would retain each value again when it is read out, and
/// release it again when freed; this buffer hands each one over (`take`).
///
/// Invariants: slots `taken..<count` are initialized, slots before `taken`
/// were moved out, in order (`take` is called for 0, 1, 2, ...); `deinit`
/// releases the ones not taken (a save that failed before its commit).
/// Used on the saving context's thread only.
final class SavedValuesStash {
    private let slots: UnsafeMutablePointer<AttributeValues>
    private let capacity: Int
    // The counters are `@exclusivity(unchecked)`: the runtime's dynamic
    // check was a call per object saved, and no access to them can overlap
    // another (plain reads and writes on the saving thread, calling nothing
    // while they last).
    @exclusivity(unchecked) private(set) var count = 0
    @exclusivity(unchecked) private var taken = 0

    init(capacity: Int) {
        self.capacity = capacity
        slots = .allocate(capacity: max(capacity, 1))
    }

    /// Copies `values` into the next slot.
    func append(_ values: AttributeValues) {
        precondition(count < capacity, "more values stashed than the save inserts (a Kura bug)")
        (slots + count).initialize(to: values)
        count += 1
    }

    /// Moves the values out of slot `k`, the next one not taken.
    func take(_ k: Int) -> AttributeValues {
        precondition(k == taken && k < count, "stashed values taken out of order (a Kura bug)")
        taken += 1
        return (slots + k).move()
    }

    deinit {
        (slots + taken).deinitialize(count: count - taken)
        slots.deallocate()
    }
}

extension ManagedObjectContext {
    /// The order in which a save writes its inserted objects' rows:
    /// positions in `ins` grouped by table, the tables in the order each
    /// first comes, each table's objects in insertion order (so the row IDs
    /// assigned in insertion order still grow within each table). The
    /// identity when one table holds them all. With `takingIDs`, also the
    /// objects' IDs, parallel to `ins` (read in the same visit).
    static func tableOrder(_ ins: [ManagedObject], takingIDs: Bool) -> (order: [Int], ids: [ManagedObjectID]?) {
        // Each entity seen, with its table's group (a few compared by
        // identity; the table names compared when a new entity comes).
        var seen: [(entity: EntityDescription, group: Int)] = []
        var tables: [String] = []
        var counts: [Int] = []
        var groups = [Int32](repeating: 0, count: ins.count)
        var ids: [ManagedObjectID] = []
        if takingIDs { ids.reserveCapacity(ins.count) }
        var last: EntityDescription?
        var group = 0
        for k in ins.indices {
            let o = ins[k]
            if takingIDs { ids.append(o.objectID) }
            let e = o.entity
            if e !== last {
                if let hit = seen.first(where: { $0.entity === e }) {
                    group = hit.group
                } else {
                    let t = e.hierarchy.table
                    if let g = tables.firstIndex(of: t) { group = g } else {
                        tables.append(t)
                        counts.append(0)
                        group = tables.count - 1
                    }
                    seen.append((e, group))
                }
                last = e
            }
            groups[k] = Int32(group)
            counts[group] += 1
        }
        guard tables.count > 1 else { return (Array(ins.indices), takingIDs ? ids : nil) }
        // A counting sort (stable: insertion order within each table).
        var next = [Int](repeating: 0, count: counts.count)
        var sum = 0
        for g in counts.indices {
            next[g] = sum
            sum += counts[g]
        }
        var order = [Int](repeating: 0, count: ins.count)
        for k in ins.indices {
            let g = Int(groups[k])
            order[next[g]] = k
            next[g] += 1
        }
        return (order, takingIDs ? ids : nil)
    }
}

/// The position in a save's inserted objects (`ins`) of each one's
/// temporary ID, as it was before the save: what row IDs, to-one keys and
/// join rows naming an inserted object resolve through.
///
/// Why not a dictionary by ID: a save of many objects that name each
/// other hashed every inserted object's ID into one, and each key again.
/// The temporary IDs a context makes are numbered (ObjectRegistry,
/// `OwnIDNumbering`), in insertion order, so the inserted objects' IDs
/// fill a short range of numbers: an array by number holds their
/// positions. Other temporary IDs (made process-wide) go to a dictionary,
/// and so do all of them when the numbers are spread too thin.
///
/// Built on first use (`prepare`), before any inserted object takes its
/// permanent ID. Used on the saving context's thread only; its fields are
/// `@exclusivity(unchecked)` as `AssignedRowIDs`' (plain reads and writes
/// that call no other code while they last).
final class InsertedPositions {
    /// The inserted objects until `prepare` or `release` (not kept longer:
    /// the save's list is reversed in place later, which would copy it).
    @exclusivity(unchecked) private var ins: [ManagedObject]
    private let numbering: OwnIDNumbering
    @exclusivity(unchecked) private var ready = false
    /// The IDs before the save, parallel to `ins`.
    @exclusivity(unchecked) private var ids: [ManagedObjectID] = []
    @exclusivity(unchecked) private var base: Int64 = 0
    /// Position by `number - base`, or -1.
    @exclusivity(unchecked) private var slots: [Int] = []
    @exclusivity(unchecked) private var others: [ManagedObjectID: Int] = [:]

    /// `ids`: the inserted objects' IDs if taken already (parallel to
    /// `ins`), else nil (then `prepare` takes them).
    init(_ ins: [ManagedObject], ids: [ManagedObjectID]?, numbering: OwnIDNumbering) {
        if let ids {
            self.ids = ids
            self.ins = []
        } else {
            self.ins = ins
        }
        self.numbering = numbering
    }

    /// Takes the inserted objects' IDs if not given (once; before they
    /// change), and places them by number.
    func prepare() {
        guard !ready else { return }
        ready = true
        if !ins.isEmpty || ids.isEmpty { ids = ins.map(\.objectID) }
        ins = []
        var low = Int64.max, high = Int64.min
        for id in ids {
            guard let n = numbering.number(id) else { continue }
            low = min(low, n)
            high = max(high, n)
        }
        let dense = low <= high && high - low < 2 * Int64(ids.count) + 64
        if dense {
            base = low
            slots = [Int](repeating: -1, count: Int(high - low) + 1)
        }
        for (k, id) in ids.enumerated() where id.isTemporary {
            if dense, let n = numbering.number(id) { slots[Int(n - base)] = k } else { others[id] = k }
        }
    }

    /// Lets go of the inserted objects' list (prepared or not: no row
    /// named an inserted object, and none will).
    func release() {
        if !ready { ins = [] }
    }

    /// The position in `ins` of the object whose ID was `id` (a temporary
    /// ID), nil if none.
    func position(of id: ManagedObjectID) -> Int? {
        guard id.isTemporary else { return nil }
        prepare()
        if !slots.isEmpty, let n = numbering.number(id) {
            let i = n - base
            guard i >= 0, i < Int64(slots.count) else { return nil }
            let k = slots[Int(i)]
            // The number names one ID of this context; the entity is compared too (an ID built by hand may name another).
            return k >= 0 && ids[k] == id ? k : nil
        }
        return others.isEmpty ? nil : others[id]
    }
}

/// The row IDs a save assigns to its inserted objects, in order.
///
/// A class, not an array variable: the save's transaction closure and the
/// local functions in it (which map temporary IDs to these row IDs) capture
/// the array, and an array variable captured that way is checked for
/// exclusive access at run time on every write (a call per inserted
/// object). `ids` is `@exclusivity(unchecked)`: it is read and written on
/// the saving thread only, by plain reads and writes that call no other
/// code while they last. Rows are written grouped by table, not in
/// insertion order, so each ID is set at its object's position.
final class AssignedRowIDs {
    @exclusivity(unchecked) private(set) var ids: [Int64]

    /// `count` row IDs, each set before it is read.
    init(count: Int) { ids = [Int64](repeating: 0, count: count) }

    subscript(k: Int) -> Int64 {
        get { ids[k] }
        set { ids[k] = newValue }
    }
}
