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
    /// Whether the attribute is transient (Core Data's `isTransient`): it has no
    /// column and is never saved. Each object keeps its value in memory; it
    /// starts as the default on insert and whenever the object's values are
    /// (re)loaded from the store (a fault fired, `refresh(_:mergeChanges: false)`,
    /// a fetch of an object not yet registered); `refresh` with merging keeps a
    /// changed transient value, as it keeps other pending changes, and so do
    /// saves and merge-conflict resolutions; `rollback`
    /// restores the value it had at the last save or load. Changing one marks
    /// the object updated (`hasChanges`), but not ``ManagedObject/changedValues()``,
    /// `hasPersistentChangedValues` or the persistent history. Fetch requests
    /// cannot filter or sort by a transient attribute (as in Core Data: the
    /// store does not have it); they throw `.invalidArgument` naming it. A
    /// transient attribute cannot be indexed or part of a uniqueness constraint
    /// or fetch index.
    public let isTransient: Bool
    /// For a transformable attribute: the transformer to use (overrides the name).
    public let transformer: (any AttributeTransformer)?
    /// For a transformable attribute: the name its transformer is registered
    /// under (``AttributeTransformers``; Xcode's `valueTransformerName`); nil
    /// with no `transformer` means the built-in property-list transformer.
    public let valueTransformerName: String?
    /// The class name of the values (Xcode's `customClassName`), kept as
    /// written for code generation; Kura does not check values against it.
    public let customClassName: String?
    /// Minimum, maximum and regular-expression rules checked at save
    /// (AttributeValidation.swift); nil for none.
    public let validation: AttributeValidation?
    /// For `.data` and `.transformable`: values of at least
    /// `Database.Options.externalThreshold` bytes (128 KiB by default) are kept
    /// in files beside the store instead of in its pages (Core Data's "Allows
    /// External Storage"; ExternalStorage.swift). Reads and writes look the
    /// same; the attribute cannot be indexed, and predicates compare only its
    /// nil-ness reliably. Changing it for a stored attribute changes its column
    /// type (`blob` ↔ `external`), a `modelMismatch`.
    public let allowsExternalBinaryDataStorage: Bool
    /// Core Data's `preservesValueInHistoryOnDeletion` (Xcode's
    /// `preserveAfterDeletion`): when persistent history tracking is on, the
    /// delete record of an object carries this attribute's last saved value in
    /// ``PersistentHistoryChange/tombstone``, so a history reader can tell which
    /// object went after its row is gone. Not allowed on a transient attribute.
    public let preservesValueInHistoryOnDeletion: Bool
    /// Core Data's Spotlight indexing hint (Xcode's `spotlightIndexingEnabled`).
    /// Kura has no Spotlight integration: the flag is kept in the model for
    /// callers and code generation and changes nothing.
    public let isIndexedBySpotlight: Bool
    /// For a derived attribute (Core Data's `NSDerivedAttributeDescription`):
    /// the expression its value is computed from at each save
    /// (DerivedAttributes.swift lists what Kura evaluates); nil for an ordinary
    /// attribute. A derived attribute is stored (its column holds the computed
    /// value, so fetches filter and sort by it) but cannot be set by the app.
    public let derivationExpression: String?
    /// For a composite attribute (Core Data's `NSCompositeAttributeDescription`,
    /// iOS 17): its elements, each stored in a column `<name>.<element>`; nil
    /// for an ordinary attribute (CompositeAttributes.swift). The attribute's
    /// value reads and writes as a `[String: Any]` keyed by element name.
    public let compositeElements: [AttributeDescription]?

    /// - Parameters:
    ///   - optional: false makes a nil value a validation error at save.
    ///   - default: the initial value of new objects (Int, Double, String, Date, ...).
    ///   - indexed: keep an index on the attribute.
    ///   - userInfo, renamingIdentifier, versionHashModifier: kept as given (see the properties).
    ///   - transient: kept in memory only (see ``isTransient``).
    ///   - transformer, valueTransformerName, customClassName: for `.transformable`
    ///     only (AttributeTransformer.swift says which transformer is used).
    ///   - validation: value rules checked at save (see ``validation``).
    ///   - allowsExternalBinaryDataStorage, preservesValueInHistoryOnDeletion,
    ///     indexedBySpotlight, derivationExpression: see the properties.
    ///   - compositeElements: makes a composite attribute (see ``compositeElements``);
    ///     `type` is then ignored (a composite's value is a dictionary).
    public init(_ name: String, _ type: AttributeType, optional: Bool = true, default defaultValue: (any Sendable)? = nil, indexed: Bool = false,
                userInfo: [String: String] = [:], renamingIdentifier: String? = nil, versionHashModifier: String? = nil,
                transient: Bool = false, transformer: (any AttributeTransformer)? = nil, valueTransformerName: String? = nil,
                customClassName: String? = nil, validation: AttributeValidation? = nil,
                allowsExternalBinaryDataStorage: Bool = false, preservesValueInHistoryOnDeletion: Bool = false,
                indexedBySpotlight: Bool = false, derivationExpression: String? = nil,
                compositeElements: [AttributeDescription]? = nil) {
        self.validation = validation
        self.allowsExternalBinaryDataStorage = allowsExternalBinaryDataStorage
        self.preservesValueInHistoryOnDeletion = preservesValueInHistoryOnDeletion
        self.isIndexedBySpotlight = indexedBySpotlight
        self.derivationExpression = derivationExpression
        self.compositeElements = compositeElements
        self.isTransient = transient
        self.transformer = transformer
        self.valueTransformerName = valueTransformerName
        self.customClassName = customClassName
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
    /// Whether the relationship is transient (Core Data's `isTransient`): it
    /// is never stored. Each object holds its targets in memory (strongly, as
    /// Core Data does) until the object's values are (re)loaded from the store
    /// (a fault fired, `refresh(_:mergeChanges: false)`, a fetch of an object
    /// that had no pending changes) or the context is reset; saves keep it.
    /// Its inverse must be transient too (or absent); setting one side sets
    /// the other, deleting an object removes it from its partners' transient
    /// relationships. Fetch requests cannot filter or sort through it.
    public let isTransient: Bool
    /// Core Data's Spotlight indexing hint; kept, with no effect in Kura.
    public let isIndexedBySpotlight: Bool

    /// A to-one relationship (or a to-many with `toMany: true`).
    ///
    /// Without `inverse` (or with an inverse that names another relationship
    /// back: Core Data loads such models with a warning) the relationship is
    /// kept in step from this side only: see ``ManagedObjectModel`` ("Inverses").
    public init(_ name: String, to destination: String, inverse: String? = nil, toMany: Bool = false, ordered: Bool = false,
                deleteRule: DeleteRule = .nullify, optional: Bool = true, minCount: Int? = nil, maxCount: Int? = nil,
                userInfo: [String: String] = [:], renamingIdentifier: String? = nil, versionHashModifier: String? = nil,
                transient: Bool = false, indexedBySpotlight: Bool = false) {
        self.isTransient = transient
        self.isIndexedBySpotlight = indexedBySpotlight
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
        case index(FetchIndexDescription)
        case fetched(FetchedPropertyDescription)
    }
    public static func buildExpression(_ a: AttributeDescription) -> [Part] { [.attribute(a)] }
    public static func buildExpression(_ r: RelationshipDescription) -> [Part] { [.relationship(r)] }
    public static func buildExpression(_ u: UniqueConstraint) -> [Part] { [.unique(u.attributes)] }
    public static func buildExpression(_ i: FetchIndexDescription) -> [Part] { [.index(i)] }
    public static func buildExpression(_ f: FetchedPropertyDescription) -> [Part] { [.fetched(f)] }
    public static func buildBlock(_ parts: [Part]...) -> [Part] { parts.flatMap { $0 } }
}

