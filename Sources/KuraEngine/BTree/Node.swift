// Node: the layout of B-tree pages (FORMAT.md, "Tree pages" and "Cells").
//
//     offset  size  field
//     0       1     kind (`PageKind`, Pager/PageKind.swift): 1 table interior,
//                   2 table leaf, 3 index interior, 4 index leaf (5 overflow
//                   and 6 freelist trunk are not nodes)
//     1       1     flags: bit 0 (format 5, table leaves only) = the page ends
//                   with its table's counters (the tree's right-most leaf);
//                   bit 1 (format 8, leaves only) = compact cells (below);
//                   bit 2 (format 10, leaves only) = short header (below);
//                   other bits 0
//     2       2     cell count
//     4       2     start of the cell content area
//     6       2     fragmented bytes inside the content area
//     8       4     right-most child (interior), 0 (leaf)
//     12      4     root page of the tree this page belongs to
//     16      2*n   cell pointers, in key order: offsets of the cells
//   a leaf with the short-header flag (format 10) has no right-most child field:
//     8       4     root page of the tree
//     12      2*n   cell pointers
//     ...           free space
//     start   ...   cell content, growing down from the trailer
//     size-24 16    (flag bit 0 only) next row ID u64, row count u64
//     size-8  8     checksum
//
// Cells:
//     leaf:      keyLength:varint key valueLength:varint value[local] overflow:u32?
//     interior:  child:u32 keyLength:varint key
//   compact leaves (flag bit 1, written in stores of format 8 and later):
//     table:     key valueLength:varint value[local] overflow:u32?
//                (the row-ID key delimits itself: its first byte gives its length)
//     index:     keyLength:varint key        (index leaves hold no values)
//
// A compact cell is the wide cell (the first form) less one byte: a row-ID key
// is at most 9 bytes, so its length varint is one byte, and an index cell's
// value length is the byte 0. In memory the tree code handles leaf cells in the
// wide form only (`makeLeafCell`, `cellBytes`, `insertCell`, `rebuild`): the
// page methods convert when they read or write a compact page, so cells move
// between pages of either form, and a page's form is chosen when it is built
// (`rebuild`, `initialize`; BTree.compactLeaves). A page keeps its form while
// cells are added to it or removed, so a store upgraded from format 7 holds
// leaves of both forms, each valid.
//
// The short header (flag bit 2, whose value 4 is the number of bytes it
// drops) is a leaf's header less its right-most-child field, always 0 in a
// leaf: the root field moves to offset 8 and the pointers start at 12. Where a
// page's pointers and root field lie is computed from its flags byte without
// a branch (`Node.headerSize(flags:)`, `Page.cellPointerStart`). A page keeps
// its header while cells are added or removed, as its cell form; writers of a
// store of format 10 build leaves with both flags (BTree.leafFlags), so a
// store upgraded from format 9 holds leaves with either header.
//
// An interior cell routes keys <= its key to `child`; keys greater than the last
// cell's key go to the right-most child. Keys compare as unsigned bytes
// (memcmp, then length). Table trees use `RowIDKey` encodings as keys; index trees
// use index keys with no value.
//
// Local payload: let usable = pageSize - 8, maxCell = (usable - 16) / 4 - 2. A leaf
// cell whose full size (both varints, key and value) is <= maxCell stores the
// value whole. Otherwise it stores the first `maxCell - (size of the varints and
// key) - 4` value bytes, then the 4-byte number of the first overflow page, so
// the cell is exactly maxCell bytes. So every page holds at least 4 cells.
// Keys may be at most `maxKey = maxCell - 24` bytes. A compact cell stores the
// same local bytes as its wide form (the rule is computed on the wide form),
// and is one byte shorter: moving a cell between forms never touches its
// overflow chain.
//
// Validation: every node loaded from disk passes `Node.validate` (cell count,
// pointers, cell bounds) before any code reads it, so tree code can read cells
// without further checks. Each cell is checked once, by a fast path for the
// usual shapes or the general `cellEnd`, which decide alike (NodeValidationTests).
// A page that passes gets a `NodeSummary` (Page.swift): its header fields and
// first and last row IDs, which the accessors below and `rowIDLowerBound`
// read from the Page object instead of the page's bytes. The pager keeps it
// only on pages it caches (immutable); any setter of Page clears it.

enum Node {
    static let kindOffset = 0
    static let flagsOffset = kindOffset + 1
    /// Flag bit: the page ends with its table's counters (`Page.tableCounters`).
    static let countersFlag: UInt8 = 1
    /// Flag bit (format 8, leaves only): the page holds compact cells (see the
    /// header; `Page.isCompactLeaf`).
    static let compactFlag: UInt8 = 2
    /// Flag bit (format 10, leaves only): the page has the short header, with
    /// no right-most-child field (see the header; `Page.cellPointerStart`).
    /// Its value is the number of bytes the short header drops, which
    /// `headerSize(flags:)` subtracts without a branch.
    static let shortHeaderFlag: UInt8 = 4
    /// The flag bits that give a leaf's form (cells, header); the rest of the
    /// flags byte (the counters bit) says what the page holds.
    static let formFlags: UInt8 = compactFlag | shortHeaderFlag
    /// How many bytes a compact leaf cell is shorter than its wide form: the
    /// key-length byte of a table cell, the value-length byte of an index cell.
    static let compactSaving = 1
    /// Bytes of the counters trailer (next row ID, row count), before the checksum.
    static let countersSize = 16
    static let cellCountOffset = kindOffset + 2
    static let contentStartOffset = cellCountOffset + 2
    static let fragmentedOffset = contentStartOffset + 2
    static let rightChildOffset = fragmentedOffset + 2
    static let treeRootOffset = rightChildOffset + 4
    /// Size of the full (wide) header: every interior page, and leaves
    /// without the short-header flag. The local-payload rule (`maxCell`)
    /// uses it for every page, whatever its header, so that a cell is laid
    /// out alike in every leaf.
    static let headerSize = treeRootOffset + 4
    /// Where the root field lies in a page with the short header.
    static let shortTreeRootOffset = rightChildOffset

