// BTree+BulkLoad: builds a tree from keys already in order, page by page.
//
// Used when an index is created on a filled table: the keys are sorted once
// (KeySorter, streamed from its merge) and written into full leaf pages left to right, then each interior level is built
// from the level below (a child's last key is its separator; the last child of
// each interior page is its right-most child). The finished top page is copied
// into the tree's root page, whose number never changes. No key is inserted
// through the search path, so building costs one write per page.

extension BTree {
    /// Replaces the contents of this (empty) tree with `keys` → `values`.
    /// `keys` must be strictly increasing; `values` empty or of the same count.
    func bulkLoad(keys: [[UInt8]], values: [[UInt8]] = [], _ w: PageWriter) throws(KuraError) {
        precondition(values.isEmpty || values.count == keys.count)
        var i = 0
        try bulkLoad(w) { () throws(KuraError) -> (key: [UInt8], value: [UInt8])? in
            guard i < keys.count else { return nil }
            defer { i += 1 }
            return (keys[i], values.isEmpty ? [] : values[i])
        }
    }

    /// Replaces the contents of this (empty) tree with the pairs `next` returns
    /// until it returns nil; keys must be strictly increasing. Holds one leaf's
    /// cells and one (page, last key) pair per leaf while building.
    func bulkLoad(_ w: PageWriter, next: () throws(KuraError) -> (key: [UInt8], value: [UInt8])?) throws(KuraError) {
        let capacity = Node.usable(w.pageSize) - Node.headerSize
        var level: [(page: UInt32, lastKey: [UInt8])] = []
        var cells: [[UInt8]] = []
        var used = 0

        func flushLeaf() throws(KuraError) {
            let p = try w.allocate()
            p.rebuild(kind: kind.leaf, treeRoot: root, cells: cells[...], rightChild: 0)
            level.append((p.number, Array(Self.leafCellKey(cells[cells.count - 1]))))
            cells.removeAll(keepingCapacity: true)
            used = 0
        }
        while let (key, value) = try next() {
            let cell = try makeLeafCell(key, value, w)
            if used + cell.count + 2 > capacity { try flushLeaf() }
            cells.append(cell)
            used += cell.count + 2
        }
        if !cells.isEmpty { try flushLeaf() }
        guard !level.isEmpty else { return }

        var depth = 0
        while level.count > 1 {
            depth += 1
            guard depth < Self.maxDepth else { throw depthError(root) }
            var next: [(page: UInt32, lastKey: [UInt8])] = []
            var i = 0
            while i < level.count {
                // Children level[i...j-1] become cells; level[j] the right-most child.
                var cells: [[UInt8]] = []
                var used = 0
                var j = i
                while j < level.count - 1 {
                    let cell = Self.interiorCell(child: level[j].page, key: level[j].lastKey[...])
                    if used + cell.count + 2 > capacity {
                        // Never leave a lone child for a last page with no cells.
                        if level.count - (j + 1) == 1 && cells.count > 1 {
                            cells.removeLast()
                            j -= 1
                        }
                        break
                    }
                    cells.append(cell)
                    used += cell.count + 2
                    j += 1
                }
                let p = try w.allocate()
                p.rebuild(kind: kind.interior, treeRoot: root, cells: cells[...], rightChild: level[j].page)
                next.append((p.number, level[j].lastKey))
                i = j + 1
            }
            level = next
        }
        let top = try w.writable(level[0].page)
        let rootPage = try w.writable(root)
        rootPage.bytes.copyMemory(from: top.bytes, byteCount: top.size)
        try w.free(top.number)
    }
}
