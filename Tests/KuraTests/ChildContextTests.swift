import Foundation
import XCTest
import Kura

/// Child contexts (issue 17: CoreDataBooks' add-book screen edits in a child
/// context and discards or pushes it; the port had no nested contexts).
final class ChildContextTests: XCTestCase {
    /// A saved company: Acme / R&D / Ann (salary 1), Project "Apollo" with no members.
    private func seeded() throws -> (PersistentContainer, ManagedObjectContext) {
        let container = try PersistentContainer.inMemory(model: companyModel())
        let parent = container.newContext()
        let acme = try parent.insert(Company.self)
        acme.name = "Acme"
        let rd = try parent.insert(Department.self)
        rd.name = "R&D"
        rd.company = acme
        let ann = try parent.insert(Employee.self)
        ann.name = "Ann"
        ann.salary = 1
        ann.department = rd
        let apollo = try parent.insert(Project.self)
        apollo.title = "Apollo"
        try parent.save()
        return (container, parent)
    }

    private func employees(_ c: ManagedObjectContext, _ format: String? = nil) throws -> [Employee] {
        var r = FetchRequest<Employee>(entityName: "Employee", sortDescriptors: [SortKey("name")])
        if let format { r.predicate = try KuraPredicate(format: format) }
        return try c.fetch(r)
    }

    private func storeNames(_ container: PersistentContainer) throws -> [String] {
        try employees(container.newContext()).map(\.name)
    }

    func testChildSavePushesIntoTheParentNotTheStore() throws {
        let (container, parent) = try seeded()
        let child = parent.newChildContext()
        XCTAssertTrue(child.parent === parent)
        let ann = try XCTUnwrap(try employees(child).first)
        let parentAnn = try XCTUnwrap(try employees(parent).first)
        XCTAssertFalse(ann === parentAnn, "each context has its own instance")
        XCTAssertEqual(ann.objectID, parentAnn.objectID)
        XCTAssertTrue(try child.object(with: ann.objectID) === ann, "uniqued per context")

        ann.salary = 10
        let bob = try child.insert(Employee.self)
        bob.name = "Bob"
        bob.department = ann.department
        XCTAssertFalse(parent.hasChanges)
        try child.save()
        XCTAssertFalse(child.hasChanges)

        // The parent holds the pushed changes as its own pending ones.
        XCTAssertTrue(parent.hasChanges)
        XCTAssertEqual(parentAnn.salary, 10)
        XCTAssertTrue(bob.objectID.isTemporary)
        let parentBob = try parent.object(with: bob.objectID) as? Employee
        XCTAssertEqual(parentBob?.name, "Bob")
        XCTAssertEqual(parentBob?.isInserted, true)
        XCTAssertEqual(try employees(parent).map(\.name), ["Ann", "Bob"])
        XCTAssertEqual(try parent.count(for: FetchRequest<Employee>(entityName: "Employee")), 2)
        XCTAssertEqual(parentAnn.department?.employees.map(\.name), ["Ann", "Bob"])
        XCTAssertEqual(parent.updatedObjects.map(\.objectID), [ann.objectID])
        // ...and nothing reached the store.
        XCTAssertEqual(try storeNames(container), ["Ann"])

        try parent.save()
        XCTAssertEqual(try storeNames(container), ["Ann", "Bob"])
        XCTAssertEqual(try employees(container.newContext()).first?.salary, 10)
        // Core Data's behaviour: the child's instance keeps its temporary ID.
        XCTAssertTrue(bob.objectID.isTemporary)
        XCTAssertEqual(parentBob?.objectID.isTemporary, false)
    }

