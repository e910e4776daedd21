// ContextUndoManager: undo and redo of a context's changes (Core Data's
// context undoManager; Foundation's UndoManager is not usable on Linux).
//
// What is recorded: every change of the context's object graph, at the level
// the context keeps it — an attribute's stored value, a to-one key (with its
// order position), a join-table edit and pending join position, a transient
// relationship's list of targets (Core Data's undo manager tracks transient
// properties too), an insert, a delete. Relationship edits
// and delete rules are recorded as the primitive changes they make on each
// side, so undoing a group restores both sides and a cascade's objects.
//
// Groups: with `groupsByEvent` (the default) a group opens at the first change
// and closes at the context's next `processPendingChanges()` (which save and
// fetches run), as Core Data closes one per run-loop turn. `beginUndoGrouping()`
// / `endUndoGrouping()` make explicit groups (nested ones fold into the
// outermost). A group holds, per (object, key), the value before the group's
// first change, so undoing it restores exactly the state before the group.
//
// Undo applies a group and records what it replaced as a redo group; redo is
// symmetric. Invariant kept while applying: no empty per-table dictionary is
// left in `joinEdits` or `joinPositions` (`hasChanges` tests their emptiness).
// After a group is applied, each object it changed gets
// `awakeFromSnapshotEvents(_:)` once: `.undoInsertion` if it left the context,
// `.undoDeletion` if it came back (either without `.undoUpdate`), else
// `.undoUpdate` if its values or links changed (a redo is an undo of the undo
// and reports the same way). A new change after an undo clears the redo stack. `rollback()`,
// `reset()` (as in Core Data) and `save()` clear both stacks (Core Data keeps them across a save; Kura
// does not yet re-create rows a saved delete removed, so a save ends the undo
// history rather than offer undos it cannot do right).

import KuraEngine

/// Undo and redo for one context. Off by default (it keeps every changed
/// value of a group in memory: turn it off during imports): set
/// `context.undoManager = ContextUndoManager()`.
///
/// Thread rules: the context's. Lifetime: attached to one context at a time.
public final class ContextUndoManager {
    /// The most groups kept (oldest dropped first); 0 keeps all.
    public var levelsOfUndo = 0
    /// Whether a group closes at each `processPendingChanges()`.
    public var groupsByEvent = true
    /// Whether changes are recorded now (see `disableUndoRegistration()`).
    public private(set) var isUndoRegistrationEnabled = true
    /// The name of the action of the group being recorded (shown as "Undo NAME").
    public var undoActionName = ""

    var undoStack: [UndoGroup] = []
    var redoStack: [UndoGroup] = []
    var open: UndoGroup?
    var explicitDepth = 0
    var disableDepth = 0
    var applying = false

    public init() {}

    /// Whether there is a group to undo (the open one counts).
    public var canUndo: Bool { !undoStack.isEmpty || !(open?.isEmpty ?? true) }
    /// Whether there is a group to redo.
    public var canRedo: Bool { !redoStack.isEmpty }
    /// The action name of the group `undo()` would undo.
    public var undoMenuItemTitle: String { "Undo" + ((open?.isEmpty == false ? open?.name : undoStack.last?.name).map { $0.isEmpty ? "" : " " + $0 } ?? "") }
    /// The action name of the group `redo()` would redo.
    public var redoMenuItemTitle: String { "Redo" + (redoStack.last.map { $0.name.isEmpty ? "" : " " + $0.name } ?? "") }

    /// Starts an explicit group: changes until the matching `endUndoGrouping()`
    /// undo together. Nested calls fold into the outermost group.
    public func beginUndoGrouping() {
        if explicitDepth == 0 { closeGroup() }
        explicitDepth += 1
    }

    /// Ends an explicit group.
    ///
    /// - Throws: `.misuse` without a matching `beginUndoGrouping()`.
    public func endUndoGrouping() throws(KuraError) {
        guard explicitDepth > 0 else { throw KuraError(.misuse, "endUndoGrouping() without beginUndoGrouping()") }
        explicitDepth -= 1
        if explicitDepth == 0 { closeGroup() }
    }

