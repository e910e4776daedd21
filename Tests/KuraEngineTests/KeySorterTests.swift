import Foundation
import XCTest
@testable import KuraEngine

/// Index builds through `KeySorter`: with a budget far smaller than the table
/// (many sorted runs in `PATH-sort`, merged) they must give the same index as a
/// build in memory, and every failure must create nothing and leave no file.
final class KeySorterTests: XCTestCase {
    let schema = try! TableSchema([
        ColumnDefinition("name", .text),
        ColumnDefinition("age", .integer),
        ColumnDefinition("email", .text),
    ])

    /// A store on `fs` whose cache (and so sort budget) is `cacheSize` bytes.
    func open(_ fs: FaultInjectingFileSystem, cacheSize: Int, pageSize: Int = 4096) throws -> Database {
        var o = Database.Options()
        o.pageSize = pageSize
        o.fileSystem = fs
        o.cacheSize = cacheSize
        o.durability = .off
        return try Database(path: "/s.kura", options: o)
    }

    func indexKeys(_ tx: WriteTransaction, _ name: String) throws -> [[UInt8]] {
        let index = try tx.index(name)
        var c = TreeCursor(tree: index.tree)
        try c.first(tx.writer!)
        var keys: [[UInt8]] = []
        while c.isValid {
            keys.append(Array(c.key))
            try c.next(tx.writer!)
        }
        return keys
    }

    func fill(_ db: Database, rows: [[String: Value]]) throws {
        try db.write { tx in
            let t = try tx.createTable("people", schema: schema)
            for r in rows { try tx.insert(r, into: t) }
        }
    }

    func testIndexBuiltFromManyRunsEqualsTheOneBuiltInMemory() throws {
        let seed = ProcessInfo.processInfo.environment["KURA_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1...UInt64(UInt32.max))
        print("KeySorterTests seed \(seed) (replay with KURA_SEED=\(seed))")
        var rng = SplitMix64(seed: seed)
        var rows: [[String: Value]] = []
        for _ in 0..<3000 {
            // Short names from a small alphabet: many equal names and heads.
            let length = Int(rng.next() % 40)
            let name = String((0..<length).map { _ in "abc"[String.Index(utf16Offset: Int(rng.next() % 3), in: "abc")] })
            let age: Value = rng.next() % 10 == 0 ? .null : .integer(Int64(rng.next() % 200) - 100)
            rows.append(["name": rng.next() % 20 == 0 ? .null : .text(name), "age": age])
        }
        // 512-byte pages give trees of three and more levels (bulkLoad's
        // interior levels); 4096 the usual shape.
        for pageSize in [512, 4096] {
        var built: [[[UInt8]]] = []
        for cacheSize in [4096, 32 << 20] {
            let fs = FaultInjectingFileSystem()
            let db = try open(fs, cacheSize: cacheSize, pageSize: pageSize)
            try fill(db, rows: rows)
            try db.write { tx in
                let writes = fs.operationCount(.write)
                try tx.createIndex("by_name_age", on: try tx.table("people"), columns: [IndexColumn("name"), IndexColumn("age", descending: true)])
                // Nothing but the sort writes files before the commit.
                if cacheSize == 4096 {
                    XCTAssertGreaterThan(fs.operationCount(.write), writes + 10, "a tiny budget sorts in many runs")
                } else {
                    XCTAssertEqual(fs.operationCount(.write), writes, "one run: no file")
                }
                built.append(try indexKeys(tx, "by_name_age"))
                if pageSize == 512 {
                    let s = try tx.statistics(of: try tx.index("by_name_age").info)
                    XCTAssertGreaterThanOrEqual(s.depth, 3, "\(s)")
                }
            }
            XCTAssertFalse(fs.exists("/s.kura-sort"))
            try db.read { tx in XCTAssertEqual(try tx.checkIntegrity(), []) }
        }
        XCTAssertEqual(built[0].count, 3000)
        XCTAssertEqual(built[0], built[1], "seed \(seed)")
        XCTAssertTrue(zip(built[0], built[0].dropFirst()).allSatisfy { bytesPrecede($0, $1) }, "seed \(seed)")
        }
    }

    func testUniqueViolationAcrossRunsNamesBothRowsAndCreatesNothing() throws {
        let fs = FaultInjectingFileSystem()
        let db = try open(fs, cacheSize: 4096)
        var rows: [[String: Value]] = (0..<2000).map { ["email": .text("e\(1_000_000 - $0)")] }
        rows[1899] = rows[6]  // rows 7 and 1900 share an email, many runs apart
        rows[10] = ["email": .null]
        rows[11] = ["email": .null]  // nulls never collide
        try fill(db, rows: rows)
        try db.write { tx in
            let t = try tx.table("people")
            XCTAssertThrowsError(try tx.createIndex("by_email", on: t, columns: [IndexColumn("email")], unique: true)) { e in
                XCTAssertEqual((e as? KuraError)?.code, .constraintViolation)
                XCTAssertTrue("\(e)".contains("rows 7 and 1900"), "\(e)")
                XCTAssertTrue("\(e)".contains("e999994"), "\(e)")
            }
            XCTAssertEqual(try tx.indexes(of: "people").count, 0)
            XCTAssertFalse(fs.exists("/s.kura-sort"))
            XCTAssertTrue(try tx.update([.null, .null, .text("other")], in: t, rowID: 1900))
            try tx.createIndex("by_email", on: t, columns: [IndexColumn("email")], unique: true)
            XCTAssertEqual(try indexKeys(tx, "by_email").count, 2000)
        }
        try db.read { tx in XCTAssertEqual(try tx.checkIntegrity(), []) }
    }

    func testIOErrorWritingARunReachesTheCallerAndLeavesNoIndexAndNoFile() throws {
        let fs = FaultInjectingFileSystem()
        let db = try open(fs, cacheSize: 4096)
        try fill(db, rows: (0..<2000).map { ["name": .text("n\($0 % 97)"), "age": .integer(Int64($0))] })
        try db.write { tx in
            let t = try tx.table("people")
            fs.failOperation(.write, after: 3)
            XCTAssertThrowsError(try tx.createIndex("by_name", on: t, columns: [IndexColumn("name")])) { e in
                XCTAssertEqual((e as? KuraError)?.code, .io)
                XCTAssertTrue("\(e)".contains("/s.kura-sort"), "\(e)")
            }
            fs.clearFaults()
            XCTAssertEqual(try tx.indexes(of: "people").count, 0)
            XCTAssertFalse(fs.exists("/s.kura-sort"))
        }
        // The store is usable: the same build succeeds.
        try db.write { tx in
            try tx.createIndex("by_name", on: try tx.table("people"), columns: [IndexColumn("name")])
            XCTAssertEqual(try indexKeys(tx, "by_name").count, 2000)
        }
        XCTAssertFalse(fs.exists("/s.kura-sort"))
        try db.read { tx in XCTAssertEqual(try tx.checkIntegrity(), []) }
    }

    func testRunsOnDiskAreRemovedAfterTheBuild() throws {
        let dir = try TemporaryDirectory()
        var o = Database.Options()
        o.cacheSize = 4096
        let db = try Database(path: dir.path + "/d.kura", options: o)
        try fill(db, rows: (0..<2000).map { ["name": .text("n\(($0 * 7919) % 2000)")] })
        try db.write { tx in
            try tx.createIndex("by_name", on: try tx.table("people"), columns: [IndexColumn("name")], unique: true)
            XCTAssertEqual(try indexKeys(tx, "by_name").count, 2000)
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir.path + "/d.kura-sort"))
        try db.read { tx in XCTAssertEqual(try tx.checkIntegrity(), []) }
    }

