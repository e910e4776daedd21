// Model evolution beyond adding and renaming columns (Migration/*.swift):
// the store records its model's version hashes and the compatibility check
// answers from them; attribute types convert exactly or the migration is
// refused naming the object; optional → required fills or names objects;
// entities are renamed with their join tables; staged migrations run custom
// stages and start from the version the store records. Every refused
// migration leaves the store byte-identical.

import Foundation
import XCTest
import Kura
import KuraEngine

final class ModelEvolutionTests: XCTestCase {
    func bytes(_ url: URL) throws -> Data { try Data(contentsOf: url) }

    func integrity(_ c: PersistentContainer, file: StaticString = #filePath, line: UInt = #line) throws {
        let problems = try c.database.read { tx in try tx.checkIntegrity() }
        XCTAssertEqual(problems.map { "\($0)" }, [], file: file, line: line)
    }

    func objects(_ c: PersistentContainer, _ entity: String, _ predicate: String? = nil) throws -> [ManagedObject] {
        var r = FetchRequest<ManagedObject>(entityName: entity)
        if let predicate { try r.setPredicate(predicate) }
        r.sortDescriptors = [SortKey("n")]
        return try c.newContext().fetch(r)
    }

    // MARK: Version hashes

    func testTheStoreRecordsItsModelsHashesAndTheCheckAnswersFromThem() throws {
        let v1 = try ManagedObjectModel {
            EntityDescription("Note") {
                AttributeDescription("text", .string)
                AttributeDescription("n", .int16)
            }
        }
        // Same storage: user info, renaming identifiers, defaults, indexes do not change a hash.
        let same = try ManagedObjectModel {
            EntityDescription("Note", attributes: [
                AttributeDescription("text", .string, indexed: true, userInfo: ["a": "b"], renamingIdentifier: "body"),
                AttributeDescription("n", .int16, default: Int16(4)),
            ], relationships: [], userInfo: ["k": "v"])
        }
        XCTAssertEqual(v1.versionHash, same.versionHash)
        XCTAssertEqual(v1.entityVersionHashes, same.entityVersionHashes)
        let wider = try ManagedObjectModel {
            EntityDescription("Note") {
                AttributeDescription("text", .string)
                AttributeDescription("n", .int32)
            }
        }
        XCTAssertNotEqual(v1.versionHash, wider.versionHash)
        XCTAssertNotEqual(v1["Note"]?.attributesByName["n"]?.versionHash, wider["Note"]?.attributesByName["n"]?.versionHash)
        XCTAssertEqual(v1["Note"]?.attributesByName["text"]?.versionHash, wider["Note"]?.attributesByName["text"]?.versionHash)

        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("notes.kura")
        let c = try PersistentContainer(url: url, model: v1)
        try c.save { ctx in try ctx.insert("Note").setValue(Int16(7), forKey: "n") }
        let recorded = try c.database.read { tx -> [String: String] in
            var out: [String: String] = [:]
            let t = try tx.table("_kura_model")
            let rows = try tx.rows(in: t)
            while let row = try rows.next() {
                let v = try row.values()
                guard case .text(let e) = v[0], case .text(let h) = v[7] else { continue }
                if case .text(let p) = v[1] { out["\(e).\(p)"] = h } else { out[e] = h }
            }
            return out
        }
        c.close()
        XCTAssertEqual(recorded[""], v1.versionHash)
        XCTAssertEqual(recorded["Note"], v1.entityVersionHashes["Note"])
        XCTAssertEqual(recorded["Note.n"], v1["Note"]?.attributesByName["n"]?.versionHash)
        let before = try bytes(url)
        let check = try PersistentContainer.compatibility(ofStoreAt: url, with: same)
        XCTAssertEqual(check.storedVersionHash, v1.versionHash)
        XCTAssertFalse(check.isMigrationRequired)
        // int16 → int32 is invisible in the catalog, but the hashes see it.
        let widen = try PersistentContainer.compatibility(ofStoreAt: url, with: wider)
        XCTAssertTrue(widen.isMigrationRequired)
        XCTAssertTrue(widen.canMigrateLightweight)
        XCTAssertEqual(widen.changes.map(\.kind), [.recorded], "\(widen.changes)")
        XCTAssertThrowsError(try PersistentContainer(url: url, model: wider)) { XCTAssertEqual(($0 as? KuraError)?.code, .modelMismatch) }
        XCTAssertEqual(try bytes(url), before, "checks and a refused open changed the store")
        let migrated = try PersistentContainer(url: url, model: wider, migration: .lightweight)
        XCTAssertEqual(try objects(migrated, "Note").first?["n"] as? Int32, 7)
        migrated.close()
        XCTAssertEqual(try PersistentContainer.compatibility(ofStoreAt: url, with: wider).storedVersionHash, wider.versionHash)
    }

