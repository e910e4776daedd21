// FetchedResultsController+Changes: applying one objects-did-change batch.
//
//   1. Candidates: inserted objects of the entity; updated and refreshed
//      objects that are members or of the entity; deleted and invalidated
//      members; members whose key paths went through an object whose read key
//      changed (or that left the context).
//   2. Before anything moves: the old index path of every candidate member,
//      and the old index and first row of every section they are in.
//   3. Every candidate member is removed (found by its location, then by
//      binary search on the sort values it was placed by).
//   4. Every candidate still in the context, of the entity and matching the
//      predicate is placed by binary search on its current values.
//   5. Sections: emptied ones are dropped (one section without a section key
//      path always stays); new ones, and ones whose first row changed, are
//      placed by binary search on first rows.
//   6. New index paths, then the change set (order and semantics in
//      FetchedResultsController+ChangeSet.swift): an object in both old and
//      new results, in the same section, stays in place (an update) when it
//      keeps its rank among the untouched rows of its section and shares
//      that gap with no other candidate: the untouched rows keep their
//      relative order, so such rows need no move; every other one moves.
//      Sections whose first row changed get the same treatment among the
//      untouched sections.
//
// Everything here is proportional to the number of candidates (times the
// per-object costs in FetchedResultsController+Storage.swift), except a
// section placement, which shifts the section list (usually short).

import Foundation
import KuraEngine

extension FetchedResultsController {
    func isOfEntity(_ o: ManagedObject) -> Bool {
        guard let entity else { return false }
        // A parent's request includes its subentities unless it says not to.
        return o.entity.name == entity.name || (fetchRequest.includesSubentities && entity.hierarchy.kinds.contains(o.entity.name))
    }

    func apply(_ batch: ContextObjectsDidChange) {
        guard store != nil else { return }
        if batch.invalidatedAll {
            reloadAfterReset()
            return
        }
        var candidates: [ManagedObject] = []
        var seen = Set<ObjectIdentifier>()
        func add(_ o: ManagedObject) {
            if seen.insert(ObjectIdentifier(o)).inserted { candidates.append(o) }
        }
        func addDependents(_ o: ManagedObject) {
            guard let ds = dependents[ObjectIdentifier(o)] else { return }
            for k in ds { if let loc = store!.location[k] { addMember(loc, k) } }
        }
        func addMember(_ loc: FRCLocation, _ k: ObjectIdentifier) {
            // The member is in `loc.chunk`; find its object there.
            if let r = loc.chunk.rows.first(where: { ObjectIdentifier($0.object) == k }) { add(r.object) }
        }
        for o in batch.inserted where isOfEntity(o) { add(o) }
        for o in batch.updated + batch.refreshed {
            if isOfEntity(o) { add(o) }
            if dependents[ObjectIdentifier(o)] != nil && !throughKeys.isDisjoint(with: batch.changedKeys(of: o)) { addDependents(o) }
        }
        for o in batch.deleted + batch.invalidated {
            if store!.location[ObjectIdentifier(o)] != nil { add(o) }
            addDependents(o)
        }
        guard !candidates.isEmpty else { return }
        store!.stats = FetchedResultsChangeStatistics()
        let changes = update(candidates)
        lastChangeStatistics = store!.stats
        deliver(changes)
    }

    /// One old or new place of a candidate.
    struct Place {
        var section: FRCSection
        var path: ResultIndexPath
    }

