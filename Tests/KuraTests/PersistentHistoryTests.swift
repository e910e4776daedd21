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
    /// Saves with tracking on append exactly their changes, in the save's own
    /// transaction, with the context's name and author; a refused save records
    /// nothing; a container without tracking records nothing.
    func testSavesRecordTheirChanges() throws {
        let model = try ManagedObjectModel {
            EntityDescription("Note") {
                AttributeDescription("title", .string)
                AttributeDescription("body", .string)
                RelationshipDescription("tags", to: "Tag", inverse: "notes", toMany: true)
            }
            EntityDescription("Tag") {
                AttributeDescription("name", .string)
                RelationshipDescription("notes", to: "Note", inverse: "tags", toMany: true)
            }
        }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("kura-history-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let container = try PersistentContainer(url: dir.appendingPathComponent("h.kura"), model: model, persistentHistoryTracking: true)
        let context = container.newContext()
        context.name = "editor"
        context.transactionAuthor = "app"
        let a = try context.insert("Note"), b = try context.insert("Note"), tag = try context.insert("Tag")
        try a.setValue("A", forKey: "title")
        try tag.setValue("t", forKey: "name")
        try context.save()
        let first = try container.history()
        XCTAssertEqual(first.count, 1)
        XCTAssertEqual(first[0].author, "app")
        XCTAssertEqual(first[0].contextName, "editor")
        XCTAssertEqual(Set(first[0].changes.map(\.objectID)), [a.objectID, b.objectID, tag.objectID])
        XCTAssertTrue(first[0].changes.allSatisfy { $0.kind == .insert })

        try a.setValue("A2", forKey: "title")
        try a.setValue("text", forKey: "body")
        try context.save()
        try a.add(tag, to: "tags")
        try context.save()
        try context.delete(b)
        try context.save()
        let later = try container.history(after: first[0].token)
        XCTAssertEqual(later.map(\.changes), [
            [PersistentHistoryChange(kind: .update, objectID: a.objectID, updatedProperties: ["body", "title"])],
            // Join-table updates come ordered by entity name, then row ID.
            [PersistentHistoryChange(kind: .update, objectID: a.objectID, updatedProperties: ["tags"]),
             PersistentHistoryChange(kind: .update, objectID: tag.objectID, updatedProperties: ["notes"])],
            [PersistentHistoryChange(kind: .delete, objectID: b.objectID)],
        ])

        // A save refused by a merge conflict writes no history either.
        let other = container.newContext()
        let a2 = try other.existingObject(with: a.objectID)
        try a2.setValue("theirs", forKey: "title")
        try other.save()
        try a.setValue("mine", forKey: "title")
        XCTAssertThrowsError(try context.save())
        XCTAssertEqual(try container.history().count, 5)

        // Without tracking, nothing is recorded (and what is there stays).
        let untracked = try PersistentContainer(url: dir.appendingPathComponent("h.kura"), model: model)
        let c2 = untracked.newContext()
        try c2.insert("Tag").setValue("u", forKey: "name")
        try c2.save()
        XCTAssertEqual(try untracked.history().count, 5)
    }

    /// Guards the save's record now that inserted IDs are made once, as the
    /// rows are written, and shared by the history and the did-save
    /// (Context+Save.swift): with and without history tracking, a save that
    /// inserts, updates and deletes reports its inserts in insertion order
    /// (the history before its updates and deletes), each with its permanent ID.
    func testSaveRecordsInsertsInOrderBeforeUpdatesAndDeletes() throws {
        for tracking in [true, false] {
            let model = try ManagedObjectModel {
                EntityDescription("Note") { AttributeDescription("title", .string) }
                EntityDescription("Tag") { AttributeDescription("label", .string) }
            }
            let container = try PersistentContainer.inMemory(model: model, persistentHistoryTracking: tracking)
            let context = container.newContext()
            let kept = try context.insert("Note"), gone = try context.insert("Note")
            try context.save()
            var notes: [ContextDidSave] = []
            let token = context.observeDidSave { notes.append($0) }
            try kept.setValue("changed", forKey: "title")
            try context.delete(gone)
            var inserted: [ManagedObject] = []
            for i in 0..<5 {
                let o = try context.insert(i % 2 == 0 ? "Note" : "Tag")
                try o.setValue("n\(i)", forKey: i % 2 == 0 ? "title" : "label")
                inserted.append(o)
            }
            try context.save()
            let ids = inserted.map(\.objectID)
            XCTAssertFalse(ids.contains(where: \.isTemporary))
            XCTAssertEqual(notes.count, 1)
            XCTAssertEqual(notes.first?.inserted, ids, "tracking: \(tracking)")
            XCTAssertEqual(notes.first?.updated, [kept.objectID: ["title"]])
            XCTAssertEqual(notes.first?.deleted, [gone.objectID])
            if tracking {
                let last = try XCTUnwrap(try container.history().last)
                XCTAssertEqual(last.changes, ids.map { PersistentHistoryChange(kind: .insert, objectID: $0) } + [
                    PersistentHistoryChange(kind: .update, objectID: kept.objectID, updatedProperties: ["title"]),
                    PersistentHistoryChange(kind: .delete, objectID: gone.objectID),
                ])
                XCTAssertEqual(last.token, notes.first?.historyToken)
            } else {
                XCTAssertEqual(try container.history().count, 0)
            }
            _ = token
        }
    }
}
