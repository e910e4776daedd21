// Transient relationships (RelationshipDescription.isTransient,
// Context+TransientRelationships.swift): both sides kept in step in memory,
// one-to-one partners unhooked, never stored (no column, no join table,
// nothing after reopen), kept by saves and merging refreshes, reset when a
// fault fires, deleted targets skipped, fetches through them refused.

import Foundation
import XCTest
import Kura
import KuraEngine

final class TransientRelationshipTests: XCTestCase {
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Message") {
                AttributeDescription("text", .string)
                RelationshipDescription("missingRecipients", to: "Client", inverse: "messagesMissingRecipient", toMany: true, transient: true)
                RelationshipDescription("draftOf", to: "Client", inverse: "draft", transient: true)
                RelationshipDescription("sender", to: "Client", inverse: "sent")
            }
            EntityDescription("Client") {
                AttributeDescription("name", .string)
                RelationshipDescription("messagesMissingRecipient", to: "Message", inverse: "missingRecipients", toMany: true, transient: true)
                RelationshipDescription("draft", to: "Message", inverse: "draftOf", transient: true)
                RelationshipDescription("sent", to: "Message", inverse: "sender", toMany: true)
            }
        }
    }

    private func names(_ o: ManagedObject, _ key: String) throws -> [String] {
        try XCTUnwrap(o.value(forKey: key) as? ObjectList).map { $0[$0.entity.name == "Client" ? "name" : "text"] as? String ?? "?" }
    }

    func testTransientRelationshipsLiveInMemoryOnBothSides() throws {
        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("t.kura")
        let container = try PersistentContainer(url: url, model: try Self.model())
        try container.database.read { tx in
            XCTAssertEqual(try XCTUnwrap(try tx.schema(of: try tx.table("Message"))).columns.map(\.name), ["text", "sender", "_version"])
            XCTAssertFalse(try tx.tableExists("_Client_messagesMissingRecipient"))
            XCTAssertFalse(try tx.tableExists("_Message_missingRecipients"))
        }
        let c = container.newContext()
        let m = try c.insert("Message"), n = try c.insert("Message")
        try m.setValue("m", forKey: "text")
        try n.setValue("n", forKey: "text")
        let a = try c.insert("Client"), b = try c.insert("Client")
        try a.setValue("a", forKey: "name")
        try b.setValue("b", forKey: "name")
        try m.setValue([b, a], forKey: "missingRecipients")
        try n.add(a, to: "missingRecipients")
        XCTAssertEqual(try names(m, "missingRecipients"), ["b", "a"])
        XCTAssertEqual(try names(a, "messagesMissingRecipient"), ["m", "n"])
        try a.remove(m, from: "messagesMissingRecipient")
        XCTAssertEqual(try names(m, "missingRecipients"), ["b"])
        // One-to-one: taking b's draft away from m unhooks m.
        try m.setValue(b, forKey: "draftOf")
        try n.setValue(b, forKey: "draftOf")
        XCTAssertNil(try m.value(forKey: "draftOf"))
        XCTAssertTrue(try b.value(forKey: "draft") as? ManagedObject === n)
        try c.save()
        // A save keeps them.
        XCTAssertEqual(try names(m, "missingRecipients"), ["b"])
        XCTAssertTrue(try n.value(forKey: "draftOf") as? ManagedObject === b)
        // A merging refresh of an object with pending changes keeps them; a fault firing resets them.
        try m.setValue("m2", forKey: "text")
        try c.refresh(m, mergeChanges: true)
        XCTAssertEqual(try names(m, "missingRecipients"), ["b"])
        try c.refresh(m, mergeChanges: false)
        XCTAssertEqual(try names(m, "missingRecipients"), [])
        // A deleted target is skipped.
        try c.delete(a)
        XCTAssertEqual(try names(n, "missingRecipients"), [])
        try c.save()
        // Fetches cannot go through a transient relationship.
        XCTAssertThrowsError(try c.fetch(FetchRequest<ManagedObject>(entityName: "Message", predicate: try KuraPredicate(format: "draftOf.name == 'b'")))) { e in
            XCTAssertTrue("\(e)".contains("transient relationship \"draftOf\""), "\(e)")
        }
        // Nothing was stored.
        let other = try PersistentContainer(url: url, model: try Self.model()).newContext()
        for o in try other.fetch(FetchRequest<ManagedObject>(entityName: "Message")) {
            XCTAssertEqual(try names(o, "missingRecipients"), [])
            XCTAssertNil(try o.value(forKey: "draftOf"))
        }
    }
}
