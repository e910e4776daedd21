// Compound fetch indexes (FetchIndexDescription): declared in the model, created
// as multi-column engine indexes with their orders on the hierarchy's table,
// kept consistent by saves, refused when malformed, and loaded from Xcode's
// multi-element <fetchIndex> and <compoundIndex>.

import Foundation
import XCTest
import Kura
import KuraEngine

final class FetchIndexTests: XCTestCase {
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Place", abstract: true) {
                AttributeDescription("name", .string)
                AttributeDescription("rank", .int32, default: 0)
                FetchIndexDescription("byRankName", on: "rank", "name")
            }
            EntityDescription("City", parent: "Place") {
                AttributeDescription("population", .int64, default: 0)
                RelationshipDescription("country", to: "Country", inverse: "cities")
                FetchIndexDescription("byCountryPopulation", [.ascending("country"), .descending("population")])
            }
            EntityDescription("Country") {
                AttributeDescription("name", .string)
                RelationshipDescription("cities", to: "City", inverse: "country", toMany: true)
            }
        }
    }

    func testCompoundIndexesAreEngineIndexesOnTheHierarchyTableAndStayConsistent() throws {
        let model = try Self.model()
        XCTAssertEqual(model["City"]?.fetchIndexes.map(\.name), ["byRankName", "byCountryPopulation"])
        XCTAssertEqual(model["City"]?.declaredFetchIndexes.map(\.name), ["byCountryPopulation"])
        let container = try PersistentContainer.inMemory(model: model)
        try container.database.read { tx in
            let byName = Dictionary(try tx.indexes(of: "Place").map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
            let cp = try XCTUnwrap(byName["City_fetchIndex_byCountryPopulation"], "\(byName.keys.sorted())")
            XCTAssertEqual(cp.columns.map(\.name), ["country", "population"])
            XCTAssertEqual(cp.columns.map(\.descending), [false, true])
            XCTAssertFalse(cp.isUnique)
            let rn = try XCTUnwrap(byName["Place_fetchIndex_byRankName"])
            XCTAssertEqual(rn.columns.map(\.name), ["rank", "name"])
            XCTAssertEqual(rn.columns.map(\.descending), [false, false])
            XCTAssertFalse(try tx.tableExists("City"))
        }

        let context = container.newContext()
        var countries: [ManagedObject] = []
        for c in 0..<3 {
            let country = try context.insert("Country")
            try country.setValue("C\(c)", forKey: "name")
            countries.append(country)
        }
        // (name, rank, population, country) chosen so ranks and populations repeat.
        var expected: [(name: String, rank: Int32, population: Int64, country: Int)] = []
        for i in 0..<40 {
            let city = try context.insert("City")
            let row = (name: "city\(i)", rank: Int32(i % 5), population: Int64((i * 7919) % 2000), country: i % 3)
            try city.setValue(row.name, forKey: "name")
            try city.setValue(row.rank, forKey: "rank")
            try city.setValue(row.population, forKey: "population")
            try city.setValue(countries[row.country], forKey: "country")
            expected.append(row)
        }
        try context.save()
        // Updates and deletes go through the index too.
        let all = try context.fetch(FetchRequest<ManagedObject>(entityName: "City", sortDescriptors: [SortKey("name")]))
        for (k, city) in all.enumerated() where k % 4 == 0 {
            try city.setValue(Int64(5000 + k), forKey: "population")
            if let i = expected.firstIndex(where: { $0.name == city["name"] as? String }) { expected[i].population = Int64(5000 + k) }
        }
        for (k, city) in all.enumerated() where k % 9 == 0 {
            try context.delete(city)
            expected.removeAll { $0.name == city["name"] as? String }
        }
        try context.save()
        try container.database.read { tx in XCTAssertEqual(try tx.checkIntegrity(), []) }

        let fresh = container.newContext()
        var request = FetchRequest<ManagedObject>(entityName: "City", sortDescriptors: [SortKey("population", ascending: false), SortKey("name")])
        let country1 = try fresh.existingObject(with: countries[1].objectID)
        try request.setPredicate("country == %@ AND population > 900", .object(country1))
        let got = try fresh.fetch(request).map { $0["name"] as? String ?? "?" }
        let want = expected.filter { $0.country == 1 && $0.population > 900 }
            .sorted { ($0.population, $1.name) > ($1.population, $0.name) }.map(\.name)
        XCTAssertEqual(got, want)
        XCTAssertFalse(want.isEmpty)
        var byRank = FetchRequest<ManagedObject>(entityName: "Place", sortDescriptors: [SortKey("rank"), SortKey("name")])
        try byRank.setPredicate("rank == 2 AND name BEGINSWITH 'city1'")
        XCTAssertEqual(try fresh.fetch(byRank).map { $0["name"] as? String ?? "?" },
                       expected.filter { $0.rank == 2 && $0.name.hasPrefix("city1") }.map(\.name).sorted())
    }

    func testMalformedFetchIndexesAreModelErrors() {
        func refused(_ index: FetchIndexDescription, _ part: String, line: UInt = #line) {
            XCTAssertThrowsError(try ManagedObjectModel {
                EntityDescription("A") {
                    AttributeDescription("x", .string)
                    RelationshipDescription("many", to: "A", toMany: true)
                    index
                }
            }, line: line) { error in
                XCTAssertTrue("\(error)".contains(part), "\(error)", line: line)
            }
        }
        refused(FetchIndexDescription("i", on: "nope"), "fetch index \"i\" names \"nope\"")
        refused(FetchIndexDescription("i", on: "x", "many"), "to-many relationship \"many\"")
        refused(FetchIndexDescription("i", []), "fetch index \"i\" has no elements")
        refused(FetchIndexDescription("", on: "x"), "without a name")
        XCTAssertThrowsError(try ManagedObjectModel {
            EntityDescription("A") {
                AttributeDescription("x", .string)
                FetchIndexDescription("i", on: "x")
                FetchIndexDescription("i", [.descending("x")])
            }
        }) { XCTAssertTrue("\($0)".contains("two fetch indexes named \"i\""), "\($0)") }
    }

    func testXcodeMultiElementFetchIndexesAndCompoundIndexesLoad() throws {
        let xml = """
        <?xml version="1.0" encoding="UTF-8" standalone="yes"?>
        <model type="com.apple.IDECoreDataModeler.DataModel" documentVersion="1.0" minimumToolsVersion="Automatic" sourceLanguage="Swift">
            <entity name="Mood" representedClassName="Mood">
                <attribute name="date" attributeType="Date"/>
                <attribute name="country" optional="YES" attributeType="String"/>
                <attribute name="rating" optional="YES" attributeType="Integer 16" defaultValueString="0"/>
                <compoundIndexes><compoundIndex><index value="rating"/><index value="country"/></compoundIndex></compoundIndexes>
                <fetchIndex name="byCountryDate">
                    <fetchIndexElement property="country" type="Binary" order="ascending"/>
                    <fetchIndexElement property="date" type="Binary" order="descending"/>
                </fetchIndex>
                <fetchIndex name="byDate"><fetchIndexElement property="date" type="Binary" order="descending"/></fetchIndex>
            </entity>
        </model>
        """
        let doc = try XcodeModelDocument(xml: Data(xml.utf8), path: "test.xml")
        XCTAssertEqual(doc.unsupportedFeatures(), [])
        let model = try doc.makeModel()
        let mood = try XCTUnwrap(model["Mood"])
        XCTAssertEqual(mood.fetchIndexes, [
            FetchIndexDescription("byCountryDate", [.ascending("country"), .descending("date")]),
            FetchIndexDescription("compoundIndex1", on: "rating", "country"),
        ])
        XCTAssertEqual(mood.attributesByName["date"]?.isIndexed, true)
        let container = try PersistentContainer.inMemory(model: model)
        try container.database.read { tx in
            let names = Set(try tx.indexes(of: "Mood").map(\.name))
            XCTAssertTrue(names.isSuperset(of: ["Mood_fetchIndex_byCountryDate", "Mood_fetchIndex_compoundIndex1", "Mood_date_index"]), "\(names)")
        }
    }
}
