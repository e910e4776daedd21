// Fetch request templates (FetchTemplate, ManagedObjectModel.fetchRequest(template:
// substitutionVariables:)): stored in the model or loaded from Xcode's
// top-level <fetchRequest>, made into requests with $VARIABLE substitution,
// with clear errors for an unknown name, a missing variable and a bad model.

import Foundation
import XCTest
import Kura

final class FetchTemplateTests: XCTestCase {
    func testTemplatesFromAnXcodeModelFetchWithSubstitution() throws {
        let xml = """
        <model>
            <entity name="Parent">
                <attribute name="parentName" optional="YES" attributeType="String"/>
                <relationship name="children" optional="YES" toMany="YES" deletionRule="Nullify" destinationEntity="Child" inverseName="parent" inverseEntity="Child"/>
            </entity>
            <entity name="Child">
                <attribute name="childName" optional="YES" attributeType="String"/>
                <relationship name="parent" optional="YES" maxCount="1" deletionRule="Nullify" destinationEntity="Parent" inverseName="children" inverseEntity="Parent"/>
            </entity>
            <fetchRequest name="all" entity="Child"/>
            <fetchRequest name="byParentName" entity="Child" predicateString="parent.parentName == $parentName"/>
            <fetchRequest name="byParent" entity="Child" predicateString="parent == $parent" fetchLimit="1"/>
            <fetchRequest name="countNamed" entity="Child" predicateString="childName BEGINSWITH $prefix" resultType="4"/>
        </model>
        """
        let doc = try XcodeModelDocument(xml: Data(xml.utf8), path: "f.xml")
        XCTAssertEqual(doc.unsupportedFeatures(), [])
        let model = try doc.makeModel()
        XCTAssertEqual(model.fetchTemplates.keys.sorted(), ["all", "byParent", "byParentName", "countNamed"])
        let context = try PersistentContainer.inMemory(model: model).newContext()
        var parents: [ManagedObject] = []
        for (i, n) in ["ann", "bob"].enumerated() {
            let p = try context.insert("Parent")
            try p.setValue(n, forKey: "parentName")
            parents.append(p)
            for k in 0..<(i + 2) {
                let c = try context.insert("Child")
                try c.setValue("\(n)-\(k)", forKey: "childName")
                try c.setValue(p, forKey: "parent")
            }
        }
        try context.save()
        func names(_ r: FetchRequest<ManagedObject>) throws -> [String] { try context.fetch(r).compactMap { $0["childName"] as? String }.sorted() }
        XCTAssertEqual(try names(try model.fetchRequest(template: "all")).count, 5)
        XCTAssertEqual(try names(try model.fetchRequest(template: "byParentName", substitutionVariables: ["parentName": "ann"])), ["ann-0", "ann-1"])
        XCTAssertEqual(try names(try model.fetchRequest(template: "byParentName", substitutionVariables: ["parentName": "bob"])), ["bob-0", "bob-1", "bob-2"])
        let one = try model.fetchRequest(template: "byParent", substitutionVariables: ["parent": .object(parents[1])])
        XCTAssertEqual(one.fetchLimit, 1)
        XCTAssertEqual(try context.fetch(one).count, 1)
        XCTAssertEqual((try context.fetch(one).first?.value(forKey: "parent") as? ManagedObject)?.objectID, parents[1].objectID)
        guard case .count(let n) = try context.execute(try model.fetchRequest(template: "countNamed", substitutionVariables: ["prefix": "b"])) else {
            return XCTFail("count template did not count")
        }
        XCTAssertEqual(n, 3)

        XCTAssertThrowsError(try model.fetchRequest(template: "byParentName")) { error in
            XCTAssertEqual((error as? KuraError)?.code, .invalidArgument)
            XCTAssertTrue("\(error)".contains("template \"byParentName\" needs a value for $parentName"), "\(error)")
        }
        XCTAssertThrowsError(try model.fetchRequest(template: "nope")) { error in
            XCTAssertEqual((error as? KuraError)?.code, .notFound)
            XCTAssertTrue("\(error)".contains("\"nope\"") && "\(error)".contains("all, byParent"), "\(error)")
        }
        let bad = xml.replacingOccurrences(of: "parent == $parent\"", with: "parent == == $parent\"")
        XCTAssertThrowsError(try XcodeModelDocument(xml: Data(bad.utf8), path: "f.xml").makeModel()) { error in
            XCTAssertEqual((error as? KuraError)?.code, .syntax)
            XCTAssertTrue("\(error)".contains("f.xml line 12") && "\(error)".contains("\"byParent\""), "\(error)")
        }
    }

