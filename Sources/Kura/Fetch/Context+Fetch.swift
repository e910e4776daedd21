// Context+Fetch: running fetch requests.
//
// Two paths, one semantics (the engine's evaluator and ordering rules serve both):
//   - store path: the predicate and sort keys name only the entity's own
//     attributes and the context has no pending change to the entity: the whole
//     request (predicate, sort, offset, limit) runs in the engine, which uses
//     indexes where it can. A predicate or sort through relationships runs
//     there too, as engine joins and lookups (EntityPredicate.swift), when it
//     translates and no pending change lies in a table a join or lookup
//     reads; with pending changes of the fetched entity's table only, the
//     engine's joined matches for the saved state are corrected in memory
//     (changed and deleted objects out, pending ones in, the predicate
//     evaluated on them, sorted and paged there);
//   - object path: otherwise. The engine narrows candidates with the top-level
//     AND conjuncts that name only attributes; pending inserted and changed
//     objects are added and deleted ones dropped (includesPendingChanges); the
//     whole predicate is evaluated on objects (relationships resolved through
//     the context), then sorted (through to-one key paths), then offset and limit.
//
// Entity hierarchies (EntityHierarchy.swift): both paths read the hierarchy's
// table narrowed by `_entity` to the fetched entity (and, by
// `includesSubentities`, its descendants); each row becomes an object of its
// own entity. `entity.name` in a predicate is pushed down as `_entity`.

import Foundation

/// Aggregate functions for `ManagedObjectContext.aggregate`.
public enum AggregateFunction: String, Sendable, CaseIterable {
    case count, sum, min, max, average
}

extension ManagedObjectContext {
    /// The objects matching `request`, in order.
    ///
    /// With `fetchBatchSize` > 0 (and no pending changes to the entity), the
    /// matching IDs are found at once but the objects come back as faults
    /// whose values load a batch at a time: touching one loads its whole batch
    /// in one read (Core Data's batched fetch).
    ///
    /// - Throws: the context's ``pendingError`` first; `.invalidArgument` if
    ///   `resultType` is not `.managedObjects` (use ``execute(_:)``,
    ///   `count(for:)`, `fetchObjectIDs` or `fetchDictionaries`); `.notFound`
    ///   for an unknown entity or key (named); `.typeMismatch` if the entity's
    ///   class is not a `T`; predicate evaluation errors; engine errors.
    public func fetch<T: ManagedObject>(_ request: FetchRequest<T>) throws(KuraError) -> [T] {
        processPendingChanges()
        guard request.resultType == .managedObjects else {
            try throwPendingError()
            throw KuraError(.invalidArgument, "fetch returns objects, but the request's resultType is \(request.resultType); use execute(_:) (or count(for:), fetchObjectIDs, fetchDictionaries)")
        }
        let e = try model.entity(request.entityName)
        guard e.objectClass is T.Type else {
            try throwPendingError()
            throw KuraError(.typeMismatch, "entity \"\(e.name)\" makes \(e.objectClass) objects, not \(T.self); fetch it as FetchRequest<\(e.objectClass)> or FetchRequest<ManagedObject>")
        }
        let objects: [ManagedObject]
        if request.fetchBatchSize > 0 && !hasPendingChanges(e, request) {
            let ids = try matching(request, materialize: false).ids
            var faults: [ManagedObject] = []
            faults.reserveCapacity(ids.count)
            for start in stride(from: 0, to: ids.count, by: request.fetchBatchSize) {
                let slice = Array(ids[start..<Swift.min(start + request.fetchBatchSize, ids.count)])
                let group = BatchGroup(slice)
                for id in slice {
                    let o = try object(with: id, canonical: true)
                    if o.isFault { batchGroups[id] = group }
                    faults.append(o)
                }
            }
            objects = faults
        } else {
            objects = try matching(request).objects
            try prefetch(objects, keyPaths: request.relationshipKeyPathsForPrefetching, of: e)  // Context+Prefetch.swift
        }
        // A loop, not `map` (which runs unspecialized here, T being generic);
        // an object of the class the last cast accepted needs no cast of its own.
        var out: [T] = []
        out.reserveCapacity(objects.count)
        var accepted: ObjectIdentifier?
        for o in objects {
            let c = ObjectIdentifier(type(of: o))
            if c == accepted {
                out.append(unsafeDowncast(o, to: T.self))
                continue
            }
            guard let t = o as? T else {
                throw KuraError(.typeMismatch, "\(o) is a \(type(of: o)), not a \(T.self); check the entity's class in the model")
            }
            accepted = c
            out.append(t)
        }
        return out
    }

