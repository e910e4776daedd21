// ManagedObjectContext: a scratchpad of objects that saves atomically.
//
// State machine of an object in a context:
//
//     (new) --insert--> inserted --save--> saved/clean <--fetch/object(with:)-- (store)
//     clean --set value--> updated --save--> clean
//     inserted/clean/updated --delete--> deleted --save--> (gone from the context)
//     any --rollback--> back to the last saved state (inserted objects leave)
//
// Uniquing: one instance per object ID per context. Clean objects are held
// weakly (a fetch of a million objects in batches does not keep them all);
// inserted, updated and deleted objects are held strongly until saved.
//
// Delete rules are applied when `delete` is called (cascade deletes, nullify
// clears the other side); `deny`, required values, types, uniqueness and
// relationship counts are checked by `save` before anything is written.
//
// Each object remembers the version of its row it was read at; `save` refuses
// (or, by `mergePolicy`, resolves) writes over rows changed or deleted
// elsewhere since (Context+Conflicts.swift). Accessors that cannot throw
// report failures through `pendingError`, which the next save or fetch throws.

import Foundation

/// The link from a context's objects to the context (`ManagedObject.managedObjectContext`),
/// in place of a weak reference to the context.
///
/// Invariant: `context` is the context that made the link while that context
/// lives, and nil from the first statement of its deinit on (the context
/// clears it; nothing else sets it). A context and its objects are used on
/// one thread or actor (neither is `Sendable`), so the context's deallocation
/// never runs beside a read of its link: a read sees the live context or nil,
/// never a deallocated one. An unretained reference holds the context without a
/// side table (a weak reference would make one, slowing every retain and
/// release of the context) and without keeping it alive (an object must not
/// keep its context alive, as in Core Data).
final class ContextLink {
    /// The context, unretained (`context`'s storage). An `Unmanaged`
    /// rather than an `unowned(unsafe)` field: a load of the latter is a
    /// strong reference (a retain and release around each use), where
    /// `unretained` lends this one without either.
    private var ref: Unmanaged<ManagedObjectContext>?
    var context: ManagedObjectContext? {
        @inline(__always) get { ref?.takeUnretainedValue() }
        set { ref = newValue.map { .passUnretained($0) } }
    }
    /// A link to no context yet: the context's initializer sets `context`
    /// to itself as its last step (it cannot pass itself earlier).
    init() { ref = nil }

    /// The context unretained (nil: none), for a use without a retain and
    /// release: `link.unretained?._withUnsafeGuaranteedRef { ... }` (taken
    /// out of the link first: a closure run through the link retains the
    /// link). The invariant above keeps the context alive while it is set,
    /// and such a use runs on the context's thread, so nothing deallocates
    /// the context during it.
    @inline(__always)
    var unretained: Unmanaged<ManagedObjectContext>? { ref }
}

/// A context: the Kura counterpart of NSManagedObjectContext.
///
/// Thread rules: not `Sendable`. Use a context and its objects on one thread or
/// actor; make one context per thread with `PersistentContainer.newContext()`.
/// Pass `ManagedObjectID`s (which are `Sendable`) between contexts.
///
/// Concurrent changes: contexts (in this or other processes) never silently
/// overwrite each other's saves. A save that would overwrite a row changed
/// since this context read it fails with `KuraError.mergeConflict` unless
/// ``mergePolicy`` says how to resolve it (see ``MergePolicy``).
///
/// Failures of non-throwing accessors (typed properties, subscripts,
/// `ManagedObject.init(context:)`, `FetchResults` elements) are kept in
/// ``pendingError`` and thrown by the next `save()` or fetch.
public final class ManagedObjectContext {
    /// The container (model and store) this context works on.
    ///
    /// A context keeps its container alive, except the container's own
    /// ``PersistentContainer/viewContext``, which the container keeps (so
    /// that the two do not keep each other alive forever): keep the container
    /// while you use its view context.
    public var container: PersistentContainer { ownedContainer ?? borrowedContainer }
    private let ownedContainer: PersistentContainer?
    private unowned let borrowedContainer: PersistentContainer

    /// Every object of this context by ID, unretained: an object removes its own
    /// entry when it is deallocated (`ManagedObject.deinit` calls `forget`), so
    /// clean objects live only as long as the app references them, and no object
    /// needs a weak reference (which would slow down all its retains and releases).
    /// Set up with the context's identity by each initializer (ObjectRegistry.swift).
    ///
    /// `registry`, `inserted` and `notices` are `@exclusivity(unchecked)`:
    /// each object inserted or saved enters them (the runtime's dynamic check
    /// of each access was a few percent of a large insert). No access to them
    /// overlaps another: Kura edits them in place without calling other code
    /// while an edit lasts, and a context is used on one thread or actor
    /// only. What an edit drops could run app code (an object's or a
    /// handler's deinit), so in-place edits drop only elements that are
    /// still referenced elsewhere (`removeAll { $0 === o }` with `o` held by
    /// the caller), and lists that may hold the last reference are replaced
    /// whole (`inserted = []`; an observer's removal edits a copy and stores
    /// it): the old contents are released after the new value is stored, so
    /// a deinit that reads or changes these fields sees a complete value.
    @exclusivity(unchecked) var registry = ObjectRegistry(identity: -1)

    /// The registered object with `id`, if any.
    @inline(__always)
    func registered(_ id: ManagedObjectID) -> ManagedObject? { registry[id]?.takeUnretainedValue() }

    /// Registers `o` under `id`.
    func track(_ o: ManagedObject, as id: ManagedObjectID) {
        registry[id] = .passUnretained(o)
    }

    /// Called by a deallocating object: drops its entry if it is still the one.
    func forget(_ o: ManagedObject) {
        if registry.remove(o.objectID, ifItIs: o), !batchGroups.isEmpty { batchGroups[o.objectID] = nil }
    }

