// ManagedObject: one object (a row) of an entity, owned by a context.
//
// State: current attribute values (in their stored form) and to-one targets;
// the values last saved (to know what changed); whether it is a fault (values
// not loaded yet). To-many relationships are not stored in the object: they are
// computed from the store and the context's pending changes each time they are
// read, so both sides of a relationship always agree.

import Foundation

/// An object managed by a context: the Kura counterpart of NSManagedObject.
///
/// Access values by name (`object["title"]`, ``value(forKey:)``,
/// ``setValue(_:forKey:)``) or, in a subclass, through typed properties:
///
/// ```swift
/// final class Student: ManagedObject {
///     @Managed("name") var name: String
///     @Managed("age") var age: Int16
///     @ToOne("record") var record: Record?
/// }
/// ```
///
/// Thread rules: an object belongs to its context and is used on the context's
/// thread (or actor) only. Lifetime: an object refers to its context weakly (as
/// in Core Data), so keep the context alive while using its objects: once the
/// context is gone, `value(forKey:)` and relationship calls throw `.misuse`,
/// and typed properties of a fault or relationships read their zero value
/// (nil, [], "", 0) and record the `.misuse` error in ``readError``. After the
/// context is reset or the object deleted and saved, its ID still works in
/// another context's `object(with:)`.
///
/// Failure channel: typed properties and the subscript cannot throw. When one
/// cannot give the real value (a fault whose load failed, a row deleted
/// elsewhere, an unknown key, a stored value not of the attribute's type, no
/// context), it returns the zero value and records the error in ``readError``
/// and in the context's ``ManagedObjectContext/pendingError``, which the next
/// `save()` or fetch throws. Use `value(forKey:)` to get the error at once.
open class ManagedObject: CustomStringConvertible {
    /// The object's entity.
    public let entity: EntityDescription

    // The stored state below is `@exclusivity(unchecked)` (except the
    // field holding objects: `transientRelated`): the runtime's dynamic exclusivity check (a
    // thread-local access set entered and left on every write and many
    // reads) cost several percent of an insert-heavy save. It may be left
    // out because no access to these fields can overlap another: Kura reads
    // and writes them only with plain loads, stores and in-place edits that
    // call no other code while they last (none is passed `inout`; `values`'
    // observer runs after its write; what they hold releases no object, so
    // no deinit of app code runs inside an edit), and an object is used on
    // its context's thread only (not `Sendable`).
    //
    // Layout: stored properties lie in declaration order, so the order below
    // is chosen for the cache. A save visits each of its objects several
    // times (will-save hooks, validation, the row, the saved state), and in
    // a large save each visit finds the object out of the cache: what those
    // visits read sits together in the object's first two 64-byte lines
    // (the header, entity, ID, flags, will-save watch and link; then the
    // values, to-one keys and version), the saved values next. Rarely used
    // state (the state kept for will-save, deferred errors, ordered
    // positions, transient targets, the last read error) sits in one box,
    // `extrasStorage`, nil for most objects.
    /// The object's ID (temporary until first saved).
    @exclusivity(unchecked) public internal(set) var objectID: ManagedObjectID
    /// Whether the object's values are not loaded yet (they load on first access).
    @exclusivity(unchecked) public internal(set) var isFault = false
    /// Set by `delete`.
    @exclusivity(unchecked) public internal(set) var isDeleted = false {
        willSet { if willSaveWatch != 0 { keepWillSaveState() } }
        // The context's inserted list may now hold a deleted object
        // (ManagedObjectContext.liveInserted).
        didSet { if isDeleted { contextLink?.context?.insertedMayHoldDeleted = true } }
    }
    /// Whether the object was inserted in its context and not yet saved (to
    /// the store, or pushed to a parent context). Not the same as a temporary
    /// ID: `obtainPermanentIDs` gives an inserted object its store ID early,
    /// and a child context sees its parent's inserted objects (temporary IDs)
    /// as objects it did not insert.
    @exclusivity(unchecked) var isNew = false
    /// Whether the context's pending indexes hold this object.
    @exclusivity(unchecked) var indexWatch = false
    /// Whether the object is in its context's `touchedOrder` (a saved
    /// object changed since the last save): set by its first change, cleared
    /// when the context forgets its pending changes or evicts it.
    @exclusivity(unchecked) var isTouched = false
    /// The list of its context's pending change batch this object is in, valid
    /// while `notedBatch` is the context's batch number (ContextNotifications.swift).
    @exclusivity(unchecked) var notedList: NoteList?
    /// The context's `willSaveEpoch` when `save` last called this object's
    /// `willSave()` (0: never): while it is the context's current one, the
    /// first change of `values`, `toOne` or `isDeleted` keeps their state
    /// from before it (`keepWillSaveState`, ManagedObject+Lifecycle.swift).
    /// Two bytes, in what would be padding before `contextLink`.
    @exclusivity(unchecked) var willSaveWatch: UInt16 = 0
    /// The context the object belongs to (nil once it was removed from it,
    /// or once the context was deallocated).
    public internal(set) var managedObjectContext: ManagedObjectContext? {
        @inline(__always) get { contextLink?.context }
        set { contextLink = newValue?.link }
    }
    /// The object's way to its context (ContextLink, in ManagedObjectContext.swift):
    /// a strong reference to the context's link, which the context clears
    /// when it is deallocated. Not a weak reference to the context: that
    /// would give the context a side table, which slows down every retain
    /// and release of it, and make every object pay a weak store, load and
    /// destroy.
    @exclusivity(unchecked) var contextLink: ContextLink?

