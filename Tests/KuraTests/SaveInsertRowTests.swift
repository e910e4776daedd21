import Foundation
import XCTest
@testable import Kura
@testable import KuraEngine

/// A save writes its inserted rows through the engine's `insertRow`, which
/// encodes each record into a buffer reused from row to row
/// (Context+Save.swift, Transaction.swift): rows of growing and shrinking
/// length, and doubles that a format-9 store keeps in 1 or 4 bytes, must read
/// back exactly as saved; a save refused for a uniqueness clash writes nothing.
final class SaveInsertRowTests: XCTestCase {
    private func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Item") {
                AttributeDescription("name", .string)
                AttributeDescription("score", .int64)
                AttributeDescription("ts", .double)
            }
            EntityDescription("Coded") {
                AttributeDescription("code", .string)
                UniqueConstraint("code")
            }
        }
    }

    static let doubles: [Double] = [
        0, -0.0, 1, -1, 127, 128, -128, -129, 2.5, 0.1, Double(Int32.max), Double(Int32.max) + 1,
        Double(Int32.min), Double(Int32.min) - 1, 7.5e8, 7.5e8 + 0.25, 1e300, -.infinity, .leastNonzeroMagnitude,
    ]

    func testSavedRowsReadBackExactly() throws {
        let container = try PersistentContainer.inMemory(model: model())
        let context = container.newContext()
        var objects: [ManagedObject] = []
        for i in 0..<300 {
            let o = try context.insert("Item")
            // Lengths go up and down, so a record follows a longer one.
            try o.setValue(String(repeating: "n", count: (i * 37) % 301), forKey: "name")
            try o.setValue(Int64(i) << (i % 60), forKey: "score")
            try o.setValue(Self.doubles[i % Self.doubles.count], forKey: "ts")
            objects.append(o)
        }
        try context.save()
        let fresh = container.newContext()
        XCTAssertEqual(try fresh.count(for: FetchRequest<ManagedObject>(entityName: "Item")), 300)
        for (i, o) in objects.enumerated() {
            let back = try fresh.existingObject(with: o.objectID)
            XCTAssertEqual(try back.value(forKey: "name") as? String, String(repeating: "n", count: (i * 37) % 301), "object \(i)")
            XCTAssertEqual(try back.value(forKey: "score") as? Int64, Int64(i) << (i % 60), "object \(i)")
            let ts = try XCTUnwrap(try back.value(forKey: "ts") as? Double, "object \(i)")
            XCTAssertEqual(ts.bitPattern, Self.doubles[i % Self.doubles.count].bitPattern, "object \(i): \(ts)")
        }
        // Each stored record is exactly the encoding of its values (nothing
        // left over from a longer record before it), doubles compacted.
        try container.database.read { tx in
            let t = try tx.table("Item")
            for (i, o) in objects.enumerated() {
                let record = try XCTUnwrap(try tx.record(in: t, rowID: o.objectID.rowID))
                let values = try XCTUnwrap(try tx.values(in: t, rowID: o.objectID.rowID))
                XCTAssertEqual(record, RecordCodec.encode(values, compactDoubles: true), "object \(i)")
            }
        }
    }

    func testUniquenessClashRefusesTheSaveAndWritesNothing() throws {
        let container = try PersistentContainer.inMemory(model: model())
        let context = container.newContext()
        try context.insert("Coded").setValue("a", forKey: "code")
        try context.save()
        let second = container.newContext()
        try second.insert("Coded").setValue("b", forKey: "code")
        try second.insert("Coded").setValue("a", forKey: "code")
        XCTAssertThrowsError(try second.save()) { e in XCTAssertTrue("\(e)".contains("code"), "\(e)") }
        XCTAssertEqual(try container.newContext().count(for: FetchRequest<ManagedObject>(entityName: "Coded")), 1)
    }
}
