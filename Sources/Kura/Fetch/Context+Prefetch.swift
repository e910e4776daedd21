// Context+Prefetch: `relationshipKeyPathsForPrefetching` (Core Data's), the
// destinations of a fetch's relationships loaded with the fetch.
//
// Key paths of any depth ("record", "courses.teacher") are merged into one
// tree and walked level by level: each relationship of a level is loaded for
// all of the level's objects at once, inside one read transaction per level:
//   - a to-one: the targets the objects' keys name (pending values included),
//     loaded by row ID (the context's batch load);
//   - a to-many through the inverse's key: one query on the destination's
//     table, `key IN (the objects' row IDs)`, rows materialized;
//   - a to-many through a join table: one query on the join table, then the
//     targets by row ID.
// The loaded objects are kept (strongly) so that reading the relationship
// opens no read transaction: a to-one's targets in one list
// (`prefetchedTargets`), found registered and loaded through the owner's key;
// a to-many's members in `prefetched`, keyed by owner and relationship. Its
// stored members come from `prefetched` instead of the store
// (relatedObjects), then are corrected by pending changes as ever. The cache
// shows the store as it was at the fetch, as Core Data's does: it is dropped
// by `save`, merges and `reset`; an owner's to-many lists by `refresh` of the
// owner (a refreshed owner reads its to-one key again; the target read then
// is the one kept, as it was, until refreshed itself). Unsaved owners, transient
// relationships, child contexts, ordered join tables with pending positions
// and objects still faults (a fetch with `fetchBatchSize`) are not
// prefetched: they read as without prefetching. Deleted objects are skipped.

extension ManagedObjectContext {
    /// Loads the relationships `keyPaths` name for `objects` of `e` (see the file header).
    ///
    /// - Throws: `.notFound` naming a key whose entity has no such
    ///   relationship; read errors.
    func prefetch(_ objects: [ManagedObject], keyPaths: [String], of e: EntityDescription) throws(KuraError) {
        guard parent == nil, !keyPaths.isEmpty else { return }
        // The key paths as a tree: relationship name -> deeper names.
        final class Node { var children: [(String, Node)] = [] }
        let root = Node()
        for path in keyPaths {
            var node = root
            for k in path.split(separator: ".", omittingEmptySubsequences: false).map(String.init) {
                if let next = node.children.first(where: { $0.0 == k })?.1 { node = next; continue }
                let next = Node()
                node.children.append((k, next))
                node = next
            }
        }
        var level: [(objects: [ManagedObject], node: Node)] = [(objects, root)]
        while let (owners, node) = level.popLast() {
            for (name, child) in node.children {
                let deeper = !child.children.isEmpty
                let members = try prefetch(owners, name, keyPaths: keyPaths, collecting: deeper)
                if deeper { level.append((members, child)) }
            }
        }
    }

