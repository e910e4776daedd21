// ManagedObject+Lifecycle: the hooks a subclass overrides (Core Data's
// willSave, didSave, prepareForDeletion, willTurnIntoFault/didTurnIntoFault,
// validateForInsert/Update/Delete, per-key validation) and the read-only views
// of an object's committed state.
//
// Order within `save()`:
//   1. `willSave()` on every object the save will write (inserted, updated,
//      deleted). A hook may change objects; objects it changed (or newly
//      dirtied) get `willSave()` again, in further passes, at most
//      `ManagedObjectContext.maximumWillSavePasses`; a save whose hooks still
//      change objects after that is refused (`.validation`, naming them);
//   2. the objects-did-change batch is posted;
//   3. validation: for each saved object in turn, the model's rules, then
//      `validateValue(_:forKey:)` for each attribute of an inserted object
//      and each changed attribute of an updated one, then
//      `validateForInsert()`/`validateForUpdate()`; then deny rules and
//      uniqueness; then `validateForDelete()` on each deleted object. Every
//      failure is collected into one `.validation` error (nothing is
//      written), listed as: the model's rules, deny rules, uniqueness, the
//      hooks;
//   4. the write transaction; 5. after the commit, `didSave()` on every
//      object written (deleted ones too, with `isDeleted` true).
// `delete(_:)` calls `prepareForDeletion()` on each object it deletes (the
// cascade's too) before the delete rules touch its relationships.
//
// `awakeFromSnapshotEvents(_:)` follows the paths that give an object values
// no setter gave it: undo/redo (ContextUndoManager.swift), `rollback()` and
// `refresh(_:mergeChanges:)` (ManagedObjectContext.swift), merges of other
// contexts' saves (Context+Merge.swift, `.refresh`, plus `.mergePolicy` when
// the object had changes the policy settled) and a save whose merge policy
// settled a conflict (Context+Save.swift).

import Foundation

/// What changed an object's values, for ``ManagedObject/awakeFromSnapshotEvents(_:)``
/// (Core Data's `NSSnapshotEventType`).
public struct SnapshotEvents: OptionSet, Sendable, Hashable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }

    /// An undo or redo put the object back into the context (the undo of a
    /// delete, the redo of an undone insert).
    public static let undoDeletion = SnapshotEvents(rawValue: 1 << 2)
    /// An undo or redo took the object out of the context (the undo of an
    /// insert, the redo of an undone delete).
    public static let undoInsertion = SnapshotEvents(rawValue: 1 << 1)
    /// An undo or redo gave attributes or relationships their previous values.
    public static let undoUpdate = SnapshotEvents(rawValue: 1 << 3)
    /// `rollback()` gave the object its saved values back.
    public static let rollback = SnapshotEvents(rawValue: 1 << 4)
    /// `refresh(_:mergeChanges:)`, or a merge of another context's save,
    /// reloaded the object's values.
    public static let refresh = SnapshotEvents(rawValue: 1 << 5)
    /// A merge policy settled a conflict on the object (at a merge or a save).
    public static let mergePolicy = SnapshotEvents(rawValue: 1 << 6)
}

extension ManagedObject {
    /// The values the object had when last fetched or saved, for `keys`
    /// (attributes and to-one relationships; all of them if nil). Empty for an
    /// object never saved. To-ones are given as their objects in this
    /// object's context (or their IDs if it has none). Core Data's
    /// `committedValues(forKeys:)`.
    ///
    /// - Throws: `.notFound` for a key the entity does not have; load errors
    ///   of a fault.
    public func committedValues(forKeys keys: [String]? = nil) throws(KuraError) -> [String: Any?] {
        try loadIfFault()
        guard let saved = savedValues else { return [:] }
        let wanted = keys ?? (entity.attributes.map(\.name) + entity.relationships.filter { !$0.isToMany }.map(\.name))
        var out: [String: Any?] = [:]
        for key in wanted {
            if let a = entity.attributesByName[key] {
                let v: Value = entity.ordinal(ofAttribute: key).flatMap { saved[ordinal: $0] } ?? .null
                let swift: Any? = try a.swiftValue(v, of: objectID)
                out[key] = .some(swift)
            } else if let r = entity.relationshipsByName[key], !r.isToMany {
                guard let id = savedToOne[key] else { out[key] = .some(nil); continue }
                if let ctx = managedObjectContext {
                    let target: Any? = try ctx.object(with: id)
                    out[key] = .some(target)
                } else {
                    out[key] = .some(id)
                }
            } else {
                throw KuraError(.notFound, "entity \"\(entity.name)\" has no attribute or to-one relationship \"\(key)\"")
            }
        }
        return out
    }