    /// Objects inserted since the last save, in insertion order.
    @exclusivity(unchecked) var inserted: [ManagedObject] = []
    /// False only when no object of `inserted` is deleted, so that
    /// `liveInserted` need not look at each one (a pass over what may be
    /// many objects). Set by any object of this context becoming deleted
    /// (`ManagedObject.isDeleted`) and by every append to `inserted` of a
    /// deleted object; cleared when `inserted` is emptied or found to hold
    /// no deleted object.
    var insertedMayHoldDeleted = false
    /// The epoch of the first pass of `willSave()` calls under way (0: none),
    /// the last one made, and the objects that kept their state during it
    /// (ManagedObject+Lifecycle.swift, `keepWillSaveState`).
    var willSaveEpoch: UInt16 = 0
    var lastWillSaveEpoch: UInt16 = 0
    var willSaveKeptObjects: [ManagedObject] = []
    /// Saved objects changed since the last save (may have been changed
    /// back), in the order of their first change. An object's `isTouched`
    /// says whether it is here (no hash table: a change of a clean object
    /// tests and sets its flag). `@exclusivity(unchecked)` for the reason
    /// given at `registry`: appended to in place, emptied by replacing it
    /// whole (`forgetPendingChanges`), and `evict` removes an object its
    /// caller holds.
    @exclusivity(unchecked) var touchedOrder: [ManagedObject] = []
    var deleted: [ManagedObject] = []
    /// Pending join-table changes: table -> (source, target) -> present.
    var joinEdits: [String: [JoinPair: Bool]] = [:]
    /// Pending positions in ordered join-table relationships: table -> pair ->
    /// positions (Context+Relationships.swift, "Ordered join tables").
    var joinPositions: [String: [JoinPair: JoinPositions]] = [:]
    /// Faults made by a batched fetch, by ID: firing one loads its batch.
    /// `@exclusivity(unchecked)` for the reason given at `registry` (every
    /// deallocating object and every fault's load look at it): its edits
    /// call no other code, and what they drop (a BatchGroup, which holds
    /// IDs only) runs no deinit of app code.
    @exclusivity(unchecked) var batchGroups: [ManagedObjectID: BatchGroup] = [:]
    /// The transaction every read of this context goes through instead of
    /// a read transaction of its own (set only on the scratch context a
    /// batch request evaluates inside its write transaction: BatchExecution.swift).
    var enclosingTransaction: ReadTransaction?
    /// Equality indexes over the pending objects, made by fetches that need
    /// them (PendingIndex.swift); dropped when the pending objects are.
    var pendingIndexes: PendingIndexes?
    /// The to-many members a fetch's `relationshipKeyPathsForPrefetching`
    /// loaded, by owner and relationship (Context+Prefetch.swift); dropped by
    /// save, merges, reset, and per object by refresh. (To-one targets are
    /// kept in `prefetchedTargets`.)
    var prefetched: [ManagedObjectID: PrefetchedLists] = [:]
    /// The to-one destinations a prefetch loaded, kept alive (the registry
    /// holds objects unretained) so that reading the relationship finds
    /// them registered and loaded: a to-one read goes through the owner's
    /// key, never through `prefetched`, so a flat list is all it needs
    /// (no table entry per owner). Dropped with `prefetched`, except by
    /// refresh: a refreshed owner reads its key again, and a target kept
    /// here reads as it did.
    ///
    /// A target met again (by another owner, or by a later fetch) is
    /// appended again; `keepPrefetchedTargets` drops the repeats whenever
    /// the list has doubled since, so a context that fetches the same
    /// objects again and again keeps a list at most about twice as long as
    /// the targets it holds.
    var prefetchedTargets: [ManagedObject] = []
    /// `prefetchedTargets.count` after its last pass dropping repeats.
    var prefetchedTargetsDistinct = 0

    /// Forgets everything prefetched (`prefetched`, `prefetchedTargets`): by
    /// save, merges and reset.
    func dropPrefetched() {
        prefetched = [:]
        prefetchedTargets = []
        prefetchedTargetsDistinct = 0
    }

    /// Drops the repeats from `prefetchedTargets` if it has more than doubled
    /// (plus a margin) since the last time (see there).
    func keepPrefetchedTargets() {
        guard prefetchedTargets.count > 2 * prefetchedTargetsDistinct + 1024 else { return }
        var seen = Set<ObjectIdentifier>(minimumCapacity: prefetchedTargets.count)
        prefetchedTargets.removeAll { !seen.insert(ObjectIdentifier($0)).inserted }
        prefetchedTargetsDistinct = prefetchedTargets.count
    }
    /// Answers of store queries kept while the store is unchanged
    /// (StoreAnswerMemo.swift); dropped by `reset()`.
    let storeAnswers = StoreAnswerMemo()
    /// Read transactions this context has opened (`read`), for tests.
    /// A plain counter (`@exclusivity(unchecked)`: every fault's load
    /// counts, and no access to it can overlap another).
    @exclusivity(unchecked) var readTransactionCount = 0

    /// How `save` resolves conflicts with changes saved elsewhere since this
    /// context read the objects (default `.error`). See ``MergePolicy``.
    public var mergePolicy: MergePolicy = .error

    /// A name for this context, recorded with its saves in the persistent
    /// history (Core Data's `name`).
    public var name: String?

    /// Who is saving (an app, an extension, an importer), recorded with this
    /// context's saves in the persistent history (Core Data's
    /// `transactionAuthor`).
    public var transactionAuthor: String?

    /// The conflicts the last `save()` met, refused or resolved, in the order
    /// of its objects; empty after a save without conflicts (or one refused
    /// before the conflict check, e.g. by validation).
    public internal(set) var lastMergeConflicts: [MergeConflict] = []

    /// The failure channel of accessors that cannot throw: the first error a
    /// typed property read (`@Managed`, `@ToOne`, `@ToMany`), a subscript read,
    /// `ManagedObject.init(context:)` or a `FetchResults` element met since it
    /// was last reported (a rejected subscript or typed *write* is reported by
    /// the next save's validation instead): a fault that failed to load (`.corrupt`,
    /// `.io`, `.notFound` for a row deleted elsewhere), an unknown key, a stored
    /// value that is not of the attribute's type. The accessor returned its
    /// type's zero value (or nil); the next `save()` or fetch throws this error
    /// (and clears it) before doing anything, so a value computed from a failed
    /// read is never saved silently. Check it (or each object's
    /// ``ManagedObject/readError``) after reads you want to verify.
    public internal(set) var pendingError: KuraError?

    /// Throws and clears `pendingError` (called first by save and fetches).
    func throwPendingError() throws(KuraError) {
        guard let e = pendingError else { return }
        pendingError = nil
        throw KuraError(e.code, "an earlier read or write that could not throw failed: \(e.message)", path: e.path, page: e.page, offset: e.offset)
    }

    /// Drops the pending error without throwing it (after the caller handled it).
    public func clearPendingError() { pendingError = nil }

    struct JoinPair: Hashable {
        let source: ManagedObjectID
        let target: ManagedObjectID
    }

