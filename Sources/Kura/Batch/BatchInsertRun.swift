// BatchInsertRun: the rows of one batch insert, written as they come inside
// the batch's write transaction (a refusal later in the batch rolls them all
// back). Each dictionary becomes a full row: given values, defaults for the
// rest, the `_entity` column of a shared table, version 1. Uniqueness
// constraints are checked against the store as the transaction sees it
// (earlier objects of the same batch included) before the row is written.

import Foundation

struct BatchInsertRun {
    let container: PersistentContainer
    let entity: EntityDescription
    let tx: WriteTransaction
    let scratch: ManagedObjectContext
    let rule: BatchInsertConflictRule
    /// The inserted (or, with `.updateExisting`, updated) objects, in order.
    var affected: [ManagedObjectID] = []
    var changes: [PersistentHistoryChange] = []
    /// Position of the next dictionary in the batch (0-based).
    var position = 0
    /// The position of each object this batch inserted.
    var insertedAt: [ManagedObjectID: Int] = [:]

    init(container: PersistentContainer, entity: EntityDescription, tx: WriteTransaction, scratch: ManagedObjectContext, rule: BatchInsertConflictRule) {
        self.container = container
        self.entity = entity
        self.tx = tx
        self.scratch = scratch
        self.rule = rule
    }

    mutating func add(_ d: [String: Any]) throws(KuraError) {
        defer { position += 1 }
        let e = entity
        let at = "batch insert into \"\(e.name)\", object \(position)"
        for key in d.keys.sorted() where e.attributesByName[key] == nil || e.attributesByName[key]?.isTransient == true {
            _ = try located { () throws(KuraError) in try PersistentContainer.batchAttribute(e, key, "batch insert into") }
        }
        // Stored values: given ones converted and checked, defaults for the rest.
        var given: [(AttributeDescription, Value)] = []
        var all: [(AttributeDescription, Value)] = []
        for a in e.attributes where !a.isTransient {
            if let raw = d[a.name] {
                let v = try located { () throws(KuraError) in try a.storedValue(PersistentContainer.unwrapped(raw), entity: e.name) }
                given.append((a, v))
                all.append((a, v))
            } else {
                all.append((a, a.defaultValue.map { a.type.stored($0) } ?? .null))
            }
        }
        let label = ManagedObjectID.temporary(e.name)
        do { try PersistentContainer.checkValues(all, of: label) } catch {
            throw KuraError(error.code, error.message.replacingOccurrences(of: "\(label)", with: at))
        }
        guard let layout = container.layouts[e.name] else { throw PersistentContainer.missingLayout(e) }
        let t = try tx.table(e.hierarchy.table)

        if let existing = try existingMatch(all) {
            guard rule == .updateExisting else {
                throw KuraError(.constraintViolation, "\(at): uniqueness constraint (\(existing.constraint.joined(separator: ", "))) violated: \(insertedAt[existing.id].map { "object \($0) of this batch" } ?? "\(existing.id)") already has \(existing.shown); nothing was written")
            }
            let x = try container.model.entity(existing.id.entityName)
            guard let xl = container.layouts[x.name] else { throw PersistentContainer.missingLayout(x) }
            guard var row = try tx.values(in: t, rowID: existing.id.rowID) else { return }
            for (a, v) in given { try xl.set(a, v, in: &row, entity: x) }
            xl.bumpVersion(&row)
            do { _ = try tx.update(row, in: t, rowID: existing.id.rowID) } catch { throw PersistentContainer.located(error, at) }
            affected.append(existing.id)
            changes.append(PersistentHistoryChange(kind: .update, objectID: existing.id, updatedProperties: given.map(\.0.name).sorted()))
            return
        }

        var row = [Value](repeating: .null, count: layout.columns.count)
        for (a, v) in all { try layout.set(a, v, in: &row, entity: e) }
        if let c = layout.entityColumn { row[c] = .text(e.name) }
        row[layout.version] = .integer(1)
        let rowID: Int64
        do { rowID = try tx.insert(row, into: t) } catch { throw PersistentContainer.located(error, at) }
        let id = ManagedObjectID(entity: e.name, rowID: rowID)
        affected.append(id)
        insertedAt[id] = position
        changes.append(PersistentHistoryChange(kind: .insert, objectID: id))
    }

    /// The first stored object holding the same values as `values` for one of
    /// the entity's uniqueness constraints (across the constraint's scope).
    func existingMatch(_ values: [(AttributeDescription, Value)]) throws(KuraError) -> (id: ManagedObjectID, constraint: [String], shown: String)? {
        let e = entity
        var byName: [String: Value] = [:]
        for (a, v) in values { byName[a.name] = v }
        for (i, group) in e.uniquenessConstraints.enumerated() {
            let vs = group.map { byName[$0] ?? .null }
            if vs.contains(where: \.isNull) { continue }
            let scope = i < e.hierarchy.uniquenessScopes.count ? e.hierarchy.uniquenessScopes[i] : e.name
            let conjuncts: [KuraPredicate] = zip(group, vs).map { k, v in
                .comparison(KuraComparison(.keyPath([k]), .equalTo, .constant(e.attributesByName[k]?.type.engineValue(v) ?? v)))
            }
            let ids = try scratch.storedIDs(matching: conjuncts, of: container.model.entitiesByName[scope] ?? e)
            if let id = ids.first {
                return (id, group, zip(group, vs).map { "\($0) = \($1)" }.joined(separator: ", "))
            }
        }
        return nil
    }

    /// Runs `body`, prefixing an error with the object's position.
    func located<T>(_ body: () throws(KuraError) -> T) throws(KuraError) -> T {
        do { return try body() } catch { throw PersistentContainer.located(error, "batch insert into \"\(entity.name)\", object \(position)") }
    }
}
