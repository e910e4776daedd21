// `WriteTransaction.insertRow` (the object layer's save path) against the
// public `insert(_:into:rowID:)`: it encodes each record into the table
// handle's reused buffer and its row-ID key into another, so these tests check
//   - rows of growing and shrinking records (text and blobs of random length,
//     doubles that format 9 stores compactly) are stored byte for byte as
//     `insert` stores them and read back bit-exact;
//   - every refusal `insert` makes (type mismatch, NOT NULL, unique index, a
//     taken row ID, the reserved row ID) is made with the same error code and
//     message, and changes nothing (rows, counters, index entries); the
//     transaction's next insertRow still writes the right record.
// Randomized; prints its seed, KURA_SEED replays it.

import Foundation
import XCTest
@testable import KuraEngine

final class InsertRowTests: XCTestCase {
    let schema = try! TableSchema([
        ColumnDefinition("name", .text, nullable: false),
        ColumnDefinition("score", .integer),
        ColumnDefinition("ts", .double),
        ColumnDefinition("data", .blob),
    ])

    func randomRow(_ g: inout SplitMix64) -> [Value] {
        let length = Int(g.next() % 300)
        let name = String((0..<length).map { _ in Character(Unicode.Scalar(UInt8(97 + g.next() % 26))) })
        let score: Value = g.next() % 5 == 0 ? .null : .integer(Int64(bitPattern: g.next()) >> Int64(g.next() % 64))
        let ts: Value = g.next() % 5 == 0 ? .null : .double(CompactDoublesTests.randomDouble(&g))
        let data: Value = g.next() % 3 == 0 ? .null : .blob((0..<Int(g.next() % 200)).map { _ in UInt8(truncatingIfNeeded: g.next()) })
        return [.text(name), score, ts, data]
    }

    func testInsertRowStoresTheRecordsInsertStores() throws {
        let seed = testSeed("InsertRowTests.records")
        var g = SplitMix64(seed: seed)
        let db = try Database.inMemory()
        var rows: [[Value]] = []
        try db.write { tx in
            XCTAssertTrue(tx.compactDoubles, "a new store is of format 9 (compact doubles)")
            let a = try tx.createTable("a", schema: schema)
            let b = try tx.createTable("b", schema: schema)
            for _ in 0..<400 { rows.append(randomRow(&g)) }
            // Each table in one run (as a save writes them): the table stays
            // resolved, so insertRow reuses its handle's buffers row after row.
            for (i, row) in rows.enumerated() { try tx.insert(row, into: a, rowID: Int64(i + 1)) }
            for (i, row) in rows.enumerated() { try tx.insertRow(row, into: b, rowID: Int64(i + 1)) }
        }
        try db.read { tx in
            let a = try tx.table("a"), b = try tx.table("b")
            XCTAssertEqual(try tx.rowCount(b), rows.count, "seed \(seed)")
            XCTAssertEqual(b.nextRowID, a.nextRowID, "seed \(seed)")
            for (i, row) in rows.enumerated() {
                let rowID = Int64(i + 1)
                let stored = try XCTUnwrap(try tx.record(in: b, rowID: rowID), "seed \(seed) row \(rowID)")
                XCTAssertEqual(stored, try tx.record(in: a, rowID: rowID), "seed \(seed) row \(rowID)")
                XCTAssertEqual(stored, RecordCodec.encode(row, compactDoubles: true), "seed \(seed) row \(rowID)")
                let back = try XCTUnwrap(try tx.values(in: b, rowID: rowID))
                XCTAssertTrue(CompactDoublesTests.same(back, row), "seed \(seed) row \(rowID): \(back) != \(row)")
            }
            XCTAssertEqual(try tx.checkIntegrity(), [])
        }
    }

