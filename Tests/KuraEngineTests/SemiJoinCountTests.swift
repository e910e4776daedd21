// A to-many join's count per outer row (SemiJoin.swift, issue 15): with
// every inner row counting, one ordered walk of the index on the inverse key
// that counts each run of equal keys; with an inner predicate, the matching
// rows' keys sorted and counted per run. Both are checked against counts made
// naively from every inner row, for random `$count` conditions (passing or
// failing at zero, negated, counts past the small-count memo), over keys that
// are null, negative, dangling, or shared by long runs, read from a committed
// snapshot and from a write transaction holding uncommitted inserts, updates
// and deletes mixed with saved rows. A to-one join whose inner predicate is
// an integer equality on an indexed column takes the inner row IDs from the
// index alone; it is checked the same way.
// Prints its seed; KURA_SEED=<n> replays one.

import Foundation
import XCTest
@testable import KuraEngine

final class SemiJoinCountTests: XCTestCase {
    func testCountsMatchNaiveCounts() throws {
        let seed = testSeed("SemiJoinCountTests")
        var rng = SplitMix64(seed: seed)
        func rand(_ n: Int) -> Int { Int(rng.next() % UInt64(n)) }

        let db = try Database.inMemory()
        try db.write { tx in
            let parent = try tx.createTable("parent", schema: try TableSchema([ColumnDefinition("n", .integer), ColumnDefinition("best", .integer)]))
            let child = try tx.createTable("child", schema: try TableSchema([ColumnDefinition("owner", .integer), ColumnDefinition("k", .integer)]))
            try tx.createIndex("child_owner", on: child, columns: [IndexColumn("owner")])
            try tx.createIndex("child_k", on: child, columns: [IndexColumn("k", descending: rng.next() % 2 == 0)])
            for i in 0..<600 {
                // `best` names a child, nothing, or a row that does not exist (enough
                // parents that the join is materialized, not a nested loop).
                let best: Value = [.integer(Int64(1 + rand(700))), .null, .integer(5000)][rand(3)]
                try tx.insert(["n": .integer(Int64(i)), "best": best], into: parent)
            }
            for _ in 0..<700 { try tx.insert(Self.randomChild(&rng), into: child) }
        }
        // A deleted parent leaves its children's keys dangling.
        try db.write { tx in _ = try tx.delete(from: try tx.table("parent"), rowID: Int64(1 + rand(40))) }

        func check(_ tx: ReadTransaction, _ label: String) throws {
            let parents = try tx.fetch(TableQuery("parent"))
            let children = try tx.fetch(TableQuery("child"))
            for step in 0..<20 {
                let op = ["==", "!=", "<", "<=", ">", ">="][rand(6)]
                let m = [0, 1, 2, 3, 70, 90][rand(6)]
                let innerK: Int64? = rand(2) == 0 ? Int64(rand(3)) : nil
                let outerLimit: Int64? = rand(3) == 0 ? Int64(rand(40)) : nil
                let negated = rand(3) == 0
                let having = try KuraPredicate(format: "$count \(op) \(m)")
                let inner = TableQuery("child", where: try innerK.map { k throws(KuraError) in try KuraPredicate(format: "k == \(k)") })
                let query = TableQuery("parent", where: try outerLimit.map { l throws(KuraError) in try KuraPredicate(format: "n < \(l)") },
                                       joins: [SemiJoin(.inverseForeignKey(column: "owner"), inner, having: having, negated: negated)])
                var counts: [Int64: Int64] = [:]
                for c in children {
                    guard case .integer(let owner) = c.values[0] else { continue }
                    if let innerK, c.values[1] != .integer(innerK) { continue }
                    counts[owner, default: 0] += 1
                }
                let want = try parents.filter { p throws -> Bool in
                    if let outerLimit, case .integer(let n) = p.values[0], n >= outerLimit { return false }
                    let holds = try having.evaluate(with: .null, variables: [SemiJoin.countVariable: .scalar(.integer(counts[p.rowID] ?? 0))])
                    return holds != negated
                }.map(\.rowID)
                let got = try tx.fetch(query).map(\.rowID)
                XCTAssertEqual(got, want, "\(label) step \(step): \(query) (seed \(seed))")
                XCTAssertEqual(try tx.count(query), want.count)
                if got != want { return }
                if innerK == nil {
                    let plan = try tx.explain(query)
                    XCTAssertTrue(plan.contains("one ordered walk of index \"child_owner\""), plan)
                }
            }
            // To-one: parents whose `best` names a child with k == m.
            let childK = Dictionary(uniqueKeysWithValues: children.map { ($0.rowID, $0.values[1]) })
            for m in -1...3 {
                let negated = rand(2) == 0
                let query = TableQuery("parent", joins: [SemiJoin(.foreignKey(column: "best"), TableQuery("child", where: try KuraPredicate(format: "\(m) == k")), negated: negated)])
                let want = parents.filter { p in
                    guard case .integer(let best) = p.values[1], let k = childK[best] else { return negated }
                    return (k == .integer(Int64(m))) != negated
                }.map(\.rowID)
                XCTAssertEqual(try tx.fetch(query).map(\.rowID), want, "\(label) to-one k == \(m)\(negated ? " negated" : "") (seed \(seed))")
                let plan = try tx.explain(query)
                XCTAssertTrue(plan.contains("read from index \"child_k\" alone"), plan)
            }
        }
        try db.read { tx in try check(tx, "snapshot") }
        // Uncommitted changes: inserted, moved and deleted children, a deleted parent.
        try db.write { tx in
            let child = try tx.table("child")
            for _ in 0..<80 { try tx.insert(Self.randomChild(&rng), into: child) }
            for _ in 0..<40 { _ = try tx.delete(from: child, rowID: Int64(1 + rand(700))) }
            for _ in 0..<40 {
                var v = Self.randomChild(&rng)
                _ = try tx.update([v.removeValue(forKey: "owner") ?? .null, v["k"] ?? .null], in: child, rowID: Int64(1 + rand(700)))
            }
            _ = try tx.delete(from: try tx.table("parent"), rowID: Int64(1 + rand(40)))
            try check(tx, "write transaction")
        }
    }

    /// A child row: its owner mostly one of three hot parents (runs past the
    /// small-count memo) or any parent, else null, negative or dangling.
    static func randomChild(_ rng: inout SplitMix64) -> [String: Value] {
        func rand(_ n: Int) -> Int { Int(rng.next() % UInt64(n)) }
        let owner: Value
        switch rand(10) {
        case 0...3: owner = .integer(Int64([3, 17, 29][rand(3)]))
        case 4...7: owner = .integer(Int64(1 + rand(40)))
        case 8: owner = [.null, .integer(-5), .integer(0)][rand(3)]
        default: owner = .integer(Int64(1000 + rand(3)))
        }
        return ["owner": owner, "k": .integer(Int64(rand(3)))]
    }
}
