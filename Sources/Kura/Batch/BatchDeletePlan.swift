// BatchDeletePlan: what a batch delete removes and changes, worked out in the
// batch's write transaction before any row is touched.
//
// 1. Closure: starting from the request's objects, each relationship's delete
//    rule is followed through the scratch context (which reads through the
//    transaction, so every storage form is read the way a context reads it):
//    cascade adds the related objects; deny is noted; nullify and no action
//    note that each related object's to-one back to the deleted one must be
//    cleared. References without a reciprocal inverse (a to-one or a to-many
//    of another entity naming the deleted entity, which no rule of the
//    deleted side covers; ManagedObjectModel.reciprocalInverse) are found by querying their columns and join tables.
// 2. Checks: a deny rule whose related objects are not all deleted, or a
//    required to-one that would be cleared on an object that stays, refuses
//    the batch, naming both objects.
// 3. Writes: cleared references (version bumped), deleted rows, and the join
//    rows naming a deleted object. Changes are reported as a save reports
//    them: deletes, and updates of the objects whose relationships changed.

import Foundation

struct BatchDeletePlan {
    let container: PersistentContainer
    let tx: WriteTransaction
    let scratch: ManagedObjectContext
    /// Objects to delete, in the order found.
    var doomed: [ManagedObjectID] = []
    var doomedSet: Set<ManagedObjectID> = []
    /// How many of the request's own objects are deleted.
    var rootsDeleted: [ManagedObjectID] = []
    /// (object, to-one relationship of it) to clear, and why.
    var clears: [(ManagedObjectID, RelationshipDescription, because: ManagedObjectID)] = []
    /// (deleted object, relationship, related objects) under a deny rule.
    var denials: [(ManagedObjectID, RelationshipDescription, [ManagedObjectID])] = []
    /// Objects losing a member of a to-many (join table): object → relationship names.
    var joinUpdates: [ManagedObjectID: Set<String>] = [:]

    var model: ManagedObjectModel { container.model }

    init(container: PersistentContainer, tx: WriteTransaction, scratch: ManagedObjectContext) {
        self.container = container
        self.tx = tx
        self.scratch = scratch
    }

    mutating func close(over roots: [ManagedObjectID]) throws(KuraError) {
        var queue: [ManagedObjectID] = []
        for id in roots where doomedSet.insert(id).inserted {
            doomed.append(id)
            rootsDeleted.append(id)
            queue.append(id)
        }
        // Each object enters the queue once (doomedSet), so the loop ends
        // after at most one pass per stored object.
        while let id = queue.popLast() {
            let e = try model.entity(id.entityName)
            if !e.relationships.isEmpty {
                let o = try scratch.existingObject(with: id)
                for r in e.relationships where !r.isTransient {
                    let related = try r.isToMany ? scratch.relatedObjects(o, r) : (scratch.relatedObject(o, r).map { [$0] } ?? [])
                    if related.isEmpty { continue }
                    let inverse = model.reciprocalInverse(of: r)
                    switch r.deleteRule {
                    case .cascade:
                        for y in related where doomedSet.insert(y.objectID).inserted {
                            doomed.append(y.objectID)
                            queue.append(y.objectID)
                        }
                    case .deny:
                        denials.append((id, r, related.map(\.objectID)))
                    default:
                        guard let inverse else { break }
                        for y in related {
                            if inverse.isToMany {
                                if case .joinTable = model.storage(of: r, in: e) { joinUpdates[y.objectID, default: []].insert(inverse.name) }
                            } else {
                                clears.append((y.objectID, inverse, because: id))
                            }
                        }
                    }
                }
            }
            try inboundWithoutInverse(to: id, of: e)
        }
    }

    /// References to `id` from relationships that have no inverse.
    mutating func inboundWithoutInverse(to id: ManagedObjectID, of e: EntityDescription) throws(KuraError) {
        for source in model.entities {
            for r in source.relationships where !r.isTransient && model.reciprocalInverse(of: r) == nil {
                guard let dest = model.entitiesByName[r.destination], dest.hierarchy.table == e.hierarchy.table,
                      dest === e || dest.hierarchy.kinds.contains(e.name) else { continue }
                // Declared once, on the entity that owns it (not per subentity).
                if let owner = source.hierarchy.relationshipOwners[r.name], owner != source.name { continue }
                switch model.storage(of: r, in: source) {
                case .foreignKey(let column):
                    var match: [KuraPredicate] = [.comparison(KuraComparison(.keyPath([column]), .equalTo, .constant(.integer(id.rowID))))]
                    if model.needsEntityCompanion(r.destination) {
                        match.append(.comparison(KuraComparison(.keyPath([column + ManagedObjectModel.companionSuffix]), .equalTo, .constant(.text(e.name)))))
                    }
                    for y in try scratch.storedIDs(matching: match, of: source) { clears.append((y, r, because: id)) }
                case .joinTable(let table, let forward):
                    let rows = try tx.fetch(TableQuery(table, where: .comparison(KuraComparison(.keyPath([forward ? "target" : "source"]), .equalTo, .constant(.integer(id.rowID))))))
                    for (_, row) in rows {
                        guard row.count >= 2, case .integer(let other) = row[forward ? 0 : 1] else {
                            throw KuraError(.corrupt, "join table \"\(table)\": a row without its two row IDs")
                        }
                        for y in try scratch.canonicalIDs(of: source, rowIDs: [other]) { joinUpdates[y, default: []].insert(r.name) }
                    }
                case .inverseForeignKey, .transient:
                    break  // needs an inverse / not stored; not reached
                }
            }
        }
    }