    /// Attribute values by ordinal (AttributeValues.swift): `valueStorage`,
    /// through accessors that keep the state `willSave()` saw before the
    /// first change after it (`keepWillSaveState`) and re-file an object
    /// filed in its context's pending indexes (PendingIndex.swift), without
    /// a copy: `_modify` lends the storage itself, so a setter changes the
    /// values' buffer in place.
    var values: AttributeValues {
        // `_read` lends the storage (a getter would return a copy: a retain
        // and release of the values' buffer per read).
        @inline(__always) _read { yield valueStorage }
        @inline(__always) _modify {
            if willSaveWatch != 0 { keepWillSaveState() }
            yield &valueStorage
            if indexWatch { managedObjectContext?.pendingValuesChanged(self) }
        }
        @inline(__always) set {
            if willSaveWatch != 0 { keepWillSaveState() }
            valueStorage = newValue
            if indexWatch { managedObjectContext?.pendingValuesChanged(self) }
        }
    }
    /// `values`' storage: read and written only through `values`, and
    /// the accessors below for states `values`' accessors have nothing to
    /// do in.
    @exclusivity(unchecked) private var valueStorage: AttributeValues

    /// Sets the values of an object just made, which nothing watches yet
    /// (no will-save pass, no pending index): what `values = v` does.
    @inline(__always)
    func setNewValues(_ v: AttributeValues) {
        assert(willSaveWatch == 0 && !indexWatch, "setNewValues on a watched object (a Kura bug)")
        valueStorage = v
    }

    /// `values.write(into:columns:)`, read in place (no copy of the values,
    /// which would retain and release their storage).
    @inline(__always)
    func writeValues(into out: inout [Value], columns: [Int]) {
        valueStorage.write(into: &out, columns: columns)
    }
    /// The to-one targets by relationship name: `toOneStorage`, through
    /// accessors that keep the state `willSave()` saw (as `values`).
    var toOne: ToOneKeys {
        @inline(__always) _read { yield toOneStorage }
        @inline(__always) _modify {
            if willSaveWatch != 0 { keepWillSaveState() }
            yield &toOneStorage
        }
        @inline(__always) set {
            if willSaveWatch != 0 { keepWillSaveState() }
            toOneStorage = newValue
        }
    }
    // Name-to-ID lists (ToOneKeys.swift), not dictionaries: a loaded
    // object pays no hash table.
    @exclusivity(unchecked) private var toOneStorage = ToOneKeys()
    @exclusivity(unchecked) var savedToOne = ToOneKeys()
    /// The row's version when this context last read or saved it (the store's
    /// `_version` column); `save` compares it with the stored one.
    @exclusivity(unchecked) var version: Int64 = 0
    /// Last saved state (nil for an object never saved).
    @exclusivity(unchecked) var savedValues: AttributeValues?
    @exclusivity(unchecked) var notedBatch: UInt64 = 0
    /// The state few objects ever have (ObjectExtras, below), made on its
    /// first write that is not empty: nil for most objects, which then
    /// initialize and destroy one word instead of seven fields.
    @exclusivity(unchecked) private var extrasStorage: ObjectExtras?

    /// `extrasStorage`, made if there is none yet (for a write).
    private var extras: ObjectExtras {
        if let e = extrasStorage { return e }
        let e = ObjectExtras()
        extrasStorage = e
        return e
    }

    // The state kept in `extras`: reading it without a box reads the empty
    // value; writing the empty value without a box makes none.

