// Context+Relationships: reading and changing relationships.
//
// A to-one relationship is the object's own foreign key. A to-many whose inverse
// is to-one is the set of objects whose foreign key names this object: read
// from the store (indexed) and corrected by the context's pending changes, so
// both sides always agree without caching. A many-to-many (or a to-many without
// a reciprocal inverse) is a join table, corrected by pending join edits.
// "Reciprocal" is ManagedObjectModel.reciprocalInverse: a relationship whose
// inverse names another one back is kept from its own side only. Transient
// relationships live in memory (Context+TransientRelationships.swift).
//
// Ordering. An ordered one-to-many keeps a position (`<inverse>_order`) in
// each member's row. An ordered join-table relationship (ordered many-to-many,
// ordered without inverse) keeps each member's position in the join row:
// `position` orders the source side's relationship, `inverse_position` the
// target side's, so the two sides of an ordered many-to-many have independent
// orders. Ordered join tables: pending positions live in `joinPositions`
// (table -> pair -> positions); whenever an owner's ordered list changes, every
// member of that list gets a pending position 0, 1, 2, ... (one renumbering
// per change, written at save); reading sorts by pending position, else stored
// position, members without either last in the order they joined. Undo
// restores pending positions with the membership (ContextUndoManager).

extension ManagedObjectContext {
    /// Runs an engine read, keeping typed errors.
    func read<T>(_ body: (ReadTransaction) throws(KuraError) -> T) throws(KuraError) -> T {
        if let tx = enclosingTransaction { return try body(tx) }
        readTransactionCount += 1
        do {
            return try database.read { tx in try body(tx) }
        } catch let e as KuraError {
            throw e
        } catch {
            throw KuraError(.io, "\(error)")
        }
    }

    /// The object a to-one relationship points to (nil if none, deleted, or gone).
    func relatedObject(_ o: ManagedObject, _ r: RelationshipDescription) throws(KuraError) -> ManagedObject? {
        try o.loadIfFault()
        if r.isTransient { return try transientTargets(o, r).first }
        guard let id = o.toOne[r.name] else { return nil }
        let t = try object(with: id, canonical: true)
        if t.isDeleted { return nil }
        if t.isFault {
            do { try load(t) } catch where error.code == .notFound { return nil }
        }
        return t
    }

