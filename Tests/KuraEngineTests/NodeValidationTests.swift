import XCTest
@testable import KuraEngine

/// `Node.validate`'s per-cell fast path and the node summary (`Page.summary`)
/// it records for pages read from disk.
final class NodeValidationTests: XCTestCase {
    // MARK: The fast path decides as the general check does

    /// The cell check `Node.validate` made before it had a fast path, kept
    /// here as the oracle: nil if the page passes, else the error message.
    static func referenceVerdict(_ p: Page) -> String? {
        guard let kind = PageKind(rawValue: p.u8(Node.kindOffset)), kind.isNode else { return nil }
        func bad(_ why: String) -> String { "tree page is malformed: \(why); run `kura check` on the store" }
        let flags = p.u8(Node.flagsOffset)
        guard flags & ~(Node.countersFlag | Node.compactFlag | Node.shortHeaderFlag) == 0, flags & Node.countersFlag == 0 || kind == .tableLeaf,
              flags & (Node.compactFlag | Node.shortHeaderFlag) == 0 || kind.isLeaf else {
            return bad("flags byte \(flags) is not allowed on a page of kind \(kind.rawValue)")
        }
        // Format 8: compact table cells start with their row-ID key, compact
        // index cells end with their key.
        let compactTable = flags & Node.compactFlag != 0 && kind == .tableLeaf
        let compactIndex = flags & Node.compactFlag != 0 && kind == .indexLeaf
        let use = p.size - pageTrailerSize - (flags & Node.countersFlag != 0 ? Node.countersSize : 0)
        // Format 10: a leaf with the short header has its root at 8 and its
        // pointers from 12.
        let short = flags & Node.shortHeaderFlag != 0
        let pointers = short ? 12 : 16
        let n = Int(p.u16(Node.cellCountOffset))
        let start = Int(p.u16(Node.contentStartOffset))
        guard pointers + 2 * n <= start, start <= use else {
            return bad("\(n) cells and content start \(start) do not fit in the page")
        }
        if p.u32(short ? 8 : 12) == 0 { return bad("no tree root recorded") }
        if !kind.isLeaf && p.u32(Node.rightChildOffset) == 0 { return bad("interior page without a right-most child") }
        let maxK = Node.maxKey(p.size)
        var cellBytes = 0
        for i in 0..<n {
            let o = Int(p.u16(pointers + 2 * i))
            guard o >= start && o < use else { return bad("cell \(i) pointer \(o) is outside the content area") }
            var pos = o
            if !kind.isLeaf {
                guard pos + 4 <= use, p.u32(pos) != 0 else { return bad("cell \(i) child pointer is missing") }
                pos += 4
            }
            let kl: UInt64
            if compactTable {
                guard let (_, k) = RowIDKey.decode(p.bytes, pos, use) else { return bad("cell \(i) key is not a row-ID key (first byte \(p.u8(pos)))") }
                kl = UInt64(k)
                pos += k
            } else {
                guard let (k, a) = Varint.read(p.bytes, pos, use), k <= UInt64(maxK) else { return bad("cell \(i) key length is malformed") }
                kl = k
                pos += a + Int(kl)
            }
            guard pos <= use else { return bad("cell \(i) key runs past the page") }
            if kind.isLeaf && !compactIndex {
                guard let (vl, b) = Varint.read(p.bytes, pos, use), vl <= UInt64(Int32.max) else { return bad("cell \(i) value length is malformed") }
                let layout = Node.leafLayout(keyLength: Int(kl), valueLength: Int(vl), pageSize: p.size)
                pos += b + layout.local + (layout.overflow ? 4 : 0)
                guard pos <= use else { return bad("cell \(i) value runs past the page") }
            }
            cellBytes += pos - o
        }
        let fragmented = Int(p.u16(Node.fragmentedOffset))
        guard cellBytes + fragmented <= use - start else {
            return bad("\(cellBytes) bytes of cells and \(fragmented) fragmented bytes do not fit in the \(use - start)-byte content area")
        }
        return nil
    }

