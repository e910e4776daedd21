import XCTest
@testable import KuraEngine

final class StorageTests: XCTestCase {
    func memoryOptions(pageSize: Int = 4096, cache: Int = 8 << 20) -> Database.Options {
        var o = Database.Options()
        o.fileSystem = MemoryFileSystem()
        o.pageSize = pageSize
        o.cacheSize = cache
        o.durability = .off
        return o
    }

    func testSixteenMiBValueRoundTripsAndItsPagesAreReused() throws {
        let db = try Database(path: "/big.kura", options: memoryOptions())
        var big = [UInt8](repeating: 0, count: 16 << 20)
        var rng = SplitMix64(seed: 7)
        big.withUnsafeMutableBytes { b in
            for i in stride(from: 0, to: b.count, by: 8) { b.storeBytes(of: rng.next(), toByteOffset: i, as: UInt64.self) }
        }
        try db.write { tx in
            let t = try tx.createTable("blobs")
            try tx.insert([.integer(1), .blob(big)], into: t)
            try tx.insert([.text("after")], into: t)
        }
        let pagesAfterInsert = try db.read { tx in try tx.pageCount }
        XCTAssertGreaterThan(pagesAfterInsert, (16 << 20) / 4096)
        try db.read { tx in
            let t = try tx.table("blobs")
            XCTAssertEqual(try tx.values(in: t, rowID: 1), [.integer(1), .blob(big)])
            XCTAssertEqual(try tx.values(in: t, rowID: 2), [.text("after")])
            let recordLength = RecordCodec.encode([.integer(1), .blob(big)]).count
            let layout = Node.leafLayout(keyLength: 2, valueLength: recordLength, pageSize: 4096)
            let chain = (recordLength - layout.local + 4079) / 4080
            XCTAssertEqual(try tx.statistics(of: t).overflowPages, chain)
            XCTAssertEqual(try tx.checkIntegrity(), [])
        }
        // Replacing the value frees its chain; a second big value reuses it.
        try db.write { tx in
            let t = try tx.table("blobs")
            XCTAssertTrue(try tx.update([.integer(1)], in: t, rowID: 1))
        }
        try db.read { tx in
            XCTAssertGreaterThan(try tx.freePageCount, 4000)
            XCTAssertEqual(try tx.checkIntegrity(), [])
        }
        try db.write { tx in
            try tx.insert([.blob(big)], into: try tx.table("blobs"))
        }
        try db.read { tx in
            XCTAssertEqual(try tx.pageCount, pagesAfterInsert, "the freed chain was reused, the file did not grow")
            XCTAssertEqual(try tx.values(in: try tx.table("blobs"), rowID: 3), [.blob(big)])
        }
    }

    func testAppendingInRowIDOrderFillsPages() throws {
        let db = try Database(path: "/fill.kura", options: memoryOptions())
        try db.write { tx in
            let t = try tx.createTable("t")
            for i in 0..<50_000 { try tx.insert([.text("name\(i)"), .integer(Int64(i % 1000))], into: t) }
        }
        try db.read { tx in
            let st = try tx.statistics(of: try tx.table("t"))
            XCTAssertEqual(st.entries, 50_000)
            XCTAssertGreaterThan(st.leafFill, 0.95, "sequential appends leave full pages (\(st))")
        }
    }

    func testRandomInsertsKeepPagesAtLeastHalfFullOnAverage() throws {
        let db = try Database(path: "/rand.kura", options: memoryOptions())
        var rng = SplitMix64(seed: 3)
        try db.write { tx in
            let t = try tx.createTable("t")
            var used = Set<Int64>()
            while used.count < 20_000 {
                let id = Int64(rng.next() % 1_000_000)
                if used.insert(id).inserted { try tx.insert([.integer(id)], into: t, rowID: id) }
            }
        }
        try db.read { tx in
            let st = try tx.statistics(of: try tx.table("t"))
            XCTAssertGreaterThan(st.leafFill, 0.5)
            XCTAssertEqual(try tx.checkIntegrity(), [])
        }
    }

