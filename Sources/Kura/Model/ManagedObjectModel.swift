// ManagedObjectModel: entities, attributes and relationships, defined in Swift.
//
// Storage mapping (how the model lands in KuraEngine tables; FORMAT.md describes
// the tables themselves):
//   - each entity is a table named after it, with a schema: one column per
//     attribute, then one integer column per to-one relationship holding the
//     target's row ID (the foreign key, indexed), then, for a to-one relationship
//     whose inverse is an ordered to-many, a double column `<name>_order`;
//   - a to-many relationship whose inverse is to-one is read through that
//     foreign key; a many-to-many pair (or a to-many without inverse) uses a join
//     table `_<Entity>_<relationship>` (named after the pair's first side in
//     name order) with columns `source`, `target` and `position`;
//     and `inverse_position` (each side's order of an ordered relationship);
//   - transient attributes and relationships have no column (kept in memory
//     per object);
//   - indexed attributes get an engine index, uniqueness constraints a unique one;
//   - then an integer column `_version` (Core Data's Z_OPT): the row's version,
//     bumped by every save that writes the row (see Context+Conflicts.swift);
//   - last, a text column `_exact_<name>` per decimal attribute (DecimalStorage.swift);
//   - an entity hierarchy (inheritance) shares one table named after its root,
//     with an `_entity` column; see EntityHierarchy.swift.
//
// Inverses. A pair of relationships that name each other (or where one names
// the other and the other names none) is kept in step from both sides: setting
// one side sets the other, a delete nullifies or cascades through it, and it
// is stored once (a to-one's key, or one join table). A relationship without
// inverse, or whose inverse names another relationship back (a non-reciprocal
// inverse: Core Data loads it with a warning), is kept from its own side only:
// a to-one is its key, a to-many a join table of its own; the other side never
// changes when it does, and deleting its target leaves no dangling value to
// read (a to-one to a deleted object reads nil, a join row naming a missing
// row is skipped), as with Core Data's relationships without inverse.
//
// Invariants (checked by `validate`, thrown as `ModelError`): entity names are
// unique and non-empty; property names are unique per entity and not reserved;
// every relationship's destination exists; an inverse names a relationship of
// the destination whose destination is this entity and whose inverse (if set)
// is this relationship; uniqueness constraints name attributes of the entity;
// the property wrappers of bound classes name existing properties of the right
// kind and type (ManagedObjectModel+Classes.swift); inheritance is well formed
// (EntityHierarchy.swift).

import Foundation

/// An error in a model definition.
public struct ModelError: Error, CustomStringConvertible, Sendable, Equatable {
    public let message: String
    public var description: String { "invalid model: " + message }
}

/// The data model: a set of entities. The Kura counterpart of
/// NSManagedObjectModel. Immutable and `Sendable` once built.
///
/// ```swift
/// let model = try ManagedObjectModel {
///     EntityDescription("Student", class: Student.self) {
///         AttributeDescription("name", .string)
///         AttributeDescription("age", .int16, default: 0)
///         RelationshipDescription("record", to: "Record", inverse: "student", deleteRule: .cascade)
///     }
///     EntityDescription("Record") {
///         AttributeDescription("course", .string)
///         AttributeDescription("grade", .int32)
///         RelationshipDescription("student", to: "Student", inverse: "record")
///     }
/// }
/// ```
public final class ManagedObjectModel: Sendable {
    /// Entities by name.
    public let entitiesByName: [String: EntityDescription]
    /// Entities in definition order (subentities resolved: see ``EntityDescription``).
    public let entities: [EntityDescription]
    /// Named subsets of the entities (Core Data's configurations): name → entity
    /// names. A store opened by ``PersistentContainer`` holds every entity (Core
    /// Data's default configuration); the named ones are kept for callers.
    public let configurations: [String: [String]]
    /// Fetch requests stored in the model, by name (FetchTemplate.swift;
    /// make one with ``fetchRequest(template:substitutionVariables:)``).
    public let fetchTemplates: [String: FetchTemplate]
    /// The topmost entity of each bound class (`topmostEntity(ofClass:)`,
    /// asked by every `init(context:)`), made once.
    let entitiesByClass: [ObjectIdentifier: EntityDescription]
    /// Whether some entity has a to-one relationship (else no object holds a
    /// to-one key: a save need not look for keys naming the objects it inserted).
    let hasToOneRelationships: Bool
    /// Whether some entity has a uniqueness constraint (else a save has no
    /// object's values to check for clashes).
    let hasUniquenessConstraints: Bool
    /// Whether some relationship has the delete rule `.deny` (else a save
    /// has no deleted object's relationships to check).
    let hasDenyRules: Bool
    /// Whether some relationship is transient (else no object ever holds a
    /// transient link: `ManagedObject.transientRelated` stays empty, and a
    /// fault's load need not clear it).
    let hasTransientRelationships: Bool
    /// Each entity's relationships' destination entities and storage, by
    /// relationship index (`relationshipPlan`), made once: a relationship
    /// read looked both up per read (two string hashes, an inverse lookup
    /// and the storage's strings built).
    let relationshipPlans: [ObjectIdentifier: [RelationshipPlan]]

