import Foundation
import XCTest
@testable import Kura

/// The registry keeps a context's own inserted objects in an array by the
/// number in their temporary IDs (ObjectRegistry.swift): uniquing must not
/// change. Guards: an own ID found after its slot array was dropped (undo of
/// an insert, then redo after a save), IDs of other contexts, counts.
final class ObjectRegistryTests: XCTestCase {
    func testOwnIDsOtherIDsAndDroppedSlots() {
        var r = ObjectRegistry(identity: 5)
        let e = EntityDescription("E") {}
        let a = r.newTemporaryID("E"), b = r.newTemporaryID("E")
        XCTAssertTrue(a.isTemporary && b.isTemporary)
        XCTAssertNotEqual(a, b)
        let oa = ManagedObject(entity: e, objectID: a), ob = ManagedObject(entity: e, objectID: b)
        r[a] = .passUnretained(oa)
        r[b] = .passUnretained(ob)
        XCTAssertEqual(r.count, 2)
        XCTAssertTrue(r[a]?.takeUnretainedValue() === oa)
        XCTAssertTrue(r[b]?.takeUnretainedValue() === ob)

        // Another context's temporary ID with the same number is not ours.
        var other = ObjectRegistry(identity: 6)
        let foreign = other.newTemporaryID("E")
        XCTAssertNil(r[foreign])
        let of = ManagedObject(entity: e, objectID: foreign)
        r[foreign] = .passUnretained(of)
        XCTAssertTrue(r[foreign]?.takeUnretainedValue() === of)
        XCTAssertEqual(r.count, 3)

        // Dropping both own objects drops the array; putting one back (undo's
        // redo) still finds it.
        r[a] = nil
        r[b] = nil
        XCTAssertNil(r[a])
        XCTAssertEqual(r.count, 1)
        r[b] = .passUnretained(ob)
        XCTAssertTrue(r[b]?.takeUnretainedValue() === ob)
        XCTAssertEqual(r.count, 2)
        XCTAssertEqual(Set(r.values.map { ObjectIdentifier($0.takeUnretainedValue()) }), [ObjectIdentifier(ob), ObjectIdentifier(of)])

        // A leaving object drops only its own entry (in the array and in the dictionary).
        let stranger = ManagedObject(entity: e, objectID: b)
        r.remove(b, ifItIs: stranger)
        XCTAssertTrue(r[b]?.takeUnretainedValue() === ob, "another object's leaving does not drop the entry")
        r.remove(foreign, ifItIs: stranger)
        XCTAssertTrue(r[foreign]?.takeUnretainedValue() === of)
        r.remove(foreign, ifItIs: of)
        XCTAssertNil(r[foreign])
        r[foreign] = .passUnretained(of)
        withExtendedLifetime(stranger) {}

        // New numbers after the drop go to the array again.
        let c = r.newTemporaryID("E")
        let oc = ManagedObject(entity: e, objectID: c)
        r[c] = .passUnretained(oc)
        XCTAssertTrue(r[c]?.takeUnretainedValue() === oc)
        XCTAssertEqual(r.count, 3)
        r.removeAll()
        XCTAssertEqual(r.count, 0)
        XCTAssertNil(r[b])
        XCTAssertNil(r[c])

        // A context whose identity does not fit makes process-wide IDs.
        var big = ObjectRegistry(identity: 1 << 40)
        let p = big.newTemporaryID("E")
        XCTAssertTrue(p.isTemporary && p.rowID < 0)
        let op = ManagedObject(entity: e, objectID: p)
        big[p] = .passUnretained(op)
        XCTAssertTrue(big[p]?.takeUnretainedValue() === op)
        withExtendedLifetime((oa, ob, oc, of, op)) {}
    }