    // MARK: Type changes

    static func typed(_ types: [(String, AttributeType)], renames: [String: String] = [:], indexed: Set<String> = []) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Item", attributes: types.map { name, type in
                AttributeDescription(name, type, indexed: indexed.contains(name), renamingIdentifier: renames[name])
            }, relationships: [])
        }
    }

    func testLosslessTypeChangesConvertEveryValueAndKeepIndexesConsistent() throws {
        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("items.kura")
        let v1 = try Self.typed([("n", .int64), ("count", .int32), ("price", .int64), ("flag", .bool), ("code", .string), ("ratio", .double), ("size", .int16)], indexed: ["count"])
        let c1 = try PersistentContainer(url: url, model: v1)
        try c1.save { ctx in
            for i in 0..<50 {
                let o = try ctx.insert("Item")
                try o.setValue(Int64(i), forKey: "n")
                try o.setValue(Int32(i * 1000), forKey: "count")
                try o.setValue(Int64(i) - 25, forKey: "price")
                try o.setValue(i % 2 == 0, forKey: "flag")
                if i % 5 != 0 { try o.setValue(String(i * 3), forKey: "code") }
                try o.setValue(Double(i) * 2, forKey: "ratio")
                try o.setValue(Int16(i), forKey: "size")
            }
        }
        c1.close()
        // count int32 → string (indexed), price int64 → double, flag bool → int16,
        // code string → int64, ratio double → int32, size int16 renamed `bytes` and → int64.
        let v2 = try Self.typed([("n", .int64), ("count", .string), ("price", .double), ("flag", .int16), ("code", .int64), ("ratio", .int32), ("bytes", .int64)],
                                renames: ["bytes": "size"], indexed: ["count"])
        let plan = try PersistentContainer.compatibility(ofStoreAt: url, with: v2)
        XCTAssertTrue(plan.canMigrateLightweight, "\(plan.unsupported)")
        XCTAssertEqual(plan.changes.filter { $0.kind == .converted }.count, 5, "\(plan.changes)")
        XCTAssertTrue(plan.changes.contains { $0.kind == .renamed && $0.description.contains("Item.bytes: renamed from \"size\"") }, "\(plan.changes)")
        let c2 = try PersistentContainer(url: url, model: v2, migration: .lightweight)
        let all = try objects(c2, "Item")
        XCTAssertEqual(all.count, 50)
        for (i, o) in all.enumerated() {
            XCTAssertEqual(o["count"] as? String, String(i * 1000))
            XCTAssertEqual(o["price"] as? Double, Double(i - 25))
            XCTAssertEqual(o["flag"] as? Int16, i % 2 == 0 ? 1 : 0)
            XCTAssertEqual(o["code"] as? Int64, i % 5 == 0 ? nil : Int64(i * 3))
            XCTAssertEqual(o["ratio"] as? Int32, Int32(i * 2))
            XCTAssertEqual(o["bytes"] as? Int64, Int64(i))
        }
        // The rebuilt index answers as a scan would.
        XCTAssertEqual(try objects(c2, "Item", "count == '7000'").map { $0["n"] as? Int64 }, [7])
        XCTAssertEqual(try objects(c2, "Item", "count BEGINSWITH '4'").count, 11)
        XCTAssertTrue(try c2.database.read { tx in try tx.indexes(of: "Item").contains { $0.name == "Item_count_index" } })
        try integrity(c2)
        c2.close()
    }

    func testALossyConversionIsRefusedNamingTheObjectAndLeavesTheStoreByteIdentical() throws {
        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("items.kura")
        let c1 = try PersistentContainer(url: url, model: try Self.typed([("n", .int64), ("big", .int64), ("text", .string)]))
        try c1.save { ctx in
            for (i, v) in [5, 70_000, 9].enumerated() {
                let o = try ctx.insert("Item")
                try o.setValue(Int64(i), forKey: "n")
                try o.setValue(Int64(v), forKey: "big")
                try o.setValue(i == 2 ? "12a" : "12", forKey: "text")
            }
        }
        c1.close()
        let before = try bytes(url)
        for (model, attribute, object, value) in [
            (try Self.typed([("n", .int64), ("big", .int16), ("text", .string)]), "Item.big from int64 to int16", "kura:///Item/p2", "70000"),
            (try Self.typed([("n", .int64), ("big", .int64), ("text", .int64)]), "Item.text from string to int64", "kura:///Item/p3", "12a"),
        ] {
            XCTAssertThrowsError(try PersistentContainer(url: url, model: model, migration: .lightweight)) { error in
                let e = error as? KuraError
                XCTAssertEqual(e?.code, .validation)
                for part in [attribute, object, value] { XCTAssertTrue(e?.message.contains(part) ?? false, "\(part) not in \(String(describing: e))") }
            }
            XCTAssertEqual(try bytes(url), before, "a refused conversion changed the store")
        }
    }

    // MARK: Optional → required

    func testOptionalToRequiredFillsTheDefaultOrNamesTheObjectsWithout() throws {
        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("items.kura")
        let c1 = try PersistentContainer(url: url, model: try Self.typed([("n", .int64), ("label", .string)]))
        try c1.save { ctx in
            for i in 0..<4 {
                let o = try ctx.insert("Item")
                try o.setValue(Int64(i), forKey: "n")
                if i % 2 == 0 { try o.setValue("x\(i)", forKey: "label") }
            }
        }
        c1.close()
        let before = try bytes(url)
        let noDefault = try ManagedObjectModel {
            EntityDescription("Item") {
                AttributeDescription("n", .int64)
                AttributeDescription("label", .string, optional: false)
            }
        }
        XCTAssertThrowsError(try PersistentContainer(url: url, model: noDefault, migration: .lightweight)) { error in
            let e = error as? KuraError
            XCTAssertEqual(e?.code, .validation)
            XCTAssertTrue(e?.message.contains("cannot make Item.label required: 2 objects have no value (kura:///Item/p2, kura:///Item/p4)") ?? false, "\(String(describing: e))")
        }
        XCTAssertEqual(try bytes(url), before, "the refused migration changed the store")
        let withDefault = try ManagedObjectModel {
            EntityDescription("Item") {
                AttributeDescription("n", .int64)
                AttributeDescription("label", .string, optional: false, default: "none")
            }
        }
        let c2 = try PersistentContainer(url: url, model: withDefault, migration: .lightweight)
        XCTAssertEqual(try objects(c2, "Item").map { $0["label"] as? String }, ["x0", "none", "x2", "none"])
        XCTAssertEqual(try objects(c2, "Item", "label == 'none'").count, 2, "the default is stored, so predicates see it")
        try integrity(c2)
    }

    // MARK: Entity rename

    func testAnEntityRenamedThroughItsRenamingIdentifierKeepsObjectsRelationshipsAndIDs() throws {
        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("lib.kura")
        let v1 = try ManagedObjectModel {
            EntityDescription("Book") {
                AttributeDescription("n", .int64, indexed: true)
                RelationshipDescription("shelf", to: "Shelf", inverse: "books")
                RelationshipDescription("tags", to: "Tag", inverse: "books", toMany: true)
            }
            EntityDescription("Shelf") {
                AttributeDescription("n", .int64)
                RelationshipDescription("books", to: "Book", inverse: "shelf", toMany: true)
            }
            EntityDescription("Tag") {
                AttributeDescription("n", .int64)
                RelationshipDescription("books", to: "Book", inverse: "tags", toMany: true)
            }
        }
        let c1 = try PersistentContainer(url: url, model: v1)
        try c1.save { ctx in
            let shelf = try ctx.insert("Shelf")
            try shelf.setValue(Int64(1), forKey: "n")
            let tag = try ctx.insert("Tag")
            try tag.setValue(Int64(9), forKey: "n")
            for i in 0..<3 {
                let b = try ctx.insert("Book")
                try b.setValue(Int64(i), forKey: "n")
                try b.setValue(shelf, forKey: "shelf")
                try b.setValue([tag], forKey: "tags")
            }
        }
        c1.close()
        let v2 = try ManagedObjectModel {
            EntityDescription("Volume", attributes: [AttributeDescription("n", .int64, indexed: true)], relationships: [
                RelationshipDescription("shelf", to: "Shelf", inverse: "volumes"),
                RelationshipDescription("tags", to: "Tag", inverse: "volumes", toMany: true),
            ], renamingIdentifier: "Book")
            EntityDescription("Shelf") {
                AttributeDescription("n", .int64)
                RelationshipDescription("volumes", to: "Volume", inverse: "shelf", toMany: true, renamingIdentifier: "books")
            }
            EntityDescription("Tag") {
                AttributeDescription("n", .int64)
                RelationshipDescription("volumes", to: "Volume", inverse: "tags", toMany: true, renamingIdentifier: "books")
            }
        }
        let plan = try PersistentContainer.compatibility(ofStoreAt: url, with: v2)
        XCTAssertTrue(plan.canMigrateLightweight, "\(plan.unsupported)")
        XCTAssertTrue(plan.differences.contains { $0.contains("Volume: renamed from \"Book\"") }, "\(plan.differences)")
        let c2 = try PersistentContainer(url: url, model: v2, migration: .lightweight)
        let volumes = try objects(c2, "Volume")
        XCTAssertEqual(volumes.map { $0["n"] as? Int64 }, [0, 1, 2])
        XCTAssertEqual(volumes.map(\.objectID.uriRepresentation), ["kura:///Volume/p1", "kura:///Volume/p2", "kura:///Volume/p3"])
        let ctx = c2.newContext()
        let shelf = try XCTUnwrap(try ctx.fetch(FetchRequest<ManagedObject>(entityName: "Shelf")).first)
        XCTAssertEqual((try shelf.value(forKey: "volumes") as? ObjectList)?.count, 3)
        let tag = try XCTUnwrap(try ctx.fetch(FetchRequest<ManagedObject>(entityName: "Tag")).first)
        XCTAssertEqual((try tag.value(forKey: "volumes") as? ObjectList)?.count, 3)
        let v = try XCTUnwrap(try ctx.fetch(FetchRequest<ManagedObject>(entityName: "Volume")).first)
        XCTAssertEqual((try v.value(forKey: "shelf") as? ManagedObject)?.objectID, shelf.objectID)
        XCTAssertEqual(try objects(c2, "Volume", "n == 1").count, 1)
        try c2.database.read { tx in XCTAssertFalse(try tx.tableExists("Book")) }
        try integrity(c2)
    }

    // MARK: Staged migration

    static let people1 = try! ManagedObjectModel {
        EntityDescription("Person") {
            AttributeDescription("n", .int64)
            AttributeDescription("name", .string)
        }
    }
    static let people2 = try! ManagedObjectModel {
        EntityDescription("Person") {
            AttributeDescription("n", .int64)
            AttributeDescription("first", .string, optional: false)
            AttributeDescription("last", .string)
        }
    }
    static let people3 = try! ManagedObjectModel {
        EntityDescription("Person") {
            AttributeDescription("n", .int64)
            AttributeDescription("first", .string, optional: false, indexed: true)
            AttributeDescription("last", .string)
            AttributeDescription("age", .int32, default: Int32(30))
        }
    }

    static func split(calls: Locked<Int>) -> CustomMigrationStage {
        CustomMigrationStage(from: people1, to: people2) { data in
            calls.mutate { $0 += 1 }
            try data.forEachObject(of: "Person") { p in
                guard case .text(let name) = try p.sourceValue("name") else { return }
                let parts = name.split(separator: " ", maxSplits: 1).map(String.init)
                try p.setValue(.text(parts[0]), for: "first")
                if parts.count > 1 { try p.setValue(.text(parts[1]), for: "last") }
            }
        }
    }

    func testStagedMigrationRunsACustomStageAndStartsFromTheRecordedVersion() throws {
        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("people.kura")
        let c1 = try PersistentContainer(url: url, model: Self.people1)
        try c1.save { ctx in
            for (i, name) in ["Ada Lovelace", "Grace Hopper", "Plato"].enumerated() {
                let p = try ctx.insert("Person")
                try p.setValue(Int64(i), forKey: "n")
                try p.setValue(name, forKey: "name")
            }
        }
        c1.close()
        let calls = Locked(0)
        let seen = Locked<[MigrationProgress]>([])
        let staged = StagedMigration(models: [Self.people1, Self.people2, Self.people3], customStages: [Self.split(calls: calls)],
                                     progress: { p in seen.mutate { $0.append(p) } })
        let c3 = try PersistentContainer(url: url, model: Self.people3, migration: .staged(staged))
        XCTAssertEqual(calls.value, 1)
        let people = try objects(c3, "Person")
        XCTAssertEqual(people.map { $0["first"] as? String }, ["Ada", "Grace", "Plato"])
        XCTAssertEqual(people.map { $0["last"] as? String }, ["Lovelace", "Hopper", nil])
        XCTAssertEqual(people.map { $0["age"] as? Int32 }, [30, 30, 30])
        XCTAssertEqual(try objects(c3, "Person", "first == 'Grace'").count, 1)
        XCTAssertEqual(Set(seen.value.map(\.stage)), [1, 2])
        XCTAssertTrue(seen.value.allSatisfy { $0.stageCount == 2 })
        XCTAssertTrue(seen.value.contains { $0.stage == 1 && $0.completedRows == 3 && $0.totalRows == 3 && $0.step.contains("Person.first") }, "\(seen.value)")
        try integrity(c3)
        c3.close()
        XCTAssertEqual(try PersistentContainer.compatibility(ofStoreAt: url, with: Self.people3).storedVersionHash, Self.people3.versionHash)
        // Opening again starts from v3: the custom stage does not run again.
        _ = try PersistentContainer(url: url, model: Self.people3, migration: .staged(staged))
        XCTAssertEqual(calls.value, 1)
    }

    func testAStagedMigrationFromTheMiddleVersionAndAFailingStageLeaveTheRightStore() throws {
        let tmp = try TempDir()
        // A store at v2 starts at stage 2 → 3.
        let url2 = tmp.url.appendingPathComponent("v2.kura")
        let c2 = try PersistentContainer(url: url2, model: Self.people2)
        try c2.save { ctx in
            let p = try ctx.insert("Person")
            try p.setValue("Alan", forKey: "first")
        }
        c2.close()
        let calls = Locked(0)
        let staged = StagedMigration(models: [Self.people1, Self.people2, Self.people3], customStages: [Self.split(calls: calls)])
        let c3 = try PersistentContainer(url: url2, model: Self.people3, migration: .staged(staged))
        XCTAssertEqual(calls.value, 0)
        XCTAssertEqual(try objects(c3, "Person").map { $0["first"] as? String }, ["Alan"])
        c3.close()
        // A stage that leaves a required attribute empty fails naming the object; the store stays at v1.
        let url1 = tmp.url.appendingPathComponent("v1.kura")
        let c1 = try PersistentContainer(url: url1, model: Self.people1)
        try c1.save { ctx in try ctx.insert("Person").setValue(Int64(1), forKey: "n") }
        c1.close()
        let before = try bytes(url1)
        XCTAssertThrowsError(try PersistentContainer(url: url1, model: Self.people3, migration: .staged(staged))) { error in
            let e = error as? KuraError
            XCTAssertEqual(e?.code, .validation)
            XCTAssertTrue(e?.message.contains("Person.first required: 1 object has no value (kura:///Person/p1)") ?? false, "\(String(describing: e))")
        }
        XCTAssertEqual(try bytes(url1), before)
    }
}