    /// The objects of a to-many relationship, in order (ordered relationships by
    /// position, others by row ID, unsaved objects last in insertion order).
    func relatedObjects(_ o: ManagedObject, _ r: RelationshipDescription) throws(KuraError) -> [ManagedObject] {
        // The destination and storage the model made once for `r`.
        let plan = model.relationshipPlan(r, in: o.entity)
        let target = try model.destination(of: r, plan: plan)
        switch plan.storage {
        case .transient:
            return try transientTargets(o, r)
        case .foreignKey:
            return try relatedObject(o, r).map { [$0] } ?? []
        case .inverseForeignKey(_, let column, let orderColumn):
            var result: [ManagedObject] = []
            var seen = Set<ObjectIdentifier>()
            if let parent {
                // A child context: the members as the parent sees them (its
                // pending changes included), corrected below by this context's.
                for m in try parentMembers(o, r, parent) where !m.isDeleted && m.toOne[column] == o.objectID {
                    if seen.insert(ObjectIdentifier(m)).inserted { result.append(m) }
                }
            } else if let members = prefetched[o.objectID]?[r.name] {
                // Loaded with the fetch (Context+Prefetch.swift): one object
                // per row, no duplicates to skip.
                result = Self.members(members, of: o, keyedBy: column)
            } else if !o.isNew {
                let owner = o.objectID.rowID
                // The rows whose key names the owner, through the key's
                // index (one object per row: no duplicates to skip);
                // else a query of the target's table, narrowed to the
                // target and its subentities.
                let members = try read { tx throws(KuraError) -> [ManagedObject]? in
                    if let direct = try materializeKeyedRows(target, column: column, keys: [owner], in: tx) { return direct }
                    let key = KuraPredicate.comparison(KuraComparison(.keyPath([column]), .equalTo, .constant(.integer(owner))))
                    let rows = try tx.fetch(TableQuery(target.hierarchy.table, where: model.entityFilter(target, includingSubentities: true).map { .and([key, $0]) } ?? key))
                    var made: [ManagedObject] = []
                    for (rowID, row) in rows { made.append(materialize(try rowEntity(row, rowID: rowID, in: target), rowID: rowID, row: row)) }
                    return made
                }
                result = Self.members(members ?? [], of: o, keyedBy: column)
            }
            // Pending objects that name the owner: inserted ones, and saved
            // ones changed (the store's rows name the owner or not; a saved
            // object may be among the members read above). The set of those
            // is made only when one is met.
            if !inserted.isEmpty || !touchedOrder.isEmpty {
                if seen.isEmpty && !result.isEmpty { seen = Set(result.lazy.map { ObjectIdentifier($0) }) }
                for m in inserted + touchedOrder where model.isKind(m.entity, of: target.name) && !m.isDeleted && m.toOne[column] == o.objectID {
                    if seen.insert(ObjectIdentifier(m)).inserted { result.append(m) }
                }
            }
            if orderColumn != nil {
                let key = column + "_order"
                result.sort { a, b in
                    let x = a.order[key] ?? .infinity, y = b.order[key] ?? .infinity
                    return x != y ? x < y : Self.idOrder(a.objectID, b.objectID)
                }
            } else if !Self.inIDOrder(result) {
                result.sort { Self.idOrder($0.objectID, $1.objectID) }
            }
            return result
        case .joinTable(let table, let forward):
            var ids: [ManagedObjectID] = []
            var storedPosition: [ManagedObjectID: Double] = [:]
            let positionColumn = forward ? "position" : ManagedObjectModel.inversePositionColumn
            if let parent {
                // A child reads the members (in order) through its parent.
                ids = try parentMembers(o, r, parent).map(\.objectID)
            } else if let members = prefetched[o.objectID]?[r.name], !(r.isOrdered && !(joinPositions[table] ?? [:]).isEmpty) {
                // Loaded with the fetch, in stored order (Context+Prefetch.swift;
                // pending positions need the stored ones: read them below).
                ids = members.map(\.objectID)
            } else if !o.isNew {
                let mine = forward ? "source" : "target", theirs = forward ? "target" : "source"
                let rows = try read { tx throws(KuraError) in
                    try tx.fetch(TableQuery(table, where: .comparison(KuraComparison(.keyPath([mine]), .equalTo, .constant(.integer(o.objectID.rowID)))),
                                            sort: [SortKey(positionColumn), SortKey(theirs)]))
                }
                let col = forward ? 1 : 0, pcol = forward ? 2 : 3
                var rids: [Int64] = []
                var positions: [Double] = []
                for (rowID, row) in rows {
                    guard col < row.count, case .integer(let rid) = row[col] else {
                        throw KuraError(.corrupt, "join table \"\(table)\" row \(rowID) has no integer \(forward ? "target" : "source") column; run `kura check` on the store", path: database.path)
                    }
                    rids.append(rid)
                    // A row written before inverse_position existed is shorter: its default is 0.
                    positions.append(pcol < row.count ? row[pcol].doubleValue ?? 0 : 0)
                }
                // Each ID names its row's own entity (the target may have subentities).
                ids = try canonicalIDs(of: target, rowIDs: rids)
                for (id, p) in zip(ids, positions) { storedPosition[id] = p }
            }
            var present = Set(ids)
            for (pair, isPresent) in joinEdits[table] ?? [:] {
                let other: ManagedObjectID
                if forward && pair.source == o.objectID { other = pair.target } else if !forward && pair.target == o.objectID { other = pair.source } else { continue }
                if isPresent && present.insert(other).inserted { ids.append(other) }
                if !isPresent { present.remove(other) }
            }
            if r.isOrdered, let pending = joinPositions[table], !pending.isEmpty {
                // Pending positions first, then stored ones; new members last, in the order they joined.
                func position(_ id: ManagedObjectID) -> Double {
                    let pair = forward ? JoinPair(source: o.objectID, target: id) : JoinPair(source: id, target: o.objectID)
                    return (forward ? pending[pair]?.position : pending[pair]?.inversePosition) ?? storedPosition[id] ?? .infinity
                }
                ids = ids.enumerated().map { ($0.offset, $0.element, position($0.element)) }
                    .sorted { $0.2 != $1.2 ? $0.2 < $1.2 : $0.0 < $1.0 }.map(\.1)
            }
            var result: [ManagedObject] = []
            for id in ids where present.contains(id) {
                let m = try object(with: id, canonical: true)
                if m.isDeleted { continue }
                if m.isFault {
                    do { try load(m) } catch where error.code == .notFound { continue }
                }
                result.append(m)
            }
            return result
        }
    }

