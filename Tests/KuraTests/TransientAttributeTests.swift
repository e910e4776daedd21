// Transient attributes (AttributeDescription.isTransient): no column, a value
// per object in memory that starts from the default on insert and on every
// (re)load, survives a merging refresh, is never saved (reopen, other
// contexts), is left out of changedValues and history, and cannot be fetched
// or sorted by (a clear error naming it).

import Foundation
import XCTest
import Kura
import KuraEngine

final class TransientAttributeTests: XCTestCase {
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Car") {
                AttributeDescription("name", .string)
                AttributeDescription("speed", .int64, default: Int64(0), transient: true)
                AttributeDescription("note", .string, transient: true)
                RelationshipDescription("owner", to: "Person", inverse: "cars")
            }
            EntityDescription("Person") {
                AttributeDescription("name", .string)
                AttributeDescription("isDriving", .bool, optional: false, default: false, transient: true)
                RelationshipDescription("cars", to: "Car", inverse: "owner", toMany: true)
            }
        }
    }

    func testTransientValuesLiveInMemoryOnlyAndResetOnReload() throws {
        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("t.kura")
        let container = try PersistentContainer(url: url, model: try Self.model(), persistentHistoryTracking: true)
        try container.database.read { tx in
            XCTAssertEqual(try XCTUnwrap(try tx.schema(of: try tx.table("Car"))).columns.map(\.name), ["name", "owner", "_version"])
        }
        let context = container.newContext()
        let car = try context.insert("Car")
        XCTAssertEqual(try car.value(forKey: "speed") as? Int64, 0)
        try car.setValue("Ka", forKey: "name")
        try car.setValue(Int64(120), forKey: "speed")
        try car.setValue("fast", forKey: "note")
        XCTAssertThrowsError(try car.setValue("x", forKey: "speed")) { XCTAssertEqual(($0 as? KuraError)?.code, .typeMismatch) }
        try context.save()
        // The context keeps the value it set.
        XCTAssertEqual(try car.value(forKey: "speed") as? Int64, 120)
        XCTAssertFalse(car.hasChanges)

        // A change of a transient only marks the object updated: not a persistent change.
        try car.setValue(Int64(90), forKey: "speed")
        XCTAssertTrue(context.hasChanges)
        XCTAssertFalse(car.hasPersistentChangedValues)
        XCTAssertTrue(car.changedValues().isEmpty)
        try car.setValue("Ka2", forKey: "name")
        XCTAssertEqual(Set(car.changedValues().keys), ["name"])
        try context.save()
        // Guards the bug where saving an update reset transients (the saved row was
        // re-applied to the object like a load); only a reload resets them.
        XCTAssertEqual(try car.value(forKey: "speed") as? Int64, 90)
        XCTAssertFalse(car.hasChanges)
        let history = try container.history()
        XCTAssertEqual(history.last?.changes.first?.updatedProperties, ["name"])

        // Another context reads the store: defaults, not this context's values.
        let other = container.newContext()
        let seen = try other.existingObject(with: car.objectID)
        XCTAssertEqual(try seen.value(forKey: "speed") as? Int64, 0)
        XCTAssertNil(try seen.value(forKey: "note"))
        XCTAssertEqual(try seen.value(forKey: "name") as? String, "Ka2")

        // A merging refresh keeps a changed transient; a non-merging one resets it.
        try car.setValue(Int64(50), forKey: "speed")
        try context.refresh(car, mergeChanges: true)
        XCTAssertEqual(try car.value(forKey: "speed") as? Int64, 50)
        try context.refresh(car, mergeChanges: false)
        XCTAssertEqual(try car.value(forKey: "speed") as? Int64, 0)
        XCTAssertNil(try car.value(forKey: "note"))
        // Rollback restores the value of the last save or load.
        try car.setValue(Int64(7), forKey: "speed")
        context.rollback()
        XCTAssertEqual(try car.value(forKey: "speed") as? Int64, 0)

        // Validation covers transients: a required one may not be nil at save.
        let p = try context.insert("Person")
        try p.setValue(nil, forKey: "isDriving")
        XCTAssertThrowsError(try context.save()) { error in
            XCTAssertEqual((error as? KuraError)?.code, .validation)
            XCTAssertTrue("\(error)".contains("isDriving"), "\(error)")
        }
        try p.setValue(true, forKey: "isDriving")
        try car.setValue(p, forKey: "owner")
        try context.save()

        // Reopen: nothing of the transients was stored.
        let reopened = try PersistentContainer(url: url, model: try Self.model())
        let fresh = reopened.newContext()
        let cars = try fresh.fetch(FetchRequest<ManagedObject>(entityName: "Car"))
        XCTAssertEqual(cars.count, 1)
        XCTAssertEqual(try cars[0].value(forKey: "speed") as? Int64, 0)
        XCTAssertEqual(try (cars[0].value(forKey: "owner") as? ManagedObject)?.value(forKey: "isDriving") as? Bool, false)
    }

    func testFetchesCannotFilterOrSortByATransient() throws {
        let container = try PersistentContainer.inMemory(model: try Self.model())
        let context = container.newContext()
        let car = try context.insert("Car")
        try car.setValue("Ka", forKey: "name")
        try context.save()
        func refused(_ request: FetchRequest<ManagedObject>, _ parts: [String], line: UInt = #line) {
            XCTAssertThrowsError(try context.fetch(request), line: line) { error in
                guard let e = error as? KuraError else { return XCTFail("\(error)", line: line) }
                XCTAssertEqual(e.code, .invalidArgument, line: line)
                for p in parts { XCTAssertTrue(e.message.contains(p), "\(p) not in \(e.message)", line: line) }
            }
        }
        var r = FetchRequest<ManagedObject>(entityName: "Car")
        try r.setPredicate("name == 'Ka' AND speed > 10")
        refused(r, ["transient attribute \"speed\" of entity \"Car\""])
        try r.setPredicate("owner.isDriving == YES")
        refused(r, ["\"owner.isDriving\"", "transient attribute \"isDriving\" of entity \"Person\""])
        try r.setPredicate("ANY owner.cars.note == 'x'")
        refused(r, ["transient attribute \"note\""])
        refused(FetchRequest<ManagedObject>(entityName: "Car", sortDescriptors: [SortKey("speed")]), ["\"speed\""])
        XCTAssertThrowsError(try context.count(for: FetchRequest<ManagedObject>(entityName: "Car", predicate: try KuraPredicate(format: "speed == 0"))))
        // Stored attributes still work.
        try r.setPredicate("name == 'Ka'")
        XCTAssertEqual(try context.fetch(r).count, 1)
    }

    func testTransientsCannotBeIndexedOrConstrained() {
        func refused(_ part: String, line: UInt = #line, _ build: () -> [EntityDescription]) {
            XCTAssertThrowsError(try ManagedObjectModel(build()), line: line) { XCTAssertTrue("\($0)".contains(part), "\($0)", line: line) }
        }
        refused("cannot be indexed") {
            [EntityDescription("A") { AttributeDescription("t", .string, indexed: true, transient: true) }]
        }
        refused("uniqueness constraint names transient attribute \"t\"") {
            [EntityDescription("A") { AttributeDescription("t", .string, transient: true); UniqueConstraint("t") }]
        }
        refused("fetch index \"i\" names transient attribute \"t\"") {
            [EntityDescription("A") { AttributeDescription("t", .string, transient: true); FetchIndexDescription("i", on: "t") }]
        }
    }

    func testXcodeTransientAttributesLoad() throws {
        let xml = """
        <model>
            <entity name="Car" representedClassName="Car">
                <attribute name="currentDrivingSpeed" optional="YES" transient="YES" attributeType="Integer 64" defaultValueString="0" usesScalarValueType="YES"/>
                <attribute name="maker" optional="YES" attributeType="String"/>
            </entity>
        </model>
        """
        let doc = try XcodeModelDocument(xml: Data(xml.utf8), path: "t.xml")
        XCTAssertEqual(doc.unsupportedFeatures(), [])
        let model = try doc.makeModel()
        XCTAssertEqual(model["Car"]?.attributesByName["currentDrivingSpeed"]?.isTransient, true)
        XCTAssertEqual(model["Car"]?.attributesByName["maker"]?.isTransient, false)
    }

    func testFetchesAndMergesOfACleanObjectKeepItsTransients() throws {
        // Guards the bug where a fetch that met a clean registered object, or
        // the merge of another context's save into it, re-applied the row as a
        // load and reset its transient attributes (and a merge its transient
        // links), against "only a (re)load resets transients".
        let container = try PersistentContainer.inMemory(model: try Self.model())
        let context = container.newContext()
        context.automaticallyMergesChangesFromStore = true
        let car = try context.insert("Car"), p = try context.insert("Person")
        try car.setValue("Ka", forKey: "name")
        try car.setValue(Int64(80), forKey: "speed")
        try p.setValue("Pat", forKey: "name")
        try context.save()
        XCTAssertFalse(car.hasChanges)
        _ = try context.fetch(FetchRequest<ManagedObject>(entityName: "Car"))
        XCTAssertEqual(try car.value(forKey: "speed") as? Int64, 80, "a fetch keeps it")

        let other = container.newContext()
        let theirs = try other.existingObject(with: car.objectID)
        try theirs.setValue("Ka2", forKey: "name")
        try other.save()
        try context.mergePendingChanges()
        XCTAssertEqual(try car.value(forKey: "name") as? String, "Ka2", "merged")
        XCTAssertEqual(try car.value(forKey: "speed") as? Int64, 80, "a merge keeps it")
        XCTAssertFalse(car.hasChanges)
        try context.refresh(car, mergeChanges: false)
        XCTAssertEqual(try car.value(forKey: "speed") as? Int64, 0, "a reload resets it")
    }

    func testMergesOfACleanObjectKeepItsTransientLinks() throws {
        // Guards the same bug for transient relationships (see above).
        let container = try PersistentContainer.inMemory(model: try TransientRelationshipTests.model())
        let context = container.newContext()
        context.automaticallyMergesChangesFromStore = true
        let m = try context.insert("Message"), a = try context.insert("Client")
        try m.setValue("m", forKey: "text")
        try a.setValue("a", forKey: "name")
        try context.save()
        try m.setValue(a, forKey: "draftOf")
        XCTAssertFalse(m.hasChanges, "a transient link is no persistent change")
        let other = container.newContext()
        try other.existingObject(with: m.objectID).setValue("m2", forKey: "text")
        try other.save()
        try context.mergePendingChanges()
        XCTAssertEqual(try m.value(forKey: "text") as? String, "m2")
        XCTAssertTrue(try m.value(forKey: "draftOf") as? ManagedObject === a)
    }
}
