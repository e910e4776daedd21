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
// Invariants: `slots` is empty (every slot nil, nothing allocated yet: a
// fault) or has exactly one slot per attribute of the entity it was made for.
// Two values compare equal when every slot is equal (empty = all nil); they
// are only ever compared for the same entity.
//
// Access by name goes through the object (`ManagedObject.storedValue(named:)`),
// which resolves the name to its ordinal through its entity's table: the
// values carry no table of their own, so copying them (a snapshot, the saved
// values) retains one buffer.

struct AttributeValues: Equatable {
    /// The values by ordinal (empty: none set yet).
    private(set) var slots: [Value?]
    /// The number of attributes of the entity.
    let count: Int

    /// No value set, for an object of `entity`.
    init(_ entity: EntityDescription) {
        slots = []
        count = entity.attributes.count
    }

    /// Every value set from `slots`, one per attribute of the entity in
    /// ordinal order, none nil (a layout's `insertSlots`: shared until the
    /// first change).
    init(filled slots: [Value?]) {
        self.slots = slots
        count = slots.count
    }

    /// The value of the attribute at `ordinal` (nil if never set).
    @inline(__always)
    subscript(ordinal i: Int) -> Value? {
        get { i < slots.count ? slots[i] : nil }
        set {
            if slots.isEmpty { slots = [Value?](repeating: nil, count: count) }
            slots[i] = newValue
        }
    }

    static func == (a: AttributeValues, b: AttributeValues) -> Bool {
        if a.slots.count == b.slots.count { return a.slots == b.slots }
        let full = a.slots.isEmpty ? b.slots : a.slots
        return full.allSatisfy { $0 == nil }
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
