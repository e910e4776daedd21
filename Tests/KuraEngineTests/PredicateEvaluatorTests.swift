// Tests for predicate evaluation: NSPredicate's in-memory semantics for literals,
// arithmetic, functions, string operators with [c]/[d], LIKE, MATCHES, null
// handling, collections, quantifiers, subqueries and collection operators, plus the
// shared helpers (ValueOrdering, TextFolding, LikePattern). Expected answers follow
// Apple's documented semantics (see PredicateEvaluator.swift's header).

import XCTest
@testable import KuraEngine

final class PredicateEvaluatorTests: XCTestCase {
    /// A person with scalars, a to-one relationship, to-many relationships and a date.
    private let person = PredicateRecord([
        "name": "Café Noir",
        "first": "Zoë",
        "age": 30,
        "height": 1.75,
        "nick": nil,
        "isHidden": true,
        "tags": ["red", "Green", "blue"],
        "scores": [3, 5, 10],
        "data": .scalar(.blob([1, 2, 3])),
        "born": .date(-100),
        "kids": [
            .record(["name": "Ann", "age": 5, "pets": [.record(["name": "Rex"])]]),
            .record(["name": "Bob", "age": 12, "pets": [.record(["name": "Tom"]), .record(["name": "Kit"])]]),
            .record(["name": "Cid", "age": 17, "pets": []]),
        ],
        "owner": .record(["name": "Ann", "address": .record(["city": "Oslo"])], identity: .integer(42)),
    ], identity: .integer(1))

    private func check(_ format: String, _ expected: Bool, _ args: PredicateArgument...,
                       object: EvaluatedValue? = nil, variables: [String: EvaluatedValue] = [:],
                       file: StaticString = #filePath, line: UInt = #line) {
        do {
            let p = try KuraPredicate(format: format, arguments: args)
            let result = try p.evaluate(with: object ?? .object(person), variables: variables)
            XCTAssertEqual(result, expected, format, file: file, line: line)
        } catch {
            XCTFail("\(format): \(error)", file: file, line: line)
        }
    }

    private func checkThrows(_ format: String, _ code: KuraError.Code, _ args: PredicateArgument...,
                             variables: [String: EvaluatedValue] = [:], file: StaticString = #filePath, line: UInt = #line) {
        do {
            let p = try KuraPredicate(format: format, arguments: args)
            let r = try p.evaluate(with: person, variables: variables)
            XCTFail("\(format) evaluated to \(r), expected \(code)", file: file, line: line)
        } catch {
            XCTAssertEqual(error.code, code, "\(format): \(error)", file: file, line: line)
        }
    }

    // MARK: Literals and arithmetic

    func testLiteralComparisons() {
        check("1 + 2 > 2", true)
        check("1 == 1.0", true)
        check("TRUE == 1", true)
        check("YES == 2", false)
        check("FALSE == 0", true)
        check("'1' == 1", false)
        check("NULL == NULL", true)
        check("NULL == 0", false)
        check("NULL != 0", true)
        checkThrows("1 < 'a'", .typeMismatch)
        check("'a' < 'b'", true)
        check("'B' < 'a'", true)
        check("'B' <[c] 'a'", false)
        check("{1, 2} == {1, 2}", true)
        check("{1, 2} == {2, 1}", false)
        check("5 BETWEEN {1, 5}", true)
        check("0 BETWEEN {1, 5}", false)
        check("'abc' BETWEEN {'abb', 'abd'}", true)
        check("2 IN {1, 2}", true)
        check("NULL IN {NULL}", true)
        check("3 IN NULL", false)
        check("{1, 2} CONTAINS 2", true)
        check("{'b', 'c'} CONTAINS 'a'", false)
        check("NOT {'b', 'c'} CONTAINS 'a'", true)
        check("!(1 < 0)", true)
        check("(1 < 0) && (1 > 0)", false)
        check("(1 < 0) || TRUEPREDICATE", true)
        check("FALSEPREDICATE", false)
        check("9007199254740993 > 9007199254740992.0", true)
        check("0.1 + 0.2 > 0.3", true)
    }

