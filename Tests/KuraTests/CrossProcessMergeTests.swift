import Foundation
import XCTest
import Kura

/// Saves of another process reach auto-merging contexts (issue 11: "saves made
/// by another process on the same store are detected ... and merged the same
/// way"). The other process is Tests/KuraTestChild in `live` mode
/// (LiveWriter.swift); every wait is for a condition, with a timeout.
final class CrossProcessMergeTests: XCTestCase {
    /// The same model as Tests/KuraTestChild/LiveWriter.swift.
    static func itemModel() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Item") {
                AttributeDescription("title", .string)
                AttributeDescription("stamp", .double, default: 0.0)
            }
        }
    }

    @MainActor
    func testAnotherProcessSavesAreMergedFromTheHistoryWithLatency() async throws {
        let dir = try TempDir()
        let url = dir.url.appendingPathComponent("live.kura")
        let container = try PersistentContainer(url: url, model: Self.itemModel(), persistentHistoryTracking: true)
        XCTAssertFalse(container.isWatchingStore, "nothing watches the store before a context merges automatically")
        let view = container.viewContext
        let item = try view.insert("Item")
        try item.setValue("first", forKey: "title")
        try view.save()
        view.automaticallyMergesChangesFromStore = true
        XCTAssertTrue(container.isWatchingStore)
        let waiter = BatchWaiter(view, self)
        let child = try ChildWriter(store: url, mode: "history")

        // An update from the other process: refreshed, with exactly its keys.
        var latencies: [Double] = []
        for i in 0..<20 {
            let batch = try await waiter.next(matching: { $0.refreshed[item.objectID] != nil }) {
                XCTAssertEqual(try child.send("update \(item.objectID.uriRepresentation) title\(i)"), "ok")
            }
            XCTAssertEqual(batch.refreshed[item.objectID], ["title", "stamp"])
            XCTAssertEqual(try item.value(forKey: "title") as? String, "title\(i)", "the object holds the other process's value")
            let stamp = try XCTUnwrap(item.value(forKey: "stamp") as? Double)
            latencies.append(Date().timeIntervalSince1970 - stamp)
        }
        latencies.sort()
        print(String(format: "cross-process merge latency (child save to merged batch on the main actor, history): median %.2f ms, max %.2f ms over %d updates",
                     latencies[latencies.count / 2] * 1000, latencies[latencies.count - 1] * 1000, latencies.count))

        // An insert: reported inserted, registered in the view context.
        var insertedID: ManagedObjectID?
        let inserted = try await waiter.next(matching: { !$0.inserted.isEmpty }) {
            insertedID = try ManagedObjectID(uriRepresentation: try child.send("insert second"))
        }
        XCTAssertEqual(inserted.inserted, [try XCTUnwrap(insertedID)])
        let secondObject = try view.existingObject(with: try XCTUnwrap(insertedID))  // held, so its delete is reported
        XCTAssertEqual(try secondObject.value(forKey: "title") as? String, "second")

        // This process's own save is merged once (in process), not again from
        // the history: after the other process's next save has been merged,
        // the item was refreshed by exactly one batch in the view context,
        // and the saving context (auto-merging too) never hears of its own save.
        let other = container.newContext()
        other.automaticallyMergesChangesFromStore = true
        var otherBatches: [ObjectIDChanges] = []
        let otherToken = other.observeObjectsDidChange { otherBatches.append($0.ids) }
        let mine = try other.existingObject(with: item.objectID)
        try mine.setValue("renamed here", forKey: "title")
        try other.save()
        otherBatches.removeAll()  // its own edit, posted by the save
        let before = waiter.batches.count
        let second = try XCTUnwrap(insertedID)
        _ = try await waiter.next(matching: { $0.deleted.contains(second) }) {
            XCTAssertEqual(try child.send("delete \(second.uriRepresentation)"), "ok")
        }
        let refreshes = waiter.batches[before...].filter { $0.refreshed[item.objectID] != nil }
        XCTAssertEqual(refreshes.count, 1, "own save merged once: \(waiter.batches[before...])")
        try other.mergePendingChanges()
        XCTAssertEqual(otherBatches, [], "a context's own save does not come back from the history")
        _ = otherToken
        XCTAssertEqual(refreshes.first?.refreshed[item.objectID], ["title"])
        XCTAssertEqual(try item.value(forKey: "title") as? String, "renamed here")

        // The other process deletes the item: it leaves the view context.
        let deleted = try await waiter.next(matching: { $0.deleted.contains(item.objectID) }) {
            XCTAssertEqual(try child.send("delete \(item.objectID.uriRepresentation)"), "ok")
        }
        XCTAssertEqual(deleted.deleted, [item.objectID])
        XCTAssertNil(item.managedObjectContext)
        try child.finish()

        view.automaticallyMergesChangesFromStore = false
        XCTAssertTrue(container.isWatchingStore, "another context still merges automatically")
        other.automaticallyMergesChangesFromStore = false
        XCTAssertFalse(container.isWatchingStore, "the watch stops with the last auto-merging context")
    }

    @MainActor
    func testWithoutHistoryChangedObjectsAreRefreshedAndDeletedOnesEvicted() async throws {
        let dir = try TempDir()
        let url = dir.url.appendingPathComponent("plain.kura")
        let container = try PersistentContainer(url: url, model: Self.itemModel())
        let view = container.viewContext
        let a = try view.insert("Item"), b = try view.insert("Item")
        try a.setValue("a", forKey: "title")
        try b.setValue("b", forKey: "title")
        try view.save()
        view.automaticallyMergesChangesFromStore = true
        let waiter = BatchWaiter(view, self)
        let child = try ChildWriter(store: url, mode: "plain")

        var latencies: [Double] = []
        for i in 0..<10 {
            let batch = try await waiter.next(matching: { $0.refreshed[a.objectID] != nil }) {
                XCTAssertEqual(try child.send("update \(a.objectID.uriRepresentation) a\(i)"), "ok")
            }
            XCTAssertEqual(batch.refreshed[a.objectID], ["title", "stamp"], "the keys whose values differ")
            XCTAssertNil(batch.refreshed[b.objectID], "an object the other process did not change is not reported")
            XCTAssertEqual(try a.value(forKey: "title") as? String, "a\(i)")
            latencies.append(Date().timeIntervalSince1970 - (try XCTUnwrap(a.value(forKey: "stamp") as? Double)))
        }
        latencies.sort()
        print(String(format: "cross-process merge latency (no history, version re-check): median %.2f ms, max %.2f ms over %d updates",
                     latencies[latencies.count / 2] * 1000, latencies[latencies.count - 1] * 1000, latencies.count))

        let deleted = try await waiter.next(matching: { !$0.deleted.isEmpty }) {
            XCTAssertEqual(try child.send("delete \(b.objectID.uriRepresentation)"), "ok")
        }
        XCTAssertEqual(deleted.deleted, [b.objectID])
        XCTAssertNil(b.managedObjectContext)

        // Inserts cannot be named without history: the next fetch finds them.
        let id = try ManagedObjectID(uriRepresentation: try child.send("insert c"))
        try child.finish()
        let titles = try view.fetch(FetchRequest<ManagedObject>(entityName: "Item")).map(\.objectID)
        XCTAssertTrue(titles.contains(id))
    }
}