    func testUniquingByTemporaryAndPermanentIDsThroughSaves() throws {
        let container = try PersistentContainer.inMemory(model: companyModel())
        let context = container.newContext()
        var objects: [Company] = []
        for i in 0..<500 {
            let c = try context.insert(Company.self)
            c.name = "c\(i)"
            objects.append(c)
        }
        for c in objects.shuffled().prefix(50) {
            XCTAssertTrue(try context.object(with: c.objectID) === c)
        }
        XCTAssertEqual(context.registeredObjectCount, 500)
        let temporary = objects.map(\.objectID)
        try context.save()
        for (c, old) in zip(objects, temporary) {
            XCTAssertFalse(c.objectID.isTemporary)
            XCTAssertTrue(try context.object(with: c.objectID) === c)
            XCTAssertThrowsError(try context.object(with: old), "the temporary ID of a saved object names nothing in this context")
        }
        // Inserts after a save, a rollback, and inserts again.
        let later = try context.insert(Company.self)
        XCTAssertTrue(try context.object(with: later.objectID) === later)
        context.rollback()
        XCTAssertNil(later.managedObjectContext)
        let again = try context.insert(Company.self)
        again.name = "again"
        XCTAssertTrue(try context.object(with: again.objectID) === again)
        XCTAssertEqual(context.registeredObjectCount, 501)
        try context.save()
        XCTAssertEqual(try context.count(for: FetchRequest<Company>(entityName: "Company")), 501)
    }

    /// Every way an object enters a context links it to that context
    /// (`ManagedObjectContext.link`, set by each initializer): an insert, a
    /// fault from `object(with:)`, `existingObject`, a fetch, a child
    /// context's insert and the view context's. One instance per ID, a fault
    /// loads its own row, and once the context is released its objects see no
    /// context (a fault then reads its zero value and notes `.misuse`).
    /// `existingObject` of a deleted row throws `.notFound`, as before.
    @MainActor
    func testEveryPathLinksObjectsToTheirContextUntilItIsReleased() throws {
        let container = try PersistentContainer.inMemory(model: companyModel())
        let a = container.newContext()
        var ids: [ManagedObjectID] = []
        for i in 0..<20 {
            let c = Company(context: a)
            XCTAssertTrue(c.managedObjectContext === a, "insert")
            c.name = "c\(i)"
            ids.append(c.objectID)
        }
        try a.save()
        let saved = try a.fetch(FetchRequest<Company>(entityName: "Company", sortDescriptors: [SortKey("name")]))
        ids = saved.map(\.objectID)
        let names = saved.map(\.name)

        let b = container.newContext()
        for (k, id) in ids.enumerated().reversed() {
            let fault = try b.object(with: id)
            XCTAssertTrue(fault.isFault)
            XCTAssertTrue(fault.managedObjectContext === b, "object(with:)")
            XCTAssertTrue(try b.object(with: id) === fault, "one instance per ID")
            let loaded = try b.existingObject(with: id)
            XCTAssertTrue(loaded === fault, "existingObject gives the registered instance")
            XCTAssertFalse(loaded.isFault)
            XCTAssertEqual((loaded as? Company)?.name, names[k], "a fault loads its own row")
            XCTAssertEqual(try loaded.value(forKey: "name") as? String, names[k])
        }
        let c = container.newContext()
        let fetched = try c.fetch(FetchRequest<Company>(entityName: "Company"))
        XCTAssertEqual(fetched.count, 20)
        for o in fetched { XCTAssertTrue(o.managedObjectContext === c, "fetch") }

        let child = ManagedObjectContext(parent: a)
        let inChild = Company(context: child)
        XCTAssertTrue(inChild.managedObjectContext === child, "child context")
        let view = container.viewContext
        let inView = try view.existingObject(with: ids[0])
        XCTAssertTrue(inView.managedObjectContext === view, "view context")

        // Released context: its objects see none.
        var orphan: Company?
        var orphanLoaded: Company?
        do {
            let d = container.newContext()
            orphan = try d.object(with: ids[1]) as? Company
            orphanLoaded = try d.existingObject(with: ids[2]) as? Company
            XCTAssertTrue(orphan?.managedObjectContext === d)
        }
        XCTAssertNil(orphan?.managedObjectContext)
        XCTAssertNil(orphanLoaded?.managedObjectContext)
        XCTAssertEqual(orphanLoaded?.name, names[2], "loaded values stay readable")
        XCTAssertEqual(orphan?.name, "", "a fault of a released context reads its zero value")
        XCTAssertEqual(orphan?.readError?.code, .misuse)

        // Deleted rows: existingObject throws .notFound (deleted here, then saved).
        let gone = try a.existingObject(with: ids[3])
        try a.delete(gone)
        XCTAssertThrowsError(try a.existingObject(with: ids[3])) { e in
            XCTAssertEqual((e as? KuraError)?.code, .notFound)
        }
        try a.save()
        XCTAssertThrowsError(try container.newContext().existingObject(with: ids[3])) { e in
            XCTAssertEqual((e as? KuraError)?.code, .notFound)
            XCTAssertTrue((e as? KuraError)?.message.contains("no longer exists") == true, "\(e)")
        }
    }

