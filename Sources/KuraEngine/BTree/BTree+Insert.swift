// BTree+Insert: insertion, overflow chains and node splits.
//
// A cell that fits goes into its leaf in place. Otherwise the node splits:
//   - when the new cell goes after the last cell of a page that is its parent's
//     right-most child (appending keys in order), the split keeps every old cell
//     in the old page and starts the new page with the new cell (an interior
//     page moves its second-to-last cell up), so sequential inserts fill pages;
//   - any other split divides the bytes evenly;
//   - an interior split moves its middle cell's key up;
//   - the root splits by moving its contents to a new child first, so the root
//     page number never changes.
//
// Append hint: row IDs are allocated increasing, so most inserts go past the
// last key of the tree. An insert that lands at the end of the right-most leaf
// without allocating or freeing a page records that right-most path (page
// numbers) in the writer (`PageWriter.setAppendHint`) with the writer's
// structure epoch. The next insert of a key greater than that leaf's last key
// goes straight to the leaf while the epoch is unchanged: no page was
// allocated or freed since, so no split, merge or root move happened and the
// path still is the tree's right-most one (a redistribution between the
// right-most leaf and its left sibling keeps both in place). The leaf is read
// fresh (by number) each time, so deletes and replacements in it, spilling
// and reading back are all seen. A split through the hint uses the recorded
// path; it allocates, so the next insert descends and records a new hint.

extension BTree {
    enum InsertMode {
        /// Fail (return false) if the key exists.
        case insertNew
        /// Replace the value if the key exists.
        case upsert
        /// Replace the value; return false (changing nothing) if the key is absent.
        case replaceExisting
    }

    /// Inserts `key` -> `value`. Returns false (changing nothing) if the key
    /// exists and `mode` is `.insertNew`; with `.upsert` replaces the value.
    @discardableResult
    func insert(_ key: [UInt8], _ value: [UInt8], mode: InsertMode, _ w: PageWriter) throws(KuraError) -> Bool {
        precondition(key.count <= Node.maxKey(w.pageSize))
        // Table keys are row-ID keys (compact table leaves rely on it: their
        // keys give their own length), index entries have no value. Callers
        // encode keys themselves; compaction checks keys it copies from disk.
        assert(kind == .index ? value.isEmpty : RowIDKey.decode(key) != nil, "a table key that is not a row-ID key, or an index entry with a value")
        if mode != .replaceExisting, try appendThroughHint(key, value, w) { return true }
        if mode == .insertNew {
            if let done = try insertInLastLeaf(key, value, w) { return done }
        } else if let done = try replaceInLastLeaf(key, value, mode: mode, w) {
            return done
        }
        let epoch = w.structureEpoch
        var path: [(page: UInt32, index: Int)] = []
        let (leafNo, i, exists, rightmost) = try key.withBytes { k throws(KuraError) -> (UInt32, Int, Bool, Bool) in
                let leaf = try descend(k, w, path: &path)
                let i = leaf.lowerBound(k)
                let n = leaf.cellCount
                return (leaf.number, i, i < n && leaf.compareKey(i, k) == 0, i == n)
        }
        if !exists && mode == .replaceExisting { return false }
        if !exists && rightmost {
            // Past the leaf's last key: if every step took the right-most child,
            // this is the tree's end; record its path unless the insert below
            // splits (allocates), which changes it.
            var onEdge = true
            for step in path {
                if try w.page(step.page).cellCount != step.index { onEdge = false; break }
            }
            if onEdge {
                try putLeafCell(key, value, at: i, into: leafNo, path: path[...], w)
                if w.structureEpoch == epoch {
                    w.setAppendHint(AppendHint(root: root, epoch: epoch, interior: path.map(\.page), leaf: leafNo))
                }
                return true
            }
        }
        if exists {
            if mode == .insertNew { return false }
            let leaf = try w.page(leafNo)
            // A same-size record without overflow (an update of fixed-size
            // columns) is overwritten in place: no fragment, no defragmentation.
            let old = leaf.leafValue(i)
            if old.overflow == 0 {
                let layout = Node.leafLayout(keyLength: key.count, valueLength: value.count, pageSize: w.pageSize)
                if !layout.overflow && value.count == old.length {
                    let page = try w.writable(leafNo)
                    if !value.isEmpty {
                        value.withUnsafeBytes { (page.bytes + old.offset).copyMemory(from: $0.baseAddress!, byteCount: value.count) }
                    }
                    w.rememberLeaf(leafNo, of: root)
                    return true
                }
            }
            let overflow = try overflowPages(leaf, i, w)
            if overflow.isEmpty {
                let layout = Node.leafLayout(keyLength: key.count, valueLength: value.count, pageSize: w.pageSize)
                if !layout.overflow {
                    // A new size, no overflow either side: in place or in the
                    // free gap when it fits there (no defragmentation, no split).
                    let cell = try makeLeafCell(key, value, w)
                    if try w.writable(leafNo).replaceCell(i, with: cell) {
                        w.rememberLeaf(leafNo, of: root)
                        return true
                    }
                }
            }
            for p in overflow { try w.free(p) }
            try w.writable(leafNo).removeCell(i)
        }
        try putLeafCell(key, value, at: i, into: leafNo, path: path[...], w)
        if w.structureEpoch == epoch { w.rememberLeaf(leafNo, of: root) }
        return true
    }

