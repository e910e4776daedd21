import XCTest
@testable import KuraEngine

/// Format 10: leaves with the short header (FORMAT.md, "Layout"): 12 bytes, no
/// right-most-child field, the root at offset 8 and the cell pointers from 12
/// (tree-page flag bit 2). A format-9 store keeps 16-byte leaf headers beside
/// other connections and moves to 10 when opened alone, after which leaves of
/// both headers live side by side; the checker passes them, and reports short
/// headers in an older store and damaged headers with their page.
final class ShortLeafHeaderTests: XCTestCase {
    /// Leaves of the tree rooted at `root` with each header, as `tx` sees them.
    static func leafHeaders(_ tx: ReadTransaction, root: UInt32) throws -> (full: Int, short: Int) {
        let s = try XCTUnwrap(tx.snapshotPages)
        var full = 0
        var short = 0
        var stack = [root]
        while let n = stack.popLast() {
            let p = try s.page(n)
            if p.isLeafNode {
                if p.hasShortHeader {
                    short += 1
                    XCTAssertTrue(p.isCompactLeaf, "a format-10 writer builds short leaves of compact cells (page \(n))")
                } else {
                    full += 1
                }
            } else {
                XCTAssertFalse(p.hasShortHeader, "interior page \(n) with the short header")
                for i in 0...p.cellCount { stack.append(p.child(i)) }
            }
        }
        return (full, short)
    }

    /// Leaves of each header of table "t" and of its index, summed.
    static func leafHeaders(_ db: Database) throws -> (full: Int, short: Int) {
        try db.read { tx in
            let t = try leafHeaders(tx, root: try tx.table("t").rootPage)
            let i = try leafHeaders(tx, root: try tx.indexes(of: "t")[0].info.rootPage)
            return (t.full + i.full, t.short + i.short)
        }
    }

    /// A format-9 store at `path` (16-byte leaf headers only) with table "t"
    /// indexed on "a", churned against `model`, then closed.
    static func makeFormatNineStore(_ path: String, _ options: Database.Options, _ model: inout [Int64: [Value]],
                                    _ g: inout SplitMix64, steps: Int) throws {
        let db = try Database(path: path, options: options)
        defer { db.close() }
        try db.setFormatForTesting(9)
        try db.write { tx in
            let t = try tx.createTable("t", schema: try CompactCellsTests.schema())
            _ = try tx.createIndex("by_a", on: t, columns: [IndexColumn("a")])
        }
        try CompactCellsTests.churn(db, &model, &g, steps: steps)
    }

    /// The move from format 9: beside another connection the store stays 9
    /// and its writers build 16-byte headers only (compaction too); opened
    /// alone it becomes 10 (file header included), keeps its leaves, and the
    /// leaves its writers build from then on have the short header. Through
    /// batches of inserts, updates (growing and shrinking), deletes, splits,
    /// merges and redistributions, each checked against a model and by the
    /// integrity checker, both headers read right, across a reopen, and
    /// compaction leaves short headers only.
    func testFormat9StoreMovesToShortHeadersOnlyWhenOpenedAlone() throws {
        let seed = testSeed("ShortLeafHeaderTests.upgrade")
        var g = SplitMix64(seed: seed)
        let context = "seed \(seed)"
        let dir = try TemporaryDirectory()
        let path = dir.path + "/nine.kura"
        var options = Database.Options()
        options.pageSize = 512
        var model: [Int64: [Value]] = [:]
        try Self.makeFormatNineStore(path, options, &model, &g, steps: 800)
        XCTAssertEqual(try fileVersion(path), 9)
        do {
            let other = try ReaderMarksTests.ForeignOpenLock(path)
            let beside = try Database(path: path, options: options)
            for _ in 0..<2 {
                try CompactCellsTests.churn(beside, &model, &g, steps: 200)
                try CompactCellsTests.assertMatches(beside, model, context)
            }
            XCTAssertTrue(try beside.checkpoint())
            XCTAssertEqual(try fileVersion(path), 9)
            let headers = try Self.leafHeaders(beside)
            XCTAssertEqual(headers.short, 0, "a format-9 store beside another connection builds 16-byte leaf headers only")
            XCTAssertGreaterThan(headers.full, 10, "\(headers), \(model.count) rows")
            _ = try beside.compact()
            XCTAssertEqual(try fileVersion(path), 9)
            XCTAssertEqual(try Self.leafHeaders(beside).short, 0, "compaction keeps format 9's header")
            try CompactCellsTests.assertMatches(beside, model, context)
            beside.close()
            withExtendedLifetime(other) {}
        }
        do {
            let alone = try Database(path: path, options: options)
            XCTAssertEqual(try fileVersion(path), FileHeader.formatVersion, "opened alone, the store moves to this build's format")
            XCTAssertEqual(try Self.leafHeaders(alone).short, 0, "the move rewrites no leaf")
            try CompactCellsTests.assertMatches(alone, model, context)
            try CompactCellsTests.churn(alone, &model, &g, steps: 120)
            let mixed = try Self.leafHeaders(alone)
            XCTAssertGreaterThan(mixed.short, 0, context)
            XCTAssertGreaterThan(mixed.full, 0, context)
            try CompactCellsTests.assertMatches(alone, model, context)
            for _ in 0..<4 {
                try CompactCellsTests.churn(alone, &model, &g, steps: 200)
                try CompactCellsTests.assertMatches(alone, model, context)
            }
            alone.close()
        }
        do {
            let again = try Database(path: path, options: options)
            defer { again.close() }
            try CompactCellsTests.assertMatches(again, model, context)
            _ = try again.compact()
            XCTAssertEqual(try fileVersion(path), FileHeader.formatVersion)
            XCTAssertEqual(try Self.leafHeaders(again).full, 0, "compaction of a format-10 store writes short leaf headers")
            try CompactCellsTests.assertMatches(again, model, context)
        }
    }