    func testArithmetic() {
        check("1 + 2 == 3", true)
        // Issue 16: integers divide as integers (NSExpression's divide:by:), truncating toward zero.
        check("7 / 2 == 3", true)
        check("-7 / 2 == -3", true)
        check("7.0 / 2 == 3.5", true)
        check("7 / 2.0 == 3.5", true)
        check("-9223372036854775808 / -1 > 9223372036854775807", true)
        checkThrows("1 / 0 == 0", .invalidArgument)
        check("1.0 / 0 > 9223372036854775807", true)
        check("2 ** 10 == 1024", true)
        check("2 ** 0.5 > 1.41 AND 2 ** 0.5 < 1.42", true)
        check("-2 ** 2 == 4", true)
        check("10 - 2 - 3 == 5", true)
        check("2 + 3 * 4 == 14", true)
        check("(2 + 3) * 4 == 20", true)
        check("9223372036854775807 + 1 > 9223372036854775807", true)
        check("9223372036854775807 * 2 == 18446744073709551614.0", true)
        check("-9223372036854775808 - 1 < -9223372036854775807", true)
        check("-(-9223372036854775808) > 0", true)
        check("abs(-9223372036854775808) > 0", true)
        check("5 & 3 == 1", true)
        check("5 | 3 == 7", true)
        check("5 ^ 3 == 6", true)
        check("1 << 4 == 16", true)
        check("256 >> 4 == 16", true)
        check("~0 == -1", true)
        check("1 << 200 == 0", true)
        check("6.0 & 3 == 2", true)
        check("age + 94 < 130", true)
        check("nick + 1 == nil", true)
        check("$a * 3 == 6.0", true, variables: ["a": 2])
        check("$a ** 3 == 8.0", true, variables: ["a": 2])
        check("($a + 1) ** 3 == 8.0", true, variables: ["a": 1])
        check("$a / 2.5 == 2", true, variables: ["a": 5])
        check("born + 100 == CAST(0, 'NSDate')", true)
        check("CAST(0, 'NSDate') - born == 100", true)
        checkThrows("name + 'x' == 'y'", .typeMismatch)
        checkThrows("tags * 2 == 1", .typeMismatch)
        checkThrows("1.5 & 1 == 1", .typeMismatch)
        checkThrows("-name == 1", .typeMismatch)
    }

    func testFunctions() {
        check("sqrt(16) == 4", true)
        check("log(1000) == 3", true)
        check("ln(1) == 0", true)
        check("exp(0) == 1", true)
        check("floor(2.7) == 2", true)
        check("ceiling(2.1) == 3", true)
        check("abs(-3) == 3", true)
        check("trunc(-2.7) == -2", true)
        check("floor(7) == 7", true)
        check("sum({1, 2, 3.5}) == 6.5", true)
        check("sum({9223372036854775807, 1}) > 9223372036854775807", true)
        check("count({1, 2, NULL}) == 3", true)
        check("min({3, 1, 2}) == 1", true)
        check("max({3, 1, 2}) == 3", true)
        check("min(3, 1, 2) == 1", true)
        check("max({'pear', 'apple'}) == 'pear'", true)
        check("average({1, 2, 3, 4}) == 2.5", true)
        check("median({5, 1, 3}) == 3", true)
        check("median({4, 1, 3, 2}) == 2.5", true)
        check("mode({1, 2, 2, 3}) == {2}", true)
        check("mode({1, 1.0, 2}) == {1}", true)
        check("stddev({2, 4, 4, 4, 5, 5, 7, 9}) == 2", true)
        check("average({}) == nil", true)
        check("sum(scores) == 18", true)
        check("max(scores) == 10", true)
        check("lowercase('ÀB') == 'àb'", true)
        check("uppercase('straße') == 'STRASSE'", true)
        check("uppercase(nick) == nil", true)
        check("FUNCTION('a', 'uppercase') == 'A'", true)
        check("now() > CAST(700000000, 'NSDate')", true)
        check("CAST('12', 'NSNumber') == 12", true)
        check("CAST('1.5', 'NSNumber') == 1.5", true)
        check("CAST(12, 'NSString') == '12'", true)
        check("CAST(1.5, 'NSString') == '1.5'", true)
        check("CAST(born, 'NSNumber') == -100", true)
        check("CAST(YES, 'NSNumber') == 1", true)
        check("CAST('0102', 'NSData') == %@", true, .blob([1, 2]))
        checkThrows("sqrt(name) == 1", .typeMismatch)
        checkThrows("lowercase(age) == 'x'", .typeMismatch)
        checkThrows("sum({1, 'a'}) == 1", .typeMismatch)
        checkThrows("CAST(tags, 'NSNumber') == 1", .typeMismatch)
    }

