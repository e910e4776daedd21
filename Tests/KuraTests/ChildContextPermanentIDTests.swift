// obtainPermanentIDs(for:) in a child context (Context+Parent.swift): the
// rename reaches the child and its ancestors (not sibling children), and the
// IDs stay the same through the push, the parent's save and a fresh read.

import Foundation
import XCTest
import Kura

final class ChildContextPermanentIDTests: XCTestCase {
    private func titles(_ o: ManagedObject, _ key: String) throws -> [String] {
        try XCTUnwrap(o.value(forKey: key) as? ObjectList).map { $0["title"] as? String ?? "?" }
    }

    func testPermanentIDsObtainedInAChildStayStableThroughPushAndSave() throws {
        // Guards the bug where the rename of obtainPermanentIDs left pending
        // ordered join positions under the temporary IDs, so the pushed order
        // of a member inserted in the child was lost; and checks the IDs stay.
        let container = try PersistentContainer.inMemory(model: try OrderedRelationshipTests.model())
        let parent = container.newContext()
        let p = try parent.insert("Playlist")
        try p.setValue("p", forKey: "name")
        let a = try parent.insert("Song")
        try a.setValue("a", forKey: "title")
        try p.add(a, to: "songs")
        try parent.save()

        let child = parent.newChildContext()
        let cp = try child.object(with: p.objectID)
        let x = try child.insert("Song")
        try x.setValue("x", forKey: "title")
        try cp.insert(x, at: 0, into: "songs")
        XCTAssertTrue(x.objectID.isTemporary)
        try child.obtainPermanentIDs(for: [x])
        let id = x.objectID
        XCTAssertFalse(id.isTemporary)
        XCTAssertEqual(try titles(cp, "songs"), ["x", "a"])
        try child.save()
        XCTAssertEqual(x.objectID, id)
        let px = try parent.object(with: id)
        XCTAssertEqual(px["title"] as? String, "x")
        XCTAssertEqual(try titles(p, "songs"), ["x", "a"])
        try parent.save()
        XCTAssertEqual(px.objectID, id, "the store save keeps the reserved ID")
        XCTAssertEqual(x.objectID, id)
        let fresh = container.newContext()
        let stored = try XCTUnwrap(try fresh.fetch(FetchRequest<ManagedObject>(entityName: "Song", predicate: try KuraPredicate(format: "title == 'x'"))).first)
        XCTAssertEqual(stored.objectID, id)
        let storedList = try fresh.object(with: p.objectID)
        XCTAssertEqual(try titles(storedList, "songs"), ["x", "a"])
        // The child keeps using the ID after the parent's save.
        XCTAssertTrue(try child.object(with: id) === x)
    }

    func testASiblingHoldingTheTemporaryIDIsRefusedByName() throws {
        // Documents the sibling seam: the rename reaches the child and its
        // ancestors only; a sibling's push of the old temporary ID fails with
        // an error naming it and changes nothing (no silent duplicate).
        let container = try PersistentContainer.inMemory(model: try OrderedRelationshipTests.model())
        let parent = container.newContext()
        let s = try parent.insert("Song")
        try s.setValue("s", forKey: "title")
        let temporary = s.objectID
        let one = parent.newChildContext(), two = parent.newChildContext()
        let s1 = try one.object(with: temporary), s2 = try two.object(with: temporary)
        XCTAssertEqual(s2["title"] as? String, "s")
        try one.obtainPermanentIDs(for: [s1])
        XCTAssertFalse(s1.objectID.isTemporary)
        XCTAssertEqual(s.objectID, s1.objectID, "the parent's instance is renamed")
        XCTAssertEqual(s2.objectID, temporary, "the sibling's is not")
        try s2.setValue("s2", forKey: "title")
        XCTAssertThrowsError(try two.save()) { e in
            XCTAssertEqual((e as? KuraError)?.code, .notFound)
            XCTAssertTrue("\(e)".contains(temporary.description), "\(e)")
        }
        XCTAssertEqual(s["title"] as? String, "s", "nothing was pushed")
        try parent.save()
        XCTAssertEqual(s.objectID, s1.objectID)
        let again = try two.object(with: s.objectID)
        XCTAssertEqual(again["title"] as? String, "s")
    }
}
