// Guards the borrowed fault load (ManagedObjectContext.loadBorrowed): a fault
// of a plain layout loads from its record where it lies in its page, each
// stored column decoded into its attribute's slot (RowLayout.columnOrdinals).
// Its outcome must equal the row-array path's (`apply` on
// `Database.values(inTable:rowID:)`) for every attribute type, nil values,
// a migrated table whose columns are in another order than the attributes,
// rows written before an attribute with a default was added (shorter
// records), transient attributes, and the row's version. Prints its seed;
// KURA_SEED=<n> replays one.

import Foundation
import XCTest
@testable import Kura
import KuraEngine

final class BorrowedFaultLoadTests: XCTestCase {
    private func oldModel() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Thing", attributes: attributesOfEveryType(), relationships: [])
        }
    }

    /// The same entity with its attributes in another order, a transient
    /// attribute first and a later attribute with a default.
    private func newModel() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Thing", attributes: attributesOfEveryTypeReordered(), relationships: [])
        }
    }

    private func setRandom(_ o: ManagedObject, _ g: inout SplitMix64) throws {
        func maybe(_ v: Any) -> Any? { Int.random(in: 0..<4, using: &g) == 0 ? nil : v }
        try o.setValue(maybe(Int16.random(in: .min ... .max, using: &g)), forKey: "i16")
        try o.setValue(maybe(Int32.random(in: .min ... .max, using: &g)), forKey: "i32")
        try o.setValue(maybe(Int64.random(in: .min ... .max, using: &g)), forKey: "i64")
        try o.setValue(maybe(Double.random(in: -1e6...1e6, using: &g)), forKey: "d")
        try o.setValue(maybe(Float.random(in: -1e3...1e3, using: &g)), forKey: "f")
        try o.setValue(maybe(String(repeating: "é", count: Int.random(in: 0...40, using: &g))), forKey: "s")
        try o.setValue(maybe(Bool.random(using: &g)), forKey: "b")
        try o.setValue(maybe(Date(timeIntervalSince1970: Double.random(in: 0...2e9, using: &g))), forKey: "dt")
        try o.setValue(maybe(Data((0..<Int.random(in: 0...20, using: &g)).map { _ in UInt8.random(in: 0...255, using: &g) })), forKey: "data")
        try o.setValue(maybe(UUID()), forKey: "u")
        try o.setValue(maybe(URL(fileURLWithPath: "/x/\(Int.random(in: 0...999, using: &g))")), forKey: "url")
        try o.setValue(maybe(["x", "\(Int.random(in: 0...9, using: &g))"]), forKey: "tags")
    }

    /// Loads `id` through `existingObject` (the borrowed path) and through
    /// `apply` on the row array, and compares the two objects' state.
    private func compare(_ c: PersistentContainer, _ id: ManagedObjectID, _ how: String) throws {
        let borrowedContext = c.newContext()
        let borrowed = try borrowedContext.existingObject(with: id)
        let arrayContext = c.newContext()
        let layout = arrayContext.layout(of: borrowed.entity)
        XCTAssertNotNil(layout.columnOrdinals, "\(how): the layout must be plain (the borrowed path is under test)")
        let fault = arrayContext.registerFault(id)
        let row = try XCTUnwrap(try c.database.values(inTable: layout.table, rowID: id.rowID), how)
        arrayContext.apply(row, to: fault)
        XCTAssertFalse(borrowed.isFault, how)
        XCTAssertEqual(borrowed.values, fault.values, how)
        XCTAssertEqual(borrowed.savedValues, fault.savedValues, how)
        XCTAssertEqual(borrowed.version, fault.version, how)
        XCTAssertTrue(borrowed.toOne.isEmpty && borrowed.order.isEmpty, how)
        XCTAssertFalse(borrowed.hasChanges, how)
        for a in borrowed.entity.attributes {
            XCTAssertEqual("\(String(describing: try borrowed.value(forKey: a.name)))", "\(String(describing: try fault.value(forKey: a.name)))", "\(how): \(a.name)")
        }
    }

    func testBorrowedLoadEqualsRowArrayLoad() throws {
        let seed = testSeed("BorrowedFaultLoadTests")
        var g = SplitMix64(state: seed)
        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("borrowed.kura")
        var ids: [ManagedObjectID] = []
        do {
            let c = try PersistentContainer(url: url, model: oldModel())
            let ctx = c.newContext()
            var objects: [ManagedObject] = []
            for _ in 0..<40 {
                let o = try ctx.insert("Thing")
                try setRandom(o, &g)
                objects.append(o)
            }
            try ctx.save()
            // A second save bumps some rows' versions.
            for o in objects where Bool.random(using: &g) { try o.setValue(Int64(1), forKey: "i64") }
            try ctx.save()
            ids = objects.map(\.objectID)
            for id in ids { try compare(c, id, "seed \(seed) before migration \(id)") }
            c.close()
        }
        let c = try PersistentContainer(url: url, model: newModel(), migration: .lightweight)
        for id in ids { try compare(c, id, "seed \(seed) migrated \(id)") }
        let o = try c.newContext().existingObject(with: ids[0])
        XCTAssertEqual(try o.value(forKey: "late") as? Int64, 99, "seed \(seed): a column added later reads its default")
        XCTAssertEqual(try o.value(forKey: "t") as? String, "start", "seed \(seed): a transient attribute reads its default")
    }
}
