// `WriteTransaction.deleteRows(_:records:from:)` and `currentRecord(in:rowID:)`
// (package API, the object layer's save of deleted objects): rows deleted
// together with the records read for them in the same transaction, their
// index keys built in the table handle's buffers, each index's entries
// deleted in key order and the rows in row-ID order. Checked against a model
// of the rows, an index search and the integrity check (every index entry
// names a row and every row has its entry), with no index, ascending and
// descending indexes over integers, text and nulls, rows given in any order,
// updates earlier in the same transaction, small pages and a cache of a few
// pages (merges, spills), and rolled-back transactions. The seed is printed;
// KURA_SEED replays it.

import Foundation
import XCTest
@testable import KuraEngine

final class RecordDeleteTests: XCTestCase {
    struct Rollback: Error {}

    func testDeletesWithReadRecordsMatchTheModel() throws {
        let seed = ProcessInfo.processInfo.environment["KURA_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1...UInt64(UInt32.max))
        print("RecordDeleteTests.model seed \(seed) (replay with KURA_SEED=\(seed))")
        var rng = SplitMix64(seed: seed)
        for shape in 0..<3 {
            // 0: no index, 1: one ascending index, 2: a descending index and a text index.
            var o = Database.Options()
            o.pageSize = 512
            o.cacheSize = 6 * 512
            let db = try Database.inMemory(options: o)
            try db.write { tx in
                let t = try tx.createTable("t", schema: TableSchema([ColumnDefinition("score", .integer), ColumnDefinition("name", .text)]))
                if shape >= 1 { try tx.createIndex("by_score", on: t, columns: [IndexColumn("score", descending: shape == 2)]) }
                if shape == 2 { try tx.createIndex("by_name", on: t, columns: [IndexColumn("name")]) }
            }
            func row(_ rng: inout SplitMix64) -> [Value] {
                [rng.next() % 10 == 0 ? .null : .integer(Int64(rng.next() % 80) - 20),
                 rng.next() % 12 == 0 ? .null : .text("n\(rng.next() % 50)" + String(repeating: "x", count: Int(rng.next() % 30)))]
            }
            var model: [Int64: [Value]] = [:]
            try db.write { tx in
                let t = try tx.table("t")
                for _ in 0..<700 {
                    let v = row(&rng)
                    model[try tx.insert(v, into: t)] = v
                }
            }
            for round in 0..<12 {
                var staged = model
                let rollback = rng.next() % 5 == 0
                do {
                    try db.write { tx in
                        let t = try tx.table("t")
                        // Some rows updated first (their records change in this transaction).
                        for _ in 0..<10 {
                            guard let id = staged.keys.randomElement(using: &rng) else { break }
                            let v = row(&rng)
                            try tx.update(v, in: t, rowID: id)
                            staged[id] = v
                        }
                        var ids = Array(staged.keys.filter { _ in rng.next() % 6 == 0 })
                        ids.shuffle(using: &rng)
                        var records: [[UInt8]] = []
                        for id in ids { records.append(try XCTUnwrap(try tx.currentRecord(in: t, rowID: id))) }
                        XCTAssertEqual(try tx.deleteRows(ids, records: records, from: t), ids.count, "round \(round), shape \(shape), seed \(seed)")
                        for id in ids { staged[id] = nil }
                        XCTAssertNil(try tx.currentRecord(in: t, rowID: ids.first ?? -1))
                        if rollback { throw Rollback() }
                    }
                    model = staged
                } catch is Rollback {}
                try assertScoreTableMatches(db, model, "round \(round), shape \(shape), seed \(seed)")
            }
        }
    }
}