    /// The state of `values`, `toOne` and `isDeleted` when `save` last
    /// called `willSave()`, kept at the first change after it (nil: no
    /// change since, or not watched): ManagedObject+Lifecycle.swift.
    var willSaveKept: WillSaveState? {
        get { extrasStorage?.willSaveKept }
        set { if newValue != nil || extrasStorage != nil { extras.willSaveKept = newValue } }
    }
    /// Whether the object has the box of rarely used state (without it,
    /// every field kept there reads empty).
    @inline(__always)
    var hasExtras: Bool { extrasStorage != nil }
    /// Whether `deferredErrors` is not empty, read without copying it.
    @inline(__always)
    var hasDeferredErrors: Bool {
        guard let e = extrasStorage else { return false }
        return !e.deferredErrors.isEmpty
    }
    /// Errors from subscript assignments, reported by the next save.
    var deferredErrors: [KuraError] {
        get { extrasStorage?.deferredErrors ?? [] }
        _modify { yield &extras.deferredErrors }
        set { if !newValue.isEmpty || extrasStorage != nil { extras.deferredErrors = newValue } }
    }
    /// Position in an ordered to-many of the target (`<relationship>_order`).
    var order: [String: Double] {
        get { extrasStorage?.order ?? [:] }
        _modify { yield &extras.order }
        set { if !newValue.isEmpty || extrasStorage != nil { extras.order = newValue } }
    }
    var savedOrder: [String: Double] {
        get { extrasStorage?.savedOrder ?? [:] }
        _modify { yield &extras.savedOrder }
        set { if !newValue.isEmpty || extrasStorage != nil { extras.savedOrder = newValue } }
    }
    /// The targets of transient relationships, by name, in order (never
    /// stored; Context+TransientRelationships.swift). Cleared when the object's
    /// values load from the store as a fault fires.
    var transientRelated: [String: [ManagedObject]] {
        get { extrasStorage?.transientRelated ?? [:] }
        _modify { yield &extras.transientRelated }
        set { if !newValue.isEmpty || extrasStorage != nil { extras.transientRelated = newValue } }
    }
    /// Set only on the probe objects of ModelKeyPath.swift: typed property
    /// getters then record their key there instead of reading a value.
    /// Every typed read looks at it (one load and a nil check when the
    /// object has no extras).
    var keyPathProbe: KeyPathProbe? {
        @inline(__always) get { extrasStorage?.keyPathProbe }
        set { if newValue != nil || extrasStorage != nil { extras.keyPathProbe = newValue } }
    }
    /// The last error a non-throwing accessor of this object met (see the
    /// failure channel above); nil once the object's values load again.
    public internal(set) var readError: KuraError? {
        get { extrasStorage?.readError }
        set { if let e = extrasStorage { e.readError = newValue } else if newValue != nil { extras.readError = newValue } }
    }
    /// `readError = nil`, without copying an error in and out of the setter
    /// (a fault's load clears it every time).
    @inline(__always)
    func clearReadError() {
        if let e = extrasStorage { e.readError = nil }
    }
    /// Empties `order` and `savedOrder` (a fault's borrowed load), without
    /// making empty dictionaries for an object that has no extras.
    @inline(__always)
    func clearOrders() {
        if let e = extrasStorage {
            e.order = [:]
            e.savedOrder = [:]
        }
    }

    /// Records an error a non-throwing accessor met: on the object and, if it
    /// has a context, as the context's pending error (the first one is kept).
    func noteReadError(_ e: KuraError) {
        readError = e
        if let c = managedObjectContext, c.pendingError == nil { c.pendingError = e }
    }

    /// Creates an object; use `ManagedObjectContext.insert` (or `init(context:)`) in app code.
    public required init(entity: EntityDescription, objectID: ManagedObjectID) {
        self.entity = entity
        self.objectID = objectID
        valueStorage = AttributeValues(entity)
    }

    deinit {
        // Leave the context's registry (it holds objects unretained); the
        // context lent without a retain.
        if let c = contextLink?.unretained { c._withUnsafeGuaranteedRef { $0.forget(self) } }
    }

