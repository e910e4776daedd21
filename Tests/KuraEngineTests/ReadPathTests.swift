// The read path of queries and lookups in a read transaction:
// - the page memo of a read transaction (SnapshotPages) grows when the
//   transaction keeps missing it, up to a quarter of the cache, and answers
//   stay right through the growth (random lookups and index queries checked
//   against a model); with a small cache it does not grow.
// Prints its seed; KURA_SEED=<n> replays one.

import Foundation
import XCTest
@testable import KuraEngine

final class ReadPathTests: XCTestCase {
    private func options(cache: Int) -> Database.Options {
        var o = Database.Options()
        o.fileSystem = MemoryFileSystem()
        o.pageSize = 4096
        o.cacheSize = cache
        o.durability = .off
        return o
    }

    private func schema() throws -> TableSchema {
        try TableSchema([
            ColumnDefinition("name", .text),
            ColumnDefinition("score", .integer),
            ColumnDefinition("ts", .double),
        ])
    }

    /// A table of `rows` rows with an index on score; returns the model (row ID → values).
    private func fill(_ db: Database, rows: Int, _ g: inout SplitMix64) throws -> [Int64: [Value]] {
        var model: [Int64: [Value]] = [:]
        var gen = g
        let schema = try schema()
        try db.write { tx in
            let t = try tx.createTable("t", schema: schema)
            for i in 0..<rows {
                let v: [Value] = [.text("name\(i)-" + String(repeating: "x", count: Int(gen.next() % 40))),
                                  .integer(Int64(gen.next() % 300)), .double(Double(i) * 0.5)]
                let id = try tx.insert(v, into: t)
                model[id] = v
            }
            _ = try tx.createIndex("by_score", on: t, columns: [IndexColumn("score")])
        }
        g = gen
        return model
    }

    func testMemoGrowsAndAnswersStayRight() throws {
        let seed = testSeed("ReadPathTests.memo")
        var g = SplitMix64(seed: seed)
        let db = try Database(path: "/memo.kura", options: options(cache: 8 << 20))
        defer { db.close() }
        let model = try fill(db, rows: 30_000, &g)
        let ids = Array(model.keys)
        try db.read { tx in
            let t = try tx.table("t")
            XCTAssertEqual(tx.snapshotPages!.memoSlots, 64)
            for _ in 0..<20_000 {
                let id = ids[Int(g.next() % UInt64(ids.count))]
                XCTAssertEqual(try tx.values(in: t, rowID: id), model[id], "row \(id), seed \(seed)")
            }
            // 8 MiB of 4 KiB pages: at most 512 slots.
            XCTAssertGreaterThan(tx.snapshotPages!.memoSlots, 64)
            XCTAssertLessThanOrEqual(tx.snapshotPages!.memoSlots, 512)
            for k in 0..<300 where k % 7 == Int(seed % 7) {
                let rows = try tx.fetch(TableQuery("t", where: try KuraPredicate(format: "score == %@", arguments: [.integer(Int64(k))])))
                let expected = model.filter { $0.value[1] == .integer(Int64(k)) }.keys.sorted()
                XCTAssertEqual(rows.map(\.rowID), expected, "score \(k), seed \(seed)")
                for r in rows { XCTAssertEqual(r.values, model[r.rowID]) }
            }
        }
        // A cache of 64 pages: the memo keeps its 64 slots.
        let small = try Database(path: "/small.kura", options: options(cache: 64 * 4096))
        defer { small.close() }
        let smallModel = try fill(small, rows: 5_000, &g)
        try small.read { tx in
            let t = try tx.table("t")
            for id in smallModel.keys { XCTAssertEqual(try tx.values(in: t, rowID: id), smallModel[id]) }
            XCTAssertEqual(tx.snapshotPages!.memoSlots, 64)
        }
    }
}
