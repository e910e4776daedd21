import Foundation
import XCTest
@testable import KuraEngine

/// Two shortcuts of the indexed read path, each against the slow path it skips:
/// exact index plans (QueryPlanner, "Exact plans": rows are not re-tested) against
/// a table scan of the same rows, and the table-tree lookup that probes where a
/// row ID falls (`Page.rowIDLowerBound`) against the plain binary search.
///
/// Randomized tests print their seed; set KURA_SEED to replay one.
final class ExactIndexPlanTests: XCTestCase {
    static let schema = try! TableSchema([
        ColumnDefinition("a", .integer), ColumnDefinition("b", .integer), ColumnDefinition("s", .text),
    ])

    func seed(_ name: String) -> UInt64 {
        let s = ProcessInfo.processInfo.environment["KURA_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1...UInt64(UInt32.max))
        print("ExactIndexPlanTests.\(name) seed \(s) (replay with KURA_SEED=\(s))")
        return s
    }

    func makeStore(_ rows: [[Value]], indexed: Bool) throws -> Database {
        let db = try Database.inMemory()
        try db.write { tx in
            let t = try tx.createTable("t", schema: Self.schema)
            for r in rows { _ = try tx.insert(r, into: t) }
            if indexed {
                _ = try tx.createIndex("by_a", on: t, columns: [IndexColumn("a")])
                _ = try tx.createIndex("by_b_a", on: t, columns: [IndexColumn("b", descending: true), IndexColumn("a")])
            }
        }
        return db
    }

    /// Guards exact plans: a plan that skips the row test must give exactly the
    /// rows a scan gives (nulls, negative numbers, fractions, empty and reversed
    /// ranges, strict and one-sided ranges, descending and two-column keys), and
    /// only integer `==`/`BETWEEN`/`IN`/`<`/`<=`/`>`/`>=` plans on integer
    /// columns may be exact.
    func testExactIndexPlansAgreeWithAScan() throws {
        var rng = SplitMix64(seed: seed("exact"))
        var rows: [[Value]] = []
        for i in 0..<400 {
            let a: Value = rng.next() % 6 == 0 ? .null : .integer(Int64(rng.next() % 21) - 10)
            let b: Value = rng.next() % 9 == 0 ? .null : .integer(Int64(rng.next() % 5) - 2)
            rows.append([a, b, .text("r\(i)")])
        }
        let indexed = try makeStore(rows, indexed: true)
        let plain = try makeStore(rows, indexed: false)
        func n() -> Int64 { Int64(rng.next() % 25) - 12 }
        // (format, whether the plan must be exact)
        var cases: [(String, Bool)] = []
        for _ in 0..<8 {
            let (lo, hi) = (n(), n())
            cases += [
                ("a == \(lo)", true), ("a BETWEEN {\(lo), \(hi)}", true), ("a IN {\(lo), \(hi), \(lo)}", true),
                ("b == \(lo % 3) AND a BETWEEN {\(lo), \(hi)}", true), ("a == \(lo) AND b == \(hi % 3)", true),
                ("a == \(lo) AND s BEGINSWITH 'r1'", false), ("a < \(lo)", true), ("a >= \(lo)", true),
                ("a > \(lo)", true), ("a <= \(lo)", true), ("\(lo) < a", true), ("\(lo) >= a", true),
                ("b < \(lo % 3)", true), ("b > \(lo % 3)", true), ("b >= \(lo % 3)", true), ("b <= \(lo % 3)", true),
                ("b == \(lo % 3) AND a < \(hi)", true), ("b == \(lo % 3) AND a >= \(hi)", true),
                ("a < \(lo).5", false), ("a > \(lo).5", false), ("a > \(lo) AND a < \(hi)", false),
                ("a == nil", false), ("a == \(lo).5", false), ("a BETWEEN {\(lo).5, \(hi)}", false),
                ("a IN {\(lo), nil}", false), ("a == \(lo) AND a == \(hi)", false),
            ]
        }
        for (format, mustBeExact) in cases {
            for sort in [[], [SortKey("a", ascending: false)], [SortKey("b"), SortKey("a")]] {
                let q = try TableQuery("t", where: format, sort: sort, limit: rng.next() % 3 == 0 ? 5 : nil)
                let got = try indexed.read { try $0.fetch(q).map(\.rowID) }
                let want = try plain.read { try $0.fetch(q).map(\.rowID) }
                XCTAssertEqual(got, want, "\(format) sorted by \(sort)")
                XCTAssertEqual(try indexed.read { try $0.count(q) }, want.count, format)
                let plan = try indexed.read { tx in try tx.plan(q, try tx.resolve(q), explaining: false) }
                if plan.exact { XCTAssertTrue(mustBeExact, "\(format): the rows of this plan need the test") }
                // Two conjuncts are both in the key ranges only on by_b_a.
                if mustBeExact, sort.isEmpty, case .index(let i, _, _) = plan.access, !format.contains(" AND ") || i.name == "by_b_a" {
                    XCTAssertTrue(plan.exact, "\(format): an exact key range was re-tested")
                }
            }
        }
        // The planner's choice shows in explain.
        let text = try indexed.read { try $0.explain(try TableQuery("t", where: "a == 3")) }
        XCTAssertTrue(text.contains("rows are not tested again"), text)
        XCTAssertFalse(text.contains("filter each candidate row"), text)
        // A plan that does test its rows says so.
        let tested = try indexed.read { try $0.explain(try TableQuery("t", where: "a == 3 AND s CONTAINS 'x'")) }
        XCTAssertTrue(tested.contains("filter each candidate row: "), tested)
    }

    /// Guards `rowIDLowerBound`: on any sorted node of row-ID keys (dense, sparse,
    /// clustered, negative, extreme) it answers as the binary search does.
    func testRowIDSearchAgreesWithBinarySearch() throws {
        var rng = SplitMix64(seed: seed("rowID"))
        for round in 0..<61 {
            var ids = Set<Int64>()
            if round == 60 {
                // Regression: a dense run of row IDs near 2^62, which one Double
                // cannot tell apart, made the interpolation 0/0 and trapped.
                ids = Set((0..<200).map { (Int64(1) << 62) + Int64($0) })
            }
            let count = 1 + Int(rng.next() % (round % 4 == 3 ? 90 : 300))  // the last shape has about 100 distinct values
            let start = Int64(bitPattern: rng.next()) >> Int64(rng.next() % 64)
            while round < 60 && ids.count < count {
                switch round % 4 {
                case 0: ids.insert(start &+ Int64(ids.count))  // dense
                case 1: ids.insert(Int64(bitPattern: rng.next()))  // anywhere
                case 2: ids.insert((rng.next() % 2 == 0 ? 0 : Int64.max / 2) &+ Int64(rng.next() % 1000))  // two clusters
                default: ids.insert([Int64.min, Int64.max, -1, 0, 1][Int(rng.next() % 5)] &+ Int64(rng.next() % 50) &- 25)
                }
            }
            let sorted = ids.sorted()
            let page = Page(number: 2, size: 4096)
            Node.initialize(page, kind: .tableInterior, treeRoot: 2)
            var stored: [Int64] = []
            for id in sorted {
                guard page.insertCell(BTree.interiorCell(child: 3, key: RowIDKey.encode(id)[...]), at: stored.count) else { break }
                stored.append(id)
            }
            var probes = stored.flatMap { [$0, $0 &- 1, $0 &+ 1] }
            probes += [Int64.min, Int64.max, 0, -1] + (0..<20).map { _ in Int64(bitPattern: rng.next()) }
            for p in probes {
                let key = RowIDKey.encode(p)
                let (fast, slow) = key.withUnsafeBytes { k in (page.rowIDLowerBound(k, rowID: p), page.lowerBound(k)) }
                XCTAssertEqual(fast, slow, "row ID \(p) among \(stored.count) keys from \(stored.first ?? 0) to \(stored.last ?? 0)")
            }
        }
    }
    // Regression: plan descriptions turned estimates into Int, which traps on
    // a damaged row count of Int64.max (2^63 as a Double) or a non-finite cost;
    // every query plans with such a description.
    func testEstimateTextNeverTraps() {
        XCTAssertEqual(estimateText(2.34), "2.3")
        XCTAssertEqual(estimateText(2.34, decimal: false), "2")
        XCTAssertEqual(estimateText(1234.6), "1235")
        XCTAssertEqual(estimateText(Double(Int64.max)), String(Double(Int64.max)))
        XCTAssertEqual(estimateText(-Double(Int64.max) * 4, decimal: false), String(-Double(Int64.max) * 4))
        XCTAssertEqual(estimateText(.nan), "?")
        XCTAssertEqual(estimateText(.infinity, decimal: false), "?")
    }
}
