// TableSchema.validate's shortcut (TableSchema.swift, `inNormalForm`): a full
// row whose values its columns accept and that are already in normal form is
// returned as it came, checked in place; any other row takes the general way,
// which normalizes (integers in double and date columns become doubles, text
// becomes NFC) or reports the problem. The shortcut's ASCII test reads text
// eight bytes at a time, then byte by byte: a non-ASCII byte anywhere, at
// every length around those steps, must still send the text to NFC.
//
// Checked through inserts and updates: the stored bytes of each text (NFC,
// compared as UTF-8 bytes, since Swift's `==` on strings already equates
// canonically equivalent text), the stored type of numbers, and the errors
// for nulls in non-null columns and mismatched types.

import Foundation
import XCTest
@testable import KuraEngine

final class SchemaNormalFormTests: XCTestCase {
    func makeDatabase() throws -> (Database, TableInfo) {
        var o = Database.Options()
        o.fileSystem = MemoryFileSystem()
        o.durability = .off
        let db = try Database(path: "/normal.kura", options: o)
        let t = try db.write { tx in
            try tx.createTable("t", schema: TableSchema([
                ColumnDefinition("name", .text),
                ColumnDefinition("x", .double),
                ColumnDefinition("d", .date),
                ColumnDefinition("n", .integer, nullable: false, default: .integer(0)),
                ColumnDefinition("b", .blob),
            ]))
        }
        return (db, t)
    }

    /// Text with "e" + COMBINING ACUTE ACCENT (NFD) at `at` among `length`
    /// ASCII letters; its NFC form has "é" (U+00E9) there instead.
    func decomposed(length: Int, at: Int) -> (nfd: String, nfc: [UInt8]) {
        let letters = (0..<length).map { Character(UnicodeScalar(UInt8(97 + $0 % 26))) }
        var nfd = String(letters)
        var nfc = String(letters)
        let i = nfd.index(nfd.startIndex, offsetBy: at)
        nfd.replaceSubrange(i...i, with: "e\u{0301}")
        let j = nfc.index(nfc.startIndex, offsetBy: at)
        nfc.replaceSubrange(j...j, with: "\u{00E9}")
        return (nfd, Array(nfc.utf8))
    }

    func testNonASCIIAtEveryPositionIsStoredInNFC() throws {
        let (db, t) = try makeDatabase()
        var expected: [Int64: [UInt8]] = [:]
        try db.write { tx in
            for length in 1...33 {
                for at in 0..<length {
                    let (nfd, nfc) = decomposed(length: length, at: at)
                    XCTAssertNotEqual(Array(nfd.utf8), nfc)
                    let id = try tx.insert([.text(nfd), .double(1), .double(2), .integer(3), .null], into: t)
                    expected[id] = nfc
                }
                // Plain ASCII of the same length is stored as given.
                let ascii = String(repeating: "z", count: length)
                let id = try tx.insert([.text(ascii), .double(1), .double(2), .integer(3), .null], into: t)
                expected[id] = Array(ascii.utf8)
            }
        }
        try db.read { tx in
            for (id, bytes) in expected {
                guard case .text(let s)? = try tx.values(in: t, rowID: id)?[0] else { return XCTFail("row \(id) has no text") }
                XCTAssertEqual(Array(s.utf8), bytes, "row \(id)")
            }
        }
        // The same through an update of a full row.
        try db.write { tx in
            let (nfd, nfc) = decomposed(length: 12, at: 9)
            XCTAssertTrue(try tx.update([.text(nfd), .double(1), .double(2), .integer(3), .null], in: t, rowID: 1))
            guard case .text(let s)? = try tx.values(in: t, rowID: 1)?[0] else { return XCTFail("row 1 has no text") }
            XCTAssertEqual(Array(s.utf8), nfc)
        }
    }

    func testIntegersInDoubleAndDateColumnsAreStoredAsDoubles() throws {
        let (db, t) = try makeDatabase()
        try db.write { tx in
            let id = try tx.insert([.text("a"), .integer(7), .integer(-3), .integer(3), .blob([1, 2])], into: t)
            XCTAssertEqual(try tx.values(in: t, rowID: id), [.text("a"), .double(7), .double(-3), .integer(3), .blob([1, 2])])
            // Already in normal form: stored as given.
            let other = try tx.insert([.text("b"), .double(0.5), .double(9), .integer(4), .null], into: t)
            XCTAssertEqual(try tx.values(in: t, rowID: other), [.text("b"), .double(0.5), .double(9), .integer(4), .null])
        }
    }

    func testNullsAndMismatchesAreRefused() throws {
        let (db, t) = try makeDatabase()
        try db.write { tx in
            XCTAssertThrowsError(try tx.insert([.text("a"), .double(1), .double(2), .null, .null], into: t)) { e in
                XCTAssertEqual((e as? KuraError)?.code, .constraintViolation)
            }
            let rows: [[Value]] = [
                [.integer(1), .double(1), .double(2), .integer(3), .null],
                [.text("a"), .text("x"), .double(2), .integer(3), .null],
                [.text("a"), .double(1), .bool(true), .integer(3), .null],
                [.text("a"), .double(1), .double(2), .double(3), .null],
                [.text("a"), .double(1), .double(2), .integer(3), .text("b")],
            ]
            for row in rows {
                XCTAssertThrowsError(try tx.insert(row, into: t), "\(row)") { e in
                    XCTAssertEqual((e as? KuraError)?.code, .typeMismatch, "\(row)")
                }
            }
            // Nulls in nullable columns and a short row (padded with defaults) are fine.
            let id = try tx.insert([.null, .null, .null, .integer(1), .null], into: t)
            XCTAssertEqual(try tx.values(in: t, rowID: id), [.null, .null, .null, .integer(1), .null])
            let short = try tx.insert([.text("s")], into: t)
            XCTAssertEqual(try tx.values(in: t, rowID: short), [.text("s"), .null, .null, .integer(0), .null])
        }
    }
}