    /// Runs `request` and returns what its `resultType` asks for: objects,
    /// object IDs, the count, or dictionaries (Core Data's `execute`).
    ///
    /// - Throws: as `fetch`, `count(for:)`, `fetchDictionaries`.
    public func execute<T: ManagedObject>(_ request: FetchRequest<T>) throws(KuraError) -> FetchOutput<T> {
        switch request.resultType {
        case .managedObjects: return .objects(try fetch(request))
        case .managedObjectIDs: return .objectIDs(try fetchObjectIDs(request))
        case .count: return .count(try count(for: request))
        case .dictionaries(let properties, let distinct):
            return .dictionaries(try fetchDictionaries(request, properties: properties, distinct: distinct))
        }
    }

    /// The objects matching `request` as a collection that materializes them
    /// `fetchBatchSize` at a time while iterating (all at once if 0). Only the
    /// current batch is held, so iterating a million rows stays within memory.
    ///
    /// - Throws: as `fetch`.
    public func fetchResults<T: ManagedObject>(_ request: FetchRequest<T>) throws(KuraError) -> FetchResults<T> {
        let e = try model.entity(request.entityName)
        guard e.objectClass is T.Type else {
            throw KuraError(.typeMismatch, "entity \"\(e.name)\" makes \(e.objectClass) objects, not \(T.self)")
        }
        return FetchResults(context: self, entity: e, ids: try matching(request, materialize: false).ids, batchSize: request.fetchBatchSize)
    }

    /// IDs of the objects matching `request`.
    public func fetchObjectIDs<T: ManagedObject>(_ request: FetchRequest<T>) throws(KuraError) -> [ManagedObjectID] {
        Array(try matching(request, materialize: false).ids)
    }

    /// Number of objects matching `request` (after offset and limit).
    public func count<T: ManagedObject>(for request: FetchRequest<T>) throws(KuraError) -> Int {
        try throwPendingError()
        try drainInbox()
        processPendingChanges()
        let e = try model.entity(request.entityName)
        if parent == nil && request.predicate == nil && request.fetchOffset == 0 && (request.fetchLimit ?? 0) == 0 && !hasPendingChanges(e, request)
            && model.entityFilter(e, includingSubentities: request.includesSubentities) == nil {
            return try read { tx throws(KuraError) in try tx.rowCount(try tx.table(e.hierarchy.table)) }
        }
        return try matching(request, materialize: false).ids.count
    }

    /// One dictionary per matching object, holding the requested properties
    /// (attributes or to-one key paths like `record.grade`), optionally distinct.
    public func fetchDictionaries<T: ManagedObject>(_ request: FetchRequest<T>, properties: [String], distinct: Bool = false) throws(KuraError) -> [[String: Any]] {
        let objects = try matching(request).objects
        var out: [[String: Any]] = []
        var seen = Set<[Value]>()
        for o in objects {
            var d: [String: Any] = [:]
            var key: [Value] = []
            for p in properties {
                let (v, attribute) = try valueAt(p, of: o)
                key.append(v)
                let swift: Any? = try attribute.map { a throws(KuraError) in try a.swiftValue(v, of: o.objectID) } ?? (v.isNull ? nil : v)
                if let swift { d[p] = swift }
            }
            if distinct && !seen.insert(key).inserted { continue }
            out.append(d)
        }
        return out
    }

    /// An aggregate of a key path over the objects matching `request`: count of
    /// non-nil values, sum, min, max or average (nil values skipped). Returns
    /// `.null` for min/max/average of nothing.
    public func aggregate<T: ManagedObject>(_ function: AggregateFunction, of keyPath: String, matching request: FetchRequest<T>) throws(KuraError) -> Value {
        let values = try matching(request).objects.map { o throws(KuraError) in
            let (v, a) = try valueAt(keyPath, of: o)
            return a?.type.engineValue(v) ?? v
        }.filter { !$0.isNull }
        switch function {
        case .count:
            return .integer(Int64(values.count))
        case .min:
            return values.min { ValueOrdering.compare($0, $1) < 0 } ?? .null
        case .max:
            return values.max { ValueOrdering.compare($0, $1) < 0 } ?? .null
        case .sum, .average:
            var intSum: Int64 = 0
            var dbl = 0.0
            var allInts = true
            for v in values {
                switch v {
                case .integer(let i):
                    let (s, o) = intSum.addingReportingOverflow(i)
                    if o { allInts = false } else { intSum = s }
                    dbl += Double(i)
                case .double(let d): allInts = false; dbl += d
                default: throw KuraError(.typeMismatch, "cannot \(function.rawValue) \"\(keyPath)\": \(v.typeName) values are not numbers")
                }
            }
            if function == .average { return values.isEmpty ? .null : .double(dbl / Double(values.count)) }
            return allInts ? .integer(intSum) : .double(dbl)
        }
    }

