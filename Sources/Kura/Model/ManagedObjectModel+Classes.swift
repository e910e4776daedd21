// ManagedObjectModel+Classes: binding Swift classes to entities.
//
// A class is bound to an entity by `EntityDescription(_, class:)`. Two checks
// make a wrong binding an error instead of a silent "" or 0:
//   - when the model is built, each bound class's `@Managed`, `@ToOne` and
//     `@ToMany` properties are listed (through `Mirror` on one instance made
//     with `init(entity:objectID:)`, outside any context) and each key must name
//     an attribute / relationship of the right kind, each `@Managed` Swift type
//     must be one the attribute's type reads as, and each relationship's target
//     class must be the destination entity's class (or a superclass of it);
//   - looking up the entity of a class that is bound to none throws, naming the
//     class and the entities it could be.

import Foundation

/// What a property wrapper of a ManagedObject subclass binds to.
protocol ManagedPropertyBinding {
    /// The attribute or relationship name.
    var bindingKey: String { get }
    /// Whether it binds an attribute, a to-one or a to-many relationship.
    var bindingKind: ManagedPropertyKind { get }
    /// For `@Managed`: the Swift type of the property.
    var bindingValueType: Any.Type? { get }
    /// For relationships: whether objects of `c` can be the property's targets.
    func bindingAccepts(_ c: ManagedObject.Type) -> Bool
}

enum ManagedPropertyKind: String {
    case attribute = "@Managed", toOne = "@ToOne", toMany = "@ToMany"
}

/// Lets the check see through `Optional` (`@Managed("x") var x: String?`).
protocol OptionalAttributeType {
    static var wrappedAttributeType: Any.Type { get }
}

extension Optional: OptionalAttributeType {
    static var wrappedAttributeType: Any.Type { Wrapped.self }
}

extension ManagedObjectModel {
    /// The entity whose class is `c`.
    ///
    /// - Throws: `.notFound` naming the class and the entities it could be
    ///   (those named like it, or bound to no class of their own).
    func entity(forClass c: ManagedObject.Type) throws(KuraError) -> EntityDescription {
        if let e = topmostEntity(ofClass: c) { return e }
        let name = String(describing: c)
        let candidates = entities.filter { $0.name.lowercased() == name.lowercased() || $0.objectClass == ManagedObject.self }
        let shown = (candidates.isEmpty ? entities : candidates).map { "\($0.name) (class \($0.objectClass))" }
        throw KuraError(.notFound, "class \(name) is not the class of any entity in the model; bind it with EntityDescription(\"<entity>\", class: \(name).self). "
                        + (candidates.isEmpty ? "Entities: " : "It could be: ") + shown.joined(separator: ", "))
    }

    /// The entity whose class is `c` and whose parent's is not: subentities
    /// bound to no class of their own share their parent's, and the class
    /// names the topmost of them.
    func topmostEntity(ofClass c: ManagedObject.Type) -> EntityDescription? {
        entitiesByClass[ObjectIdentifier(c)]
    }

    /// Problems with the property wrappers of the classes bound to entities.
    func classBindingProblems() -> [String] {
        var problems: [String] = []
        for e in entities where e.objectClass != ManagedObject.self {
            let probe = e.objectClass.init(entity: e, objectID: ManagedObjectID(entity: e.name, rowID: 0, temporary: true))
            var mirror: Mirror? = Mirror(reflecting: probe)
            while let m = mirror {
                for child in m.children {
                    guard let b = child.value as? ManagedPropertyBinding else { continue }
                    let property = (child.label ?? "?").hasPrefix("_") ? String((child.label ?? "?").dropFirst()) : (child.label ?? "?")
                    let at = "entity \"\(e.name)\": \(e.objectClass).\(property) is \(b.bindingKind.rawValue)(\"\(b.bindingKey)\")"
                    switch b.bindingKind {
                    case .attribute:
                        guard let a = e.attributesByName[b.bindingKey] else {
                            problems.append("\(at), but the entity has no attribute \"\(b.bindingKey)\" (attributes: \(e.attributes.map(\.name).joined(separator: ", ")))")
                            continue
                        }
                        if let t = b.bindingValueType, let ok = Self.swiftType(t, readsAs: a.type), !ok {
                            problems.append("\(at) of type \(t), but attribute \"\(a.name)\" is \(a.type) (read it as \(Self.swiftTypes(a.type).map { "\($0)" }.joined(separator: " or ")))")
                        }
                    case .toOne, .toMany:
                        guard let r = e.relationshipsByName[b.bindingKey] else {
                            problems.append("\(at), but the entity has no relationship \"\(b.bindingKey)\" (relationships: \(e.relationships.map(\.name).joined(separator: ", ")))")
                            continue
                        }
                        if r.isToMany != (b.bindingKind == .toMany) {
                            problems.append("\(at), but relationship \"\(r.name)\" is \(r.isToMany ? "to-many" : "to-one")")
                        } else if let d = entitiesByName[r.destination], !b.bindingAccepts(d.objectClass) {
                            problems.append("\(at), but relationship \"\(r.name)\" holds \(d.name) objects, of class \(d.objectClass)")
                        }
                    }
                }
                mirror = m.superclassMirror
            }
        }
        return problems
    }

    /// The Swift types an attribute type reads as (for typed properties).
    static func swiftTypes(_ t: AttributeType) -> [Any.Type] {
        switch t {
        case .int16: return [Int16.self, Int.self]
        case .int32: return [Int32.self, Int.self]
        case .int64: return [Int64.self, Int.self]
        case .double: return [Double.self]
        case .float: return [Float.self]
        case .decimal: return [Decimal.self]
        case .string: return [String.self]
        case .bool: return [Bool.self]
        case .date: return [Date.self]
        case .data: return [Data.self]
        case .uuid: return [UUID.self]
        case .url: return [URL.self]
        case .transformable: return []   // any type: its transformer decides
        }
    }

    /// Whether a property of Swift type `t` reads an attribute of type `a`;
    /// nil for a type Kura does not know (an app's own conformance).
    static func swiftType(_ t: Any.Type, readsAs a: AttributeType) -> Bool? {
        if a == .transformable { return nil }
        var t = t
        while let o = t as? OptionalAttributeType.Type { t = o.wrappedAttributeType }
        let known = AttributeType.allCases.flatMap(swiftTypes)
        guard known.contains(where: { $0 == t }) else { return nil }
        return swiftTypes(a).contains { $0 == t }
    }
}
