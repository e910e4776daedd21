// BatchRequests: Core Data's batch insert, update and delete requests
// (NSBatchInsertRequest, NSBatchUpdateRequest, NSBatchDeleteRequest): changes
// made in one write transaction of the store, without managed objects.
// Executed by `PersistentContainer.execute(_:)` (BatchExecution.swift).
//
// Unlike Core Data's, Kura's batch requests keep the store consistent: they
// check types, required values, validation rules and uniqueness constraints,
// apply delete rules (cascade, nullify, deny), bump the version of every row
// they change (so a context that later saves a stale copy meets a merge
// conflict instead of overwriting the batch's change), and record their
// changes in the persistent history. What they refuse leaves the store as it
// was: the error names the object (by its position in the batch or its ID),
// the property and the rule.

import Foundation

/// What a batch request reports besides its changes.
public enum BatchResultType: Sendable {
    /// Only the count (``BatchResult/objectIDs`` is nil).
    case statusOnly
    /// The number of objects the request inserted, updated or deleted.
    case count
    /// The count and the IDs of those objects.
    case objectIDs
}

/// What a batch request did.
public struct BatchResult: Sendable {
    /// How many objects the request itself inserted, updated or deleted
    /// (objects deleted by a cascade or changed by a nullify are not counted:
    /// they are in ``changes``).
    public let count: Int
    /// Those objects' IDs, in the order the request met them, when the
    /// request's `resultType` is `.objectIDs`; nil otherwise.
    public let objectIDs: [ManagedObjectID]?
    /// Every object the request changed in the store, cascades and nullified
    /// relationships included: the same notice a context's save posts (it was
    /// posted to the container's save observers, so contexts that merge
    /// automatically have it). Merge it into other contexts with
    /// ``ManagedObjectContext/mergeChanges(fromContextDidSave:)``.
    public let changes: ContextDidSave
}

/// What a batch insert does with an object whose uniqueness-constrained
/// values are already in the store (or earlier in the same batch).
public enum BatchInsertConflictRule: Sendable {
    /// Refuse the whole batch, naming the object and the constraint (default).
    case fail
    /// Update the existing object with the values given (an "upsert", Core
    /// Data's batch insert under a property-object-trump merge policy).
    case updateExisting
}

/// Inserts objects of one entity from dictionaries of attribute values
/// (Core Data's `NSBatchInsertRequest`). Relationships cannot be set (insert
/// through a context for that); an entity with a required relationship is
/// refused. Attributes missing from a dictionary take their default value.
///
/// Not `Sendable` (its values are `Any`): build and execute it on one thread.
public struct BatchInsertRequest {
    enum Source {
        case objects([[String: Any]])
        case handler((inout [String: Any]) throws -> Bool)
    }

    /// The entity to insert (concrete, not abstract).
    public var entityName: String
    /// What the result carries (default `.count`).
    public var resultType: BatchResultType = .count
    /// What to do with an object that repeats a uniqueness-constrained value.
    public var onUniquenessConflict: BatchInsertConflictRule = .fail
    let source: Source

    /// Inserts one object per dictionary (attribute name → Swift value, as
    /// `setValue(_:forKey:)` takes it; `NSNull()`, `Value.null` or a nil
    /// optional for none).
    public init(entityName: String, objects: [[String: Any]]) {
        self.entityName = entityName
        source = .objects(objects)
    }

    /// Inserts objects as `handler` makes them (Core Data's dictionary
    /// handler): each call fills an empty dictionary and returns `false` to
    /// insert it and continue, or `true` to stop (that call's dictionary is
    /// not inserted). The handler runs inside the store's write transaction:
    /// keep it to computing values. An error it throws ends the batch with
    /// nothing written.
    public init(entityName: String, dictionaryHandler handler: @escaping (inout [String: Any]) throws -> Bool) {
        self.entityName = entityName
        source = .handler(handler)
    }
}

/// Sets attributes of every stored object of an entity that matches a
/// predicate (Core Data's `NSBatchUpdateRequest`). A value is a Swift value
/// (`NSNull()`, `Value.null` or a nil optional to clear), or a ``KuraExpression`` evaluated on each
/// object before any change is written (`KuraExpression(format: "price * 1.1")`,
/// key paths through relationships allowed).
///
/// The predicate takes the same forms as a fetch request's (relationship key
/// paths, `entity.name`, aggregates) and is evaluated inside the batch's write
/// transaction: objects saved by others before the batch are seen, later ones
/// are not touched. Pending changes of contexts are not seen (they are not in
/// the store).
public struct BatchUpdateRequest {
    public var entityName: String
    public var predicate: KuraPredicate?
    /// Attribute name → new value (Swift value, nil, or KuraExpression).
    public var propertiesToUpdate: [String: Any]
    /// Whether objects of subentities are updated too (default true).
    public var includesSubentities = true
    public var resultType: BatchResultType = .count

    public init(entityName: String, predicate: KuraPredicate? = nil, propertiesToUpdate: [String: Any]) {
        self.entityName = entityName
        self.predicate = predicate
        self.propertiesToUpdate = propertiesToUpdate
    }
}

/// Deletes every stored object of an entity matching a predicate, or the
/// objects with the given IDs (Core Data's `NSBatchDeleteRequest`), applying
/// each relationship's delete rule as a context's delete does: cascade deletes
/// the related objects, nullify (and no action) clears the references to the
/// deleted objects, deny refuses the batch while a related object would
/// remain. Clearing a required to-one of a remaining object refuses the batch
/// too. IDs of objects no longer in the store are skipped (not counted).
public struct BatchDeleteRequest {
    enum Target {
        case matching(entityName: String, predicate: KuraPredicate?, includesSubentities: Bool)
        case objectIDs([ManagedObjectID])
    }

    let target: Target
    public var resultType: BatchResultType = .count

    /// Deletes the objects of `entityName` (and of its subentities, unless
    /// `includesSubentities` is false) that match `predicate` (all if nil).
    public init(entityName: String, predicate: KuraPredicate? = nil, includesSubentities: Bool = true) {
        target = .matching(entityName: entityName, predicate: predicate, includesSubentities: includesSubentities)
    }

    /// Deletes the objects with these (permanent) IDs.
    public init(objectIDs: [ManagedObjectID]) {
        target = .objectIDs(objectIDs)
    }
}