    // MARK: Strings

    func testStringOperatorsWithFolding() {
        check("'HELLO' CONTAINS[cd] 'll'", true)
        check("'HELLO' ENDSWITH 'llo'", false)
        check("'HELLO' ENDSWITH[cd] 'llo'", true)
        check("'HELLO' LIKE[cd] 'hello'", true)
        check("'Hello' BEGINSWITH[cd] 'he'", true)
        check("'hello' BEGINSWITH 'he'", true)
        check("'hello' ENDSWITH 'llo'", true)
        check("'Café' ==[cd] 'CAFE'", true)
        check("'Café' ==[c] 'CAFE'", false)
        check("'Café' ==[c] 'CAFÉ'", true)
        check("'Café' ==[d] 'Cafe'", true)
        check("'Café' ==[d] 'cafe'", false)
        check("'Café' == 'CAFE'", false)
        check("'Cafe\\u0301' == 'Café'", true)
        check("'Ångström' LIKE[cd] 'angstrom'", true)
        check("'Straße' ==[c] 'STRASSE'", true)
        check("'Øre' ==[d] 'Ore'", true)
        check("'ΣΊΣΥΦΟΣ' ==[cd] 'σισυφος'", true)
        check("'naïve' CONTAINS[d] 'ive'", true)
        check("'Zoë' <[d] 'Zoe'", false)
        check("name BEGINSWITH[cd] 'cafe'", true)
        check("name ENDSWITH[c] 'NOIR'", true)
        check("name CONTAINS 'é N'", true)
        check("first ==[cd] 'ZOE'", true)
        check("first IN[cd] {'zoe', 'x'}", true)
    }

    func testEmptyAndNullStrings() {
        // Foundation never matches an empty or null string with BEGINSWITH, ENDSWITH,
        // CONTAINS (radar 20626872; realm-swift PR 5200).
        check("'abc' CONTAINS ''", false)
        check("'abc' BEGINSWITH ''", false)
        check("'abc' ENDSWITH[c] ''", false)
        check("'' IN 'abc'", false)
        check("'b' IN 'abc'", true)
        check("'BBB' IN 'AABBBAA'", true)
        check("%@ IN %@", true, "BBB", "AABBBAA")
        check("name CONTAINS[c] NULL", false)
        check("name LIKE NULL", false)
        check("NOT name LIKE NULL", true)
        let strings: [EvaluatedValue] = ["Hi", nil, ""]
        let p = try? KuraPredicate(format: "self contains ''")
        XCTAssertEqual(strings.filter { (try? p?.evaluate(with: $0)) == true }.count, 0)
    }

    func testLike() {
        check("'prefix-middle-suffix' LIKE 'prefix*suffix'", true)
        check("'abc' LIKE 'a?c'", true)
        check("'abc' LIKE 'a?'", false)
        check("'abc' LIKE '*'", true)
        check("'' LIKE '*'", true)
        check("'x' LIKE ''", false)
        check("'a*c' LIKE 'a\\\\*c'", true)
        check("'abc' LIKE 'a\\\\*c'", false)
        check("'aXbXc' LIKE '*X*X*'", true)
        check("'aaa' LIKE '*a*a*a*a*'", false)
        check("'🇳🇴x' LIKE '?x'", true)
        check("SELF like[c] 'prefix*suffix'", true, object: "PREFIX and SUFFIX")
        check("SELF LIKE %@", true, "a*", object: "abc")
    }

    func testMatches() {
        check("'heo' MATCHES 'he[l]*o'", true)
        check("'hello' MATCHES 'he'", false)
        check("'hello' MATCHES 'h.*|x'", true)
        check("'ab' MATCHES 'a|ab'", true)
        check("'iPhoneXXXXXXXXXXXXXn' MATCHES 'i\\w{18}n'", true)
        check("'HELLO' MATCHES[c] 'hel+o'", true)
        check("'Héllo' MATCHES[d] 'Hel+o'", true)
        // Issue 16: Apple's ICU flags: `.` matches a line break, ^ and $ match at
        // line boundaries, and the whole string must still match.
        check("'a\\nb' MATCHES 'a.b'", true)
        check("'a\\nb' MATCHES 'a$\\n^b'", true)
        check("'a\\nb' MATCHES 'a$'", false)
        check("'a\\nb' MATCHES '^b'", false)
        check("name MATCHES '.*Noir'", true)
        check("age MATCHES '30'", false)
        checkThrows("name MATCHES '('", .invalidArgument)
    }