    /// The pending batch of change notes and the observers
    /// (ContextNotifications.swift).
    @exclusivity(unchecked) var notices = ContextNoticeState()
    /// The undo manager (ContextUndoManager.swift), nil unless set.
    var undo: ContextUndoManager?
    /// This context's identity among the process's contexts (did-saves carry it).
    let identity = ManagedObjectContext.identities.next()
    private static let identities = ProcessCounter()
    /// Other contexts' did-saves waiting to be merged (Context+Merge.swift);
    /// nil unless `automaticallyMergesChangesFromStore` is on.
    var mergeInbox: MergeInbox?
    var autoMergeObservation: MergeRegistration?
    /// Set by the owner of a context that runs on an executor (the view
    /// context's main actor, a `BackgroundContext` actor): schedules
    /// `mergePushed()` there. Called on the saving (or watcher) thread when a
    /// save arrives in an empty inbox. Nil for thread-confined contexts (pull).
    var pushMerge: (@Sendable () -> Void)?
    /// Told the inbox when automatic merging is switched (the view context
    /// publishes it so that background work can wait for its merge).
    var onAutoMergeChange: ((MergeInbox?) -> Void)?

    /// Whether saves of other contexts on this container, and of other
    /// processes on the same store, are merged into this context
    /// automatically (Core Data's `automaticallyMergesChangesFromParent`;
    /// here the parent is the store). Default off.
    ///
    /// Saves are queued as they commit (other contexts' on the saving thread,
    /// other processes' on the container's store-watcher thread; see
    /// StoreWatcher.swift for how another process's save is read, with and
    /// without persistent history). When they are merged depends on where the
    /// context runs:
    /// - **push**, for contexts with an executor (``PersistentContainer/viewContext``
    ///   on the main actor, a ``BackgroundContext`` on its actor): a merge is
    ///   scheduled on that actor as soon as a save arrives, so observers (a UI)
    ///   update without the app calling anything;
    /// - **pull**, for plain thread-confined contexts (``PersistentContainer/newContext()``):
    ///   on this context's thread at the start of its next fetch, save or
    ///   `processPendingChanges()`, or `mergePendingChanges()`.
    /// Either way the merge posts the objects-did-change batch on the
    /// context's thread or actor.
    ///
    /// If the store cannot be watched (the connection was closed, no inotify
    /// instance), saves of this process are still merged, and
    /// ``pendingError`` names the failure.
    public var automaticallyMergesChangesFromStore: Bool {
        get { mergeInbox != nil }
        set {
            guard newValue != (mergeInbox != nil) else { return }
            if newValue {
                let inbox = MergeInbox()
                mergeInbox = inbox
                let (registration, error) = container.storeWatcher.register(identity: identity, inbox: inbox, push: pushMerge)
                autoMergeObservation = registration
                if let error, pendingError == nil { pendingError = error }
                onAutoMergeChange?(inbox)
            } else {
                autoMergeObservation?.cancel()
                autoMergeObservation = nil
                mergeInbox = nil
                onAutoMergeChange?(nil)
            }
        }
    }

    /// The context this one saves into (Core Data's `parent`); nil for a
    /// context that saves to the store. See Context+Parent.swift.
    public let parent: ManagedObjectContext?

    init(container: PersistentContainer) {
        ownedContainer = container
        borrowedContainer = container
        modelHasTransientRelationships = container.model.hasTransientRelationships
        parent = nil
        registry = ObjectRegistry(identity: identity)
        link.context = self
    }

    /// A child context of `parent` (Context+Parent.swift): it keeps its
    /// parent (and so the container) alive.
    ///
    /// Thread rules: use it on its parent's thread or actor, as the parent
    /// (Kura contexts are not `Sendable`; a child reads and pushes into its
    /// parent directly).
    public init(parent: ManagedObjectContext) {
        let c = parent.container
        ownedContainer = c
        borrowedContainer = c
        modelHasTransientRelationships = c.model.hasTransientRelationships
        self.parent = parent
        mergePolicy = parent.mergePolicy
        registry = ObjectRegistry(identity: identity)
        link.context = self
    }

    /// A context that does not keep `container` alive (the view context,
    /// which the container keeps).
    init(borrowing container: PersistentContainer) {
        ownedContainer = nil
        borrowedContainer = container
        modelHasTransientRelationships = container.model.hasTransientRelationships
        parent = nil
        registry = ObjectRegistry(identity: identity)
        link.context = self
    }

    /// What this context's objects reach it through (ContextLink): pointed
    /// at the context by each initializer, cleared first thing when the
    /// context is deallocated, so that from then on its objects read a nil
    /// `managedObjectContext`, as a weak reference would. A `let` made with
    /// the context (not a lazy property): every object registered reads it,
    /// and a lazy property's getter costs a check and a retain and release
    /// of the context per read.
    let link = ContextLink()

    deinit {
        link.context = nil
        finishStreams()
    }

    /// The container's open store, resolved once it is loaded (then kept:
    /// no lock per access; PersistentContainer+Loading.swift).
    private var cachedStore: LoadedStore?
    /// `model.hasTransientRelationships`, read once (the container's model
    /// never changes): every fault's load asks it, and reading it through
    /// `container` and `model` retains and releases both.
    let modelHasTransientRelationships: Bool
    /// The last entity `layout(of:)` resolved, and its layout.
    private var lastLayout: (entity: EntityDescription, layout: RowLayout)?
    /// The entities `layout(of:)` resolved before (a few, compared by
    /// identity), with their layouts: objects of several entities made or
    /// saved in turn (a student, its record, its courses) hash no name.
    /// `@exclusivity(unchecked)`: read and appended to by plain loads and
    /// stores on the context's thread, calling nothing while they last.
    @exclusivity(unchecked) private var recentLayouts: [(entity: EntityDescription, layout: RowLayout)] = []
    /// The last entity `entity(named:)` resolved.
    private var lastEntity: EntityDescription?
    /// The last class `insertableEntity(ofClass:)` resolved, with its entity.
    private var lastInsertedClass: (type: ObjectIdentifier, entity: EntityDescription)?
    /// The reciprocal inverses `inverse(of:)` found, by the relationship's
    /// name, destination and inverse name (Context+Relationships.swift).
    /// `@exclusivity(unchecked)` as `recentLayouts`.
    @exclusivity(unchecked) var recentInverses: [RecentInverse] = []
    /// The classes `insertableEntity(ofClass:)` resolved before (a few),
    /// with their entities: objects of several classes made in turn look
    /// up no table. `@exclusivity(unchecked)` as `recentLayouts`.
    @exclusivity(unchecked) private var recentInsertedClasses: [(type: ObjectIdentifier, entity: EntityDescription)] = []
    /// The last class `hooks(of:)` read, with the hooks it overrides.
    /// `@exclusivity(unchecked)`: read and replaced by plain loads and
    /// stores on the context's thread, calling nothing while they last.
    @exclusivity(unchecked) private var lastHooks: (type: ObjectIdentifier, hooks: HookOverrides)?
    /// The classes `hooks(of:)` read before (a few), with their hooks.
    /// `@exclusivity(unchecked)` as `lastHooks`.
    @exclusivity(unchecked) private var recentHooks: [(type: ObjectIdentifier, hooks: HookOverrides)] = []

