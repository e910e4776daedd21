// Value: one stored value. See Record.swift for how values are encoded on disk.

/// One value stored in a record or passed to a query: null, a 64-bit integer, a
/// double, UTF-8 text, a blob or a boolean.
///
/// Integers and doubles compare numerically with each other (`.integer(1) == .double(1)`
/// for ordering purposes, see ``Value/compare(_:_:)``); Swift's `==` on `Value` is
/// structural (`.integer(1) != .double(1)`).
public enum Value: Sendable, Hashable, CustomStringConvertible {
    case null
    case integer(Int64)
    case double(Double)
    case text(String)
    case blob([UInt8])
    case bool(Bool)

    public var isNull: Bool { if case .null = self { return true } else { return false } }

    /// The integer, if this is `.integer`.
    public var integerValue: Int64? { if case .integer(let v) = self { return v } else { return nil } }
    /// The number as a double, if this is `.integer` or `.double`.
    public var doubleValue: Double? {
        switch self {
        case .integer(let v): return Double(v)
        case .double(let v): return v
        default: return nil
        }
    }
    /// The string, if this is `.text`.
    public var textValue: String? { if case .text(let v) = self { return v } else { return nil } }
    /// The bytes, if this is `.blob`.
    public var blobValue: [UInt8]? { if case .blob(let v) = self { return v } else { return nil } }
    /// The boolean, if this is `.bool`.
    public var boolValue: Bool? { if case .bool(let v) = self { return v } else { return nil } }

    /// A name for the value's type, for error messages.
    public var typeName: String {
        switch self {
        case .null: return "null"
        case .integer: return "integer"
        case .double: return "double"
        case .text: return "text"
        case .blob: return "blob"
        case .bool: return "bool"
        }
    }

    public var description: String {
        switch self {
        case .null: return "null"
        case .integer(let v): return String(v)
        case .double(let v): return String(v)
        case .text(let v): return "\"" + v + "\""
        case .blob(let v): return "<" + v.map { String($0, radix: 16).leftPadded(2) }.joined() + ">"
        case .bool(let v): return v ? "true" : "false"
        }
    }
}

extension String {
    func leftPadded(_ width: Int, with pad: Character = "0") -> String {
        count >= width ? self : String(repeating: pad, count: width - count) + self
    }
}

extension Value: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByNilLiteral {
    public init(stringLiteral value: String) { self = .text(value) }
    public init(integerLiteral value: Int64) { self = .integer(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(nilLiteral: ()) { self = .null }
}
