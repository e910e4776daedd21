// PredicateEvaluator: evaluates predicate trees against objects, with the semantics
// of NSPredicate's in-memory evaluation (-evaluateWithObject:), as Core Data uses
// for unsaved objects.
//
// SEMANTICS (decisions are marked *)
// - Equality: null == null; null equals nothing else, so `x != 'a'` is true for a
//   null x. Integers, doubles and booleans compare numerically and exactly (YES == 1).
//   Text uses Swift String equality (canonical equivalence). Dates compare with dates
//   and, by seconds since 2001, with numbers*. Collections are equal element-wise.
//   Objects are equal when their `predicateIdentity` values are; an object equals a
//   scalar equal to its identity*.
// - Ordering (<, <=, >, >=, BETWEEN): numbers/booleans/dates numerically, text in
//   Unicode scalar order (after [c]/[d] folding), blobs bytewise. A null operand
//   (or NaN) makes the comparison false. Two values of kinds with no order between
//   them (text and a number, a collection, an object, ...) throw `.typeMismatch`
//   naming both operands, as Foundation raises for them (it was `false` before
//   issue 16).
// - BEGINSWITH, ENDSWITH, CONTAINS and IN (on strings) are false when either side
//   is null or the right-hand string is empty, as in Foundation. LIKE: `*` and `?`.
//   MATCHES: an ICU regular expression (NSRegularExpression) that must match the
//   whole string, compiled with Apple's flags: `.` matches line breaks and `^`/`$`
//   match at line boundaries too*. (Apple's guide only says "ICU v3"; the flags
//   follow the behaviour recorded by an independent NSPredicate test suite.)
//   Non-text operands are false.
// - IN (right side) and CONTAINS (left side) search a collection's elements, or a
//   dictionary's values (Apple's guide: "in the case of a dictionary, its values
//   are used"; a context offers them by `predicateCollectionValues`); text is a
//   substring search; null is false; any other value throws `.typeMismatch`.
// - [c] folds case, [d] folds diacritics (TextFolding); [n] and [l] change nothing.
// - ANY/SOME, ALL, NONE iterate the left-hand value: a collection's elements, no
//   elements for null, and a lone value as a one-element collection*. ALL and NONE
//   of nothing are true.
// - Key paths through collections map over the elements and flatten one level*
//   (`children.pets.name` is every pet's name). Collection operators: @count, @sum,
//   @avg, @min, @max, @unionOfObjects, @distinctUnionOfObjects; others throw
//   `.unsupported`.
// - SUBQUERY(collection, $x, predicate) binds only `$x` to each element. Inside the
//   predicate, `SELF` and plain key paths do not switch to the element: they are
//   evaluated against the collection itself*, as Apple's own description of
//   SUBQUERY does (`[filter evaluateWithObject:collection]` with the variable
//   substituted). So `SELF.@count` is the collection's size and `price > 5` reads
//   `collection.price`; write `$x.price`.
// - Set expressions: `a UNION b`, `a INTERSECT b`, `a MINUS b` take collections (or
//   dictionaries' values; null is empty) and give distinct elements in a's order
//   (then b's, for UNION)*; a scalar operand throws `.typeMismatch`.
// - Arithmetic: null operands give null*. Integer +, -, * that overflow Int64 are
//   done in Double instead (never trap). `/` between two integers (booleans count
//   as integers) is integer division truncating toward zero, as NSExpression's
//   divide:by: does with integer NSNumbers (`7 / 2` is 3; write `7.0 / 2` for 3.5);
//   with a double on either side it is Double division. An integer division by zero
//   throws `.invalidArgument`* (Double division by zero gives ±infinity); the one
//   overflowing quotient (Int64.min / -1) is given as a Double. `**` always gives a
//   double (raise:toPower:). `modulus:by:` is the integer remainder (sign of the
//   dividend; by zero throws) or `fmod`. Dates plus or minus seconds give dates,
//   date minus date gives seconds*. Anything else that is not a number throws
//   `.typeMismatch`.
// - Functions: sum count min max average median mode stddev (one collection
//   argument, or several values; nulls are skipped except by count), sqrt log ln exp
//   floor ceiling abs trunc, now, lowercase uppercase, modulus:by:, random (a double
//   in [0, 1)), random: (a random element; null for none), noindex: (its argument).
//   `mode` returns a collection of the most frequent values; `stddev` is the
//   population standard deviation. NSExpression's selector spellings of these and
//   of the operators (`add:to:`, `bitwiseAnd:with:`, `onesComplement:`, ...) parse
//   to the same trees (PredicateParser.swift).
// - Unset variables throw `.invalidArgument`. Errors thrown by the context propagate.
//
// The same evaluator answers in-memory objects (`evaluate(with:)`, which the object
// layer uses through PredicateEvaluationContext) and table rows (RowContext), so
// every rule above holds on both paths.
//
// Recursion is bounded by the tree depth, which the parser limits.

import Foundation

