// BTree+Delete: deletion and rebalancing.
//
// After a cell leaves a non-root page, the page is rebalanced when it is less
// than a quarter full: with a sibling (the left one if it has one), either
// merged into one page when both fit, or their cells are redistributed evenly.
// For interior pages the parent's separator moves down into the merge and a new
// one moves up. A parent that loses a cell is rebalanced in turn. An interior
// root left with no cells is replaced by its only child's contents (the root
// page number never changes), so the tree shrinks from the top.

extension BTree {
    /// Removes `key`. Returns false if it was not present.
    @discardableResult
    func delete(_ key: [UInt8], _ w: PageWriter) throws(KuraError) -> Bool {
        if try deleteInLastLeaf(key, w) { return true }
        return try deleteByDescent(key, w)
    }

    /// Removes each of `keys` that is present; returns how many were. Meant
    /// for keys in ascending order, which mostly lie close together in a leaf:
    /// after a key leaves slot i of the leaf the writer remembers for this
    /// tree, the next key is compared with the cell now in slot i first (keys
    /// side by side: one comparison), then searched for among the cells after
    /// it, and only then found by a descent. Any order gives the same result:
    /// a cell is removed only when its key is the one asked for.
    func delete(_ keys: [[UInt8]], _ w: PageWriter) throws(KuraError) -> Int {
        var removed = 0
        var slot = -1
        for key in keys {
            if slot >= 0, let leafNo = w.lastLeaf(of: root) {
                let leaf = try node(leafNo, w)
                let i = leaf.isLeafNode ? key.withUnsafeBytes { Self.slot(of: $0, in: leaf, from: slot) } : -1
                if i >= 0 {
                    try remove(key, at: i, of: leafNo, leaf, w)
                    slot = i
                    removed += 1
                    continue
                }
            } else if let (leafNo, leaf, i) = try findInLastLeaf(key, w) {
                try remove(key, at: i, of: leafNo, leaf, w)
                slot = i
                removed += 1
                continue
            }
            slot = -1
            if try deleteByDescent(key, w) { removed += 1 }
        }
        return removed
    }

    /// The slot of `key` in `leaf` when it is there at `from` or after it
    /// (a binary search of the cells from `from` on); -1 otherwise.
    private static func slot(of key: UnsafeRawBufferPointer, in leaf: Page, from: Int) -> Int {
        let n = leaf.cellCount
        guard from < n else { return -1 }
        let c = leaf.compareKey(from, key)
        if c == 0 { return from }
        guard c < 0 else { return -1 }
        var lo = from + 1
        var hi = n
        while lo < hi {
            let mid = (lo + hi) >> 1
            if leaf.compareKey(mid, key) < 0 { lo = mid + 1 } else { hi = mid }
        }
        return lo < n && leaf.compareKey(lo, key) == 0 ? lo : -1
    }

    /// `delete` through a descent from the root.
    private func deleteByDescent(_ key: [UInt8], _ w: PageWriter) throws(KuraError) -> Bool {
        let epoch = w.structureEpoch
        var path: [(page: UInt32, index: Int)] = []
        let found = try key.withBytes { k throws(KuraError) -> (UInt32, Int)? in
                let leaf = try descend(k, w, path: &path)
                guard let i = leaf.slot(of: k, rowID: nil) else { return nil }
                return (leaf.number, i)
        }
        guard let (leafNo, i) = found else { return false }
        let leaf = try w.page(leafNo)
        for p in try overflowPages(leaf, i, w) { try w.free(p) }
        try w.writable(leafNo).removeCell(i)
        try rebalance(leafNo, path: path[...], w)
        if w.structureEpoch == epoch { w.rememberLeaf(leafNo, of: root) }
        return true
    }

    /// Removes `key` if it is in the leaf the writer remembers for this tree
    /// (`PageWriter.lastLeaf`, see BTree+Insert.swift) and returns true; false,
    /// changing nothing, otherwise. A leaf left under a quarter full is
    /// rebalanced through the path a descent by `key` gives: the separators
    /// above did not change, so it leads to the same leaf.
    private func deleteInLastLeaf(_ key: [UInt8], _ w: PageWriter) throws(KuraError) -> Bool {
        guard let (leafNo, leaf, i) = try findInLastLeaf(key, w) else { return false }
        try remove(key, at: i, of: leafNo, leaf, w)
        return true
    }

    /// Removes cell `i`, whose key is `key`, from `leaf` (page `leafNo`), the
    /// leaf the writer remembers for this tree; rebalances it as
    /// `deleteInLastLeaf` describes.
    private func remove(_ key: [UInt8], at i: Int, of leafNo: UInt32, _ leaf: Page, _ w: PageWriter) throws(KuraError) {
        for p in try overflowPages(leaf, i, w) { try w.free(p) }
        let page = try w.writable(leafNo)
        page.removeCell(i)
        let capacity = Node.usable(w.pageSize) - page.cellPointerStart
        if leafNo == root || (page.cellCount > 0 && page.usedSpace >= capacity / 4) {
            // No rebalance (a leaf root never has one). Overflow pages freed
            // above do not change the tree's shape.
            w.rememberLeaf(leafNo, of: root)
            return
        }
        var path: [(page: UInt32, index: Int)] = []
        let reached = try key.withBytes { k throws(KuraError) -> UInt32 in try descend(k, w, path: &path).number }
        guard reached == leafNo else {
            throw KuraError(.corrupt, "key deleted from page \(leafNo) leads to page \(reached) from the root of its tree", page: root)
        }
        try rebalance(leafNo, path: path[...], w)
    }

