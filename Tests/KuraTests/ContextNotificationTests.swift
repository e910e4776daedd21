import Foundation
import XCTest
import Kura

/// Change notifications and merging between contexts (issue 11: "a context that
/// loaded an object keeps its old values after another context saved new ones").
final class ContextNotificationTests: XCTestCase {
    func makeContainer() throws -> PersistentContainer {
        try PersistentContainer.inMemory(model: companyModel())
    }

    func testObjectsDidChangeReportsInsertsUpdatesWithKeysAndDeletes() throws {
        let container = try makeContainer()
        let context = container.newContext()
        var batches: [ContextObjectsDidChange] = []
        let token = context.observeObjectsDidChange { batches.append($0) }

        let acme = try context.insert(Company.self)
        acme.name = "Acme"
        let sales = try context.insert(Department.self)
        sales.name = "Sales"
        context.processPendingChanges()
        XCTAssertEqual(batches.count, 1)
        XCTAssertEqual(Set(batches[0].inserted.map(ObjectIdentifier.init)), [ObjectIdentifier(acme), ObjectIdentifier(sales)])
        XCTAssertTrue(batches[0].updated.isEmpty, "edits of objects inserted in the same batch are part of the insert")
        try context.save()
        XCTAssertEqual(batches.count, 1, "a save with nothing new to report posts no batch")

        // Updates carry their keys; a relationship edit updates both sides.
        sales.name = "Sales EU"
        sales.company = acme
        context.processPendingChanges()
        XCTAssertEqual(batches.count, 2)
        XCTAssertEqual(batches[1].updated.map(ObjectIdentifier.init).sorted(by: { "\($0)" < "\($1)" }),
                       [ObjectIdentifier(sales), ObjectIdentifier(acme)].sorted(by: { "\($0)" < "\($1)" }))
        XCTAssertEqual(batches[1].changedKeys(of: sales), ["name", "company"])
        XCTAssertEqual(batches[1].changedKeys(of: acme), ["departments"])
        XCTAssertEqual(batches[1].ids.updated[sales.objectID], ["name", "company"])

        // Inserted-then-deleted within one batch is never reported.
        let temp = try context.insert(Company.self)
        temp.name = "Temp"
        try context.delete(temp)
        context.processPendingChanges()
        XCTAssertEqual(batches.count, 2)

        // A delete wins over an update in the same batch; the cascade is reported.
        acme.name = "Acme 2"
        try context.delete(acme)
        try context.save()  // processes the batch first
        XCTAssertEqual(batches.count, 3)
        XCTAssertEqual(Set(batches[2].deleted.map(ObjectIdentifier.init)), [ObjectIdentifier(acme), ObjectIdentifier(sales)])
        XCTAssertTrue(batches[2].updated.isEmpty)

        token.cancel()
        let other = try context.insert(Company.self)
        other.name = "Other"
        context.processPendingChanges()
        XCTAssertEqual(batches.count, 3, "a cancelled observer hears nothing")
    }

    func testDidSaveCarriesPermanentIDsAndKeysToContextAndContainerObservers() throws {
        let container = try makeContainer()
        let context = container.newContext()
        context.name = "editor"
        var local: [ContextDidSave] = []
        let token = context.observeDidSave { local.append($0) }
        let global = Locked<[ContextDidSave]>([])
        let observation = container.observeSaves { note in global.mutate { $0.append(note) } }

        let acme = try context.insert(Company.self)
        acme.name = "Acme"
        try context.save()
        XCTAssertEqual(local.count, 1)
        XCTAssertEqual(local[0].inserted, [acme.objectID])
        XCTAssertFalse(acme.objectID.isTemporary)
        XCTAssertEqual(local[0].contextName, "editor")
        XCTAssertEqual(global.value, local)

        acme.name = "Acme Inc"
        try context.save()
        XCTAssertEqual(local.last?.updated, [acme.objectID: ["name"]])
        try context.delete(acme)
        try context.save()
        XCTAssertEqual(local.last?.deleted, [acme.objectID])
        XCTAssertEqual(global.value.count, 3)
        try context.save()
        XCTAssertEqual(local.count, 3, "a save without changes posts nothing")
        _ = token
        observation.cancel()
    }

    func testMergeRefreshesUpdatesRemovesDeletesAndReportsInserts() throws {
        let container = try makeContainer()
        let writer = container.newContext()
        let acme = try writer.insert(Company.self)
        acme.name = "Acme"
        let gone = try writer.insert(Company.self)
        gone.name = "Gone"
        try writer.save()

        let reader = container.newContext()
        let readAcme = try XCTUnwrap(reader.existingObject(with: acme.objectID) as? Company)
        let readGone = try reader.existingObject(with: gone.objectID)
        XCTAssertEqual(readAcme.name, "Acme")
        var batches: [ContextObjectsDidChange] = []
        let token = reader.observeObjectsDidChange { batches.append($0) }

        var notes: [ContextDidSave] = []
        let t2 = writer.observeDidSave { notes.append($0) }
        acme.name = "Acme 2"
        try writer.delete(gone)
        let fresh = try writer.insert(Company.self)
        fresh.name = "Fresh"
        try writer.save()
        XCTAssertEqual(notes.count, 1)

        try reader.mergeChanges(fromContextDidSave: notes[0])
        XCTAssertEqual(readAcme.name, "Acme 2", "the merged object shows the other context's save")
        XCTAssertTrue(readGone.isDeleted)
        XCTAssertNil(readGone.managedObjectContext, "a deleted object leaves the merging context")
        XCTAssertEqual(batches.count, 1)
        XCTAssertEqual(batches[0].refreshed.map(\.objectID), [acme.objectID])
        XCTAssertEqual(batches[0].changedKeys(of: readAcme), ["name"])
        XCTAssertEqual(batches[0].deleted.map(\.objectID), [gone.objectID])
        XCTAssertEqual(batches[0].inserted.map(\.objectID), [fresh.objectID])
        XCTAssertEqual(try batches[0].inserted.first?.value(forKey: "name") as? String, "Fresh")
        _ = (token, t2)
    }

