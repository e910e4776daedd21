// FoundationPredicate: typed queries. A Foundation `#Predicate<Student> { ... }`
// becomes a KuraPredicate, which runs in the engine like a format string does
// (indexes, the store path, the object path; Context+Fetch.swift).
//
//     let adults = try FetchRequest(Student.self, in: model,
//                                   where: #Predicate<Student> { $0.age > 18 && $0.name.contains("a") },
//                                   sortedBy: [SortKey(\Student.name)])
//
// How: `Predicate.expression` is a tree of public `PredicateExpressions` types.
// Each type Kura can express conforms to `KuraTranslatable`
// (FoundationPredicate+Expressions.swift); the translator walks the tree by
// dynamic casts, so a construct without a conformance is a thrown
// `.unsupported` error naming it (never a compile-time surprise, never a
// silent drop). Key paths become model key paths through ModelKeyPath.swift
// and are checked against the model.
//
// Translation table (Swift → format language):
//   $0.a == x, !=, <, <=, >, >=         a == x, ...      (x: a captured value or literal)
//   &&, ||, !                           AND, OR, NOT
//   $0.r?.a (optional chaining)         r.a
//   $0.r == nil                         r == nil
//   $0.s.contains("x")                  s CONTAINS "x"   (String)
//   $0.s.starts(with: "x")              s BEGINSWITH "x"
//   $0.s.localizedLowercase             lowercase(s)
//   [1, 2].contains($0.a)               a IN {1, 2}
//   $0.m.contains(obj)                  obj IN m
//   (1...5).contains($0.a)              a BETWEEN {1, 5};  1..<5: a >= 1 AND a < 5
//   $0.m.contains { $0.a > 1 }          ANY m.a > 1 (one comparison on the element),
//                                       else SUBQUERY(m, $x1, ...).@count > 0
//   $0.m.allSatisfy { $0.a > 1 }        ALL m.a > 1, else SUBQUERY(m, $x1, NOT ...).@count == 0
//   $0.m.count, $0.m.isEmpty            m.@count, m.@count == 0
//   + - * / %, unary -                  + - * / modulus:by:, -
//   $0.a ?? d OP y                      (a != nil AND a OP y) OR (a == nil AND d OP y)
//   $0.flag (a Bool)                    flag == TRUE
//   c ? p : q (as a condition)          (c AND p) OR (NOT c AND q)
//   x! (forced unwrap)                  x (a nil compares false instead of trapping)
//   $0 is Country                       entity.name IN {"Country", <its subentities>}
//   ($0 as? Country)?.a == x            (entity.name IN {...} AND a == x) OR (NOT ... AND nil == x)
// Not supported (thrown `.unsupported` naming the construct): filter, regexes,
// subscripts, min()/max(), nested predicate evaluation, String.count,
// and whatever Foundation adds later. `localizedStandardContains` and
// `caseInsensitiveCompare` are Darwin-only in Foundation, so they fall in this
// group too (use `localizedLowercase.contains(...)`).
//
// Values: integers, floating point, Decimal, String, Bool, Date, Data, UUID,
// URL, nil, ManagedObject (compared by object ID) and arrays of these.

import Foundation
import KuraEngine

/// A PredicateExpressions node that Kura can translate.
@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
protocol KuraTranslatable {
    /// The node as an expression (a value).
    func kuraExpression(_ t: inout FoundationPredicateTranslator) throws(KuraError) -> KuraExpression
    /// The node as a condition (a Bool-valued node in predicate position).
    func kuraPredicate(_ t: inout FoundationPredicateTranslator) throws(KuraError) -> KuraPredicate
    /// The node as alternatives for a comparison operand: each value with the
    /// condition under which it is the operand's value (only `??` has more
    /// than one).
    func kuraAlternatives(_ t: inout FoundationPredicateTranslator) throws(KuraError) -> [(guard: KuraPredicate?, value: KuraExpression)]
}

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
extension KuraTranslatable {
    func kuraExpression(_ t: inout FoundationPredicateTranslator) throws(KuraError) -> KuraExpression {
        throw FoundationPredicateTranslator.unsupported(self, as: "a value")
    }
    /// A Bool value used as a condition: `flag == TRUE`.
    func kuraPredicate(_ t: inout FoundationPredicateTranslator) throws(KuraError) -> KuraPredicate {
        .comparison(KuraComparison(try kuraExpression(&t), .equalTo, .constant(.bool(true))))
    }
    func kuraAlternatives(_ t: inout FoundationPredicateTranslator) throws(KuraError) -> [(guard: KuraPredicate?, value: KuraExpression)] {
        [(nil, try kuraExpression(&t))]
    }
}