    /// Whether the object's values differ from the ones last fetched or saved
    /// (Core Data's `hasPersistentChangedValues`): changes of transient
    /// attributes do not count.
    public var hasPersistentChangedValues: Bool {
        guard !isFault, hasChangedValues else { return false }
        guard let saved = savedValues else { return true }
        return savedToOne != toOne || savedOrder != order
            || entity.attributes.indices.contains { !entity.attributes[$0].isTransient && saved[ordinal: $0] != values[ordinal: $0] }
    }
}

/// The state of an object's `values`, `toOne` and `isDeleted` when `save`
/// called its `willSave()` (`ManagedObject.willSaveKept`).
final class WillSaveState {
    let values: AttributeValues
    let toOne: ToOneKeys
    let isDeleted: Bool
    init(values: AttributeValues, toOne: ToOneKeys, isDeleted: Bool) {
        self.values = values
        self.toOne = toOne
        self.isDeleted = isDeleted
    }
}

extension ManagedObject {
    /// Called before `values`, `toOne` or `isDeleted` change on an object
    /// ever watched (`willSaveWatch`): if the object is watched by its
    /// context's current first pass of `willSave()` calls and has no kept
    /// state yet, keeps the state from before this change, which is the
    /// state its `willSave()` call saw (its watch was set and its kept state
    /// dropped just before the call). The kept values hold their buffer, so
    /// the change that follows copies it instead of writing into it.
    ///
    /// An object without a context (it left during the pass) keeps its
    /// state all the same: keeping one that is not needed is harmless (it
    /// is dropped before the object's next call), missing one is not.
    @inline(never)
    func keepWillSaveState() {
        guard willSaveKept == nil else { return }
        let c = contextLink?.context
        if let c, c.willSaveEpoch != willSaveWatch { return }
        willSaveKept = WillSaveState(values: values, toOne: toOne, isDeleted: isDeleted)
        c?.willSaveKeptObjects.append(self)
    }
}

extension ManagedObjectContext {
    /// How many times `save()` calls `willSave()` hooks that keep changing
    /// objects before it refuses the save.
    public static let maximumWillSavePasses = 10