    /// A save's new permanent IDs sit in runs by row ID (ObjectRegistry.openRun):
    /// lookups, replacement, removal by a leaving object, counts, the
    /// dictionary still answering for an ID registered before the run
    /// opened, other entities and temporary IDs with the same row IDs, and
    /// a run extended by the next save.
    func testPermanentRuns() {
        var r = ObjectRegistry(identity: 5)
        let e = EntityDescription("E") {}
        let f = EntityDescription("F") {}
        func id(_ n: Int64, _ entity: String = "E") -> ManagedObjectID { ManagedObjectID(entity: entity, rowID: n) }
        // A fault registered under a row ID before a save inserts that row.
        let early = ManagedObject(entity: e, objectID: id(12))
        r[id(12)] = .passUnretained(early)
        r.openRun(entity: "E", first: 10, count: 5)
        XCTAssertTrue(r[id(12)]?.takeUnretainedValue() === early, "an entry made before the run opened is still found")
        XCTAssertEqual(r.count, 1)
        let objects = (10..<15).map { ManagedObject(entity: e, objectID: id(Int64($0))) }
        for o in objects { r[o.objectID] = .passUnretained(o) }
        XCTAssertEqual(r.count, 5, "the new object took the ID over from the early one")
        for o in objects { XCTAssertTrue(r[o.objectID]?.takeUnretainedValue() === o) }
        r.remove(id(12), ifItIs: early)
        XCTAssertTrue(r[id(12)]?.takeUnretainedValue() === objects[2], "the object that lost its ID leaving drops nothing")

        // Same row IDs of another entity, or temporary: not the run's.
        let other = ManagedObject(entity: f, objectID: id(11, "F"))
        XCTAssertNil(r[id(11, "F")])
        r[id(11, "F")] = .passUnretained(other)
        XCTAssertTrue(r[id(11, "F")]?.takeUnretainedValue() === other)
        XCTAssertTrue(r[id(11)]?.takeUnretainedValue() === objects[1])
        XCTAssertNil(r[ManagedObjectID(entity: "E", rowID: 11, temporary: true)])
        XCTAssertNil(r[id(15)])
        XCTAssertNil(r[id(9)])
        XCTAssertEqual(r.count, 6)

        // The next save's IDs extend the run.
        r.openRun(entity: "E", first: 15, count: 2)
        let more = (15..<17).map { ManagedObject(entity: e, objectID: id(Int64($0))) }
        for o in more { r[o.objectID] = .passUnretained(o) }
        XCTAssertTrue(r[id(16)]?.takeUnretainedValue() === more[1])
        XCTAssertEqual(r.count, 8)
        XCTAssertEqual(Set(r.values.map { ObjectIdentifier($0.takeUnretainedValue()) }),
                       Set((objects + more + [other]).map { ObjectIdentifier($0) }))

        // Objects leaving one by one; the emptied run is dropped, and its IDs
        // registered again go to the dictionary.
        let stranger = ManagedObject(entity: e, objectID: id(10))
        r.remove(id(10), ifItIs: stranger)
        XCTAssertTrue(r[id(10)]?.takeUnretainedValue() === objects[0])
        for o in objects + more { r.remove(o.objectID, ifItIs: o) }
        XCTAssertEqual(r.count, 1)
        for o in objects + more { XCTAssertNil(r[o.objectID]) }
        r[id(13)] = .passUnretained(objects[3])
        XCTAssertTrue(r[id(13)]?.takeUnretainedValue() === objects[3])
        XCTAssertEqual(r.count, 2)
        r[id(13)] = nil
        XCTAssertEqual(r.count, 1)

        // Setting nil in a run, and removeAll.
        r.openRun(entity: "E", first: 20, count: 1)
        let last = ManagedObject(entity: e, objectID: id(20))
        r[id(20)] = .passUnretained(last)
        XCTAssertEqual(r.count, 2)
        r[id(20)] = nil
        XCTAssertNil(r[id(20)])
        XCTAssertEqual(r.count, 1)
        r.openRun(entity: "E", first: 21, count: 1)
        r[id(21)] = .passUnretained(last)
        // More runs than the registry keeps: the rest go to the dictionary.
        let many = (0..<12).map { k in ManagedObject(entity: e, objectID: id(1, "G\(k)")) }
        for o in many {
            r.openRun(entity: o.objectID.entityName, first: 1, count: 1)
            r[o.objectID] = .passUnretained(o)
        }
        for o in many { XCTAssertTrue(r[o.objectID]?.takeUnretainedValue() === o) }
        XCTAssertEqual(r.count, 14)
        for o in many { r.remove(o.objectID, ifItIs: o) }
        XCTAssertEqual(r.count, 2)
        r.removeAll()
        XCTAssertEqual(r.count, 0)
        XCTAssertNil(r[id(21)])
        XCTAssertNil(r[id(11, "F")])
        withExtendedLifetime((early, objects, more, other, stranger, last, many)) {}
    }

