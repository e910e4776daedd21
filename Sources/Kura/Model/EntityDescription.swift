// EntityDescription, AttributeDescription, RelationshipDescription: the parts of
// a model (Core Data's NSEntityDescription, NSAttributeDescription and
// NSRelationshipDescription). Immutable values.

/// One attribute of an entity.
public struct AttributeDescription: Sendable {
    public let name: String
    public let type: AttributeType
    /// Whether the attribute may be nil when the object is saved.
    public let isOptional: Bool
    /// The value a new object starts with.
    public let defaultValue: (any Sendable)?
    /// Whether fetches by this attribute use an index.
    public let isIndexed: Bool
    /// Application data attached to the attribute (Core Data's `userInfo`); Kura
    /// does not interpret it.
    public let userInfo: [String: String]
    /// The attribute's name in an earlier model version (Core Data's renaming
    /// identifier; Xcode's `elementID`), for migration.
    public let renamingIdentifier: String?
    /// Core Data's version hash modifier: marks a change that keeps the name and type.
    public let versionHashModifier: String?

    /// - Parameters:
    ///   - optional: false makes a nil value a validation error at save.
    ///   - default: the initial value of new objects (Int, Double, String, Date, ...).
    ///   - indexed: keep an index on the attribute.
    ///   - userInfo, renamingIdentifier, versionHashModifier: kept as given (see the properties).
    public init(_ name: String, _ type: AttributeType, optional: Bool = true, default defaultValue: (any Sendable)? = nil, indexed: Bool = false,
                userInfo: [String: String] = [:], renamingIdentifier: String? = nil, versionHashModifier: String? = nil) {
        self.name = name
        self.type = type
        self.isOptional = optional
        self.defaultValue = defaultValue
        self.isIndexed = indexed
        self.userInfo = userInfo
        self.renamingIdentifier = renamingIdentifier
        self.versionHashModifier = versionHashModifier
    }
}

/// What deleting an object does to the objects a relationship points to.
public enum DeleteRule: String, Sendable, CaseIterable {
    /// Remove the deleted object from the targets' inverse relationship.
    case nullify
    /// Delete the targets too.
    case cascade
    /// Refuse the save while the relationship has targets.
    case deny
    /// Leave the targets alone (their inverse keeps pointing at a deleted object).
    case noAction
}

/// One relationship of an entity.
public struct RelationshipDescription: Sendable {
    public let name: String
    /// The entity it points to.
    public let destination: String
    /// The relationship of the destination that points back, if any.
    public let inverse: String?
    public let isToMany: Bool
    /// For a to-many: whether it keeps its objects in an order.
    public let isOrdered: Bool
    public let deleteRule: DeleteRule
    /// Whether it may be empty (nil) when the object is saved.
    public let isOptional: Bool
    /// For a to-many: the fewest and most objects it may hold at save.
    public let minCount: Int?
    public let maxCount: Int?
    /// Application data attached to the relationship (Core Data's `userInfo`).
    public let userInfo: [String: String]
    /// The relationship's name in an earlier model version (Xcode's `elementID`).
    public let renamingIdentifier: String?
    /// Core Data's version hash modifier.
    public let versionHashModifier: String?

    /// A to-one relationship (or a to-many with `toMany: true`).
    public init(_ name: String, to destination: String, inverse: String? = nil, toMany: Bool = false, ordered: Bool = false,
                deleteRule: DeleteRule = .nullify, optional: Bool = true, minCount: Int? = nil, maxCount: Int? = nil,
                userInfo: [String: String] = [:], renamingIdentifier: String? = nil, versionHashModifier: String? = nil) {
        self.userInfo = userInfo
        self.renamingIdentifier = renamingIdentifier
        self.versionHashModifier = versionHashModifier
        self.name = name
        self.destination = destination
        self.inverse = inverse
        self.isToMany = toMany
        self.isOrdered = ordered
        self.deleteRule = deleteRule
        self.isOptional = optional
        self.minCount = minCount
        self.maxCount = maxCount
    }
}

/// Builds an entity's properties.
@resultBuilder
public enum EntityBuilder {
    public enum Part {
        case attribute(AttributeDescription)
        case relationship(RelationshipDescription)
        case unique([String])
    }
    public static func buildExpression(_ a: AttributeDescription) -> [Part] { [.attribute(a)] }
    public static func buildExpression(_ r: RelationshipDescription) -> [Part] { [.relationship(r)] }
    public static func buildExpression(_ u: UniqueConstraint) -> [Part] { [.unique(u.attributes)] }
    public static func buildBlock(_ parts: [Part]...) -> [Part] { parts.flatMap { $0 } }
}

/// A uniqueness constraint on one or more attributes (compound when several).
public struct UniqueConstraint: Sendable {
    public let attributes: [String]
    public init(_ attributes: String...) { self.attributes = attributes }
}

/// An entity: a kind of object, stored as a table. Immutable.
public final class EntityDescription: Sendable {
    public let name: String
    public let attributes: [AttributeDescription]
    public let relationships: [RelationshipDescription]
    /// Groups of attributes whose values together must be unique.
    public let uniquenessConstraints: [[String]]
    /// The class objects of this entity are made as.
    public let objectClass: ManagedObject.Type
    public let attributesByName: [String: AttributeDescription]
    public let relationshipsByName: [String: RelationshipDescription]
    /// Application data attached to the entity (Core Data's `userInfo`).
    public let userInfo: [String: String]
    /// The entity's name in an earlier model version (Xcode's `elementID`).
    public let renamingIdentifier: String?
    /// Core Data's version hash modifier.
    public let versionHashModifier: String?
    /// The class name the model file names (Core Data's `managedObjectClassName`),
    /// kept as written; ``objectClass`` is the class Kura actually makes.
    public let representedClassName: String?

    public convenience init(_ name: String, class objectClass: ManagedObject.Type = ManagedObject.self, @EntityBuilder _ build: () -> [EntityBuilder.Part]) {
        var attrs: [AttributeDescription] = []
        var rels: [RelationshipDescription] = []
        var uniques: [[String]] = []
        for p in build() {
            switch p {
            case .attribute(let a): attrs.append(a)
            case .relationship(let r): rels.append(r)
            case .unique(let u): uniques.append(u)
            }
        }
        self.init(name, class: objectClass, attributes: attrs, relationships: rels, uniquenessConstraints: uniques)
    }

    /// An entity from lists (what the result-builder initializer and the Xcode
    /// model loader build).
    public init(_ name: String, class objectClass: ManagedObject.Type = ManagedObject.self, attributes attrs: [AttributeDescription],
                relationships rels: [RelationshipDescription], uniquenessConstraints uniques: [[String]] = [],
                userInfo: [String: String] = [:], renamingIdentifier: String? = nil, versionHashModifier: String? = nil,
                representedClassName: String? = nil) {
        self.name = name
        self.objectClass = objectClass
        attributes = attrs
        relationships = rels
        uniquenessConstraints = uniques
        self.userInfo = userInfo
        self.renamingIdentifier = renamingIdentifier
        self.versionHashModifier = versionHashModifier
        self.representedClassName = representedClassName
        attributesByName = Dictionary(attrs.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        relationshipsByName = Dictionary(rels.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
    }
}
