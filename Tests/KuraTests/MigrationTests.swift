// Model evolution (PersistentContainer+Migration.swift): a store written with
// model v1 and populated, reopened with model v2. The compatibility check
// reads without changing the file; `.none` still refuses; `.lightweight`
// adds, renames and retires columns and builds or drops indexes without
// losing a value; an added uniqueness constraint that stored objects violate,
// and changes it does not infer, fail and leave the store as it was.

import Foundation
import XCTest
import Kura
import KuraEngine

final class MigrationTests: XCTestCase {
    static func v1() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Book") {
                AttributeDescription("title", .string, indexed: true)
                AttributeDescription("pages", .int32)
                AttributeDescription("shelf", .string)
                AttributeDescription("blurb", .string)
            }
        }
    }

    /// v1 with: `isbn` (optional) and `stock` (required, default 3) added,
    /// `shelf` renamed to `location`, `blurb` removed, the title index dropped,
    /// an index on `pages`, a uniqueness constraint on `location`, entity
    /// `Author` added.
    static func v2(unique: String = "location") throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Book") {
                AttributeDescription("title", .string)
                AttributeDescription("isbn", .string)
                AttributeDescription("pages", .int32, indexed: true)
                AttributeDescription("stock", .int64, optional: false, default: Int64(3))
                AttributeDescription("location", .string, renamingIdentifier: "shelf")
                UniqueConstraint(unique)
            }
            EntityDescription("Author") {
                AttributeDescription("name", .string)
            }
        }
    }

    func populate(_ url: URL, shelves: [String] = ["A1", "B2", "C3"]) throws {
        let c = try PersistentContainer(url: url, model: try Self.v1())
        try c.save { ctx in
            for (i, s) in shelves.enumerated() {
                let b = try ctx.insert("Book")
                try b.setValue("Book \(i)", forKey: "title")
                try b.setValue(Int32(100 + i), forKey: "pages")
                try b.setValue(s, forKey: "shelf")
                try b.setValue("about \(i)", forKey: "blurb")
            }
        }
        c.close()
    }

    func bytes(_ url: URL) throws -> Data { try Data(contentsOf: url) }

    func testCompatibilityCheckListsTheDifferencesAndChangesNothing() throws {
        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("books.kura")
        XCTAssertFalse(try PersistentContainer.isMigrationRequired(at: url, for: try Self.v2()), "no store yet: nothing to migrate")
        XCTAssertFalse(FileManager.default.fileExists(atPath: url.path), "the check created the store")
        try populate(url)
        let before = try bytes(url)
        XCTAssertFalse(try PersistentContainer.isMigrationRequired(at: url, for: try Self.v1()))
        let check = try PersistentContainer.compatibility(ofStoreAt: url, with: try Self.v2())
        XCTAssertTrue(check.isMigrationRequired)
        XCTAssertTrue(check.canMigrateLightweight, "\(check.unsupported)")
        let text = check.differences.joined(separator: "\n")
        for part in ["Book.isbn", "Book.stock", "Book.location: renamed from \"shelf\"", "Book.blurb", "Book_title_index", "Book_pages_index", "Book_unique_location"] {
            XCTAssertTrue(text.contains(part), "missing \(part) in:\n\(text)")
        }
        XCTAssertFalse(text.contains("Author"), "a new entity needs no migration:\n\(text)")
        XCTAssertEqual(try bytes(url), before, "the check changed the store")

        // Without migration, the open refuses with the same list and changes nothing.
        XCTAssertThrowsError(try PersistentContainer(url: url, model: try Self.v2())) { error in
            let e = error as? KuraError
            XCTAssertEqual(e?.code, .modelMismatch)
            for d in check.differences { XCTAssertTrue(e?.message.contains(d) ?? false, "\(d) not in \(String(describing: e))") }
        }
        XCTAssertEqual(try bytes(url), before, "a refused open changed the store")
    }

    func testLightweightMigrationKeepsEveryValueAndRewritesNoRow() throws {
        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("books.kura")
        try populate(url)
        let c = try PersistentContainer(url: url, model: try Self.v2(), migration: .lightweight)
        let ctx = c.newContext()
        var r = FetchRequest<ManagedObject>(entityName: "Book")
        try r.setPredicate("location == 'B2'")
        let b = try XCTUnwrap(try ctx.fetch(r).first)
        XCTAssertEqual(b["title"] as? String, "Book 1")
        XCTAssertEqual(b["pages"] as? Int32, 101)
        XCTAssertEqual(b["stock"] as? Int64, 3, "old rows read the added attribute's default")
        XCTAssertNil(b["isbn"])
        var byPages = FetchRequest<ManagedObject>(entityName: "Book")
        try byPages.setPredicate("pages >= 101")
        XCTAssertEqual(try ctx.fetch(byPages).count, 2)
        // The store now matches; objects of every entity save; the constraint holds.
        try b.setValue("978-0", forKey: "isbn")
        let a = try ctx.insert("Author")
        try a.setValue("Ann", forKey: "name")
        try ctx.save()
        let dup = try ctx.insert("Book")
        try dup.setValue("A1", forKey: "location")
        XCTAssertThrowsError(try ctx.save())
        ctx.rollback()
        c.close()
        XCTAssertFalse(try PersistentContainer.isMigrationRequired(at: url, for: try Self.v2()))
        let again = try PersistentContainer(url: url, model: try Self.v2())
        XCTAssertEqual(try again.newContext().existingObject(with: b.objectID).value(forKey: "isbn") as? String, "978-0")
        try again.database.read { tx in
            let t = try tx.table("Book")
            // No row was rewritten: the removed column stays, unused; the rename kept its place.
            XCTAssertEqual(try XCTUnwrap(try tx.schema(of: t)).columns.map(\.name),
                           ["title", "pages", "location", "_retired_blurb", "_version", "isbn", "stock"])
            // Rows not saved since keep the old value there; a saved one holds null.
            var retired: [Value] = []
            let rows = try tx.rows(in: t)
            while let row = try rows.next() { retired.append(try XCTUnwrap(try tx.values(in: t, rowID: row.rowID))[3]) }
            XCTAssertEqual(retired, [.text("about 0"), .null, .text("about 2")])
            XCTAssertEqual(Set(try tx.indexes(of: "Book").map(\.name)), ["Book_pages_index", "Book_unique_location"])
        }
    }

    func testAnAddedUniquenessConstraintThatRowsViolateFailsAndLeavesTheStore() throws {
        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("books.kura")
        try populate(url, shelves: ["A1", "Z9", "Z9"])
        let before = try bytes(url)
        XCTAssertThrowsError(try PersistentContainer(url: url, model: try Self.v2(), migration: .lightweight)) { error in
            let e = error as? KuraError
            XCTAssertEqual(e?.code, .validation)
            XCTAssertTrue(e?.message.contains("Z9") ?? false, "\(String(describing: e))")
            XCTAssertTrue(e?.message.contains("location") ?? false, "\(String(describing: e))")
        }
        XCTAssertEqual(try bytes(url), before, "the failed migration changed the store")
        let old = try PersistentContainer(url: url, model: try Self.v1())
        XCTAssertEqual(try old.newContext().fetch(FetchRequest<ManagedObject>(entityName: "Book")).count, 3)
    }

    func testChangesNotInferredAreRefusedByName() throws {
        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("books.kura")
        try populate(url)
        let before = try bytes(url)
        let retyped = try ManagedObjectModel {
            EntityDescription("Book") {
                AttributeDescription("title", .string, indexed: true)
                AttributeDescription("pages", .date)
                AttributeDescription("shelf", .string)
                AttributeDescription("blurb", .string)
                AttributeDescription("copies", .int64, optional: false)
            }
        }
        let check = try PersistentContainer.compatibility(ofStoreAt: url, with: retyped)
        XCTAssertFalse(check.canMigrateLightweight)
        XCTAssertThrowsError(try PersistentContainer(url: url, model: retyped, migration: .lightweight)) { error in
            let e = error as? KuraError
            XCTAssertEqual(e?.code, .modelMismatch)
            XCTAssertTrue(e?.message.contains("Book.pages: the store has int32 (a integer column), the model date (a type change needs a migration kind Kura does not infer") ?? false, "\(String(describing: e))")
            XCTAssertTrue(e?.message.contains("Book.copies: a required attribute without a default") ?? false, "\(String(describing: e))")
        }
        XCTAssertEqual(try bytes(url), before, "the refused migration changed the store")
    }
}
