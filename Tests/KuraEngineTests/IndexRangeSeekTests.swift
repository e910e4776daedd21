// An index search over many key ranges in a read transaction (a
// relationship probe with many row IDs: `ReadTransaction.probeIndex`; a
// query cursor's index plan) finds a later range's first key inside the leaf
// the cursor is on when that leaf holds it, instead of descending from the
// root (CandidateSource.seekWithinLeaf). The test checks the rows such
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
                // The relationship probe: one single-key range per value, ascending.
                let probed: [Int64] = try db.read { tx in
                    let info = try tx.table("t")
                    guard let index = try tx.indexes(of: "t").first(where: { $0.name == "by_score" }) else {
                        XCTFail("no index")
                        return []
                    }
                    let ranges = Array(Set(keys)).sorted().map { k -> KeyRange in
                        let seg = QueryPlanner.segment(.integer(k), index.columns[0])
                        return KeyRange(lower: seg, upper: seg)
                    }
                    return try tx.probeIndex(index, descending ? ranges.reversed() : ranges, info)
                }
                XCTAssertEqual(Set(probed), want, "probe, descending \(descending) round \(round)")
                XCTAssertEqual(probed.count, want.count, "probe: a row twice")
            }
        }
    }
}