    /// `Node.validate`'s verdict: nil, or the message of the `corrupt` error,
    /// which must name the page.
    static func verdict(_ p: Page, file: StaticString = #filePath, line: UInt = #line) -> String? {
        do {
            try Node.validate(p)
            return nil
        } catch {
            XCTAssertEqual(error.code, .corrupt, file: file, line: line)
            XCTAssertEqual(error.page, p.number, file: file, line: line)
            return error.message
        }
    }

    /// A leaf cell as FORMAT.md lays it out; `longVarints` writes the lengths
    /// with a redundant continuation byte (a non-canonical but readable varint).
    static func leafCell(key: [UInt8], valueLength vl: Int, pageSize: Int, fill: UInt8, longVarints: Bool = false) -> [UInt8] {
        var c: [UInt8] = []
        func varint(_ v: Int) {
            Varint.append(UInt64(v), to: &c)
            if longVarints {
                // The same value with one more, empty, group.
                c[c.count - 1] |= 0x80
                c.append(0)
            }
        }
        varint(key.count)
        c += key
        varint(vl)
        let layout = Node.leafLayout(keyLength: key.count, valueLength: vl, pageSize: pageSize)
        c += [UInt8](repeating: fill, count: layout.local)
        if layout.overflow { c += [0, 0, 0, 9] }
        return c
    }

    /// A valid node page of `kind` filled with random cells (one-byte and
    /// two-byte value lengths, overflow cells, now and then a non-canonical
    /// varint), with or without the counters trailer; a leaf half the time
    /// in the compact form of format 8, and half the time with the short
    /// header of format 10.
    static func randomNode(_ kind: PageKind, pageSize: Int, number: UInt32, _ rng: inout SplitMix64) -> Page {
        let p = Page(number: number, size: pageSize)
        let compact = kind.isLeaf && rng.next() % 2 == 0
        let short = kind.isLeaf && rng.next() % 2 == 0
        Node.initialize(p, kind: kind, treeRoot: 3, form: (compact ? Node.compactFlag : 0) | (short ? Node.shortHeaderFlag : 0))
        if kind == .tableLeaf && rng.next() % 4 == 0 {
            _ = p.setTableCounters(nextRowID: 1000, rowCount: 10)
        }
        if !kind.isLeaf { p.rightChild = 77 }
        var id = Int64(rng.next() % 1000)
        while true {
            id += 1 + Int64(rng.next() % 3)
            let key: [UInt8] = kind == .tableLeaf || kind == .tableInterior
                ? RowIDKey.encode(id)
                : [UInt8](repeating: UInt8(truncatingIfNeeded: id), count: 1 + Int(rng.next() % 20)) + RowIDKey.encode(id)
            var cell: [UInt8]
            if kind.isLeaf {
                let r = rng.next() % 10
                // Index entries have no value.
                let vl = kind == .indexLeaf ? 0 : r < 6 ? Int(rng.next() % 128) : r < 9 ? 128 + Int(rng.next() % 600) : 3000 + Int(rng.next() % 40000)
                let long = rng.next() % 16 == 0
                cell = leafCell(key: key, valueLength: vl, pageSize: pageSize, fill: UInt8(truncatingIfNeeded: id),
                                longVarints: long)
                if compact && kind == .tableLeaf && long {
                    // The compact form drops the key length (`insertCell`
                    // drops the first byte): give it a one-byte one, keeping
                    // the long value length.
                    cell = [UInt8(key.count)] + cell[2...]
                }
            } else {
                cell = BTree.interiorCell(child: UInt32(10 + id), key: key[...])
            }
            if !p.insertCell(cell, at: p.cellCount) { break }
        }
        return p
    }