    func testDiscardingAChildLeavesTheParentUntouched() throws {
        let (container, parent) = try seeded()
        do {
            let child = parent.newChildContext()
            let ann = try XCTUnwrap(try employees(child).first)
            ann.name = "Changed"
            try child.delete(try XCTUnwrap(ann.department))
            _ = try child.insert(Employee.self)
            XCTAssertTrue(child.hasChanges)
        }
        XCTAssertFalse(parent.hasChanges)
        XCTAssertEqual(try employees(parent).map(\.name), ["Ann"])
        let child = parent.newChildContext()
        try XCTUnwrap(try employees(child).first).name = "Changed"
        child.rollback()
        try child.save()
        XCTAssertFalse(parent.hasChanges)
        XCTAssertEqual(try storeNames(container), ["Ann"])
    }

    func testTheParentsPendingChangesAreWhatTheChildSees() throws {
        let (_, parent) = try seeded()
        let parentAnn = try XCTUnwrap(try employees(parent).first)
        parentAnn.name = "Anna"
        let cy = try parent.insert(Employee.self)
        cy.name = "Cy"
        cy.department = parentAnn.department
        let dora = try parent.insert(Employee.self)
        dora.name = "Dora"
        try parent.delete(dora)

        let child = parent.newChildContext()
        XCTAssertEqual(try employees(child).map(\.name), ["Anna", "Cy"])
        XCTAssertEqual(try employees(child, "name BEGINSWITH 'C'").map(\.objectID), [cy.objectID])
        XCTAssertEqual(try employees(child, "department.name == 'R&D'").map(\.name), ["Anna", "Cy"])
        XCTAssertEqual(try child.count(for: FetchRequest<Employee>(entityName: "Employee")), 2)
        let childCy = try XCTUnwrap(try child.existingObject(with: cy.objectID) as? Employee)
        XCTAssertFalse(childCy.isInserted, "inserted in the parent, not in the child")
        XCTAssertEqual(childCy.department?.name, "R&D")
        XCTAssertEqual(childCy.department?.employees.map(\.name), ["Anna", "Cy"])
        XCTAssertFalse(child.hasChanges)

        // The child's own changes on top of the parent's.
        childCy.name = "Cyd"
        XCTAssertEqual(try employees(child, "name BEGINSWITH 'C'").map(\.name), ["Cyd"])
        XCTAssertEqual(child.updatedObjects.count, 1)
        try child.save()
        XCTAssertEqual(cy.name, "Cyd")
        XCTAssertTrue(cy.isInserted)
        try parent.save()
        XCTAssertFalse(cy.objectID.isTemporary)
    }

    func testNestedTwoLevels() throws {
        let (container, parent) = try seeded()
        let child = parent.newChildContext()
        let grandchild = child.newChildContext()
        let eve = try grandchild.insert(Employee.self)
        eve.name = "Eve"
        let ann = try XCTUnwrap(try employees(grandchild).first)
        ann.level = 7
        eve.department = ann.department
        try grandchild.save()
        XCTAssertEqual(try employees(child).map(\.name), ["Ann", "Eve"])
        XCTAssertEqual(try employees(child).first?.level, 7)
        XCTAssertEqual(try employees(parent).map(\.name), ["Ann"])
        try child.save()
        XCTAssertEqual(try employees(parent).map(\.name), ["Ann", "Eve"])
        XCTAssertEqual(try employees(parent).first?.level, 7)
        XCTAssertEqual(try storeNames(container), ["Ann"])
        try parent.save()
        let reader = container.newContext()  // objects hold their context weakly
        let store = try employees(reader)
        XCTAssertEqual(store.map(\.name), ["Ann", "Eve"])
        XCTAssertEqual(store.first?.level, 7)
        XCTAssertEqual(store.last?.department?.name, "R&D")
    }

