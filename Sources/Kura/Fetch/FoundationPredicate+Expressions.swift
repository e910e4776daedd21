// FoundationPredicate+Expressions: the PredicateExpressions types Kura
// translates, one conformance each (the table is in FoundationPredicate.swift).
// A type missing here is reported by name as unsupported.

import Foundation
import KuraEngine

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
typealias KuraAlternatives = [(guard: KuraPredicate?, value: KuraExpression)]

// MARK: Leaves

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
extension PredicateExpressions.Variable: KuraTranslatable {
    func kuraExpression(_ t: inout FoundationPredicateTranslator) throws(KuraError) -> KuraExpression {
        try t.variable(key)
    }
}

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
extension PredicateExpressions.Value: KuraTranslatable {
    func kuraExpression(_ t: inout FoundationPredicateTranslator) throws(KuraError) -> KuraExpression {
        try FoundationPredicateTranslator.constant(value)
    }
    func kuraPredicate(_ t: inout FoundationPredicateTranslator) throws(KuraError) -> KuraPredicate {
        if let b = value as? Bool { return b ? .truePredicate : .falsePredicate }
        return .comparison(KuraComparison(try kuraExpression(&t), .equalTo, .constant(.bool(true))))
    }
}

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
extension PredicateExpressions.NilLiteral: KuraTranslatable {
    func kuraExpression(_ t: inout FoundationPredicateTranslator) throws(KuraError) -> KuraExpression { .constant(.null) }
}

/// Collections whose `count` and `isEmpty` key paths Kura knows (`@count`).
protocol KuraCountedCollection {
    /// "count", "isEmpty" or nil for another key path of the collection type.
    static func countKey(_ k: AnyKeyPath) -> String?
}

extension Array: KuraCountedCollection {
    static func countKey(_ k: AnyKeyPath) -> String? {
        k == \Array<Element>.count as AnyKeyPath ? "count" : k == \Array<Element>.isEmpty as AnyKeyPath ? "isEmpty" : nil
    }
}

extension Set: KuraCountedCollection {
    static func countKey(_ k: AnyKeyPath) -> String? {
        k == \Set<Element>.count as AnyKeyPath ? "count" : k == \Set<Element>.isEmpty as AnyKeyPath ? "isEmpty" : nil
    }
}

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
extension PredicateExpressions.KeyPath: KuraTranslatable {
    func kuraExpression(_ t: inout FoundationPredicateTranslator) throws(KuraError) -> KuraExpression {
        let base = try t.expression(root)
        let k = keyPath as AnyKeyPath
        if let c = Root.Output.self as? ManagedObject.Type {
            return base.appending(try t.keys(k, root: c))
        }
        if let c = Root.Output.self as? KuraCountedCollection.Type, c.countKey(k) == "count" {
            return base.appending(["@count"])
        }
        if Root.Output.self == String.self {
            if k == \String.localizedLowercase as AnyKeyPath { return .function(.lowercase, [base]) }
            if k == \String.localizedUppercase as AnyKeyPath { return .function(.uppercase, [base]) }
        }
        throw KuraError(.unsupported, "typed query: key path \(k) (a \(type(of: k))) has no Kura equivalent (Kura reads @Managed/@ToOne/@ToMany properties, count and isEmpty of to-many relationships, and localizedLowercase/localizedUppercase of strings)")
    }

    func kuraPredicate(_ t: inout FoundationPredicateTranslator) throws(KuraError) -> KuraPredicate {
        if let c = Root.Output.self as? KuraCountedCollection.Type, c.countKey(keyPath as AnyKeyPath) == "isEmpty" {
            return .comparison(KuraComparison(try t.expression(root).appending(["@count"]), .equalTo, .constant(.integer(0))))
        }
        return .comparison(KuraComparison(try kuraExpression(&t), .equalTo, .constant(.bool(true))))
    }
}

