// KeyMover: the migration steps that move a relationship's keys to the other
// side when a to-one becomes a to-many whose inverse is a to-one (one-to-one →
// one-to-many: the keys live in the inverse's column) or back (SchemaPlan.swift,
// phase 4). Both stream: the table holding the keys is read in row-ID order in
// batches of `RowRewriter.batchSize`, and each batch's targets are read and
// written by row ID before the next batch is read. No map of keys is held: a
// conflict is seen in the store itself, because the column written starts
// empty (to-many → to-one: a new column) or must hold nothing else
// (to-one → to-many: the inverse's key of a one-to-one).
// The same holds for a to-many kept in a join table becoming a to-one
// (`joinRowsToKeys`: the join table is read, the new key column written).
// Row IDs do not change. A conflict (an object that would get two targets)
// throws `.validation` naming it, and the caller's transaction rolls back.

import Foundation
import KuraEngine

struct KeyMover {
    let tx: WriteTransaction
    let path: String
    let progress: MigrationProgressReporter?

    private func corrupt(_ why: String) -> KuraError {
        KuraError(.corrupt, why + " during the migration (a Kura bug)", path: path)
    }

    /// Reads `table` in batches: `body` gets each row (rows of `kinds` only,
    /// when given) and returns the writes to make once the batch is read.
    private func batches(_ table: String, kinds: Set<String>?,
                         _ body: (Int64, [Value], TableSchema) throws(KuraError) -> (rowID: Int64, value: Value, kind: String)?,
                         write: ((rowID: Int64, value: Value, kind: String)) throws(KuraError) -> Void) throws(KuraError) {
        var info = try tx.table(table)
        guard let schema = try tx.schema(of: info) else { throw corrupt("table \"\(table)\" lost its schema") }
        let ep = schema.position(of: ManagedObjectModel.entityColumn)
        let total = Int(info.rowCount)
        var start: Int64? = nil
        var done = 0
        while true {
            var writes: [(rowID: Int64, value: Value, kind: String)] = []
            var last: Int64?
            var n = 0
            let rows = try tx.rows(in: info, from: start)
            while n < RowRewriter.batchSize, let row = try rows.next() {
                n += 1
                done += 1
                last = row.rowID
                if let progress, done % RowRewriter.progressEvery == 0 { progress.rows(done, of: total) }
                let values = try row.values()
                if let kinds, let ep {
                    guard ep < values.count, case .text(let k) = values[ep], kinds.contains(k) else { continue }
                }
                if let w = try body(row.rowID, values, schema) { writes.append(w) }
            }
            for w in writes { try write(w) }
            info = try tx.table(table)
            guard let l = last, n == RowRewriter.batchSize, l < Int64.max else { break }
            start = l + 1
        }
        progress?.rows(done, of: total)
    }

    private func kind(_ values: [Value], _ schema: TableSchema, default name: String) -> String {
        if let p = schema.position(of: ManagedObjectModel.entityColumn), p < values.count, case .text(let k) = values[p] { return k }
        return name
    }

    /// To-one → to-many through the inverse's key: each key of `column` in
    /// `table` (objects of `entity`) is written into `inverseColumn` (and its
    /// `_entity` companion) of the target's row in `inverseTable`.
    func keysToInverse(table: String, column: String, kinds: Set<String>?, inverseTable: String, inverseColumn: String,
                       entity: String, relationship: String) throws(KuraError) {
        let inv = try tx.table(inverseTable)
        guard let invSchema = try tx.schema(of: inv), let q = invSchema.position(of: inverseColumn) else {
            throw corrupt("table \"\(inverseTable)\" lost column \"\(inverseColumn)\"")
        }
        let qc = invSchema.position(of: inverseColumn + ManagedObjectModel.companionSuffix)
        guard let p = try tx.schema(of: try tx.table(table))?.position(of: column) else { throw corrupt("table \"\(table)\" lost column \"\(column)\"") }
        try batches(table, kinds: kinds, { (rowID, values, schema) throws(KuraError) in
            guard p < values.count, case .integer(let target) = values[p] else { return nil }
            return (target, .integer(rowID), kind(values, schema, default: entity))
        }, write: { w throws(KuraError) in
            guard case .integer(let mine) = w.value else { return }
            guard var row = try tx.values(in: inv, rowID: w.rowID) else {
                throw KuraError(.validation, "cannot make \(entity).\(relationship) to-many: object kura:///\(w.kind)/p\(mine) points at row \(w.rowID) of \"\(inverseTable)\", which does not exist; clear it in a custom migration stage; the store was left as it was", path: path)
            }
            while row.count < invSchema.columns.count { row.append(invSchema.columns[row.count].defaultValue) }
            if row[q] == .integer(mine), qc.map({ row[$0] == .text(w.kind) }) ?? true { return }
            if case .integer(let other) = row[q], other != mine {
                throw KuraError(.validation, "cannot make \(entity).\(relationship) to-many: objects p\(other) and kura:///\(w.kind)/p\(mine) both claim object row \(w.rowID) of \"\(inverseTable)\" through \(inverseColumn); resolve it in a custom migration stage; the store was left as it was", path: path)
            }
            row[q] = .integer(mine)
            if let qc { row[qc] = .text(w.kind) }
            try tx.update(row, in: inv, rowID: w.rowID)
        })
    }