    /// The lifecycle hooks `o`'s class overrides (HookOverrides.swift): a
    /// save calls the others not at all, as calling them would run
    /// ManagedObject's own empty implementations.
    @inline(__always)
    func hooks(of o: ManagedObject) -> HookOverrides {
        let c = type(of: o)
        let type = ObjectIdentifier(c)
        if let last = lastHooks, last.type == type { return last.hooks }
        // A few classes seen before (objects of several classes in turn).
        for i in recentHooks.indices where recentHooks[i].type == type {
            let h = recentHooks[i].hooks
            lastHooks = (type, h)
            return h
        }
        let h = HookOverrides.of(c)
        lastHooks = (type, h)
        if recentHooks.count < 8 { recentHooks.append((type, h)) }
        return h
    }
    var store: LoadedStore {
        if let s = cachedStore { return s }
        let s = container.storeSlot.current
        if s.isLoaded { cachedStore = s }
        return s
    }

    var database: Database { store.database }
    var model: ManagedObjectModel { container.model }

    // MARK: State

    /// Whether the context has unsaved changes.
    public var hasChanges: Bool {
        !inserted.isEmpty || !deleted.isEmpty || !joinEdits.isEmpty || !joinPositions.isEmpty || touchedOrder.contains { $0.hasChangedValues }
    }

    /// Objects inserted and not yet saved.
    public var insertedObjects: [ManagedObject] { liveInserted }

    /// `inserted` without the objects deleted since: the array itself
    /// (shared, not copied) when none was deleted, as in most saves.
    var liveInserted: [ManagedObject] {
        guard insertedMayHoldDeleted else { return inserted }
        if inserted.contains(where: \.isDeleted) { return inserted.filter { !$0.isDeleted } }
        insertedMayHoldDeleted = false
        return inserted
    }

    /// The lists joined in order; the only non-empty one itself (shared, not
    /// copied) when the others are empty, as in a save that only inserts.
    static func joined(_ lists: [ManagedObject]...) -> [ManagedObject] {
        var out: [ManagedObject] = []
        for l in lists where !l.isEmpty {
            if out.isEmpty { out = l } else { out += l }
        }
        return out
    }
    /// Saved objects with unsaved changes.
    public var updatedObjects: [ManagedObject] { touchedOrder.filter { !$0.isDeleted && $0.hasChangedValues } }
    /// Objects deleted and not yet saved (inserted-then-deleted ones excluded).
    public var deletedObjects: [ManagedObject] { deleted.filter { !$0.isNew } }

    /// Objects this context holds now (clean ones only while something else
    /// references them).
    public var registeredObjectCount: Int { registry.count }

    // MARK: Inserting and finding objects

    /// Inserts a new object of the entity named `entityName`; defaults are set
    /// and `awakeFromInsert` runs.
    ///
    /// - Throws: `.notFound` naming the entity; `.invalidArgument` for an
    ///   abstract entity (naming the subentities to insert instead).
    @discardableResult
    public func insert(_ entityName: String) throws(KuraError) -> ManagedObject {
        let e = try model.entity(entityName)
        try model.checkInsertable(e)
        let o = e.objectClass.init(entity: e, objectID: registry.newTemporaryID(e.name))
        register(inserted: o)
        return o
    }

    /// Inserts a new object of a registered subclass.
    ///
    /// - Throws: `.notFound` naming the class and the entities it could be, if
    ///   the class is not the class of any entity.
    @discardableResult
    public func insert<T: ManagedObject>(_ type: T.Type) throws(KuraError) -> T {
        let e = try model.entity(forClass: type)
        // `insert` makes an `e.objectClass`, which is `type`.
        guard let o = try insert(e.name) as? T else { preconditionFailure("entity \(e.name) made an object that is not a \(type) (a Kura bug)") }
        return o
    }

    /// The entity `ManagedObject.init(context:)` inserts an object of class
    /// `c` as, checked insertable (the last class asked for is kept with its
    /// entity: a run of inserts of one class looks nothing up; the model of
    /// a context never changes, and classes are never unloaded).
    ///
    /// - Throws: as `ManagedObjectModel.entity(forClass:)` and `checkInsertable`.
    func insertableEntity(ofClass c: ManagedObject.Type) throws(KuraError) -> EntityDescription {
        let type = ObjectIdentifier(c)
        if let last = lastInsertedClass, last.type == type { return last.entity }
        for i in recentInsertedClasses.indices where recentInsertedClasses[i].type == type {
            let e = recentInsertedClasses[i].entity
            lastInsertedClass = (type, e)
            return e
        }
        let e = try model.entity(forClass: c)
        try model.checkInsertable(e)
        lastInsertedClass = (type, e)
        if recentInsertedClasses.count < 8 { recentInsertedClasses.append((type, e)) }
        return e
    }

    func register(inserted o: ManagedObject) {
        // The link itself (what `managedObjectContext = self` stores),
        // without a retain and release of the context per object.
        o.contextLink = link
        // Defaults in stored form, computed once per entity (RowLayout.insertSlots)
        // and copied into the object's own slots (which the setters that
        // follow then change in place); a store that is not loaded has no layouts.
        if let l = loadedLayout(of: o.entity), l.insertSlots.count == o.entity.attributes.count {
            o.setNewValues(AttributeValues(filled: l.insertSlots))
        } else {
            for (i, a) in o.entity.attributes.enumerated() { o.values[ordinal: i] = a.defaultValue.map { a.type.stored($0) } ?? .null }
        }
        o.isNew = true
        inserted.append(o)
        registry.addInserted(o)
        noteInserted(o)
        if undo != nil { recordPresence(.inserted, o) }
        o.awakeFromInsert()
    }

