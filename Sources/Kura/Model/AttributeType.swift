// AttributeType: the attribute types of Core Data, and how each is stored in an
// engine column (see ManagedObjectModel.swift for the mapping of entities).
//
//     int16, int32, int64      integer column (range checked on write)
//     double, float            double column
//     decimal                  double column (what predicates, sorts and indexes
//                              see) plus an exact text column `_exact_<name>`
//                              after `_version` holding the Decimal's string;
//                              see DecimalStorage.swift
//     string                   text column
//     bool                     bool column
//     date                     date column (seconds since 2001-01-01 UTC)
//     data                     blob column
//     uuid                     text column: the UUID's uppercase string
//     url                      text column: the URL's absolute string
//     transformable            blob column: the bytes of the attribute's
//                              transformer (AttributeTransformer.swift)

import Foundation

/// The type of an attribute.
public enum AttributeType: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    case int16, int32, int64, double, float, decimal, string, bool, date, data, uuid, url
    /// Any value, stored through the attribute's transformer as a blob
    /// (AttributeTransformer.swift); the attribute's own methods convert it.
    case transformable

    public var description: String { rawValue }

    var columnType: ColumnType {
        switch self {
        case .int16, .int32, .int64: return .integer
        case .double, .float, .decimal: return .double
        case .string, .uuid, .url: return .text
        case .bool: return .bool
        case .date: return .date
        case .data, .transformable: return .blob
        }
    }

    /// Whether a Swift value may be stored in an attribute of this type (the
    /// error itself is not needed: callers report their own).
    func accepts(_ v: Any) -> Bool { (try? storedValue(v, attribute: "", entity: "")) != nil }

    /// The engine value for a Swift value.
    ///
    /// - Throws: `.typeMismatch` naming the entity and attribute.
    func storedValue(_ v: Any, attribute: String, entity: String) throws(KuraError) -> Value {
        func mismatch() -> KuraError {
            KuraError(.typeMismatch, "attribute \"\(attribute)\" of entity \"\(entity)\" is \(self); cannot store \(type(of: v)) \(v)")
        }
        func integer(_ i: Int64) throws(KuraError) -> Value {
            switch self {
            case .int16 where i < Int64(Int16.min) || i > Int64(Int16.max),
                 .int32 where i < Int64(Int32.min) || i > Int64(Int32.max):
                throw KuraError(.typeMismatch, "attribute \"\(attribute)\" of entity \"\(entity)\" is \(self); \(i) is out of range")
            case .int16, .int32, .int64: return .integer(i)
            case .decimal: return .text(String(i))
            case .double, .float: return .double(Double(i))
            default: throw mismatch()
            }
        }
        switch v {
        case let x as Int: return try integer(Int64(x))
        case let x as Int16: return try integer(Int64(x))
        case let x as Int32: return try integer(Int64(x))
        case let x as Int64: return try integer(x)
        case let x as Double:
            guard [.double, .float, .decimal].contains(self) else { throw mismatch() }
            if self == .decimal { return try Self.decimalValue(fromDouble: x, attribute: attribute, entity: entity) }
            return .double(x)
        case let x as Float:
            guard [.double, .float, .decimal].contains(self) else { throw mismatch() }
            if self == .decimal { return try Self.decimalValue(fromDouble: Double(x), attribute: attribute, entity: entity) }
            return .double(Double(x))
        case let x as Decimal:
            guard [.double, .float, .decimal].contains(self) else { throw mismatch() }
            if self == .decimal { return try Self.decimalValue(x, attribute: attribute, entity: entity) }
            return .double(Double(x.description) ?? NSDecimalNumber(decimal: x).doubleValue)
        case let x as String:
            guard self == .string else { throw mismatch() }
            return .text(x)
        case let x as Bool:
            guard self == .bool else { throw mismatch() }
            return .bool(x)
        case let x as Date:
            guard self == .date else { throw mismatch() }
            return .double(x.timeIntervalSinceReferenceDate)
        case let x as Data:
            guard self == .data else { throw mismatch() }
            return .blob([UInt8](x))
        case let x as [UInt8]:
            guard self == .data else { throw mismatch() }
            return .blob(x)
        case let x as UUID:
            guard self == .uuid else { throw mismatch() }
            return .text(x.uuidString)
        case let x as URL:
            guard self == .url else { throw mismatch() }
            return .text(x.absoluteString)
        case let x as Value:
            // An engine value is checked as the Swift value it stands for: a
            // text in an integer attribute is as wrong as a String would be.
            switch x {
            case .null: return .null
            case .integer(let i): return try integer(i)
            case .double(let d):
                if self == .date { return .double(d) }
                return try storedValue(d, attribute: attribute, entity: entity)
            case .text(let t):
                switch self {
                case .uuid:
                    guard let u = UUID(uuidString: t) else { throw mismatch() }
                    return .text(u.uuidString)
                case .url:
                    guard URL(string: t) != nil else { throw mismatch() }
                    return .text(t)
                case .decimal:
                    guard let d = Self.parseDecimal(t) else { throw mismatch() }
                    return try Self.decimalValue(d, attribute: attribute, entity: entity)
                default: return try storedValue(t, attribute: attribute, entity: entity)
                }
            case .bool(let b): return try storedValue(b, attribute: attribute, entity: entity)
            case .blob(let b): return try storedValue(b, attribute: attribute, entity: entity)
            }
        default:
            throw mismatch()
        }
    }

    /// The engine value of an (already accepted) default. The `try?` cannot
    /// fail: the model's `validate` refused every default `accepts` rejects.
    func stored(_ v: Any) -> Value { (try? storedValue(v, attribute: "", entity: "")) ?? .null }

    /// The Swift value of a stored engine value (nil for null).
    func swiftValue(_ v: Value) -> Any? {
        switch (self, v) {
        case (_, .null): return nil
        case (.int16, .integer(let i)): return Int16(truncatingIfNeeded: i)
        case (.int32, .integer(let i)): return Int32(truncatingIfNeeded: i)
        case (.int64, .integer(let i)): return i
        case (.double, .double(let d)): return d
        case (.float, .double(let d)): return Float(d)
        case (.decimal, .double(let d)): return Decimal(string: "\(d)") ?? Decimal(d)
        case (.decimal, .text(let s)): return Self.parseDecimal(s)
        case (.string, .text(let s)): return s
        case (.bool, .bool(let b)): return b
        case (.date, .double(let d)): return Date(timeIntervalSinceReferenceDate: d)
        case (.data, .blob(let b)): return Data(b)
        case (.uuid, .text(let s)): return UUID(uuidString: s)
        case (.url, .text(let s)): return URL(string: s)
        default: return nil
        }
    }

    /// How the predicate evaluator sees a stored value.
    func evaluated(_ v: Value) -> EvaluatedValue {
        if self == .date, case .double(let d) = v { return .date(d) }
        return .scalar(engineValue(v))
    }
}