    /// The stored value at a key path of an object, and the attribute type it has.
    func valueAt(_ keyPath: String, of o: ManagedObject) throws(KuraError) -> (Value, AttributeDescription?) {
        var current: ManagedObject? = o
        let keys = keyPath.split(separator: ".").map(String.init)
        for (i, k) in keys.enumerated() {
            guard let obj = current else { return (.null, nil) }
            if i == keys.count - 1, let a = obj.entity.attributesByName[k] {
                try obj.loadIfFault()
                return (obj.storedValue(named: k) ?? .null, a)
            }
            guard let r = obj.entity.relationshipsByName[k], !r.isToMany else {
                throw KuraError(.notFound, "key path \"\(keyPath)\": entity \"\(obj.entity.name)\" has no attribute or to-one relationship \"\(k)\"")
            }
            current = try relatedObject(obj, r)
        }
        return (.null, nil)
    }

    func hasPendingChanges(_ e: EntityDescription, _ request: FetchRequest<some ManagedObject>) -> Bool {
        let sub = request.includesSubentities
        return request.includesPendingChanges && (inserted.contains { fetches($0.entity, e, sub) } || deleted.contains { fetches($0.entity, e, sub) }
            || touchedOrder.contains { fetches($0.entity, e, sub) && $0.hasChangedValues })
    }

    /// Whether a fetch of `e` returns objects of entity `x`.
    @inline(__always)
    func fetches(_ x: EntityDescription, _ e: EntityDescription, _ includesSubentities: Bool) -> Bool {
        x === e || (includesSubentities && e.hierarchy.kinds.contains(x.name))
    }

    /// Whether an expression reads nothing but the entity's own attributes.
    static func onlyAttributes(_ p: KuraPredicate, _ e: EntityDescription) -> Bool {
        switch p {
        case .truePredicate, .falsePredicate: return true
        case .not(let x): return onlyAttributes(x, e)
        case .and(let xs), .or(let xs): return xs.allSatisfy { onlyAttributes($0, e) }
        case .comparison(let c): return c.quantifier == .direct && onlyAttributes(c.left, e) && onlyAttributes(c.right, e)
        }
    }

    static func onlyAttributes(_ x: KuraExpression, _ e: EntityDescription) -> Bool {
        switch x {
        case .keyPath(let k):
            // By ordinal: reading the field in place copies no description.
            if k.count == 1, let i = e.ordinal(ofAttribute: k[0]) { return e.attributes[i].compositeElements == nil }
            return (e.hierarchy.isShared && EntityPredicate.isEntityName(k, e)) || e.compositeColumn(k) != nil
        case .constant, .date: return true
        case .aggregate(let xs): return xs.allSatisfy { onlyAttributes($0, e) }
        case .function(let f, let xs): return !f.isNondeterministic && xs.allSatisfy { onlyAttributes($0, e) }
        case .binary(_, let a, let b): return onlyAttributes(a, e) && onlyAttributes(b, e)
        case .unary(_, let a), .cast(let a, _): return onlyAttributes(a, e)
        default: return false
        }
    }

    /// The store query for a fetch through relationships, or nil if some key
    /// path has no engine translation (EntityPredicate.swift).
    func joinedQuery<T: ManagedObject>(_ request: FetchRequest<T>, _ e: EntityDescription, kinds: KuraPredicate?, limit: Int?) -> TableQuery? {
        var joined = EntityPredicate.Joined(predicate: kinds)
        if let p = request.predicate {
            guard let t = EntityPredicate.joined(p, e, model) else { return nil }
            joined.add(t)
        }
        var lookups: [ColumnLookup] = []
        for k in request.sortDescriptors where e.attributesByName[k.column] == nil {
            guard let l = EntityPredicate.lookup(k.column, e, model) else { return nil }
            lookups.append(l)
        }
        return TableQuery(e.hierarchy.table, where: joined.predicate, sort: request.sortDescriptors, offset: request.fetchOffset, limit: limit,
                          joins: joined.joins, lookups: lookups)
    }