    /// Through the public API: objects of two entities saved in several
    /// saves (runs of new permanent IDs, one extended by the next save, one
    /// broken by a reserved ID) stay uniqued by their IDs, leave the context
    /// when released, and come back as new instances loaded from the store.
    func testSavedObjectsUniquedAndReleasedByPermanentID() throws {
        let container = try PersistentContainer.inMemory(model: companyModel())
        let context = container.newContext()
        var companies: [Company] = []
        var departments: [Department] = []
        for round in 0..<3 {
            for i in 0..<200 {
                let c = try context.insert(Company.self)
                c.name = "c\(round)-\(i)"
                companies.append(c)
                if i % 3 == 0 {
                    let d = try context.insert(Department.self)
                    d.name = "d\(round)-\(i)"
                    departments.append(d)
                }
            }
            if round == 1 { try context.obtainPermanentIDs(for: [companies[companies.count - 100]]) }
            try context.save()
        }
        do {
            let all: [ManagedObject] = companies + departments
            XCTAssertEqual(context.registeredObjectCount, all.count)
            XCTAssertEqual(Set(all.map(\.objectID)).count, all.count)
            for o in all {
                XCTAssertFalse(o.objectID.isTemporary)
                XCTAssertTrue(try context.object(with: o.objectID) === o)
            }
        }
        let ids = companies.map(\.objectID)
        let names = companies.map(\.name)
        // Released: the context no longer holds them (clean objects are not retained).
        companies = []
        XCTAssertEqual(context.registeredObjectCount, departments.count)
        for (id, name) in zip(ids, names).shuffled().prefix(50) {
            let c = try context.existingObject(with: id) as? Company
            XCTAssertEqual(c?.name, name)
            XCTAssertTrue(try context.object(with: id) === c, "one instance per ID")
        }
        departments = []
        XCTAssertEqual(context.registeredObjectCount, 0)
        // A context that keeps saving after its earlier objects left.
        let d = try context.insert(Department.self)
        d.name = "late"
        try context.save()
        XCTAssertTrue(try context.object(with: d.objectID) === d)
        XCTAssertEqual(context.registeredObjectCount, 1)
    }

