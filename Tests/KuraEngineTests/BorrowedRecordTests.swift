// Database.withRecord(inTable:rowID:_:) (Transaction+ObjectAccess.swift), the
// object layer's fault load: the columns a body decodes with RecordColumns
// must be exactly the stored values `values(inTable:rowID:)` gives before it
// pads them with the schema's defaults, for every value kind, nulls, large
// text and blobs on overflow pages, and rows written before a column was
// added (shorter records). A missing row gives `.missing` without running the
// body, a table with external columns `.external`, an unknown table throws.
// Prints its seed; KURA_SEED=<n> replays one.

import Foundation
import XCTest
@testable import KuraEngine

final class BorrowedRecordTests: XCTestCase {
    private func randomValue(_ type: ColumnType, _ g: inout SplitMix64) -> Value {
        if Int.random(in: 0..<5, using: &g) == 0 { return .null }
        switch type {
        case .integer: return .integer(Int64.random(in: Int64.min...Int64.max, using: &g) >> Int64.random(in: 0...63, using: &g))
        case .double: return .double(Double.random(in: -1e9...1e9, using: &g))
        case .text:
            // Short (inline), long (past a page: an overflow chain) and non-ASCII text.
            let n = [3, 40, 5000][Int.random(in: 0..<3, using: &g)]
            return .text(String(repeating: ["a", "é", "日"][Int.random(in: 0..<3, using: &g)], count: n))
        case .blob: return .blob((0..<Int.random(in: 0...300, using: &g)).map { _ in UInt8.random(in: 0...255, using: &g) })
        case .bool: return .bool(Bool.random(using: &g))
        default: return .null
        }
    }

    /// The values a body sees through `RecordColumns`, in column order.
    private func borrowed(_ db: Database, _ table: String, _ rowID: Int64) throws -> (BorrowedRecordLookup, [Value]) {
        var seen: [Value] = []
        let lookup = try db.withRecord(inTable: table, rowID: rowID) { r throws(KuraError) in
            while let v = try r.next() {
                XCTAssertEqual(r.column, seen.count + 1, "column counts the columns decoded")
                seen.append(v)
            }
        }
        return (lookup, seen)
    }

    func testBorrowedColumnsEqualDecodedRow() throws {
        let seed = testSeed("BorrowedRecordTests")
        var g = SplitMix64(seed: seed)
        var o = Database.Options()
        o.fileSystem = MemoryFileSystem()
        o.durability = .off
        let db = try Database(path: "/borrowed.kura", options: o)
        let types: [ColumnType] = [.integer, .double, .text, .blob, .bool]
        try db.write { tx in
            _ = try tx.createTable("t", schema: TableSchema(types.enumerated().map { ColumnDefinition("c\($0.offset)", $0.element) }))
        }
        var ids: [Int64] = []
        try db.write { tx in
            let t = try tx.table("t")
            for _ in 0..<60 { ids.append(try tx.insert(types.map { randomValue($0, &g) }, into: t)) }
        }
        // Rows written before this column was added store one column fewer.
        try db.write { tx in try tx.addColumn(ColumnDefinition("late", .integer, default: .integer(7)), to: try tx.table("t")) }
        try db.write { tx in
            let t = try tx.table("t")
            for _ in 0..<60 { ids.append(try tx.insert(types.map { randomValue($0, &g) } + [randomValue(.integer, &g)], into: t)) }
        }
        for id in ids {
            let full = try XCTUnwrap(try db.values(inTable: "t", rowID: id))
            let (lookup, seen) = try borrowed(db, "t", id)
            XCTAssertEqual(lookup, .read)
            XCTAssertTrue(seen.count == types.count || seen.count == types.count + 1, "seed \(seed) row \(id): \(seen.count) columns")
            XCTAssertEqual(seen, Array(full.prefix(seen.count)), "seed \(seed) row \(id)")
            if seen.count == types.count { XCTAssertEqual(full.last, .integer(7), "the default of the later column") }
        }
        let (missing, none) = try borrowed(db, "t", 10_000)
        XCTAssertEqual(missing, .missing)
        XCTAssertEqual(none, [])
        XCTAssertThrowsError(try borrowed(db, "nope", 1)) { e in XCTAssertEqual((e as? KuraError)?.code, .notFound, "\(e)") }
    }

    func testExternalTableIsNotBorrowed() throws {
        var o = Database.Options()
        o.fileSystem = MemoryFileSystem()
        o.durability = .off
        let db = try Database(path: "/external.kura", options: o)
        var id: Int64 = 0
        try db.write { tx in
            let t = try tx.createTable("photos", schema: TableSchema([ColumnDefinition("n", .integer), ColumnDefinition("data", .external)]))
            id = try tx.insert([.integer(1), .blob([1, 2, 3])], into: t)
        }
        var ran = false
        let lookup = try db.withRecord(inTable: "photos", rowID: id) { _ throws(KuraError) in ran = true }
        XCTAssertEqual(lookup, .external)
        XCTAssertFalse(ran, "the body must not see a record whose values live in files")
    }
}