    /// Whether a pending change (an inserted, changed or deleted object, a
    /// join-table edit) lies in a table that `q`'s joins or lookups read
    /// (its own table counts only when a join reads it again).
    func pendingChangesReach(_ q: TableQuery) -> Bool {
        var tables = Set<String>()
        func collect(_ q: TableQuery) {
            for j in q.joins {
                tables.insert(j.inner.table)
                if case .joinTable(let t, _, _) = j.link { tables.insert(t) }
                collect(j.inner)
            }
            for l in q.lookups { for h in l.hops { tables.insert(h.table) } }
        }
        collect(q)
        if tables.isEmpty { return false }
        for o in inserted + deleted + touchedOrder where tables.contains(o.entity.hierarchy.table) && (o.isNew || o.isDeleted || o.hasChangedValues) {
            return true
        }
        for (table, edits) in joinEdits where !edits.isEmpty && tables.contains(table) { return true }
        return false
    }

    /// What `matching` found: with `materialize`, the objects (and, from
    /// the object path only, their IDs: callers that materialize read the
    /// objects); without, the IDs.
    struct Matches {
        /// The matching IDs (with `materialize: false`), kept compactly.
        var ids = MatchedIDs()
        var objects: [ManagedObject] = []
    }

    func matching<T: ManagedObject>(_ request: FetchRequest<T>, materialize: Bool = true) throws(KuraError) -> Matches {
        try throwPendingError()
        try drainInbox()
        processPendingChanges()
        let e = try model.entity(request.entityName)
        if let problem = e.transientUse(predicate: request.predicate, sort: request.sortDescriptors, model: model) { throw problem }
        guard request.fetchOffset >= 0, (request.fetchLimit ?? 0) >= 0 else {
            throw KuraError(.invalidArgument, "fetch offset and limit must not be negative")
        }
        let limit = (request.fetchLimit ?? 0) > 0 ? request.fetchLimit : nil
        if let parent { return try childMatching(request, e, limit: limit, parent: parent) }  // Context+Parent.swift
        let pushable = request.predicate.map { Self.onlyAttributes($0, e) } ?? true
        let sortable = request.sortDescriptors.allSatisfy { e.attributesByName[$0.column] != nil }
        var result = Matches()

        let kinds = model.entityFilter(e, includingSubentities: request.includesSubentities)
        var storeQuery: TableQuery?
        if FetchPathTesting.objectsOnly {
            // Tests: the in-memory oracle.
        } else if pushable && sortable {
            storeQuery = TableQuery(e.hierarchy.table, where: EntityPredicate.stored(request.predicate, kinds, e), sort: request.sortDescriptors,
                                    offset: request.fetchOffset, limit: limit)
        } else if let q = joinedQuery(request, e, kinds: kinds, limit: limit), !request.includesPendingChanges || !pendingChangesReach(q) {
            // Through relationships: engine joins and lookups (EntityPredicate.swift),
            // while no pending change touches a table a join or lookup reads.
            storeQuery = q
        }
        if let q = storeQuery, !hasPendingChanges(e, request) {
            try read { tx throws(KuraError) in
                if materialize {
                    result.objects = try self.materializeStoreRows(q, e, in: tx)  // Context+Materialize.swift
                    return
                }
                if e.hierarchy.isShared {
                    try self.eachStoreRow(q, e, in: tx) { rowID, values throws(KuraError) in
                        let x = try self.rowEntity(values, rowID: rowID, in: e)
                        result.ids.append(entity: x.name, rowID: rowID)
                    }
                    return
                }
                let cursor = try tx.select(q)
                let name = e.name
                while let row = try cursor.next() {
                    result.ids.append(entity: name, rowID: row.rowID)
                }
            }
            return result
        }

        if var q = storeQuery, !(pushable && sortable) {
            // Through relationships with pending changes of the fetched table
            // only: the engine's matches for the saved state (the joins read
            // nothing pending), then corrected in memory like the object path:
            // changed and deleted objects left out, pending ones added, the
            // whole predicate evaluated, sorted, paged.
            q.offset = 0
            q.limit = nil
            q.sort = []
            var candidates: [ManagedObject] = []
            var seen = Set<ObjectIdentifier>()
            try read { tx throws(KuraError) in
                let cursor = try tx.select(q)
                while let row = try cursor.next() {
                    let values = try tx.valuesOf(row, in: e.hierarchy.table)
                    let o = self.materialize(try self.rowEntity(values, rowID: row.rowID, in: e), rowID: row.rowID, row: values)
                    if o.isDeleted || o.hasChangedValues { continue }
                    if seen.insert(ObjectIdentifier(o)).inserted { candidates.append(o) }
                }
            }
            return try objectMatches(request, e, candidates: candidates, seen: seen, limit: limit)
        }

        // Object path: candidates from the store, narrowed by attribute-only conjuncts.
        let narrowing = request.predicate.map { p -> KuraPredicate? in
            let parts = QueryPlannerConjuncts.split(p).filter { Self.onlyAttributes($0, e) }
            return parts.isEmpty ? nil : (parts.count == 1 ? parts[0] : .and(parts))
        } ?? nil
        var candidates: [ManagedObject] = []
        var seen = Set<ObjectIdentifier>()
        try read { tx throws(KuraError) in
            try self.eachStoreRow(TableQuery(e.hierarchy.table, where: EntityPredicate.stored(narrowing, kinds, e)), e, in: tx) { rowID, values throws(KuraError) in
                let o = self.materialize(try self.rowEntity(values, rowID: rowID, in: e), rowID: rowID, row: values)
                if request.includesPendingChanges && (o.isDeleted || o.hasChangedValues) { return }
                if seen.insert(ObjectIdentifier(o)).inserted { candidates.append(o) }
            }
        }
        return try objectMatches(request, e, candidates: candidates, seen: seen, limit: limit)
    }