extension KuraPredicate {
    /// Evaluates the predicate with `object` as `SELF`.
    ///
    /// - Parameter variables: values for `$NAME` variables not replaced by
    ///   ``substituting(_:)``.
    /// - Throws: ``KuraError``: `.typeMismatch` for arithmetic on non-numbers, a key
    ///   on a scalar, ordering values of different kinds (`'a' < 1`) or `IN` on a
    ///   non-collection; `.invalidArgument` for an unset variable, a bad regular
    ///   expression or an integer division by zero; `.unsupported` for unknown
    ///   collection operators; `.corrupt` for a row that does not decode; and
    ///   whatever the context throws.
    public func evaluate(with object: EvaluatedValue, variables: [String: EvaluatedValue] = [:]) throws(KuraError) -> Bool {
        try PredicateEvaluator(object: object, variables: variables).evaluate(self)
    }

    /// Evaluates the predicate with `object` as `SELF`; see ``evaluate(with:variables:)-(EvaluatedValue,_)``.
    public func evaluate(with object: any PredicateEvaluationContext, variables: [String: EvaluatedValue] = [:]) throws(KuraError) -> Bool {
        try evaluate(with: .object(object), variables: variables)
    }
}

extension KuraExpression {
    /// The value of the expression with `object` as `SELF`.
    ///
    /// - Throws: ``KuraError`` as ``KuraPredicate/evaluate(with:variables:)-(EvaluatedValue,_)`` does.
    public func evaluate(with object: EvaluatedValue = .null, variables: [String: EvaluatedValue] = [:]) throws(KuraError) -> EvaluatedValue {
        try PredicateEvaluator(object: object, variables: variables).value(self)
    }
}

struct PredicateEvaluator {
    let object: EvaluatedValue
    let variables: [String: EvaluatedValue]

    // MARK: Predicates

    func evaluate(_ p: KuraPredicate) throws(KuraError) -> Bool {
        switch p {
        case .truePredicate: return true
        case .falsePredicate: return false
        case .and(let ps):
            for q in ps where !(try evaluate(q)) { return false }
            return true
        case .or(let ps):
            for q in ps where try evaluate(q) { return true }
            return false
        case .not(let q):
            return !(try evaluate(q))
        case .comparison(let c):
            let left = try value(c.left)
            let test = try PredicateComparisonTest(c.operator, right: try value(c.right), options: c.options)
            switch c.quantifier {
            case .direct:
                return try test.holds(for: left)
            case .any:
                for e in left.elements where try test.holds(for: e) { return true }
                return false
            case .all:
                for e in left.elements where !(try test.holds(for: e)) { return false }
                return true
            case .noneOf:
                for e in left.elements where try test.holds(for: e) { return false }
                return true
            }
        }
    }

    // MARK: Expressions

    func value(_ e: KuraExpression) throws(KuraError) -> EvaluatedValue {
        switch e {
        case .keyPath(let keys):
            return try Self.resolve(object, keys)
        case .constant(let v):
            return .scalar(v)
        case .date(let d):
            return .date(d)
        case .variable(let name):
            return try variable(name)
        case .member(let base, let keys):
            return try Self.resolve(value(base), keys)
        case .variableKeyPath(let base, let name):
            let b = try value(base)
            guard case .scalar(.text(let path)) = try variable(name) else {
                throw KuraError(.typeMismatch, "the variable $\(name) is used as a key path but is not text")
            }
            return try Self.resolve(b, path.split(separator: ".").map(String.init))
        case .aggregate(let items):
            var out: [EvaluatedValue] = []
            out.reserveCapacity(items.count)
            for x in items { out.append(try value(x)) }
            return .collection(out)
        case .index(let base, let index):
            return try self.index(value(base), index)
        case .function(let f, let args):
            return try function(f, args)
        case .binary(let op, let l, let r):
            return try Self.arithmetic(op, value(l), value(r))
        case .unary(let op, let x):
            return try Self.unary(op, value(x))
        case .subquery(let collection, let variable, let predicate):
            var out: [EvaluatedValue] = []
            let all = try value(collection)
            for element in all.elements {
                var bindings = variables
                bindings[variable] = element
                // Only the variable names the element; SELF is the collection (see the header).
                if try PredicateEvaluator(object: all, variables: bindings).evaluate(predicate) {
                    out.append(element)
                }
            }
            return .collection(out)
        case .cast(let x, let type):
            return try Self.cast(value(x), to: type)
        }
    }

    private func variable(_ name: String) throws(KuraError) -> EvaluatedValue {
        guard let v = variables[name] else {
            throw KuraError(.invalidArgument, "the variable $\(name) has no value; pass it in `variables:` or call substituting(_:) first")
        }
        return v
    }

