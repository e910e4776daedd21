// `ReadTransaction.forEachRow(in:whereInteger:isOneOf:)`: the rows whose
// integer column holds one of a few values, read through an index on that
// column without a query (an object layer's to-many read and prefetch).
// Checked against a model of the table: in read transactions (rows borrowed
// from snapshot pages, found from the last row's path) and in a write
// transaction with uncommitted inserts, updates and deletes (rows copied);
// small pages, so values' entries span leaves; ascending, descending and
// two-column indexes; absent, repeated and null-holding values; a table
// without such an index (false, nothing called); an index entry without its
// row (corruption, not a silent skip). The seed is printed; KURA_SEED
// replays it.

import Foundation
import XCTest
@testable import KuraEngine

final class KeyedRowsTests: XCTestCase {
    static let schema = try! TableSchema([ColumnDefinition("owner", .integer), ColumnDefinition("name", .text)])

    /// (row ID, owner, name) of each row `forEachRow` gives, in its order.
    func keyed(_ tx: ReadTransaction, _ keys: [Int64], table: String = "t") throws -> (found: Bool, rows: [(Int64, Value, Value)]) {
        var rows: [(Int64, Value, Value)] = []
        let found = try tx.forEachRow(in: table, whereInteger: "owner", isOneOf: keys) { row throws(KuraError) in
            rows.append((row.rowID, try row.value(at: 0), try row.value(at: 1)))
        }
        return (found, rows)
    }

    /// Checks `rows` against `model` (row ID -> owner, name) for `keys`:
    /// the same rows, with their values, ordered by owner as the index
    /// stores it (ascending or descending), then (a one-column index) row ID.
    func check(_ rows: [(Int64, Value, Value)], _ model: [Int64: (owner: Int64?, name: String)], keys: [Int64], descending: Bool,
               byRowID: Bool = true, _ label: String) {
        let wanted = model.filter { $0.value.owner.map(keys.contains) ?? false }
        XCTAssertEqual(Set(rows.map(\.0)), Set(wanted.keys), "\(label): rows for owners \(keys)")
        XCTAssertEqual(rows.count, wanted.count, "\(label): each row once")
        for (rowID, owner, name) in rows {
            guard let m = model[rowID] else { continue }
            XCTAssertEqual(owner, m.owner.map(Value.integer) ?? .null, "\(label): row \(rowID)'s owner")
            XCTAssertEqual(name, .text(m.name), "\(label): row \(rowID)'s name")
        }
        // Within an owner, a two-column index orders by its second column.
        let order = rows.map { ($0.1.integerValue ?? 0, byRowID ? $0.0 : 0) }
        let sorted = order.sorted { a, b in a.0 != b.0 ? (descending ? a.0 > b.0 : a.0 < b.0) : a.1 < b.1 }
        XCTAssertTrue(order.elementsEqual(sorted) { $0 == $1 }, "\(label): rows by owner in the index's order, then row ID")
    }

    func testRowsMatchTheModel() throws {
        var rng = SplitMix64(seed: testSeed("KeyedRowsTests"))
        for shape in ["ascending", "descending", "two columns"] {
            var o = Database.Options()
            o.pageSize = 512
            let db = try Database.inMemory(options: o)
            var model: [Int64: (owner: Int64?, name: String)] = [:]
            try db.write { tx in
                let t = try tx.createTable("t", schema: Self.schema)
                switch shape {
                case "ascending": try tx.createIndex("by_owner", on: t, columns: [IndexColumn("owner")])
                case "descending": try tx.createIndex("by_owner", on: t, columns: [IndexColumn("owner", descending: true)])
                default: try tx.createIndex("by_owner_name", on: t, columns: [IndexColumn("owner"), IndexColumn("name")])
                }
                // Owners 0..<300, some with many rows (more than a leaf
                // holds), some null.
                for i in 0..<2500 {
                    let owner: Int64? = i % 61 == 0 ? nil : (i % 7 == 0 ? 42 : Int64(rng.next() % 300))
                    let name = "n\(rng.next() % 1000)"
                    model[try tx.insert([owner.map(Value.integer) ?? .null, .text(name)], into: t)] = (owner, name)
                }
            }
            let descending = shape == "descending"
            let byRowID = shape != "two columns"
            func randomKeys() -> [Int64] {
                (0..<Int(rng.next() % 6)).map { _ in
                    switch rng.next() % 8 {
                    case 0: return 42
                    case 1: return 1000 + Int64(rng.next() % 10)  // absent
                    case 2: return -1  // absent, below all
                    default: return Int64(rng.next() % 300)
                    }
                }
            }
            for round in 0..<60 {
                var keys = randomKeys()
                if round % 5 == 0, let k = keys.first { keys.append(k) }  // a value given twice
                let (found, rows) = try db.read { tx in try keyed(tx, keys) }
                XCTAssertTrue(found, "\(shape): the table has an index with owner first")
                check(rows, model, keys: keys, descending: descending, byRowID: byRowID, "\(shape) round \(round)")
            }
            // A write transaction, after uncommitted changes: what it reads
            // includes them.
            try db.write { tx in
                let t = try tx.table("t")
                for _ in 0..<200 {
                    switch rng.next() % 3 {
                    case 0:
                        let owner = Int64(rng.next() % 300)
                        model[try tx.insert([.integer(owner), .text("w")], into: t)] = (owner, "w")
                    case 1:
                        guard let id = model.keys.randomElement(using: &rng) else { continue }
                        let owner = Int64(rng.next() % 300)
                        XCTAssertTrue(try tx.update([.integer(owner), .text("u")], in: t, rowID: id))
                        model[id] = (owner, "u")
                    default:
                        guard let id = model.keys.randomElement(using: &rng) else { continue }
                        XCTAssertTrue(try tx.delete(from: t, rowID: id))
                        model[id] = nil
                    }
                    let keys = randomKeys()
                    let (found, rows) = try keyed(tx, keys)
                    XCTAssertTrue(found)
                    check(rows, model, keys: keys, descending: descending, byRowID: byRowID, "\(shape), write transaction")
                }
            }
            // And the next read transaction sees the committed state.
            let keys = [Int64(42), Int64(rng.next() % 300)]
            let (_, rows) = try db.read { tx in try keyed(tx, keys) }
            check(rows, model, keys: keys, descending: descending, byRowID: byRowID, "\(shape), after commit")
        }
    }