    /// Size of the header of a page with these flags: `headerSize`, less the
    /// four bytes of the right-most-child field with the short-header flag.
    @inline(__always)
    static func headerSize(flags: UInt8) -> Int { headerSize &- Int(flags & shortHeaderFlag) }
    /// Offset of the root field of a page with these flags (12, or 8 with
    /// the short-header flag).
    @inline(__always)
    static func treeRootOffset(flags: UInt8) -> Int { treeRootOffset &- Int(flags & shortHeaderFlag) }

    static func usable(_ pageSize: Int) -> Int { pageSize - pageTrailerSize }
    static func maxCell(_ pageSize: Int) -> Int { (usable(pageSize) - headerSize) / 4 - 2 }
    static func maxKey(_ pageSize: Int) -> Int { maxCell(pageSize) - 24 }

    /// Makes `p` an empty node of `kind`; a leaf gets the form `form` (flag
    /// bits of `formFlags`: compact cells only in a store of format 8 or
    /// later, the short header only in one of format 10 or later; interior
    /// pages ignore it).
    static func initialize(_ p: Page, kind: PageKind, treeRoot: UInt32, form: UInt8 = 0) {
        p.zero()
        p.setU8(kindOffset, kind.rawValue)
        let flags = kind.isLeaf ? form & formFlags : 0
        if flags != 0 { p.setU8(flagsOffset, flags) }
        p.setU16(contentStartOffset, UInt16(usable(p.size)))
        p.setU32(treeRootOffset(flags: flags), treeRoot)
    }

    /// How a leaf cell with these lengths is stored: local value bytes, whether it
    /// has an overflow pointer, total cell size in the wide form (a compact
    /// cell holds the same local bytes and is `compactSaving` bytes shorter).
    @inline(__always)
    static func leafLayout(keyLength kl: Int, valueLength vl: Int, pageSize: Int) -> (local: Int, overflow: Bool, size: Int) {
        let fixed = Varint.size(UInt64(kl)) + kl + Varint.size(UInt64(vl))
        let full = fixed + vl
        let mc = maxCell(pageSize)
        if full <= mc { return (vl, false, full) }
        return (mc - fixed - 4, true, mc)
    }

    /// The bytes of the wide leaf cell `cell` that its compact form keeps: a
    /// table cell without its first byte (the key length, one byte for a
    /// row-ID key), an index cell up to the end of its key (its value length
    /// and any value dropped: index leaves hold none). `cell` was built by
    /// the tree code or copied out of a validated page, so its key length
    /// reads.
    @inline(__always)
    static func compactRange(ofWide cell: UnsafeRawBufferPointer, table: Bool) -> Range<Int> {
        if table { return 1..<cell.count }
        let (kl, a) = Varint.read(cell.baseAddress!, 0, cell.count)!
        return 0..<min(a + Int(kl), cell.count)
    }

