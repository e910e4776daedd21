// KeyedRows: the rows of a table whose integer column holds one of a few
// given values, read through an index on that column without planning a
// query: what an object layer does to read a to-many relationship (the
// members whose foreign key names the owner) or to prefetch one for many
// owners at once.
//
// A query (`select`) would do the same work after planning: parse nothing,
// but list its conjuncts, estimate each index's entries for the value, cost
// a scan against the index, and set up a cursor with its predicate compiled.
// For one owner's members those fixed costs were most of the read (a to-many
// of two members: about 36,000 instructions in the query, 2,000 in the rows).
// Here: one probe of the index per value (`probeIndex`, from the previous
// probe's path), then each row located from the previous row's path
// (`RowPath`, in a read snapshot) and lent to the caller in place.
//
// Order: the index's key order: by value (ascending, or descending for a
// descending column), then, within a value, by row ID for a one-column index
// (which is preferred) or by the index's next columns. Callers that need
// another order sort what they get.

extension ReadTransaction {
    /// Calls `body` with each row of `table` whose column `column` holds one
    /// of the integers `values` (an integer column: a foreign key), found
    /// through an index whose first column is `column`. Returns false, having
    /// called nothing, when the table has no such index: the caller then runs
    /// a query. A value given twice gives its rows once. Rows come in the
    /// index's key order (see the file header).
    ///
    /// Lifetime: a row lent to `body` is valid during the call only (in a
    /// read transaction it borrows its page; keep `Row.record` to keep the
    /// bytes). `body` must not write in this transaction.
    ///
    /// Rows whose column holds a text, real or blob that a folded or
    /// collated index would file under the same key as an integer are not
    /// given: only index entries whose first segment is the integer's exact
    /// segment match. (Foreign-key columns hold integers or null.)
    ///
    /// - Throws: `.notFound` for an unknown table; `.corrupt` for a malformed
    ///   index entry or a missing row (an index entry naming a row the table
    ///   does not have: run `kura check`), with the page where known; engine
    ///   read errors; whatever `body` throws.
    public func forEachRow(in table: String, whereInteger column: String, isOneOf values: [Int64],
                           _ body: (Row) throws(KuraError) -> Void) throws(KuraError) -> Bool {
        try checkActive()
        // A read transaction's table handle (resolved once per table and
        // snapshot), else the table resolved as a query's.
        let (info, indexes): (TableInfo, [IndexDefinition])
        if writer == nil {
            let h = try readHandle(table)
            (info, indexes) = (h.info, h.indexes)
        } else {
            let r = try resolve(TableQuery(table))
            (info, indexes) = (r.info, r.indexes)
        }
        // An index with the column first: a one-column index first (smaller
        // entries), else the first that has it.
        // (By position: iterating would copy each definition.)
        var chosen = -1
        for i in indexes.indices where indexes[i].columns.first?.name == column {
            if chosen < 0 || (indexes[i].columns.count == 1 && indexes[chosen].columns.count > 1) { chosen = i }
        }
        guard chosen >= 0 else { return false }
        if values.isEmpty { return true }
        let indexName = indexes[chosen].name
        let tree = BTree(root: info.rootPage, kind: .table)
        // The definition is lent in place (an `IndexDefinition` bound to a
        // name is a copy: a retain of each of its references, and their
        // releases, per read of a to-many).
        try indexes.withUnsafeBufferPointer { (defs) throws(KuraError) in
            if let s = snapshotPages {
                // A read snapshot: pages never change; rows borrow them, and
                // each search starts from the last one's path.
                var path = RowPath(tree: tree)
                try probeEntries(defs[chosen], values, s, near: true) { rowID throws(KuraError) in
                    let found = try RowIDKey.withEncoded(rowID) { k throws(KuraError) in try path.locate(rowID, k, s) }
                    guard let found else { throw Self.missingRow(rowID, index: indexName, table: table) }
                    try body(CandidateSource.row(rowID, found))
                }
            } else if let w = writer {
                // A write transaction's pages may change after this call: each
                // row is copied out of its page.
                try probeEntries(defs[chosen], values, w, near: false) { rowID throws(KuraError) in
                    let found = try RowIDKey.withEncoded(rowID) { k throws(KuraError) in try tree.get(k, w) }
                    guard let found else { throw Self.missingRow(rowID, index: indexName, table: table) }
                    try body(Row(rowID: rowID, record: found))
                }
            }
        }
        return true
    }

