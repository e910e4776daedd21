// The per-key entry counts of an index (`ReadTransaction.groupedCounts`,
// the walk behind a to-many `@count` join: SemiJoin.swift) read each leaf's
// cells in a loop of their own and step the cursor from leaf to leaf. The
// test checks the counts against counts made from every row, on indexes of
// many small leaves (512-byte pages) whose boundaries fall inside runs of
// equal keys, with null, negative and long-run keys, read from a committed
// snapshot and from a write transaction with uncommitted changes. Prints its
// seed; KURA_SEED=<n> replays one.

import Foundation
import XCTest
@testable import KuraEngine

final class GroupedCountLeafTests: XCTestCase {
    func testCountsMatchTheRowsOnManyLeaves() throws {
        var rng = SplitMix64(seed: testSeed("GroupedCountLeafTests"))
        var o = Database.Options()
        o.pageSize = 512
        let db = try Database.inMemory(options: o)
        func owner(_ rng: inout SplitMix64) -> Value {
            switch rng.next() % 20 {
            case 0: return .null
            case 1: return .integer(-Int64(rng.next() % 5) - 1)
            case 2, 3: return .integer(77)  // a long run, across leaves
            default: return .integer(Int64(rng.next() % 400))
            }
        }
        try db.write { tx in
            let t = try tx.createTable("child", schema: TableSchema([ColumnDefinition("owner", .integer), ColumnDefinition("pad", .text)]))
            try tx.createIndex("child_owner", on: t, columns: [IndexColumn("owner")])
            for _ in 0..<2500 { try tx.insert([owner(&rng), .text("p")], into: t) }
        }
        func expected(_ tx: ReadTransaction) throws -> [(id: Int64, count: Int64)] {
            var counts: [Int64: Int64] = [:]
            for r in try tx.fetch(TableQuery("child")) {
                if case .integer(let k) = r.values[0] { counts[k, default: 0] += 1 }
            }
            return counts.sorted { $0.key < $1.key }.map { (id: $0.key, count: $0.value) }
        }
        func check(_ tx: ReadTransaction, _ label: String) throws {
            let indexes = try tx.indexes(of: "child")
            guard let index = indexes.first else { return XCTFail("no index") }
            let got = try tx.groupedCounts(index)
            let want = try expected(tx)
            XCTAssertEqual(got.map(\.id), want.map(\.id), label)
            XCTAssertEqual(got.map(\.count), want.map(\.count), label)
        }
        let leaves = try indexLeafCount(db, table: "child")
        XCTAssertGreaterThan(leaves, 10, "the index should span many leaves")
        try db.read { tx in try check(tx, "snapshot") }
        struct Rollback: Error {}
        do {
            try db.write { tx in
                let t = try tx.table("child")
                for _ in 0..<300 { try tx.insert([owner(&rng), .text("q")], into: t) }
                for id in stride(from: Int64(1), to: 2500, by: 7) { _ = try tx.delete(from: t, rowID: id) }
                try check(tx, "write transaction")
                throw Rollback()
            }
        } catch is Rollback {}
    }
}
