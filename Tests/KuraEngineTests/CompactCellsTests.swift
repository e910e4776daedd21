import XCTest
@testable import KuraEngine

/// Format 8: leaves of compact cells (FORMAT.md, "Cells"). A format-7 store
/// keeps wide leaves beside other connections and moves to 8 when opened
/// alone, after which leaves of both forms live side by side; the checker
/// passes them and names the page of a damaged compact cell.
final class CompactCellsTests: XCTestCase {
    /// Leaves of each form in the tree rooted at `root`, as `tx` sees them.
    static func leafForms(_ tx: ReadTransaction, root: UInt32) throws -> (wide: Int, compact: Int) {
        let s = try XCTUnwrap(tx.snapshotPages)
        var wide = 0
        var compact = 0
        var stack = [root]
        while let n = stack.popLast() {
            let p = try s.page(n)
            if p.isLeafNode {
                if p.isCompactLeaf { compact += 1 } else { wide += 1 }
            } else {
                for i in 0...p.cellCount { stack.append(p.child(i)) }
            }
        }
        return (wide, compact)
    }

    /// Leaves of each form of table "t" and of its index, summed.
    static func leafForms(_ db: Database) throws -> (wide: Int, compact: Int) {
        try db.read { tx in
            let t = try leafForms(tx, root: try tx.table("t").rootPage)
            let i = try leafForms(tx, root: try tx.indexes(of: "t")[0].info.rootPage)
            return (t.wide + i.wide, t.compact + i.compact)
        }
    }

    static func schema() throws -> TableSchema {
        try TableSchema([ColumnDefinition("a", .integer), ColumnDefinition("b", .text)])
    }

    /// A row of random size: short rows and now and then one with an
    /// overflow chain (512-byte pages), so cells with overflow move too.
    static func row(_ g: inout SplitMix64) -> [Value] {
        let r = g.next() % 20
        let length = r == 0 ? 200 + Int(g.next() % 900) : Int(g.next() % 40)
        return [.integer(Int64(g.next() % 50)), .text(String(repeating: "abcdefgh", count: 1 + length / 8))]
    }

    /// A format-7 store at `path` (wide leaves only) with table "t" indexed on
    /// "a", churned `steps` times against `model` (`churn`), then closed.
    static func makeFormatSevenStore(_ path: String, _ options: Database.Options, _ model: inout [Int64: [Value]],
                                     _ g: inout SplitMix64, steps: Int) throws {
        let db = try Database(path: path, options: options)
        defer { db.close() }
        try db.setFormatForTesting(7)
        try db.write { tx in
            let t = try tx.createTable("t", schema: try Self.schema())
            _ = try tx.createIndex("by_a", on: t, columns: [IndexColumn("a")])
        }
        try churn(db, &model, &g, steps: steps)
    }

    /// Random inserts, updates (growing and shrinking) and deletes against
    /// `model`, in a few transactions, enough to split, merge and
    /// redistribute leaves of a 512-byte-page store.
    static func churn(_ db: Database, _ model: inout [Int64: [Value]], _ g: inout SplitMix64, steps: Int) throws {
        if model.isEmpty {
            // A table of many leaves first.
            try db.write { tx in
                let t = try tx.table("t")
                for _ in 0..<600 {
                    let v = row(&g)
                    model[try tx.insert(v, into: t)] = v
                }
            }
        }
        for _ in 0..<4 {
            try db.write { tx in
                let t = try tx.table("t")
                for _ in 0..<(steps / 4) {
                    let ids = Array(model.keys)
                    switch g.next() % 10 {
                    case 0...4:
                        let v = row(&g)
                        model[try tx.insert(v, into: t)] = v
                    case 5...8 where !ids.isEmpty:
                        let id = ids[Int(g.next() % UInt64(ids.count))]
                        let v = row(&g)
                        XCTAssertTrue(try tx.update(v, in: t, rowID: id))
                        model[id] = v
                    case 9 where !ids.isEmpty:
                        // Runs of neighbours, so that leaves empty out and merge.
                        let id = ids[Int(g.next() % UInt64(ids.count))]
                        for k in id..<(id + Int64(1 + g.next() % 10)) where model[k] != nil {
                            XCTAssertTrue(try tx.delete(from: t, rowID: k))
                            model[k] = nil
                        }
                    default:
                        break
                    }
                }
            }
        }
    }

