// RecordCodec.encode writes a record of at most `copiedRecordLimit` bytes
// into a temporary buffer and copies it into the array it returns, and a
// larger one in place (Record.swift, `encode`). Both ways must give the same
// bytes as `encode(_:into:)`, which appends in place, and decode back to the
// values, at every size around the limit and through a table's insert.

import Foundation
import XCTest
@testable import KuraEngine

final class RecordEncodeTests: XCTestCase {
    func rows() -> [[Value]] {
        var out: [[Value]] = [[], [.null], [.integer(0)], [.bool(true), .double(-0.5)]]
        let limit = RecordCodec.copiedRecordLimit
        for length in (limit - 40)...(limit + 40) {
            out.append([.text(String(repeating: "t", count: length))])
            out.append([.integer(Int64(length)), .blob([UInt8](repeating: UInt8(length % 251), count: length)), .null])
            out.append([.text(String(repeating: "é", count: length / 2)), .double(Double(length)), .integer(-1 << 40)])
        }
        out.append([.blob([UInt8](repeating: 7, count: 100_000)), .text("end")])
        return out
    }

    func testEncodeMatchesAppendingEncodeAndDecodesBack() throws {
        for values in rows() {
            let bytes = RecordCodec.encode(values)
            var appended: [UInt8] = [9, 9]
            RecordCodec.encode(values, into: &appended)
            XCTAssertEqual(bytes, Array(appended.dropFirst(2)), "\(values.count) values")
            XCTAssertEqual(try RecordCodec.decode(bytes), values, "\(bytes.count) bytes")
        }
    }

    func testRowsAroundTheLimitReadBack() throws {
        var o = Database.Options()
        o.fileSystem = MemoryFileSystem()
        o.durability = .off
        let db = try Database(path: "/records.kura", options: o)
        let all = rows()
        var ids: [Int64] = []
        try db.write { tx in
            let t = try tx.createTable("t")
            for values in all { ids.append(try tx.insert(values, into: t)) }
        }
        try db.read { tx in
            let t = try tx.table("t")
            for (id, values) in zip(ids, all) { XCTAssertEqual(try tx.values(in: t, rowID: id), values, "row \(id)") }
        }
    }
}
