// AttributeValues: an object's attribute values, stored by attribute ordinal.
//
// Layout: one slot per attribute of the entity, in the order of
// `EntityDescription.attributes` (an attribute's ordinal is its index there;
// `EntityDescription.attributeOrdinals` maps names to ordinals, built once per
// entity). A slot holds the attribute's value in its stored form (Value), or
// nil when it was never set (an object whose values are not loaded): the same
// distinction the former name-keyed dictionary made between a missing key and
// a stored null, so equality and "what changed" comparisons are unchanged.
//
// Invariants: `storage` is nil (every slot nil, nothing allocated yet: a
// fault) or has exactly one slot per attribute of the entity it was made for
// (ValueSlots, copied on write as an array would be). Two values compare
// equal when every slot is equal (no storage = all nil); they are only ever
// compared for the same entity.
//
// Access by name goes through the object (`ManagedObject.storedValue(named:)`),
// which resolves the name to its ordinal through its entity's table: the
// values carry no table of their own, so copying them (a snapshot, the saved
// values) retains one buffer.

struct AttributeValues: Equatable {
    /// The values by ordinal (nil: none set yet), copied on write.
    private var storage: ValueSlots?
    /// The number of attributes of the entity.
    let count: Int

    /// No value set, for an object of `entity`.
    init(_ entity: EntityDescription) {
        storage = nil
        count = entity.attributes.count
    }

    /// Every value set from `slots`, one per attribute of the entity in
    /// ordinal order, none nil (a layout's `insertSlots`, a loaded row).
    init(filled slots: [Value?]) {
        count = slots.count
        storage = slots.withUnsafeBufferPointer { ValueSlots.make(count: slots.count, from: $0.baseAddress) }
    }

    /// The values in `slots`, `count` of them (`slots`' header), none nil: a
    /// fault's borrowed load (`ManagedObjectContext.loadBorrowed`), which
    /// filled them in column order. `slots` must not be shared.
    init(slots: ValueSlots, count: Int) {
        self.count = count
        storage = slots
    }

    /// `count` slots, slot `k` set to `value(k)` (a row loaded into an object).
    init(count: Int, _ value: (Int) -> Value) {
        self.count = count
        let s = ValueSlots.make(count: count, from: nil)
        s.withUnsafeMutablePointerToElements { p in
            for k in 0..<count { p[k] = value(k) }
        }
        storage = s
    }

    /// The value of the attribute at `ordinal` (nil if never set).
    @inline(__always)
    subscript(ordinal i: Int) -> Value? {
        get {
            // `count`, not the storage's header (the same number, by the
            // invariant): reading a class's stored property costs a dynamic
            // exclusivity check, reading through its pointer does not.
            guard i < count, let storage else { return nil }
            return storage.withUnsafeMutablePointerToElements { $0[i] }
        }
        set {
            if storage == nil {
                storage = ValueSlots.make(count: count, from: nil)
            } else if !isKnownUniquelyReferenced(&storage) {
                storage = storage.map { s in s.withUnsafeMutablePointerToElements { ValueSlots.make(count: count, from: $0) } }
            }
            // The branches above left a storage of `count` slots (optional
            // chaining, not a binding: a binding would retain and release it).
            storage?.withUnsafeMutablePointerToElements { $0[i] = newValue }
        }
    }

    /// Whether the value at `ordinal` is nil, null, or the stored form of
    /// one of the common plain types (`type`: string, the integers,
    /// double, bool, date): a value whose Swift value cannot fail to be
    /// made. Read in place, without copying the value.
    @inline(__always)
    func holdsPlainValue(ordinal i: Int, of type: AttributeType?) -> Bool {
        guard i < count, let storage else { return true }
        return storage.withUnsafeMutablePointerToElements { p in
            switch (type, p[i]) {
            case (_, nil), (_, .null?), (.string?, .text?), (.int64?, .integer?), (.int32?, .integer?), (.int16?, .integer?),
                 (.double?, .double?), (.bool?, .bool?), (.date?, .double?):
                return true
            default:
                return false
            }
        }
    }

