// RowPath: a query cursor's row reads by row ID in one read snapshot (index
// candidates, a join's row IDs), keeping what the last descent learnt.
//
// It keeps the pages of the last descent (`PathPages`), so a level whose
// child is the one taken last time costs no page fetch. It also
// keeps, per interior level, the row IDs the child taken there covers (from
// the separator keys on either side of it): a row whose ID falls inside goes
// to the same child without searching the interior page at all. Rows read in
// increasing row-ID order (an index's entries for one value, a sorted list of
// candidates) share their upper levels, so most descents search only the
// lowest interior page and the leaf.
//
// The range of the child above a leaf is kept only once two reads in a row
// have landed in that leaf: sparse reads (each row in another leaf, as an
// equality on a low-selectivity index gives) would pay for reading the two
// separators on every row and never use them.
//
// Only for pages that do not change while it reads: a read transaction's
// (a page number names one immutable page there), or a write transaction's
// before it writes anything (`QueryCursor.keepRowPathsUntilTheNextWrite`);
// so a kept page and its ranges stay true. Table trees only (keys are row IDs).
//
// Damaged trees: the ranges are read from the separator keys, which
// `Node.validate` keeps inside the page; a separator that is not a row-ID key
// leaves its level without a range (it is searched each time). Out-of-order
// separators can send a read to another page of the same tree than a search
// would: the page is still checked as this tree's (`BTree.node`), and the row
// is only returned when its leaf holds exactly its key.

/// Point reads of a table tree's rows in one read snapshot, reusing the pages
/// and child ranges of the previous descent (see the file header).
struct RowPath {
    let tree: BTree
    /// The pages of the last descent, root first.
    private let pages = PathPages()
    /// Per interior level, the row IDs its kept child covers.
    private let ranges = ChildRanges()

    init(tree: BTree) {
        precondition(tree.kind == .table, "RowPath reads table trees")
        self.tree = tree
    }

    /// Where row `rowID`'s record is (`key` is its encoding, `RowIDKey`): in
    /// place in its leaf (the caller may keep the page: snapshot pages never
    /// change), or assembled from its overflow chain; nil if the table has no
    /// such row.
    ///
    /// - Throws: `.corrupt` as `BTree.get` does (a page of another kind or
    ///   tree, excessive depth, a broken overflow chain).
    @inline(__always)
    mutating func locate<S: PageSource>(_ rowID: Int64, _ key: UnsafeRawBufferPointer, _ s: S) throws(KuraError) -> LocatedValue? {
        let depth = try descend(key, rowID, s)
        let found: (index: Int, offset: Int, length: Int, overflow: UInt32)? = pages.page(depth)._withUnsafeGuaranteedRef { leaf in
            guard let i = leaf.slot(of: key, rowID: rowID) else { return nil }
            let v = leaf.leafCell(i)
            return (i, v.offset, v.length, v.overflow)
        }
        guard let found else { return nil }
        let leaf = pages.page(depth).takeUnretainedValue()
        if found.overflow == 0 { return .inPage(leaf, offset: found.offset, count: found.length) }
        return .copied(try tree.value(leaf, found.index, s))
    }

    /// Descends to the leaf for `rowID` (`key` its encoding); returns its depth.
    @inline(__always)
    private func descend<S: PageSource>(_ key: UnsafeRawBufferPointer, _ rowID: Int64, _ s: S) throws(KuraError) -> Int {
        if pages.count == 0 {
            pages.set(0, try tree.node(tree.root, s))
            ranges.known = 0
        }
        var depth = 0
        while true {
            // Inside the range of the child kept at depth + 1: no search.
            if depth < ranges.known && ranges.contains(depth, rowID) {
                depth += 1
                continue
            }
            let (leaf, number, index, count, child) = pages.page(depth)._withUnsafeGuaranteedRef { p in
                if p.isLeafNode { return (true, p.number, 0, 0, UInt32(0)) }
                let i = p.lowerBound(key, rowID: rowID)
                return (false, p.number, i, p.cellCount, p.child(i))
            }
            if leaf { return depth }
            guard depth < BTree.maxDepth else { throw tree.depthError(number) }
            let kept = depth + 1 < pages.count && pages.page(depth + 1)._withUnsafeGuaranteedRef({ $0.number }) == child
            if !kept {
                pages.set(depth + 1, try tree.node(child, s))
                // The ranges from here down described the old child's subtree.
                ranges.known = min(ranges.known, depth)
            }
            // Ranges are known for a prefix of the levels: this one's is
            // added when every level above has one. Above a leaf, only once
            // a second read in a row lands in that leaf (see the header).
            if ranges.known == depth, kept || !pages.page(depth + 1)._withUnsafeGuaranteedRef({ $0.isLeafNode }) {
                if let r = pages.page(depth)._withUnsafeGuaranteedRef({ p in Self.childRange(p, index, count) }) {
                    ranges.set(depth, r.lowest, r.highest)
                    ranges.known = depth + 1
                }
            }
            depth += 1
        }
    }

