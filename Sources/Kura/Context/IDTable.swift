// IDTable: a hash table from object IDs to unretained objects, for the
// registry's objects outside its arrays (ObjectRegistry.swift, `byID`).
//
// Why not a Dictionary: a context that faults objects one by one (lookups by
// ID, each object released after use) inserts and removes an entry per
// object, and Dictionary hashes each ID with SipHash (a Hasher set up,
// combined and finalized) on both. Object IDs need no keyed hash: they are
// row IDs chosen by the store, not by whoever could aim at collisions, so a
// multiplicative hash of the row ID spreads them (consecutive row IDs land
// far apart) at a fraction of the cost.
//
// Layout: open addressing with linear probing in two parallel stores of a
// power-of-two capacity (the keys in an `IDKeys` buffer, whose slots are
// made and destroyed without the runtime's generic paths; the values, plain
// words, in an array); a slot is free when its key is nil. Removal shifts
// the following entries of the probe run back (no tombstones), so a lookup
// stops at the first free slot.
//
// Invariants: `count` is the number of occupied slots; the table is at most
// half full (it doubles, or `reserve` resizes it, before it would pass that); every entry sits in the
// probe run that starts at its hash's slot, with no free slot between the
// two; `keys` and `values` are both empty (capacity 0) or have one slot per
// capacity, and a slot's value is non-nil exactly when its key is.

struct IDTable {
    private var keys = IDKeys()
    private var values: [Unmanaged<ManagedObject>?] = []
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    /// The slot where a probe for `id` starts (capacity > 0).
    @inline(__always)
    private func home(_ id: ManagedObjectID) -> Int {
        Self.home(id, mask: keys.count - 1)
    }

    /// The slot where a probe for `id` starts in a table of `mask + 1` slots.
    @inline(__always)
    private static func home(_ id: ManagedObjectID, mask: Int) -> Int {
        // Row ID, kind and the name's length, as ManagedObjectID.hash(into:) mixes them.
        let mixed = UInt64(bitPattern: id.rowID) ^ (id.isTemporary ? 1 << 63 : 0) ^ (UInt64(truncatingIfNeeded: id.entityName.utf8.count) << 55)
        let h = mixed &* 0x9E37_79B9_7F4A_7C15
        return Int(truncatingIfNeeded: h ^ (h >> 32)) & mask
    }

    /// The slot holding `id`, if any.
    @inline(__always)
    private func slot(of id: ManagedObjectID) -> Int? {
        guard count > 0 else { return nil }
        let mask = keys.count - 1
        var i = home(id)
        while let k = keys[i] {
            if k == id { return i }
            i = (i + 1) & mask
        }
        return nil
    }

    /// The object stored under `id` (nil: none); setting nil removes the entry.
    subscript(id: ManagedObjectID) -> Unmanaged<ManagedObject>? {
        get { slot(of: id).flatMap { values[$0] } }
        set {
            if let newValue {
                if let i = slot(of: id) {
                    values[i] = newValue
                    return
                }
                if (count + 1) * 2 > keys.count { grow() }
                let mask = keys.count - 1
                var i = home(id)
                // Free slots found by the value (a plain word; testing the
                // key would copy it: a retain and release of its name).
                while values[i] != nil { i = (i + 1) & mask }
                keys[i] = id
                values[i] = newValue
                count += 1
            } else if let i = slot(of: id) {
                remove(at: i)
            }
        }
    }

    /// Removes the entry of `id` if it holds the object at `object`.
    mutating func remove(_ id: ManagedObjectID, ifItIs object: UnsafeMutableRawPointer) {
        guard let i = slot(of: id), values[i]?.toOpaque() == object else { return }
        remove(at: i)
    }

    /// Empties slot `i` and shifts the rest of its probe run back, so that
    /// every entry stays reachable from its home slot without a free slot between.
    private mutating func remove(at i: Int) {
        let mask = keys.count - 1
        var hole = i
        var j = i
        while true {
            j = (j + 1) & mask
            guard let k = keys[j] else { break }
            let h = home(k)
            // The entry at j may move into the hole if its home slot is not
            // in the cyclic range (hole, j].
            let inRange = hole <= j ? (h > hole && h <= j) : (h > hole || h <= j)
            if !inRange {
                keys[hole] = k
                values[hole] = values[j]
                hole = j
            }
        }
        keys[hole] = nil
        values[hole] = nil
        count -= 1
    }

    /// Makes room for `n` entries in all (a fetch about to register its
    /// objects: one resize instead of a doubling every time the table
    /// passes half full on the way).
    mutating func reserve(_ n: Int) {
        guard n * 2 > keys.count else { return }
        var capacity = max(16, keys.count)
        while capacity < n * 2 { capacity *= 2 }
        resize(to: capacity)
    }

    /// Stores `value` under `id` unless an entry for `id` is there, which
    /// it returns instead (then nothing changes): a lookup and an insert in
    /// one probe.
    mutating func insertIfAbsent(_ id: ManagedObjectID, _ value: Unmanaged<ManagedObject>) -> Unmanaged<ManagedObject>? {
        if (count + 1) * 2 > keys.count { grow() }
        let mask = keys.count - 1
        var i = home(id)
        // Free slots found by the value (see `subscript`); a taken one's
        // key compared by row ID first, as `==` does.
        while let v = values[i] {
            if keys[i]?.rowID == id.rowID, keys[i] == id { return v }
            i = (i + 1) & mask
        }
        keys[i] = id
        values[i] = value
        count += 1
        return nil
    }

