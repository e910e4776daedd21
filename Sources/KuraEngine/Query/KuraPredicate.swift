// KuraPredicate: the predicate half of the predicate AST (Core Data's NSPredicate,
// NSComparisonPredicate and NSCompoundPredicate in one value type).
//
// Invariants kept by the parser and the builder:
// - `.and` / `.or` hold two or more operands. A chain written without parentheses
//   (`a AND b AND c`) is one n-ary node; an explicitly parenthesized operand
//   (`(a AND b) AND c`) stays nested, so formatting and re-parsing is exact.
// - `SOME` is stored as `.any`.
// - A bare key path used as a predicate (`%K` with `hidden`) is stored as
//   `hidden == TRUE`, which is what it means.

/// A predicate: a condition on an object, in the NSPredicate format language.
///
/// The Kura counterpart of Foundation's `NSPredicate`. Values are immutable and
/// `Sendable`; share them freely between threads.
///
/// ## Topics
/// - Parsing: ``init(format:_:)``, ``init(format:arguments:)``
/// - Variables: ``substituting(_:)``
/// - Formatting: ``predicateFormat``
/// - Evaluation: ``evaluate(with:variables:)``
/// - Building in Swift: see PredicateBuilder.swift (`.key("age") > 30 && ...`)
public indirect enum KuraPredicate: Hashable, Sendable {
    /// `TRUEPREDICATE`
    case truePredicate
    /// `FALSEPREDICATE`
    case falsePredicate
    /// `left OP[options] right`, optionally quantified (`ANY`, `ALL`, `NONE`).
    case comparison(KuraComparison)
    /// All operands are true (`AND`, `&&`). Evaluates left to right and stops early.
    case and([KuraPredicate])
    /// Any operand is true (`OR`, `||`). Evaluates left to right and stops early.
    case or([KuraPredicate])
    /// The operand is false (`NOT`, `!`).
    case not(KuraPredicate)
}

/// One comparison: `[quantifier] left operator[options] right`.
public struct KuraComparison: Hashable, Sendable {
    /// `ANY`/`SOME`, `ALL`, `NONE`, or `.direct` for none written.
    public var quantifier: KuraQuantifier
    /// The left-hand expression (the collection, when quantified).
    public var left: KuraExpression
    /// The operator.
    public var `operator`: KuraComparisonOperator
    /// The right-hand expression.
    public var right: KuraExpression
    /// `[c]`, `[d]`, `[n]`, `[l]` modifiers.
    public var options: KuraComparisonOptions

    public init(_ left: KuraExpression, _ op: KuraComparisonOperator, _ right: KuraExpression,
                options: KuraComparisonOptions = [], quantifier: KuraQuantifier = .direct) {
        self.quantifier = quantifier
        self.left = left
        self.operator = op
        self.right = right
        self.options = options
    }
}

/// The aggregate qualifier of a comparison.
public enum KuraQuantifier: String, Hashable, Sendable, CaseIterable {
    /// No qualifier: compare the values themselves.
    case direct = ""
    /// `ANY` (also spelled `SOME`): true if the comparison holds for some element.
    case any = "ANY"
    /// `ALL`: true if it holds for every element (true for an empty collection).
    case all = "ALL"
    /// `NONE`: true if it holds for no element (true for an empty collection).
    case noneOf = "NONE"
}

/// Comparison operators, in their canonical spelling.
public enum KuraComparisonOperator: String, Hashable, Sendable, CaseIterable {
    case equalTo = "=="
    case notEqualTo = "!="
    case lessThan = "<"
    case lessThanOrEqualTo = "<="
    case greaterThan = ">"
    case greaterThanOrEqualTo = ">="
    /// `x BETWEEN {lower, upper}` (inclusive).
    case between = "BETWEEN"
    /// Membership in a collection, or substring of a string.
    case `in` = "IN"
    /// A collection holds the value, or a string holds the substring.
    case contains = "CONTAINS"
    case beginsWith = "BEGINSWITH"
    case endsWith = "ENDSWITH"
    /// Wildcard match: `*` is zero or more characters, `?` exactly one.
    case like = "LIKE"
    /// ICU regular expression matching the whole string.
    case matches = "MATCHES"
}

extension KuraComparisonOperator {
    /// The operator that asks the same with its operands swapped
    /// (`3 < x` is `x > 3`); nil for those without one (BEGINSWITH, IN, ...).
    var mirrored: KuraComparisonOperator? {
        switch self {
        case .lessThan: return .greaterThan
        case .lessThanOrEqualTo: return .greaterThanOrEqualTo
        case .greaterThan: return .lessThan
        case .greaterThanOrEqualTo: return .lessThanOrEqualTo
        case .equalTo, .notEqualTo: return self
        default: return nil
        }
    }
}

/// Comparison modifiers: `[c]`, `[d]`, `[cd]`, `[n]`, `[l]`.
public struct KuraComparisonOptions: OptionSet, Hashable, Sendable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// `[c]`: case-insensitive (Unicode case folding).
    public static let caseInsensitive = KuraComparisonOptions(rawValue: 1)
    /// `[d]`: diacritic-insensitive (canonical decomposition, marks removed).
    public static let diacriticInsensitive = KuraComparisonOptions(rawValue: 2)
    /// `[n]`: the strings are already normalized; accepted, changes nothing here.
    public static let normalized = KuraComparisonOptions(rawValue: 4)
    /// `[l]`: locale-sensitive; accepted, changes nothing here.
    public static let localeSensitive = KuraComparisonOptions(rawValue: 8)

    /// The modifier letters, in canonical order (`"cd"`), empty for none.
    public var letters: String {
        var s = ""
        if contains(.caseInsensitive) { s += "c" }
        if contains(.diacriticInsensitive) { s += "d" }
        if contains(.normalized) { s += "n" }
        if contains(.localeSensitive) { s += "l" }
        return s
    }
}
