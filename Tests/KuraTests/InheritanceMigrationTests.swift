// Changes of inheritance and renames inside a hierarchy, inferred by a
// lightweight migration (Migration/RowMover.swift): an entity gaining a parent
// (its objects move into the hierarchy's table under offset row IDs, every key
// and join row pointing at them remapped), losing it (objects move out into
// their own table, IDs kept), and entities renamed inside a hierarchy (the
// `_entity` column and key companions rewritten). Each on a populated store:
// values, relationships from both sides after reopen, indexes and integrity;
// a refused case leaves the store byte-identical.

import Foundation
import XCTest
import Kura
import KuraEngine

final class InheritanceMigrationTests: XCTestCase {
    func integrity(_ c: PersistentContainer, file: StaticString = #filePath, line: UInt = #line) throws {
        let problems = try c.database.read { tx in try tx.checkIntegrity() }
        XCTAssertEqual(problems.map { "\($0)" }, [], file: file, line: line)
    }

    /// Animals, dogs (a subentity or not, possibly renamed), owners holding a
    /// dog, toys many-to-many with dogs, and zoos holding an animal.
    static func model(dogParent: String?, dog: String = "Dog", animal: String = "Animal", renamed: Bool = false) throws -> ManagedObjectModel {
        let dogAttributes = [AttributeDescription("breed", .string, indexed: true)] + (dogParent == nil ? [AttributeDescription("name", .string)] : [])
        return try ManagedObjectModel([
            EntityDescription(animal, attributes: [AttributeDescription("name", .string, indexed: true)], relationships: [],
                              renamingIdentifier: renamed ? "Animal" : nil),
            EntityDescription(dog, parent: dogParent, attributes: dogAttributes, relationships: [
                RelationshipDescription("owners", to: "Owner", inverse: "pet", toMany: true),
                RelationshipDescription("toys", to: "Toy", inverse: "dogs", toMany: true),
            ], renamingIdentifier: renamed ? "Dog" : nil),
            EntityDescription("Owner", attributes: [AttributeDescription("name", .string)], relationships: [
                RelationshipDescription("pet", to: dog, inverse: "owners"),
            ]),
            EntityDescription("Toy", attributes: [AttributeDescription("name", .string)], relationships: [
                RelationshipDescription("dogs", to: dog, inverse: "toys", toMany: true),
            ]),
            EntityDescription("Zoo", attributes: [AttributeDescription("name", .string)], relationships: [
                RelationshipDescription("star", to: animal),
            ]),
        ])
    }

    /// Everything the object API shows, as text, independent of row IDs.
    func snapshot(_ c: PersistentContainer, dog: String = "Dog", animal: String = "Animal") throws -> [String] {
        let ctx = c.newContext()
        var out: [String] = []
        func name(_ o: Any?) -> String { ((o as? ManagedObject)?["name"] as? String) ?? "nil" }
        for d in try ctx.fetch(FetchRequest<ManagedObject>(entityName: dog)) {
            let owners = try XCTUnwrap(try d.value(forKey: "owners") as? ObjectList).map { name($0) }.sorted()
            let toys = try XCTUnwrap(try d.value(forKey: "toys") as? ObjectList).map { name($0) }.sorted()
            out.append("dog \(name(d)) \(d["breed"] as? String ?? "nil") owners \(owners) toys \(toys)")
        }
        for o in try ctx.fetch(FetchRequest<ManagedObject>(entityName: "Owner")) {
            out.append("owner \(name(o)) pet \(name(try o.value(forKey: "pet")))")
        }
        for t in try ctx.fetch(FetchRequest<ManagedObject>(entityName: "Toy")) {
            out.append("toy \(name(t)) dogs \(try XCTUnwrap(try t.value(forKey: "dogs") as? ObjectList).map { name($0) }.sorted())")
        }
        for z in try ctx.fetch(FetchRequest<ManagedObject>(entityName: "Zoo")) {
            let star = try z.value(forKey: "star") as? ManagedObject
            out.append("zoo \(name(z)) star \(name(star)) \(star?.entity.name ?? "")")
        }
        out.append("animals \(try ctx.fetch(FetchRequest<ManagedObject>(entityName: animal)).map { "\($0.entity.name):\(name($0))" }.sorted())")
        // The index on breed answers as a scan does.
        var r = FetchRequest<ManagedObject>(entityName: dog)
        try r.setPredicate("breed == 'collie'")
        out.append("collies \(try ctx.fetch(r).map { name($0) }.sorted())")
        return out.sorted()
    }

