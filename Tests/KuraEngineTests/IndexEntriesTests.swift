// The insert path of tables with indexes (IndexEntries.swift) and the write
// transaction's parked table handles (Transaction.swift, `parked`):
//   - the keys `IndexEntries` builds in its buffers equal `indexKeys`' for
//     random rows of every type (text with zero bytes, folded and
//     descending columns, nulls, columns a record lacks), and the indexes
//     those inserts write check clean;
//   - writes that alternate between more tables than a transaction keeps
//     handles for, with schema changes, drops and reads of the counters in
//     between, leave every table's row count and next row ID right, in the
//     transaction, after commit, in the next transaction (which takes the
//     handles over) and after reopening.
// Randomized; prints its seed, KURA_SEED replays it.

import Foundation
import XCTest
@testable import KuraEngine

final class IndexEntriesTests: XCTestCase {
    let schema = try! TableSchema([
        ColumnDefinition("name", .text),
        ColumnDefinition("score", .integer),
        ColumnDefinition("ts", .double),
        ColumnDefinition("data", .blob),
        ColumnDefinition("flag", .bool),
    ])

    static func randomText(_ g: inout SplitMix64) -> String {
        let alphabet: [Unicode.Scalar] = ["a", "B", "\u{0}", "é", "E", "z", "\u{1F600}", " "]
        return String(String.UnicodeScalarView((0..<Int(g.next() % 12)).map { _ in alphabet[Int(g.next() % UInt64(alphabet.count))] }))
    }

    func randomRow(_ g: inout SplitMix64) -> [Value] {
        let name: Value = g.next() % 6 == 0 ? .null : .text(Self.randomText(&g))
        let score: Value = g.next() % 6 == 0 ? .null : .integer(Int64(bitPattern: g.next()) >> Int64(g.next() % 64))
        let ts: Value = g.next() % 6 == 0 ? .null : .double(Double(Int64(g.next() % 2001) - 1000) / 8)
        let data: Value = g.next() % 4 == 0 ? .null : .blob((0..<Int(g.next() % 6)).map { _ in UInt8(g.next() % 3) })
        let flag: Value = g.next() % 4 == 0 ? .null : .bool(g.next() % 2 == 0)
        return [name, score, ts, data, flag]
    }

    func testInsertKeysEqualIndexKeys() throws {
        let seed = testSeed("IndexEntriesTests.keys")
        var g = SplitMix64(seed: seed)
        let db = try Database.inMemory()
        var rows: [Int64: [Value]] = [:]
        try db.write { tx in
            let t = try tx.createTable("t", schema: schema)
            try tx.createIndex("by_name", on: t, columns: [IndexColumn("name")])
            try tx.createIndex("by_name_folded_desc", on: t, columns: [IndexColumn("name", descending: true, folded: true), IndexColumn("score")])
            try tx.createIndex("by_ts_data", on: t, columns: [IndexColumn("ts", descending: true), IndexColumn("data")])
            try tx.createIndex("by_flag_name", on: t, columns: [IndexColumn("flag"), IndexColumn("name", descending: true)])
            for i in 1...300 {
                let row = randomRow(&g)
                let rowID = Int64(i) * Int64(1 + g.next() % 3)
                guard rows[rowID] == nil else { continue }
                if i % 2 == 0 { try tx.insertRow(row, into: try tx.table("t"), rowID: rowID) } else { try tx.insert(row, into: try tx.table("t"), rowID: rowID) }
                rows[rowID] = row
            }
            // A column added later: the records above lack it, and a key of
            // an index on it reads its default.
            try tx.addColumn(ColumnDefinition("rank", .integer, default: .integer(7)), to: try tx.table("t"))
            try tx.createIndex("by_rank_name", on: try tx.table("t"), columns: [IndexColumn("rank"), IndexColumn("name")])
            let info = try tx.table("t")
            let tableSchema = try XCTUnwrap(try tx.schema(of: info))
            let indexes = try tx.indexes(of: "t")
            let entries = IndexEntries(indexes, width: TableHandle.indexedWidth(indexes))
            for (rowID, _) in rows {
                let record = try XCTUnwrap(try tx.record(in: info, rowID: rowID))
                let expected = try tx.indexKeys(indexes, record: record, rowID: rowID, schema: tableSchema)
                try record.withBytes { b throws(KuraError) in try entries.build(b, rowID: rowID, schema: tableSchema, maxKey: 1000) }
                for (i, e) in expected.enumerated() {
                    XCTAssertEqual(entries.keys[i], e.key, "seed \(seed) row \(rowID) index \(e.index.name)")
                    XCTAssertEqual(entries.prefixLengths[i], e.prefixLength, "seed \(seed) row \(rowID) index \(e.index.name)")
                    XCTAssertEqual(entries.hasNull[i], e.hasNull, "seed \(seed) row \(rowID) index \(e.index.name)")
                }
            }
            // Rows inserted now write entries for the new index too.
            for i in 1000..<1100 {
                let row = randomRow(&g) + [.integer(Int64(g.next() % 4))]
                try tx.insertRow(row, into: try tx.table("t"), rowID: Int64(i))
            }
        }
        try db.read { tx in XCTAssertEqual(try tx.checkIntegrity(), [], "seed \(seed)") }
    }

