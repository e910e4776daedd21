import Foundation
import XCTest
@testable import Kura

/// A save that only inserts, in a model without to-one relationships, assigns
/// each row ID as it writes the row (Context+Save.swift): row IDs reserved by
/// `obtainPermanentIDs` must stay their objects', the others must not collide
/// with them or with rows saved before, and join rows of many-to-many
/// relationships between the new objects must name the rows written.
final class InsertOnlySaveTests: XCTestCase {
    private func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Item") {
                AttributeDescription("name", .string)
                AttributeDescription("n", .int64)
            }
            EntityDescription("Tag") {
                AttributeDescription("label", .string)
                RelationshipDescription("items", to: "Item2", inverse: "tags", toMany: true)
            }
            EntityDescription("Item2") {
                AttributeDescription("name", .string)
                RelationshipDescription("tags", to: "Tag", inverse: "items", toMany: true)
            }
        }
    }

    func testReservedAndTemporaryIDsGetDistinctRowsAndKeepTheirValues() throws {
        let container = try PersistentContainer.inMemory(model: model())
        let context = container.newContext()
        var objects: [ManagedObject] = []
        for i in 0..<6 {
            let o = try context.insert("Item")
            try o.setValue("item \(i)", forKey: "name")
            try o.setValue(Int64(i), forKey: "n")
            objects.append(o)
        }
        // Reserved rows in the middle of the insertion order.
        try context.obtainPermanentIDs(for: [objects[1], objects[4]])
        let reserved = [objects[1].objectID, objects[4].objectID]
        XCTAssertFalse(reserved.contains { $0.isTemporary })
        try context.save()
        XCTAssertEqual(objects[1].objectID, reserved[0], "a reserved row ID stays the object's")
        XCTAssertEqual(objects[4].objectID, reserved[1], "a reserved row ID stays the object's")
        let ids = objects.map(\.objectID)
        XCTAssertFalse(ids.contains { $0.isTemporary })
        XCTAssertEqual(Set(ids.map(\.rowID)).count, ids.count, "every object has a row of its own: \(ids)")

        // A second insert-only save continues after every row saved or reserved.
        let more = try context.insert("Item")
        try more.setValue("item 6", forKey: "name")
        try context.save()
        XCTAssertFalse(ids.map(\.rowID).contains(more.objectID.rowID), "\(more.objectID) reuses a row of \(ids)")

        // Each row holds its object's values.
        let fresh = container.newContext()
        for (i, id) in (ids + [more.objectID]).enumerated() {
            let o = try fresh.existingObject(with: id)
            XCTAssertEqual(try o.value(forKey: "name") as? String, "item \(i)")
        }
        XCTAssertEqual(try fresh.count(for: FetchRequest<ManagedObject>(entityName: "Item")), 7)
    }

    func testJoinRowsBetweenObjectsOfOneInsertOnlySaveNameTheirRows() throws {
        let container = try PersistentContainer.inMemory(model: model())
        let context = container.newContext()
        let tag = try context.insert("Tag")
        try tag.setValue("t", forKey: "label")
        var items: [ManagedObject] = []
        for i in 0..<3 {
            let o = try context.insert("Item2")
            try o.setValue("i\(i)", forKey: "name")
            items.append(o)
        }
        try tag.add(items[0], to: "items")
        try tag.add(items[2], to: "items")
        try context.save()

        let fresh = container.newContext()
        let t = try fresh.existingObject(with: tag.objectID)
        let names = try XCTUnwrap(t.value(forKey: "items") as? ObjectList).objects.map { try $0.value(forKey: "name") as? String }
        XCTAssertEqual(names.compactMap { $0 }.sorted(), ["i0", "i2"])
        let i1 = try fresh.existingObject(with: items[1].objectID)
        XCTAssertEqual(try XCTUnwrap(i1.value(forKey: "tags") as? ObjectList).count, 0)
    }

    func testAFailedInsertOnlySaveLeavesTheObjectsUnsavedAndARetrySavesThem() throws {
        // The objects of a save that only inserts take their saved state as
        // their rows are written; a failed commit must give it back.
        let fs = FaultInjectingFileSystem()
        var options = Database.Options()
        options.fileSystem = fs
        let container = try PersistentContainer(url: URL(fileURLWithPath: "/faulty/items.kura"), model: model(), options: options)
        let context = container.newContext()
        var objects: [ManagedObject] = []
        for i in 0..<40 {
            let o = try context.insert("Item")
            try o.setValue("item \(i)", forKey: "name")
            try o.setValue(Int64(i), forKey: "n")
            objects.append(o)
        }
        fs.failOperation(.write, after: 1, with: .diskFull)
        XCTAssertThrowsError(try context.save()) { err in XCTAssertEqual((err as? KuraError)?.code, .diskFull) }
        XCTAssertEqual(context.insertedObjects.count, 40)
        for (i, o) in objects.enumerated() {
            XCTAssertTrue(o.isInserted && o.hasChanges && o.objectID.isTemporary, "\(o)")
            XCTAssertEqual(o.changedValues()["name"] as? String, "item \(i)", "\(o) lost its unsaved values")
            XCTAssertTrue(try o.committedValues(forKeys: ["name"]).isEmpty, "\(o) has committed values after a failed save")
        }
        XCTAssertEqual(try container.newContext().count(for: FetchRequest<ManagedObject>(entityName: "Item")), 0)

        try objects[3].setValue("changed", forKey: "name")
        try context.save()  // the fault was one-shot: retrying succeeds
        for o in objects {
            XCTAssertFalse(o.hasChanges, "\(o)")
            XCTAssertTrue(o.changedValues().isEmpty, "\(o)")
        }
        XCTAssertEqual(try objects[3].committedValues(forKeys: ["name"])["name"] as? String, "changed")
        try objects[5].setValue("later", forKey: "name")
        XCTAssertTrue(objects[5].isUpdated)
        XCTAssertEqual(context.updatedObjects.count, 1)
        let fresh = container.newContext()
        XCTAssertEqual(try fresh.existingObject(with: objects[3].objectID).value(forKey: "name") as? String, "changed")
        XCTAssertEqual(try fresh.count(for: FetchRequest<ManagedObject>(entityName: "Item")), 40)
    }
}