    /// The object with `id`, uniqued: the registered instance, or a fault whose
    /// values load on first access (Core Data's `object(with:)`). An ID naming
    /// an entity with subentities (`Region/p7` for a row that is a Country)
    /// gives the object of the row's own entity (one read of the store).
    ///
    /// - Throws: `.notFound` for an unknown entity, `.invalidArgument` for a
    ///   temporary ID this context does not know; read errors for an ID that
    ///   needs its row's entity.
    public func object(with id: ManagedObjectID) throws(KuraError) -> ManagedObject {
        try object(with: id, canonical: false)
    }

    /// `object(with:)`; `canonical` says `id` already names its row's own
    /// entity (IDs the context made from rows), sparing the read.
    func object(with id: ManagedObjectID, canonical: Bool) throws(KuraError) -> ManagedObject {
        if let o = registered(id) { return o }
        if id.isTemporary, let parent, parent.knows(id) {
            // An object the parent (or an ancestor) inserted: this context's
            // instance, loaded from the parent's on first access.
            return registerFault(id)
        }
        guard !id.isTemporary else {
            _ = try model.entity(id.entityName)
            throw KuraError(.invalidArgument, "\(id) is a temporary ID of another context; save that context first")
        }
        let e = try entity(named: id.entityName)
        // Only an entity with subentities can name another entity's row.
        if canonical || e.subentityNames.isEmpty { return registerFault(id, e) }
        let c = try canonicalID(id)
        if let o = registered(c) { return o }
        return registerFault(c)
    }

    /// Registers a fault for `id`, whose entity the model has.
    func registerFault(_ id: ManagedObjectID) -> ManagedObject {
        guard let e = model.entitiesByName[id.entityName] else { preconditionFailure("entity \(id.entityName) is not in the model (callers check; a Kura bug)") }
        return registerFault(id, e)
    }

    /// Registers a fault for `id` of entity `e` (`id`'s entity).
    func registerFault(_ id: ManagedObjectID, _ e: EntityDescription) -> ManagedObject {
        let o = e.objectClass.init(entity: e, objectID: id)
        o.contextLink = link
        o.isFault = true
        track(o, as: id)
        return o
    }

    /// The object with `id`, loaded; throws if it does not exist (Core Data's
    /// `existingObject(with:)`).
    ///
    /// - Throws: `.notFound` naming the object if the store has no such row.
    public func existingObject(with id: ManagedObjectID) throws(KuraError) -> ManagedObject {
        let o = try object(with: id)
        if o.isDeleted { throw KuraError(.notFound, "\(id) is deleted in this context") }
        // `object(with:)` returns this context's objects only, so the fault
        // loads here directly (what `loadIfFault` does through the object's
        // context).
        if o.isFault { try load(o) }
        return o
    }

    /// Loads a fault's values from the store. A fault fetched in a batch
    /// (`fetchBatchSize`) loads its whole batch in one read.
    func load(_ o: ManagedObject) throws(KuraError) {
        guard o.isFault else { return }
        if let parent {
            batchGroups[o.objectID] = nil
            try loadFromParent(o, parent)
            return
        }
        if !batchGroups.isEmpty, let group = batchGroups[o.objectID] {
            try loadBatch(group)
            if !o.isFault { return }
        }
        let layout = self.layout(of: o.entity)
        let row: [Value]?
        if enclosingTransaction == nil {
            // A layout plain but for its to-one keys: the record is decoded
            // where it lies, as a fetch decodes it (`loadFault`).
            if layout.columnOrdinals == nil, let columns = layout.fetchColumns {
                readTransactionCount += 1
                switch try loadFault(o, layout, columns) {
                case .read:
                    o.awakeFromFetch()
                    return
                case .missing:
                    throw Self.gone(o.objectID)
                case .external:
                    break  // read again below, as an array (a second read)
                }
            }
            // One row in a transaction of its own, without a transaction
            // object when the engine can (`Database.values(inTable:rowID:)`).
            readTransactionCount += 1
            // A plain layout's row decodes straight into the object's slots.
            if let ordinals = layout.columnOrdinals, !layout.hasExternal, try loadBorrowed(o, layout, ordinals) {
                o.awakeFromFetch()
                return
            }
            row = try database.values(inTable: layout.table, rowID: o.objectID.rowID)
        } else {
            row = try read { tx throws(KuraError) -> [Value]? in
                try layout.values(tx, try tx.table(layout.table), rowID: o.objectID.rowID)
            }
        }
        guard let row else {
            throw Self.gone(o.objectID)
        }
        try checkRowEntity(row, of: o)
        apply(row, to: o, layout: layout)
        o.awakeFromFetch()
    }

    /// The error for a fault whose row the store no longer has.
    static func gone(_ id: ManagedObjectID) -> KuraError {
        KuraError(.notFound, "\(id) no longer exists in the store (deleted by another context?)")
    }

    /// Loads fault `o`, whose layout is plain (`RowLayout.columnOrdinals`,
    /// no external column), from its record where it lies in its page
    /// (`Database.withRecord`): each stored column is decoded into the
    /// object's slot for it, without the row array `values(inTable:rowID:)`
    /// makes. The outcome is `apply`'s on that array: columns the record
    /// does not store read as their defaults, transient attributes as their
    /// insert values. Returns false, having loaded nothing, if the table
    /// turned out to have external columns (the caller reads the row as an
    /// array then).
    ///
    /// - Throws: `.notFound` if the row is gone; `.corrupt` for a damaged
    ///   record; engine read errors.
    private func loadBorrowed(_ o: ManagedObject, _ layout: RowLayout, _ ordinals: [Int]) throws(KuraError) -> Bool {
        let direct = layout.directColumns ?? []
        let n = direct.count
        let slots = ValueSlots.make(count: n, from: nil)
        let versionColumn = layout.version
        var version = versionColumn < layout.defaults.count ? layout.defaults[versionColumn].integerValue ?? 0 : 0
        let found = try withExtendedLifetime(slots) { () throws(KuraError) -> BorrowedRecordLookup in
            // The slots' address is stable while `slots` lives (a ManagedBuffer's
            // elements are stored in it), which `withExtendedLifetime` ensures.
            let p = slots.withUnsafeMutablePointerToElements { $0 }
            let lookup = try database.withRecord(inTable: layout.table, rowID: o.objectID.rowID) { r throws(KuraError) in
                while let v = try r.next() {
                    let c = r.column - 1
                    guard c < ordinals.count else { continue }
                    let k = ordinals[c]
                    if k >= 0 { p[k] = v } else if c == versionColumn { version = v.integerValue ?? 0 }
                }
            }
            guard case .read = lookup else { return lookup }
            // Columns the record does not store, and transient attributes (no column).
            for k in 0..<n {
                guard case .none = p[k] else { continue }
                let c = direct[k]
                p[k] = c >= 0 ? (c < layout.defaults.count ? layout.defaults[c] : .null) : layout.insertValues[k]
            }
            return lookup
        }
        switch found {
        case .read:
            break
        case .missing:
            throw Self.gone(o.objectID)
        case .external:
            readTransactionCount += 1
            return false
        }
        if o.isFault, modelHasTransientRelationships { o.transientRelated = .init() }
        // `install` with no to-one keys and no positions (a plain layout has
        // none), clearing only what is there to clear.
        let values = AttributeValues(slots: slots, count: n)
        o.values = values
        if !o.toOne.isEmpty { o.toOne = ToOneKeys() }
        if !o.savedToOne.isEmpty { o.savedToOne = ToOneKeys() }
        o.clearOrders()
        o.savedValues = values
        o.version = version
        o.isFault = false
        o.clearReadError()
        return true
    }