    /// A NaN in an indexed column and an over-long key are refused by the
    /// insert, which changes nothing.
    func testRefusedKeysChangeNothing() throws {
        let db = try Database.inMemory()
        try db.write { tx in
            let t = try tx.createTable("t", schema: schema)
            try tx.createIndex("by_ts", on: t, columns: [IndexColumn("ts")])
            try tx.createIndex("by_name", on: t, columns: [IndexColumn("name")])
            try tx.insertRow([.text("a"), .integer(1), .double(1), .null, .null], into: t, rowID: 1)
            XCTAssertThrowsError(try tx.insertRow([.text("b"), .null, .double(.nan), .null, .null], into: try tx.table("t"), rowID: 2)) { e in
                XCTAssertEqual((e as? KuraError)?.code, .invalidArgument, "\(e)")
                XCTAssertTrue("\(e)".contains("ts") && "\(e)".contains("by_ts"), "\(e)")
            }
            XCTAssertThrowsError(try tx.insertRow([.text(String(repeating: "x", count: 5000)), .null, .null, .null, .null], into: try tx.table("t"), rowID: 3)) { e in
                XCTAssertEqual((e as? KuraError)?.code, .tooBig, "\(e)")
                XCTAssertTrue("\(e)".contains("by_name"), "\(e)")
            }
            XCTAssertEqual(try tx.rowCount(try tx.table("t")), 1)
            XCTAssertNil(try tx.values(in: try tx.table("t"), rowID: 2))
            XCTAssertNil(try tx.values(in: try tx.table("t"), rowID: 3))
        }
        try db.read { tx in XCTAssertEqual(try tx.checkIntegrity(), []) }
    }

    /// An insert under a taken row ID whose value a unique index holds for
    /// another row reports the row ID (as before the insert path looked the
    /// row ID up only on a clash), and changes nothing.
    func testTakenRowIDIsReportedBeforeAUniqueClash() throws {
        let db = try Database.inMemory()
        try db.write { tx in
            let t = try tx.createTable("t", schema: schema)
            try tx.createIndex("by_score", on: t, columns: [IndexColumn("score")], unique: true)
            try tx.insertRow([.text("a"), .integer(1), .null, .null, .null], into: t, rowID: 1)
            try tx.insertRow([.text("b"), .integer(2), .null, .null, .null], into: t, rowID: 2)
        }
        try db.write { tx in
            let t = try tx.table("t")
            XCTAssertThrowsError(try tx.insertRow([.text("c"), .integer(1), .null, .null, .null], into: t, rowID: 2)) { e in
                XCTAssertEqual((e as? KuraError)?.code, .alreadyExists, "\(e)")
                XCTAssertTrue("\(e)".contains("row with ID 2"), "\(e)")
            }
            XCTAssertThrowsError(try tx.insertRow([.text("c"), .integer(1), .null, .null, .null], into: t, rowID: 3)) { e in
                XCTAssertEqual((e as? KuraError)?.code, .constraintViolation, "\(e)")
                XCTAssertTrue("\(e)".contains("by_score") && "\(e)".contains("row 1"), "\(e)")
            }
            XCTAssertThrowsError(try tx.insertRow([.text("c"), .integer(3), .null, .null, .null], into: t, rowID: 2)) { e in
                XCTAssertEqual((e as? KuraError)?.code, .alreadyExists, "\(e)")
            }
            XCTAssertEqual(try tx.rowCount(t), 2)
            try tx.insertRow([.text("c"), .integer(3), .null, .null, .null], into: t, rowID: 3)
        }
        try db.read { tx in
            XCTAssertEqual(try tx.rowCount(try tx.table("t")), 3)
            XCTAssertEqual(try tx.values(in: try tx.table("t"), rowID: 2)?[0], .text("b"))
            XCTAssertEqual(try tx.checkIntegrity(), [])
        }
    }