    /// The merge policy decides what happens to an object with pending changes
    /// that another context updated.
    func testMergeKeepsPendingChangesByPolicy() throws {
        for policy in MergePolicy.allCases {
            let container = try makeContainer()
            let writer = container.newContext()
            let e = try writer.insert(Employee.self)
            e.name = "Ann"
            e.salary = 100
            e.level = 1
            try writer.save()

            let reader = container.newContext()
            reader.mergePolicy = policy
            let mine = try XCTUnwrap(reader.existingObject(with: e.objectID) as? Employee)
            mine.salary = 200   // changed only here
            mine.level = 5      // changed here and there
            var notes: [ContextDidSave] = []
            let t = writer.observeDidSave { notes.append($0) }
            e.level = 9
            e.name = "Ann B"    // changed only there
            try writer.save()
            try reader.mergeChanges(fromContextDidSave: notes[0])
            _ = t

            switch policy {
            case .error:
                XCTAssertEqual(mine.name, "Ann", "\(policy): untouched until the save reports the conflict")
                XCTAssertThrowsError(try reader.save()) { XCTAssertEqual(($0 as? KuraError)?.code, .mergeConflict) }
            case .mergeByPropertyObjectTrump, .overwrite:
                XCTAssertEqual([mine.name, "\(mine.salary)", "\(mine.level)"], ["Ann B", "200.0", "5"], "\(policy)")
                try reader.save()
            case .mergeByPropertyStoreTrump:
                XCTAssertEqual([mine.name, "\(mine.salary)", "\(mine.level)"], ["Ann B", "200.0", "9"], "\(policy)")
                try reader.save()
            case .rollback:
                XCTAssertEqual([mine.name, "\(mine.salary)", "\(mine.level)"], ["Ann B", "100.0", "9"], "\(policy)")
                XCTAssertFalse(reader.hasChanges)
            }
        }
    }

    func testAutomaticMergingHappensAtTheNextFetchAndPosts() throws {
        let container = try makeContainer()
        let main = container.newContext()
        main.automaticallyMergesChangesFromStore = true
        var batches: [ObjectIDChanges] = []
        let token = main.observeObjectsDidChange { batches.append($0.ids) }

        let request = FetchRequest<Company>(entityName: "Company")
        XCTAssertEqual(try main.fetch(request).count, 0)
        let done = expectation(description: "background save")
        let id = Locked<ManagedObjectID?>(nil)
        Thread.detachNewThread {
            do {
                let bg = container.newContext()
                let c = try bg.insert(Company.self)
                c.name = "From the background"
                try bg.save()
                id.mutate { $0 = c.objectID }
            } catch { XCTFail("\(error)") }
            done.fulfill()
        }
        wait(for: [done], timeout: 30)
        XCTAssertTrue(batches.isEmpty, "nothing is merged until the context is used on its own thread")
        let companies = try main.fetch(request)
        XCTAssertEqual(companies.map(\.name), ["From the background"])
        XCTAssertEqual(batches.count, 1)
        XCTAssertEqual(batches.first?.inserted, [try XCTUnwrap(id.value)])

        // Own saves are not merged back.
        companies[0].name = "Renamed here"
        try main.save()
        XCTAssertEqual(batches.count, 2)
        XCTAssertEqual(batches[1].updated, [companies[0].objectID: ["name"]], "the save posts the context's own edit")
        try main.mergePendingChanges()
        XCTAssertEqual(batches.count, 2, "the context's own save does not come back as a merge")
        _ = token
    }

    func testRollbackAndResetAreReported() throws {
        let container = try makeContainer()
        let context = container.newContext()
        let acme = try context.insert(Company.self)
        acme.name = "Acme"
        try context.save()
        var batches: [ContextObjectsDidChange] = []
        let token = context.observeObjectsDidChange { batches.append($0) }
        acme.name = "Changed"
        let temp = try context.insert(Company.self)
        temp.name = "Temp"
        context.processPendingChanges()
        context.rollback()
        context.processPendingChanges()
        XCTAssertEqual(batches.count, 2)
        XCTAssertEqual(batches[1].deleted.map(ObjectIdentifier.init), [ObjectIdentifier(temp)])
        XCTAssertEqual(batches[1].refreshed.map(ObjectIdentifier.init), [ObjectIdentifier(acme)])
        XCTAssertEqual(batches[1].changedKeys(of: acme), ["name"])
        context.reset()
        context.processPendingChanges()
        XCTAssertEqual(batches.count, 3)
        XCTAssertTrue(batches[2].invalidatedAll)
        _ = token
    }

    func testAsyncSequencesDeliverEveryBatchAndSave() async throws {
        let container = try makeContainer()
        let saves = container.saves()
        let task = Task { () -> [ContextDidSave] in
            var out: [ContextDidSave] = []
            for await note in saves {
                out.append(note)
                if out.count == 2 { break }
            }
            return out
        }
        try await container.performBackgroundTask { context in
            let c = try context.insert(Company.self)
            c.name = "One"
            try context.save()
            c.name = "Two"
            try context.save()
        }
        let received = await task.value
        XCTAssertEqual(received.count, 2)
        XCTAssertEqual(received[0].inserted.count, 1)
        XCTAssertEqual(received[1].updated.values.first, ["name"])
    }
}