    /// To-many through the inverse's key → to-one: each key of
    /// `inverseColumn` in `inverseTable` (objects of `inverseEntity`) sets
    /// `column` (and `companion`) of the object it points at in `table`; an
    /// object pointed at by several fails the migration naming it.
    func inverseKeysToKeys(table: String, column: String, companion: String?, inverseTable: String, inverseColumn: String,
                           inverseKinds: Set<String>?, inverseEntity: String, entity: String, relationship: String) throws(KuraError) {
        let mine = try tx.table(table)
        guard let schema = try tx.schema(of: mine), let p = schema.position(of: column) else { throw corrupt("table \"\(table)\" lost column \"\(column)\"") }
        let pc = companion.flatMap { schema.position(of: $0) }
        guard let q = try tx.schema(of: try tx.table(inverseTable))?.position(of: inverseColumn) else {
            throw corrupt("table \"\(inverseTable)\" lost column \"\(inverseColumn)\"")
        }
        try batches(inverseTable, kinds: inverseKinds, { (rowID, values, schema) throws(KuraError) in
            guard q < values.count, case .integer(let owner) = values[q] else { return nil }
            return (owner, .integer(rowID), kind(values, schema, default: inverseEntity))
        }, write: { w throws(KuraError) in
            guard case .integer(let target) = w.value else { return }
            guard var row = try tx.values(in: mine, rowID: w.rowID) else { return }  // a dangling inverse key: nothing to set
            while row.count < schema.columns.count { row.append(schema.columns[row.count].defaultValue) }
            if row[p] == .integer(target) { return }
            if case .integer(let other) = row[p] {
                throw KuraError(.validation, "cannot make \(entity).\(relationship) to-one: object kura:///\(kind(row, schema, default: entity))/p\(w.rowID) has several (row IDs \(other) and \(target)); reduce them to one in a custom migration stage first; the store was left as it was", path: path)
            }
            row[p] = .integer(target)
            if let pc { row[pc] = .text(w.kind) }
            try tx.update(row, in: mine, rowID: w.rowID)
        })
    }

    /// To-many through join table `join` → to-one: each join row sets
    /// `column` of its object in `table` (the `source` side when `forward`);
    /// an object with two targets fails the migration naming it. The caller
    /// drops the join table.
    func joinRowsToKeys(table: String, column: String, join: String, forward: Bool, entity: String, relationship: String) throws(KuraError) {
        let mine = try tx.table(table)
        guard let schema = try tx.schema(of: mine), let p = schema.position(of: column) else { throw corrupt("table \"\(table)\" lost column \"\(column)\"") }
        try batches(join, kinds: nil, { (rowID, values, _) throws(KuraError) in
            guard values.count >= 2, case .integer(let s) = values[0], case .integer(let t) = values[1] else {
                throw KuraError(.corrupt, "row \(rowID) of join table \"\(join)\" does not hold two row IDs; run `kura check` on the store", path: path)
            }
            return forward ? (s, .integer(t), entity) : (t, .integer(s), entity)
        }, write: { w throws(KuraError) in
            guard case .integer(let target) = w.value else { return }
            guard var row = try tx.values(in: mine, rowID: w.rowID) else { return }  // a join row of a vanished object: nothing to set
            while row.count < schema.columns.count { row.append(schema.columns[row.count].defaultValue) }
            if row[p] == .integer(target) { return }
            if case .integer(let other) = row[p] {
                throw KuraError(.validation, "cannot make \(entity).\(relationship) to-one: object kura:///\(entity)/p\(w.rowID) has several (row IDs \(other) and \(target)); reduce them to one in a custom migration stage first; the store was left as it was", path: path)
            }
            row[p] = .integer(target)
            try tx.update(row, in: mine, rowID: w.rowID)
        })
    }
}
