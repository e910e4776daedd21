import Foundation
import XCTest
@testable import Kura
import KuraEngine

// Guards loading a fault's values from its row (ManagedObjectContext.load and
// apply): a plain layout (RowLayout.directColumns) copies each stored value to
// its attribute's slot as it is, any other layout converts (decimals,
// composites); `existingObject(with:)` loads its fault directly. Every
// attribute type must read back as saved, through `existingObject` and through
// a fetch, in a fresh context; a transient attribute starts at its default; a
// row deleted by another context still throws; awakeFromFetch still runs.

/// Counts its awakeFromFetch calls (every instance of the test).
final class AwakeCounter: ManagedObject {
    nonisolated(unsafe) static var awakes = 0
    override func awakeFromFetch() {
        super.awakeFromFetch()
        Self.awakes += 1
    }
}

final class FaultLoadTests: XCTestCase {
    func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Every", attributes: attributesOfEveryType() + [
                AttributeDescription("none", .string),
                AttributeDescription("t", .string, default: "start", transient: true),
            ], relationships: [])
            EntityDescription("Money") {
                AttributeDescription("amount", .decimal)
                AttributeDescription("label", .string)
                AttributeDescription("t", .string, default: "start", transient: true)
            }
            EntityDescription("Awake", class: AwakeCounter.self) {
                AttributeDescription("n", .int64)
            }
        }
    }

    let date = Date(timeIntervalSince1970: 1_234_567.25)
    let uuid = UUID()
    let url = URL(string: "https://example.com/a?b=c")!  // a literal that parses

    /// Checks every attribute of an "Every" object read from the store.
    func checkEvery(_ o: ManagedObject, _ how: String) throws {
        XCTAssertEqual(try o.value(forKey: "i16") as? Int16, -7, how)
        XCTAssertEqual(try o.value(forKey: "i32") as? Int32, 1 << 20, how)
        XCTAssertEqual(try o.value(forKey: "i64") as? Int64, Int64.min + 1, how)
        XCTAssertEqual(try o.value(forKey: "d") as? Double, 0.1, how)
        XCTAssertEqual(try o.value(forKey: "f") as? Float, 1.5, how)
        XCTAssertEqual(try o.value(forKey: "s") as? String, "a string longer than fifteen bytes", how)
        XCTAssertEqual(try o.value(forKey: "b") as? Bool, true, how)
        XCTAssertEqual(try o.value(forKey: "dt") as? Date, date, how)
        XCTAssertEqual(try o.value(forKey: "data") as? Data, Data([0, 1, 2, 255]), how)
        XCTAssertEqual(try o.value(forKey: "u") as? UUID, uuid, how)
        XCTAssertEqual(try o.value(forKey: "url") as? URL, url, how)
        XCTAssertEqual(try o.value(forKey: "tags") as? [String], ["x", "y"], how)
        XCTAssertNil(try o.value(forKey: "none"), how)
        XCTAssertEqual(try o.value(forKey: "t") as? String, "start", "\(how): a transient attribute loads at its default")
        XCTAssertFalse(o.hasChanges, how)
    }

    func testEveryAttributeTypeLoadsAsSaved() throws {
        let tmp = try TempDir()
        let c = try PersistentContainer(url: tmp.url.appendingPathComponent("every.kura"), model: model())
        let ctx = c.newContext()
        let o = try ctx.insert("Every")
        try o.setValue(Int16(-7), forKey: "i16")
        try o.setValue(Int32(1 << 20), forKey: "i32")
        try o.setValue(Int64.min + 1, forKey: "i64")
        try o.setValue(0.1, forKey: "d")
        try o.setValue(Float(1.5), forKey: "f")
        try o.setValue("a string longer than fifteen bytes", forKey: "s")
        try o.setValue(true, forKey: "b")
        try o.setValue(date, forKey: "dt")
        try o.setValue(Data([0, 1, 2, 255]), forKey: "data")
        try o.setValue(uuid, forKey: "u")
        try o.setValue(url, forKey: "url")
        try o.setValue(["x", "y"], forKey: "tags")
        try o.setValue("changed", forKey: "t")
        let m = try ctx.insert("Money")
        try m.setValue(Decimal(string: "12345678901234.5678"), forKey: "amount")
        try m.setValue("m", forKey: "label")
        try m.setValue("changed", forKey: "t")
        try ctx.save()

        let every = try XCTUnwrap(ctx.loadedLayout(of: try XCTUnwrap(c.model["Every"])))
        XCTAssertNotNil(every.directColumns, "Every is plain: the direct path is under test")
        let money = try XCTUnwrap(ctx.loadedLayout(of: try XCTUnwrap(c.model["Money"])))
        XCTAssertNil(money.directColumns, "Money has a decimal: the converting path is under test")

        let fresh = c.newContext()
        try checkEvery(try fresh.existingObject(with: o.objectID), "existingObject")
        let fetched = try fresh.fetch(FetchRequest<ManagedObject>(entityName: "Every"))
        XCTAssertEqual(fetched.count, 1)
        try checkEvery(try XCTUnwrap(fetched.first), "fetch")
        let fresh2 = c.newContext()
        try checkEvery(try XCTUnwrap(fresh2.fetch(FetchRequest<ManagedObject>(entityName: "Every")).first), "fetch, fresh")

        let (c1, c2) = (c.newContext(), c.newContext())   // kept alive while their objects are read
        for (how, n) in [("existingObject", try c1.existingObject(with: m.objectID)),
                         ("fetch", try XCTUnwrap(c2.fetch(FetchRequest<ManagedObject>(entityName: "Money")).first))] {
            XCTAssertEqual(try n.value(forKey: "amount") as? Decimal, Decimal(string: "12345678901234.5678"), how)
            XCTAssertEqual(try n.value(forKey: "label") as? String, "m", how)
            XCTAssertEqual(try n.value(forKey: "t") as? String, "start", how)
        }
    }

    func testExistingObjectSeesLatestCommitAndThrowsForDeletedRow() throws {
        let tmp = try TempDir()
        let c = try PersistentContainer(url: tmp.url.appendingPathComponent("deleted.kura"), model: model())
        let writer = c.newContext()
        let o = try writer.insert("Every")
        try o.setValue("one", forKey: "s")
        try writer.save()
        try o.setValue("two", forKey: "s")
        try writer.save()
        let latest = c.newContext()
        XCTAssertEqual(try latest.existingObject(with: o.objectID).value(forKey: "s") as? String, "two")

        let id = o.objectID
        try writer.delete(o)
        try writer.save()
        let reader = c.newContext()
        XCTAssertThrowsError(try reader.existingObject(with: id)) { e in
            XCTAssertEqual((e as? KuraError)?.code, .notFound, "\(e)")
            XCTAssertTrue("\(e)".contains("no longer exists in the store"), "\(e)")
        }
        // Deleted in this context (not saved): the same error as before.
        let other = try writer.insert("Every")
        try writer.save()
        let mine = c.newContext()
        let x = try mine.existingObject(with: other.objectID)
        try mine.delete(x)
        XCTAssertThrowsError(try mine.existingObject(with: other.objectID)) { e in
            XCTAssertTrue("\(e)".contains("is deleted in this context"), "\(e)")
        }
    }

    func testAwakeFromFetchRunsOnExistingObjectAndFetch() throws {
        let tmp = try TempDir()
        let c = try PersistentContainer(url: tmp.url.appendingPathComponent("awake.kura"), model: model())
        let ctx = c.newContext()
        let o = try ctx.insert("Awake")
        try o.setValue(Int64(3), forKey: "n")
        try ctx.save()
        AwakeCounter.awakes = 0
        let reader = c.newContext()
        let a = try reader.existingObject(with: o.objectID)
        XCTAssertTrue(a is AwakeCounter)
        XCTAssertEqual(AwakeCounter.awakes, 1, "existingObject wakes the object it loads")
        let fetcher = c.newContext()
        _ = try fetcher.fetch(FetchRequest<ManagedObject>(entityName: "Awake"))
        XCTAssertEqual(AwakeCounter.awakes, 2, "a fetch wakes the object it loads")
    }

    /// A migrated table keeps its columns in the old model's order: each
    /// value must come from its own column, not from its attribute's ordinal.
    func testMigratedColumnOrderLoadsEachValueFromItsColumn() throws {
        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("migrated.kura")
        let id: ManagedObjectID
        do {
            let c = try PersistentContainer(url: url, model: try ManagedObjectModel {
                EntityDescription("Note") {
                    AttributeDescription("a", .string)
                    AttributeDescription("b", .int64, default: 0)
                }
            })
            let ctx = c.newContext()
            let o = try ctx.insert("Note")
            try o.setValue("A", forKey: "a")
            try o.setValue(Int64(42), forKey: "b")
            try ctx.save()
            id = o.objectID
            c.close()
        }
        let c = try PersistentContainer(url: url, model: try ManagedObjectModel {
            EntityDescription("Note") {
                AttributeDescription("t", .string, default: "start", transient: true)
                AttributeDescription("b", .int64, default: 0)
                AttributeDescription("a", .string)
            }
        }, migration: .lightweight)
        let ctx = c.newContext()
        XCTAssertNotNil(try XCTUnwrap(ctx.loadedLayout(of: try XCTUnwrap(c.model["Note"]))).directColumns)
        let o = try ctx.existingObject(with: id)
        XCTAssertEqual(try o.value(forKey: "a") as? String, "A")
        XCTAssertEqual(try o.value(forKey: "b") as? Int64, 42)
        XCTAssertEqual(try o.value(forKey: "t") as? String, "start")
    }
}