    /// Loads relationship `name` of `owners`; returns the loaded destination
    /// objects if `collecting` (a deeper level loads their relationships),
    /// else nothing.
    private func prefetch(_ owners: [ManagedObject], _ name: String, keyPaths: [String], collecting: Bool) throws(KuraError) -> [ManagedObject] {
        // The owners by entity (usually one: a fetch's results), in the
        // order the entities first come. Found by identity among the few
        // groups, the last one first; filled in place (a group's
        // relationship is not copied per owner).
        var groups: [PrefetchGroup] = []
        var last = -1
        for o in owners where !o.isFault && !o.isDeleted {
            let e = o.entity
            if last < 0 || groups[last].entity !== e {
                if let i = groups.firstIndex(where: { $0.entity === e }) {
                    last = i
                } else {
                    guard let r = e.relationshipsByName[name] else {
                        throw KuraError(.notFound, "relationshipKeyPathsForPrefetching \(keyPaths): entity \"\(e.name)\" has no relationship \"\(name)\"")
                    }
                    groups.append(PrefetchGroup(entity: e, relationship: r))
                    last = groups.count - 1
                }
            }
            groups[last].objects.append(o)
        }
        var out: [ManagedObject] = []
        for group in groups {
            let entity = group.entity, r = group.relationship, objs = group.objects
            if r.isTransient { continue }
            let plan = model.relationshipPlan(r, in: entity)
            let target = try model.destination(of: r, plan: plan)
            switch plan.storage {
            case .transient:
                continue
            case .foreignKey:
                // The targets are kept alive in one list (see
                // `prefetchedTargets`); the faults among them load in one batch.
                var targets: [ManagedObject] = []
                var faults: [ManagedObject] = []
                for o in objs {
                    guard let id = o.toOne[r.name] else { continue }
                    let t = try object(with: id, canonical: true)
                    if !o.isNew { prefetchedTargets.append(t) }
                    if collecting { targets.append(t) }
                    if t.isFault && !id.isTemporary { faults.append(t) }
                }
                keepPrefetchedTargets()
                try loadPrefetched(faults)
                if collecting { out += targets.filter { !$0.isFault && !$0.isDeleted } }
            case .inverseForeignKey(_, let column, _):
                let stored = objs.filter { !$0.isNew }
                guard !stored.isEmpty else { continue }
                prefetched.reserveCapacity(prefetched.count + stored.count)
                // Through the key's index (`materializeKeyedRows`); else one query.
                let keyed = try read { tx throws(KuraError) in
                    try materializeKeyedRows(target, column: column, keys: stored.map(\.objectID.rowID), in: tx)
                }
                if let keyed {
                    // The members come in runs of one key (the index's
                    // order), each filed under the owner its key names (a
                    // member with an unsaved key under that one:
                    // `relatedObjects` checks every member's key against
                    // the owner and adds pending members as ever), the
                    // owner found among the owners sorted by row ID (an
                    // owner met twice, as a deeper level's owners may be,
                    // kept once: one entity's objects of a row ID are one).
                    let byRowID = Self.sortedOnce(stored)
                    var lists = [[ManagedObject]](repeating: [], count: byRowID.count)
                    var start = 0
                    while start < keyed.count {
                        let key = keyed[start].toOne[column]
                        var end = start + 1
                        while end < keyed.count, keyed[end].toOne[column] == key { end += 1 }
                        if let key, let i = Self.index(ofRowID: key.rowID, in: byRowID) { lists[i] += keyed[start..<end] }
                        start = end
                    }
                    for (o, list) in zip(byRowID, lists) { prefetched[o.objectID, default: PrefetchedLists()][r.name] = list }
                    if collecting { out += keyed.filter { !$0.isDeleted } }
                } else {
                    var members: [Int64: [ManagedObject]] = [:]
                    let list = KuraExpression.aggregate(stored.map { .constant(.integer($0.objectID.rowID)) })
                    let keyTest = KuraPredicate.comparison(KuraComparison(.keyPath([column]), .in, list))
                    let query = TableQuery(target.hierarchy.table, where: model.entityFilter(target, includingSubentities: true).map { .and([keyTest, $0]) } ?? keyTest)
                    let rows = try read { tx throws(KuraError) in try tx.fetch(query) }
                    guard let c = try model.schema(of: target).position(of: column) else {
                        throw KuraError(.notFound, "table \"\(target.hierarchy.table)\" has no column \"\(column)\" (relationship \"\(r.name)\" of entity \"\(entity.name)\")")
                    }
                    for (rowID, row) in rows {
                        guard c < row.count, case .integer(let owner) = row[c] else { continue }
                        let m = materialize(try rowEntity(row, rowID: rowID, in: target), rowID: rowID, row: row)
                        members[owner, default: []].append(m)
                    }
                    for o in stored { prefetched[o.objectID, default: PrefetchedLists()][r.name] = members[o.objectID.rowID] ?? [] }
                    if collecting { out += members.values.joined().filter { !$0.isDeleted } }
                }
            case .joinTable(let table, let forward):
                let stored = objs.filter { !$0.isNew }
                guard !stored.isEmpty, !(r.isOrdered && !(joinPositions[table] ?? [:]).isEmpty) else { continue }
                let mine = forward ? "source" : "target", theirs = forward ? "target" : "source"
                let positionColumn = forward ? "position" : ManagedObjectModel.inversePositionColumn
                let list = KuraExpression.aggregate(stored.map { .constant(.integer($0.objectID.rowID)) })
                let rows = try read { tx throws(KuraError) in
                    try tx.fetch(TableQuery(table, where: .comparison(KuraComparison(.keyPath([mine]), .in, list)),
                                            sort: [SortKey(mine), SortKey(positionColumn), SortKey(theirs)]))
                }
                let ownerColumn = forward ? 0 : 1, memberColumn = forward ? 1 : 0
                var pairs: [(owner: Int64, member: Int64)] = []
                for (rowID, row) in rows {
                    guard row.count > 1, case .integer(let owner) = row[ownerColumn], case .integer(let member) = row[memberColumn] else {
                        throw KuraError(.corrupt, "join table \"\(table)\" row \(rowID) has no integer source or target column; run `kura check` on the store", path: database.path)
                    }
                    pairs.append((owner, member))
                }
                let ids = try canonicalIDs(of: target, rowIDs: pairs.map(\.member))
                var members: [Int64: [ManagedObject]] = [:]
                var faults: [ManagedObject] = []
                for (pair, id) in zip(pairs, ids) {
                    let m = try object(with: id, canonical: true)
                    if m.isFault { faults.append(m) }
                    members[pair.owner, default: []].append(m)
                }
                try loadPrefetched(faults)
                for o in stored { prefetched[o.objectID, default: PrefetchedLists()][r.name] = members[o.objectID.rowID] ?? [] }
                if collecting { out += members.values.joined().filter { !$0.isFault && !$0.isDeleted } }
            }
        }
        return out
    }
}