/// A uniqueness constraint on one or more attributes (compound when several).
public struct UniqueConstraint: Sendable {
    public let attributes: [String]
    public init(_ attributes: String...) { self.attributes = attributes }
}

/// An entity: a kind of object, stored as a table. Immutable.
///
/// Inheritance (Core Data's superentity/subentities): an entity made with
/// `parent:` inherits its parent's attributes, relationships and uniqueness
/// constraints. As made, ``attributes``, ``relationships`` and
/// ``uniquenessConstraints`` hold only what the entity declares; the entities
/// of a ``ManagedObjectModel`` (`model["Country"]`, `model.entities`) are
/// resolved copies whose lists start with the inherited properties (in the
/// parent's order) and whose ``subentityNames`` are filled in; the declared
/// parts stay in ``declaredAttributes`` and friends. An abstract entity
/// (`abstract: true`) has no objects of its own: only its subentities can be
/// inserted. Entities without parent or subentities are used as made.
public final class EntityDescription: Sendable {
    public let name: String
    /// Every attribute: inherited ones first (see the type's comment), then declared ones.
    public let attributes: [AttributeDescription]
    /// Every relationship: inherited ones first, then declared ones.
    public let relationships: [RelationshipDescription]
    /// Groups of attributes whose values together must be unique; a group
    /// inherited from an ancestor is unique across all of that ancestor's
    /// subentities (two siblings cannot share the values).
    public let uniquenessConstraints: [[String]]
    /// The class objects of this entity are made as. A subentity bound to no
    /// class of its own (`ManagedObject`) takes its parent's class in a model.
    public let objectClass: ManagedObject.Type
    public let attributesByName: [String: AttributeDescription]
    /// Each attribute's ordinal (its index in ``attributes``), by name: where
    /// its value sits in an object's storage (AttributeValues.swift).
    let attributeOrdinals: [String: Int]
    /// Each attribute's type by ordinal, nil for a composite attribute (read
    /// and written by the object layer without copying descriptions).
    let attributeStorageTypes: [AttributeType?]
    /// The ordinals of the transient attributes (kept across reloads).
    let transientOrdinals: [Int]
    /// The attribute names in ordinal order, for `ordinal(ofAttribute:)`.
    let attributeNames: [String]
    /// The ordinals of the attributes a save requires (not optional), and of
    /// those with validation rules: what `save` checks on every object.
    let requiredOrdinals: [Int]
    let ruleOrdinals: [Int]
    public let relationshipsByName: [String: RelationshipDescription]
    /// The relationship names in order, for `relationshipIndex(_:)`.
    let relationshipNames: [String]
    /// Application data attached to the entity (Core Data's `userInfo`).
    public let userInfo: [String: String]
    /// The entity's name in an earlier model version (Xcode's `elementID`).
    public let renamingIdentifier: String?
    /// Core Data's version hash modifier.
    public let versionHashModifier: String?
    /// The class name the model file names (Core Data's `managedObjectClassName`),
    /// kept as written; ``objectClass`` is the class Kura actually makes.
    public let representedClassName: String?
    /// The parent entity's name (Core Data's `superentity`; Xcode's `parentEntity`), if any.
    public let superentityName: String?
    /// Whether the entity has no objects of its own (Core Data's `isAbstract`):
    /// inserting one throws; fetches of it return its subentities' objects.
    public let isAbstract: Bool
    /// The direct subentities' names, in model order (filled in a model; empty as made).
    public let subentityNames: [String]
    /// The attributes the entity itself declares (as made).
    public let declaredAttributes: [AttributeDescription]
    /// The relationships the entity itself declares (as made).
    public let declaredRelationships: [RelationshipDescription]
    /// The uniqueness constraints the entity itself declares (as made).
    public let declaredUniquenessConstraints: [[String]]
    /// Compound (or single) non-unique indexes: inherited ones first, then
    /// declared ones (FetchIndexDescription.swift). An index declared on any
    /// entity of a hierarchy is an index of the hierarchy's shared table.
    public let fetchIndexes: [FetchIndexDescription]
    /// The fetch indexes the entity itself declares (as made).
    public let declaredFetchIndexes: [FetchIndexDescription]
    /// Fetched properties (FetchedPropertyDescription.swift): inherited ones first.
    public let fetchedProperties: [FetchedPropertyDescription]
    /// The fetched properties the entity itself declares (as made).
    public let declaredFetchedProperties: [FetchedPropertyDescription]
    public let fetchedPropertiesByName: [String: FetchedPropertyDescription]