    /// Loads every still-faulted object of a fetch batch in one read transaction.
    func loadBatch(_ group: BatchGroup) throws(KuraError) {
        let faults = group.ids.compactMap { registered($0) }.filter(\.isFault)
        if !batchGroups.isEmpty { for id in group.ids { batchGroups[id] = nil } }
        try loadFaultsInOneRead(faults)
    }

    /// Loads `faults`, registered objects that are faults (none twice), in
    /// one read: `loadBatch` for a caller that has the objects. Objects of
    /// one entity next to each other, in ascending row IDs, cost the least.
    ///
    /// - Throws: `.corrupt` for a damaged tree or record; engine read errors.
    func loadFaults(_ faults: [ManagedObject]) throws(KuraError) {
        // An object of an earlier batched fetch loads here, not with its batch.
        if !batchGroups.isEmpty { for o in faults { batchGroups[o.objectID] = nil } }
        try loadFaultsInOneRead(faults)
    }

    /// `loadFaults` once the faults' batch groups are forgotten.
    private func loadFaultsInOneRead(_ faults: [ManagedObject]) throws(KuraError) {
        if parent != nil {
            for o in faults { try load(o) }
            return
        }
        guard !faults.isEmpty else { return }
        // By runs of one entity: a plain layout's faults (`fetchColumns`)
        // are filled from their records where they lie (`fillFault`, rows
        // lent by `forEachRow(in:rowIDs:)`); others get their rows as arrays,
        // applied after the read.
        var rows = [[Value]?](repeating: nil, count: faults.count)
        var filled = [Bool](repeating: false, count: faults.count)
        try read { tx throws(KuraError) in
            var start = 0
            while start < faults.count {
                let e = faults[start].entity
                var end = start + 1
                while end < faults.count, faults[end].entity === e { end += 1 }
                defer { start = end }
                let layout = self.layout(of: e)
                if let columns = layout.fetchColumns {
                    try tx.forEachRow(in: e.hierarchy.table, rowIDs: faults[start..<end].map(\.objectID.rowID)) { i, row throws(KuraError) in
                        guard let row else { return }
                        try self.fillFault(faults[start + i], from: row, layout, columns)
                        filled[start + i] = true
                    }
                    continue
                }
                let t = try tx.table(e.hierarchy.table)
                for i in start..<end { rows[i] = try layout.values(tx, t, rowID: faults[i].objectID.rowID) }
            }
        }
        for (i, o) in faults.enumerated() {
            if filled[i] {
                o.awakeFromFetch()
                continue
            }
            // A row deleted since the fetch stays a fault: reading it reports
            // `.notFound` through `load` (or the failure channel).
            guard let row = rows[i] else { continue }
            try checkRowEntity(row, of: o)
            apply(row, to: o)
            o.awakeFromFetch()
        }
    }

    /// Loads a fault for a non-throwing accessor; a failure goes to the
    /// failure channel (`pendingError`, `ManagedObject.readError`).
    func fulfill(_ o: ManagedObject) {
        do { try load(o) } catch { o.noteReadError(error) }
    }

    /// Sets an object's saved and current state from a stored row (in the
    /// entity's column order: attributes, then to-one keys and order columns,
    /// then the version).
    func apply(_ row: [Value], to o: ManagedObject) {
        apply(row, to: o, layout: layout(of: o.entity))
    }

    /// `apply(_:to:)` with the layout of `o`'s entity at hand (a fault's
    /// load resolved it for its read: not resolved twice per object).
    func apply(_ row: [Value], to o: ManagedObject, layout: RowLayout) {
        // Empty until a key is set; the first key makes a one-entry list in
        // one step, as most entities have one to-one key or none.
        var toOne = ToOneKeys()
        var order = [String: Double]()
        // Transient relationships start over when a fault fires
        // (RelationshipDescription.isTransient); in a model without them
        // there is nothing to clear (and the field's write, with its dynamic
        // exclusivity check, is spared).
        if o.isFault, modelHasTransientRelationships { o.transientRelated = .init() }
        // By ordinal, from the layout (iterating the descriptions would copy
        // each one); every slot gets a value, in order. A plain layout
        // (RowLayout.directColumns: no composite or decimal attribute) takes
        // each stored value as it is, from its column, without asking the
        // per-attribute tables for a conversion none of them needs.
        let values = if let direct = layout.directColumns {
            AttributeValues(count: direct.count) { k in
                let i = direct[k]
                // A transient attribute starts over from its default.
                guard i >= 0 else { return layout.insertValues[k] }
                return i < row.count ? row[i] : layout.defaults[i]
            }
        } else {
            convertedValues(row, layout: layout)
        }
        // By index: iterating the slots would copy each one (retaining and
        // releasing its names) per row.
        let slots = layout.relationships
        for j in slots.indices {
            let column = slots[j].column
            if column < row.count, case .integer(let rid) = row[column] {
                let id = slots[j].entityColumn == nil ? ManagedObjectID(entity: slots[j].destination, rowID: rid)
                    : targetID(slots[j], rowID: rid, row: row, of: o)
                if toOne.isEmpty { toOne = ToOneKeys(slots[j].name, id) } else { toOne[slots[j].name] = id }
            }
            if let oc = slots[j].orderColumn, oc < row.count, case .double(let d) = row[oc] { order[slots[j].name + "_order"] = d }
        }
        install(values, toOne: toOne, order: order, version: layout.version < row.count ? row[layout.version].integerValue ?? 0 : 0, in: o)
    }