    func testTemplatesInACodeModelAreValidated() throws {
        let entities = [EntityDescription("A") { AttributeDescription("x", .int64) }]
        let model = try ManagedObjectModel(entities, fetchTemplates: [
            FetchTemplate("big", entity: "A", predicate: try KuraPredicate(format: "x > $min"), sortDescriptors: [SortKey("x", ascending: false)]),
        ])
        let r = try model.fetchRequest(template: "big", substitutionVariables: ["min": 3])
        XCTAssertEqual(r.predicate, try KuraPredicate(format: "x > 3"))
        XCTAssertEqual(r.sortDescriptors, [SortKey("x", ascending: false)])
        XCTAssertThrowsError(try ManagedObjectModel(entities, fetchTemplates: [FetchTemplate("t", entity: "B")])) {
            XCTAssertTrue("\($0)".contains("fetches entity \"B\""), "\($0)")
        }
        XCTAssertThrowsError(try ManagedObjectModel(entities, fetchTemplates: [FetchTemplate("t", entity: "A"), FetchTemplate("t", entity: "A")])) {
            XCTAssertTrue("\($0)".contains("two fetch request templates are named \"t\""), "\($0)")
        }
    }
}

// Fetched properties (FetchedPropertyDescription): a read-only property whose
// value is a fetch evaluated with $FETCH_SOURCE = the object, always current,
// inherited by subentities, loaded from Xcode's <fetchedProperty>.
final class FetchedPropertyTests: XCTestCase {
    func testFetchedPropertiesFetchWithTheSourceObject() throws {
        let model = try ManagedObjectModel {
            EntityDescription("Artist") {
                AttributeDescription("name", .string)
                AttributeDescription("genre", .string)
                FetchedPropertyDescription("peers", fetchRequest: FetchTemplate(
                    "peersRequest", entity: "Artist", predicate: try! KuraPredicate(format: "genre == $FETCH_SOURCE.genre AND SELF != $FETCH_SOURCE"),
                    sortDescriptors: [SortKey("name")]))
            }
            EntityDescription("Band", parent: "Artist") {
                AttributeDescription("members", .int16, default: Int16(0))
            }
        }
        XCTAssertEqual(model["Band"]?.fetchedProperties.map(\.name), ["peers"])
        let context = try PersistentContainer.inMemory(model: model).newContext()
        func artist(_ entity: String, _ name: String, _ genre: String) throws -> ManagedObject {
            let a = try context.insert(entity)
            try a.setValue(name, forKey: "name")
            try a.setValue(genre, forKey: "genre")
            return a
        }
        let ann = try artist("Artist", "ann", "jazz")
        _ = try artist("Band", "bop", "jazz")
        _ = try artist("Artist", "cy", "rock")
        try context.save()
        func peers(_ o: ManagedObject) throws -> [String] {
            try XCTUnwrap(o.value(forKey: "peers") as? [ManagedObject]).compactMap { $0["name"] as? String }
        }
        XCTAssertEqual(try peers(ann), ["bop"])
        // Always current, pending changes included.
        _ = try artist("Artist", "dee", "jazz")
        XCTAssertEqual(try peers(ann), ["bop", "dee"])
        let band = try XCTUnwrap(try context.fetch(FetchRequest<ManagedObject>(entityName: "Band")).first)
        XCTAssertEqual(try peers(band), ["ann", "dee"])
        XCTAssertThrowsError(try ann.setValue([], forKey: "peers")) { error in
            XCTAssertEqual((error as? KuraError)?.code, .invalidArgument)
            XCTAssertTrue("\(error)".contains("fetched property"), "\(error)")
        }
        XCTAssertThrowsError(try ManagedObjectModel {
            EntityDescription("A") {
                AttributeDescription("x", .string)
                FetchedPropertyDescription("x", fetchRequest: FetchTemplate("r", entity: "A"))
            }
        }) { XCTAssertTrue("\($0)".contains("two properties named \"x\""), "\($0)") }
    }

    func testXcodeFetchedPropertiesLoad() throws {
        let xml = """
        <model>
            <entity name="Palette">
                <attribute name="hue" attributeType="Float" defaultValueString="0.0"/>
                <fetchedProperty name="warmer" optional="YES">
                    <fetchRequest name="warmerRequest" entity="Palette" predicateString="hue &gt; $FETCH_SOURCE.hue"/>
                </fetchedProperty>
            </entity>
        </model>
        """
        let doc = try XcodeModelDocument(xml: Data(xml.utf8), path: "p.xml")
        XCTAssertEqual(doc.unsupportedFeatures(), [])
        let model = try doc.makeModel()
        let context = try PersistentContainer.inMemory(model: model).newContext()
        var palettes: [ManagedObject] = []
        for h in [Float(0.1), 0.5, 0.9] {
            let p = try context.insert("Palette")
            try p.setValue(h, forKey: "hue")
            palettes.append(p)
        }
        let warmer = try XCTUnwrap(palettes[1].value(forKey: "warmer") as? [ManagedObject])
        XCTAssertEqual(warmer.map(\.objectID), [palettes[2].objectID])
    }
}