    /// No index with the column first: false, and `body` is not called.
    /// An index whose second column is the one asked for does not count.
    func testNoIndexGivesFalse() throws {
        let db = try Database.inMemory()
        try db.write { tx in
            let t = try tx.createTable("t", schema: Self.schema)
            try tx.createIndex("by_name_owner", on: t, columns: [IndexColumn("name"), IndexColumn("owner")])
            _ = try tx.insert([.integer(1), .text("a")], into: t)
        }
        let (found, rows) = try db.read { tx in try keyed(tx, [1]) }
        XCTAssertFalse(found)
        XCTAssertTrue(rows.isEmpty)
        XCTAssertThrowsError(try db.read { tx in try keyed(tx, [1], table: "nope") }) { error in
            XCTAssertEqual((error as? KuraError)?.code, .notFound)
        }
    }

    /// An index entry naming a row the table does not have is reported as
    /// corruption (the rows of a to-many are never silently fewer).
    func testEntryWithoutRowIsCorruption() throws {
        let db = try Database.inMemory()
        try db.write { tx in
            let t = try tx.createTable("t", schema: Self.schema)
            let index = try tx.createIndex("by_owner", on: t, columns: [IndexColumn("owner")])
            for i in 0..<5 { _ = try tx.insert([.integer(7), .text("n\(i)")], into: t) }
            // Row 3 goes; an entry (7, row 3) is planted back under the engine's feet.
            XCTAssertTrue(try tx.delete(from: t, rowID: 3))
            var key = QueryPlanner.segment(.integer(7), index.columns[0])
            RowIDKey.append(3, to: &key)
            try index.tree.insert(key, [], mode: .insertNew, tx.writer!)
        }
        XCTAssertThrowsError(try db.read { tx in try keyed(tx, [7]) }) { error in
            XCTAssertEqual((error as? KuraError)?.code, .corrupt, "\(error)")
            XCTAssertTrue("\(error)".contains("row 3"), "\(error)")
        }
    }

    /// A one-column index's entry whose bytes after the value's segment are
    /// not exactly one row ID (trailing bytes, or a row ID cut short) is
    /// reported as corruption naming the index, never read as some row.
    func testEntryNotEndingInARowIDIsCorruption() throws {
        for (n, tail) in [("trailing byte", [UInt8(0xFF)]), ("cut short", [])] as [(String, [UInt8])] {
            let db = try Database.inMemory()
            try db.write { tx in
                let t = try tx.createTable("t", schema: Self.schema)
                let index = try tx.createIndex("by_owner", on: t, columns: [IndexColumn("owner")])
                for i in 0..<5 { _ = try tx.insert([.integer(7), .text("n\(i)")], into: t) }
                var key = QueryPlanner.segment(.integer(7), index.columns[0])
                // Row 3 (which exists) then the tail; cut short: a long
                // row ID's bytes but the last.
                var id: [UInt8] = []
                RowIDKey.append(tail.isEmpty ? 1 << 40 : 3, to: &id)
                key += tail.isEmpty ? id.dropLast() : id + tail
                try index.tree.insert(key, [], mode: .insertNew, tx.writer!)
            }
            XCTAssertThrowsError(try db.read { tx in try keyed(tx, [7]) }, n) { error in
                XCTAssertEqual((error as? KuraError)?.code, .corrupt, "\(n): \(error)")
                XCTAssertTrue("\(error)".contains("by_owner"), "\(n): \(error)")
            }
        }
    }
}
