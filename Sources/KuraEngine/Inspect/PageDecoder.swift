// PageDecoder: one page decoded field by field for `kura page` (FORMAT.md, "The
// header page", "Tree pages", "Cells", "Overflow pages", "Freelist").
//
// Unlike the tree code, which reads only pages that passed `Node.validate`, the
// decoder reads any bytes: every offset is checked against the page before it is
// used, a cell that does not parse is described as such, and the loops are
// bounded by the page size. So it shows as much as can be shown of a damaged page.

/// One region of a page, for the free-space map.
package struct PageRegion: Sendable, Equatable {
    package let start: Int
    package let end: Int
    /// `header`, `cell pointers`, `free`, `cell N`, `gap`, `overlap`, `values`, `entries`, `checksum`...
    package let what: String
}

/// One cell of a tree page.
package struct CellDescription: Sendable {
    package let index: Int
    package let offset: Int
    /// Bytes of the cell (nil when it does not parse).
    package var size: Int?
    /// Interior cells: the child page.
    package var child: UInt32?
    package var key: [UInt8] = []
    /// The key decoded as a row ID (table trees).
    package var rowID: Int64?
    /// Leaf cells: the value's total length, the bytes stored in the cell, and
    /// the first overflow page (0 if none).
    package var valueLength: Int?
    package var localLength: Int?
    package var overflowPage: UInt32?
    /// The record, when the whole value is in the cell and decodes.
    package var record: [Value]?
    /// Why the cell or its record does not decode.
    package var problem: String?
}

/// A decoded page.
package struct PageDescription: Sendable {
    package let number: UInt32
    package let pageSize: Int
    package let origin: PageOrigin
    /// False when the file or log ended inside the page.
    package let complete: Bool
    package let storedChecksum: UInt64
    package let computedChecksum: UInt64
    package var checksumValid: Bool { complete && storedChecksum == computedChecksum }
    package let kindByte: UInt8
    /// `header`, `table interior`, `table leaf`, `index interior`, `index leaf`,
    /// `overflow`, `freelist trunk`, or `unknown`.
    package let kindName: String
    /// Header fields in on-disk order.
    package var fields: [(name: String, value: Value)] = []
    package var cells: [CellDescription] = []
    /// Freelist trunk entries.
    package var entries: [UInt32] = []
    /// The page from offset 0 to its end, region by region.
    package var regions: [PageRegion] = []
    /// Structural problems seen while decoding.
    package var problems: [String] = []
    /// The raw bytes.
    package let bytes: [UInt8]
}