    /// Stops recording (nests: each call needs an `enableUndoRegistration()`).
    public func disableUndoRegistration() {
        disableDepth += 1
        isUndoRegistrationEnabled = false
    }

    /// Resumes recording after `disableUndoRegistration()`.
    public func enableUndoRegistration() {
        disableDepth = max(0, disableDepth - 1)
        isUndoRegistrationEnabled = disableDepth == 0
    }

    /// Forgets every group (undo and redo).
    public func removeAllActions() {
        undoStack = []
        redoStack = []
        open = nil
    }

    // MARK: Recording (called by the context)

    var recording: Bool { isUndoRegistrationEnabled && !applying }

    func change(_ body: (inout UndoGroup) -> Void) {
        guard recording else { return }
        if open == nil { open = UndoGroup(name: undoActionName) }
        // `open` was just set if it was nil.
        body(&open!)
        redoStack = []
    }

    func closeGroup() {
        guard let g = open else { return }
        open = nil
        guard !g.isEmpty else { return }
        undoStack.append(g)
        if levelsOfUndo > 0 && undoStack.count > levelsOfUndo { undoStack.removeFirst(undoStack.count - levelsOfUndo) }
        undoActionName = ""
    }

    /// Called by the context's `processPendingChanges()`.
    func eventEnded() {
        if groupsByEvent && explicitDepth == 0 { closeGroup() }
    }

    /// Renames object IDs (temporary to permanent, `obtainPermanentIDs`) in
    /// every recorded group, so an undo after the rename restores the pairs
    /// and keys under the IDs the context now uses.
    func rename(_ renamed: [ManagedObjectID: ManagedObjectID]) {
        for i in undoStack.indices { undoStack[i].rename(renamed) }
        for i in redoStack.indices { redoStack[i].rename(renamed) }
        open?.rename(renamed)
    }
}

/// One undoable group: the state before it, per object and key.
struct UndoGroup {
    var name: String
    /// Old attribute values, by object and key.
    var values: [ObjectIdentifier: (ManagedObject, [String: Value])] = [:]
    /// Old to-one keys and order positions (nil = absent), by object and key.
    var toOnes: [ObjectIdentifier: (ManagedObject, [String: ManagedObjectID?])] = [:]
    var orders: [ObjectIdentifier: (ManagedObject, [String: Double?])] = [:]
    /// Old target lists of transient relationships (nil = none), by object and key.
    var links: [ObjectIdentifier: (ManagedObject, [String: [ManagedObject]?])] = [:]
    /// Old join-table edit states (nil = no pending edit).
    var joins: [String: [ManagedObjectContext.JoinPair: Bool?]] = [:]
    /// Old pending join positions (nil = none), for ordered join tables.
    var positions: [String: [ManagedObjectContext.JoinPair: ManagedObjectContext.JoinPositions?]] = [:]
    /// Presence changes, in order.
    var presence: [(Presence, ManagedObject)] = []

    enum Presence {
        /// Inserted (undo removes it) / removed by an undo (redo re-inserts it).
        case inserted, uninserted
        /// Deleted (undo restores it) / restored by an undo (redo deletes it).
        case deleted, undeleted
    }

    init(name: String) { self.name = name }

    /// Renames object IDs in the recorded to-one keys and join pairs.
    mutating func rename(_ renamed: [ManagedObjectID: ManagedObjectID]) {
        func pair(_ p: ManagedObjectContext.JoinPair) -> ManagedObjectContext.JoinPair {
            ManagedObjectContext.JoinPair(source: renamed[p.source] ?? p.source, target: renamed[p.target] ?? p.target)
        }
        for (k, (o, old)) in toOnes {
            toOnes[k] = (o, old.mapValues { id in id.map { renamed[$0] ?? $0 } })
        }
        joins = joins.mapValues { Dictionary($0.map { (pair($0.key), $0.value) }, uniquingKeysWith: { first, _ in first }) }
        positions = positions.mapValues { Dictionary($0.map { (pair($0.key), $0.value) }, uniquingKeysWith: { first, _ in first }) }
    }

    var isEmpty: Bool { values.isEmpty && toOnes.isEmpty && orders.isEmpty && links.isEmpty && joins.isEmpty && positions.isEmpty && presence.isEmpty }
}

