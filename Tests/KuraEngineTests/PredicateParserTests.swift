// Tests for the predicate format-string parser: every construct parses to the
// expected tree, malformed strings fail with `.syntax` at the right Character
// offset, arguments and variables substitute, and unsupported constructs say so.

import XCTest
@testable import KuraEngine

final class PredicateParserTests: XCTestCase {
    // MARK: Helpers

    private func parse(_ s: String, _ args: PredicateArgument..., file: StaticString = #filePath, line: UInt = #line) -> KuraPredicate? {
        do { return try KuraPredicate(format: s, arguments: args) } catch {
            XCTFail("\(s): \(error)", file: file, line: line)
            return nil
        }
    }

    private func expr(_ s: String, _ args: PredicateArgument..., file: StaticString = #filePath, line: UInt = #line) -> KuraExpression? {
        do { return try KuraExpression(format: s, arguments: args) } catch {
            XCTFail("\(s): \(error)", file: file, line: line)
            return nil
        }
    }

    private func cmp(_ l: KuraExpression, _ op: KuraComparisonOperator, _ r: KuraExpression,
                     _ options: KuraComparisonOptions = [], _ q: KuraQuantifier = .direct) -> KuraPredicate {
        .comparison(KuraComparison(l, op, r, options: options, quantifier: q))
    }

    private func k(_ path: String) -> KuraExpression { .key(path) }

    private func assertError(_ s: String, _ args: [PredicateArgument] = [], code: KuraError.Code, offset: Int?,
                             file: StaticString = #filePath, line: UInt = #line) {
        do {
            let p = try KuraPredicate(format: s, arguments: args)
            XCTFail("\(s) parsed as \(p), expected \(code) at \(offset.map(String.init) ?? "nil")", file: file, line: line)
        } catch {
            XCTAssertEqual(error.code, code, "\(s): \(error)", file: file, line: line)
            XCTAssertEqual(error.offset, offset, "\(s): \(error)", file: file, line: line)
        }
    }

    // MARK: Comparisons

    func testComparisonOperatorSpellings() {
        let cases: [(String, KuraComparisonOperator)] = [
            ("==", .equalTo), ("=", .equalTo), ("!=", .notEqualTo), ("<>", .notEqualTo),
            ("<", .lessThan), ("<=", .lessThanOrEqualTo), ("=<", .lessThanOrEqualTo),
            (">", .greaterThan), (">=", .greaterThanOrEqualTo), ("=>", .greaterThanOrEqualTo),
            ("IN", .in), ("in", .in), ("CONTAINS", .contains), ("contains", .contains),
            ("BEGINSWITH", .beginsWith), ("beginsWith", .beginsWith), ("ENDSWITH", .endsWith),
            ("LIKE", .like), ("like", .like), ("MATCHES", .matches), ("Matches", .matches),
        ]
        for (spelling, op) in cases {
            XCTAssertEqual(parse("a \(spelling) 1"), cmp(k("a"), op, 1), spelling)
            if !spelling.first!.isLetter {
                XCTAssertEqual(parse("a\(spelling)1"), cmp(k("a"), op, 1), spelling)
            }
        }
        XCTAssertEqual(parse("a BETWEEN {1, 5}"), cmp(k("a"), .between, [1, 5]))
        XCTAssertEqual(parse("a between{1,5}"), cmp(k("a"), .between, [1, 5]))
    }

    func testComparisonOptions() {
        XCTAssertEqual(parse("name BEGINSWITH[c] 'a'"), cmp(k("name"), .beginsWith, "a", [.caseInsensitive]))
        XCTAssertEqual(parse("name ==[d] 'a'"), cmp(k("name"), .equalTo, "a", [.diacriticInsensitive]))
        XCTAssertEqual(parse("name LIKE[cd] 'a'"), cmp(k("name"), .like, "a", [.caseInsensitive, .diacriticInsensitive]))
        XCTAssertEqual(parse("name LIKE[dc] 'a'"), cmp(k("name"), .like, "a", [.caseInsensitive, .diacriticInsensitive]))
        XCTAssertEqual(parse("name CONTAINS [c] 'a'"), cmp(k("name"), .contains, "a", [.caseInsensitive]))
        XCTAssertEqual(parse("name ==[n] 'a'"), cmp(k("name"), .equalTo, "a", [.normalized]))
        XCTAssertEqual(parse("name IN[C] {'a'}"), cmp(k("name"), .in, ["a"], [.caseInsensitive]))
        XCTAssertEqual(parse("count >[c] 42"), cmp(k("count"), .greaterThan, 42, [.caseInsensitive]))
        XCTAssertEqual(parse("name MATCHES[cdl] 'a'"), cmp(k("name"), .matches, "a", [.caseInsensitive, .diacriticInsensitive, .localeSensitive]))
    }