    /// Random damage to a page's header, pointers or cells (then the fast
    /// path must agree with the oracle on every page, damaged or not).
    func testFastPathAgreesWithTheGeneralCheck() {
        var rng = SplitMix64(seed: testSeed("NodeValidationTests.fastPath"))
        var outcomes: [Bool: Int] = [:]
        let kinds: [PageKind] = [.tableLeaf, .tableInterior, .indexLeaf, .indexInterior]
        for round in 0..<400 {
            let size = [512, 1024, 4096][Int(rng.next() % 3)]
            let original = Self.randomNode(kinds[round % 4], pageSize: size, number: UInt32(5 + round), &rng)
            XCTAssertNil(Self.referenceVerdict(original))
            XCTAssertNil(Self.verdict(original))
            for _ in 0..<60 {
                let p = Page(copying: original)
                for _ in 0..<(1 + Int(rng.next() % 3)) {
                    let at: Int
                    // Places from the undamaged page (the copy's cell count
                    // and pointers may already be garbage).
                    let n = max(original.cellCount, 1)
                    switch rng.next() % 4 {
                    case 0: at = Int(rng.next() % UInt64(original.cellPointerStart))
                    case 1: at = original.cellPointerStart + Int(rng.next() % UInt64(2 * n))
                    case 2: at = (original.cellCount == 0 ? original.cellPointerStart : original.cellOffset(Int(rng.next() % UInt64(n)))) + Int(rng.next() % 6)
                    default: at = Int(rng.next() % UInt64(size - pageTrailerSize))
                    }
                    p.setU8(min(at, size - pageTrailerSize - 1), UInt8(truncatingIfNeeded: rng.next()))
                }
                let expected = Self.referenceVerdict(p)
                XCTAssertEqual(Self.verdict(p), expected)
                outcomes[expected == nil, default: 0] += 1
            }
        }
        print("fast path outcomes (passed: count):", outcomes)
        XCTAssertGreaterThan(outcomes[false, default: 0], 1000)
    }

    // MARK: Corruption the fast path catches, through the store

    let path = "/n.kura"

    func options(_ fs: MemoryFileSystem) -> Database.Options {
        var o = Database.Options()
        o.fileSystem = fs
        o.durability = .normal
        return o
    }

    /// A checkpointed store of 3000 rows; returns its file system and the
    /// numbers of its table's leaf pages (each leaf holds many cells). With
    /// `wide`, the store is of format 7, whose leaves hold wide cells (the
    /// damage below is placed for that form); else of this build's format,
    /// whose leaves are compact.
    func makeStore(wide: Bool = true) throws -> (MemoryFileSystem, [UInt32]) {
        let fs = MemoryFileSystem()
        let db = try Database(path: path, options: options(fs))
        if wide { try db.setFormatForTesting(7) }
        try db.write { tx in
            let t = try tx.createTable("t")
            for i in 0..<3000 { try tx.insert([.integer(Int64(i)), .text("row \(i)")], into: t) }
        }
        db.close()
        let bytes = fs.contents(of: path)!
        var leaves: [UInt32] = []
        for n in 2...(bytes.count / 4096) where bytes[(n - 1) * 4096] == PageKind.tableLeaf.rawValue {
            XCTAssertEqual(bytes[(n - 1) * 4096 + Node.flagsOffset] & Node.compactFlag != 0, !wide, "leaf \(n)")
            leaves.append(UInt32(n))
        }
        return (fs, leaves)
    }

    /// Rewrites page `number` of the store's file through `body`, with a
    /// correct checksum (as a buggy or hostile writer could), and checks that
    /// reading every row then fails with `corrupt` naming that page.
    func assertDamageIsCaught(wide: Bool = true, _ body: (Page) -> Void, file: StaticString = #filePath, line: UInt = #line) throws {
        let (fs, leaves) = try makeStore(wide: wide)
        let number = leaves[leaves.count / 2]
        var bytes = fs.contents(of: path)!
        let base = Int(number - 1) * 4096
        let p = Page(number: number, size: 4096)
        bytes.withUnsafeBytes { p.bytes.copyMemory(from: $0.baseAddress! + base, byteCount: 4096) }
        XCTAssertGreaterThan(p.cellCount, 8, file: file, line: line)
        body(p)
        p.sealChecksum()
        for k in 0..<4096 { bytes[base + k] = p.u8(k) }
        fs.setContents(of: path, to: bytes)
        let db = try Database(path: path, options: options(fs))
        XCTAssertThrowsError(try db.read { tx in
            let c = try tx.rows(in: try tx.table("t"))
            while let r = try c.next() { _ = try r.values() }
        }, file: file, line: line) { e in
            guard let k = e as? KuraError else { return XCTFail("not a KuraError: \(e)", file: file, line: line) }
            XCTAssertEqual(k.code, .corrupt, "\(k)", file: file, line: line)
            XCTAssertEqual(k.page, number, "\(k)", file: file, line: line)
        }
    }

