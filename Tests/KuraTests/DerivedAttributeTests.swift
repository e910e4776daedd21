// Derived attributes (AttributeDescription.derivationExpression,
// DerivedAttributes.swift): computed at save from a key path, a to-one key
// path, @count and @sum of a to-many, now(), lowercase:/uppercase:/canonical:;
// stored (fetchable, read after reopen); recomputed when the object saves
// again; unsupported expressions and wrong types are clear model errors
// naming the attribute and the expression; loaded from an Xcode model.

import Foundation
import XCTest
import Kura
import KuraEngine

final class DerivedAttributeTests: XCTestCase {
    static let xml = """
    <model>
    <entity name="List">
    <attribute name="title" optional="YES" attributeType="String"/>
    <attribute name="searchTitle" optional="YES" attributeType="String" derived="YES" derivationExpression="canonical:(title)"/>
    <attribute name="loud" optional="YES" attributeType="String" derived="YES" derivationExpression="uppercase:(title)"/>
    <attribute name="quiet" optional="YES" attributeType="String" derived="YES" derivationExpression="lowercase:(title)"/>
    <attribute name="itemCount" optional="YES" attributeType="Integer 64" derived="YES" derivationExpression="items.@count"/>
    <attribute name="total" optional="YES" attributeType="Double" derived="YES" derivationExpression="items.@sum.price"/>
    <attribute name="units" optional="YES" attributeType="Integer 32" derived="YES" derivationExpression="items.@sum.quantity"/>
    <attribute name="touched" optional="YES" attributeType="Date" derived="YES" derivationExpression="now()"/>
    <relationship name="items" optional="YES" toMany="YES" deletionRule="Cascade" destinationEntity="Item" inverseName="list" inverseEntity="Item"/>
    </entity>
    <entity name="Item">
    <attribute name="price" optional="YES" attributeType="Double" defaultValueString="0"/>
    <attribute name="quantity" optional="YES" attributeType="Integer 16" defaultValueString="1"/>
    <attribute name="listTitle" optional="YES" attributeType="String" derived="YES" derivationExpression="list.title"/>
    <relationship name="list" optional="YES" maxCount="1" deletionRule="Nullify" destinationEntity="List" inverseName="items" inverseEntity="List"/>
    </entity>
    </model>
    """

    func testDerivedValuesAreComputedAtSaveStoredAndRecomputed() throws {
        let model = try XcodeModelDocument(xml: Data(Self.xml.utf8), path: "derived.xml").makeModel()
        XCTAssertEqual(model["List"]?.attributesByName["itemCount"]?.derivationExpression, "items.@count")
        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("d.kura")
        let before = Date()
        do {
            let c = try PersistentContainer(url: url, model: model).newContext()
            let list = try c.insert("List")
            try list.setValue("Crème Brûlée", forKey: "title")
            for (price, qty) in [(2.5, Int16(2)), (4.0, Int16(3))] {
                let item = try c.insert("Item")
                try item.setValue(price, forKey: "price")
                try item.setValue(qty, forKey: "quantity")
                try item.setValue(list, forKey: "list")
            }
            XCTAssertNil(try list.value(forKey: "itemCount"))  // not computed before the save
            try c.save()
            XCTAssertEqual(try list.value(forKey: "itemCount") as? Int64, 2)
            XCTAssertEqual(try list.value(forKey: "searchTitle") as? String, "creme brulee")
            XCTAssertEqual(try list.value(forKey: "loud") as? String, "CRÈME BRÛLÉE")
            XCTAssertEqual(try list.value(forKey: "quiet") as? String, "crème brûlée")
            XCTAssertEqual(try list.value(forKey: "total") as? Double, 6.5)
            XCTAssertEqual(try list.value(forKey: "units") as? Int32, 5)
            let touched = try XCTUnwrap(list.value(forKey: "touched") as? Date)
            XCTAssertGreaterThanOrEqual(touched, before.addingTimeInterval(-1))
            // Recomputed when the object saves again; a value the app set is overwritten.
            try list.setValue("Tarte", forKey: "title")
            try list.setValue("wrong", forKey: "searchTitle")
            try c.save()
            XCTAssertEqual(try list.value(forKey: "searchTitle") as? String, "tarte")
        }
        let c = try PersistentContainer(url: url, model: model).newContext()
        // Stored: fetchable by value.
        let found = try c.fetch(FetchRequest<ManagedObject>(entityName: "List", predicate: try KuraPredicate(format: "searchTitle == 'tarte' AND itemCount == 2")))
        XCTAssertEqual(found.count, 1)
        let items = try c.fetch(FetchRequest<ManagedObject>(entityName: "Item"))
        XCTAssertEqual(items.map { $0["listTitle"] as? String }, ["Crème Brûlée", "Crème Brûlée"])  // not saved since the rename
    }