    /// Builds and validates a model.
    ///
    /// - Parameters:
    ///   - configurations: named subsets of the entities; each member must be
    ///     an entity of the model.
    ///   - fetchTemplates: named fetch requests (unique names, existing entities).
    /// - Throws: `ModelError` naming the entity and property at fault.
    public init(_ entities: [EntityDescription], configurations: [String: [String]] = [:], fetchTemplates: [FetchTemplate] = []) throws(ModelError) {
        self.configurations = configurations
        var names = Set<String>()
        for e in entities {
            guard !e.name.isEmpty, !e.name.hasPrefix("_") else { throw ModelError(message: "entity name \"\(e.name)\" must be non-empty and not start with \"_\"") }
            guard names.insert(e.name).inserted else { throw ModelError(message: "two entities are named \"\(e.name)\"") }
        }
        let resolved = try Self.resolveInheritance(entities)
        self.entities = resolved
        let byName = Dictionary(resolved.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        entitiesByName = byName
        var byClass: [ObjectIdentifier: EntityDescription] = [:]
        for e in resolved where byClass[ObjectIdentifier(e.objectClass)] == nil {
            // The first entity in definition order whose parent has another class, as the scan found.
            if e.superentityName.flatMap({ byName[$0] }).map({ $0.objectClass != e.objectClass }) ?? true {
                byClass[ObjectIdentifier(e.objectClass)] = e
            }
        }
        entitiesByClass = byClass
        hasToOneRelationships = resolved.contains { e in e.relationships.contains { !$0.isToMany } }
        hasUniquenessConstraints = resolved.contains { !$0.uniquenessConstraints.isEmpty }
        hasDenyRules = resolved.contains { e in e.relationships.contains { $0.deleteRule == .deny } }
        hasTransientRelationships = resolved.contains { e in e.relationships.contains { $0.isTransient } }
        var plans: [ObjectIdentifier: [RelationshipPlan]] = [:]
        for e in resolved {
            plans[ObjectIdentifier(e)] = e.relationships.map { r in
                RelationshipPlan(destination: byName[r.destination], storage: Self.storage(of: r, in: e, entities: byName))
            }
        }
        relationshipPlans = plans
        for (name, members) in configurations.sorted(by: { $0.key < $1.key }) {
            for m in members where byName[m] == nil {
                throw ModelError(message: "configuration \"\(name)\" names entity \"\(m)\", which the model does not have")
            }
        }
        self.fetchTemplates = try Self.validateTemplates(fetchTemplates, entities: byName)
        try validate()
        for table in entityTables { _ = try tableColumns(table) }
        if let problem = classBindingProblems().first { throw ModelError(message: problem) }
    }

    /// Builds a model from a list written with the result builder.
    public convenience init(@ModelBuilder _ build: () -> [EntityDescription]) throws(ModelError) {
        try self.init(build())
    }

    /// The entity named `name`.
    public subscript(name: String) -> EntityDescription? { entitiesByName[name] }

    func entity(_ name: String) throws(KuraError) -> EntityDescription {
        guard let e = entitiesByName[name] else {
            throw KuraError(.notFound, "the model has no entity \"\(name)\" (entities: \(entities.map(\.name).joined(separator: ", ")))")
        }
        return e
    }

    private func validate() throws(ModelError) {
        for e in entities {
            var names = Set<String>()
            for f in e.fetchedProperties where entitiesByName[f.fetchRequest.entityName] == nil {
                throw ModelError(message: "entity \"\(e.name)\": fetched property \"\(f.name)\" fetches entity \"\(f.fetchRequest.entityName)\", which the model does not have")
            }
            for p in e.attributes.map(\.name) + e.relationships.map(\.name) + e.fetchedProperties.map(\.name) {
                guard !p.isEmpty, !p.hasPrefix("_"), !p.contains(".") else {
                    throw ModelError(message: "entity \"\(e.name)\": property name \"\(p)\" must be non-empty, not start with \"_\" and contain no \".\"")
                }
                guard names.insert(p).inserted else { throw ModelError(message: "entity \"\(e.name)\" has two properties named \"\(p)\"") }
            }
            for a in e.attributes {
                if a.isTransient && a.isIndexed {
                    throw ModelError(message: "entity \"\(e.name)\": transient attribute \"\(a.name)\" cannot be indexed (it has no column)")
                }
                if let problem = a.validationModelProblem(entity: e.name) { throw ModelError(message: problem) }
                if let problem = a.compositeModelProblem(entity: e.name) { throw ModelError(message: problem) }
                if a.type == .transformable, a.defaultValue != nil {
                    throw ModelError(message: "entity \"\(e.name)\": transformable attribute \"\(a.name)\" cannot have a default (set it in awakeFromInsert)")
                }
                if a.type != .transformable, a.transformer != nil || a.valueTransformerName != nil {
                    throw ModelError(message: "entity \"\(e.name)\": attribute \"\(a.name)\" is \(a.type), not transformable, but names a value transformer")
                }
                if a.isTransient && a.preservesValueInHistoryOnDeletion {
                    throw ModelError(message: "entity \"\(e.name)\": transient attribute \"\(a.name)\" cannot be preserved in the history on deletion (it is not stored)")
                }
                if let d = a.defaultValue, !a.type.accepts(d) {
                    throw ModelError(message: "entity \"\(e.name)\": default of attribute \"\(a.name)\" is not a \(a.type)")
                }
            }
            // Inherited relationships were checked on the entity that declares them.
            for r in e.declaredRelationships {
                guard let target = entitiesByName[r.destination] else {
                    throw ModelError(message: "entity \"\(e.name)\": relationship \"\(r.name)\" points to unknown entity \"\(r.destination)\"")
                }
                if let inv = r.inverse {
                    guard let back = target.relationshipsByName[inv] else {
                        throw ModelError(message: "entity \"\(e.name)\": relationship \"\(r.name)\" names inverse \"\(inv)\", which entity \"\(target.name)\" does not have")
                    }
                    guard back.destination == e.name else {
                        throw ModelError(message: "entity \"\(e.name)\": relationship \"\(r.name)\" names inverse \"\(target.name).\(inv)\", which points to \"\(back.destination)\", not back to \"\(e.name)\"")
                    }
                    // A non-reciprocal inverse (back names another relationship) is allowed: see "Inverses".
                    if let partner = reciprocalInverse(of: r), partner.isTransient != r.isTransient {
                        throw ModelError(message: "entity \"\(e.name)\": relationship \"\(r.name)\" is \(r.isTransient ? "" : "not ")transient but its inverse \"\(target.name).\(inv)\" is\(partner.isTransient ? "" : " not"); both sides of a pair must agree")
                    }
                }
                if let mn = r.minCount, let mx = r.maxCount, mn > mx {
                    throw ModelError(message: "entity \"\(e.name)\": relationship \"\(r.name)\" has minCount \(mn) above maxCount \(mx)")
                }
                if r.isOrdered && !r.isToMany {
                    throw ModelError(message: "entity \"\(e.name)\": to-one relationship \"\(r.name)\" cannot be ordered")
                }
            }
            try validateFetchIndexes(e)
            try validateDerivedAttributes(e)
            for group in e.uniquenessConstraints {
                guard !group.isEmpty else { throw ModelError(message: "entity \"\(e.name)\" has an empty uniqueness constraint") }
                for name in group where e.attributesByName[name] == nil {
                    throw ModelError(message: "entity \"\(e.name)\": uniqueness constraint names \"\(name)\", which is not an attribute")
                }
                for name in group where e.attributesByName[name]?.compositeElements != nil {
                    throw ModelError(message: "entity \"\(e.name)\": uniqueness constraint names composite attribute \"\(name)\", which has no column of its own")
                }
                for name in group where e.attributesByName[name]?.isTransient == true {
                    throw ModelError(message: "entity \"\(e.name)\": uniqueness constraint names transient attribute \"\(name)\", which is not stored")
                }
            }
        }
    }

    // MARK: Storage mapping

    /// The relationship that keeps `r` in step from the other side: `r`'s
    /// inverse when that inverse names `r` back (or names no inverse); nil for
    /// a relationship without inverse or whose inverse names another
    /// relationship (a non-reciprocal inverse, which Core Data loads with a
    /// warning). Kura stores and maintains a relationship without a reciprocal
    /// inverse from its own side only (see "Inverses" in the header).
    func reciprocalInverse(of r: RelationshipDescription) -> RelationshipDescription? {
        Self.reciprocalInverse(of: r, entities: entitiesByName)
    }

    /// `reciprocalInverse(of:)` in a model whose entities by name are `entities`.
    static func reciprocalInverse(of r: RelationshipDescription, entities: [String: EntityDescription]) -> RelationshipDescription? {
        guard let name = r.inverse, let back = entities[r.destination]?.relationshipsByName[name] else { return nil }
        guard back.inverse == nil || back.inverse == r.name else { return nil }
        return back
    }

    /// A relationship's destination entity and storage (`relationshipPlan`).
    struct RelationshipPlan: Sendable {
        let destination: EntityDescription?
        let storage: Storage
    }

    /// The destination entity of relationship `r` whose plan is `plan`: the
    /// plan's, else looked up by name (a relationship the model did not
    /// plan, another model version's).
    ///
    /// - Throws: `.notFound` naming the destination if this model has no such entity.
    func destination(of r: RelationshipDescription, plan: RelationshipPlan) throws(KuraError) -> EntityDescription {
        if let d = plan.destination { return d }
        return try entity(r.destination)
    }

    /// How a relationship is stored.
    enum Storage: Equatable, Sendable {
        /// Not stored: held in memory by each object (a transient relationship).
        case transient
        /// A foreign-key column in this entity's table.
        case foreignKey(column: String)
        /// Read through the inverse's foreign key (entity, column).
        case inverseForeignKey(entity: String, column: String, orderColumn: String?)
        /// A join table; `forward` is true when this side is `source`.
        case joinTable(name: String, forward: Bool)
    }

    func storage(of r: RelationshipDescription, in e: EntityDescription) -> Storage {
        relationshipPlan(r, in: e).storage
    }

    /// What the model knows of relationship `r` of entity `e`: its
    /// destination entity (nil if the model has none of that name) and its
    /// storage, made once (`relationshipPlans`) for each relationship of
    /// each entity of the model. Computed as the plans were when `e` is not
    /// one of the model's entities or `r` is not `e`'s relationship of its
    /// name as far as its storage goes (another model's, say).
    @inline(__always)
    func relationshipPlan(_ r: RelationshipDescription, in e: EntityDescription) -> RelationshipPlan {
        if let i = e.relationshipIndex(r.name), let plans = relationshipPlans[ObjectIdentifier(e)], i < plans.count,
           Self.sameStorage(e.relationships[i], r) {
            return plans[i]
        }
        return RelationshipPlan(destination: entitiesByName[r.destination], storage: Self.storage(of: r, in: e, entities: entitiesByName))
    }

    /// Whether relationships `a` and `b` (of one entity, with one name)
    /// agree on every field `storage(of:in:entities:)` reads of them.
    @inline(__always)
    private static func sameStorage(_ a: RelationshipDescription, _ b: RelationshipDescription) -> Bool {
        a.isTransient == b.isTransient && a.isToMany == b.isToMany && a.isOrdered == b.isOrdered
            && a.destination == b.destination && a.inverse == b.inverse
    }

    /// `storage(of:in:)` in a model whose entities by name are `entities`.
    static func storage(of r: RelationshipDescription, in e: EntityDescription, entities: [String: EntityDescription]) -> Storage {
        if r.isTransient { return .transient }
        let inverse = reciprocalInverse(of: r, entities: entities)
        if !r.isToMany { return .foreignKey(column: r.name) }
        if let inverse, !inverse.isToMany {
            return .inverseForeignKey(entity: r.destination, column: inverse.name, orderColumn: r.isOrdered ? inverse.name + "_order" : nil)
        }
        // Many-to-many or to-many without inverse: a join table named after the
        // side that sorts first (each side named by the entity that declares it,
        // so subentities share their ancestor's join table).
        let owner = e.hierarchy.relationshipOwners[r.name] ?? e.name
        let mine = (owner, r.name)
        guard let inverse else { return .joinTable(name: "_\(owner)_\(r.name)", forward: true) }
        let theirs = (r.destination, inverse.name)
        let first = mine <= theirs
        return .joinTable(name: first ? "_\(owner)_\(r.name)" : "_\(r.destination)_\(inverse.name)", forward: first)
    }

    /// The schema of the table holding an entity's rows (its hierarchy's table;
    /// see EntityHierarchy.swift for a shared one).
    func schema(of e: EntityDescription) throws(KuraError) -> TableSchema {
        try schema(ofTable: e.hierarchy.table)
    }

    /// The schema of an entity table.
    func schema(ofTable table: String) throws(KuraError) -> TableSchema {
        do {
            return try TableSchema(try tableColumns(table))
        } catch let e as ModelError {
            // The model's init ran tableColumns on every table; cannot happen.
            throw KuraError(.invalidArgument, "table \"\(table)\": \(e.message) (a Kura bug: the model was checked)")
        } catch let e as KuraError {
            throw e
        } catch {
            throw KuraError(.invalidArgument, "table \"\(table)\": \(error)")
        }
    }

    /// The hidden last column of every entity table: the row's version.
    /// Property names may not start with "_", so it never clashes with one.
    static let versionColumn = "_version"

    /// Join tables the model needs (name → schema).
    var joinTables: [String] {
        var out = Set<String>()
        for e in entities {
            for r in e.declaredRelationships {
                if case .joinTable(let name, _) = storage(of: r, in: e) { out.insert(name) }
            }
        }
        return out.sorted()
    }

    // `try!` cannot fail: three distinct names, defaults of their columns' types.
    static let joinSchema = try! TableSchema([
        ColumnDefinition("source", .integer, nullable: false),
        ColumnDefinition("target", .integer, nullable: false),
        ColumnDefinition("position", .double, nullable: false, default: .double(0)),
        ColumnDefinition(inversePositionColumn, .double, nullable: false, default: .double(0)),
    ])

    /// The join-table column holding the source's position among the
    /// target's objects (the order of an ordered relationship on the target
    /// side); `position` holds the target's among the source's. Added in
    /// 2026 for ordered many-to-many relationships: an older join table lacks
    /// it and gets it appended on open (rows read the default 0).
    static let inversePositionColumn = "inverse_position"

    /// Fetch indexes (FetchIndexDescription.swift): named, unique names, not
    /// empty, elements naming stored attributes or to-one relationships.
    private func validateFetchIndexes(_ e: EntityDescription) throws(ModelError) {
        var names = Set<String>()
        for ix in e.fetchIndexes {
            guard !ix.name.isEmpty else { throw ModelError(message: "entity \"\(e.name)\" has a fetch index without a name") }
            guard names.insert(ix.name).inserted else { throw ModelError(message: "entity \"\(e.name)\" has two fetch indexes named \"\(ix.name)\"") }
            guard !ix.elements.isEmpty else { throw ModelError(message: "entity \"\(e.name)\": fetch index \"\(ix.name)\" has no elements") }
            for el in ix.elements {
                if let a = e.attributesByName[el.property] {
                    if a.compositeElements != nil {
                        throw ModelError(message: "entity \"\(e.name)\": fetch index \"\(ix.name)\" names composite attribute \"\(el.property)\", which has no column of its own")
                    }
                    if a.isTransient {
                        throw ModelError(message: "entity \"\(e.name)\": fetch index \"\(ix.name)\" names transient attribute \"\(el.property)\", which has no column")
                    }
                } else if let r = e.relationshipsByName[el.property] {
                    if r.isToMany {
                        throw ModelError(message: "entity \"\(e.name)\": fetch index \"\(ix.name)\" names to-many relationship \"\(el.property)\"; only attributes and to-one relationships can be indexed")
                    }
                } else {
                    throw ModelError(message: "entity \"\(e.name)\": fetch index \"\(ix.name)\" names \"\(el.property)\", which is not an attribute or relationship of the entity")
                }
            }
        }
    }

    /// Indexes an entity table needs: (name, columns, unique). For an entity
    /// outside any hierarchy the table is named after it; in a shared table,
    /// a uniqueness constraint declared below the root is a plain index
    /// (EntityHierarchy.swift), and `_entity` is indexed.
    /// Declared fetch indexes become `<Entity>_fetchIndex_<name>` with their orders.
    func indexes(ofTable table: String) -> [(name: String, columns: [IndexColumn], unique: Bool)] {
        var out: [(name: String, columns: [IndexColumn], unique: Bool)] = []
        var seen = Set<String>()
        func add(_ name: String, _ columns: [String], _ unique: Bool) {
            add(name, columns.map { IndexColumn($0) }, unique)
        }
        func add(_ name: String, _ columns: [IndexColumn], _ unique: Bool) {
            if seen.insert(name).inserted { out.append((name, columns, unique)) }
        }
        let members = entities(inTable: table)
        for e in members { for a in e.declaredAttributes where a.isIndexed { add("\(table)_\(a.name)_index", [a.name], false) } }
        for e in members { for r in e.declaredRelationships where !r.isToMany && !r.isTransient { add("\(table)_\(r.name)_fk", [r.name], false) } }
        for e in members {
            for group in e.declaredUniquenessConstraints {
                add("\(e.name)_unique_\(group.joined(separator: "_"))", group, e.name == table)
            }
        }
        for e in members {
            for ix in e.declaredFetchIndexes {
                add("\(e.name)_fetchIndex_\(ix.name)", ix.elements.map { IndexColumn($0.property, descending: !$0.isAscending) }, false)
            }
        }
        if members.count > 1 { add("\(table)_" + Self.entityColumn, [Self.entityColumn], false) }
        return out
    }
}

/// Builds `[EntityDescription]` from a list of entity expressions.
@resultBuilder
public enum ModelBuilder {
    public static func buildBlock(_ parts: EntityDescription...) -> [EntityDescription] { parts }
}