    /// Checks a node page's structure. Pages of other kinds pass unchanged.
    static func validate(_ p: Page) throws(KuraError) {
        guard let kind = PageKind(rawValue: p.u8(kindOffset)), kind.isNode else { return }
        func bad(_ why: String) -> KuraError {
            KuraError(.corrupt, "tree page is malformed: \(why); run `kura check` on the store", page: p.number)
        }
        let flags = p.u8(flagsOffset)
        guard flags & ~(countersFlag | formFlags) == 0, flags & countersFlag == 0 || kind == .tableLeaf,
              flags & formFlags == 0 || kind.isLeaf else {
            throw bad("flags byte \(flags) is not allowed on a page of kind \(kind.rawValue)")
        }
        let compact = flags & compactFlag != 0
        // Where the cell pointers start: 16, or 12 in a leaf with the short header.
        let ptrs = headerSize(flags: flags)
        let use = p.contentEnd
        let n = Int(p.u16(cellCountOffset))
        let start = Int(p.u16(contentStartOffset))
        guard ptrs + 2 * n <= start, start <= use else {
            throw bad("\(n) cells and content start \(start) do not fit in the page")
        }
        if p.u32(treeRootOffset(flags: flags)) == 0 { throw bad("no tree root recorded") }
        if !kind.isLeaf && p.u32(rightChildOffset) == 0 { throw bad("interior page without a right-most child") }
        let maxK = maxKey(p.size)
        let mc = maxCell(p.size)
        let base = UnsafeRawPointer(p.bytes)
        var cellBytes = 0
        // Each cell is checked by a fast path for its usual shape (a one-byte
        // key length; in a leaf, a one- or two-byte value length), which
        // accepts exactly the cells `cellEnd` accepts with these shapes and
        // computes the same size; any other cell, or one that fails a check,
        // goes through `cellEnd`, which gives the verdict and the error.
        if compact && kind == .indexLeaf {
            // Compact index cells: the key length and the key.
            for i in 0..<n {
                let o = Int(p.u16(ptrs + 2 * i))
                if o >= start && o < use {
                    let kl = Int(base.load(fromByteOffset: o, as: UInt8.self))
                    if kl < 0x80 && kl <= maxK && o + 1 + kl <= use {
                        cellBytes += 1 + kl
                        continue
                    }
                }
                cellBytes += try cellEnd(p, i, kind: kind, compact: compact, pointers: ptrs, start: start, use: use, maxKey: maxK) - o
            }
        } else if kind.isLeaf {
            // Wide cells, and compact table cells, whose key (a row-ID key)
            // gives its own length; the two differ only up to the value length.
            let saving = compact ? compactSaving : 0
            for i in 0..<n {
                let o = Int(p.u16(ptrs + 2 * i))
                if o >= start && o < use {
                    let kl: Int
                    let ko: Int  // where the key starts
                    var keyValid: Bool
                    let b0 = base.load(fromByteOffset: o, as: UInt8.self)
                    if compact {
                        // A strict row-ID key (FORMAT.md, "Row-ID keys").
                        kl = RowIDKey.length(firstByte: b0)
                        ko = o
                        keyValid = RowIDKey.isFirstByte(b0) && RowIDKey.decode(base, o, use) != nil
                    } else {
                        kl = Int(b0)
                        ko = o + 1
                        keyValid = kl < 0x80 && kl <= maxK
                    }
                    let vAt = ko + kl  // where the value length starts
                    if keyValid && vAt < use {
                        let v0 = Int(base.load(fromByteOffset: vAt, as: UInt8.self))
                        var vl = v0
                        var vb = 1
                        if v0 >= 0x80 && vAt + 1 < use {
                            let v1 = Int(base.load(fromByteOffset: vAt + 1, as: UInt8.self))
                            // Canonical two-byte varints only (v1 != 0), so
                            // that the bytes read equal `Varint.size(vl)`, as
                            // `leafLayout` counts them.
                            if v1 != 0 && v1 < 0x80 {
                                vl = v0 & 0x7F | v1 << 7
                                vb = 2
                            }
                        }
                        if vl < 0x80 || vb == 2 {
                            // leafLayout: whole when the wide cell fits in
                            // maxCell, else exactly maxCell bytes wide (local
                            // part + overflow page); compact: a byte less.
                            let full = 1 + kl + vb + vl
                            let size = (full <= mc ? full : mc) - saving
                            if o + size <= use {
                                cellBytes += size
                                continue
                            }
                        }
                    }
                }
                cellBytes += try cellEnd(p, i, kind: kind, compact: compact, pointers: ptrs, start: start, use: use, maxKey: maxK) - o
            }
        } else {
            for i in 0..<n {
                let o = Int(p.u16(ptrs + 2 * i))
                if o >= start && o + 5 <= use && p.u32(o) != 0 {
                    let kl = Int(base.load(fromByteOffset: o + 4, as: UInt8.self))
                    if kl < 0x80 && kl <= maxK && o + 5 + kl <= use {
                        cellBytes += 5 + kl
                        continue
                    }
                }
                cellBytes += try cellEnd(p, i, kind: kind, compact: false, pointers: ptrs, start: start, use: use, maxKey: maxK) - o
            }
        }
        // The writer's free-space arithmetic (`freeSpace`, `defragment`) relies on
        // the cells and the fragmented bytes fitting in the content area.
        let fragmented = Int(p.u16(fragmentedOffset))
        guard cellBytes + fragmented <= use - start else {
            throw bad("\(cellBytes) bytes of cells and \(fragmented) fragmented bytes do not fit in the \(use - start)-byte content area")
        }
        summarize(p, kind: kind, cellCount: n)
    }

    /// Where node cell i ends, after checking that it lies in the content
    /// area [start, use) with well-formed lengths (a compact table cell: a
    /// strict row-ID key); throws `corrupt` naming the page otherwise. (The
    /// general check of one cell, for `validate`; `compact`: the page's flag;
    /// `pointers`: where its cell pointers start.)
    private static func cellEnd(_ p: Page, _ i: Int, kind: PageKind, compact: Bool, pointers: Int, start: Int, use: Int, maxKey maxK: Int) throws(KuraError) -> Int {
        func bad(_ why: String) -> KuraError {
            KuraError(.corrupt, "tree page is malformed: \(why); run `kura check` on the store", page: p.number)
        }
        let o = Int(p.u16(pointers + 2 * i))
        guard o >= start && o < use else { throw bad("cell \(i) pointer \(o) is outside the content area") }
        var pos = o
        if !kind.isLeaf {
            guard pos + 4 <= use, p.u32(pos) != 0 else { throw bad("cell \(i) child pointer is missing") }
            pos += 4
        }
        let kl: Int
        if compact && kind == .tableLeaf {
            guard let (_, k) = RowIDKey.decode(p.bytes, pos, use) else {
                throw bad("cell \(i) key is not a row-ID key (first byte \(p.u8(pos)))")
            }
            kl = k
            pos += k
        } else {
            guard let (k, a) = Varint.read(p.bytes, pos, use), k <= UInt64(maxK) else { throw bad("cell \(i) key length is malformed") }
            kl = Int(k)
            pos += a + kl
        }
        guard pos <= use else { throw bad("cell \(i) key runs past the page") }
        if kind.isLeaf && !(compact && kind == .indexLeaf) {
            guard let (vl, b) = Varint.read(p.bytes, pos, use), vl <= UInt64(Int32.max) else { throw bad("cell \(i) value length is malformed") }
            let layout = leafLayout(keyLength: kl, valueLength: Int(vl), pageSize: p.size)
            pos += b + layout.local + (layout.overflow ? 4 : 0)
            guard pos <= use else { throw bad("cell \(i) value runs past the page") }
        }
        return pos
    }