    // MARK: Nulls and mismatched types

    func testNullSemantics() {
        check("nick == nil", true)
        check("nick == NULL", true)
        check("nick != 'a'", true)
        check("nick < 5", false)
        check("nick >= 5", false)
        check("nick BEGINSWITH 'a'", false)
        check("NOT nick BEGINSWITH 'a'", true)
        check("nick BETWEEN {1, 2}", false)
        check("nick LIKE '*'", false)
        check("nick MATCHES '.*'", false)
        check("nick CONTAINS[c] NULL", false)
        check("nick IN {NULL}", true)
        check("missing == nil", true)
        check("missing.deeper == nil", true)
        check("age != nil", true)
    }

    /// Issue 16: ordering values of kinds with no order between them (text and a
    /// number, ...) is an error naming both, as Foundation raises; it was `false`.
    func testIncomparableTypesThrowWhenOrdered() {
        checkThrows("name > 5", .typeMismatch)
        checkThrows("name < 5", .typeMismatch)
        checkThrows("age > '5'", .typeMismatch)
        checkThrows("age BETWEEN {'1', '5'}", .typeMismatch)
        checkThrows("tags > 1", .typeMismatch)
        checkThrows("owner < 1", .typeMismatch)
        checkThrows("ANY tags < 5", .typeMismatch)
        check("nick < 5", false)
        check("age < nil", false)
        check("CAST('nan', 'NSNumber') < 1", false)
        check("born < 0", true)
        check("age BEGINSWITH '3'", false)
        check("data BEGINSWITH %@", true, .blob([1, 2]))
        check("data ENDSWITH %@", true, .blob([3]))
        check("data CONTAINS %@", true, .blob([2, 3]))
        check("data == %@", true, .blob([1, 2, 3]))
        check("data < %@", true, .blob([1, 3]))
    }

    // MARK: Objects, collections and quantifiers

    func testKeyPathsAndObjects() {
        check("age == 30", true)
        check("isHidden", true)
        check("isHidden == YES", true)
        check("isHidden == 1", true)
        check("height > 1.7 AND height < 1.8", true)
        check("owner.name == 'Ann'", true)
        check("owner.address.city == 'Oslo'", true)
        check("owner == 42", true)
        check("owner != nil", true)
        check("SELF == %@", true, 1)
        check("SELF IN {1, 5}", true)
        check("SELF == owner", false)
        check("born < CAST(0, 'NSDate')", true)
        check("born == CAST(-100, 'NSDate')", true)
        check("born < 0", true)
        check("born BETWEEN %@", true, [.date(secondsSinceReferenceDate: -200), .date(secondsSinceReferenceDate: 0)])
        check("%K == %@", true, "owner.name", "Ann")
        checkThrows("owner.name.first == 1", .typeMismatch)
    }

    func testCollectionsAndQuantifiers() {
        check("tags CONTAINS 'red'", true)
        check("tags CONTAINS 'Red'", false)
        check("tags CONTAINS[c] 'green'", true)
        check("'blue' IN tags", true)
        check("tags == 'red'", false)
        check("ANY tags BEGINSWITH 'G'", true)
        check("ALL tags LIKE '*e*'", true)
        check("NONE tags == 'pink'", true)
        check("SOME tags == 'pink'", false)
        check("ANY kids.age < 6", true)
        check("ALL kids.age < 18", true)
        check("ALL kids.age < 17", false)
        check("NONE kids.age > 17", true)
        check("ANY kids.name == 'Bob'", true)
        check("ANY kids.pets.name == 'Kit'", true)
        check("ANY kids.name == owner.name", true)
        check("ALL missing == 1", true)
        check("ANY missing == 1", false)
        check("ANY age == 30", true)
        check("ALL {} == 1", true)
        check("ANY kids IN %@", false, [1, 2])
    }