    /// The row IDs child `i` of interior page `p` (with `n` cells) holds:
    /// above separator i - 1 and up to separator i (the right-most child has
    /// no upper separator, the first no lower one). Nil when a separator is
    /// not a row-ID key, or the range is empty.
    @inline(__always)
    private static func childRange(_ p: Page, _ i: Int, _ n: Int) -> (lowest: Int64, highest: Int64)? {
        var lowest = Int64.min
        var highest = Int64.max
        if i > 0 {
            guard let below = separatorRowID(p, i - 1), below < Int64.max else { return nil }
            lowest = below + 1
        }
        if i < n {
            guard let above = separatorRowID(p, i) else { return nil }
            highest = above
        }
        return lowest <= highest ? (lowest, highest) : nil
    }

    /// The row ID interior cell `i`'s key encodes, or nil if it is not a
    /// row-ID key. (`cellKey` reads the key's length varint, which
    /// `Node.validate` checked, as every read of the cell does.)
    @inline(__always)
    private static func separatorRowID(_ p: Page, _ i: Int) -> Int64? {
        let (o, l) = p.cellKey(i)
        guard let (v, k) = RowIDKey.decode(UnsafeRawPointer(p.bytes), o, o + l), k == l else { return nil }
        return v
    }
}

/// The row-ID range of the child a `RowPath` keeps below each interior
/// level, in fixed buffers of `BTree.maxDepth + 1` slots.
final class ChildRanges {
    private let lowest: UnsafeMutablePointer<Int64>
    private let highest: UnsafeMutablePointer<Int64>
    /// Levels 0..<known have a range (of the child kept below them).
    var known = 0

    init() {
        lowest = .allocate(capacity: BTree.maxDepth + 1)
        highest = .allocate(capacity: BTree.maxDepth + 1)
    }

    deinit {
        lowest.deallocate()
        highest.deallocate()
    }

    /// Whether `rowID` is in level `depth`'s range (`depth` < `known`).
    @inline(__always)
    func contains(_ depth: Int, _ rowID: Int64) -> Bool {
        lowest[depth] <= rowID && rowID <= highest[depth]
    }

    /// Sets level `depth`'s range (`depth` <= `BTree.maxDepth`).
    @inline(__always)
    func set(_ depth: Int, _ low: Int64, _ high: Int64) {
        precondition(depth <= BTree.maxDepth)
        lowest[depth] = low
        highest[depth] = high
    }
}

/// A value found by `RowPath.locate`.
enum LocatedValue {
    /// `count` bytes at `offset` in `page`.
    case inPage(Page, offset: Int, count: Int)
    /// The value assembled from its overflow chain.
    case copied([UInt8])
}

/// The pages of a `RowPath`'s last descent, root first: one strong reference
/// per level, in a fixed buffer of `BTree.maxDepth + 1` slots. A page handed
/// to `set` is moved in (no retain of its own), and `page` reads one without
/// retaining it.
final class PathPages {
    private let slots: UnsafeMutablePointer<Page>
    private(set) var count = 0

    init() { slots = .allocate(capacity: BTree.maxDepth + 1) }

    deinit {
        slots.deinitialize(count: count)
        slots.deallocate()
    }

    /// The page at `depth` (< count), not retained: valid while it is held here.
    @inline(__always)
    func page(_ depth: Int) -> Unmanaged<Page> { Unmanaged.passUnretained(slots[depth]) }

    /// Holds `page` at `depth` (at most `count`), releasing what was there.
    @inline(__always)
    func set(_ depth: Int, _ page: __owned Page) {
        precondition(depth <= count && depth <= BTree.maxDepth)
        if depth < count {
            slots[depth] = page
        } else {
            (slots + depth).initialize(to: page)
            count += 1
        }
    }
}
