// AttributeValidation: value rules of an attribute checked at save (Core Data's
// validation predicates; Xcode's minValueString / maxValueString /
// minDateTimeInterval / maxDateTimeInterval / regularExpressionString).
//
// What minimum and maximum bound, by attribute type:
//   int16/int32/int64/double/float/decimal   the value
//   date                                     seconds since 2001-01-01 UTC
//   string                                   the length in characters
//   data                                     the length in bytes
// The regular expression (strings only) must match the whole value, as
// Core Data's `MATCHES` (ICU syntax through NSRegularExpression).
// A nil value is not checked here (`optional` decides). Transient attributes
// are checked like stored ones. Each failure is one line of the save's
// `.validation` error naming the object, attribute and rule.
//
// Model invariants (ModelError): rules only on the types above (regular
// expressions only on strings), minimum ≤ maximum, finite bounds, and a
// regular expression that compiles.

import Foundation

/// Value rules of one attribute, checked when a context saves.
public struct AttributeValidation: Sendable, Equatable {
    /// The least value (number, date in seconds since 2001, or length of a string or data).
    public var minimum: Double?
    /// The greatest value (same units as `minimum`).
    public var maximum: Double?
    /// A pattern the whole string must match (strings only).
    public var regularExpression: String?

    public init(minimum: Double? = nil, maximum: Double? = nil, regularExpression: String? = nil) {
        self.minimum = minimum
        self.maximum = maximum
        self.regularExpression = regularExpression
    }

    var isEmpty: Bool { minimum == nil && maximum == nil && regularExpression == nil }
}

extension AttributeDescription {
    /// Checks the rules' fit to the attribute (see the header).
    func validationModelProblem(entity: String) -> String? {
        guard let v = validation, !v.isEmpty else { return nil }
        let at = "entity \"\(entity)\": attribute \"\(name)\""
        switch type {
        case .int16, .int32, .int64, .double, .float, .decimal, .date, .string, .data: break
        default: return "\(at) is \(type); minimum, maximum and regular expression apply to numbers, dates, strings and data"
        }
        for b in [v.minimum, v.maximum].compactMap({ $0 }) where !b.isFinite { return "\(at) has a bound \(b) that is not finite" }
        if let mn = v.minimum, let mx = v.maximum, mn > mx { return "\(at) has minimum \(mn) above maximum \(mx)" }
        if let r = v.regularExpression {
            guard type == .string else { return "\(at) is \(type); a regular expression applies to strings only" }
            do { _ = try NSRegularExpression(pattern: r) } catch {
                return "\(at) has regular expression \"\(r)\", which does not compile: \(error)"
            }
        }
        return nil
    }

    /// The rules `value` breaks, one message each naming the object, attribute and rule.
    func validationProblems(_ value: Value, of object: ManagedObjectID) -> [String] {
        guard let v = validation, !v.isEmpty, !value.isNull else { return [] }
        let at = "\(object): attribute \"\(name)\""
        let measured: (amount: Double, what: String)?
        switch (type, value) {
        case (.string, .text(let s)): measured = (Double(s.count), "has length \(s.count)")
        case (.data, .blob(let b)): measured = (Double(b.count), "has length \(b.count)")
        case (.date, .double(let d)):
            measured = (d, "is \(Date(timeIntervalSinceReferenceDate: d)) (\(d) s since 2001)")
        case (.decimal, .text(let s)): measured = Double(s).map { ($0, "is \(s)") }
        case (_, .integer(let i)): measured = (Double(i), "is \(i)")
        case (_, .double(let d)): measured = (d, "is \(d)")
        default: measured = nil
        }
        var out: [String] = []
        if let m = measured {
            let unit = type == .string || type == .data ? "length" : "value"
            if let mn = v.minimum, m.amount < mn { out.append("\(at) \(m.what) (rule: minimum \(unit) \(Self.bound(mn, type)))") }
            if let mx = v.maximum, m.amount > mx { out.append("\(at) \(m.what) (rule: maximum \(unit) \(Self.bound(mx, type)))") }
        }
        if let r = v.regularExpression, case .text(let s) = value {
            do {
                let re = try CompiledPatterns.shared.expression(r)
                let whole = NSRange(s.startIndex..., in: s)
                let m = re.firstMatch(in: s, options: [.anchored], range: whole)
                if m?.range != whole { out.append("\(at) is \"\(s)\", which does not match the regular expression \"\(r)\" (rule: regular expression)") }
            } catch {
                // The model check compiles every pattern, so this is reached only
                // by a model built around that check; the save still fails, by name.
                out.append("\(at): the regular expression \"\(r)\" does not compile (\(error)), so the value cannot be checked")
            }
        }
        return out
    }

    private static func bound(_ b: Double, _ type: AttributeType) -> String {
        if type == .date { return "\(Date(timeIntervalSinceReferenceDate: b))" }
        return b.rounded() == b && abs(b) < 1e15 ? String(Int64(b)) : "\(b)"
    }
}

/// Regular expressions of validation rules, compiled once per pattern for the
/// life of the process (a save used to compile the pattern again for every value).
///
/// Thread rules: any thread; `lock` guards `compiled`. NSRegularExpression
/// matching is documented thread-safe once the object is built.
final class CompiledPatterns: @unchecked Sendable {
    // @unchecked Sendable: `compiled` is read and written only under `lock`.
    static let shared = CompiledPatterns()
    private let lock = NSLock()
    private var compiled: [String: NSRegularExpression] = [:]

    /// The compiled form of `pattern`.
    /// - Throws: the compiler's error if the pattern does not compile (not cached).
    func expression(_ pattern: String) throws -> NSRegularExpression {
        if let re = lock.withLock({ compiled[pattern] }) { return re }
        let re = try NSRegularExpression(pattern: pattern)
        lock.withLock { compiled[pattern] = re }
        return re
    }
}
