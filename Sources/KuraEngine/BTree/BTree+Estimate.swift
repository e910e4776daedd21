// BTree+Estimate: where a key falls in a tree, as a fraction of its entries,
// for the query planner's row estimates.
//
// One descent, as a seek makes: at each level the child taken is the i-th of n,
// so the key lies after about i/n of that subtree; the fractions of the levels
// add up, each scaled by the share of its parent's subtree. Nodes are assumed
// evenly filled (a bulk-loaded or randomly filled tree is close to that), so the
// estimate is exact within a leaf and good to a node's fill ratio above it.
// Nothing is stored: statistics come from the tree as it is (FORMAT.md is
// unchanged), and cost one descent through cached pages per bound.

extension BTree {
    /// The fraction (0...1) of the tree's entries whose keys sort before `key`.
    ///
    /// - Throws: `.corrupt` as a seek does (bad pages, excessive depth).
    func position<S: PageSource>(of key: UnsafeRawBufferPointer, _ s: S) throws(KuraError) -> Double {
        var p = try node(root, s)
        var start = 0.0
        var width = 1.0
        var depth = 0
        while !p.isLeafNode {
            depth += 1
            guard depth < BTree.maxDepth else { throw depthError(p.number) }
            let i = p.lowerBound(key)
            let n = Double(p.cellCount + 1)
            start += width * Double(i) / n
            width /= n
            p = try node(p.child(i), s)
        }
        let n = p.cellCount
        guard n > 0 else { return start }
        return start + width * Double(p.lowerBound(key)) / Double(n)
    }
}