    /// Fills `p.summary` of a page this process built, as a commit publishes
    /// it (`Pager.summarizer`): the same facts `validate` records for a page
    /// read from disk, so lookups in the new snapshot need not read them from
    /// the page. Pages that are not tree pages are left without one. The page
    /// was built by the tree code, so its header and cells are well formed;
    /// the checks below only make sure a bug there cannot make this read
    /// outside the page (the summary is then left empty: lookups read the
    /// page itself, as they would without one).
    static func summarizeBuilt(_ p: Page) {
        guard let kind = PageKind(rawValue: p.u8(kindOffset)), kind.isNode else { return }
        let flags = p.u8(flagsOffset)
        let n = Int(p.u16(cellCountOffset))
        let start = Int(p.u16(contentStartOffset))
        let use = p.contentEnd
        guard headerSize(flags: flags) + 2 * n <= start, start <= use else { return }
        if n > 0 {
            // The cells `summarize` reads (first and last): inside the content area.
            for i in [0, n - 1] {
                let o = Int(p.u16(headerSize(flags: flags) + 2 * i))
                guard o >= start, o < use else { return }
            }
        }
        summarize(p, kind: kind, cellCount: n)
    }

    /// Fills `p.summary` from a node page that has just passed `validate`:
    /// kind, cell count, tree root and right-most child as the header has
    /// them, and for a table-tree page with cells the row IDs of its first
    /// and last cells when both keys decode as row-ID keys (else the unknown
    /// values, which make `rowIDLowerBound` search by bytes).
    private static func summarize(_ p: Page, kind: PageKind, cellCount n: Int) {
        var s = NodeSummary.none
        if n > 0 && (kind == .tableLeaf || kind == .tableInterior), let first = p.cellRowID(0), let last = p.cellRowID(n - 1) {
            s.firstRowID = first
            s.lastRowID = last
        }
        let flags = p.u8(flagsOffset)
        s.treeRoot = p.u32(treeRootOffset(flags: flags))
        s.rightChild = kind.isLeaf ? 0 : p.u32(rightChildOffset)
        s.cellCount = UInt16(n)
        s.flags = flags
        s.kind = kind.rawValue
        p.summary = s
    }
}

/// Typed accessors for a node page. The page must have passed `Node.validate`
/// (or have been built by this code).
extension Page {
    var nodeKind: PageKind? { PageKind(rawValue: kindByte) }
    /// The kind byte (from `summary` when the page has one).
    @inline(__always)
    var kindByte: UInt8 {
        let k = summary.kind
        return k != 0 ? k : u8(Node.kindOffset)
    }
    var isLeafNode: Bool { let k = kindByte; return k == 2 || k == 4 }
    /// Whether this leaf holds compact cells (flag bit 1; from `summary` when
    /// the page has one). Never true of an interior page (`Node.validate`).
    @inline(__always)
    var isCompactLeaf: Bool { flagsByte & Node.compactFlag != 0 }
    /// The flags byte (byte 1; from `summary` when the page has one).
    @inline(__always)
    var flagsByte: UInt8 { summary.kind != 0 ? summary.flags : u8(Node.flagsOffset) }
    /// Whether this is a table leaf of compact cells, whose keys give their own length.
    @inline(__always)
    var isCompactTableLeaf: Bool { kindByte == PageKind.tableLeaf.rawValue && isCompactLeaf }
    /// Whether this leaf has the short header (flag bit 2, format 10).
    @inline(__always)
    var hasShortHeader: Bool { flagsByte & Node.shortHeaderFlag != 0 }
    /// The leaf form bits of the flags byte (`Node.formFlags`): compact
    /// cells, short header.
    @inline(__always)
    var leafForm: UInt8 { flagsByte & Node.formFlags }
    /// Where the cell pointer array starts: 16, or 12 in a leaf with the
    /// short header (computed from the flags byte without a branch).
    @inline(__always)
    var cellPointerStart: Int { Node.headerSize(flags: flagsByte) }
    var cellCount: Int {
        get { summary.kind != 0 ? Int(summary.cellCount) : Int(u16(Node.cellCountOffset)) }
        set { setU16(Node.cellCountOffset, UInt16(newValue)) }
    }
    var contentStart: Int {
        get { Int(u16(Node.contentStartOffset)) }
        set { setU16(Node.contentStartOffset, UInt16(newValue)) }
    }
    var fragmented: Int {
        get { Int(u16(Node.fragmentedOffset)) }
        set { setU16(Node.fragmentedOffset, UInt16(newValue)) }
    }
    /// The right-most child of an interior page (0 for a leaf: a leaf with
    /// the short header has no such field). Set only on interior pages.
    var rightChild: UInt32 {
        get {
            if summary.kind != 0 { return summary.rightChild }
            return hasShortHeader ? 0 : u32(Node.rightChildOffset)
        }
        set {
            precondition(!hasShortHeader, "a right-most child set on a leaf with the short header")
            setU32(Node.rightChildOffset, newValue)
        }
    }
    var treeRoot: UInt32 { summary.kind != 0 ? summary.treeRoot : u32(Node.treeRootOffset(flags: flagsByte)) }

    @inline(__always) func cellOffset(_ i: Int) -> Int { Int(u16(cellPointerStart + 2 * i)) }

    /// Where this page's cell keys lie, read from its header once (kind and
    /// flags, from `summary` when the page has one), for searches that read
    /// several keys of one page (`lowerBound`, `rowIDLowerBound`).
    @inline(__always)
    var keyLayout: NodeKeyLayout { Self.keyLayout(kind: kindByte, flags: flagsByte) }

    /// `keyLayout` of a node page with this kind byte and flags byte.
    @inline(__always)
    static func keyLayout(kind k: UInt8, flags f: UInt8) -> NodeKeyLayout {
        let leaf = k == PageKind.tableLeaf.rawValue || k == PageKind.indexLeaf.rawValue
        return NodeKeyLayout(pointers: Node.headerSize(flags: f),
                             selfDelimiting: k == PageKind.tableLeaf.rawValue && f & Node.compactFlag != 0,
                             keyLengthAt: leaf ? 0 : 4)
    }