/// Walks a Foundation predicate's expression tree into a KuraPredicate.
/// One translator per predicate; not shared between threads.
@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
struct FoundationPredicateTranslator {
    /// What a PredicateExpressions variable stands for.
    enum Binding {
        /// The evaluated object (the predicate's input): key paths from it are `.keyPath`.
        case object
        /// An alias for an expression (the unwrapped value in `x?.y` / `flatMap`).
        case alias(KuraExpression)
    }

    let model: ManagedObjectModel
    var bindings: [PredicateExpressions.VariableID: Binding] = [:]
    /// Subquery variables made so far (`$x1`, `$x2`, ... in order: deterministic).
    var subqueryCount = 0

    init(model: ManagedObjectModel) { self.model = model }

    /// The error for a node Kura has no translation for, naming its type
    /// without generic arguments (`PredicateExpressions.Filter`).
    static func unsupported(_ node: Any, as role: String) -> KuraError {
        KuraError(.unsupported, "typed query: \(constructName(node)) is not supported as \(role) (Kura translates comparisons, &&, ||, !, optional chaining, ??, contains, starts(with:), contains(where:), allSatisfy, count, isEmpty, arithmetic and ranges; see FoundationPredicate.swift), or write the predicate as a format string")
    }

    static func constructName(_ node: Any) -> String {
        let full = String(reflecting: type(of: node))
        let base = full.split(separator: "<", maxSplits: 1).first.map(String.init) ?? full
        return base.replacingOccurrences(of: "FoundationEssentials.", with: "").replacingOccurrences(of: "Foundation.", with: "")
    }

    mutating func node(_ x: Any, as role: String) throws(KuraError) -> any KuraTranslatable {
        guard let n = x as? any KuraTranslatable else { throw Self.unsupported(x, as: role) }
        return n
    }

    mutating func expression(_ x: Any) throws(KuraError) -> KuraExpression {
        try node(x, as: "a value").kuraExpression(&self)
    }

    mutating func predicate(_ x: Any) throws(KuraError) -> KuraPredicate {
        try node(x, as: "a condition").kuraPredicate(&self)
    }

    mutating func alternatives(_ x: Any) throws(KuraError) -> [(guard: KuraPredicate?, value: KuraExpression)] {
        try node(x, as: "a value").kuraAlternatives(&self)
    }

    /// `lhs op rhs`, expanded over `??` alternatives on either side.
    mutating func comparison(_ lhs: Any, _ op: KuraComparisonOperator, _ rhs: Any) throws(KuraError) -> KuraPredicate {
        let ls = try alternatives(lhs)
        let rs = try alternatives(rhs)
        var cases: [KuraPredicate] = []
        for l in ls {
            for r in rs {
                let c = KuraPredicate.comparison(KuraComparison(l.value, op, r.value))
                let guards = [l.guard, r.guard].compactMap { $0 }
                cases.append(guards.isEmpty ? c : Self.and(guards + [c]))
            }
        }
        return Self.or(cases)
    }

    /// A fresh subquery variable name.
    mutating func newVariable() -> String {
        subqueryCount += 1
        return "x\(subqueryCount)"
    }

    /// The expression a variable stands for.
    func variable(_ id: PredicateExpressions.VariableID) throws(KuraError) -> KuraExpression {
        switch bindings[id] {
        case .object?: return .keyPath([])
        case .alias(let e)?: return e
        case nil: throw KuraError(.unsupported, "typed query: a variable that is not the predicate's input or a closure's parameter")
        }
    }

    /// The model keys of `keyPath` on objects of class `root`, checked against
    /// the model.
    func keys(_ keyPath: AnyKeyPath, root: ManagedObject.Type) throws(KuraError) -> [String] {
        let keys = try ModelKeyPath.keys(of: keyPath, root: root)
        let e = try model.entity(forClass: root)
        try ModelKeyPath.validate(keys, from: e, in: model, keyPath: keyPath)
        return keys
    }