    /// The end of a fetch evaluated on objects: `candidates` (stored objects
    /// without pending changes, from the store or a parent context) plus this
    /// context's pending objects of `e` (through an equality index of them
    /// when the predicate allows: PendingIndex.swift), filtered by the
    /// predicate, sorted and paged.
    func objectMatches<T: ManagedObject>(_ request: FetchRequest<T>, _ e: EntityDescription, candidates: [ManagedObject],
                                         seen: Set<ObjectIdentifier>, limit: Int?) throws(KuraError) -> Matches {
        var candidates = candidates, seen = seen
        if request.includesPendingChanges {
            let pending = pendingCandidates(e, request.predicate) ?? (inserted + touchedOrder)
            for o in pending where fetches(o.entity, e, request.includesSubentities) && !o.isDeleted {
                if seen.insert(ObjectIdentifier(o)).inserted { candidates.append(o) }
            }
        }
        var matched: [ManagedObject] = []
        for o in candidates {
            if let p = request.predicate, !(try p.evaluate(with: ObjectView(object: o, context: self))) { continue }
            matched.append(o)
        }
        try sortObjects(&matched, request.sortDescriptors)
        var page = matched.dropFirst(request.fetchOffset)
        if let limit { page = page.prefix(limit) }
        var result = Matches()
        result.objects = Array(page)
        result.ids = MatchedIDs(result.objects.lazy.map(\.objectID))
        return result
    }

    /// Sorts by key paths with the engine's rules: null first ascending, numbers
    /// numerically, text by each key's collation (`SortKey.compareValues`: binary
    /// by Unicode scalars, case- and/or diacritic-insensitive, localized), ties
    /// by object ID (saved objects by row ID, then unsaved ones).
    func sortObjects(_ objects: inout [ManagedObject], _ keys: [SortKey]) throws(KuraError) {
        // One object without sort keys is in order (a find-or-create's
        // fetch finds one); with keys, their key paths are still checked.
        guard !objects.isEmpty, objects.count > 1 || !keys.isEmpty else { return }
        var table: [(ManagedObject, [Value])] = []
        for o in objects {
            var vs: [Value] = []
            for k in keys {
                let (v, a) = try valueAt(k.column, of: o)
                vs.append(a?.type.engineValue(v) ?? v)
            }
            table.append((o, vs))
        }
        table.sort { a, b in
            for (i, k) in keys.enumerated() {
                // The sort key's collation (binary, case/diacritic-insensitive,
                // localized): the same order as the engine's sort and index walks.
                var c = k.compareValues(a.1[i], b.1[i])
                if !k.ascending { c = -c }
                if c != 0 { return c < 0 }
            }
            return Self.idOrder(a.0.objectID, b.0.objectID)
        }
        objects = table.map(\.0)
    }
}

