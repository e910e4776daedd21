// Context+Conflicts: optimistic locking (Core Data's way) and merge policies.
//
// Every entity row carries a version in its last column, `_version` (Core
// Data's Z_OPT): 1 when inserted, +1 by every save that writes the row; rows
// written before the column existed read 0. An object remembers the version
// it was read (or last saved) at. Inside the save's write transaction — the
// engine admits one writer at a time across threads and processes, and a
// writer sees every commit before it — `save` reads the current row of each
// object it updates or deletes and compares versions. A different version, or
// no row at all (deleted elsewhere), is a conflict, resolved by the context's
// `mergePolicy`. Because the check and the write happen in one transaction,
// no other commit can slip in between: this holds across contexts and across
// processes.
//
// Per property, "changed here" means the context's value differs from the
// value it read; "changed in the store" means the stored value differs from
// the value the context read. Properties are attributes and to-one
// relationships (with their order column). To-many relationships kept in join
// tables are sets of pairs and merge without conflict (adding or removing a
// pair twice is the same as once).
//
// Engine-level writers (`Database.write`, the CLI) do not bump versions: the
// object layer detects only what other object-layer saves did.

/// How `ManagedObjectContext.save()` resolves a conflict: an object it would
/// write was changed (or deleted) in the store by another context or process
/// since this context read it. Core Data's merge policies, under Kura names.
///
/// For an object **deleted in the store** (another context saved its delete):
/// `.error`, `.mergeByPropertyObjectTrump` and `.overwrite` refuse the save
/// (the context's values could only win by re-creating an object whose
/// relationships were already cut, so the conflict is reported instead of
/// losing either side); `.mergeByPropertyStoreTrump` and `.rollback` let the
/// store win: the object's changes are dropped and it leaves the context as a
/// deleted object does. An object this context deletes that was changed in the
/// store is deleted by every policy but `.error` (which refuses) and
/// `.rollback` (which keeps it, with the store's values). Deleting an object
/// that is already gone from the store is not a conflict.
public enum MergePolicy: String, Sendable, CaseIterable {
    /// Refuse the save with `KuraError.mergeConflict` listing every conflict;
    /// nothing is written and the context keeps its changes (the default,
    /// Core Data's `NSErrorMergePolicy`). Resolve by `refresh(_:mergeChanges:)`
    /// or another policy, then save again.
    case error
    /// Per property: a property changed in the store takes the store's value;
    /// a property changed only here is written (`NSMergeByPropertyStoreTrumpMergePolicy`).
    case mergeByPropertyStoreTrump
    /// Per property: a property changed here is written; every other property
    /// takes the store's newer value (`NSMergeByPropertyObjectTrumpMergePolicy`).
    case mergeByPropertyObjectTrump
    /// The whole object is written as this context has it, every property
    /// (`NSOverwriteMergePolicy`).
    case overwrite
    /// This context's changes to a conflicting object are discarded; it takes
    /// the store's values (`NSRollbackMergePolicy`).
    case rollback
}

/// One object whose save met a conflict (Core Data's `NSMergeConflict`).
public struct MergeConflict: Sendable, CustomStringConvertible {
    /// The object.
    public let objectID: ManagedObjectID
    /// Its entity's name.
    public let entityName: String
    /// Whether the object's row was deleted in the store.
    public let deletedInStore: Bool
    /// Whether this context was deleting the object.
    public let deletedHere: Bool
    /// The properties changed in the store since this context read the object
    /// (attributes and to-one relationships, in model order).
    public let properties: [String]
    /// This context's values of those properties (stored form; a to-one as
    /// the target's row ID).
    public let contextValues: [String: Value]
    /// The store's values of those properties.
    public let storeValues: [String: Value]
    /// The version this context read, and the store's (nil if deleted).
    public let contextVersion: Int64
    public let storeVersion: Int64?

    public var description: String {
        if deletedInStore { return "\(objectID): deleted in the store since this context read it" + (deletedHere ? "" : "; this context changed it") }
        let changes = properties.map { "\($0): here \(contextValues[$0] ?? .null), store \(storeValues[$0] ?? .null)" }
        return "\(objectID): changed in the store since this context read it (version \(contextVersion) -> \(storeVersion ?? 0))"
            + (deletedHere ? "; this context deletes it" : "") + (changes.isEmpty ? "" : ": " + changes.joined(separator: "; "))
    }
}

extension KuraError.Code {
    /// `save` met objects changed or deleted in the store since the context
    /// read them, and its merge policy refused (`.error`, or a deletion the
    /// policy cannot resolve). The message lists each object, property, this
    /// context's value and the store's; `ManagedObjectContext.lastMergeConflicts`
    /// holds them as values. Nothing was written; the context keeps its changes.
    public static let mergeConflict = KuraError.Code(rawValue: "mergeConflict")
}