    func testMalformedRunsThrowCorruptRatherThanTrap() throws {
        let fs = MemoryFileSystem()
        let file = try fs.open("/x-sort", create: true)
        func entry(keyLength: UInt32, prefix: UInt32, flags: UInt8, key: [UInt8]) -> [UInt8] {
            withUnsafeBytes(of: keyLength.littleEndian, Array.init) + withUnsafeBytes(of: prefix.littleEndian, Array.init)
                + [flags] + withUnsafeBytes(of: UInt64(5).littleEndian, Array.init) + key
        }
        let cases: [(bytes: [UInt8], end: Int64?)] = [
            (entry(keyLength: 0xFFFF_FFFF, prefix: 0, flags: 0, key: []), nil),  // key longer than any key
            (entry(keyLength: 3, prefix: 4, flags: 0, key: [1, 2, 3]), nil),      // prefix past the key
            (entry(keyLength: 3, prefix: 1, flags: 7, key: [1, 2, 3]), nil),      // unknown flags
            (entry(keyLength: 30, prefix: 1, flags: 0, key: [1, 2, 3]), nil),     // run ends inside the key
            (Array(entry(keyLength: 3, prefix: 1, flags: 0, key: [1, 2, 3]).prefix(9)), nil),  // inside the header
            (entry(keyLength: 3, prefix: 1, flags: 0, key: [1, 2, 3]), 100),      // file shorter than the run
        ]
        for (i, c) in cases.enumerated() {
            try file.truncate(to: 0)
            try c.bytes.withUnsafeBytes { try file.write($0, at: 0) }
            var reader = RunReader(file: file, start: 0, end: c.end ?? Int64(c.bytes.count), bufferSize: 4096, maxKey: 100)
            XCTAssertThrowsError(try reader.next(), "case \(i)") { e in
                XCTAssertEqual((e as? KuraError)?.code, .corrupt, "case \(i)")
                XCTAssertTrue("\(e)".contains("/x-sort"), "case \(i): \(e)")
            }
        }
        // A well-formed entry reads back.
        let good = entry(keyLength: 3, prefix: 1, flags: 1, key: [1, 2, 3])
        try file.truncate(to: 0)
        try good.withUnsafeBytes { try file.write($0, at: 0) }
        var reader = RunReader(file: file, start: 0, end: Int64(good.count), bufferSize: 4096, maxKey: 100)
        let e = try XCTUnwrap(try reader.next())
        XCTAssertEqual(e.key, [1, 2, 3])
        XCTAssertEqual(e.prefix, 1)
        XCTAssertTrue(e.hasNull)
        XCTAssertEqual(e.rowID, 5)
        XCTAssertNil(try reader.next())
    }