    /// A Swift value as a constant expression.
    static func constant(_ v: Any) throws(KuraError) -> KuraExpression {
        if let o = v as? AnyOptionalValue {
            guard let w = o.wrappedAnyValue else { return .constant(.null) }
            return try constant(w)
        }
        switch v {
        case let x as String: return .constant(.text(x))
        case let x as Substring: return .constant(.text(String(x)))
        case let x as Bool: return .constant(.bool(x))
        case let x as any BinaryInteger:
            guard let i = Int64(exactly: x) else {
                throw KuraError(.invalidArgument, "typed query: the integer \(x) does not fit in 64 bits")
            }
            return .constant(.integer(i))
        case let x as Double: return .constant(.double(x))
        case let x as Float: return .constant(.double(Double(x)))
        case let x as Decimal: return .constant(.double(NSDecimalNumber(decimal: x).doubleValue))
        case let x as Date: return .date(secondsSinceReferenceDate: x.timeIntervalSinceReferenceDate)
        case let x as Data: return .constant(.blob([UInt8](x)))
        case let x as UUID: return .constant(.text(x.uuidString))
        case let x as URL: return .constant(.text(x.absoluteString))
        case let x as ManagedObject: return .constant(.text(x.objectID.uriRepresentation))
        case let xs as any Sequence:
            var out: [KuraExpression] = []
            for x in xs { out.append(try constant(x)) }
            return .aggregate(out)
        default:
            throw KuraError(.unsupported, "typed query: a value of type \(type(of: v)) has no Kura equivalent (use numbers, String, Bool, Date, Data, UUID, URL, Decimal, objects, nil or arrays of these)")
        }
    }

    static func and(_ xs: [KuraPredicate]) -> KuraPredicate {
        let flat = xs.flatMap { p -> [KuraPredicate] in if case .and(let ys) = p { return ys } else { return [p] } }
        return flat.count == 1 ? flat[0] : .and(flat)
    }

    static func or(_ xs: [KuraPredicate]) -> KuraPredicate {
        let flat = xs.flatMap { p -> [KuraPredicate] in if case .or(let ys) = p { return ys } else { return [p] } }
        return flat.count == 1 ? flat[0] : .or(flat)
    }
}

/// Lets a constant see through `Optional`.
protocol AnyOptionalValue {
    var wrappedAnyValue: Any? { get }
}

extension Optional: AnyOptionalValue {
    var wrappedAnyValue: Any? { self.map { $0 as Any } }
}

// MARK: - Public API

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
extension KuraPredicate {
    /// The Kura predicate for a Foundation `#Predicate` on objects of class `T`.
    ///
    /// Key paths must be `@Managed`, `@ToOne` or `@ToMany` properties of
    /// classes bound to entities of `model` (`ManagedObjectModel+Classes.swift`);
    /// captured values become constants at this call (the result does not
    /// change when a captured variable does). The result is an ordinary value,
    /// `Sendable`, reusable with any context of a store with this model.
    ///
    /// - Throws: `.unsupported` naming a construct Kura has no equivalent for
    ///   (see the table in FoundationPredicate.swift); `.invalidArgument` for a
    ///   key path that reads no modelled property; `.notFound` naming the key
    ///   path and entity when a key is not in the model or `T` is bound to no
    ///   entity.
    public init<T: ManagedObject>(_ predicate: Foundation.Predicate<T>, model: ManagedObjectModel) throws(KuraError) {
        var t = FoundationPredicateTranslator(model: model)
        t.bindings[predicate.variable.key] = .object
        self = try t.predicate(predicate.expression)
    }
}

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
extension FetchRequest {
    /// A request for the entity whose class is `T`, filtered by a Foundation
    /// `#Predicate` (translated once, here; see `KuraPredicate.init(_:model:)`).
    ///
    /// - Throws: as `KuraPredicate.init(_:model:)`.
    public init(_ type: T.Type = T.self, in model: ManagedObjectModel, where predicate: Foundation.Predicate<T>,
                sortedBy sortDescriptors: [SortKey] = []) throws(KuraError) {
        self.init(type, in: model, predicate: try KuraPredicate(predicate, model: model), sortDescriptors: sortDescriptors)
    }

    /// Replaces the predicate with a translated Foundation `#Predicate`.
    ///
    /// - Throws: as `KuraPredicate.init(_:model:)`; the request is unchanged then.
    public mutating func setPredicate(_ predicate: Foundation.Predicate<T>, in model: ManagedObjectModel) throws(KuraError) {
        self.predicate = try KuraPredicate(predicate, model: model)
    }
}

extension SortKey {
    /// A sort key from a key path of a ManagedObject subclass:
    /// `try SortKey(\Student.name)`, `try SortKey(\Student.record?.grade, ascending: false)`.
    ///
    /// - Throws: `.invalidArgument` naming the key path when it reads no
    ///   `@Managed`/`@ToOne` property. Keys missing from the model are
    ///   reported by the fetch (`.notFound`), as for string keys.
    public init<Root: ManagedObject, V>(_ keyPath: KeyPath<Root, V>, ascending: Bool = true,
                                        collation: TextCollation = .binary) throws(KuraError) {
        self.init(try ModelKeyPath.keys(of: keyPath).joined(separator: "."), ascending: ascending, collation: collation)
    }
}