    /// Puts the cell `key` -> `value` at position `i` of leaf `leafNo`
    /// (reached by `path`): written in place when it fits (`insertFitting`),
    /// else built (`makeLeafCell`, with its overflow chain) and inserted
    /// with the splits it needs (`insertCell`).
    private func putLeafCell(_ key: [UInt8], _ value: [UInt8], at i: Int, into leafNo: UInt32,
                             path: ArraySlice<(page: UInt32, index: Int)>, _ w: PageWriter) throws(KuraError) {
        if try insertFitting(key, value, at: i, into: leafNo, w) { return }
        let cell = try makeLeafCell(key, value, w)
        try insertCell(cell, at: i, into: leafNo, path: path, w)
    }

    /// Writes the cell `key` -> `value` as cell `i` of leaf `leafNo` when it
    /// needs no overflow chain and fits the leaf's free space with its
    /// pointer: in place, with no cell array built (`makeLeafCell`). False,
    /// changing nothing, otherwise (the caller splits).
    private func insertFitting(_ key: [UInt8], _ value: [UInt8], at i: Int, into leafNo: UInt32, _ w: PageWriter) throws(KuraError) -> Bool {
        let leaf = try w.page(leafNo)
        let layout = Node.leafLayout(keyLength: key.count, valueLength: value.count, pageSize: w.pageSize)
        guard !layout.overflow else { return false }
        let stored = leaf.storedSize(ofLeafCell: layout.size)
        guard leaf.freeSpace >= stored + 2 else { return false }
        try w.writable(leafNo).insertLeafCell(key, value, at: i, size: stored, compact: leaf.isCompactLeaf, table: kind == .table)
        return true
    }

    /// For `.insertNew`: when `key` lies strictly between the first and the
    /// last key of the leaf the writer remembers for this tree
    /// (`PageWriter.lastLeaf`, a leaf of this tree while the structure epoch
    /// is unchanged), that leaf is where it belongs: returns false if the
    /// leaf holds it, else writes it there when it fits (`insertFitting`)
    /// and returns true. Nil, changing nothing, in every other case (the
    /// caller descends). Inserts that cluster (an index's entries for a few
    /// values, rows written back in key order) skip the descent.
    private func insertInLastLeaf(_ key: [UInt8], _ value: [UInt8], _ w: PageWriter) throws(KuraError) -> Bool? {
        guard let leafNo = w.lastLeaf(of: root) else { return nil }
        let leaf = try node(leafNo, w)
        guard leaf.isLeafNode else { return nil }
        let n = leaf.cellCount
        guard n >= 2 else { return nil }
        let slot = key.withUnsafeBytes { k -> Int? in
            guard leaf.compareKey(0, k) < 0, leaf.compareKey(n - 1, k) > 0 else { return nil }
            let i = leaf.lowerBound(k)
            return leaf.compareKey(i, k) == 0 ? -1 : i
        }
        guard let i = slot else { return nil }
        if i < 0 { return false }
        return try insertFitting(key, value, at: i, into: leafNo, w) ? true : nil
    }