    /// Step 1 of a save: `willSave()` until no hook changes anything.
    ///
    /// - Throws: `.validation` naming the objects still changing after the
    ///   last pass.
    func runWillSave() throws(KuraError) {
        /// Each object's state when its `willSave()` was last called: an object
        /// changed since (by its own hook or another's) is due again.
        var seen: [ObjectIdentifier: (AttributeValues, ToOneKeys, Bool)] = [:]
        func changedSinceLastCall(_ o: ManagedObject) -> Bool {
            guard let s = seen[ObjectIdentifier(o)] else { return true }
            return s.0 != o.values || s.1 != o.toOne || s.2 != o.isDeleted
        }
        func pending() -> [ManagedObject] {
            // Objects whose to-many relationships changed are saved too (as
            // in Core Data), though only the other side's rows change.
            let relinked = notices.toManyTouched.values.filter { $0.managedObjectContext === self && !$0.isDeleted && !$0.isNew && !$0.hasChangedValues }
            return Self.joined(liveInserted, updatedObjects, deletedObjects, relinked)
        }
        // The first pass calls every pending object. Its objects are
        // watched (`willSaveWatch`): the first change of one after its call
        // keeps its state from before (`keepWillSaveState`), so the common
        // case (no hook changed anything) copies no state at all, and is
        // settled by walking the pending lists in place (`samePending`),
        // without a dictionary and without making the pending list again.
        let first = pending()
        // No pending object's class has a `willSave()` of its own
        // (HookOverrides.swift): no hook would run but ManagedObject's,
        // which changes nothing, so the first pass would find every object
        // as it was and end the passes. Nothing is watched or called.
        if !first.contains(where: { hooks(of: $0).contains(.willSave) }) { return }
        let epoch = nextWillSaveEpoch()
        defer {
            // Stop watching (the epoch moves on) and drop the kept states.
            willSaveEpoch = 0
            let kept = willSaveKeptObjects
            willSaveKeptObjects = []
            for o in kept { o.willSaveKept = nil }
        }
        for o in first {
            o.willSaveKept = nil
            o.willSaveWatch = epoch
            o.willSave()
        }
        if samePending(first) { return }
        // The state each object had at its call: kept if it changed since, else its current one.
        for o in first {
            if let k = o.willSaveKept {
                seen[ObjectIdentifier(o)] = (k.values, k.toOne, k.isDeleted)
            } else {
                seen[ObjectIdentifier(o)] = (o.values, o.toOne, o.isDeleted)
            }
        }
        // Later passes compare with `seen`: no watching.
        willSaveEpoch = 0
        for _ in 1..<Self.maximumWillSavePasses {
            let due = pending().filter(changedSinceLastCall)
            if due.isEmpty { return }
            for o in due {
                seen[ObjectIdentifier(o)] = (o.values, o.toOne, o.isDeleted)
                o.willSave()
            }
        }
        let still = pending().filter(changedSinceLastCall)
        if still.isEmpty { return }
        throw KuraError(.validation, "save refused, nothing was written: willSave() hooks still changed \(still.prefix(5).map(\.objectID.description).joined(separator: ", ")) after \(Self.maximumWillSavePasses) passes")
    }

    /// A new `willSaveEpoch` for a first pass of `willSave()` calls, made
    /// current (never 0, which means "not watching").
    private func nextWillSaveEpoch() -> UInt16 {
        lastWillSaveEpoch = lastWillSaveEpoch == .max ? 1 : lastWillSaveEpoch + 1
        willSaveEpoch = lastWillSaveEpoch
        return lastWillSaveEpoch
    }

    /// Whether the pending objects are still `first`, in order (what
    /// `runWillSave`'s `pending()` would give), each in the state it had
    /// when its `willSave()` was called: unchanged since (no kept state),
    /// or changed back to it.
    private func samePending(_ first: [ManagedObject]) -> Bool {
        var k = 0
        func next(_ o: ManagedObject) -> Bool {
            guard k < first.count, first[k] === o else { return false }
            k += 1
            guard let s = o.willSaveKept else { return true }
            return s.isDeleted == o.isDeleted && s.values == o.values && s.toOne == o.toOne
        }
        for o in inserted where !o.isDeleted { guard next(o) else { return false } }
        for o in touchedOrder where !o.isDeleted && o.hasChangedValues { guard next(o) else { return false } }
        for o in deleted where !o.isNew { guard next(o) else { return false } }
        for o in notices.toManyTouched.values where o.managedObjectContext === self && !o.isDeleted && !o.isNew && !o.hasChangedValues {
            guard next(o) else { return false }
        }
        return k == first.count
    }

    /// Step 3's hook part for one saved (inserted or updated) object: its
    /// per-key and per-object validation methods, each failure a line
    /// appended to `problems`.
    ///
    /// A method the object's class does not override is not called
    /// (HookOverrides.swift: it would run ManagedObject's own, which does
    /// nothing). Without a `validateValue(_:forKey:)` of its own, a value
    /// is still converted to its Swift value when that conversion can fail
    /// (a value not of the common plain types: transformable, composite,
    /// one of another type than its attribute's), whose failure is a
    /// problem as it was when the call's argument was made.
    @inline(__always)
    func hookProblems(of o: ManagedObject, into problems: inout [String]) {
        let hooks = self.hooks(of: o)
        let isNew = o.isNew
        if !hooks.contains(.validateValue) {
            // No call: only the values whose conversion for the call could
            // fail are looked at (read in place: a plain value is not copied).
            let types = o.entity.attributeStorageTypes
            for i in types.indices where !o.values.holdsPlainValue(ordinal: i, of: types[i]) {
                convertedValueProblem(o, ordinal: i, into: &problems)
            }
        } else {
            validateValueProblems(o, into: &problems)
        }
        guard hooks.contains(isNew ? .validateForInsert : .validateForUpdate) else { return }
        do {
            if isNew { try o.validateForInsert() } else { try o.validateForUpdate() }
        } catch {
            problems.append("\(o.objectID): \(error.message)")
        }
    }

