// PendingIndex: equality indexes over a context's pending objects, so that a
// fetch in a context with many unsaved objects does not evaluate its
// predicate on every one of them (issue 15: find-or-create importers, which
// fetch "the country with this code" before each insert, grew quadratically).
//
// An index maps (table, attribute) → value → the pending objects (inserted,
// or saved and changed) holding that value. It is made by the first fetch
// whose predicate has a top-level conjunct `attribute == constant` and kept up
// to date incrementally:
//   - objects that became pending since the last use are found by position
//     in the context's `inserted` and `touchedOrder` arrays, which only grow
//     until a save, rollback or reset clears them; whatever removes an
//     element from them (undo of an insert, a merge dropping an object)
//     drops the indexes too (`clearPendingIndexes`);
//   - a pending object already indexed sets `indexWatch`, and every later
//     change of its values (any path: setters, undo, merges) marks it dirty
//     (`ManagedObject.values` didSet), so it is re-filed at the next use.
// The index only narrows: the fetch still evaluates the whole predicate on
// every object it returns, so a value filed under a key the evaluator would
// not call equal costs time, never a wrong answer. Keys are made only where
// equality is plain (no [c]/[d] options; integers with integer constants,
// floating and date values as doubles, text, booleans); other predicates use
// the full scan of pending objects as before.

final class PendingIndexes {
    struct Key: Hashable {
        let table: String
        let attribute: String
    }

    /// value key → pending objects with that value, per index.
    var buckets: [Key: [Value: [ObjectIdentifier: ManagedObject]]] = [:]
    /// The key each indexed object is filed under, per index.
    var filed: [Key: [ObjectIdentifier: Value]] = [:]
    /// How much of `inserted` / `touchedOrder` the indexes have seen.
    var seenInserted = 0
    var seenTouched = 0
    /// Indexed objects whose values changed since the last use.
    var dirty: [ObjectIdentifier: ManagedObject] = [:]
    /// Every object filed (its `indexWatch` is set).
    var watched: [ObjectIdentifier: ManagedObject] = [:]
}

extension ManagedObjectContext {
    /// The pending objects a fetch of `e` must consider for `predicate`: the
    /// bucket of its most selective `attribute == constant` conjunct, or nil
    /// when it has none usable (the caller then takes every pending object).
    func pendingCandidates(_ e: EntityDescription, _ predicate: KuraPredicate?) -> [ManagedObject]? {
        guard let predicate else { return nil }
        var best: [ManagedObject]?
        for part in QueryPlannerConjuncts.split(predicate) {
            guard let (a, value) = Self.indexableEquality(part, e), let key = Self.indexKey(value, a.type) else { continue }
            let bucket = pendingBucket(PendingIndexes.Key(table: e.hierarchy.table, attribute: a.name), a, key)
            if best == nil || bucket.count < best!.count { best = bucket }  // `best!`: checked non-nil on the left
            if best?.isEmpty == true { break }
        }
        return best
    }

    /// `attribute == constant` (either way round) on an attribute of `e`.
    static func indexableEquality(_ p: KuraPredicate, _ e: EntityDescription) -> (AttributeDescription, Value)? {
        guard case .comparison(let c) = p, c.quantifier == .direct, c.operator == .equalTo, c.options.rawValue == 0 else { return nil }
        switch (c.left, c.right) {
        case (.keyPath(let k), .constant(let v)), (.constant(let v), .keyPath(let k)):
            guard k.count == 1, let a = e.attributesByName[k[0]], !a.isTransient else { return nil }
            return (a, v)
        default:
            return nil
        }
    }

    /// The key a value is filed under for an attribute of `type`, or nil
    /// where plain equality of keys would not match the evaluator's.
    static func indexKey(_ v: Value, _ type: AttributeType) -> Value? {
        switch (type, v) {
        case (.int16, .integer), (.int32, .integer), (.int64, .integer): return v
        case (.double, .double(let d)), (.float, .double(let d)), (.date, .double(let d)): return d.isNaN ? nil : .double(d == 0 ? 0 : d)
        case (.double, .integer(let i)), (.float, .integer(let i)), (.date, .integer(let i)): return .double(Double(i))
        case (.string, .text), (.bool, .bool): return v
        default: return nil
        }
    }

    /// The pending objects whose `a` equals `key`, after bringing the index
    /// up to date (made on first use).
    func pendingBucket(_ index: PendingIndexes.Key, _ a: AttributeDescription, _ key: Value) -> [ManagedObject] {
        let p = pendingIndexes ?? PendingIndexes()
        pendingIndexes = p
        if p.buckets[index] == nil {
            p.buckets[index] = [:]
            p.filed[index] = [:]
            for o in inserted.prefix(p.seenInserted) + touchedOrder.prefix(p.seenTouched) { file(o, p) }
        }
        // `inserted` and `touchedOrder` only grow until a save, rollback or
        // reset, which drop the indexes (clearPendingIndexes).
        for o in inserted.dropFirst(p.seenInserted) + touchedOrder.dropFirst(p.seenTouched) { file(o, p) }
        p.seenInserted = inserted.count
        p.seenTouched = touchedOrder.count
        if !p.dirty.isEmpty {
            let changed = p.dirty.values
            p.dirty = [:]
            for o in changed { file(o, p) }
        }
        return p.buckets[index]?[key].map { Array($0.values) } ?? []
    }

    /// Files `o` under its current values in every index of its table.
    private func file(_ o: ManagedObject, _ p: PendingIndexes) {
        o.indexWatch = true
        let id = ObjectIdentifier(o)
        p.watched[id] = o
        for index in p.buckets.keys where index.table == o.entity.hierarchy.table {
            let old = p.filed[index]?[id]
            let new = o.entity.attributesByName[index.attribute].flatMap { Self.indexKey(o.storedValue(named: index.attribute) ?? .null, $0.type) }
            if old == new, old != nil { continue }
            if let old { p.buckets[index]?[old]?[id] = nil }
            p.filed[index]?[id] = new
            if let new { p.buckets[index]?[new, default: [:]][id] = o }
        }
    }

    /// Called by an indexed object whose values changed.
    func pendingValuesChanged(_ o: ManagedObject) {
        pendingIndexes?.dirty[ObjectIdentifier(o)] = o
    }

    /// Drops the indexes (the pending objects were saved, rolled back or reset).
    func clearPendingIndexes() {
        guard let p = pendingIndexes else { return }
        for o in p.watched.values { o.indexWatch = false }
        pendingIndexes = nil
    }
}
