// BTree+BulkLoad: builds a tree from keys already in order, page by page.
//
// Used when an index is created on a filled table: the keys are sorted once
// (KeySorter, streamed from its merge) and written into full leaf pages left to
// right; each finished page becomes a child of the interior level above it,
// built at the same time (a child's last key is its separator; the last child of
// each interior page is its right-most child), so memory does not grow with the
// number of keys. The finished top page is copied into the tree's root page,
// whose number never changes. No key is inserted through the search path, so
// building costs one write per page.

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
    /// until it returns nil; keys must be strictly increasing. Memory stays
    /// bounded whatever the count: one leaf's cells, and per interior level at
    /// most two pages' worth of children (see `InteriorLevel`).
    func bulkLoad(_ w: PageWriter, next: () throws(KuraError) -> (key: [UInt8], value: [UInt8])?) throws(KuraError) {
        let capacity = Node.usable(w.pageSize) - Node.headerSize
        var levels: [InteriorLevel] = []
        var cells: [[UInt8]] = []
        var used = 0

        /// Adds a finished page at `depth` (0: a leaf) as a child of the level above.
        func add(_ child: Child, at depth: Int) throws(KuraError) {
            if depth == levels.count {
                guard depth < Self.maxDepth else { throw depthError(root) }
                levels.append(InteriorLevel())
            }
            if let page = levels[depth].add(child, capacity: capacity) {
                try add(try write(page), at: depth + 1)
            }
        }
        func write(_ page: InteriorPage) throws(KuraError) -> Child {
            let p = try w.allocate()
            let cells = page.children.dropLast().map { Self.interiorCell(child: $0.page, key: $0.lastKey[...]) }
            p.rebuild(kind: kind.interior, treeRoot: root, cells: cells[...], rightChild: page.children[page.children.count - 1].page)
            return (p.number, page.children[page.children.count - 1].lastKey)
        }
        func flushLeaf() throws(KuraError) {
            let p = try w.allocate()
            p.rebuild(kind: kind.leaf, treeRoot: root, cells: cells[...], rightChild: 0)
            let child: Child = (p.number, Array(Self.leafCellKey(cells[cells.count - 1])))
            cells.removeAll(keepingCapacity: true)
            used = 0
            try add(child, at: 0)
        }
        while let (key, value) = try next() {
            let cell = try makeLeafCell(key, value, w)
            if used + cell.count + 2 > capacity { try flushLeaf() }
            cells.append(cell)
            used += cell.count + 2
        }
        if !cells.isEmpty { try flushLeaf() }
        guard !levels.isEmpty else { return }

        // Finish the levels bottom up; the first level that received one child
        // in all holds the top page.
        var depth = 0
        var top: Child
        while true {
            if levels[depth].total == 1, let only = levels[depth].pending.first {
                top = only
                break
            }
            for page in levels[depth].finish() { try add(try write(page), at: depth + 1) }
            depth += 1
        }
        let topPage = try w.writable(top.page)
        let rootPage = try w.writable(root)
        rootPage.bytes.copyMemory(from: topPage.bytes, byteCount: topPage.size)
        try w.free(topPage.number)
    }

    typealias Child = (page: UInt32, lastKey: [UInt8])

    /// An interior page to write: all children but the last become cells (a
    /// child's last key is its separator), the last is the right-most child.
    struct InteriorPage {
        var children: [Child]
    }

    /// One interior level being built left to right. Children are taken greedily
    /// while their cells fit a page; the child whose cell does not fit becomes
    /// that page's right-most child. A finished page is held back until the
    /// level is finished or the next page is ready, so the last page never gets
    /// a lone child with no cells when the page before it can spare one.
    struct InteriorLevel {
        var pending: [Child] = []
        var pendingBytes = 0
        var held: InteriorPage?
        /// Children received in all.
        var total = 0

        /// Takes `child`; returns a page ready to write, if one is.
        mutating func add(_ child: Child, capacity: Int) -> InteriorPage? {
            total += 1
            let size = BTree.interiorCell(child: child.page, key: child.lastKey[...]).count + 2
            guard !pending.isEmpty, pendingBytes + size > capacity else {
                pending.append(child)
                pendingBytes += size
                return nil
            }
            let ready = held
            held = InteriorPage(children: pending + [child])
            pending = []
            pendingBytes = 0
            return ready
        }

        /// The pages left to write, in order.
        mutating func finish() -> [InteriorPage] {
            var out: [InteriorPage] = []
            if var h = held {
                if pending.count == 1 && h.children.count > 2 {
                    pending.insert(h.children.removeLast(), at: 0)
                }
                out.append(h)
            }
            if !pending.isEmpty { out.append(InteriorPage(children: pending)) }
            held = nil
            pending = []
            return out
        }
    }
}