// MARK: Comparisons and logic

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
extension PredicateExpressions.Equal: KuraTranslatable {
    func kuraPredicate(_ t: inout FoundationPredicateTranslator) throws(KuraError) -> KuraPredicate {
        try t.comparison(lhs, .equalTo, rhs)
    }
}

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
extension PredicateExpressions.NotEqual: KuraTranslatable {
    func kuraPredicate(_ t: inout FoundationPredicateTranslator) throws(KuraError) -> KuraPredicate {
        try t.comparison(lhs, .notEqualTo, rhs)
    }
}

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
extension PredicateExpressions.Comparison: KuraTranslatable {
    func kuraPredicate(_ t: inout FoundationPredicateTranslator) throws(KuraError) -> KuraPredicate {
        let o: KuraComparisonOperator
        switch op {
        case .lessThan: o = .lessThan
        case .lessThanOrEqual: o = .lessThanOrEqualTo
        case .greaterThan: o = .greaterThan
        case .greaterThanOrEqual: o = .greaterThanOrEqualTo
        @unknown default: throw FoundationPredicateTranslator.unsupported(self, as: "a comparison (operator \(op))")
        }
        return try t.comparison(lhs, o, rhs)
    }
}

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
extension PredicateExpressions.Conjunction: KuraTranslatable {
    func kuraPredicate(_ t: inout FoundationPredicateTranslator) throws(KuraError) -> KuraPredicate {
        FoundationPredicateTranslator.and([try t.predicate(lhs), try t.predicate(rhs)])
    }
}

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
extension PredicateExpressions.Disjunction: KuraTranslatable {
    func kuraPredicate(_ t: inout FoundationPredicateTranslator) throws(KuraError) -> KuraPredicate {
        FoundationPredicateTranslator.or([try t.predicate(lhs), try t.predicate(rhs)])
    }
}

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
extension PredicateExpressions.Negation: KuraTranslatable {
    func kuraPredicate(_ t: inout FoundationPredicateTranslator) throws(KuraError) -> KuraPredicate {
        .not(try t.predicate(wrapped))
    }
}

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
extension PredicateExpressions.Conditional: KuraTranslatable {
    /// `c ? p : q` as a condition: `(c AND p) OR (NOT c AND q)`.
    func kuraPredicate(_ t: inout FoundationPredicateTranslator) throws(KuraError) -> KuraPredicate {
        let c = try t.predicate(test)
        return FoundationPredicateTranslator.or([
            FoundationPredicateTranslator.and([c, try t.predicate(trueBranch)]),
            FoundationPredicateTranslator.and([.not(c), try t.predicate(falseBranch)]),
        ])
    }
}

// MARK: Optionals

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
extension PredicateExpressions.OptionalFlatMap: KuraTranslatable {
    /// `x?.y` / `x.flatMap { $0.y }`: the transform read from x's value, so a
    /// nil x gives nil, as a key path through a nil to-one does.
    func kuraExpression(_ t: inout FoundationPredicateTranslator) throws(KuraError) -> KuraExpression {
        let w = try t.expression(wrapped)
        t.bindings[variable.key] = .alias(w)
        return try t.expression(transform)
    }

    /// With a wrapped value that has alternatives (`($0 as? Country)?.name`):
    /// the transform of each non-nil one, nil for the nil ones.
    func kuraAlternatives(_ t: inout FoundationPredicateTranslator) throws(KuraError) -> KuraAlternatives {
        var out: KuraAlternatives = []
        for w in try t.alternatives(wrapped) {
            if w.value == .constant(.null) {
                out.append(w)
                continue
            }
            t.bindings[variable.key] = .alias(w.value)
            for r in try t.alternatives(transform) {
                let guards = [w.guard, r.guard].compactMap { $0 }
                out.append((guards.isEmpty ? nil : FoundationPredicateTranslator.and(guards), r.value))
            }
        }
        return out
    }
}

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
extension PredicateExpressions.NilCoalesce: KuraTranslatable {
    func kuraAlternatives(_ t: inout FoundationPredicateTranslator) throws(KuraError) -> KuraAlternatives {
        let value = try t.expression(lhs)
        let present = KuraPredicate.comparison(KuraComparison(value, .notEqualTo, .constant(.null)))
        let absent = KuraPredicate.comparison(KuraComparison(value, .equalTo, .constant(.null)))
        var out: KuraAlternatives = [(present, value)]
        for r in try t.alternatives(rhs) {
            out.append((r.guard.map { FoundationPredicateTranslator.and([absent, $0]) } ?? absent, r.value))
        }
        return out
    }
}

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
extension PredicateExpressions.ForcedUnwrap: KuraTranslatable {
    /// `x!`: x itself; a nil compares false instead of trapping.
    func kuraExpression(_ t: inout FoundationPredicateTranslator) throws(KuraError) -> KuraExpression {
        try t.expression(inner)
    }
}