    /// Doubles the capacity (at least 16 slots).
    private mutating func grow() {
        resize(to: max(16, keys.count * 2))
    }

    /// Re-inserts every entry into a table of `capacity` slots (a power of
    /// two, at least twice `count`).
    ///
    /// The keys are moved, not copied (no retain and release of each one's
    /// entity name), into fresh storage; the old keys are left holding
    /// nils, and free slots are found by the value (see `subscript`).
    private mutating func resize(to capacity: Int) {
        assert(capacity & (capacity - 1) == 0 && capacity >= count * 2)
        var newKeys = IDKeys(capacity: capacity)
        var newValues = [Unmanaged<ManagedObject>?](repeating: nil, count: capacity)
        let mask = capacity - 1
        let old = keys.count
        // Each storage is its table's own (`IDKeys.withUnsafeMutablePointer`
        // makes it unique; the new ones are not shared yet).
        newKeys.withUnsafeMutablePointer { nk in
            newValues.withUnsafeMutableBufferPointer { nv in
                keys.withUnsafeMutablePointer { ok in
                    values.withUnsafeBufferPointer { ov in
                        for j in 0..<old {
                            guard let v = ov[j] else { continue }
                            // The invariant: a slot with a value has a key.
                            guard let k = (ok + j).move() else {
                                preconditionFailure("IDTable slot \(j) has a value but no key")
                            }
                            (ok + j).initialize(to: nil)
                            var i = Self.home(k, mask: mask)
                            while nv[i] != nil { i = (i + 1) & mask }
                            (nk + i).pointee = k
                            nv[i] = v
                        }
                    }
                }
            }
        }
        keys = newKeys
        values = newValues
    }

    /// Every stored object.
    var allValues: [Unmanaged<ManagedObject>] {
        var out: [Unmanaged<ManagedObject>] = []
        out.reserveCapacity(count)
        for case let v? in values { out.append(v) }
        return out
    }
}

/// The key slots of an `IDTable`: `count` optional IDs (nil: free) in a
/// buffer of their own, copied on write.
///
/// Why not `[ManagedObjectID?]`: an array of them is filled and destroyed
/// through the runtime's generic paths (each slot copied or destroyed
/// through its value witnesses: tens of instructions a slot), and a table
/// has twice as many slots as objects, made when it grows and destroyed
/// with its context (a fetch of a thousand objects into a new context makes
/// and destroys two thousand). `IDKeySlots` fills and destroys them with
/// code specialized for `ManagedObjectID?`, as `ValueSlots` does for values.
///
/// Invariant: `storage` is nil exactly when `count` is 0; otherwise it has
/// `count` initialized slots.
struct IDKeys {
    private var storage: IDKeySlots?
    /// The number of slots.
    private(set) var count = 0

    /// No slots.
    init() {}

    /// `capacity` free slots.
    init(capacity: Int) {
        count = capacity
        storage = capacity > 0 ? IDKeySlots.make(count: capacity, from: nil) : nil
    }

    /// The key in slot `i` (`0 ..< count`).
    subscript(i: Int) -> ManagedObjectID? {
        @inline(__always) get {
            precondition(i >= 0 && i < count, "IDTable key slot \(i) out of \(count)")
            return storage.unsafelyUnwrapped.withUnsafeMutablePointerToElements { $0[i] }
        }
        @inline(__always) set {
            precondition(i >= 0 && i < count, "IDTable key slot \(i) out of \(count)")
            makeUnique()
            storage.unsafelyUnwrapped.withUnsafeMutablePointerToElements { $0[i] = newValue }
        }
    }

    /// `body` with the first of the `count` slots, unshared (with no
    /// slots: a pointer to one free slot, which `body` must not change).
    mutating func withUnsafeMutablePointer<R>(_ body: (UnsafeMutablePointer<ManagedObjectID?>) -> R) -> R {
        guard count > 0 else {
            var none: ManagedObjectID? = nil
            return body(&none)
        }
        makeUnique()
        let s = storage.unsafelyUnwrapped
        return withExtendedLifetime(s) { s.withUnsafeMutablePointerToElements { body($0) } }
    }

    /// Copies the storage if another table shares it (a copied table).
    @inline(__always)
    private mutating func makeUnique() {
        guard !isKnownUniquelyReferenced(&storage), let s = storage else { return }
        storage = s.withUnsafeMutablePointerToElements { IDKeySlots.make(count: count, from: $0) }
    }
}

/// `IDKeys`' buffer (the header is the number of slots).
final class IDKeySlots: ManagedBuffer<Int, ManagedObjectID?> {
    /// A storage of `count` slots, copied from `source` (or all nil).
    static func make(count: Int, from source: UnsafePointer<ManagedObjectID?>?) -> IDKeySlots {
        let s = unsafeDowncast(IDKeySlots.create(minimumCapacity: count) { _ in count }, to: IDKeySlots.self)
        s.withUnsafeMutablePointerToElements { p in
            // One element at a time: `initialize(from:count:)` would copy
            // through the generic runtime.
            if let source {
                for k in 0..<count { (p + k).initialize(to: source[k]) }
            } else {
                for k in 0..<count { (p + k).initialize(to: nil) }
            }
        }
        return s
    }

    deinit {
        withUnsafeMutablePointers { h, p in
            // One element at a time, for the same reason as in `make`.
            for k in 0..<h.pointee { _ = (p + k).move() }
        }
    }
}