    /// The leaf the writer remembers for this tree (`PageWriter.lastLeaf`), and
    /// the slot of `key` in it, if it holds `key`; nil otherwise. Shared by the
    /// replace and delete that skip a descent.
    func findInLastLeaf(_ key: [UInt8], _ w: PageWriter) throws(KuraError) -> (UInt32, Page, Int)? {
        try key.withBytes { k throws(KuraError) in try findInLastLeaf(k, w) }
    }

    /// `findInLastLeaf` for a key in place.
    func findInLastLeaf(_ key: UnsafeRawBufferPointer, _ w: PageWriter) throws(KuraError) -> (UInt32, Page, Int)? {
        guard let leafNo = w.lastLeaf(of: root) else { return nil }
        let leaf = try node(leafNo, w)
        guard leaf.isLeafNode else { return nil }
        guard let i = leaf.slot(of: key, rowID: rowID(ofKey: key)) else { return nil }
        return (leafNo, leaf, i)
    }

    /// The leaf holding `key` and its slot, for a writer: through the leaf it
    /// remembers for this tree first (rows read and then written in row-ID
    /// order, as a save does, mostly share it), else by a descent, whose leaf
    /// is remembered for the next read or write; nil if the tree has no `key`.
    func writerSlot(of key: UnsafeRawBufferPointer, _ w: PageWriter) throws(KuraError) -> (leaf: Page, index: Int)? {
        if let (_, leaf, i) = try findInLastLeaf(key, w) { return (leaf, i) }
        let id = rowID(ofKey: key)
        let leaf = try leaf(for: key, rowID: id, w)
        w.rememberLeaf(leaf.number, of: root)
        guard let i = leaf.slot(of: key, rowID: id) else { return nil }
        return (leaf, i)
    }

    /// `get` for a writer, through `writerSlot`.
    func getThroughLastLeaf(_ key: [UInt8], _ w: PageWriter) throws(KuraError) -> [UInt8]? {
        try key.withBytes { k throws(KuraError) -> [UInt8]? in
            guard let (leaf, i) = try writerSlot(of: k, w) else { return nil }
            return try value(leaf, i, w)
        }
    }

    /// When `key` is in the leaf the writer remembers for this tree
    /// (`PageWriter.lastLeaf`: a leaf of this tree, since no page was allocated
    /// or freed after it was remembered): with `.insertNew` returns false; else
    /// replaces the value in that leaf if the new cell fits there without an
    /// overflow chain (old or new) and returns true. Nil, changing nothing,
    /// in every other case (the caller descends).
    private func replaceInLastLeaf(_ key: [UInt8], _ value: [UInt8], mode: InsertMode, _ w: PageWriter) throws(KuraError) -> Bool? {
        guard let (leafNo, leaf, i) = try findInLastLeaf(key, w) else { return nil }
        if mode == .insertNew { return false }
        let old = leaf.leafValue(i)
        let layout = Node.leafLayout(keyLength: key.count, valueLength: value.count, pageSize: w.pageSize)
        guard old.overflow == 0, !layout.overflow else { return nil }
        if value.count == old.length {
            let page = try w.writable(leafNo)
            if !value.isEmpty {
                value.withUnsafeBytes { (page.bytes + old.offset).copyMemory(from: $0.baseAddress!, byteCount: value.count) }
            }
            return true
        }
        // Removing the old cell frees its bytes and its pointer.
        guard leaf.freeSpace + leaf.cellSize(i) >= leaf.storedSize(ofLeafCell: layout.size) else { return nil }
        let page = try w.writable(leafNo)
        let cell = try makeLeafCell(key, value, w)
        // In place, or in the free gap, when it fits there: no defragmentation.
        if page.replaceCell(i, with: cell) { return true }
        page.removeCell(i)
        let fitted = page.insertCell(cell, at: i)
        precondition(fitted, "a replacement cell that was measured to fit did not")
        return true
    }

