// Transient attributes and relationships across child and parent contexts
// (Context+Parent.swift, "Transient properties are per context"): a child
// reading from its parent starts transients at their defaults, a push carries
// none, and each context keeps its own.

import Foundation
import XCTest
import Kura

final class ChildContextTransientTests: XCTestCase {
    private func names(_ o: ManagedObject, _ key: String) throws -> [String] {
        try XCTUnwrap(o.value(forKey: key) as? ObjectList).map { $0["name"] as? String ?? $0["text"] as? String ?? "?" }
    }

    func testTransientAttributesArePerContextAcrossAPush() throws {
        // Guards the inconsistency where a child copied the parent's transient
        // values when it read an object, and its push overwrote the parent's
        // transient values (and gave inserted objects the child's), while
        // transient relationships stayed per context.
        let container = try PersistentContainer.inMemory(model: try TransientAttributeTests.model())
        let parent = container.newContext()
        let car = try parent.insert("Car")
        try car.setValue("Ka", forKey: "name")
        try parent.save()
        try car.setValue(Int64(50), forKey: "speed")

        let child = parent.newChildContext()
        let c = try child.object(with: car.objectID)
        XCTAssertEqual(try c.value(forKey: "name") as? String, "Ka")
        XCTAssertEqual(try c.value(forKey: "speed") as? Int64, 0, "a child's transient starts at its default")
        try c.setValue(Int64(70), forKey: "speed")
        try c.setValue("Ka2", forKey: "name")
        let fresh = try child.insert("Car")
        try fresh.setValue("Fiesta", forKey: "name")
        try fresh.setValue(Int64(99), forKey: "speed")
        try fresh.setValue("new", forKey: "note")
        try child.save()

        XCTAssertEqual(try car.value(forKey: "name") as? String, "Ka2")
        XCTAssertEqual(try car.value(forKey: "speed") as? Int64, 50, "the push carries no transient value")
        XCTAssertEqual(try c.value(forKey: "speed") as? Int64, 70, "the child keeps its own")
        let pushed = try parent.object(with: fresh.objectID)
        XCTAssertEqual(try pushed.value(forKey: "name") as? String, "Fiesta")
        XCTAssertEqual(try pushed.value(forKey: "speed") as? Int64, 0, "an inserted object starts at the defaults in the parent")
        XCTAssertNil(try pushed.value(forKey: "note"))
        // A fetch in the child does not reset its loaded objects' transients.
        _ = try child.fetch(FetchRequest<ManagedObject>(entityName: "Car"))
        XCTAssertEqual(try c.value(forKey: "speed") as? Int64, 70)
        try parent.save()
        XCTAssertEqual(try car.value(forKey: "speed") as? Int64, 50)
    }

    func testTransientRelationshipsArePerContextAcrossAPush() throws {
        // Guards the same seam for transient relationships: documented per
        // context; a child's links never reach the parent.
        let container = try PersistentContainer.inMemory(model: try TransientRelationshipTests.model())
        let parent = container.newContext()
        let m = try parent.insert("Message"), a = try parent.insert("Client"), b = try parent.insert("Client")
        try m.setValue("m", forKey: "text")
        try a.setValue("a", forKey: "name")
        try b.setValue("b", forKey: "name")
        try parent.save()
        try m.setValue([a], forKey: "missingRecipients")

        let child = parent.newChildContext()
        let cm = try child.object(with: m.objectID)
        XCTAssertEqual(try names(cm, "missingRecipients"), [], "links are the parent's")
        try cm.setValue([try child.object(with: b.objectID)], forKey: "missingRecipients")
        try cm.setValue("m2", forKey: "text")
        try child.save()
        XCTAssertEqual(try m.value(forKey: "text") as? String, "m2")
        XCTAssertEqual(try names(m, "missingRecipients"), ["a"])
        XCTAssertEqual(try names(cm, "missingRecipients"), ["b"])
    }
}