extension ModelEvolutionTests {
    static func lists(ordered: Bool) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("List") {
                AttributeDescription("n", .int64)
                RelationshipDescription("items", to: "Entry", inverse: "list", toMany: true, ordered: ordered)
            }
            EntityDescription("Entry") {
                AttributeDescription("n", .int64)
                RelationshipDescription("list", to: "List", inverse: "items")
            }
        }
    }

    func testAToManyBecomingOrderedAndUnorderedAgainKeepsItsObjectsAndOrder() throws {
        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("lists.kura")
        let c1 = try PersistentContainer(url: url, model: try Self.lists(ordered: false))
        try c1.save { ctx in
            let list = try ctx.insert("List")
            for i in 0..<4 {
                let e = try ctx.insert("Entry")
                try e.setValue(Int64(i), forKey: "n")
                try e.setValue(list, forKey: "list")
            }
        }
        c1.close()
        func entries(_ c: PersistentContainer) throws -> [Int64?] {
            let ctx = c.newContext()
            let list = try XCTUnwrap(try ctx.fetch(FetchRequest<ManagedObject>(entityName: "List")).first)
            let items = try XCTUnwrap(try list.value(forKey: "items") as? ObjectList)
            return try items.map { try $0.value(forKey: "n") as? Int64 }
        }
        let plan = try PersistentContainer.compatibility(ofStoreAt: url, with: try Self.lists(ordered: true))
        XCTAssertTrue(plan.canMigrateLightweight, "\(plan.unsupported)")
        let c2 = try PersistentContainer(url: url, model: try Self.lists(ordered: true), migration: .lightweight)
        XCTAssertEqual(try entries(c2), [0, 1, 2, 3], "unordered → ordered keeps the row-ID order")
        // Reorder and save; then back to unordered keeps every object.
        let ctx = c2.newContext()
        let list = try XCTUnwrap(try ctx.fetch(FetchRequest<ManagedObject>(entityName: "List")).first)
        let items = try XCTUnwrap(try list.value(forKey: "items") as? ObjectList)
        try list.setValue(Array(items.reversed()), forKey: "items")
        try ctx.save()
        XCTAssertEqual(try entries(c2), [3, 2, 1, 0])
        try integrity(c2)
        c2.close()
        let c3 = try PersistentContainer(url: url, model: try Self.lists(ordered: false), migration: .lightweight)
        XCTAssertEqual(try entries(c3), [0, 1, 2, 3])
        try c3.database.read { tx in
            XCTAssertTrue(try XCTUnwrap(try tx.schema(of: try tx.table("Entry"))).columns.contains { $0.name == "_retired_list_order" })
        }
        try integrity(c3)
    }
}

