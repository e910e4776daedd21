// FetchedResultsController: a fetch request's results, kept up to date with
// its context and reported as changes (Core Data's NSFetchedResultsController).
//
// State machine:
//   unfetched --performFetch()--> tracking --performFetch()--> tracking (rebuilt)
// While tracking, the controller observes its context's objects-did-change
// batches (ContextNotifications.swift) and did-saves. Each batch is applied
// in proportion to its size (see FetchedResultsController+Changes.swift and
// the costs in FetchedResultsController+Storage.swift), then reported as a
// change set and a snapshot (FetchedResultsController+ChangeSet.swift).
//
// What the results are: the objects of the request's entity that match its
// predicate in the context's current state (pending inserts, changes and
// deletes included: `includesPendingChanges` must be true), ordered by the
// request's sort keys, ties by object ID (as fetches order them); grouped in
// sections by the value of the section key path (an attribute, possibly
// through to-one relationships: `category.name`), sections in the order of
// their first objects. When the section key orders like the first sort key,
// each section is a run of the fetch order (Core Data's rule); when it does
// not, Kura still gathers every object of one section value into one section
// (placed where its first object falls), rather than splitting or misplacing
// sections as Core Data does; such sections can move (`moveSection`).
//
// What triggers a re-evaluation of an object: it was inserted, updated,
// refreshed (merged from another context or process), deleted or
// invalidated; or an object one of its sort or section key paths went through
// (the `category` of `category.name`) had that key changed. Not tracked (as in
// Core Data): a predicate that reads through relationships (`ANY tags.name ==
// 'x'`) is re-evaluated only when the object itself is reported changed.

import Foundation
import KuraEngine

/// The results of a fetch request, kept up to date as its context changes,
/// with their changes reported to a closure and as async sequences (Core
/// Data's `NSFetchedResultsController`).
///
/// ```swift
/// let controller = FetchedResultsController(fetchRequest: request, context: context,
///                                           sectionNameKeyPath: "category.name")
/// controller.onChange = { changes in tableView.apply(changes) }
/// try controller.performFetch()
/// let memo = try controller.object(at: ResultIndexPath(row: 0, section: 0))
/// ```
///
/// Thread rules: a controller belongs to its context's thread (or actor),
/// like the context's objects. Change sets and snapshots are delivered
/// synchronously on that thread, inside the context's
/// `processPendingChanges()` (run by every fetch and save, and by merges);
/// the async sequences buffer every value.
///
/// Lifetime: the controller keeps its context and its member objects alive;
/// it stops observing when it is deallocated. The async sequences end then.
///
/// Failures: ``performFetch()`` throws. A change cannot throw: if evaluating
/// an object fails (a fault whose row is gone, a predicate error), the object
/// is left out of the results and the error is kept in ``lastError`` and in
/// the context's ``ManagedObjectContext/pendingError`` (the next save or
/// fetch throws it).
///
/// Costs: ``performFetch()`` fetches once and reads every result's sort and
/// section values (with `fetchBatchSize` the objects load a batch at a time).
/// A change costs about (log n + 512 + n / 512) steps per changed object, for
/// n results (see ``lastChangeStatistics``); the fetch is never re-run, except
/// after the context's `reset()`.
public final class FetchedResultsController<T: ManagedObject> {
    /// The request whose results this controller holds.
    public let fetchRequest: FetchRequest<T>
    /// The context the results come from and are tracked in.
    public let context: ManagedObjectContext
    /// The key path whose values group the results into sections (nil: one section).
    public let sectionNameKeyPath: String?

    /// Called with every non-empty change set, on the context's thread.
    public var onChange: ((FetchedResultsChangeSet) -> Void)?
    /// Called with the new snapshot after every change set, and after a save
    /// gave unsaved results permanent IDs, on the context's thread.
    public var onSnapshot: ((FetchedResultsSnapshot) -> Void)?
    /// The title of a section in a section index (default: the name's first
    /// character, uppercased; "" for an empty name).
    public var sectionIndexTitleProvider: ((String) -> String?)?

    /// The last error met while applying a change (nil if none).
    public internal(set) var lastError: KuraError?
    /// What the last change cost (see ``FetchedResultsChangeStatistics``).
    public internal(set) var lastChangeStatistics = FetchedResultsChangeStatistics()

    var store: FRCStore?
    var entity: EntityDescription?
    /// Resolved sort key paths (parallel to the request's sort keys) and section key path.
    var sortPaths: [FRCKeyPath] = []
    var sectionPath: FRCKeyPath?
    /// Keys read on objects reached through relationships: a change of one
    /// of them on such an object re-evaluates the members that went through it.
    var throughKeys: Set<String> = []
    /// Members by the related objects their key paths went through.
    var dependents: [ObjectIdentifier: Set<ObjectIdentifier>] = [:]
    var changeToken: ObservationToken?
    var saveToken: ObservationToken?
    var changeStreams: [Int: AsyncStream<FetchedResultsChangeSet>.Continuation] = [:]
    var snapshotStreams: [Int: AsyncStream<FetchedResultsSnapshot>.Continuation] = [:]
    var nextStream = 0

