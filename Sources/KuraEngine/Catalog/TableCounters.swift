// TableCounters: each table's row count and next row ID, kept apart from its
// catalog record (FORMAT.md, "Table counters").
//
// The counters tree is a table tree whose root the header names (offset 56,
// format 2). Each row, keyed by the table's catalog ID, is a record:
//
//     0  next row ID   integer: the row ID the next insert without one gets
//     1  row count     integer, >= 0
//
// Why a tree of its own: a commit that inserts or deletes rows changes these two
// numbers and nothing else about the table. Kept in the catalog record (format
// 1), every such commit rewrote the catalog and made every connection decode the
// whole catalog again. Kept here, such a commit writes one counters page (as it
// wrote one catalog page before) and leaves the catalog and the schema cookie
// alone, so decoded catalogs stay valid until a schema change.
//
// Invariants: every table of the catalog has exactly one entry; indexes have
// none; no entry names a catalog ID that is not a table (kura check verifies
// all three, and the counters against the trees).

/// A table's row count and next row ID.
struct TableCounters: Equatable {
    var nextRowID: Int64
    var rowCount: Int64

    var record: [UInt8] { RecordCodec.encode([.integer(nextRowID), .integer(rowCount)]) }

    /// Decodes an entry; throws `corrupt` naming the table's catalog ID and the page.
    init(id: Int64, record: [UInt8], page: UInt32) throws(KuraError) {
        let v = try RecordCodec.decode(record)
        guard v.count >= 2, case .integer(let next) = v[0], case .integer(let count) = v[1], count >= 0, next >= 1 else {
            throw KuraError(.corrupt, "counters entry of catalog ID \(id) is malformed", page: page)
        }
        nextRowID = next
        rowCount = count
    }

    init(nextRowID: Int64, rowCount: Int64) {
        self.nextRowID = nextRowID
        self.rowCount = rowCount
    }

    static func tree(_ root: UInt32) -> BTree { BTree(root: root, kind: .table) }

    /// The counters of the table with catalog ID `id`, or nil if it has none.
    static func get<S: PageSource>(_ id: Int64, root: UInt32, _ s: S) throws(KuraError) -> TableCounters? {
        guard let bytes = try tree(root).get(RowIDKey.encode(id), s) else { return nil }
        return try TableCounters(id: id, record: bytes, page: root)
    }

    /// Every entry of the counters tree by catalog ID.
    static func loadAll<S: PageSource>(root: UInt32, _ s: S) throws(KuraError) -> [Int64: TableCounters] {
        var out: [Int64: TableCounters] = [:]
        guard root != 0 else { return out }
        let t = tree(root)
        var cursor = TreeCursor(tree: t)
        try cursor.first(s)
        while cursor.isValid {
            let leaf = cursor.leaf
            let (ko, kl) = leaf.cellKey(cursor.index)
            guard let (id, n) = RowIDKey.decode(leaf.bytes, ko, ko + kl), n == kl else {
                throw KuraError(.corrupt, "counters key is not a catalog ID", page: leaf.number)
            }
            out[id] = try TableCounters(id: id, record: t.value(leaf, cursor.index, s), page: leaf.number)
            try cursor.next(s)
        }
        return out
    }

    /// Writes the entry of catalog ID `id`.
    static func store(_ c: TableCounters, id: Int64, root: UInt32, _ w: PageWriter) throws(KuraError) {
        try tree(root).insert(RowIDKey.encode(id), c.record, mode: .upsert, w)
    }

    /// Removes the entry of catalog ID `id` (nothing if there is none).
    static func remove(id: Int64, root: UInt32, _ w: PageWriter) throws(KuraError) {
        try tree(root).delete(RowIDKey.encode(id), w)
    }
}