    /// Restores the fill invariant of node `number` after it lost a cell.
    func rebalance(_ number: UInt32, path: ArraySlice<(page: UInt32, index: Int)>, _ w: PageWriter) throws(KuraError) {
        let node = try w.page(number)
        if number == root {
            // Collapse an interior root with no cells onto its only child.
            var r = node
            var guardCount = 0
            while !r.isLeafNode && r.cellCount == 0 && guardCount < Self.maxDepth {
                let childNo = r.rightChild
                let child = try self.node(childNo, w)
                let wr = try w.writable(root)
                wr.bytes.copyMemory(from: child.bytes, byteCount: child.size)
                try w.free(childNo)
                r = wr
                guardCount += 1
            }
            return
        }
        if node.cellCount > 0 && node.usedSpace >= (Node.usable(w.pageSize) - node.cellPointerStart) / 4 { return }
        guard let (parentNo, pi) = path.last else { return }
        let parent = try w.page(parentNo)
        guard parent.cellCount > 0 else { return }
        // li: the parent cell whose child is the left page of the pair.
        let li = pi > 0 ? pi - 1 : pi
        let leftNo = parent.child(li)
        let rightNo = parent.child(li + 1)
        let left = try w.writable(leftNo)
        let right = try w.writable(rightNo)
        guard left.isLeafNode == right.isLeafNode else {
            throw KuraError(.corrupt, "sibling pages \(leftNo) and \(rightNo) are at different depths", page: parentNo)
        }
        let isLeaf = left.isLeafNode
        var cells: [[UInt8]] = []
        cells.reserveCapacity(left.cellCount + right.cellCount + 1)
        for k in 0..<left.cellCount { cells.append(left.cellBytes(k)) }
        if !isLeaf {
            cells.append(Self.interiorCell(child: left.rightChild, key: parent.keyBytes(li)[...]))
        }
        for k in 0..<right.cellCount { cells.append(right.cellBytes(k)) }
        // Leaves are rebuilt in this writer's form (converting cells of the
        // other form: a store upgraded from format 7 holds both), and the
        // pair's bytes are counted in it.
        let form = isLeaf ? try leafForm(cells[...], from: leftNo, w) : 0
        let saving = form & Node.compactFlag != 0 ? Node.compactSaving : 0
        let total = cells.reduce(0) { $0 + $1.count - saving + 2 }
        // What one page of the pair's form holds (its header is short in a
        // leaf this writer builds in format 10).
        let capacity = Node.usable(w.pageSize) - Node.headerSize(flags: form)
        let nodeKind = isLeaf ? kind.leaf : kind.interior
        let farRight = right.rightChild

        if total <= capacity {
            // Merge into the left page; the parent entry that named the right page
            // now names the left one.
            left.rebuild(kind: nodeKind, treeRoot: root, cells: cells[...], rightChild: isLeaf ? 0 : farRight, form: form)
            let wp = try w.writable(parentNo)
            wp.removeCell(li)
            wp.setChild(li, leftNo)
            try w.free(rightNo)
            try rebalance(parentNo, path: path.dropLast(), w)
            return
        }
        // Redistribute.
        let newSeparator: [UInt8]
        if isLeaf {
            let s = Self.splitPoint(cells, pageSize: w.pageSize)
            left.rebuild(kind: nodeKind, treeRoot: root, cells: cells[0..<s], rightChild: 0, form: form)
            right.rebuild(kind: nodeKind, treeRoot: root, cells: cells[s...], rightChild: 0, form: form)
            newSeparator = Self.interiorCell(child: leftNo, key: Self.leafCellKey(cells[s - 1]))
        } else {
            let m = max(1, min(cells.count - 2, Self.splitPoint(cells, pageSize: w.pageSize)))
            let middle = cells[m]
            let middleChild = middle.withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(as: UInt32.self)) }
            left.rebuild(kind: nodeKind, treeRoot: root, cells: cells[0..<m], rightChild: middleChild)
            right.rebuild(kind: nodeKind, treeRoot: root, cells: cells[(m + 1)...], rightChild: farRight)
            newSeparator = Self.interiorCell(child: leftNo, key: Self.interiorCellKey(middle))
        }
        let wp = try w.writable(parentNo)
        wp.removeCell(li)
        try insertCell(newSeparator, at: li, into: parentNo, path: path.dropLast(), w)
    }

    /// Frees every page of the tree, root included.
    func destroy(_ w: PageWriter) throws(KuraError) {
        var stack: [(UInt32, Int)] = [(root, 0)]
        var visited = 0
        while let (number, depth) = stack.popLast() {
            guard depth < Self.maxDepth else { throw depthError(number) }
            let p = try node(number, w)
            visited += 1
            if p.isLeafNode {
                for i in 0..<p.cellCount {
                    for o in try overflowPages(p, i, w) { try w.free(o) }
                }
            } else {
                for i in 0...p.cellCount { stack.append((p.child(i), depth + 1)) }
            }
            try w.free(number)
        }
    }
}
