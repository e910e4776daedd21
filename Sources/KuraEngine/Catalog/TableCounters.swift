// TableCounters: each table's row count and next row ID, kept apart from its
// catalog record (FORMAT.md, "Table counters").
//
// Format 5 keeps them at the end of the table tree's right-most leaf (flag bit
// 0 of the page's byte 1, then 16 bytes before the checksum; Node.swift). An
// insert at the end of a table writes that leaf anyway, so a commit that
// appends rows writes no page for the counters. The commit writes them
// (`storeInLeaf`) for every table whose counters changed or whose tree it
// changed, since a split or a merge may have moved or rebuilt that leaf.
//
// Formats 2 to 4 keep them in the counters tree. The counters tree is a table tree whose root the header names (offset 56,
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

    // MARK: Format 5: the right-most leaf

    /// The right-most leaf of the table tree rooted at `root`.
    static func rightmostLeaf<S: PageSource>(of root: UInt32, _ s: S) throws(KuraError) -> (leaf: Page, path: [(page: UInt32, index: Int)]) {
        let t = tree(root)
        var path: [(page: UInt32, index: Int)] = []
        var p = try t.node(root, s)
        while !p.isLeafNode {
            guard path.count < BTree.maxDepth else { throw t.depthError(p.number) }
            path.append((p.number, p.cellCount))
            p = try t.node(p.rightChild, s)
        }
        return (p, path)
    }

    /// The counters of table `name` (catalog ID `id`), from the right-most leaf
    /// of its tree rooted at `root` (format 5).
    ///
    /// - Throws: `.corrupt` naming the table and the page if that leaf has no
    ///   counters or holds impossible ones (a next row ID below 1, a negative count).
    static func inLeaf<S: PageSource>(table name: String, id: Int64, root: UInt32, _ s: S) throws(KuraError) -> TableCounters {
        let leaf = try rightmostLeaf(of: root, s).leaf
        guard let (next, count) = leaf.tableCounters else {
            throw KuraError(.corrupt, "the right-most leaf of table \"\(name)\" (catalog ID \(id)) holds no counters; run `kura check` on the store", page: leaf.number)
        }
        guard next >= 1, count >= 0 else {
            throw KuraError(.corrupt, "the counters of table \"\(name)\" (catalog ID \(id)) are malformed: next row ID \(next), row count \(count)", page: leaf.number)
        }
        return TableCounters(nextRowID: next, rowCount: count)
    }

    /// Writes `c` at the end of the right-most leaf of the table tree rooted
    /// at `root` (format 5), unless it holds them already. A leaf that had no
    /// counters and has fewer than 16 bytes free first gives its last cell to
    /// a new right-most leaf (`BTree.splitOffLastCell`).
    static func storeInLeaf(_ c: TableCounters, root: UInt32, _ w: PageWriter) throws(KuraError) {
        // The tree's append hint, while valid (no page allocated or freed
        // since it was recorded, so no split, merge or root move: see
        // BTree+Insert.swift), names its right-most leaf as the tree is now:
        // a commit after appends stores the counters there without a descent.
        // A leaf without room for them takes the descent below, which splits.
        if let hint = w.appendHint(for: root) {
            let leaf = try w.page(hint.leaf)
            if leaf.isLeafNode {
                if let held = leaf.tableCounters, held.nextRowID == c.nextRowID, held.rowCount == c.rowCount { return }
                if try w.writable(hint.leaf).setTableCounters(nextRowID: c.nextRowID, rowCount: c.rowCount) { return }
            }
        }
        // Two rounds at most: a leaf split off holds one cell, so it has room.
        for _ in 0..<2 {
            let (leaf, path) = try rightmostLeaf(of: root, w)
            if let held = leaf.tableCounters, held.nextRowID == c.nextRowID, held.rowCount == c.rowCount { return }
            let page = try w.writable(leaf.number)
            if page.setTableCounters(nextRowID: c.nextRowID, rowCount: c.rowCount) { return }
            try tree(root).splitOffLastCell(of: leaf.number, path: path[...], w)
        }
        throw KuraError(.corrupt, "the right-most leaf of the tree rooted at page \(root) has no room for its counters after a split", page: root)
    }

    /// Removes the entry of catalog ID `id` (nothing if there is none).
    static func remove(id: Int64, root: UInt32, _ w: PageWriter) throws(KuraError) {
        try tree(root).delete(RowIDKey.encode(id), w)
    }
}
