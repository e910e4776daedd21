// Ordered to-many relationships in every shape (Context+Relationships.swift,
// "Ordering"): ordered many-to-many with both sides ordered (independent
// orders), ordered on one side only, ordered without inverse; insert, move and
// remove at an index; order surviving save and reopen; a random sequence of
// edits checked against plain arrays, saved and reopened.

import Foundation
import XCTest
import Kura
import KuraEngine

final class OrderedRelationshipTests: XCTestCase {
    /// Playlist.songs ↔ Song.playlists, both ordered; Playlist.favorites ↔
    /// Song.favoredBy, ordered on the playlist side only; Playlist.pinned,
    /// ordered without inverse.
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Playlist") {
                AttributeDescription("name", .string)
                RelationshipDescription("songs", to: "Song", inverse: "playlists", toMany: true, ordered: true)
                RelationshipDescription("favorites", to: "Song", inverse: "favoredBy", toMany: true, ordered: true)
                RelationshipDescription("pinned", to: "Song", toMany: true, ordered: true)
            }
            EntityDescription("Song") {
                AttributeDescription("title", .string)
                RelationshipDescription("playlists", to: "Playlist", inverse: "songs", toMany: true, ordered: true)
                RelationshipDescription("favoredBy", to: "Playlist", inverse: "favorites", toMany: true)
            }
        }
    }

    private func titles(_ o: ManagedObject, _ key: String) throws -> [String] {
        try XCTUnwrap(o.value(forKey: key) as? ObjectList).map { $0[$0.entity.attributesByName["title"] != nil ? "title" : "name"] as? String ?? "?" }
    }

    private func fetch(_ context: ManagedObjectContext, _ entity: String, _ key: String, _ value: String) throws -> ManagedObject {
        try XCTUnwrap(try context.fetch(FetchRequest<ManagedObject>(entityName: entity, predicate: try KuraPredicate(format: "\(key) == '\(value)'"))).first)
    }

    func testOrderedManyToManyKeepsEachSidesOrderThroughEditsAndReopen() throws {
        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("o.kura")
        do {
            let container = try PersistentContainer(url: url, model: try Self.model())
            let c = container.newContext()
            let p = try c.insert("Playlist"), q = try c.insert("Playlist")
            try p.setValue("p", forKey: "name")
            try q.setValue("q", forKey: "name")
            var songs: [ManagedObject] = []
            for t in ["a", "b", "c", "d"] {
                let s = try c.insert("Song")
                try s.setValue(t, forKey: "title")
                songs.append(s)
            }
            try p.setValue([songs[2], songs[0], songs[1]], forKey: "songs")
            try q.add(songs[0], to: "songs")
            try q.add(songs[2], to: "songs")
            XCTAssertEqual(try titles(p, "songs"), ["c", "a", "b"])
            // The inverse side's order: each song's playlists in the order it joined them.
            XCTAssertEqual(try titles(songs[0], "playlists"), ["p", "q"])
            try songs[0].setValue([q, p], forKey: "playlists")  // reorders the song's side only
            XCTAssertEqual(try titles(songs[0], "playlists"), ["q", "p"])
            XCTAssertEqual(try titles(p, "songs"), ["c", "a", "b"])
            try c.save()
            try p.insert(songs[3], at: 1, into: "songs")
            try p.moveObject(at: 0, to: 3, in: "songs")
            XCTAssertEqual(try titles(p, "songs"), ["d", "a", "b", "c"])
            try p.removeObject(at: 1, from: "songs")
            XCTAssertEqual(try titles(p, "songs"), ["d", "b", "c"])
            XCTAssertEqual(try titles(songs[0], "playlists"), ["q"])
            XCTAssertEqual(try titles(songs[3], "playlists"), ["p"])
            try c.save()
        }
        let container = try PersistentContainer(url: url, model: try Self.model())
        let c = container.newContext()
        let p = try fetch(c, "Playlist", "name", "p"), q = try fetch(c, "Playlist", "name", "q")
        XCTAssertEqual(try titles(p, "songs"), ["d", "b", "c"])
        XCTAssertEqual(try titles(q, "songs"), ["a", "c"])
        XCTAssertEqual(try titles(try fetch(c, "Song", "title", "c"), "playlists"), ["p", "q"])
        XCTAssertEqual(try titles(try fetch(c, "Song", "title", "a"), "playlists"), ["q"])
        // Index errors name the relationship; an unordered relationship refuses positions.
        XCTAssertThrowsError(try p.insert(try fetch(c, "Song", "title", "a"), at: 9, into: "songs")) { e in
            XCTAssertTrue("\(e)".contains("\"songs\""), "\(e)")
        }
        XCTAssertThrowsError(try fetch(c, "Song", "title", "a").insert(q, at: 0, into: "favoredBy")) { e in
            XCTAssertTrue("\(e)".contains("not ordered"), "\(e)")
        }
    }

    func testOrderedOnOneSideAndOrderedWithoutInverseSurviveReopenAndRollback() throws {
        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("o.kura")
        do {
            let container = try PersistentContainer(url: url, model: try Self.model())
            let c = container.newContext()
            let p = try c.insert("Playlist")
            try p.setValue("p", forKey: "name")
            var songs: [ManagedObject] = []
            for t in ["a", "b", "c"] {
                let s = try c.insert("Song")
                try s.setValue(t, forKey: "title")
                songs.append(s)
            }
            try p.setValue([songs[1], songs[2], songs[0]], forKey: "favorites")
            try p.setValue([songs[2], songs[1]], forKey: "pinned")
            try songs[1].add(p, to: "favoredBy")  // already a member: nothing moves
            XCTAssertEqual(try titles(p, "favorites"), ["b", "c", "a"])
            try c.save()
            try p.moveObject(at: 2, to: 0, in: "favorites")
            try p.insert(songs[0], at: 0, into: "pinned")
            XCTAssertEqual(try titles(p, "favorites"), ["a", "b", "c"])
            XCTAssertEqual(try titles(p, "pinned"), ["a", "c", "b"])
            XCTAssertTrue(c.hasChanges)
            c.rollback()
            XCTAssertEqual(try titles(p, "favorites"), ["b", "c", "a"])
            XCTAssertEqual(try titles(p, "pinned"), ["c", "b"])
            try p.insert(songs[0], at: 1, into: "pinned")
            try c.save()
        }
        let container = try PersistentContainer(url: url, model: try Self.model())
        let c = container.newContext()
        let p = try fetch(c, "Playlist", "name", "p")
        XCTAssertEqual(try titles(p, "favorites"), ["b", "c", "a"])
        XCTAssertEqual(try titles(p, "pinned"), ["c", "a", "b"])
        // No inverse: the song side has nothing to read, and deleting a pinned song leaves no dangling member.
        try c.delete(try fetch(c, "Song", "title", "a"))
        try c.save()
        XCTAssertEqual(try titles(p, "pinned"), ["c", "b"])
        let again = try PersistentContainer(url: url, model: try Self.model()).newContext()
        XCTAssertEqual(try titles(try fetch(again, "Playlist", "name", "p"), "pinned"), ["c", "b"])
    }

    /// Random inserts, moves, removals and deletes on both sides of the
    /// ordered many-to-many, checked against arrays after each step and after
    /// reopening. Replay with KURA_SEED=<seed>.
    func testRandomOrderedEditsMatchArraysAcrossSavesAndReopen() throws {
        let seed = ProcessInfo.processInfo.environment["KURA_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 0...UInt64(UInt32.max))
        print("OrderedRelationshipTests seed \(seed) (replay with KURA_SEED=\(seed))")
        var rng = SplitMix64(state: seed)
        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("r.kura")
        var container = try PersistentContainer(url: url, model: try Self.model())
        var c = container.newContext()
        var lists: [String: [String]] = [:]   // playlist -> song titles (songs)
        var joined: [String: [String]] = [:]  // song -> playlist names (playlists)
        let names = ["p0", "p1", "p2"], songTitles = (0..<6).map { "s\($0)" }
        for n in names { try c.insert("Playlist").setValue(n, forKey: "name"); lists[n] = [] }
        for t in songTitles { try c.insert("Song").setValue(t, forKey: "title"); joined[t] = [] }
        try c.save()
        func check(_ step: Int) throws {
            for n in names { XCTAssertEqual(try titles(try fetch(c, "Playlist", "name", n), "songs"), lists[n], "seed \(seed) step \(step): \(n)") }
            for t in songTitles { XCTAssertEqual(try titles(try fetch(c, "Song", "title", t), "playlists"), joined[t], "seed \(seed) step \(step): \(t)") }
        }
        for step in 0..<60 {
            let n = names[Int(rng.next() % 3)], t = songTitles[Int(rng.next() % 6)]
            let p = try fetch(c, "Playlist", "name", n), s = try fetch(c, "Song", "title", t)
            switch rng.next() % 5 {
            case 0, 1:  // insert (or move) t into n's songs at a random index
                var l = lists[n] ?? []
                l.removeAll { $0 == t }
                let i = Int(rng.next() % UInt64(l.count + 1))
                if lists[n]?.contains(t) != true { joined[t, default: []].append(n) }
                l.insert(t, at: i)
                lists[n] = l
                try p.insert(s, at: i, into: "songs")
            case 2:  // move within the song's playlists
                guard let count = joined[t]?.count, count > 1 else { continue }
                let a = Int(rng.next() % UInt64(count)), b = Int(rng.next() % UInt64(count))
                var l = joined[t] ?? []
                l.insert(l.remove(at: a), at: b)
                joined[t] = l
                try s.moveObject(at: a, to: b, in: "playlists")
            case 3:  // remove at an index
                guard let count = lists[n]?.count, count > 0 else { continue }
                let i = Int(rng.next() % UInt64(count))
                let gone = lists[n]?.remove(at: i)
                joined[gone ?? ""]?.removeAll { $0 == n }
                try p.removeObject(at: i, from: "songs")
            default:
                try c.save()
                if rng.next() % 2 == 0 {
                    container = try PersistentContainer(url: url, model: try Self.model())
                    c = container.newContext()
                }
            }
            try check(step)
        }
        try c.save()
        container = try PersistentContainer(url: url, model: try Self.model())
        c = container.newContext()
        try check(-1)
    }

    /// A join table written before `inverse_position` existed (three columns)
    /// opens: the column is appended, old rows keep their membership and
    /// position, read 0 on the new side, and take new positions when reordered.
    func testAJoinTableWithoutInversePositionOpensAndGainsTheColumn() throws {
        let model = try ManagedObjectModel {
            EntityDescription("Post") {
                AttributeDescription("title", .string)
                RelationshipDescription("tags", to: "Tag", inverse: "posts", toMany: true, ordered: true)
            }
            EntityDescription("Tag") {
                AttributeDescription("name", .string)
                RelationshipDescription("posts", to: "Post", inverse: "tags", toMany: true, ordered: true)
            }
        }
        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("old.kura")
        do {
            let db = try Database(path: url.path)
            try db.write { tx in
                let post = try tx.createTable("Post", schema: try TableSchema([ColumnDefinition("title", .text),
                                                                               ColumnDefinition("_version", .integer, nullable: false, default: .integer(0))]))
                let tag = try tx.createTable("Tag", schema: try TableSchema([ColumnDefinition("name", .text),
                                                                             ColumnDefinition("_version", .integer, nullable: false, default: .integer(0))]))
                let join = try tx.createTable("_Post_tags", schema: try TableSchema([
                    ColumnDefinition("source", .integer, nullable: false), ColumnDefinition("target", .integer, nullable: false),
                    ColumnDefinition("position", .double, nullable: false, default: .double(0)),
                ]))
                try tx.createIndex("_Post_tags_source", on: join, columns: [IndexColumn("source"), IndexColumn("target")])
                try tx.createIndex("_Post_tags_target", on: join, columns: [IndexColumn("target"), IndexColumn("source")])
                let p = try tx.insert([.text("p"), .integer(1)], into: post)
                let a = try tx.insert([.text("a"), .integer(1)], into: tag), b = try tx.insert([.text("b"), .integer(1)], into: tag)
                _ = try tx.insert([.integer(p), .integer(b), .double(0)], into: join)
                _ = try tx.insert([.integer(p), .integer(a), .double(1)], into: join)
            }
        }
        let container = try PersistentContainer(url: url, model: model, persistentHistoryTracking: true)
        try container.database.read { tx in
            XCTAssertEqual(try XCTUnwrap(try tx.schema(of: try tx.table("_Post_tags"))).columns.map(\.name), ["source", "target", "position", "inverse_position"])
        }
        let c = container.newContext()
        let p = try fetch(c, "Post", "title", "p")
        XCTAssertEqual(try titles(p, "tags"), ["b", "a"])
        let a = try fetch(c, "Tag", "name", "a")
        XCTAssertEqual(try titles(a, "posts"), ["p"])
        let q = try c.insert("Post")
        try q.setValue("q", forKey: "title")
        try a.insert(q, at: 0, into: "posts")
        try c.save()
        // A reorder alone is a saved change of that side, in the history too.
        try a.moveObject(at: 1, to: 0, in: "posts")
        XCTAssertTrue(c.hasChanges)
        try c.save()
        let last = try XCTUnwrap(container.history().last).changes
        XCTAssertEqual(last, [PersistentHistoryChange(kind: .update, objectID: a.objectID, updatedProperties: ["posts"])])
        let again = try PersistentContainer(url: url, model: model).newContext()
        XCTAssertEqual(try titles(try fetch(again, "Tag", "name", "a"), "posts"), ["p", "q"])
        XCTAssertEqual(try titles(try fetch(again, "Post", "title", "p"), "tags"), ["b", "a"])
    }

    func testUndoAndRedoRestoreTheOrderOfAnOrderedManyToMany() throws {
        let container = try PersistentContainer.inMemory(model: try Self.model())
        let c = container.newContext()
        let p = try c.insert("Playlist")
        try p.setValue("p", forKey: "name")
        for t in ["a", "b", "c"] { try p.add(try c.insert("Song").setting("title", t), to: "songs") }
        try c.save()
        c.undoManager = ContextUndoManager()
        try p.moveObject(at: 0, to: 2, in: "songs")
        c.processPendingChanges()
        XCTAssertEqual(try titles(p, "songs"), ["b", "c", "a"])
        let d = try c.insert("Song").setting("title", "d")
        try p.insert(d, at: 1, into: "songs")
        c.processPendingChanges()
        XCTAssertEqual(try titles(p, "songs"), ["b", "d", "c", "a"])
        c.undoLastChange()
        XCTAssertEqual(try titles(p, "songs"), ["b", "c", "a"])
        c.undoLastChange()
        XCTAssertEqual(try titles(p, "songs"), ["a", "b", "c"])
        c.redoLastChange()
        XCTAssertEqual(try titles(p, "songs"), ["b", "c", "a"])
        try c.save()
        let fresh = container.newContext()
        XCTAssertEqual(try titles(try fetch(fresh, "Playlist", "name", "p"), "songs"), ["b", "c", "a"])
    }
}

private extension ManagedObject {
    /// Sets `key` and returns the object (for building test data inline).
    func setting(_ key: String, _ value: Any) throws -> ManagedObject {
        try setValue(value, forKey: key)
        return self
    }
}