    /// Where the entity's rows live and what the entity spans (EntityHierarchy.swift).
    let hierarchy: EntityHierarchyInfo

    public convenience init(_ name: String, parent: String? = nil, abstract: Bool = false, class objectClass: ManagedObject.Type = ManagedObject.self,
                            @EntityBuilder _ build: () -> [EntityBuilder.Part]) {
        var attrs: [AttributeDescription] = []
        var rels: [RelationshipDescription] = []
        var uniques: [[String]] = []
        var indexes: [FetchIndexDescription] = []
        var fetched: [FetchedPropertyDescription] = []
        for p in build() {
            switch p {
            case .attribute(let a): attrs.append(a)
            case .relationship(let r): rels.append(r)
            case .unique(let u): uniques.append(u)
            case .index(let i): indexes.append(i)
            case .fetched(let f): fetched.append(f)
            }
        }
        self.init(name, parent: parent, abstract: abstract, class: objectClass, attributes: attrs, relationships: rels, uniquenessConstraints: uniques,
                  fetchIndexes: indexes, fetchedProperties: fetched)
    }

    /// An entity from lists (what the result-builder initializer and the Xcode
    /// model loader build).
    ///
    /// - Parameters:
    ///   - parent: the superentity's name; the model checks that it exists and
    ///     that the parents form no cycle.
    ///   - abstract: the entity has no objects of its own (only subentities).
    ///   - fetchIndexes: non-unique (compound) indexes (FetchIndexDescription.swift).
    ///   - fetchedProperties: read-only fetch results (FetchedPropertyDescription.swift).
    public convenience init(_ name: String, parent: String? = nil, abstract: Bool = false, class objectClass: ManagedObject.Type = ManagedObject.self,
                            attributes attrs: [AttributeDescription], relationships rels: [RelationshipDescription],
                            uniquenessConstraints uniques: [[String]] = [], fetchIndexes: [FetchIndexDescription] = [],
                            fetchedProperties: [FetchedPropertyDescription] = [],
                            userInfo: [String: String] = [:], renamingIdentifier: String? = nil, versionHashModifier: String? = nil,
                            representedClassName: String? = nil) {
        self.init(name: name, superentityName: parent, isAbstract: abstract, objectClass: objectClass,
                  declared: (attrs, rels, uniques), resolved: (attrs, rels, uniques), subentityNames: [],
                  hierarchy: EntityHierarchyInfo(standalone: name, attributes: attrs, relationships: rels, uniques: uniques),
                  userInfo: userInfo, renamingIdentifier: renamingIdentifier, versionHashModifier: versionHashModifier,
                  representedClassName: representedClassName, fetchIndexes: (fetchIndexes, fetchIndexes),
                  fetchedProperties: (fetchedProperties, fetchedProperties))
    }

