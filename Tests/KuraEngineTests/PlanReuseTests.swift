import Foundation
import XCTest
@testable import KuraEngine

/// What the per-query planning path reuses instead of recomputing must not
/// change a plan or an answer:
///
/// - key ranges found for the selectivity estimate stand in for the
///   candidate's only when the predicate has a single constraint
///   (QueryPlanner.plan, `rangesFound`);
/// - a write transaction's query takes schema, indexes and column map from
///   its hot table handle, which every schema change drops: an index created
///   or dropped between two runs of a query, in one write transaction or the
///   next, changes the next run's plan.
final class PlanReuseTests: XCTestCase {
    static let schema = try! TableSchema([
        ColumnDefinition("a", .integer), ColumnDefinition("b", .integer), ColumnDefinition("s", .text),
    ])

    func makeStore(rows: Int) throws -> Database {
        let db = try Database.inMemory()
        try db.write { tx in
            let t = try tx.createTable("t", schema: Self.schema)
            for i in 0..<rows { _ = try tx.insert([.integer(Int64(i % 50)), .integer(Int64(i % 7)), .text("r\(i)")], into: t) }
        }
        return db
    }

    /// Row IDs a query selects, in the order returned.
    func ids(_ tx: ReadTransaction, _ q: TableQuery) throws -> [Int64] {
        let c = try tx.select(q)
        var out: [Int64] = []
        while let r = try c.next() { out.append(r.rowID) }
        return out
    }

    /// Two conjuncts on a two-column index: the selectivity looks at `a == 3`
    /// alone (ranges with the `a` prefix only); the candidate must search
    /// with both, and is then exact. Reusing the one-constraint ranges here
    /// would search `a == 3` only and re-test every row.
    func testTwoConstraintsSearchWithBoth() throws {
        let db = try makeStore(rows: 700)
        try db.write { tx in _ = try tx.createIndex("by_a_b", on: try tx.table("t"), columns: [IndexColumn("a"), IndexColumn("b")]) }
        try db.read { tx in
            let q = TableQuery("t", where: try KuraPredicate(format: "a == 3 AND b == 3"))
            let text = try tx.explain(q)
            XCTAssertTrue(text.contains("using a == 3 AND b == 3"), text)
            XCTAssertTrue(text.contains("the key ranges are exactly the predicate"), text)
            let expected = try ids(tx, TableQuery("t", where: try KuraPredicate(format: "s != 'x' AND a == 3 AND b == 3")))
            XCTAssertEqual(try ids(tx, q), expected)
            XCTAssertFalse(expected.isEmpty)
        }
    }

    /// One constraint, several indexes led by its column, with and without a
    /// sort and limit: every query gives the rows a scan of an unindexed copy
    /// gives, in the same order, and its explanation lists each index search
    /// the planner makes from scratch (`QueryPlanner.indexPlan` with the
    /// constraint) with its number of key ranges, and the chosen one's key
    /// ranges and constraints.
    func testOneConstraintPlansAsFromScratch() throws {
        let db = try makeStore(rows: 900)
        let plain = try makeStore(rows: 900)
        try db.write { tx in
            let t = try tx.table("t")
            _ = try tx.createIndex("by_a", on: t, columns: [IndexColumn("a")])
            _ = try tx.createIndex("by_a_desc_b", on: t, columns: [IndexColumn("a", descending: true), IndexColumn("b")])
            _ = try tx.createIndex("by_b", on: t, columns: [IndexColumn("b")])
        }
        let predicates = ["a == 7", "a BETWEEN {3, 9}", "a < 4", "a >= 45", "a IN {1, 2, 40}", "b == 2", "b > 4", "a == 2.5", "a == nil"]
        let sorts: [[SortKey]] = [[], [SortKey("a")], [SortKey("a", ascending: false), SortKey("b")], [SortKey("b", ascending: false)]]
        for f in predicates {
            for sort in sorts {
                for limit in [nil, 5] as [Int?] {
                    let q = TableQuery("t", where: try KuraPredicate(format: f), sort: sort, limit: limit)
                    let got = try db.read { tx in try ids(tx, q) }
                    let want = try plain.read { tx in try ids(tx, q) }
                    XCTAssertEqual(got, want, "\(f) \(sort) \(String(describing: limit))")
                    try db.read { tx in
                        let text = try tx.explain(q)
                        let r = try tx.resolve(q)
                        let constraints = QueryPlanner.conjuncts(q.predicate!).compactMap { QueryPlanner.constraint($0, explaining: true) }
                        for index in r.indexes {
                            guard let schema = r.schema,
                                  let (_, p) = QueryPlanner.indexPlan(index, constraints, schema: schema, sort: sort, explaining: true) else { continue }
                            guard case .index(_, let ranges, _) = p.access else { continue }
                            XCTAssertTrue(text.contains("index \"\(index.name)\": about "), "\(f): no candidate \(index.name) in\n\(text)")
                            XCTAssertTrue(text.contains(" entries in \(ranges.count) key range"), "\(f): \(ranges.count) ranges for \(index.name) in\n\(text)")
                            // The chosen search prints its key ranges and constraints.
                            if text.contains("search index \"\(index.name)\"") {
                                for note in p.notes { XCTAssertTrue(text.contains(note), "\(f): missing \"\(note)\" in\n\(text)") }
                            }
                        }
                    }
                }
            }
        }
    }