    /// The objects of `candidates` (a to-many's members as read: from the
    /// store, or prefetched) that are not deleted and whose key `column`
    /// names `owner`: `candidates` itself when all of them are (the usual
    /// case: no copy is made).
    @inline(__always)
    private static func members(_ candidates: [ManagedObject], of owner: ManagedObject, keyedBy column: String) -> [ManagedObject] {
        let id = owner.objectID
        if candidates.allSatisfy({ !$0.isDeleted && $0.toOne[column] == id }) { return candidates }
        return candidates.filter { !$0.isDeleted && $0.toOne[column] == id }
    }

    /// Whether `objects` are in `idOrder` already (read from a one-column
    /// index they are: by row ID), so that sorting them can be skipped.
    @inline(__always)
    private static func inIDOrder(_ objects: [ManagedObject]) -> Bool {
        var i = 1
        while i < objects.count {
            if idOrder(objects[i].objectID, objects[i - 1].objectID) { return false }
            i += 1
        }
        return true
    }

    static func idOrder(_ a: ManagedObjectID, _ b: ManagedObjectID) -> Bool {
        if a.isTemporary != b.isTemporary { return !a.isTemporary }
        return a.rowID < b.rowID
    }

    func checkTarget(_ o: ManagedObject, _ r: RelationshipDescription, _ t: ManagedObject) throws(KuraError) {
        guard model.isKind(t.entity, of: r.destination) else {
            throw KuraError(.invalidArgument, "relationship \"\(r.name)\" of entity \"\(o.entity.name)\" holds \(r.destination) objects (or its subentities'), not \(t.entity.name)")
        }
        guard t.managedObjectContext === self, !t.isDeleted else {
            throw KuraError(.invalidArgument, "\(t) is deleted or belongs to another context; relationships join objects of one context")
        }
    }

    /// The inverse kept in step with `r` (nil without a reciprocal one; see
    /// ManagedObjectModel.reciprocalInverse).
    ///
    /// The answers are kept (`recentInverses`) by what decides them: the
    /// relationship's name, destination and inverse name, compared by their
    /// bits (equal bits are equal names; names whose bits differ are looked
    /// up in the model): setting relationships of several entities in turn
    /// hashes no name.
    func inverse(of r: RelationshipDescription) -> RelationshipDescription? {
        inverseInfo(of: r)?.description
    }

    /// `inverse(of:)` in a box (no description copied out per call: a
    /// reference is), with the fields `setRelated` reads.
    func inverseInfo(of r: RelationshipDescription) -> InverseInfo? {
        for i in recentInverses.indices {
            let k = recentInverses[i]
            if Self.sameBits(k.name, r.name) && Self.sameBits(k.destination, r.destination) && Self.sameBits(k.inverse, r.inverse) {
                return k.answer
            }
        }
        let answer = model.reciprocalInverse(of: r).map(InverseInfo.init)
        if recentInverses.count < 16 {
            recentInverses.append(RecentInverse(name: r.name, destination: r.destination, inverse: r.inverse, answer: answer))
        }
        return answer
    }