    func testObtainPermanentIDsBeforePushing() throws {
        let (container, parent) = try seeded()
        let child = parent.newChildContext()
        let fay = try child.insert(Employee.self)
        fay.name = "Fay"
        let gus = try child.insert(Employee.self)
        gus.name = "Gus"
        gus.department = try XCTUnwrap(try employees(child).first?.department)
        try child.obtainPermanentIDs(for: [fay, gus])
        XCTAssertFalse(fay.objectID.isTemporary)
        XCTAssertNotEqual(fay.objectID, gus.objectID)
        XCTAssertTrue(fay.isInserted, "a permanent ID does not make it saved")
        XCTAssertTrue(try child.object(with: gus.objectID) === gus)
        let id = gus.objectID
        try child.save()
        XCTAssertTrue(try parent.existingObject(with: id).isInserted)
        // Another insert does not take a reserved row ID.
        let hal = try parent.insert(Employee.self)
        hal.name = "Hal"
        try parent.save()
        XCTAssertEqual(gus.objectID, id, "the child's instance has the ID the store uses")
        let reader = container.newContext()  // objects hold their context weakly
        let stored = try XCTUnwrap(try reader.existingObject(with: id) as? Employee)
        XCTAssertEqual(stored.name, "Gus")
        XCTAssertEqual(stored.department?.name, "R&D")
        XCTAssertEqual(Set(try employees(container.newContext()).map(\.objectID)).count, 4)
        XCTAssertThrowsError(try child.obtainPermanentIDs(for: [hal])) { XCTAssertEqual(($0 as? KuraError)?.code, .invalidArgument) }
    }

    func testRelationshipsAndCascadesArePushedUp() throws {
        let (container, parent) = try seeded()
        let child = parent.newChildContext()
        let ann = try XCTUnwrap(try employees(child).first)
        let apollo = try XCTUnwrap(try child.fetch(FetchRequest<Project>(entityName: "Project")).first)
        let ivy = try child.insert(Employee.self)
        ivy.name = "Ivy"
        apollo.members = [ann, ivy]  // many-to-many, one saved and one new member
        try child.save()
        let parentApollo = try XCTUnwrap(try parent.fetch(FetchRequest<Project>(entityName: "Project")).first)
        XCTAssertEqual(parentApollo.members.map(\.name).sorted(), ["Ann", "Ivy"])
        XCTAssertEqual(try employees(parent).first?.projects.map(\.title), ["Apollo"])
        try parent.save()
        let store = container.newContext()
        XCTAssertEqual(try store.fetch(FetchRequest<Project>(entityName: "Project")).first?.members.map(\.name).sorted(), ["Ann", "Ivy"])

        // A cascade in the child: the department and its employees go.
        let child2 = parent.newChildContext()
        let rd = try XCTUnwrap(try child2.fetch(FetchRequest<Department>(entityName: "Department")).first)
        try child2.delete(rd)
        XCTAssertEqual(try employees(child2).map(\.name), ["Ivy"])
        try child2.save()
        XCTAssertEqual(try employees(parent).map(\.name), ["Ivy"])
        XCTAssertEqual(Set(parent.deletedObjects.map(\.entity.name)), ["Department", "Employee"])
        XCTAssertEqual(try parent.fetch(FetchRequest<Company>(entityName: "Company")).first?.departments.count, 0)
        try parent.save()
        XCTAssertEqual(try storeNames(container), ["Ivy"])
        XCTAssertEqual(try store.count(for: FetchRequest<Department>(entityName: "Department")), 0)
    }

    func testTheChildsChangesOverwriteOnlyThePropertiesItChanged() throws {
        let (_, parent) = try seeded()
        let child = parent.newChildContext()
        let ann = try XCTUnwrap(try employees(child).first)
        let parentAnn = try XCTUnwrap(try employees(parent).first)
        parentAnn.salary = 5  // changed in the parent after the child read it
        parentAnn.level = 3
        ann.salary = 7
        try child.save()
        XCTAssertEqual(parentAnn.salary, 7, "the child's value wins (Core Data's behaviour)")
        XCTAssertEqual(parentAnn.level, 3, "a property the child did not change keeps the parent's value")
    }

    func testValidationRunsAtTheStoreSaveAndNamesTheObject() throws {
        let (_, parent) = try seeded()
        let child = parent.newChildContext()
        let nameless = try child.insert(Employee.self)
        try child.save()  // no validation at a push, as in Core Data
        XCTAssertThrowsError(try parent.save()) { e in
            let error = e as? KuraError
            XCTAssertEqual(error?.code, .validation)
            XCTAssertTrue(error?.message.contains("\(nameless.objectID)") == true, error?.message ?? "")
            XCTAssertTrue(error?.message.contains("\"name\" is required") == true, error?.message ?? "")
        }
    }

