// DecimalStorage: how a `decimal` attribute keeps exactly the Decimal it was
// given (a money app gets back what it stored) while predicates, sorts and
// indexes keep working on numbers.
//
// In an object (`ManagedObject.values`) a decimal is `.text` holding the
// Decimal's canonical string (`Decimal.description`: digits, optional "-" and
// ".", no exponent, no locale). In a table it is two columns:
//   - `<name>` (double): the nearest double, which the engine compares, sorts
//     and indexes (exact to 15 significant digits; two decimals that differ
//     only beyond the 17th compare equal in a predicate);
//   - `_exact_<name>` (text), placed after `_version` (every companion in
//     attribute order): the canonical string, which reads give back.
// Rows written before the companion existed (or by a writer that bypassed
// the object layer) have it null; so does a row whose companion and double
// disagree (a merge that took one column from the store and the other from a
// context, or an engine-level update of the double): reads then use the double,
// through its shortest decimal form, as Kura did before. A companion that is
// not a decimal string is an error on read naming the object and attribute
// (`.typeMismatch`, as any stored value of the wrong form), never a default.
//
// Where the object form meets the engine, `engineValue` turns the text into
// the double: rows written (RowLayout), in-memory predicate evaluation and
// sorts, uniqueness lookups, `Idioms` predicates, validation bounds.

import Foundation

extension AttributeType {
    /// The companion column of a decimal attribute.
    static func exactColumn(_ attribute: String) -> String { "_exact_" + attribute }

    /// The value the engine compares for an object value: a decimal's double.
    func engineValue(_ v: Value) -> Value {
        guard self == .decimal, case .text(let s) = v, let d = Double(s) else { return v }
        return .double(d)
    }

    /// The object form of a Decimal (canonical text).
    ///
    /// - Throws: `.typeMismatch` for NaN (a decimal attribute holds numbers).
    static func decimalValue(_ x: Decimal, attribute: String, entity: String) throws(KuraError) -> Value {
        guard !x.isNaN else {
            throw KuraError(.typeMismatch, "attribute \"\(attribute)\" of entity \"\(entity)\" is decimal; cannot store NaN")
        }
        return .text(x.description)
    }

    /// The object form of a Double given to a decimal attribute: the decimal
    /// its shortest representation spells ("0.1" for 0.1).
    ///
    /// - Throws: `.typeMismatch` for infinities and NaN.
    static func decimalValue(fromDouble d: Double, attribute: String, entity: String) throws(KuraError) -> Value {
        guard d.isFinite, let x = Decimal(string: "\(d)", locale: posix) else {
            throw KuraError(.typeMismatch, "attribute \"\(attribute)\" of entity \"\(entity)\" is decimal; cannot store \(d)")
        }
        return try decimalValue(x, attribute: attribute, entity: entity)
    }

    static let posix = Locale(identifier: "en_US_POSIX")

    /// A Decimal from its stored text; nil unless the whole string is a number
    /// (`Decimal(string:)` alone accepts a numeric prefix such as "1x").
    static func parseDecimal(_ s: String) -> Decimal? {
        guard Double(s) != nil else { return nil }
        return Decimal(string: s, locale: posix)
    }

    /// The object form of a decimal read from its columns (see the header).
    static func storedDecimal(number: Value, exact: Value?) -> Value {
        if case .text(let s)? = exact {
            // Not a number: kept, so the read names it (swiftValue refuses it).
            guard let d = Double(s) else { return .text(s) }
            if number == .double(d) { return .text(s) }
        }
        guard let d = number.doubleValue, d.isFinite, let x = Decimal(string: "\(d)", locale: posix) else { return number }
        return .text(x.description)
    }
}