    /// Applies the candidates' current state; returns the change set.
    func update(_ candidates: [ManagedObject]) -> FetchedResultsChangeSet {
        let single = sectionPath == nil
        let seen = Set(candidates.map(ObjectIdentifier.init))
        // What each candidate is now (nothing in the store changes yet).
        var now: [([Value], Value, [ManagedObject])?] = []
        for o in candidates {
            store!.stats.objectsEvaluated += 1
            now.append(evaluate(o))
        }
        // 2. Old places.
        var oldPlace: [ObjectIdentifier: Place] = [:]
        var oldOf: [ObjectIdentifier: ManagedObjectID] = [:]
        var sectionOld: [ObjectIdentifier: (index: Int, head: ObjectIdentifier?)] = [:]
        if !single {
            // Existing sections that receive rows: where they were, and their first rows.
            for case let (_, value, _)? in now {
                guard let s = store!.sectionsByValue[value], sectionOld[ObjectIdentifier(s)] == nil, let i = store!.index(of: s) else { continue }
                sectionOld[ObjectIdentifier(s)] = (i, s.head.map { ObjectIdentifier($0.object) })
            }
        }
        for o in candidates {
            guard let (s, row) = store!.position(of: o) else { continue }
            let sk = ObjectIdentifier(s)
            if sectionOld[sk] == nil, let i = store!.index(of: s) {
                sectionOld[sk] = (i, s.head.map { ObjectIdentifier($0.object) })
            }
            guard let si = sectionOld[sk]?.index else { continue }
            oldPlace[ObjectIdentifier(o)] = Place(section: s, path: ResultIndexPath(row: row, section: si))
            oldOf[ObjectIdentifier(o)] = o.objectID
        }
        // 3. Remove.
        for o in candidates where oldPlace[ObjectIdentifier(o)] != nil {
            if let loc = store!.remove(o) {
                for t in loc.through { dependents[ObjectIdentifier(t)]?.remove(ObjectIdentifier(o)) }
            }
        }
        // 4. Place what belongs.
        var newSections: [FRCSection] = []
        var touched: [FRCSection] = []
        var touchedSet = Set<ObjectIdentifier>()
        for p in oldPlace.values where touchedSet.insert(ObjectIdentifier(p.section)).inserted { touched.append(p.section) }
        var placed: [ManagedObject] = []
        for (o, state) in zip(candidates, now) {
            guard let (keys, value, through) = state else { continue }
            let s: FRCSection
            if single {
                s = store!.sections[0]
            } else if let existing = store!.sectionsByValue[value] {
                s = existing
            } else {
                s = FRCSection(value: value, name: sectionName(value))
                store!.sectionsByValue[value] = s
                newSections.append(s)
            }
            if touchedSet.insert(ObjectIdentifier(s)).inserted { touched.append(s) }
            store!.insert(FRCRow(object: o, keys: keys), into: s, through: through)
            for t in through { dependents[ObjectIdentifier(t), default: []].insert(ObjectIdentifier(o)) }
            placed.append(o)
        }
        // 5. Sections.
        var deletedSections: [(Int, String)] = []
        var repositioned: [FRCSection] = []
        if !single {
            var pull: [Int] = []
            for s in touched {
                guard let old = sectionOld[ObjectIdentifier(s)] else { continue }  // new section
                if s.count == 0 {
                    deletedSections.append((old.index, s.name))
                    store!.sectionsByValue[s.value] = nil
                    pull.append(old.index)
                } else if let h = s.head.map({ ObjectIdentifier($0.object) }), h != old.head || seen.contains(h) {
                    // A new first row, or the same one with new sort values.
                    repositioned.append(s)
                    pull.append(old.index)
                }
            }
            // Old indexes are still valid: nothing was added to or removed
            // from the section list yet.
            for i in pull.sorted(by: >) { store!.sections.remove(at: i) }
            for s in repositioned + newSections { store!.place(s) }
        }
        // 6. New places and the change set.
        var sectionNew: [ObjectIdentifier: Int] = [:]
        for s in touched where s.count > 0 || single {
            if let i = store!.index(of: s) { sectionNew[ObjectIdentifier(s)] = i }
        }
        var newPlace: [ObjectIdentifier: Place] = [:]
        for o in placed {
            guard let (s, row) = store!.position(of: o), let si = sectionNew[ObjectIdentifier(s)] else { continue }
            newPlace[ObjectIdentifier(o)] = Place(section: s, path: ResultIndexPath(row: row, section: si))
        }

        var changes = FetchedResultsChangeSet()
        // Section moves among the sections that kept their first row.
        var movedSections = Set<ObjectIdentifier>()
        if !repositioned.isEmpty {
            var oldNonU: [Int] = deletedSections.map(\.0)
            var newNonU: [Int] = newSections.compactMap { sectionNew[ObjectIdentifier($0)] }
            var items: [(Int, Int)] = []
            for s in repositioned {
                guard let o = sectionOld[ObjectIdentifier(s)]?.index, let n = sectionNew[ObjectIdentifier(s)] else { continue }
                items.append((o, n))
                oldNonU.append(o)
                newNonU.append(n)
            }
            let stays = Self.staysInPlace(items, oldNonU: oldNonU, newNonU: newNonU)
            for (k, s) in repositioned.enumerated() where k < stays.count && !stays[k] {
                movedSections.insert(ObjectIdentifier(s))
            }
        }
        let insertedSectionSet = Set(newSections.map(ObjectIdentifier.init))
        let deletedSectionSet = Set(touched.filter { $0.count == 0 && !single }.map(ObjectIdentifier.init))

        var deletes: [(ResultIndexPath, ManagedObjectID)] = []
        var inserts: [(ResultIndexPath, ManagedObjectID)] = []
        var moves: [(ResultIndexPath, ResultIndexPath, ManagedObjectID)] = []
        var updates: [(ResultIndexPath, ResultIndexPath, ManagedObjectID)] = []
        // Candidates in both, by section, for the gap rule.
        var bySection: [ObjectIdentifier: [ObjectIdentifier]] = [:]
        for o in candidates {
            let k = ObjectIdentifier(o)
            switch (oldPlace[k], newPlace[k]) {
            case (let old?, nil):
                deletes.append((old.path, oldOf[k] ?? o.objectID))
            case (nil, let new?):
                inserts.append((new.path, o.objectID))
            case (let old?, let new?):
                let os = ObjectIdentifier(old.section), ns = ObjectIdentifier(new.section)
                if os == ns {
                    bySection[os, default: []].append(k)
                } else if deletedSectionSet.contains(os) || insertedSectionSet.contains(ns) || movedSections.contains(os) || movedSections.contains(ns) {
                    deletes.append((old.path, oldOf[k] ?? o.objectID))
                    inserts.append((new.path, o.objectID))
                } else {
                    moves.append((old.path, new.path, o.objectID))
                }
            case (nil, nil):
                break
            }
        }
        let objectOf = Dictionary(candidates.map { (ObjectIdentifier($0), $0) }, uniquingKeysWith: { a, _ in a })
        // Positions of every removed and placed row, by section.
        var oldRows: [ObjectIdentifier: [Int]] = [:], newRows: [ObjectIdentifier: [Int]] = [:]
        for p in oldPlace.values where bySection[ObjectIdentifier(p.section)] != nil { oldRows[ObjectIdentifier(p.section), default: []].append(p.path.row) }
        for p in newPlace.values where bySection[ObjectIdentifier(p.section)] != nil { newRows[ObjectIdentifier(p.section), default: []].append(p.path.row) }
        for (sk, ks) in bySection {
            let items = ks.compactMap { k -> (Int, Int)? in
                guard let o = oldPlace[k], let n = newPlace[k] else { return nil }
                return (o.path.row, n.path.row)
            }
            let stays = Self.staysInPlace(items, oldNonU: oldRows[sk] ?? [], newNonU: newRows[sk] ?? [])
            for (i, k) in ks.enumerated() {
                guard let old = oldPlace[k], let new = newPlace[k], let o = objectOf[k] else { continue }
                if i < stays.count && stays[i] { updates.append((old.path, new.path, o.objectID)) } else { moves.append((old.path, new.path, o.objectID)) }
            }
        }

        for (i, name) in deletedSections.sorted(by: { $0.0 > $1.0 }) { changes.changes.append(.deleteSection(index: i, name: name)) }
        for (p, id) in deletes.sorted(by: { $0.0 > $1.0 }) { changes.changes.append(.delete(id, at: p)) }
        var sectionMoves: [(Int, Int, String)] = []
        for s in repositioned where movedSections.contains(ObjectIdentifier(s)) {
            if let o = sectionOld[ObjectIdentifier(s)]?.index, let n = sectionNew[ObjectIdentifier(s)] { sectionMoves.append((o, n, s.name)) }
        }
        for (o, n, name) in sectionMoves.sorted(by: { $0.1 < $1.1 }) { changes.changes.append(.moveSection(from: o, to: n, name: name)) }
        for s in newSections.compactMap({ s in sectionNew[ObjectIdentifier(s)].map { ($0, s.name) } }).sorted(by: { $0.0 < $1.0 }) {
            changes.changes.append(.insertSection(index: s.0, name: s.1))
        }
        for (p, id) in inserts.sorted(by: { $0.0 < $1.0 }) { changes.changes.append(.insert(id, at: p)) }
        for (f, t, id) in moves.sorted(by: { $0.1 < $1.1 }) { changes.changes.append(.move(id, from: f, to: t)) }
        for (f, t, id) in updates.sorted(by: { $0.1 < $1.1 }) { changes.changes.append(.update(id, at: f, newIndexPath: t)) }
        return changes
    }

