import Foundation
import XCTest
@testable import Kura

/// An insert-only save numbers each run of one entity's objects from its
/// table's next row ID, found at the run's first temporary ID
/// (Context+Save.swift): entities of one hierarchy share a table, so runs
/// interleaved across them (Circle, Square, Circle) must continue one
/// sequence, skip nothing twice, keep reserved rows (`obtainPermanentIDs`)
/// and not collide with rows of an earlier save.
final class InsertRunRowIDTests: XCTestCase {
    private func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Shape", abstract: true) {
                AttributeDescription("name", .string)
            }
            EntityDescription("Circle", parent: "Shape") {
                AttributeDescription("r", .double)
            }
            EntityDescription("Square", parent: "Shape") {
                AttributeDescription("side", .int64)
            }
            EntityDescription("Plain") {
                AttributeDescription("name", .string)
            }
        }
    }

    func testInterleavedRunsOfOneTableGetDistinctRowsAndKeepTheirValues() throws {
        let container = try PersistentContainer.inMemory(model: model())
        let context = container.newContext()
        // Runs of several objects; runs of one hierarchy's table interleaved.
        let kinds = ["Circle", "Circle", "Circle", "Square", "Square", "Square", "Plain", "Plain", "Circle", "Circle", "Circle"]
        var all: [(ManagedObject, String)] = []
        for round in 0..<2 {
            var objects: [ManagedObject] = []
            for (i, kind) in kinds.enumerated() {
                let o = try context.insert(kind)
                try o.setValue("\(kind) \(round).\(i)", forKey: "name")
                objects.append(o)
            }
            // A reserved row inside a run, and one starting a run.
            try context.obtainPermanentIDs(for: [objects[1], objects[3]])
            let reserved = [objects[1].objectID, objects[3].objectID]
            try context.save()
            XCTAssertEqual([objects[1].objectID, objects[3].objectID], reserved, "reserved rows stay their objects'")
            all += objects.map { ($0, "\($0.entity.name) \(round).\(objects.firstIndex(of: $0) ?? -1)") }
        }
        // Within one table, every row ID once.
        var seen: [String: Set<Int64>] = [:]
        for (o, _) in all {
            let table = o.entity.hierarchy.table
            XCTAssertTrue(seen[table, default: []].insert(o.objectID.rowID).inserted, "\(o.objectID) shares its row")
        }
        let fresh = container.newContext()
        for (o, name) in all {
            let loaded = try fresh.existingObject(with: o.objectID)
            XCTAssertEqual(loaded.entity.name, o.entity.name)
            XCTAssertEqual(try loaded.value(forKey: "name") as? String, name, "\(o.objectID)")
        }
    }
}
