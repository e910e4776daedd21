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

    /// - Parameters:
    ///   - optional: false makes a nil value a validation error at save.
    ///   - default: the initial value of new objects (Int, Double, String, Date, ...).
    ///   - indexed: keep an index on the attribute.
    public init(_ name: String, _ type: AttributeType, optional: Bool = true, default defaultValue: (any Sendable)? = nil, indexed: Bool = false) {
        self.name = name
        self.type = type
        self.isOptional = optional
        self.defaultValue = defaultValue
        self.isIndexed = indexed
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

    /// A to-one relationship (or a to-many with `toMany: true`).
    public init(_ name: String, to destination: String, inverse: String? = nil, toMany: Bool = false, ordered: Bool = false,
                deleteRule: DeleteRule = .nullify, optional: Bool = true, minCount: Int? = nil, maxCount: Int? = nil) {
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

    public init(_ name: String, class objectClass: ManagedObject.Type = ManagedObject.self, @EntityBuilder _ build: () -> [EntityBuilder.Part]) {
        self.name = name
        self.objectClass = objectClass
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
        attributes = attrs
        relationships = rels
        uniquenessConstraints = uniques
        attributesByName = Dictionary(attrs.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        relationshipsByName = Dictionary(rels.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
    }
}
