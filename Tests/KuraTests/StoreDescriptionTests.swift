import Foundation
import XCTest
import Kura
import KuraEngine

/// Opening a container Core Data's way: a description, then
/// loadPersistentStores (issue 17: ports of Core Data stacks look for it).
final class StoreDescriptionTests: XCTestCase {
    func testLoadPersistentStoresOpensOnlyWhenCalled() throws {
        let dir = try TempDir()
        let url = dir.url.appendingPathComponent("app/Books.kura")
        let container = PersistentContainer(name: "Books", managedObjectModel: try ConflictTests.accountModel())
        XCTAssertEqual(container.persistentStoreDescriptions.first?.url, PersistentContainer.defaultStoreURL(name: "Books"))
        container.persistentStoreDescriptions = [StoreDescription(url: url)]
        XCTAssertFalse(container.isLoaded)
        XCTAssertFalse(FileManager.default.fileExists(atPath: url.path), "nothing is opened before loading")
        // A context made before loading fails with a clear error, never a crash.
        XCTAssertThrowsError(try container.newContext().count(for: FetchRequest<ManagedObject>(entityName: "Account"))) {
            XCTAssertEqual(($0 as? KuraError)?.code, .misuse)
            XCTAssertTrue("\($0)".contains("loadPersistentStores"), "\($0)")
        }

        var calls: [(StoreDescription, KuraError?)] = []
        container.loadPersistentStores { calls.append(($0, $1)) }
        XCTAssertEqual(calls.count, 1)
        XCTAssertEqual(calls.first?.0.url, url)
        XCTAssertNil(calls.first?.1)
        XCTAssertTrue(container.isLoaded)
        XCTAssertEqual(container.url, url)
        try container.save { c in try c.insert("Account").setValue("ann", forKey: "owner") }
        XCTAssertEqual(try container.newContext().count(for: FetchRequest<ManagedObject>(entityName: "Account")), 1)
        // Loading twice is refused.
        XCTAssertThrowsError(try container.loadPersistentStores()) { XCTAssertEqual(($0 as? KuraError)?.code, .misuse) }
        container.close()
    }

    func testInMemoryReadOnlyAndErrors() throws {
        let model = try ConflictTests.accountModel()
        let memory = PersistentContainer(name: "Scratch", managedObjectModel: model)
        memory.persistentStoreDescriptions = [StoreDescription.inMemory()]
        try memory.loadPersistentStores()
        XCTAssertNil(memory.url)
        try memory.save { c in try c.insert("Account").setValue("x", forKey: "owner") }

        let dir = try TempDir()
        let url = dir.url.appendingPathComponent("Ledger.kura")
        // A read-only store must exist: the error comes through the handler.
        let missing = PersistentContainer(name: "Ledger", managedObjectModel: model)
        var readOnly = StoreDescription(url: url)
        readOnly.isReadOnly = true
        missing.persistentStoreDescriptions = [readOnly]
        var failure: KuraError?
        missing.loadPersistentStores { _, e in failure = e }
        XCTAssertEqual(failure?.code, .notFound)
        XCTAssertFalse(FileManager.default.fileExists(atPath: url.path))
        XCTAssertFalse(missing.isLoaded)

        let writer = try PersistentContainer(url: url, model: model)
        try writer.save { c in try c.insert("Account").setValue("bea", forKey: "owner") }
        writer.close()

        let reader = PersistentContainer(name: "Ledger", managedObjectModel: model)
        reader.persistentStoreDescriptions = [readOnly]
        try reader.loadPersistentStores()
        XCTAssertTrue(reader.isReadOnly)
        let c = reader.newContext()
        let bea = try XCTUnwrap(try c.fetch(FetchRequest<ManagedObject>(entityName: "Account")).first)
        XCTAssertEqual(try bea.value(forKey: "owner") as? String, "bea")
        try bea.setValue("changed", forKey: "owner")
        XCTAssertThrowsError(try c.save()) { e in
            XCTAssertEqual((e as? KuraError)?.code, .readOnly)
            XCTAssertTrue("\(e)".contains("read-only"), "\(e)")
        }
        XCTAssertTrue(c.hasChanges, "a refused save keeps the changes")
        XCTAssertThrowsError(try c.obtainPermanentIDs(for: [try c.insert("Account")])) { XCTAssertEqual(($0 as? KuraError)?.code, .readOnly) }
        reader.close()
        let check = try PersistentContainer(url: url, model: model)
        XCTAssertEqual(try check.newContext().fetch(FetchRequest<ManagedObject>(entityName: "Account")).map { try $0.value(forKey: "owner") as? String }, ["bea"])
        check.close()

        // A read-only store that does not match the model is refused, unchanged.
        let other = try ManagedObjectModel { EntityDescription("Ledger") { AttributeDescription("total", .int64) } }
        let mismatched = PersistentContainer(name: "Ledger", managedObjectModel: other)
        mismatched.persistentStoreDescriptions = [readOnly]
        XCTAssertThrowsError(try mismatched.loadPersistentStores()) { XCTAssertEqual(($0 as? KuraError)?.code, .modelMismatch) }

        // One store per container.
        let two = PersistentContainer(name: "Two", managedObjectModel: model)
        two.persistentStoreDescriptions = [StoreDescription.inMemory(), StoreDescription.inMemory()]
        XCTAssertThrowsError(try two.loadPersistentStores()) { XCTAssertEqual(($0 as? KuraError)?.code, .invalidArgument) }
    }