    /// A controller for `fetchRequest`'s results in `context`, grouped by
    /// `sectionNameKeyPath` if given. Nothing is fetched until ``performFetch()``.
    public init(fetchRequest: FetchRequest<T>, context: ManagedObjectContext, sectionNameKeyPath: String? = nil) {
        self.fetchRequest = fetchRequest
        self.context = context
        self.sectionNameKeyPath = sectionNameKeyPath
    }

    deinit {
        changeToken?.cancel()
        saveToken?.cancel()
        if let e = entity { context.unwatchUnregisteredUpdates(of: e.name) }
        for c in changeStreams.values { c.finish() }
        for c in snapshotStreams.values { c.finish() }
    }

    // MARK: Fetching

    /// Runs the fetch request and starts tracking the context (again, if it
    /// was already tracking; nothing is reported for the fetch itself).
    ///
    /// - Throws: `.invalidArgument` if the request has a `fetchLimit` or
    ///   `fetchOffset`, does not include pending changes, or does not return
    ///   objects (a controller tracks the whole result as the context sees it);
    ///   `.notFound` naming the key path and the entity when the section key
    ///   path or a sort key is not an attribute reached through to-one
    ///   relationships; any error of `fetch` (unknown entity, predicate
    ///   errors, engine errors). On error the controller keeps its previous
    ///   results and tracking.
    public func performFetch() throws(KuraError) {
        let r = fetchRequest
        guard (r.fetchLimit ?? 0) == 0, r.fetchOffset == 0 else {
            throw KuraError(.invalidArgument, "a fetched-results controller tracks the whole result of its request; remove fetchLimit (\(r.fetchLimit ?? 0)) and fetchOffset (\(r.fetchOffset)) from the request for entity \"\(r.entityName)\"")
        }
        guard r.includesPendingChanges else {
            throw KuraError(.invalidArgument, "a fetched-results controller shows its context's current state; set includesPendingChanges of the request for entity \"\(r.entityName)\" to true")
        }
        guard r.resultType == .managedObjects else {
            throw KuraError(.invalidArgument, "a fetched-results controller holds objects; the request for entity \"\(r.entityName)\" has resultType \(r.resultType)")
        }
        let e = try context.model.entity(r.entityName)
        let sorts = try r.sortDescriptors.map { k throws(KuraError) in try FRCKeyPath(k.column, in: e, model: context.model, role: "sort key") }
        let section = try sectionNameKeyPath.map { p throws(KuraError) in try FRCKeyPath(p, in: e, model: context.model, role: "section name key path") }
        let objects = try context.fetch(r)

        var newStore = FRCStore(sortKeys: r.sortDescriptors)
        let oldSorts = sortPaths, oldSection = sectionPath
        sortPaths = sorts
        sectionPath = section
        var grouped: [Value: [(FRCRow, [ManagedObject])]] = [:]
        var order: [Value] = []
        do {
            for o in objects {
                let (keys, value, through) = try values(of: o)
                if grouped[value] == nil { order.append(value) }
                grouped[value, default: []].append((FRCRow(object: o, keys: keys), through))
            }
        } catch {
            sortPaths = oldSorts
            sectionPath = oldSection
            throw error
        }
        if section == nil && order.isEmpty { order.append(.null) }
        for v in order {
            let s = FRCSection(value: v, name: section == nil ? "" : sectionName(v))
            var rows = grouped[v] ?? []
            rows.sort { a, b in newStore.compare(a.0, b.0) < 0 }
            var start = 0
            while start < rows.count {
                let end = Swift.min(start + FRCStore.maxChunk / 2, rows.count)
                let chunk = FRCChunk(rows[start..<end].map(\.0), s)
                s.chunks.append(chunk)
                for (row, through) in rows[start..<end] {
                    newStore.location[ObjectIdentifier(row.object)] = FRCLocation(chunk: chunk, keys: row.keys, through: through)
                }
                start = end
            }
            s.count = rows.count
            newStore.sectionsByValue[v] = s
            newStore.place(s)
        }
        dependents = [:]
        throughKeys = Set(sorts.flatMap(\.throughKeys) + (section?.throughKeys ?? []))
        for (k, loc) in newStore.location { for t in loc.through { dependents[ObjectIdentifier(t), default: []].insert(k) } }
        newStore.stats = FetchedResultsChangeStatistics()
        store = newStore
        if entity == nil { context.watchUnregisteredUpdates(of: e.name) }
        entity = e
        lastError = nil

        changeToken?.cancel()
        saveToken?.cancel()
        changeToken = context.observeObjectsDidChange { [weak self] batch in self?.apply(batch) }
        saveToken = context.observeDidSave { [weak self] note in self?.applySave(note) }
    }