    /// Sets `o`'s current and saved state to what was read from its row, and
    /// marks it loaded (`apply`; `loadBorrowed` does the same for a plain layout).
    @inline(__always)
    private func install(_ values: AttributeValues, toOne: ToOneKeys, order: [String: Double], version: Int64, in o: ManagedObject) {
        o.values = values
        o.toOne = toOne
        o.order = order
        o.savedValues = values
        o.savedToOne = toOne
        o.savedOrder = order
        o.version = version
        o.isFault = false
        o.clearReadError()
    }

    /// The attribute values of `row` by ordinal for any layout: composite
    /// attributes joined from their columns, decimals rebuilt from their
    /// number and exact columns, transient attributes at their defaults.
    private func convertedValues(_ row: [Value], layout: RowLayout) -> AttributeValues {
        AttributeValues(count: layout.attributeColumns.count) { k in
            if let cols = layout.compositeColumns[k] {
                return RowLayout.compositeValue(cols.map { $0 < row.count ? row[$0] : layout.defaults[$0] })
            }
            // A transient attribute starts over from its default (AttributeDescription.isTransient).
            guard let i = layout.attributeColumns[k] else { return layout.insertValues[k] }
            let v = i < row.count ? row[i] : layout.defaults[i]
            if let x = layout.exactColumns[k] {
                return AttributeType.storedDecimal(number: v, exact: x < row.count ? row[x] : nil)
            }
            return v
        }
    }

    func layout(of e: EntityDescription) -> RowLayout {
        guard let l = loadedLayout(of: e) else {
            preconditionFailure("entity \(e.name) is not in the container's model (a Kura bug)")
        }
        return l
    }

    /// The layout of `e`'s rows, nil while the store is not loaded.
    @inline(__always)
    func loadedLayout(of e: EntityDescription) -> RowLayout? {
        if let last = lastLayout, last.entity === e { return last.layout }
        return recentLayout(of: e)
    }

    /// `loadedLayout(of:)` when `e` is not the last entity asked for.
    private func recentLayout(of e: EntityDescription) -> RowLayout? {
        for i in recentLayouts.indices where recentLayouts[i].entity === e {
            let l = recentLayouts[i].layout
            lastLayout = (e, l)
            return l
        }
        guard let l = store.layouts[e.name] else { return nil }
        // The layouts of a loaded store never change (`store` keeps it).
        if cachedStore != nil {
            lastLayout = (e, l)
            if recentLayouts.count < 8 { recentLayouts.append((e, l)) }
        }
        return l
    }

    /// The model's entity named `name` (the last one asked for is kept:
    /// runs of objects of one entity hash no name).
    ///
    /// - Throws: `.notFound` naming the entity.
    @inline(__always)
    func entity(named name: String) throws(KuraError) -> EntityDescription {
        if let e = lastEntity, e.name == name { return e }
        let e = try model.entity(name)
        lastEntity = e
        return e
    }

    /// The uniqued object for a fetched row.
    func materialize(_ e: EntityDescription, rowID: Int64, row: [Value]) -> ManagedObject {
        let id = ManagedObjectID(entity: e.name, rowID: rowID)
        if let o = registered(id) {
            takeFetchedRow(row, into: o)
            return o
        }
        let o = e.objectClass.init(entity: e, objectID: id)
        o.contextLink = link
        apply(row, to: o)
        track(o, as: id)
        o.awakeFromFetch()
        return o
    }

    /// A fetched row for `o`, an object registered before the fetch: a
    /// fault takes it, a clean object takes it keeping its transient
    /// values, a changed or deleted object keeps its state.
    func takeFetchedRow(_ row: [Value], into o: ManagedObject) {
        if o.isFault {
            apply(row, to: o)
        } else if !o.hasChangedValues && !o.isDeleted {
            // A clean object takes the row; a fetch is no reload of its transients.
            o.keepingTransients { apply(row, to: o) }
        }
    }

    /// Records that `key` of an object is about to change (and notes it for
    /// the next objects-did-change batch).
    func willChange(_ o: ManagedObject, key: String, toMany: Bool? = nil) {
        noteUpdated(o, key, toMany: toMany)
        noteTouched(o, key: key)
    }

    /// Whether `o`, an inserted object, has nothing to note for a change
    /// of an attribute: it is noted inserted in the pending batch and undo
    /// records nothing (what noteUpdated and noteTouched would find).
    @inline(__always)
    func insertedNoteIsCurrent(_ o: ManagedObject) -> Bool {
        undo == nil && noted(o) == .inserted
    }

    /// `willChange` for a key known to name an attribute.
    func willChangeAttribute(_ o: ManagedObject, key: String) {
        // An object inserted in the pending batch, without undo recording,
        // has nothing to note (what noteUpdated and noteTouched would find).
        if o.isNew, insertedNoteIsCurrent(o) { return }
        noteUpdated(o, key, attribute: true)
        noteTouched(o, key: key)
    }

    private func noteTouched(_ o: ManagedObject, key: String) {
        if undo != nil { recordUndo(o, key: key) }
        guard !o.isNew, !o.isTouched else { return }
        o.isTouched = true
        touchedOrder.append(o)
    }

    // MARK: Deleting

    /// Marks `object` deleted and applies its relationships' delete rules:
    /// cascade deletes the targets, nullify removes it from their side. The row
    /// goes at the next save.
    ///
    /// - Throws: `.invalidArgument` for an object of another context.
    public func delete(_ object: ManagedObject) throws(KuraError) {
        guard object.managedObjectContext === self else {
            throw KuraError(.invalidArgument, "\(object) belongs to another context")
        }
        guard !object.isDeleted else { return }
        try object.loadIfFault()
        object.prepareForDeletion()
        guard !object.isDeleted else { return }  // the hook may have deleted it
        // Gather the targets before marking, so to-many reads still see them.
        var targets: [(RelationshipDescription, [ManagedObject])] = []
        for r in object.entity.relationships {
            targets.append((r, r.isToMany ? try relatedObjects(object, r) : (try relatedObject(object, r)).map { [$0] } ?? []))
        }
        object.isDeleted = true
        deleted.append(object)
        noteDeleted(object)
        recordPresence(.deleted, object)
        for (r, objects) in targets {
            switch r.deleteRule {
            case .deny, .noAction:
                continue
            case .cascade:
                for t in objects where !t.isDeleted { try delete(t) }
            case .nullify:
                guard let invName = r.inverse, let inv = model.entitiesByName[r.destination]?.relationshipsByName[invName] else { continue }
                for t in objects where !t.isDeleted {
                    if inv.isToMany { noteUpdated(t, invName) }
                    if !inv.isToMany {
                        if t.toOne[invName] == object.objectID {
                            willChange(t, key: invName)
                            t.toOne[invName] = nil
                            t.order[invName + "_order"] = nil
                        }
                    } else if case .joinTable(let table, let forward) = model.storage(of: r, in: object.entity) {
                        let pair = forward ? JoinPair(source: object.objectID, target: t.objectID) : JoinPair(source: t.objectID, target: object.objectID)
                        setJoinEdit(table, pair, false)
                    }
                }
            }
        }
    }