    /// Offset and length of cell i's key.
    @inline(__always)
    func cellKey(_ i: Int) -> (offset: Int, length: Int) { cellKey(i, keyLayout) }

    /// Offset and length of cell i's key, with this page's `keyLayout`.
    @inline(__always)
    func cellKey(_ i: Int, _ layout: NodeKeyLayout) -> (offset: Int, length: Int) {
        let o = Int(u16(layout.pointers + 2 * i))
        if layout.selfDelimiting {
            // The page passed Node.validate: the key is a row-ID key.
            return (o, RowIDKey.length(firstByte: u8(o)))
        }
        // Interior cells start with their child.
        let pos = o + layout.keyLengthAt
        // Most keys are shorter than 128 bytes: a one-byte length.
        let first = u8(pos)
        if first < 0x80 { return (pos + 1, Int(first)) }
        let (kl, a) = Varint.read(bytes, pos, size)!
        return (pos + a, Int(kl))
    }

    /// Child page of interior cell i (i == cellCount means the right-most child).
    @inline(__always)
    func child(_ i: Int) -> UInt32 {
        i == cellCount ? rightChild : u32(cellOffset(i))
    }

    func setChild(_ i: Int, _ page: UInt32) {
        if i == cellCount { rightChild = page } else { setU32(cellOffset(i), page) }
    }

    /// Value layout of leaf cell i.
    @inline(__always)
    func leafValue(_ i: Int) -> (offset: Int, length: Int, local: Int, overflow: UInt32) {
        let (ko, kl) = cellKey(i)
        // A compact index cell has no value length: its value is empty.
        if isCompactLeaf && kindByte == PageKind.indexLeaf.rawValue { return (ko + kl, 0, 0, 0) }
        let (vl, b) = Varint.read(bytes, ko + kl, size)!
        let layout = Node.leafLayout(keyLength: kl, valueLength: Int(vl), pageSize: size)
        let vo = ko + kl + b
        return (vo, Int(vl), layout.local, layout.overflow ? u32(vo + layout.local) : 0)
    }

    /// Leaf cell i read in one pass over its header: its key's place and its
    /// value's layout, as `cellKey` and `leafValue` give them (which read the
    /// key length twice and size both lengths again). Leaf pages only; for
    /// scans, which read every cell of a leaf.
    @inline(__always)
    func leafCell(_ i: Int) -> (keyOffset: Int, keyLength: Int, offset: Int, length: Int, local: Int, overflow: UInt32) {
        let o = cellOffset(i)
        // The cell passed Node.validate (its lengths are readable varints
        // inside the page, a compact table cell's key a row-ID key), as
        // `cellKey` assumes.
        let kl: Int
        let ko: Int
        var saving = 0
        if isCompactLeaf {
            if kindByte == PageKind.indexLeaf.rawValue {
                let (k, a) = Varint.read(bytes, o, size)!
                return (o + a, Int(k), o + a + Int(k), 0, 0, 0)
            }
            kl = RowIDKey.length(firstByte: u8(o))
            ko = o
            saving = Node.compactSaving
        } else {
            let (k, a) = Varint.read(bytes, o, size)!
            kl = Int(k)
            ko = o + a
        }
        let (vl, b) = Varint.read(bytes, ko + kl, size)!
        let vo = ko + kl + b
        // The cell as stored (counted in the wide form) is at least as long
        // as `leafLayout` counts it (its varints are no shorter than the
        // fewest bytes), so a size within `maxCell` means the value is
        // whole, as `leafLayout` says.
        if vo - o + saving + Int(vl) <= Node.maxCell(size) { return (ko, kl, vo, Int(vl), Int(vl), 0) }
        let layout = Node.leafLayout(keyLength: kl, valueLength: Int(vl), pageSize: size)
        return (ko, kl, vo, Int(vl), layout.local, layout.overflow ? u32(vo + layout.local) : 0)
    }

    /// Size in bytes of cell i.
    func cellSize(_ i: Int) -> Int {
        let o = cellOffset(i)
        if isLeafNode {
            let v = leafValue(i)
            return v.offset + v.local + (v.overflow != 0 ? 4 : 0) - o
        }
        let (ko, kl) = cellKey(i)
        return ko + kl - o
    }

    /// Bytes of cell i, in the wide form whatever the page's form (a compact
    /// table cell gets its key length back, a compact index cell its empty
    /// value's length), as the tree code handles cells (see the header).
    func cellBytes(_ i: Int) -> [UInt8] {
        let o = cellOffset(i)
        let stored = UnsafeRawBufferPointer(start: bytes + o, count: cellSize(i))
        guard isCompactLeaf else { return Array(stored) }
        var c: [UInt8] = []
        c.reserveCapacity(stored.count + Node.compactSaving)
        if kindByte == PageKind.tableLeaf.rawValue {
            c.append(UInt8(RowIDKey.length(firstByte: u8(o))))
            c.append(contentsOf: stored)
        } else {
            c.append(contentsOf: stored)
            c.append(0)
        }
        return c
    }

    /// The bytes of the wide cell `cell` this page stores: all of them, or
    /// in a compact leaf its compact form (a table cell without its first
    /// byte, the key length; an index cell up to the end of its key, which
    /// drops its value length). `cell` was built by the tree code or copied
    /// out of a validated page (`cellBytes`), so its key length reads.
    @inline(__always)
    fileprivate func storedRange(of cell: UnsafeRawBufferPointer) -> Range<Int> {
        guard isCompactLeaf else { return 0..<cell.count }
        return Node.compactRange(ofWide: cell, table: kindByte == PageKind.tableLeaf.rawValue)
    }

    /// Bytes the wide leaf cell of `wideSize` bytes takes on this page.
    @inline(__always)
    func storedSize(ofLeafCell wideSize: Int) -> Int { isCompactLeaf ? wideSize - Node.compactSaving : wideSize }

