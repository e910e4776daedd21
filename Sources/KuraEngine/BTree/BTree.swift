// BTree: B+trees over pages (FORMAT.md, "Tree pages", "Cells", "Overflow pages").
//
// One implementation serves both tree kinds: table trees (key = RowIDKey of the
// row ID, value = record) and index trees (key = index key ending in the row ID,
// no value). Keys compare as bytes. Values live in leaves only; interior pages
// hold separator keys: cell (child, k) routes keys <= k to child, keys above the
// last cell go to the right-most child.
//
// Invariants (checked by `checkInvariants` and `kura check`):
//   - every leaf is at the same depth; keys strictly increase across the leaves;
//   - every key under cell (child, k) is <= k and > the previous cell's key;
//   - the root page never moves (the catalog names it); every page records it;
//   - a non-root page holds at least one cell after any operation;
//   - depth is at most `maxDepth`, which bounds every loop over a corrupt tree.
//
// Overflow page: kind 5 at byte 0, next overflow page (0 = last) at byte 4,
// value bytes from byte 8 up to the trailer.

enum TreeKind: Sendable {
    case table
    case index

    var leaf: PageKind { self == .table ? .tableLeaf : .indexLeaf }
    var interior: PageKind { self == .table ? .tableInterior : .indexInterior }
}

struct BTree {
    let root: UInt32
    let kind: TreeKind

    /// Deeper than any real tree (a 512-byte-page tree of 2^64 keys is ~32
    /// deep); reaching it means a cycle or corruption.
    static let maxDepth = 40

    static func overflowCapacity(_ pageSize: Int) -> Int { Node.usable(pageSize) - 8 }

    /// Creates an empty tree and returns its root page number.
    static func create(_ kind: TreeKind, in w: PageWriter) throws(KuraError) -> UInt32 {
        let p = try w.allocate()
        Node.initialize(p, kind: kind.leaf, treeRoot: p.number, form: leafFlags(w))
        return p.number
    }

    /// Reads page `number` as a node of this tree, checking kind and owner.
    /// `sequential`: for a scan of the whole tree (`PageSource.sequentialPage`).
    @inline(__always)
    func node<S: PageSource>(_ number: UInt32, _ s: S, sequential: Bool = false) throws(KuraError) -> Page {
        let p = sequential ? try s.sequentialPage(number) : try s.page(number)
        let k = p.kindByte
        guard k == kind.leaf.rawValue || k == kind.interior.rawValue else {
            throw KuraError(.corrupt, "page \(number) should be a \(kind) tree page but has kind \(k); run `kura check` on the store", page: number)
        }
        guard p.treeRoot == root else {
            throw KuraError(.corrupt, "page \(number) belongs to the tree rooted at page \(p.treeRoot), but was reached from the tree rooted at page \(root)", page: number)
        }
        return p
    }

    func depthError(_ page: UInt32) -> KuraError {
        KuraError(.corrupt, "tree rooted at page \(root) is deeper than \(Self.maxDepth) levels (a cycle?)", page: page)
    }

    /// Descends to the leaf that holds (or would hold) `key`, recording the path
    /// of (interior page, child index) pairs.
    func descend<S: PageSource>(_ key: UnsafeRawBufferPointer, _ s: S, path: inout [(page: UInt32, index: Int)]) throws(KuraError) -> Page {
        var number = root
        var p = try node(number, s)
        while !p.isLeafNode {
            guard path.count < Self.maxDepth else { throw depthError(number) }
            let i = p.lowerBound(key)
            path.append((number, i))
            number = p.child(i)
            p = try node(number, s)
        }
        return p
    }

    /// Descends to the leaf that holds (or would hold) `key`, without
    /// recording the path (point reads).
    @inline(__always)
    func leaf<S: PageSource>(for key: UnsafeRawBufferPointer, _ s: S) throws(KuraError) -> Page {
        try leaf(for: key, rowID: rowID(ofKey: key), s)
    }

