// An index search over many key ranges in a read transaction (a
// relationship probe with many row IDs: `ReadTransaction.probeIndex`; a
// query cursor's index plan) finds a later range's first key from the lowest
// page of the cursor's path that brackets it (the leaf the cursor is on, or
// an interior page above it) instead of descending from the root
// (TreeCursor.seekNear). The test checks the rows such
// searches return against a model (IN lists as a cross-check of the same
// ranges through a query): small pages (an index of many
// leaves), ascending and descending indexes, duplicate keys spanning leaf
// boundaries, ranges whose bounds fall before a leaf's first key, after its
// last, between two leaves, on a leaf's first or last key, absent values, and
// the probe the object layer's relationship queries use
// (`ReadTransaction.probeIndex`). The seed is printed; KURA_SEED replays it.

import Foundation
import XCTest
@testable import KuraEngine

final class IndexRangeSeekTests: XCTestCase {
    func testManyRangesMatchTheModel() throws {
        var rng = SplitMix64(seed: testSeed("IndexRangeSeekTests"))
        for descending in [false, true] {
            var o = Database.Options()
            o.pageSize = 512
            let db = try Database.inMemory(options: o)
            var model: [Int64: Int64] = [:]
            try db.write { tx in
                let t = try tx.createTable("t", schema: TableSchema([ColumnDefinition("score", .integer), ColumnDefinition("name", .text)]))
                try tx.createIndex("by_score", on: t, columns: [IndexColumn("score", descending: descending)])
                // Scores 0..<1500 with gaps and runs of duplicates (some
                // longer than a leaf holds).
                for i in 0..<3000 {
                    let score = i % 97 == 0 ? 700 : Int64(rng.next() % 1500)
                    model[try tx.insert([.integer(score), .text("n\(i)")], into: t)] = score
                }
            }
            let leafCount = try indexLeafCount(db, table: "t")
            XCTAssertGreaterThan(leafCount, 10, "the index should span many leaves")
            for round in 0..<150 {
                let n = Int(rng.next() % 80) + 1
                // Mostly nearby values (many ranges per leaf), some far apart,
                // some absent (above or below every score).
                let base = Int64(rng.next() % 1500)
                var keys: [Int64] = (0..<n).map { _ in
                    switch rng.next() % 10 {
                    case 0: return Int64(rng.next() % 1700) - 100
                    case 1: return 700
                    default: return base + Int64(rng.next() % 60) - 30
                    }
                }
                if round % 2 == 0 { keys.sort() }
                let want = Set(model.filter { keys.contains($0.value) }.map(\.key))
                let list = keys.map(String.init).joined(separator: ", ")
                let got: [Int64] = try db.read { tx in
                    let c = try tx.select(TableQuery("t", where: try KuraPredicate(format: "score IN {\(list)}")))
                    var ids: [Int64] = []
                    while let r = try c.next() { ids.append(r.rowID) }
                    return ids
                }
                XCTAssertEqual(Set(got), want, "descending \(descending) round \(round): score IN {\(list)}")
                XCTAssertEqual(got.count, want.count, "a row twice: descending \(descending) round \(round)")
                // The probe a to-one join's planner makes: the inner IDs as integers.
                let byIntegers: [Int64] = try db.read { tx in
                    guard let index = try tx.indexes(of: "t").first(where: { $0.name == "by_score" }) else {
                        XCTFail("no index")
                        return []
                    }
                    return try tx.probeIndex(index, integers: Array(Set(keys)))
                }
                XCTAssertEqual(Set(byIntegers), want, "integer probe, descending \(descending) round \(round)")
                XCTAssertEqual(byIntegers.count, want.count, "integer probe: a row twice")
            }
        }
    }

