// KuraExpression: the expression half of the predicate AST (Core Data's NSExpression).
//
// An expression is an immutable value tree. Trees come from three places: the
// parser (`KuraExpression(format:)`, or inside `KuraPredicate(format:)`), the Swift
// builder (PredicateBuilder.swift) and substitution (PredicateSubstitution.swift).
// All three produce the same shapes for the same meaning, so trees compare with `==`.
//
// Canonical shapes (the parser and the builder both keep them):
// - A key path read from the evaluated object is `.keyPath(keys)`; `SELF` is
//   `.keyPath([])` and `SELF.a.b` is `.keyPath(["a", "b"])`.
// - Keys after any other base (a variable, a function call, a subquery, an index)
//   are `.member(base, keys)`, never a `.member` of a `.member` and never a
//   `.member` of a `.keyPath` (those merge into one key list).
// - Collection operators stay key components: `items.@count`, `@sum.price`,
//   `parents.@avg.age`; the evaluator applies them.
// - A minus sign written directly before a number literal is folded into the
//   constant (`-1` is `.constant(.integer(-1))`); `CAST(<number>, 'NSDate')` is
//   folded into `.date(...)`, and `CAST('<hex>', 'NSData')` into a blob constant.

/// An expression in a Kura predicate: a key path, a constant, a variable, a
/// function or arithmetic, a collection, a subquery, ...
///
/// The Kura counterpart of Foundation's `NSExpression`. Values are immutable and
/// `Sendable`; share them freely between threads.
///
/// ## Topics
/// - Parse one with ``init(format:arguments:)``; build one with ``key(_:)`` and
///   the literal conformances; print one with ``expressionFormat``.
/// - Evaluate one with ``evaluate(with:variables:)``.
public indirect enum KuraExpression: Hashable, Sendable {
    /// A key path read from the evaluated object. `[]` is the object itself (`SELF`).
    /// Components that start with `@` are collection operators (`@count`, `@sum`, ...).
    case keyPath([String])
    /// A scalar constant: null, number, boolean, string or blob.
    case constant(Value)
    /// A date constant, as seconds since 2001-01-01 00:00:00 UTC (Foundation's
    /// reference date). Formats as `CAST(<seconds>, "NSDate")`.
    case date(secondsSinceReferenceDate: Double)
    /// A variable, `$NAME`, replaced by ``KuraPredicate/substituting(_:)`` or bound at
    /// evaluation time (and by `SUBQUERY`).
    case variable(String)
    /// Keys read from the value of another expression: `$car.maker`, `f(x).name`.
    case member(KuraExpression, [String])
    /// A key path taken from a variable's value at evaluation time: `$a.$b`.
    case variableKeyPath(KuraExpression, variable: String)
    /// A literal collection, `{a, b, c}` (also what a `%@` list argument becomes).
    case aggregate([KuraExpression])
    /// An element of a collection: `a[0]`, `a[FIRST]`, `a[LAST]`, `a[SIZE]`, `dict['key']`.
    case index(KuraExpression, KuraIndex)
    /// A built-in function call: `sum(a)`, `lowercase(name)`, `now()`,
    /// `modulus:by:(a, 3)`; also the set expressions `a UNION b` (see ``KuraFunction``).
    case function(KuraFunction, [KuraExpression])
    /// Binary arithmetic or bitwise operation.
    case binary(KuraBinaryOperator, KuraExpression, KuraExpression)
    /// Unary minus or bitwise complement.
    case unary(KuraUnaryOperator, KuraExpression)
    /// `SUBQUERY(collection, $variable, predicate)`: the elements of `collection`
    /// for which `predicate` is true, with `$variable` bound to the element. Inside
    /// `predicate`, `SELF` and plain key paths name the collection, not the element.
    case subquery(collection: KuraExpression, variable: String, predicate: KuraPredicate)
    /// `CAST(expression, 'NSNumber')` and friends.
    case cast(KuraExpression, KuraCastType)
}

/// The subscript of an ``KuraExpression/index(_:_:)`` expression.
public indirect enum KuraIndex: Hashable, Sendable {
    /// `[FIRST]`: the first element, or null for an empty collection.
    case first
    /// `[LAST]`: the last element, or null for an empty collection.
    case last
    /// `[SIZE]`: the number of elements.
    case size
    /// `[expression]`: an integer position (0-based) into a collection, or a key into
    /// an object (`dictionary['key']`).
    case expression(KuraExpression)
}

