// The idioms of the seed programs (shared/seeds), in Swift naming:
//   - CoreDataManager: select(entity, where, limit, offset), new(entity),
//     delete, deleteFrom(entity, at index), save;
//   - MagicalRecord: createEntity, findAll, findAll(sortedBy:), findFirst(byAttribute:),
//     findFirstOrCreate, countOfEntities, deleteAll(matching:), truncateAll,
//     container.save { context in } and the in-memory stack
//     (PersistentContainer.inMemory);
//   - na_ios/coredata: filter([key: value]), create([key: value]),
//     getOrCreate([key: value]), each also async: the work runs off the caller's
//     thread on its own context, is saved there, and the caller gets objects of
//     its own context.

import Foundation

// MARK: CoreDataManager

extension ManagedObjectContext {
    /// Objects of `entityName` matching an NSPredicate format (all if nil),
    /// with limit and offset (CoreDataManager's `select:where:limit:offset:`).
    public func select(_ entityName: String, where format: String? = nil, _ arguments: PredicateArgument...,
                       sortedBy sort: [SortKey] = [], limit: Int? = nil, offset: Int = 0) throws(KuraError) -> [ManagedObject] {
        var request = FetchRequest<ManagedObject>(entityName: entityName, sortDescriptors: sort)
        if let format { request.predicate = try KuraPredicate(format: format, arguments: arguments) }
        request.fetchLimit = limit
        request.fetchOffset = offset
        return try fetch(request)
    }

    /// A new object of `entityName` (CoreDataManager's `new:`).
    public func new(_ entityName: String) throws(KuraError) -> ManagedObject { try insert(entityName) }

    /// Deletes the object at `index` of `entityName`'s objects in `sort` order
    /// (CoreDataManager's `deleteFrom:atIndexPath:` for a sorted list).
    ///
    /// - Throws: `.invalidArgument` if `index` is out of range.
    public func deleteFrom(_ entityName: String, at index: Int, sortedBy sort: [SortKey]) throws(KuraError) {
        var request = FetchRequest<ManagedObject>(entityName: entityName, sortDescriptors: sort)
        request.fetchOffset = index
        request.fetchLimit = 1
        guard index >= 0, let o = try fetch(request).first else {
            throw KuraError(.invalidArgument, "no \(entityName) at index \(index)")
        }
        try delete(o)
    }

    /// Builds a predicate that matches every key/value pair (`a == x AND b == y`).
    static func predicate(_ values: [String: Any], entity: EntityDescription) throws(KuraError) -> KuraPredicate? {
        var parts: [KuraPredicate] = []
        for (k, v) in values.sorted(by: { $0.key < $1.key }) {
            guard let a = entity.attributesByName[k] else {
                throw KuraError(.notFound, "entity \"\(entity.name)\" has no attribute \"\(k)\"")
            }
            let stored = a.type.engineValue(try a.storedValue(v, entity: entity.name))
            let rhs: KuraExpression = a.type == .date ? .date(secondsSinceReferenceDate: stored.doubleValue ?? 0) : .constant(stored)
            parts.append(.comparison(KuraComparison(.keyPath([k]), .equalTo, rhs)))
        }
        return parts.isEmpty ? nil : parts.count == 1 ? parts[0] : .and(parts)
    }
}

// MARK: MagicalRecord and na_ios, on entity classes

extension ManagedObject {
    static func entity(in context: ManagedObjectContext) throws(KuraError) -> EntityDescription {
        try context.model.entity(forClass: self)
    }

    static func request(in context: ManagedObjectContext, _ predicate: KuraPredicate? = nil, _ sort: [SortKey] = []) throws(KuraError) -> FetchRequest<ManagedObject> {
        FetchRequest(entityName: try entity(in: context).name, predicate: predicate, sortDescriptors: sort)
    }

}

/// Adopted by every ManagedObject class, so the finders below return the
/// class's own type (`Student.findAll(in:)` is `[Student]`).
public protocol EntityClass: ManagedObject {}
extension ManagedObject: EntityClass {}

extension EntityClass {
    static func cast(_ objects: [ManagedObject]) -> [Self] { objects.compactMap { $0 as? Self } }

    /// A new object of this class's entity (MagicalRecord's `MR_createEntity`).
    public static func createEntity(in context: ManagedObjectContext) throws(KuraError) -> Self {
        try context.insert(Self.self)
    }

    /// Every object (`MR_findAll`).
    public static func findAll(in context: ManagedObjectContext) throws(KuraError) -> [Self] {
        cast(try context.fetch(request(in: context)))
    }

    /// Every object sorted by an attribute (`MR_findAllSortedBy:ascending:`).
    public static func findAll(sortedBy key: String, ascending: Bool = true, in context: ManagedObjectContext) throws(KuraError) -> [Self] {
        cast(try context.fetch(request(in: context, nil, [SortKey(key, ascending: ascending)])))
    }

    /// Objects matching a predicate (`MR_findAllWithPredicate:`).
    public static func findAll(matching predicate: KuraPredicate, in context: ManagedObjectContext) throws(KuraError) -> [Self] {
        cast(try context.fetch(request(in: context, predicate)))
    }

    /// The first object whose attribute equals `value` (`MR_findFirstByAttribute:withValue:`).
    public static func findFirst(byAttribute key: String, value: Any, in context: ManagedObjectContext) throws(KuraError) -> Self? {
        var r = try request(in: context, try ManagedObjectContext.predicate([key: value], entity: try entity(in: context)))
        r.fetchLimit = 1
        return cast(try context.fetch(r)).first
    }