    func testUnsupportedExpressionsAndWrongTypesNameTheAttribute() throws {
        func refused(_ type: AttributeType, _ expression: String, _ part: String, line: UInt = #line) {
            XCTAssertThrowsError(try ManagedObjectModel {
                EntityDescription("A") {
                    AttributeDescription("name", .string)
                    AttributeDescription("d", type, derivationExpression: expression)
                    RelationshipDescription("bs", to: "B", inverse: "a", toMany: true)
                }
                EntityDescription("B") {
                    AttributeDescription("n", .int64)
                    RelationshipDescription("a", to: "A", inverse: "bs")
                }
            }, line: line) { e in
                let s = "\(e)"
                XCTAssertTrue(s.contains("derived attribute \"d\"") && s.contains("\"\(expression)\"") && s.contains(part), s, line: line)
            }
        }
        refused(.int64, "bs.@avg.n", "Kura evaluates")
        refused(.string, "sum:(name)", "Kura evaluates")
        refused(.int64, "missing", "does not name a stored attribute")
        refused(.string, "bs.@count", "integer attribute")
        refused(.string, "now()", "date attribute")
        refused(.int64, "name", "reads a string attribute into a int64")
        refused(.int64, "bs.@sum.name", "not a stored numeric attribute")
        refused(.string, "bs.n", "not a to-one relationship")
        // An Xcode model names the line of an expression Kura does not evaluate.
        let doc = try XcodeModelDocument(xml: Data("<model>\n<entity name=\"A\">\n<attribute name=\"d\" attributeType=\"Date\" derived=\"YES\" derivationExpression=\"later()\"/>\n</entity>\n</model>".utf8), path: "x.xml")
        XCTAssertEqual(doc.unsupportedFeatures().map(\.line), [3])
    }

    func testDerivedValuesOfAChildsPushAreComputedAtTheParentsSave() throws {
        // Guards the child-context seam: derived attributes are computed by the
        // store save of the last ancestor, from what a child pushed (not at the
        // push, and not left stale for objects only a child changed).
        let model = try XcodeModelDocument(xml: Data(Self.xml.utf8), path: "derived.xml").makeModel()
        let container = try PersistentContainer.inMemory(model: model)
        let parent = container.newContext()
        let child = parent.newChildContext()
        let list = try child.insert("List")
        try list.setValue("Soup", forKey: "title")
        for price in [1.5, 2.0] {
            let item = try child.insert("Item")
            try item.setValue(price, forKey: "price")
            try item.setValue(list, forKey: "list")
        }
        try child.save()
        let pushed = try parent.object(with: list.objectID)
        XCTAssertNil(try pushed.value(forKey: "itemCount"), "a push computes nothing")
        try parent.save()
        XCTAssertEqual(try pushed.value(forKey: "itemCount") as? Int64, 2)
        XCTAssertEqual(try pushed.value(forKey: "loud") as? String, "SOUP")
        XCTAssertEqual(try pushed.value(forKey: "total") as? Double, 3.5)

        // An update made in a second child, pushed, then saved: recomputed.
        let second = parent.newChildContext()
        let again = try XCTUnwrap(try second.fetch(FetchRequest<ManagedObject>(entityName: "List")).first)
        XCTAssertEqual(try again.value(forKey: "loud") as? String, "SOUP", "the child reads the computed value")
        try again.setValue("Stew", forKey: "title")
        try second.save()
        try parent.save()
        let fresh = container.newContext()
        let stored = try XCTUnwrap(try fresh.fetch(FetchRequest<ManagedObject>(entityName: "List", predicate: try KuraPredicate(format: "searchTitle == 'stew'"))).first)
        XCTAssertEqual(try stored.value(forKey: "loud") as? String, "STEW")
        XCTAssertEqual(try stored.value(forKey: "itemCount") as? Int64, 2)
    }
}