    /// Checks the store against `model`: every row by scan and by row ID,
    /// the index by a query on `a`, and the integrity check.
    static func assertMatches(_ db: Database, _ model: [Int64: [Value]], _ context: String,
                              file: StaticString = #filePath, line: UInt = #line) throws {
        try db.read { tx in
            let t = try tx.table("t")
            try assertScanMatches(tx, t, model, context, file: file, line: line)
            for (id, v) in model { XCTAssertEqual(try tx.values(in: t, rowID: id), v, "row \(id), \(context)", file: file, line: line) }
            for a in [Int64(0), 7, 49] {
                let found = try tx.fetch(try TableQuery("t", where: "a == \(a)")).map(\.rowID).sorted()
                let expected = model.filter { $0.value[0] == .integer(a) }.keys.sorted()
                XCTAssertEqual(found, expected, "a == \(a), \(context)", file: file, line: line)
            }
            XCTAssertEqual(try tx.checkIntegrity(), [], context, file: file, line: line)
        }
    }

    /// The move from format 7: beside another connection the store stays 7
    /// and its writers write wide leaves only; opened alone it becomes 8
    /// (file header included), keeps its wide leaves, and the leaves its
    /// writers build from then on are compact. Through inserts, updates,
    /// deletes, splits and merges both forms read right against a model,
    /// across a reopen, and compaction leaves compact leaves only.
    func testFormat7StoreMovesToCompactCellsOnlyWhenOpenedAlone() throws {
        let seed = testSeed("CompactCellsTests.upgrade")
        var g = SplitMix64(seed: seed)
        let context = "seed \(seed)"
        let dir = try TemporaryDirectory()
        let path = dir.path + "/seven.kura"
        var options = Database.Options()
        options.pageSize = 512
        var model: [Int64: [Value]] = [:]
        try Self.makeFormatSevenStore(path, options, &model, &g, steps: 800)
        XCTAssertEqual(try fileVersion(path), 7)
        do {
            // Beside another connection: format 7, wide leaves only.
            let other = try ReaderMarksTests.ForeignOpenLock(path)
            let beside = try Database(path: path, options: options)
            try Self.churn(beside, &model, &g, steps: 400)
            XCTAssertTrue(try beside.checkpoint())
            XCTAssertEqual(try fileVersion(path), 7)
            XCTAssertEqual(try beside.read { tx in try tx.headerPage().headerVersion }, 7)
            let forms = try Self.leafForms(beside)
            XCTAssertEqual(forms.compact, 0, "a format-7 store beside another connection writes wide leaves only")
            XCTAssertGreaterThan(forms.wide, 10, "\(forms), \(model.count) rows")
            try Self.assertMatches(beside, model, context)
            // Compaction keeps format 7 and its wide cells.
            _ = try beside.compact()
            XCTAssertEqual(try fileVersion(path), 7)
            XCTAssertEqual(try Self.leafForms(beside).compact, 0)
            try Self.assertMatches(beside, model, context)
            beside.close()
            withExtendedLifetime(other) {}
        }
        do {
            let alone = try Database(path: path, options: options)
            XCTAssertEqual(try fileVersion(path), FileHeader.formatVersion, "opened alone, the store moves to this build's format")
            let before = try Self.leafForms(alone)
            XCTAssertEqual(before.compact, 0, "the move rewrites no leaf")
            try Self.assertMatches(alone, model, context)
            // A little churn: new and rebuilt leaves are compact, the
            // others stay wide; both read right.
            try Self.churn(alone, &model, &g, steps: 120)
            let mixed = try Self.leafForms(alone)
            XCTAssertGreaterThan(mixed.compact, 0, context)
            XCTAssertGreaterThan(mixed.wide, 0, context)
            try Self.assertMatches(alone, model, context)
            try Self.churn(alone, &model, &g, steps: 800)
            try Self.assertMatches(alone, model, context)
            alone.close()
        }
        do {
            let again = try Database(path: path, options: options)
            defer { again.close() }
            try Self.assertMatches(again, model, context)
            _ = try again.compact()
            XCTAssertEqual(try fileVersion(path), FileHeader.formatVersion)
            XCTAssertEqual(try Self.leafForms(again).wide, 0, "compaction of a format-8 store writes compact leaves")
            try Self.assertMatches(again, model, context)
        }
    }

    /// New stores are created at format 8 and write compact leaves only.
    func testNewStoresWriteCompactLeaves() throws {
        let db = try memoryStore("/new.kura")
        var model: [Int64: [Value]] = [:]
        var g = SplitMix64(seed: 3)
        try db.write { tx in
            let t = try tx.createTable("t", schema: try Self.schema())
            _ = try tx.createIndex("by_a", on: t, columns: [IndexColumn("a")])
        }
        try Self.churn(db, &model, &g, steps: 400)
        XCTAssertEqual(try db.read { tx in try tx.headerPage().headerVersion }, FileHeader.formatVersion)
        let forms = try Self.leafForms(db)
        XCTAssertEqual(forms.wide, 0)
        XCTAssertGreaterThan(forms.compact, 4)
        try Self.assertMatches(db, model, "seed 3")
    }

