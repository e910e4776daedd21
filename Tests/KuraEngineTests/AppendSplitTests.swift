// An append's split (BTree+Insert.swift, `insertCell`): when a full leaf that
// is the right-most child of its parent gets a cell past its last one, the
// old page keeps its cells where they lie and a new page takes the new cell
// alone, without the cells being copied out and the old page rebuilt. Only
// a leaf without table counters takes that way (rebuilding drops them).
//
// This test appends rows (to the table tree) and increasing index keys (to
// the index tree) across many leaf and interior splits on small pages, over
// several transactions (each commit puts the counters in the right-most leaf,
// so the first split of the next transaction goes the general way), with a
// rollback and some rows large enough to need overflow pages; it checks every
// row by scan and by point read, the index by range queries, the integrity
// check, and that appended leaves stay full (the split rule the shortcut
// keeps). A split with a wrong separator key or a lost child pointer fails
// the point reads, the scan or the integrity check.

import Foundation
import XCTest
@testable import KuraEngine

final class AppendSplitTests: XCTestCase {
    struct Rollback: Error {}

    func testAppendSplitsKeepEveryRowReachableAndPagesFull() throws {
        let seed = testSeed("AppendSplitTests")
        var rng = SplitMix64(seed: seed)
        let db = try memoryStore("/split.kura")
        try db.write { tx in
            let t = try tx.createTable("t", schema: TableSchema([ColumnDefinition("name", .text), ColumnDefinition("seq", .integer)]))
            try tx.createIndex("by_seq", on: t, columns: [IndexColumn("seq")])
        }
        var model: [Int64: [Value]] = [:]
        var seq: Int64 = 0

        for round in 0..<8 {
            let rollback = round == 5
            var staged = model
            var stagedSeq = seq
            do {
                try db.write { tx in
                    let t = try tx.table("t")
                    for _ in 0..<(300 + Int(rng.next() % 300)) {
                        // Mostly small rows; some near a cell's local limit; a few with overflow pages.
                        let r = rng.next() % 50
                        let size = r == 0 ? 400 + Int(rng.next() % 600) : r < 5 ? 60 + Int(rng.next() % 40) : Int(rng.next() % 24)
                        stagedSeq += 1
                        let v: [Value] = [.text(String(repeating: "a", count: size)), .integer(stagedSeq)]
                        let id = try tx.insert(v, into: t)
                        staged[id] = v
                    }
                    if rollback { throw Rollback() }
                }
                model = staged
                seq = stagedSeq
            } catch is Rollback {}

            try db.read { tx in
                let t = try tx.table("t")
                XCTAssertEqual(try tx.rowCount(t), model.count, "seed \(seed)")
                try assertScanMatches(tx, t, model, "seed \(seed)")
                // Point reads descend through every separator the splits wrote.
                for id in model.keys.sorted() {
                    XCTAssertEqual(try tx.values(in: t, rowID: id), model[id], "row \(id), seed \(seed)")
                }
                XCTAssertNil(try tx.values(in: t, rowID: (model.keys.max() ?? 0) + 1))
                // The index tree's appended keys, through range queries over `seq`.
                for _ in 0..<20 where seq > 0 {
                    let lo = Int64(rng.next() % UInt64(seq)) + 1
                    let hi = lo + Int64(rng.next() % 40)
                    let found = try tx.fetch(TableQuery("t", where: try KuraPredicate(format: "seq BETWEEN {%@, %@}", arguments: [.integer(lo), .integer(hi)])))
                        .map { $0.values[1].integerValue ?? -1 }.sorted()
                    let expected = model.values.compactMap { $0[1].integerValue }.filter { $0 >= lo && $0 <= hi }.sorted()
                    XCTAssertEqual(found, expected, "seq \(lo)...\(hi), seed \(seed)")
                }
                XCTAssertEqual(try tx.checkIntegrity(), [], "seed \(seed)")
                // Appending fills pages: the table's leaves and the index's stay nearly full.
                let st = try tx.statistics(of: t)
                XCTAssertEqual(st.entries, model.count, "seed \(seed)")
                if st.leafPages > 20 { XCTAssertGreaterThan(st.leafFill, 0.8, "table leaves, seed \(seed)") }
                let index = try tx.statistics(of: try tx.index("by_seq").info)
                XCTAssertEqual(index.entries, model.count, "seed \(seed)")
                if index.leafPages > 20 { XCTAssertGreaterThan(index.leafFill, 0.8, "index leaves, seed \(seed)") }
            }
        }
        XCTAssertGreaterThan(model.count, 2000)
        try db.read { tx in XCTAssertGreaterThanOrEqual(try tx.statistics(of: try tx.table("t")).depth, 3, "seed \(seed)") }
    }

