// Guards the in-place replacement of a leaf cell whose value changes size
// (Node.replaceCell: shorter values are written over the old cell and the
// unused tail counted as fragmented; longer ones go to the free gap when it
// has room, or else slide the content before the old cell down by the growth
// when the gap holds that much) and the defragmentation that packs a page from one copy of its
// content. Random updates that shrink and grow values by a few bytes (the
// way setting a double or a short text does), by row ID and through the
// writer's remembered leaf, interleaved with inserts and deletes, must read
// back as a plain dictionary model says, and every page must check clean
// (content area = cell bytes + fragmented bytes). Seeded: the seed is
// printed; KURA_SEED replays it.

import Foundation
import XCTest
@testable import KuraEngine

final class CellReplaceTests: XCTestCase {
    func testSizeChangingUpdatesMatchAModelAndCheckClean() throws {
        let seed = testSeed("CellReplaceTests")
        var rng = SplitMix64(seed: seed)
        let db = try Database.inMemory()
        var model: [Int64: [Value]] = [:]
        func row(_ rng: inout SplitMix64) -> [Value] {
            let text = String(repeating: "x", count: Int(rng.next() % 40))
            let number: Value = rng.next() % 2 == 0 ? .double(Double(rng.next() % 1000) / 3) : .integer(Int64(rng.next() % 300))
            return [.text(text), number]
        }
        try db.write { tx in
            let t = try tx.createTable("t")
            for _ in 0..<600 {
                let v = row(&rng)
                model[try tx.insert(v, into: t)] = v
            }
        }
        for round in 0..<20 {
            try db.write { tx in
                let t = try tx.table("t")
                var ids = model.keys.sorted()
                for _ in 0..<150 {
                    let pick = rng.next() % 10
                    if pick < 7, !ids.isEmpty {
                        // Runs of neighbours (the remembered leaf) and random rows.
                        let id = pick < 4 ? ids[Int(rng.next() % UInt64(ids.count))] : ids[min(ids.count - 1, Int(UInt64(round * 25) % UInt64(ids.count)) + Int(rng.next() % 5))]
                        let v = row(&rng)
                        XCTAssertTrue(try tx.update(v, in: t, rowID: id), "seed \(seed)")
                        model[id] = v
                    } else if pick < 9 {
                        let v = row(&rng)
                        let id = try tx.insert(v, into: t)
                        model[id] = v
                        ids.append(id)
                    } else if !ids.isEmpty {
                        let k = Int(rng.next() % UInt64(ids.count))
                        XCTAssertTrue(try tx.delete(from: t, rowID: ids[k]), "seed \(seed)")
                        model[ids[k]] = nil
                        ids.remove(at: k)
                    }
                }
            }
            try db.read { tx in
                let t = try tx.table("t")
                XCTAssertEqual(Int(t.rowCount), model.count, "round \(round), seed \(seed)")
                for (id, v) in model { XCTAssertEqual(try tx.values(in: t, rowID: id), v, "row \(id), round \(round), seed \(seed)") }
            }
            let problems = try db.read { tx in try tx.checkIntegrity() }
            XCTAssertTrue(problems.isEmpty, "round \(round), seed \(seed): \(problems)")
            if !problems.isEmpty { return }
        }
    }
}