    /// The sort values, section value and related objects passed through of `o`.
    func values(of o: ManagedObject) throws(KuraError) -> ([Value], Value, [ManagedObject]) {
        var through: [ManagedObject] = []
        var keys: [Value] = []
        keys.reserveCapacity(sortPaths.count)
        for p in sortPaths { keys.append(try p.read(o, context, &through)) }
        let section = try sectionPath.map { p throws(KuraError) in try p.read(o, context, &through) } ?? .null
        return (keys, section, through)
    }

    func sectionName(_ v: Value) -> String {
        guard !v.isNull else { return "" }
        if case .text(let s) = v { return s }
        if let t = sectionPath?.attributeType, let swift = t.swiftValue(v) { return String(describing: swift) }
        return v.description
    }

    // MARK: Reading the results

    /// The results, section after section (nil before ``performFetch()``).
    public var fetchedObjects: [T]? {
        guard let store else { return nil }
        return store.sections.flatMap { store.rows(of: $0).map { Self.cast($0.object) } }
    }

    /// The sections (nil before ``performFetch()``). Without a section key
    /// path there is exactly one, named "", even when it is empty.
    public var sections: [FetchedResultsSection<T>]? {
        guard let store else { return nil }
        return store.sections.map {
            FetchedResultsSection(name: $0.name, indexTitle: sectionIndexTitle(forSectionName: $0.name), numberOfObjects: $0.count, store: $0)
        }
    }

    /// The object at `indexPath`.
    ///
    /// - Throws: `.misuse` before ``performFetch()``; `.invalidArgument` when
    ///   the section or row is out of range (naming both and the counts).
    public func object(at indexPath: ResultIndexPath) throws(KuraError) -> T {
        guard store != nil else { throw KuraError(.misuse, "object(at: \(indexPath)) before performFetch() of the fetched-results controller for \"\(fetchRequest.entityName)\"") }
        let count = store!.sections.count  // checked just above
        guard indexPath.section >= 0, indexPath.section < count else {
            throw KuraError(.invalidArgument, "section \(indexPath.section) of \(indexPath) is out of range: the controller for \"\(fetchRequest.entityName)\" has \(count) sections")
        }
        let s = store!.sections[indexPath.section]
        guard indexPath.row >= 0, indexPath.row < s.count, let row = store!.row(at: indexPath.row, of: s) else {
            throw KuraError(.invalidArgument, "row \(indexPath.row) of \(indexPath) is out of range: section \(indexPath.section) (\"\(s.name)\") has \(s.count) objects")
        }
        return Self.cast(row.object)
    }

    /// Where `object` is in the results, or nil if it is not in them.
    public func indexPath(for object: T) -> ResultIndexPath? {
        guard store != nil, let (section, row) = store!.position(of: object), let s = store!.index(of: section) else { return nil }
        return ResultIndexPath(row: row, section: s)
    }

    /// The results as section names and object IDs (the diffable form).
    /// Empty before ``performFetch()``.
    public var snapshot: FetchedResultsSnapshot {
        guard let store else { return FetchedResultsSnapshot(sections: []) }
        return FetchedResultsSnapshot(sections: store.sections.map {
            FetchedResultsSnapshot.Section(name: $0.name, objectIDs: store.rows(of: $0).map(\.object.objectID))
        })
    }

    // MARK: Section index

    /// The section-index title for a section name: ``sectionIndexTitleProvider``
    /// if set, else the name's first character uppercased ("" for "").
    public func sectionIndexTitle(forSectionName name: String) -> String? {
        if let p = sectionIndexTitleProvider { return p(name) }
        return name.first.map { String($0).uppercased() } ?? ""
    }

    /// The distinct section-index titles, in section order.
    public var sectionIndexTitles: [String] {
        var seen = Set<String>()
        var out: [String] = []
        for s in store?.sections ?? [] {
            if let t = sectionIndexTitle(forSectionName: s.name), seen.insert(t).inserted { out.append(t) }
        }
        return out
    }

    /// The index of the first section whose index title is `title` (Core
    /// Data's `section(forSectionIndexTitle:at:)`; `index` is the title's
    /// position in ``sectionIndexTitles``, used when the title is not found:
    /// the last section whose title comes before it).
    ///
    /// - Throws: `.notFound` when no section has `title` and `index` is out of
    ///   range of ``sectionIndexTitles``.
    public func section(forSectionIndexTitle title: String, at index: Int) throws(KuraError) -> Int {
        let sections = store?.sections ?? []
        if let i = sections.firstIndex(where: { sectionIndexTitle(forSectionName: $0.name) == title }) { return i }
        let titles = sectionIndexTitles
        guard index >= 0, index < titles.count else {
            throw KuraError(.notFound, "no section has index title \"\(title)\", and \(index) is not an index of the \(titles.count) section-index titles")
        }
        var last = 0
        for (i, s) in sections.enumerated() {
            if let t = sectionIndexTitle(forSectionName: s.name), let ti = titles.firstIndex(of: t), ti <= index { last = i }
        }
        return last
    }

