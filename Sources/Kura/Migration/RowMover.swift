// RowMover: the migration steps for changes of inheritance and entity renames
// inside a hierarchy (SchemaPlan.swift, phase 3), which change the table an
// object lives in or the entity name its row carries.
//
// Layout reminder (EntityHierarchy.swift): a hierarchy's objects live in one
// table named after its root, each row naming its entity in `_entity`; a to-one
// key is a row ID, with a `<name>_entity` companion naming the target's entity
// when the destination has subentities; a join table holds row IDs of both
// sides.
//
// Steps, in this order inside one write transaction:
//   - `renameKinds`: `_entity` and every companion column of a table rewritten
//     where they hold a renamed entity's old name (rows whose value changes);
//   - `move`: the rows of the moving entities (by `_entity`, mapped through
//     the renames; every row of an unshared table) read from the source table
//     in row-ID order, in batches, each batch inserted into the target table
//     (columns matched by name, through renaming identifiers when the source
//     table goes; `_entity` set to the row's entity; columns the target lacks
//     dropped; columns the source lacks at their default) and deleted from the
//     source (external values travel as bytes: new files written, the old
//     released). Row IDs are kept when the target never allocated them (a table
//     created by this migration: a hierarchy split keeps every object ID);
//     otherwise every moved row ID gets the same offset (the target's next row
//     ID minus the smallest moved one), so the remap below is arithmetic and
//     needs no map in memory. A source table that no model table continues is
//     dropped once empty;
//   - `remapKeys` (only after a move): every to-one key of every entity table
//     whose target moved (its companion's entity, else the relationship's
//     stored destination) gets the offset, and a key whose target is no longer
//     of the destination's hierarchy fails the migration naming the object;
//     every join-table side whose stored entities all moved gets the offset; a
//     side some of whose stored entities moved is checked row by row (a row
//     relating an object that left the side's table fails the migration).
// Memory: one batch of rows; no map of row IDs.
//
// History: `_kura_history` rows are not rewritten. They name objects by entity
// and row ID as of their save; after a move with an offset (an entity merged
// into an existing hierarchy) the earlier history of those objects names
// their old IDs. A split, a rename in place and a merge without collision keep
// the IDs, so their history still resolves (a renamed entity's under its old
// name, as for any entity rename).

import Foundation
import KuraEngine

struct RowMover {
    let tx: WriteTransaction
    let path: String
    let progress: MigrationProgressReporter?

    /// A move done in this transaction: the moved entities (model names), the
    /// table they left and the one they joined, and the row-ID offset.
    struct Moved {
        let kinds: Set<String>
        let source: String
        let target: String
        let offset: Int64
    }

    private func corrupt(_ why: String) -> KuraError {
        KuraError(.corrupt, why + "; run `kura check` on the store", path: path)
    }

    /// Rewrites `_entity` and the companion columns `companions` of `table`
    /// where they hold a key of `renames`.
    func renameKinds(table: String, companions: [String], renames: [String: String]) throws(KuraError) {
        guard let schema = try tx.schema(of: try tx.table(table)) else { return }
        let positions = ([ManagedObjectModel.entityColumn] + companions).compactMap { schema.position(of: $0) }
        guard !positions.isEmpty else { return }
        try RowRewriter(tx: tx, table: table, kinds: nil, path: path, progress: progress).forEachRow { (_, values) throws(KuraError) -> Bool in
            var changed = false
            for p in positions where p < values.count {
                if case .text(let k) = values[p], let n = renames[k], n != k {
                    values[p] = .text(n)
                    changed = true
                }
            }
            return changed
        }
    }

