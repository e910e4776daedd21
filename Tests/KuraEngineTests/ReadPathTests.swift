// The read path of queries and lookups in a read transaction:
// - the page memo of a read transaction (SnapshotPages) grows when the
//   transaction keeps missing it, up to a quarter of the cache, and answers
//   stay right through the growth (random lookups and index queries checked
//   against a model); with a small cache it does not grow;
// - rows a query returns in a read transaction borrow their snapshot page
//   (Row.swift): they must keep their bytes after the transaction ends, after
//   later commits rewrite those rows and after a checkpoint copies the pages
//   back, and equal the rows a write transaction returns (copies);
// - query answers along the index walks that read rows through a kept path
//   (RowPath) agree with a model, for equality and ordered range queries.
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

    /// `Database.values(inTable:rowID:)` (one row in the read transaction the
    /// connection keeps for reuse, `SpareReadTransaction`) gives what
    /// a read transaction gives: present and missing rows, a column added after
    /// rows were stored (its default), another connection's commit in between,
    /// an external column, an unknown table.
    func testPointReadsAgreeWithReadTransactions() throws {
        let seed = testSeed("ReadPathTests.point")
        var g = SplitMix64(seed: seed)
        let db = try Database.inMemory(options: options(cache: 1 << 20))
        var model = try fill(db, rows: 3000, &g)
        func check(_ round: String) throws {
            for _ in 0..<400 {
                let id = Int64(g.next() % 3200)
                let fast = try db.values(inTable: "t", rowID: id)
                let slow = try db.read { tx in try tx.values(in: try tx.table("t"), rowID: id) }
                XCTAssertEqual(fast, slow, "\(round): row \(id)")
                XCTAssertEqual(fast, model[id], "\(round): row \(id)")
            }
        }
        try check("first")
        try db.write { tx in
            let t = try tx.table("t")
            try tx.addColumn(ColumnDefinition("note", .text, default: .text("none")), to: t)
        }
        for k in model.keys { model[k]?.append(.text("none")) }
        try check("after a column was added")
        try db.write { tx in
            let t = try tx.table("t")
            for id in model.keys.sorted().prefix(50) {
                let v: [Value] = [.text("changed"), .integer(-1), .double(0), .text("set")]
                _ = try tx.update(v, in: t, rowID: id)
                model[id] = v
            }
            for id in model.keys.sorted().suffix(20) {
                _ = try tx.delete(from: t, rowID: id)
                model[id] = nil
            }
        }
        try check("after updates and deletes")
        XCTAssertThrowsError(try db.values(inTable: "nope", rowID: 1)) { error in
            XCTAssertEqual((error as? KuraError)?.code, .notFound, "\(error)")
        }
        try db.write { tx in
            try tx.createTable("photos", schema: TableSchema([ColumnDefinition("n", .integer), ColumnDefinition("data", .external)]))
            try tx.insert([.integer(1), .blob([UInt8](repeating: 7, count: 70_000))], into: try tx.table("photos"))
        }
        for _ in 0..<2 {
            let fast = try db.values(inTable: "photos", rowID: 1)
            XCTAssertEqual(fast, try db.read { tx in try tx.values(in: try tx.table("photos"), rowID: 1) })
            XCTAssertEqual(fast?[1], .blob([UInt8](repeating: 7, count: 70_000)))
        }
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

    func testBorrowedRowsKeepTheirBytes() throws {
        let seed = testSeed("ReadPathTests.rows")
        var g = SplitMix64(seed: seed)
        let dir = try TemporaryDirectory()
        var o = Database.Options()
        o.pageSize = 4096
        o.cacheSize = 64 * 4096
        o.durability = .normal
        let db = try Database(path: dir.path + "/rows.kura", options: o)
        defer { db.close() }
        var model = try fill(db, rows: 4_000, &g)
        let lo = Int64(g.next() % 200)
        let queries = [
            TableQuery("t", where: try KuraPredicate(format: "score == %@", arguments: [.integer(lo)])),
            TableQuery("t", where: try KuraPredicate(format: "score BETWEEN {%@, %@}", arguments: [.integer(lo), .integer(lo + 50)]),
                       sort: [SortKey("score", ascending: false)], limit: 150),
            TableQuery("t", where: try KuraPredicate(format: "name CONTAINS %@", arguments: [.text("9")])),
            TableQuery("t", where: try KuraPredicate(format: "score < %@", arguments: [.integer(lo)]), sort: [SortKey("ts")]),
        ]
        // Rows kept past their read transaction.
        var kept: [[Row]] = []
        try db.read { tx in
            for q in queries {
                let c = try tx.select(q)
                var rows: [Row] = []
                while let r = try c.next() { rows.append(r) }
                kept.append(rows)
            }
        }
        // The same queries in a write transaction (copied rows) agree.
        try db.write { tx in
            for (q, rows) in zip(queries, kept) {
                let c = try tx.select(q)
                var mine: [Row] = []
                while let r = try c.next() { mine.append(r) }
                XCTAssertEqual(mine.map(\.rowID), rows.map(\.rowID), "seed \(seed)")
                XCTAssertEqual(mine.map(\.record), rows.map(\.record), "seed \(seed)")
            }
        }
        let before = kept.map { $0.map { (id: $0.rowID, record: $0.record) } }
        // Rewrite every row (same sizes and new sizes), commit, checkpoint, read again.
        try db.write { tx in
            let t = try tx.table("t")
            for (id, v) in model {
                var nv = v
                nv[1] = .integer(Int64(g.next() % 300))
                nv[0] = .text("renamed-\(id)" + String(repeating: "y", count: Int(g.next() % 30)))
                XCTAssertTrue(try tx.update(nv, in: t, rowID: id))
                model[id] = nv
            }
        }
        _ = try db.checkpoint()
        try db.read { tx in
            let t = try tx.table("t")
            for id in model.keys.prefix(500) { XCTAssertEqual(try tx.values(in: t, rowID: id), model[id]) }
        }
        for (rows, old) in zip(kept, before) {
            for (r, o) in zip(rows, old) {
                XCTAssertEqual(r.rowID, o.id)
                XCTAssertEqual(r.record, o.record, "row \(r.rowID) changed under a kept Row, seed \(seed)")
                XCTAssertEqual(try r.values(), try RecordCodec.decode(o.record))
                XCTAssertEqual(try r.value(at: 1), try RecordCodec.decode(o.record)[1])
            }
        }
    }

    func testIndexWalksAgreeWithTheModel() throws {
        let seed = testSeed("ReadPathTests.walks")
        var g = SplitMix64(seed: seed)
        let db = try Database(path: "/walks.kura", options: options(cache: 1 << 20))
        defer { db.close() }
        let model = try fill(db, rows: 12_000, &g)
        let eq = try KuraPredicate(format: "score == $K")
        let range = try KuraPredicate(format: "score BETWEEN {$LO, $HI}")
        try db.read { tx in
            for _ in 0..<60 {
                let k = Int64(g.next() % 320)
                let rows = try tx.fetch(TableQuery("t", where: try eq.substituting(["K": .integer(k)])))
                XCTAssertEqual(rows.map(\.rowID), model.filter { $0.value[1] == .integer(k) }.keys.sorted(), "k \(k), seed \(seed)")
                for r in rows { XCTAssertEqual(r.values, model[r.rowID]) }

                let a = Int64(g.next() % 300)
                let width = Int64(g.next() % 40)
                let limit = Int(g.next() % 120) + 1
                let asc = g.next() % 2 == 0
                let q = TableQuery("t", where: try range.substituting(["LO": .integer(a), "HI": .integer(a + width)]),
                                   sort: [SortKey("score", ascending: asc)], limit: limit)
                let got = try tx.fetch(q)
                var candidates: [(id: Int64, score: Int64)] = []
                for (id, v) in model {
                    guard let s = v[1].integerValue, s >= a, s <= a + width else { continue }
                    candidates.append((id, s))
                }
                candidates.sort { x, y in
                    if x.score != y.score { return (x.score < y.score) == asc }
                    return x.id < y.id
                }
                let expected = candidates.prefix(limit)
                XCTAssertEqual(got.map(\.rowID), expected.map(\.id), "range \(a)+\(width) limit \(limit) asc \(asc), seed \(seed)")
                for r in got { XCTAssertEqual(r.values, model[r.rowID]) }
            }
        }
    }
}
