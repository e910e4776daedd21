// Context+Hierarchy: objects of entity hierarchies (EntityHierarchy.swift).
//
// Invariant: every object ID a context holds (registry, to-one keys, join
// edits) names the row's own entity, never an ancestor: `Country/p7`, not
// `Region/p7`, so one row has one ID and one instance. IDs made from stored
// row IDs get their entity from the row's `_entity` column (fetches), the
// to-one's `<name>_entity` companion column (loading an object) or, for join
// tables and IDs a caller builds, a read of the row (`canonicalID`).
// `_entity` values come from disk: one that names no entity of the row's
// hierarchy is `.corrupt`, naming table, row and value.

extension ManagedObjectModel {
    /// Refuses an abstract entity, naming the subentities to insert instead.
    func checkInsertable(_ e: EntityDescription) throws(KuraError) {
        guard e.isAbstract else { return }
        let concrete = entities(inTable: e.hierarchy.table).filter { !$0.isAbstract && e.hierarchy.kinds.contains($0.name) }.map(\.name)
        throw KuraError(.invalidArgument, "entity \"\(e.name)\" is abstract: it has no objects of its own; insert one of its subentities"
                        + (concrete.isEmpty ? " (it has none that is not abstract)" : ": \(concrete.joined(separator: ", "))"))
    }
}

extension ManagedObjectContext {
    /// The entity of a stored row of `e`'s table: `e` itself for a table of
    /// one entity, else the entity `_entity` names, which must be `e` or one of
    /// its descendants.
    ///
    /// - Throws: `.corrupt` naming the table, row and value otherwise.
    func rowEntity(_ row: [Value], rowID: Int64, in e: EntityDescription) throws(KuraError) -> EntityDescription {
        guard let column = layout(of: e).entityColumn else { return e }
        guard column < row.count, case .text(let name) = row[column], let x = model.entitiesByName[name], e.hierarchy.kinds.contains(name) else {
            let shown = column < row.count ? "\(row[column])" : "nothing"
            throw KuraError(.corrupt, "table \"\(e.hierarchy.table)\" row \(rowID): column \(ManagedObjectModel.entityColumn) holds \(shown), which is not \"\(e.name)\" or one of its subentities; run `kura check` on the store", path: database.path)
        }
        return x
    }

    /// Checks that a row read for `o` is a row of `o`'s own entity.
    ///
    /// - Throws: `.notFound` if the row is another entity's (an ID built by
    ///   hand with the wrong entity); `.corrupt` for a bad `_entity`.
    func checkRowEntity(_ row: [Value], of o: ManagedObject) throws(KuraError) {
        guard o.entity.hierarchy.isShared, let root = model.entitiesByName[o.entity.hierarchy.table] else { return }
        let actual = try rowEntity(row, rowID: o.objectID.rowID, in: root)
        guard actual === o.entity else {
            throw KuraError(.notFound, "\(o.objectID): row \(o.objectID.rowID) of table \"\(o.entity.hierarchy.table)\" is a \(actual.name), not a \(o.entity.name)")
        }
    }

    /// The ID of a to-one target read from a row (`apply`): the companion
    /// column names the target's entity when the destination has subentities.
    /// A missing or foreign companion value is reported through the failure
    /// channel (the next save or fetch throws `.corrupt`); the ID then names the
    /// destination and `object(with:)` finds the row's entity.
    func targetID(_ slot: RowLayout.Slot, rowID: Int64, row: [Value], of o: ManagedObject) -> ManagedObjectID {
        guard let ec = slot.entityColumn else { return ManagedObjectID(entity: slot.destination, rowID: rowID) }
        if ec < row.count, case .text(let name) = row[ec], let x = model.entitiesByName[name], model.isKind(x, of: slot.destination) {
            return ManagedObjectID(entity: name, rowID: rowID)
        }
        o.noteReadError(KuraError(.corrupt, "\(o.objectID): relationship \"\(slot.name)\" points to row \(rowID) but its column \(slot.name)\(ManagedObjectModel.companionSuffix) holds \(ec < row.count ? "\(row[ec])" : "nothing"), not \"\(slot.destination)\" or one of its subentities; run `kura check` on the store", path: database.path))
        return ManagedObjectID(entity: slot.destination, rowID: rowID)
    }

    /// `id` with the entity of its row when `id` names an entity with
    /// subentities (a registered object of the hierarchy first, else one read);
    /// `id` itself if the row is gone.
    func canonicalID(_ id: ManagedObjectID) throws(KuraError) -> ManagedObjectID {
        guard let e = model.entitiesByName[id.entityName], !e.subentityNames.isEmpty, !id.isTemporary else { return id }
        return try canonicalIDs(of: e, rowIDs: [id.rowID])[0]
    }

    /// IDs for row IDs of `e`'s table that belong to `e` or a subentity, each
    /// naming its row's entity (one read for those no registered object
    /// settles). A row that is gone keeps `e`'s name.
    func canonicalIDs(of e: EntityDescription, rowIDs: [Int64]) throws(KuraError) -> [ManagedObjectID] {
        guard !e.subentityNames.isEmpty else { return rowIDs.map { ManagedObjectID(entity: e.name, rowID: $0) } }
        let kinds = e.hierarchy.kinds.sorted()
        var out: [ManagedObjectID?] = rowIDs.map { rid in
            kinds.lazy.map { ManagedObjectID(entity: $0, rowID: rid) }.first { registered($0) != nil }
        }
        let missing = out.indices.filter { out[$0] == nil }
        if !missing.isEmpty {
            let rows = try read { tx throws(KuraError) -> [[Value]?] in
                let t = try tx.table(e.hierarchy.table)
                var rows: [[Value]?] = []
                for i in missing { rows.append(try tx.values(in: t, rowID: rowIDs[i])) }
                return rows
            }
            for (i, row) in zip(missing, rows) {
                guard let row else { continue }
                out[i] = ManagedObjectID(entity: try rowEntity(row, rowID: rowIDs[i], in: e).name, rowID: rowIDs[i])
            }
        }
        return zip(out, rowIDs).map { $0 ?? ManagedObjectID(entity: e.name, rowID: $1) }
    }

    /// IDs of the stored objects of `e` (and its subentities) matching every
    /// conjunct, each naming its row's entity.
    func storedIDs(matching conjuncts: [KuraPredicate], of e: EntityDescription) throws(KuraError) -> [ManagedObjectID] {
        let parts = conjuncts + (model.entityFilter(e, includingSubentities: true).map { [$0] } ?? [])
        let rows = try read { tx throws(KuraError) in
            try tx.fetch(TableQuery(e.hierarchy.table, where: parts.count == 1 ? parts[0] : .and(parts)))
        }
        var out: [ManagedObjectID] = []
        for (rid, row) in rows { out.append(ManagedObjectID(entity: try rowEntity(row, rowID: rid, in: e).name, rowID: rid)) }
        return out
    }
}
