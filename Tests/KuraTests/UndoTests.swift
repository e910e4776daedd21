import Foundation
import XCTest
import Kura

/// Undo and redo of a context's changes (issue 17: CoreDataBooks' edit screen
/// undoes; the port carried a hand-written undo stack).
final class UndoTests: XCTestCase {
    func testAttributeRelationshipInsertAndCascadeChangesUndoAndRedo() throws {
        let container = try PersistentContainer.inMemory(model: companyModel())
        let context = container.newContext()
        let acme = try context.insert(Company.self)
        acme.name = "Acme"
        let sales = try context.insert(Department.self)
        sales.name = "Sales"
        sales.company = acme
        let ann = try context.insert(Employee.self)
        ann.name = "Ann"
        ann.department = sales
        try context.save()

        let undo = ContextUndoManager()
        context.undoManager = undo
        XCTAssertFalse(undo.canUndo)

        // Group 1: an attribute and a relationship change.
        ann.salary = 5000
        ann.department = nil
        context.processPendingChanges()
        // Group 2: an insert with a relationship, as one explicit group.
        undo.beginUndoGrouping()
        let bob = try context.insert(Employee.self)
        bob.name = "Bob"
        bob.department = sales
        try undo.endUndoGrouping()
        // Group 3: a cascade delete.
        try context.delete(acme)
        context.processPendingChanges()
        XCTAssertTrue(sales.isDeleted)

        context.undoLastChange()  // group 3
        XCTAssertFalse(acme.isDeleted)
        XCTAssertFalse(sales.isDeleted, "the cascade is undone with the delete")
        XCTAssertTrue(sales.company === acme)
        context.undoLastChange()  // group 2
        XCTAssertNil(bob.managedObjectContext, "the undone insert left the context")
        XCTAssertEqual(sales.employees.map(\.name), [], "Ann left Sales in group 1, Bob's insert is undone")
        context.undoLastChange()  // group 1
        XCTAssertEqual(ann.salary, 0)
        XCTAssertTrue(ann.department === sales)
        XCTAssertFalse(context.hasChanges, "undoing everything returns to the saved state")
        XCTAssertFalse(undo.canUndo)

        context.redoLastChange()  // group 1 again
        XCTAssertEqual(ann.salary, 5000)
        XCTAssertNil(ann.department)
        context.redoLastChange()  // group 2 again
        XCTAssertTrue(bob.managedObjectContext === context)
        XCTAssertTrue(bob.department === sales)
        XCTAssertTrue(undo.canRedo)
        try context.save()
        let reader = container.newContext()  // kept: objects hold their context weakly
        let stored = try reader.fetch(FetchRequest<Employee>(entityName: "Employee", sortDescriptors: [SortKey("name")]))
        XCTAssertEqual(stored.map(\.name), ["Ann", "Bob"])
        XCTAssertEqual(stored.map(\.salary), [5000, 0])
        XCTAssertEqual(stored.map { $0.department?.name }, [nil, "Sales"])
    }

    func testManyToManyLevelsDisableAndNewChangesClearRedo() throws {
        let container = try PersistentContainer.inMemory(model: companyModel())
        let context = container.newContext()
        let p = try context.insert(Project.self)
        p.title = "P"
        let e = try context.insert(Employee.self)
        e.name = "E"
        try context.save()
        let undo = ContextUndoManager()
        undo.levelsOfUndo = 2
        context.undoManager = undo

        try p.add(e, to: "members")
        context.processPendingChanges()
        XCTAssertEqual(p.members.map(\.name), ["E"])
        context.undoLastChange()
        XCTAssertEqual(p.members.map(\.name), [], "a many-to-many edit undoes")
        context.redoLastChange()
        XCTAssertEqual(p.members.map(\.name), ["E"])

        for i in 1...4 {
            p.title = "P\(i)"
            context.processPendingChanges()
        }
        XCTAssertFalse(undo.canRedo, "a new change clears the redo stack")
        context.undoLastChange()
        context.undoLastChange()
        context.undoLastChange()  // beyond the two levels kept: nothing
        XCTAssertEqual(p.title, "P2")

        undo.disableUndoRegistration()
        p.title = "unrecorded"
        undo.enableUndoRegistration()
        context.processPendingChanges()
        XCTAssertFalse(undo.canUndo)
        XCTAssertThrowsError(try undo.endUndoGrouping()) { XCTAssertEqual(($0 as? KuraError)?.code, .misuse) }
    }