    func testQuantifiers() {
        XCTAssertEqual(parse("ANY kids.age < 18"), cmp(k("kids.age"), .lessThan, 18, [], .any))
        XCTAssertEqual(parse("some kids.age < 18"), cmp(k("kids.age"), .lessThan, 18, [], .any))
        XCTAssertEqual(parse("ALL kids.age < 18"), cmp(k("kids.age"), .lessThan, 18, [], .all))
        XCTAssertEqual(parse("NONE kids.age < 18"), cmp(k("kids.age"), .lessThan, 18, [], .noneOf))
        XCTAssertEqual(parse("ANY tags IN {'a', 'b'}"), cmp(k("tags"), .in, ["a", "b"], [], .any))
        XCTAssertEqual(parse("NOT ANY tags == 'a'"), .not(cmp(k("tags"), .equalTo, "a", [], .any)))
    }

    // MARK: Compound predicates

    func testCompoundPredicatesAndPrecedence() {
        let a = cmp(k("a"), .equalTo, 1), b = cmp(k("b"), .equalTo, 2), c = cmp(k("c"), .equalTo, 3)
        XCTAssertEqual(parse("a == 1 AND b == 2"), .and([a, b]))
        XCTAssertEqual(parse("a == 1 && b == 2 and c == 3"), .and([a, b, c]))
        XCTAssertEqual(parse("a == 1 OR b == 2 || c == 3"), .or([a, b, c]))
        XCTAssertEqual(parse("a == 1 OR b == 2 AND c == 3"), .or([a, .and([b, c])]))
        XCTAssertEqual(parse("a == 1 AND b == 2 OR c == 3"), .or([.and([a, b]), c]))
        XCTAssertEqual(parse("(a == 1 OR b == 2) AND c == 3"), .and([.or([a, b]), c]))
        XCTAssertEqual(parse("(a == 1 AND b == 2) AND c == 3"), .and([.and([a, b]), c]))
        XCTAssertEqual(parse("NOT a == 1 AND b == 2"), .and([.not(a), b]))
        XCTAssertEqual(parse("!(a == 1)"), .not(a))
        XCTAssertEqual(parse("! a == 1"), .not(a))
        XCTAssertEqual(parse("NOT NOT a == 1"), .not(.not(a)))
        XCTAssertEqual(parse("not(a == 1 and b == 2)"), .not(.and([a, b])))
        XCTAssertEqual(parse("((a == 1))"), a)
        XCTAssertEqual(parse("TRUEPREDICATE"), .truePredicate)
        XCTAssertEqual(parse("falsepredicate"), .falsePredicate)
        XCTAssertEqual(parse("(1 < 0) || TRUEPREDICATE"), .or([cmp(1, .lessThan, 0), .truePredicate]))
    }

    func testParenthesizedExpressionVersusPredicate() {
        XCTAssertEqual(parse("(a & 4) == 4"), cmp(.binary(.bitwiseAnd, k("a"), 4), .equalTo, 4))
        XCTAssertEqual(parse("(a + 1) * 2 > 3"), cmp(.binary(.multiply, .binary(.add, k("a"), 1), 2), .greaterThan, 3))
        XCTAssertEqual(parse("(a) == 1"), cmp(k("a"), .equalTo, 1))
        XCTAssertEqual(parse("((a & 1) == 1) && ((a & 2) == 0)"),
                       .and([cmp(.binary(.bitwiseAnd, k("a"), 1), .equalTo, 1), cmp(.binary(.bitwiseAnd, k("a"), 2), .equalTo, 0)]))
        XCTAssertEqual(parse("($a + 1) ** 3 == 8.0"), cmp(.binary(.power, .binary(.add, .variable("a"), 1), 3), .equalTo, 8.0))
    }

    func testBareKeyPathPredicate() {
        XCTAssertEqual(parse("hidden"), cmp(k("hidden"), .equalTo, true))
        XCTAssertEqual(parse("%K", "isHidden"), cmp(k("isHidden"), .equalTo, true))
        XCTAssertEqual(parse("NOT a.b AND c"), .and([.not(cmp(k("a.b"), .equalTo, true)), cmp(k("c"), .equalTo, true)]))
    }

    // MARK: Literals

