// TreeStatistics: space used by one table or index tree (for `kura stats`,
// benchmarks and the fill tests).

/// Space used by one tree.
public struct TreeStatistics: Sendable, Equatable {
    public var leafPages = 0
    public var interiorPages = 0
    public var overflowPages = 0
    /// Cells in leaves (rows of a table, entries of an index).
    public var entries = 0
    /// Bytes of cells and cell pointers in leaf pages.
    public var leafBytesUsed = 0
    /// Bytes available for cells in leaf pages.
    public var leafBytesAvailable = 0
    /// Depth of the tree (1 = the root is a leaf).
    public var depth = 0

    /// Average fill of leaf pages, 0...1.
    public var leafFill: Double { leafBytesAvailable == 0 ? 0 : Double(leafBytesUsed) / Double(leafBytesAvailable) }
    /// Every page of the tree.
    public var totalPages: Int { leafPages + interiorPages + overflowPages }
}

extension ReadTransaction {
    /// Walks `table`'s tree and measures it.
    ///
    /// - Throws: `.corrupt` if a page does not decode.
    public func statistics(of table: TableInfo) throws(KuraError) -> TreeStatistics {
        try checkActive()
        let tree = BTree(root: table.rootPage, kind: table.kind == "index" ? .index : .table)
        if let w = writer { return try tree.statistics(w) }
        return try tree.statistics(snapshotPages!)
    }

    /// The store's change counter in this transaction's snapshot: it increases
    /// by one with every commit that changes something (FORMAT.md, "The header
    /// page"), never goes back, and is the same for every connection that
    /// reads the same snapshot. In a write transaction it is the counter
    /// before the transaction; its commit makes it one more.
    public var changeCounter: UInt64 {
        get throws(KuraError) {
            try checkActive()
            if let w = writer { return w.snapshot.changeCounter }
            return snapshotPages!.snapshot.changeCounter
        }
    }

    /// Pages in the store (its size is this times the page size).
    public var pageCount: Int {
        get throws(KuraError) {
            try checkActive()
            return Int(try headerPage().headerPageCount)
        }
    }

    /// Pages on the freelist.
    public var freePageCount: Int {
        get throws(KuraError) {
            try checkActive()
            return Int(try headerPage().headerFreeCount)
        }
    }

    /// Page 1 as the transaction sees it, for reading only: a write
    /// transaction's may be the snapshot's page, shared with readers.
    func headerPage() throws(KuraError) -> Page {
        if let w = writer { return w.currentHeader }
        return try snapshotPages!.page(1)
    }
}

extension BTree {
    func statistics<S: PageSource>(_ s: S) throws(KuraError) -> TreeStatistics {
        var st = TreeStatistics()
        var stack: [(UInt32, Int)] = [(root, 1)]
        while let (number, depth) = stack.popLast() {
            guard depth <= Self.maxDepth else { throw depthError(number) }
            let p = try node(number, s)
            st.depth = max(st.depth, depth)
            if p.isLeafNode {
                st.leafPages += 1
                st.entries += p.cellCount
                st.leafBytesUsed += p.usedSpace
                st.leafBytesAvailable += p.contentEnd - p.cellPointerStart
                for i in 0..<p.cellCount { st.overflowPages += try overflowPages(p, i, s).count }
            } else {
                st.interiorPages += 1
                for i in 0...p.cellCount { stack.append((p.child(i), depth + 1)) }
            }
        }
        return st
    }
}