extension ManagedObjectContext {
    /// This context's undo manager; nil (the default) records nothing. Setting
    /// one starts recording from the current state.
    public var undoManager: ContextUndoManager? {
        get { undo }
        set { undo = newValue }
    }

    /// Undoes the last group of changes (closing the open one first) and
    /// posts the resulting changes at the next `processPendingChanges()`.
    /// Does nothing without an undo manager or anything to undo.
    public func undoLastChange() {
        guard let m = undo else { return }
        if m.explicitDepth == 0 { m.closeGroup() }
        guard let g = m.undoStack.popLast() else { return }
        m.applying = true
        let inverse = apply(g)
        m.applying = false
        m.redoStack.append(inverse)
    }

    /// Redoes the last undone group.
    public func redoLastChange() {
        guard let m = undo, let g = m.redoStack.popLast() else { return }
        m.applying = true
        let inverse = apply(g)
        m.applying = false
        m.undoStack.append(inverse)
    }

    // MARK: Recording hooks

    func recordUndo(_ o: ManagedObject, key: String) {
        guard let m = undo, m.recording else { return }
        let k = ObjectIdentifier(o)
        m.change { g in
            if o.entity.relationshipsByName[key]?.isTransient == true {
                if g.links[k]?.1.keys.contains(key) != true {
                    var entry = g.links[k] ?? (o, [:])
                    entry.1[key] = .some(o.transientRelated[key])
                    g.links[k] = entry
                }
            } else if o.entity.attributesByName[key] != nil {
                if g.values[k]?.1[key] == nil {
                    var entry = g.values[k] ?? (o, [:])
                    entry.1[key] = o.storedValue(named: key) ?? .null
                    g.values[k] = entry
                }
            } else {
                if g.toOnes[k]?.1.keys.contains(key) != true {
                    var entry = g.toOnes[k] ?? (o, [:])
                    entry.1[key] = .some(o.toOne[key])
                    g.toOnes[k] = entry
                }
                let ok = key + "_order"
                if g.orders[k]?.1.keys.contains(ok) != true {
                    var entry = g.orders[k] ?? (o, [:])
                    entry.1[ok] = .some(o.order[ok])
                    g.orders[k] = entry
                }
            }
        }
    }

    /// Sets a pending join-table edit, recording the old state for undo.
    func setJoinEdit(_ table: String, _ pair: JoinPair, _ present: Bool) {
        if let m = undo, m.recording {
            let old = joinEdits[table]?[pair]
            m.change { g in
                if g.joins[table]?.keys.contains(pair) != true { g.joins[table, default: [:]][pair] = .some(old) }
            }
        }
        joinEdits[table, default: [:]][pair] = present
    }

    /// Sets (or clears) a pending join position, recording the old one for undo.
    func setJoinPositions(_ table: String, _ pair: JoinPair, _ p: JoinPositions?) {
        if let m = undo, m.recording {
            let old = joinPositions[table]?[pair]
            m.change { g in
                if g.positions[table]?.keys.contains(pair) != true { g.positions[table, default: [:]][pair] = .some(old) }
            }
        }
        if let p { joinPositions[table, default: [:]][pair] = p } else { clearJoinPosition(table, pair) }
    }

    /// Removes a pending join edit, dropping its table's dictionary when it empties.
    private func clearJoinEdit(_ table: String, _ pair: JoinPair) {
        joinEdits[table]?[pair] = nil
        if joinEdits[table]?.isEmpty == true { joinEdits[table] = nil }
    }

    /// Removes a pending join position, dropping its table's dictionary when it empties.
    private func clearJoinPosition(_ table: String, _ pair: JoinPair) {
        joinPositions[table]?[pair] = nil
        if joinPositions[table]?.isEmpty == true { joinPositions[table] = nil }
    }

    func recordPresence(_ kind: UndoGroup.Presence, _ o: ManagedObject) {
        guard let m = undo, m.recording else { return }
        m.change { g in g.presence.append((kind, o)) }
    }

    // MARK: Applying