    /// Calls `body` with each position `i` of `rowIDs` and the row of
    /// `table` with ID `rowIDs[i]` (nil if the table has no such row), in
    /// order: a batch of faults loaded in one read. Rows are found from the
    /// last row's path in a read snapshot (`RowPath`), so IDs in ascending
    /// order cost the least.
    ///
    /// Lifetime: a row lent to `body` is valid during the call only (see
    /// `forEachRow(in:whereInteger:isOneOf:_:)`). `body` must not write in
    /// this transaction.
    ///
    /// - Throws: `.notFound` for an unknown table; `.corrupt` for a damaged
    ///   tree, with the page; engine read errors; whatever `body` throws.
    public func forEachRow(in table: String, rowIDs: [Int64], _ body: (Int, Row?) throws(KuraError) -> Void) throws(KuraError) {
        try checkActive()
        let info = writer == nil ? try readHandle(table).info : try self.table(table)
        let tree = BTree(root: info.rootPage, kind: .table)
        if let s = snapshotPages {
            var path = RowPath(tree: tree)
            for (i, rowID) in rowIDs.enumerated() {
                let found = try RowIDKey.withEncoded(rowID) { k throws(KuraError) in try path.locate(rowID, k, s) }
                try body(i, found.map { CandidateSource.row(rowID, $0) })
            }
        } else if let w = writer {
            for (i, rowID) in rowIDs.enumerated() {
                let found = try RowIDKey.withEncoded(rowID) { k throws(KuraError) in try tree.get(k, w) }
                try body(i, found.map { Row(rowID: rowID, record: $0) })
            }
        }
    }

    /// Calls `row` with the row ID of each entry of `index` whose first
    /// segment is the integer segment of one of `values` (each distinct
    /// value once, in key order), all of one value's entries before the
    /// next value is sought; `near`: seek from the cursor's path
    /// (`TreeCursor.seekNear`, a read snapshot's pages only). A one-column
    /// index's entry is that segment then the row ID, read without a
    /// `SearchIndex`.
    ///
    /// - Throws: `.corrupt` for an entry that does not end in a row ID;
    ///   read errors; what `row` throws.
    func probeEntries<S: PageSource>(_ index: IndexDefinition, _ values: [Int64], _ s: S, near: Bool,
                                     _ row: (Int64) throws(KuraError) -> Void) throws(KuraError) {
        let column = index.columns[0]
        // Key order: a descending column stores its segments complemented.
        let distinct = values.count == 1 ? values : Array(Set(values))
        let ordered = distinct.count == 1 ? distinct : (column.descending ? distinct.sorted(by: >) : distinct.sorted())
        let search = index.columns.count == 1 ? nil : SearchIndex(index)
        var cursor = TreeCursor(tree: index.tree)
        var seg: [UInt8] = []
        seg.reserveCapacity(16)
        // One value's row IDs: taken from the index before its rows are
        // read (the cursor's leaf and the rows' pages are apart).
        var ids: [Int64] = []
        ids.reserveCapacity(8)
        for value in ordered {
            seg.removeAll(keepingCapacity: true)
            IndexKey.append(.integer(value), descending: column.descending, folded: column.folded, to: &seg)
            ids.removeAll(keepingCapacity: true)
            try seg.withBytes { b throws(KuraError) in
                if near { try cursor.seekNear(b, s) } else { try cursor.seek(b, s) }
                while cursor.isValid {
                    let k = cursor.key
                    // Both are non-empty past the count test (a segment has a tag byte).
                    guard k.count >= b.count, memcmpBytes(k.baseAddress!, b.baseAddress!, b.count) == 0 else { break }
                    if let search {
                        ids.append(try search.rowID(k))
                    } else {
                        // The segment is self-delimiting: the row ID follows it.
                        guard let (v, n) = RowIDKey.decode(k.baseAddress!, b.count, k.count), b.count + n == k.count else {
                            throw KuraError(.corrupt, "index \"\(index.name)\" has a key that does not end in a row ID", page: index.info.rootPage)
                        }
                        ids.append(v)
                    }
                    try cursor.next(s)
                }
            }
            for id in ids { try row(id) }
        }
    }

    /// The error for an index entry naming a row its table does not have.
    private static func missingRow(_ rowID: Int64, index: String, table: String) -> KuraError {
        KuraError(.corrupt, "index \"\(index)\" names row \(rowID), which table \"\(table)\" does not have; run `kura check` on the store")
    }
}