    func populate(_ url: URL, dogParent: String?, starIsDog: Bool = false) throws {
        let c = try PersistentContainer(url: url, model: try Self.model(dogParent: dogParent))
        try c.save { ctx in
            var animals: [ManagedObject] = []
            for n in ["Cat", "Cow"] {
                let a = try ctx.insert("Animal")
                try a.setValue(n, forKey: "name")
                animals.append(a)
            }
            var dogs: [ManagedObject] = []
            for (n, b) in [("Rex", "collie"), ("Fido", "pug"), ("Lassie", "collie")] {
                let d = try ctx.insert("Dog")
                try d.setValue(n, forKey: "name")
                try d.setValue(b, forKey: "breed")
                dogs.append(d)
            }
            for (i, n) in ["Ann", "Bob", "Cid"].enumerated() {
                let o = try ctx.insert("Owner")
                try o.setValue(n, forKey: "name")
                try o.setValue(dogs[i == 2 ? 0 : i], forKey: "pet")
            }
            for (i, n) in ["ball", "bone"].enumerated() {
                let t = try ctx.insert("Toy")
                try t.setValue(n, forKey: "name")
                try t.setValue(i == 0 ? dogs : [dogs[1]], forKey: "dogs")
            }
            let z = try ctx.insert("Zoo")
            try z.setValue("City", forKey: "name")
            try z.setValue(starIsDog && dogParent != nil ? dogs[2] : animals[1], forKey: "star")
        }
        c.close()
    }

    static let expected = [
        "animals [\"Animal:Cat\", \"Animal:Cow\"]",
        "collies [\"Lassie\", \"Rex\"]",
        "dog Fido pug owners [\"Bob\"] toys [\"ball\", \"bone\"]",
        "dog Lassie collie owners [] toys [\"ball\"]",
        "dog Rex collie owners [\"Ann\", \"Cid\"] toys [\"ball\"]",
        "owner Ann pet Rex", "owner Bob pet Fido", "owner Cid pet Rex",
        "toy ball dogs [\"Fido\", \"Lassie\", \"Rex\"]", "toy bone dogs [\"Fido\"]",
        "zoo City star Cow Animal",
    ]

    func testAnEntityGainingAParentMovesIntoTheHierarchyWithEveryKeyRemapped() throws {
        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("zoo.kura")
        try populate(url, dogParent: nil)
        let c0 = try PersistentContainer(url: url, model: try Self.model(dogParent: nil))
        XCTAssertEqual(try snapshot(c0), Self.expected)
        c0.close()
        let v2 = try Self.model(dogParent: "Animal")
        let plan = try PersistentContainer.compatibility(ofStoreAt: url, with: v2)
        XCTAssertTrue(plan.canMigrateLightweight, "\(plan.unsupported)")
        XCTAssertTrue(plan.changes.contains { $0.description.contains("Dog: now in hierarchy \"Animal\"") }, "\(plan.changes)")
        try PersistentContainer(url: url, model: v2, migration: .lightweight).close()
        let c2 = try PersistentContainer(url: url, model: v2)
        var want = Self.expected
        want[0] = "animals [\"Animal:Cat\", \"Animal:Cow\", \"Dog:Fido\", \"Dog:Lassie\", \"Dog:Rex\"]"
        XCTAssertEqual(try snapshot(c2), want.sorted())
        try c2.database.read { tx in
            XCTAssertFalse(try tx.tableExists("Dog"))
            XCTAssertEqual(try tx.rowCount(try tx.table("Animal")), 5)
        }
        // The moved dogs took IDs after the animals' (an offset), and new objects follow them.
        let ctx = c2.newContext()
        let ids = try ctx.fetch(FetchRequest<ManagedObject>(entityName: "Dog")).map(\.objectID.uriRepresentation).sorted()
        XCTAssertEqual(ids, ["kura:///Dog/p3", "kura:///Dog/p4", "kura:///Dog/p5"])
        let d = try ctx.insert("Dog")
        try d.setValue("New", forKey: "name")
        try ctx.save()
        XCTAssertEqual(d.objectID.uriRepresentation, "kura:///Dog/p6")
        try integrity(c2)
    }