extension ManagedObjectContext {
    /// Loads `faults` (destinations a prefetch met, a destination of several
    /// owners once per owner) in one read: each once (its row read once, its
    /// `awakeFromFetch` called once), by entity, then row ID (the order the
    /// batch reads with the fewest descents).
    fileprivate func loadPrefetched(_ faults: [ManagedObject]) throws(KuraError) {
        guard !faults.isEmpty else { return }
        try loadFaults(Self.sortedOnce(faults))
    }

    /// `objects` by entity, then row ID, each once (an object met several
    /// times is kept once: one entity's objects of a row ID are one object,
    /// so repeats lie next to each other). Objects of one entity come out
    /// sorted by row ID (what `index(ofRowID:in:)` searches).
    fileprivate static func sortedOnce(_ objects: [ManagedObject]) -> [ManagedObject] {
        let sorted = objects.sorted { a, b in
            a.entity === b.entity ? a.objectID.rowID < b.objectID.rowID : ObjectIdentifier(a.entity) < ObjectIdentifier(b.entity)
        }
        var distinct: [ManagedObject] = []
        distinct.reserveCapacity(sorted.count)
        for o in sorted where distinct.last !== o { distinct.append(o) }
        return distinct
    }

    /// The position of the object with row ID `rowID` in `objects`, sorted
    /// by row ID (nil: none has it).
    fileprivate static func index(ofRowID rowID: Int64, in objects: [ManagedObject]) -> Int? {
        var lo = 0, hi = objects.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if objects[mid].objectID.rowID < rowID { lo = mid + 1 } else { hi = mid }
        }
        return lo < objects.count && objects[lo].objectID.rowID == rowID ? lo : nil
    }
}

/// The owners of one entity a prefetch level loads a relationship for.
private struct PrefetchGroup {
    let entity: EntityDescription
    let relationship: RelationshipDescription
    var objects: [ManagedObject] = []
}

/// The members a prefetch loaded for one owner, by relationship name
/// (`ManagedObjectContext.prefetched`): usually one relationship, kept in
/// place; more in a list. A dictionary per owner cost a hash table (made,
/// filled and freed) per prefetched object.
///
/// Semantics are a dictionary's: one list per name, setting a name that is
/// there replaces its list. Invariant: no two entries have the same name.
struct PrefetchedLists {
    private struct Entry {
        let name: String
        var members: [ManagedObject]
    }

    private var first: Entry?
    private var rest: [Entry] = []

    /// The members loaded for relationship `name` (nil: not prefetched).
    subscript(name: String) -> [ManagedObject]? {
        get {
            if let first, first.name == name { return first.members }
            for e in rest where e.name == name { return e.members }
            return nil
        }
        set {
            if first == nil || first?.name == name {
                first = newValue.map { Entry(name: name, members: $0) }
                if first == nil, !rest.isEmpty { first = rest.removeFirst() }
                return
            }
            if let i = rest.firstIndex(where: { $0.name == name }) {
                if let newValue { rest[i].members = newValue } else { rest.remove(at: i) }
            } else if let newValue {
                rest.append(Entry(name: name, members: newValue))
            }
        }
    }
}