    /// Moves the rows of `kinds` (model names; a row's entity is its `_entity`
    /// mapped through `renames`, or `unsharedEntity` in a table without
    /// `_entity`) from `source` into `target`. `columnSources` maps a target
    /// column to the source column it continues when their names differ.
    /// Drops `source` afterwards when `dropSource`.
    func move(from source: String, to target: String, kinds: Set<String>, unsharedEntity: String, renames: [String: String],
              columnSources: [String: String], dropSource: Bool) throws(KuraError) -> Moved {
        var src = try tx.table(source)
        var dst = try tx.table(target)
        guard let sSchema = try tx.schema(of: src), let tSchema = try tx.schema(of: dst) else {
            throw corrupt("table \"\(source)\" or \"\(target)\" has no schema")
        }
        let ep = sSchema.position(of: ManagedObjectModel.entityColumn)
        func kind(_ values: [Value], _ rowID: Int64) throws(KuraError) -> String? {
            guard let ep else { return kinds.contains(unsharedEntity) ? unsharedEntity : nil }
            guard ep < values.count, case .text(let k) = values[ep] else {
                throw corrupt("row \(rowID) of table \"\(source)\" names no entity in \(ManagedObjectModel.entityColumn)")
            }
            let n = renames[k] ?? k
            return kinds.contains(n) ? n : nil
        }
        // Target position → source position (nil: the target column's default).
        let map: [Int?] = tSchema.columns.map { sSchema.position(of: columnSources[$0.name] ?? $0.name) }
        let targetEntity = tSchema.position(of: ManagedObjectModel.entityColumn)
        // A record holds an external value's reference; the row is read whole
        // (its files' bytes) so the insert writes the target's own files and
        // the delete releases the source's.
        let external = sSchema.columns.contains { $0.type == .external }
        // The offset: none when the target never allocated the smallest moved ID.
        var first: Int64?
        let scan = try tx.rows(in: src)
        while let row = try scan.next() {
            if try kind(try row.values(), row.rowID) != nil { first = row.rowID; break }
        }
        guard let first else {
            if dropSource { try tx.dropTable(source) }
            return Moved(kinds: kinds, source: source, target: target, offset: 0)
        }
        let offset = first < dst.nextRowID ? dst.nextRowID - first : 0
        let total = Int(src.rowCount)
        var done = 0
        var start: Int64? = first
        while true {
            var batch: [(Int64, [Value])] = []
            var last: Int64?
            let rows = try tx.rows(in: src, from: start)
            while batch.count < RowRewriter.batchSize, let row = try rows.next() {
                last = row.rowID
                done += 1
                if let progress, done % RowRewriter.progressEvery == 0 { progress.rows(done, of: total) }
                var values = try row.values()
                guard let k = try kind(values, row.rowID) else { continue }
                if external, let whole = try tx.values(in: src, rowID: row.rowID) { values = whole }
                var out = [Value]()
                out.reserveCapacity(tSchema.columns.count)
                for (i, p) in map.enumerated() {
                    if i == targetEntity {
                        out.append(.text(k))
                    } else if let p {
                        out.append(p < values.count ? values[p] : sSchema.columns[p].defaultValue)
                    } else {
                        out.append(tSchema.columns[i].defaultValue)
                    }
                }
                batch.append((row.rowID, out))
            }
            for (rowID, values) in batch {
                let (newID, overflow) = rowID.addingReportingOverflow(offset)
                guard !overflow, newID < Int64.max else {
                    throw KuraError(.tooBig, "cannot move row \(rowID) of table \"\(source)\" into \"\(target)\": its row IDs are exhausted", path: path)
                }
                do {
                    try tx.insert(values, into: dst, rowID: newID)
                } catch where error.code == .constraintViolation {
                    throw KuraError(.validation, "cannot move object kura:///\(source)/p\(rowID) into table \"\(target)\": \(error.message); the store was left as it was", path: path)
                }
                _ = try tx.delete(from: src, rowID: rowID)
            }
            src = try tx.table(source)
            dst = try tx.table(target)
            guard let l = last, l < Int64.max else { break }
            start = l + 1
        }
        progress?.rows(done, of: total)
        if dropSource {
            guard try tx.rowCount(try tx.table(source)) == 0 else {
                let rows = try tx.rows(in: try tx.table(source))
                let left = try rows.next()
                throw KuraError(.validation, "table \"\(source)\" still holds objects after its entities moved to \"\(target)\" (row \(left?.rowID ?? 0) is of an entity the model no longer has); delete them in a custom migration stage; the store was left as it was", path: path)
            }
            try tx.dropTable(source)
        }
        return Moved(kinds: kinds, source: source, target: target, offset: offset)
    }

    /// A to-one key column to remap: its table, column, companion column (if
    /// any), the entity a key without companion value points at (model name;
    /// nil: a key new in this migration), the destination and its kinds, and
    /// what an error names.
    struct Key {
        let table: String
        let column: String
        let companion: String?
        let storedTarget: String?
        let destination: String
        let destinationKinds: Set<String>
        let label: String
    }

    /// A join-table side: the table, its column (0 source, 1 target), the
    /// side's stored entities (model names) and the table its objects live in.
    struct JoinSide {
        let join: String
        let column: Int
        let storedKinds: Set<String>
        let sideTable: String
        let label: String
    }