    /// Whether `o` belongs to the results now; its sort values, section value
    /// and the related objects its key paths went through if so. Errors leave
    /// it out and are kept (see the class's failure rules).
    func evaluate(_ o: ManagedObject) -> ([Value], Value, [ManagedObject])? {
        guard !o.isDeleted, o.managedObjectContext === context, isOfEntity(o) else { return nil }
        do {
            try o.loadIfFault()
        } catch {
            // Its row is gone from the store (deleted elsewhere, not merged
            // yet): not a result. Anything else is reported.
            if error.code != .notFound { keep(error) }
            return nil
        }
        do {
            if let p = fetchRequest.predicate, !(try p.evaluate(with: ObjectView(object: o, context: context))) { return nil }
            return try values(of: o)
        } catch {
            keep(error)
            return nil
        }
    }

    func keep(_ error: KuraError) {
        lastError = error
        if context.pendingError == nil { context.pendingError = error }
    }

    /// Which of `items` (old and new position among a list, both counted in
    /// the lists that also hold `oldNonU`/`newNonU`, the positions of all
    /// changed entries, items included) keep their place: their rank among
    /// the unchanged entries is the same before and after, and no other
    /// changed entry shares that gap before or after.
    static func staysInPlace(_ items: [(Int, Int)], oldNonU: [Int], newNonU: [Int]) -> [Bool] {
        let oldSorted = oldNonU.sorted(), newSorted = newNonU.sorted()
        func rank(_ p: Int, _ sorted: [Int]) -> Int {
            // Unchanged entries before `p`: p minus the changed entries before it.
            var lo = 0, hi = sorted.count
            while lo < hi {
                let mid = (lo + hi) / 2
                if sorted[mid] < p { lo = mid + 1 } else { hi = mid }
            }
            return p - lo
        }
        var oldGap: [Int: Int] = [:], newGap: [Int: Int] = [:]
        for p in oldSorted { oldGap[rank(p, oldSorted), default: 0] += 1 }
        for p in newSorted { newGap[rank(p, newSorted), default: 0] += 1 }
        return items.map { o, n in
            let ro = rank(o, oldSorted), rn = rank(n, newSorted)
            return ro == rn && oldGap[ro] == 1 && newGap[rn] == 1
        }
    }

