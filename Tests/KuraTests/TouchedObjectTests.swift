import Foundation
import XCTest
import Kura

final class TouchedSample: ManagedObject {
    @Managed("text") var text: String
    @Managed("big") var big: Int64
    @Managed("real") var real: Double
}

/// A saved object's first change puts it in its context's list of changed
/// objects (a flag on the object says it is there): every later change
/// since the last save, rollback or reset must find it there, and a change
/// after the list was emptied must put it back.
final class TouchedObjectTests: XCTestCase {
    func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("TouchedSample", class: TouchedSample.self) {
                AttributeDescription("text", .string)
                AttributeDescription("big", .int64, indexed: true)
                AttributeDescription("real", .double)
            }
        }
    }

    func testChangesAfterSaveRollbackAndResetAreTrackedAgain() throws {
        let container = try PersistentContainer.inMemory(model: model())
        let context = container.newContext()
        for n in 0..<4 {
            let s = TouchedSample(context: context)
            s.text = "t\(n)"; s.big = Int64(n); s.real = 0
        }
        try context.save()
        let objects = try context.fetch(FetchRequest<TouchedSample>(entityName: "TouchedSample")).sorted { $0.big < $1.big }
        XCTAssertEqual(objects.count, 4)
        // First change, then a second change of the same object: listed once.
        objects[1].real = 1
        objects[1].text = "changed"
        objects[2].real = 2
        XCTAssertTrue(context.hasChanges)
        XCTAssertEqual(context.updatedObjects.map(\.objectID), [objects[1].objectID, objects[2].objectID])
        try context.save()
        XCTAssertFalse(context.hasChanges)
        XCTAssertTrue(context.updatedObjects.isEmpty)

        // After the save, a change is a change again (and is saved).
        objects[1].real = 10
        XCTAssertTrue(context.hasChanges)
        XCTAssertEqual(context.updatedObjects.map(\.objectID), [objects[1].objectID])
        // A fetch sees the pending value (the pending index is fed by the list).
        let pending = try context.fetch(FetchRequest<TouchedSample>(entityName: "TouchedSample", predicate: try KuraPredicate(format: "real > %@", arguments: [.double(5)])))
        XCTAssertEqual(pending.map(\.objectID), [objects[1].objectID])
        try context.save()
        let other = container.newContext()
        let reread = try XCTUnwrap(try other.existingObject(with: objects[1].objectID) as? TouchedSample)
        XCTAssertEqual(reread.real, 10)
        XCTAssertEqual(reread.text, "changed")

        // After a rollback, a change is tracked (and rolled back) again.
        objects[3].real = 3
        context.rollback()
        XCTAssertEqual(objects[3].real, 0)
        XCTAssertFalse(context.hasChanges)
        objects[3].real = 4
        XCTAssertEqual(context.updatedObjects.map(\.objectID), [objects[3].objectID])
        context.rollback()
        XCTAssertEqual(objects[3].real, 0)

        // After a reset, a change of an object fetched again is tracked.
        objects[0].real = 5
        context.reset()
        let again = try XCTUnwrap(try context.existingObject(with: objects[0].objectID) as? TouchedSample)
        again.real = 6
        XCTAssertTrue(context.hasChanges)
        try context.save()
        XCTAssertEqual(try XCTUnwrap(try container.newContext().existingObject(with: objects[0].objectID) as? TouchedSample).real, 6)
    }

    /// The objects-did-change batch lists each changed object once with
    /// every key that changed, and undo restores the first value.
    func testNotificationKeysAndUndoOfRepeatedChanges() throws {
        let container = try PersistentContainer.inMemory(model: model())
        let context = container.newContext()
        let s = TouchedSample(context: context)
        s.text = "a"; s.big = 1; s.real = 1
        try context.save()
        context.undoManager = ContextUndoManager()
        var seen: [(Int, Set<String>)] = []
        let token = context.observeObjectsDidChange { note in
            for o in note.updated { seen.append((Int(o.objectID.rowID), note.changedKeys(of: o))) }
        }
        s.real = 2
        s.real = 3
        s.big = 7
        context.processPendingChanges()
        XCTAssertEqual(seen.count, 1)
        XCTAssertEqual(seen.first?.1, ["real", "big"])
        context.undoLastChange()
        XCTAssertEqual(s.real, 1)
        XCTAssertEqual(s.big, 1)
        token.cancel()
    }
}