extension RawStore {
    /// Decodes page `number` as it is in the snapshot (the log's copy wins).
    package func describePage(_ number: UInt32) -> PageDescription {
        let r = rawPage(number)
        let p = r.page
        let kindByte = number == 1 ? 0 : p.u8(0)
        let kindName: String
        if number == 1 { kindName = "header" }
        else {
            switch PageKind(rawValue: kindByte) {
            case .tableInterior: kindName = "table interior"
            case .tableLeaf: kindName = "table leaf"
            case .indexInterior: kindName = "index interior"
            case .indexLeaf: kindName = "index leaf"
            case .overflow: kindName = "overflow"
            case .freelistTrunk: kindName = "freelist trunk"
            case nil: kindName = "unknown"
            }
        }
        var d = PageDescription(number: number, pageSize: pageSize, origin: r.origin, complete: r.complete,
                                storedChecksum: r.storedChecksum, computedChecksum: r.computedChecksum,
                                kindByte: kindByte, kindName: kindName, bytes: r.bytes)
        let usable = Node.usable(pageSize)
        if !r.complete { d.problems.append("\(r.incompleteReason); missing bytes read as zeros") }
        if number == 1 {
            let h = HeaderFields(p)
            d.fields = [
                ("magic", .text(h.magicValid ? "KuraDB\\n\\0" : "invalid")),
                ("format version", .integer(Int64(h.version))),
                ("page size", .integer(Int64(h.pageSize))),
                ("page count", .integer(Int64(h.pageCount))),
                ("freelist head", .integer(Int64(h.freelistHead))),
                ("free count", .integer(Int64(h.freeCount))),
                ("catalog root", .integer(Int64(h.catalogRoot))),
                ("change counter", .integer(Int64(bitPattern: h.changeCounter))),
                ("database ID", .text(hex(h.databaseID))),
                ("next catalog ID", .integer(h.nextCatalogID)),
                ("counters root", .integer(Int64(h.countersRoot))),
                ("schema cookie", .integer(Int64(bitPattern: h.schemaCookie))),
            ]
            d.regions = [PageRegion(start: 0, end: FileHeader.endOffset, what: "header fields"),
                         PageRegion(start: FileHeader.endOffset, end: usable, what: "zero")]
            if let nonzero = (FileHeader.endOffset..<usable).first(where: { p.u8($0) != 0 }) {
                d.problems.append("byte \(nonzero) should be zero")
            }
        } else {
            switch PageKind(rawValue: kindByte) {
            case .tableInterior, .tableLeaf, .indexInterior, .indexLeaf:
                describeTreePage(p, kind: PageKind(rawValue: kindByte)!, into: &d)
            case .overflow:
                let next = p.u32(4)
                d.fields = [("kind", .integer(Int64(kindByte))), ("next overflow page", .integer(Int64(next)))]
                d.regions = [PageRegion(start: 0, end: 8, what: "header"),
                             PageRegion(start: 8, end: usable, what: "value bytes")]
            case .freelistTrunk:
                let next = p.u32(4)
                let n = Int(p.u32(8))
                let capacity = (usable - 12) / 4
                d.fields = [("kind", .integer(Int64(kindByte))), ("next trunk page", .integer(Int64(next))),
                            ("entries", .integer(Int64(n)))]
                if n > capacity { d.problems.append("\(n) entries claimed; a trunk holds at most \(capacity)") }
                let shown = min(n, capacity)
                d.entries = (0..<shown).map { p.u32(12 + 4 * $0) }
                d.regions = [PageRegion(start: 0, end: 12, what: "header"),
                             PageRegion(start: 12, end: 12 + 4 * shown, what: "entries")]
                if 12 + 4 * shown < usable { d.regions.append(PageRegion(start: 12 + 4 * shown, end: usable, what: "unused")) }
            case nil:
                d.fields = [("kind", .integer(Int64(kindByte)))]
                d.regions = [PageRegion(start: 0, end: usable, what: "unknown contents (a free leaf page holds garbage)")]
            }
        }
        d.regions.append(PageRegion(start: usable, end: pageSize, what: "checksum"))
        if !d.checksumValid && r.complete {
            d.problems.append("checksum mismatch: stored \(hex(r.storedChecksum)), computed \(hex(r.computedChecksum))")
        }
        return d
    }

