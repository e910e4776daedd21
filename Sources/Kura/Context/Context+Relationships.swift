// Context+Relationships: reading and changing relationships.
//
// A to-one relationship is the object's own foreign key. A to-many whose inverse
// is to-one is the set of objects whose foreign key names this object: read
// from the store (indexed) and corrected by the context's pending changes, so
// both sides always agree without caching. A many-to-many (or a to-many without
// inverse) is a join table, corrected by pending join edits. Ordered to-manys
// keep a position (`<inverse>_order`) in each member.

extension ManagedObjectContext {
    /// Runs an engine read, keeping typed errors.
    func read<T>(_ body: (ReadTransaction) throws(KuraError) -> T) throws(KuraError) -> T {
        if let tx = enclosingTransaction { return try body(tx) }
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
        let target = try model.entity(r.destination)
        switch model.storage(of: r, in: o.entity) {
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
            } else if !o.isNew {
                // The target's table, narrowed to the target and its subentities.
                let key = KuraPredicate.comparison(KuraComparison(.keyPath([column]), .equalTo, .constant(.integer(o.objectID.rowID))))
                let rows = try read { tx throws(KuraError) in
                    try tx.fetch(TableQuery(target.hierarchy.table, where: model.entityFilter(target, includingSubentities: true).map { .and([key, $0]) } ?? key))
                }
                for (rowID, row) in rows {
                    let m = materialize(try rowEntity(row, rowID: rowID, in: target), rowID: rowID, row: row)
                    if !m.isDeleted && m.toOne[column] == o.objectID && seen.insert(ObjectIdentifier(m)).inserted { result.append(m) }
                }
            }
            for m in inserted + touchedOrder where model.isKind(m.entity, of: target.name) && !m.isDeleted && m.toOne[column] == o.objectID {
                if seen.insert(ObjectIdentifier(m)).inserted { result.append(m) }
            }
            if orderColumn != nil {
                let key = column + "_order"
                result.sort { a, b in
                    let x = a.order[key] ?? .infinity, y = b.order[key] ?? .infinity
                    return x != y ? x < y : Self.idOrder(a.objectID, b.objectID)
                }
            } else {
                result.sort { Self.idOrder($0.objectID, $1.objectID) }
            }
            return result
        case .joinTable(let table, let forward):
            var ids: [ManagedObjectID] = []
            if let parent {
                ids = try parentMembers(o, r, parent).map(\.objectID)
            } else if !o.isNew {
                let mine = forward ? "source" : "target", theirs = forward ? "target" : "source"
                let rows = try read { tx throws(KuraError) in
                    try tx.fetch(TableQuery(table, where: .comparison(KuraComparison(.keyPath([mine]), .equalTo, .constant(.integer(o.objectID.rowID)))),
                                            sort: [SortKey("position"), SortKey(theirs)]))
                }
                let col = forward ? 1 : 0
                var rids: [Int64] = []
                for (rowID, row) in rows {
                    guard col < row.count, case .integer(let rid) = row[col] else {
                        throw KuraError(.corrupt, "join table \"\(table)\" row \(rowID) has no integer \(forward ? "target" : "source") column; run `kura check` on the store", path: database.path)
                    }
                    rids.append(rid)
                }
                // Each ID names its row's own entity (the target may have subentities).
                ids = try canonicalIDs(of: target, rowIDs: rids)
            }
            var present = Set(ids)
            for (pair, isPresent) in joinEdits[table] ?? [:] {
                let other: ManagedObjectID
                if forward && pair.source == o.objectID { other = pair.target } else if !forward && pair.target == o.objectID { other = pair.source } else { continue }
                if isPresent && present.insert(other).inserted { ids.append(other) }
                if !isPresent { present.remove(other) }
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

    func inverse(of r: RelationshipDescription) -> RelationshipDescription? {
        r.inverse.flatMap { model.entitiesByName[r.destination]?.relationshipsByName[$0] }
    }

    /// Sets a to-one relationship, keeping the inverse in step.
    func setRelated(_ o: ManagedObject, _ r: RelationshipDescription, _ t: ManagedObject?) throws(KuraError) {
        if let t { try checkTarget(o, r, t) }
        try o.loadIfFault()
        let old = o.toOne[r.name]
        if old == t?.objectID { return }
        willChange(o, key: r.name)
        o.toOne[r.name] = t?.objectID
        guard let inv = inverse(of: r) else { return }
        if inv.isToMany {
            // The to-many side of each owner changed too (for observers).
            if let old, let owner = registered(old) { noteUpdated(owner, inv.name) }
            if let t { noteUpdated(t, inv.name) }
        }
        if !inv.isToMany {
            // One-to-one: both sides hold a key; unhook the old partners.
            // A partner deleted from the store (`.notFound`) has no key to clear.
            if let old, let oldObject = try loadedPartner(old) {
                if oldObject.toOne[inv.name] == o.objectID {
                    willChange(oldObject, key: inv.name)
                    oldObject.toOne[inv.name] = nil
                }
            }
            if let t {
                try t.loadIfFault()
                if let previous = t.toOne[inv.name], previous != o.objectID, let p = try loadedPartner(previous) {
                    if p.toOne[r.name] == t.objectID {
                        willChange(p, key: r.name)
                        p.toOne[r.name] = nil
                    }
                }
                willChange(t, key: inv.name)
                t.toOne[inv.name] = o.objectID
            }
        } else if inv.isOrdered {
            // Appended at the end of the target's ordered to-many.
            if let t {
                let members = try relatedObjects(t, inv).filter { $0 !== o }
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

    /// Replaces a to-many relationship's objects.
    func setRelated(_ o: ManagedObject, _ r: RelationshipDescription, _ list: [ManagedObject]) throws(KuraError) {
        for t in list { try checkTarget(o, r, t) }
        let current = try relatedObjects(o, r)
        let wanted = Set(list.map(ObjectIdentifier.init))
        switch model.storage(of: r, in: o.entity) {
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
        case .joinTable:
            for c in current where !wanted.contains(ObjectIdentifier(c)) { try removeRelated(o, r, c) }
            let have = Set(current.map(ObjectIdentifier.init))
            for c in list where !have.contains(ObjectIdentifier(c)) { try addRelated(o, r, c) }
        case .foreignKey:
            try setRelated(o, r, list.first)
        }
    }

    /// Adds one object to a to-many relationship.
    func addRelated(_ o: ManagedObject, _ r: RelationshipDescription, _ t: ManagedObject) throws(KuraError) {
        try checkTarget(o, r, t)
        switch model.storage(of: r, in: o.entity) {
        case .inverseForeignKey:
            guard let inv = inverse(of: r) else { return }
            try setRelated(t, inv, o)
        case .joinTable(let table, let forward):
            let pair = forward ? JoinPair(source: o.objectID, target: t.objectID) : JoinPair(source: t.objectID, target: o.objectID)
            setJoinEdit(table, pair, true)
            noteUpdated(o, r.name)
            if let inv = r.inverse { noteUpdated(t, inv) }
        case .foreignKey:
            try setRelated(o, r, t)
        }
    }

    /// Removes one object from a to-many relationship.
    func removeRelated(_ o: ManagedObject, _ r: RelationshipDescription, _ t: ManagedObject) throws(KuraError) {
        switch model.storage(of: r, in: o.entity) {
        case .inverseForeignKey(_, let column, _):
            guard let inv = inverse(of: r) else { return }
            try t.loadIfFault()
            if t.toOne[column] == o.objectID { try setRelated(t, inv, nil) }
        case .joinTable(let table, let forward):
            let pair = forward ? JoinPair(source: o.objectID, target: t.objectID) : JoinPair(source: t.objectID, target: o.objectID)
            setJoinEdit(table, pair, false)
            noteUpdated(o, r.name)
            if let inv = r.inverse { noteUpdated(t, inv) }
        case .foreignKey:
            if o.toOne[r.name] == t.objectID { try setRelated(o, r, nil) }
        }
    }
}