    func testFillingAndEmptyingATableStopsGrowingTheFile() throws {
        let db = try Database(path: "/cycle.kura", options: memoryOptions(pageSize: 1024))
        var counts: [Int] = []
        for cycle in 0..<8 {
            try db.write { tx in
                let t = try tx.tableExists("t") ? try tx.table("t") : try tx.createTable("t")
                for i in 0..<3000 { try tx.insert([.text("row \(cycle) \(i) " + String(repeating: "x", count: i % 50))], into: t) }
            }
            try db.write { tx in
                let t = try tx.table("t")
                let c = try tx.rows(in: t)
                var ids: [Int64] = []
                while let r = try c.next() { ids.append(r.rowID) }
                for id in ids.shuffled() { XCTAssertTrue(try tx.delete(from: t, rowID: id)) }
            }
            counts.append(try db.read { tx in
                XCTAssertEqual(try tx.rowCount(try tx.table("t")), 0)
                XCTAssertEqual(try tx.checkIntegrity(), [])
                return try tx.pageCount
            })
        }
        XCTAssertEqual(Set(counts.dropFirst()).count, 1, "page counts per cycle: \(counts)")
        // Row IDs are never reused: the next insert continues after the last cycle.
        try db.write { tx in
            XCTAssertEqual(try tx.insert([.null], into: try tx.table("t")), 8 * 3000 + 1)
        }
    }

    func testScanningAStoreTenTimesTheCacheStaysWithinTheBound() throws {
        let cacheBytes = 64 * 4096
        let db = try Database(path: "/scan.kura", options: memoryOptions(cache: cacheBytes))
        try db.write { tx in
            let t = try tx.createTable("t")
            for i in 0..<40_000 { try tx.insert([.integer(Int64(i)), .text(String(repeating: "s", count: 70))], into: t) }
        }
        _ = try db.checkpoint()
        let pages = try db.read { tx in try tx.pageCount }
        XCTAssertGreaterThan(pages * 4096, 10 * cacheBytes)
        var maxCached = 0
        try db.read { tx in
            let c = try tx.rows(in: try tx.table("t"))
            var n = 0
            while let r = try c.next() {
                n += 1
                if n % 500 == 0 { maxCached = max(maxCached, db.cachedPageCount) }
                XCTAssertEqual(try r.value(at: 0), .integer(Int64(n - 1)))
            }
            XCTAssertEqual(n, 40_000)
        }
        XCTAssertLessThanOrEqual(maxCached, 64 + 1)
    }

    func testMissingTrailingValuesReadAsNull() throws {
        let r = RecordCodec.encode([.integer(5)])
        let view = try r.withBytes { b throws(KuraError) in try RecordView(b) }
        XCTAssertEqual(view.count, 1)
        XCTAssertEqual(try r.withBytes { b throws(KuraError) in try RecordView(b).value(at: 3) }, .null)
    }

    func testRecordEncodingRoundTripsEveryType() throws {
        let values: [Value] = [.null, .bool(true), .bool(false), .integer(0), .integer(1), .integer(-1),
                               .integer(127), .integer(-129), .integer(40000), .integer(Int64.min), .integer(Int64.max),
                               .double(-0.5), .double(.infinity), .text(""), .text("héllo ✓"), .blob([]), .blob([0, 255])]
        XCTAssertEqual(try RecordCodec.decode(RecordCodec.encode(values)), values)
        // Appending keeps what was there and writes the same bytes after it.
        var out: [UInt8] = [7, 7]
        RecordCodec.encode(values, into: &out)
        XCTAssertEqual(Array(out[..<2]), [7, 7])
        XCTAssertEqual(Array(out[2...]), RecordCodec.encode(values))
        XCTAssertEqual(RecordCodec.encode([]), [0])
    }

