// AttributeTransformer: how a transformable attribute (AttributeType
// .transformable, Core Data's Transformable) turns values into the bytes of its
// blob column and back. Core Data uses Foundation's value transformers; Kura has
// its own small protocol (the name avoids Foundation's class) and a registry by
// name, so an Xcode model's `valueTransformerName` finds the app's transformer.
//
// Which transformer an attribute uses: the instance given to its
// AttributeDescription, else the one registered under its
// `valueTransformerName`, else (no name) the built-in property-list
// transformer, which is also registered under Core Data's standard names
// "NSSecureUnarchiveFromData" and "NSKeyedUnarchiveFromData" (Kura stores no
// keyed archives: the bytes are a property list, read back by the same
// transformer). The transformer is looked up when a value is written or read
// (as Core Data does), so transformers may be registered after the model is
// built but before objects are used; an unregistered name is `.notFound`
// naming the entity, attribute and name.
//
// Failure modes: a value the transformer cannot encode is `.typeMismatch`
// naming entity, attribute and value type; stored bytes it cannot decode are
// `.corrupt` naming the object, attribute and transformer (never nil).
// Null is stored as null without calling the transformer.
//
// Predicates and uniqueness compare the stored bytes: that is value equality
// only for a deterministic transformer (CodableAttributeTransformer is: sorted-key
// JSON; the property-list one promises no key order for dictionaries); ordering
// is byte order.

import Foundation

/// Converts the values of a transformable attribute to bytes and back
/// (Kura's counterpart of Foundation's value transformers). Must be
/// deterministic if predicates or uniqueness constraints compare the attribute.
/// Called on whatever thread uses the object.
public protocol AttributeTransformer: Sendable {
    /// The bytes stored for `value` (never called with nil).
    func encode(_ value: Any) throws -> Data
    /// The value stored as `data`.
    func decode(_ data: Data) throws -> Any
}

/// A transformer for any `Codable` type, storing JSON with sorted keys (the
/// same value always gives the same bytes; dates as seconds since 2001, data as
/// base64: JSONEncoder's defaults).
public struct CodableAttributeTransformer<T: Codable & Sendable>: AttributeTransformer {
    public init() {}

    public func encode(_ value: Any) throws -> Data {
        guard let v = value as? T else { throw TransformerError("expects \(T.self), got \(type(of: value))") }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return try encoder.encode(v)
    }

    public func decode(_ data: Data) throws -> Any {
        try JSONDecoder().decode(T.self, from: data)
    }
}

/// The built-in transformer for property-list values (String, integers,
/// Double, Bool, Date, Data, arrays and String-keyed dictionaries of them),
/// stored as a binary property list. Used when an attribute names no
/// transformer, and under "NSSecureUnarchiveFromData"/"NSKeyedUnarchiveFromData".
public struct PropertyListAttributeTransformer: AttributeTransformer {
    public init() {}

    public func encode(_ value: Any) throws -> Data {
        guard PropertyListSerialization.propertyList(value, isValidFor: .binary) else {
            throw TransformerError("\(type(of: value)) is not a property-list value")
        }
        return try PropertyListSerialization.data(fromPropertyList: value, format: .binary, options: 0)
    }

    public func decode(_ data: Data) throws -> Any {
        try PropertyListSerialization.propertyList(from: data, options: [], format: nil)
    }
}

/// The error a transformer throws when it refuses a value (any error will do;
/// Kura wraps it in a `KuraError` naming the attribute).
public struct TransformerError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// Transformers by name, for transformable attributes that name one
/// (`valueTransformerName`). Process-wide and thread-safe.
public enum AttributeTransformers {
    /// Guards `table`; `@unchecked Sendable` is safe because every access holds `lock`.
    private final class Table: @unchecked Sendable {
        let lock = NSLock()
        var table: [String: any AttributeTransformer] = [
            "NSSecureUnarchiveFromData": PropertyListAttributeTransformer(),
            "NSKeyedUnarchiveFromData": PropertyListAttributeTransformer(),
        ]
    }
    private static let shared = Table()

    /// Registers `transformer` under `name`, replacing any earlier one; objects
    /// use it from their next read or write.
    public static func register(_ transformer: any AttributeTransformer, named name: String) {
        shared.lock.lock()
        defer { shared.lock.unlock() }
        shared.table[name] = transformer
    }

    /// Removes the transformer registered under `name` (built-in ones too).
    public static func unregister(named name: String) {
        shared.lock.lock()
        defer { shared.lock.unlock() }
        shared.table[name] = nil
    }

    /// The transformer registered under `name`, if any.
    public static func transformer(named name: String) -> (any AttributeTransformer)? {
        shared.lock.lock()
        defer { shared.lock.unlock() }
        return shared.table[name]
    }
}

extension AttributeDescription {
    /// The transformer of a transformable attribute (see the header).
    ///
    /// - Throws: `.notFound` naming entity, attribute and transformer name.
    func resolvedTransformer(entity: String) throws(KuraError) -> any AttributeTransformer {
        if let transformer { return transformer }
        guard let name = valueTransformerName else { return PropertyListAttributeTransformer() }
        guard let t = AttributeTransformers.transformer(named: name) else {
            throw KuraError(.notFound, "transformable attribute \"\(self.name)\" of entity \"\(entity)\" uses value transformer \"\(name)\", which is not registered (register it with AttributeTransformers.register(_:named:))")
        }
        return t
    }

    /// The engine value stored for a Swift value (nil → null).
    ///
    /// - Throws: `.typeMismatch` naming entity and attribute; `.notFound` for
    ///   an unregistered transformer.
    func storedValue(_ v: Any?, entity: String) throws(KuraError) -> Value {
        guard let v else { return .null }
        if let elements = compositeElements { return try compositeStoredValue(v, elements, entity: entity) }
        guard type == .transformable else { return try type.storedValue(v, attribute: name, entity: entity) }
        if let raw = v as? Value, raw.isNull { return .null }
        let t = try resolvedTransformer(entity: entity)
        do {
            return .blob([UInt8](try t.encode(v)))
        } catch {
            throw KuraError(.typeMismatch, "transformable attribute \"\(name)\" of entity \"\(entity)\": its transformer (\(valueTransformerName ?? "\(Swift.type(of: t))")) cannot encode \(Swift.type(of: v)): \(error)")
        }
    }

    /// The Swift value of a stored engine value (nil for null).
    ///
    /// - Throws: `.corrupt` naming the object and attribute when the stored
    ///   value is not of the attribute's type or the transformer cannot decode
    ///   it; `.notFound` for an unregistered transformer.
    func swiftValue(_ v: Value, of object: ManagedObjectID) throws(KuraError) -> Any? {
        if v.isNull { return nil }
        if let elements = compositeElements { return try compositeSwiftValue(v, elements, of: object) }
        if type == .transformable {
            guard case .blob(let bytes) = v else {
                throw KuraError(.corrupt, "transformable attribute \"\(name)\" of \(object) holds \(v.typeName), not the bytes of a transformed value")
            }
            let t = try resolvedTransformer(entity: object.entityName)
            do {
                return try t.decode(Data(bytes))
            } catch {
                throw KuraError(.corrupt, "transformable attribute \"\(name)\" of \(object): its transformer (\(valueTransformerName ?? "\(Swift.type(of: t))")) cannot decode the \(bytes.count) stored bytes: \(error)")
            }
        }
        guard let s = type.swiftValue(v) else {
            throw KuraError(.typeMismatch, "attribute \"\(name)\" of \(object) holds \(v.typeName) \(v), which is not a valid \(type)")
        }
        return s
    }
}