    func testLiterals() {
        XCTAssertEqual(expr("NULL"), .constant(.null))
        XCTAssertEqual(expr("nil"), .constant(.null))
        XCTAssertEqual(expr("TRUE"), .constant(.bool(true)))
        XCTAssertEqual(expr("yes"), .constant(.bool(true)))
        XCTAssertEqual(expr("False"), .constant(.bool(false)))
        XCTAssertEqual(expr("NO"), .constant(.bool(false)))
        XCTAssertEqual(expr("42"), .constant(.integer(42)))
        XCTAssertEqual(expr("-1"), .constant(.integer(-1)))
        XCTAssertEqual(expr("2.71828"), .constant(.double(2.71828)))
        XCTAssertEqual(expr("9.2e-5"), .constant(.double(9.2e-5)))
        XCTAssertEqual(expr("1E3"), .constant(.double(1000)))
        XCTAssertEqual(expr("0x1F"), .constant(.integer(31)))
        XCTAssertEqual(expr("0XfF"), .constant(.integer(255)))
        XCTAssertEqual(expr("0o17"), .constant(.integer(15)))
        XCTAssertEqual(expr("0b101"), .constant(.integer(5)))
        XCTAssertEqual(expr("-0x10"), .constant(.integer(-16)))
        XCTAssertEqual(expr("9223372036854775807"), .constant(.integer(.max)))
        XCTAssertEqual(expr("-9223372036854775808"), .constant(.integer(.min)))
        XCTAssertEqual(expr("9223372036854775808"), .constant(.double(9223372036854775808.0)))
        XCTAssertEqual(expr("0xFFFFFFFFFFFFFFFF"), .constant(.double(18446744073709551615.0)))
        XCTAssertEqual(expr("0x1FFFFFFFFFFFFFFFF"), .constant(.double(36893488147419103231.0)))
        XCTAssertEqual(expr("'text'"), .constant(.text("text")))
        XCTAssertEqual(expr("\"text\""), .constant(.text("text")))
        XCTAssertEqual(expr("\"a'b'c\""), .constant(.text("a'b'c")))
        XCTAssertEqual(expr("''"), .constant(.text("")))
        XCTAssertEqual(expr("{}"), .aggregate([]))
        XCTAssertEqual(expr("{1, 'a', {TRUE}}"), .aggregate([1, "a", .aggregate([true])]))
    }

