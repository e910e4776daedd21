import Foundation
import XCTest
@testable import KuraEngine

/// The one integrity checker (IntegrityCheck.swift) on hostile bytes.
final class IntegrityCheckTests: XCTestCase {
    // Guards: an overflow value whose stored length needs more pages than the
    // store has was walked page by page up to that length (millions of reads
    // round a cyclic chain); the checker now reports it without walking.
    func testOverflowLengthBeyondTheStoreIsReportedWithoutWalking() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/o.kura"
        var o = Database.Options()
        o.pageSize = 512
        let db = try Database(path: path, options: o)
        try db.write { tx in
            let t = try tx.createTable("t")
            try tx.insert([.blob([UInt8](repeating: 7, count: 8000))], into: t)
        }
        db.close()

        // Find the leaf cell with an overflow chain; make its value length
        // 16383 (same two-byte varint, so the cell keeps its layout).
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let pageSize = 512
        var leafNumber: UInt32 = 0
        for n in 2...(bytes.count / pageSize) {
            let p = Page(number: UInt32(n), size: pageSize)
            bytes.withUnsafeBytes { p.bytes.copyMemory(from: $0.baseAddress! + (n - 1) * pageSize, byteCount: pageSize) }
            guard p.u8(0) == PageKind.tableLeaf.rawValue, p.cellCount == 1, p.leafValue(0).overflow != 0 else { continue }
            let v = p.leafValue(0)
            let lengthAt = (n - 1) * pageSize + v.offset - 2
            XCTAssertEqual(Varint.read(p.bytes, v.offset - 2, pageSize)?.0, UInt64(v.length))
            bytes[lengthAt] = 0xFF
            bytes[lengthAt + 1] = 0x7F
            let sum = bytes.withUnsafeBytes { Checksum.xxh64($0.baseAddress! + (n - 1) * pageSize, count: pageSize - 8, seed: UInt64(n)) }
            withUnsafeBytes(of: sum.littleEndian) { bytes.replaceSubrange(n * pageSize - 8 ..< n * pageSize, with: $0) }
            leafNumber = UInt32(n)
        }
        XCTAssertNotEqual(leafNumber, 0, "no leaf with an overflow chain")
        try Data(bytes).write(to: URL(fileURLWithPath: path))

        let expected = "overflow pages, more than the"
        let raw = StoreWalker(try RawStore(path: path), limit: 1000).run().problems
        XCTAssertTrue(raw.contains { $0.page == leafNumber && $0.message.contains(expected) }, "\(raw)")
        let reopened = try Database(path: path, options: o)
        defer { reopened.close() }
        let engine = try reopened.read { tx in try tx.checkIntegrity(limit: 1000) }
        XCTAssertEqual(engine, raw)
    }
}

extension IntegrityCheckTests {
    /// A write transaction that inserted rows has table counters its commit
    /// has not stored yet: checking then throws `.misuse` instead of reporting
    /// them wrong; before any change, and after the commit, the check runs and
    /// finds the store clean.
    func testCheckInAWriteTransactionWithUncommittedRowsThrowsInsteadOfMisreporting() throws {
        let db = try memoryStore("/check-in-write.kura")
        defer { db.close() }
        try db.write { tx in
            let t = try tx.createTable("t", schema: try TableSchema([ColumnDefinition("n", .integer)]))
            for i in 0..<50 { _ = try tx.insert([.integer(Int64(i))], into: t) }
        }
        try db.write { tx in
            XCTAssertEqual(try tx.checkIntegrity(), [], "no change yet: the check runs")
            for i in 0..<300 { _ = try tx.insert([.integer(Int64(i))], into: try tx.table("t")) }
            XCTAssertThrowsError(try tx.checkIntegrity()) { e in
                XCTAssertEqual((e as? KuraError)?.code, .misuse, "\(e)")
                XCTAssertTrue((e as? KuraError)?.message.contains("after the commit") == true, "\(e)")
            }
        }
        XCTAssertEqual(try db.read { tx in try tx.checkIntegrity() }, [])
        XCTAssertEqual(try db.read { tx in try tx.rowCount(try tx.table("t")) }, 350)
    }
}