    func testWritesAlternatingBetweenManyTablesKeepTheirCounters() throws {
        let seed = testSeed("IndexEntriesTests.alternating")
        var g = SplitMix64(seed: seed)
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("kura-alternating-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("store.kura").path
        var o = Database.Options()
        o.createIfMissing = true
        o.durability = .off
        // More tables than a transaction keeps handles for (hot + parked).
        let tableCount = WriteTransaction.parkedLimit + 4
        let names = (0..<tableCount).map { "t\($0)" }
        /// The model: each table's rows (row ID → score) and next row ID.
        var model: [String: [Int64: Int64]] = [:]
        var next: [String: Int64] = [:]
        var dropped: Set<String> = []
        func check(_ tx: ReadTransaction, _ when: String) throws {
            for name in names where !dropped.contains(name) {
                let t = try tx.table(name)
                XCTAssertEqual(try tx.rowCount(t), model[name]?.count ?? 0, "seed \(seed) \(when) \(name)")
                XCTAssertEqual(t.nextRowID, next[name] ?? 1, "seed \(seed) \(when) \(name)")
            }
        }
        var db: Database? = try Database(path: path, options: o)
        try db!.write { tx in
            for name in names {
                let t = try tx.createTable(name, schema: schema)
                try tx.createIndex("\(name)_score", on: t, columns: [IndexColumn("score")], unique: g.next() % 2 == 0)
            }
        }
        for round in 0..<6 {
            try db!.write { tx in
                for step in 0..<400 {
                    // Mostly a few tables in turn (a save's pattern), sometimes any.
                    let name = names[g.next() % 4 == 0 ? Int(g.next() % UInt64(tableCount)) : Int(g.next() % 3)]
                    if dropped.contains(name) { continue }
                    let t = try tx.table(name)
                    switch g.next() % 10 {
                    case 0..<6:
                        let score = Int64(round * 100_000 + step * 100) + Int64(g.next() % 50)
                        let explicit = g.next() % 3 == 0
                        let rowID = explicit ? (next[name] ?? 1) + Int64(g.next() % 5) : (next[name] ?? 1)
                        let row: [Value] = [.text("r\(rowID)"), .integer(score), .null, .null, .null]
                        if explicit { try tx.insertRow(row, into: t, rowID: rowID) } else { XCTAssertEqual(try tx.insert(row, into: t), rowID) }
                        model[name, default: [:]][rowID] = score
                        next[name] = max(next[name] ?? 1, rowID + 1)
                    case 6, 7:
                        guard let rowID = model[name]?.keys.min() else { continue }
                        XCTAssertTrue(try tx.delete(from: t, rowID: rowID))
                        model[name]?[rowID] = nil
                    case 8:
                        guard let rowID = model[name]?.keys.max() else { continue }
                        let score = -Int64(round * 100_000 + step)
                        XCTAssertTrue(try tx.update([.text("u"), .integer(score), .null, .null, .null], in: t, rowID: rowID))
                        model[name]?[rowID] = score
                    default:
                        // Reads of the counters between writes.
                        XCTAssertEqual(try tx.rowCount(t), model[name]?.count ?? 0, "seed \(seed) round \(round) step \(step) \(name)")
                    }
                    if step == 200 && round == 2 {
                        // A schema change while handles are parked.
                        try tx.createIndex("\(name)_name", on: try tx.table(name), columns: [IndexColumn("name")])
                    }
                    if step == 300 && round == 3 {
                        let victim = names[tableCount - 1]
                        try tx.dropTable(victim)
                        dropped.insert(victim)
                        model[victim] = nil
                    }
                }
                try check(tx, "round \(round), in the transaction")
            }
            try db!.read { tx in try check(tx, "round \(round), committed") }
            if round % 2 == 1 {
                db!.close()
                db = try Database(path: path, options: o)
                try db!.read { tx in try check(tx, "round \(round), reopened") }
            }
        }
        try db!.read { tx in
            XCTAssertEqual(try tx.checkIntegrity(), [], "seed \(seed)")
            for name in names where !dropped.contains(name) {
                let t = try tx.table(name)
                for (rowID, score) in model[name] ?? [:] {
                    XCTAssertEqual(try tx.values(in: t, rowID: rowID)?[1], .integer(score), "seed \(seed) \(name) row \(rowID)")
                }
            }
        }
        db!.close()
    }
}
