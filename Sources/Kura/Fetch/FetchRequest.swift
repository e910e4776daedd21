// FetchRequest: what to fetch (Core Data's NSFetchRequest), and ObjectView, how
// the predicate evaluator sees an object (attributes, to-one objects, to-many
// collections), so relationship predicates — `record.grade > 80`,
// `ANY courses.title BEGINSWITH 'A'`, `students.@count > 3`, `SUBQUERY(...)` —
// work with any number of to-many operators in one predicate.

import Foundation

/// What a fetch returns.
public enum FetchResultType: Sendable, Equatable {
    /// Objects (the default).
    case managedObjects
    /// Object IDs only.
    case managedObjectIDs
    /// The number of matches.
    case count
    /// One dictionary per match with the chosen properties (attribute names or
    /// to-one key paths); `distinct` drops repeated dictionaries.
    case dictionaries(properties: [String], distinct: Bool)
}

/// What `ManagedObjectContext.execute(_:)` returns, by the request's
/// `resultType`.
public enum FetchOutput<T: ManagedObject> {
    case objects([T])
    case objectIDs([ManagedObjectID])
    case count(Int)
    case dictionaries([[String: Any]])
}

/// A fetch request for objects of one entity. `T` is the class the objects are
/// returned as (`ManagedObject` for untyped use).
public struct FetchRequest<T: ManagedObject> {
    /// The entity to fetch.
    public var entityName: String
    /// Which objects; nil for all.
    public var predicate: KuraPredicate?
    /// Order: key paths (attributes, or through to-one relationships:
    /// `record.grade`), ascending or descending, optionally case-insensitive.
    public var sortDescriptors: [SortKey] = []
    /// At most this many results (nil or 0: no limit).
    public var fetchLimit: Int?
    /// Skip this many results first.
    public var fetchOffset: Int = 0
    /// With `fetch`, objects come back as faults that load this many at a
    /// time; with `fetchResults`, objects are materialized this many at a time
    /// while iterating (0: all at once).
    public var fetchBatchSize: Int = 0
    /// Include the context's unsaved inserts, changes and deletes (default true).
    public var includesPendingChanges = true
    /// Include objects of the entity's subentities (default true, as Core
    /// Data's `includesSubentities`): a fetch of `Region` returns its Countries
    /// and Continents, each as its own entity's class. False: only objects
    /// whose entity is exactly `entityName`. To test an object's entity in a
    /// predicate, write `entity.name == "Country"` (see ``ObjectView``).
    public var includesSubentities = true
    /// What `execute(_:)` returns. `fetch` accepts only `.managedObjects` (it
    /// throws `.invalidArgument` otherwise, never returning the wrong thing).
    public var resultType: FetchResultType = .managedObjects
    /// Relationship key paths whose destination objects `fetch` loads with
    /// the results (Core Data's `relationshipKeyPathsForPrefetching`): "record",
    /// "courses", "courses.teacher" (any depth, to-one or to-many). Each
    /// relationship is loaded for all the objects of its level at once, and
    /// reading it afterwards opens no read transaction until the context
    /// saves, merges changes, is reset or refreshes the owner (the loaded
    /// members reflect the store at the fetch, corrected by pending changes).
    /// Not applied by `fetch` with `fetchBatchSize` > 0 (the results are
    /// faults), by `fetchResults`, or in a child context. A key naming no
    /// relationship of an object's entity makes `fetch` throw `.notFound`.
    public var relationshipKeyPathsForPrefetching: [String] = []

    /// A request for the entity named `entityName`.
    public init(entityName: String, predicate: KuraPredicate? = nil, sortDescriptors: [SortKey] = []) {
        self.entityName = entityName
        self.predicate = predicate
        self.sortDescriptors = sortDescriptors
    }

    /// A request for the entity whose class is `T`, found in `model`.
    public init(_ type: T.Type = T.self, in model: ManagedObjectModel, predicate: KuraPredicate? = nil, sortDescriptors: [SortKey] = []) {
        self.init(entityName: model.topmostEntity(ofClass: type)?.name ?? String(describing: type),
                  predicate: predicate, sortDescriptors: sortDescriptors)
    }

    /// Sets the predicate from an NSPredicate format string.
    ///
    /// - Throws: `.syntax` with the character offset; `.invalidArgument`.
    public mutating func setPredicate(_ format: String, _ arguments: PredicateArgument...) throws(KuraError) {
        predicate = try KuraPredicate(format: format, arguments: arguments)
    }
}

/// An object as the predicate evaluator sees it. Besides its properties, an
/// object answers `entity.name` (its own entity's name, not an ancestor's:
/// `entity.name == "Country"`, `entity.name IN {"Country", "Continent"}`),
/// unless its entity has a property named `entity`, which then wins.
struct ObjectView: PredicateEvaluationContext {
    let object: ManagedObject
    let context: ManagedObjectContext

    func value(forKey key: String) throws(KuraError) -> EvaluatedValue {
        if key == EntityNameView.key && object.entity.attributesByName[key] == nil && object.entity.relationshipsByName[key] == nil {
            return .object(EntityNameView(name: object.entity.name))
        }
        if let a = object.entity.attributesByName[key] {
            try object.loadIfFault()
            if let elements = a.compositeElements { return try a.compositeEvaluated(object.storedValue(named: key) ?? .null, elements, of: object.objectID) }
            return a.type.evaluated(object.storedValue(named: key) ?? .null)
        }
        if let r = object.entity.relationshipsByName[key] {
            if r.isToMany {
                return .collection(try context.relatedObjects(object, r).map { .object(ObjectView(object: $0, context: context)) })
            }
            return try context.relatedObject(object, r).map { .object(ObjectView(object: $0, context: context)) } ?? .null
        }
        throw KuraError(.notFound, "entity \"\(object.entity.name)\" has no attribute or relationship \"\(key)\"")
    }

    var predicateIdentity: Value? { .text(object.objectID.uriRepresentation) }
}

/// The `entity` of an object in a predicate: offers `name`.
struct EntityNameView: PredicateEvaluationContext {
    static let key = "entity"
    let name: String

    func value(forKey key: String) throws(KuraError) -> EvaluatedValue {
        guard key == "name" else {
            throw KuraError(.notFound, "the entity of an object offers \"name\" to predicates (entity.name == \"Country\"), not \"\(key)\"")
        }
        return .scalar(.text(name))
    }
}
