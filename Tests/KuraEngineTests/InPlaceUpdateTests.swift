// Updates by predicate whose plan is exact (an integer comparison on an
// integer index column: QueryPlanner, "Exact plans") change each row where it
// lies in its leaf when every changed value keeps its serial type
// (`WriteTransaction.updateInPlace`, `BTree.changeInPlace`), and take the
// general path for every other row. These tests run such updates against a
// model: fixed-width values (in place), integers of another width, text, null
// and values of a column added after some rows were written (the general
// path), records with overflow chains (small pages), a cache of a few pages
// (the transaction spills and reads leaves back), rollbacks and rows deleted
// earlier in the same transaction. The seed is printed; KURA_SEED replays it.

import Foundation
import XCTest
@testable import KuraEngine

final class InPlaceUpdateTests: XCTestCase {
    struct Rollback: Error {}

    func testExactUpdatesMatchTheModel() throws {
        let seed = ProcessInfo.processInfo.environment["KURA_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1...UInt64(UInt32.max))
        print("InPlaceUpdateTests.model seed \(seed) (replay with KURA_SEED=\(seed))")
        var rng = SplitMix64(seed: seed)
        var o = Database.Options()
        o.pageSize = 512
        o.cacheSize = 6 * 512
        let db = try Database.inMemory(options: o)
        let columns = [ColumnDefinition("score", .integer), ColumnDefinition("ts", .double), ColumnDefinition("n", .integer),
                       ColumnDefinition("name", .text)]
        let extra = ColumnDefinition("extra", .integer, default: .integer(3))
        let all = columns + [extra]
        try db.write { tx in
            let t = try tx.createTable("t", schema: TableSchema(columns))
            try tx.createIndex("by_score", on: t, columns: [IndexColumn("score", descending: rng.next() % 2 == 0)])
        }
        func row(_ rng: inout SplitMix64) -> [Value] {
            // One name in ten is longer than a 512-byte page holds: an overflow chain.
            let long = rng.next() % 10 == 0
            return [rng.next() % 12 == 0 ? .null : .integer(Int64(rng.next() % 60) - 10), .double(Double(rng.next() % 1000) / 8),
                    .integer(Int64(rng.next() % 100)), .text(String(repeating: "x", count: long ? 700 : Int(rng.next() % 20)))]
        }
        var model: [Int64: [Value]] = [:]
        try db.write { tx in
            let t = try tx.table("t")
            for _ in 0..<400 {
                let v = row(&rng)
                model[try tx.insert(v, into: t)] = v
            }
        }
        var width = columns.count
        var counts = (inPlace: 0, general: 0, rollbacks: 0)
        for round in 0..<30 {
            if round == 10 {
                // Rows written before this do not store `extra`.
                try db.write { tx in try tx.addColumn(extra, to: try tx.table("t")) }
                width += 1
            }
            var staged = model
            let rollback = round % 7 == 6
            do {
                try db.write { tx in
                    let t = try tx.table("t")
                    for _ in 0..<4 {
                        switch rng.next() % 8 {
                        case 0:
                            var v = row(&rng)
                            if width > columns.count { v.append(.integer(Int64(rng.next() % 9))) }
                            staged[try tx.insert(v, into: t)] = v
                            continue
                        case 1:
                            // A row gone before the update: its index entry goes with it.
                            if let id = staged.keys.randomElement(using: &rng) {
                                XCTAssertTrue(try tx.delete(from: t, rowID: id))
                                staged[id] = nil
                            }
                            continue
                        default: break
                        }
                        let k = Int64(rng.next() % 60) - 12
                        let (format, test): (String, (Int64) -> Bool) = switch rng.next() % 6 {
                        case 0: ("score < \(k)", { $0 < k })
                        case 1: ("score <= \(k)", { $0 <= k })
                        case 2: ("score > \(k)", { $0 > k })
                        case 3: ("score >= \(k)", { $0 >= k })
                        case 4: ("score == \(k)", { $0 == k })
                        default: ("score BETWEEN {\(k), \(k + 5)}", { $0 >= k && $0 <= k + 5 })
                        }
                        var set: [String: Value] = [:]
                        switch rng.next() % 5 {
                        case 0, 1: set["ts"] = .double(Double(rng.next() % 10_000) / 4)   // same type: in place
                        case 2: set["n"] = .integer(Int64(rng.next() % 100))              // one byte: in place
                        case 3: set["n"] = rng.next() % 2 == 0 ? .null : .integer(Int64(rng.next() % 100_000))   // another type or width
                        default: set["name"] = .text(String(repeating: "N", count: Int(rng.next() % 30)))   // another length
                        }
                        if width > columns.count && rng.next() % 3 == 0 { set["extra"] = .integer(Int64(rng.next() % 100)) }
                        let plan = try tx.plan(try TableQuery("t", where: format), try tx.resolve(try TableQuery("t", where: format)), explaining: false)
                        let n = try tx.update("t", where: try KuraPredicate(format: format), set: set)
                        let ids = staged.filter { if case .integer(let s) = $0.value[0] { return test(s) } else { return false } }.map(\.key)
                        XCTAssertEqual(n, ids.count, "\(format), seed \(seed)")
                        for id in ids {
                            var r = staged[id]!
                            for (name, v) in set {
                                let p = all.firstIndex { $0.name == name }!
                                while r.count <= p { r.append(all[r.count].defaultValue) }
                                r[p] = v
                            }
                            staged[id] = r
                        }
                        if plan.exact, case .index = plan.access { counts.inPlace += 1 } else { counts.general += 1 }
                    }
                    if rollback { throw Rollback() }
                }
                model = staged
            } catch is Rollback {
                counts.rollbacks += 1
            }
            try db.read { tx in
                var rows: [Int64: [Value]] = [:]
                let c = try tx.rows(in: try tx.table("t"))
                while let r = try c.next() {
                    var v = try r.values()
                    while v.count < all.count { v.append(all[v.count].defaultValue) }
                    rows[r.rowID] = v
                }
                let padded = model.mapValues { r in r + all[r.count...].map(\.defaultValue) }
                XCTAssertEqual(rows, padded, "round \(round), seed \(seed)")
                if round % 5 == 4 { XCTAssertEqual(try tx.checkIntegrity(), [], "round \(round), seed \(seed)") }
            }
        }
        // Both paths ran (the planner picks the index for the selective ranges).
        XCTAssertGreaterThan(counts.inPlace, 20, "seed \(seed)")
        XCTAssertGreaterThan(counts.rollbacks, 1)
    }
}

extension InPlaceUpdateTests {
    /// A damaged record met by an update that changes rows in place is a
    /// `.corrupt` error naming its leaf page and row, and nothing is changed.
    func testDamagedRecordInAnInPlaceUpdateNamesItsPage() throws {
        let fs = MemoryFileSystem()
        var o = Database.Options()
        o.fileSystem = fs
        o.pageSize = 4096
        let path = "/inplace.kura"
        let db = try Database(path: path, options: o)
        try db.write { tx in
            let t = try tx.createTable("t", schema: TableSchema([ColumnDefinition("score", .integer), ColumnDefinition("ts", .double),
                                                                 ColumnDefinition("name", .text)]))
            for i in 0..<1000 { try tx.insert([.integer(Int64(i % 100) + 20), .double(Double(i) + 0.5), .text(i == 321 ? "MARKED" : "plain")], into: t) }
            try tx.createIndex("by_score", on: t, columns: [IndexColumn("score")])
        }
        db.close()
        // Row 322's record: header [3 (its size), 5 (one-byte integer), 9 (double, not integral),
        // 25 (6-byte text)], then 41, 8 bytes of double, "MARKED". Its text now claims 50 bytes.
        var bytes = fs.contents(of: path)!
        let marker = Array("MARKED".utf8)
        let at = try XCTUnwrap((0..<(bytes.count - marker.count)).first { Array(bytes[$0..<($0 + marker.count)]) == marker })
        XCTAssertEqual(Array(bytes[(at - 13)..<(at - 8)]), [3, 5, 9, 13 + 2 * 6, 41])
        bytes[at - 10] = 13 + 2 * 50
        let number = UInt32(at / 4096 + 1)
        let base = Int(number - 1) * 4096
        let sum = bytes.withUnsafeBytes { Checksum.xxh64($0.baseAddress! + base, count: 4096 - 8, seed: UInt64(number)) }
        withUnsafeBytes(of: sum.littleEndian) { for k in 0..<8 { bytes[base + 4088 + k] = $0[k] } }
        fs.setContents(of: path, to: bytes)

        let damaged = try Database(path: path, options: o)
        defer { damaged.close() }
        let q = try TableQuery("t", where: "score < 45")
        XCTAssertTrue(try damaged.read { tx in try tx.plan(q, try tx.resolve(q), explaining: false) }.exact)
        XCTAssertThrowsError(try damaged.write { tx in try tx.update("t", where: try KuraPredicate(format: "score < 45"), set: ["ts": .double(-1)]) }) { e in
            let k = e as? KuraError
            XCTAssertEqual(k?.code, .corrupt, "\(e)")
            XCTAssertEqual(k?.page, number, "\(e)")
            XCTAssertTrue(k?.message.contains("row 322") == true, "\(e)")
        }
        // The failed transaction changed nothing.
        XCTAssertEqual(try damaged.read { try $0.count(try TableQuery("t", where: "ts == -1")) }, 0)
    }
}
