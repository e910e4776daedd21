// TreePathTests: point reads through a kept path (TreePath, BTree.swift: each
// descent reuses the pages of the previous one where they are still on the
// path) agree with BTree.get and a model, on table trees several levels deep
// (512-byte pages), for row IDs read in increasing order, in decreasing order,
// in random order and in runs of near neighbours; the row IDs include
// negatives, Int64.min and Int64.max - 1 (Int64.max is reserved; it is
// probed), gaps left by deleted rows, and IDs the table does not have.
// Prints its seed; KURA_SEED=<n> replays one.

import Foundation
import XCTest
@testable import KuraEngine

final class TreePathTests: XCTestCase {
    func testKeptPathReadsAgreeWithTheModel() throws {
        let seed = testSeed("TreePathTests.reads")
        var g = SplitMix64(seed: seed)
        let db = try memoryStore("/treepath.kura", cacheSize: 1 << 20)
        let (model, probes) = try makeSparseRowIDTable(db, rows: 3000, neighbours: 500, &g)
        let increasing = probes.sorted()
        try db.read { tx in
            let info = try tx.table("t")
            let s = tx.snapshotPages!
            let tree = BTree(root: info.rootPage, kind: .table)
            func check(_ order: [Int64], _ what: String) throws {
                var path = TreePath(tree: tree)
                for id in order {
                    let got = try RowIDKey.withEncoded(id) { k throws(KuraError) in try path.get(k, s) }
                    let expected = try RowIDKey.withEncoded(id) { k throws(KuraError) in try tree.get(k, s) }
                    XCTAssertEqual(got, expected, "row \(id), \(what), seed \(seed)")
                    XCTAssertEqual(got != nil, model[id] != nil, "row \(id), \(what), seed \(seed)")
                    if let got { XCTAssertEqual(try RecordCodec.decode(got), model[id], "row \(id), \(what), seed \(seed)") }
                }
            }
            try check(increasing, "increasing")
            try check(increasing.reversed(), "decreasing")
            try check(probes.shuffled(using: &g), "random")
            // Runs of near neighbours from random starting points.
            var runs: [Int64] = []
            for _ in 0..<200 {
                let start = Int(g.next() % UInt64(increasing.count))
                runs += increasing[start..<min(start + Int(g.next() % 30), increasing.count)]
            }
            try check(runs, "runs")
        }
    }
}
