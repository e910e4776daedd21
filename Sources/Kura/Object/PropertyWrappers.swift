// Typed properties for ManagedObject subclasses, without code generation:
//
//     final class Student: ManagedObject {
//         @Managed("name") var name: String
//         @Managed("nickname") var nickname: String?
//         @ToOne("record") var record: Record?
//         @ToMany("courses") var courses: [Course]
//     }
//
// The wrappers store only the key; values live in the object (the enclosing
// instance), so `student.name` reads and writes the same state as
// `student["name"]`. A typed write that the attribute rejects (an Int16 out of
// range) is not applied and is reported by the next save, like a subscript write.
// On a key-path probe (ModelKeyPath.swift) the getters only record their key.

import Foundation

/// Swift types an attribute can be read as.
public protocol AttributeValueConvertible {
    /// The value for a stored Swift value (nil when the attribute is nil).
    static func fromAttribute(_ value: Any?) -> Self
    /// The Swift value to store (nil to store nil).
    var attributeValue: Any? { get }
}

extension Optional: AttributeValueConvertible where Wrapped: AttributeValueConvertible {
    public static func fromAttribute(_ value: Any?) -> Self {
        guard let value else { return nil }
        return Wrapped.fromAttribute(value)
    }
    public var attributeValue: Any? { self?.attributeValue }
}

/// Non-optional attribute types read a nil (an unsaved object without a value, or
/// a value of another type) as their zero value: declare the property optional to
/// see nil.
public protocol ZeroValueAttribute: AttributeValueConvertible {
    static var zero: Self { get }
}

extension ZeroValueAttribute {
    public static func fromAttribute(_ value: Any?) -> Self { value as? Self ?? zero }
    public var attributeValue: Any? { self }
}

extension Int16: ZeroValueAttribute { public static var zero: Int16 { 0 } }
extension Int32: ZeroValueAttribute { public static var zero: Int32 { 0 } }
extension Int64: ZeroValueAttribute { public static var zero: Int64 { 0 } }
extension Double: ZeroValueAttribute { public static var zero: Double { 0 } }
extension Float: ZeroValueAttribute { public static var zero: Float { 0 } }
extension Decimal: ZeroValueAttribute { public static var zero: Decimal { 0 } }
extension String: ZeroValueAttribute { public static var zero: String { "" } }
extension Bool: ZeroValueAttribute { public static var zero: Bool { false } }
extension Date: ZeroValueAttribute { public static var zero: Date { Date(timeIntervalSinceReferenceDate: 0) } }
extension Data: ZeroValueAttribute { public static var zero: Data { Data() } }
extension UUID: ZeroValueAttribute { public static var zero: UUID { UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)) } }
extension URL: ZeroValueAttribute { public static var zero: URL { URL(fileURLWithPath: "/") } }
extension Int: ZeroValueAttribute {
    public static var zero: Int { 0 }
    public static func fromAttribute(_ value: Any?) -> Int {
        switch value {
        case let v as Int16: return Int(v)
        case let v as Int32: return Int(v)
        case let v as Int64: return Int(v)
        default: return 0
        }
    }
}

/// A typed attribute property of a ManagedObject subclass.
///
/// The key must name an attribute of the class's entity and the property's
/// type must be one the attribute reads as (`Int16` or `Int` for `int16`, ...):
/// building the model checks both and throws `ModelError` naming the class and
/// property. A read that cannot give the stored value (a fault whose load
/// failed, a row deleted elsewhere, no context) returns the type's zero value
/// and goes to the failure channel: `ManagedObject.readError` and the
/// context's `pendingError`, thrown by the next save or fetch.
@propertyWrapper
public struct Managed<Value: AttributeValueConvertible> {
    public let key: String
    public init(_ key: String) { self.key = key }

    @available(*, unavailable, message: "@Managed is only for properties of ManagedObject subclasses")
    public var wrappedValue: Value {
        get { fatalError("unavailable") }
        set { fatalError("unavailable") }  // swiftlint:disable:this unused_setter_value
    }

