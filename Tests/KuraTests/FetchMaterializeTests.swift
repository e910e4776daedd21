// Guards the objects of a store fetch (Context+Materialize.swift): a new
// object of a layout without conversions is filled from its record decoded in
// place (RowLayout.fetchColumns), and new objects are registered together
// after the rows are read, then awakened. The outcome must equal `apply` on
// the row's array for every attribute type, nil values, to-one keys (set and
// nil), a migrated table whose columns are in another order, rows written
// before an attribute with a default was added, transient attributes and the
// row's version; objects the context held before the fetch keep their rules
// (a fault takes the row, a clean object takes it keeping its transients, a
// changed or deleted one keeps its state); every object is uniqued and
// awakened once, loaded and registered. Prints its seed; KURA_SEED=<n>
// replays one.

import Foundation
import XCTest
@testable import Kura
import KuraEngine

final class AwakeCountingItem: ManagedObject {
    /// How often `awakeFromFetch` ran, and what it saw each time.
    var awakenings = 0
    var awokeLoaded = true
    var awokeRegistered = true

    override func awakeFromFetch() {
        awakenings += 1
        if isFault { awokeLoaded = false }
        do {
            guard let c = managedObjectContext, try c.object(with: objectID) === self else { awokeRegistered = false; return }
        } catch {
            awokeRegistered = false
        }
    }
}