    /// Reads `keys` from `base`, applying `@` collection operators.
    static func resolve(_ base: EvaluatedValue, _ keys: [String]) throws(KuraError) -> EvaluatedValue {
        guard let opIndex = keys.firstIndex(where: { $0.hasPrefix("@") }) else {
            return try base.value(forKeyPath: keys)
        }
        let current = try base.value(forKeyPath: Array(keys[..<opIndex]))
        return try collectionOperator(keys[opIndex], current, rest: Array(keys[(opIndex + 1)...]))
    }

    private static func collectionOperator(_ op: String, _ base: EvaluatedValue, rest: [String]) throws(KuraError) -> EvaluatedValue {
        let elements = base.elements
        if op == "@count" { return .scalar(.integer(Int64(elements.count))) }
        var values: [EvaluatedValue] = []
        values.reserveCapacity(elements.count)
        for e in elements {
            let v = rest.isEmpty ? e : try resolve(e, rest)
            if !rest.isEmpty, case .collection(let inner) = v { values.append(contentsOf: inner) } else { values.append(v) }
        }
        switch op {
        case "@sum": return try PredicateAggregates.sum(values)
        case "@avg": return try PredicateAggregates.average(values)
        case "@min": return try PredicateAggregates.extreme(values, maximum: false)
        case "@max": return try PredicateAggregates.extreme(values, maximum: true)
        case "@unionOfObjects": return .collection(values)
        case "@distinctUnionOfObjects":
            var out: [EvaluatedValue] = []
            for v in values where !out.contains(where: { PredicateComparisonTest.equal($0, v, []) }) { out.append(v) }
            return .collection(out)
        default:
            throw KuraError(.unsupported, "the collection operator \(op) is not supported; use @count, @sum, @avg, @min, @max, @unionOfObjects or @distinctUnionOfObjects")
        }
    }

    private func index(_ base: EvaluatedValue, _ index: KuraIndex) throws(KuraError) -> EvaluatedValue {
        if base.isNull { return .null }
        switch index {
        case .size:
            guard case .collection(let xs) = base else { break }
            return .scalar(.integer(Int64(xs.count)))
        case .first:
            guard case .collection(let xs) = base else { break }
            return xs.first ?? .null
        case .last:
            guard case .collection(let xs) = base else { break }
            return xs.last ?? .null
        case .expression(let x):
            let k = try value(x)
            switch (base, k) {
            case (.collection(let xs), .scalar(let v)):
                guard let d = v.doubleValue, let i = Int(exactly: d) else { break }
                return i >= 0 && i < xs.count ? xs[i] : .null
            case (.object(let o), .scalar(.text(let key))):
                return try o.value(forKey: key)
            default:
                break
            }
            throw KuraError(.typeMismatch, "cannot index a \(base.typeName) value with a \(k.typeName) value")
        }
        throw KuraError(.typeMismatch, "cannot index a \(base.typeName) value; FIRST, LAST and SIZE need a collection")
    }

    // MARK: Functions

    private func function(_ f: KuraFunction, _ args: [KuraExpression]) throws(KuraError) -> EvaluatedValue {
        if f == .now { return .date(Date().timeIntervalSinceReferenceDate) }
        if f == .random { return .scalar(.double(Double.random(in: 0..<1))) }
        if let arity = f.arity, arity != args.count {
            throw KuraError(.invalidArgument, "\(f.rawValue) takes \(arity) argument\(arity == 1 ? "" : "s") but got \(args.count)")
        }
        switch f {
        case .union, .intersect, .minus:
            return try Self.setOperation(f, value(args[0]), value(args[1]))
        case .modulus:
            return try Self.arithmeticModulus(value(args[0]), value(args[1]))
        case .noindex:
            return try value(args[0])
        case .randomElement:
            let v = try value(args[0])
            guard case .collection(let xs) = v else {
                if v.isNull { return .null }
                throw KuraError(.typeMismatch, "random: needs a collection but got \(v.operandDescription)")
            }
            return xs.randomElement() ?? .null
        default:
            break
        }
        if f.arity == nil {
            var values: [EvaluatedValue]
            if args.count == 1 {
                values = try value(args[0]).elements
            } else {
                values = []
                for a in args { values.append(try value(a)) }
            }
            switch f {
            case .sum: return try PredicateAggregates.sum(values)
            case .count: return .scalar(.integer(Int64(values.count)))
            case .min: return try PredicateAggregates.extreme(values, maximum: false)
            case .max: return try PredicateAggregates.extreme(values, maximum: true)
            case .average: return try PredicateAggregates.average(values)
            case .median: return try PredicateAggregates.median(values)
            case .mode: return PredicateAggregates.mode(values)
            case .stddev: return try PredicateAggregates.standardDeviation(values)
            default: break
            }
        }
        let v = try value(args[0])
        if v.isNull { return .null }
        switch f {
        case .lowercase, .uppercase:
            guard case .scalar(.text(let s)) = v else {
                throw KuraError(.typeMismatch, "\(f.rawValue)() needs text but got a \(v.typeName) value")
            }
            return .scalar(.text(f == .lowercase ? s.lowercased() : s.uppercased()))
        default:
            break
        }
        let n = try PredicateNumber(v, for: f.rawValue + "()")
        switch (f, n) {
        case (.abs, .integer(let i)): return i == .min ? .scalar(.double(-Double(i))) : .scalar(.integer(Swift.abs(i)))
        case (.abs, .double(let d)): return .scalar(.double(Swift.abs(d)))
        case (.floor, .integer), (.ceiling, .integer), (.trunc, .integer): return n.value
        case (.floor, .double(let d)): return .scalar(.double(d.rounded(.down)))
        case (.ceiling, .double(let d)): return .scalar(.double(d.rounded(.up)))
        case (.trunc, .double(let d)): return .scalar(.double(d.rounded(.towardZero)))
        case (.sqrt, _): return .scalar(.double(Foundation.sqrt(n.double)))
        case (.log, _): return .scalar(.double(Foundation.log10(n.double)))
        case (.ln, _): return .scalar(.double(Foundation.log(n.double)))
        case (.exp, _): return .scalar(.double(Foundation.exp(n.double)))
        default:
            throw KuraError(.invalidArgument, "\(f.rawValue)() cannot be applied here")
        }
    }

