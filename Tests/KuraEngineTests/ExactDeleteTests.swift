// Deletes by predicate whose plan is exact (an integer comparison on an
// integer index column: QueryPlanner, "Exact plans") on a table whose only
// index is that one take the index entries from the index walk and read no
// record (`WriteTransaction.deleteExactMatches`); every other delete takes the
// general path. The test runs both against a model: ascending and descending
// index, nulls, one-sided, strict, BETWEEN, IN and empty ranges, inserts and
// rollbacks in the same transactions, small pages and a cache of a few pages
// (merges, spills), and checks the rows, an index search and the integrity
// check (every index entry names a row and every row has its entry) after
// each round. The seed is printed; KURA_SEED replays it.

import Foundation
import XCTest
@testable import KuraEngine

final class ExactDeleteTests: XCTestCase {
    struct Rollback: Error {}

    func testExactDeletesMatchTheModel() throws {
        let seed = ProcessInfo.processInfo.environment["KURA_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1...UInt64(UInt32.max))
        print("ExactDeleteTests.model seed \(seed) (replay with KURA_SEED=\(seed))")
        var rng = SplitMix64(seed: seed)
        var exactRuns = 0
        for shape in 0..<3 {
            // 0: ascending index, 1: descending, 2: a second index (general path).
            var o = Database.Options()
            o.pageSize = 512
            o.cacheSize = 6 * 512
            let db = try Database.inMemory(options: o)
            try db.write { tx in
                let t = try tx.createTable("t", schema: TableSchema([ColumnDefinition("score", .integer), ColumnDefinition("name", .text)]))
                try tx.createIndex("by_score", on: t, columns: [IndexColumn("score", descending: shape == 1)])
                if shape == 2 { try tx.createIndex("by_name", on: t, columns: [IndexColumn("name")]) }
            }
            func row(_ rng: inout SplitMix64) -> [Value] {
                [rng.next() % 10 == 0 ? .null : .integer(Int64(rng.next() % 80) - 20), .text("n\(rng.next() % 50)")]
            }
            var model: [Int64: [Value]] = [:]
            try db.write { tx in
                let t = try tx.table("t")
                for _ in 0..<600 {
                    let v = row(&rng)
                    model[try tx.insert(v, into: t)] = v
                }
            }
            for round in 0..<25 {
                var staged = model
                do {
                    try db.write { tx in
                        let t = try tx.table("t")
                        for _ in 0..<30 {
                            let v = row(&rng)
                            staged[try tx.insert(v, into: t)] = v
                        }
                        for _ in 0..<2 {
                            let k = Int64(rng.next() % 90) - 25
                            let (format, test): (String, (Int64) -> Bool) = switch rng.next() % 8 {
                            case 0: ("score < \(k)", { $0 < k })
                            case 1: ("score <= \(k)", { $0 <= k })
                            case 2: ("score > \(k + 40)", { $0 > k + 40 })
                            case 3: ("score >= \(k + 40)", { $0 >= k + 40 })
                            case 4: ("score == \(k)", { $0 == k })
                            case 5: ("score IN {\(k), \(k + 3)}", { $0 == k || $0 == k + 3 })
                            case 6: ("score BETWEEN {\(k), \(k + 4)}", { $0 >= k && $0 <= k + 4 })
                            default: ("score < \(Double(k) + 0.5)", { Double($0) < Double(k) + 0.5 })   // not exact
                            }
                            let q = try TableQuery("t", where: format)
                            let plan = try tx.plan(q, try tx.resolve(q), explaining: false)
                            if plan.exact, shape < 2 { exactRuns += 1 }
                            let n = try tx.delete(from: "t", where: try KuraPredicate(format: format))
                            let ids = staged.filter { if case .integer(let s) = $0.value[0] { return test(s) } else { return false } }.map(\.key)
                            XCTAssertEqual(n, ids.count, "\(format), shape \(shape), seed \(seed)")
                            for id in ids { staged[id] = nil }
                        }
                        if round % 6 == 5 { throw Rollback() }
                    }
                    model = staged
                } catch is Rollback {}
                try assertScoreTableMatches(db, model, "round \(round), shape \(shape), seed \(seed)")
            }
        }
        XCTAssertGreaterThan(exactRuns, 30, "seed \(seed)")
    }

    /// A stale index entry (naming a row the table does not have, between rows
    /// that stay) met by an exact delete: the entry goes, no other row does,
    /// and the count is of the rows really deleted.
    func testStaleIndexEntryDeletesNoOtherRow() throws {
        let db = try Database.inMemory()
        try db.write { tx in
            let t = try tx.createTable("t", schema: TableSchema([ColumnDefinition("score", .integer)]))
            for i in 1...300 { try tx.insert([.integer(Int64(i % 100))], into: t) }
            let index = try tx.createIndex("by_score", on: t, columns: [IndexColumn("score")])
            // Row 150 (score 50) goes; an entry (95, row 150) is planted under the engine's feet.
            XCTAssertTrue(try tx.delete(from: t, rowID: 150))
            var key = QueryPlanner.segment(.integer(95), index.columns[0])
            RowIDKey.append(150, to: &key)
            try index.tree.insert(key, [], mode: .insertNew, tx.writer!)
        }
        // Rows 90...99, 190...199 and 290...299 match; row ID 150 comes between
        // 99 and 190 in the rows to delete, and rows 100...189 (but 150) stay.
        let n = try db.write { tx in try tx.delete(from: "t", where: try KuraPredicate(format: "score >= 90")) }
        XCTAssertEqual(n, 30)
        try db.read { tx in
            let ids = Set(try tx.fetch(TableQuery("t")).map(\.rowID))
            XCTAssertEqual(ids, Set((1...300).filter { $0 % 100 < 90 && $0 != 150 }.map(Int64.init)))
            XCTAssertEqual(try tx.checkIntegrity(), [])
        }
    }
}
