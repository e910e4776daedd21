// PredicateArgument: the values substituted for `%@`, `%K`, `%d`, ... while parsing,
// and for `$NAME` variables by `substituting(_:)`.

/// A value given to the parser for a format placeholder, or to
/// ``KuraPredicate/substituting(_:)`` for a variable.
///
/// Which cases each placeholder accepts:
/// - `%@`: any case except `.keyPath` (a string, number, boolean, null, blob, date, or
///   a list, which becomes a `{...}` aggregate).
/// - `%K`: `.keyPath` or a text value; dots separate keys (`"owner.name"`).
/// - `%d %i %u %ld %lld %lu %x %o ...`: an integer, a boolean (0/1) or an integral double.
/// - `%f %e %g %lf ...`: a number.
/// - `%s`: a text value.
/// - `%%`: takes no argument and stands for the text `"%"`.
///
/// Anything else throws ``KuraError`` `.invalidArgument` with the placeholder's offset.
/// Literal conformances make call sites short:
/// `KuraPredicate(format: "%K == %@ AND age > %d", "name", "Ann", 30)`.
public indirect enum PredicateArgument: Hashable, Sendable,
    ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByNilLiteral, ExpressibleByArrayLiteral {
    /// A scalar value.
    case value(Value)
    /// A date, as seconds since 2001-01-01 00:00:00 UTC (`Date.timeIntervalSinceReferenceDate`).
    case date(secondsSinceReferenceDate: Double)
    /// A key path for `%K` (or for a variable that stands for a key path).
    case keyPath(String)
    /// A collection (for `IN %@`, `BETWEEN %@`, ...).
    case list([PredicateArgument])

    public init(stringLiteral value: String) { self = .value(.text(value)) }
    public init(integerLiteral value: Int64) { self = .value(.integer(value)) }
    public init(floatLiteral value: Double) { self = .value(.double(value)) }
    public init(booleanLiteral value: Bool) { self = .value(.bool(value)) }
    public init(nilLiteral: ()) { self = .value(.null) }
    public init(arrayLiteral elements: PredicateArgument...) { self = .list(elements) }

    /// A text argument.
    public static func text(_ s: String) -> PredicateArgument { .value(.text(s)) }
    /// An integer argument.
    public static func integer<T: BinaryInteger>(_ i: T) -> PredicateArgument {
        if let v = Int64(exactly: i) { return .value(.integer(v)) }
        return .value(.double(Double(i)))
    }
    /// A double argument.
    public static func double(_ d: Double) -> PredicateArgument { .value(.double(d)) }
    /// A blob argument.
    public static func blob(_ b: [UInt8]) -> PredicateArgument { .value(.blob(b)) }

    var kindName: String {
        switch self {
        case .value(let v): return v.typeName
        case .date: return "date"
        case .keyPath: return "key path"
        case .list: return "list"
        }
    }
}