    /// New stores are created at format 10 and build short-header leaves
    /// only, through random inserts, updates and deletes checked against a
    /// model and the checker after each batch.
    func testNewStoresBuildShortHeaderLeaves() throws {
        let seed = testSeed("ShortLeafHeaderTests.new")
        var g = SplitMix64(seed: seed)
        let db = try memoryStore("/new.kura")
        var model: [Int64: [Value]] = [:]
        try db.write { tx in
            let t = try tx.createTable("t", schema: try CompactCellsTests.schema())
            _ = try tx.createIndex("by_a", on: t, columns: [IndexColumn("a")])
        }
        for _ in 0..<4 {
            try CompactCellsTests.churn(db, &model, &g, steps: 200)
            try CompactCellsTests.assertMatches(db, model, "seed \(seed)")
        }
        XCTAssertEqual(try db.read { tx in try tx.headerPage().headerVersion }, FileHeader.formatVersion)
        let headers = try Self.leafHeaders(db)
        XCTAssertEqual(headers.full, 0)
        XCTAssertGreaterThan(headers.short, 4)
    }

    /// The bytes of a format-10 table leaf, pinned (FORMAT.md, "Layout",
    /// the worked example): a 512-byte-page store's table root leaf holding
    /// row 1 = ["Ada", 36].
    func testWorkedExampleOfAShortHeaderLeaf() throws {
        let db = try memoryStore("/example.kura")
        try db.write { tx in
            let t = try tx.createTable("t")
            XCTAssertEqual(try tx.insert([.text("Ada"), .integer(36)], into: t), 1)
        }
        let bytes = try db.read { tx -> [UInt8] in
            let p = try XCTUnwrap(tx.snapshotPages).page(try tx.table("t").rootPage)
            return Array(UnsafeRawBufferPointer(start: p.bytes, count: p.size))
        }
        let root = try db.read { tx in try tx.table("t").rootPage }
        // The root leaf of the table's tree holds its counters (format 5,
        // flag bit 0): flags 01 | 02 | 04. Its one cell ends at the counters.
        let contentEnd = 512 - 8 - 16
        let cell: [UInt8] = [0x81, 0x01, 0x07, 0x02, 0x13, 0x05, 0x41, 0x64, 0x61, 0x24]
        let start = contentEnd - cell.count
        XCTAssertEqual(Array(bytes[0..<14]), [0x02, 0x07, 0x01, 0x00, UInt8(start & 0xFF), UInt8(start >> 8), 0x00, 0x00,
                                              UInt8(root), 0x00, 0x00, 0x00, UInt8(start & 0xFF), UInt8(start >> 8)])
        XCTAssertEqual(Array(bytes[start..<contentEnd]), cell)
        XCTAssertEqual(Array(bytes[14..<start]), [UInt8](repeating: 0, count: start - 14), "free space")
        // Next row ID 2, one row.
        XCTAssertEqual(Array(bytes[contentEnd..<(contentEnd + 16)]), [2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0])
    }