    /// Creates and inserts a new object of this class's entity into `context`
    /// (Core Data's `Student(context: context)`).
    ///
    /// Failure: if the class is not the class of any entity of the model, the
    /// object is made outside any context (with an empty stand-in entity) and
    /// the `.notFound` error naming the class and the entities it could be is
    /// recorded in ``readError`` and the context's `pendingError`: the next
    /// save or fetch throws it. `context.insert(T.self)` throws it at once.
    /// The same goes for the class of an abstract entity (`.invalidArgument`).
    public convenience init(context: ManagedObjectContext) {
        let e: EntityDescription
        var failure: KuraError?
        do {
            e = try context.insertableEntity(ofClass: Self.self)
        } catch {
            failure = error
            e = EntityDescription(String(describing: Self.self), class: Self.self) {}
        }
        self.init(entity: e, objectID: context.registry.newTemporaryID(e.name))
        if let failure {
            readError = failure
            if context.pendingError == nil { context.pendingError = failure }
        } else {
            context.register(inserted: self)
        }
    }

    /// Called once when the object is inserted: set defaults here (a UUID identifier...).
    open func awakeFromInsert() {}

    /// Called after the object's values are loaded from the store.
    open func awakeFromFetch() {}

    // Lifecycle hooks (ManagedObject+Lifecycle.swift has the order within a
    // save). Overrides need not call super: these do nothing.

    /// Called by `save()` before validation on every object it will write,
    /// again if a hook changed the object (bounded passes). It may change this
    /// object and others; the changes are part of the same save. Do not save
    /// or fetch from here.
    open func willSave() {}

    /// Called after the save that wrote this object committed (for a deleted
    /// object too, with `isDeleted` true).
    open func didSave() {}

    /// Called by `delete(_:)` before the delete rules run, with the object's
    /// relationships still intact (update counters, release resources).
    open func prepareForDeletion() {}

    /// Called before and after the object's loaded values are dropped to be
    /// reloaded (`refresh`, a merge).
    open func willTurnIntoFault() {}
    open func didTurnIntoFault() {}

    /// Called after the context changed the object's values other than by a
    /// setter (Core Data's `awakeFromSnapshotEvents(_:)`), with what did it:
    /// undo or redo, `rollback()`, `refresh(_:mergeChanges:)`, a merge, a
    /// merge policy settling a conflict at save (see ``SnapshotEvents``).
    /// Recompute cached or transient state here. Called once per object per
    /// event, after every object of that event has its values back, on the
    /// context's thread or actor; do not save from here. A change made here
    /// is an ordinary change (not recorded for undo while an undo applies).
    open func awakeFromSnapshotEvents(_ events: SnapshotEvents) {}

    /// Validates one attribute's new value at save (Core Data's
    /// `validate<Key>`): called for each attribute of an inserted object that
    /// is not nil and each changed attribute of an updated one. Throw a
    /// `KuraError` (e.g. `.validation`) saying what is wrong; every failure of
    /// the save is collected into one error.
    open func validateValue(_ value: Any?, forKey key: String) throws(KuraError) {}

    /// Whole-object checks at save, after the model's rules and the per-key
    /// checks; failures are collected like the others.
    open func validateForInsert() throws(KuraError) {}
    open func validateForUpdate() throws(KuraError) {}
    open func validateForDelete() throws(KuraError) {}

    /// Whether the object was inserted and not yet saved.
    public var isInserted: Bool { isNew && !isDeleted }
    /// Whether the object has unsaved changes to saved values.
    public var isUpdated: Bool { !isInserted && !isDeleted && hasChangedValues }
    /// Whether the object has unsaved changes of any kind.
    public var hasChanges: Bool { isInserted || isDeleted || hasChangedValues }

    var hasChangedValues: Bool {
        guard let saved = savedValues else { return true }
        return saved != values || savedToOne != toOne || savedOrder != order
    }

    /// The attribute and to-one names whose current values differ from `values`
    /// and `toOne` (an object's state before or after a reload).
    func differingKeys(values other: AttributeValues, toOne otherToOne: ToOneKeys) -> Set<String> {
        var keys = Set<String>()
        for (i, a) in entity.attributes.enumerated() where values[ordinal: i] != other[ordinal: i] { keys.insert(a.name) }
        for r in entity.relationships where !r.isToMany && toOne[r.name] != otherToOne[r.name] { keys.insert(r.name) }
        return keys
    }

    /// Attribute and to-one values that differ from the saved ones, by name
    /// (persistent properties only, as in Core Data: transient ones are left out).
    public func changedValues() -> [String: Any?] {
        fireFault()
        var out: [String: Any?] = [:]
        for (i, a) in entity.attributes.enumerated() where !a.isTransient && savedValues?[ordinal: i] != values[ordinal: i] {
            // A value that does not decode goes to the failure channel (readError).
            do { out[a.name] = try a.swiftValue(values[ordinal: i] ?? .null, of: objectID) } catch {
                noteReadError(error)
                out[a.name] = .some(nil)
            }
        }
        for r in entity.relationships where !r.isToMany && savedToOne[r.name] != toOne[r.name] {
            out[r.name] = toOne[r.name].map { $0.uriRepresentation }
        }
        return out
    }