    /// The checker reports compact leaves in a store whose header says an
    /// older format (whose builds would misread them), naming their pages.
    func testCompactLeavesInAFormat7StoreAreReported() throws {
        let db = try memoryStore("/seven.kura")
        try db.write { tx in
            let t = try tx.createTable("t", schema: try Self.schema())
            for i in 0..<20 { _ = try tx.insert([.integer(Int64(i)), .text("x")], into: t) }
        }
        let root = try db.read { tx in try tx.table("t").rootPage }
        try db.write { tx in
            tx.writer!.header.headerVersion = 7
            tx.writer!.markModified()
        }
        let catalogRoot = try db.read { tx in try tx.headerPage().headerCatalogRoot }
        let problems = try db.read { tx in try tx.checkIntegrity() }
        // (Their short headers, format 10, are reported too.)
        let compact = problems.filter { $0.message.contains("compact cells") }
        XCTAssertEqual(Set(compact.map(\.page)), [catalogRoot, root], "\(problems)")
        XCTAssertEqual(compact.count, 2, "\(problems)")
    }

    /// A compact table cell whose first byte is no row-ID key's (written with
    /// a good checksum, as a buggy or hostile writer could) is corruption
    /// naming its page, for reads and for the integrity check, and never a trap.
    func testDamagedCompactCellIsReportedWithItsPage() throws {
        let (_, o, number) = try storeWithResealedLeaf("/damaged.kura", leafFlag: Node.compactFlag) { p in
            // The first byte of a middle cell's key: a 9-byte key's length, which
            // runs the key into its value bytes (not a shortest encoding).
            p.setU8(p.cellOffset(p.cellCount / 2), 0x88)
        }
        let db = try Database(path: "/damaged.kura", options: o)
        defer { db.close() }
        let problems = try assertScanReportsCorruptPage(db, number)
        XCTAssertTrue(problems.contains { $0.page == number && $0.message.contains("not a row-ID key") }, "\(problems)")
    }

    /// A store of mixed leaves (format 7 moved to 8) whose tree
    /// pages get random bytes changed and their checksums sealed again, as a
    /// buggy or hostile writer could: opening, scanning, writing (which moves
    /// cells between leaves of both forms) and checking end in right answers
    /// or errors, never a trap. Seeded.
    func testResealedDamageToMixedLeavesNeverTraps() throws {
        let seed = testSeed("CompactCellsTests.mutation")
        var g = SplitMix64(seed: seed)
        // Made on disk (the move to 8 needs a connection that opened the
        // store alone), damaged in memory.
        let dir = try TemporaryDirectory()
        let file = dir.path + "/mixed.kura"
        let path = "/mixed.kura"
        var o = Database.Options()
        o.pageSize = 512
        var model: [Int64: [Value]] = [:]
        try Self.makeFormatSevenStore(file, o, &model, &g, steps: 200)
        do {
            let db = try Database(path: file, options: o)
            XCTAssertEqual(try db.read { tx in try tx.headerPage().headerVersion }, FileHeader.formatVersion)
            try Self.churn(db, &model, &g, steps: 80)
            let forms = try Self.leafForms(db)
            XCTAssertGreaterThan(forms.wide, 0, "seed \(seed)")
            XCTAssertGreaterThan(forms.compact, 0, "seed \(seed)")
            XCTAssertTrue(try db.checkpoint())
            db.close()
        }
        let original = [UInt8](try Data(contentsOf: URL(fileURLWithPath: file)))
        let treePages = (2...(original.count / 512)).filter { n in
            PageKind(rawValue: original[(n - 1) * 512]).map { $0.isNode } ?? false
        }
        var outcomes: [String: Int] = [:]
        for _ in 0..<200 {
            var bytes = original
            let n = treePages[Int(g.next() % UInt64(treePages.count))]
            let base = (n - 1) * 512
            let p = Page(number: UInt32(n), size: 512)
            bytes.withUnsafeBytes { p.bytes.copyMemory(from: $0.baseAddress! + base, byteCount: 512) }
            for _ in 0..<(1 + Int(g.next() % 3)) {
                // Mostly the header, pointers and cell starts, where lengths live.
                let at = g.next() % 2 == 0 ? Int(g.next() % 64) : p.cellCount > 0 ? min(p.cellOffset(Int(g.next() % UInt64(p.cellCount))) + Int(g.next() % 4), 503) : Int(g.next() % 504)
                p.setU8(min(max(at, 0), 503), UInt8(truncatingIfNeeded: g.next()))
            }
            p.sealChecksum()
            for k in 0..<512 { bytes[base + k] = p.u8(k) }
            let mutated = MemoryFileSystem()
            mutated.setContents(of: path, to: bytes)
            do {
                let db = try Database(path: path, options: { var m = o; m.fileSystem = mutated; return m }())
                defer { db.close() }
                try db.read { tx in
                    let c = try tx.rows(in: try tx.table("t"))
                    while let r = try c.next() { _ = try r.values() }
                    _ = try tx.fetch(try TableQuery("t", where: "a == 7"))
                }
                try db.write { tx in
                    let t = try tx.table("t")
                    for _ in 0..<30 { _ = try tx.insert(Self.row(&g), into: t) }
                    let ids = model.keys.sorted()
                    let from = ids[Int(g.next() % UInt64(ids.count))]
                    for id in from..<(from + 40) { _ = try tx.delete(from: t, rowID: id) }
                }
                _ = try db.read { tx in try tx.checkIntegrity() }
                outcomes["ran", default: 0] += 1
            } catch let e as KuraError {
                outcomes["\(e.code)", default: 0] += 1
            }
        }
        print("resealed damage outcomes (seed \(seed)):", outcomes)
        XCTAssertGreaterThan(outcomes["corrupt", default: 0], 20, "\(outcomes)")
    }