    /// The one-byte value length of a middle cell runs it past the content end.
    func testValueLengthPastThePageIsCorrupt() throws {
        try assertDamageIsCaught { p in
            let o = p.cellOffset(p.cellCount / 2)
            let kl = Int(p.u8(o))
            p.setU8(o + 1 + kl, 0x7F)
            p.setU16(p.cellPointerStart + 2 * (p.cellCount / 2), UInt16(p.contentEnd - 8))
        }
    }

    /// A two-byte value length that makes a cell overlap the checksum.
    func testTwoByteValueLengthPastThePageIsCorrupt() throws {
        try assertDamageIsCaught { p in
            let i = p.cellCount - 1
            let o = p.cellOffset(i)
            let kl = Int(p.u8(o))
            p.setU8(o + 1 + kl, 0xFF)
            p.setU8(o + 2 + kl, 0x01)
            p.setU16(p.cellPointerStart + 2 * i, UInt16(p.contentEnd - 40))
        }
    }

    /// A one-byte key length that runs the key past the content end.
    func testKeyLengthPastThePageIsCorrupt() throws {
        try assertDamageIsCaught { p in
            let at = p.contentEnd - 20
            p.setU8(at, 0x7F)
            p.setU16(p.cellPointerStart + 2 * 3, UInt16(at))
        }
    }

    /// A cell pointer below the content area.
    func testPointerOutsideTheContentAreaIsCorrupt() throws {
        try assertDamageIsCaught { p in
            p.setU16(p.cellPointerStart + 2 * 5, UInt16(p.contentStart - 1))
        }
    }

    /// Format 8: a compact table cell whose first byte is no row-ID key's
    /// first byte (its key would have no length).
    func testCompactCellWhoseKeyIsNoRowIDKeyIsCorrupt() throws {
        try assertDamageIsCaught(wide: false) { p in
            let o = p.cellOffset(p.cellCount / 2)
            XCTAssertTrue(RowIDKey.isFirstByte(p.u8(o)))
            p.setU8(o, 0x90)
        }
    }

    /// Format 8: a compact table cell whose first byte claims a longer
    /// row-ID key (9 bytes) than the cell's: the bytes that follow are no
    /// shortest encoding, or the value length read after them runs the cell
    /// past the page.
    func testCompactCellWithAWrongRowIDKeyLengthIsCorrupt() throws {
        try assertDamageIsCaught(wide: false) { p in
            let i = p.cellCount - 1
            let o = p.cellOffset(i)
            p.setU8(o, 0x88)
            p.setU16(p.cellPointerStart + 2 * i, UInt16(p.contentEnd - 12))
            p.setU8(p.contentEnd - 12, 0x88)
            for k in 1...9 { p.setU8(p.contentEnd - 12 + k, 0x7F) }
        }
    }

    /// Format 8: a compact table cell's value length that runs it past the
    /// content end.
    func testCompactCellValueLengthPastThePageIsCorrupt() throws {
        try assertDamageIsCaught(wide: false) { p in
            let i = p.cellCount / 2
            let o = p.cellOffset(i)
            let kl = RowIDKey.length(firstByte: p.u8(o))
            p.setU8(o + kl, 0x7F)
            p.setU16(p.cellPointerStart + 2 * i, UInt16(p.contentEnd - 8))
        }
    }

    /// Cells that each fit, but with more fragmented bytes than the content
    /// area has room for beside them.
    func testFragmentedBytesBeyondTheContentAreaAreCorrupt() throws {
        try assertDamageIsCaught { p in
            p.fragmented = p.contentEnd - p.contentStart
        }
    }

    // MARK: The summary

    /// Every tree page read from disk carries a summary equal to its header
    /// (and its first and last row IDs), and a search through it finds what a
    /// plain binary search finds, for present, absent and outside keys.
    func testPagesFromDiskCarryTheirSummary() throws {
        try assertPagesCarryTheirSummary(wide: true)
        try assertPagesCarryTheirSummary(wide: false)
    }