    public var description: String {
        "<\(entity.name) \(objectID.uriRepresentation)\(isFault ? " fault" : "")>"
    }

    func fireFault() {
        guard isFault else { return }
        guard let ctx = managedObjectContext else {
            noteReadError(KuraError(.misuse, "\(self) is a fault outside any context (its context was reset or released): its values cannot load"))
            return
        }
        ctx.fulfill(self)
    }

    // MARK: Access by name

    /// The value of an attribute (a Swift value: String, Int16, Date, ...), the
    /// object of a to-one relationship, or the objects of a to-many, by name.
    ///
    /// - Throws: `.notFound` for an unknown key (naming entity and key);
    ///   `.corrupt`/`.io` if loading from the store fails.
    public func value(forKey key: String) throws(KuraError) -> Any? {
        if let i = entity.ordinal(ofAttribute: key) {
            try loadIfFault()
            return try swiftValue(of: entity.attributes[i], ordinal: i)
        }
        if let r = entity.relationshipsByName[key] {
            let ctx = try context()
            return r.isToMany ? ObjectList(try ctx.relatedObjects(self, r)) : try ctx.relatedObject(self, r)
        }
        if let f = entity.fetchedPropertiesByName[key] { return try fetchedValue(f) }
        throw unknownKey(key)
    }

    /// Sets an attribute (a Swift value of its type, or nil), a to-one
    /// relationship (an object or nil), or a to-many (an array of objects). The
    /// inverse relationship is updated on the other side.
    ///
    /// - Throws: `.notFound` for an unknown key; `.typeMismatch` naming entity,
    ///   attribute and the rejected value; `.invalidArgument` for an object of
    ///   the wrong entity or another context.
    public func setValue(_ value: Any?, forKey key: String) throws(KuraError) {
        if let i = entity.ordinal(ofAttribute: key) {
            try loadIfFault()
            let stored = try entity.attributes[i].storedValue(value, entity: entity.name)
            try context().willChangeAttribute(self, key: key)
            values[ordinal: i] = stored
            return
        }
        if let r = entity.relationshipsByName[key] {
            let ctx = try context()
            if r.isToMany {
                guard let list = value as? [ManagedObject] ?? (value as? ObjectList)?.objects ?? (value == nil ? [] : nil) else {
                    throw KuraError(.typeMismatch, "relationship \"\(key)\" of entity \"\(entity.name)\" is to-many; set an array of objects")
                }
                try ctx.setRelated(self, r, list)
            } else {
                guard value == nil || value is ManagedObject else {
                    // `value!` cannot fail: the guard just saw it is not nil.
                    throw KuraError(.typeMismatch, "relationship \"\(key)\" of entity \"\(entity.name)\" is to-one; set an object or nil, not \(type(of: value!))")
                }
                try ctx.setRelated(self, r, value as? ManagedObject)
            }
            return
        }
        if entity.fetchedPropertiesByName[key] != nil {
            throw KuraError(.invalidArgument, "\"\(key)\" of entity \"\(entity.name)\" is a fetched property: it is read-only")
        }
        throw unknownKey(key)
    }

    /// Reads or writes a value by name. A read that `value(forKey:)` would
    /// refuse (unknown key, failed load, no context) gives nil and goes to the
    /// failure channel (``readError``; the next save or fetch throws it). A
    /// write that `setValue(_:forKey:)` would reject is not applied; the error
    /// is reported by the next `save()`.
    public subscript(key: String) -> Any? {
        get {
            do { return try value(forKey: key) } catch {
                noteReadError(error)
                return nil
            }
        }
        set {
            do { try setValue(newValue, forKey: key) } catch { deferredErrors.append(error) }
        }
    }

    /// The relationship a typed property's `key` names, when it is one of
    /// the kind the property is (`toMany`) and no attribute has that name
    /// (`value(forKey:)` looks at attributes first); nil sends the property
    /// the subscript's way, which reports what is wrong. Found by index,
    /// not through `relationshipsByName` (a hash of the key).
    @inline(__always)
    private func typedRelationship(_ key: String, toMany: Bool) -> RelationshipDescription? {
        guard entity.ordinal(ofAttribute: key) == nil, let i = entity.relationshipIndex(key), entity.relationships[i].isToMany == toMany else { return nil }
        return entity.relationships[i]
    }