    /// Checks the plan, then writes it; returns the changes (history order:
    /// updates, then deletes).
    mutating func apply() throws(KuraError) -> [PersistentHistoryChange] {
        var problems: [String] = []
        for (id, r, related) in denials {
            let staying = related.filter { !doomedSet.contains($0) }
            if !staying.isEmpty {
                problems.append("\(id): cannot delete: relationship \"\(r.name)\" has delete rule deny and holds \(staying.map(\.description).joined(separator: ", "))")
            }
        }
        var cleared: [ManagedObjectID: [RelationshipDescription]] = [:]
        var order: [ManagedObjectID] = []
        for (y, r, because) in clears where !doomedSet.contains(y) {
            if !r.isOptional {
                problems.append("\(y): relationship \"\(r.name)\" is required (rule: not optional) and would be cleared by deleting \(because)")
            }
            if cleared[y] == nil { order.append(y) }
            if cleared[y]?.contains(where: { $0.name == r.name }) != true { cleared[y, default: []].append(r) }
        }
        if !problems.isEmpty {
            throw KuraError(.validation, "batch delete refused, nothing was deleted:\n  " + problems.joined(separator: "\n  "))
        }

        var changes: [PersistentHistoryChange] = []
        for y in order {
            guard let rs = cleared[y] else { continue }
            let x = try model.entity(y.entityName)
            guard let layout = container.layouts[x.name] else { throw PersistentContainer.missingLayout(x) }
            let t = try tx.table(x.hierarchy.table)
            guard var row = try tx.values(in: t, rowID: y.rowID) else { continue }
            layout.pad(&row)
            for r in rs {
                guard let slot = layout.relationships.first(where: { $0.name == r.name }) else { continue }
                row[slot.column] = .null
                if let c = slot.entityColumn { row[c] = .null }
                if let c = slot.orderColumn { row[c] = .null }
            }
            layout.bumpVersion(&row)
            _ = try tx.update(row, in: t, rowID: y.rowID)
            var names = Set(rs.map(\.name))
            if let more = joinUpdates.removeValue(forKey: y) { names.formUnion(more) }
            changes.append(PersistentHistoryChange(kind: .update, objectID: y, updatedProperties: names.sorted()))
        }
        for (y, names) in joinUpdates.sorted(by: { ($0.key.entityName, $0.key.rowID) < ($1.key.entityName, $1.key.rowID) }) where !doomedSet.contains(y) {
            changes.append(PersistentHistoryChange(kind: .update, objectID: y, updatedProperties: names.sorted()))
        }
        for id in doomed {
            let e = try model.entity(id.entityName)
            _ = try tx.delete(from: try tx.table(e.hierarchy.table), rowID: id.rowID)
            for table in joinTables(naming: e) {
                let column: String = table.forward ? "source" : "target"
                _ = try tx.delete(from: table.name, where: .comparison(KuraComparison(.keyPath([column]), .equalTo, .constant(.integer(id.rowID)))))
            }
            changes.append(PersistentHistoryChange(kind: .delete, objectID: id))
        }
        return changes
    }

    /// Every join table with a column naming objects of `e`: its own to-manys
    /// stored in join tables, and other entities' to-manys without inverse
    /// whose destination is `e` or an ancestor (their "target" column).
    func joinTables(naming e: EntityDescription) -> [(name: String, forward: Bool)] {
        var out: [(name: String, forward: Bool)] = []
        var seen: Set<String> = []
        for r in e.relationships where !r.isTransient {
            if case .joinTable(let t, let forward) = model.storage(of: r, in: e), seen.insert(t + "\(forward)").inserted { out.append((t, forward)) }
        }
        for source in model.entities {
            for r in source.relationships where r.isToMany && !r.isTransient && model.reciprocalInverse(of: r) == nil {
                guard let dest = model.entitiesByName[r.destination], dest.hierarchy.table == e.hierarchy.table,
                      dest === e || dest.hierarchy.kinds.contains(e.name),
                      case .joinTable(let t, _) = model.storage(of: r, in: source), seen.insert(t + "false").inserted else { continue }
                out.append((t, false))
            }
        }
        return out
    }
}
