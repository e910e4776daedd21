// A conformance table for the predicate language, written from Apple's Predicate
// Programming Guide ("Predicate Format String Syntax", "Using Predicates") and the
// NSExpression reference (its function list): every comparison operator, option,
// quantifier, arithmetic operator, function, collection operator, set expression and
// the documented examples, each with the answer or the error Foundation gives.
// Kura's decisions where Apple is silent are in PredicateEvaluator.swift's header;
// the rows that rest on them say so.
//
// Each row is answered three ways that must agree: by the in-memory evaluator over
// dictionary objects, by a table query over a row holding the same scalars (the
// engine's row evaluation), and again after formatting and re-parsing the predicate.

import Foundation
import XCTest
@testable import KuraEngine

final class PredicateConformanceTests: XCTestCase {
    enum Expected: CustomStringConvertible {
        case yes, no
        case error(KuraError.Code)
        var description: String {
            switch self {
            case .yes: return "true"
            case .no: return "false"
            case .error(let c): return "error \(c)"
            }
        }
    }

    struct Row {
        let format: String
        let arguments: [PredicateArgument]
        let expected: Expected
        let line: UInt
    }

    /// The evaluated object: scalars (also stored in a table row), plus collections
    /// and a related object for the in-memory rows.
    static let scalars: [String: Value] = [
        "name": .text("Émile Zola"), "city": .text("Paris"), "age": .integer(62), "score": .double(7.5),
        "nick": .null, "active": .bool(true), "note": .text("line one\nline two"),
    ]
    static var object: EvaluatedValue {
        var values = scalars.mapValues { EvaluatedValue.scalar($0) }
        values["tags"] = ["novel", "Paris", "press"]
        values["scores"] = [3, 5, 10]
        values["books"] = [
            .record(["title": "Nana", "year": 1880, "pages": 420]),
            .record(["title": "Germinal", "year": 1885, "pages": 590]),
            .record(["title": "L'Œuvre", "year": 1886, "pages": 480]),
        ]
        values["friend"] = .record(["name": "Cézanne", "age": 67])
        values["lookup"] = .record(["a": "x", "b": "y"])
        return .record(values)
    }