// MARK: Arithmetic

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
extension PredicateExpressions.Arithmetic: KuraTranslatable {
    func kuraExpression(_ t: inout FoundationPredicateTranslator) throws(KuraError) -> KuraExpression {
        let o: KuraBinaryOperator
        switch op {
        case .add: o = .add
        case .subtract: o = .subtract
        case .multiply: o = .multiply
        @unknown default: throw FoundationPredicateTranslator.unsupported(self, as: "arithmetic (operator \(op))")
        }
        return .binary(o, try t.expression(lhs), try t.expression(rhs))
    }
}

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
extension PredicateExpressions.IntDivision: KuraTranslatable {
    func kuraExpression(_ t: inout FoundationPredicateTranslator) throws(KuraError) -> KuraExpression {
        .binary(.divide, try t.expression(lhs), try t.expression(rhs))
    }
}

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
extension PredicateExpressions.FloatDivision: KuraTranslatable {
    func kuraExpression(_ t: inout FoundationPredicateTranslator) throws(KuraError) -> KuraExpression {
        .binary(.divide, try t.expression(lhs), try t.expression(rhs))
    }
}

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
extension PredicateExpressions.IntRemainder: KuraTranslatable {
    func kuraExpression(_ t: inout FoundationPredicateTranslator) throws(KuraError) -> KuraExpression {
        .function(.modulus, [try t.expression(lhs), try t.expression(rhs)])
    }
}

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
extension PredicateExpressions.UnaryMinus: KuraTranslatable {
    func kuraExpression(_ t: inout FoundationPredicateTranslator) throws(KuraError) -> KuraExpression {
        try t.expression(wrapped).negated
    }
}

// MARK: Strings and collections

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
extension PredicateExpressions.CollectionContainsCollection: KuraTranslatable {
    /// `s.contains("x")` on strings: `s CONTAINS "x"`.
    func kuraPredicate(_ t: inout FoundationPredicateTranslator) throws(KuraError) -> KuraPredicate {
        guard Base.Output.self == String.self || Base.Output.self == Substring.self else {
            throw FoundationPredicateTranslator.unsupported(self, as: "a condition on \(Base.Output.self) (only strings)")
        }
        return try t.comparison(base, .contains, other)
    }
}

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
extension PredicateExpressions.SequenceStartsWith: KuraTranslatable {
    /// `s.starts(with: "x")` on strings: `s BEGINSWITH "x"`.
    func kuraPredicate(_ t: inout FoundationPredicateTranslator) throws(KuraError) -> KuraPredicate {
        guard Base.Output.self == String.self || Base.Output.self == Substring.self else {
            throw FoundationPredicateTranslator.unsupported(self, as: "a condition on \(Base.Output.self) (only strings)")
        }
        return try t.comparison(base, .beginsWith, prefix)
    }
}

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
extension PredicateExpressions.SequenceContains: KuraTranslatable {
    /// `xs.contains(e)`: `e IN xs` (a constant list, or a to-many relationship).
    func kuraPredicate(_ t: inout FoundationPredicateTranslator) throws(KuraError) -> KuraPredicate {
        try t.comparison(element, .in, sequence)
    }
}

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
extension FoundationPredicateTranslator {
    /// `ANY/ALL collection.keys op constant` when `inner` is one comparison of
    /// the element `$v` (or its keys) with an expression free of `$v`.
    static func quantified(_ inner: KuraPredicate, variable v: String, collection: KuraExpression,
                           _ q: KuraQuantifier) -> KuraPredicate? {
        guard case .comparison(let c) = inner, c.quantifier == .direct, isFree(c.right) else { return nil }
        let keys: [String]
        switch c.left {
        case .variable(v): keys = []
        case .member(.variable(v), let k) where !k.contains(where: { $0.hasPrefix("@") }): keys = k
        default: return nil
        }
        return .comparison(KuraComparison(collection.appending(keys), c.operator, c.right, options: c.options, quantifier: q))
    }

    /// Whether `e` reads nothing of the evaluated object or a variable.
    static func isFree(_ e: KuraExpression) -> Bool {
        switch e {
        case .constant, .date: return true
        case .aggregate(let xs): return xs.allSatisfy(isFree)
        default: return false
        }
    }
}

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
extension PredicateExpressions.SequenceContainsWhere: KuraTranslatable {
    /// `m.contains { ... }`: `ANY m.a op x`, else `SUBQUERY(m, $x, ...).@count > 0`.
    func kuraPredicate(_ t: inout FoundationPredicateTranslator) throws(KuraError) -> KuraPredicate {
        let collection = try t.expression(sequence)
        let v = t.newVariable()
        t.bindings[variable.key] = .alias(.variable(v))
        let inner = try t.predicate(test)
        if let q = FoundationPredicateTranslator.quantified(inner, variable: v, collection: collection, .any) { return q }
        return .comparison(KuraComparison(.subquery(collection: collection, variable: v, predicate: inner).appending(["@count"]),
                                          .greaterThan, .constant(.integer(0))))
    }
}

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
extension PredicateExpressions.SequenceAllSatisfy: KuraTranslatable {
    /// `m.allSatisfy { ... }`: `ALL m.a op x`, else `SUBQUERY(m, $x, NOT ...).@count == 0`.
    func kuraPredicate(_ t: inout FoundationPredicateTranslator) throws(KuraError) -> KuraPredicate {
        let collection = try t.expression(sequence)
        let v = t.newVariable()
        t.bindings[variable.key] = .alias(.variable(v))
        let inner = try t.predicate(test)
        if let q = FoundationPredicateTranslator.quantified(inner, variable: v, collection: collection, .all) { return q }
        return .comparison(KuraComparison(.subquery(collection: collection, variable: v, predicate: .not(inner)).appending(["@count"]),
                                          .equalTo, .constant(.integer(0))))
    }
}