    /// `self[key]`'s objects for a `@ToMany` property: the same outcome (a
    /// read that fails gives no objects and records its error, as the
    /// subscript does), without boxing the list in an `Any?` and casting it
    /// back when `key` names a to-many relationship.
    /// On a key-path probe (ModelKeyPath.swift) it records `key` and gives
    /// no objects.
    @usableFromInline
    func toManyMembers(_ key: String) -> [ManagedObject] {
        if let probe = keyPathProbe {
            probe.keys.append(key)
            return []
        }
        guard let r = typedRelationship(key, toMany: true) else { return (self[key] as? ObjectList)?.objects ?? [] }
        do { return try context().relatedObjects(self, r) } catch {
            noteReadError(error)
            return []
        }
    }

    /// `self[key]`'s object for a `@ToOne` property: the same outcome (a
    /// read that fails gives nil and records its error, as the subscript
    /// does), without boxing the target in an `Any?` when `key` names a
    /// to-one relationship.
    func toOneTarget(_ key: String) -> ManagedObject? {
        guard let r = typedRelationship(key, toMany: false) else { return self[key] as? ManagedObject }
        do { return try context().relatedObject(self, r) } catch {
            noteReadError(error)
            return nil
        }
    }

    /// `toOneTarget(key)` for a `@ToOne` property whose target class is
    /// `target`; on a key-path probe (ModelKeyPath.swift) it records `key`
    /// and gives a probe object of `target`, whose reads record the keys
    /// after it.
    @usableFromInline
    func toOneTarget(_ key: String, probing target: ManagedObject.Type) -> ManagedObject? {
        if let probe = keyPathProbe {
            probe.keys.append(key)
            return probe.object(target)
        }
        return toOneTarget(key)
    }

    /// `self[key] = target` for a `@ToOne` property: the same outcome
    /// (a rejected write is not applied and is reported by the next save),
    /// without boxing the target in an `Any?` when `key` names a to-one
    /// relationship.
    @usableFromInline
    func setToOneTarget(_ key: String, _ target: ManagedObject?) {
        guard let r = typedRelationship(key, toMany: false) else {
            self[key] = target
            return
        }
        do { try context().setRelated(self, r, target) } catch { deferredErrors.append(error) }
    }

    /// Adds `object` to a to-many relationship (at the end, if ordered).
    public func add(_ object: ManagedObject, to key: String) throws(KuraError) {
        let r = try toManyRelationship(key)
        try context().addRelated(self, r, object)
    }

    /// Removes `object` from a to-many relationship.
    public func remove(_ object: ManagedObject, from key: String) throws(KuraError) {
        let r = try toManyRelationship(key)
        try context().removeRelated(self, r, object)
    }

    func toManyRelationship(_ key: String) throws(KuraError) -> RelationshipDescription {
        guard let r = entity.relationshipsByName[key], r.isToMany else {
            throw KuraError(.notFound, "entity \"\(entity.name)\" has no to-many relationship \"\(key)\"")
        }
        return r
    }

    func context() throws(KuraError) -> ManagedObjectContext {
        guard let c = managedObjectContext else {
            throw KuraError(.misuse, "\(self) is not in a context (it was deleted and saved, or its context was reset or released)")
        }
        return c
    }

    func loadIfFault() throws(KuraError) {
        guard isFault else { return }
        try context().load(self)
    }

    func unknownKey(_ key: String) -> KuraError {
        KuraError(.notFound, "entity \"\(entity.name)\" has no attribute or relationship \"\(key)\"")
    }

    // MARK: Typed access (property wrappers)

    /// Whether this is a probe object of ModelKeyPath.swift.
    @usableFromInline
    var isKeyPathProbe: Bool { keyPathProbe != nil }

    /// `typedAttribute`, except on a probe object of ModelKeyPath.swift,
    /// which records the key and reads nil.
    @usableFromInline
    func typedAttributeOrProbe(_ key: String) -> Any? {
        if let probe = keyPathProbe {
            probe.keys.append(key)
            return nil
        }
        return typedAttribute(key)
    }

    /// An attribute's Swift value for a typed property; failures go to the
    /// failure channel and read nil (the property's zero value).
    func typedAttribute(_ key: String) -> Any? {
        guard let i = attributeOrdinal(key) else { return nil }
        if isFault {
            fireFault()
            if isFault { return nil }
        }
        do { return try swiftValue(of: entity.attributes[i], ordinal: i) } catch {
            noteReadError(error)
            return nil
        }
    }