/// Collects a context's change batches on the main actor and waits for one
/// that matches (with a timeout; no pause when it has already come).
@MainActor
final class BatchWaiter {
    private(set) var batches: [ObjectIDChanges] = []
    private var waiting: ((ObjectIDChanges) -> Bool, XCTestExpectation)?
    private var token: ObservationToken?
    private let test: XCTestCase

    init(_ context: ManagedObjectContext, _ test: XCTestCase) {
        self.test = test
        token = context.observeObjectsDidChange { [unowned self] batch in
            let ids = batch.ids
            batches.append(ids)
            if let (condition, expectation) = waiting, condition(ids) {
                waiting = nil
                expectation.fulfill()
            }
        }
    }

    /// Runs `action`, then waits (up to 60 s) for a batch that satisfies
    /// `condition` and returns it.
    func next(matching condition: @escaping (ObjectIDChanges) -> Bool, after action: () throws -> Void) async throws -> ObjectIDChanges {
        let start = batches.count
        let expectation = test.expectation(description: "a matching change batch")
        waiting = (condition, expectation)
        try action()
        if let found = batches[start...].first(where: condition) {
            waiting = nil
            expectation.fulfill()
            return found
        }
        await test.fulfillment(of: [expectation], timeout: 60)
        return try XCTUnwrap(batches[start...].first(where: condition), "no matching batch came: \(batches[start...])")
    }
}

/// The child process in `live` mode, driven line by line.
final class ChildWriter {
    let process = Process()
    let input = Pipe()
    let output = Pipe()
    private var buffer: [UInt8] = []

    init(store: URL, mode: String) throws {
        guard let child = ConflictTests.childURL else { throw XCTSkip("KuraTestChild binary not found beside the test bundle") }
        process.executableURL = child
        process.arguments = ["live", store.path, mode]
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.standardError
        try process.run()
    }

    /// Sends one command and returns the child's answer (after its commit).
    func send(_ command: String) throws -> String {
        input.fileHandleForWriting.write((command + "\n").data(using: .utf8)!)
        while true {
            if let nl = buffer.firstIndex(of: 10) {
                let line = String(decoding: buffer[..<nl], as: UTF8.self)
                buffer.removeSubrange(...nl)
                return line
            }
            let data = output.fileHandleForReading.availableData
            if data.isEmpty { throw KuraError(.io, "the child exited before answering \(command)") }
            buffer += data
        }
    }

    /// Ends the input and waits for a clean exit.
    func finish() throws {
        try input.fileHandleForWriting.close()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, "child failed")
    }
}