    /// The designated initializer: a model makes resolved copies with it.
    init(name: String, superentityName: String?, isAbstract: Bool, objectClass: ManagedObject.Type,
         declared: ([AttributeDescription], [RelationshipDescription], [[String]]),
         resolved: ([AttributeDescription], [RelationshipDescription], [[String]]), subentityNames: [String],
         hierarchy: EntityHierarchyInfo, userInfo: [String: String], renamingIdentifier: String?, versionHashModifier: String?,
         representedClassName: String?, fetchIndexes: (declared: [FetchIndexDescription], resolved: [FetchIndexDescription]),
         fetchedProperties: (declared: [FetchedPropertyDescription], resolved: [FetchedPropertyDescription])) {
        self.name = name
        declaredFetchedProperties = fetchedProperties.declared
        self.fetchedProperties = fetchedProperties.resolved
        fetchedPropertiesByName = Dictionary(fetchedProperties.resolved.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        declaredFetchIndexes = fetchIndexes.declared
        self.fetchIndexes = fetchIndexes.resolved
        self.superentityName = superentityName
        self.isAbstract = isAbstract
        self.objectClass = objectClass
        declaredAttributes = declared.0
        declaredRelationships = declared.1
        declaredUniquenessConstraints = declared.2
        attributes = resolved.0
        relationships = resolved.1
        uniquenessConstraints = resolved.2
        self.subentityNames = subentityNames
        self.hierarchy = hierarchy
        self.userInfo = userInfo
        self.renamingIdentifier = renamingIdentifier
        self.versionHashModifier = versionHashModifier
        self.representedClassName = representedClassName
        attributesByName = Dictionary(resolved.0.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        attributeOrdinals = Dictionary(resolved.0.enumerated().map { ($0.element.name, $0.offset) }, uniquingKeysWith: { a, _ in a })
        attributeStorageTypes = resolved.0.map { $0.compositeElements == nil ? $0.type : nil }
        transientOrdinals = resolved.0.indices.filter { resolved.0[$0].isTransient }
        attributeNames = resolved.0.map(\.name)
        requiredOrdinals = resolved.0.indices.filter { !resolved.0[$0].isOptional }
        ruleOrdinals = resolved.0.indices.filter { resolved.0[$0].validation != nil }
        relationshipsByName = Dictionary(resolved.1.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        relationshipNames = resolved.1.map(\.name)
    }
}

extension EntityDescription {
    /// The ordinal of the attribute named `key` (nil if none): what typed
    /// properties ask on every read and write. A small entity's names are
    /// compared in order (a few string comparisons cost less than hashing
    /// the key); a larger one's are looked up in `attributeOrdinals`.
    ///
    /// The names are first compared by their bits: a typed property's key
    /// (a literal) and the model's name are most often the same small
    /// string, whose bits are equal, and a comparison of two different
    /// small strings that `==` makes is a call into the runtime. Names
    /// whose bits differ may still be equal (two storages of one text), so
    /// `==` decides when no bits match.
    @inline(__always)
    func ordinal(ofAttribute key: String) -> Int? {
        let names = attributeNames
        if names.count <= 8 { return names.indexBitsFirst(of: key) }
        return attributeOrdinals[key]
    }

    /// The index in ``relationships`` of the relationship named `key` (nil
    /// if none; the first, as `relationshipsByName` keeps it): what typed
    /// to-one setters ask. Compared as `ordinal(ofAttribute:)` compares
    /// (bits first, then `==`) for a few names; more are looked up by name.
    @inline(__always)
    func relationshipIndex(_ key: String) -> Int? {
        let names = relationshipNames
        if names.count <= 8 { return names.indexBitsFirst(of: key) }
        guard relationshipsByName[key] != nil else { return nil }
        return names.firstIndex(of: key)
    }
}

extension String {
    /// Whether the two strings have the same bits: then they are equal
    /// (equal strings may still differ in bits: two storages of one text).
    /// A typed property's key (a literal) and the model's name are most
    /// often the same small string, and comparing two different small
    /// strings with `==` is a call into the runtime.
    @inline(__always)
    func hasSameBits(as other: String) -> Bool {
        guard MemoryLayout<String>.size == MemoryLayout<(UInt64, UInt64)>.size else { return false }
        // Same size, checked above: a copy of the two words, which are only compared.
        let x = unsafeBitCast(self, to: (UInt64, UInt64).self), y = unsafeBitCast(other, to: (UInt64, UInt64).self)
        return x.0 == y.0 && x.1 == y.1
    }
}

extension Array where Element == String {
    /// The index of `key` (the first), compared by bits first
    /// (`hasSameBits`), then with `==` when no bits match: for a few names.
    @inline(__always)
    func indexBitsFirst(of key: String) -> Int? {
        for i in indices where self[i].hasSameBits(as: key) { return i }
        for i in indices where self[i] == key { return i }
        return nil
    }
}