    /// Inserts `key` through the writer's append hint for this tree when the
    /// hint is valid and `key` is greater than the hinted leaf's last key (so
    /// it is new and goes last). Returns false, changing nothing, otherwise.
    private func appendThroughHint(_ key: [UInt8], _ value: [UInt8], _ w: PageWriter) throws(KuraError) -> Bool {
        guard let hint = w.appendHint(for: root) else { return false }
        let leaf = try node(hint.leaf, w)
        guard leaf.isLeafNode else { return false }
        let n = leaf.cellCount
        if n == 0 {
            // Only an empty tree's root leaf is empty (a non-root page keeps a cell).
            guard hint.leaf == root else { return false }
        } else {
            let past = key.withUnsafeBytes { leaf.compareKey(n - 1, $0) < 0 }
            guard past else { return false }
        }
        // The usual case: the cell is written straight into the leaf.
        if try insertFitting(key, value, at: n, into: hint.leaf, w) { return true }
        let cell = try makeLeafCell(key, value, w)
        if try w.writable(hint.leaf).insertCell(cell, at: n) { return true }
        var path: [(page: UInt32, index: Int)] = []
        path.reserveCapacity(hint.interior.count)
        for p in hint.interior { path.append((p, try node(p, w).cellCount)) }
        try insertCell(cell, at: n, into: hint.leaf, path: path[...], w)
        return true
    }

    /// Builds a leaf cell (wide form, see Node.swift), writing the value's
    /// overflow chain if it needs one.
    func makeLeafCell(_ key: [UInt8], _ value: [UInt8], _ w: PageWriter) throws(KuraError) -> [UInt8] {
        guard value.count <= Int(Int32.max) else {
            throw KuraError(.tooBig, "a record of \(value.count) bytes is larger than the 2 GiB limit")
        }
        let layout = Node.leafLayout(keyLength: key.count, valueLength: value.count, pageSize: w.pageSize)
        var cell: [UInt8] = []
        cell.reserveCapacity(layout.size)
        Varint.append(UInt64(key.count), to: &cell)
        cell.append(contentsOf: key)
        Varint.append(UInt64(value.count), to: &cell)
        cell.append(contentsOf: value[0..<layout.local])
        if layout.overflow {
            let first = try writeOverflow(value[layout.local...], w)
            withUnsafeBytes(of: first.littleEndian) { cell.append(contentsOf: $0) }
        }
        return cell
    }

    /// Writes `bytes` to a new overflow chain; returns its first page.
    private func writeOverflow(_ bytes: ArraySlice<UInt8>, _ w: PageWriter) throws(KuraError) -> UInt32 {
        let cap = Self.overflowCapacity(w.pageSize)
        var pages: [Page] = []
        var start = bytes.startIndex
        while start < bytes.endIndex {
            let end = min(start + cap, bytes.endIndex)
            let p = try w.allocate()
            p.setU8(0, PageKind.overflow.rawValue)
            bytes[start..<end].withUnsafeBytes { (p.bytes + 8).copyMemory(from: $0.baseAddress!, byteCount: end - start) }
            if let prev = pages.last { prev.setU32(4, p.number) }
            pages.append(p)
            start = end
        }
        return pages[0].number
    }

