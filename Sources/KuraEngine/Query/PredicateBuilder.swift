// PredicateBuilder: builds predicate trees in Swift, without a format string.
//
//     let p: KuraPredicate = .key("age") > 30
//         && .key("name").beginsWith("A", options: [.caseInsensitive])
//
// produces exactly the tree of `age > 30 AND name BEGINSWITH[c] "A"`.
// Literals (strings, numbers, booleans, nil, arrays) stand for constant expressions.
// The operators `==` and `!=` return a predicate; where Swift cannot tell that a
// predicate is wanted (`let p = a == b`), annotate the type or use `equals(_:)`.
// Arithmetic has methods (`plus`, `minus`, ...) rather than operators, so that
// integer arithmetic elsewhere in the module type-checks as fast as before.

import Foundation

extension KuraExpression: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByBooleanLiteral, ExpressibleByNilLiteral,
    ExpressibleByArrayLiteral {
    public init(stringLiteral value: String) { self = .constant(.text(value)) }
    public init(integerLiteral value: Int64) { self = .constant(.integer(value)) }
    public init(floatLiteral value: Double) { self = .constant(.double(value)) }
    public init(booleanLiteral value: Bool) { self = .constant(.bool(value)) }
    public init(nilLiteral: ()) { self = .constant(.null) }
    public init(arrayLiteral elements: KuraExpression...) { self = .aggregate(elements) }

    /// A key path from the evaluated object; dots separate keys (`"owner.name"`,
    /// `"items.@count"`). The empty string is `SELF`.
    public static func key(_ path: String) -> KuraExpression {
        path.isEmpty ? .keyPath([]) : .keyPath(path.split(separator: ".", omittingEmptySubsequences: false).map(String.init))
    }

    /// `SELF`, the evaluated object.
    public static var evaluatedObject: KuraExpression { .keyPath([]) }

    /// A date constant.
    public static func date(_ date: Date) -> KuraExpression {
        .date(secondsSinceReferenceDate: date.timeIntervalSinceReferenceDate)
    }

    /// This expression followed by keys (`"name"`, `"@count"`).
    public func appending(_ keys: String...) -> KuraExpression { appending(keys) }

    /// `x.@count`
    public var count: KuraExpression { appending(["@count"]) }

    /// `x[FIRST]`, `x[LAST]`, `x[SIZE]`, `x[i]`.
    public func element(_ index: KuraIndex) -> KuraExpression { .index(self, index) }

    // MARK: Arithmetic

    private func folded(_ op: KuraBinaryOperator, _ rhs: KuraExpression) -> KuraExpression { .binary(op, self, rhs) }
    public func plus(_ rhs: KuraExpression) -> KuraExpression { folded(.add, rhs) }
    public func minus(_ rhs: KuraExpression) -> KuraExpression { folded(.subtract, rhs) }
    public func times(_ rhs: KuraExpression) -> KuraExpression { folded(.multiply, rhs) }
    public func dividedBy(_ rhs: KuraExpression) -> KuraExpression { folded(.divide, rhs) }
    public func raised(to rhs: KuraExpression) -> KuraExpression { folded(.power, rhs) }

    /// `-x`; a number constant folds into a negative constant, as the parser does.
    public var negated: KuraExpression {
        switch self {
        case .constant(.integer(let i)) where i != Int64.min && i >= 0: return .constant(.integer(-i))
        case .constant(.double(let d)) where d.sign == .plus: return .constant(.double(-d))
        default: return .unary(.negate, self)
        }
    }

    // MARK: Comparisons

    private func compare(_ op: KuraComparisonOperator, _ rhs: KuraExpression, _ options: KuraComparisonOptions) -> KuraPredicate {
        .comparison(KuraComparison(self, op, rhs, options: options))
    }
    public func equals(_ rhs: KuraExpression, options: KuraComparisonOptions = []) -> KuraPredicate { compare(.equalTo, rhs, options) }
    public func notEquals(_ rhs: KuraExpression, options: KuraComparisonOptions = []) -> KuraPredicate { compare(.notEqualTo, rhs, options) }
    public func lessThan(_ rhs: KuraExpression) -> KuraPredicate { compare(.lessThan, rhs, []) }
    public func lessThanOrEqualTo(_ rhs: KuraExpression) -> KuraPredicate { compare(.lessThanOrEqualTo, rhs, []) }
    public func greaterThan(_ rhs: KuraExpression) -> KuraPredicate { compare(.greaterThan, rhs, []) }
    public func greaterThanOrEqualTo(_ rhs: KuraExpression) -> KuraPredicate { compare(.greaterThanOrEqualTo, rhs, []) }
    /// `x BETWEEN {lower, upper}`
    public func between(_ lower: KuraExpression, and upper: KuraExpression) -> KuraPredicate {
        compare(.between, .aggregate([lower, upper]), [])
    }
    /// `x IN collection` (or substring of a string).
    public func isIn(_ collection: KuraExpression, options: KuraComparisonOptions = []) -> KuraPredicate { compare(.in, collection, options) }
    public func contains(_ rhs: KuraExpression, options: KuraComparisonOptions = []) -> KuraPredicate { compare(.contains, rhs, options) }
    public func beginsWith(_ rhs: KuraExpression, options: KuraComparisonOptions = []) -> KuraPredicate { compare(.beginsWith, rhs, options) }
    public func endsWith(_ rhs: KuraExpression, options: KuraComparisonOptions = []) -> KuraPredicate { compare(.endsWith, rhs, options) }
    public func like(_ pattern: KuraExpression, options: KuraComparisonOptions = []) -> KuraPredicate { compare(.like, pattern, options) }
    public func matches(_ regex: KuraExpression, options: KuraComparisonOptions = []) -> KuraPredicate { compare(.matches, regex, options) }

    public static func == (lhs: KuraExpression, rhs: KuraExpression) -> KuraPredicate { lhs.equals(rhs) }
    public static func != (lhs: KuraExpression, rhs: KuraExpression) -> KuraPredicate { lhs.notEquals(rhs) }
    public static func < (lhs: KuraExpression, rhs: KuraExpression) -> KuraPredicate { lhs.lessThan(rhs) }
    public static func <= (lhs: KuraExpression, rhs: KuraExpression) -> KuraPredicate { lhs.lessThanOrEqualTo(rhs) }
    public static func > (lhs: KuraExpression, rhs: KuraExpression) -> KuraPredicate { lhs.greaterThan(rhs) }
    public static func >= (lhs: KuraExpression, rhs: KuraExpression) -> KuraPredicate { lhs.greaterThanOrEqualTo(rhs) }
}

