// TableHandle: one table resolved once for a transaction — catalog entry with
// its counters, schema, indexes, tree, and (read side) the column map queries
// compile against — so row operations and queries do no lookup by name.
//
// Write transactions keep the table they last wrote as their `HotTable` (the
// same type): its counters are updated in place and written back to the
// catalog before anything else reads or changes it (Transaction.swift).
//
// Read transactions keep one handle per table they touch (`readHandle`). A read
// transaction's snapshot never changes, so a handle stays right for the whole
// transaction: its schema, indexes and root come from the catalog of that
// snapshot and its counters from the counters tree of that snapshot. Handles are
// not kept across transactions: the counters of a table (row count, next row
// ID) change with every commit, and a handle carries them.
//
// Invariant: `info.id`, `info.name` and `info.rootPage` identify the table; a
// caller holding a `TableInfo` uses a handle only if id and name match (a table
// dropped and re-created under the same name has a new catalog ID).

final class TableHandle {
    var info: TableInfo
    let schema: TableSchema?
    let indexes: [IndexDefinition]
    let tree: BTree
    /// One past the highest column position any index reads (0 without indexes).
    let indexedWidth: Int
    var dirty = false
    /// Reused buffers locating the indexed columns of an old and a new record.
    var oldFields: RecordFields
    var newFields: RecordFields
    /// Column names to positions, made on first use by a query.
    private var columnMap: ColumnMap?

    init(info: TableInfo, schema: TableSchema?, indexes: [IndexDefinition]) {
        self.info = info
        self.schema = schema
        self.indexes = indexes
        tree = BTree(root: info.rootPage, kind: .table)
        indexedWidth = indexes.lazy.flatMap { $0.columns.lazy.map { $0.position + 1 } }.max() ?? 0
        oldFields = RecordFields(columns: indexedWidth)
        newFields = RecordFields(columns: indexedWidth)
    }

    /// Whether `table` names this handle's table (same catalog ID and name).
    @inline(__always)
    func isHandle(of table: TableInfo) -> Bool { info.id == table.id && info.name == table.name }

    /// The table's column map (made once).
    var columns: ColumnMap {
        if let c = columnMap { return c }
        let c = ColumnMap(table: info.name, schema: schema)
        columnMap = c
        return c
    }

    /// For each index, whether its key may differ between the records `old`
    /// and `new`: false only when every column it reads has the same serial
    /// type and body bytes in both (equal bytes give equal keys). A column
    /// missing from one record (written before the column was added) counts
    /// as changed, so its key is built and compared as before.
    ///
    /// - Throws: `.corrupt` if either record's header is malformed.
    func indexesChanged(old: [UInt8], new: [UInt8]) throws(KuraError) -> [Bool] {
        try old.withBytes { o throws(KuraError) -> [Bool] in
            try new.withBytes { n throws(KuraError) -> [Bool] in
                try oldFields.load(o)
                try newFields.load(n)
                return indexes.map { index in
                    index.columns.contains { !oldFields.sameField($0.position, as: newFields) }
                }
            }
        }
    }
}