    func testInsertRowRefusesWhatInsertRefusesAndChangesNothing() throws {
        let db = try Database.inMemory()
        try db.write { tx in
            let t = try tx.createTable("people", schema: schema)
            try tx.createIndex("by_score", on: t, columns: [IndexColumn("score")], unique: true)
            try tx.insert([.text("Ada"), .integer(1), .double(1.5), .null], into: try tx.table("people"), rowID: 1)
        }
        let refused: [(String, [Value], Int64, KuraError.Code)] = [
            ("type mismatch", [.text("Bob"), .text("two"), .null, .null], 2, .typeMismatch),
            ("not null", [.null, .integer(2), .null, .null], 2, .constraintViolation),
            ("unique", [.text("Bob"), .integer(1), .null, .null], 2, .constraintViolation),
            ("taken row ID", [.text("Bob"), .integer(2), .null, .null], 1, .alreadyExists),
            // The taken row's own value is no clash: the row ID is reported.
            ("taken row ID holding the unique value", [.text("Bob"), .integer(1), .null, .null], 1, .alreadyExists),
            ("reserved row ID", [.text("Bob"), .integer(2), .null, .null], Int64.max, .invalidArgument),
        ]
        for (what, row, rowID, code) in refused {
            // Each case rolls back (its closure throws), so starts from the one row.
            XCTAssertThrowsError(try db.write { tx in
                let t = try tx.table("people")
                var expected = ""
                XCTAssertThrowsError(try tx.insert(row, into: t, rowID: rowID)) { e in expected = "\(e)" }
                // A long row first, so a refused row follows a grown buffer.
                try tx.insertRow([.text(String(repeating: "x", count: 500)), .integer(50), .double(2), .blob([1, 2, 3])], into: t, rowID: 50)
                XCTAssertThrowsError(try tx.insertRow(row, into: t, rowID: rowID)) { e in
                    XCTAssertEqual((e as? KuraError)?.code, code, "\(what): \(e)")
                    XCTAssertEqual("\(e)", expected, what)
                }
                XCTAssertEqual(try tx.rowCount(t), 2, what)
                XCTAssertEqual(try tx.values(in: t, rowID: 1), [.text("Ada"), .integer(1), .double(1.5), .null], what)
                if rowID != 1 && rowID != Int64.max { XCTAssertNil(try tx.values(in: t, rowID: rowID), what) }
                // The next row, shorter than the buffer's last, is written whole.
                try tx.insertRow([.text("Cy"), .integer(3), .double(3), .null], into: t, rowID: 60)
                XCTAssertEqual(try tx.record(in: t, rowID: 60), RecordCodec.encode([.text("Cy"), .integer(3), .double(3), .null], compactDoubles: true), what)
                XCTAssertEqual(try tx.rowCount(t), 3, what)
                throw KuraError(.misuse, "test rollback")
            } as Void) { e in XCTAssertTrue("\(e)".contains("test rollback"), "\(what): \(e)") }
        }
        // Committed rows keep the index in step: a later clash is found, and the store checks clean.
        try db.write { tx in try tx.insertRow([.text("Dee"), .integer(4), .null, .null], into: try tx.table("people"), rowID: 70) }
        XCTAssertThrowsError(try db.write { tx in try tx.insertRow([.text("Eve"), .integer(4), .null, .null], into: try tx.table("people"), rowID: 71) }) { e in
            XCTAssertEqual((e as? KuraError)?.code, .constraintViolation, "\(e)")
        }
        try db.read { tx in
            XCTAssertEqual(try tx.rowCount(try tx.table("people")), 2)
            XCTAssertEqual(try tx.checkIntegrity(), [])
        }
    }

    /// A record buffer grown by a large row is not kept by the handle (which
    /// may be handed to the next write transaction); a small one is.
    func testLargeRecordBufferIsNotKept() throws {
        let db = try Database.inMemory()
        try db.write { tx in
            let t = try tx.createTable("t", schema: schema)
            try tx.insertRow([.text("a"), .null, .null, .null], into: t, rowID: 1)
            XCTAssertGreaterThan(try tx.hotTable(t).recordBuffer.capacity, 0, "a small record's buffer is kept")
            let big = [UInt8](repeating: 7, count: WriteTransaction.keptRecordBuffer + 1)
            try tx.insertRow([.text("b"), .null, .null, .blob(big)], into: t, rowID: 2)
            XCTAssertEqual(try tx.hotTable(t).recordBuffer.capacity, 0, "a large record's buffer is dropped")
            XCTAssertEqual(try tx.values(in: t, rowID: 2)?[3], .blob(big))
        }
    }
}