    /// `TreeCursor.seekNear` from any position lands where `seek` from the
    /// root does, for keys before, after and between the cursor's: the same
    /// leaf, an interior page's subtree (a tree of at least three levels),
    /// or neither; keys below and above every entry, absent values, whole
    /// entries' keys. The seed is printed; KURA_SEED replays it.
    func testSeekNearLandsWhereSeekDoes() throws {
        var rng = SplitMix64(seed: testSeed("IndexRangeSeekTests.seekNear"))
        for descending in [false, true] {
            let db = try memoryStore("seeknear", pageSize: 512)
            var entries: [[UInt8]] = []
            try db.write { tx in
                let t = try tx.createTable("t", schema: TableSchema([ColumnDefinition("score", .integer)]))
                try tx.createIndex("by_score", on: t, columns: [IndexColumn("score", descending: descending)])
                for _ in 0..<12_000 { _ = try tx.insert([.integer(Int64(rng.next() % 5000))], into: t) }
            }
            try db.read { tx in
                guard let index = try tx.indexes(of: "t").first, let pages = tx.snapshotPages else { return XCTFail("no index") }
                var all = TreeCursor(tree: index.tree)
                try all.first(pages)
                while all.isValid {
                    entries.append(Array(all.key))
                    try all.next(pages)
                }
                try entries[0].withUnsafeBytes { try all.seek($0, pages) }
                XCTAssertGreaterThanOrEqual(all.stack.count, 3, "the index should have an interior level below its root")
                func randomKey() -> [UInt8] {
                    switch rng.next() % 4 {
                    case 0: return entries[Int(rng.next() % UInt64(entries.count))]
                    case 1: return QueryPlanner.segment(.integer(Int64(rng.next() % 5200) - 100), index.columns[0])
                    default: return QueryPlanner.segment(.integer(Int64(rng.next() % 5000)), index.columns[0])
                    }
                }
                var near = TreeCursor(tree: index.tree)
                for step in 0..<3000 {
                    // Start somewhere (often where the last step left it), then go to
                    // a key near it, on either side, or anywhere.
                    if step % 5 == 0 || !near.isValid { try randomKey().withUnsafeBytes { try near.seek($0, pages) } }
                    var key = randomKey()
                    if near.isValid, rng.next() % 2 == 0 {
                        let here = Array(near.key)
                        let i = entries.firstIndex(of: here) ?? 0
                        let j = max(0, min(entries.count - 1, i + Int(rng.next() % 400) - 200))
                        key = entries[j]
                        if rng.next() % 2 == 0 { key = Array(key.dropLast()) }
                    }
                    var root = TreeCursor(tree: index.tree)
                    try key.withUnsafeBytes { try root.seek($0, pages) }
                    try key.withUnsafeBytes { try near.seekNear($0, pages) }
                    XCTAssertEqual(near.isValid, root.isValid, "descending \(descending) step \(step)")
                    if near.isValid && root.isValid {
                        XCTAssertEqual(Array(near.key), Array(root.key), "descending \(descending) step \(step): key \(key)")
                        if Array(near.key) != Array(root.key) { return }
                        // The path is whole: stepping on from both agrees.
                        try near.next(pages)
                        try root.next(pages)
                        XCTAssertEqual(near.isValid ? Array(near.key) : [], root.isValid ? Array(root.key) : [], "next, step \(step)")
                    }
                }
            }
        }
    }

    /// An `IN` list longer than 1,000 values (the planner's old bound, past
    /// which it took no key ranges and scanned the table, testing every row
    /// against each value: a to-many prefetch for 1,010 owners took 0.5 s)
    /// is searched through the index, and answers as the model does.
    func testLongInListUsesTheIndex() throws {
        var rng = SplitMix64(seed: testSeed("IndexRangeSeekTests.long"))
        let db = try Database.inMemory()
        var model: [Int64: Int64] = [:]
        try db.write { tx in
            let t = try tx.createTable("t", schema: TableSchema([ColumnDefinition("owner", .integer), ColumnDefinition("name", .text)]))
            try tx.createIndex("by_owner", on: t, columns: [IndexColumn("owner")])
            for i in 0..<20_000 {
                let owner = Int64(rng.next() % 10_000)
                model[try tx.insert([.integer(owner), .text("n\(i)")], into: t)] = owner
            }
        }
        for n in [1_001, 2_500] {
            let keys = (0..<n).map { _ in Int64(rng.next() % 12_000) }
            let list = keys.map(String.init).joined(separator: ", ")
            let query = TableQuery("t", where: try KuraPredicate(format: "owner IN {\(list)}"))
            let (plan, ids): (String, [Int64]) = try db.read { tx in
                let c = try tx.select(query)
                var ids: [Int64] = []
                while let r = try c.next() { ids.append(r.rowID) }
                return (try tx.explain(query), ids)
            }
            XCTAssertTrue(plan.contains("index \"by_owner\""), "\(n) values: \(plan.prefix(400))")
            let wanted = Set(keys)
            XCTAssertEqual(Set(ids), Set(model.filter { wanted.contains($0.value) }.map(\.key)), "\(n) values")
            XCTAssertEqual(ids.count, Set(ids).count, "\(n) values: each row once")
        }
    }
}
