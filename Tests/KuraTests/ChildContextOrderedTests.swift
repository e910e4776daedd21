// Ordered join-table relationships (ordered many-to-many, ordered without
// inverse) through child contexts (Context+Parent.swift): a child reads the
// members in the parent's pending order, and its push carries its pending
// positions (`joinPositions`) into the parent, which writes them at its save.

import Foundation
import XCTest
import Kura
import KuraEngine

final class ChildContextOrderedTests: XCTestCase {
    private func titles(_ o: ManagedObject, _ key: String) throws -> [String] {
        try XCTUnwrap(o.value(forKey: key) as? ObjectList).map { $0[$0.entity.attributesByName["title"] != nil ? "title" : "name"] as? String ?? "?" }
    }

    private func fetch(_ context: ManagedObjectContext, _ entity: String, _ key: String, _ value: String) throws -> ManagedObject {
        try XCTUnwrap(try context.fetch(FetchRequest<ManagedObject>(entityName: entity, predicate: try KuraPredicate(format: "\(key) == '\(value)'"))).first)
    }

    func testChildPushCarriesOrderedJoinPositionsIntoTheParentAndTheStore() throws {
        // Guards the bug where a child's push carried join-table membership
        // but not the pending positions (`joinPositions`): a reorder made in a
        // child was lost in the parent (and so in the store), and the child
        // kept reporting changes after its save.
        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("o.kura")
        do {
            let container = try PersistentContainer(url: url, model: try OrderedRelationshipTests.model())
            let parent = container.newContext()
            let p = try parent.insert("Playlist")
            try p.setValue("p", forKey: "name")
            var songs: [ManagedObject] = []
            for t in ["a", "b", "c", "d"] {
                let s = try parent.insert("Song")
                try s.setValue(t, forKey: "title")
                songs.append(s)
            }
            try p.setValue([songs[0], songs[1], songs[2]], forKey: "songs")
            try p.setValue([songs[1], songs[0]], forKey: "pinned")
            try parent.save()

            // The parent reorders (pending): a child reads the parent's pending order.
            try p.moveObject(at: 2, to: 0, in: "songs")
            XCTAssertEqual(try titles(p, "songs"), ["c", "a", "b"])
            let child = parent.newChildContext()
            let cp = try child.object(with: p.objectID)
            XCTAssertEqual(try titles(cp, "songs"), ["c", "a", "b"], "a child reads the parent's pending order")

            // The child reorders and fills in; the parent takes its order whole.
            try cp.moveObject(at: 0, to: 2, in: "songs")
            try cp.insert(try child.object(with: songs[3].objectID), at: 1, into: "songs")
            XCTAssertEqual(try titles(cp, "songs"), ["a", "d", "b", "c"])
            try cp.insert(try child.object(with: songs[2].objectID), at: 0, into: "pinned")
            XCTAssertEqual(try titles(cp, "pinned"), ["c", "b", "a"])
            let cd = try child.object(with: songs[3].objectID)
            XCTAssertEqual(try titles(cd, "playlists"), ["p"])
            try child.save()
            XCTAssertFalse(child.hasChanges, "a pushed child has nothing left to push")
            XCTAssertEqual(try titles(p, "songs"), ["a", "d", "b", "c"])
            XCTAssertEqual(try titles(p, "pinned"), ["c", "b", "a"])
            XCTAssertEqual(try titles(songs[3], "playlists"), ["p"])
            XCTAssertTrue(parent.hasChanges)

            // A second child sees the pushed order, pending in the parent.
            let second = parent.newChildContext()
            XCTAssertEqual(try titles(try second.object(with: p.objectID), "songs"), ["a", "d", "b", "c"])
            try parent.save()
            XCTAssertEqual(try titles(p, "songs"), ["a", "d", "b", "c"])
        }
        let container = try PersistentContainer(url: url, model: try OrderedRelationshipTests.model())
        let c = container.newContext()
        let p = try fetch(c, "Playlist", "name", "p")
        XCTAssertEqual(try titles(p, "songs"), ["a", "d", "b", "c"])
        XCTAssertEqual(try titles(p, "pinned"), ["c", "b", "a"])
        XCTAssertEqual(try titles(try fetch(c, "Song", "title", "d"), "playlists"), ["p"])
    }

    func testChildRemovalAndObjectsInsertedInTheChildKeepTheirPlaces() throws {
        // Guards the same bug for members inserted in the child (temporary
        // IDs until the parent's save) and for a removal next to a reorder.
        let container = try PersistentContainer.inMemory(model: try OrderedRelationshipTests.model())
        let parent = container.newContext()
        let p = try parent.insert("Playlist")
        try p.setValue("p", forKey: "name")
        for t in ["a", "b", "c"] {
            let s = try parent.insert("Song")
            try s.setValue(t, forKey: "title")
            try p.add(s, to: "songs")
        }
        try parent.save()
        let child = parent.newChildContext()
        let cp = try child.object(with: p.objectID)
        let x = try child.insert("Song")
        try x.setValue("x", forKey: "title")
        try cp.insert(x, at: 0, into: "songs")
        try cp.removeObject(at: 2, from: "songs")  // "b"
        try cp.moveObject(at: 2, to: 1, in: "songs")
        XCTAssertEqual(try titles(cp, "songs"), ["x", "c", "a"])
        try child.save()
        XCTAssertEqual(try titles(p, "songs"), ["x", "c", "a"])
        try parent.save()
        let fresh = container.newContext()
        XCTAssertEqual(try titles(try fetch(fresh, "Playlist", "name", "p"), "songs"), ["x", "c", "a"])
        XCTAssertEqual(try titles(try fetch(fresh, "Song", "title", "b"), "playlists"), [])
    }
}