    /// `leaf(for:)` with the row ID `key` encodes (`rowID(ofKey:)`), so that
    /// each level of a table tree is searched by interpolation.
    func leaf<S: PageSource>(for key: UnsafeRawBufferPointer, rowID: Int64?, _ s: S) throws(KuraError) -> Page {
        var number = root
        var p = try node(number, s)
        var depth = 0
        while !p.isLeafNode {
            guard depth < Self.maxDepth else { throw depthError(number) }
            depth += 1
            number = p.child(p.lowerBound(key, rowID: rowID))
            p = try node(number, s)
        }
        return p
    }

    /// The row ID `key` encodes when this is a table tree (for
    /// `Page.lowerBound(_:rowID:)`); else nil.
    @inline(__always)
    func rowID(ofKey key: UnsafeRawBufferPointer) -> Int64? {
        guard kind == .table, let b = key.baseAddress, let (v, n) = RowIDKey.decode(b, 0, key.count), n == key.count else { return nil }
        return v
    }

    /// The value stored under `key`, or nil.
    func get<S: PageSource>(_ key: [UInt8], _ s: S) throws(KuraError) -> [UInt8]? {
        try key.withBytes { k throws(KuraError) -> [UInt8]? in try get(k, s) }
    }

    /// The value stored under `key`, or nil.
    func get<S: PageSource>(_ k: UnsafeRawBufferPointer, _ s: S) throws(KuraError) -> [UInt8]? {
        try value(of: k, in: try leaf(for: k, s), s)
    }

    /// The value stored under `k` in `leaf` (the leaf that would hold it), or nil.
    func value<S: PageSource>(of k: UnsafeRawBufferPointer, in leaf: Page, _ s: S) throws(KuraError) -> [UInt8]? {
        guard let i = leaf.slot(of: k, rowID: rowID(ofKey: k)) else { return nil }
        return try value(leaf, i, s)
    }

    /// `body` applied to the value stored under `key` where it lies (the leaf
    /// page's bytes, or the value assembled from its overflow chain), or nil if
    /// there is none. The bytes are valid only inside `body`.
    func withValue<S: PageSource, T>(_ k: UnsafeRawBufferPointer, _ s: S,
                                     _ body: (UnsafeRawBufferPointer) throws(KuraError) -> T) throws(KuraError) -> T? {
        let id = rowID(ofKey: k)
        let leaf = try leaf(for: k, rowID: id, s)
        defer { withExtendedLifetime(leaf) {} }
        guard let i = leaf.slot(of: k, rowID: id) else { return nil }
        let v = leaf.leafValue(i)
        if v.overflow == 0 { return try body(UnsafeRawBufferPointer(start: leaf.bytes + v.offset, count: v.length)) }
        return try value(leaf, i, s).withBytes(body)
    }

    /// Whether `key` is present.
    func contains<S: PageSource>(_ key: [UInt8], _ s: S) throws(KuraError) -> Bool {
        try key.withBytes { k throws(KuraError) -> Bool in
            let id = rowID(ofKey: k)
            return try leaf(for: k, rowID: id, s).slot(of: k, rowID: id) != nil
        }
    }

    /// Whole value of leaf cell i, following its overflow chain.
    func value<S: PageSource>(_ leaf: Page, _ i: Int, _ s: S) throws(KuraError) -> [UInt8] {
        let v = leaf.leafValue(i)
        if v.overflow == 0 {
            // One allocation of the exact size and one copy (the common case),
            // through `Array(UnsafeRawBufferPointer)`, which is specialized for
            // bytes (`[UInt8](unsafeUninitializedCapacity:)` looks the array's
            // metadata up on every call on Linux).
            return Array(UnsafeRawBufferPointer(start: leaf.bytes + v.offset, count: v.local))
        }
        var out = [UInt8]()
        out.reserveCapacity(v.length)
        out.append(contentsOf: UnsafeRawBufferPointer(start: leaf.bytes + v.offset, count: v.local))
        if v.overflow == 0 { return out }
        try readOverflow(first: v.overflow, remaining: v.length - v.local, from: leaf.number, s) { chunk in
            out.append(contentsOf: chunk)
        }
        return out
    }