    /// After a save: results that got permanent IDs are reported as updates
    /// in place, so ID-keyed views (snapshots) follow.
    func applySave(_ note: ContextDidSave) {
        guard store != nil, !note.inserted.isEmpty else { return }
        store!.stats = FetchedResultsChangeStatistics()
        var updates: [(ResultIndexPath, ManagedObjectID)] = []
        for id in note.inserted {
            guard let o = context.registered(id), let (s, row) = store!.position(of: o), let si = store!.index(of: s) else { continue }
            updates.append((ResultIndexPath(row: row, section: si), id))
        }
        guard !updates.isEmpty else { return }
        lastChangeStatistics = store!.stats
        deliver(FetchedResultsChangeSet(changes: updates.sorted { $0.0 < $1.0 }.map { .update($0.1, at: $0.0, newIndexPath: $0.0) }))
    }

    /// After the context's `reset()`: fetch again and report everything as
    /// deleted and inserted.
    func reloadAfterReset() {
        let old = snapshot
        do { try performFetch() } catch {
            lastError = error
            if context.pendingError == nil { context.pendingError = error }
            store = FRCStore(sortKeys: fetchRequest.sortDescriptors)
            if sectionPath == nil {
                let s = FRCSection(value: .null, name: "")
                store!.sections = [s]
            }
        }
        let new = snapshot
        var changes = FetchedResultsChangeSet()
        let single = sectionPath == nil
        if !single { for i in old.sections.indices.reversed() { changes.changes.append(.deleteSection(index: i, name: old.sections[i].name)) } }
        for (si, s) in old.sections.enumerated().reversed() {
            for (r, id) in s.objectIDs.enumerated().reversed() { changes.changes.append(.delete(id, at: ResultIndexPath(row: r, section: si))) }
        }
        if !single { for (i, s) in new.sections.enumerated() { changes.changes.append(.insertSection(index: i, name: s.name)) } }
        for (si, s) in new.sections.enumerated() {
            for (r, id) in s.objectIDs.enumerated() { changes.changes.append(.insert(id, at: ResultIndexPath(row: r, section: si))) }
        }
        var stats = FetchedResultsChangeStatistics()
        stats.refetched = true
        lastChangeStatistics = stats
        deliver(changes)
    }
}

extension ManagedObjectContext {
    /// Asks merges to report updates of `entity`'s objects this context has
    /// not registered (as refreshed faults), for a fetched-results controller.
    /// (IDs name the row's own entity: a parent's controller watches each of its kinds.)
    func watchUnregisteredUpdates(of entity: String) {
        for kind in model.entitiesByName[entity]?.hierarchy.kinds ?? [entity] {
            notices.watchedEntities[kind, default: 0] += 1
        }
    }

    func unwatchUnregisteredUpdates(of entity: String) {
        for kind in model.entitiesByName[entity]?.hierarchy.kinds ?? [entity] {
            notices.watchedEntities[kind, default: 0] -= 1
            if notices.watchedEntities[kind] == 0 { notices.watchedEntities[kind] = nil }
        }
    }
}