    /// The checker reports short-header leaves in a store whose header says
    /// an older format (whose builds would misread them), naming their pages.
    func testShortHeaderLeavesInAFormat9StoreAreReported() throws {
        let db = try memoryStore("/nine.kura")
        try db.write { tx in
            let t = try tx.createTable("t", schema: try CompactCellsTests.schema())
            for i in 0..<20 { _ = try tx.insert([.integer(Int64(i)), .text("x")], into: t) }
        }
        let root = try db.read { tx in try tx.table("t").rootPage }
        XCTAssertEqual(try db.read { tx in try tx.checkIntegrity() }, [])
        try db.write { tx in
            tx.writer!.header.headerVersion = 9
            tx.writer!.markModified()
        }
        let catalogRoot = try db.read { tx in try tx.headerPage().headerCatalogRoot }
        let problems = try db.read { tx in try tx.checkIntegrity() }
        XCTAssertEqual(Set(problems.map(\.page)), [catalogRoot, root], "\(problems)")
        XCTAssertTrue(problems.allSatisfy { $0.message.contains("short header") }, "\(problems)")
    }

    /// A valid short-header leaf of `kind` with a few cells, for damage.
    static func shortLeaf(_ kind: PageKind, number: UInt32) -> Page {
        let p = Page(number: number, size: 512)
        Node.initialize(p, kind: kind, treeRoot: 3, form: Node.compactFlag | Node.shortHeaderFlag)
        for id in Int64(1)...8 {
            let key = RowIDKey.encode(id)
            let cell = kind == .indexLeaf ? NodeValidationTests.leafCell(key: key, valueLength: 0, pageSize: 512, fill: 0)
                : NodeValidationTests.leafCell(key: key, valueLength: 20, pageSize: 512, fill: UInt8(id))
            XCTAssertTrue(p.insertCell(cell, at: p.cellCount))
        }
        return p
    }

    /// The short leaf reads its root at offset 8 and its pointers from 12;
    /// damaged header fields are corruption naming the page (never a trap):
    /// a zero root, a cell count whose pointers run into the content, a
    /// pointer into the header or pointer array, the flag on an interior
    /// page, and a flags byte with an unknown bit.
    func testCorruptShortHeaderFieldsAreRejected() throws {
        for kind in [PageKind.tableLeaf, .indexLeaf] {
            let good = Self.shortLeaf(kind, number: 9)
            XCTAssertNil(NodeValidationTests.verdict(good))
            XCTAssertEqual(good.treeRoot, 3)
            XCTAssertEqual(good.u32(8), 3, "the root field is at offset 8")
            XCTAssertEqual(good.cellPointerStart, 12)
            XCTAssertEqual(good.rightChild, 0)
            XCTAssertEqual(Int(good.u16(12)), good.cellOffset(0), "the first pointer is at offset 12")
            XCTAssertEqual(good.summary.treeRoot, 3, "the summary takes the root from offset 8")
            XCTAssertEqual(good.summary.rightChild, 0)

            var damages: [(String, (Page) -> Void)] = []
            damages.append(("root 0", { $0.setU32(8, 0) }))
            damages.append(("cell count past the content start", { p in p.setU16(Node.cellCountOffset, UInt16((p.contentStart - 12) / 2 + 1)) }))
            damages.append(("a pointer into the pointer array", { p in p.setU16(12 + 2 * 3, 12) }))
            damages.append(("a pointer into the header", { p in p.setU16(12, 4) }))
            damages.append(("unknown flag bit", { p in p.setU8(Node.flagsOffset, p.u8(Node.flagsOffset) | 0x08) }))
            for (what, damage) in damages {
                let p = Page(copying: good)
                damage(p)
                XCTAssertNotNil(NodeValidationTests.verdict(p), "\(kind) \(what)")
            }
        }
        // The flag on an interior page (whose header has the right-most child).
        let interior = Page(number: 11, size: 512)
        Node.initialize(interior, kind: .tableInterior, treeRoot: 3)
        interior.rightChild = 12
        XCTAssertTrue(interior.insertCell(BTree.interiorCell(child: 13, key: RowIDKey.encode(5)[...]), at: 0))
        XCTAssertNil(NodeValidationTests.verdict(interior))
        interior.setU8(Node.flagsOffset, Node.shortHeaderFlag)
        // Refused for its flags (read with a 12-byte header, its pointers
        // would be wrong too, but the flags byte is checked first).
        let verdict = NodeValidationTests.verdict(interior)
        XCTAssertTrue(verdict?.contains("flags byte 4 is not allowed") == true, verdict ?? "accepted")
    }

    /// A short-header leaf whose root field (offset 8) names another tree,
    /// written with a good checksum, is corruption naming the page for a
    /// read and for the checker.
    func testShortLeafOfAnotherTreeIsReportedWithItsPage() throws {
        let (_, o, number) = try storeWithResealedLeaf("/owner.kura", leafFlag: Node.shortHeaderFlag) { p in
            p.setU32(8, p.u32(8) + 1000)
        }
        let db = try Database(path: "/owner.kura", options: o)
        defer { db.close() }
        let problems = try assertScanReportsCorruptPage(db, number)
        XCTAssertTrue(problems.contains { $0.page == number }, "\(problems)")
    }
}