    /// The ordinal of the attribute a typed property names; an unknown name
    /// goes to the failure channel (the model checks bindings, so only a
    /// class used with another entity's model gets here).
    @inline(__always)
    func attributeOrdinal(_ key: String) -> Int? {
        if let i = entity.ordinal(ofAttribute: key) { return i }
        noteReadError(KuraError(.notFound, "\(type(of: self)) reads @Managed(\"\(key)\"), but entity \"\(entity.name)\" has no attribute \"\(key)\" (attributes: \(entity.attributes.map(\.name).joined(separator: ", ")))"))
        return nil
    }

    /// A typed property's value read straight from its stored form, without
    /// going through `Any`, for the common scalar types (nil: not one of
    /// them, or a value the general path must judge: null, a mismatch, a
    /// composite or transformable attribute). Loads a fault first.
    ///
    /// Inlinable, so that a typed property's getter (itself inlined into the
    /// subclass's module) specializes it: the comparisons of `T` fold away
    /// and one non-generic call stays (`directStored`), as for the setter
    /// (`setDirectAttribute`).
    @inlinable
    @inline(__always)
    func directAttribute<T>(_ key: String, as _: T.Type) -> T? {
        guard let (type, v) = directStored(key) else { return nil }
        // Each branch casts a value to the type it was just compared with.
        switch (type, v) {
        case (.string, .text(let s)):
            if T.self == String.self { return unsafeBitCast(s, to: T.self) }
            if T.self == String?.self { return unsafeBitCast(String?.some(s), to: T.self) }
        case (.int64, .integer(let x)):
            if T.self == Int64.self { return unsafeBitCast(x, to: T.self) }
            if T.self == Int.self { return unsafeBitCast(Int(x), to: T.self) }
            if T.self == Int64?.self { return unsafeBitCast(Int64?.some(x), to: T.self) }
        case (.int32, .integer(let x)):
            if T.self == Int32.self { return unsafeBitCast(Int32(truncatingIfNeeded: x), to: T.self) }
            if T.self == Int.self { return unsafeBitCast(Int(Int32(truncatingIfNeeded: x)), to: T.self) }
        case (.int16, .integer(let x)):
            if T.self == Int16.self { return unsafeBitCast(Int16(truncatingIfNeeded: x), to: T.self) }
            if T.self == Int.self { return unsafeBitCast(Int(Int16(truncatingIfNeeded: x)), to: T.self) }
        case (.double, .double(let x)):
            if T.self == Double.self { return unsafeBitCast(x, to: T.self) }
            if T.self == Double?.self { return unsafeBitCast(Double?.some(x), to: T.self) }
        case (.bool, .bool(let x)):
            if T.self == Bool.self { return unsafeBitCast(x, to: T.self) }
        case (.date, .double(let x)):
            if T.self == Date.self { return unsafeBitCast(Date(timeIntervalSinceReferenceDate: x), to: T.self) }
        default:
            break
        }
        return nil
    }

    /// `directAttribute`'s non-generic part: the storage type and stored
    /// value of the attribute `key`, after loading a fault; nil if the key
    /// is unknown, the attribute has no plain storage type (composite), the
    /// value was never set, or the fault's load failed.
    @usableFromInline
    func directStored(_ key: String) -> (AttributeType, Value)? {
        guard let i = entity.ordinal(ofAttribute: key) else { return nil }
        if isFault {
            fireFault()
            if isFault { return nil }
        }
        guard let type = entity.attributeStorageTypes[i], let v = values[ordinal: i] else { return nil }
        return (type, v)
    }