    // Inlinable: in the subclass's module the storage key path is a literal
    // the optimizer turns into a plain field read, and nothing generic is
    // instantiated per access (the ordinal lookup and value stay in Kura).
    @inlinable
    public static subscript<Object: ManagedObject>(_enclosingInstance object: Object,
                                                    wrapped wrappedKeyPath: ReferenceWritableKeyPath<Object, Value>,
                                                    storage storageKeyPath: ReferenceWritableKeyPath<Object, Self>) -> Value {
        @inline(__always)
        get {
            let key = object[keyPath: storageKeyPath].key
            if !object.isKeyPathProbe, let v = object.directAttribute(key, as: Value.self) { return v }
            return Value.fromAttribute(object.typedAttributeOrProbe(key))
        }
        set {
            let key = object[keyPath: storageKeyPath].key
            if object.setDirectAttribute(key, newValue) { return }
            object[key] = newValue.attributeValue
        }
    }
}

/// A typed to-one relationship property of a ManagedObject subclass. A read
/// that fails returns nil and goes to the failure channel (see `Managed`).
@propertyWrapper
public struct ToOne<Target: ManagedObject> {
    public let key: String
    public init(_ key: String) { self.key = key }

    @available(*, unavailable, message: "@ToOne is only for properties of ManagedObject subclasses")
    public var wrappedValue: Target? {
        get { fatalError("unavailable") }
        set { fatalError("unavailable") }  // swiftlint:disable:this unused_setter_value
    }

    public static subscript<Object: ManagedObject>(_enclosingInstance object: Object,
                                                    wrapped wrappedKeyPath: ReferenceWritableKeyPath<Object, Target?>,
                                                    storage storageKeyPath: ReferenceWritableKeyPath<Object, Self>) -> Target? {
        // Inlinable getter (as `ToMany`'s): in the subclass's module the
        // storage key path is a plain field read, not the runtime's key-path
        // application, and the target's cast is a class check.
        @inlinable
        get { object.toOneTarget(object[keyPath: storageKeyPath].key, probing: Target.self) as? Target }
        // Inlinable setter: the storage key path becomes a plain field read
        // in the subclass's module (as `Managed`'s), and the target goes to
        // the relationship without an `Any?` box.
        @inlinable
        set { object.setToOneTarget(object[keyPath: storageKeyPath].key, newValue) }
    }
}

/// A typed to-many relationship property of a ManagedObject subclass. Reading
/// gives the current objects (ordered relationships in their order); assigning
/// replaces them, updating the inverse side. A read that fails returns [] and
/// goes to the failure channel (see `Managed`).
@propertyWrapper
public struct ToMany<Target: ManagedObject> {
    public let key: String
    public init(_ key: String) { self.key = key }

    @available(*, unavailable, message: "@ToMany is only for properties of ManagedObject subclasses")
    public var wrappedValue: [Target] {
        get { fatalError("unavailable") }
        set { fatalError("unavailable") }  // swiftlint:disable:this unused_setter_value
    }

    public static subscript<Object: ManagedObject>(_enclosingInstance object: Object,
                                                    wrapped wrappedKeyPath: ReferenceWritableKeyPath<Object, [Target]>,
                                                    storage storageKeyPath: ReferenceWritableKeyPath<Object, Self>) -> [Target] {
        // Inlinable getter: specialized in the subclass's module for its
        // `Target`, so each member's cast is a class check and the array
        // is built without the runtime's generic `compactMap`.
        @inlinable
        get {
            let members = object.toManyMembers(object[keyPath: storageKeyPath].key)
            var out: [Target] = []
            out.reserveCapacity(members.count)
            for m in members { if let t = m as? Target { out.append(t) } }
            return out
        }
        set { object[object[keyPath: storageKeyPath].key] = newValue as [ManagedObject] }
    }
}

extension Managed: ManagedPropertyBinding {
    var bindingKey: String { key }
    var bindingKind: ManagedPropertyKind { .attribute }
    var bindingValueType: Any.Type? { Value.self }
    func bindingAccepts(_ c: ManagedObject.Type) -> Bool { false }
}

extension ToOne: ManagedPropertyBinding {
    var bindingKey: String { key }
    var bindingKind: ManagedPropertyKind { .toOne }
    var bindingValueType: Any.Type? { nil }
    func bindingAccepts(_ c: ManagedObject.Type) -> Bool { c is Target.Type }
}

extension ToMany: ManagedPropertyBinding {
    var bindingKey: String { key }
    var bindingKind: ManagedPropertyKind { .toMany }
    var bindingValueType: Any.Type? { nil }
    func bindingAccepts(_ c: ManagedObject.Type) -> Bool { c is Target.Type }
}
