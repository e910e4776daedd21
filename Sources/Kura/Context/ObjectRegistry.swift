// ObjectRegistry: a context's objects by ID, unretained (uniquing: one
// instance per ID per context).
//
// Two stores:
// - `own`: the objects this context inserted, under the temporary IDs it made
//   for them, in an array by number. Such an ID's row ID is the context's tag
//   (its identity) in the high 31 bits and the insert's number in the low 32,
//   so finding, adding and dropping one is arithmetic, not hashing: inserting
//   many objects costs no hash table growth.
// - `runs`: objects a save of this context just inserted, under their new
//   permanent IDs: a save's row IDs for one entity are consecutive, so
//   `ManagedObjectContext.save` opens a run (entity, first row ID, count)
//   and each object sits in an array by `rowID - base`: registering the
//   objects of a large save, and dropping them as they are deallocated,
//   costs no hashing and no hash table growth (the objects were just
//   inserted, so no other instance can hold those IDs).
// - `byID`: every other object (saved ones by permanent ID, another
//   context's temporary IDs seen by a child context, and the rare own ID
//   whose slot is gone: see below), in a hash table (IDTable.swift).
//
// Invariants: `own[i]` holds the object whose ID has number `ownBase + i`, or
// nil; `ownLive` counts the non-nil slots; when it falls to zero the array is
// dropped and `ownBase` moves to the next number (a context that inserts and
// saves for its whole life keeps no array of empty slots). An own ID whose
// number is below `ownBase` (an object put back by undo after its slot was
// dropped) goes to `byID`, so every lookup of an own ID that misses the array
// also asks `byID`. `runs[k].slots[i]` holds the object whose ID is
// (`runs[k].entity`, `runs[k].base + i`, permanent), or nil; `runs[k].live`
// counts its non-nil slots, and a run whose count falls to zero is dropped.
// An ID is registered in one place only: an ID inside a run's range is
// stored in the run (and removed from `byID`), and a lookup that misses the
// run also asks `byID` (an object registered there before the run opened).
//
// A context whose tag does not fit, or that has made 2^32 temporary IDs,
// makes process-wide ones instead (negative row IDs, never its tag's), which
// live in `byID`.

/// The numbers of the temporary IDs one context makes (ObjectRegistry,
/// `newTemporaryID`): unique per ID among that context's IDs, and
/// independent of what is registered, so a save can find its inserted
/// objects' positions by them (InsertedPositions) without hashing.
struct OwnIDNumbering {
    let tag: Int64
    let bits: Int64
    let mask: Int64

    /// The number of `id` if this context made it, else nil.
    @inline(__always)
    func number(_ id: ManagedObjectID) -> Int64? {
        guard id.isTemporary, tag > 0, id.rowID > 0, id.rowID >> bits == tag else { return nil }
        return id.rowID & mask
    }
}

struct ObjectRegistry {
    private var byID = IDTable()
    private var own: [Unmanaged<ManagedObject>?] = []
    private var ownBase: Int64 = 0
    private var ownLive = 0
    private var nextNumber: Int64 = 0
    private var runs: [PermanentRun] = []
    private var runLive = 0

    /// Consecutive permanent row IDs of one entity (see above).
    private struct PermanentRun {
        let entity: String
        let base: Int64
        var slots: [Unmanaged<ManagedObject>?]
        var live = 0

        /// The slot of `id` in this run, if it has one.
        @inline(__always)
        func position(_ id: ManagedObjectID) -> Int? {
            let i = id.rowID &- base
            guard i >= 0, i < Int64(slots.count), !id.isTemporary, id.entityName == entity else { return nil }
            return Int(i)
        }
    }

    /// At most this many runs are kept (each save of an entity's objects
    /// opens one, or extends the last one of that entity); more go to `byID`.
    private static let maximumRuns = 8
    /// The context's identity, or -1 when it does not fit in 31 bits.
    private let tag: Int64

    private static let numberBits: Int64 = 32
    private static let numberMask: Int64 = (1 << 32) - 1

    init(identity: Int64) {
        tag = identity > 0 && identity < (1 << 31) ? identity : -1
    }

    /// A new temporary ID for an object of `entity` this context inserts.
    mutating func newTemporaryID(_ entity: String) -> ManagedObjectID {
        guard tag > 0, nextNumber <= Self.numberMask else { return .temporary(entity) }
        let rowID = tag << Self.numberBits | nextNumber
        nextNumber += 1
        return ManagedObjectID(entity: entity, rowID: rowID, temporary: true)
    }

    /// How this context numbers the temporary IDs it makes (`newTemporaryID`).
    var numbering: OwnIDNumbering { OwnIDNumbering(tag: tag, bits: Self.numberBits, mask: Self.numberMask) }