    func testWorkedRecordExampleFromFormatMd() {
        // FORMAT.md, "Records", worked example: [42, "Ada", null, 2.5, true]
        let bytes = RecordCodec.encode([.integer(42), .text("Ada"), .null, .double(2.5), .bool(true)])
        XCTAssertEqual(bytes.map { String(format: "%02x", $0) }.joined(separator: " "),
                       "05 05 13 00 09 02 2a 41 64 61 00 00 00 00 00 00 04 40")
    }

    func testMalformedRecordsThrowCorrupt() {
        let bad: [[UInt8]] = [[], [5], [0x02, 0x0a, 0x00], [0x01, 0x0f], [0x01, 0x11, 0xff, 0xfe], [0xff, 0xff, 0xff]]
        for b in bad {
            XCTAssertThrowsError(try RecordCodec.decode(b), "\(b)") { e in
                XCTAssertEqual((e as? KuraError)?.code, .corrupt)
            }
        }
    }

    func testRowIDKeysSortLikeIntegers() {
        var rng = SplitMix64(seed: 11)
        var values: [Int64] = [0, 1, -1, 255, 256, -256, -257, Int64.max, Int64.min, 127, 128, -128, -129]
        for _ in 0..<2000 { values.append(Int64(bitPattern: rng.next()) >> Int64(rng.next() % 64)) }
        let keys = values.map(RowIDKey.encode)
        for (v, k) in zip(values, keys) {
            XCTAssertEqual(RowIDKey.decode(k), v)
            XCTAssertEqual(k.count, RowIDKey.size(v))
        }
        let byValue = values.indices.sorted { values[$0] < values[$1] }
        let byKey = values.indices.sorted { keys[$0].lexicographicallyPrecedes(keys[$1]) }
        XCTAssertEqual(byValue.map { values[$0] }, byKey.map { values[$0] })
        XCTAssertNil(RowIDKey.decode([0x82, 0x00, 0x01]), "non-minimal encodings are rejected")
    }

    func testChecksumMatchesXXH64ReferenceValues() {
        XCTAssertEqual(Checksum.xxh64([], seed: 0), 0xEF46_DB37_51D8_E999)
        XCTAssertEqual(Checksum.xxh64(Array("abc".utf8), seed: 0), 0x44BC_2CF5_AD77_0999)
        XCTAssertEqual(Checksum.xxh64((0..<100).map { UInt8($0) }, seed: 7), 0x8065_3E7E_9B88_7CDD)
        XCTAssertEqual(Checksum.xxh64(Array("Kura page".utf8), seed: 12345), 0xF717_0EC3_3FD4_36ED)
    }

    /// Every length from 0 to 300 and a page's, against a plain indexed
    /// implementation of XXH64 (the specification's loop, one stripe at a
    /// time): the pointer-walking stripe loop ends where the spec's does.
    func testChecksumAgreesWithAPlainImplementationAtEveryLength() {
        func plain(_ d: [UInt8], seed: UInt64) -> UInt64 {
            let p1: UInt64 = 0x9E37_79B1_85EB_CA87, p2: UInt64 = 0xC2B2_AE3D_27D4_EB4F, p3: UInt64 = 0x1656_67B1_9E37_79F9
            let p4: UInt64 = 0x85EB_CA77_C2B2_AE63, p5: UInt64 = 0x27D4_EB2F_1656_67C5
            func rotl(_ x: UInt64, _ r: UInt64) -> UInt64 { (x << r) | (x >> (64 - r)) }
            func u64(_ i: Int) -> UInt64 { (0..<8).reduce(0) { $0 | UInt64(d[i + $1]) << (8 * UInt64($1)) } }
            func round(_ a: UInt64, _ l: UInt64) -> UInt64 { rotl(a &+ l &* p2, 31) &* p1 }
            var i = 0
            var h: UInt64
            if d.count >= 32 {
                var v = [seed &+ p1 &+ p2, seed &+ p2, seed, seed &- p1]
                while i + 32 <= d.count {
                    for k in 0..<4 { v[k] = round(v[k], u64(i + 8 * k)) }
                    i += 32
                }
                h = rotl(v[0], 1) &+ rotl(v[1], 7) &+ rotl(v[2], 12) &+ rotl(v[3], 18)
                for k in 0..<4 { h = (h ^ round(0, v[k])) &* p1 &+ p4 }
            } else {
                h = seed &+ p5
            }
            h = h &+ UInt64(d.count)
            while i + 8 <= d.count { h ^= round(0, u64(i)); h = rotl(h, 27) &* p1 &+ p4; i += 8 }
            if i + 4 <= d.count {
                h ^= (0..<4).reduce(UInt64(0)) { $0 | UInt64(d[i + $1]) << (8 * UInt64($1)) } &* p1
                h = rotl(h, 23) &* p2 &+ p3
                i += 4
            }
            while i < d.count { h ^= UInt64(d[i]) &* p5; h = rotl(h, 11) &* p1; i += 1 }
            h ^= h >> 33; h = h &* p2; h ^= h >> 29; h = h &* p3; h ^= h >> 32
            return h
        }
        var g = SplitMix64(seed: 0x5EED)
        let data = (0..<4096).map { _ in UInt8(truncatingIfNeeded: g.next()) }
        for n in Array(0...300) + [4088, 4096] {
            let d = Array(data[0..<n])
            XCTAssertEqual(Checksum.xxh64(d, seed: UInt64(n)), plain(d, seed: UInt64(n)), "length \(n)")
        }
    }