extension KuraPredicate {
    /// A key path expression, so that implicit member chains whose result is a
    /// predicate can start with it: `.key("name").beginsWith("A")`.
    public static func key(_ path: String) -> KuraExpression { KuraExpression.key(path) }

    /// `SELF`, for implicit member chains: `.evaluatedObject.like("a*")`.
    public static var evaluatedObject: KuraExpression { .keyPath([]) }

    /// `$name`, for implicit member chains: `.variable("x").isIn(...)`.
    public static func variable(_ name: String) -> KuraExpression { .variable(name) }

    /// `a AND b`; an AND on the left is extended, as the parser does for `a AND b AND c`.
    public static func && (lhs: KuraPredicate, rhs: KuraPredicate) -> KuraPredicate {
        if case .and(let xs) = lhs { return .and(xs + [rhs]) }
        return .and([lhs, rhs])
    }
    /// `a OR b`; an OR on the left is extended.
    public static func || (lhs: KuraPredicate, rhs: KuraPredicate) -> KuraPredicate {
        if case .or(let xs) = lhs { return .or(xs + [rhs]) }
        return .or([lhs, rhs])
    }
    /// `NOT p`
    public static prefix func ! (operand: KuraPredicate) -> KuraPredicate { .not(operand) }

    private static func quantified(_ q: KuraQuantifier, _ p: KuraPredicate) -> KuraPredicate {
        guard case .comparison(var c) = p else {
            preconditionFailure("ANY/ALL/NONE apply to a comparison, not to \(p)")
        }
        c.quantifier = q
        return .comparison(c)
    }
    /// `ANY comparison`. Precondition: `comparison` is a `.comparison`.
    public static func any(_ comparison: KuraPredicate) -> KuraPredicate { quantified(.any, comparison) }
    /// `ALL comparison`. Precondition: `comparison` is a `.comparison`.
    public static func all(_ comparison: KuraPredicate) -> KuraPredicate { quantified(.all, comparison) }
    /// `NONE comparison`. Precondition: `comparison` is a `.comparison`.
    public static func noneOf(_ comparison: KuraPredicate) -> KuraPredicate { quantified(.noneOf, comparison) }
}

extension PredicateArgument {
    /// A date argument.
    public init(_ date: Date) { self = .date(secondsSinceReferenceDate: date.timeIntervalSinceReferenceDate) }
}