    /// An index created, then dropped, between runs of the same query in one
    /// write transaction (whose hot table handle the query resolves from),
    /// and in the next transactions: each run plans with the indexes there
    /// are then, and gives the same rows.
    func testIndexCreatedAndDroppedBetweenRuns() throws {
        let db = try makeStore(rows: 600)
        let q = TableQuery("t", where: try KuraPredicate(format: "a == 9"))
        let expected = try db.read { tx in try ids(tx, q) }
        XCTAssertEqual(expected.count, 12)
        try db.write { tx in
            let t = try tx.table("t")
            _ = try tx.insert([.integer(1), .integer(1), .text("hot")], into: t)  // makes `t` the hot table
            XCTAssertTrue(try tx.explain(q).contains("scan table"))
            XCTAssertEqual(try ids(tx, q), expected)
            _ = try tx.createIndex("by_a", on: try tx.table("t"), columns: [IndexColumn("a")])
            _ = try tx.insert([.integer(2), .integer(2), .text("hot")], into: try tx.table("t"))
            let indexed = try tx.explain(q)
            XCTAssertTrue(indexed.contains("search index \"by_a\""), indexed)
            XCTAssertEqual(try ids(tx, q), expected)
            _ = try tx.insert([.integer(9), .integer(2), .text("new")], into: try tx.table("t"))
            XCTAssertEqual(try ids(tx, q).count, 13)
            try tx.dropIndex("by_a")
            _ = try tx.insert([.integer(3), .integer(2), .text("hot")], into: try tx.table("t"))
            let dropped = try tx.explain(q)
            XCTAssertFalse(dropped.contains("by_a"), dropped)
            XCTAssertEqual(try ids(tx, q).count, 13)
            _ = try tx.createIndex("by_a", on: try tx.table("t"), columns: [IndexColumn("a")])
        }
        try db.read { tx in
            XCTAssertTrue(try tx.explain(q).contains("search index \"by_a\""))
            XCTAssertEqual(try ids(tx, q).count, 13)
        }
        try db.write { tx in
            _ = try tx.insert([.integer(9), .integer(5), .text("hot")], into: try tx.table("t"))
            XCTAssertTrue(try tx.explain(q).contains("search index \"by_a\""))
            XCTAssertEqual(try ids(tx, q).count, 14)
            try tx.dropIndex("by_a")
            XCTAssertTrue(try tx.explain(q).contains("scan table"))
            XCTAssertEqual(try ids(tx, q).count, 14)
        }
        try db.read { tx in
            XCTAssertTrue(try tx.explain(q).contains("scan table"))
            XCTAssertEqual(try ids(tx, q).count, 14)
        }
    }
}
