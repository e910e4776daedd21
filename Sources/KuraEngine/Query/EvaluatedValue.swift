// EvaluatedValue: what an expression evaluates to, and what an evaluation context
// returns for a key path.

import Foundation

/// The value of an expression during evaluation: a scalar ``Value``, a date, a
/// collection (a to-many relationship, an aggregate, a subquery result), or an
/// object that resolves key paths itself (a row, a managed object, a dictionary).
///
/// Not `Sendable`: objects are whatever the caller's context is. Evaluate on the
/// thread that owns the objects.
public enum EvaluatedValue {
    case scalar(Value)
    /// Seconds since 2001-01-01 00:00:00 UTC. Dates compare with dates and, by
    /// their seconds, with numbers.
    case date(Double)
    case collection([EvaluatedValue])
    case object(any PredicateEvaluationContext)

    /// `.scalar(.null)`
    public static var null: EvaluatedValue { .scalar(.null) }

    /// A date value.
    public init(_ date: Date) { self = .date(date.timeIntervalSinceReferenceDate) }

    /// A scalar value.
    public init(_ value: Value) { self = .scalar(value) }

    /// An object backed by a dictionary (see ``PredicateRecord``).
    public static func record(_ values: [String: EvaluatedValue], identity: Value? = nil) -> EvaluatedValue {
        .object(PredicateRecord(values, identity: identity))
    }

    /// True for `.scalar(.null)`.
    public var isNull: Bool {
        if case .scalar(.null) = self { return true }
        return false
    }

    var isDate: Bool {
        if case .date = self { return true }
        return false
    }

    /// The value for an error message: its kind and, for scalars, a short literal
    /// (`the text value "abc"`, `the integer value 5`, `a collection of 3 elements`).
    var operandDescription: String {
        switch self {
        case .scalar(.null): return "null"
        case .scalar(let v):
            var literal = PredicateFormatter.formatConstant(v)
            if literal.count > 40 { literal = String(literal.prefix(37)) + "..." }
            return "the \(v.typeName) value \(literal)"
        case .date(let d): return "the date \(Date(timeIntervalSinceReferenceDate: d))"
        case .collection(let xs): return "a collection of \(xs.count) element\(xs.count == 1 ? "" : "s")"
        case .object: return "an object"
        }
    }

    var typeName: String {
        switch self {
        case .scalar(let v): return v.typeName
        case .date: return "date"
        case .collection: return "collection"
        case .object: return "object"
        }
    }

    /// The elements a quantifier or collection operator iterates over: a collection's
    /// elements, nothing for null, and the value itself for anything else.
    var elements: [EvaluatedValue] {
        switch self {
        case .collection(let xs): return xs
        case .scalar(.null): return []
        default: return [self]
        }
    }

    /// Reads one key: from an object, from every element of a collection (results
    /// that are collections are flattened one level, like a to-many key path in a
    /// SQL store), and null from null.
    ///
    /// - Throws: `.typeMismatch` for a key on a scalar or date; whatever the object throws.
    public func value(forKey key: String) throws(KuraError) -> EvaluatedValue {
        switch self {
        case .object(let o):
            return try o.value(forKey: key)
        case .collection(let xs):
            var out: [EvaluatedValue] = []
            out.reserveCapacity(xs.count)
            for x in xs {
                let v = try x.value(forKey: key)
                if case .collection(let inner) = v { out.append(contentsOf: inner) } else { out.append(v) }
            }
            return .collection(out)
        case .scalar(.null):
            return .null
        default:
            throw KuraError(.typeMismatch, "cannot read the key '\(key)' from a \(typeName) value; only objects and collections have keys")
        }
    }

