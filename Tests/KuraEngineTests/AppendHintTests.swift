// The writer's tree shortcuts (BTree+Insert.swift, "Append hint"; issue 14
// item 5): an insert past a tree's last key goes straight to the right-most
// leaf recorded earlier, and a replace or delete of a key in the leaf a tree
// last changed skips the descent. Both are only valid while no page was
// allocated or freed. This test mixes appends with what must invalidate or
// bypass them — deletes and size-changing updates of the last rows (merges),
// inserts with explicit row IDs below and above the end, big values (overflow
// pages), deletes and updates by predicate, rollbacks, and a cache of a few
// pages so the transaction spills and reads pages back — and checks every
// transaction against a model and the integrity check.

import Foundation
import XCTest
@testable import KuraEngine

final class AppendHintTests: XCTestCase {
    struct Rollback: Error {}

    func testAppendsMixedWithChangesAtTheEndMatchTheModel() throws {
        let seed = ProcessInfo.processInfo.environment["KURA_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1...UInt64(UInt32.max))
        print("AppendHintTests seed \(seed) (replay with KURA_SEED=\(seed))")
        var rng = SplitMix64(seed: seed)
        var o = Database.Options()
        o.fileSystem = MemoryFileSystem()
        o.pageSize = 512
        o.cacheSize = 12 * 512
        o.durability = .off
        let db = try Database(path: "/hint.kura", options: o)
        try db.write { tx in
            let t = try tx.createTable("t", schema: TableSchema([ColumnDefinition("name", .text), ColumnDefinition("score", .integer)]))
            try tx.createIndex("by_score", on: t, columns: [IndexColumn("score")])
        }
        var model: [Int64: [Value]] = [:]
        var next: Int64 = 1
        var counts = (appends: 0, explicit: 0, tailDeletes: 0, tailUpdates: 0, predicates: 0, rollbacks: 0)

        func row() -> [Value] {
            let size = rng.next() % 30 == 0 ? 300 + Int(rng.next() % 900) : Int(rng.next() % 40)
            return [.text(String(repeating: "x", count: size)), .integer(Int64(rng.next() % 100))]
        }

        for round in 0..<24 {
            let rollback = round % 8 == 7 || rng.next() % 8 == 0
            var staged = model
            var stagedNext = next
            do {
                try db.write { tx in
                    let t = try tx.table("t")
                    for _ in 0..<(20 + Int(rng.next() % 60)) {
                        // The four highest row IDs (the right-most leaf's).
                        var tail: [Int64] = []
                        for id in staged.keys {
                            if tail.count < 4 { tail.append(id); tail.sort() } else if id > tail[0] { tail[0] = id; tail.sort() }
                        }
                        let op = rng.next() % 100
                        if op < 50 {
                            let v = row()
                            let id = try tx.insert(v, into: t)
                            XCTAssertEqual(id, stagedNext)
                            staged[id] = v
                            stagedNext = id + 1
                            counts.appends += 1
                        } else if op < 60 {
                            // Below the end (a gap or a used ID) or past it.
                            let id = rng.next() % 3 == 0 ? stagedNext + Int64(rng.next() % 5) : Int64(rng.next() % UInt64(stagedNext + 1))
                            let v = row()
                            if staged[id] != nil {
                                XCTAssertThrowsError(try tx.insert(v, into: t, rowID: id))
                            } else {
                                try tx.insert(v, into: t, rowID: id)
                                staged[id] = v
                                stagedNext = max(stagedNext, id + 1)
                            }
                            counts.explicit += 1
                        } else if op < 75, let id = tail.randomElement(using: &rng) {
                            XCTAssertTrue(try tx.delete(from: t, rowID: id))
                            staged[id] = nil
                            counts.tailDeletes += 1
                        } else if op < 88, let id = tail.randomElement(using: &rng) {
                            let v = row()
                            XCTAssertTrue(try tx.update(v, in: t, rowID: id))
                            staged[id] = v
                            counts.tailUpdates += 1
                        } else if op < 94 {
                            let below = Int64(rng.next() % 25)
                            let name = Value.text(String(repeating: "u", count: Int(rng.next() % 50)))
                            let n = try tx.update("t", where: try KuraPredicate(format: "score < %@", arguments: [.integer(below)]), set: ["name": name])
                            let changed = staged.filter { $0.value[1].integerValue! < below }.map(\.key)
                            for id in changed { staged[id]![0] = name }
                            XCTAssertEqual(n, changed.count)
                            counts.predicates += 1
                        } else {
                            let s = 90 + Int64(rng.next() % 10)
                            let n = try tx.delete(from: "t", where: try KuraPredicate(format: "score >= %@", arguments: [.integer(s)]))
                            let gone = staged.filter { $0.value[1].integerValue! >= s }.map(\.key)
                            XCTAssertEqual(n, gone.count)
                            for id in gone { staged[id] = nil }
                            counts.predicates += 1
                        }
                    }
                    if rollback { throw Rollback() }
                }
                model = staged
                next = stagedNext
            } catch is Rollback {
                counts.rollbacks += 1
            }
            try db.read { tx in
                let t = try tx.table("t")
                XCTAssertEqual(try tx.rowCount(t), model.count)
                try assertScanMatches(tx, t, model, "seed \(seed)")
                if round % 4 == 3 { XCTAssertEqual(try tx.checkIntegrity(), [], "seed \(seed)") }
            }
        }
        // The run must have exercised what it claims to.
        XCTAssertGreaterThan(counts.appends, 200)
        XCTAssertGreaterThan(counts.explicit, 20)
        XCTAssertGreaterThan(counts.tailDeletes, 40)
        XCTAssertGreaterThan(counts.tailUpdates, 40)
        XCTAssertGreaterThan(counts.predicates, 12)
        XCTAssertGreaterThan(counts.rollbacks, 0)
    }
}
