import Foundation
import XCTest
import KuraEngine
@testable import Kura

/// Saves that update or delete fetched objects (Context+Save.swift): the
/// changed keys each object reports (a bit mask per object, names made once
/// per entity and mask: SavedChangeNames.swift), the saved state an object
/// takes from the values it wrote (`takeWrittenValues`), and deleted rows
/// going to the engine together with the records the version check read
/// (`WriteTransaction.deleteRows(_:records:from:)`), each checked against
/// what the store and the notes must hold.
final class UpdateDeleteSaveTests: XCTestCase {
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Owner") {
                AttributeDescription("label", .string)
                RelationshipDescription("items", to: "Item", inverse: "owner", toMany: true)
            }
            EntityDescription("Item") {
                AttributeDescription("name", .string, indexed: true)
                AttributeDescription("score", .int64, indexed: true)
                AttributeDescription("ts", .double)
                AttributeDescription("scratch", .string, transient: true)
                RelationshipDescription("owner", to: "Owner", inverse: "items", optional: true)
            }
            // Plain rows (no to-one key): what the save writes from an
            // object's values becomes its saved state as it is.
            EntityDescription("Plain") {
                AttributeDescription("name", .string, indexed: true)
                AttributeDescription("score", .int64, indexed: true)
                AttributeDescription("ts", .double)
                AttributeDescription("scratch", .string, transient: true)
            }
        }
    }

    /// Objects of one save change different sets of properties: each one's
    /// did-save keys and history record name exactly its own changes.
    func testEachObjectReportsItsOwnChangedKeys() throws {
        let seed = testSeed("UpdateDeleteSaveTests.changedKeys")
        var rng = SplitMix64(state: seed)
        let container = try PersistentContainer.inMemory(model: Self.model(), persistentHistoryTracking: true)
        let setup = container.newContext()
        let owners = try (0..<3).map { i in
            let o = try setup.insert("Owner")
            try o.setValue("owner \(i)", forKey: "label")
            return o
        }
        for i in 0..<200 {
            let o = try setup.insert("Item")
            try o.setValue("item \(i)", forKey: "name")
            try o.setValue(Int64(i), forKey: "score")
            try o.setValue(Double(i), forKey: "ts")
            if i % 2 == 0 { try o.setValue(owners[i % 3], forKey: "owner") }
        }
        try setup.save()

        let context = container.newContext()
        let items = try context.fetch(FetchRequest<ManagedObject>(entityName: "Item"))
        let otherOwners = try context.fetch(FetchRequest<ManagedObject>(entityName: "Owner"))
        var expected: [ManagedObjectID: Set<String>] = [:]
        for (i, o) in items.enumerated() {
            var keys = Set<String>()
            // A few masks, in runs and alone, so that objects with equal and
            // different changes follow each other.
            let pick = rng.next() % 8 == 0 ? rng.next() % 32 : UInt64(i / 40) % 32
            if pick & 1 != 0 { try o.setValue("renamed \(i)", forKey: "name"); keys.insert("name") }
            if pick & 2 != 0 { try o.setValue(Int64(1000 + i), forKey: "score"); keys.insert("score") }
            if pick & 4 != 0 { try o.setValue(-Double(i) - 1, forKey: "ts"); keys.insert("ts") }
            if pick & 8 != 0 {
                let now = try o.value(forKey: "owner") as? ManagedObject
                let next = otherOwners.first { $0 !== now }
                try o.setValue(next, forKey: "owner")
                keys.insert("owner")
            }
            // A transient change is never a saved key.
            if pick & 16 != 0 { try o.setValue("scratch \(i)", forKey: "scratch") }
            // An object changed in a transient attribute alone is saved with no key.
            if pick != 0 { expected[o.objectID] = keys }
        }
        var notes: [ContextDidSave] = []
        let token = context.observeDidSave { notes.append($0) }
        defer { token.cancel() }
        try context.save()
        XCTAssertEqual(notes.count, 1, "seed \(seed)")
        let note = try XCTUnwrap(notes.first)
        // Owners whose to-many membership changed are updates too (of "items").
        let itemUpdates = note.updated.filter { $0.key.entityName == "Item" }
        Self.assertSame(itemUpdates, expected, "did-save, seed \(seed)")
        for (id, keys) in note.updated where id.entityName == "Owner" { XCTAssertEqual(keys, ["items"], "seed \(seed) \(id)") }
        let last = try XCTUnwrap(try container.history().last)
        var recorded: [ManagedObjectID: Set<String>] = [:]
        for c in last.changes where c.kind == .update && c.objectID.entityName == "Item" {
            XCTAssertEqual(c.updatedProperties, c.updatedProperties.sorted(), "seed \(seed)")
            recorded[c.objectID] = Set(c.updatedProperties)
        }
        Self.assertSame(recorded, expected, "history, seed \(seed)")
    }

    /// The objects-did-change batch names each object's changed keys
    /// (kept as one name until a second comes: `NotedKeys`): a key set
    /// twice is named once, two or three keys all, in the batch and in its
    /// ID form.
    func testObjectsDidChangeNamesEachObjectsKeys() throws {
        let container = try PersistentContainer.inMemory(model: Self.model())
        let setup = container.newContext()
        for i in 0..<4 {
            let o = try setup.insert("Plain")
            try o.setValue("p \(i)", forKey: "name")
            try o.setValue(Int64(i), forKey: "score")
        }
        try setup.save()
        let context = container.newContext()
        let objects = try context.fetch(FetchRequest<ManagedObject>(entityName: "Plain", sortDescriptors: [SortKey("score")]))
        XCTAssertEqual(objects.count, 4)
        var batches: [ContextObjectsDidChange] = []
        let token = context.observeObjectsDidChange { batches.append($0) }
        defer { token.cancel() }
        try objects[0].setValue("again", forKey: "name")
        try objects[0].setValue("and again", forKey: "name")
        try objects[1].setValue("b", forKey: "name")
        try objects[1].setValue(Int64(10), forKey: "score")
        try objects[2].setValue(Int64(20), forKey: "score")
        try objects[2].setValue(2.5, forKey: "ts")
        try objects[2].setValue(Int64(21), forKey: "score")
        try objects[2].setValue("c", forKey: "name")
        try objects[3].setValue(3.5, forKey: "ts")
        context.processPendingChanges()
        XCTAssertEqual(batches.count, 1)
        let batch = try XCTUnwrap(batches.first)
        let expected: [Set<String>] = [["name"], ["name", "score"], ["name", "score", "ts"], ["ts"]]
        for (o, keys) in zip(objects, expected) { XCTAssertEqual(batch.changedKeys(of: o), keys, "\(o.objectID)") }
        XCTAssertEqual(batch.ids.updated, Dictionary(uniqueKeysWithValues: zip(objects.map(\.objectID), expected)))
    }

    static func assertSame(_ actual: [ManagedObjectID: Set<String>], _ expected: [ManagedObjectID: Set<String>], _ what: String, line: UInt = #line) {
        XCTAssertEqual(actual.count, expected.count, what, line: line)
        for id in Set(actual.keys).union(expected.keys) where actual[id] != expected[id] {
            XCTFail("\(what): \(id) has \(actual[id].map { $0.sorted().description } ?? "no entry"), expected \(expected[id].map { $0.sorted().description } ?? "none")", line: line)
        }
    }

    /// Fetched objects updated and saved take what they wrote as their saved
    /// state at the next version: saved again without a conflict, seen by a
    /// fresh context, and a context holding them at the old version meets
    /// the conflict.
    func testUpdatedObjectsTakeTheWrittenStateAtTheNextVersion() throws {
        let container = try PersistentContainer.inMemory(model: Self.model())
        let setup = container.newContext()
        for i in 0..<50 {
            let o = try setup.insert("Plain")
            try o.setValue("item \(i)", forKey: "name")
            try o.setValue(Int64(i), forKey: "score")
            try o.setValue(Double(i), forKey: "ts")
        }
        try setup.save()
        let stale = container.newContext()
        let staleItems = try stale.fetch(FetchRequest<ManagedObject>(entityName: "Plain"))

        let context = container.newContext()
        let items = try context.fetch(FetchRequest<ManagedObject>(entityName: "Plain"))
        for round in 1...3 {
            for o in items {
                try o.setValue(Double(100 + round), forKey: "ts")
                try o.setValue("kept \(round)", forKey: "scratch")
            }
            try context.save()
            XCTAssertFalse(context.hasChanges, "round \(round)")
            for o in items {
                XCTAssertTrue(o.changedValues().isEmpty, "round \(round) \(o.objectID)")
                XCTAssertEqual(o.version, Int64(1 + round), "round \(round) \(o.objectID)")
                // The transient value stays as set.
                XCTAssertEqual(try o.value(forKey: "scratch") as? String, "kept \(round)")
            }
        }
        let fresh = container.newContext()
        for o in items {
            let back = try fresh.existingObject(with: o.objectID)
            XCTAssertEqual(try back.value(forKey: "ts") as? Double, 103)
            XCTAssertEqual(back.version, 4)
        }
        // The stale context read version 1: its save is a conflict for every object.
        for o in staleItems { try o.setValue(-1.0, forKey: "ts") }
        XCTAssertThrowsError(try stale.save()) { e in
            XCTAssertEqual((e as? KuraError)?.code, .mergeConflict, "\(e)")
        }
        XCTAssertEqual(stale.lastMergeConflicts.count, staleItems.count)
        XCTAssertEqual(stale.lastMergeConflicts.map(\.properties), Array(repeating: ["ts"], count: staleItems.count))
    }

    /// Deleted objects leave no row and no index entry behind; a delete of a
    /// row changed elsewhere is refused by the `.error` policy, and nothing
    /// of that save is deleted.
    func testDeletesRemoveRowsAndIndexEntries() throws {
        let seed = testSeed("UpdateDeleteSaveTests.deletes")
        var rng = SplitMix64(state: seed)
        let container = try PersistentContainer.inMemory(model: Self.model())
        let setup = container.newContext()
        var scores: [Int64] = []
        for i in 0..<600 {
            let o = try setup.insert("Item")
            let score = Int64(rng.next() % 50)
            try o.setValue("item \(rng.next() % 100) \(i)", forKey: "name")
            try o.setValue(score, forKey: "score")
            try o.setValue(Double(i), forKey: "ts")
            scores.append(score)
        }
        try setup.save()

        // A refused delete: one of the rows changed in the store since.
        let refused = container.newContext()
        let doomed = try refused.fetch(FetchRequest<ManagedObject>(entityName: "Item", predicate: try KuraPredicate(format: "score < 10")))
        for o in doomed { try refused.delete(o) }
        let other = container.newContext()
        try other.existingObject(with: try XCTUnwrap(doomed.last).objectID).setValue(99.0, forKey: "ts")
        try other.save()
        XCTAssertThrowsError(try refused.save()) { e in XCTAssertEqual((e as? KuraError)?.code, .mergeConflict, "\(e)") }
        XCTAssertEqual(try container.newContext().count(for: FetchRequest<ManagedObject>(entityName: "Item")), 600)

        let context = container.newContext()
        let gone = try context.fetch(FetchRequest<ManagedObject>(entityName: "Item", predicate: try KuraPredicate(format: "score >= 25")))
        for o in gone { try context.delete(o) }
        try context.save()
        let problems = try container.database.read { tx in try tx.checkIntegrity() }
        XCTAssertTrue(problems.isEmpty, "seed \(seed): \(problems)")
        let fresh = container.newContext()
        XCTAssertEqual(try fresh.count(for: FetchRequest<ManagedObject>(entityName: "Item")), scores.filter { $0 < 25 }.count, "seed \(seed)")
        for s in Int64(0)..<50 {
            let n = try fresh.count(for: FetchRequest<ManagedObject>(entityName: "Item", predicate: try KuraPredicate(format: "score == %@", arguments: [.integer(s)])))
            XCTAssertEqual(n, s < 25 ? scores.filter { $0 == s }.count : 0, "seed \(seed) score \(s)")
        }
        XCTAssertEqual(try fresh.count(for: FetchRequest<ManagedObject>(entityName: "Item", predicate: try KuraPredicate(format: "name BEGINSWITH 'item'"))),
                       scores.filter { $0 < 25 }.count, "seed \(seed)")
    }
}