    /// Sets an attribute from a typed property without going through `Any`
    /// for the common scalar types; false if the general path must do it
    /// (another type, nil, a fault whose load failed, a composite or
    /// transformable attribute, no context).
    ///
    /// Inlinable, so that a typed property's setter (itself inlined into the
    /// subclass's module) specializes it: the comparisons of `T` fold away
    /// and one non-generic call stays (`setDirectStored`), instead of a
    /// generic call that compares type metadata and copies the value through
    /// its witness table on every write.
    @inlinable
    @inline(__always)
    func setDirectAttribute<T>(_ key: String, _ newValue: T) -> Bool {
        // Each branch casts a value to the type it was just compared with.
        if T.self == String.self { return setDirectStored(key, .text(unsafeBitCast(newValue, to: String.self)), .string) }
        if T.self == Int64.self { return setDirectStored(key, .integer(unsafeBitCast(newValue, to: Int64.self)), .int64) }
        if T.self == Int32.self { return setDirectStored(key, .integer(Int64(unsafeBitCast(newValue, to: Int32.self))), .int32) }
        if T.self == Int16.self { return setDirectStored(key, .integer(Int64(unsafeBitCast(newValue, to: Int16.self))), .int16) }
        if T.self == Double.self { return setDirectStored(key, .double(unsafeBitCast(newValue, to: Double.self)), .double) }
        if T.self == Bool.self { return setDirectStored(key, .bool(unsafeBitCast(newValue, to: Bool.self)), .bool) }
        if T.self == Date.self { return setDirectStored(key, .double(unsafeBitCast(newValue, to: Date.self).timeIntervalSinceReferenceDate), .date) }
        return false
    }

    /// `setDirectAttribute`'s non-generic part: stores `stored` (the stored
    /// form of a Swift value of the type `type` takes) into the attribute
    /// `key` if its storage type is `type`; false (nothing changed) if the
    /// key is unknown, the attribute is of another type (or composite), the
    /// object has no context or is a fault whose load failed.
    /// `stored` is taken (consumed): the slot gets it without a copy.
    @usableFromInline
    func setDirectStored(_ key: String, _ stored: consuming Value, _ type: AttributeType) -> Bool {
        guard let i = entity.ordinal(ofAttribute: key), entity.attributeStorageTypes[i] == type else { return false }
        // An object inserted in the pending batch, without undo recording,
        // has nothing to note (`willChangeAttribute`'s first test), and one
        // watched by no pending index or will-save pass (its flags) needs
        // nothing of `values`' accessors: its slot is written in place,
        // with plain loads of the context's state before (no call, no
        // retain of the context).
        if isNew, willSaveWatch == 0, !indexWatch, !isFault, let c = contextLink?.unretained,
           c._withUnsafeGuaranteedRef({ $0.insertedNoteIsCurrent(self) }) {
            valueStorage[ordinal: i] = stored
            return true
        }
        guard let ctx = managedObjectContext else { return false }
        if isFault {
            fireFault()
            if isFault { return false }
        }
        ctx.willChangeAttribute(self, key: key)
        values[ordinal: i] = stored
        return true
    }

    /// The Swift value of the loaded attribute `a` at `ordinal`.
    ///
    /// - Throws: `.typeMismatch` if the stored value is not of the attribute's
    ///   type (a malformed UUID or URL string written by other software).
    func swiftValue(of a: AttributeDescription, ordinal i: Int) throws(KuraError) -> Any? {
        try a.swiftValue(values[ordinal: i] ?? .null, of: objectID)
    }
}

/// The state of an object that few objects ever have, in a box of its own
/// (`ManagedObject.extrasStorage`), so that every other object allocates,
/// initializes and destroys one word for it: the state kept for
/// `willSave()`, errors deferred to the next save, positions in ordered
/// to-many relationships, transient relationship targets, the key-path
/// probe, the last read error.
///
/// Thread rules: the object's (one context's thread). The fields but
/// `transientRelated` are `@exclusivity(unchecked)` for the reason given in
/// ManagedObject ("The stored state below"): their edits call no other code
/// and release nothing that runs app code; `transientRelated` holds objects.
final class ObjectExtras {
    @exclusivity(unchecked) var willSaveKept: WillSaveState?
    @exclusivity(unchecked) var deferredErrors: [KuraError] = []
    @exclusivity(unchecked) var order = [String: Double]()
    @exclusivity(unchecked) var savedOrder = [String: Double]()
    var transientRelated = [String: [ManagedObject]]()
    @exclusivity(unchecked) var keyPathProbe: KeyPathProbe?
    @exclusivity(unchecked) var readError: KuraError?
}

/// The objects of a to-many relationship, as returned by `value(forKey:)`.
public struct ObjectList: RandomAccessCollection {
    public let objects: [ManagedObject]
    init(_ objects: [ManagedObject]) { self.objects = objects }
    public var startIndex: Int { 0 }
    public var endIndex: Int { objects.count }
    public subscript(i: Int) -> ManagedObject { objects[i] }
}


extension ManagedObject: Hashable {
    /// Objects are equal when they are the same instance (one per ID per context).
    public static func == (a: ManagedObject, b: ManagedObject) -> Bool { a === b }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}