    // MARK: Arithmetic

    static func arithmetic(_ op: KuraBinaryOperator, _ a: EvaluatedValue, _ b: EvaluatedValue) throws(KuraError) -> EvaluatedValue {
        if a.isNull || b.isNull { return .null }
        func mismatch() -> KuraError {
            KuraError(.typeMismatch, "cannot apply '\(op.rawValue)' to a \(a.typeName) value and a \(b.typeName) value")
        }
        // Dates: date ± seconds, seconds + date, date - date.
        switch (op, a, b) {
        case (.add, .date(let d), _):
            guard let n = PredicateNumber(b) else { throw mismatch() }
            return .date(d + n.double)
        case (.add, _, .date(let d)):
            guard let n = PredicateNumber(a) else { throw mismatch() }
            return .date(d + n.double)
        case (.subtract, .date(let x), .date(let y)):
            return .scalar(.double(x - y))
        case (.subtract, .date(let d), _):
            guard let n = PredicateNumber(b) else { throw mismatch() }
            return .date(d - n.double)
        case (_, .date, _), (_, _, .date):
            throw mismatch()
        default:
            break
        }
        guard let x = PredicateNumber(a), let y = PredicateNumber(b) else { throw mismatch() }
        switch op {
        case .add, .subtract, .multiply:
            if case .integer(let i) = x, case .integer(let j) = y {
                let (r, overflow) = op == .add ? i.addingReportingOverflow(j)
                    : op == .subtract ? i.subtractingReportingOverflow(j) : i.multipliedReportingOverflow(by: j)
                if !overflow { return .scalar(.integer(r)) }
            }
            let p = x.double, q = y.double
            return .scalar(.double(op == .add ? p + q : op == .subtract ? p - q : p * q))
        case .divide:
            // Integers divide as integers, truncating toward zero (NSExpression's
            // divide:by: on integer NSNumbers: 7 / 2 is 3); anything else in Double.
            if case .integer(let i) = x, case .integer(let j) = y {
                if j == 0 { throw KuraError(.invalidArgument, "division by zero: \(a.operandDescription) / \(b.operandDescription)") }
                let (q, overflow) = i.dividedReportingOverflow(by: j)
                return overflow ? .scalar(.double(-Double(i))) : .scalar(.integer(q))
            }
            return .scalar(.double(x.double / y.double))
        case .power:
            return .scalar(.double(Foundation.pow(x.double, y.double)))
        case .bitwiseAnd, .bitwiseOr, .bitwiseXor, .leftShift, .rightShift:
            guard let i = x.exactInteger, let j = y.exactInteger else {
                throw KuraError(.typeMismatch, "'\(op.rawValue)' needs integers but got \(x.double) and \(y.double)")
            }
            switch op {
            case .bitwiseAnd: return .scalar(.integer(i & j))
            case .bitwiseOr: return .scalar(.integer(i | j))
            case .bitwiseXor: return .scalar(.integer(i ^ j))
            case .leftShift: return .scalar(.integer(i << j))  // smart shift: never traps
            default: return .scalar(.integer(i >> j))
            }
        }
    }

    /// `modulus:by:`: integer remainder (sign of the dividend) or `fmod`.
    static func arithmeticModulus(_ a: EvaluatedValue, _ b: EvaluatedValue) throws(KuraError) -> EvaluatedValue {
        if a.isNull || b.isNull { return .null }
        guard let x = PredicateNumber(a), let y = PredicateNumber(b) else {
            throw KuraError(.typeMismatch, "modulus:by: needs numbers but got \(a.operandDescription) and \(b.operandDescription)")
        }
        if case .integer(let i) = x, case .integer(let j) = y {
            if j == 0 { throw KuraError(.invalidArgument, "modulus by zero: modulus:by:(\(a.operandDescription), 0)") }
            let (r, overflow) = i.remainderReportingOverflow(dividingBy: j)
            return .scalar(.integer(overflow ? 0 : r))  // only Int64.min % -1 overflows; its remainder is 0
        }
        return .scalar(.double(Foundation.fmod(x.double, y.double)))
    }