    /// `testPagesFromDiskCarryTheirSummary` on a store of wide or compact leaves.
    func assertPagesCarryTheirSummary(wide: Bool) throws {
        let (fs, _) = try makeStore(wide: wide)
        let db = try Database(path: path, options: options(fs))
        let bytes = fs.contents(of: path)!
        var checked = 0
        try db.read { tx in
          let s = try XCTUnwrap(tx.snapshotPages)
          for n in 2...UInt32(bytes.count / 4096) {
            let p = try s.page(n)
            let raw = p.u8(Node.kindOffset)
            guard let kind = PageKind(rawValue: raw), kind.isNode else {
                XCTAssertEqual(p.summary.kind, 0)
                continue
            }
            XCTAssertEqual(p.summary.kind, raw)
            XCTAssertEqual(p.summary.flags, p.u8(Node.flagsOffset))
            XCTAssertEqual(Int(p.summary.cellCount), Int(p.u16(Node.cellCountOffset)))
            // The root field is at 8 in a leaf with the short header (format 10).
            XCTAssertEqual(p.summary.treeRoot, p.u32(Node.treeRootOffset(flags: p.u8(Node.flagsOffset))))
            XCTAssertEqual(p.summary.rightChild, kind.isLeaf ? 0 : p.u32(Node.rightChildOffset))
            guard kind == .tableLeaf || kind == .tableInterior else { continue }
            let first = RowIDKey.decode(p.keyBytes(0))
            let last = RowIDKey.decode(p.keyBytes(p.cellCount - 1))
            XCTAssertEqual(p.summary.firstRowID, first)
            XCTAssertEqual(p.summary.lastRowID, last)
            let bare = Page(copying: p)
            XCTAssertEqual(bare.summary.kind, 0, "a copy (a writer's page) has no summary")
            for id in (first! - 3)...(last! + 3) {
                RowIDKey.encode(id).withUnsafeBytes { k in
                    let expected = p.lowerBound(k)
                    XCTAssertEqual(p.rowIDLowerBound(k, rowID: id), expected)
                    XCTAssertEqual(bare.rowIDLowerBound(k, rowID: id), expected)
                }
            }
            checked += 1
          }
        }
        XCTAssertGreaterThan(checked, 5)
    }

    /// Pages a commit publishes carry the summary a read from disk would give
    /// them (`Pager.summarizer`): after random inserts, updates and deletes
    /// over several commits, in tables with and without an index, every tree
    /// page of the newest snapshot has one, equal to what `Node.validate`
    /// records on a copy of its bytes, and searches through it agree with a
    /// binary search.
    func testCommittedPagesCarryTheirSummary() throws {
        let seed = testSeed("testCommittedPagesCarryTheirSummary")
        var g = SplitMix64(seed: seed)
        let fs = MemoryFileSystem()
        let db = try Database(path: path, options: options(fs))
        try db.write { tx in
            _ = try tx.createTable("t")
            let u = try tx.createTable("u", schema: TableSchema([ColumnDefinition("n", .integer), ColumnDefinition("s", .text)]))
            _ = try tx.createIndex("u_by_n", on: u, columns: [IndexColumn("n")])
        }
        var live: [String: [Int64]] = ["t": [], "u": []]
        for _ in 0..<12 {
            try db.write { tx in
                for name in ["t", "u"] {
                    let t = try tx.table(name)
                    for _ in 0..<Int.random(in: 50...400, using: &g) {
                        let text = String(repeating: "x", count: Int.random(in: 0...300, using: &g))
                        live[name]!.append(try tx.insert([.integer(Int64.random(in: 0...50, using: &g)), .text(text)], into: t))
                    }
                    for _ in 0..<Int.random(in: 0...60, using: &g) where !live[name]!.isEmpty {
                        let id = live[name]!.remove(at: Int.random(in: 0..<live[name]!.count, using: &g))
                        XCTAssertTrue(try tx.delete(from: t, rowID: id))
                    }
                }
            }
        }
        var withSummary = 0
        try db.read { tx in
            let s = try XCTUnwrap(tx.snapshotPages)
            XCTAssertGreaterThan(s.snapshot.pageCount, 20)
            for n in 2...s.snapshot.pageCount {
                let p = try s.page(n)
                let raw = p.u8(Node.kindOffset)
                guard let kind = PageKind(rawValue: raw), kind.isNode else { continue }
                XCTAssertEqual(p.summary.kind, raw, "page \(n) has no summary (seed \(seed))")
                guard p.summary.kind != 0 else { continue }
                let copy = Page(copying: p)
                try Node.validate(copy)
                XCTAssertEqual(p.summary.flags, copy.summary.flags, "page \(n)")
                XCTAssertEqual(p.summary.cellCount, copy.summary.cellCount, "page \(n)")
                XCTAssertEqual(p.summary.treeRoot, copy.summary.treeRoot, "page \(n)")
                XCTAssertEqual(p.summary.rightChild, copy.summary.rightChild, "page \(n)")
                XCTAssertEqual(p.summary.firstRowID, copy.summary.firstRowID, "page \(n)")
                XCTAssertEqual(p.summary.lastRowID, copy.summary.lastRowID, "page \(n)")
                withSummary += 1
                guard kind == .tableLeaf || kind == .tableInterior, p.cellCount > 0,
                      let first = RowIDKey.decode(p.keyBytes(0)), let last = RowIDKey.decode(p.keyBytes(p.cellCount - 1)) else { continue }
                for id in (first - 2)...(last + 2) {
                    RowIDKey.encode(id).withUnsafeBytes { k in
                        XCTAssertEqual(p.rowIDLowerBound(k, rowID: id), p.lowerBound(k), "page \(n), row \(id)")
                    }
                }
            }
        }
        XCTAssertGreaterThan(withSummary, 20)
        // Every row is still found, and no deleted one.
        try db.read { tx in
            for name in ["t", "u"] {
                XCTAssertEqual(try tx.count(TableQuery(name)), live[name]!.count)
                let t = try tx.table(name)
                for id in live[name]!.shuffled(using: &g).prefix(300) { XCTAssertNotNil(try tx.values(in: t, rowID: id), "\(name) row \(id)") }
            }
        }
    }