extension ModelEvolutionTests {
    static func shelves(manyToMany: Bool) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Book") {
                AttributeDescription("n", .int64)
                RelationshipDescription("shelf", to: "Shelf", inverse: "books", toMany: manyToMany)
            }
            EntityDescription("Shelf") {
                AttributeDescription("n", .int64)
                RelationshipDescription("books", to: "Book", inverse: "shelf", toMany: true)
            }
        }
    }

    func testAToOneBecomingToManyAndBackMovesItsKeysThroughAJoinTable() throws {
        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("shelves.kura")
        let c1 = try PersistentContainer(url: url, model: try Self.shelves(manyToMany: false))
        try c1.save { ctx in
            var shelves: [ManagedObject] = []
            for i in 0..<2 {
                let s = try ctx.insert("Shelf")
                try s.setValue(Int64(i), forKey: "n")
                shelves.append(s)
            }
            for i in 0..<5 {
                let b = try ctx.insert("Book")
                try b.setValue(Int64(i), forKey: "n")
                if i < 4 { try b.setValue(shelves[i % 2], forKey: "shelf") }
            }
        }
        c1.close()
        func shelfOf(_ c: PersistentContainer) throws -> [Int64: [Int64]] {
            let ctx = c.newContext()
            var out: [Int64: [Int64]] = [:]
            for b in try ctx.fetch(FetchRequest<ManagedObject>(entityName: "Book")) {
                let n = try XCTUnwrap(try b.value(forKey: "n") as? Int64)
                let v = try b.value(forKey: "shelf")
                let targets = (v as? ObjectList).map { Array($0) } ?? (v as? ManagedObject).map { [$0] } ?? []
                out[n] = try targets.map { try XCTUnwrap(try $0.value(forKey: "n") as? Int64) }.sorted()
            }
            return out
        }
        let expected: [Int64: [Int64]] = [0: [0], 1: [1], 2: [0], 3: [1], 4: []]
        let toMany = try Self.shelves(manyToMany: true)
        let plan = try PersistentContainer.compatibility(ofStoreAt: url, with: toMany)
        XCTAssertTrue(plan.canMigrateLightweight, "\(plan.unsupported)")
        let c2 = try PersistentContainer(url: url, model: toMany, migration: .lightweight)
        XCTAssertEqual(try shelfOf(c2), expected)
        try integrity(c2)
        c2.close()
        // Back to to-one: each book has at most one shelf.
        let c3 = try PersistentContainer(url: url, model: try Self.shelves(manyToMany: false), migration: .lightweight)
        XCTAssertEqual(try shelfOf(c3), expected)
        try c3.database.read { tx in XCTAssertFalse(try tx.tableExists("_Book_shelf")) }
        try integrity(c3)
        c3.close()
        // A book on two shelves cannot go back to one: refused naming it, store unchanged.
        let c4 = try PersistentContainer(url: url, model: toMany, migration: .lightweight)
        try c4.save { ctx in
            let book = try XCTUnwrap(try ctx.fetch(FetchRequest<ManagedObject>(entityName: "Book")).first)
            try book.setValue(try ctx.fetch(FetchRequest<ManagedObject>(entityName: "Shelf")), forKey: "shelf")
        }
        c4.close()
        let before = try bytes(url)
        XCTAssertThrowsError(try PersistentContainer(url: url, model: try Self.shelves(manyToMany: false), migration: .lightweight)) { error in
            let e = error as? KuraError
            XCTAssertEqual(e?.code, .validation)
            XCTAssertTrue(e?.message.contains("cannot make Book.shelf to-one: object kura:///Book/p1 has several") ?? false, "\(String(describing: e))")
        }
        XCTAssertEqual(try bytes(url), before)
    }
}