    /// UNION, INTERSECT, MINUS: distinct elements, in the left operand's order
    /// (then the right's, for UNION). Null is the empty collection; a scalar or an
    /// object is an error.
    static func setOperation(_ f: KuraFunction, _ a: EvaluatedValue, _ b: EvaluatedValue) throws(KuraError) -> EvaluatedValue {
        func members(_ v: EvaluatedValue) throws(KuraError) -> [EvaluatedValue] {
            switch v {
            case .collection(let xs): return xs
            case .scalar(.null): return []
            case .object(let o):
                if let values = o.predicateCollectionValues { return values }
            default: break
            }
            throw KuraError(.typeMismatch, "\(f.rawValue) needs collections on both sides but got \(v.operandDescription)")
        }
        let xs = try members(a), ys = try members(b)
        var out: [EvaluatedValue] = []
        func addDistinct(_ v: EvaluatedValue) {
            if !out.contains(where: { PredicateComparisonTest.equal($0, v, []) }) { out.append(v) }
        }
        let inRight = { (v: EvaluatedValue) in ys.contains { PredicateComparisonTest.equal($0, v, []) } }
        switch f {
        case .union: for v in xs + ys { addDistinct(v) }
        case .intersect: for v in xs where inRight(v) { addDistinct(v) }
        default: for v in xs where !inRight(v) { addDistinct(v) }
        }
        return .collection(out)
    }

    static func unary(_ op: KuraUnaryOperator, _ a: EvaluatedValue) throws(KuraError) -> EvaluatedValue {
        if a.isNull { return .null }
        let n = try PredicateNumber(a, for: op.rawValue)
        switch (op, n) {
        case (.negate, .integer(let i)): return i == .min ? .scalar(.double(-Double(i))) : .scalar(.integer(-i))
        case (.negate, .double(let d)): return .scalar(.double(-d))
        case (.bitwiseNot, _):
            guard let i = n.exactInteger else {
                throw KuraError(.typeMismatch, "'~' needs an integer but got \(n.double)")
            }
            return .scalar(.integer(~i))
        }
    }

    // MARK: CAST

    static func cast(_ v: EvaluatedValue, to type: KuraCastType) throws(KuraError) -> EvaluatedValue {
        if v.isNull { return .null }
        switch (type, v) {
        case (.number, .scalar(.integer)), (.number, .scalar(.double)): return v
        case (.number, .scalar(.bool(let b))): return .scalar(.integer(b ? 1 : 0))
        case (.number, .date(let d)): return .scalar(.double(d))
        case (.number, .scalar(.text(let s))):
            let t = s.trimmingCharacters(in: .whitespaces)
            if let i = Int64(t) { return .scalar(.integer(i)) }
            if let d = Double(t) { return .scalar(.double(d)) }
            return .null
        case (.string, .scalar(.text)): return v
        case (.string, .scalar(.integer(let i))): return .scalar(.text(String(i)))
        case (.string, .scalar(.double(let d))):
            if let i = Int64(exactly: d), Swift.abs(d) < 1e15 { return .scalar(.text(String(i))) }
            return .scalar(.text(String(d)))
        case (.string, .scalar(.bool(let b))): return .scalar(.text(b ? "1" : "0"))
        case (.string, .date(let d)): return .scalar(.text(Date(timeIntervalSinceReferenceDate: d).description))
        case (.date, .date): return v
        case (.date, .scalar(let s)):
            if let seconds = s.doubleValue { return .date(seconds) }
        case (.data, .scalar(.blob)): return v
        case (.data, .scalar(.text(let s))):
            if let bytes = PredicateParser.decodeHex(s) { return .scalar(.blob(bytes)) }
        default: break
        }
        throw KuraError(.typeMismatch, "cannot CAST a \(v.typeName) value to \(type.rawValue)")
    }
}

/// A number taken from a value: integers and booleans as integers, doubles as doubles.
enum PredicateNumber {
    case integer(Int64)
    case double(Double)

    init(_ v: EvaluatedValue, for what: String) throws(KuraError) {
        guard let n = PredicateNumber(v) else {
            throw KuraError(.typeMismatch, "\(what) needs a number but got \(v.operandDescription)")
        }
        self = n
    }

    /// nil when `v` is not a number or a boolean.
    init?(_ v: EvaluatedValue) {
        switch v {
        case .scalar(.integer(let i)): self = .integer(i)
        case .scalar(.bool(let b)): self = .integer(b ? 1 : 0)
        case .scalar(.double(let d)): self = .double(d)
        default: return nil
        }
    }

    var double: Double {
        switch self {
        case .integer(let i): return Double(i)
        case .double(let d): return d
        }
    }