extension KuraError {
    /// `catch KuraError.mergeConflict` (see `KuraError.Code.mergeConflict`).
    public static let mergeConflict = Code.mergeConflict
}

extension ManagedObjectContext {
    /// What `save` does with one updated or deleted object after the check.
    enum Resolution {
        /// Write this row (the version column filled in).
        case write([Value])
        /// Write nothing; afterwards the object takes this stored row.
        case takeStore([Value])
        /// Delete the row.
        case delete
        /// Write nothing; the object is gone from the store and leaves the context.
        case gone
    }

    /// Checks one object against its stored row inside the save's write
    /// transaction and decides, by `mergePolicy`, what to write. `row` is the
    /// row the context would write (nil for a delete), `original` the row the
    /// context read. Returns the conflict (if any) and the resolution, or nil
    /// resolution when the policy refuses.
    func resolve(_ o: ManagedObject, stored: [Value]?, row: [Value]?, original: [Value]) -> (MergeConflict?, Resolution?) {
        let layout = self.layout(of: o.entity)
        let v = layout.version
        let deleting = row == nil
        guard let stored else {
            if deleting { return (nil, .gone) }
            let c = MergeConflict(objectID: o.objectID, entityName: o.entity.name, deletedInStore: true, deletedHere: false,
                                  properties: [], contextValues: [:], storeValues: [:], contextVersion: o.version, storeVersion: nil)
            switch mergePolicy {
            case .error, .mergeByPropertyObjectTrump, .overwrite: return (c, nil)
            case .mergeByPropertyStoreTrump, .rollback: return (c, .gone)
            }
        }
        let storeVersion = v < stored.count ? stored[v].integerValue ?? 0 : 0
        if storeVersion == o.version {
            guard var row else { return (nil, .delete) }
            row[v] = .integer(storeVersion + 1)
            return (nil, .write(row))
        }
        // Conflict: name the properties changed in the store.
        var names: [String] = []
        var here: [String: Value] = [:], there: [String: Value] = [:]
        let current = row ?? original
        for i in 0..<min(v, stored.count, original.count, current.count) where stored[i] != original[i] {
            var name = layout.columns[i]
            if name.hasSuffix("_order"), o.entity.attributesByName[name] == nil { name = String(name.dropLast(6)) }
            if name.hasSuffix(ManagedObjectModel.companionSuffix), o.entity.attributesByName[name] == nil {
                name = String(name.dropLast(ManagedObjectModel.companionSuffix.count))
            }
            if !names.contains(name) { names.append(name) }
            here[layout.columns[i]] = current[i]
            there[layout.columns[i]] = stored[i]
        }
        let c = MergeConflict(objectID: o.objectID, entityName: o.entity.name, deletedInStore: false, deletedHere: deleting,
                              properties: names, contextValues: here, storeValues: there, contextVersion: o.version, storeVersion: storeVersion)
        if deleting {
            switch mergePolicy {
            case .error: return (c, nil)
            case .rollback: return (c, .takeStore(stored))
            case .mergeByPropertyStoreTrump, .mergeByPropertyObjectTrump, .overwrite: return (c, .delete)
            }
        }
        guard var out = row else { return (c, nil) }
        switch mergePolicy {
        case .error: return (c, nil)
        case .rollback: return (c, .takeStore(stored))
        case .overwrite: break
        case .mergeByPropertyStoreTrump:
            for i in 0..<min(v, stored.count, original.count) where stored[i] != original[i] { out[i] = stored[i] }
        case .mergeByPropertyObjectTrump:
            for i in 0..<min(v, stored.count, original.count) where out[i] == original[i] { out[i] = stored[i] }
        }
        // Nothing left to change: write nothing (and bump no version).
        if Array(out[..<v]) == Array(stored[..<min(v, stored.count)]) { return (c, .takeStore(stored)) }
        out[v] = .integer(storeVersion + 1)
        return (c, .write(out))
    }

    /// The error a refused save throws.
    static func conflictError(_ conflicts: [MergeConflict], policy: MergePolicy) -> KuraError {
        KuraError(.mergeConflict, "save refused (merge policy \(policy.rawValue)), nothing was written: \(conflicts.count) object\(conflicts.count == 1 ? "" : "s") changed or deleted in the store since this context read \(conflicts.count == 1 ? "it" : "them"):\n  "
                  + conflicts.map(\.description).joined(separator: "\n  "))
    }
}
