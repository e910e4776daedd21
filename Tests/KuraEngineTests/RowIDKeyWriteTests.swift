// RowIDKeyWriteTests: `RowIDKey.write(_:over:)`, which an insert uses to make
// the row-ID key in the table handle's reused buffer, against the old way
// (`append` to an emptied array) and `encode`, on one buffer reused across
// row IDs of every encoded length and both signs, and on engine inserts
// whose explicit row IDs change the key's length from row to row.
//
// Prints its seed; KURA_SEED=<n> replays one.

import Foundation
import XCTest
@testable import KuraEngine

final class RowIDKeyWriteTests: XCTestCase {
    /// A row ID of a random encoded length (1...9 bytes) and sign.
    private func randomRowID(_ g: inout SplitMix64) -> Int64 {
        let bytes = Int(g.next() % 9)
        let magnitude: UInt64 = bytes == 0 ? 0 : g.next() >> UInt64(64 - 8 * bytes)
        let n = Int64(bitPattern: magnitude & UInt64(Int64.max))
        return g.next() % 2 == 0 ? n : ~n
    }

    func testWriteOverAReusedBufferMatchesAppend() {
        let seed = testSeed("RowIDKeyWriteTests")
        var g = SplitMix64(seed: seed)
        var buffer: [UInt8] = []
        let edges: [Int64] = [0, 1, -1, 127, 128, 255, 256, -256, -257, Int64.max, Int64.min, Int64.max - 1, Int64.min + 1]
        for i in 0..<20_000 {
            let n = i < edges.count ? edges[i] : randomRowID(&g)
            var old: [UInt8] = []
            RowIDKey.append(n, to: &old)
            RowIDKey.write(n, over: &buffer)
            XCTAssertEqual(buffer, old, "seed \(seed) row ID \(n)")
            XCTAssertEqual(buffer, RowIDKey.encode(n), "seed \(seed) row ID \(n)")
            XCTAssertEqual(RowIDKey.decode(buffer), n, "seed \(seed) row ID \(n)")
        }
    }

    /// Rows inserted under explicit row IDs of varying lengths (the key
    /// buffer of the table handle changes length from row to row) read
    /// back under those IDs, in row-ID order, and `insert(_:into:)` goes on
    /// after the largest.
    func testInsertsWithRowIDsOfVaryingLengthsReadBack() throws {
        let seed = testSeed("RowIDKeyWriteTests.inserts")
        var g = SplitMix64(seed: seed)
        let db = try memoryStore("rowidkeys", pageSize: 512)
        var ids = Set<Int64>()
        while ids.count < 2_000 { ids.insert(randomRowID(&g) / 2) }
        let order = ids.shuffled(using: &g)
        // Row IDs start at 1; after explicit ones, one past the largest.
        let expectedNext = max((ids.max() ?? 0) + 1, 1)
        try db.write { tx in
            let t = try tx.createTable("t", schema: TableSchema([ColumnDefinition("v", .integer)]))
            for id in order { try tx.insertRow([.integer(id &* 3)], into: t, rowID: id) }
            let next = try tx.insert([.integer(7)], into: t)
            XCTAssertEqual(next, expectedNext, "seed \(seed)")
        }
        try db.read { tx in
            let t = try tx.table("t")
            let c = try tx.rows(in: t)
            var seen: [Int64] = []
            while let r = try c.next() {
                seen.append(r.rowID)
                if ids.contains(r.rowID) {
                    XCTAssertEqual(try r.values(), [.integer(r.rowID &* 3)], "seed \(seed) row \(r.rowID)")
                }
            }
            XCTAssertEqual(seen, ids.sorted() + [expectedNext], "seed \(seed)")
        }
    }
}