    var exactInteger: Int64? {
        switch self {
        case .integer(let i): return i
        case .double(let d): return Int64(exactly: d)
        }
    }

    var value: EvaluatedValue {
        switch self {
        case .integer(let i): return .scalar(.integer(i))
        case .double(let d): return .scalar(.double(d))
        }
    }
}

/// The aggregate functions and collection operators.
enum PredicateAggregates {
    private static func numbers(_ values: [EvaluatedValue], _ what: String) throws(KuraError) -> [PredicateNumber] {
        var out: [PredicateNumber] = []
        out.reserveCapacity(values.count)
        for v in values where !v.isNull { out.append(try PredicateNumber(v, for: what)) }
        return out
    }

    static func sum(_ values: [EvaluatedValue]) throws(KuraError) -> EvaluatedValue {
        var intSum: Int64 = 0
        var doubleSum = 0.0
        var useDouble = false
        for n in try numbers(values, "sum") {
            switch n {
            case .integer(let i) where !useDouble:
                let (r, overflow) = intSum.addingReportingOverflow(i)
                if overflow { useDouble = true; doubleSum = Double(intSum) + Double(i) } else { intSum = r }
            default:
                if !useDouble { useDouble = true; doubleSum = Double(intSum) }
                doubleSum += n.double
            }
        }
        return useDouble ? .scalar(.double(doubleSum)) : .scalar(.integer(intSum))
    }

    static func average(_ values: [EvaluatedValue]) throws(KuraError) -> EvaluatedValue {
        let ns = try numbers(values, "average")
        if ns.isEmpty { return .null }
        return .scalar(.double(ns.reduce(0.0) { $0 + $1.double } / Double(ns.count)))
    }

    static func extreme(_ values: [EvaluatedValue], maximum: Bool) throws(KuraError) -> EvaluatedValue {
        var best: EvaluatedValue?
        for v in values where !v.isNull {
            guard let b = best else { best = v; continue }
            guard let c = PredicateComparisonTest.order(v, b, []) else {
                throw KuraError(.typeMismatch, "cannot find the \(maximum ? "max" : "min")imum of a \(v.typeName) value and a \(b.typeName) value")
            }
            if maximum ? c > 0 : c < 0 { best = v }
        }
        return best ?? .null
    }

    static func median(_ values: [EvaluatedValue]) throws(KuraError) -> EvaluatedValue {
        let ns = try numbers(values, "median").sorted { $0.double < $1.double }
        if ns.isEmpty { return .null }
        if ns.count % 2 == 1 { return ns[ns.count / 2].value }
        return .scalar(.double((ns[ns.count / 2 - 1].double + ns[ns.count / 2].double) / 2))
    }

    static func mode(_ values: [EvaluatedValue]) -> EvaluatedValue {
        var counts: [Value: Int] = [:]
        var order: [(Value, EvaluatedValue)] = []
        for v in values {
            guard case .scalar(var s) = v else { continue }
            // Numbers that are equal count together (1, 1.0 and YES).
            if case .bool(let b) = s { s = .integer(b ? 1 : 0) }
            if case .double(let d) = s, let i = Int64(exactly: d) { s = .integer(i) }
            if counts[s] == nil { order.append((s, v)) }
            counts[s, default: 0] += 1
        }
        let top = counts.values.max() ?? 0
        return .collection(order.filter { counts[$0.0] == top }.map(\.1))
    }

    static func standardDeviation(_ values: [EvaluatedValue]) throws(KuraError) -> EvaluatedValue {
        let ns = try numbers(values, "stddev").map(\.double)
        if ns.isEmpty { return .null }
        let mean = ns.reduce(0, +) / Double(ns.count)
        let variance = ns.reduce(0) { $0 + ($1 - mean) * ($1 - mean) } / Double(ns.count)
        return .scalar(.double(variance.squareRoot()))
    }
}

/// One comparison operator with its right-hand value and options, ready to test
/// many left-hand values (LIKE patterns and regular expressions compiled once).
struct PredicateComparisonTest {
    let op: KuraComparisonOperator
    let right: EvaluatedValue
    let options: KuraComparisonOptions
    private var like: LikePattern?
    private var regex: NSRegularExpression?

    private var folds: Bool { !options.isDisjoint(with: [.caseInsensitive, .diacriticInsensitive]) }

    init(_ op: KuraComparisonOperator, right: EvaluatedValue, options: KuraComparisonOptions) throws(KuraError) {
        self.op = op
        self.right = right
        self.options = options
        if case .scalar(.text(let pattern)) = right {
            if op == .like { like = LikePattern(pattern, options: options) }
            if op == .matches {
                let p = options.contains(.diacriticInsensitive) ? TextFolding.removingDiacritics(pattern) : pattern
                regex = try PredicateRegexCache.shared.regex(p, caseInsensitive: options.contains(.caseInsensitive))
            }
        }
    }