    // MARK: Async sequences

    /// Every change set from now on, buffered without limit, until the
    /// controller is deallocated or the iterating task is cancelled.
    public func changeSets() -> AsyncStream<FetchedResultsChangeSet> {
        let (stream, c) = AsyncStream<FetchedResultsChangeSet>.makeStream()
        nextStream += 1
        changeStreams[nextStream] = c
        return stream
    }

    /// Every snapshot from now on (see ``onSnapshot``), buffered without
    /// limit, until the controller is deallocated or the task is cancelled.
    public func snapshots() -> AsyncStream<FetchedResultsSnapshot> {
        let (stream, c) = AsyncStream<FetchedResultsSnapshot>.makeStream()
        nextStream += 1
        snapshotStreams[nextStream] = c
        return stream
    }

    func deliver(_ changes: FetchedResultsChangeSet) {
        guard !changes.isEmpty else { return }
        onChange?(changes)
        for (id, c) in changeStreams {
            if case .terminated = c.yield(changes) { changeStreams[id] = nil }
        }
        deliverSnapshot()
    }

    func deliverSnapshot() {
        guard onSnapshot != nil || !snapshotStreams.isEmpty else { return }
        let s = snapshot
        onSnapshot?(s)
        for (id, c) in snapshotStreams {
            if case .terminated = c.yield(s) { snapshotStreams[id] = nil }
        }
    }

    /// Checks the storage invariants (FetchedResultsController+Storage.swift);
    /// returns the first violation. For tests.
    package func checkInvariants() -> String? {
        guard store != nil else { return nil }
        return store!.checkInvariants(singleSection: sectionPath == nil)
    }

    static func cast(_ o: ManagedObject) -> T {
        // performFetch checked (through fetch) that the entity's class is a T,
        // and only objects of that entity become members.
        guard let t = o as? T else { preconditionFailure("\(o) is not a \(T.self) (a Kura bug)") }
        return t
    }
}

/// A sort or section key path resolved against the model: to-one hops, then
/// an attribute.
struct FRCKeyPath {
    let path: String
    let hops: [String]
    let attribute: String
    let attributeType: AttributeType

    /// Keys read on objects reached through a relationship.
    var throughKeys: [String] { Array(hops.dropFirst()) + (hops.isEmpty ? [] : [attribute]) }

    init(_ path: String, in entity: EntityDescription, model: ManagedObjectModel, role: String) throws(KuraError) {
        let parts = path.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        var e = entity
        for (i, k) in parts.enumerated() {
            if i == parts.count - 1, let a = e.attributesByName[k] {
                self.path = path
                hops = Array(parts.dropLast())
                attribute = k
                attributeType = a.type
                return
            }
            guard let r = e.relationshipsByName[k], !r.isToMany, i < parts.count - 1, let next = model.entitiesByName[r.destination] else {
                let what = i == parts.count - 1 ? "attribute" : "to-one relationship"
                throw KuraError(.notFound, "\(role) \"\(path)\" of the fetched-results controller for entity \"\(entity.name)\": entity \"\(e.name)\" has no \(what) \"\(k)\" (attributes: \(e.attributes.map(\.name).joined(separator: ", ")); to-one relationships: \(e.relationships.filter { !$0.isToMany }.map(\.name).joined(separator: ", ")))")
            }
            e = next
        }
        throw KuraError(.notFound, "\(role) \"\(path)\" of the fetched-results controller for entity \"\(entity.name)\" is empty")
    }

    /// The value at this path of `o` (null through a nil relationship),
    /// noting the related objects it went through.
    func read(_ o: ManagedObject, _ context: ManagedObjectContext, _ through: inout [ManagedObject]) throws(KuraError) -> Value {
        var obj = o
        for h in hops {
            guard let r = obj.entity.relationshipsByName[h], !r.isToMany else {
                throw KuraError(.notFound, "key path \"\(path)\": entity \"\(obj.entity.name)\" has no to-one relationship \"\(h)\"")
            }
            guard let next = try context.relatedObject(obj, r) else { return .null }
            through.append(next)
            obj = next
        }
        guard obj.entity.attributesByName[attribute] != nil else {
            throw KuraError(.notFound, "key path \"\(path)\": entity \"\(obj.entity.name)\" has no attribute \"\(attribute)\"")
        }
        try obj.loadIfFault()
        return obj.storedValue(named: attribute) ?? .null
    }
}
