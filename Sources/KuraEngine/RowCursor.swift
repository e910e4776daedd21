// RowCursor: iteration over a table's rows in row-ID order, inside the
// transaction that made it (the transaction layer, over BTree's `TreeCursor`).

/// A cursor over the rows of one table, forward or backward.
///
/// Lifetime: valid inside the transaction that made it; afterwards `next()`
/// throws `.misuse`. In a write transaction, rows inserted or deleted while
/// iterating are seen (or skipped) from the cursor's current position on: the
/// cursor re-finds its place by row ID after any change.
public final class RowCursor {
    let transaction: ReadTransaction
    let table: TableInfo
    let reverse: Bool
    private var cursor: TreeCursor
    private var started = false
    private var start: Int64?
    private var lastKey: [UInt8]?
    private var seenChanges = 0

    init(transaction: ReadTransaction, table: TableInfo, start: Int64?, reverse: Bool) {
        self.transaction = transaction
        self.table = table
        self.reverse = reverse
        self.start = start
        cursor = TreeCursor(tree: BTree(root: table.rootPage, kind: .table))
        // From one end of the table: a scan, which should not fill the cache.
        cursor.sequential = start == nil
    }

    /// The next row, or nil at the end.
    ///
    /// - Throws: `.corrupt` for damaged pages; `.misuse` outside the transaction.
    public func next() throws(KuraError) -> Row? {
        try transaction.checkActive()
        if let w = transaction.writer { return try step(w) }
        return try step(transaction.snapshotPages!)
    }

    private func step<S: PageSource>(_ s: S) throws(KuraError) -> Row? {
        if !started {
            started = true
            seenChanges = transaction.changeCount
            if let start {
                try RowIDKey.encode(start).withBytes { k throws(KuraError) in try cursor.seek(k, s) }
                if reverse {
                    if !cursor.isValid { try cursor.last(s) }
                    else if compareCurrent(to: start) > 0 { try cursor.previous(s) }
                }
            } else if reverse {
                try cursor.last(s)
            } else {
                try cursor.first(s)
            }
        } else if transaction.changeCount != seenChanges, let last = lastKey {
            // The tree changed under us: find our place again by key.
            seenChanges = transaction.changeCount
            try last.withBytes { k throws(KuraError) in try cursor.seek(k, s) }
            if reverse {
                if !cursor.isValid { try cursor.last(s) } else { try cursor.previous(s) }
            } else if cursor.isValid && cursor.key.elementsEqual(last) {
                try cursor.next(s)
            }
        } else {
            if reverse { try cursor.previous(s) } else { try cursor.next(s) }
        }
        guard cursor.isValid else { return nil }
        let k = cursor.key
        guard let base = k.baseAddress, let (rowID, n) = RowIDKey.decode(base, 0, k.count), n == k.count else {
            throw KuraError(.corrupt, "table \"\(table.name)\" has a key that is not a row ID", page: cursor.leaf.number)
        }
        lastKey = Array(k)
        let value = try cursor.tree.value(cursor.leaf, cursor.index, s)
        return Row(rowID: rowID, record: value)
    }

    private func compareCurrent(to rowID: Int64) -> Int {
        let k = cursor.key
        guard let base = k.baseAddress, let (v, _) = RowIDKey.decode(base, 0, k.count) else { return 0 }
        return v < rowID ? -1 : (v > rowID ? 1 : 0)
    }
}