    /// Whether two strings have the same bits (then they are equal; equal
    /// strings may still differ in bits: two storages of one text).
    @inline(__always)
    static func sameBits(_ a: String, _ b: String) -> Bool { a.hasSameBits(as: b) }

    @inline(__always)
    static func sameBits(_ a: String?, _ b: String?) -> Bool {
        switch (a, b) {
        case (nil, nil): return true
        case (let x?, let y?): return sameBits(x, y)
        default: return false
        }
    }

    /// Sets a to-one relationship, keeping the inverse in step.
    func setRelated(_ o: ManagedObject, _ r: RelationshipDescription, _ t: ManagedObject?) throws(KuraError) {
        if let t { try checkTarget(o, r, t) }
        try o.loadIfFault()
        if r.isTransient { return try setTransientTargets(o, r, t.map { [$0] } ?? []) }
        let old = o.toOne[r.name]
        // Compared field by field (an optional pair's `==` goes through generic code).
        if let old {
            if let t, t.objectID == old { return }
        } else if t == nil {
            return
        }
        willChange(o, key: r.name, toMany: false)
        o.toOne[r.name] = t?.objectID
        guard let inv = inverseInfo(of: r) else { return }
        if inv.isToMany {
            // The to-many side of each owner changed too (for observers).
            if let old, let owner = registered(old) { noteUpdated(owner, inv.name, toMany: true) }
            if let t { noteUpdated(t, inv.name, toMany: true) }
        }
        if !inv.isToMany {
            // One-to-one: both sides hold a key; unhook the old partners.
            // A partner deleted from the store (`.notFound`) has no key to clear.
            if let old, let oldObject = try loadedPartner(old) {
                if oldObject.toOne[inv.name] == o.objectID {
                    willChange(oldObject, key: inv.name, toMany: false)
                    oldObject.toOne[inv.name] = nil
                }
            }
            if let t {
                try t.loadIfFault()
                if let previous = t.toOne[inv.name], previous != o.objectID, let p = try loadedPartner(previous) {
                    if p.toOne[r.name] == t.objectID {
                        willChange(p, key: r.name, toMany: false)
                        p.toOne[r.name] = nil
                    }
                }
                willChange(t, key: inv.name, toMany: false)
                t.toOne[inv.name] = o.objectID
            }
        } else if inv.isOrdered {
            // Appended at the end of the target's ordered to-many.
            if let t {
                let members = try relatedObjects(t, inv.description).filter { $0 !== o }
                o.order[r.name + "_order"] = (members.compactMap { $0.order[r.name + "_order"] }.max() ?? -1) + 1
            } else {
                o.order[r.name + "_order"] = nil
            }
        }
    }

    /// The object with `id`, loaded; nil if its row is gone from the store.
    func loadedPartner(_ id: ManagedObjectID) throws(KuraError) -> ManagedObject? {
        let p = try object(with: id, canonical: true)
        do { try p.loadIfFault() } catch where error.code == .notFound { return nil }
        return p
    }

