import Foundation
import XCTest
@testable import KuraEngine

/// The compiled query path (CompiledPredicate, PreparedQuery, the costed planner)
/// against the interpreter it replaces on the hot path.
///
/// Randomized tests print their seed; set KURA_SEED to replay one.
final class CompiledQueryTests: XCTestCase {
    static let schema = try! TableSchema([
        ColumnDefinition("a", .integer), ColumnDefinition("b", .double), ColumnDefinition("s", .text),
        ColumnDefinition("flag", .bool), ColumnDefinition("d", .date),
        ColumnDefinition("n", .integer, nullable: false, default: .integer(7)),
    ])

    static let words = ["apple", "Apple", "APPLE", "äpfel", "café", "Café", "CAFE", "cafe", "naïve", "naive", "zebra",
                        "Zoë", "zoe", "日本語", "", "a*b", "a?b", "100%", "b", "ba", "bab", "x\r\ny", "x\ny", "\r\n", "K", "\u{212A}",
                        "e\u{301}", "\u{E9}", "straße", "STRASSE"]

    func seed() -> UInt64 {
        let s = ProcessInfo.processInfo.environment["KURA_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1...UInt64(UInt32.max))
        print("CompiledQueryTests seed \(s) (replay with KURA_SEED=\(s))")
        return s
    }

    func randomValue(_ column: Int, _ rng: inout SplitMix64) -> Value {
        if rng.next() % 8 == 0 { return .null }
        // One value in twelve has another kind than its column's: records are
        // self-describing, and the compiled path must fall back exactly.
        let kind = rng.next() % 12 == 0 ? Int(rng.next() % 6) : column
        switch kind {
        case 0, 5: return .integer(Int64(rng.next() % 41) - 20)
        case 1: return rng.next() % 3 == 0 ? .double(Double(Int64(rng.next() % 41) - 20)) : .double(Double(Int64(rng.next() % 4000) - 2000) / 100)
        case 2: return .text(Self.words[Int(rng.next() % UInt64(Self.words.count))] + (rng.next() % 3 == 0 ? String(rng.next() % 20) : ""))
        case 3: return .bool(rng.next() % 2 == 0)
        default: return .double(Double(Int64(rng.next() % 41) - 20))
        }
    }

    func randomPredicate(_ rng: inout SplitMix64, depth: Int) -> String {
        let r = rng.next() % 12
        if depth < 2 && r < 2 { return "(\(randomPredicate(&rng, depth: depth + 1)) AND \(randomPredicate(&rng, depth: depth + 1)))" }
        if depth < 2 && r < 3 { return "(\(randomPredicate(&rng, depth: depth + 1)) OR \(randomPredicate(&rng, depth: depth + 1)))" }
        if depth < 2 && r < 4 { return "NOT (\(randomPredicate(&rng, depth: depth + 1)))" }
        let ops = ["==", "!=", "<", "<=", ">", ">="]
        func op() -> String { ops[Int(rng.next() % 6)] }
        func mods() -> String { ["", "", "[c]", "[d]", "[cd]", "[n]"][Int(rng.next() % 6)] }
        func num() -> String { ["$I", "$D", String(Int64(rng.next() % 41) - 20), String(Double(Int64(rng.next() % 400) - 200) / 10), "$I + 1", "YES"][Int(rng.next() % 6)] }
        func text() -> String { ["$S", "'" + Self.words[Int(rng.next() % UInt64(Self.words.count))].replacingOccurrences(of: "\r", with: "\\r").replacingOccurrences(of: "\n", with: "\\n") + "'", "$P"][Int(rng.next() % 3)] }
        let column = ["a", "b", "n", "d", "flag"][Int(rng.next() % 5)]
        switch rng.next() % 16 {
        case 0, 1: return "\(column) \(op()) \(num())"
        case 2: return "\(num()) \(op()) \(column)"
        case 3: return "\(column) BETWEEN {\(num()), \(num())}"
        case 4:
            // Short and longer lists (a sorted-set test), with integral and
            // fractional doubles, booleans, huge values, texts and nil.
            if rng.next() % 2 == 0 { return "\(column) IN {\(num()), \(num()), $S, nil}" }
            let extra = ["nil", "$S", "NO", "YES", "-0.0", "2.0", "1e30", "-20", "0.5"]
            let members = (0..<(1 + Int(rng.next() % 12))).map { _ in rng.next() % 3 == 0 ? extra[Int(rng.next() % UInt64(extra.count))] : num() }
            return "\(column) IN {\(members.joined(separator: ", "))}"
        case 5: return ["a == nil", "s != nil", "b == nil", "d != nil", "n == nil"][Int(rng.next() % 5)]
        case 6, 7: return "s \(op())\(mods()) \(text())"
        case 8: return "s \(["BEGINSWITH", "ENDSWITH", "CONTAINS"][Int(rng.next() % 3)])\(mods()) \(text())"
        case 9: return "s LIKE\(mods()) \(["$P", "'a*'", "'?a*'", "'*e'", "'x?y'", "'x*y'", "'*'", "'K*'"][Int(rng.next() % 8)])"
        case 10: return "s MATCHES\(mods()) \(["'a.*'", "'.*e'", "'x.y'", "'(unclosed'"][Int(rng.next() % 4)])"
        case 11:
            if rng.next() % 2 == 0 { return "s IN\(mods()) {\(text()), \(text())}" }
            let members = (0..<(1 + Int(rng.next() % 12))).map { _ in rng.next() % 8 == 0 ? ["nil", "3"][Int(rng.next() % 2)] : text() }
            return "s IN\(mods()) {\(members.joined(separator: ", "))}"
        case 12: return "\(column) \(op()) \(["a", "b", "n"][Int(rng.next() % 3)])"  // two columns: interpreted
        case 13: return "a + 1 \(op()) \(num())"  // arithmetic on a column: interpreted
        case 14: return "s \(op()) \(num())"  // text against a number: errors must agree
        default: return "\(column) \(op()) $MISSING"  // an unset variable: both throw, per row
        }
    }

    /// Random predicates (with bound variables) over random records: the compiled
    /// predicate and the interpreter agree on every row, answers and error codes.
    func testCompiledPredicatesAgreeWithTheInterpreter() throws {
        var rng = SplitMix64(seed: seed())
        try checkAgainstInterpreter(&rng, predicates: 250) { rng in randomPredicate(&rng, depth: 0) }
    }

    /// IN lists (a sorted-set test for numbers and for ASCII texts) agree
    /// with the interpreter: numbers of every kind against integers,
    /// integral and fractional doubles, booleans, huge values and nil;
    /// texts with and without `[c]`/`[d]`, non-ASCII members and rows
    /// (the Kelvin sign is canonically a "K"), mixed lists.
    func testInListsAgreeWithTheInterpreter() throws {
        var rng = SplitMix64(seed: seed())
        try checkAgainstInterpreter(&rng, predicates: 600) { rng in
            let extra = ["nil", "$S", "NO", "YES", "-0.0", "2.0", "1e30", "-20", "0.5", "$I", "$D", "7"]
            let count = 1 + Int(rng.next() % 40)
            if rng.next() % 2 == 0 {
                let column = ["a", "b", "n", "d", "flag"][Int(rng.next() % 5)]
                let members = (0..<count).map { _ in
                    rng.next() % 3 == 0 ? extra[Int(rng.next() % UInt64(extra.count))]
                        : rng.next() % 2 == 0 ? String(Int64(rng.next() % 41) - 20) : String(Double(Int64(rng.next() % 400) - 200) / 10)
                }
                return "\(["", "NOT "][Int(rng.next() % 2)])\(column) IN {\(members.joined(separator: ", "))}"
            }
            let mods = ["", "", "[c]", "[d]", "[cd]", "[n]"][Int(rng.next() % 6)]
            let members = (0..<count).map { _ -> String in
                if rng.next() % 20 == 0 { return ["nil", "3", "$S"][Int(rng.next() % 3)] }
                let w = Self.words[Int(rng.next() % UInt64(Self.words.count))] + (rng.next() % 3 == 0 ? String(rng.next() % 20) : "")
                return "'" + w.replacingOccurrences(of: "\r", with: "\\r").replacingOccurrences(of: "\n", with: "\\n") + "'"
            }
            return "s IN\(mods) {\(members.joined(separator: ", "))}"
        }
    }

    /// Evaluates `predicates` random predicates from `make` on random records
    /// compiled and interpreted, and fails with the first disagreements.
    private func checkAgainstInterpreter(_ rng: inout SplitMix64, predicates: Int, _ make: (inout SplitMix64) -> String) throws {
        let columns = ColumnMap(table: "t", schema: Self.schema)
        var records: [[UInt8]] = []
        for _ in 0..<150 {
            // Some records are shorter than the schema (columns added later read as defaults).
            let width = rng.next() % 5 == 0 ? Int(rng.next() % 6) : 6
            records.append(RecordCodec.encode((0..<width).map { randomValue($0, &rng) }))
        }
        var disagreements: [String] = []
        var tested = 0
        for _ in 0..<predicates {
            let format = make(&rng)
            let predicate: KuraPredicate
            do { predicate = try KuraPredicate(format: format) } catch { XCTFail("\(format): \(error)"); continue }
            var variables: [String: EvaluatedValue] = [
                "I": .scalar(.integer(Int64(rng.next() % 41) - 20)),
                "D": .scalar(.double(Double(Int64(rng.next() % 400) - 200) / 10)),
                "S": .scalar(.text(Self.words[Int(rng.next() % UInt64(Self.words.count))])),
                "P": .scalar(.text(["a*", "*e", "?a*", "K*", "x?y"][Int(rng.next() % 5)])),
            ]
            if rng.next() % 4 == 0 { variables["I"] = .date(Double(Int64(rng.next() % 41) - 20)) }
            let compiled = CompiledPredicate(predicate, columns: columns, variables: variables)
            for record in records {
                tested += 1
                let viaCompiled = Result { () throws(KuraError) -> Bool in try record.withBytes { b throws(KuraError) in try compiled.matches(b) } }
                let viaInterpreter = Result { () throws(KuraError) -> Bool in
                    try record.withBytes { b throws(KuraError) in try predicate.evaluate(with: RowContext(record: b, columns: columns), variables: variables) }
                }
                switch (viaCompiled, viaInterpreter) {
                case (.success(let x), .success(let y)) where x == y: continue
                case (.failure(let x), .failure(let y)) where x.code == y.code: continue
                default:
                    disagreements.append("\(format) on \(try RecordCodec.decode(record)) with \(variables): compiled \(viaCompiled), interpreter \(viaInterpreter)")
                }
            }
        }
        XCTAssertEqual(Array(disagreements.prefix(5)), [], "\(disagreements.count) of \(tested) evaluations disagree")
    }

    /// Prepared queries with bindings return what the same query with the values
    /// substituted returns, with and without indexes.
    func testPreparedQueriesWithBindingsMatchSubstitutedQueries() throws {
        var rng = SplitMix64(seed: seed())
        let db = try Database.inMemory()
        try db.write { tx in
            let t = try tx.createTable("t", schema: Self.schema)
            for _ in 0..<300 {
                try tx.insert([.integer(Int64(rng.next() % 41) - 20), .double(Double(Int64(rng.next() % 400) - 200) / 10),
                               .text(Self.words[Int(rng.next() % UInt64(Self.words.count))]), .bool(rng.next() % 2 == 0),
                               .double(Double(rng.next() % 100)), .integer(Int64(rng.next() % 9))], into: t)
            }
            _ = try tx.createIndex("by_a", on: t, columns: [IndexColumn("a")])
            _ = try tx.createIndex("by_s", on: t, columns: [IndexColumn("s", folded: true)])
        }
        let formats = ["a == $I", "a BETWEEN {$I, $J}", "a >= $I AND s BEGINSWITH[cd] $S", "s CONTAINS $S OR n == $J", "a IN {$I, $J}", "s LIKE[c] $S"]
        for format in formats {
            for sort in [[], [SortKey("a", ascending: false)], [SortKey("s", collation: .caseDiacriticInsensitive), SortKey("n")]] {
                let prepared = try db.prepare(try TableQuery("t", where: format, sort: sort, limit: rng.next() % 2 == 0 ? 7 : nil))
                for _ in 0..<3 {
                    let i = Int64(rng.next() % 41) - 20
                    let bindings: [String: PredicateArgument] = ["I": .integer(i), "J": .integer(i + Int64(rng.next() % 10)),
                                                                 "S": .text(["a", "ca", "Z", "e*", "*"][Int(rng.next() % 5)])]
                    var q = prepared.query
                    q.predicate = try q.predicate?.substituting(bindings)
                    try db.read { tx in
                        let expected = try tx.fetch(q).map(\.rowID)
                        XCTAssertEqual(try tx.fetch(prepared, bindings: bindings).map(\.rowID), expected, "\(format) \(bindings)")
                        XCTAssertEqual(try tx.count(prepared, bindings: bindings), expected.count, "\(format) \(bindings)")
                        // The interpreter, row by row, as the oracle.
                        let oracle = try tx.rows(in: try tx.table("t"))
                        var all: [Int64] = []
                        let columns = ColumnMap(table: "t", schema: Self.schema)
                        while let r = try oracle.next() {
                            let ok = try r.record.withBytes { b throws(KuraError) in try q.predicate!.evaluate(with: RowContext(record: b, columns: columns)) }
                            if ok { all.append(r.rowID) }
                        }
                        XCTAssertEqual(Set(expected).isSubset(of: Set(all)), true, "\(format) \(bindings)")
                        if q.limit == nil { XCTAssertEqual(Set(expected), Set(all), "\(format) \(bindings)") }
                    }
                }
            }
        }
    }

    func makeScored(_ rows: Int, index: Bool) throws -> Database {
        let db = try Database.inMemory()
        try db.write { tx in
            let t = try tx.createTable("t", schema: Self.schema)
            for i in 0..<rows {
                try tx.insert([.integer(Int64(i % 100)), .double(Double(i % 7)), .text("r\(i)"), .bool(i % 2 == 0), .null, .integer(Int64(i % 13))], into: t)
            }
            if index { _ = try tx.createIndex("by_a", on: t, columns: [IndexColumn("a")]) }
        }
        return db
    }

    func access(_ db: Database, _ q: TableQuery) throws -> QueryPlan {
        try db.read { tx in try tx.plan(q, try tx.resolve(q), explaining: false) }
    }

    /// The planner scans when most rows match and searches the index when few do.
    func testPlannerChoosesByEstimatedSelectivity() throws {
        let db = try makeScored(5000, index: true)
        guard case .tableScan = try access(db, try TableQuery("t", where: "a < 90")).access else {
            return XCTFail("a scan is cheaper at 90% selectivity:\n" + (try db.read { try $0.explain(try TableQuery("t", where: "a < 90")) }))
        }
        guard case .index(let i, _, _) = try access(db, try TableQuery("t", where: "a < 3")).access, i.name == "by_a" else {
            return XCTFail("the index is cheaper at 3% selectivity")
        }
        guard case .index = try access(db, try TableQuery("t", where: "a == 42")).access else { return XCTFail("equality on 1%") }
        let text = try db.read { try $0.explain(try TableQuery("t", where: "a < 90")) }
        XCTAssertTrue(text.contains("* table scan") && text.contains("index \"by_a\": about"), text)
        // The estimate is close: 90% of 5000 rows.
        let entries = try db.read { tx in
            let q = try TableQuery("t", where: "a < 90")
            guard case .index(_, let ranges, _) = try QueryPlanner.plan(q, schema: Self.schema, indexes: try tx.indexes(of: "t"), rowCount: 5000, estimate: { _, _ in 0 }).access else {
                throw KuraError(.misuse, "the index plan was not offered")
            }
            return try tx.estimateEntries(try tx.index("by_a"), ranges, total: 5000)
        }
        XCTAssertEqual(entries, 4500, accuracy: 300)
        // Answers are the same whichever path was taken.
        let plain = try makeScored(5000, index: false)
        for f in ["a < 90", "a < 3", "a == 42", "a >= 50 AND n == 3"] {
            let q = try TableQuery("t", where: f)
            XCTAssertEqual(try db.read { try $0.fetch(q).map(\.rowID) }, try plain.read { try $0.fetch(q).map(\.rowID) }, f)
        }
    }

    /// ORDER BY + LIMIT through an index walk stops early and gives the rows a
    /// full sort gives, ties in row-ID order.
    func testOrderByLimitThroughIndexMatchesFullSort() throws {
        let db = try makeScored(3000, index: true)
        let plain = try makeScored(3000, index: false)
        for (format, ascending, limit, offset) in [("a >= 10", false, 25, 0), ("a BETWEEN {20, 40}", true, 40, 5), ("n == 4", false, 60, 3),
                                                    ("TRUEPREDICATE", true, 150, 0), ("TRUEPREDICATE", false, 90, 30)] {
            let q = try TableQuery("t", where: format, sort: [SortKey("a", ascending: ascending)], offset: offset, limit: limit)
            let plan = try access(db, q)
            guard case .index = plan.access, plan.ordered else { return XCTFail("\(format): expected an ordered index walk") }
            XCTAssertLessThan(plan.estimatedCost, 3000, "\(format): the walk should stop near the limit")
            let got = try db.read { try $0.fetch(q).map(\.rowID) }
            let want = try plain.read { try $0.fetch(q).map(\.rowID) }
            XCTAssertEqual(got, want, format)
            XCTAssertEqual(got.count, limit, format)
        }
    }

    /// A prepared query is re-resolved when the schema changes: it picks up an
    /// index created after it, stops using a dropped one, and throws `.notFound`
    /// once its table is gone.
    func testPreparedQueryReplansAfterSchemaChange() throws {
        let db = try makeScored(2000, index: false)
        let prepared = try db.prepare(try TableQuery("t", where: "a == $A"))
        func run() throws -> ([Int64], String) {
            try db.read { tx in (try tx.fetch(prepared, bindings: ["A": 5]).map(\.rowID), try tx.explain(prepared, bindings: ["A": 5])) }
        }
        let (before, plan0) = try run()
        XCTAssertEqual(before.count, 20)
        XCTAssertTrue(plan0.contains("scan table"), plan0)
        try db.write { tx in _ = try tx.createIndex("by_a", on: try tx.table("t"), columns: [IndexColumn("a")]) }
        let (withIndex, plan1) = try run()
        XCTAssertEqual(withIndex, before)
        XCTAssertTrue(plan1.contains("search index \"by_a\""), plan1)
        try db.write { tx in try tx.dropIndex("by_a") }
        let (dropped, plan2) = try run()
        XCTAssertEqual(dropped, before)
        XCTAssertTrue(plan2.contains("scan table") && !plan2.contains("by_a"), plan2)
        try db.write { tx in try tx.dropTable("t") }
        XCTAssertThrowsError(try run()) { XCTAssertEqual(($0 as? KuraError)?.code, .notFound, "\($0)") }
        // A table of the same name made again is a new schema: the query resolves anew.
        try db.write { tx in
            let t = try tx.createTable("t", schema: Self.schema)
            try tx.insert([.integer(5), .null, .null, .null, .null, .integer(1)], into: t)
        }
        XCTAssertEqual(try run().0, [1])
    }
}