    // Splits in the middle of leaves (BTree+Insert.swift, `splitLeaf`: a
    // leaf already in the form the writer builds is split from one copy of
    // the page, its cells never copied out): an index built over a filled
    // table (leaves as full as a bulk load makes them) gets keys at random
    // places and of random lengths (a text column), over several
    // transactions with a rollback. Equality queries through the index are
    // checked against a model, and the integrity check compares every index
    // entry with the rows, key order and separators. A split that puts the
    // new cell in the wrong place, drops or repeats a cell, or sends a wrong
    // separator up fails them.
    func testMiddleSplitsOfIndexLeavesKeepEveryEntry() throws {
        let seed = testSeed("AppendSplitTests.middle")
        var rng = SplitMix64(seed: seed)
        let db = try memoryStore("/middle.kura")
        var model: [Int64: String] = [:]
        func word() -> String { String(repeating: "k", count: Int(rng.next() % 30)) + String(rng.next() % 400) }
        try db.write { tx in
            let t = try tx.createTable("t", schema: TableSchema([ColumnDefinition("w", .text), ColumnDefinition("n", .integer)]))
            for _ in 0..<1500 {
                let w = word()
                model[try tx.insert([.text(w), .integer(0)], into: t)] = w
            }
            try tx.createIndex("by_w", on: t, columns: [IndexColumn("w")])
        }
        let leavesBefore = try db.read { tx in try tx.statistics(of: try tx.index("by_w").info).leafPages }
        for round in 1...6 {
            var staged = model
            do {
                try db.write { tx in
                    let t = try tx.table("t")
                    for _ in 0..<(150 + Int(rng.next() % 150)) {
                        let w = word()
                        staged[try tx.insert([.text(w), .integer(Int64(round))], into: t)] = w
                    }
                    if round == 3 { throw Rollback() }
                }
                model = staged
            } catch is Rollback {}
            try db.read { tx in
                let ids = model.keys.sorted()
                for k in 0..<60 {
                    // Words of the model, and (every fourth) one that may be absent.
                    let w = k % 4 == 3 ? word() : model[ids[Int(rng.next() % UInt64(ids.count))]]!
                    let q = TableQuery("t", where: try KuraPredicate(format: "w == %@", arguments: [.text(w)]))
                    if k == 0 { XCTAssertTrue(try tx.explain(q).contains("by_w"), "the query does not use the index, seed \(seed)") }
                    XCTAssertEqual(try tx.fetch(q).map(\.rowID).sorted(), ids.filter { model[$0] == w }, "\(w), seed \(seed)")
                }
                XCTAssertEqual(try tx.statistics(of: try tx.index("by_w").info).entries, model.count, "seed \(seed)")
                XCTAssertEqual(try tx.checkIntegrity(), [], "seed \(seed)")
            }
        }
        // The inserts split most of the index's leaves (else this test shows little).
        let leavesAfter = try db.read { tx in try tx.statistics(of: try tx.index("by_w").info).leafPages }
        XCTAssertGreaterThan(leavesAfter, leavesBefore * 3 / 2, "seed \(seed)")
    }
}
