// RowRewriter: the migration steps that read every row of one table and
// rewrite the rows whose value changes (SchemaPlan.swift, phases 3 to 5).
//
// Rows are read in row-ID order in batches of `batchSize`; the batch's
// changed rows are written back before the next batch is read, so the cursor
// never walks a tree it changed and the rewriter holds one batch at a time
// (the transaction itself keeps the changed pages until commit). Row IDs do
// not change, so object IDs and foreign keys stay valid. In a table shared by
// a hierarchy, only rows whose `_entity` is one of `kinds` are touched.
// A value that does not convert, or a required value missing, throws
// `.validation` naming the attribute and the object(s); the caller's
// transaction then rolls back.

import Foundation
import KuraEngine

/// Where a migration is (``StagedMigration/progress``): called on the
/// migrating thread at the start of each step and every 10,000 rows a step
/// reads. Counts are of the table the step reads; steps that read no rows
/// report 0 of 0.
public struct MigrationProgress: Sendable, Equatable {
    /// The stage being applied (1-based) and how many there are.
    public let stage: Int
    public let stageCount: Int
    /// What the step does (a ``StoreChange`` description).
    public let step: String
    /// Rows read so far by this step, and rows in its table.
    public let completedRows: Int
    public let totalRows: Int
}

/// Calls a progress callback with the current stage (not thread-safe: used
/// on the migrating thread only).
final class MigrationProgressReporter {
    let callback: @Sendable (MigrationProgress) -> Void
    var stage = 1
    var stageCount = 1
    var step = ""
    init(_ callback: @escaping @Sendable (MigrationProgress) -> Void) { self.callback = callback }
    func begin(_ step: String) {
        self.step = step
        callback(MigrationProgress(stage: stage, stageCount: stageCount, step: step, completedRows: 0, totalRows: 0))
    }
    func rows(_ done: Int, of total: Int) {
        callback(MigrationProgress(stage: stage, stageCount: stageCount, step: step, completedRows: done, totalRows: total))
    }
}

struct RowRewriter {
    let tx: WriteTransaction
    let table: String
    let kinds: Set<String>?
    let path: String
    let progress: MigrationProgressReporter?
    static let batchSize = 4_096
    static let progressEvery = 10_000

    /// Calls `body` with each row's values as stored (columns added after the
    /// row was written are absent) and writes back the rows it changed.
    func forEachRow(_ body: (Int64, inout [Value]) throws(KuraError) -> Bool) throws(KuraError) {
        var info = try tx.table(table)
        let total = Int(info.rowCount)
        let entityPosition = kinds == nil ? nil : try tx.schema(of: info)?.position(of: ManagedObjectModel.entityColumn)
        var start: Int64? = nil
        var done = 0
        while true {
            var batch: [(Int64, [Value])] = []
            let rows = try tx.rows(in: info, from: start)
            var last: Int64?
            while batch.count < Self.batchSize, let row = try rows.next() {
                last = row.rowID
                done += 1
                if let progress, done % Self.progressEvery == 0 { progress.rows(done, of: total) }
                var values = try row.values()  // as stored: trailing columns added later are absent
                if let kinds, let p = entityPosition {
                    guard p < values.count, case .text(let e) = values[p], kinds.contains(e) else { continue }
                }
                if try body(row.rowID, &values) { batch.append((row.rowID, values)) }
            }
            for (rowID, values) in batch { try tx.update(values, in: info, rowID: rowID) }
            info = try tx.table(table)
            guard let l = last, l < Int64.max else { break }
            start = l + 1
            if batch.count < Self.batchSize, try tx.rows(in: info, from: start).next() == nil { break }
        }
        progress?.rows(done, of: total)
    }

    /// The object an error names.
    func object(_ entity: String, _ rowID: Int64, _ values: [Value], _ schema: TableSchema?) -> String {
        if kinds != nil, let p = schema?.position(of: ManagedObjectModel.entityColumn), p < values.count, case .text(let e) = values[p] {
            return "kura:///\(e)/p\(rowID)"
        }
        return "kura:///\(entity)/p\(rowID)"
    }

    /// Converts (or checks) `column` from `from` to `to`; changes the
    /// column's type in the schema first when the column type changes.
    func convert(column: String, entity: String, attribute: String, from: AttributeType, to: AttributeType, definition: ColumnDefinition) throws(KuraError) {
        let info = try tx.table(table)
        guard let schema = try tx.schema(of: info), let p = schema.position(of: column) else {
            throw KuraError(.corrupt, "table \"\(table)\" lost column \"\(column)\" during the migration (a Kura bug)", path: path)
        }
        if schema.columns[p].type != definition.type || schema.columns[p].defaultValue != definition.defaultValue {
            var columns = schema.columns
            columns[p] = ColumnDefinition(column, definition.type, nullable: schema.columns[p].isNullable, default: definition.defaultValue)
            try tx.setDefinition(try TableSchema(columns).encoded, of: info)
        }
        let rewrite = schema.columns[p].type != definition.type
        try forEachRow { (rowID, values) throws(KuraError) -> Bool in
            guard p < values.count else { return false }
            let old = values[p]
            guard let new = AttributeConversion.convert(old, from: from, to: to) else {
                throw KuraError(.validation, "cannot migrate \(entity).\(attribute) from \(from.rawValue) to \(to.rawValue): object \(object(entity, rowID, values, schema)) holds \(old), which does not convert exactly; the store was left as it was (convert it in a custom migration stage)", path: path)
            }
            values[p] = new
            return rewrite && new != .null
        }
    }

    /// Fills nulls of `column` with `fill`, or reports the objects holding null.
    func require(column: String, entity: String, property: String, fill: Value?) throws(KuraError) {
        let info = try tx.table(table)
        let schema = try tx.schema(of: info)
        guard let p = schema?.position(of: column) else {
            throw KuraError(.corrupt, "table \"\(table)\" lost column \"\(column)\" during the migration (a Kura bug)", path: path)
        }
        var missing: [String] = []
        var count = 0
        let columns = schema?.columns ?? []
        try forEachRow { (rowID, values) throws(KuraError) -> Bool in
            guard (p < values.count ? values[p] : columns[p].defaultValue) == .null else { return false }
            if let fill {
                while values.count <= p { values.append(columns[values.count].defaultValue) }
                values[p] = fill
                return true
            }
            count += 1
            if missing.count < 5 { missing.append(object(entity, rowID, values, schema)) }
            return false
        }
        if count > 0 {
            throw KuraError(.validation, "cannot make \(entity).\(property) required: \(count) object\(count == 1 ? " has" : "s have") no value (\(missing.joined(separator: ", "))\(count > missing.count ? ", ..." : "")); give it a default or fill it in a custom migration stage; the store was left as it was", path: path)
        }
    }
}