    static let rows: [Row] = {
        var r: [Row] = []
        func t(_ f: String, _ e: Expected, _ args: PredicateArgument..., line: UInt = #line) { r.append(Row(format: f, arguments: args, expected: e, line: line)) }
        // Basic comparisons (every spelling).
        t("age = 62", .yes); t("age == 62", .yes); t("age != 61", .yes); t("age <> 62", .no)
        t("age > 61", .yes); t("age >= 62", .yes); t("age => 62", .yes); t("age < 63", .yes)
        t("age <= 62", .yes); t("age =< 61", .no); t("score == 7.5", .yes); t("age == 62.0", .yes)
        t("age BETWEEN {60, 62}", .yes); t("age BETWEEN {63, 70}", .no); t("1 BETWEEN {0, 33}", .yes)
        t("name BETWEEN {'E', 'F'}", .no); t("city BETWEEN {'P', 'Q'}", .yes)
        // Boolean value predicates and compounds.
        t("TRUEPREDICATE", .yes); t("FALSEPREDICATE", .no)
        t("age > 60 AND city == 'Paris'", .yes); t("age > 60 && city == 'Rome'", .no)
        t("age > 70 OR city == 'Paris'", .yes); t("age > 70 || city == 'Rome'", .no)
        t("NOT age > 70", .yes); t("! (age > 60)", .no); t("active", .yes); t("active == YES", .yes)
        t("active == TRUE", .yes); t("active == NO", .no); t("active == 1", .yes)
        // String comparisons and options.
        t("name BEGINSWITH 'Ém'", .yes); t("name BEGINSWITH 'Em'", .no); t("name BEGINSWITH[d] 'Em'", .yes)
        t("name BEGINSWITH[c] 'émile'", .yes); t("name BEGINSWITH[cd] 'EMILE'", .yes)
        t("name ENDSWITH 'Zola'", .yes); t("name ENDSWITH[c] 'ZOLA'", .yes); t("name ENDSWITH ''", .no)
        t("name CONTAINS 'le Z'", .yes); t("name CONTAINS[cd] 'MILE'", .yes); t("name CONTAINS 'x'", .no)
        t("name LIKE 'Émile*'", .yes); t("name LIKE '?mile Zola'", .yes); t("name LIKE 'Emile*'", .no)
        t("name LIKE[cd] 'emile*'", .yes); t("name LIKE '*'", .yes); t("city LIKE 'P?r*s'", .yes)
        t("name MATCHES 'É.* Z.*'", .yes); t("name MATCHES 'Zola'", .no); t("name MATCHES[c] 'émile zola'", .yes)
        t("name MATCHES[cd] 'emile zola'", .yes); t("name ==[c] 'ÉMILE ZOLA'", .yes)
        t("name ==[d] 'Emile Zola'", .yes); t("name ==[cd] 'emile zola'", .yes); t("name == 'emile zola'", .no)
        t("name ==[n] 'Émile Zola'", .yes); t("name ==[l] 'Émile Zola'", .yes)
        // MATCHES with Apple's ICU flags: `.` crosses line breaks, ^ $ at lines, whole string.
        t("note MATCHES 'line one.line two'", .yes); t("note MATCHES '^line one$\\n^line two$'", .yes)
        t("note MATCHES 'line one'", .no); t("note MATCHES '('", .error(.invalidArgument))
        // String constants, variables and wildcards (Apple's "%K like '%@'" example:
        // the quoted '%@' is literal text and the unused argument is ignored).
        t("%K like '%@'", .no, "name", "Émile Zola"); t("%K like %@", .yes, "name", "Émile Zola")
        t("SELF.name like[c] %@", .yes, "émile*zola"); t("%K == %@", .yes, "city", "Paris")
        t("%K BEGINSWITH %@ AND %K > %d", .yes, "city", "Pa", "age", 60)
        // Null.
        t("nick == nil", .yes); t("nick == NULL", .yes); t("nick != nil", .no); t("nick BEGINSWITH 'a'", .no)
        t("nick < 5", .no); t("nick MATCHES '.*'", .no); t("nick IN {NULL}", .yes); t("missing == nil", .yes)
        // Ordering kinds without an order between them is an error (Foundation raises).
        t("name < 5", .error(.typeMismatch)); t("age > 'x'", .error(.typeMismatch))
        t("age BETWEEN {'a', 'z'}", .error(.typeMismatch))
        // Aggregate operations.
        t("ANY tags == 'Paris'", .yes); t("SOME tags BEGINSWITH 'p'", .yes); t("ALL tags.@count > 0", .yes)
        t("ALL scores > 2", .yes); t("ALL scores > 3", .no); t("NONE scores > 10", .yes); t("NONE scores == 5", .no)
        t("ANY books.year > 1885", .yes); t("ALL books.pages > 400", .yes); t("NONE books.title == 'Nana'", .no)
        t("city IN {'Ben', 'Melissa', 'Paris'}", .yes); t("city IN {'Ben', 'Melissa'}", .no)
        t("city IN[c] {'PARIS'}", .yes); t("'Pa' IN city", .yes); t("tags CONTAINS 'press'", .yes)
        t("city CONTAINS 'ari'", .yes); t("'x' IN lookup", .yes); t("'a' IN lookup", .no)
        t("lookup CONTAINS 'y'", .yes); t("5 IN 5", .error(.typeMismatch)); t("age CONTAINS 6", .error(.typeMismatch))
        t("friend IN {1}", .no); t("67 IN friend", .yes); t("3 IN friend", .no)
        // Index expressions.
        t("tags[FIRST] == 'novel'", .yes); t("tags[LAST] == 'press'", .yes); t("tags[SIZE] == 3", .yes)
        t("tags[1] == 'Paris'", .yes); t("tags[7] == nil", .yes); t("lookup['a'] == 'x'", .yes)
        // Key paths and collection operators.
        t("friend.name == 'Cézanne'", .yes); t("friend.age - age == 5", .yes)
        t("books.@count == 3", .yes); t("scores.@sum == 18", .yes); t("scores.@avg == 6", .yes)
        t("scores.@min == 3", .yes); t("scores.@max == 10", .yes); t("books.@max.year == 1886", .yes)
        t("books.@sum.pages == 1490", .yes); t("books.@unionOfObjects.year == {1880, 1885, 1886}", .yes)
        t("{1, 1, 2}.@distinctUnionOfObjects == {1, 2}", .yes); t("books.@avg.pages > 496", .yes)
        t("scores.@median == 5", .error(.unsupported))
        // Arithmetic.
        t("1 + 2 == 3", .yes); t("age - 2 == 60", .yes); t("age * 2 == 124", .yes); t("age / 5 == 12", .yes)
        t("age / 5.0 == 12.4", .yes); t("2 ** 10 == 1024", .yes); t("-age == -62", .yes); t("1 / 0 == 1", .error(.invalidArgument))
        t("5 & 3 == 1", .yes); t("5 | 3 == 7", .yes); t("5 ^ 3 == 6", .yes); t("1 << 4 == 16", .yes)
        t("256 >> 4 == 16", .yes); t("~0 == -1", .yes); t("name + 1 == 2", .error(.typeMismatch))
        // NSExpression's functions, by name and by selector.
        t("sum({1, 2, 3}) == 6", .yes); t("sum:({1, 2, 3}) == 6", .yes); t("count:({1, 2, 3}) == 3", .yes)
        t("min:({4, 2, 9}) == 2", .yes); t("max:({4, 2, 9}) == 9", .yes); t("average:({1, 2, 3}) == 2", .yes)
        t("median:({1, 9, 3}) == 3", .yes); t("mode:({1, 2, 2}) == {2}", .yes); t("stddev:({2, 4, 4, 4, 5, 5, 7, 9}) == 2", .yes)
        t("add:to:(2, 3) == 5", .yes); t("from:subtract:(5, 3) == 2", .yes); t("multiply:by:(4, 3) == 12", .yes)
        t("divide:by:(7, 2) == 3", .yes); t("divide:by:(7.0, 2) == 3.5", .yes); t("modulus:by:(10, 3) == 1", .yes)
        t("modulus:by:(-10, 3) == -1", .yes); t("modulus:by:(7.5, 2) == 1.5", .yes); t("modulus:by:(1, 0) == 0", .error(.invalidArgument))
        t("sqrt:(16) == 4", .yes); t("log:(100) == 2", .yes); t("ln:(1) == 0", .yes); t("raise:toPower:(2, 3) == 8", .yes)
        t("exp:(0) == 1", .yes); t("ceiling:(1.2) == 2", .yes); t("floor:(1.8) == 1", .yes); t("abs:(-3) == 3", .yes)
        t("trunc:(-1.5) == -1", .yes); t("uppercase:(city) == 'PARIS'", .yes); t("lowercase:(city) == 'paris'", .yes)
        t("bitwiseAnd:with:(5, 3) == 1", .yes); t("bitwiseOr:with:(5, 3) == 7", .yes); t("bitwiseXor:with:(5, 3) == 6", .yes)
        t("leftshift:by:(1, 4) == 16", .yes); t("rightshift:by:(256, 4) == 16", .yes); t("onesComplement:(0) == -1", .yes)
        t("noindex:(age) == 62", .yes); t("random() >= 0 AND random() < 1", .yes); t("random:({7, 7}) == 7", .yes)
        t("random:({}) == nil", .yes); t("now() > CAST(0, 'NSDate')", .yes)
        t("castObject:toType:('42', 'NSNumber') == 42", .yes); t("objectFrom:withIndex:({4, 5}, 1) == 5", .yes)
        t("distanceToLocation:fromLocation:(a, b) == 0", .error(.unsupported))
        // FUNCTION with selectors that need no Objective-C.
        t("FUNCTION(city, 'uppercaseString') == 'PARIS'", .yes); t("FUNCTION(city, 'lowercaseString') == 'paris'", .yes)
        t("FUNCTION(tags, 'count') == 3", .yes); t("FUNCTION(tags, 'firstObject') == 'novel'", .yes)
        t("FUNCTION(tags, 'lastObject') == 'press'", .yes); t("FUNCTION(age, 'stringValue') == '62'", .yes)
        t("FUNCTION('2.5', 'doubleValue') == 2.5", .yes); t("FUNCTION('2.5', 'intValue') == 2", .yes)
        t("FUNCTION(tags, 'objectAtIndex:', 1) == 'Paris'", .yes); t("FUNCTION(friend, 'valueForKey:', 'age') == 67", .yes)
        t("FUNCTION('a', 'uppercase') == 'A'", .yes); t("FUNCTION(a, 'pow:', 3) == 8", .error(.unsupported))
        // CAST.
        t("CAST('62', 'NSNumber') == age", .yes); t("CAST(age, 'NSString') == '62'", .yes)
        t("CAST(0, 'NSDate') < now()", .yes); t("CAST(a, 'NSURL') == 1", .error(.unsupported))
        // Set expressions.
        t("{1, 2} UNION {2, 3} == {1, 2, 3}", .yes); t("{1, 2, 3} INTERSECT {2, 3, 4} == {2, 3}", .yes)
        t("{1, 2, 3} MINUS {2} == {1, 3}", .yes); t("(tags UNION {'x'}).@count == 4", .yes)
        t("'Paris' IN tags INTERSECT {'Paris', 'Rome'}", .yes); t("({1} UNION {2} UNION {1, 3})[SIZE] == 3", .yes)
        t("{1} UNION 2 == {1, 2}", .error(.typeMismatch)); t("lookup UNION {'z'} == {'x', 'y', 'z'}", .yes)
        // SUBQUERY: only the variable names the element; SELF is the collection.
        t("SUBQUERY(books, $b, $b.year > 1880).@count == 2", .yes)
        t("SUBQUERY(books, $b, $b.year > 1880 AND $b.pages < 500).@count == 1", .yes)
        t("SUBQUERY(books, $b, SELF.@count == 3).@count == 3", .yes)
        t("SUBQUERY(books, $b, $b.title BEGINSWITH 'G').@count != 0", .yes)
        // Unsupported operators.
        t("city UTI-CONFORMS-TO 'public.text'", .error(.unsupported)); t("city UTI-EQUALS 'public.text'", .error(.unsupported))
        t("ANYKEY == 'x'", .error(.unsupported)); t("SELF isKindOfClass: %@", .error(.unsupported), "NSString")
        return r
    }()

    func answer(_ body: () throws -> Bool) -> Expected {
        do { return try body() ? .yes : .no } catch let e as KuraError { return .error(e.code) } catch { return .error(.misuse) }
    }

    func same(_ a: Expected, _ b: Expected) -> Bool { a.description == b.description }

    func testConformanceTableInMemoryAndAfterReparsing() {
        let object = Self.object
        for row in Self.rows {
            let got = answer {
                let p = try KuraPredicate(format: row.format, arguments: row.arguments)
                let first = try p.evaluate(with: object)
                let again = try KuraPredicate(format: p.predicateFormat).evaluate(with: object)
                XCTAssertEqual(first, again, "\(row.format) re-parsed from \(p.predicateFormat)", line: row.line)
                return first
            }
            XCTAssertTrue(same(got, row.expected), "\(row.format): got \(got), expected \(row.expected)", line: row.line)
        }
    }

    /// The rows that read only scalars, answered by a table query over one row:
    /// the engine's row evaluation must give the same answer (or error).
    func testConformanceTableThroughTheEngine() throws {
        let db = try Database.inMemory()
        let names = Self.scalars.keys.sorted()
        let schema = try TableSchema(names.map { n -> ColumnDefinition in
            switch Self.scalars[n]! {
            case .text: return ColumnDefinition(n, .text)
            case .integer: return ColumnDefinition(n, .integer)
            case .double: return ColumnDefinition(n, .double)
            case .bool: return ColumnDefinition(n, .bool)
            default: return ColumnDefinition(n, .text)
            }
        })
        try db.write { tx in
            let t = try tx.createTable("t", schema: schema)
            try tx.insert(names.map { Self.scalars[$0]! }, into: t)
        }
        let collectionKeys = ["tags", "scores", "books", "friend", "lookup", "missing", "SELF", "a,", "(a,", "a ==", "isKindOfClass"]
        var checked = 0
        for row in Self.rows where !collectionKeys.contains(where: { row.format.contains($0) }) {
            guard let p = try? KuraPredicate(format: row.format, arguments: row.arguments) else { continue }
            let got = answer { try db.read { tx in try tx.count(TableQuery("t", where: p)) == 1 } }
            XCTAssertTrue(same(got, row.expected), "engine: \(row.format): got \(got), expected \(row.expected)", line: row.line)
            checked += 1
        }
        XCTAssertGreaterThan(checked, 150)
    }

    // MARK: Collation

    func testCollationsOrderTextAsSortDescriptorsDo() {
        let words = ["Zed", "émile", "Emile", "Émile", "emile", "apple", "File 10", "File 9", "file 9", "Zoë"]
        func sorted(_ c: TextCollation) -> [String] {
            words.sorted { c.compare($0, $1) < 0 }
        }
        XCTAssertEqual(sorted(.binary), ["Emile", "File 10", "File 9", "Zed", "Zoë", "apple", "emile", "file 9", "Émile", "émile"])
        XCTAssertEqual(sorted(.localized), ["apple", "emile", "Emile", "émile", "Émile", "File 10", "file 9", "File 9", "Zed", "Zoë"])
        XCTAssertEqual(sorted(.localizedStandard), ["apple", "emile", "Emile", "émile", "Émile", "file 9", "File 9", "File 10", "Zed", "Zoë"])
        XCTAssertEqual(TextCollation.caseInsensitive.compare("Emile", "emile"), 0)
        XCTAssertLessThan(TextCollation.caseInsensitive.compare("emile", "Émile"), 0)
        XCTAssertEqual(TextCollation.caseDiacriticInsensitive.compare("Émile", "emile"), 0)
        XCTAssertEqual(TextCollation.diacriticInsensitive.compare("Émile", "Emile"), 0)
        XCTAssertLessThan(TextCollation.localized.compare("Émile", "Zed"), 0)
        XCTAssertEqual(TextCollation.localizedStandard.compare("a007", "a7").signum(), -1)  // tie by value, then binary
        // Non-text values ignore the collation.
        XCTAssertLessThan(TextCollation.localized.compare(.integer(2), .integer(10)), 0)
        XCTAssertLessThan(TextCollation.localized.compare(.null, .text("a")), 0)
    }

    /// The engine's sort, with and without a folded index, follows the key's
    /// collation; the folded index gives the [cd] order by an index walk.
    func testEngineSortHonoursCollationOnEveryPath() throws {
        let names = ["Zed", "émile", "Emile", "Émile", "emile", "apple", "File 10", "File 9", "file 9", "Zoë", "ÉMILE"]
        let db = try Database.inMemory()
        try db.write { tx in
            let t = try tx.createTable("p", schema: try TableSchema([ColumnDefinition("name", .text)]))
            for n in names { try tx.insert([.text(n)], into: t) }
        }
        func run(_ collation: TextCollation, ascending: Bool, limit: Int? = nil) throws -> [String] {
            try db.read { tx in
                try tx.fetch(TableQuery("p", sort: [SortKey("name", ascending: ascending, collation: collation)], limit: limit)).map {
                    guard case .text(let s) = $0.values[0] else { return "?" }
                    return s
                }
            }
        }
        func expected(_ collation: TextCollation, ascending: Bool) -> [String] {
            // Ties keep row-ID (insertion) order in both directions.
            let indexed = names.enumerated().map { ($0.offset, $0.element) }
            return indexed.sorted { a, b in
                var c = collation.compare(a.1, b.1)
                if !ascending { c = -c }
                return c != 0 ? c < 0 : a.0 < b.0
            }.map(\.1)
        }
        var unindexed: [TextCollation: [String]] = [:]
        for c in TextCollation.allCases {
            for asc in [true, false] {
                let got = try run(c, ascending: asc)
                XCTAssertEqual(got, expected(c, ascending: asc), "\(c) ascending \(asc)")
                if asc { unindexed[c] = got }
            }
        }
        let emile = try run(.localized, ascending: true)
        let e = emile.firstIndex(of: "Emile")!, é = emile.firstIndex(of: "Émile")!, z = emile.firstIndex(of: "Zed")!
        XCTAssertLessThan(abs(e - é), 4)
        XCTAssertLessThan(é, z)
        try db.write { tx in
            _ = try tx.createIndex("p_name_folded", on: try tx.table("p"), columns: [IndexColumn("name", folded: true)])
        }
        for c in TextCollation.allCases {
            for asc in [true, false] {
                for limit in [nil, 4] {
                    let got = try run(c, ascending: asc, limit: limit)
                    let want = expected(c, ascending: asc)
                    XCTAssertEqual(got, limit.map { Array(want.prefix($0)) } ?? want, "indexed \(c) ascending \(asc) limit \(String(describing: limit))")
                }
            }
        }
        let plan = try db.read { tx in try tx.explain(TableQuery("p", sort: [SortKey("name", collation: .caseDiacriticInsensitive)], limit: 3)) }
        XCTAssertTrue(plan.contains("walk index \"p_name_folded\""), plan)
        let notWalked = try db.read { tx in try tx.explain(TableQuery("p", sort: [SortKey("name", collation: .localized)], limit: 3)) }
        XCTAssertFalse(notWalked.contains("walk index"), notWalked)
    }

    // MARK: Regressions

    /// Regression (RowContext read a malformed record's column count as zero, so a
    /// predicate silently saw column defaults): a query over a row whose record does
    /// not decode must throw `.corrupt` naming the table, row and page.
    func testMalformedRecordMakesAQueryThrow() throws {
        let fs = MemoryFileSystem()
        var options = Database.Options()
        options.fileSystem = fs
        options.durability = .normal
        let path = "/malformed.kura"
        let marker = "MARKER-ROW-0001-MARKER"
        var db = try Database(path: path, options: options)
        try db.write { tx in
            let t = try tx.createTable("t", schema: try TableSchema([ColumnDefinition("name", .text), ColumnDefinition("age", .integer)]))
            try tx.insert([.text(marker), .integer(7)], into: t)
        }
        db.close()
        var bytes = try XCTUnwrap(fs.contents(of: path))
        let record = RecordCodec.encode([.text(marker), .integer(7)])
        let at = try XCTUnwrap(bytes.firstRange(of: record)?.lowerBound, "the record is not in the file")
        bytes[at] = 0x7F  // header size far past the record's end
        let page = UInt32(at / 4096) + 1
        let base = Int(page - 1) * 4096
        let sum = bytes.withUnsafeBytes { Checksum.xxh64($0.baseAddress! + base, count: 4096 - 8, seed: UInt64(page)) }
        withUnsafeBytes(of: sum.littleEndian) { for k in 0..<8 { bytes[base + 4088 + k] = $0[k] } }
        fs.setContents(of: path, to: bytes)
        db = try Database(path: path, options: options)
        defer { db.close() }
        XCTAssertThrowsError(try db.read { tx in try tx.count(TableQuery("t", where: try KuraPredicate(format: "age == 0"))) }) { error in
            guard let e = error as? KuraError else { return XCTFail("\(error)") }
            XCTAssertEqual(e.code, .corrupt, "\(e)")
            XCTAssertTrue(e.message.contains("\"t\"") && e.message.contains("row 1"), e.message)
            XCTAssertEqual(e.page, page)
        }
    }
}
