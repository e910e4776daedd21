import XCTest
@testable import KuraEngine

/// A scan of a whole tree reads each page once: a page it reads from disk
/// enters the cache only on a scan's second read of it (`PageCache.admitsScanned`),
/// so one pass over a table leaves the cache (and the process's memory) as it
/// was, while lookups and index ranges are cached as before.
final class ScanCacheTests: XCTestCase {
    /// A closed store on `fs` with table `t` of `rows` rows over many leaves
    /// (50-odd rows a 4096-byte leaf: more than 130 leaves for 8000 rows) and an index on `score`.
    private func makeStore(_ fs: MemoryFileSystem, rows: Int) throws -> Database.Options {
        var o = Database.Options()
        o.fileSystem = fs
        o.pageSize = 4096
        o.cacheSize = 4096 * 4096
        let db = try Database(path: "/s.kura", options: o)
        try db.write { tx in
            let t = try tx.createTable("t", schema: TableSchema([ColumnDefinition("name", .text), ColumnDefinition("score", .integer)]))
            for i in 0..<rows {
                _ = try tx.insert([.text("row \(i) " + String(repeating: "x", count: 60)), .integer(Int64(i % 100))], into: t)
            }
            _ = try tx.createIndex("by_score", on: t, columns: [IndexColumn("score")])
        }
        db.close()
        return o
    }

    /// The rows `query` selects, stepped through one by one.
    private func selected(_ db: Database, _ query: TableQuery) throws -> Int {
        try db.read { tx in
            let c = try tx.select(query)
            var n = 0
            while try c.next() != nil { n += 1 }
            return n
        }
    }

    func testAFirstScanLeavesTheCacheAndASecondScanFillsIt() throws {
        let fs = MemoryFileSystem()
        let o = try makeStore(fs, rows: 8000)
        let db = try Database(path: "/s.kura", options: o)
        defer { db.close() }
        let before = db.cachedPageCount
        // A query scan (QueryCursor) over every row.
        XCTAssertEqual(try selected(db, TableQuery("t", where: try KuraPredicate(format: "name CONTAINS %@", arguments: [.text("row")]))), 8000)
        let afterFirst = db.cachedPageCount
        // Only the pages a scan reaches by descending (root, catalog) may enter.
        XCTAssertLessThan(afterFirst - before, 10, "one scan filled the cache with \(afterFirst - before) pages")
        // The second scan (a row cursor this time) is the second read of every leaf.
        try db.read { tx in
            let c = try tx.rows(in: try tx.table("t"))
            var n = 0
            while try c.next() != nil { n += 1 }
            XCTAssertEqual(n, 8000)
        }
        let afterSecond = db.cachedPageCount
        XCTAssertGreaterThan(afterSecond - afterFirst, 8000 / 60, "the second scan cached \(afterSecond - afterFirst) pages")
        // A third scan reads every leaf from the cache: the cache does not grow.
        XCTAssertEqual(try db.read { tx in try tx.count(TableQuery("t", where: try KuraPredicate(format: "name CONTAINS %@", arguments: [.text("row 7")]))) }, 1111)
        XCTAssertEqual(db.cachedPageCount, afterSecond)
    }

    func testLookupsAndIndexRangesAreCachedOnTheirFirstRead() throws {
        let fs = MemoryFileSystem()
        let o = try makeStore(fs, rows: 8000)
        let db = try Database(path: "/s.kura", options: o)
        defer { db.close() }
        let before = db.cachedPageCount
        try db.read { tx in
            let t = try tx.table("t")
            for id in stride(from: 1, through: 8000, by: 40) { XCTAssertNotNil(try tx.values(in: t, rowID: Int64(id))) }
        }
        let afterLookups = db.cachedPageCount
        XCTAssertGreaterThan(afterLookups - before, 8000 / 60, "lookups cached \(afterLookups - before) pages")
        // An index range (score == 7: every 100th row, spread over the table).
        XCTAssertEqual(try selected(db, TableQuery("t", where: try KuraPredicate(format: "score == 7"))), 80)
        XCTAssertGreaterThan(db.cachedPageCount, afterLookups, "the index range's pages were not cached")
    }

    func testScansStayRightWhileAnotherConnectionWritesAndCheckpoints() throws {
        let seed = UInt64(ProcessInfo.processInfo.environment["KURA_SEED"] ?? "") ?? UInt64.random(in: 0...UInt64(UInt32.max))
        print("ScanCacheTests seed \(seed) (replay: KURA_SEED=\(seed))")
        var rng = SplitMix64(seed: seed)
        let fs = MemoryFileSystem()
        var o = try makeStore(fs, rows: 3000)
        o.cacheSize = 64 * 4096
        let reader = try Database(path: "/s.kura", options: o)
        let writer = try Database(path: "/s.kura", options: o)
        defer { reader.close(); writer.close() }
        var model = try reader.read { tx in
            var m: [Int64: Int64] = [:]
            let c = try tx.rows(in: try tx.table("t"))
            while let r = try c.next() { m[r.rowID] = try r.value(at: 1).integerValue }
            return m
        }
        for round in 0..<12 {
            try writer.write { tx in
                let t = try tx.table("t")
                for _ in 0..<Int(rng.next() % 300) {
                    let id = Int64(rng.next() % 3500) + 1
                    if model[id] != nil && rng.next() % 3 == 0 {
                        XCTAssertTrue(try tx.delete(from: t, rowID: id))
                        model[id] = nil
                    } else if model[id] != nil {
                        let v = Int64(rng.next() % 1000)
                        XCTAssertTrue(try tx.update([.text("u \(round)"), .integer(v)], in: t, rowID: id))
                        model[id] = v
                    } else {
                        let v = Int64(rng.next() % 1000)
                        model[try tx.insert([.text("n \(round)"), .integer(v)], into: t)] = v
                    }
                }
            }
            if rng.next() % 2 == 0 { _ = try writer.checkpoint() }
            let seen = try reader.read { tx in
                var m: [Int64: Int64] = [:]
                let c = try tx.rows(in: try tx.table("t"), reverse: round % 2 == 1)
                while let r = try c.next() { m[r.rowID] = try r.value(at: 1).integerValue }
                return m
            }
            XCTAssertEqual(seen, model, "round \(round), seed \(seed)")
        }
    }

    func testAdmissionMarksAKeyOnTheFirstReadAndAdmitsItOnTheSecond() {
        var cache = PageCache(capacity: 16)
        XCTAssertFalse(cache.admitsScanned(5))
        XCTAssertTrue(cache.admitsScanned(5))
        XCTAssertTrue(cache.admitsScanned(5))
        // After as many marks as the cache holds pages, the marks are cleared.
        var admitted = 0
        for k in UInt64(100)..<UInt64(100 + 16) where cache.admitsScanned(k) { admitted += 1 }
        XCTAssertLessThan(admitted, 16)
        XCTAssertFalse(cache.admitsScanned(5), "marks survived \(16) more marks")
    }
}