    /// Any write to a page's bytes through its setters drops the summary: a
    /// changed page never answers from a summary of what it was.
    func testChangingAPageDropsItsSummary() throws {
        var rng = SplitMix64(seed: 7)
        let p = Self.randomNode(.tableLeaf, pageSize: 4096, number: 9, &rng)
        try Node.validate(p)
        XCTAssertEqual(p.summary.kind, PageKind.tableLeaf.rawValue)
        XCTAssertEqual(p.summary.cellCount, UInt16(p.u16(Node.cellCountOffset)))
        p.removeCell(0)
        XCTAssertEqual(p.summary.kind, 0)
        XCTAssertEqual(p.cellCount, Int(p.u16(Node.cellCountOffset)))
        try Node.validate(p)
        XCTAssertNotEqual(p.summary.kind, 0)
        p.zero()
        XCTAssertEqual(p.summary.kind, 0)
    }

    /// A table page whose edge keys are not row-ID encodings (which `kura
    /// check` reports) has unknown row-ID bounds in its summary: searches
    /// compare bytes and agree with the binary search.
    func testTablePageWithoutRowIDKeysSearchesByBytes() throws {
        let p = Page(number: 12, size: 4096)
        Node.initialize(p, kind: .tableLeaf, treeRoot: 12)
        // 0x81 0x00 is a non-canonical encoding of 0; the rest are canonical.
        var keys: [[UInt8]] = [[0x81, 0x00]]
        for id in Int64(1)...40 { keys.append(RowIDKey.encode(id * 2)) }
        for k in keys {
            XCTAssertTrue(p.insertCell(Self.leafCell(key: k, valueLength: 5, pageSize: 4096, fill: 1), at: p.cellCount))
        }
        try Node.validate(p)
        XCTAssertEqual(p.summary.kind, PageKind.tableLeaf.rawValue)
        XCTAssertEqual(p.summary.firstRowID, .max)
        XCTAssertEqual(p.summary.lastRowID, .min)
        for id in Int64(0)...85 {
            RowIDKey.encode(id).withUnsafeBytes { k in
                XCTAssertEqual(p.rowIDLowerBound(k, rowID: id), p.lowerBound(k))
            }
        }
    }
}
