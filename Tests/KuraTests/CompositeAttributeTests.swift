// Composite attributes (AttributeDescription.compositeElements,
// CompositeAttributes.swift; Core Data's iOS 17 composite attributes): loaded
// from an Xcode model's <compositeAttribute>, stored as `<attr>.<element>`
// columns, read and written as dictionaries, tracked as one value (changes,
// rollback), usable in predicates as `attr.element` in the engine and in
// memory, surviving reopen; malformed ones are clear errors.

import Foundation
import XCTest
import Kura
import KuraEngine

final class CompositeAttributeTests: XCTestCase {
    static let xml = """
    <model>
    <entity name="Person">
    <attribute name="name" optional="YES" attributeType="String"/>
    <attribute name="home" optional="YES" attributeType="Composite" composite="Address"/>
    </entity>
    <compositeAttribute name="Address">
    <attribute name="city" optional="YES" attributeType="String"/>
    <attribute name="zip" optional="YES" attributeType="Integer 32"/>
    <attribute name="since" optional="YES" attributeType="Date"/>
    </compositeAttribute>
    </model>
    """

    func testCompositesStoreAsElementColumnsAndFilterByElement() throws {
        let model = try XcodeModelDocument(xml: Data(Self.xml.utf8), path: "composite.xml").makeModel()
        XCTAssertEqual(model["Person"]?.attributesByName["home"]?.compositeElements?.map(\.name), ["city", "zip", "since"])
        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("c.kura")
        let since = Date(timeIntervalSinceReferenceDate: 5000)
        do {
            let container = try PersistentContainer(url: url, model: model)
            try container.database.read { tx in
                XCTAssertEqual(try XCTUnwrap(try tx.schema(of: try tx.table("Person"))).columns.map(\.name),
                               ["name", "home.city", "home.zip", "home.since", "_version"])
            }
            let c = container.newContext()
            for (n, city, zip) in [("a", "Oslo", Int32(150)), ("b", "Bergen", Int32(5003)), ("c", "Oslo", Int32(151))] {
                let p = try c.insert("Person")
                try p.setValue(n, forKey: "name")
                try p.setValue(["city": city, "zip": zip, "since": since], forKey: "home")
            }
            let d = try c.insert("Person")
            try d.setValue("d", forKey: "name")
            XCTAssertNil(try d.value(forKey: "home"))
            // Unknown elements and wrong element types are refused, naming them.
            XCTAssertThrowsError(try d.setValue(["town": "x"], forKey: "home")) { e in XCTAssertTrue("\(e)".contains("no element \"town\""), "\(e)") }
            XCTAssertThrowsError(try d.setValue(["zip": "x"], forKey: "home")) { e in XCTAssertTrue("\(e)".contains("element \"zip\""), "\(e)") }
            XCTAssertThrowsError(try d.setValue("Oslo", forKey: "home")) { e in XCTAssertTrue("\(e)".contains("[String: Any]"), "\(e)") }
            // In memory (pending changes): the object path evaluates `home.city`.
            let pending = try c.fetch(FetchRequest<ManagedObject>(entityName: "Person", predicate: try KuraPredicate(format: "home.city == 'Oslo'")))
            XCTAssertEqual(Set(pending.map { $0["name"] as? String }), ["a", "c"])
            try c.save()
            // One value for change tracking: a rollback restores the whole group.
            let b = try XCTUnwrap(c.fetch(FetchRequest<ManagedObject>(entityName: "Person", predicate: try KuraPredicate(format: "name == 'b'"))).first)
            try b.setValue(["city": "Tromsø"], forKey: "home")
            XCTAssertTrue(b.hasChanges)
            c.rollback()
            XCTAssertEqual((try b.value(forKey: "home") as? [String: Any])?["city"] as? String, "Bergen")
        }
        let c = try PersistentContainer(url: url, model: try XcodeModelDocument(xml: Data(Self.xml.utf8), path: "composite.xml").makeModel()).newContext()
        // In the engine (no pending changes): on the element's column.
        let oslo = try c.fetch(FetchRequest<ManagedObject>(entityName: "Person", predicate: try KuraPredicate(format: "home.city == 'Oslo' AND home.zip > 150"),
                                                         sortDescriptors: [SortKey("name")]))
        XCTAssertEqual(oslo.map { $0["name"] as? String }, ["c"])
        let home = try XCTUnwrap(try oslo[0].value(forKey: "home") as? [String: Any])
        XCTAssertEqual(home["city"] as? String, "Oslo")
        XCTAssertEqual(home["zip"] as? Int32, 151)
        XCTAssertEqual(home["since"] as? Date, since)
        let d = try XCTUnwrap(c.fetch(FetchRequest<ManagedObject>(entityName: "Person", predicate: try KuraPredicate(format: "name == 'd'"))).first)
        XCTAssertNil(try d.value(forKey: "home"))
        XCTAssertEqual(try c.count(for: FetchRequest<ManagedObject>(entityName: "Person", predicate: try KuraPredicate(format: "home.city == nil"))), 1)
    }

    func testMalformedCompositesAreRefused() {
        func refused(_ elements: [AttributeDescription], _ part: String, indexed: Bool = false, line: UInt = #line) {
            XCTAssertThrowsError(try ManagedObjectModel {
                EntityDescription("A") { AttributeDescription("c", .data, indexed: indexed, compositeElements: elements) }
            }, line: line) { e in XCTAssertTrue("\(e)".contains("composite attribute \"c\"") && "\(e)".contains(part), "\(e)", line: line) }
        }
        refused([], "no elements")
        refused([AttributeDescription("x", .string), AttributeDescription("x", .int16)], "element named \"x\"")
        refused([AttributeDescription("d", .decimal)], "plain stored attribute")
        refused([AttributeDescription("x", .string, compositeElements: [AttributeDescription("y", .string)])], "a composite")
        refused([AttributeDescription("x", .string)], "cannot be transient, indexed", indexed: true)
        XCTAssertThrowsError(try ManagedObjectModel {
            EntityDescription("A") {
                AttributeDescription("c", .data, compositeElements: [AttributeDescription("x", .string)])
                UniqueConstraint("c")
            }
        }) { e in XCTAssertTrue("\(e)".contains("composite attribute \"c\""), "\(e)") }
    }
}