    func testCollectionOperatorsAndIndexes() {
        check("scores.@count == 3", true)
        check("scores.@sum == 18", true)
        check("scores.@avg == 6", true)
        check("scores.@min == 3", true)
        check("scores.@max == 10", true)
        check("kids.@count == 3", true)
        check("kids.@sum.age == 34", true)
        check("kids.@avg.age > 11.3 AND kids.@avg.age < 11.4", true)
        check("kids.@max.age == 17", true)
        check("kids.@min.name == 'Ann'", true)
        check("kids.pets.@count == 3", true)
        check("kids.pets.@distinctUnionOfObjects.name == {'Rex', 'Tom', 'Kit'}", true)
        check("count(kids.@unionOfObjects.age) == 3", true)
        check("missing.@count == 0", true)
        check("@count == 3", true, object: [1, 2, 3])
        check("@sum.age == 17", true, object: [.record(["age": 5]), .record(["age": 12])])
        check("tags[FIRST] == 'red'", true)
        check("tags[LAST] == 'blue'", true)
        check("tags[SIZE] == 3", true)
        check("tags[1] == 'Green'", true)
        check("tags[5] == nil", true)
        check("tags[-1] == nil", true)
        check("kids[1].name == 'Bob'", true)
        check("{}[FIRST] == nil", true)
        checkThrows("kids.@allKeys == 1", .unsupported)
        checkThrows("age[FIRST] == 1", .typeMismatch)
    }

    func testSubqueries() {
        check("SUBQUERY(kids, $k, $k.age > 10).@count == 2", true)
        check("SUBQUERY(kids, $k, $k.age > 10 AND SUBQUERY($k.pets, $p, $p.name BEGINSWITH 'T').@count > 0).@count == 1", true)
        // Issue 16: only the variable names the element; SELF is the collection.
        check("SUBQUERY(kids, $k, SELF.@count == 3).@count == 3", true)
        check("SUBQUERY(kids, $k, $k.age > 10 AND SELF.@count == 3).@count == 2", true)
        checkThrows("SUBQUERY(kids, $k, SELF.age > 10).@count == 2", .typeMismatch)
        check("SUBQUERY(kids, $k, $k.age < $max).@count == 1", true, variables: ["max": 10])
        check("(SUBQUERY(kids, $x, $x.age < 36).@count == kids.@count)", true)
        check("SUBQUERY(missing, $x, $x == 1).@count == 0", true)
    }

    func testVariables() {
        let dict: EvaluatedValue = .record(["k": "ABC", "firstName": "Lily"])
        check("$a[$b] == 'ABC'", true, variables: ["a": dict, "b": "k"])
        check("$a.$b == 'ABC'", true, variables: ["a": dict, "b": "k"])
        check("$a[0] > 1", true, variables: ["a": [5]])
        check("$a[$b].firstName == 'Lily'", true, variables: ["a": [dict], "b": 0])
        check("$FETCH_SOURCE.name == name", true, variables: ["FETCH_SOURCE": .record(["name": "Café Noir"])])
        checkThrows("$unset == 1", .invalidArgument)
        checkThrows("$a.$b == 1", .typeMismatch, variables: ["a": dict, "b": 1])
    }

    func testSubstitutedPredicateEvaluates() throws {
        let p = try KuraPredicate(format: "age > $MIN AND name BEGINSWITH $P").substituting(["MIN": 18, "P": "Caf"])
        XCTAssertTrue(try p.evaluate(with: person))
        let q = try KuraPredicate(format: "$K == 30").substituting(["K": .keyPath("age")])
        XCTAssertTrue(try q.evaluate(with: person))
    }

    func testBetweenNeedsTwoBounds() {
        checkThrows("5 BETWEEN %@", .typeMismatch, 3)
        checkThrows("5 BETWEEN $b", .typeMismatch, variables: ["b": [1, 2, 3]])
        XCTAssertThrowsError(try KuraPredicate(format: "5 BETWEEN %@", [1, 2, 3])) { XCTAssertEqual(($0 as? KuraError)?.code, .syntax) }
        check("5 BETWEEN %@", true, [1, 9])
    }

    func testExpressionEvaluation() throws {
        let e = try KuraExpression(format: "kids.@sum.age * 2")
        guard case .scalar(.integer(68)) = try e.evaluate(with: .object(person)) else {
            return XCTFail("expected 68")
        }
        guard case .collection(let modes) = try KuraExpression(format: "mode({1, 2, 2, 3, 3})").evaluate(), modes.count == 2 else {
            return XCTFail("expected two modes")
        }
    }

    // MARK: Shared helpers