    /// The position in `own` of an ID this context made, if it has one.
    @inline(__always)
    private func ownPosition(_ id: ManagedObjectID) -> Int? {
        ownPosition(rowID: id.rowID, temporary: id.isTemporary)
    }

    /// `ownPosition` of the ID with `rowID` and kind `temporary`.
    @inline(__always)
    private func ownPosition(rowID: Int64, temporary: Bool) -> Int? {
        guard temporary, tag > 0, rowID > 0, rowID >> Self.numberBits == tag else { return nil }
        let number = rowID & Self.numberMask
        guard number >= ownBase else { return nil }
        return Int(number - ownBase)
    }

    /// The run holding `id`'s range, and the slot in it.
    @inline(__always)
    private func runPosition(_ id: ManagedObjectID) -> (run: Int, slot: Int)? {
        for k in runs.indices {
            if let i = runs[k].position(id) { return (k, i) }
        }
        return nil
    }

    /// Opens slots for the permanent IDs (`entity`, `first` ..< `first + count`),
    /// which a save just gave to objects it inserted (no object of this
    /// context is registered under them but those objects, which the save
    /// registers next). Extends the entity's last run when the IDs follow
    /// it; with too many runs open, the IDs are left to `byID`.
    mutating func openRun(entity: String, first: Int64, count: Int) {
        guard count > 0, first > 0 else { return }
        if let k = runs.lastIndex(where: { $0.entity == entity }), runs[k].base + Int64(runs[k].slots.count) == first {
            runs[k].slots.append(contentsOf: repeatElement(nil, count: count))
            return
        }
        guard runs.count < Self.maximumRuns else { return }
        runs.append(PermanentRun(entity: entity, base: first, slots: [Unmanaged<ManagedObject>?](repeating: nil, count: count)))
    }

    /// The object registered under `id` (nil: none); setting nil drops it.
    subscript(id: ManagedObjectID) -> Unmanaged<ManagedObject>? {
        get {
            if let p = ownPosition(id), p < own.count, let u = own[p] { return u }
            if !runs.isEmpty, let (k, i) = runPosition(id), let u = runs[k].slots[i] { return u }
            return byID.isEmpty ? nil : byID[id]
        }
        set {
            if !runs.isEmpty, let (k, i) = runPosition(id) {
                let was = runs[k].slots[i] != nil
                runs[k].slots[i] = newValue
                if newValue != nil, !was {
                    runs[k].live += 1
                    runLive += 1
                } else if newValue == nil, was {
                    runs[k].live -= 1
                    runLive -= 1
                    if runs[k].live == 0 { runs.remove(at: k) }
                }
                // The ID lives in the run only.
                if !byID.isEmpty { byID[id] = nil }
                return
            }
            if let p = ownPosition(id) {
                if let u = newValue {
                    if p >= own.count {
                        // Numbers are made in order and registered at once, so
                        // this appends; a gap (an ID made but never registered) fills with nil.
                        if p > own.count { own.append(contentsOf: repeatElement(nil, count: p - own.count)) }
                        own.append(u)
                        ownLive += 1
                    } else {
                        if own[p] == nil { ownLive += 1 }
                        own[p] = u
                    }
                    return
                }
                if p < own.count, own[p] != nil {
                    own[p] = nil
                    ownLive -= 1
                    if ownLive == 0 {
                        own = []
                        ownBase = nextNumber
                    }
                    return
                }
            }
            byID[id] = newValue
        }
    }

    /// Drops the entry of `id` if it holds `o` (a deallocating object leaves;
    /// an entry another object took over stays). One lookup, not a read then
    /// a write. Returns whether an entry was dropped.
    @discardableResult
    mutating func remove(_ id: ManagedObjectID, ifItIs o: ManagedObject) -> Bool {
        let mine = Unmanaged.passUnretained(o).toOpaque()
        if let p = ownPosition(id), p < own.count, let u = own[p] {
            guard u.toOpaque() == mine else { return false }
            clearOwn(p)
            return true
        }
        if !runs.isEmpty, let (k, i) = runPosition(id), let u = runs[k].slots[i] {
            guard u.toOpaque() == mine else { return false }
            clearRun(k, i, id)
            return true
        }
        let before = byID.count
        byID.remove(id, ifItIs: mine)
        return byID.count != before
    }

    /// Registers `u` under `id`, a temporary ID this context just made for
    /// an object it inserts (`newTemporaryID`): what `self[id] = u` does,
    /// with the common case (the next own slot) first.
    @inline(__always)
    mutating func addInserted(_ id: ManagedObjectID, _ u: Unmanaged<ManagedObject>) {
        // A temporary ID is never in a run (`PermanentRun.position`).
        if let p = ownPosition(id), p == own.count {
            own.append(u)
            ownLive += 1
            return
        }
        self[id] = u
    }

