// ManagedObject.awakeFromSnapshotEvents(_:) (ManagedObject+Lifecycle.swift):
// each path that gives an object values no setter gave it calls the hook once
// with its event: undo and redo (insertion, deletion, update), rollback,
// refresh, a merge of another context's save, a merge policy at a merge and
// at a save.

import Foundation
import XCTest
import Kura

/// Logs every snapshot event it is woken with, by name.
final class Snapshotted: ManagedObject {
    @Managed("name") var name: String
    @Managed("count") var count: Int64
    nonisolated(unsafe) static var log: [(String, SnapshotEvents)] = []
    override func awakeFromSnapshotEvents(_ events: SnapshotEvents) { Self.log.append((name, events)) }
}

final class SnapshotEventTests: XCTestCase {
    override func setUp() { Snapshotted.log = [] }

    private func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Snapshotted", class: Snapshotted.self) {
                AttributeDescription("name", .string, default: "")
                AttributeDescription("count", .int64, default: 0)
            }
        }
    }

    /// The log since the last call, emptied.
    private func take() -> [String] {
        defer { Snapshotted.log = [] }
        return Snapshotted.log.map { name, e in
            let names: [(SnapshotEvents, String)] = [(.undoInsertion, "undoInsertion"), (.undoDeletion, "undoDeletion"), (.undoUpdate, "undoUpdate"),
                                                     (.rollback, "rollback"), (.refresh, "refresh"), (.mergePolicy, "mergePolicy")]
            return name + ":" + names.filter { e.contains($0.0) }.map(\.1).joined(separator: "+")
        }
    }

    func testUndoRedoRollbackAndRefreshEachWakeTheObjectWithTheirEvent() throws {
        // Guards the missing hook: Kura had no awakeFromSnapshotEvents, so a
        // subclass caching derived state went stale after undo, rollback or refresh.
        let container = try PersistentContainer.inMemory(model: model())
        let context = container.newContext()
        let a = try context.insert(Snapshotted.self)
        a.name = "a"
        try context.save()
        context.undoManager = ContextUndoManager()

        a.count = 1
        context.processPendingChanges()
        context.undoLastChange()
        XCTAssertEqual(a.count, 0)
        XCTAssertEqual(take(), ["a:undoUpdate"])
        context.redoLastChange()
        XCTAssertEqual(take(), ["a:undoUpdate"])

        let b = try context.insert(Snapshotted.self)
        b.name = "b"
        context.processPendingChanges()
        context.undoLastChange()
        XCTAssertEqual(take(), [":undoInsertion"], "its values went back to the insert's too")
        context.redoLastChange()
        XCTAssertEqual(take(), ["b:undoDeletion"], "a redo of an undone insert puts the object back")

        try context.delete(a)
        context.processPendingChanges()
        context.undoLastChange()
        XCTAssertFalse(a.isDeleted)
        XCTAssertEqual(take(), ["a:undoDeletion"])

        a.count = 5
        context.rollback()
        XCTAssertEqual(a.count, 0, "the saved value")
        XCTAssertEqual(take(), ["a:rollback"], "the rolled-back insert of b leaves without a hook call")

        try context.refresh(a, mergeChanges: false)
        XCTAssertEqual(take(), ["a:refresh"])
        a.count = 7
        try context.refresh(a, mergeChanges: true)
        XCTAssertEqual(a.count, 7)
        XCTAssertEqual(take(), ["a:refresh"])
    }

    func testMergesAndMergePoliciesWakeTheObject() throws {
        // Guards the missing hook on the merge paths (see above).
        let container = try PersistentContainer.inMemory(model: model())
        let first = container.newContext(), second = container.newContext()
        let a = try first.insert(Snapshotted.self)
        a.name = "a"
        try first.save()
        let a2 = try XCTUnwrap(try second.fetch(FetchRequest<Snapshotted>(entityName: "Snapshotted")).first)
        XCTAssertEqual(a2.name, "a")
        second.automaticallyMergesChangesFromStore = true
        _ = take()

        // A clean object takes the other context's save: a refresh.
        a.count = 2
        try first.save()
        try second.mergePendingChanges()
        XCTAssertEqual(a2.count, 2)
        XCTAssertEqual(take(), ["a:refresh"])

        // An object with changes: the merge policy settles it.
        second.mergePolicy = .mergeByPropertyObjectTrump
        a2.name = "a2"
        a.count = 3
        try first.save()
        try second.mergePendingChanges()
        XCTAssertEqual(a2.count, 3)
        XCTAssertEqual(a2.name, "a2")
        XCTAssertEqual(take(), ["a2:refresh+mergePolicy"])
        try second.save()
        _ = take()

        // A conflict met at save (the other context did not merge) and settled by the policy.
        first.mergePolicy = .mergeByPropertyObjectTrump
        a.count = 4
        try first.save()
        XCTAssertEqual(first.lastMergeConflicts.map(\.objectID), [a.objectID])
        XCTAssertEqual(take(), ["a2:mergePolicy"])
    }
}