    /// The head-first key order of bulk deletes (`WriteTransaction.inKeyOrder`)
    /// is `bytesPrecede`'s: random keys of 0-12 bytes over a 3-byte alphabet
    /// (many shared prefixes, keys ending inside the 8-byte head). Seeded.
    func testHeadFirstKeyOrderIsByteOrder() {
        let seed = testSeed("KeySorterTests.headFirst")
        var rng = SplitMix64(seed: seed)
        for _ in 0..<20 {
            let keys: [[UInt8]] = (0..<300).map { _ in (0..<Int(rng.next() % 13)).map { _ in UInt8(rng.next() % 3) } }
            XCTAssertEqual(WriteTransaction.inKeyOrder(keys), keys.sorted(by: bytesPrecede), "seed \(seed)")
        }
    }
    /// Entries added in row-ID order are radix-sorted on their column-value
    /// bytes alone (the row-ID bytes cost no pass); entries added out of
    /// row-ID order on the whole head. Both must give `bytesPrecede`'s order
    /// of the whole keys, in memory and through runs on disk: keys of integer,
    /// double, short and long text columns, nulls and descending columns, as
    /// an index build makes them (IndexKey segments, then the row ID). Seeded.
    func testSortOrderOfIndexKeysAddedInAndOutOfRowIDOrder() throws {
        let seed = testSeed("KeySorterTests.rowIDOrder")
        var rng = SplitMix64(seed: seed)
        func value(_ kind: Int) -> Value {
            if rng.next() % 12 == 0 { return .null }
            switch kind {
            case 0: return .integer(Int64(rng.next() % 2000) - 300)
            case 1: return .double(Double(Int64(rng.next() % 400) - 200) / 8)
            case 2: return .text(String((0..<Int(rng.next() % 5)).map { _ in "ab"[String.Index(utf16Offset: Int(rng.next() % 2), in: "ab")] }))
            default: return .text(String(repeating: "k", count: 6 + Int(rng.next() % 6)) + String(rng.next() % 4))
            }
        }
        for round in 0..<12 {
            let kinds = (0..<(1 + Int(rng.next() % 2))).map { _ in Int(rng.next() % 4) }
            let descending = kinds.map { _ in rng.next() % 3 == 0 }
            let ordered = round % 3 != 2
            let n = 600 + Int(rng.next() % 1500)
            var rowIDs: [Int64] = []
            var r = Int64(rng.next() % 50) - 25
            for _ in 0..<n { r += 1 + Int64(rng.next() % 3); rowIDs.append(r) }
            if !ordered { rowIDs.shuffle(using: &rng) }
            var keys: [[UInt8]] = []
            var prefixes: [Int] = []
            for id in rowIDs {
                var k: [UInt8] = []
                for (c, kind) in kinds.enumerated() { IndexKey.append(value(kind), descending: descending[c], folded: false, to: &k) }
                prefixes.append(k.count)
                RowIDKey.append(id, to: &k)
                keys.append(k)
            }
            let expected = keys.sorted(by: bytesPrecede)
            for budget in [1 << 20, 2048] {
                let fs = FaultInjectingFileSystem()
                let sorter = KeySorter(fileSystem: fs, storePath: "/s.kura", permissionsOf: nil, budget: budget, maxKey: 1000)
                for (j, k) in keys.enumerated() {
                    try sorter.add(key: k, prefix: prefixes[j], hasNull: false, rowID: rowIDs[j])
                }
                try sorter.finish()
                var got: [[UInt8]] = []
                let inMemory = sorter.isInMemory
                if inMemory {
                    try sorter.forEachInMemory { k, _ in got.append(Array(k)) }
                } else {
                    let m = try sorter.merged()
                    while let e = try m.next() { got.append(e.key) }
                }
                try sorter.close()
                XCTAssertEqual(inMemory, budget > 2048, "round \(round), seed \(seed)")
                XCTAssertEqual(got.count, expected.count, "round \(round), seed \(seed)")
                XCTAssertTrue(got == expected, "round \(round) (kinds \(kinds), descending \(descending), in row-ID order \(ordered), budget \(budget)): not in key order; seed \(seed)")
            }
        }
    }
}