    func testUndoingEveryJoinEditLeavesNoChanges() throws {
        // Guards the bug where undoing a join edit left an empty per-table
        // dictionary in the pending join edits (and positions), so
        // `hasChanges` stayed true after everything was undone.
        let container = try PersistentContainer.inMemory(model: companyModel())
        let context = container.newContext()
        context.undoManager = ContextUndoManager()
        let p = try context.insert(Project.self)
        p.title = "P"
        let e = try context.insert(Employee.self)
        e.name = "E"
        context.processPendingChanges()
        try p.add(e, to: "members")
        context.processPendingChanges()
        context.undoLastChange()
        XCTAssertEqual(p.members.map(\.name), [])
        context.undoLastChange()
        XCTAssertFalse(context.hasChanges, "insert, relate, undo all: nothing left")
        context.redoLastChange()
        context.redoLastChange()
        XCTAssertEqual(p.members.map(\.name), ["E"])

        // Ordered join tables: the pending positions too.
        let ordered = try PersistentContainer.inMemory(model: try OrderedRelationshipTests.model())
        let c = ordered.newContext()
        let list = try c.insert("Playlist")
        let songs = try (0..<3).map { i -> ManagedObject in
            let s = try c.insert("Song")
            try s.setValue("s\(i)", forKey: "title")
            return s
        }
        try list.setValue(songs, forKey: "songs")
        try c.save()
        c.undoManager = ContextUndoManager()
        try list.moveObject(at: 2, to: 0, in: "songs")
        try list.remove(songs[1], from: "songs")
        XCTAssertTrue(c.hasChanges)
        c.undoLastChange()
        XCTAssertFalse(c.hasChanges, "a reorder and a removal undone: nothing left")
        XCTAssertEqual(try XCTUnwrap(list.value(forKey: "songs") as? ObjectList).map { $0["title"] as? String }, ["s0", "s1", "s2"])
    }

    func testUndoAndRedoRestoreTransientRelationshipLinks() throws {
        // Guards the bug where undo recorded a transient relationship change as
        // a to-one key (always nil) and so left the links as they were.
        let container = try PersistentContainer.inMemory(model: try TransientRelationshipTests.model())
        let context = container.newContext()
        let m = try context.insert("Message"), a = try context.insert("Client"), b = try context.insert("Client")
        try a.setValue("a", forKey: "name")
        try b.setValue("b", forKey: "name")
        try context.save()
        context.undoManager = ContextUndoManager()
        func names(_ o: ManagedObject, _ key: String) throws -> [String] {
            try XCTUnwrap(o.value(forKey: key) as? ObjectList).map { $0["name"] as? String ?? "m" }
        }
        try m.setValue([b, a], forKey: "missingRecipients")
        try m.setValue(a, forKey: "draftOf")
        context.processPendingChanges()
        try m.setValue(b, forKey: "draftOf")
        try m.remove(b, from: "missingRecipients")
        context.processPendingChanges()
        XCTAssertEqual(try names(m, "missingRecipients"), ["a"])
        context.undoLastChange()
        XCTAssertEqual(try names(m, "missingRecipients"), ["b", "a"])
        XCTAssertEqual(try names(b, "messagesMissingRecipient"), ["m"], "the inverse side too")
        XCTAssertTrue(try m.value(forKey: "draftOf") as? ManagedObject === a)
        XCTAssertNil(try b.value(forKey: "draft"))
        context.undoLastChange()
        XCTAssertEqual(try names(m, "missingRecipients"), [])
        XCTAssertEqual(try names(a, "messagesMissingRecipient"), [])
        XCTAssertNil(try a.value(forKey: "draft"))
        context.redoLastChange()
        XCTAssertEqual(try names(a, "messagesMissingRecipient"), ["m"])
        XCTAssertTrue(try a.value(forKey: "draft") as? ManagedObject === m)

        // Rollback keeps the links of objects that stay (transients have no
        // saved state); links to a rolled-back insert read as gone.
        let c = try context.insert("Client")
        try m.add(c, to: "missingRecipients")
        context.rollback()
        XCTAssertEqual(try names(m, "missingRecipients"), ["b", "a"])
    }

    func testUndoAfterObtainPermanentIDsRestoresTheRenamedJoinEdits() throws {
        // Guards the bug where obtainPermanentIDs renamed the pending join
        // edits but not the undo manager's recorded ones: undoing a relate
        // made before the rename cleared a pair under the temporary IDs and
        // left the real one in place.
        let container = try PersistentContainer.inMemory(model: try OrderedRelationshipTests.model())
        let context = container.newContext()
        context.undoManager = ContextUndoManager()
        let p = try context.insert("Playlist"), s = try context.insert("Song")
        try p.setValue("p", forKey: "name")
        try s.setValue("s", forKey: "title")
        context.processPendingChanges()
        try p.add(s, to: "songs")
        context.processPendingChanges()
        try context.obtainPermanentIDs(for: [p, s])
        context.undoLastChange()
        XCTAssertEqual(try XCTUnwrap(p.value(forKey: "songs") as? ObjectList).count, 0)
        XCTAssertEqual(try XCTUnwrap(s.value(forKey: "playlists") as? ObjectList).count, 0)
        context.redoLastChange()
        try context.save()
        let fresh = container.newContext()
        let stored = try fresh.existingObject(with: p.objectID)
        XCTAssertEqual(try XCTUnwrap(stored.value(forKey: "songs") as? ObjectList).map { $0["title"] as? String }, ["s"])
    }
}