    /// Replaces a to-many relationship's objects (in this order, if ordered).
    /// An object listed twice counts once, at its first place (a to-many is a set, or an ordered set).
    func setRelated(_ o: ManagedObject, _ r: RelationshipDescription, _ given: [ManagedObject]) throws(KuraError) {
        for t in given { try checkTarget(o, r, t) }
        var seen = Set<ObjectIdentifier>()
        let list = given.filter { seen.insert(ObjectIdentifier($0)).inserted }
        let current = try relatedObjects(o, r)
        let wanted = Set(list.map(ObjectIdentifier.init))
        switch model.storage(of: r, in: o.entity) {
        case .transient:
            try o.loadIfFault()
            try setTransientTargets(o, r, list)
        case .inverseForeignKey(_, let column, _):
            guard let inv = inverse(of: r) else { return }
            for c in current where !wanted.contains(ObjectIdentifier(c)) { try setRelated(c, inv, nil) }
            for (i, c) in list.enumerated() {
                if c.toOne[column] != o.objectID { try setRelated(c, inv, o) }
                if r.isOrdered && c.order[column + "_order"] != Double(i) {
                    willChange(c, key: column)
                    noteUpdated(o, r.name)
                    c.order[column + "_order"] = Double(i)
                }
            }
        case .joinTable(let table, let forward):
            for c in current where !wanted.contains(ObjectIdentifier(c)) { try removeRelated(o, r, c) }
            let have = Set(current.map(ObjectIdentifier.init))
            for c in list where !have.contains(ObjectIdentifier(c)) { try addRelated(o, r, c) }
            if r.isOrdered && current.map(ObjectIdentifier.init) != list.map(ObjectIdentifier.init) {
                renumber(o, r, list, table: table, forward: forward)
            }
        case .foreignKey:
            try setRelated(o, r, list.first)
        }
    }

    /// Adds one object to a to-many relationship (at the end, if ordered).
    func addRelated(_ o: ManagedObject, _ r: RelationshipDescription, _ t: ManagedObject) throws(KuraError) {
        try checkTarget(o, r, t)
        switch model.storage(of: r, in: o.entity) {
        case .transient:
            try o.loadIfFault()
            let list = try transientTargets(o, r)
            if !list.contains(where: { $0 === t }) { try setTransientTargets(o, r, list + [t]) }
        case .inverseForeignKey:
            guard let inv = inverse(of: r) else { return }
            try setRelated(t, inv, o)
        case .joinTable(let table, let forward):
            let pair = forward ? JoinPair(source: o.objectID, target: t.objectID) : JoinPair(source: t.objectID, target: o.objectID)
            // Each ordered side gets the new member at its end.
            let mine = r.isOrdered ? try relatedObjects(o, r) : []
            let inv = inverse(of: r)
            var theirs: [ManagedObject] = []
            if let inv, inv.isOrdered { theirs = try relatedObjects(t, inv) }
            // Already a member: nothing moves on either side.
            if mine.contains(where: { $0 === t }) || theirs.contains(where: { $0 === o }) { return }
            setJoinEdit(table, pair, true)
            noteUpdated(o, r.name)
            if let inv = r.inverse { noteUpdated(t, inv) }
            if r.isOrdered { renumber(o, r, mine + [t], table: table, forward: forward) }
            if let inv, inv.isOrdered { renumber(t, inv, theirs + [o], table: table, forward: !forward) }
        case .foreignKey:
            try setRelated(o, r, t)
        }
    }

    /// Removes one object from a to-many relationship.
    func removeRelated(_ o: ManagedObject, _ r: RelationshipDescription, _ t: ManagedObject) throws(KuraError) {
        switch model.storage(of: r, in: o.entity) {
        case .transient:
            try o.loadIfFault()
            let list = try transientTargets(o, r)
            if list.contains(where: { $0 === t }) { try setTransientTargets(o, r, list.filter { $0 !== t }) }
        case .inverseForeignKey(_, let column, _):
            guard let inv = inverse(of: r) else { return }
            try t.loadIfFault()
            if t.toOne[column] == o.objectID { try setRelated(t, inv, nil) }
        case .joinTable(let table, let forward):
            let pair = forward ? JoinPair(source: o.objectID, target: t.objectID) : JoinPair(source: t.objectID, target: o.objectID)
            setJoinEdit(table, pair, false)
            setJoinPositions(table, pair, nil)
            noteUpdated(o, r.name)
            if let inv = r.inverse { noteUpdated(t, inv) }
        case .foreignKey:
            if o.toOne[r.name] == t.objectID { try setRelated(o, r, nil) }
        }
    }

