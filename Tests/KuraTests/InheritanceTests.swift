// Entity inheritance (Model/EntityHierarchy.swift, issue 12 item 1): abstract
// entities, subentities three deep, inherited attributes and relationships,
// relationships to an abstract entity (to-one, to-many, many-to-many, both
// directions), uniqueness across siblings, fetches with and without
// subentities, `entity.name` predicates, delete rules through the hierarchy,
// object IDs of subentities, reopening, conflicts and persistent history on
// subentity rows, model validation, and the corpus's Moody model.

import Foundation
import XCTest
@testable import Kura

class RegionObject: ManagedObject {
    @Managed("name") var name: String
    @Managed("code") var code: Int32
    @ToMany("remarks") var remarks: [RemarkObject]
}

class CountryObject: RegionObject {
    @Managed("population") var population: Int64
    @ToOne("continent") var continent: ContinentObject?
}

final class ContinentObject: RegionObject {
    @ToMany("countries") var countries: [CountryObject]
}

final class RemarkObject: ManagedObject {
    @Managed("text") var text: String
    @ToOne("region") var region: RegionObject?
}

final class InheritanceTests: XCTestCase {
    /// Region (abstract; unique code; remarks cascade; tags many-to-many)
    ///   ├─ Country (population, unique iso within Countries; continent)
    ///   │    └─ Territory (governor; no class of its own: CountryObject)
    ///   └─ Continent (countries, deny)
    /// Remark.region → Region (to-one to the abstract entity); Tag ↔ Region.
    static func regionModel() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            // Declared child first, as Xcode files do: order must not matter.
            EntityDescription("Territory", parent: "Country") {
                AttributeDescription("governor", .string)
            }
            EntityDescription("Region", abstract: true, class: RegionObject.self) {
                AttributeDescription("name", .string, optional: false, indexed: true)
                AttributeDescription("code", .int32, default: 0)
                UniqueConstraint("code")
                RelationshipDescription("remarks", to: "Remark", inverse: "region", toMany: true, deleteRule: .cascade)
                RelationshipDescription("tags", to: "Tag", inverse: "regions", toMany: true)
            }
            EntityDescription("Country", parent: "Region", class: CountryObject.self) {
                AttributeDescription("population", .int64, default: 0)
                AttributeDescription("iso", .string)
                UniqueConstraint("iso")
                RelationshipDescription("continent", to: "Continent", inverse: "countries")
            }
            EntityDescription("Continent", parent: "Region", class: ContinentObject.self) {
                RelationshipDescription("countries", to: "Country", inverse: "continent", toMany: true, deleteRule: .deny)
            }
            EntityDescription("Remark", class: RemarkObject.self) {
                AttributeDescription("text", .string)
                RelationshipDescription("region", to: "Region", inverse: "remarks")
            }
            EntityDescription("Tag") {
                AttributeDescription("label", .string)
                RelationshipDescription("regions", to: "Region", inverse: "tags", toMany: true)
            }
        }
    }

    /// Saves Europe (Continent, code 150), France and Spain (Countries 250,
    /// 724, in Europe) and Guadeloupe (Territory 312, in Europe).
    @discardableResult
    func seed(_ context: ManagedObjectContext) throws -> [String: ManagedObject] {
        let europe = try context.insert(ContinentObject.self)
        europe.name = "Europe"
        europe.code = 150
        var out: [String: ManagedObject] = ["Europe": europe]
        for (name, code, population, entity) in [("France", Int32(250), Int64(68), "Country"), ("Spain", 724, 48, "Country"), ("Guadeloupe", 312, 1, "Territory")] {
            let c = try XCTUnwrap(try context.insert(entity) as? CountryObject)
            c.name = name
            c.code = code
            c.population = population
            c.continent = europe
            out[name] = c
        }
        try context.save()
        return out
    }

    func names(_ objects: [ManagedObject]) -> [String] { objects.map { ($0["name"] as? String) ?? "?" } }

    func assertKura<T>(_ body: @autoclosure () throws -> T, _ code: KuraError.Code, _ parts: [String], file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try body(), file: file, line: line) { error in
            guard let e = error as? KuraError else { return XCTFail("\(error)", file: file, line: line) }
            XCTAssertEqual(e.code, code, e.description, file: file, line: line)
            for p in parts { XCTAssertTrue(e.message.contains(p), "\"\(p)\" not in: \(e.message)", file: file, line: line) }
        }
    }

    func testResolvedModelInheritsPropertiesAndClasses() throws {
        let model = try Self.regionModel()
        let territory = try XCTUnwrap(model["Territory"])
        XCTAssertEqual(territory.attributes.map(\.name), ["name", "code", "population", "iso", "governor"])
        XCTAssertEqual(territory.declaredAttributes.map(\.name), ["governor"])
        XCTAssertEqual(territory.relationships.map(\.name), ["remarks", "tags", "continent"])
        XCTAssertEqual(territory.uniquenessConstraints, [["code"], ["iso"]])
        XCTAssertTrue(territory.objectClass == CountryObject.self, "an unbound subentity takes its parent's class")
        XCTAssertEqual(model["Region"]?.subentityNames, ["Country", "Continent"])
        XCTAssertEqual(model["Country"]?.subentityNames, ["Territory"])
        XCTAssertEqual(model["Region"]?.isAbstract, true)
        XCTAssertEqual(model["Country"]?.superentityName, "Region")
    }

    func testFetchesIncludeSubentitiesByDefaultAsTheirOwnClassesAndCanExcludeThem() throws {
        let container = try PersistentContainer.inMemory(model: Self.regionModel())
        try seed(container.newContext())
        let context = container.newContext()
        var regions = FetchRequest<RegionObject>(entityName: "Region", sortDescriptors: [SortKey("name")])
        let all = try context.fetch(regions)
        XCTAssertEqual(all.map(\.name), ["Europe", "France", "Guadeloupe", "Spain"])
        XCTAssertEqual(all.map(\.entity.name), ["Continent", "Country", "Territory", "Country"])
        XCTAssertTrue(all[0] is ContinentObject)
        XCTAssertTrue(all[1] is CountryObject && all[2] is CountryObject)
        XCTAssertEqual(all.map(\.objectID.entityName), ["Continent", "Country", "Territory", "Country"])
        XCTAssertEqual(try context.count(for: regions), 4)
        XCTAssertEqual(try context.fetchObjectIDs(regions).map(\.entityName), ["Continent", "Country", "Territory", "Country"])
        // Batched: faults of each row's own class, loaded a batch at a time.
        let batchContext = container.newContext()
        regions.fetchBatchSize = 3
        let faults = try batchContext.fetch(regions)
        XCTAssertEqual(faults.map { "\(type(of: $0))" }, ["ContinentObject", "CountryObject", "CountryObject", "CountryObject"])
        XCTAssertEqual(faults.map(\.name), ["Europe", "France", "Guadeloupe", "Spain"])
        XCTAssertEqual(try batchContext.fetchResults(regions).map(\.entity.name), ["Continent", "Country", "Territory", "Country"])
        regions.fetchBatchSize = 0
        regions.includesSubentities = false
        XCTAssertEqual(try context.fetch(regions).count, 0, "Region is abstract: no rows of its own")
        XCTAssertEqual(try context.count(for: regions), 0)

        var countries = FetchRequest<CountryObject>(entityName: "Country", sortDescriptors: [SortKey("name")])
        XCTAssertEqual(try context.fetch(countries).map(\.name), ["France", "Guadeloupe", "Spain"])
        XCTAssertEqual(try context.count(for: countries), 3)
        countries.includesSubentities = false
        XCTAssertEqual(try context.fetch(countries).map(\.name), ["France", "Spain"])
        XCTAssertEqual(try context.count(for: countries), 2)
        XCTAssertEqual(try context.fetch(FetchRequest<ManagedObject>(entityName: "Territory")).map(\.entity.name), ["Territory"])

        // The object path (pending changes) gives the same answers, with the new objects.
        let asia = try context.insert(ContinentObject.self)
        asia.name = "Asia"
        let japan = try XCTUnwrap(try context.insert("Country") as? CountryObject)
        japan.name = "Japan"
        japan.code = 392
        regions.includesSubentities = true
        XCTAssertEqual(try context.fetch(regions).map(\.name), ["Asia", "Europe", "France", "Guadeloupe", "Japan", "Spain"])
        XCTAssertEqual(try context.fetch(countries).map(\.name), ["France", "Japan", "Spain"])
        XCTAssertEqual(try context.count(for: regions), 6)
        regions.includesPendingChanges = false
        XCTAssertEqual(try context.fetch(regions).count, 4)
    }

    func testPredicatesAndSortsOverInheritedAttributesAndTheEntityName() throws {
        let container = try PersistentContainer.inMemory(model: Self.regionModel())
        try seed(container.newContext())
        let context = container.newContext()
        func fetch(_ entity: String, _ format: String, sort: [SortKey] = [SortKey("name")]) throws -> [String] {
            var r = FetchRequest<ManagedObject>(entityName: entity, sortDescriptors: sort)
            try r.setPredicate(format)
            return names(try context.fetch(r))
        }
        func check() throws {
            XCTAssertEqual(try fetch("Country", "code > 300"), ["Guadeloupe", "Spain"])
            XCTAssertEqual(try fetch("Region", "code < 300", sort: [SortKey("code", ascending: false)]), ["France", "Europe"])
            XCTAssertEqual(try fetch("Region", "entity.name == 'Country'"), ["France", "Spain"])
            XCTAssertEqual(try fetch("Region", "entity.name IN {'Continent', 'Territory'}"), ["Europe", "Guadeloupe"])
            XCTAssertEqual(try fetch("Region", "entity.name != 'Country' AND code > 200"), ["Guadeloupe"])
            XCTAssertEqual(try fetch("Country", "continent.name == 'Europe' AND population > 10"), ["France", "Spain"])
            XCTAssertEqual(try fetch("Continent", "ANY countries.population > 60"), ["Europe"])
            XCTAssertEqual(try fetch("Country", "TRUEPREDICATE", sort: [SortKey("population")]), ["Guadeloupe", "Spain", "France"])
        }
        try check()
        // The same through the object path: a pending change to an unrelated field.
        let remark = try context.insert(RemarkObject.self)
        remark.text = "pending"
        let spain = try XCTUnwrap(try context.fetch(FetchRequest<CountryObject>(entityName: "Country", predicate: try KuraPredicate(format: "name == 'Spain'"))).first)
        spain.population = 49
        try check()
        // `entity.name` on an entity that is alone in its table (object path).
        XCTAssertEqual(names(try context.fetch(FetchRequest<ManagedObject>(entityName: "Tag", predicate: try KuraPredicate(format: "entity.name == 'Tag'")))), [])
    }

    func testUniquenessSpansSiblingsAndIsScopedToTheDeclaringEntity() throws {
        let container = try PersistentContainer.inMemory(model: Self.regionModel())
        try seed(container.newContext())
        // A Continent may not take France's code (declared on Region), in one
        // context or against the stored rows.
        let c1 = container.newContext()
        let africa = try c1.insert(ContinentObject.self)
        africa.name = "Africa"
        africa.code = 250
        assertKura(try c1.save(), .validation, ["uniqueness constraint (code)", "kura:///Country/"])
        africa.code = 2
        let mali = try XCTUnwrap(try c1.insert("Country") as? CountryObject)
        mali.name = "Mali"
        mali.code = 2
        assertKura(try c1.save(), .validation, ["uniqueness constraint (code)"])
        mali.code = 466
        try c1.save()
        // "iso" is unique among Countries (Territory included); a Continent has no iso.
        let c2 = container.newContext()
        let fr = try XCTUnwrap(try c2.insert("Country") as? CountryObject)
        fr.name = "X"
        fr.code = 1000
        fr["iso"] = "FR"
        let gp = try XCTUnwrap(try c2.insert("Territory") as? CountryObject)
        gp.name = "Y"
        gp.code = 1001
        gp["iso"] = "FR"
        assertKura(try c2.save(), .validation, ["uniqueness constraint (iso)"])
        gp["iso"] = "GP"
        try c2.save()
        // The engine's unique index on the shared table backs the constraint up.
        XCTAssertThrowsError(try container.database.write { tx in
            var row = try XCTUnwrap(try tx.values(in: try tx.table("Region"), rowID: fr.objectID.rowID))
            let schema = try XCTUnwrap(try tx.schema(of: try tx.table("Region")))
            row[try XCTUnwrap(schema.position(of: "code"))] = .integer(150)
            _ = try tx.insert(row, into: try tx.table("Region"))
        })
    }

    func testRelationshipsToAnAbstractEntityInBothDirectionsSurviveReopen() throws {
        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("regions.kura")
        var ids: [String: ManagedObjectID] = [:]
        do {
            let container = try PersistentContainer(url: url, model: Self.regionModel())
            let context = container.newContext()
            let objects = try seed(context)
            for (n, o) in objects { ids[n] = o.objectID }
            let europe = try XCTUnwrap(objects["Europe"] as? RegionObject)
            let france = try XCTUnwrap(objects["France"] as? RegionObject)
            let guadeloupe = try XCTUnwrap(objects["Guadeloupe"] as? RegionObject)
            for (text, region) in [("old", europe), ("cheese", france), ("rum", guadeloupe), ("wine", france)] {
                let r = try context.insert(RemarkObject.self)
                r.text = text
                r.region = region  // to-one to the abstract Region: any subentity
                ids[text] = r.objectID
            }
            let tag = try context.insert("Tag")
            tag["label"] = "visited"
            try tag.add(france, to: "regions")
            try tag.add(guadeloupe, to: "regions")
            try europe.add(tag, to: "tags")  // the other side of the many-to-many
            let stray = try context.insert("Tag")
            assertKura(try tag.add(stray, to: "regions"), .invalidArgument, ["holds Region objects"])
            try context.delete(stray)
            try context.save()
            ids["Tag"] = tag.objectID
        }
        let container = try PersistentContainer(url: url, model: Self.regionModel())
        let context = container.newContext()
        let remarks = try context.fetch(FetchRequest<RemarkObject>(entityName: "Remark", sortDescriptors: [SortKey("text")]))
        XCTAssertEqual(remarks.map(\.text), ["cheese", "old", "rum", "wine"])
        XCTAssertEqual(remarks.map { $0.region?.objectID }, [ids["France"], ids["Europe"], ids["Guadeloupe"], ids["France"]])
        XCTAssertTrue(remarks[0].region is CountryObject)
        XCTAssertTrue(remarks[1].region is ContinentObject)
        XCTAssertEqual(remarks[2].region?.entity.name, "Territory")
        let france = try XCTUnwrap(try context.object(with: XCTUnwrap(ids["France"])) as? CountryObject)
        XCTAssertEqual(france.remarks.map(\.text).sorted(), ["cheese", "wine"])
        XCTAssertEqual(france.continent?.name, "Europe")
        let tag = try context.object(with: XCTUnwrap(ids["Tag"]))
        let tagged = try XCTUnwrap(try tag.value(forKey: "regions") as? ObjectList)
        XCTAssertEqual(Set(tagged.map(\.objectID)), Set([ids["Europe"], ids["France"], ids["Guadeloupe"]].compactMap { $0 }))
        XCTAssertEqual(Set(tagged.map(\.entity.name)), ["Continent", "Country", "Territory"])
        let europe = try XCTUnwrap(try context.object(with: XCTUnwrap(ids["Europe"])) as? ContinentObject)
        XCTAssertEqual(try (europe.value(forKey: "tags") as? ObjectList)?.map(\.objectID), [try XCTUnwrap(ids["Tag"])])
        XCTAssertEqual(europe.countries.map(\.name).sorted(), ["France", "Guadeloupe", "Spain"])
        // Uniquing: the remark's target is the instance the ID gives.
        XCTAssertTrue(remarks[0].region === france)
        XCTAssertNil(context.pendingError)
    }

    func testDeleteRulesThroughTheHierarchy() throws {
        let container = try PersistentContainer.inMemory(model: Self.regionModel())
        let context = container.newContext()
        let objects = try seed(context)
        let guadeloupe = try XCTUnwrap(objects["Guadeloupe"] as? CountryObject)
        let europe = try XCTUnwrap(objects["Europe"] as? ContinentObject)
        for text in ["a", "b"] {
            let r = try context.insert(RemarkObject.self)
            r.text = text
            r.region = guadeloupe
        }
        let kept = try context.insert(RemarkObject.self)
        kept.text = "kept"
        kept.region = europe
        try context.save()
        // Deny (declared on Continent): Europe still has countries.
        try context.delete(europe)
        assertKura(try context.save(), .validation, ["relationship \"countries\" has delete rule deny and holds 3 objects"])
        context.rollback()
        // Cascade declared on Region, applied to a Territory: its remarks go.
        try context.delete(guadeloupe)
        XCTAssertEqual(europe.countries.map(\.name).sorted(), ["France", "Spain"], "nullify: Country.continent's inverse drops it")
        try context.save()
        let fresh = container.newContext()
        XCTAssertEqual(names(try fresh.fetch(FetchRequest<ManagedObject>(entityName: "Country"))).sorted(), ["France", "Spain"])
        XCTAssertEqual(try fresh.fetch(FetchRequest<RemarkObject>(entityName: "Remark")).map(\.text), ["kept"])
        // With its countries gone, Europe can go; its remark cascades with it.
        for c in europe.countries { try context.delete(c) }
        try context.delete(europe)
        try context.save()
        XCTAssertEqual(try fresh.count(for: FetchRequest<ManagedObject>(entityName: "Region")), 0)
        XCTAssertEqual(try fresh.count(for: FetchRequest<ManagedObject>(entityName: "Remark")), 0)
    }

    func testObjectIDsOfSubentitiesResolveInTheHierarchyTable() throws {
        let container = try PersistentContainer.inMemory(model: Self.regionModel())
        let objects = try seed(container.newContext())
        let gid = try XCTUnwrap(objects["Guadeloupe"]?.objectID)
        XCTAssertEqual(gid.entityName, "Territory")
        let context = container.newContext()
        let g = try context.existingObject(with: gid)
        XCTAssertTrue(g is CountryObject)
        XCTAssertEqual(g["name"] as? String, "Guadeloupe")
        // Row IDs are unique across the hierarchy: the three Countries and the
        // Continent have four different ones.
        XCTAssertEqual(Set(objects.values.map(\.objectID.rowID)).count, 4)
        // An ID naming an ancestor gives the object of the row's own entity.
        let viaRegion = try context.object(with: try ManagedObjectID(uriRepresentation: "kura:///Region/p\(gid.rowID)"))
        XCTAssertTrue(viaRegion === g)
        let viaCountry = try context.object(with: try ManagedObjectID(uriRepresentation: "kura:///Country/p\(gid.rowID)"))
        XCTAssertTrue(viaCountry === g)
        // An ID naming an unrelated entity of the hierarchy finds no such object.
        let wrong = try context.object(with: try ManagedObjectID(uriRepresentation: "kura:///Continent/p\(gid.rowID)"))
        assertKura(try wrong.value(forKey: "name"), .notFound, ["is a Territory, not a Continent"])
        // One table for the hierarchy, an `_entity` column; Tag's table is as before inheritance.
        try container.database.read { tx in
            XCTAssertFalse(try tx.tableExists("Country"))
            let region = try XCTUnwrap(try tx.schema(of: try tx.table("Region"))).columns.map(\.name)
            XCTAssertEqual(region, ["name", "code", "population", "iso", "governor", "continent", "_entity", "_version"])
            XCTAssertEqual(try XCTUnwrap(try tx.schema(of: try tx.table("Tag"))).columns.map(\.name), ["label", "_version"])
            XCTAssertEqual(try XCTUnwrap(try tx.schema(of: try tx.table("Remark"))).columns.map(\.name), ["text", "region", "region_entity", "_version"])
        }
    }

    func testAnEntityColumnNamingNoSubentityIsCorruption() throws {
        let container = try PersistentContainer.inMemory(model: Self.regionModel())
        let id = try XCTUnwrap(try seed(container.newContext())["Spain"]?.objectID)
        try container.database.write { tx in
            let t = try tx.table("Region")
            var row = try XCTUnwrap(try tx.values(in: t, rowID: id.rowID))
            row[try XCTUnwrap(try tx.schema(of: t)?.position(of: "_entity"))] = .text("Remark")
            _ = try tx.update(row, in: t, rowID: id.rowID)
        }
        let context = container.newContext()
        assertKura(try context.fetch(FetchRequest<ManagedObject>(entityName: "Region")), .corrupt,
                   ["table \"Region\" row \(id.rowID)", "_entity holds \"Remark\""])
        assertKura(try context.existingObject(with: id), .corrupt, ["_entity holds \"Remark\""])
    }

    func testInsertingAnAbstractEntityIsAnError() throws {
        let container = try PersistentContainer.inMemory(model: Self.regionModel())
        let context = container.newContext()
        assertKura(try context.insert("Region"), .invalidArgument, ["entity \"Region\" is abstract", "Country, Territory, Continent"])
        assertKura(try context.insert(RegionObject.self), .invalidArgument, ["is abstract"])
        let o = RegionObject(context: context)
        XCTAssertNil(o.managedObjectContext)
        assertKura(try context.save(), .invalidArgument, ["is abstract"])
        XCTAssertFalse(context.hasChanges)
    }

    func testModelValidationNamesEntityAndProperty() {
        func refused(_ entities: [EntityDescription], _ parts: [String], line: UInt = #line) {
            XCTAssertThrowsError(try ManagedObjectModel(entities), line: line) { error in
                let message = (error as? ModelError)?.message ?? "\(error)"
                for p in parts { XCTAssertTrue(message.contains(p), "\"\(p)\" not in: \(message)", line: line) }
            }
        }
        refused([EntityDescription("A", parent: "Nope") {}], ["entity \"A\"", "parent entity \"Nope\""])
        refused([EntityDescription("A", parent: "B") {}, EntityDescription("B", parent: "A") {}], ["cycle", "A → B → A"])
        refused([EntityDescription("A", parent: "A") {}], ["cycle"])
        refused([EntityDescription("P") { AttributeDescription("x", .int16) },
                 EntityDescription("C", parent: "P") { AttributeDescription("x", .string) }],
                ["entity \"C\"", "attribute \"x\" is string", "as int16 from entity \"P\""])
        refused([EntityDescription("P") { RelationshipDescription("r", to: "P") },
                 EntityDescription("C", parent: "P") { AttributeDescription("r", .string) }],
                ["entity \"C\"", "attribute \"r\"", "relationship \"r\""])
        refused([EntityDescription("P") {},
                 EntityDescription("C1", parent: "P") { AttributeDescription("x", .int16) },
                 EntityDescription("C2", parent: "P") { AttributeDescription("x", .string) }],
                ["entities \"C1\" and \"C2\"", "\"x\""])
        refused([EntityDescription("P", class: CountryObject.self) {
                     AttributeDescription("name", .string)
                     AttributeDescription("code", .int32)
                     AttributeDescription("population", .int64)
                     RelationshipDescription("remarks", to: "Remark", inverse: "region", toMany: true)
                     RelationshipDescription("continent", to: "P")
                 },
                 EntityDescription("C", parent: "P", class: RemarkObject.self) { AttributeDescription("text", .string) },
                 EntityDescription("Remark") { AttributeDescription("text", .string); RelationshipDescription("region", to: "P", inverse: "remarks") }],
                ["entity \"C\"", "RemarkObject", "subclass"])
        // Same-type redeclaration is allowed and replaces the inherited description.
        XCTAssertNoThrow(try ManagedObjectModel([EntityDescription("P") { AttributeDescription("x", .int16) },
                                                 EntityDescription("C", parent: "P") { AttributeDescription("x", .int16, default: 3) }]))
    }

    func testConflictsAndMergePoliciesWorkOnSubentityRows() throws {
        let container = try PersistentContainer.inMemory(model: Self.regionModel())
        let id = try XCTUnwrap(try seed(container.newContext())["Guadeloupe"]?.objectID)
        let a = container.newContext(), b = container.newContext()
        let ga = try XCTUnwrap(try a.existingObject(with: id) as? CountryObject)
        let gb = try XCTUnwrap(try b.existingObject(with: id) as? CountryObject)
        ga.population = 2
        try a.save()
        gb["governor"] = "someone"
        assertKura(try b.save(), .mergeConflict, ["kura:///Territory/p\(id.rowID)", "population"])
        XCTAssertEqual(b.lastMergeConflicts.map(\.entityName), ["Territory"])
        b.mergePolicy = .mergeByPropertyObjectTrump
        try b.save()
        let check = try XCTUnwrap(try container.newContext().existingObject(with: id) as? CountryObject)
        XCTAssertEqual(check.population, 2)
        XCTAssertEqual(check["governor"] as? String, "someone")
    }

    func testPersistentHistoryRecordsSubentityNames() throws {
        let container = try PersistentContainer.inMemory(model: Self.regionModel(), persistentHistoryTracking: true)
        let context = container.newContext()
        let objects = try seed(context)
        let g = try XCTUnwrap(objects["Guadeloupe"] as? CountryObject)
        g.population = 3
        try context.save()
        let history = try container.history()
        XCTAssertEqual(history.count, 2)
        XCTAssertEqual(history[0].changes.map(\.objectID.entityName).sorted(), ["Continent", "Country", "Country", "Territory"])
        XCTAssertEqual(history[1].changes.map(\.objectID), [g.objectID])
        XCTAssertEqual(history[1].changes.first?.updatedProperties, ["population"])
    }

    func testMoodyModelNoLongerReportsInheritance() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let url = root.appendingPathComponent("../shared/corpus/xcdatamodel/objcio__core-data__Moody.contents").standardized
        guard FileManager.default.fileExists(atPath: url.path) else { throw XCTSkip("corpus not found at \(url.path)") }
        let doc = try XcodeModelDocument(contentsOf: url)
        XCTAssertEqual(doc.entity(named: "Region")?.isAbstract, true)
        XCTAssertEqual(doc.entity(named: "Country")?.parentEntity, "Region")
        // What still blocked Moody here was the transformable `colors` attribute
        // (compound indexes load since FetchIndexDescription).
        XCTAssertEqual(doc.unsupportedFeatures().map(\.kind), [])
        // Moody's hierarchy without those features loads and enforces the
        // uniqueness constraint of the abstract Region across its subentities.
        let text = try String(contentsOf: url, encoding: .utf8)
            .replacingOccurrences(of: #"<attribute name="colors"[^>]*/>"#, with: "", options: .regularExpression)
            .replacingOccurrences(of: #"<compoundIndexes>[\s\S]*?</compoundIndexes>"#, with: "", options: .regularExpression)
        let model = try XcodeModelDocument(xml: Data(text.utf8), path: url.path).makeModel()
        XCTAssertEqual(model["Country"]?.attributes.count, 5)
        XCTAssertEqual(model["Country"]?.uniquenessConstraints, [["numericISO3166Code", "uniquenessDummy"]])
        let context = try PersistentContainer.inMemory(model: model).newContext()
        assertKura(try context.insert("Region"), .invalidArgument, ["abstract"])
        for entity in ["Country", "Continent"] {
            let o = try context.insert(entity)
            o["numericISO3166Code"] = Int16(250)
            o["updatedAt"] = Date()
        }
        assertKura(try context.save(), .validation, ["uniqueness constraint (numericISO3166Code, uniquenessDummy)"])
    }

    func testXcodeModelsWithParentEntityAndIsAbstractLoad() throws {
        let doc = try XcodeModelDocument(xml: Data("""
        <model>
        <entity name="Leaf" parentEntity="Middle">
        <attribute name="leafOnly" optional="YES" attributeType="String"/>
        <fetchIndex name="byTitle"><fetchIndexElement property="title" type="Binary" order="ascending"/></fetchIndex>
        <uniquenessConstraints><uniquenessConstraint><constraint value="title"/><constraint value="leafOnly"/></uniquenessConstraint></uniquenessConstraints>
        </entity>
        <entity name="Base" isAbstract="YES">
        <attribute name="title" optional="YES" attributeType="String"/>
        <relationship name="owner" optional="YES" maxCount="1" deletionRule="Nullify" destinationEntity="Owner" inverseName="items" inverseEntity="Owner"/>
        </entity>
        <entity name="Middle" parentEntity="Base" isAbstract="YES"/>
        <entity name="Owner">
        <relationship name="items" optional="YES" toMany="YES" deletionRule="Cascade" destinationEntity="Base" inverseName="owner" inverseEntity="Base"/>
        </entity>
        </model>
        """.utf8), path: "inherit.xml")
        XCTAssertEqual(doc.unsupportedFeatures(), [])
        let model = try doc.makeModel()
        XCTAssertEqual(model["Leaf"]?.attributes.map(\.name), ["title", "leafOnly"])
        XCTAssertEqual(model["Leaf"]?.superentityName, "Middle")
        XCTAssertEqual(model["Middle"]?.isAbstract, true)
        // A subentity's index on an inherited attribute lands on the declaring entity.
        XCTAssertEqual(model["Base"]?.attributesByName["title"]?.isIndexed, true)
        let context = try PersistentContainer.inMemory(model: model).newContext()
        let owner = try context.insert("Owner")
        for title in ["a", "b"] {
            let leaf = try context.insert("Leaf")
            leaf["title"] = title
            leaf["owner"] = owner
        }
        try context.save()
        XCTAssertEqual(try (owner.value(forKey: "items") as? ObjectList)?.compactMap { $0["title"] as? String }, ["a", "b"])
        assertKura(try context.insert("Middle"), .invalidArgument, ["abstract", "Leaf"])

        for (xml, parts) in [
            (#"<model><entity name="A" parentEntity="Nope"/></model>"#, ["line 1", "parentEntity \"Nope\""]),
            ("<model>\n<entity name=\"A\" parentEntity=\"B\"/>\n<entity name=\"B\" parentEntity=\"A\"/></model>", ["line 2", "cycle"]),
        ] {
            assertKura(try XcodeModelDocument(xml: Data(xml.utf8), path: "bad.xml").makeModel(), .invalidArgument, parts)
        }
    }

    /// A fetched-results controller on a parent entity tracks its subentities'
    /// objects (the controller first compared entity names only).
    func testControllerOnAParentTracksSubentityObjectsFromThisAndOtherContexts() throws {
        let container = try PersistentContainer.inMemory(model: Self.regionModel())
        let main = container.newContext()
        try seed(main)
        try main.save()
        let request = FetchRequest<RegionObject>(entityName: "Region", sortDescriptors: [SortKey("name")])
        let controller = FetchedResultsController(fetchRequest: request, context: main)
        try controller.performFetch()
        XCTAssertEqual(controller.fetchedObjects?.map(\.name), ["Europe", "France", "Guadeloupe", "Spain"])
        var countryOnly = FetchRequest<CountryObject>(entityName: "Country", sortDescriptors: [SortKey("name")])
        countryOnly.includesSubentities = false
        let countries = FetchedResultsController(fetchRequest: countryOnly, context: main)
        try countries.performFetch()
        XCTAssertEqual(countries.fetchedObjects?.map(\.name), ["France", "Spain"])

        let asia = try main.insert(ContinentObject.self)
        asia.name = "Asia"
        asia.code = 142
        let territory = try main.insert("Territory")
        try territory.setValue("Aruba", forKey: "name")
        try territory.setValue(Int32(533), forKey: "code")
        main.processPendingChanges()
        XCTAssertEqual(controller.fetchedObjects?.map(\.name), ["Aruba", "Asia", "Europe", "France", "Guadeloupe", "Spain"])
        XCTAssertEqual(countries.fetchedObjects?.map(\.name), ["France", "Spain"], "a Territory is not a plain Country's row")
        try main.save()

        main.automaticallyMergesChangesFromStore = true
        let other = container.newContext()
        let japan = try other.insert(CountryObject.self)
        japan.name = "Japan"
        japan.code = 392
        try other.save()
        try main.mergePendingChanges()
        XCTAssertEqual(controller.fetchedObjects?.map(\.name), ["Aruba", "Asia", "Europe", "France", "Guadeloupe", "Japan", "Spain"])
        XCTAssertEqual(countries.fetchedObjects?.map(\.name), ["France", "Japan", "Spain"])
    }
}