    func testAnEntityLosingItsParentMovesOutKeepingItsIDs() throws {
        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("zoo.kura")
        try populate(url, dogParent: "Animal")
        let c1 = try PersistentContainer(url: url, model: try Self.model(dogParent: "Animal"))
        let before = try c1.newContext().fetch(FetchRequest<ManagedObject>(entityName: "Dog")).map(\.objectID.uriRepresentation).sorted()
        var want = Self.expected
        want[0] = "animals [\"Animal:Cat\", \"Animal:Cow\", \"Dog:Fido\", \"Dog:Lassie\", \"Dog:Rex\"]"
        XCTAssertEqual(try snapshot(c1), want.sorted())
        c1.close()
        let v1 = try Self.model(dogParent: nil)
        let plan = try PersistentContainer.compatibility(ofStoreAt: url, with: v1)
        XCTAssertTrue(plan.canMigrateLightweight, "\(plan.unsupported)")
        try PersistentContainer(url: url, model: v1, migration: .lightweight).close()
        let c2 = try PersistentContainer(url: url, model: v1)
        XCTAssertEqual(try snapshot(c2), Self.expected)
        XCTAssertEqual(try c2.newContext().fetch(FetchRequest<ManagedObject>(entityName: "Dog")).map(\.objectID.uriRepresentation).sorted(), before)
        try c2.database.read { tx in
            XCTAssertEqual(try tx.rowCount(try tx.table("Animal")), 2)
            XCTAssertEqual(try tx.rowCount(try tx.table("Dog")), 3)
        }
        try integrity(c2)
    }

    func testASplitThatWouldLeaveAKeyPointingAtAMovedObjectIsRefusedByteIdentical() throws {
        // The zoo's star is a dog: once dogs are no longer animals the key
        // cannot stay, and the migration must name the zoo and change nothing.
        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("zoo.kura")
        try populate(url, dogParent: "Animal", starIsDog: true)
        let bytes = try Data(contentsOf: url)
        XCTAssertThrowsError(try PersistentContainer(url: url, model: try Self.model(dogParent: nil), migration: .lightweight)) { error in
            let e = error as? KuraError
            XCTAssertEqual(e?.code, .validation, "\(String(describing: e))")
            XCTAssertTrue(e?.message.contains("Zoo") ?? false, "\(String(describing: e))")
            XCTAssertTrue(e?.message.contains("Dog") ?? false, "\(String(describing: e))")
        }
        XCTAssertEqual(try Data(contentsOf: url), bytes)
    }

    func testEntitiesRenamedInsideAHierarchyRewriteTheirRowsEntityNames() throws {
        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("zoo.kura")
        try populate(url, dogParent: "Animal", starIsDog: true)
        let v2 = try Self.model(dogParent: "Creature", dog: "Hound", animal: "Creature", renamed: true)
        let plan = try PersistentContainer.compatibility(ofStoreAt: url, with: v2)
        XCTAssertTrue(plan.canMigrateLightweight, "\(plan.unsupported)")
        try PersistentContainer(url: url, model: v2, migration: .lightweight).close()
        let c2 = try PersistentContainer(url: url, model: v2)
        let snap = try snapshot(c2, dog: "Hound", animal: "Creature")
        XCTAssertTrue(snap.contains("animals [\"Creature:Cat\", \"Creature:Cow\", \"Hound:Fido\", \"Hound:Lassie\", \"Hound:Rex\"]"), "\(snap)")
        XCTAssertTrue(snap.contains("zoo City star Lassie Hound"), "\(snap)")
        XCTAssertTrue(snap.contains("owner Cid pet Rex"), "\(snap)")
        XCTAssertTrue(snap.contains("toy ball dogs [\"Fido\", \"Lassie\", \"Rex\"]"), "\(snap)")
        XCTAssertTrue(snap.contains("dog Rex collie owners [\"Ann\", \"Cid\"] toys [\"ball\"]"), "\(snap)")
        try c2.database.read { tx in
            XCTAssertFalse(try tx.tableExists("Animal"))
            XCTAssertTrue(try tx.tableExists("Creature"))
        }
        try integrity(c2)
    }
}