    func testPerformAndWait() throws {
        let container = try PersistentContainer.inMemory(model: try ConflictTests.accountModel())
        let context = container.newContext()
        let n = try context.performAndWait { () throws(KuraError) -> Int in
            try context.insert("Account").setValue("a", forKey: "owner")
            try context.save()
            return try context.count(for: FetchRequest<ManagedObject>(entityName: "Account"))
        }
        XCTAssertEqual(n, 1)
        XCTAssertThrowsError(try context.performAndWait { () throws(KuraError) in _ = try context.insert("Nope") }) {
            XCTAssertEqual(($0 as? KuraError)?.code, .notFound)
        }

        // A background context: synchronous work on its own queue, from any thread.
        let background = container.newBackgroundContext()
        let count = try background.performAndWait { c throws(KuraError) -> Int in
            try c.insert("Account").setValue("b", forKey: "owner")
            try c.save()
            return try c.count(for: FetchRequest<ManagedObject>(entityName: "Account"))
        }
        XCTAssertEqual(count, 2)
        let fromThreads = Locked<[Int]>([])
        DispatchQueue.concurrentPerform(iterations: 4) { i in
            do {
                let n = try background.performAndWait { c throws(KuraError) -> Int in
                    try c.insert("Account").setValue("t\(i)", forKey: "owner")
                    try c.save()
                    return try c.count(for: FetchRequest<ManagedObject>(entityName: "Account"))
                }
                fromThreads.mutate { $0.append(n) }
            } catch { XCTFail("\(error)") }
        }
        XCTAssertEqual(fromThreads.value.sorted(), [3, 4, 5, 6], "one call at a time on the context")
    }

    func testPerformAndWaitInsidePerformRunsAtOnce() async throws {
        let container = try PersistentContainer.inMemory(model: try ConflictTests.accountModel())
        let background = container.newBackgroundContext()
        let n = try await background.perform { c throws(KuraError) -> Int in
            try c.insert("Account").setValue("a", forKey: "owner")
            // Reentrant: the same queue, no deadlock, the same context (its
            // save stores the insert made outside).
            return try background.performAndWait { inner throws(KuraError) -> Int in
                try inner.save()
                return try inner.count(for: FetchRequest<ManagedObject>(entityName: "Account"))
            }
        }
        XCTAssertEqual(n, 1)
    }
}