    // MARK: Undoing

    /// Drops the pending-change bookkeeping (after a save, a push to the
    /// parent or a rollback): inserted, changed and deleted objects, join
    /// edits and positions, the pending indexes and the undo stack.
    func forgetPendingChanges() {
        inserted = []
        insertedMayHoldDeleted = false
        clearPendingIndexes()
        for o in touchedOrder { o.isTouched = false }
        touchedOrder = []
        deleted = []
        joinEdits = [:]
        joinPositions = [:]
        notices.toManyTouched = [:]
        undo?.removeAllActions()
    }

    /// Discards every unsaved change: inserted objects leave the context, changed
    /// and deleted objects get their saved values back.
    ///
    /// Observers hear, at the next `processPendingChanges()`: inserted objects
    /// as deleted, changed and deleted objects as refreshed with the keys that
    /// took their saved values back. Each changed or deleted object that stays
    /// then gets ``ManagedObject/awakeFromSnapshotEvents(_:)`` with `.rollback`.
    ///
    /// Transient attributes take the values they had at the last load or save;
    /// transient relationships keep their links (they have no saved state: as
    /// in Core Data, whose rollback restores committed values, and transient
    /// properties have none), except links to objects the rollback removes
    /// (rolled-back inserts), which read as gone.
    public func rollback() {
        var seen = Set<ObjectIdentifier>()
        let restored = (touchedOrder + deleted).filter { !$0.isNew && seen.insert(ObjectIdentifier($0)).inserted }
        for o in inserted {
            registry[o.objectID] = nil
            o.managedObjectContext = nil
            noteDeleted(o)
        }
        for o in touchedOrder + deleted where !o.isNew {
            var keys = Set<String>()
            if let saved = o.savedValues {
                keys = o.differingKeys(values: saved, toOne: o.savedToOne)
                o.values = saved
                o.toOne = o.savedToOne
                o.order = o.savedOrder
            }
            o.isDeleted = false
            o.deferredErrors = []
            noteRefreshed(o, keys)
        }
        for (table, edits) in joinEdits {
            for e in model.entities {
                for r in e.relationships {
                    guard case .joinTable(let t, let forward) = model.storage(of: r, in: e), t == table else { continue }
                    for pair in edits.keys {
                        if let o = registered(forward ? pair.source : pair.target), o.managedObjectContext === self { noteRefreshed(o, [r.name]) }
                    }
                }
            }
        }
        forgetPendingChanges()
        for o in restored where o.managedObjectContext === self { o.awakeFromSnapshotEvents(.rollback) }
    }

    /// Forgets every object (changes included). Objects obtained before stay
    /// valid as values but leave the context; fetch or `object(with:)` again.
    ///
    /// Observers hear, at the next `processPendingChanges()`, that every object
    /// was invalidated (``ContextObjectsDidChange/invalidatedAll``).
    public func reset() {
        noteInvalidatedAll()
        for u in registry.values {
            let o = u.takeUnretainedValue()
            o.managedObjectContext = nil
            o.transientRelated = [:]  // transient relationships retain their targets
        }
        registry.removeAll()
        batchGroups = [:]
        dropPrefetched()
        storeAnswers.clear()
        forgetPendingChanges()
    }

    /// Reloads an object's values from the store. With `mergeChanges` (the
    /// default) the properties this context changed keep their new values and
    /// every other property takes the store's; without it, the changes are
    /// discarded. Either way the object is then based on the store's current
    /// version, so its next save does not conflict with what it just read
    /// (the way to settle a `mergeConflict` by hand).
    ///
    /// A loaded object then gets ``ManagedObject/awakeFromSnapshotEvents(_:)``
    /// with `.refresh` (a fault stays one and gets nothing).
    ///
    /// - Throws: `.notFound` if the object was deleted in the store; engine
    ///   read errors.
    public func refresh(_ object: ManagedObject, mergeChanges: Bool = true) throws(KuraError) {
        let wasFault = object.isFault
        try reload(object, mergeChanges: mergeChanges)
        if !wasFault && !object.isFault && !object.isNew { object.awakeFromSnapshotEvents(.refresh) }
    }

    /// `refresh(_:mergeChanges:)` without the snapshot hook (merges call it
    /// and report their own events).
    func reload(_ object: ManagedObject, mergeChanges: Bool) throws(KuraError) {
        guard !object.isNew else { return }
        prefetched[object.objectID] = nil
        let wasFault = object.isFault
        let before = (object.values, object.toOne)
        defer {
            if !wasFault && !object.isFault { noteRefreshed(object, object.differingKeys(values: before.0, toOne: before.1)) }
        }
        guard mergeChanges && object.hasChangedValues, !wasFault else {
            if !wasFault { object.willTurnIntoFault() }
            object.isFault = true
            if !wasFault { object.didTurnIntoFault() }
            do { try load(object) } catch {
                object.isFault = wasFault
                throw error
            }
            return
        }
        let values = object.values, toOne = object.toOne, order = object.order, links = object.transientRelated
        var changedValues: [(Int, Value)] = []
        for i in 0..<values.count {
            if let v = values[ordinal: i], object.savedValues?[ordinal: i] != v { changedValues.append((i, v)) }
        }
        let changedToOne = object.entity.relationships.filter { !$0.isToMany && object.savedToOne[$0.name] != toOne[$0.name] }.map(\.name)
        let changedOrder = order.filter { object.savedOrder[$0.key] != $0.value }
        let droppedOrder = object.savedOrder.keys.filter { order[$0] == nil }
        object.willTurnIntoFault()
        object.isFault = true
        object.didTurnIntoFault()
        do { try load(object) } catch {
            object.isFault = false  // `load` changed nothing else
            throw error
        }
        for (i, v) in changedValues { object.values[ordinal: i] = v }
        for k in changedToOne { object.toOne[k] = toOne[k] }
        for (k, v) in changedOrder { object.order[k] = v }
        for k in droppedOrder { object.order[k] = nil }
        object.transientRelated = links
    }
}