    func testStringEscapes() {
        XCTAssertEqual(expr(#"'a\nb\tc\rd'"#), .constant(.text("a\nb\tc\rd")))
        XCTAssertEqual(expr(#"'\\ \" \''"#), .constant(.text("\\ \" '")))
        XCTAssertEqual(expr(#""\u00e9\x41\101""#), .constant(.text("éAA")))
        XCTAssertEqual(expr(#"'\uD83D\uDE00'"#), .constant(.text("😀")))
        XCTAssertEqual(expr(#"'i\w{18}n'"#), .constant(.text(#"i\w{18}n"#)))
        XCTAssertEqual(expr(#"'%@ and %K'"#), .constant(.text("%@ and %K")))
        XCTAssertEqual(expr("'$x'"), .constant(.text("$x")))
    }

    // MARK: Key paths and variables

    func testKeyPaths() {
        XCTAssertEqual(expr("name"), .keyPath(["name"]))
        XCTAssertEqual(expr("owner.address.city"), .keyPath(["owner", "address", "city"]))
        XCTAssertEqual(expr("SELF"), .keyPath([]))
        XCTAssertEqual(expr("self.foo"), .keyPath(["foo"]))
        XCTAssertEqual(expr("#AND"), .keyPath(["AND"]))
        XCTAssertEqual(expr("#self.#in"), .keyPath(["self", "in"]))
        XCTAssertEqual(expr("a.size.first"), .keyPath(["a", "size", "first"]))
        XCTAssertEqual(expr("size"), .keyPath(["size"]))
        XCTAssertEqual(expr("items.@count"), .keyPath(["items", "@count"]))
        XCTAssertEqual(expr("@sum.price"), .keyPath(["@sum", "price"]))
        XCTAssertEqual(expr("parents.@avg.age"), .keyPath(["parents", "@avg", "age"]))
        XCTAssertEqual(expr("caf\u{E9}"), .keyPath(["café"]))
        XCTAssertEqual(expr("名前"), .keyPath(["名前"]))
        XCTAssertEqual(expr(#"\u0024id"#), .keyPath(["$id"]))
        XCTAssertEqual(expr("_private1"), .keyPath(["_private1"]))
    }

    func testVariables() {
        XCTAssertEqual(expr("$x"), .variable("x"))
        XCTAssertEqual(expr("$FETCH_SOURCE.alias"), .member(.variable("FETCH_SOURCE"), ["alias"]))
        XCTAssertEqual(expr("$FETCHED_PROPERTY.userInfo.search"), .member(.variable("FETCHED_PROPERTY"), ["userInfo", "search"]))
        XCTAssertEqual(expr("$a.$b"), .variableKeyPath(.variable("a"), variable: "b"))
        XCTAssertEqual(expr("$a.$b.c"), .member(.variableKeyPath(.variable("a"), variable: "b"), ["c"]))
        XCTAssertEqual(expr("$a[$b].firstName"), .member(.index(.variable("a"), .expression(.variable("b"))), ["firstName"]))
    }

    func testIndexes() {
        XCTAssertEqual(expr("items[FIRST]"), .index(k("items"), .first))
        XCTAssertEqual(expr("items[last]"), .index(k("items"), .last))
        XCTAssertEqual(expr("items[SIZE]"), .index(k("items"), .size))
        XCTAssertEqual(expr("items[0]"), .index(k("items"), .expression(0)))
        XCTAssertEqual(expr("items[#first]"), .index(k("items"), .expression(k("first"))))
        XCTAssertEqual(expr("relationships[3].count"), .member(.index(k("relationships"), .expression(3)), ["count"]))
        XCTAssertEqual(expr("SELF[LAST]"), .index(.keyPath([]), .last))
        XCTAssertEqual(expr("dict['key']"), .index(k("dict"), .expression("key")))
        XCTAssertEqual(expr("m[1][2]"), .index(.index(k("m"), .expression(1)), .expression(2)))
    }

    // MARK: Arithmetic and functions

    func testArithmeticPrecedence() {
        XCTAssertEqual(expr("1 + 2 * 3"), .binary(.add, 1, .binary(.multiply, 2, 3)))
        XCTAssertEqual(expr("1 - 2 - 3"), .binary(.subtract, .binary(.subtract, 1, 2), 3))
        XCTAssertEqual(expr("2 ** 3 ** 2"), .binary(.power, 2, .binary(.power, 3, 2)))
        XCTAssertEqual(expr("a * b ** 2"), .binary(.multiply, k("a"), .binary(.power, k("b"), 2)))
        XCTAssertEqual(expr("-2 ** 2"), .binary(.power, -2, 2))
        XCTAssertEqual(expr("-a"), .unary(.negate, k("a")))
        XCTAssertEqual(expr("- -a"), .unary(.negate, .unary(.negate, k("a"))))
        XCTAssertEqual(expr("-(5)"), .unary(.negate, 5))
        XCTAssertEqual(expr("a - -5"), .binary(.subtract, k("a"), -5))
        XCTAssertEqual(expr("a-1"), .binary(.subtract, k("a"), 1))
        XCTAssertEqual(expr("~a & 0xF | 1 << 2 ^ b >> 1"),
                       .binary(.bitwiseOr, .binary(.bitwiseAnd, .unary(.bitwiseNot, k("a")), 15),
                               .binary(.bitwiseXor, .binary(.leftShift, 1, 2), .binary(.rightShift, k("b"), 1))))
        XCTAssertEqual(expr("a / 2.5"), .binary(.divide, k("a"), 2.5))
        XCTAssertEqual(expr("(1 + 2) * 3"), .binary(.multiply, .binary(.add, 1, 2), 3))
        XCTAssertEqual(expr("-5.x"), .unary(.negate, .member(5, ["x"])))
    }

    func testFunctions() {
        XCTAssertEqual(expr("sum(a)"), .function(.sum, [k("a")]))
        XCTAssertEqual(expr("max({1, 2, 3})"), .function(.max, [[1, 2, 3]]))
        XCTAssertEqual(expr("min(1, 2)"), .function(.min, [1, 2]))
        XCTAssertEqual(expr("now()"), .function(.now, []))
        XCTAssertEqual(expr("SQRT(4)"), .function(.sqrt, [4]))
        XCTAssertEqual(expr("lowercase(name).length"), .member(.function(.lowercase, [k("name")]), ["length"]))
        for f in KuraFunction.allCases where !f.isSetOperation {
            let args = f.arity == 0 ? [] : f.arity == 2 ? [k("x"), k("y")] : [k("x")]
            let written = args.map { $0.expressionFormat }.joined(separator: ", ")
            XCTAssertEqual(expr("\(f.rawValue)(\(written))"), .function(f, args))
        }
        XCTAssertEqual(expr("FUNCTION('a', 'uppercase')"), .function(.uppercase, ["a"]))
        XCTAssertEqual(expr("function(name, \"lowercase\")"), .function(.lowercase, [k("name")]))
    }

    func testSubqueryAndCast() {
        XCTAssertEqual(parse("SUBQUERY(cars, $car, $car.maker == 'FIAT').@count > 2"),
                       cmp(.member(.subquery(collection: k("cars"), variable: "car",
                                             predicate: cmp(.member(.variable("car"), ["maker"]), .equalTo, "FIAT")), ["@count"]),
                           .greaterThan, 2))
        XCTAssertEqual(expr("CAST(a, 'NSNumber')"), .cast(k("a"), .number))
        XCTAssertEqual(expr("CAST(\"1\", \"NSString\")"), .cast("1", .string))
        XCTAssertEqual(expr("CAST(700000000, 'NSDate')"), .date(secondsSinceReferenceDate: 700000000))
        XCTAssertEqual(expr("CAST(-1.5, 'NSDate')"), .date(secondsSinceReferenceDate: -1.5))
        XCTAssertEqual(expr("CAST(a, 'NSDate')"), .cast(k("a"), .date))
        XCTAssertEqual(expr("CAST('00ff10', 'NSData')"), .constant(.blob([0, 255, 16])))
    }

    // MARK: Arguments

    func testFormatArguments() {
        XCTAssertEqual(parse("%K == %@", "name", "Ann"), cmp(k("name"), .equalTo, "Ann"))
        XCTAssertEqual(parse("%K == %@", .keyPath("owner.name"), nil), cmp(k("owner.name"), .equalTo, nil))
        XCTAssertEqual(parse("a == %d AND b == %i AND c == %ld AND d == %lld AND e == %u AND f == %lu", 1, 2, 3, 4, 5, 6),
                       .and([cmp(k("a"), .equalTo, 1), cmp(k("b"), .equalTo, 2), cmp(k("c"), .equalTo, 3),
                             cmp(k("d"), .equalTo, 4), cmp(k("e"), .equalTo, 5), cmp(k("f"), .equalTo, 6)]))
        XCTAssertEqual(parse("a > %f", 40.5), cmp(k("a"), .greaterThan, 40.5))
        XCTAssertEqual(parse("a > %f", 40), cmp(k("a"), .greaterThan, 40.0))
        XCTAssertEqual(parse("a == %d", true), cmp(k("a"), .equalTo, 1))
        XCTAssertEqual(parse("a == %d", 3.0), cmp(k("a"), .equalTo, 3))
        XCTAssertEqual(parse("a IN %@", [1, "x", [2]]), cmp(k("a"), .in, [1, "x", [2]]))
        XCTAssertEqual(parse("a LIKE %%"), cmp(k("a"), .like, "%"))
        XCTAssertEqual(parse("a < %@", .date(secondsSinceReferenceDate: 10)), cmp(k("a"), .lessThan, .date(secondsSinceReferenceDate: 10)))
        XCTAssertEqual(parse("a == %@", .blob([1, 2])), cmp(k("a"), .equalTo, .constant(.blob([1, 2]))))
        XCTAssertEqual(parse("%K.%K > %lu", "mayor", "age", 30), cmp(k("mayor.age"), .greaterThan, 30))
        XCTAssertEqual(parse("%K == $FETCH_SOURCE.%K", "a", "b"), cmp(k("a"), .equalTo, .member(.variable("FETCH_SOURCE"), ["b"])))
        XCTAssertEqual(parse("'%K' like '%@'"), cmp("%K", .like, "%@"))
        XCTAssertEqual(parse("%K IN {1, 2}", "$id"), cmp(.keyPath(["$id"]), .in, [1, 2]))
        XCTAssertEqual(parse("SELF like[c] %@*%@", "a", "b"), cmp(.keyPath([]), .like, .binary(.multiply, "a", "b"), [.caseInsensitive]))
        XCTAssertEqual(parse("a == %s", "x"), cmp(k("a"), .equalTo, "x"))
        XCTAssertEqual(parse("a == %x", 255), cmp(k("a"), .equalTo, 255))
    }

    func testArgumentErrors() {
        assertError("a == %@", [], code: .invalidArgument, offset: 5)
        assertError("a == %@ AND b == %@", ["x"], code: .invalidArgument, offset: 17)
        assertError("%K == 1", [1], code: .invalidArgument, offset: 0)
        assertError("%K == 1", [""], code: .invalidArgument, offset: 0)
        assertError("%K == 1", [.keyPath("a..b")], code: .invalidArgument, offset: 0)
        assertError("a == %d", ["x"], code: .invalidArgument, offset: 5)
        assertError("a == %d", [2.5], code: .invalidArgument, offset: 5)
        assertError("a == %f", ["x"], code: .invalidArgument, offset: 5)
        assertError("a == %@", [.keyPath("b")], code: .invalidArgument, offset: 5)
        // Issue 16: unused arguments are ignored unless the caller asks for strictness.
        XCTAssertEqual(try KuraPredicate(format: "a == 1", arguments: ["extra"]), parse("a == 1"))
        XCTAssertThrowsError(try KuraPredicate(format: "a == 1", arguments: ["extra"], requireAllArguments: true)) { e in
            XCTAssertEqual((e as? KuraError)?.code, .invalidArgument)
            XCTAssertEqual((e as? KuraError)?.offset, 6)
        }
        assertError("'%@' == %@", [], code: .invalidArgument, offset: 8)
    }

    // MARK: Substitution

    func testSubstitution() throws {
        let p = try XCTUnwrap(parse("a == $A AND $B.c > $C AND SUBQUERY(items, $A, $A.x == $C).@count > 0 AND $D == 1"))
        let q = try p.substituting(["A": "x", "B": .keyPath("owner"), "C": [1, 2], "X": 5])
        XCTAssertEqual(q, .and([
            cmp(k("a"), .equalTo, "x"),
            cmp(k("owner.c"), .greaterThan, [1, 2]),
            cmp(.member(.subquery(collection: k("items"), variable: "A",
                                  predicate: cmp(.member(.variable("A"), ["x"]), .equalTo, [1, 2])), ["@count"]), .greaterThan, 0),
            cmp(.variable("D"), .equalTo, 1),
        ]))
        let r = try XCTUnwrap(parse("$a.$b == 'ABC'")).substituting(["b": .keyPath("name")])
        XCTAssertEqual(r, cmp(.member(.variable("a"), ["name"]), .equalTo, "ABC"))
        XCTAssertThrowsError(try XCTUnwrap(parse("$a.$b == 1")).substituting(["b": 3])) { error in
            XCTAssertEqual((error as? KuraError)?.code, .invalidArgument)
        }
        let d = try XCTUnwrap(parse("date < $D")).substituting(["D": .date(secondsSinceReferenceDate: 5)])
        XCTAssertEqual(d, cmp(k("date"), .lessThan, .date(secondsSinceReferenceDate: 5)))
    }

    // MARK: Builder

    func testBuilderMatchesParser() {
        let built: KuraPredicate = .key("age") > 30 && .key("name").beginsWith("A", options: [.caseInsensitive])
        XCTAssertEqual(built, parse("age > 30 AND name BEGINSWITH[c] 'A'"))
        let b2: KuraPredicate = .key("a") == 1 || !(.key("b") != "x") || .key("c") <= 2.5
        XCTAssertEqual(b2, parse("a == 1 OR NOT b != 'x' OR c <= 2.5"))
        let b3: KuraPredicate = .any(.key("kids.age") < 18) && .all(.key("kids.age") >= 1) && .noneOf(.key("tags").isIn(["x"]))
        XCTAssertEqual(b3, parse("ANY kids.age < 18 AND ALL kids.age >= 1 AND NONE tags IN {'x'}"))
        let b4: KuraPredicate = .key("items").count.greaterThan(KuraExpression.key("a").plus(1).times(.variable("m")).negated)
        XCTAssertEqual(b4, parse("items.@count > -((a + 1) * $m)"))
        XCTAssertEqual(KuraExpression(integerLiteral: 5).negated, expr("-5"))
        XCTAssertEqual(KuraExpression.key("a").between(1, and: 5), parse("a BETWEEN {1, 5}"))
        XCTAssertEqual(KuraExpression.key("").like("*x?", options: [.caseInsensitive, .diacriticInsensitive]), parse("SELF LIKE[cd] '*x?'"))
        XCTAssertEqual(KuraExpression.key("d") < .date(Date(timeIntervalSinceReferenceDate: 100)), parse("d < CAST(100, 'NSDate')"))
        XCTAssertEqual(KuraExpression.key("a").raised(to: 2).minus(1).dividedBy(3), expr("(a ** 2 - 1) / 3"))
        XCTAssertEqual(KuraExpression.key("tags").element(.first).matches("x.*"), parse("tags[FIRST] MATCHES 'x.*'"))
        XCTAssertEqual(KuraExpression.key("n").contains("a").description, "n CONTAINS \"a\"")
        XCTAssertEqual(KuraExpression.key("n").endsWith("a"), parse("n ENDSWITH 'a'"))
        XCTAssertEqual(KuraExpression.key("n").equals("a", options: .caseInsensitive), parse("n ==[c] 'a'"))
        XCTAssertEqual(KuraExpression.key("n").notEquals(nil), parse("n != nil"))
    }

    // MARK: Formatting

    func testFormatterCanonicalForms() {
        let cases: [(String, String)] = [
            ("a = 1", "a == 1"),
            ("a <> 1 and b =< 2 && c => 3", "a != 1 AND b <= 2 AND c >= 3"),
            ("some x == 1", "ANY x == 1"),
            ("name beginswith[dc] 'x'", "name BEGINSWITH[cd] \"x\""),
            ("#and == yes", "#and == TRUE"),
            ("a == nil", "a == NULL"),
            ("a == 1 OR (b == 2 AND c == 3)", "a == 1 OR (b == 2 AND c == 3)"),
            ("(a == 1 OR b == 2) OR c == 3", "(a == 1 OR b == 2) OR c == 3"),
            ("NOT (a == 1 OR b == 2)", "NOT (a == 1 OR b == 2)"),
            ("a - (b - c) == 1", "a - (b - c) == 1"),
            ("(a ** b) ** c == 1", "(a ** b) ** c == 1"),
            ("a ** (b ** c) == 1", "a ** b ** c == 1"),
            ("-(5) == -5", "-(5) == -5"),
            ("(-5).x == 1", "(-5).x == 1"),
            ("a == 'it\\'s \"q\"\\n'", "a == \"it's \\\"q\\\"\\n\""),
            ("a == CAST(10, 'NSDate')", "a == CAST(10.0, \"NSDate\")"),
            ("%K == 1", "\\u0024id == 1"),
            ("x == 1e999", "x == 1e999"),
            ("SUBQUERY(a, $x, $x.b == 1).@count == 0", "SUBQUERY(a, $x, $x.b == 1).@count == 0"),
            ("a[first] == a[#size]", "a[FIRST] == a[#size]"),
        ]
        for (input, expected) in cases {
            let args: [PredicateArgument] = input.contains("%K") ? ["$id"] : []
            guard let p = try? KuraPredicate(format: input, arguments: args) else { XCTFail(input); continue }
            XCTAssertEqual(p.predicateFormat, expected, input)
            XCTAssertEqual(try? KuraPredicate(format: p.predicateFormat), p, input)
        }
    }

    func testFormatterRoundTripsUnusualTrees() throws {
        let trees: [KuraPredicate] = [
            .comparison(KuraComparison(.keyPath(["a b", "1x", "é", "SELF", "@count"]), .equalTo, .constant(.text("\u{1}\u{7F}😀")))),
            .comparison(KuraComparison(.constant(.double(-0.0)), .lessThan, .constant(.double(-.infinity)))),
            .comparison(KuraComparison(.constant(.integer(.min)), .equalTo, .unary(.negate, .constant(.integer(-3))))),
            .comparison(KuraComparison(.constant(.blob([])), .equalTo, .constant(.blob([0xde, 0xad])))),
            .comparison(KuraComparison(.cast(.function(.now, []), .number), .greaterThan, .date(secondsSinceReferenceDate: 1e9))),
            .not(.not(.or([.truePredicate, .and([.falsePredicate, .truePredicate])]))),
        ]
        for t in trees {
            XCTAssertEqual(try KuraPredicate(format: t.predicateFormat), t, t.predicateFormat)
        }
    }

    // MARK: Unsupported constructs

    func testUnsupported() {
        assertError("FUNCTION(a, 'pow:', 3) == 8", code: .unsupported, offset: 12)
        assertError("FUNCTION(%@, 'sk_matches:', SELF.x) == YES", ["p"], code: .unsupported, offset: 13)
        assertError("FUNCTION(a, 'frobnicate') == 1", code: .unsupported, offset: 12)
        assertError("self isKindOfClass: %@", ["C"], code: .unsupported, offset: 5)
        assertError("(SELF isKindOfClass: %@)", ["C"], code: .unsupported, offset: 6)
        assertError("CAST(a, 'NSURL') == 1", code: .unsupported, offset: 8)
        assertError("foo(a) == 1", code: .unsupported, offset: 0)
        assertError("ANYKEY == 1", code: .unsupported, offset: 0)
        assertError("a UTI-CONFORMS-TO 'public.image'", code: .unsupported, offset: 2)
        assertError("a UTI-EQUALS 'public.image'", code: .unsupported, offset: 2)
        assertError("distanceToLocation:fromLocation:(a, b) < 5", code: .unsupported, offset: 0)
        assertError("frobnicate:(a) == 1", code: .unsupported, offset: 0)
        assertError("modulus:by:(a) == 1", code: .syntax, offset: 0)
    }

    // MARK: Malformed predicates

    /// Each malformed string and the Character offset its error must point at.
    static let malformed: [(String, Int)] = [
        ("", 0),
        ("a ==", 4),
        ("a == 1 AND", 10),
        ("(a == 1", 7),
        ("a == 1)", 6),
        ("a = = 1", 4),
        ("TRUE", 4),
        ("1", 1),
        ("0 || 1", 2),
        ("FALSE", 5),
        ("a LIKE", 6),
        ("a BETWEEN {1}", 10),
        ("a BETWEEN {1, 2, 3}", 10),
        ("a IN {1, 2", 10),
        ("a IN {1 2}", 8),
        ("name == 'abc", 8),
        ("name == \"abc", 8),
        ("a ==[x] 1", 5),
        ("a ==[cx] 1", 6),
        ("a ==[] 1", 5),
        ("a ==[c 1", 7),
        ("a == 1 b == 2", 7),
        ("ANY", 3),
        ("ANY a", 5),
        ("NOT", 3),
        ("a.", 2),
        ("a. == 1", 3),
        ("a[1 == 2", 4),
        ("a[] == 1", 2),
        ("sum(", 4),
        ("sum(1, ) > 0", 7),
        ("sqrt(1, 2) > 0", 0),
        ("now(1) > 0", 0),
        ("SUBQUERY(items, x, x.a == 1).@count > 0", 16),
        ("SUBQUERY(items, $x $x.a == 1)", 19),
        ("SUBQUERY(items, $x, $x.a == 1", 29),
        ("CAST(1) > 0", 6),
        ("CAST(1, 2) > 0", 8),
        ("a == $", 6),
        ("a == #", 6),
        ("a == @", 6),
        ("a == 0x", 7),
        ("a == 0b102", 9),
        ("a == 12abc", 7),
        (#"a == 'x\u12G4'"#, 11),
        (#"a == 'x\uD800'"#, 13),
        ("a ? 1", 2),
        ("a == 1 AND OR b == 2", 11),
        ("AND == 1", 0),
        ("a == {1, 2,}", 11),
        ("(a == 1) (b == 2)", 9),
        ("a == 1 &&", 9),
        ("a + == 1", 4),
        ("-", 1),
        ("a ** == 2", 5),
        ("a == 1 ||| b", 9),
        ("a IN[c", 6),
        ("café == 1 AND", 13),
        ("cafe\u{301} == 1 AND", 13),
        ("'👍🏽' == ", 7),
        ("a == 1 AND (b == 2", 18),
        ("{1, 2} CONTAINS", 15),
        ("a[FIRST == 1", 8),
        ("FUNCTION(a) == 1", 10),
        ("FUNCTION(a, b) == 1", 12),
        ("a == 1e", 6),
        ("$x.", 3),
        ("a == 1 NOT b == 2", 7),
        ("NOT (a == 1", 11),
        ("a CONTAINS[cd]", 14),
        ("ALL ANY a == 1", 4),
        ("a == 1 OR", 9),
        ("a == CAST('xyz', 'NSData')", 17),
        ("a == 'x\\", 5),
        ("a == \\n", 6),
        ("名前 == 'x' AND (", 15),
        // A CR LF is one character (the lexer's ASCII path leaves it to the general one).
        ("a == 1\r\n AND", 11),
        ("a == 1\n AND", 11),
        ("a ==\r\n", 5),
        ("a\r\n==\r\n1\r\nAND\r\n(", 12),
    ]

    /// The lexer's ASCII shortcuts answer as the Unicode properties do, for
    /// every ASCII scalar and some others.
    func testLexerCharacterClassesMatchUnicodeProperties() {
        let others: [UInt32] = [0x85, 0xA0, 0xAA, 0xB5, 0xC0, 0xE9, 0x2028, 0x3000, 0x4E00, 0x1F600]
        for v in Array(0..<128) + others {
            let s = Unicode.Scalar(v)!
            XCTAssertEqual(PredicateLexer.isIdentifierStart(s), s == "_" || s.properties.isXIDStart, "U+\(String(v, radix: 16))")
            XCTAssertEqual(PredicateLexer.isIdentifierContinue(s), s == "_" || s.properties.isXIDContinue, "U+\(String(v, radix: 16))")
            XCTAssertEqual(PredicateLexer.isWhitespace(s), s.properties.isWhitespace, "U+\(String(v, radix: 16))")
        }
        // Tokens' texts (in messages) keep non-ASCII names as written.
        assertError("café ==", code: .syntax, offset: 7)
        do {
            _ = try KuraPredicate(format: "名前 == 'x' AND (")
            XCTFail("parsed")
        } catch {
            XCTAssertEqual(error.offset, 15)
        }
    }

    func testMalformedPredicatesReportSyntaxErrorsAtTheRightOffset() {
        XCTAssertGreaterThanOrEqual(Self.malformed.count, 50)
        for (input, offset) in Self.malformed {
            assertError(input, code: .syntax, offset: offset)
        }
    }

    func testSyntaxErrorMessagesSayExpectedAndFound() {
        do {
            _ = try KuraPredicate(format: "a == 1 b")
            XCTFail("parsed")
        } catch {
            XCTAssertEqual(error.message, "expected AND, OR or end of input but found 'b'")
        }
        do {
            _ = try KuraPredicate(format: "a ==")
            XCTFail("parsed")
        } catch {
            XCTAssertEqual(error.message, "expected an expression but found end of input")
        }
    }

    // Regression: the "(" retry re-parsed a SUBQUERY's predicate once per reading, so
    // SUBQUERYs nested inside parentheses took time exponential in the nesting
    // (2^30 re-parses here, which would never finish).
    func testNestedSubqueriesInParenthesesParseInPolynomialTime() throws {
        var p = "a == 1"
        for _ in 0..<30 { p = "(SUBQUERY(a, $x, " + p + ")) + 1 > 0" }
        XCTAssertNotNil(parse(p))
    }

    func testNestingLimit() {
        let deep = String(repeating: "(", count: 300) + "a == 1" + String(repeating: ")", count: 300)
        assertError(deep, code: .syntax, offset: PredicateParser.maxDepth)
        let chain = "a == " + Array(repeating: "1", count: 500).joined(separator: " + ")
        XCTAssertThrowsError(try KuraPredicate(format: chain)) { XCTAssertEqual(($0 as? KuraError)?.code, .syntax) }
        let nots = String(repeating: "NOT ", count: 300) + "a == 1"
        XCTAssertThrowsError(try KuraPredicate(format: nots)) { XCTAssertEqual(($0 as? KuraError)?.code, .syntax) }
        let ok = String(repeating: "(", count: 40) + "a == 1" + String(repeating: ")", count: 40)
        XCTAssertNotNil(parse(ok))
        let longAnd = Array(repeating: "a == 1", count: 2000).joined(separator: " AND ")
        XCTAssertNotNil(parse(longAnd))
    }
}