    func testValueOrderingIsTotal() {
        let values: [Value] = [.text("b"), .blob([1]), .integer(2), .null, .double(.nan), .double(1.5), .bool(true),
                               .text("B"), .text("é"), .double(-.infinity), .integer(.min), .blob([])]
        let sorted = values.sorted(by: ValueOrdering.areInIncreasingOrder)
        // Compared as text: NaN is not equal to itself.
        XCTAssertEqual(sorted.map(\.description), ["null", "nan", "-inf", "-9223372036854775808", "true", "1.5", "2",
                                                   "\"B\"", "\"b\"", "\"é\"", "<>", "<01>"])
        XCTAssertEqual(ValueOrdering.compare(.integer(1), .double(1)), 0)
        XCTAssertEqual(ValueOrdering.compare(.bool(true), .integer(1)), 0)
        XCTAssertEqual(ValueOrdering.compare(.integer(9007199254740993), .double(9007199254740992)), 1)
        XCTAssertEqual(ValueOrdering.compare(.integer(.max), .double(9223372036854775807.0)), -1)
        XCTAssertEqual(ValueOrdering.compare(.integer(-1), .double(-0.5)), -1)
        XCTAssertEqual(ValueOrdering.compare(.integer(0), .double(-0.5)), 1)
        XCTAssertEqual(ValueOrdering.compareText("a", "ab"), -1)
        XCTAssertEqual(ValueOrdering.compareText("\u{FFFF}", "😀"), -1)
    }

    func testTextFolding() {
        XCTAssertEqual(TextFolding.fold("Café", options: [.caseInsensitive, .diacriticInsensitive]), "cafe")
        XCTAssertEqual(TextFolding.fold("ẞ", caseInsensitive: true, diacriticInsensitive: false), "ss")
        XCTAssertEqual(TextFolding.fold("ﬁ", caseInsensitive: true, diacriticInsensitive: false), "fi")
        XCTAssertEqual(TextFolding.removingDiacritics("Ångström ñ ø Łódź"), "Angstrom n o Lodz")
        XCTAssertEqual(TextFolding.fold("ABC", options: [.normalized]), "ABC")
    }

    func testLikePattern() {
        XCTAssertEqual(LikePattern("Al*").literalPrefix, "Al")
        XCTAssertEqual(LikePattern("*x").literalPrefix, "")
        XCTAssertEqual(LikePattern("ÁL*", options: [.caseInsensitive, .diacriticInsensitive]).literalPrefix, "al")
        XCTAssertTrue(LikePattern("a\\?").matches("a?"))
        XCTAssertFalse(LikePattern("a\\?").matches("ab"))
        XCTAssertTrue(LikePattern("**a**").matches("xxa"))
        // Worst case stays fast: a long subject against a pattern with many stars.
        let subject = String(repeating: "a", count: 2000)
        XCTAssertFalse(LikePattern(String(repeating: "*a", count: 50) + "b").matches(subject))
    }

    /// Random token soup must never trap the parser, formatter or evaluator.
    func testRandomInputNeverTraps() {
        let pieces = ["a", "b.c", "(", ")", "{", "}", ",", "==", "<", "AND", "OR", "NOT", "ANY", "ALL", "'x'", "\"y",
                      "1", "-", "+", "*", "/", "**", "&", "|", "~", "[", "]", "FIRST", "SIZE", "@count", "@sum",
                      "$v", "%@", "%K", "%d", "SUBQUERY(", "CAST(", "FUNCTION(", "sum(", "now()", "LIKE", "MATCHES",
                      "[cd]", "BETWEEN", "IN", "CONTAINS", "TRUEPREDICATE", "nil", "SELF", "\\u00", "0x", "9e9", "#"]
        var rng = SystemRandomNumberGenerator()
        let object = EvaluatedValue.object(person)
        for _ in 0..<3000 {
            let count = Int.random(in: 1...12, using: &rng)
            let s = (0..<count).map { _ in pieces.randomElement(using: &rng)! }.joined(separator: " ")
            let args: [PredicateArgument] = Array(repeating: "x", count: s.components(separatedBy: "%").count - 1)
            guard let p = try? KuraPredicate(format: s, arguments: args) else { continue }
            XCTAssertEqual(try? KuraPredicate(format: p.predicateFormat), p, s)
            _ = try? p.evaluate(with: object, variables: ["v": [1, "x"]])
        }
    }
}