    /// Calls `body` with each chunk of an overflow chain. The chain must hold
    /// exactly `remaining` bytes; a wrong kind, a short or long chain, or a cycle
    /// throws `corrupt`.
    func readOverflow<S: PageSource>(first: UInt32, remaining total: Int, from owner: UInt32, _ s: S, _ body: (UnsafeRawBufferPointer) -> Void) throws(KuraError) {
        let cap = Self.overflowCapacity(s.pageSize)
        var remaining = total
        var next = first
        var pages = 0
        let bound = (total + cap - 1) / cap
        while remaining > 0 {
            guard next != 0, pages < bound else {
                throw KuraError(.corrupt, "overflow chain of a value on page \(owner) ends early (\(remaining) bytes missing)", page: owner)
            }
            let op = try s.page(next)
            guard op.u8(0) == PageKind.overflow.rawValue else {
                throw KuraError(.corrupt, "page \(next) in an overflow chain has kind \(op.u8(0))", page: next)
            }
            let n = min(remaining, cap)
            body(UnsafeRawBufferPointer(start: op.bytes + 8, count: n))
            remaining -= n
            pages += 1
            next = op.u32(4)
        }
    }

    /// Overflow page numbers of leaf cell i (for freeing and checking).
    func overflowPages<S: PageSource>(_ leaf: Page, _ i: Int, _ s: S) throws(KuraError) -> [UInt32] {
        let v = leaf.leafValue(i)
        guard v.overflow != 0 else { return [] }
        let cap = Self.overflowCapacity(s.pageSize)
        let bound = (v.length - v.local + cap - 1) / cap
        var out: [UInt32] = []
        var next = v.overflow
        while next != 0 && out.count < bound {
            out.append(next)
            let op = try s.page(next)
            guard op.u8(0) == PageKind.overflow.rawValue else {
                throw KuraError(.corrupt, "page \(next) in an overflow chain has kind \(op.u8(0))", page: next)
            }
            next = op.u32(4)
        }
        guard next == 0, out.count == bound else {
            throw KuraError(.corrupt, "overflow chain of a value on page \(leaf.number) has \(next == 0 ? "fewer" : "more") than the \(bound) pages its length needs", page: leaf.number)
        }
        return out
    }

    /// Number of keys, by walking the leaves (for checks and tests).
    func count<S: PageSource>(_ s: S) throws(KuraError) -> Int {
        var c = TreeCursor(tree: self)
        try c.first(s)
        var n = 0
        while c.isValid {
            n += 1
            try c.next(s)
        }
        return n
    }
}

/// A position in a tree: the stack of pages from the root to a leaf cell.
///
/// Lifetime: the pages it holds are immutable snapshot pages in a read
/// transaction; in a write transaction, any change to the tree invalidates the
/// cursor (the table layer re-seeks by key).
struct TreeCursor {
    let tree: BTree
    var stack: [(page: Page, index: Int)] = []
    /// True when positioned on a leaf cell.
    private(set) var isValid = false
    /// Set by a caller that walks the whole tree from `first` or `last` (a
    /// full scan): the pages the cursor moves to from one leaf to the next are
    /// then read with `PageSource.sequentialPage`, which keeps a single pass
    /// from filling the caches. Descents by `seek` read pages as usual.
    var sequential = false

    init(tree: BTree) { self.tree = tree }

    /// The depth a path is first given room for (deeper trees grow it).
    static let usualDepth = 6

    var leaf: Page { stack[stack.count - 1].page }
    var index: Int { stack[stack.count - 1].index }