    func testAChildUpdatingAnObjectTheParentDeletedFailsAndChangesNothing() throws {
        let (_, parent) = try seeded()
        let child = parent.newChildContext()
        let ann = try XCTUnwrap(try employees(child).first)
        let bob = try child.insert(Employee.self)
        bob.name = "Bob"
        try parent.delete(try XCTUnwrap(try employees(parent).first))
        ann.salary = 3
        XCTAssertThrowsError(try child.save()) { XCTAssertEqual(($0 as? KuraError)?.code, .notFound) }
        XCTAssertTrue(child.hasChanges)
        XCTAssertEqual(try employees(parent).map(\.name), [], "nothing was pushed")
    }

    func testUndoAndRedoInTheParentAfterAChildPush() throws {
        let (_, parent) = try seeded()
        let undo = ContextUndoManager()
        parent.undoManager = undo
        let parentAnn = try XCTUnwrap(try employees(parent).first)
        parentAnn.level = 2  // the parent's own group, before the push
        let child = parent.newChildContext()
        let ann = try XCTUnwrap(try employees(child).first)
        ann.salary = 50
        let apollo = try XCTUnwrap(try child.fetch(FetchRequest<Project>(entityName: "Project")).first)
        let lou = try child.insert(Employee.self)
        lou.name = "Lou"
        apollo.members = [ann, lou]
        try child.save()
        XCTAssertEqual(try employees(parent).map(\.name), ["Ann", "Lou"])

        parent.undoLastChange()  // the push, as one group
        XCTAssertEqual(try employees(parent).map(\.name), ["Ann"])
        XCTAssertEqual(parentAnn.salary, 1)
        XCTAssertEqual(parentAnn.level, 2, "the group before the push stays")
        XCTAssertEqual(try parent.fetch(FetchRequest<Project>(entityName: "Project")).first?.members.count, 0)
        parent.redoLastChange()
        XCTAssertEqual(try employees(parent).map(\.name), ["Ann", "Lou"])
        XCTAssertEqual(parentAnn.salary, 50)
        XCTAssertEqual(try parent.fetch(FetchRequest<Project>(entityName: "Project")).first?.members.map(\.name).sorted(), ["Ann", "Lou"])
        parent.undoLastChange()
        parent.undoLastChange()
        XCTAssertEqual(parentAnn.level, 1)
        XCTAssertEqual(parent.insertedObjects.count + parent.updatedObjects.count, 0)
    }

    func testNotificationsOfAPush() throws {
        let (container, parent) = try seeded()
        let child = parent.newChildContext()
        var childSaves: [ContextDidSave] = []
        var parentBatches: [ObjectIDChanges] = []
        var storeSaves = 0
        let t1 = child.observeDidSave { childSaves.append($0) }
        let t2 = parent.observeObjectsDidChange { parentBatches.append($0.ids) }
        let t3 = parent.observeDidSave { _ in storeSaves += 1 }
        defer { t1.cancel(); t2.cancel(); t3.cancel() }
        let ann = try XCTUnwrap(try employees(child).first)
        ann.salary = 9
        let kim = try child.insert(Employee.self)
        kim.name = "Kim"
        try child.save()
        XCTAssertEqual(childSaves.count, 1)
        XCTAssertEqual(childSaves.first?.inserted, [kim.objectID])
        XCTAssertEqual(childSaves.first?.updated[ann.objectID], ["salary"])
        XCTAssertEqual(storeSaves, 0)
        let pushed = parentBatches.last
        XCTAssertEqual(pushed?.inserted, [kim.objectID])
        XCTAssertEqual(pushed?.updated[ann.objectID], ["salary"])
        _ = container
    }
}