    /// For a class without `validateValue(_:forKey:)` of its own: the
    /// conversion the call's argument would have needed for the value at
    /// `ordinal` (one that is not nil, null or plain), whose failure is a
    /// problem as it was when the call was made. Values the call would not
    /// have been made for (an inserted object's null, an updated object's
    /// unchanged value) are left alone, as before.
    private func convertedValueProblem(_ o: ManagedObject, ordinal i: Int, into problems: inout [String]) {
        let v = o.values[ordinal: i] ?? .null
        if o.isNew ? v.isNull : o.savedValues?[ordinal: i] == v { return }
        let a = o.entity.attributes[i]
        if let t = o.entity.attributeStorageTypes[i], t != .transformable, t.swiftValue(v) != nil { return }
        do { _ = try a.swiftValue(v, of: o.objectID) } catch {
            problems.append("\(o.objectID): attribute \"\(a.name)\": \(error.message)")
        }
    }

    /// `validateValue(_:forKey:)` for each attribute of an inserted object
    /// that is not nil and each changed attribute of an updated one.
    private func validateValueProblems(_ o: ManagedObject, into problems: inout [String]) {
        let isNew = o.isNew
        let attributes = o.entity.attributes
        let names = o.entity.attributeNames
        let types = o.entity.attributeStorageTypes
        for i in attributes.indices {
            let v = o.values[ordinal: i] ?? .null
            if isNew ? v.isNull : o.savedValues?[ordinal: i] == v { continue }
            do {
                // The common plain types are passed as their Swift values
                // directly (the values `AttributeType.swiftValue` gives
                // them): the argument's type is then known where it is
                // made and destroyed, instead of an `Any?` made by a call
                // and destroyed through its type's witnesses. Other plain
                // types convert by their type alone (no copy of the
                // description); composite, transformable, null and
                // mismatched values take the attribute's own way.
                switch (types[i], v) {
                case (.string?, .text(let s)): try o.validateValue(s, forKey: names[i])
                case (.int64?, .integer(let x)): try o.validateValue(x, forKey: names[i])
                case (.int32?, .integer(let x)): try o.validateValue(Int32(truncatingIfNeeded: x), forKey: names[i])
                case (.int16?, .integer(let x)): try o.validateValue(Int16(truncatingIfNeeded: x), forKey: names[i])
                case (.double?, .double(let x)): try o.validateValue(x, forKey: names[i])
                case (.bool?, .bool(let x)): try o.validateValue(x, forKey: names[i])
                case (.date?, .double(let x)): try o.validateValue(Date(timeIntervalSinceReferenceDate: x), forKey: names[i])
                default:
                    let swift: Any?
                    if let t = types[i], t != .transformable, let s = t.swiftValue(v) { swift = s } else { swift = try attributes[i].swiftValue(v, of: o.objectID) }
                    try o.validateValue(swift, forKey: names[i])
                }
            } catch {
                problems.append("\(o.objectID): attribute \"\(names[i])\": \(error.message)")
            }
        }
    }

    /// Step 3's hook part for the deleted objects (`validateForDelete`).
    func deleteHookProblems(_ deleted: [ManagedObject], into problems: inout [String]) {
        for o in deleted where hooks(of: o).contains(.validateForDelete) {
            do { try o.validateForDelete() } catch { problems.append("\(o.objectID): \(error.message)") }
        }
    }
}