    func holds(for left: EvaluatedValue) throws(KuraError) -> Bool {
        switch op {
        case .equalTo: return Self.equal(left, right, options)
        case .notEqualTo: return !Self.equal(left, right, options)
        case .lessThan: return try orderedCompare(left, right).map { $0 < 0 } ?? false
        case .lessThanOrEqualTo: return try orderedCompare(left, right).map { $0 <= 0 } ?? false
        case .greaterThan: return try orderedCompare(left, right).map { $0 > 0 } ?? false
        case .greaterThanOrEqualTo: return try orderedCompare(left, right).map { $0 >= 0 } ?? false
        case .between:
            guard case .collection(let bounds) = right, bounds.count == 2 else {
                if right.isNull { return false }
                throw KuraError(.typeMismatch, "BETWEEN needs a two-element collection {lower, upper} but got a \(right.typeName) value")
            }
            guard let lo = try orderedCompare(left, bounds[0]), let hi = try orderedCompare(left, bounds[1]) else { return false }
            return lo >= 0 && hi <= 0
        case .in:
            if let xs = try members(right, of: "IN", side: "right") { return xs.contains { Self.equal(left, $0, options) } }
            return substring(of: right, needle: left, anchoredAt: nil)
        case .contains:
            if let xs = try members(left, of: "CONTAINS", side: "left") { return xs.contains { Self.equal($0, right, options) } }
            return substring(of: left, needle: right, anchoredAt: nil)
        case .beginsWith: return substring(of: left, needle: right, anchoredAt: .start)
        case .endsWith: return substring(of: left, needle: right, anchoredAt: .end)
        case .like:
            guard let like, case .scalar(.text(let s)) = left else { return false }
            return like.matches(s)
        case .matches:
            guard let regex, case .scalar(.text(var s)) = left else { return false }
            if options.contains(.diacriticInsensitive) { s = TextFolding.removingDiacritics(s) }
            return regex.firstMatch(in: s, options: [.anchored], range: NSRange(location: 0, length: s.utf16.count)) != nil
        }
    }

    private enum Anchor { case start, end }

    /// `order` for <, <=, >, >= and BETWEEN: nil (the comparison is false) when
    /// either side is null or a number is NaN; an error when the two values are of
    /// kinds that have no order between them (text and a number, ...), as
    /// Foundation raises for them.
    private func orderedCompare(_ a: EvaluatedValue, _ b: EvaluatedValue) throws(KuraError) -> Int? {
        if let c = Self.order(a, b, options) { return c }
        if a.isNull || b.isNull { return nil }
        if PredicateNumber(a) != nil || a.isDate, PredicateNumber(b) != nil || b.isDate { return nil }  // NaN
        throw KuraError(.typeMismatch, "cannot order \(a.operandDescription) and \(b.operandDescription) with '\(op.rawValue)': only numbers, dates, text and data compare, each with its own kind")
    }

    /// The elements IN (right side) or CONTAINS (left side) searches: a collection's,
    /// a dictionary's values; nil for text (a substring search) and null (false);
    /// an error for anything else.
    private func members(_ v: EvaluatedValue, of what: String, side: String) throws(KuraError) -> [EvaluatedValue]? {
        switch v {
        case .collection(let xs): return xs
        case .scalar(.null), .scalar(.text), .scalar(.blob): return nil
        case .object(let o):
            if let values = o.predicateCollectionValues { return values }
        default: break
        }
        throw KuraError(.typeMismatch, "\(what) needs a collection, a dictionary or text on the \(side) but got \(v.operandDescription)")
    }

    /// Byte search, when it gives exactly the Character-level answer: the needle
    /// is ASCII without CR or LF and the haystack is ASCII. In ASCII text every
    /// Character is one byte except CR LF, which such a needle cannot overlap.
    /// Returns nil when the fast path does not apply.
    static func asciiContains(_ haystack: String, _ needle: String) -> Bool? {
        var h = haystack
        var n = needle
        return h.withUTF8 { hb in
            n.withUTF8 { nb -> Bool? in
                guard nb.count <= hb.count else { return nb.allSatisfy { $0 < 0x80 && $0 != 0x0A && $0 != 0x0D } && hb.allSatisfy { $0 < 0x80 } ? false : nil }
                for b in nb where b >= 0x80 || b == 0x0A || b == 0x0D { return nil }
                for b in hb where b >= 0x80 { return nil }
                let first = nb[0]
                var i = 0
                let last = hb.count - nb.count
                while i <= last {
                    if hb[i] == first {
                        var k = 1
                        while k < nb.count && hb[i + k] == nb[k] { k += 1 }
                        if k == nb.count { return true }
                    }
                    i += 1
                }
                return false
            }
        }
    }

