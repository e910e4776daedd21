// SavedChangeNames: the names of the properties each updated object of a
// save changed, for the persistent history and the did-save
// (`ManagedObjectContext.savedChanges`, Context+Save.swift), found by
// attribute ordinal and to-one position and turned into names once per
// entity and set of changes rather than once per object.
//
// Why: a save of many objects built, per object, a set of names (hashing
// each name), a sorted array of it, and the did-save another set: about
// 4,000 instructions an object. Objects saved together mostly change the
// same properties, so here each object's changes are a bit mask (bit `i`
// for attribute ordinal `i`, then one bit per to-one relationship in model
// order) and the sorted names are made once per distinct mask of an entity
// and shared by every object with that mask (an array is a copy-on-write
// value: the history records hold one buffer). The names are those the
// per-object sets gave: persistent attributes whose value differs from the
// saved one, to-one relationships whose key differs, sorted, each once.
// An entity with more than 64 attributes and to-one relationships takes the
// per-object way (`changedKeysByName`).
//
// Used by one save (or push) on its context's thread, then dropped.

final class SavedChangeNames {
    /// What one entity's changes are named by.
    final class EntityKeys {
        let entity: EntityDescription
        /// The attribute names by ordinal.
        let attributeNames: [String]
        /// The ordinals of the persistent (not transient) attributes.
        let persistentOrdinals: [Int]
        /// The to-one relationships' names, in model order (bit
        /// `attributeNames.count + j` is the `j`th).
        let toOneNames: [String]
        /// The attributes whose last saved value a delete keeps in the
        /// history (`preservesValueInHistoryOnDeletion`), with their ordinals.
        let preserved: [(ordinal: Int, attribute: AttributeDescription)]
        /// Whether every property has a bit in a 64-bit mask.
        let fitsMask: Bool
        /// The sorted names of each mask met so far.
        var named: [(mask: UInt64, names: [String])] = []
        /// The mask asked for last and its names (kept apart: a save's
        /// objects mostly share one, found without searching `named`).
        var lastMask: UInt64 = 0
        var lastNames: [String]?

        init(_ e: EntityDescription) {
            entity = e
            attributeNames = e.attributes.map(\.name)
            persistentOrdinals = e.attributes.indices.filter { !e.attributes[$0].isTransient }
            toOneNames = e.relationships.filter { !$0.isToMany }.map(\.name)
            preserved = e.attributes.enumerated().filter { $0.element.preservesValueInHistoryOnDeletion }.map { ($0.offset, $0.element) }
            fitsMask = attributeNames.count + toOneNames.count <= 64
        }

        /// The sorted names of the properties `mask` has bits for.
        func names(_ mask: UInt64) -> [String] {
            if mask == lastMask, let lastNames { return lastNames }
            lastMask = mask
            for n in named where n.mask == mask {
                lastNames = n.names
                return n.names
            }
            var keys = Set<String>()
            for i in attributeNames.indices where mask & (1 << UInt64(i)) != 0 { keys.insert(attributeNames[i]) }
            for j in toOneNames.indices where mask & (1 << UInt64(attributeNames.count + j)) != 0 { keys.insert(toOneNames[j]) }
            let sorted = keys.sorted()
            // A handful at most in practice; bounded all the same.
            if named.count < 64 { named.append((mask, sorted)) }
            lastNames = sorted
            return sorted
        }
    }

    private var entities: [EntityKeys] = []
    private var last: EntityKeys?

    /// The keys of entity `e` (made on its first use).
    func keys(of e: EntityDescription) -> EntityKeys {
        if let last, last.entity === e { return last }
        let k = entities.first { $0.entity === e } ?? {
            let made = EntityKeys(e)
            entities.append(made)
            return made
        }()
        last = k
        return k
    }

    /// The sorted names of the attributes (persistent ones) and to-one
    /// relationships whose current value or key differs from the saved one.
    func changedKeys(of o: ManagedObject) -> [String] {
        let k = keys(of: o.entity)
        guard k.fitsMask else { return Self.changedKeysByName(o) }
        var mask: UInt64 = 0
        for i in k.persistentOrdinals where o.savedValues?[ordinal: i] != o.values[ordinal: i] { mask |= 1 << UInt64(i) }
        if !o.toOne.isEmpty || !o.savedToOne.isEmpty {
            let base = k.attributeNames.count
            for j in k.toOneNames.indices where o.savedToOne[k.toOneNames[j]] != o.toOne[k.toOneNames[j]] { mask |= 1 << UInt64(base + j) }
        }
        return k.names(mask)
    }

    /// `changedKeys(of:)` by names, per object.
    static func changedKeysByName(_ o: ManagedObject) -> [String] {
        var keys = Set(o.entity.attributes.indices.filter { !o.entity.attributes[$0].isTransient && o.savedValues?[ordinal: $0] != o.values[ordinal: $0] }.map { o.entity.attributes[$0].name })
        keys.formUnion(o.entity.relationships.filter { !$0.isToMany && o.savedToOne[$0.name] != o.toOne[$0.name] }.map(\.name))
        return keys.sorted()
    }
}

extension ContextDidSave {
    /// Adds a save's recorded changes (`ManagedObjectContext.savedChanges`):
    /// inserts and deletes to their lists, each update's properties to its
    /// object's set. Consecutive updates with the same names (one array,
    /// `SavedChangeNames`) share one set, made once.
    mutating func addChanges(_ changes: [PersistentHistoryChange]) {
        var updates = 0
        for c in changes where c.kind == .update { updates += 1 }
        if updates > 0 { updated.reserveCapacity(updated.count + updates) }
        var lastNames: [String] = []
        var lastSet = Set<String>()
        for c in changes {
            switch c.kind {
            case .insert: inserted.append(c.objectID)
            case .update:
                if c.updatedProperties != lastNames {
                    lastNames = c.updatedProperties
                    lastSet = Set(lastNames)
                }
                Self.union(lastSet, into: &updated[c.objectID, default: []])
            case .delete: deleted.append(c.objectID)
            }
        }
    }

    /// `set.formUnion(names)`, sharing `names` when `set` is empty.
    private static func union(_ names: Set<String>, into set: inout Set<String>) {
        if set.isEmpty { set = names } else { set.formUnion(names) }
    }
}