/// Binary operators of expressions, in the format language's spelling.
public enum KuraBinaryOperator: String, Hashable, Sendable, CaseIterable {
    case add = "+"
    case subtract = "-"
    case multiply = "*"
    case divide = "/"
    case power = "**"
    case bitwiseAnd = "&"
    case bitwiseOr = "|"
    case bitwiseXor = "^"
    case leftShift = "<<"
    case rightShift = ">>"

    /// Binding strength; higher binds tighter. `**` is right-associative, the rest
    /// are left-associative.
    var precedence: Int {
        switch self {
        case .bitwiseOr: return 1
        case .bitwiseXor: return 2
        case .bitwiseAnd: return 3
        case .leftShift, .rightShift: return 4
        case .add, .subtract: return 5
        case .multiply, .divide: return 6
        case .power: return 7
        }
    }
}

/// Unary operators of expressions.
public enum KuraUnaryOperator: String, Hashable, Sendable, CaseIterable {
    /// `-x`
    case negate = "-"
    /// `~x` (bitwise complement of an integer)
    case bitwiseNot = "~"
}

/// The target types of `CAST(x, 'Type')`.
public enum KuraCastType: String, Hashable, Sendable, CaseIterable {
    /// `'NSNumber'`: numbers stay, booleans become 0/1, text is parsed, dates become seconds.
    case number = "NSNumber"
    /// `'NSString'`: the value's text.
    case string = "NSString"
    /// `'NSDate'`: numbers are seconds since the reference date.
    case date = "NSDate"
    /// `'NSData'`: a Kura extension; text is read as hexadecimal bytes.
    case data = "NSData"
}

/// Built-in functions of the format language: `name(arguments)`, and the
/// NSExpression functions named by selector (`modulus:by:(a, b)`, `random`,
/// `random:(xs)`, `noindex:(x)`).
///
/// Three cases are not called like functions: `.union`, `.intersect` and `.minus`
/// are the set expressions `a UNION b`, `a INTERSECT b` and `a MINUS b`, stored as
/// two-argument functions and printed infix. (Selector functions that have an
/// operator, such as `add:to:` or `bitwiseAnd:with:`, parse to that operator.)
public enum KuraFunction: String, Hashable, Sendable, CaseIterable {
    case sum, count, min, max, average, median, mode, stddev
    case sqrt, log, ln, exp, floor, ceiling, abs, trunc
    case now, lowercase, uppercase
    /// `modulus:by:(a, b)`: the remainder of a / b (integers: sign of a, as C's `%`;
    /// otherwise `fmod`). A zero integer divisor is an error.
    case modulus = "modulus:by:"
    /// `random()` (NSExpression's `random`): a random double in [0, 1).
    case random
    /// `random:(collection)`: an element of the collection chosen at random, or null
    /// for an empty collection.
    case randomElement = "random:"
    /// `noindex:(x)`: x itself; a hint that x must not be answered from an index
    /// (Kura's planner then does not use one for that comparison).
    case noindex = "noindex:"
    /// `a UNION b`: the distinct elements of both collections, a's first.
    case union = "UNION"
    /// `a INTERSECT b`: the distinct elements of a that are also in b.
    case intersect = "INTERSECT"
    /// `a MINUS b`: the distinct elements of a that are not in b.
    case minus = "MINUS"

    /// The number of arguments the function takes: `nil` means one or more (the
    /// aggregate functions take either one collection or a list of values).
    public var arity: Int? {
        switch self {
        case .sum, .count, .min, .max, .average, .median, .mode, .stddev: return nil
        case .now, .random: return 0
        case .modulus, .union, .intersect, .minus: return 2
        default: return 1
        }
    }

    /// True for the set expressions (`UNION`, `INTERSECT`, `MINUS`), which print infix.
    public var isSetOperation: Bool { self == .union || self == .intersect || self == .minus }

    /// True when the value can differ between two evaluations of the same arguments.
    public var isNondeterministic: Bool { self == .now || self == .random || self == .randomElement }
}

extension KuraExpression {
    /// This expression followed by more keys, kept in canonical shape: keys merge
    /// into an existing `.keyPath` or `.member` instead of nesting.
    public func appending(_ keys: [String]) -> KuraExpression {
        if keys.isEmpty { return self }
        switch self {
        case .keyPath(let k): return .keyPath(k + keys)
        case .member(let base, let k): return .member(base, k + keys)
        default: return .member(self, keys)
        }
    }
}