    func describeTreePage(_ p: Page, kind: PageKind, into d: inout PageDescription) {
        let usable = p.contentEnd
        let n = Int(p.u16(Node.cellCountOffset))
        let start = Int(p.u16(Node.contentStartOffset))
        let fragmented = Int(p.u16(Node.fragmentedOffset))
        let flags = p.u8(Node.flagsOffset)
        // The short header (flag bit 2, format 10) has no right-most-child
        // field: the root is at offset 8 and the pointers start at 12. (On an
        // interior page the flag is a problem `validate` reports; the page is
        // still shown as its flags byte lays it out.)
        let short = flags & Node.shortHeaderFlag != 0
        let headerEnd = Node.headerSize(flags: flags)
        let root = p.u32(Node.treeRootOffset(flags: flags))
        d.fields = [("kind", .integer(Int64(kind.rawValue))), ("flags", .integer(Int64(flags))),
                    ("cell count", .integer(Int64(n))), ("content start", .integer(Int64(start))),
                    ("fragmented bytes", .integer(Int64(fragmented)))]
        if !short { d.fields.append(("right-most child", .integer(Int64(p.u32(Node.rightChildOffset))))) }
        d.fields.append(("tree root", .integer(Int64(root))))
        if let c = p.tableCounters {
            d.fields += [("next row ID", .integer(c.nextRowID)), ("row count", .integer(c.rowCount))]
        }
        do { try Node.validate(p) } catch { d.problems.append(error.message) }
        let maxPointers = max(usable - headerEnd, 0) / 2
        let shown = min(n, maxPointers)
        if n > maxPointers { d.problems.append("\(n) cells cannot fit; showing \(shown)") }
        let pointersEnd = headerEnd + 2 * shown
        d.regions.append(PageRegion(start: 0, end: headerEnd, what: "header"))
        if shown > 0 { d.regions.append(PageRegion(start: headerEnd, end: pointersEnd, what: "cell pointers")) }
        let isLeaf = kind.isLeaf
        // Compact cells (flag bit 1, format 8): a table cell has no key
        // length (its row-ID key gives it), an index cell no value length.
        let compact = isLeaf && flags & Node.compactFlag != 0
        if isLeaf {
            d.fields.append(("cell form", .text(compact ? "compact" : "wide")))
            d.fields.append(("header", .text(short ? "short" : "full")))
        }
        let maxK = Node.maxKey(pageSize)
        var spans: [(Int, Int, Int)] = []  // start, end, cell index
        for i in 0..<shown {
            let o = Int(p.u16(headerEnd + 2 * i))
            var c = CellDescription(index: i, offset: o)
            defer { d.cells.append(c) }
            guard o >= pointersEnd && o < usable else { c.problem = "pointer \(o) is outside the content area"; continue }
            var pos = o
            if !isLeaf {
                guard pos + 4 <= usable else { c.problem = "child pointer runs past the page"; continue }
                c.child = p.u32(pos)
                pos += 4
            }
            let kl: UInt64
            if compact && kind == .tableLeaf {
                guard let (_, k) = RowIDKey.decode(p.bytes, pos, usable) else { c.problem = "key is not a row-ID key"; continue }
                kl = UInt64(k)
            } else {
                guard let (k, a) = Varint.read(p.bytes, pos, usable), k <= UInt64(maxK) else { c.problem = "key length is malformed"; continue }
                kl = k
                pos += a
            }
            guard pos + Int(kl) <= usable else { c.problem = "key runs past the page"; continue }
            c.key = Array(UnsafeRawBufferPointer(start: p.bytes + pos, count: Int(kl)))
            if kind.isTable, let (rid, used) = RowIDKey.decode(p.bytes, pos, pos + Int(kl)), used == Int(kl) { c.rowID = rid }
            pos += Int(kl)
            if compact && kind == .indexLeaf {
                c.valueLength = 0
                c.localLength = 0
            } else if isLeaf {
                guard let (vl, b) = Varint.read(p.bytes, pos, usable), vl <= UInt64(Int32.max) else { c.problem = "value length is malformed"; continue }
                pos += b
                let layout = Node.leafLayout(keyLength: Int(kl), valueLength: Int(vl), pageSize: pageSize)
                c.valueLength = Int(vl)
                c.localLength = layout.local
                guard pos + layout.local + (layout.overflow ? 4 : 0) <= usable else { c.problem = "value runs past the page"; continue }
                let local = UnsafeRawBufferPointer(start: p.bytes + pos, count: layout.local)
                pos += layout.local
                if layout.overflow {
                    c.overflowPage = p.u32(pos)
                    pos += 4
                } else if kind == .tableLeaf {
                    do { c.record = try RecordCodec.decode(local) } catch { c.problem = "record: \(error.message)" }
                }
            }
            c.size = pos - o
            spans.append((o, pos, i))
        }
        // Free-space map: the gap before the content, then cells and gaps.
        if start > pointersEnd { d.regions.append(PageRegion(start: pointersEnd, end: min(start, usable), what: "free")) }
        spans.sort { $0.0 < $1.0 }
        var at = max(min(start, usable), pointersEnd)
        for (s, e, i) in spans {
            if s > at { d.regions.append(PageRegion(start: at, end: s, what: "gap (free)")) }
            if s < at { d.regions.append(PageRegion(start: s, end: min(e, at), what: "overlap (cell \(i) overlaps the previous region)")) }
            if e > at {
                d.regions.append(PageRegion(start: max(s, at), end: e, what: "cell \(i)"))
                at = e
            }
        }
        if at < usable { d.regions.append(PageRegion(start: at, end: usable, what: "gap (free)")) }
        if p.hasCounters { d.regions.append(PageRegion(start: usable, end: usable + Node.countersSize, what: "table counters")) }
    }
}