    /// Key bytes at the cursor.
    var key: UnsafeRawBufferPointer {
        let t = stack.count - 1
        let i = stack[t].index
        // `stack[t]` holds the leaf (the bytes stay valid as long as it does,
        // as before): read it without a retain and release per key.
        return Unmanaged.passUnretained(stack[t].page)._withUnsafeGuaranteedRef { p in
            let (o, l) = p.cellKey(i)
            return UnsafeRawBufferPointer(start: p.bytes + o, count: l)
        }
    }

    /// Positions at the first key >= `key`.
    mutating func seek<S: PageSource>(_ key: UnsafeRawBufferPointer, _ s: S) throws(KuraError) {
        stack.removeAll(keepingCapacity: true)
        // One allocation for a path of usual depth, not one per level.
        if stack.capacity < Self.usualDepth { stack.reserveCapacity(Self.usualDepth) }
        try descend(from: try tree.node(tree.root, s), to: key, s)
    }

    /// Descends from `start` (the path above it already on the stack) to
    /// the first key >= `key`.
    private mutating func descend<S: PageSource>(from start: Page, to key: UnsafeRawBufferPointer, _ s: S) throws(KuraError) {
        var p = start
        while !p.isLeafNode {
            guard stack.count < BTree.maxDepth else { throw tree.depthError(p.number) }
            let i = p.lowerBound(key)
            stack.append((p, i))
            p = try tree.node(p.child(i), s)
        }
        stack.append((p, p.lowerBound(key)))
        isValid = true
        if index >= leaf.cellCount { try advanceLeaf(s) }
    }

    /// Positions at the first key >= `key`, as `seek` does, but starts from
    /// the lowest page of the cursor's path whose keys are known to bracket
    /// `key` instead of from the root: a series of seeks to nearby keys (the
    /// probes of a join, in key order) then reads and searches only the
    /// pages that differ.
    ///
    /// The leaf is kept when its first key <= `key` <= its last key (every
    /// earlier leaf's keys are below its first, every later leaf's above its
    /// last). An interior page is kept when its first separator < `key` <=
    /// its last separator: its subtree holds every key from just above its
    /// first child's up to its last separator, so the tree's first key >=
    /// `key` is found below it (or, when its leaf holds none, by the next
    /// leaf, which `advanceLeaf` reaches through the path above it, kept as
    /// it was). Otherwise the root, as `seek`.
    ///
    /// Only while no page of the cursor's path can have changed since the
    /// cursor read it: a read snapshot's pages, or a walk during which the
    /// transaction writes nothing. On a damaged tree whose separators are out
    /// of order it may land elsewhere than `seek` would, as any search there
    /// may; every page is still checked as the tree's (`BTree.node`) and the
    /// descent's depth is bounded.
    mutating func seekNear<S: PageSource>(_ key: UnsafeRawBufferPointer, _ s: S) throws(KuraError) {
        guard isValid, stack.count > 0 else { return try seek(key, s) }
        var d = stack.count - 1
        let within: Bool = Unmanaged.passUnretained(stack[d].page)._withUnsafeGuaranteedRef { leaf in
            let n = leaf.cellCount
            return n > 0 && leaf.compareKey(0, key) <= 0 && leaf.compareKey(n - 1, key) >= 0
        }
        if within {
            let i = Unmanaged.passUnretained(stack[d].page)._withUnsafeGuaranteedRef { $0.lowerBound(key) }
            stack[d].index = i
            return
        }
        d -= 1
        while d > 0 {
            let brackets: Bool = Unmanaged.passUnretained(stack[d].page)._withUnsafeGuaranteedRef { p in
                let m = p.cellCount
                return m > 0 && p.compareKey(0, key) < 0 && p.compareKey(m - 1, key) >= 0
            }
            if brackets { break }
            d -= 1
        }
        guard d >= 0 else { return try seek(key, s) }
        let p = stack[d].page
        stack.removeSubrange(d..<stack.count)
        try descend(from: p, to: key, s)
    }

