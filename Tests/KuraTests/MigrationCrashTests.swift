// A migration under power loss (RELIABILITY.md, "Power loss"; the engine's
// crash matrix, ReliabilityCrashMatrixTests): a store written with model v1
// is migrated to v2 (a column added, one renamed and converted int32 →
// string with its index rebuilt, one retired, the model record rewritten) on
// a FaultInjectingFileSystem whose mutation hook stops before each write,
// sync and truncate. At sampled points it takes power-loss images (unsynced
// writes dropped, reordered, torn) and checks each recovers to exactly the
// old store or exactly the migrated one, passes the integrity check, and that
// an old one can still be migrated. The default run checks every point (or a
// sample of 40 if there are more than 60) with 2 image seeds; KURA_LONG=1
// checks every point with 4. KURA_SEED=N picks another sample and the image
// seeds; the seed is printed. A second run migrates v1 to v3, where Item
// gains a parent entity: every object moves from table Item into the new
// table Base (RowMover.swift), and Item is dropped.

import Foundation
import XCTest
import Kura
import KuraEngine

final class MigrationCrashTests: XCTestCase {
    static let long = ProcessInfo.processInfo.environment["KURA_LONG"] == "1"
    let path = "/migrate.kura"

    static let v1 = try! ManagedObjectModel {
        EntityDescription("Item") {
            AttributeDescription("n", .int64)
            AttributeDescription("code", .int32, indexed: true)
            AttributeDescription("note", .string)
        }
    }
    static let v2 = try! ManagedObjectModel {
        EntityDescription("Item", attributes: [
            AttributeDescription("n", .int64),
            AttributeDescription("label", .string, indexed: true, renamingIdentifier: "code"),
            AttributeDescription("extra", .double),
        ], relationships: [])
    }

    static let v3 = try! ManagedObjectModel([
        EntityDescription("Base", attributes: [AttributeDescription("n", .int64)], relationships: []),
        EntityDescription("Item", parent: "Base", attributes: [
            AttributeDescription("code", .int32, indexed: true),
            AttributeDescription("note", .string),
        ], relationships: []),
    ])

    func options(_ fs: any FileSystem) -> Database.Options {
        var o = Database.Options()
        o.fileSystem = fs
        o.pageSize = 1024
        return o
    }

    /// The store's contents as text: schema, rows (defaults filled), recorded hash.
    static func state(_ db: Database) throws -> String {
        try db.read { tx in
            var s = ""
            for name in ["Item", "Base"] where try tx.tableExists(name) {
                let t = try tx.table(name)
                s += name + ": " + (try tx.schema(of: t)?.columns.map(\.name) ?? []).joined(separator: ",") + "\n"
                let rows = try tx.rows(in: t)
                while let row = try rows.next() { s += "\(row.rowID): \(try tx.values(in: t, rowID: row.rowID) ?? [])\n" }
                s += "indexes " + (try tx.indexes(of: name).map(\.name).sorted().joined(separator: ",")) + "\n"
            }
            let m = try tx.table("_kura_model")
            let mr = try tx.rows(in: m)
            while let row = try mr.next() { if case .text("model") = try row.values()[2] { s += "model \(try row.values()[7])\n" } }
            return s
        }
    }

    func testAMigrationInterruptedByPowerLossLeavesTheOldStoreOrTheNewOne() throws {
        try matrix(to: Self.v2) { new in new.contains("_retired_note") && new.contains("Item_label_index") }
    }

    func testAMoveIntoAHierarchyInterruptedByPowerLossLeavesTheOldStoreOrTheNewOne() throws {
        try matrix(to: Self.v3) { new in !new.contains("Item: ") && new.contains("Base: n,code,note,_entity") && new.contains("400: ") }
    }

