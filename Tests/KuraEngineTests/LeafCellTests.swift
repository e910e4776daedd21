// LeafCellTests: `Page.leafCell` (Node.swift: a leaf cell's key and value
// layout from one read of its header, what table scans use) gives exactly what
// `cellKey` and `leafValue` give, on every cell of every leaf of table trees
// with 512-byte pages whose values range from empty to several overflow pages
// (cells just under, at and over `maxCell`); and a scan query over such a
// table returns every row with its record. Prints its seed; KURA_SEED=<n>
// replays one.

import Foundation
import XCTest
@testable import KuraEngine

final class LeafCellTests: XCTestCase {
    func testLeafCellAgreesWithCellKeyAndLeafValue() throws {
        let seed = testSeed("LeafCellTests.cells")
        var g = SplitMix64(seed: seed)
        let db = try memoryStore("/leafcell.kura")
        let maxCell = Node.maxCell(512)
        try db.write { tx in _ = try tx.createTable("t", schema: try TableSchema([ColumnDefinition("b", .blob)])) }
        var model: [Int64: [Value]] = [:]
        try db.write { tx in
            let t = try tx.table("t")
            for _ in 0..<600 {
                // Sizes around maxCell (whole or overflowing by a byte), small and large.
                let size: Int
                switch g.next() % 4 {
                case 0: size = maxCell - 24 + Int(g.next() % 48)
                case 1: size = Int(g.next() % 40)
                case 2: size = Int(g.next() % 2000)
                default: size = Int(g.next() % 200)
                }
                let bytes = (0..<size).map { _ in UInt8(truncatingIfNeeded: g.next()) }
                let v: [Value] = [.blob(bytes)]
                let id = try tx.insert(v, into: t)
                model[id] = v
            }
        }
        try db.read { tx in
            let info = try tx.table("t")
            let s = tx.snapshotPages!
            var c = TreeCursor(tree: BTree(root: info.rootPage, kind: .table))
            try c.first(s)
            var cells = 0
            var overflowing = 0
            while c.isValid {
                let leaf = c.leaf
                for i in 0..<leaf.cellCount {
                    let got = leaf.leafCell(i)
                    let (ko, kl) = leaf.cellKey(i)
                    let v = leaf.leafValue(i)
                    XCTAssertEqual(got.keyOffset, ko, "page \(leaf.number) cell \(i), seed \(seed)")
                    XCTAssertEqual(got.keyLength, kl, "page \(leaf.number) cell \(i), seed \(seed)")
                    XCTAssertEqual(got.offset, v.offset, "page \(leaf.number) cell \(i), seed \(seed)")
                    XCTAssertEqual(got.length, v.length, "page \(leaf.number) cell \(i), seed \(seed)")
                    XCTAssertEqual(got.local, v.local, "page \(leaf.number) cell \(i), seed \(seed)")
                    XCTAssertEqual(got.overflow, v.overflow, "page \(leaf.number) cell \(i), seed \(seed)")
                    cells += 1
                    if v.overflow != 0 { overflowing += 1 }
                }
                c.moveInLeaf(to: leaf.cellCount - 1)
                try c.next(s)
            }
            XCTAssertEqual(cells, model.count, "seed \(seed)")
            XCTAssertGreaterThan(overflowing, 0, "seed \(seed)")
            // A scan (which reads cells with leafCell) returns every row whole.
            let rows = try tx.fetch(TableQuery("t", where: try KuraPredicate(format: "b != nil")))
            XCTAssertEqual(rows.count, model.count, "seed \(seed)")
            for r in rows { XCTAssertEqual(r.values, model[r.rowID], "row \(r.rowID), seed \(seed)") }
        }
    }
}