    /// Inserts `cell` at index i of node `number`, splitting up the path as
    /// needed; with `split`, node `number` splits even if the cell would fit.
    func insertCell(_ cell: [UInt8], at i: Int, into number: UInt32, path: ArraySlice<(page: UInt32, index: Int)>, _ w: PageWriter,
                    split: Bool = false) throws(KuraError) {
        let node = try w.writable(number)
        if !split && node.insertCell(cell, at: i) { return }

        if number == root {
            // Move the root's contents into a new child; the root becomes an
            // interior page whose only pointer is that child, then split the child.
            let child = try w.allocate()
            child.bytes.copyMemory(from: node.bytes, byteCount: node.size)
            Node.initialize(node, kind: kind.interior, treeRoot: root)
            node.rightChild = child.number
            try insertCell(cell, at: i, into: child.number, path: [(root, 0)], w, split: split)
            return
        }

        if node.isLeafNode && i > 0 && i == node.cellCount && !node.hasCounters, let (parentNo, parentIndex) = path.last,
           try parentIndex == w.page(parentNo).cellCount {
            // An append's split (below, `appending`), taken without copying
            // the cells out: the old page keeps all its cells as they lie
            // and the new page holds the new cell alone. Copying each cell
            // into an array and rebuilding the old page with the same cells
            // cost more than every other append to the page together. A
            // page with counters goes the general way (rebuilding drops them).
            let sibling = try w.allocate()
            // A new cell, built by this code: its key is a row-ID key in a table tree.
            sibling.rebuild(kind: kind.leaf, treeRoot: root, cells: [cell][...], rightChild: 0, form: Self.leafFlags(w))
            let up = Self.interiorCell(child: number, key: node.keyBytes(i - 1)[...])
            try w.writable(parentNo).setChild(parentIndex, sibling.number)
            try insertCell(up, at: parentIndex, into: parentNo, path: path.dropLast(), w)
            return
        }
        if node.isLeafNode && node.isCompactLeaf == compactLeaves(w) && (kind == .index || !node.isCompactLeaf) {
            // A leaf already in the cell form the writer builds (so `leafForm`
            // has nothing to check: an index leaf, or a wide table leaf in a
            // store that builds wide ones): split without copying its cells
            // out (both halves get the writer's header).
            try splitLeaf(node, inserting: cell, at: i, path: path, w)
            return
        }
        var cells: [[UInt8]] = []
        cells.reserveCapacity(node.cellCount + 1)
        for k in 0..<node.cellCount { cells.append(node.cellBytes(k)) }
        cells.insert(cell, at: i)
        let isLeaf = node.isLeafNode
        let oldRight = node.rightChild
        let sibling = try w.allocate()
        let (parentNo, parentIndex) = path.last!
        // Appending past the right-most key of the tree: keep old pages full.
        let parentCells = try w.page(parentNo).cellCount
        let appending = i == cells.count - 1 && parentIndex == parentCells
        let up: [UInt8]

        if isLeaf {
            let s = appending ? cells.count - 1 : Self.splitPoint(cells, pageSize: w.pageSize)
            let form = try leafForm(cells[...], from: number, w)
            node.rebuild(kind: kind.leaf, treeRoot: root, cells: cells[0..<s], rightChild: 0, form: form)
            sibling.rebuild(kind: kind.leaf, treeRoot: root, cells: cells[s...], rightChild: 0, form: form)
            up = Self.interiorCell(child: number, key: Self.leafCellKey(cells[s - 1]))
        } else {
            let m = appending ? max(1, cells.count - 2) : max(1, min(cells.count - 2, Self.splitPoint(cells, pageSize: w.pageSize)))
            let middle = cells[m]
            let middleChild = middle.withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(as: UInt32.self)) }
            node.rebuild(kind: kind.interior, treeRoot: root, cells: cells[0..<m], rightChild: middleChild)
            sibling.rebuild(kind: kind.interior, treeRoot: root, cells: cells[(m + 1)...], rightChild: oldRight)
            up = Self.interiorCell(child: number, key: Self.interiorCellKey(middle))
        }
        let parent = try w.writable(parentNo)
        parent.setChild(parentIndex, sibling.number)
        try insertCell(up, at: parentIndex, into: parentNo, path: path.dropLast(), w)
    }

    /// Moves the last cell of leaf `number` (reached by `path`, the tree's
    /// right-most leaf, of at least two cells) into a new leaf on its right:
    /// the cell is taken out and put back with a forced split, which at the
    /// end of the tree is an append's split (the last cell alone on the new
    /// page). Used to make room for a table's counters in its right-most leaf
    /// (TableCounters.storeInLeaf).
    func splitOffLastCell(of number: UInt32, path: ArraySlice<(page: UInt32, index: Int)>, _ w: PageWriter) throws(KuraError) {
        let node = try w.writable(number)
        let n = node.cellCount
        guard n >= 2, node.isLeafNode else {
            throw KuraError(.corrupt, "leaf page \(number) cannot give up its last cell (\(n) cells)", page: number)
        }
        let last = node.cellBytes(n - 1)
        node.removeCell(n - 1)
        try insertCell(last, at: n - 1, into: number, path: path, w, split: true)
    }

    /// Whether leaves this writer builds hold compact cells (`leafFlags`: in
    /// a store of format 8 or later, FORMAT.md, "Cells"); older stores keep
    /// wide cells, which builds before 8 read.
    @inline(__always)
    func compactLeaves(_ w: PageWriter) -> Bool {
        Self.leafFlags(w) & Node.compactFlag != 0
    }

    /// The form (flag bits of `Node.formFlags`) of the leaves this writer
    /// builds: compact cells from format 8, and the short header from format
    /// 10 (FORMAT.md, "Layout"); none in older stores, whose builds read
    /// neither.
    @inline(__always)
    static func leafFlags(_ w: PageWriter) -> UInt8 {
        let v = w.currentHeader.headerVersion
        if v >= FileHeader.shortLeafHeaderVersion { return Node.compactFlag | Node.shortHeaderFlag }
        return v >= FileHeader.compactCellsVersion ? Node.compactFlag : 0
    }

    /// `leafFlags` for this tree.
    @inline(__always)
    func leafFlags(_ w: PageWriter) -> UInt8 { Self.leafFlags(w) }

    /// The form (`leafFlags`) of leaves rebuilt from `cells` (wide, some
    /// copied out of page `from` or its sibling): compact cells of a table
    /// tree need row-ID keys, so in a compact table leaf each key must decode
    /// as one of its whole length; a key from a damaged wide leaf that does
    /// not is corruption of page `from`'s pair (thrown, nothing written).
    func leafForm(_ cells: ArraySlice<[UInt8]>, from: UInt32, _ w: PageWriter) throws(KuraError) -> UInt8 {
        let form = leafFlags(w)
        guard form & Node.compactFlag != 0 else { return form }
        guard kind == .table else { return form }
        for c in cells {
            let good = c.withUnsafeBytes { b -> Bool in
                guard let base = b.baseAddress, let (kl, a) = Varint.read(base, 0, b.count), a == 1,
                      let (_, n) = RowIDKey.decode(base, 1, b.count) else { return false }
                return n == Int(kl)
            }
            guard good else {
                throw KuraError(.corrupt, "a cell of table tree \(root) near page \(from) has a key that is not a row-ID key; run `kura check` on the store", page: from)
            }
        }
        return form
    }

    /// Index s such that cells[0..<s] holds about half the bytes; 1 <= s < count.
    static func splitPoint(_ cells: [[UInt8]], pageSize: Int) -> Int {
        splitPoint(count: cells.count) { cells[$0].count }
    }

    /// `splitPoint` over `count` cells whose wide sizes `size` gives.
    @inline(__always)
    static func splitPoint(count: Int, size: (Int) -> Int) -> Int {
        var total = 0
        for k in 0..<count { total += size(k) + 2 }
        var acc = 0
        var s = 0
        while s < count - 1 {
            let next = acc + size(s) + 2
            if next > total / 2 && s > 0 { break }
            acc = next
            s += 1
        }
        return max(1, min(s, count - 1))
    }

    /// The general leaf split of `insertCell` for leaf `node` (writable, not
    /// the root, reached by `path`), which has no room for the wide cell
    /// `cell` at position `i`, when the leaf is already in the form the
    /// writer builds: the same split point and pages as copying every cell
    /// out and rebuilding both halves (`splitPoint` over the wide sizes, an
    /// append past the tree's last key keeping the old page full), but the
    /// halves are built from one copy of the page (`Page.rebuildLeaf`), with
    /// no array per cell.
    private func splitLeaf(_ node: Page, inserting cell: [UInt8], at i: Int,
                           path: ArraySlice<(page: UInt32, index: Int)>, _ w: PageWriter) throws(KuraError) {
        let old = Page(copying: node)
        let compact = node.isCompactLeaf
        // The halves keep the old leaf's cells (the caller checked they are
        // in the writer's form) and get the writer's header.
        let form = node.leafForm & Node.compactFlag | leafFlags(w) & Node.shortHeaderFlag
        let saving = compact ? Node.compactSaving : 0
        let count = node.cellCount + 1
        let sibling = try w.allocate()
        guard let (parentNo, parentIndex) = path.last else {
            throw KuraError(.corrupt, "leaf \(node.number) of tree \(root) has no parent on its path", page: node.number)
        }
        let parentCells = try w.page(parentNo).cellCount
        let appending = i == count - 1 && parentIndex == parentCells
        // Each old cell's stored size, measured once (the split point and
        // both halves use it).
        let sizes = [Int](unsafeUninitializedCapacity: count - 1) { b, n in
            if compact && kind == .index {
                // A compact index cell is its key's length and the key
                // (`cellKey` reads them; `cellSize` would also look for a value).
                for k in 0..<(count - 1) {
                    let (ko, kl) = old.cellKey(k)
                    b[k] = ko + kl - old.cellOffset(k)
                }
            } else {
                for k in 0..<(count - 1) { b[k] = old.cellSize(k) }
            }
            n = count - 1
        }
        let s = appending ? count - 1 : Self.splitPoint(count: count) { k in
            k == i ? cell.count : sizes[k < i ? k : k - 1] + saving
        }
        node.rebuildLeaf(kind: kind.leaf, treeRoot: root, form: form, from: old, sizes: sizes, cells: 0..<s, inserting: cell, at: i)
        sibling.rebuildLeaf(kind: kind.leaf, treeRoot: root, form: form, from: old, sizes: sizes, cells: s..<count, inserting: cell, at: i)
        let last = s - 1
        let up = last == i ? Self.interiorCell(child: node.number, key: Self.leafCellKey(cell))
            : Self.interiorCell(child: node.number, key: old.keyBytes(last < i ? last : last - 1)[...])
        let parent = try w.writable(parentNo)
        parent.setChild(parentIndex, sibling.number)
        try insertCell(up, at: parentIndex, into: parentNo, path: path.dropLast(), w)
    }

    static func interiorCell(child: UInt32, key: ArraySlice<UInt8>) -> [UInt8] {
        var c: [UInt8] = []
        c.reserveCapacity(4 + 2 + key.count)
        withUnsafeBytes(of: child.littleEndian) { c.append(contentsOf: $0) }
        Varint.append(UInt64(key.count), to: &c)
        c.append(contentsOf: key)
        return c
    }

    /// The key of a leaf cell held in an array (built by this code or validated).
    static func leafCellKey(_ cell: [UInt8]) -> ArraySlice<UInt8> {
        cell.withUnsafeBytes { b in
            let (kl, a) = Varint.read(b.baseAddress!, 0, b.count)!
            return cell[a..<(a + Int(kl))]
        }
    }

    /// The key of an interior cell held in an array.
    static func interiorCellKey(_ cell: [UInt8]) -> ArraySlice<UInt8> {
        cell.withUnsafeBytes { b in
            let (kl, a) = Varint.read(b.baseAddress!, 4, b.count)!
            return cell[(4 + a)..<(4 + a + Int(kl))]
        }
    }
}