    /// Reads plain keys (no `@` operators) in order; see ``value(forKey:)``. Objects
    /// get the whole remaining path at once, so they can resolve it efficiently.
    public func value(forKeyPath keys: [String]) throws(KuraError) -> EvaluatedValue {
        guard let first = keys.first else { return self }
        switch self {
        case .object(let o):
            return try o.value(forKeyPath: keys)
        case .collection(let xs):
            var out: [EvaluatedValue] = []
            out.reserveCapacity(xs.count)
            for x in xs {
                let v = try x.value(forKeyPath: keys)
                if case .collection(let inner) = v { out.append(contentsOf: inner) } else { out.append(v) }
            }
            return .collection(out)
        default:
            return try value(forKey: first).value(forKeyPath: Array(keys.dropFirst()))
        }
    }
}

extension EvaluatedValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByNilLiteral, ExpressibleByArrayLiteral {
    public init(stringLiteral value: String) { self = .scalar(.text(value)) }
    public init(integerLiteral value: Int64) { self = .scalar(.integer(value)) }
    public init(floatLiteral value: Double) { self = .scalar(.double(value)) }
    public init(booleanLiteral value: Bool) { self = .scalar(.bool(value)) }
    public init(nilLiteral: ()) { self = .scalar(.null) }
    public init(arrayLiteral elements: EvaluatedValue...) { self = .collection(elements) }
}

/// Something a predicate can be evaluated against: it resolves keys to values.
///
/// Implement ``value(forKey:)``; override ``value(forKeyPath:)`` if a whole path
/// can be resolved faster than key by key. Keys never start with `@`: the evaluator
/// applies collection operators (`@count`, `@sum`, ...) itself.
///
/// Return `.collection` for a to-many relationship, `.object` for a to-one, `.null`
/// for a missing value. Whether an unknown key is null or an error (`.notFound`) is
/// the context's choice.
public protocol PredicateEvaluationContext {
    /// The value of one key of this object.
    func value(forKey key: String) throws(KuraError) -> EvaluatedValue
    /// The value at a key path (two or more keys follow relationships).
    func value(forKeyPath keys: [String]) throws(KuraError) -> EvaluatedValue
    /// The object's identity for `==`: two objects are equal when their identities
    /// are equal, and an object equals a scalar equal to its identity (so an object
    /// layer can pass an object ID for `SELF == %@`). nil: equal to nothing.
    var predicateIdentity: Value? { get }
    /// The values a dictionary-like object offers to `IN` (on the right), `CONTAINS`
    /// (on the left) and the set expressions, as an NSDictionary offers its values.
    /// nil (the default): the object is not a collection, and those operators throw
    /// `.typeMismatch` for it.
    var predicateCollectionValues: [EvaluatedValue]? { get }
}

extension PredicateEvaluationContext {
    /// Resolves the path key by key through ``value(forKey:)``.
    public func value(forKeyPath keys: [String]) throws(KuraError) -> EvaluatedValue {
        guard let first = keys.first else { return .object(self) }
        return try value(forKey: first).value(forKeyPath: Array(keys.dropFirst()))
    }

    public var predicateIdentity: Value? { nil }

    public var predicateCollectionValues: [EvaluatedValue]? { nil }
}

/// A dictionary-backed object: keys map to values, missing keys read as null. It is
/// also a dictionary to `IN`, `CONTAINS` and the set expressions, which see its values.
/// Useful for tests, for rows already decoded into a dictionary, and for `$VARIABLE`
/// objects.
public struct PredicateRecord: PredicateEvaluationContext, ExpressibleByDictionaryLiteral {
    public var values: [String: EvaluatedValue]
    public var identity: Value?

    public init(_ values: [String: EvaluatedValue], identity: Value? = nil) {
        self.values = values
        self.identity = identity
    }

    public init(dictionaryLiteral elements: (String, EvaluatedValue)...) {
        self.init(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }

    public func value(forKey key: String) throws(KuraError) -> EvaluatedValue {
        values[key] ?? .null
    }

    public var predicateIdentity: Value? { identity }

    /// The dictionary's values, in key order (so answers do not depend on hashing).
    public var predicateCollectionValues: [EvaluatedValue]? {
        values.sorted { $0.key < $1.key }.map(\.value)
    }
}