extension InheritanceMigrationTests {
    /// People and cards, one-to-one (both keys stored) or one-to-many
    /// (the keys only in Card.holder).
    static func cards(toMany: Bool) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Person") {
                AttributeDescription("name", .string)
                RelationshipDescription("cards", to: "Card", inverse: "holder", toMany: toMany)
            }
            EntityDescription("Card") {
                AttributeDescription("name", .string)
                RelationshipDescription("holder", to: "Person", inverse: "cards")
            }
        }
    }

    func holdings(_ c: PersistentContainer) throws -> [String] {
        let ctx = c.newContext()
        var out: [String] = []
        for p in try ctx.fetch(FetchRequest<ManagedObject>(entityName: "Person")) {
            let v = try p.value(forKey: "cards")
            let cards = (v as? ObjectList).map { Array($0) } ?? (v as? ManagedObject).map { [$0] } ?? []
            out.append("\(p["name"] as? String ?? "") has \(cards.map { $0["name"] as? String ?? "" }.sorted())")
        }
        for card in try ctx.fetch(FetchRequest<ManagedObject>(entityName: "Card")) {
            out.append("\(card["name"] as? String ?? "") held by \((try card.value(forKey: "holder") as? ManagedObject)?["name"] as? String ?? "nobody")")
        }
        return out.sorted()
    }

    func testAToOneBecomingToManyAndBackMovesItsKeysToTheInverseSide() throws {
        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("cards.kura")
        let c1 = try PersistentContainer(url: url, model: try Self.cards(toMany: false))
        try c1.save { ctx in
            var people: [ManagedObject] = []
            for n in ["Ann", "Bob", "Cid"] {
                let p = try ctx.insert("Person")
                try p.setValue(n, forKey: "name")
                people.append(p)
            }
            for (i, n) in ["visa", "amex"].enumerated() {
                let card = try ctx.insert("Card")
                try card.setValue(n, forKey: "name")
                try card.setValue(people[i], forKey: "holder")
            }
        }
        let expected = ["Ann has [\"visa\"]", "Bob has [\"amex\"]", "Cid has []", "amex held by Bob", "visa held by Ann"]
        XCTAssertEqual(try holdings(c1), expected)
        c1.close()
        let toMany = try Self.cards(toMany: true)
        let plan = try PersistentContainer.compatibility(ofStoreAt: url, with: toMany)
        XCTAssertTrue(plan.canMigrateLightweight, "\(plan.unsupported)")
        let c2 = try PersistentContainer(url: url, model: toMany, migration: .lightweight)
        XCTAssertEqual(try holdings(c2), expected)
        try integrity(c2)
        c2.close()
        // Back to one-to-one: each person's card comes from Card.holder.
        let c3 = try PersistentContainer(url: url, model: try Self.cards(toMany: false), migration: .lightweight)
        XCTAssertEqual(try holdings(c3), expected)
        try integrity(c3)
        c3.close()
        // A person holding two cards cannot go back: refused naming her, store unchanged.
        let c4 = try PersistentContainer(url: url, model: toMany, migration: .lightweight)
        try c4.save { ctx in
            let ann = try XCTUnwrap(try ctx.fetch(FetchRequest<ManagedObject>(entityName: "Person")).first { $0["name"] as? String == "Ann" })
            let card = try ctx.insert("Card")
            try card.setValue("mc", forKey: "name")
            try card.setValue(ann, forKey: "holder")
        }
        c4.close()
        let before = try Data(contentsOf: url)
        XCTAssertThrowsError(try PersistentContainer(url: url, model: try Self.cards(toMany: false), migration: .lightweight)) { error in
            let e = error as? KuraError
            XCTAssertEqual(e?.code, .validation)
            XCTAssertTrue(e?.message.contains("cannot make Person.cards to-one: object kura:///Person/p1 has several") ?? false, "\(String(describing: e))")
        }
        XCTAssertEqual(try Data(contentsOf: url), before)
    }
}