    /// A wide table leaf (left from format 7) whose cell has a key that is no
    /// row-ID key: when a writer of the format-8 store rebuilds that leaf
    /// compact (a merge after deletes), the move is refused as corruption
    /// naming the page, nothing is committed, and nothing traps.
    func testMovingANonRowIDKeyIntoACompactLeafIsCorruption() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/seven.kura"
        var o = Database.Options()
        o.pageSize = 512
        do {
            let db = try Database(path: path, options: o)
            try db.setFormatForTesting(7)
            try db.write { tx in
                let t = try tx.createTable("t")
                for i in 0..<400 { _ = try tx.insert([.integer(Int64(i)), .text("row \(i)")], into: t) }
            }
            db.close()
        }
        let db = try Database(path: path, options: o)
        defer { db.close() }
        XCTAssertEqual(try fileVersion(path), FileHeader.formatVersion)
        // A wide leaf in the middle of the table, and its row IDs.
        let (leaf, ids) = try db.read { tx -> (UInt32, [Int64]) in
            var cursor = TreeCursor(tree: BTree(root: try tx.table("t").rootPage, kind: .table))
            let s = try XCTUnwrap(tx.snapshotPages)
            try cursor.first(s)
            var leaves: [(UInt32, [Int64])] = []
            while cursor.isValid {
                let id = try XCTUnwrap(RowIDKey.decode(Array(cursor.key)))
                if leaves.last?.0 != cursor.leaf.number { leaves.append((cursor.leaf.number, [])) }
                leaves[leaves.count - 1].1.append(id)
                try cursor.next(s)
            }
            XCTAssertGreaterThan(leaves.count, 10)
            return leaves[leaves.count / 2]
        }
        XCTAssertGreaterThan(ids.count, 4)
        // Below the transaction layer: the key of the leaf's last cell gets a
        // first byte no row-ID key has (the wide cell stays well formed).
        let snapshot = try db.pager.beginWrite()
        let w = try PageWriter(pager: db.pager, snapshot: snapshot)
        let p = try w.writable(leaf)
        XCTAssertFalse(p.isCompactLeaf)
        let key = p.cellKey(p.cellCount - 1)
        p.setU8(key.offset, 0x90)
        w.markModified()
        try w.commit()
        db.pager.endWrite(snapshot)
        // Deleting the leaf's other rows leaves it under a quarter full: it
        // is merged with or refilled from a sibling, rebuilt compact.
        let before = try db.changeCounter()
        XCTAssertThrowsError(try db.write { tx in
            let t = try tx.table("t")
            for id in ids.dropLast() { _ = try tx.delete(from: t, rowID: id) }
        }) { e in
            XCTAssertEqual((e as? KuraError)?.code, .corrupt, "\(e)")
            XCTAssertTrue((e as? KuraError)?.message.contains("not a row-ID key") == true, "\(e)")
        }
        XCTAssertEqual(try db.changeCounter(), before, "nothing committed")
    }
}