/// For tests: every fetch takes the object path (the in-memory oracle of
/// differential tests).
enum FetchPathTesting {
    @TaskLocal static var objectsOnly = false
}

/// Top-level AND operands of a predicate.
enum QueryPlannerConjuncts {
    static func split(_ p: KuraPredicate) -> [KuraPredicate] {
        if case .and(let xs) = p { return xs.flatMap(split) }
        return [p]
    }
}

extension ReadTransaction {
    /// A row's values (an entity table always stores every column), external
    /// values read from their files while this snapshot keeps them.
    func valuesOf(_ row: Row, in table: String) throws(KuraError) -> [Value] {
        try resolvedValues(of: row, in: try self.table(table))
    }
}

/// Objects of a fetch, materialized in batches while iterating.
///
/// Lifetime: valid while its context is; the IDs were fixed when it was made.
/// Thread rules: the context's. Failures: the subscript cannot throw; if
/// loading a batch fails, the objects of that batch come back as faults, the
/// error is in ``error`` and the context's `pendingError` (the next save or
/// fetch throws it), and reading such a fault reports through the failure
/// channel again. ``object(at:)`` throws instead. An object deleted from the
/// store since the fetch is a fault whose reads report `.notFound`.
public final class FetchResults<T: ManagedObject>: RandomAccessCollection {
    let context: ManagedObjectContext
    let entity: EntityDescription
    /// The matching object IDs, in order, kept as row IDs (MatchedIDs.swift):
    /// 8 bytes a row, not a `ManagedObjectID`'s 32.
    let matched: MatchedIDs
    let batchSize: Int
    private var batchStart = -1
    private var batch: [ManagedObject] = []
    /// The last error loading a batch met (nil if none).
    public private(set) var error: KuraError?

    init(context: ManagedObjectContext, entity: EntityDescription, ids: MatchedIDs, batchSize: Int) {
        self.context = context
        self.entity = entity
        self.matched = ids
        self.batchSize = batchSize > 0 ? batchSize : Swift.max(ids.count, 1)
    }

    /// The matching object IDs, in order: an array made at the first call
    /// and kept from then on (the results keep the IDs more compactly until
    /// asked: 8 bytes a row instead of 32). For one ID, ``objectID(at:)``
    /// makes no array.
    public var ids: [ManagedObjectID] {
        if let made = madeIDs { return made }
        let made = Array(matched)
        madeIDs = made
        return made
    }
    private var madeIDs: [ManagedObjectID]?

    /// The ID of the object at `i` (`0 ..< count`), without loading anything.
    public func objectID(at i: Int) -> ManagedObjectID { matched[i] }

    public var startIndex: Int { 0 }
    public var endIndex: Int { matched.count }

    /// The object at `i`, loading its batch if needed (see the failure rules above).
    public subscript(i: Int) -> T {
        let start = (i / batchSize) * batchSize
        if start != batchStart {
            do { try loadBatch(start) } catch {
                self.error = error
                if context.pendingError == nil { context.pendingError = error }
            }
        }
        // `fetchResults` checked that the entity's class is a T, and every
        // object of the batch was made by the context as that class.
        guard let t = batch[i - start] as? T else { preconditionFailure("\(batch[i - start]) is not a \(T.self) (a Kura bug)") }
        return t
    }

    /// The object at `i`, loaded.
    ///
    /// - Throws: `.notFound` if it was deleted from the store since the fetch;
    ///   engine read errors (`.corrupt`, `.io`).
    public func object(at i: Int) throws(KuraError) -> T {
        let o = self[i]
        try o.loadIfFault()
        return o
    }

    private func loadBatch(_ start: Int) throws(KuraError) {
        let slice = matched[start..<Swift.min(start + batchSize, matched.count)]
        var loaded: [ManagedObject] = []
        loaded.reserveCapacity(slice.count)
        var firstError: KuraError?
        for id in slice {
            do { loaded.append(try context.object(with: id, canonical: true)) } catch {
                // Cannot happen for the permanent IDs of a fetch; kept as a
                // detached fault whose reads report `.misuse`.
                firstError = firstError ?? error
                loaded.append(entity.objectClass.init(entity: entity, objectID: id))
            }
        }
        batch = loaded
        batchStart = start
        try context.loadBatch(BatchGroup(loaded.filter(\.isFault).map(\.objectID)))
        if let firstError { throw firstError }
    }
}
