// PendingIndex: equality indexes over a context's pending objects, so that a
// fetch in a context with many unsaved objects does not evaluate its
// predicate on every one of them (issue 15: find-or-create importers, which
// fetch "the country with this code" before each insert, grew quadratically).
//
// An index maps (table, attribute) → value → the pending objects (inserted,
// or saved and changed) holding that value. It is made by the first fetch
// whose predicate has a top-level conjunct `attribute == constant` or
// `attribute IN {constants}` (the importer's batch lookup, "uniqueID IN %@":
// the union of the members' buckets) and kept up to date incrementally:
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
    /// One index: the pending objects of `table` by their value of `attribute`.
    final class Index {
        let table: String
        let attribute: String
        /// value key → pending objects with that value.
        var buckets: [Value: [ObjectIdentifier: ManagedObject]] = [:]
        /// The key each filed object is filed under.
        var filed: [ObjectIdentifier: Value] = [:]

        init(table: String, attribute: String) {
            self.table = table
            self.attribute = attribute
        }
    }

    /// The indexes, in the order fetches made them (a context has a few:
    /// found by comparing names, no hashing).
    var indexes: [Index] = []
    /// How much of `inserted` / `touchedOrder` the indexes have seen.
    var seenInserted = 0
    var seenTouched = 0
    /// Indexed objects whose values changed since the last use.
    var dirty: [ObjectIdentifier: ManagedObject] = [:]
    /// Every object filed (its `indexWatch` is set).
    var watched: [ObjectIdentifier: ManagedObject] = [:]

    /// The index of `attribute` of `table`, if made.
    func index(_ table: String, _ attribute: String) -> Index? {
        for x in indexes where x.attribute == attribute && x.table == table { return x }
        return nil
    }
}

extension ManagedObjectContext {
    /// The pending objects a fetch of `e` must consider for `predicate`: the
    /// bucket of its most selective `attribute == constant` conjunct, or nil
    /// when it has none usable (the caller then takes every pending object).
    func pendingCandidates(_ e: EntityDescription, _ predicate: KuraPredicate?) -> [ManagedObject]? {
        guard let predicate else { return nil }
        if case .comparison = predicate {
            // One comparison (a find-or-create's `code == x`): no conjunct list.
            guard let (attribute, keys) = Self.indexableKeys(predicate, e) else { return nil }
            return pendingBuckets(e.hierarchy.table, attribute, keys)
        }
        var best: [ManagedObject]?
        for part in QueryPlannerConjuncts.split(predicate) {
            guard let (attribute, keys) = Self.indexableKeys(part, e) else { continue }
            let bucket = pendingBuckets(e.hierarchy.table, attribute, keys)
            if best == nil || bucket.count < best!.count { best = bucket }  // `best!`: checked non-nil on the left
            if best?.isEmpty == true { break }
        }
        return best
    }

    /// `attribute == constant` (either way round) or `attribute IN
    /// {constants}` on an attribute of `e`, with the keys its matches are
    /// filed under (`indexKey`). Nil when a constant has no key (a null, a
    /// value of another kind: the evaluator may call it equal to values
    /// filed under other keys), or for options, quantifiers and other
    /// operators.
    static func indexableKeys(_ p: KuraPredicate, _ e: EntityDescription) -> (String, [Value])? {
        guard case .comparison(let c) = p, c.quantifier == .direct, c.options.rawValue == 0 else { return nil }
        // By ordinal: reading fields in place copies no description.
        func attribute(_ k: [String]) -> Int? {
            guard k.count == 1, let i = e.ordinal(ofAttribute: k[0]), !e.attributes[i].isTransient else { return nil }
            return i
        }
        switch (c.operator, c.left, c.right) {
        case (.equalTo, .keyPath(let k), .constant(let v)), (.equalTo, .constant(let v), .keyPath(let k)):
            guard let i = attribute(k), let key = indexKey(v, e.attributes[i].type) else { return nil }
            return (k[0], [key])
        case (.in, .keyPath(let k), .aggregate(let members)):
            guard let i = attribute(k) else { return nil }
            let type = e.attributes[i].type
            var keys: [Value] = []
            keys.reserveCapacity(members.count)
            for m in members {
                guard case .constant(let v) = m, let key = indexKey(v, type) else { return nil }
                keys.append(key)
            }
            return (k[0], keys)
        default:
            return nil
        }
    }

    /// The pending objects of `table` whose `attribute` equals one of
    /// `keys` (each once: an object is filed under one key per index).
    func pendingBuckets(_ table: String, _ attribute: String, _ keys: [Value]) -> [ManagedObject] {
        if keys.count == 1 { return pendingBucket(table, attribute, keys[0]) }
        var out: [ManagedObject] = []
        for key in Set(keys) { out += pendingBucket(table, attribute, key) }
        return out
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

    /// The pending objects of `table` whose `attribute` equals `key`, after
    /// bringing the indexes up to date (this one made on first use).
    func pendingBucket(_ table: String, _ attribute: String, _ key: Value) -> [ManagedObject] {
        let p = pendingIndexes ?? PendingIndexes()
        pendingIndexes = p
        let index: PendingIndexes.Index
        if let x = p.index(table, attribute) {
            index = x
        } else {
            index = PendingIndexes.Index(table: table, attribute: attribute)
            p.indexes.append(index)
            for o in inserted.prefix(p.seenInserted) { file(o, p) }
            for o in touchedOrder.prefix(p.seenTouched) { file(o, p) }
        }
        // `inserted` and `touchedOrder` only grow until a save, rollback or
        // reset, which drop the indexes (clearPendingIndexes).
        if p.seenInserted < inserted.count {
            for o in inserted[p.seenInserted...] { file(o, p) }
            p.seenInserted = inserted.count
        }
        if p.seenTouched < touchedOrder.count {
            for o in touchedOrder[p.seenTouched...] { file(o, p) }
            p.seenTouched = touchedOrder.count
        }
        if !p.dirty.isEmpty {
            let changed = p.dirty.values
            p.dirty = [:]
            for o in changed { file(o, p) }
        }
        guard let bucket = index.buckets[key] else { return [] }
        return Array(bucket.values)
    }

    /// Files `o` under its current values in every index of its table
    /// (objects of tables without an index are left alone: an index made
    /// later files every pending object it has not seen).
    private func file(_ o: ManagedObject, _ p: PendingIndexes) {
        let table = o.entity.hierarchy.table
        var watching = false
        for index in p.indexes where index.table == table {
            if !watching {
                watching = true
                o.indexWatch = true
                p.watched[ObjectIdentifier(o)] = o
            }
            let id = ObjectIdentifier(o)
            let old = index.filed[id]
            let new = o.entity.ordinal(ofAttribute: index.attribute).flatMap { i in
                Self.indexKey(o.values[ordinal: i] ?? .null, o.entity.attributes[i].type)
            }
            if old == new, old != nil { continue }
            if let old { index.buckets[old]?[id] = nil }
            index.filed[id] = new
            if let new { index.buckets[new, default: [:]][id] = o }
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