extension Page {
    /// Writes a leaf cell without an overflow chain, `key` -> `value`, in the
    /// page's form (`compact`: `isCompactLeaf`; `table`: a table leaf), whose
    /// stored `size` (`Node.leafLayout`, less `compactSaving` in a compact
    /// leaf) the caller checked fits `freeSpace` with its pointer; it becomes
    /// cell `i` (its key between those of cells `i - 1` and `i`; in a compact
    /// table leaf a row-ID key, as every table key the tree code is given is).
    fileprivate func insertLeafCell(_ key: [UInt8], _ value: [UInt8], at i: Int, size: Int, compact: Bool, table: Bool) {
        let base = cellPointerStart
        if contentStart - (base + 2 * cellCount) < size + 2 { defragment() }
        let start = contentStart - size
        var pos = start
        if !(compact && table) { pos += Varint.write(UInt64(key.count), to: bytes + pos) }
        key.withUnsafeBytes { if $0.count > 0 { (bytes + pos).copyMemory(from: $0.baseAddress!, byteCount: $0.count) } }
        pos += key.count
        if !(compact && !table) { pos += Varint.write(UInt64(value.count), to: bytes + pos) }
        value.withUnsafeBytes { if $0.count > 0 { (bytes + pos).copyMemory(from: $0.baseAddress!, byteCount: $0.count) } }
        precondition(pos + value.count == start + size, "leaf cell size does not match its layout")
        let n = cellCount
        let ptrs = bytes + base
        if i < n { memmoveBytes(ptrs + 2 * (i + 1), ptrs + 2 * i, 2 * (n - i)) }
        setU16(base + 2 * i, UInt16(start))
        contentStart = start
        cellCount = n + 1
    }
}

/// The right-most path of one tree, recorded by an insert at its end: the
/// interior pages from the root down (each entered through its right-most
/// child) and the last leaf. Valid while the writer's `structureEpoch` equals
/// `epoch` (see the header).
struct AppendHint {
    let root: UInt32
    let epoch: UInt64
    let interior: [UInt32]
    let leaf: UInt32
}
