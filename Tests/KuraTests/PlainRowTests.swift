import Foundation
import XCTest
@testable import Kura
import KuraEngine

// Guards the plain-layout row (RowLayout.fill, `directColumns`): an entity
// whose table holds only its attributes and the version column gets its row
// by copying each attribute's slot to that attribute's column. The columns
// are the stored table's, which after a migration are not in the model's
// attribute order; a transient attribute has none. Each value must land in
// its own column (read back here from the engine's row and through a fresh
// context), and layouts that need conversions keep the general path.

final class PlainRowTests: XCTestCase {
    func v1() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Note") {
                AttributeDescription("a", .string)
                AttributeDescription("b", .int64, default: 0)
            }
        }
    }

    /// `a` and `b` in another order, an added attribute and a transient one.
    func v2() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Note") {
                AttributeDescription("t", .string, transient: true)
                AttributeDescription("extra", .string, default: "x")
                AttributeDescription("b", .int64, default: 0)
                AttributeDescription("a", .string)
            }
        }
    }

    /// The stored row of `id` by column name.
    func storedRow(_ c: PersistentContainer, _ id: ManagedObjectID) throws -> [String: Value] {
        try c.database.read { tx in
            let t = try tx.table("Note")
            let columns = try XCTUnwrap(try tx.schema(of: t)).columns.map(\.name)
            let values = try XCTUnwrap(try tx.values(in: t, rowID: id.rowID))
            return Dictionary(uniqueKeysWithValues: zip(columns, values))
        }
    }

    func testEachValueLandsInItsColumnInAMigratedTable() throws {
        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("notes.kura")
        do {
            let c = try PersistentContainer(url: url, model: v1())
            let ctx = c.newContext()
            let o = try ctx.insert("Note")
            try o.setValue("old", forKey: "a")
            try o.setValue(Int64(1), forKey: "b")
            try ctx.save()
            c.close()
        }
        let c = try PersistentContainer(url: url, model: v2(), migration: .lightweight)
        let layout = try XCTUnwrap(c.newContext().loadedLayout(of: try XCTUnwrap(c.model["Note"])))
        XCTAssertNotNil(layout.directColumns, "the migrated table is plain: the fast path is under test")
        XCTAssertNotEqual(layout.directColumns, Array(0..<4), "the columns are not in the model's order")

        let ctx = c.newContext()
        let o = try ctx.insert("Note")
        try o.setValue("T", forKey: "t")
        try o.setValue("E", forKey: "extra")
        try o.setValue(Int64(2), forKey: "b")
        try o.setValue("new", forKey: "a")
        let unset = try ctx.insert("Note")
        try ctx.save()

        let row = try storedRow(c, o.objectID)
        XCTAssertEqual(row["a"], .text("new"))
        XCTAssertEqual(row["b"], .integer(2))
        XCTAssertEqual(row["extra"], .text("E"))
        XCTAssertNil(row["t"], "a transient attribute has no column")
        XCTAssertEqual(try storedRow(c, unset.objectID)["extra"], .text("x"), "an unset attribute writes its default")

        // An update of the old row, through the same fill.
        let old = try XCTUnwrap(try ctx.fetch(FetchRequest<ManagedObject>(entityName: "Note", predicate: try KuraPredicate(format: "a == 'old'"))).first)
        try old.setValue(Int64(5), forKey: "b")
        try ctx.save()
        let oldRow = try storedRow(c, old.objectID)
        XCTAssertEqual(oldRow["a"], .text("old"))
        XCTAssertEqual(oldRow["b"], .integer(5))
        XCTAssertEqual(oldRow["extra"], .text("x"))

        let fresh = c.newContext()
        let back = try fresh.existingObject(with: o.objectID)
        XCTAssertEqual(try back.value(forKey: "a") as? String, "new")
        XCTAssertEqual(try back.value(forKey: "b") as? Int64, 2)
        XCTAssertEqual(try back.value(forKey: "extra") as? String, "E")
        XCTAssertNil(try back.value(forKey: "t"))
    }

    func testLayoutsNeedingConversionsAreNotPlain() throws {
        let model = try ManagedObjectModel {
            EntityDescription("Plain") {
                AttributeDescription("s", .string)
            }
            EntityDescription("Money") {
                AttributeDescription("amount", .decimal)
            }
            EntityDescription("Owner") {
                AttributeDescription("s", .string)
                RelationshipDescription("pet", to: "Pet", inverse: "owner")
            }
            EntityDescription("Pet") {
                RelationshipDescription("owner", to: "Owner", inverse: "pet")
            }
        }
        let c = try PersistentContainer.inMemory(model: model)
        let ctx = c.newContext()
        func layout(_ name: String) throws -> RowLayout { try XCTUnwrap(ctx.loadedLayout(of: try XCTUnwrap(model[name]))) }
        XCTAssertNotNil(try layout("Plain").directColumns)
        XCTAssertNil(try layout("Money").directColumns, "a decimal is stored converted")
        XCTAssertNil(try layout("Owner").directColumns, "a to-one key column")
    }
}