    /// Key bytes of cell i.
    func keyBytes(_ i: Int) -> [UInt8] {
        let (o, l) = cellKey(i)
        return Array(UnsafeRawBufferPointer(start: bytes + o, count: l))
    }

    /// Free bytes available for cells and pointers (including fragments).
    var freeSpace: Int { contentStart - (cellPointerStart + 2 * cellCount) + fragmented }

    /// Bytes used by cells and pointers.
    var usedSpace: Int { contentEnd - cellPointerStart - freeSpace }

    /// Whether the page ends with its table's counters (format 5: the right-most
    /// leaf of a table tree; FORMAT.md, "Table counters").
    var hasCounters: Bool { u8(Node.flagsOffset) & Node.countersFlag != 0 }

    /// Where the cell content area ends: before the checksum, and before the
    /// counters when the page has them.
    var contentEnd: Int { size - pageTrailerSize - (hasCounters ? Node.countersSize : 0) }

    /// The counters this page ends with (next row ID, row count), or nil if it
    /// has none. Raw values: the caller checks their ranges.
    var tableCounters: (nextRowID: Int64, rowCount: Int64)? {
        guard hasCounters else { return nil }
        let at = size - pageTrailerSize - Node.countersSize
        return (Int64(bitPattern: u64(at)), Int64(bitPattern: u64(at + 8)))
    }

    /// Makes the page end with these counters. A page without counters first
    /// packs its cells below the 16 bytes they take; returns false, changing
    /// nothing, if its free space is less than that.
    func setTableCounters(nextRowID: Int64, rowCount: Int64) -> Bool {
        if !hasCounters {
            guard freeSpace >= Node.countersSize else { return false }
            let oldEnd = contentEnd
            setU8(Node.flagsOffset, u8(Node.flagsOffset) | Node.countersFlag)
            defragment(from: oldEnd)
        }
        let at = size - pageTrailerSize - Node.countersSize
        setU64(at, UInt64(bitPattern: nextRowID))
        setU64(at + 8, UInt64(bitPattern: rowCount))
        return true
    }

    /// Compares cell i's key with `key`: <0, 0, >0.
    @inline(__always)
    func compareKey(_ i: Int, _ key: UnsafeRawBufferPointer) -> Int { compareKey(i, key, keyLayout) }

    /// `compareKey` with this page's `keyLayout`.
    @inline(__always)
    func compareKey(_ i: Int, _ key: UnsafeRawBufferPointer, _ layout: NodeKeyLayout) -> Int {
        let (o, l) = cellKey(i, layout)
        let n = min(l, key.count)
        if n <= 16 {
            // Row-ID keys are 1 to 9 bytes: an inline loop beats a call to memcmp.
            let a = bytes + o
            var k = 0
            while k < n {
                let x = a.load(fromByteOffset: k, as: UInt8.self)
                let y = key[k]
                if x != y { return Int(x) - Int(y) }
                k += 1
            }
            return l - key.count
        }
        let c = memcmpBytes(bytes + o, key.baseAddress!, n)
        if c != 0 { return c }
        return l - key.count
    }

