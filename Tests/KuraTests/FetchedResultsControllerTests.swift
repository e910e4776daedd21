import Foundation
import XCTest
import Kura
import KuraEngine

/// Fetched-results controller (issue 11: "a table view showing a fetch never
/// learned of inserts, edits and deletes"): sections, index paths, change
/// sets that a table view can apply, snapshots, merged changes, and a cost
/// per change that does not grow with the results.
final class FetchedResultsControllerTests: XCTestCase {
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Category") {
                AttributeDescription("name", .string)
                RelationshipDescription("items", to: "Item", inverse: "category", toMany: true)
            }
            EntityDescription("Item") {
                AttributeDescription("title", .string)
                AttributeDescription("priority", .int64, default: 0)
                AttributeDescription("group", .string)
                RelationshipDescription("category", to: "Category", inverse: "items")
            }
        }
    }

    typealias Sections = [(name: String, ids: [ManagedObjectID])]

    /// Applies a change set to old results as FetchedResultsController+ChangeSet.swift
    /// says a table view does (written here independently of the controller).
    static func apply(_ set: FetchedResultsChangeSet, to old: Sections) throws -> Sections {
        var s = old
        var removeRows: [ResultIndexPath] = []
        var insertRows: [(ResultIndexPath, ManagedObjectID)] = []
        var removeSections: [Int] = []
        var movedSections: [(from: Int, to: Int)] = []
        var insertSections: [(Int, String)] = []
        var updates: [(ResultIndexPath, ManagedObjectID)] = []
        for c in set.changes {
            switch c {
            case .deleteSection(let i, _): removeSections.append(i)
            case .insertSection(let i, let n): insertSections.append((i, n))
            case .moveSection(let f, let t, _): movedSections.append((f, t))
            case .delete(_, let p): removeRows.append(p)
            case .insert(let id, let p): insertRows.append((p, id))
            case .move(let id, let f, let t): removeRows.append(f); insertRows.append((t, id))
            case .update(let id, _, let n): updates.append((n, id))
            }
        }
        for p in removeRows.sorted(by: >) {
            guard p.section < s.count, p.row < s[p.section].ids.count else { throw Failure("delete/move source \(p) out of range in \(set.changes)") }
            s[p.section].ids.remove(at: p.row)
        }
        var taken: [Int: (name: String, ids: [ManagedObjectID])] = [:]
        let pulled = Set(removeSections).union(movedSections.map(\.from))
        for i in pulled.sorted(by: >) {
            guard i < s.count else { throw Failure("section \(i) out of range") }
            let sec = s.remove(at: i)
            if let m = movedSections.first(where: { $0.from == i }) { taken[m.to] = sec }
        }
        var adds: [(Int, (name: String, ids: [ManagedObjectID]))] = insertSections.map { ($0.0, (name: $0.1, ids: [])) }
        for (to, sec) in taken { adds.append((to, sec)) }
        for (i, sec) in adds.sorted(by: { $0.0 < $1.0 }) {
            guard i <= s.count else { throw Failure("section insert \(i) out of range") }
            s.insert(sec, at: i)
        }
        for (p, id) in insertRows.sorted(by: { $0.0 < $1.0 }) {
            guard p.section < s.count, p.row <= s[p.section].ids.count else { throw Failure("insert \(p) out of range in \(set.changes)") }
            s[p.section].ids.insert(id, at: p.row)
        }
        for (p, id) in updates {
            guard p.section < s.count, p.row < s[p.section].ids.count else { throw Failure("update \(p) out of range") }
            s[p.section].ids[p.row] = id
        }
        return s
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ d: String) { description = d }
    }

    /// A fresh fetch grouped by section value, sections in order of their
    /// first object (the controller's documented rule).
    static func fresh(_ context: ManagedObjectContext, _ request: FetchRequest<ManagedObject>, section: ((ManagedObject) -> String)?) throws -> Sections {
        let objects = try context.fetch(request)
        guard let section else { return [(name: "", ids: objects.map(\.objectID))] }
        var out: Sections = []
        var index: [String: Int] = [:]
        for o in objects {
            let n = section(o)
            if let i = index[n] { out[i].ids.append(o.objectID) } else {
                index[n] = out.count
                out.append((name: n, ids: [o.objectID]))
            }
        }
        return out
    }

    static func same(_ a: Sections, _ b: Sections) -> Bool {
        a.count == b.count && zip(a, b).allSatisfy { $0.name == $1.name && $0.ids == $1.ids }
    }

    static func sections(_ s: FetchedResultsSnapshot) -> Sections { s.sections.map { (name: $0.name, ids: $0.objectIDs) } }

    // MARK: Model-based

    func testRandomEditsInBothContextsApplyToExactlyAFreshFetch() throws {
        let seed = ProcessInfo.processInfo.environment["KURA_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 0...UInt64(UInt32.max))
        print("FetchedResultsControllerTests seed \(seed) (replay with KURA_SEED=\(seed))")
        var rng = SplitMix64(state: seed)
        func pick(_ n: Int) -> Int { Int(rng.next() % UInt64(n)) }

        let categoryName: (ManagedObject) -> String = { o in
            ((o["category"] as? ManagedObject)?["name"] as? String) ?? ""
        }
        let groupName: (ManagedObject) -> String = { o in (o["group"] as? String) ?? "" }
        // (sort keys, section key path, section name of an object, predicate, batch size)
        let setups: [([SortKey], String?, ((ManagedObject) -> String)?, String?, Int)] = [
            ([SortKey("category.name"), SortKey("priority", ascending: false), SortKey("title", caseInsensitive: true)], "category.name", categoryName, "priority >= 2", 0),
            ([SortKey("title", caseInsensitive: true), SortKey("priority")], nil, nil, nil, 7),
            // The section key does not order like the first sort key.
            ([SortKey("priority"), SortKey("title")], "group", groupName, "title != 'e'", 0),
            ([SortKey("group", ascending: false), SortKey("title")], "group", groupName, "priority < 8 OR title BEGINSWITH[c] 'a'", 0),
        ]
        let titles = ["a", "B", "c", "A", "d", "e", "b"]
        let groups = ["x", "y", "z", "w"]
        for (setupIndex, setup) in setups.enumerated() {
            let container = try PersistentContainer.inMemory(model: Self.model())
            let main = container.newContext()
            main.mergePolicy = .mergeByPropertyObjectTrump
            var categories: [ManagedObject] = []
            for n in ["red", "green", "blue"] {
                let c = try main.insert("Category")
                c["name"] = n
                categories.append(c)
            }
            func randomize(_ o: ManagedObject, _ cats: [ManagedObject], all: Bool) {
                if all || pick(2) == 0 { o["title"] = titles[pick(titles.count)] }
                if all || pick(2) == 0 { o["priority"] = Int64(pick(10)) }
                if all || pick(3) == 0 { o["group"] = groups[pick(groups.count)] }
                if all || pick(3) == 0 { o["category"] = pick(4) == 0 ? nil : cats[pick(cats.count)] }
            }
            var items: [ManagedObject] = []
            for _ in 0..<12 {
                let o = try main.insert("Item")
                randomize(o, categories, all: true)
                items.append(o)
            }
            try main.save()

            var request = FetchRequest<ManagedObject>(entityName: "Item", sortDescriptors: setup.0)
            if let p = setup.3 { request.predicate = try KuraPredicate(format: p) }
            request.fetchBatchSize = setup.4
            let controller = FetchedResultsController(fetchRequest: request, context: main, sectionNameKeyPath: setup.1)
            var received: [FetchedResultsChangeSet] = []
            var lastSnapshot: FetchedResultsSnapshot?
            controller.onChange = { received.append($0) }
            controller.onSnapshot = { lastSnapshot = $0 }
            try controller.performFetch()
            var previous = Self.sections(controller.snapshot)
            XCTAssertTrue(Self.same(previous, try Self.fresh(main, request, section: setup.2)), "setup \(setupIndex): initial fetch")

            for batch in 0..<70 {
                main.automaticallyMergesChangesFromStore = batch % 3 == 2
                var log: [String] = []
                for _ in 0..<(1 + pick(4)) {
                    switch pick(10) {
                    case 0, 1:
                        let o = try main.insert("Item")
                        randomize(o, categories, all: true)
                        items.append(o)
                        log.append("insert")
                    case 2, 3, 4:
                        guard let o = items.filter({ !$0.isDeleted && $0.managedObjectContext != nil }).randomElement(using: &rng) else { continue }
                        randomize(o, categories, all: false)
                        log.append("update \(o.objectID)")
                    case 5:
                        guard let o = items.filter({ !$0.isDeleted && $0.managedObjectContext != nil }).randomElement(using: &rng) else { continue }
                        try main.delete(o)
                        log.append("delete \(o.objectID)")
                    case 6:
                        let c = categories[pick(categories.count)]
                        c["name"] = ["red", "green", "blue", "amber", "teal"][pick(5)]
                        log.append("rename category")
                    case 7:
                        try main.save()
                        log.append("save")
                    default:
                        // Another context edits the store; its save is merged.
                        let bg = container.newContext()
                        var note: ContextDidSave?
                        let token = bg.observeDidSave { note = $0 }
                        let bgCategories = try bg.fetch(FetchRequest<ManagedObject>(entityName: "Category"))
                        let stored = try bg.fetch(FetchRequest<ManagedObject>(entityName: "Item"))
                        for _ in 0..<(1 + pick(3)) {
                            switch pick(4) {
                            case 0:
                                randomize(try bg.insert("Item"), bgCategories, all: true)
                            case 1:
                                if let o = stored.filter({ !$0.isDeleted }).randomElement(using: &rng) { try bg.delete(o) }
                            default:
                                if let o = stored.filter({ !$0.isDeleted }).randomElement(using: &rng) { randomize(o, bgCategories, all: false) }
                            }
                        }
                        if pick(4) == 0, let c = bgCategories.randomElement(using: &rng) { c["name"] = ["red", "green", "blue", "amber"][pick(4)] }
                        try bg.save()
                        token.cancel()
                        if !main.automaticallyMergesChangesFromStore, let note { try main.mergeChanges(fromContextDidSave: note) }
                        log.append("background save")
                    }
                }
                main.processPendingChanges()
                // Pick up the merged inserts as items the main context can edit.
                for o in try main.fetch(FetchRequest<ManagedObject>(entityName: "Item")) where !items.contains(where: { $0 === o }) { items.append(o) }
                let expected = try Self.fresh(main, request, section: setup.2)
                var applied = previous
                for set in received { applied = try Self.apply(set, to: applied) }
                let context = "setup \(setupIndex) batch \(batch) [\(log.joined(separator: ", "))] seed \(seed)"
                XCTAssertNil(controller.checkInvariants(), context)
                XCTAssertTrue(Self.same(applied, expected), "\(context): change sets \(received.map(\.changes)) applied to \(previous) give \(applied), a fresh fetch gives \(expected)")
                XCTAssertTrue(Self.same(Self.sections(controller.snapshot), expected), "\(context): snapshot")
                if !received.isEmpty { XCTAssertTrue(Self.same(Self.sections(lastSnapshot ?? controller.snapshot), expected), "\(context): delivered snapshot") }
                XCTAssertEqual(controller.fetchedObjects?.map(\.objectID), expected.flatMap(\.ids), context)
                XCTAssertNil(controller.lastError, context)
                if !Self.same(applied, expected) { return }
                received = []
                previous = expected
            }
        }
    }

    // MARK: Focused

    func makeMemos(_ context: ManagedObjectContext) throws -> [ManagedObject] {
        var out: [ManagedObject] = []
        for (t, g, p) in [("apple", "fruit", 3), ("Avocado", "fruit", 1), ("beet", "veg", 2), ("carrot", "veg", 5), ("banana", "fruit", 4)] {
            let o = try context.insert("Item")
            o["title"] = t
            o["group"] = g
            o["priority"] = Int64(p)
            out.append(o)
        }
        try context.save()
        return out
    }

    func testSectionsIndexTitlesAndIndexPaths() throws {
        let container = try PersistentContainer.inMemory(model: Self.model())
        let context = container.newContext()
        let memos = try makeMemos(context)
        let request = FetchRequest<ManagedObject>(entityName: "Item", sortDescriptors: [SortKey("group"), SortKey("title", caseInsensitive: true)])
        let controller = FetchedResultsController(fetchRequest: request, context: context, sectionNameKeyPath: "group")
        XCTAssertNil(controller.sections)
        XCTAssertNil(controller.fetchedObjects)
        try controller.performFetch()
        let sections = try XCTUnwrap(controller.sections)
        XCTAssertEqual(sections.map(\.name), ["fruit", "veg"])
        XCTAssertEqual(sections.map(\.indexTitle), ["F", "V"])
        XCTAssertEqual(sections.map(\.numberOfObjects), [3, 2])
        XCTAssertEqual(sections[0].objects.map { $0["title"] as? String }, ["apple", "Avocado", "banana"])
        XCTAssertEqual(controller.sectionIndexTitles, ["F", "V"])
        XCTAssertEqual(try controller.section(forSectionIndexTitle: "V", at: 1), 1)
        XCTAssertEqual(try controller.object(at: ResultIndexPath(row: 1, section: 1))["title"] as? String, "carrot")
        XCTAssertEqual(controller.indexPath(for: memos[1]), ResultIndexPath(row: 1, section: 0))
        XCTAssertEqual(controller.indexPath(for: memos[3]), ResultIndexPath(row: 1, section: 1))
        XCTAssertEqual(controller.fetchedObjects?.map { $0["title"] as? String }, ["apple", "Avocado", "banana", "beet", "carrot"])
        controller.sectionIndexTitleProvider = { $0.uppercased() }
        XCTAssertEqual(controller.sectionIndexTitles, ["FRUIT", "VEG"])

        XCTAssertThrowsError(try controller.object(at: ResultIndexPath(row: 0, section: 2))) { error in
            XCTAssertEqual((error as? KuraError)?.code, .invalidArgument)
            XCTAssertTrue("\(error)".contains("2 sections"), "\(error)")
        }
        XCTAssertThrowsError(try controller.object(at: ResultIndexPath(row: 3, section: 1))) { error in
            XCTAssertEqual((error as? KuraError)?.code, .invalidArgument)
            XCTAssertTrue("\(error)".contains("\"veg\""), "\(error)")
        }
        let other = try context.insert("Item")
        other["title"] = "zucchini"
        other["group"] = "veg"
        XCTAssertNil(controller.indexPath(for: other), "not processed yet")
        context.processPendingChanges()
        XCTAssertEqual(controller.indexPath(for: other), ResultIndexPath(row: 2, section: 1))

        // Without a section key path there is one section, even when empty.
        let none = FetchedResultsController(fetchRequest: FetchRequest<ManagedObject>(entityName: "Item", predicate: try KuraPredicate(format: "title == 'none'")), context: context)
        try none.performFetch()
        XCTAssertEqual(none.sections?.count, 1)
        XCTAssertEqual(none.sections?.first?.name, "")
        XCTAssertEqual(none.sections?.first?.numberOfObjects, 0)
    }

    func testBadKeyPathsAndRequestsThrowErrorsNamingThem() throws {
        let container = try PersistentContainer.inMemory(model: Self.model())
        let context = container.newContext()
        _ = try makeMemos(context)
        let request = FetchRequest<ManagedObject>(entityName: "Item", sortDescriptors: [SortKey("title")])
        for (path, word) in [("colour", "\"colour\""), ("category.label", "\"label\""), ("title.name", "to-one relationship \"title\""), ("category", "attribute \"category\"")] {
            let c = FetchedResultsController(fetchRequest: request, context: context, sectionNameKeyPath: path)
            XCTAssertThrowsError(try c.performFetch()) { error in
                XCTAssertEqual((error as? KuraError)?.code, .notFound, path)
                XCTAssertTrue("\(error)".contains("section name key path \"\(path)\""), "\(error)")
                XCTAssertTrue("\(error)".contains(word), "\(error)")
            }
            XCTAssertNil(c.sections)
        }
        var limited = request
        limited.fetchLimit = 3
        XCTAssertThrowsError(try FetchedResultsController(fetchRequest: limited, context: context).performFetch()) { error in
            XCTAssertEqual((error as? KuraError)?.code, .invalidArgument)
            XCTAssertTrue("\(error)".contains("fetchLimit"), "\(error)")
        }
        let badSort = FetchRequest<ManagedObject>(entityName: "Item", sortDescriptors: [SortKey("category.rank")])
        XCTAssertThrowsError(try FetchedResultsController(fetchRequest: badSort, context: context).performFetch()) { error in
            XCTAssertTrue("\(error)".contains("sort key \"category.rank\""), "\(error)")
        }
        XCTAssertThrowsError(try FetchedResultsController(fetchRequest: request, context: context).object(at: ResultIndexPath(row: 0, section: 0))) { error in
            XCTAssertEqual((error as? KuraError)?.code, .misuse)
        }
    }

    func testSortKeyChangeIsAMoveAndOtherEditsAreUpdates() throws {
        let container = try PersistentContainer.inMemory(model: Self.model())
        let context = container.newContext()
        let memos = try makeMemos(context)  // by priority: Avocado 1, beet 2, apple 3, banana 4, carrot 5
        let controller = FetchedResultsController(fetchRequest: FetchRequest<ManagedObject>(entityName: "Item", sortDescriptors: [SortKey("priority")]), context: context)
        var sets: [FetchedResultsChangeSet] = []
        controller.onChange = { sets.append($0) }
        try controller.performFetch()

        memos[3]["priority"] = Int64(0)  // carrot to the top
        memos[0]["title"] = "Apple"      // apple changes in place
        context.processPendingChanges()
        XCTAssertEqual(sets.last?.changes, [
            .move(memos[3].objectID, from: ResultIndexPath(row: 4, section: 0), to: ResultIndexPath(row: 0, section: 0)),
            .update(memos[0].objectID, at: ResultIndexPath(row: 2, section: 0), newIndexPath: ResultIndexPath(row: 3, section: 0)),
        ])
        // A change that keeps the order is an update, not a move.
        memos[2]["priority"] = Int64(2)
        context.processPendingChanges()
        XCTAssertEqual(sets.last?.changes, [.update(memos[2].objectID, at: ResultIndexPath(row: 2, section: 0), newIndexPath: ResultIndexPath(row: 2, section: 0))])
        try context.delete(memos[1])
        context.processPendingChanges()
        XCTAssertEqual(sets.last?.changes, [.delete(memos[1].objectID, at: ResultIndexPath(row: 1, section: 0))])
        XCTAssertEqual(sets.count, 3)
    }

    func testSectionInsertAndDeleteAndRelatedObjectRename() throws {
        let container = try PersistentContainer.inMemory(model: Self.model())
        let context = container.newContext()
        let red = try context.insert("Category")
        red["name"] = "red"
        let blue = try context.insert("Category")
        blue["name"] = "blue"
        let a = try context.insert("Item")
        a["title"] = "a"
        a["category"] = red
        let b = try context.insert("Item")
        b["title"] = "b"
        b["category"] = blue
        try context.save()
        let request = FetchRequest<ManagedObject>(entityName: "Item", sortDescriptors: [SortKey("category.name"), SortKey("title")])
        let controller = FetchedResultsController(fetchRequest: request, context: context, sectionNameKeyPath: "category.name")
        var sets: [FetchedResultsChangeSet] = []
        controller.onChange = { sets.append($0) }
        try controller.performFetch()
        XCTAssertEqual(controller.sections?.map(\.name), ["blue", "red"])

        // Renaming the related object moves its items to a new section.
        red["name"] = "amber"
        context.processPendingChanges()
        XCTAssertEqual(controller.sections?.map(\.name), ["amber", "blue"])
        XCTAssertEqual(sets.last?.changes, [
            .deleteSection(index: 1, name: "red"),
            .delete(a.objectID, at: ResultIndexPath(row: 0, section: 1)),
            .insertSection(index: 0, name: "amber"),
            .insert(a.objectID, at: ResultIndexPath(row: 0, section: 0)),
        ])
        // An item without a category is in the "" section, first.
        b["category"] = nil
        context.processPendingChanges()
        XCTAssertEqual(controller.sections?.map(\.name), ["", "amber"])
        XCTAssertEqual(sets.count, 2)
    }

    func testMergedChangesFromAnotherContextReachTheController() async throws {
        let container = try PersistentContainer.inMemory(model: Self.model())
        let main = container.newContext()
        main.automaticallyMergesChangesFromStore = true
        _ = try makeMemos(main)
        var request = FetchRequest<ManagedObject>(entityName: "Item", sortDescriptors: [SortKey("title")])
        request.predicate = try KuraPredicate(format: "priority >= 3")
        let controller = FetchedResultsController(fetchRequest: request, context: main)
        try controller.performFetch()
        XCTAssertEqual(controller.fetchedObjects?.map { $0["title"] as? String }, ["apple", "banana", "carrot"])

        // The main context has never loaded "beet" since; another context makes it match.
        let bg = container.newContext()
        let beet = try XCTUnwrap(bg.fetch(FetchRequest<ManagedObject>(entityName: "Item", predicate: try KuraPredicate(format: "title == 'beet'"))).first)
        beet["priority"] = Int64(9)
        let fig = try bg.insert("Item")
        fig["title"] = "fig"
        fig["priority"] = Int64(7)
        let carrot = try XCTUnwrap(bg.fetch(FetchRequest<ManagedObject>(entityName: "Item", predicate: try KuraPredicate(format: "title == 'carrot'"))).first)
        try bg.delete(carrot)
        try bg.save()
        let stream = controller.changeSets()
        try main.mergePendingChanges()
        XCTAssertEqual(controller.fetchedObjects?.map { $0["title"] as? String }, ["apple", "banana", "beet", "fig"])
        XCTAssertNil(controller.lastError)
        var iterator = stream.makeAsyncIterator()
        let got = await iterator.next()
        XCTAssertEqual(got?.insertedRows.count, 2)
        XCTAssertEqual(got?.deletedRows, [ResultIndexPath(row: 2, section: 0)])
    }

    func testOneChangeTouchesAFewRowsOfALargeController() throws {
        let container = try PersistentContainer.inMemory(model: Self.model())
        let context = container.newContext()
        let n = 5000
        var items: [ManagedObject] = []
        for i in 0..<n {
            let o = try context.insert("Item")
            o["title"] = "t\(i)"
            o["priority"] = Int64(i)
            items.append(o)
        }
        try context.save()
        let controller = FetchedResultsController(fetchRequest: FetchRequest<ManagedObject>(entityName: "Item", sortDescriptors: [SortKey("priority")]), context: context)
        try controller.performFetch()
        items[1234]["priority"] = Int64(4000) + 0
        context.processPendingChanges()
        let stats = controller.lastChangeStatistics
        XCTAssertFalse(stats.refetched)
        XCTAssertEqual(stats.objectsEvaluated, 1)
        XCTAssertLessThan(stats.comparisons, 100, "binary searches, not a scan of \(n) rows")
        XCTAssertLessThan(stats.rowsShifted + stats.chunksScanned, 1200)
        XCTAssertEqual(controller.indexPath(for: items[1234] ), ResultIndexPath(row: 3999, section: 0))
        XCTAssertNil(controller.checkInvariants())
    }

    func testResetReportsEverythingAgain() throws {
        let container = try PersistentContainer.inMemory(model: Self.model())
        let context = container.newContext()
        _ = try makeMemos(context)
        let controller = FetchedResultsController(fetchRequest: FetchRequest<ManagedObject>(entityName: "Item", sortDescriptors: [SortKey("title")]), context: context, sectionNameKeyPath: "group")
        var sets: [FetchedResultsChangeSet] = []
        controller.onChange = { sets.append($0) }
        try controller.performFetch()
        let before = Self.sections(controller.snapshot)
        context.reset()
        context.processPendingChanges()
        XCTAssertEqual(sets.count, 1)
        XCTAssertTrue(controller.lastChangeStatistics.refetched)
        XCTAssertTrue(Self.same(try Self.apply(sets[0], to: before), Self.sections(controller.snapshot)))
        XCTAssertEqual(controller.fetchedObjects?.count, 5)
    }

    func testQueuedSavesAreAllMergedWhenOneUpdatesARowALaterOneDeletes() throws {
        // Regression: automatic merging lost every queued save after one whose
        // merge failed, and merging an update of a row that a later queued
        // save deleted failed with notFound (then thrown by the next fetch).
        let container = try PersistentContainer.inMemory(model: Self.model())
        let main = container.newContext()
        main.automaticallyMergesChangesFromStore = true
        let memos = try makeMemos(main)
        XCTAssertEqual(memos[0]["title"] as? String, "apple")  // loaded here
        var batches: [ObjectIDChanges] = []
        let token = main.observeObjectsDidChange { batches.append($0.ids) }
        let bg = container.newContext()
        let apple = try bg.existingObject(with: memos[0].objectID)
        apple["priority"] = Int64(8)
        try bg.save()
        try bg.delete(apple)
        try bg.save()
        let fig = try bg.insert("Item")
        fig["title"] = "fig"
        try bg.save()
        main.processPendingChanges()
        XCTAssertNil(main.pendingError)
        XCTAssertEqual(batches.count, 1)
        XCTAssertEqual(batches.first?.deleted, [memos[0].objectID])
        XCTAssertEqual(batches.first?.inserted, [fig.objectID])
        XCTAssertEqual(try main.fetch(FetchRequest<ManagedObject>(entityName: "Item")).count, 5)
        token.cancel()
    }

    func testAnObjectInsertedAndDeletedInOneBatchDoesNotHideTheNextInsert() throws {
        // Regression: the pending batch tracked objects by identity without
        // keeping an inserted-then-deleted object alive, so a new object at
        // the same address was taken for it and never reported as inserted.
        let container = try PersistentContainer.inMemory(model: Self.model())
        let main = container.newContext()
        main.automaticallyMergesChangesFromStore = true
        var inserted: [ManagedObjectID] = []
        let token = main.observeObjectsDidChange { inserted += $0.ids.inserted }
        let bg = container.newContext()
        var expected: [ManagedObjectID] = []
        for i in 0..<20 {
            let o = try bg.insert("Item")
            o["title"] = "t\(i)"
            try bg.save()
            if i % 2 == 0 {
                try bg.delete(o)
                try bg.save()
            } else {
                expected.append(o.objectID)
            }
        }
        main.processPendingChanges()
        XCTAssertEqual(inserted, expected)
        token.cancel()
    }
}
