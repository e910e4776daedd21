import XCTest
@testable import Kura

// Guards the first willSave pass's shortcut (issue 15: save settles the
// common case, where no hook changed anything, by comparing the pending
// objects in order instead of through a dictionary): a hook that inserts an
// object or changes another object already called must still send that
// object through willSave in a further pass, and its change must be saved.

/// Inserts one `Ledger` line the first time an object named "first" is
/// saved, and once changes `other` (set by the test).
final class Booker: ManagedObject {
    @Managed("name") var name: String
    nonisolated(unsafe) static var calls: [String] = []
    nonisolated(unsafe) static var insertedLedger = false
    var other: Booker?

    override func willSave() {
        Self.calls.append(name)
        if let o = other {
            other = nil
            o.name += "+"
        }
        if name == "first", !Self.insertedLedger, let ctx = managedObjectContext {
            Self.insertedLedger = true
            // Test model: inserting a concrete entity of this context's model cannot fail.
            let line = try? ctx.insert(Ledger.self)
            line?.note = "made by first"
        }
    }
}

final class Ledger: ManagedObject {
    @Managed("note") var note: String
    nonisolated(unsafe) static var calls = 0
    override func willSave() { Self.calls += 1 }
}

final class WillSavePassTests: XCTestCase {
    func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Booker", class: Booker.self) {
                AttributeDescription("name", .string, default: "")
            }
            EntityDescription("Ledger", class: Ledger.self) {
                AttributeDescription("note", .string, default: "")
            }
        }
    }

    func testHookInsertingOrChangingAnotherObjectRunsAnotherPass() throws {
        Booker.calls = []
        Booker.insertedLedger = false
        Ledger.calls = 0
        let container = try PersistentContainer.inMemory(model: model())
        let context = container.newContext()
        let a = try context.insert(Booker.self)
        a.name = "first"
        let b = try context.insert(Booker.self)
        b.name = "second"
        // a's hook changes b before b's call and inserts a Ledger; b's hook
        // then changes a, which was already called: a and the Ledger are due.
        a.other = b
        b.other = a
        try context.save()
        XCTAssertEqual(Booker.calls, ["first", "second+", "first+"])
        XCTAssertEqual(Ledger.calls, 1, "the object a hook inserted went through willSave")
        let fresh = container.newContext()
        XCTAssertEqual(try fresh.fetch(FetchRequest<Ledger>(entityName: "Ledger")).map(\.note), ["made by first"], "the inserted object is part of the same save")
        XCTAssertEqual(try fresh.fetch(FetchRequest<Booker>(entityName: "Booker", sortDescriptors: [SortKey("name")])).map(\.name), ["first+", "second+"])

        // Same set of objects after the first pass (no insert): the change
        // b's hook made to a alone sends a through another pass.
        Booker.calls = []
        a.name = "a"
        b.name = "b"
        b.other = a
        try context.save()
        XCTAssertEqual(Booker.calls, ["a", "b", "a+"])
        XCTAssertEqual(try container.newContext().fetch(FetchRequest<Booker>(entityName: "Booker", sortDescriptors: [SortKey("name")])).map(\.name), ["a+", "b"])
        XCTAssertFalse(context.hasChanges)
    }

    // Guards the save's version check, which decodes only the stored row's
    // version column when it matches (issue 15): a row changed or deleted
    // elsewhere since this context read it is still a conflict.
    func testVersionCheckStillSeesRowsChangedOrDeletedElsewhere() throws {
        let container = try PersistentContainer.inMemory(model: model())
        let setup = container.newContext()
        for n in ["x", "y", "z"] { try setup.insert(Booker.self).name = n }
        try setup.save()
        let mine = container.newContext()
        let objects = try mine.fetch(FetchRequest<Booker>(entityName: "Booker", sortDescriptors: [SortKey("name")]))
        let theirs = container.newContext()
        let theirObjects = try theirs.fetch(FetchRequest<Booker>(entityName: "Booker", sortDescriptors: [SortKey("name")]))
        theirObjects[0].name = "x2"
        try theirs.delete(theirObjects[1])
        try theirs.save()
        for o in objects { o.name += "!" }
        XCTAssertThrowsError(try mine.save()) { error in
            XCTAssertEqual((error as? KuraError)?.code, .mergeConflict)
        }
        XCTAssertEqual(Set(mine.lastMergeConflicts.map(\.objectID)), [objects[0].objectID, objects[1].objectID])
        XCTAssertEqual(mine.lastMergeConflicts.first { $0.objectID == objects[1].objectID }?.deletedInStore, true)
        // The unchanged row saves alone once the others are settled.
        try mine.refresh(objects[0], mergeChanges: false)
        mine.rollback()
        objects[2].name = "z!"
        try mine.save()
        let check = container.newContext()
        let names = try check.fetch(FetchRequest<Booker>(entityName: "Booker", sortDescriptors: [SortKey("name")])).map(\.name)
        XCTAssertEqual(names, ["x2", "z!"])
    }
}