    mutating func first<S: PageSource>(_ s: S) throws(KuraError) {
        stack.removeAll(keepingCapacity: true)
        try descendEdge(tree.node(tree.root, s), leftmost: true, s)
    }

    mutating func last<S: PageSource>(_ s: S) throws(KuraError) {
        stack.removeAll(keepingCapacity: true)
        try descendEdge(tree.node(tree.root, s), leftmost: false, s)
    }

    /// Descends from `start` along the left or right edge to a leaf.
    private mutating func descendEdge<S: PageSource>(_ start: Page, leftmost: Bool, _ s: S) throws(KuraError) {
        var p = start
        while !p.isLeafNode {
            guard stack.count < BTree.maxDepth else { throw tree.depthError(p.number) }
            let i = leftmost ? 0 : p.cellCount
            stack.append((p, i))
            p = try tree.node(p.child(i), s, sequential: sequential)
        }
        let n = p.cellCount
        stack.append((p, leftmost ? 0 : n - 1))
        isValid = true
        if n == 0 {
            if leftmost { try advanceLeaf(s) } else { try retreatLeaf(s) }
        }
    }

    mutating func next<S: PageSource>(_ s: S) throws(KuraError) {
        guard isValid else { return }
        let t = stack.count - 1
        stack[t].index += 1
        // `stack[t]` holds the leaf while its cell count is read.
        let n = Unmanaged.passUnretained(stack[t].page)._withUnsafeGuaranteedRef { $0.cellCount }
        if stack[t].index >= n { try advanceLeaf(s) }
    }

    /// Moves to cell `i` of the current leaf (a scan that stepped through the
    /// leaf's cells itself); `i` must be a cell of that leaf.
    @inline(__always)
    mutating func moveInLeaf(to i: Int) {
        precondition(isValid && i >= 0 && i < leaf.cellCount)
        stack[stack.count - 1].index = i
    }

    mutating func previous<S: PageSource>(_ s: S) throws(KuraError) {
        guard isValid else { return }
        stack[stack.count - 1].index -= 1
        if index < 0 { try retreatLeaf(s) }
    }

    /// Moves to the first cell of the next non-empty leaf, or becomes invalid.
    private mutating func advanceLeaf<S: PageSource>(_ s: S) throws(KuraError) {
        var steps = 0
        while true {
            stack.removeLast()
            while let top = stack.last, top.index >= top.page.cellCount { stack.removeLast() }
            guard !stack.isEmpty else { isValid = false; return }
            stack[stack.count - 1].index += 1
            var p = try tree.node(stack[stack.count - 1].page.child(stack[stack.count - 1].index), s, sequential: sequential)
            while !p.isLeafNode {
                guard stack.count < BTree.maxDepth else { throw tree.depthError(p.number) }
                stack.append((p, 0))
                p = try tree.node(p.child(0), s, sequential: sequential)
            }
            stack.append((p, 0))
            if p.cellCount > 0 { return }
            steps += 1
            if steps > 1 << 20 { throw tree.depthError(p.number) }
        }
    }

    /// Moves to the last cell of the previous non-empty leaf, or becomes invalid.
    private mutating func retreatLeaf<S: PageSource>(_ s: S) throws(KuraError) {
        var steps = 0
        while true {
            stack.removeLast()
            while let top = stack.last, top.index <= 0 { stack.removeLast() }
            guard !stack.isEmpty else { isValid = false; return }
            stack[stack.count - 1].index -= 1
            var p = try tree.node(stack[stack.count - 1].page.child(stack[stack.count - 1].index), s, sequential: sequential)
            while !p.isLeafNode {
                guard stack.count < BTree.maxDepth else { throw tree.depthError(p.number) }
                stack.append((p, p.cellCount))
                p = try tree.node(p.child(p.cellCount), s, sequential: sequential)
            }
            stack.append((p, p.cellCount - 1))
            if p.cellCount > 0 { return }
            steps += 1
            if steps > 1 << 20 { throw tree.depthError(p.number) }
        }
    }
}
