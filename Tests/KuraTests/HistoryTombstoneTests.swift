// preserveAfterDeletion (AttributeDescription.preservesValueInHistoryOnDeletion,
// Core Data's tombstones): a delete's history record carries the preserved
// attributes' last saved values, read back after reopen; other changes and
// entities without such attributes carry none; loaded from an Xcode model
// (CoreDataPlus's SampleModel marks Person.id). Also the model hints loaded
// from XML and kept without effect: allowsExternalBinaryDataStorage,
// spotlightIndexingEnabled, Undefined transient attributes.

import Foundation
import XCTest
import Kura
import KuraEngine

final class HistoryTombstoneTests: XCTestCase {
    static let xml = """
    <model>
    <entity name="Person">
    <attribute name="id" attributeType="UUID" preserveAfterDeletion="YES"/>
    <attribute name="name" optional="YES" attributeType="String" preserveAfterDeletion="YES" spotlightIndexingEnabled="YES"/>
    <attribute name="age" optional="YES" attributeType="Integer 16" defaultValueString="0"/>
    <attribute name="photo" optional="YES" attributeType="Binary" allowsExternalBinaryDataStorage="YES"/>
    <attribute name="scratch" optional="YES" transient="YES"/>
    <relationship name="pets" optional="YES" toMany="YES" deletionRule="Cascade" destinationEntity="Pet" inverseName="owner" inverseEntity="Pet" spotlightIndexingEnabled="YES"/>
    </entity>
    <entity name="Pet">
    <attribute name="name" optional="YES" attributeType="String"/>
    <relationship name="owner" optional="YES" maxCount="1" deletionRule="Nullify" destinationEntity="Person" inverseName="pets" inverseEntity="Person"/>
    </entity>
    </model>
    """

    func testDeletesRecordPreservedValuesAndHintsLoad() throws {
        let model = try XcodeModelDocument(xml: Data(Self.xml.utf8), path: "tombstone.xml").makeModel()
        let person = try XCTUnwrap(model["Person"])
        let attr = { (n: String) in person.attributesByName[n] }
        XCTAssertEqual(attr("id")?.preservesValueInHistoryOnDeletion, true)
        XCTAssertEqual(attr("age")?.preservesValueInHistoryOnDeletion, false)
        XCTAssertEqual(attr("name")?.isIndexedBySpotlight, true)
        XCTAssertEqual(person.relationshipsByName["pets"]?.isIndexedBySpotlight, true)
        XCTAssertEqual(attr("photo")?.allowsExternalBinaryDataStorage, true)
        XCTAssertEqual(attr("name")?.allowsExternalBinaryDataStorage, false)
        // Undefined transient: in memory, any property-list value.
        XCTAssertEqual(attr("scratch")?.isTransient, true)

        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("h.kura")
        let id = UUID()
        var token: HistoryToken?
        do {
            let container = try PersistentContainer(url: url, model: model, persistentHistoryTracking: true)
            let c = container.newContext()
            let p = try c.insert("Person")
            try p.setValue(id, forKey: "id")
            try p.setValue("Ada", forKey: "name")
            try p.setValue(Data(repeating: 7, count: 100_000), forKey: "photo")
            try p.setValue(["any": 1], forKey: "scratch")
            let pet = try c.insert("Pet")
            try pet.setValue(p, forKey: "owner")
            try c.save()
            XCTAssertEqual((try p.value(forKey: "scratch") as? [String: Int])?["any"], 1)
            // The photo (external storage allowed) is stored inline for now and reads back.
            let fresh = try XCTUnwrap(container.newContext().fetch(FetchRequest<ManagedObject>(entityName: "Person")).first)
            XCTAssertEqual((try fresh.value(forKey: "photo") as? Data)?.count, 100_000)
            XCTAssertNil(try fresh.value(forKey: "scratch"))
            token = try container.lastHistoryToken()
            // The tombstone holds the last *saved* value, not a pending one.
            try p.setValue("Changed", forKey: "name")
            try c.delete(p)
            try c.save()
        }
        let container = try PersistentContainer(url: url, model: model, persistentHistoryTracking: true)
        let history = try container.history(after: token)
        XCTAssertEqual(history.count, 1)
        let changes = try XCTUnwrap(history.first).changes
        let deletedPerson = try XCTUnwrap(changes.first { $0.kind == .delete && $0.objectID.entityName == "Person" })
        XCTAssertEqual(deletedPerson.tombstone, ["id": .text(id.uuidString), "name": .text("Ada")])
        let deletedPet = try XCTUnwrap(changes.first { $0.kind == .delete && $0.objectID.entityName == "Pet" })
        XCTAssertEqual(deletedPet.tombstone, [:])
        // The inserts before carried none.
        XCTAssertTrue(try container.history().flatMap(\.changes).filter { $0.kind != .delete }.allSatisfy(\.tombstone.isEmpty))
        XCTAssertEqual(try container.newContext().count(for: FetchRequest<ManagedObject>(entityName: "Person")), 0)
    }

    func testAPreservedTransientAttributeIsRefused() {
        XCTAssertThrowsError(try ManagedObjectModel {
            EntityDescription("A") { AttributeDescription("x", .string, transient: true, preservesValueInHistoryOnDeletion: true) }
        }) { e in XCTAssertTrue("\(e)".contains("transient attribute \"x\""), "\(e)") }
    }
}