    /// Substring tests on text (after folding) and blobs. Foundation's rule: an empty
    /// or null needle never matches.
    private func substring(of haystack: EvaluatedValue, needle: EvaluatedValue, anchoredAt anchor: Anchor?) -> Bool {
        switch (haystack, needle) {
        case (.scalar(.text(let h)), .scalar(.text(let n))):
            if n.isEmpty { return false }
            let hf = folds ? TextFolding.fold(h, options: options) : h
            let nf = folds ? TextFolding.fold(n, options: options) : n
            switch anchor {
            case .start: return hf.hasPrefix(nf)
            case .end: return hf.hasSuffix(nf)
            case nil:
                if let found = Self.asciiContains(hf, nf) { return found }
                return hf.firstRange(of: nf) != nil
            }
        case (.scalar(.blob(let h)), .scalar(.blob(let n))):
            if n.isEmpty || n.count > h.count { return false }
            switch anchor {
            case .start: return h.starts(with: n)
            case .end: return h.suffix(n.count).elementsEqual(n)
            case nil: return h.firstRange(of: n) != nil
            }
        default:
            return false
        }
    }

    /// NSPredicate equality; see the header.
    static func equal(_ a: EvaluatedValue, _ b: EvaluatedValue, _ options: KuraComparisonOptions) -> Bool {
        switch (a, b) {
        case (.scalar(.null), .scalar(.null)): return true
        case (.scalar(.null), _), (_, .scalar(.null)): return false
        case (.scalar(.text(let x)), .scalar(.text(let y))):
            if options.isDisjoint(with: [.caseInsensitive, .diacriticInsensitive]) { return x == y }
            return TextFolding.fold(x, options: options) == TextFolding.fold(y, options: options)
        case (.scalar(.blob(let x)), .scalar(.blob(let y))): return x == y
        case (.scalar(let x), .scalar(let y)): return ValueOrdering.compareNumbers(x, y) == 0
        case (.date(let x), .date(let y)): return x == y
        case (.date(let x), .scalar(let y)), (.scalar(let y), .date(let x)):
            return ValueOrdering.compareNumbers(.double(x), y) == 0
        case (.collection(let xs), .collection(let ys)):
            return xs.count == ys.count && zip(xs, ys).allSatisfy { equal($0, $1, options) }
        case (.object(let o), .object(let p)):
            guard let i = o.predicateIdentity, let j = p.predicateIdentity else { return false }
            return equal(.scalar(i), .scalar(j), options)
        case (.object(let o), .scalar(let v)), (.scalar(let v), .object(let o)):
            guard let i = o.predicateIdentity else { return false }
            return equal(.scalar(i), .scalar(v), options)
        default:
            return false
        }
    }

    /// NSPredicate ordering; nil when the values are not comparable.
    static func order(_ a: EvaluatedValue, _ b: EvaluatedValue, _ options: KuraComparisonOptions) -> Int? {
        switch (a, b) {
        case (.scalar(.text(let x)), .scalar(.text(let y))):
            if options.isDisjoint(with: [.caseInsensitive, .diacriticInsensitive]) { return ValueOrdering.compareText(x, y) }
            return ValueOrdering.compareText(TextFolding.fold(x, options: options), TextFolding.fold(y, options: options))
        case (.scalar(.blob(let x)), .scalar(.blob(let y))): return ValueOrdering.compareBytes(x, y)
        case (.scalar(let x), .scalar(let y)): return ValueOrdering.compareNumbers(x, y)
        case (.date(let x), .date(let y)): return ValueOrdering.compareDoubles(x, y)
        case (.date(let x), .scalar(let y)): return ValueOrdering.compareNumbers(.double(x), y)
        case (.scalar(let x), .date(let y)): return ValueOrdering.compareNumbers(x, .double(y))
        default: return nil
        }
    }
}

/// Compiled regular expressions, shared by all evaluations. Bounded: cleared when
/// it holds more than `limit` patterns.
final class PredicateRegexCache: @unchecked Sendable {
    static let shared = PredicateRegexCache()
    private let lock = NSLock()
    private var entries: [String: NSRegularExpression] = [:]
    private let limit = 256

    func regex(_ pattern: String, caseInsensitive: Bool) throws(KuraError) -> NSRegularExpression {
        let key = (caseInsensitive ? "i:" : "s:") + pattern
        lock.lock()
        defer { lock.unlock() }
        if let r = entries[key] { return r }
        let compiled: NSRegularExpression
        do {
            // ICU's matches(): the whole string, hence the \z after a group.
            // Apple's flags: `.` matches line breaks, ^ and $ match at line boundaries.
            compiled = try NSRegularExpression(pattern: "(?:" + pattern + ")\\z",
                                               options: caseInsensitive ? [.caseInsensitive, .dotMatchesLineSeparators, .anchorsMatchLines]
                                                   : [.dotMatchesLineSeparators, .anchorsMatchLines])
        } catch {
            throw KuraError(.invalidArgument, "the MATCHES pattern '\(pattern)' is not a valid ICU regular expression")
        }
        if entries.count >= limit { entries.removeAll(keepingCapacity: true) }
        entries[key] = compiled
        return compiled
    }
}
