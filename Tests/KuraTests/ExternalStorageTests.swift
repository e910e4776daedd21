// Binary attributes with Core Data's "allows external storage"
// (ExternalStorage.swift): large values round-trip through files beside the
// store, the files of replaced and deleted values go once no one can read
// them, a rolled-back save leaves none, and a missing file is an error naming
// the attribute (column), the object (row) and the file.

import Foundation
import XCTest
import Kura
import KuraEngine

final class ExternalStorageTests: XCTestCase {
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Photo") {
                AttributeDescription("name", .string)
                AttributeDescription("image", .data, allowsExternalBinaryDataStorage: true)
            }
        }
    }

    static var options: Database.Options {
        var o = Database.Options()
        o.externalThreshold = 1000
        o.durability = .off
        return o
    }

    static func bytes(_ n: Int, _ seed: UInt8) -> Data { Data((0..<n).map { UInt8(truncatingIfNeeded: $0 &* 7) &+ seed }) }

    func files(_ url: URL) throws -> Set<String> {
        let dir = url.path + "-external"
        guard FileManager.default.fileExists(atPath: dir) else { return [] }
        return Set(try FileManager.default.contentsOfDirectory(atPath: dir))
    }

    func testLargeValuesRoundTripThroughFilesAndGoWhenReplacedOrDeleted() throws {
        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("p.kura")
        do {
            let context = try PersistentContainer(url: url, model: try Self.model(), options: Self.options).newContext()
            for (name, size) in [("small", 500), ("large", 5000), ("none", 0)] {
                let p = try context.insert("Photo")
                try p.setValue(name, forKey: "name")
                if size > 0 { try p.setValue(Self.bytes(size, UInt8(size % 251)), forKey: "image") }
            }
            try context.save()
        }
        XCTAssertEqual(try files(url).count, 1)
        let container = try PersistentContainer(url: url, model: try Self.model(), options: Self.options)
        try container.database.read { tx in
            XCTAssertEqual(try tx.schema(of: try tx.table("Photo"))?.columns.first { $0.name == "image" }?.type, .external)
        }
        let context = container.newContext()
        func photo(_ name: String) throws -> ManagedObject {
            var r = FetchRequest<ManagedObject>(entityName: "Photo")
            try r.setPredicate("name == %@", .value(.text(name)))
            return try XCTUnwrap(try context.fetch(r).first)
        }
        XCTAssertEqual(try photo("small")["image"] as? Data, Self.bytes(500, UInt8(500 % 251)))
        XCTAssertEqual(try photo("large")["image"] as? Data, Self.bytes(5000, UInt8(5000 % 251)))
        XCTAssertNil(try photo("none")["image"] as? Data)
        var hasImage = FetchRequest<ManagedObject>(entityName: "Photo")
        try hasImage.setPredicate("image != nil")
        XCTAssertEqual(try context.count(for: hasImage), 2)

        // Another context (its own snapshot already read) keeps its values
        // while this one replaces the large value and then deletes it.
        let other = container.newContext()
        var r = FetchRequest<ManagedObject>(entityName: "Photo")
        try r.setPredicate("name == 'large'")
        let seen = try XCTUnwrap(try other.fetch(r).first)
        let first = try files(url)
        try photo("large").setValue(Self.bytes(6000, 3), forKey: "image")
        try context.save()
        XCTAssertEqual(seen["image"] as? Data, Self.bytes(5000, UInt8(5000 % 251)))
        try context.delete(try photo("small"))
        try context.save()  // a later save removes the replaced value's file
        let second = try files(url)
        XCTAssertTrue(second.isDisjoint(with: first))
        XCTAssertEqual(second.count, 1)
        try context.delete(try photo("large"))
        try context.save()
        try context.delete(try photo("none"))
        try context.save()
        XCTAssertEqual(try files(url), [])
    }

    func testRolledBackSaveLeavesNoFileAndAMissingFileIsAClearError() throws {
        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("p.kura")
        let container = try PersistentContainer(url: url, model: try Self.model(), options: Self.options)
        let context = container.newContext()
        // A write that stores a large value and then rolls back.
        let p = try context.insert("Photo")
        try p.setValue("a", forKey: "name")
        try p.setValue(Self.bytes(5000, 1), forKey: "image")
        struct Abort: Error {}
        XCTAssertThrowsError(try container.database.write { tx in
            try tx.insert([.text("b"), .blob([UInt8](Self.bytes(5000, 2))), .integer(1)], into: try tx.table("Photo"))
            throw Abort()
        })
        XCTAssertEqual(try files(url), [])
        try context.save()
        let name = try XCTUnwrap(try files(url).first)
        try FileManager.default.removeItem(atPath: url.path + "-external/" + name)
        let fresh = container.newContext()
        XCTAssertThrowsError(try fresh.fetch(FetchRequest<ManagedObject>(entityName: "Photo"))) { e in
            let m = (e as? KuraError)?.message ?? ""
            for part in ["\"image\"", "\"Photo\"", "row \(p.objectID.rowID)", name, "missing"] {
                XCTAssertTrue(m.contains(part), "\(part) not in \(m)")
            }
        }
    }
    // Toggling allowsExternalBinaryDataStorage changes the column type (blob ↔
    // external): a migration must refuse it by name rather than read file
    // references as bytes or bytes as references.
    func testTogglingExternalStorageIsRefusedByName() throws {
        let dir = try TempDir()
        let url = dir.url.appendingPathComponent("toggle.kura")
        func model(_ external: Bool) throws -> ManagedObjectModel {
            try ManagedObjectModel { EntityDescription("Photo") { AttributeDescription("bytes", .data, allowsExternalBinaryDataStorage: external) } }
        }
        do {
            let c = try PersistentContainer(url: url, model: model(false))
            let ctx = c.newContext()
            try ctx.insert("Photo").setValue(Data([1, 2, 3]), forKey: "bytes")
            try ctx.save()
            c.close()
        }
        for migration in [StoreMigration.none, .lightweight] {
            XCTAssertThrowsError(try PersistentContainer(url: url, model: model(true), migration: migration)) { e in
                XCTAssertEqual((e as? KuraError)?.code, .modelMismatch, "\(e)")
                XCTAssertTrue("\(e)".contains("bytes"), "\(e)")
            }
        }
        let c = try PersistentContainer(url: url, model: model(false))
        let back = try c.newContext().fetch(FetchRequest<ManagedObject>(entityName: "Photo"))
        XCTAssertEqual(back.first?["bytes"] as? Data, Data([1, 2, 3]))
    }
}