extension InheritanceMigrationTests {
    func testAToOneWithoutInverseBecomingAToManyWritesItsKeysIntoTheNewInverse() throws {
        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("cards.kura")
        let v0 = try ManagedObjectModel {
            EntityDescription("Person") {
                AttributeDescription("name", .string)
                RelationshipDescription("cards", to: "Card")
            }
            EntityDescription("Card") {
                AttributeDescription("name", .string)
            }
        }
        let c0 = try PersistentContainer(url: url, model: v0)
        try c0.save { ctx in
            for (n, card) in [("Ann", "visa"), ("Bob", "amex"), ("Cid", nil)] {
                let p = try ctx.insert("Person")
                try p.setValue(n, forKey: "name")
                if let card {
                    let c = try ctx.insert("Card")
                    try c.setValue(card, forKey: "name")
                    try p.setValue(c, forKey: "cards")
                }
            }
        }
        c0.close()
        let c2 = try PersistentContainer(url: url, model: try Self.cards(toMany: true), migration: .lightweight)
        XCTAssertEqual(try holdings(c2), ["Ann has [\"visa\"]", "Bob has [\"amex\"]", "Cid has []", "amex held by Bob", "visa held by Ann"])
        try integrity(c2)
    }
}

extension InheritanceMigrationTests {
    // Moving rows must carry external values (files beside the store) with
    // them: the raw record holds a reference, not the bytes.
    func testObjectsWithExternalValuesMoveWithTheirBytes() throws {
        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("media.kura")
        func model(parent: String?) throws -> ManagedObjectModel {
            try ManagedObjectModel([
                EntityDescription("Media", attributes: [AttributeDescription("name", .string)], relationships: []),
                EntityDescription("Photo", parent: parent, attributes: [AttributeDescription("image", .data, allowsExternalBinaryDataStorage: true)]
                                    + (parent == nil ? [AttributeDescription("name", .string)] : []), relationships: []),
            ])
        }
        let big = Data((0..<(200 << 10)).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        let c1 = try PersistentContainer(url: url, model: try model(parent: nil))
        try c1.save { ctx in
            let m = try ctx.insert("Media")
            try m.setValue("m", forKey: "name")
            for i in 0..<2 {
                let p = try ctx.insert("Photo")
                try p.setValue("p\(i)", forKey: "name")
                try p.setValue(i == 0 ? big : Data([1, 2, 3]), forKey: "image")
            }
        }
        c1.close()
        try PersistentContainer(url: url, model: try model(parent: "Media"), migration: .lightweight).close()
        let c2 = try PersistentContainer(url: url, model: try model(parent: "Media"))
        var r = FetchRequest<ManagedObject>(entityName: "Photo")
        r.sortDescriptors = [SortKey("name")]
        let photos = try c2.newContext().fetch(r)
        XCTAssertEqual(photos.map { $0["name"] as? String }, ["p0", "p1"])
        XCTAssertEqual(photos.map { $0["image"] as? Data }, [big, Data([1, 2, 3])])
        try integrity(c2)
    }
}

extension InheritanceMigrationTests {
    // A whole hierarchy (root and subentity, a self-referencing to-one with
    // an `_entity` companion) merged under another root with objects: row IDs
    // offset, and keys with a companion, keys without one and the moved rows'
    // own keys all remapped.
    func testAHierarchyMergedUnderAnotherRootRemapsKeysWithAndWithoutCompanions() throws {
        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("garage.kura")
        func model(merged: Bool) throws -> ManagedObjectModel {
            try ManagedObjectModel([
                EntityDescription("Thing", attributes: [AttributeDescription("name", .string)], relationships: []),
                EntityDescription("Vehicle", parent: merged ? "Thing" : nil,
                                  attributes: merged ? [] : [AttributeDescription("name", .string)],
                                  relationships: [RelationshipDescription("tow", to: "Vehicle")]),
                EntityDescription("Car", parent: "Vehicle", attributes: [AttributeDescription("wheels", .int64)], relationships: []),
                EntityDescription("Garage", attributes: [AttributeDescription("name", .string)], relationships: [
                    RelationshipDescription("car", to: "Car"),
                    RelationshipDescription("vehicle", to: "Vehicle"),
                ]),
            ])
        }
        let c1 = try PersistentContainer(url: url, model: try model(merged: false))
        try c1.save { ctx in
            for n in ["a", "b", "c"] { try ctx.insert("Thing").setValue(n, forKey: "name") }
            let truck = try ctx.insert("Vehicle")
            try truck.setValue("truck", forKey: "name")
            let car = try ctx.insert("Car")
            try car.setValue("car", forKey: "name")
            try car.setValue(Int64(4), forKey: "wheels")
            try car.setValue(truck, forKey: "tow")
            try truck.setValue(car, forKey: "tow")
            let g = try ctx.insert("Garage")
            try g.setValue("g", forKey: "name")
            try g.setValue(car, forKey: "car")
            try g.setValue(truck, forKey: "vehicle")
        }
        c1.close()
        func describe(_ c: PersistentContainer) throws -> [String] {
            let ctx = c.newContext()
            var out: [String] = []
            for v in try ctx.fetch(FetchRequest<ManagedObject>(entityName: "Vehicle")) {
                let tow = try v.value(forKey: "tow") as? ManagedObject
                out.append("\(v.entity.name) \(v["name"] as? String ?? "") tows \(tow?["name"] as? String ?? "nil")")
            }
            for g in try ctx.fetch(FetchRequest<ManagedObject>(entityName: "Garage")) {
                let car = try g.value(forKey: "car") as? ManagedObject
                let vehicle = try g.value(forKey: "vehicle") as? ManagedObject
                out.append("garage car \(car?["name"] as? String ?? "nil") \(car?["wheels"] as? Int64 ?? 0) vehicle \(vehicle?["name"] as? String ?? "nil")")
            }
            return out.sorted()
        }
        let expected = ["Car car tows truck", "Vehicle truck tows car", "garage car car 4 vehicle truck"]
        XCTAssertEqual(try describe(try PersistentContainer(url: url, model: try model(merged: false))), expected)
        try PersistentContainer(url: url, model: try model(merged: true), migration: .lightweight).close()
        let c2 = try PersistentContainer(url: url, model: try model(merged: true))
        XCTAssertEqual(try describe(c2), expected)
        let things = try c2.newContext().fetch(FetchRequest<ManagedObject>(entityName: "Thing"))
        XCTAssertEqual(things.map { "\($0.entity.name) \($0["name"] as? String ?? "")" }.sorted(), ["Car car", "Thing a", "Thing b", "Thing c", "Vehicle truck"])
        XCTAssertEqual(Set(things.filter { $0.entity.name != "Thing" }.map(\.objectID.uriRepresentation)), ["kura:///Vehicle/p4", "kura:///Car/p5"])
        try c2.database.read { tx in XCTAssertFalse(try tx.tableExists("Vehicle")) }
        try integrity(c2)
    }
}

extension InheritanceMigrationTests {
    // A subentity removed from a hierarchy that stays shared left its objects
    // naming an entity the model lacks (nothing checked them): the migration
    // must refuse naming them and leave the store byte-identical.
    func testASubentityRemovedWithObjectsLeftIsRefusedByNameByteIdentical() throws {
        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("zoo.kura")
        func model(cats: Bool) throws -> ManagedObjectModel {
            try ManagedObjectModel([
                EntityDescription("Animal", attributes: [AttributeDescription("name", .string)], relationships: []),
                EntityDescription("Dog", parent: "Animal", attributes: [], relationships: []),
            ] + (cats ? [EntityDescription("Cat", parent: "Animal", attributes: [], relationships: [])] : []))
        }
        let c1 = try PersistentContainer(url: url, model: try model(cats: true))
        try c1.save { ctx in
            try ctx.insert("Dog").setValue("Rex", forKey: "name")
            try ctx.insert("Cat").setValue("Tom", forKey: "name")
        }
        c1.close()
        let before = try Data(contentsOf: url)
        XCTAssertThrowsError(try PersistentContainer(url: url, model: try model(cats: false), migration: .lightweight)) { error in
            let e = error as? KuraError
            XCTAssertEqual(e?.code, .validation)
            XCTAssertTrue(e?.message.contains("kura:///Cat/p2") ?? false, "\(String(describing: e))")
        }
        XCTAssertEqual(try Data(contentsOf: url), before)
        // Without cat objects, the same change migrates.
        let c2 = try PersistentContainer(url: url, model: try model(cats: true))
        let ctx = c2.newContext()
        for cat in try ctx.fetch(FetchRequest<ManagedObject>(entityName: "Cat")) { try ctx.delete(cat) }
        try ctx.save()
        c2.close()
        let c3 = try PersistentContainer(url: url, model: try model(cats: false), migration: .lightweight)
        XCTAssertEqual(try c3.newContext().fetch(FetchRequest<ManagedObject>(entityName: "Animal")).map { $0["name"] as? String }, ["Rex"])
        try integrity(c3)
    }
}