    /// `addInserted(o.objectID, .passUnretained(o))`, with the ID's fields
    /// read in place (a copy of the ID retains and releases its entity name).
    @inline(__always)
    mutating func addInserted(_ o: ManagedObject) {
        if let p = ownPosition(rowID: o.objectID.rowID, temporary: o.objectID.isTemporary), p == own.count {
            own.append(.passUnretained(o))
            ownLive += 1
            return
        }
        self[o.objectID] = .passUnretained(o)
    }

    /// Makes room for `n` more objects under permanent IDs (a fetch about
    /// to register the objects it made: `addFetched`).
    mutating func reserveFetched(_ n: Int) {
        byID.reserve(byID.count + n)
    }

    /// Registers `u` under `id`, a permanent ID, unless an object is
    /// registered under it, which it returns instead (nothing changes then):
    /// `self[id] ?? (self[id] = u)` with one probe of `byID` in the common
    /// case (no run holds `id`'s range).
    @inline(__always)
    mutating func addFetched(_ id: ManagedObjectID, _ u: Unmanaged<ManagedObject>) -> Unmanaged<ManagedObject>? {
        assert(!id.isTemporary)
        if !runs.isEmpty, runPosition(id) != nil {
            if let existing = self[id] { return existing }
            self[id] = u
            return nil
        }
        return byID.insertIfAbsent(id, u)
    }

    /// Moves `u`, an object a save just inserted, from `old` (its temporary
    /// ID) to `new` (its permanent one, in a run the save opened): what
    /// `self[old] = nil; self[new] = u` does, with the common case (an own
    /// slot, a slot of the last run) first.
    @inline(__always)
    mutating func moveInserted(_ u: Unmanaged<ManagedObject>, from old: ManagedObjectID, to new: ManagedObjectID) {
        if let p = ownPosition(old), p < own.count, own[p] != nil {
            clearOwn(p)
        } else {
            self[old] = nil
        }
        placeInserted(u, at: new)
    }

    /// `moveInserted(.passUnretained(o), from: o.objectID, to: new)`, with
    /// the old ID's fields read in place (see `addInserted(_:)`).
    @inline(__always)
    mutating func moveInserted(_ o: ManagedObject, to new: ManagedObjectID) {
        if let p = ownPosition(rowID: o.objectID.rowID, temporary: o.objectID.isTemporary), p < own.count, own[p] != nil {
            clearOwn(p)
        } else {
            self[o.objectID] = nil
        }
        placeInserted(.passUnretained(o), at: new)
    }

    /// `moveInserted`'s second half: `self[new] = u`, with a slot of the
    /// last run first.
    @inline(__always)
    private mutating func placeInserted(_ u: Unmanaged<ManagedObject>, at new: ManagedObjectID) {
        if let k = runs.indices.last, let i = runs[k].position(new), byID.isEmpty {
            if runs[k].slots[i] == nil {
                runs[k].live += 1
                runLive += 1
            }
            runs[k].slots[i] = u
            return
        }
        self[new] = u
    }

    /// Empties own slot `p`, which holds an object.
    @inline(__always)
    private mutating func clearOwn(_ p: Int) {
        own[p] = nil
        ownLive -= 1
        if ownLive == 0 {
            own = []
            ownBase = nextNumber
        }
    }

    /// Empties slot `i` of run `k`, which holds the object of `id`.
    private mutating func clearRun(_ k: Int, _ i: Int, _ id: ManagedObjectID) {
        runs[k].slots[i] = nil
        runs[k].live -= 1
        runLive -= 1
        if runs[k].live == 0 { runs.remove(at: k) }
        // The ID lives in the run only.
        if !byID.isEmpty { byID[id] = nil }
    }

    /// The number of registered objects.
    var count: Int { byID.count + ownLive + runLive }

    /// Every registered object (a copy: the registry may change while the
    /// caller walks it).
    var values: [Unmanaged<ManagedObject>] {
        var out = byID.allValues
        if ownLive > 0 {
            out.reserveCapacity(out.count + ownLive)
            for case let u? in own { out.append(u) }
        }
        if runLive > 0 {
            out.reserveCapacity(out.count + runLive)
            for r in runs { for case let u? in r.slots { out.append(u) } }
        }
        return out
    }

    /// Drops every object.
    mutating func removeAll() {
        byID = IDTable()
        own = []
        ownLive = 0
        ownBase = nextNumber
        runs = []
        runLive = 0
    }
}
