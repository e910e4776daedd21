// Index range queries whose bounds are the extreme 64-bit integers: the
// planner's ranges, estimates and exact plans must neither trap nor drop rows
// (a bound at Int64.min or Int64.max is where an off-by-one becomes an overflow).

import XCTest
@testable import KuraEngine

final class ExtremeBoundTests: XCTestCase {
    func testExtremeIntegerBoundsAnswerLikeAScan() throws {
        // Ascending and descending index: one-sided integer ranges are exact
        // closed ranges (QueryPlanner.integerBounds) whose ends are the extremes.
        for descending in [false, true] {
            let db = try Database.inMemory()
            try db.write { tx in
                let t = try tx.createTable("t", schema: try TableSchema([ColumnDefinition("a", .integer)]))
                for i in 0..<50 { _ = try tx.insert([.integer(Int64(i) - 25)], into: t) }
                _ = try tx.insert([.null], into: t)
                _ = try tx.insert([.integer(Int64.min)], into: t)
                _ = try tx.insert([.integer(Int64.max)], into: t)
                _ = try tx.createIndex("by_a", on: t, columns: [IndexColumn("a", descending: descending)])
            }
            let cases: [(String, Int)] = [
                ("a BETWEEN {-9223372036854775808, 9223372036854775807}", 52),
                ("a >= -9223372036854775808", 52), ("a <= 9223372036854775807", 52),
                ("a > -9223372036854775808", 51), ("a < 9223372036854775807", 51),
                ("a < -9223372036854775808", 0), ("a > 9223372036854775807", 0),
                ("a <= -9223372036854775808", 1), ("a >= 9223372036854775807", 1),
                ("a BETWEEN {-9223372036854775808, 3}", 30), ("a BETWEEN {3, 9223372036854775807}", 23),
                ("a BETWEEN {3, -3}", 0), ("a < -24", 2), ("a <= -24", 3), ("a > 23", 2), ("a >= 23", 3),
            ]
            for (format, expected) in cases {
                try check(db, format, expected, exact: true)
            }
        }
        // A double column compared with the extreme integers: the planner turns
        // the integer into a double bound (`abs(Int64.min)` trapped there).
        let dbl = try Database.inMemory()
        try dbl.write { tx in
            let t = try tx.createTable("t", schema: try TableSchema([ColumnDefinition("a", .double)]))
            for i in 0..<50 { _ = try tx.insert([.double(Double(i) - 25.5)], into: t) }
            _ = try tx.insert([.null], into: t)
            _ = try tx.createIndex("by_a", on: t, columns: [IndexColumn("a")])
        }
        let doubleCases: [(String, Int)] = [
            ("a > -9223372036854775808", 50), ("a >= -9223372036854775808", 50), ("a < -9223372036854775808", 0),
            ("a < 9223372036854775807", 50), ("a > 9223372036854775807", 0),
            ("a BETWEEN {-9223372036854775808, 9223372036854775807}", 50), ("a BETWEEN {-9223372036854775808, 0}", 26),
            ("a == -9223372036854775808", 0), ("a IN {-9223372036854775808, 9223372036854775807}", 0),
        ]
        for (format, expected) in doubleCases {
            try check(dbl, format, expected, exact: false)
        }
        // A double column's integer bound stays inclusive and the rows are
        // re-tested: `a < -24` keeps -24.5 (an integer range ending at -25 would
        // drop it), `a > 23` keeps 23.5 (one starting at 24 would drop it).
        for (format, expected) in [("a < -24", 2), ("a <= -25", 1), ("a > 23", 1), ("a >= 23", 1), ("a > -26", 50)] {
            try check(dbl, format, expected, exact: false)
        }
    }

    /// `exact`: whether an index plan for `format` must skip the row test
    /// (integer column) or must test the rows (double column).
    func check(_ db: Database, _ format: String, _ expected: Int, exact: Bool) throws {
        do {
            let q = try TableQuery("t", where: format)
            XCTAssertEqual(try db.read { try $0.fetch(q).count }, expected, format)
            XCTAssertEqual(try db.read { try $0.count(q) }, expected, format)
            let sorted = try TableQuery("t", where: format, sort: [SortKey("a", ascending: false)], limit: 3)
            XCTAssertEqual(try db.read { try $0.fetch(sorted).count }, min(3, expected), format)
            let plan = try db.read { tx in try tx.plan(q, try tx.resolve(q), explaining: false) }
            if case .index = plan.access {
                XCTAssertEqual(plan.exact, exact, "\(format): exact plan")
            } else {
                XCTAssertTrue(expected > 5, "\(format): a selective range was not planned on the index")
            }
        }
    }
}
