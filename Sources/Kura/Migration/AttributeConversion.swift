// AttributeConversion: which attribute type changes a lightweight migration
// infers, and the exact conversion of one stored value (FORMAT.md, "Model
// changes").
//
// A conversion is applied value by value and must be exact: converting back
// gives the value stored before. A value that does not convert exactly (an
// int64 beyond int16's range, 2.5 to an integer, "12a" to an integer) fails
// the migration naming the attribute and the object; the store is left as it
// was. Inferred:
//   int16 ↔ int32 ↔ int64            same integer column; narrowing checks the range
//   float → double                  same double column, nothing to do
//   double → float                  checks each value is a float
//   integer → double or float       rewritten; exact below 2^53 (float: 2^24)
//   double or float → integer       rewritten; integral values in range only
//   bool ↔ integer                  rewritten; integers 0 and 1 only
//   integer, double, float, bool → string   rewritten as text: decimal digits,
//                                   Swift's shortest round-trip double form,
//                                   `true`/`false`
//   string → integer, double        rewritten when the text is exactly what the
//                                   other direction would print
//   uuid, url → string              same text column, nothing to do
//   decimal ↔ double                same double column (the exact companion
//                                   column appears or is retired)
// Anything else (dates, data, transformables, string → uuid/url/bool) is
// not inferred: a custom migration stage can convert it.

import Foundation
import KuraEngine

enum AttributeConversion {
    /// What a change from `from` to `to` costs, or nil if it is not inferred.
    enum Cost { case nothing, check, rewrite }

    static func cost(from: AttributeType, to: AttributeType) -> Cost? {
        if from == to { return .nothing }
        let ints: Set<AttributeType> = [.int16, .int32, .int64]
        let reals: Set<AttributeType> = [.double, .float]
        switch (from, to) {
        case _ where ints.contains(from) && ints.contains(to):
            return width(to) >= width(from) ? .nothing : .check
        case (.float, .double), (.decimal, .double), (.double, .decimal), (.uuid, .string), (.url, .string): return .nothing
        case (.double, .float): return .check
        case _ where ints.contains(from) && reals.contains(to): return .rewrite
        case _ where reals.contains(from) && ints.contains(to): return .rewrite
        case _ where from == .bool && ints.contains(to), _ where ints.contains(from) && to == .bool: return .rewrite
        case _ where (ints.contains(from) || reals.contains(from) || from == .bool) && to == .string: return .rewrite
        case _ where from == .string && (ints.contains(to) || to == .double): return .rewrite
        default: return nil
        }
    }

    private static func width(_ t: AttributeType) -> Int {
        switch t { case .int16: 16; case .int32: 32; default: 64 }
    }

    /// The attribute type a column of type `c` is read as when the store does
    /// not record its model.
    static func representative(_ c: ColumnType) -> AttributeType {
        switch c {
        case .integer: .int64
        case .double: .double
        case .text: .string
        case .bool: .bool
        case .date: .date
        case .blob, .external: .data
        }
    }

    /// `v` (stored for `from`) as stored for `to`, or nil if not exact.
    static func convert(_ v: Value, from: AttributeType, to: AttributeType) -> Value? {
        if case .null = v { return .null }
        switch to {
        case .int16, .int32, .int64:
            let i: Int64
            switch v {
            case .integer(let x): i = x
            case .double(let d):
                guard d.rounded() == d, d >= -9.223372036854775808e18, d < 9.223372036854775808e18 else { return nil }
                i = Int64(d)
            case .bool(let b): i = b ? 1 : 0
            case .text(let s):
                guard let x = Int64(s), String(x) == s else { return nil }
                i = x
            default: return nil
            }
            switch to {
            case .int16: return Int16(exactly: i) == nil ? nil : .integer(i)
            case .int32: return Int32(exactly: i) == nil ? nil : .integer(i)
            default: return .integer(i)
            }
        case .double, .float, .decimal:
            let d: Double
            switch v {
            case .integer(let i):
                guard let x = Double(exactly: i) else { return nil }
                d = x
            case .double(let x): d = x
            case .text(let s):
                guard let x = Double(s), "\(x)" == s else { return nil }
                d = x
            default: return nil
            }
            if to == .float { guard let f = Float(exactly: d), Double(f) == d else { return nil } }
            return .double(d)
        case .bool:
            switch v {
            case .bool: return v
            case .integer(0): return .bool(false)
            case .integer(1): return .bool(true)
            default: return nil
            }
        case .string:
            switch v {
            case .text: return v
            case .integer(let i): return .text(String(i))
            case .double(let d): return .text(from == .float ? "\(Float(d))" : "\(d)")
            case .bool(let b): return .text(b ? "true" : "false")
            default: return nil
            }
        default:
            return from == to ? v : nil
        }
    }
}