    /// Gives every member of `o`'s ordered join-table relationship `r` its
    /// pending position: its index in `list` (see "Ordering" in the header).
    /// `forward`: `o` is the join table's source side.
    func renumber(_ o: ManagedObject, _ r: RelationshipDescription, _ list: [ManagedObject], table: String, forward: Bool) {
        noteUpdated(o, r.name)
        for (i, m) in list.enumerated() {
            let pair = forward ? JoinPair(source: o.objectID, target: m.objectID) : JoinPair(source: m.objectID, target: o.objectID)
            var p = joinPositions[table]?[pair] ?? JoinPositions()
            if forward { p.position = Double(i) } else { p.inversePosition = Double(i) }
            if p != joinPositions[table]?[pair] { setJoinPositions(table, pair, p) }
        }
    }
}

extension ManagedObjectContext {
    /// Pending positions of one join row (nil: unchanged): `position` in the
    /// source's ordered relationship, `inversePosition` in the target's.
    struct JoinPositions: Equatable {
        var position: Double?
        var inversePosition: Double?
    }
}

extension ManagedObjectContext {
    /// Writes the pending join-table edits and positions inside a save's
    /// transaction: a removed pair's row goes, an added pair gets a row with
    /// its pending positions (0 where none), a kept pair whose position
    /// changed is rewritten. `rowID` maps temporary IDs to assigned row IDs
    /// (nil: the object is not saved, so neither is the pair).
    func writeJoinEdits(_ tx: WriteTransaction, _ rowID: (ManagedObjectID) -> Int64?) throws(KuraError) {
        for table in Set(joinEdits.keys).union(joinPositions.keys).sorted() {
            let t = try tx.table(table)
            let edits = joinEdits[table] ?? [:], positions = joinPositions[table] ?? [:]
            let pairs = Set(edits.keys).union(positions.keys).sorted { a, b in
                a.source != b.source ? Self.idOrder(a.source, b.source) : Self.idOrder(a.target, b.target)
            }
            for pair in pairs {
                guard let s = rowID(pair.source), let d = rowID(pair.target) else { continue }
                let match = KuraPredicate.and([
                    .comparison(KuraComparison(.keyPath(["source"]), .equalTo, .constant(.integer(s)))),
                    .comparison(KuraComparison(.keyPath(["target"]), .equalTo, .constant(.integer(d)))),
                ])
                let rows = try tx.fetch(TableQuery(table, where: match))
                let p = positions[pair]
                switch edits[pair] {
                case false?:
                    if !rows.isEmpty { _ = try tx.delete(from: table, where: match) }
                default:
                    if let (rid, row) = rows.first {
                        guard let p else { continue }
                        var updated = row + [Value](repeating: .double(0), count: max(0, 4 - row.count))
                        if let x = p.position { updated[2] = .double(x) }
                        if let x = p.inversePosition { updated[3] = .double(x) }
                        if updated != row { _ = try tx.update(updated, in: t, rowID: rid) }
                    } else if edits[pair] == true {
                        try tx.insert([.integer(s), .integer(d), .double(p?.position ?? 0), .double(p?.inversePosition ?? 0)], into: t)
                    }
                }
            }
        }
    }
}

/// One answer of `ManagedObjectContext.inverse(of:)`: the reciprocal inverse
/// (or nil) of a relationship with this name, destination and inverse name,
/// which is all `ManagedObjectModel.reciprocalInverse` reads of it.
struct RecentInverse {
    let name: String
    let destination: String
    let inverse: String?
    let answer: InverseInfo?
}

/// A reciprocal inverse (`ManagedObjectContext.inverseInfo(of:)`), with the
/// fields `setRelated` reads kept apart: passing the box copies a
/// reference, not the description's fields one by one.
final class InverseInfo {
    let description: RelationshipDescription
    let name: String
    let isToMany: Bool
    let isOrdered: Bool

    init(_ description: RelationshipDescription) {
        self.description = description
        name = description.name
        isToMany = description.isToMany
        isOrdered = description.isOrdered
    }
}