    func testTransactionUsedAfterItsClosureThrowsMisuse() throws {
        let db = try Database.inMemory()
        var escaped: ReadTransaction?
        try db.read { tx in escaped = tx }
        XCTAssertThrowsError(try escaped!.tableNames()) { e in
            guard case KuraError.misuse = e else { return XCTFail("\(e)") }
        }
    }

    func testTableErrorsNameTheTable() throws {
        let db = try Database.inMemory()
        try db.write { tx in try tx.createTable("a") }
        XCTAssertThrowsError(try db.write { tx in try tx.createTable("a") }) { e in
            XCTAssertEqual((e as? KuraError)?.code, .alreadyExists)
            XCTAssertTrue("\(e)".contains("\"a\""))
        }
        XCTAssertThrowsError(try db.read { tx in try tx.table("nope") }) { e in
            XCTAssertEqual((e as? KuraError)?.code, .notFound)
            XCTAssertTrue("\(e)".contains("\"nope\""))
        }
        XCTAssertThrowsError(try db.write { tx in try tx.dropTable("nope") })
        XCTAssertThrowsError(try db.write { tx in try tx.createTable("") })
    }

    func testSeveralTablesCreateDropListAndCount() throws {
        let db = try Database.inMemory()
        try db.write { tx in
            for name in ["z", "y", "x"] {
                let t = try tx.createTable(name)
                for i in 0..<(name == "y" ? 500 : 10) { try tx.insert([.integer(Int64(i))], into: t) }
            }
        }
        try db.write { tx in try tx.dropTable("z") }
        try db.read { tx in
            XCTAssertEqual(try tx.tableNames(), ["x", "y"])
            XCTAssertEqual(try tx.rowCount(try tx.table("y")), 500)
            XCTAssertEqual(try tx.checkIntegrity(), [])
        }
    }

    func testErrorInWriteRollsEverythingBack() throws {
        struct Boom: Error {}
        let db = try Database.inMemory()
        try db.write { tx in try tx.insert([.integer(1)], into: try tx.createTable("t")) }
        XCTAssertThrowsError(try db.write { tx in
            let t = try tx.table("t")
            for i in 0..<1000 { try tx.insert([.integer(Int64(i))], into: t) }
            try tx.createTable("u")
            throw Boom()
        })
        try db.read { tx in
            XCTAssertEqual(try tx.tableNames(), ["t"])
            XCTAssertEqual(try tx.rowCount(try tx.table("t")), 1)
        }
        // The next writer continues with the row IDs the rolled-back one did not keep.
        try db.write { tx in XCTAssertEqual(try tx.insert([.null], into: try tx.table("t")), 2) }
    }
}