    /// Restores the state a group recorded; returns the group that restores
    /// the state it replaced.
    private func apply(_ g: UndoGroup) -> UndoGroup {
        var back = UndoGroup(name: g.name)
        var events: [ObjectIdentifier: (ManagedObject, SnapshotEvents)] = [:]
        func event(_ o: ManagedObject, _ e: SnapshotEvents) {
            events[ObjectIdentifier(o), default: (o, [])].1.formUnion(e)
        }
        defer {
            for (o, e) in events.values.sorted(by: { Self.idOrder($0.0.objectID, $1.0.objectID) }) {
                // An object that left or came back reports that alone.
                o.awakeFromSnapshotEvents(e.isDisjoint(with: [.undoInsertion, .undoDeletion]) ? e : e.subtracting(.undoUpdate))
            }
        }
        for (p, o) in g.presence.reversed() {
            switch p {
            case .inserted, .undeleted: event(o, .undoInsertion)
            case .uninserted, .deleted: event(o, .undoDeletion)
            }
            switch p {
            case .inserted:
                // Leaves the context as a rolled-back insert does.
                inserted.removeAll { $0 === o }
                clearPendingIndexes()  // they track `inserted` by position
                registry[o.objectID] = nil
                noteDeleted(o)
                o.managedObjectContext = nil
                back.presence.append((.uninserted, o))
            case .uninserted:
                o.managedObjectContext = self
                inserted.append(o)
                if o.isDeleted { insertedMayHoldDeleted = true }
                track(o, as: o.objectID)
                noteInserted(o)
                back.presence.append((.inserted, o))
            case .deleted:
                o.isDeleted = false
                deleted.removeAll { $0 === o }
                noteInserted(o)
                back.presence.append((.undeleted, o))
            case .undeleted:
                o.isDeleted = true
                deleted.append(o)
                noteDeleted(o)
                back.presence.append((.deleted, o))
            }
        }
        for (k, (o, old)) in g.values {
            var now: [String: Value] = [:]
            for (key, v) in old {
                now[key] = o.storedValue(named: key) ?? .null
                willChange(o, key: key)  // recorded as an edit; not for undo while applying
                o.setStoredValue(v, named: key)
            }
            event(o, .undoUpdate)
            back.values[k] = (o, now)
        }
        for (k, (o, old)) in g.toOnes {
            var now: [String: ManagedObjectID?] = [:]
            for (key, v) in old {
                now[key] = .some(o.toOne[key])
                willChange(o, key: key)  // recorded as an edit; not for undo while applying
                o.toOne[key] = v
                if let inv = o.entity.relationshipsByName[key].flatMap({ inverse(of: $0) }), inv.isToMany {
                    if let v, let owner = registered(v) { noteUpdated(owner, inv.name) }
                    if let was = now[key] ?? nil, let owner = registered(was) { noteUpdated(owner, inv.name) }
                }
            }
            event(o, .undoUpdate)
            back.toOnes[k] = (o, now)
        }
        for (k, (o, old)) in g.orders {
            var now: [String: Double?] = [:]
            for (key, v) in old {
                now[key] = .some(o.order[key])
                o.order[key] = v
            }
            back.orders[k] = (o, now)
        }
        for (k, (o, old)) in g.links {
            var now: [String: [ManagedObject]?] = [:]
            for (key, v) in old {
                now[key] = .some(o.transientRelated[key])
                willChange(o, key: key)  // noted for observers; not for undo while applying
                o.transientRelated[key] = v
            }
            event(o, .undoUpdate)
            back.links[k] = (o, now)
        }
        for (table, pairs) in g.joins {
            for (pair, old) in pairs {
                back.joins[table, default: [:]][pair] = .some(joinEdits[table]?[pair])
                if let old { joinEdits[table, default: [:]][pair] = old } else { clearJoinEdit(table, pair) }
                for id in [pair.source, pair.target] {
                    if let o = registered(id) {
                        for r in o.entity.relationships where r.isToMany { noteUpdated(o, r.name) }
                        event(o, .undoUpdate)
                    }
                }
            }
        }
        for (table, pairs) in g.positions {
            for (pair, old) in pairs {
                back.positions[table, default: [:]][pair] = .some(joinPositions[table]?[pair])
                if let old { joinPositions[table, default: [:]][pair] = old } else { clearJoinPosition(table, pair) }
            }
        }
        return back
    }

}
