import Foundation
import XCTest
import Kura

/// Seed 004 (na_ios) starts its store from a copy shipped in the app bundle;
/// issue 17 asks for it without ever replacing a store that exists.
final class StoreSeedTests: XCTestCase {
    func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Item") { AttributeDescription("name", .string) }
        }
    }

    func names(_ container: PersistentContainer) throws -> [String] {
        let c = container.newContext()
        return try c.fetch(FetchRequest<ManagedObject>(entityName: "Item", sortDescriptors: [SortKey("name")])).map { try $0.value(forKey: "name") as? String ?? "?" }
    }

    func testAMissingStoreStartsFromTheSeedAndAnExistingOneIsNeverReplaced() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("kura-seed-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }  // test cleanup: a leftover temp dir is harmless
        let seedURL = dir.appendingPathComponent("bundle/Seed.kura")
        do {
            let maker = try PersistentContainer(url: seedURL, model: model())
            try maker.save { c in
                for n in ["alpha", "beta"] { try c.insert("Item").setValue(n, forKey: "name") }
            }
            maker.close()
        }
        // A bundle's files are read-only: the store made from it must not be.
        try FileManager.default.setAttributes([.posixPermissions: 0o444], ofItemAtPath: seedURL.path)

        let storeURL = dir.appendingPathComponent("app/Store.kura")
        let first = try PersistentContainer(url: storeURL, model: model(), seed: seedURL)
        XCTAssertEqual(try names(first), ["alpha", "beta"])
        try first.save { c in try c.insert("Item").setValue("gamma", forKey: "name") }
        XCTAssertEqual(try names(first), ["alpha", "beta", "gamma"], "the seeded store is writable")
        first.close()

        let again = try PersistentContainer(url: storeURL, model: model(), seed: seedURL)
        XCTAssertEqual(try names(again), ["alpha", "beta", "gamma"], "an existing store is opened, not re-seeded")
        again.close()
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: storeURL.deletingLastPathComponent().path).filter { $0.contains(".seed-") }
        XCTAssertEqual(leftovers, [], "no temporary seed file stays behind")
    }

    /// A seed shipped with its log (not checkpointed) still gives every commit.
    func testASeedWithALogIsAppliedAndAMissingSeedIsAnError() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("kura-seed-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }  // test cleanup
        let seedURL = dir.appendingPathComponent("bundle/Seed.kura")
        var options = Database.Options()
        options.checkpointThreshold = 1_000_000  // keep the commit in the log
        let maker = try PersistentContainer(url: seedURL, model: model(), options: options)
        try maker.save { c in try c.insert("Item").setValue("in the log", forKey: "name") }
        let log = try FileManager.default.attributesOfItem(atPath: seedURL.path + "-wal")[.size] as? NSNumber
        XCTAssertGreaterThan(log?.intValue ?? 0, 0, "the commit is still in the seed's log")
        let storeURL = dir.appendingPathComponent("app/Store.kura")
        let store = try PersistentContainer(url: storeURL, model: model(), seed: seedURL)
        XCTAssertEqual(try names(store), ["in the log"])
        store.close()
        maker.close()
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: storeURL.deletingLastPathComponent().path).filter { $0.contains("seed") }
        XCTAssertEqual(leftovers, [])
        XCTAssertThrowsError(try PersistentContainer(url: dir.appendingPathComponent("other/Store.kura"), model: model(), seed: dir.appendingPathComponent("missing.kura"))) { error in
            XCTAssertEqual((error as? KuraError)?.code, .io)
        }
    }

    /// Processes opening a missing store at the same moment: the seed is put
    /// in place once and never replaced, so every child's row and the seed's
    /// row are there (a second seeding over the first would lose rows).
    func testProcessesRacingToSeedNeverReplaceEachOther() throws {
        guard let child = ConflictTests.childURL else { throw XCTSkip("KuraTestChild binary not found beside the test bundle") }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("kura-seed-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }  // test cleanup
        let seedURL = dir.appendingPathComponent("bundle/Seed.kura")
        let maker = try PersistentContainer(url: seedURL, model: ConflictTests.accountModel())
        try maker.save { c in try c.insert("Account").setValue("seed", forKey: "owner") }
        maker.close()
        let storeURL = dir.appendingPathComponent("app/Store.kura")
        let children = try (0..<4).map { _ -> Process in
            let p = Process()
            p.executableURL = child
            p.arguments = ["seed", storeURL.path, seedURL.path]
            try p.run()
            return p
        }
        for p in children {
            p.waitUntilExit()
            XCTAssertEqual(p.terminationStatus, 0)
        }
        let store = try PersistentContainer(url: storeURL, model: ConflictTests.accountModel())
        let c = store.newContext()
        let owners = try c.fetch(FetchRequest<ManagedObject>(entityName: "Account")).map { try $0.value(forKey: "owner") as? String ?? "?" }
        XCTAssertEqual(owners.filter { $0 == "seed" }.count, 1)
        XCTAssertEqual(owners.filter { $0.hasPrefix("child ") }.count, 4, "\(owners)")
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: storeURL.deletingLastPathComponent().path).filter { $0.contains("seed") }
        XCTAssertEqual(leftovers, [])
    }

    func testRegisteredObjectsAndClose() throws {
        let container = try PersistentContainer.inMemory(model: model())
        let context = container.newContext()
        let a = try context.insert("Item")
        XCTAssertEqual(context.registeredObjects, [a])
        try context.save()
        XCTAssertEqual(context.registeredObjects, [a])
        container.close()
        XCTAssertThrowsError(try context.fetch(FetchRequest<ManagedObject>(entityName: "Item"))) { error in
            XCTAssertEqual((error as? KuraError)?.code, .misuse)
        }
    }
}