// MARK: Ranges

/// A range node or value: its bounds and whether the upper one is included.
@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
protocol KuraRangeBounds {
    func kuraBounds(_ t: inout FoundationPredicateTranslator) throws(KuraError) -> (lower: KuraExpression, upper: KuraExpression, closed: Bool)
}

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
extension PredicateExpressions.ClosedRange: KuraRangeBounds {
    func kuraBounds(_ t: inout FoundationPredicateTranslator) throws(KuraError) -> (lower: KuraExpression, upper: KuraExpression, closed: Bool) {
        (try t.expression(lower), try t.expression(upper), true)
    }
}

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
extension PredicateExpressions.Range: KuraRangeBounds {
    func kuraBounds(_ t: inout FoundationPredicateTranslator) throws(KuraError) -> (lower: KuraExpression, upper: KuraExpression, closed: Bool) {
        (try t.expression(lower), try t.expression(upper), false)
    }
}

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
extension PredicateExpressions.Value: KuraRangeBounds {
    /// A captured `ClosedRange` or `Range` value.
    func kuraBounds(_ t: inout FoundationPredicateTranslator) throws(KuraError) -> (lower: KuraExpression, upper: KuraExpression, closed: Bool) {
        guard let r = value as? AnyRangeValue else { throw FoundationPredicateTranslator.unsupported(self, as: "a range") }
        return (try FoundationPredicateTranslator.constant(r.lowerBoundValue), try FoundationPredicateTranslator.constant(r.upperBoundValue), r.isClosed)
    }
}

/// Lets a captured range value give its bounds.
protocol AnyRangeValue {
    var lowerBoundValue: Any { get }
    var upperBoundValue: Any { get }
    var isClosed: Bool { get }
}

extension ClosedRange: AnyRangeValue {
    var lowerBoundValue: Any { lowerBound }
    var upperBoundValue: Any { upperBound }
    var isClosed: Bool { true }
}

extension Range: AnyRangeValue {
    var lowerBoundValue: Any { lowerBound }
    var upperBoundValue: Any { upperBound }
    var isClosed: Bool { false }
}

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
extension PredicateExpressions.RangeExpressionContains: KuraTranslatable {
    /// `(a...b).contains(x)`: `x BETWEEN {a, b}`; `(a..<b)`: `x >= a AND x < b`.
    func kuraPredicate(_ t: inout FoundationPredicateTranslator) throws(KuraError) -> KuraPredicate {
        guard let r = range as? KuraRangeBounds else { throw FoundationPredicateTranslator.unsupported(range, as: "a range") }
        let b = try r.kuraBounds(&t)
        let x = try t.expression(element)
        if b.closed { return .comparison(KuraComparison(x, .between, .aggregate([b.lower, b.upper]))) }
        return .and([.comparison(KuraComparison(x, .greaterThanOrEqualTo, b.lower)),
                     .comparison(KuraComparison(x, .lessThan, b.upper))])
    }
}

// MARK: Types (entity inheritance)

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
extension FoundationPredicateTranslator {
    /// `x is D`: `x.entity.name IN {entities whose class is D or a subclass}`
    /// (FALSEPREDICATE when no entity's class is one).
    mutating func typeCheck<D>(_ input: Any, _ d: D.Type) throws(KuraError) -> KuraPredicate {
        let base = try expression(input)
        let names = model.entities.filter { $0.objectClass is D.Type }.map(\.name).sorted()
        if names.isEmpty { return .falsePredicate }
        return .comparison(KuraComparison(base.appending(["entity", "name"]), .in, .aggregate(names.map { .constant(.text($0)) })))
    }
}

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
extension PredicateExpressions.TypeCheck: KuraTranslatable {
    func kuraPredicate(_ t: inout FoundationPredicateTranslator) throws(KuraError) -> KuraPredicate {
        try t.typeCheck(input, Desired.self)
    }
}

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
extension PredicateExpressions.ConditionalCast: KuraTranslatable {
    /// `x as? D` in a comparison: x where `x is D`, nil elsewhere.
    func kuraAlternatives(_ t: inout FoundationPredicateTranslator) throws(KuraError) -> KuraAlternatives {
        let check = try t.typeCheck(input, Desired.self)
        return [(check, try t.expression(input)), (.not(check), .constant(.null))]
    }
}
