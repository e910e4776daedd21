// BTree+BulkLoad: builds a tree from keys already in order, page by page.
//
// Used when an index is created on a filled table: the keys are sorted once
// (KeySorter, streamed from its merge) and written into full leaf pages left to
// right; each finished page becomes a child of the interior level above it,
// built at the same time (a child's last key is its separator; the last child of
// each interior page is its right-most child), so memory does not grow with the
// number of keys. The finished top page is copied into the tree's root page,
// whose number never changes. No key is inserted through the search path, so
// building costs one write per page. Leaf cells are packed into one reused
// buffer (`BulkLoader`), not an array per cell.

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
        var loader = BulkLoader(tree: self, w)
        while let (key, value) = try next() {
            if value.isEmpty {
                try key.withBytes { k throws(KuraError) in try loader.append(key: k) }
            } else {
                let cell = try makeLeafCell(key, value, w)
                try cell.withBytes { c throws(KuraError) in try loader.append(cell: c, keyLength: key.count) }
            }
        }
        try loader.finish()
    }

    /// Builds a tree left to right from keys in strictly increasing order (see
    /// the header): leaf cells are packed into one reused buffer and written to
    /// a page when the next one does not fit; finished pages become children of
    /// the interior levels above. Used once: `append` then `finish`.
    struct BulkLoader {
        let tree: BTree
        let w: PageWriter
        /// Bytes for cells and pointers in an interior page.
        let capacity: Int
        /// Bytes for cells and pointers in a leaf of the writer's form.
        let leafCapacity: Int
        /// The leaves' form (`BTree.leafFlags`).
        let form: UInt8
        /// Whether the leaves hold compact cells.
        var compact: Bool { form & Node.compactFlag != 0 }
        var levels: [InteriorLevel] = []
        /// The cells of the leaf being filled, back to back, and where each ends.
        var cells: [UInt8] = []
        var cellEnds: [Int] = []
        /// Byte offset in `cells` of the last cell's key, and its length.
        var lastKey: (offset: Int, length: Int) = (0, 0)

        init(tree: BTree, _ w: PageWriter) {
            self.tree = tree
            self.w = w
            capacity = Node.usable(w.pageSize) - Node.headerSize
            form = tree.leafFlags(w)
            leafCapacity = Node.usable(w.pageSize) - Node.headerSize(flags: form)
            cells.reserveCapacity(leafCapacity)
        }

        /// Appends a key with an empty value (an index entry), in the leaves'
        /// form: `kl key 00` wide, `kl key` in a compact index leaf, `key 00`
        /// in a compact table leaf (whose key must be a row-ID key).
        mutating func append(key: UnsafeRawBufferPointer) throws(KuraError) {
            precondition(key.count <= Node.maxKey(w.pageSize))
            let table = tree.kind == .table
            let lengthBytes = compact && table ? 0 : Varint.size(UInt64(key.count))
            let valueBytes = compact && !table ? 0 : 1
            let size = lengthBytes + key.count + valueBytes
            if cells.count + 2 * cellEnds.count + size + 2 > leafCapacity { try flushLeaf() }
            if lengthBytes > 0 { Varint.append(UInt64(key.count), to: &cells) }
            lastKey = (cells.count, key.count)
            cells.append(contentsOf: key)
            if valueBytes > 0 { cells.append(0) }
            cellEnds.append(cells.count)
        }

        /// Appends a whole leaf cell (`makeLeafCell`, wide form) whose key is
        /// `keyLength` bytes, in the leaves' form.
        mutating func append(cell wide: UnsafeRawBufferPointer, keyLength: Int) throws(KuraError) {
            let r = compact ? Node.compactRange(ofWide: wide, table: tree.kind == .table) : 0..<wide.count
            let cell = UnsafeRawBufferPointer(rebasing: wide[r])
            if cells.count + 2 * cellEnds.count + cell.count + 2 > leafCapacity { try flushLeaf() }
            // The key starts after its length, which a compact table cell lacks.
            lastKey = (cells.count + (compact && tree.kind == .table ? 0 : Varint.size(UInt64(keyLength))), keyLength)
            cells.append(contentsOf: cell)
            cellEnds.append(cells.count)
        }

        /// Writes the pending cells as a leaf page, a child of the level above.
        private mutating func flushLeaf() throws(KuraError) {
            guard !cellEnds.isEmpty else { return }
            let p = try w.allocate()
            Node.initialize(p, kind: tree.kind.leaf, treeRoot: tree.root, form: form)
            var top = Node.usable(p.size)
            let base = p.cellPointerStart
            var start = 0
            cells.withUnsafeBytes { c in
                for (i, end) in cellEnds.enumerated() {
                    top -= end - start
                    (p.bytes + top).copyMemory(from: c.baseAddress! + start, byteCount: end - start)
                    p.setU16(base + 2 * i, UInt16(top))
                    start = end
                }
            }
            p.contentStart = top
            p.cellCount = cellEnds.count
            let child: Child = (p.number, Array(cells[lastKey.offset..<(lastKey.offset + lastKey.length)]))
            cells.removeAll(keepingCapacity: true)
            cellEnds.removeAll(keepingCapacity: true)
            try add(child, at: 0)
        }

        /// Adds a finished page at `depth` (0: a leaf) as a child of the level above.
        private mutating func add(_ child: Child, at depth: Int) throws(KuraError) {
            if depth == levels.count {
                guard depth < BTree.maxDepth else { throw tree.depthError(tree.root) }
                levels.append(InteriorLevel())
            }
            if let page = levels[depth].add(child, capacity: capacity) {
                try add(try write(page), at: depth + 1)
            }
        }

        private func write(_ page: InteriorPage) throws(KuraError) -> Child {
            let p = try w.allocate()
            let cells = page.children.dropLast().map { BTree.interiorCell(child: $0.page, key: $0.lastKey[...]) }
            p.rebuild(kind: tree.kind.interior, treeRoot: tree.root, cells: cells[...], rightChild: page.children[page.children.count - 1].page)
            return (p.number, page.children[page.children.count - 1].lastKey)
        }

        /// Writes what is pending and moves the top page into the tree's root.
        mutating func finish() throws(KuraError) {
            try flushLeaf()
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
            let rootPage = try w.writable(tree.root)
            rootPage.bytes.copyMemory(from: topPage.bytes, byteCount: topPage.size)
            try w.free(topPage.number)
        }
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