    /// First cell index whose key is >= `key` (cellCount if none).
    @inline(__always)
    func lowerBound(_ key: UnsafeRawBufferPointer) -> Int {
        var lo = 0
        var hi = cellCount
        let layout = keyLayout
        while lo < hi {
            let mid = (lo + hi) >> 1
            if compareKey(mid, key, layout) < 0 { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    /// `lowerBound(key)`, by interpolation (`rowIDLowerBound`) when `rowID`
    /// is the row ID `key` encodes in a table tree (`BTree.rowID(ofKey:)`).
    @inline(__always)
    func lowerBound(_ key: UnsafeRawBufferPointer, rowID: Int64?) -> Int {
        if let rowID { return rowIDLowerBound(key, rowID: rowID) }
        return lowerBound(key)
    }

    /// The slot holding `key` (searched as `lowerBound(_:rowID:)` does), or
    /// nil if no cell of this node has that key.
    @inline(__always)
    func slot(of key: UnsafeRawBufferPointer, rowID: Int64?) -> Int? {
        let i = lowerBound(key, rowID: rowID)
        return i < cellCount && compareKey(i, key) == 0 ? i : nil
    }

    /// `lowerBound(key)` for a node of a table tree, whose keys are row IDs
    /// (`RowIDKey`) and `key` encodes `rowID`: the first probe is where `rowID`
    /// falls between the node's first and last row IDs (row IDs are allocated
    /// increasing, so a node's keys are close to evenly spread), then a binary
    /// search of the side that is left. A lookup then reads about four cells of
    /// the page instead of log2(cells): each is a cache miss on a page not read
    /// lately, which is most of a point read's time.
    ///
    /// Same answer as `lowerBound` on any node whose keys are sorted (only
    /// `compareKey` decides); on a damaged node it still returns an index in
    /// 0...cellCount, as `lowerBound` does.
    ///
    /// The first and last row IDs come from `summary` when the page has one
    /// (a page read from disk), which saves reading the page's header line,
    /// its first and last cell pointers and those two cells.
    func rowIDLowerBound(_ key: UnsafeRawBufferPointer, rowID: Int64) -> Int {
        let n: Int
        let first: Int64
        let last: Int64
        let layout: NodeKeyLayout
        if summary.kind != 0 {
            n = Int(summary.cellCount)
            first = summary.firstRowID
            last = summary.lastRowID
            layout = Self.keyLayout(kind: summary.kind, flags: summary.flags)
        } else {
            n = cellCount
            guard n > 8, let f = cellRowID(0), let l = cellRowID(n - 1) else { return lowerBound(key) }
            first = f
            last = l
            layout = keyLayout
        }
        guard n > 8, first < rowID, rowID <= last else {
            return lowerBound(key)
        }
        // Here key(0) < key <= key(n - 1): the answer is in 1...n-1.
        // Distances as UInt64 (exact: first < rowID <= last, so both are in
        // 1...2^64-1): the fraction is then finite and in 0...1. Subtracting
        // the Doubles instead gave 0/0 for row IDs near Int64.max that one
        // Double cannot tell apart, and Int(NaN) traps.
        let span = UInt64(bitPattern: last &- first)
        let offset = UInt64(bitPattern: rowID &- first)
        let fraction = Double(offset) / Double(span)
        let g = min(max(Int(fraction * Double(n - 1)), 1), n - 1)
        var lo = 1
        var hi = n - 1
        if compareKey(g, key, layout) >= 0 {
            if compareKey(g - 1, key, layout) < 0 { return g }
            hi = g - 1
        } else {
            if g + 1 > n - 1 || compareKey(g + 1, key, layout) >= 0 { return g + 1 }
            lo = g + 2
        }
        // The answer is in lo...hi.
        while lo < hi {
            let mid = (lo + hi) >> 1
            if compareKey(mid, key, layout) < 0 { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    /// The row ID cell i's key encodes, or nil if it is not a row-ID key.
    @inline(__always)
    fileprivate func cellRowID(_ i: Int) -> Int64? {
        let (o, l) = cellKey(i)
        guard let (v, k) = RowIDKey.decode(UnsafeRawPointer(bytes), o, o + l), k == l else { return nil }
        return v
    }

    /// Inserts `cell` (wide form; stored in the page's form) at index i if it
    /// fits (defragmenting when needed). Returns false, changing nothing, if
    /// it does not fit.
    func insertCell(_ cell: [UInt8], at i: Int) -> Bool {
        cell.withUnsafeBytes { c in insertCell(UnsafeRawBufferPointer(rebasing: c[storedRange(of: c)]), at: i) }
    }

    /// `insertCell` for the bytes to store as they are.
    private func insertCell(_ stored: UnsafeRawBufferPointer, at i: Int) -> Bool {
        let need = stored.count + 2
        guard freeSpace >= need else { return false }
        let base = cellPointerStart
        if contentStart - (base + 2 * cellCount) < need { defragment() }
        let start = contentStart - stored.count
        (bytes + start).copyMemory(from: stored.baseAddress!, byteCount: stored.count)
        let n = cellCount
        let ptrs = bytes + base
        if i < n { memmoveBytes(ptrs + 2 * (i + 1), ptrs + 2 * i, 2 * (n - i)) }
        setU16(base + 2 * i, UInt16(start))
        contentStart = start
        cellCount = n + 1
        return true
    }

    /// Removes cell i (its bytes become a fragment).
    func removeCell(_ i: Int) {
        let size = cellSize(i)
        let o = cellOffset(i)
        let n = cellCount
        let ptrs = bytes + cellPointerStart
        if i < n - 1 { memmoveBytes(ptrs + 2 * i, ptrs + 2 * (i + 1), 2 * (n - 1 - i)) }
        cellCount = n - 1
        if o == contentStart { contentStart = o + size } else { fragmented += size }
        if cellCount == 0 {
            contentStart = contentEnd
            fragmented = 0
        }
    }

    /// Replaces cell i with `cell` (same key; a leaf's new value) when the
    /// page has room for it: in place when it is no longer than the old cell
    /// (the bytes it no longer uses are counted as fragmented); else in the
    /// gap between the pointers and the content when the whole cell fits
    /// there (the old cell's bytes becoming a fragment); else, when the gap
    /// holds at least the growth, by sliding the content that lies before the
    /// old cell down by the growth (one move of bytes, no defragmentation: a
    /// value that grows by a byte in a packed leaf, as an object's version
    /// column does on its first update, costs no copy of the whole page).
    /// Returns false, changing nothing, when the gap is smaller than the
    /// growth (the caller removes and inserts, which defragments). `cell` is
    /// in the wide form, stored in the page's form.
    func replaceCell(_ i: Int, with cell: [UInt8]) -> Bool {
        cell.withUnsafeBytes { c in replaceCell(i, with: UnsafeRawBufferPointer(rebasing: c[storedRange(of: c)])) }
    }

    /// `replaceCell` for the bytes to store as they are.
    private func replaceCell(_ i: Int, with cell: UnsafeRawBufferPointer) -> Bool {
        let oldSize = cellSize(i)
        let o = cellOffset(i)
        if cell.count <= oldSize {
            (bytes + o).copyMemory(from: cell.baseAddress!, byteCount: cell.count)
            if cell.count < oldSize { fragmented += oldSize - cell.count }
            return true
        }
        let n = cellCount
        let base = cellPointerStart
        let gap = contentStart - (base + 2 * n)
        if gap >= cell.count {
            let start = contentStart - cell.count
            (bytes + start).copyMemory(from: cell.baseAddress!, byteCount: cell.count)
            setU16(base + 2 * i, UInt16(start))
            contentStart = start
            fragmented += oldSize
            return true
        }
        let growth = cell.count - oldSize
        guard gap >= growth else { return false }
        // Every byte in [contentStart, o) moves down by `growth`: the cells
        // there (and any fragments between them, which stay fragments) keep
        // their contents, so only their pointers change. The new cell then
        // ends where the old one ended.
        let start = contentStart
        if o > start { memmoveBytes(bytes + (start - growth), bytes + start, o - start) }
        for j in 0..<n where j != i {
            let oj = cellOffset(j)
            if oj < o { setU16(base + 2 * j, UInt16(oj - growth)) }
        }
        let at = o - growth
        (bytes + at).copyMemory(from: cell.baseAddress!, byteCount: cell.count)
        setU16(base + 2 * i, UInt16(at))
        contentStart = start - growth
        return true
    }

    /// Packs the content area so all free space is contiguous: the cells'
    /// places are read first (writing moves them), the content is copied
    /// aside once, then each cell is written back from the copy, from the
    /// page's end down, in pointer order. (Every cell lies in the content
    /// area: pages from disk passed `validate`.) `oldEnd` is where the cells
    /// may end (default: `contentEnd`); they are packed down from `contentEnd`.
    func defragment(from oldEnd: Int? = nil) {
        let n = cellCount
        let end = oldEnd ?? contentEnd
        let from = contentStart
        var places = ContiguousArray<(offset: Int, size: Int)>()
        places.reserveCapacity(n)
        for i in 0..<n { places.append((cellOffset(i), cellSize(i))) }
        let span = end - from
        let copy = UnsafeMutableRawPointer.allocate(byteCount: max(span, 1), alignment: 8)
        defer { copy.deallocate() }
        if span > 0 { copy.copyMemory(from: bytes + from, byteCount: span) }
        var top = contentEnd
        let base = cellPointerStart
        for (i, c) in places.enumerated() {
            top -= c.size
            (bytes + top).copyMemory(from: copy + (c.offset - from), byteCount: c.size)
            setU16(base + 2 * i, UInt16(top))
        }
        contentStart = top
        fragmented = 0
    }

    /// Makes the node a leaf of `kind` in the form `old` (a leaf) has
    /// (`form`: its cell form must be `old`'s, its header may differ), holding cells `range` of the
    /// list that is `old`'s cells with the wide cell `cell` inserted at
    /// position `at` (`sizes[j]` is `old.cellSize(j)`, measured once by the
    /// caller): the cells of `old` are copied as they lie (no cell is
    /// copied out into an array), `cell` in that form. The cells must fit;
    /// the page has no counters afterwards, as after `rebuild`. A leaf split
    /// (`BTree.insertCell`) builds both halves so from a copy of the full leaf.
    func rebuildLeaf(kind: PageKind, treeRoot: UInt32, form: UInt8, from old: Page, sizes: [Int], cells range: Range<Int>,
                     inserting cell: [UInt8], at: Int) {
        Node.initialize(self, kind: kind, treeRoot: treeRoot, form: form)
        var top = Node.usable(size)
        let base = cellPointerStart
        var slot = 0
        for k in range {
            if k == at {
                cell.withUnsafeBytes { b in
                    let r = storedRange(of: b)
                    top -= r.count
                    (bytes + top).copyMemory(from: b.baseAddress! + r.lowerBound, byteCount: r.count)
                }
            } else {
                let j = k < at ? k : k - 1
                let n = sizes[j]
                top -= n
                (bytes + top).copyMemory(from: old.bytes + old.cellOffset(j), byteCount: n)
            }
            setU16(base + 2 * slot, UInt16(top))
            slot += 1
        }
        contentStart = top
        cellCount = slot
    }

    /// Replaces the node's cells with `cells` (wide form; which must fit in
    /// the page's form) and sets the right-most child of an interior page
    /// (a leaf's `rightChild` must be 0). A leaf gets the form `form`
    /// (`Node.formFlags`): compact cells with `Node.compactFlag` (a table
    /// leaf's keys must then be row-ID keys: `BTree.leafForm` checks cells
    /// that came from disk), else wide ones; the short header with
    /// `Node.shortHeaderFlag`. The page loses its counters, if it had any
    /// (the commit writes them again to the tree's right-most leaf).
    func rebuild(kind: PageKind, treeRoot: UInt32, cells: ArraySlice<[UInt8]>, rightChild: UInt32, form: UInt8 = 0) {
        Node.initialize(self, kind: kind, treeRoot: treeRoot, form: form)
        var top = Node.usable(size)
        let base = cellPointerStart
        for (i, c) in cells.enumerated() {
            c.withUnsafeBytes { b in
                let r = storedRange(of: b)
                top -= r.count
                (bytes + top).copyMemory(from: b.baseAddress! + r.lowerBound, byteCount: r.count)
            }
            setU16(base + 2 * i, UInt16(top))
        }
        contentStart = top
        cellCount = cells.count
        if !kind.isLeaf { self.rightChild = rightChild }
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where a node page's cell keys lie (`Page.keyLayout`): read from its
/// header once by a search that compares several keys of the page.
struct NodeKeyLayout {
    /// Where the cell pointers start (16, or 12 with the short header).
    let pointers: Int
    /// Whether a cell starts with its key, which gives its own length (a
    /// compact table leaf's row-ID key).
    let selfDelimiting: Bool
    /// Where a cell's key length lies in it: 0 in a leaf, 4 in an interior
    /// cell (after its child).
    let keyLengthAt: Int
}

/// Unsigned byte-wise order of two byte strings (memcmp, then length): the order
/// of keys in every tree.
@inline(__always)
func bytesPrecede(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    a.withUnsafeBufferPointer { x in
        b.withUnsafeBufferPointer { y in
            let n = min(x.count, y.count)
            let c = n == 0 ? 0 : memcmpBytes(x.baseAddress!, y.baseAddress!, n)
            return c != 0 ? c < 0 : x.count < y.count
        }
    }
}

@inline(__always) func memcmpBytes(_ a: UnsafeRawPointer, _ b: UnsafeRawPointer, _ n: Int) -> Int {
    Int(memcmp(a, b, n))
}

@inline(__always) func memmoveBytes(_ dst: UnsafeMutableRawPointer, _ src: UnsafeRawPointer, _ n: Int) {
    memmove(dst, src, n)
}