    /// The first object whose attribute equals `value`, or a new one with it
    /// (`MR_findFirstOrCreateByAttribute:withValue:`).
    public static func findFirstOrCreate(byAttribute key: String, value: Any, in context: ManagedObjectContext) throws(KuraError) -> Self {
        if let found = try findFirst(byAttribute: key, value: value, in: context) { return found }
        let o = try createEntity(in: context)
        try o.setValue(value, forKey: key)
        return o
    }

    /// Number of objects (`MR_countOfEntities`), optionally matching a predicate.
    public static func countOfEntities(matching predicate: KuraPredicate? = nil, in context: ManagedObjectContext) throws(KuraError) -> Int {
        try context.count(for: request(in: context, predicate))
    }

    /// Deletes the objects matching `predicate` (`MR_deleteAllMatchingPredicate:`),
    /// applying delete rules; returns how many.
    @discardableResult
    public static func deleteAll(matching predicate: KuraPredicate, in context: ManagedObjectContext) throws(KuraError) -> Int {
        let objects = try context.fetch(request(in: context, predicate))
        for o in objects { try context.delete(o) }
        return objects.count
    }

    /// Deletes every object of the entity (`MR_truncateAll`); returns how many.
    @discardableResult
    public static func truncateAll(in context: ManagedObjectContext) throws(KuraError) -> Int {
        let objects = try context.fetch(request(in: context))
        for o in objects { try context.delete(o) }
        return objects.count
    }

    // na_ios/coredata

    /// Objects whose attributes equal every given value (`filter:`).
    public static func filter(_ values: [String: Any], in context: ManagedObjectContext) throws(KuraError) -> [Self] {
        cast(try context.fetch(request(in: context, try ManagedObjectContext.predicate(values, entity: try entity(in: context)))))
    }

    /// A new object with the given values (`create:`).
    public static func create(_ values: [String: Any], in context: ManagedObjectContext) throws(KuraError) -> Self {
        let o = try createEntity(in: context)
        for (k, v) in values.sorted(by: { $0.key < $1.key }) { try o.setValue(v, forKey: k) }
        return o
    }

    /// The first object matching every value, or a new one with them
    /// (`get_or_create:`): an existing match is returned, never duplicated.
    public static func getOrCreate(_ values: [String: Any], in context: ManagedObjectContext) throws(KuraError) -> Self {
        if let found = try filter(values, in: context).first { return found }
        return try create(values, in: context)
    }

    /// `filter` off the caller's thread: the fetch runs on its own context in a
    /// background task; the caller gets the objects of `context`.
    public static func filter(_ values: [String: any Sendable], in context: ManagedObjectContext,
                              isolation: isolated (any Actor)? = #isolation) async throws -> [Self] {
        let container = context.container
        let entityName = try entity(in: context).name
        let ids = try await Task.detached {
            let c = container.newContext()
            guard let e = c.model.entitiesByName[entityName] else { return [ManagedObjectID]() }
            return try c.fetchObjectIDs(FetchRequest<ManagedObject>(entityName: entityName, predicate: try ManagedObjectContext.predicate(values, entity: e)))
        }.value
        return try ids.compactMap { try context.existingObject(with: $0) as? Self }
    }

    /// `create` off the caller's thread: made and saved on a background context;
    /// the caller gets the object in `context` (already saved, so it is there).
    public static func create(_ values: [String: any Sendable], in context: ManagedObjectContext,
                              isolation: isolated (any Actor)? = #isolation) async throws -> Self {
        let container = context.container
        let entityName = try entity(in: context).name
        let id = try await Task.detached { try makeAndSave(entityName, values, in: container.newContext()) }.value
        return try object(id, in: context)
    }

    /// Inserts an object with `values` into `c`, saves, and returns its ID.
    private static func makeAndSave(_ entityName: String, _ values: [String: any Sendable], in c: ManagedObjectContext) throws -> ManagedObjectID {
        let o = try c.insert(entityName)
        for (k, v) in values.sorted(by: { $0.key < $1.key }) { try o.setValue(v, forKey: k) }
        try c.save()
        return o.objectID
    }

    /// The object with `id` in the caller's `context`, as this class.
    private static func object(_ id: ManagedObjectID, in context: ManagedObjectContext) throws -> Self {
        guard let o = try context.existingObject(with: id) as? Self else {
            throw KuraError(.typeMismatch, "\(id) is not a \(Self.self)")
        }
        return o
    }

    /// `getOrCreate` off the caller's thread (see `create(_:in:isolation:)`).
    public static func getOrCreate(_ values: [String: any Sendable], in context: ManagedObjectContext,
                                   isolation: isolated (any Actor)? = #isolation) async throws -> Self {
        let container = context.container
        let entityName = try entity(in: context).name
        let id = try await Task.detached {
            let c = container.newContext()
            guard let e = c.model.entitiesByName[entityName] else { throw KuraError(.notFound, "no entity \(entityName)") }
            var r = FetchRequest<ManagedObject>(entityName: entityName, predicate: try ManagedObjectContext.predicate(values, entity: e))
            r.fetchLimit = 1
            if let found = try c.fetchObjectIDs(r).first { return found }
            return try makeAndSave(entityName, values, in: c)
        }.value
        return try object(id, in: context)
    }
}