    func matrix(to v2: ManagedObjectModel, expect: (String) -> Bool) throws {
        let seed = ProcessInfo.processInfo.environment["KURA_SEED"].flatMap { UInt64($0) } ?? 0x5EED
        print("MigrationCrashTests seed \(seed) (KURA_SEED=\(seed) to replay)")
        // The store before: 400 items in 4 saves, on a page size small enough
        // for the migration to span many pages.
        let base = FaultInjectingFileSystem()
        let c1 = try PersistentContainer(url: URL(fileURLWithPath: path), model: Self.v1, options: options(base))
        for batch in 0..<4 {
            try c1.save { ctx in
                for i in 0..<100 {
                    let o = try ctx.insert("Item")
                    try o.setValue(Int64(batch * 100 + i), forKey: "n")
                    try o.setValue(Int32(batch * 1000 + i), forKey: "code")
                    try o.setValue("note \(i)", forKey: "note")
                }
            }
        }
        c1.close()
        let image = base.currentImage()
        let old = try Self.state(try Database(path: path, options: options(FaultInjectingFileSystem(restoring: image))))

        // Dry run: count the crash points and take the migrated state.
        let dry = FaultInjectingFileSystem(restoring: image)
        let counter = Locked(0)
        dry.setMutationHook { _, _ in counter.mutate { $0 += 1 } }
        try PersistentContainer(url: URL(fileURLWithPath: path), model: v2, options: options(dry), migration: .lightweight).close()
        dry.setMutationHook(nil)
        let new = try Self.state(try Database(path: path, options: options(dry)))
        XCTAssertNotEqual(old, new)
        XCTAssertTrue(expect(new), new)
        let points = counter.value

        var rng = SplitMix64(state: seed)
        let seeds = Self.long ? 4 : 2
        let chosen: Set<Int> = Self.long || points <= 60 ? Set(1...points) : Set((0..<40).map { _ in Int(rng.next() % UInt64(points)) + 1 })
        let results = Locked<(checked: Int, old: Int, new: Int, failures: [String])>((0, 0, 0, []))
        let fs = FaultInjectingFileSystem(restoring: image)
        let path = self.path
        let optionsFor: @Sendable (any FileSystem) -> Database.Options = { fs in
            var o = Database.Options()
            o.fileSystem = fs
            o.pageSize = 1024
            return o
        }
        fs.setMutationHook { _, n in
            guard chosen.contains(n) else { return }
            for s in 0..<UInt64(seeds) {
                let img = fs.powerLossImage(seed: seed &+ s &* 7919 &+ UInt64(n))
                do {
                    let db = try Database(path: path, options: optionsFor(img))
                    let state = try Self.state(db)
                    let problems = try db.read { tx in try tx.checkIntegrity() }
                    db.close()
                    let isOld = state == old, isNew = state == new
                    results.mutate { r in
                        r.checked += 1
                        if isOld { r.old += 1 }
                        if isNew { r.new += 1 }
                        if !isOld && !isNew { r.failures.append("point \(n) seed \(s): neither the old store nor the new one:\n\(state)") }
                        if !problems.isEmpty { r.failures.append("point \(n) seed \(s): integrity \(problems.prefix(3))") }
                    }
                    if isOld && n % 8 == 0 {
                        // The interrupted migration can run again from the old store.
                        let again = FaultInjectingFileSystem(restoring: img)
                        try PersistentContainer(url: URL(fileURLWithPath: path), model: v2, options: optionsFor(again), migration: .lightweight).close()
                        let after = try Self.state(try Database(path: path, options: optionsFor(again)))
                        if after != new { results.mutate { $0.failures.append("point \(n) seed \(s): migrating again gave\n\(after)") } }
                    }
                } catch {
                    results.mutate { $0.failures.append("point \(n) seed \(s): recovery failed: \(error)") }
                }
            }
        }
        try PersistentContainer(url: URL(fileURLWithPath: path), model: v2, options: options(fs), migration: .lightweight).close()
        fs.setMutationHook(nil)
        let r = results.value
        print("migration crash matrix: \(points) crash points, \(chosen.count) sampled, \(r.checked) images recovered (\(r.old) old, \(r.new) new), \(r.failures.count) failures")
        for f in r.failures.prefix(5) { XCTFail(f) }
        XCTAssertGreaterThan(r.checked, 0)
        XCTAssertGreaterThan(r.old, 0, "no image before the commit was checked")
    }
}