extension ModelEvolutionTests {
    func testAnEntityGainingASubentityKeepsItsObjectsAndTheKeysPointingAtThem() throws {
        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("zoo.kura")
        let v1 = try ManagedObjectModel {
            EntityDescription("Animal") {
                AttributeDescription("name", .string)
            }
            EntityDescription("Zoo") {
                AttributeDescription("name", .string)
                RelationshipDescription("star", to: "Animal")
            }
        }
        let c1 = try PersistentContainer(url: url, model: v1)
        try c1.save { ctx in
            let a = try ctx.insert("Animal")
            try a.setValue("Rex", forKey: "name")
            let z = try ctx.insert("Zoo")
            try z.setValue("City", forKey: "name")
            try z.setValue(a, forKey: "star")
        }
        c1.close()
        let v2 = try ManagedObjectModel {
            EntityDescription("Animal") {
                AttributeDescription("name", .string)
            }
            EntityDescription("Dog", parent: "Animal") {
                AttributeDescription("breed", .string)
            }
            EntityDescription("Zoo") {
                AttributeDescription("name", .string)
                RelationshipDescription("star", to: "Animal")
            }
        }
        let plan = try PersistentContainer.compatibility(ofStoreAt: url, with: v2)
        XCTAssertTrue(plan.canMigrateLightweight, "\(plan.unsupported)")
        let c2 = try PersistentContainer(url: url, model: v2, migration: .lightweight)
        let ctx = c2.newContext()
        let dog = try ctx.insert("Dog")
        try dog.setValue("Fido", forKey: "name")
        try dog.setValue("collie", forKey: "breed")
        try ctx.save()
        let animals = try ctx.fetch(FetchRequest<ManagedObject>(entityName: "Animal"))
        XCTAssertEqual(Set(animals.map { "\($0.entity.name) \($0["name"] as? String ?? "nil")" }), ["Animal Rex", "Dog Fido"])
        let zoo = try XCTUnwrap(try ctx.fetch(FetchRequest<ManagedObject>(entityName: "Zoo")).first)
        let star = try XCTUnwrap(try zoo.value(forKey: "star") as? ManagedObject)
        XCTAssertEqual(star.objectID.uriRepresentation, "kura:///Animal/p1")
        try zoo.setValue(dog, forKey: "star")
        try ctx.save()
        let other = c2.newContext()
        XCTAssertEqual((try other.existingObject(with: zoo.objectID).value(forKey: "star") as? ManagedObject)?.entity.name, "Dog")
        try integrity(c2)
    }
}