    /// IDTable (the registry's hash table of IDs) against a Dictionary: long
    /// random runs of inserts, replacements, removals (plain and by object)
    /// and lookups over IDs that share row IDs across entities and kinds
    /// (same hash inputs but the name), with growth and removals that shift
    /// probe runs back, including runs that wrap around the table's end.
    func testIDTableAgainstADictionary() {
        let e = EntityDescription("E") {}
        let objects = (0..<8).map { _ in ManagedObject(entity: e, objectID: ManagedObjectID(entity: "E", rowID: 1)) }
        var generator = SystemRandomNumberGenerator()
        for round in 0..<20 {
            var table = IDTable()
            var model: [ManagedObjectID: Int] = [:]
            let names = ["E", "F", "Gg", "Hh"]
            // Small key ranges make long probe runs; larger ones make growth.
            let range: Int64 = round % 2 == 0 ? 40 : 3000
            for _ in 0..<4000 {
                let id = ManagedObjectID(entity: names[Int.random(in: 0..<names.count, using: &generator)],
                                         rowID: Int64.random(in: -range...range, using: &generator),
                                         temporary: Bool.random(using: &generator))
                let k = Int.random(in: 0..<objects.count, using: &generator)
                switch Int.random(in: 0..<10, using: &generator) {
                case 0..<5:
                    table[id] = .passUnretained(objects[k])
                    model[id] = k
                case 5..<7:
                    table[id] = nil
                    model[id] = nil
                case 7:
                    table.remove(id, ifItIs: Unmanaged.passUnretained(objects[k]).toOpaque())
                    if model[id] == k { model[id] = nil }
                case 8:
                    // A fetch's registration: the entry there wins.
                    let first = table.insertIfAbsent(id, .passUnretained(objects[k]))
                    if let m = model[id] {
                        XCTAssertTrue(first?.takeUnretainedValue() === objects[m], "\(id)")
                    } else {
                        XCTAssertNil(first, "\(id)")
                        model[id] = k
                    }
                default:
                    // A fetch sizing the table for what it is about to add.
                    if Int.random(in: 0..<20, using: &generator) == 0 { table.reserve(table.count + Int.random(in: 0...600, using: &generator)) }
                }
                let got = table[id].map { u in objects.firstIndex { $0 === u.takeUnretainedValue() } }
                XCTAssertEqual(got ?? nil, model[id], "\(id)")
                XCTAssertEqual(table.count, model.count)
            }
            for (id, k) in model { XCTAssertTrue(table[id]?.takeUnretainedValue() === objects[k], "\(id)") }
            XCTAssertEqual(table.allValues.count, model.count)
            // A copy changed does not change the table (keys copied on write).
            var copy = table
            for id in model.keys { copy[id] = nil }
            copy[ManagedObjectID(entity: "E", rowID: range + 1)] = .passUnretained(objects[0])
            XCTAssertEqual(copy.count, 1)
            for (id, k) in model { XCTAssertTrue(table[id]?.takeUnretainedValue() === objects[k], "\(id)") }
            XCTAssertNil(table[ManagedObjectID(entity: "E", rowID: range + 1)])
            for id in model.keys.shuffled(using: &generator) { table[id] = nil }
            XCTAssertTrue(table.isEmpty)
            XCTAssertEqual(table.allValues.count, 0)
        }
        withExtendedLifetime(objects) {}
    }

