import XCTest
@testable import Kura

// Guards the first willSave pass's kept states (ManagedObject+Lifecycle.swift,
// `keepWillSaveState`): the pass copies no object's state up front; an
// object's state from its willSave() call is kept at its first change after
// the call. What is due again must be what comparing full snapshots gave:
// an object whose values, to-one keys or deleted flag changed after its call
// is due again; one written with the values it already had, or changed and
// changed back, is not; one changed before its own call is not.

/// A scripted hook: `script[name]` runs on each call of the object named `name`.
final class Scripted: ManagedObject {
    @Managed("name") var name: String
    @Managed("count") var count: Int64
    @ToOne("peer") var peer: Scripted?
    nonisolated(unsafe) static var calls: [String] = []
    nonisolated(unsafe) static var script: [String: (Scripted) -> Void] = [:]

    override func willSave() {
        Self.calls.append(name)
        if let step = Self.script[name] {
            Self.script[name] = nil
            step(self)
        }
    }
}

final class WillSaveKeptStateTests: XCTestCase {
    func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Scripted", class: Scripted.self) {
                AttributeDescription("name", .string, default: "")
                AttributeDescription("count", .int64, default: 0)
                RelationshipDescription("peer", to: "Scripted", inverse: "peered", deleteRule: .nullify)
                RelationshipDescription("peered", to: "Scripted", inverse: "peer", toMany: true)
            }
        }
    }

    /// Three inserted objects a, b, c (called in that order), with their hooks.
    func run(_ script: [String: (Scripted, [String: Scripted]) -> Void], saved: Bool = false) throws -> (calls: [String], stored: [String: Int64]) {
        let container = try PersistentContainer.inMemory(model: model())
        let context = container.newContext()
        var objects: [String: Scripted] = [:]
        for n in ["a", "b", "c"] {
            let o = try context.insert(Scripted.self)
            o.name = n
            objects[n] = o
        }
        if saved {
            // Saved once first: the script runs on updated objects.
            try context.save()
            for n in ["a", "b", "c"] { objects[n]!.count += 100 }
        }
        Scripted.calls = []
        Scripted.script = script.mapValues { step in { o in step(o, objects) } }
        try context.save()
        let stored = try container.newContext().fetch(FetchRequest<Scripted>(entityName: "Scripted"))
        return (Scripted.calls, Dictionary(uniqueKeysWithValues: stored.map { ($0.name, $0.count) }))
    }

    func testSameValuesWrittenAgainAreNotAChange() throws {
        // c writes a (already called) and itself with the values they hold.
        let r = try run(["c": { c, all in
            all["a"]!.count = all["a"]!.count
            all["a"]!.name = "a"
            c.count = c.count
        }])
        XCTAssertEqual(r.calls, ["a", "b", "c"])
    }

    func testChangedAndChangedBackIsNotAChange() throws {
        let r = try run(["c": { _, all in
            let was = all["a"]!.count
            all["a"]!.count = 7
            all["a"]!.count = was
        }], saved: true)
        XCTAssertEqual(r.calls, ["a", "b", "c"])
        XCTAssertEqual(r.stored["a"], 100)
    }

    func testChangeAfterTheCallIsDueAgainButNotBefore() throws {
        // a changes c before c's call (c is not due again); c changes b after
        // b's call (b is due again, once).
        let r = try run(["a": { _, all in all["c"]!.count = 5 },
                         "c": { _, all in all["b"]!.count = 6 }])
        XCTAssertEqual(r.calls, ["a", "b", "c", "b"])
        XCTAssertEqual(r.stored, ["a": 0, "b": 6, "c": 5])
    }

    func testToOneChangeAfterTheCallIsDueAgain() throws {
        // c sets a's to-one (and so b's inverse to-many): a is due again.
        let r = try run(["c": { _, all in all["a"]!.peer = all["b"] }], saved: true)
        XCTAssertEqual(r.calls.prefix(3), ["a", "b", "c"])
        XCTAssertTrue(r.calls.dropFirst(3).contains("a"), "a's to-one changed after its call: \(r.calls)")
    }

    func testToOneSetAndClearedAgainIsNotAChange() throws {
        let r = try run(["c": { _, all in
            all["a"]!.peer = all["b"]
            all["a"]!.peer = nil
        }], saved: true)
        XCTAssertEqual(r.calls.prefix(3), ["a", "b", "c"])
        XCTAssertFalse(r.calls.dropFirst(3).contains("a"), "a's to-one is back as it was: \(r.calls)")
    }

    func testDeletedAfterTheCallIsSavedAsDeleted() throws {
        // c deletes a (saved, already called): a's delete is part of the save.
        let r = try run(["c": { c, all in
            // Test model: deleting an object of this context cannot fail.
            try? c.managedObjectContext?.delete(all["a"]!)
        }], saved: true)
        XCTAssertEqual(r.calls.prefix(3), ["a", "b", "c"])
        XCTAssertNil(r.stored["a"])
        XCTAssertEqual(r.stored["b"], 100)
    }

    // Guards `liveInserted`'s shortcut (ManagedObjectContext.insertedMayHoldDeleted):
    // an inserted object deleted before the save, directly or by a hook, by
    // a delete rule, or put back by undo, is saved (or not) as it should be.
    func testInsertedObjectsDeletedBeforeTheSaveAreNotSaved() throws {
        let container = try PersistentContainer.inMemory(model: model())
        let context = container.newContext()
        context.undoManager = ContextUndoManager()
        var objects: [Scripted] = []
        for n in ["a", "b", "c", "d"] {
            let o = try context.insert(Scripted.self)
            o.name = n
            objects.append(o)
        }
        context.processPendingChanges()
        try context.delete(objects[1])
        context.processPendingChanges()
        try context.delete(objects[3])
        context.undoLastChange()  // d is back
        Scripted.calls = []
        Scripted.script = ["a": { _ in
            // Test model: deleting an object of this context cannot fail.
            try? objects[2].managedObjectContext?.delete(objects[2])
        }]
        try context.save()
        XCTAssertEqual(Scripted.calls, ["a", "c", "d"])
        let names = try container.newContext().fetch(FetchRequest<Scripted>(entityName: "Scripted", sortDescriptors: [SortKey("name")])).map(\.name)
        XCTAssertEqual(names, ["a", "d"])
        XCTAssertFalse(context.hasChanges)
    }
}