    /// Whether `holdsPlainValue(ordinal:of:)` holds for every ordinal, with
    /// `types` the entity's storage types by ordinal (one pass in place).
    @inline(__always)
    func holdsPlainValues(of types: [AttributeType?]) -> Bool {
        guard let storage else { return true }
        let n = Swift.min(count, types.count)
        return types.withUnsafeBufferPointer { t in
            storage.withUnsafeMutablePointerToElements { p in
                for i in 0..<n {
                    switch (t[i], p[i]) {
                    case (_, nil), (_, .null?), (.string?, .text?), (.int64?, .integer?), (.int32?, .integer?), (.int16?, .integer?),
                         (.double?, .double?), (.bool?, .bool?), (.date?, .double?):
                        continue
                    default:
                        return false
                    }
                }
                return true
            }
        }
    }

    /// Writes the value of each ordinal `k` into `out[columns[k]]` (null
    /// for nil), skipping ordinals whose column is negative: a plain
    /// layout's row (`RowLayout.fill`). Every column must be an index of
    /// `out` (the layout's columns, which `out` is as wide as).
    func write(into out: inout [Value], columns: [Int]) {
        let n = Swift.min(count, columns.count)
        out.withUnsafeMutableBufferPointer { dst in
            columns.withUnsafeBufferPointer { cols in
                guard let storage else {
                    for k in 0..<n where cols[k] >= 0 { dst[cols[k]] = .null }
                    return
                }
                storage.withUnsafeMutablePointerToElements { p in
                    for k in 0..<n where cols[k] >= 0 { dst[cols[k]] = p[k] ?? .null }
                }
            }
        }
    }

    static func == (a: AttributeValues, b: AttributeValues) -> Bool {
        if a.storage === b.storage { return true }
        guard let sa = a.storage, let sb = b.storage else {
            // One has no storage (all nil): equal when the other holds no value.
            let (full, n) = a.storage == nil ? (b.storage, b.count) : (a.storage, a.count)
            return full.map { s in s.withUnsafeMutablePointerToElements { p in (0..<n).allSatisfy { p[$0] == nil } } } ?? true
        }
        guard a.count == b.count else { return false }
        return sa.withUnsafeMutablePointerToElements { pa in
            sb.withUnsafeMutablePointerToElements { pb in
                for k in 0..<a.count where pa[k] != pb[k] { return false }
                return true
            }
        }
    }
}

/// The slots of `AttributeValues`: one `Value?` per attribute, in a buffer
/// of its own (the header is the number of slots).
///
/// Why not `[Value?]`: an array of `Value?` is made, copied and destroyed
/// through the runtime's generic paths (the array's type metadata looked up
/// per allocation, each element copied and destroyed through its value
/// witnesses), which was several percent of an insert-heavy save (the first
/// write to a new object copies its defaults; each object's values are
/// destroyed with it). This class has fixed metadata, and copies and
/// destroys its slots with code specialized for `Value?`.
///
/// Invariants: slots `0..<header` are initialized. Changed only through
/// `AttributeValues`, which copies a storage that is not uniquely
/// referenced before writing to it.
final class ValueSlots: ManagedBuffer<Int, Value?> {
    /// A storage of `count` slots, copied from `source` (or all nil).
    static func make(count: Int, from source: UnsafePointer<Value?>?) -> ValueSlots {
        let s = unsafeDowncast(ValueSlots.create(minimumCapacity: count) { _ in count }, to: ValueSlots.self)
        s.withUnsafeMutablePointerToElements { p in
            // One element at a time: `initialize(from:count:)` would copy
            // through the generic runtime (see above).
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

extension ManagedObject {
    /// The stored value of the attribute `name` (nil if never set or unknown).
    func storedValue(named name: String) -> Value? {
        entity.ordinal(ofAttribute: name).flatMap { values[ordinal: $0] }
    }

    /// Sets the stored value of the attribute `name` (ignored if unknown:
    /// callers check names against the entity first).
    func setStoredValue(_ v: Value?, named name: String) {
        if let i = entity.ordinal(ofAttribute: name) { values[ordinal: i] = v }
    }
}