final class FetchMaterializeTests: XCTestCase {
    private func oldModel() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Owner") {
                AttributeDescription("name", .string)
                RelationshipDescription("things", to: "Thing", inverse: "owner", toMany: true)
            }
            EntityDescription("Thing", attributes: attributesOfEveryType() + [AttributeDescription("t", .string, default: "start", transient: true)],
                              relationships: [RelationshipDescription("owner", to: "Owner", inverse: "things")])
        }
    }

    /// The same entities, Thing's attributes in another order, a transient
    /// attribute first and a later attribute with a default.
    private func newModel() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Owner") {
                AttributeDescription("name", .string)
                RelationshipDescription("things", to: "Thing", inverse: "owner", toMany: true)
            }
            EntityDescription("Thing", attributes: attributesOfEveryTypeReordered(),
                              relationships: [RelationshipDescription("owner", to: "Owner", inverse: "things")])
        }
    }

    private func setRandom(_ o: ManagedObject, _ owners: [ManagedObject], _ g: inout SplitMix64) throws {
        func maybe(_ v: Any) -> Any? { Int.random(in: 0..<4, using: &g) == 0 ? nil : v }
        try o.setValue(maybe(Int16.random(in: .min ... .max, using: &g)), forKey: "i16")
        try o.setValue(maybe(Int32.random(in: .min ... .max, using: &g)), forKey: "i32")
        try o.setValue(maybe(Int64.random(in: .min ... .max, using: &g)), forKey: "i64")
        try o.setValue(maybe(Double.random(in: -1e6...1e6, using: &g)), forKey: "d")
        try o.setValue(maybe(Float.random(in: -1e3...1e3, using: &g)), forKey: "f")
        try o.setValue(maybe(String(repeating: "é", count: Int.random(in: 0...40, using: &g))), forKey: "s")
        try o.setValue(maybe(Bool.random(using: &g)), forKey: "b")
        try o.setValue(maybe(Date(timeIntervalSince1970: Double.random(in: 0...2e9, using: &g))), forKey: "dt")
        try o.setValue(maybe(Data((0..<Int.random(in: 0...20, using: &g)).map { _ in UInt8.random(in: 0...255, using: &g) })), forKey: "data")
        try o.setValue(maybe(UUID()), forKey: "u")
        try o.setValue(maybe(URL(fileURLWithPath: "/x/\(Int.random(in: 0...999, using: &g))")), forKey: "url")
        try o.setValue(maybe(["x", "\(Int.random(in: 0...9, using: &g))"]), forKey: "tags")
        try o.setValue(maybe(owners[Int.random(in: 0..<owners.count, using: &g)]), forKey: "owner")
    }

    /// Fetches every Thing into a new context and compares each object with
    /// `apply` of its row's array on a fault of another context.
    private func compareFetch(_ c: PersistentContainer, count: Int, _ how: String) throws {
        let context = c.newContext()
        let fetched = try context.fetch(FetchRequest<ManagedObject>(entityName: "Thing", predicate: try KuraPredicate(format: "i16 != 12345 OR i16 == nil")))
        XCTAssertEqual(fetched.count, count, how)
        let arrayContext = c.newContext()
        let layout = arrayContext.layout(of: try c.model.entity("Thing"))
        XCTAssertNotNil(layout.fetchColumns, "\(how): the layout must be decodable in place (that path is under test)")
        XCTAssertGreaterThan(count, StoreAnswerMemo.maxRows, "\(how): rows past the memo's are decoded in place")
        for f in fetched {
            let what = "\(how) \(f.objectID)"
            XCTAssertTrue(try context.object(with: f.objectID) === f, "\(what): registered")
            let fault = arrayContext.registerFault(f.objectID)
            let row = try XCTUnwrap(try c.database.values(inTable: layout.table, rowID: f.objectID.rowID), what)
            arrayContext.apply(row, to: fault)
            XCTAssertFalse(f.isFault, what)
            XCTAssertEqual(f.values, fault.values, what)
            XCTAssertEqual(f.savedValues, fault.savedValues, what)
            XCTAssertEqual(f.version, fault.version, what)
            XCTAssertEqual(f.toOne, fault.toOne, what)
            XCTAssertEqual(f.savedToOne, fault.savedToOne, what)
            XCTAssertFalse(f.hasChanges, what)
            for a in f.entity.attributes {
                XCTAssertEqual("\(String(describing: try f.value(forKey: a.name)))", "\(String(describing: try fault.value(forKey: a.name)))", "\(what): \(a.name)")
            }
            XCTAssertEqual((try f.value(forKey: "owner") as? ManagedObject)?.objectID, (try fault.value(forKey: "owner") as? ManagedObject)?.objectID, what)
        }
    }

    func testFetchedObjectsEqualRowArrayLoad() throws {
        let seed = testSeed("FetchMaterializeTests")
        var g = SplitMix64(state: seed)
        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("fetched.kura")
        let count = 60
        do {
            let c = try PersistentContainer(url: url, model: oldModel())
            let ctx = c.newContext()
            var owners: [ManagedObject] = []
            for i in 0..<3 {
                let o = try ctx.insert("Owner")
                try o.setValue("owner\(i)", forKey: "name")
                owners.append(o)
            }
            var objects: [ManagedObject] = []
            for _ in 0..<count {
                let o = try ctx.insert("Thing")
                try setRandom(o, owners, &g)
                objects.append(o)
            }
            try ctx.save()
            // A second save bumps some rows' versions.
            for o in objects where Bool.random(using: &g) { try o.setValue(Int64(1), forKey: "i64") }
            try ctx.save()
            try compareFetch(c, count: count, "seed \(seed) before migration")
            c.close()
        }
        let c = try PersistentContainer(url: url, model: newModel(), migration: .lightweight)
        try compareFetch(c, count: count, "seed \(seed) migrated")
        let fetched = try c.newContext().fetch(FetchRequest<ManagedObject>(entityName: "Thing"))
        for o in fetched {
            XCTAssertEqual(try o.value(forKey: "late") as? Int64, 99, "seed \(seed): a column added later reads its default")
            XCTAssertEqual(try o.value(forKey: "t") as? String, "start", "seed \(seed): a transient attribute reads its default")
        }
    }

    private func itemModel() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Item", class: AwakeCountingItem.self) {
                AttributeDescription("n", .int64, indexed: true)
                AttributeDescription("s", .string)
                AttributeDescription("tr", .string, default: "fresh", transient: true)
            }
        }
    }

    /// A store of `count` Items (n = 0..<count, s = "s<n>") and their IDs by n.
    private func items(_ count: Int, in dir: TempDir) throws -> (PersistentContainer, [ManagedObjectID]) {
        let c = try PersistentContainer(url: dir.url.appendingPathComponent("items.kura"), model: itemModel())
        let ctx = c.newContext()
        var objects: [ManagedObject] = []
        for i in 0..<count {
            let o = try ctx.insert("Item")
            try o.setValue(Int64(i), forKey: "n")
            try o.setValue("s\(i)", forKey: "s")
            objects.append(o)
        }
        try ctx.save()
        return (c, objects.map(\.objectID))
    }

    /// Sets `s` of the rows `ids` to `value` in another context.
    private func saveElsewhere(_ c: PersistentContainer, _ ids: [ManagedObjectID], _ value: String) throws {
        let other = c.newContext()
        for id in ids { try other.existingObject(with: id).setValue(value, forKey: "s") }
        try other.save()
    }

    func testFetchIntoContextHoldingFaultsAndCleanObjects() throws {
        let dir = try TempDir()
        let (c, ids) = try items(40, in: dir)
        let ctx = c.newContext()
        let fault = try ctx.object(with: ids[20])
        XCTAssertTrue(fault.isFault)
        let clean = try ctx.existingObject(with: ids[30])
        try clean.setValue("kept", forKey: "tr")
        try ctx.save()  // clean again, with its transient value
        XCTAssertFalse(clean.hasChanges)
        try saveElsewhere(c, [ids[20], ids[30]], "theirs")

        let request = FetchRequest<AwakeCountingItem>(entityName: "Item", sortDescriptors: [SortKey("n")])
        let fetched = try ctx.fetch(request)
        XCTAssertEqual(fetched.count, 40)
        XCTAssertTrue(fetched[20] === fault, "the fault is the fetched object")
        XCTAssertFalse(fault.isFault, "the fault took the row")
        XCTAssertEqual(try fault.value(forKey: "s") as? String, "theirs")
        XCTAssertTrue(fetched[30] === clean)
        XCTAssertEqual(try clean.value(forKey: "s") as? String, "theirs", "a clean object takes the row")
        XCTAssertEqual(try clean.value(forKey: "tr") as? String, "kept", "a clean object keeps its transient value")
        XCTAssertFalse(clean.hasChanges)
        for (i, o) in fetched.enumerated() {
            XCTAssertEqual(o.objectID, ids[i])
            XCTAssertEqual(try o.value(forKey: "n") as? Int64, Int64(i))
            // The fault took the row without an awakening (as before this
            // path); the clean object was awakened by its load before.
            XCTAssertEqual(o.awakenings, i == 20 ? 0 : 1, "object \(i): awakened once")
            XCTAssertTrue(o.awokeLoaded && o.awokeRegistered, "object \(i): loaded and registered when awakened")
            XCTAssertTrue(try ctx.object(with: ids[i]) === o, "object \(i): uniqued")
        }
        XCTAssertEqual(try fetched[5].value(forKey: "tr") as? String, "fresh", "a new object's transient reads its default")
        // Fetched again: the same instances, awakened no more.
        let again = try ctx.fetch(request)
        XCTAssertEqual(again.count, 40)
        for (a, b) in zip(again, fetched) { XCTAssertTrue(a === b) }
        XCTAssertEqual(fetched.map(\.awakenings).reduce(0, +), 39)
        XCTAssertEqual(ctx.registeredObjectCount, 40)
    }

    func testFetchIntoContextHoldingChangedAndDeletedObjects() throws {
        let dir = try TempDir()
        let (c, ids) = try items(40, in: dir)
        let ctx = c.newContext()
        let changed = try ctx.existingObject(with: ids[25])
        try changed.setValue("mine", forKey: "s")
        let deleted = try ctx.existingObject(with: ids[35])
        try ctx.delete(deleted)
        try saveElsewhere(c, [ids[25], ids[35], ids[36]], "theirs")

        // Without pending changes the fetch runs in the store, whose rows
        // the changed and deleted objects must not take.
        var request = FetchRequest<AwakeCountingItem>(entityName: "Item", sortDescriptors: [SortKey("n")])
        request.includesPendingChanges = false
        let fetched = try ctx.fetch(request)
        XCTAssertEqual(fetched.count, 40)
        XCTAssertTrue(fetched[25] === changed)
        XCTAssertEqual(try changed.value(forKey: "s") as? String, "mine", "a changed object keeps its state")
        XCTAssertTrue(changed.hasChanges)
        XCTAssertTrue(fetched[35] === deleted)
        XCTAssertTrue(deleted.isDeleted, "a deleted object stays deleted")
        XCTAssertEqual(try fetched[36].value(forKey: "s") as? String, "theirs")
        // With pending changes: the changed object matches by its own value.
        let mine = try ctx.fetch(FetchRequest<AwakeCountingItem>(entityName: "Item", predicate: try KuraPredicate(format: "s == %@", arguments: [.text("mine")])))
        XCTAssertEqual(mine.count, 1)
        XCTAssertTrue(mine.first === changed)
    }
}
