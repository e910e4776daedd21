// Persistent history (Observation/PersistentHistory.swift): records round-trip,
// tokens order transactions and survive purges, malformed records are corruption
// naming the row.

import Foundation
import XCTest
import KuraEngine
@testable import Kura

final class PersistentHistoryTests: XCTestCase {
    func makeContainer() throws -> PersistentContainer {
        let model = try ManagedObjectModel {
            EntityDescription("Note") {
                AttributeDescription("title", .string)
            }
        }
        return try PersistentContainer.inMemory(model: model)
    }

    func testRecordsRoundTripInOrderAndPurgeKeepsLaterTokens() throws {
        let container = try makeContainer()
        XCTAssertEqual(try container.history().count, 0)
        XCTAssertNil(try container.lastHistoryToken())
        var written: [[PersistentHistoryChange]] = []
        for i in 0..<5 {
            let changes = [
                PersistentHistoryChange(kind: .insert, objectID: ManagedObjectID(entity: "Note", rowID: Int64(i * 2 + 1))),
                PersistentHistoryChange(kind: .update, objectID: ManagedObjectID(entity: "Note", rowID: 1), updatedProperties: ["title", "ü"]),
                PersistentHistoryChange(kind: .delete, objectID: ManagedObjectID(entity: "Note", rowID: Int64(-i))),
            ]
            written.append(changes)
            try container.database.write { tx in
                try PersistentHistoryStore.append(tx, author: i % 2 == 0 ? "importer" : nil, contextName: "ctx \(i)", changes: changes)
            }
        }
        let all = try container.history()
        XCTAssertEqual(all.map(\.changes), written)
        XCTAssertEqual(all.map(\.token), all.map(\.token).sorted())
        XCTAssertEqual(all.map(\.author), ["importer", nil, "importer", nil, "importer"])
        XCTAssertEqual(all.map(\.contextName), (0..<5).map { "ctx \($0)" })
        XCTAssertEqual(try container.lastHistoryToken(), all.last?.token)

        XCTAssertEqual(try container.history(after: all[1].token).map(\.token), Array(all[2...].map(\.token)))
        XCTAssertEqual(try container.history(after: all[1].token, limit: 2).map(\.token), [all[2].token, all[3].token])
        XCTAssertEqual(try container.purgeHistory(through: all[2].token), 3)
        XCTAssertEqual(try container.history().map(\.token), [all[3].token, all[4].token])
        XCTAssertEqual(try container.history(after: all[0].token).map(\.token), [all[3].token, all[4].token])
        // A new transaction after the purge gets a later token than any before.
        let next = try container.database.write { tx in try PersistentHistoryStore.append(tx, author: nil, contextName: nil, changes: []) }
        XCTAssertGreaterThan(next, all[4].token)
    }

    func testMalformedRecordsAreCorruptionNamingTheRow() throws {
        let container = try makeContainer()
        let good = PersistentHistoryStore.encode([PersistentHistoryChange(kind: .update, objectID: ManagedObjectID(entity: "Note", rowID: 7), updatedProperties: ["title"])])
        var cases: [(String, [UInt8])] = [
            ("empty", []),
            ("count too large", [0xFF, 0xFF, 0xFF, 0x7F] + Array(good.dropFirst(4))),
            ("bad kind", [1, 0, 0, 0, 9] + Array(good.dropFirst(5))),
            ("truncated", Array(good.dropLast(3))),
            ("trailing bytes", good + [0]),
        ]
        var badUTF8 = good
        badUTF8[9] = 0xFF  // first byte of the entity name
        cases.append(("not UTF-8", badUTF8))
        for (name, bytes) in cases {
            let id = try container.database.write { tx -> Int64 in
                try PersistentHistoryStore.ensureTable(tx)
                return try tx.insert([.double(0), .null, .null, .blob(bytes)], into: try tx.table(PersistentHistoryStore.tableName))
            }
            XCTAssertThrowsError(try container.history(after: HistoryToken(id - 1)), name) { error in
                XCTAssertEqual((error as? KuraError)?.code, .corrupt, name)
                XCTAssertTrue("\(error)".contains("history row \(id)"), "\(name): \(error)")
            }
            _ = try container.purgeHistory(through: HistoryToken(id))
        }
        // A well-formed record still reads after the bad ones were purged.
        try container.database.write { tx in
            _ = try tx.insert([.double(1), .null, .null, .blob(good)], into: try tx.table(PersistentHistoryStore.tableName))
        }
        XCTAssertEqual(try container.history().map(\.changes.first?.objectID.rowID), [7])
    }
}