    /// Adds each move's offset to the keys and join rows pointing at moved
    /// objects, and checks every key still points into its destination.
    func remap(_ moved: [Moved], keys: [Key], sides: [JoinSide], entityOf: (String, [Value], Int64, TableSchema) -> String) throws(KuraError) {
        func offset(of kind: String) -> Int64? { moved.first { $0.kinds.contains(kind) }?.offset }
        var byTable: [String: [Key]] = [:]
        for k in keys { byTable[k.table, default: []].append(k) }
        for (table, keys) in byTable.sorted(by: { $0.key < $1.key }) {
            let info = try tx.table(table)
            guard let schema = try tx.schema(of: info) else { continue }
            let cols = keys.compactMap { k -> (Key, Int, Int?)? in
                schema.position(of: k.column).map { (k, $0, k.companion.flatMap { schema.position(of: $0) }) }
            }
            guard !cols.isEmpty else { continue }
            try RowRewriter(tx: tx, table: table, kinds: nil, path: path, progress: progress).forEachRow { (rowID, values) throws(KuraError) -> Bool in
                var changed = false
                for (k, p, q) in cols where p < values.count {
                    guard case .integer(let id) = values[p] else { continue }
                    var kind = k.storedTarget
                    if let q, q < values.count, case .text(let c) = values[q] { kind = c }
                    guard let kind else { continue }
                    guard k.destinationKinds.contains(kind) else {
                        throw KuraError(.validation, "cannot migrate \(k.label): object kura:///\(entityOf(table, values, rowID, schema))/p\(rowID) points at an object of entity \(kind) (row \(id)), which the model no longer makes a \(k.destination); clear or move it in a custom migration stage; the store was left as it was", path: path)
                    }
                    if let o = offset(of: kind), o != 0 {
                        values[p] = .integer(id + o)
                        changed = true
                    }
                }
                return changed
            }
        }
        for s in sides {
            let touching = moved.filter { !$0.kinds.isDisjoint(with: s.storedKinds) }
            guard !touching.isEmpty else { continue }
            if touching.count == 1, let m = touching.first, s.storedKinds.isSubset(of: m.kinds) {
                guard m.offset != 0 else { continue }
                try RowRewriter(tx: tx, table: s.join, kinds: nil, path: path, progress: progress).forEachRow { (_, values) throws(KuraError) -> Bool in
                    guard s.column < values.count, case .integer(let id) = values[s.column] else { return false }
                    values[s.column] = .integer(id + m.offset)
                    return true
                }
                continue
            }
            if touching.contains(where: { $0.offset != 0 }) {
                throw KuraError(.validation, "cannot migrate \(s.label): some of its objects move to another table under new row IDs and others stay; split the hierarchy in a custom migration stage; the store was left as it was", path: path)
            }
            // Some of the side's objects left its table (IDs kept): each row must still find its object.
            let side = try tx.table(s.sideTable)
            try RowRewriter(tx: tx, table: s.join, kinds: nil, path: path, progress: progress).forEachRow { (rowID, values) throws(KuraError) -> Bool in
                guard s.column < values.count, case .integer(let id) = values[s.column] else { return false }
                if try !tx.contains(side, rowID: id) {
                    throw KuraError(.validation, "cannot migrate \(s.label): join row \(rowID) of \"\(s.join)\" relates object row \(id), whose entity is no longer in \(s.sideTable)'s hierarchy; remove the relationship in a custom migration stage; the store was left as it was", path: path)
                }
                return false
            }
        }
    }

    /// Checks that every non-null value of `column` in `table` is one of
    /// `allowed` (an `_entity` or companion column about to be retired).
    func checkKinds(table: String, column: String, allowed: Set<String>, label: String) throws(KuraError) {
        guard let p = try tx.schema(of: try tx.table(table))?.position(of: column) else { return }
        var bad: [String] = []
        var count = 0
        try RowRewriter(tx: tx, table: table, kinds: nil, path: path, progress: progress).forEachRow { (rowID, values) throws(KuraError) -> Bool in
            guard p < values.count, case .text(let k) = values[p], !allowed.contains(k) else { return false }
            count += 1
            if bad.count < 5 { bad.append(column == ManagedObjectModel.entityColumn ? "kura:///\(k)/p\(rowID)" : "kura:///\(table)/p\(rowID) (→ \(k))") }
            return false
        }
        if count > 0 {
            throw KuraError(.validation, "cannot migrate \(label): \(count) object\(count == 1 ? "" : "s") \(count == 1 ? "is" : "are") of an entity the model no longer has there (\(bad.joined(separator: ", "))\(count > bad.count ? ", ..." : "")); delete or move them in a custom migration stage; the store was left as it was", path: path)
        }
    }
}