    /// The save's and the context's fast paths (`addInserted`,
    /// `moveInserted`, `remove(_:ifItIs:)` straight to a slot) against the
    /// general subscript, through a dictionary model: random inserts, saves
    /// (runs opened for the new IDs, sometimes next to an entity's earlier
    /// run, sometimes with IDs already in `byID`), drops and removals.
    /// Prints its seed; KURA_SEED=<n> replays one.
    func testFastPathsAgainstADictionary() {
        let seed = ProcessInfo.processInfo.environment["KURA_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 0...UInt64(UInt32.max))
        print("ObjectRegistryTests fast paths seed \(seed) (replay with KURA_SEED=\(seed))")
        var rng = SplitMix64(state: seed)
        let entities = [EntityDescription("A") {}, EntityDescription("B") {}]
        for round in 0..<10 {
            var r = ObjectRegistry(identity: 9)
            var model: [ManagedObjectID: ManagedObject] = [:]
            var pending: [ManagedObject] = []
            var nextRow: [String: Int64] = ["A": 1, "B": 1]
            let context = "seed \(seed) round \(round)"
            func check() {
                XCTAssertEqual(r.count, model.count, context)
                for (id, o) in model { XCTAssertTrue(r[id]?.takeUnretainedValue() === o, "\(context) \(id)") }
            }
            for _ in 0..<300 {
                switch Int.random(in: 0..<12, using: &rng) {
                case 0..<5:
                    let e = entities[Int.random(in: 0..<2, using: &rng)]
                    let id = r.newTemporaryID(e.name)
                    let o = ManagedObject(entity: e, objectID: id)
                    r.addInserted(id, .passUnretained(o))
                    model[id] = o
                    pending.append(o)
                case 5:
                    // A save: the pending objects of one entity get consecutive row IDs.
                    let e = entities[Int.random(in: 0..<2, using: &rng)].name
                    let saved = pending.filter { $0.entity.name == e }
                    pending.removeAll { $0.entity.name == e }
                    guard !saved.isEmpty, let first = nextRow[e] else { continue }
                    // Sometimes an object is already known by one of the new IDs (byID).
                    if Bool.random(using: &rng) {
                        let stray = ManagedObject(entity: saved[0].entity, objectID: ManagedObjectID(entity: e, rowID: first))
                        r[stray.objectID] = .passUnretained(stray)
                        model[stray.objectID] = stray
                        pending.append(stray)  // kept alive; not saved again (permanent ID)
                    }
                    r.openRun(entity: e, first: first, count: saved.count)
                    for (k, o) in saved.enumerated() {
                        let new = ManagedObjectID(entity: e, rowID: first + Int64(k))
                        r.moveInserted(.passUnretained(o), from: o.objectID, to: new)
                        model[o.objectID] = nil
                        model[new] = o
                        o.objectID = new
                    }
                    // Leave a gap now and then, so the next run does not extend this one.
                    nextRow[e] = first + Int64(saved.count) + (Bool.random(using: &rng) ? 1 : 0)
                case 6..<8:
                    guard let (id, o) = model.randomElement(using: &rng) else { continue }
                    XCTAssertTrue(r.remove(id, ifItIs: o), context)
                    model[id] = nil
                case 8:
                    // Removing with another object: nothing is dropped.
                    guard let (id, _) = model.randomElement(using: &rng) else { continue }
                    let other = ManagedObject(entity: entities[0], objectID: id)
                    XCTAssertFalse(r.remove(id, ifItIs: other), context)
                case 10, 11:
                    // A fetch registering an object by a permanent ID (in a
                    // run's range or not), unless one is registered under it.
                    let e = entities[Int.random(in: 0..<2, using: &rng)]
                    let id = ManagedObjectID(entity: e.name, rowID: Int64.random(in: 1...(nextRow[e.name] ?? 1) + 2, using: &rng))
                    if Bool.random(using: &rng) { r.reserveFetched(Int.random(in: 0...50, using: &rng)) }
                    let o = ManagedObject(entity: e, objectID: id)
                    let first = r.addFetched(id, .passUnretained(o))
                    if let m = model[id] {
                        XCTAssertTrue(first?.takeUnretainedValue() === m, "\(context) \(id)")
                    } else {
                        XCTAssertNil(first, "\(context) \(id)")
                        model[id] = o
                        pending.append(o)  // kept alive (permanent ID: never saved again)
                    }
                default:
                    guard let (id, _) = model.randomElement(using: &rng) else { continue }
                    r[id] = nil
                    model[id] = nil
                }
                check()
            }
            withExtendedLifetime(pending) {}
        }
    }
}
