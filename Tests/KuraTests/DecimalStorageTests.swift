// Decimal attributes stored exactly (DecimalStorage.swift): what was stored
// comes back digit for digit after save and reopen (beyond a double's 15-17
// digits), predicates, sorts, aggregates and uniqueness still work on numbers,
// a store written before the exact companion column existed opens and reads its
// old values, and a companion that disagrees with its double is not trusted.

import Foundation
import XCTest
import Kura
import KuraEngine

final class DecimalStorageTests: XCTestCase {
    static let posix = Locale(identifier: "en_US_POSIX")
    static func dec(_ s: String) -> Decimal { Decimal(string: s, locale: posix) ?? .nan }

    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Payment") {
                AttributeDescription("label", .string)
                AttributeDescription("amount", .decimal, indexed: true)
                AttributeDescription("fee", .decimal, default: Decimal(string: "0.10", locale: Locale(identifier: "en_US_POSIX")))
            }
        }
    }

    func testDecimalsComeBackExactlyAndStillCompareAsNumbers() throws {
        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("d.kura")
        // More digits than a double holds, and values a double cannot represent.
        let amounts = ["12345678901234567.89", "0.1", "-3.333333333333333333333", "1e-20", "99999999999999999999999999", "2.5", "-0.000001"]
        do {
            let context = try PersistentContainer(url: url, model: try Self.model()).newContext()
            for (i, s) in amounts.enumerated() {
                let p = try context.insert("Payment")
                try p.setValue("p\(i)", forKey: "label")
                try p.setValue(Self.dec(s), forKey: "amount")
            }
            try context.save()
        }
        let container = try PersistentContainer(url: url, model: try Self.model())
        try container.database.read { tx in
            XCTAssertEqual(try XCTUnwrap(try tx.schema(of: try tx.table("Payment"))).columns.map(\.name),
                           ["label", "amount", "fee", "_version", "_exact_amount", "_exact_fee"])
        }
        let context = container.newContext()
        let all = try context.fetch(FetchRequest<ManagedObject>(entityName: "Payment", sortDescriptors: [SortKey("amount")]))
        let want = amounts.map(Self.dec).sorted()
        XCTAssertEqual(all.compactMap { $0["amount"] as? Decimal }, want)
        XCTAssertEqual(all.first?["fee"] as? Decimal, Self.dec("0.1"))
        // Predicates compare numbers (engine, on the double column).
        var r = FetchRequest<ManagedObject>(entityName: "Payment", sortDescriptors: [SortKey("label")])
        try r.setPredicate("amount > 2 AND amount < 1000")
        XCTAssertEqual(try context.fetch(r).compactMap { $0["amount"] as? Decimal }, [Self.dec("2.5")])
        // And in memory, with a pending change (the same answer).
        let changed = try XCTUnwrap(all.first { $0["label"] as? String == "p1" })
        try changed.setValue(Self.dec("7.25"), forKey: "amount")
        XCTAssertEqual(Set(try context.fetch(r).compactMap { $0["amount"] as? Decimal }), [Self.dec("2.5"), Self.dec("7.25")])
        XCTAssertEqual(try context.fetch(FetchRequest<ManagedObject>(entityName: "Payment", sortDescriptors: [SortKey("amount", ascending: false)]))
                        .first?["amount"] as? Decimal, Self.dec("99999999999999999999999999"))
        XCTAssertEqual(try context.aggregate(.max, of: "amount", matching: FetchRequest<ManagedObject>(entityName: "Payment")).doubleValue, 1e26)
        // Doubles and integers given to a decimal become the decimal they spell.
        try changed.setValue(0.3, forKey: "amount")
        XCTAssertEqual(changed["amount"] as? Decimal, Self.dec("0.3"))
        try changed.setValue(42, forKey: "amount")
        XCTAssertEqual(changed["amount"] as? Decimal, Self.dec("42"))
        XCTAssertThrowsError(try changed.setValue(Double.infinity, forKey: "amount")) { XCTAssertEqual(($0 as? KuraError)?.code, .typeMismatch) }
        try context.save()
        XCTAssertEqual(try container.newContext().existingObject(with: changed.objectID).value(forKey: "amount") as? Decimal, Self.dec("42"))
    }

    func testUniquenessOnADecimalComparesNumbers() throws {
        let model = try ManagedObjectModel {
            EntityDescription("Price") {
                AttributeDescription("value", .decimal)
                UniqueConstraint("value")
            }
        }
        let container = try PersistentContainer.inMemory(model: model)
        let c1 = container.newContext()
        try c1.insert("Price").setValue(Self.dec("1.50"), forKey: "value")
        try c1.save()
        let c2 = container.newContext()
        try c2.insert("Price").setValue(Self.dec("1.5"), forKey: "value")
        XCTAssertThrowsError(try c2.save()) { error in
            XCTAssertEqual((error as? KuraError)?.code, .validation, "\(error)")
            XCTAssertTrue("\(error)".contains("uniqueness constraint (value) violated"), "\(error)")
        }
    }

    func testAStoreWithoutExactColumnsOpensAndReadsItsDoubles() throws {
        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("old.kura")
        // Write the table as a build before exact decimals did: no companions.
        do {
            let db = try Database(path: url.path)
            try db.write { tx in
                let t = try tx.createTable("Payment", schema: try TableSchema([
                    ColumnDefinition("label", .text), ColumnDefinition("amount", .double), ColumnDefinition("fee", .double, default: .double(0.1)),
                    ColumnDefinition("_version", .integer, nullable: false, default: .integer(0)),
                ]))
                _ = try tx.insert([.text("old"), .double(19.99), .double(0.1), .integer(1)], into: t)
                // Its index, as that build made it (a missing index is a migration now).
                try tx.createIndex("Payment_amount_index", on: t, columns: [IndexColumn("amount")])
            }
        }
        let container = try PersistentContainer(url: url, model: try Self.model())
        let context = container.newContext()
        let old = try XCTUnwrap(try context.fetch(FetchRequest<ManagedObject>(entityName: "Payment")).first)
        XCTAssertEqual(old["amount"] as? Decimal, Self.dec("19.99"))
        try old.setValue(Self.dec("19.990000000000000000001"), forKey: "amount")
        try context.save()
        XCTAssertEqual(try container.newContext().existingObject(with: old.objectID).value(forKey: "amount") as? Decimal,
                       Self.dec("19.990000000000000000001"))
        try container.database.read { tx in
            XCTAssertEqual(try XCTUnwrap(try tx.schema(of: try tx.table("Payment"))).columns.map(\.name),
                           ["label", "amount", "fee", "_version", "_exact_amount", "_exact_fee"])
        }
    }

    func testACompanionThatDisagreesWithItsDoubleIsNotTrusted() throws {
        let container = try PersistentContainer.inMemory(model: try Self.model())
        let context = container.newContext()
        let p = try context.insert("Payment")
        try p.setValue(Self.dec("5.55"), forKey: "amount")
        try context.save()
        // An engine-level writer changes the double only.
        try container.database.write { tx in
            let t = try tx.table("Payment")
            var row = try XCTUnwrap(try tx.values(in: t, rowID: p.objectID.rowID))
            row[1] = .double(6.25)
            _ = try tx.update(row, in: t, rowID: p.objectID.rowID)
        }
        XCTAssertEqual(try container.newContext().existingObject(with: p.objectID).value(forKey: "amount") as? Decimal, Self.dec("6.25"))
        // A companion that is not a number is an error naming object and attribute, not a default.
        try container.database.write { tx in
            let t = try tx.table("Payment")
            var row = try XCTUnwrap(try tx.values(in: t, rowID: p.objectID.rowID))
            row[4] = .text("lots")
            _ = try tx.update(row, in: t, rowID: p.objectID.rowID)
        }
        XCTAssertThrowsError(try container.newContext().existingObject(with: p.objectID).value(forKey: "amount")) { error in
            XCTAssertTrue("\(error)".contains("attribute \"amount\" of \(p.objectID)"), "\(error)")
        }
    }
}
