import Foundation
import XCTest
import Kura

// Moody's data layer (issue 17): a Country keeps the number of its moods right
// in willSave, and a Mood being deleted updates its country before the delete
// rule nullifies the link. Without the hooks the port called a stand-in by hand
// before every save, which could not see a mood's previous country.

final class Country: ManagedObject {
    @Managed("name") var name: String
    @Managed("numberOfMoods") var numberOfMoods: Int64
    @ToMany("moods") var moods: [Mood]
    nonisolated(unsafe) static var log: [String] = []

    override func willSave() {
        Self.log.append("willSave \(name)")
        let n = Int64(moods.count)
        // Setting only when different: Core Data's advice, or willSave loops.
        if numberOfMoods != n { numberOfMoods = n }
    }

    override func didSave() { Self.log.append("didSave \(name)\(isDeleted ? " deleted" : "")") }

    override func validateValue(_ value: Any?, forKey key: String) throws(KuraError) {
        if key == "name", let s = value as? String, s.isEmpty {
            throw KuraError(.validation, "a country needs a name")
        }
    }

    override func validateForDelete() throws(KuraError) {
        if name == "Atlantis" { throw KuraError(.validation, "Atlantis cannot be deleted") }
    }
}

final class Mood: ManagedObject {
    @Managed("colors") var colors: String
    @ToOne("country") var country: Country?
    nonisolated(unsafe) static var countryAtDeletion: [String?] = []

    override func prepareForDeletion() {
        Mood.countryAtDeletion.append(country?.name)
        // Moody: a country whose last mood goes is deleted too.
        if let c = country, c.moods.count == 1, let ctx = managedObjectContext { try? ctx.delete(c) }  // test model: delete of a registered object of this context cannot fail
    }
}

/// A hook that never settles: each willSave changes the object again.
final class Restless: ManagedObject {
    @Managed("counter") var counter: Int64
    override func willSave() { counter += 1 }
}

final class LifecycleHookTests: XCTestCase {
    override func setUp() {
        Country.log = []
        Mood.countryAtDeletion = []
    }

    func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Country", class: Country.self) {
                AttributeDescription("name", .string, optional: false)
                AttributeDescription("numberOfMoods", .int64, default: 0)
                RelationshipDescription("moods", to: "Mood", inverse: "country", toMany: true)
            }
            EntityDescription("Mood", class: Mood.self) {
                AttributeDescription("colors", .string, default: "")
                RelationshipDescription("country", to: "Country", inverse: "moods", deleteRule: .nullify)
            }
            EntityDescription("Restless", class: Restless.self) {
                AttributeDescription("counter", .int64, default: 0)
            }
        }
    }

    func testWillSaveRecountsAndDidSaveFollowsTheCommit() throws {
        let container = try PersistentContainer.inMemory(model: model())
        let context = container.newContext()
        let france = try context.insert(Country.self)
        france.name = "France"
        for colors in ["red", "blue"] {
            let m = try context.insert(Mood.self)
            m.colors = colors
            m.country = france
        }
        try context.save()
        XCTAssertEqual(france.numberOfMoods, 2)
        XCTAssertEqual(Country.log, ["willSave France", "willSave France", "didSave France"],
                       "willSave runs again after it changed the object, then settles")
        let stored = try container.newContext().fetch(FetchRequest<Country>(entityName: "Country"))
        XCTAssertEqual(stored.map(\.numberOfMoods), [2], "the hook's change is part of the same save")

        // prepareForDeletion sees the relationship before nullify, and may delete more.
        Country.log = []
        let moods = france.moods
        try context.delete(moods[0])
        XCTAssertEqual(Mood.countryAtDeletion, ["France"])
        try context.save()
        XCTAssertEqual(france.numberOfMoods, 1)
        try context.delete(moods[1])
        XCTAssertTrue(france.isDeleted, "the last mood's prepareForDeletion deleted its country")
        try context.save()
        XCTAssertEqual(Mood.countryAtDeletion, ["France", "France"])
        XCTAssertEqual(Country.log.last, "didSave France deleted")
        XCTAssertEqual(try container.newContext().count(for: FetchRequest<Country>(entityName: "Country")), 0)
    }

    func testValidationMethodsAreCollectedIntoOneError() throws {
        let container = try PersistentContainer.inMemory(model: model())
        let context = container.newContext()
        let nowhere = try context.insert(Country.self)
        nowhere.name = ""
        let atlantis = try context.insert(Country.self)
        atlantis.name = "Atlantis"
        XCTAssertThrowsError(try context.save()) { error in
            let e = error as? KuraError
            XCTAssertEqual(e?.code, .validation)
            XCTAssertTrue(e?.message.contains("attribute \"name\": a country needs a name") == true, "\(String(describing: e))")
        }
        nowhere.name = "Somewhere"
        try context.save()
        try context.delete(atlantis)
        try context.delete(nowhere)
        XCTAssertThrowsError(try context.save()) { error in
            let e = error as? KuraError
            XCTAssertTrue(e?.message.contains("Atlantis cannot be deleted") == true, "\(String(describing: e))")
            XCTAssertFalse(e?.message.contains("Somewhere") == true)
        }
        XCTAssertEqual(try container.newContext().count(for: FetchRequest<Country>(entityName: "Country")), 2, "nothing was deleted")
    }

    func testCommittedValuesAndPersistentChanges() throws {
        let container = try PersistentContainer.inMemory(model: model())
        let context = container.newContext()
        let c = try context.insert(Country.self)
        c.name = "Peru"
        XCTAssertTrue(try c.committedValues().isEmpty, "an unsaved object has no committed values")
        try context.save()
        XCTAssertFalse(c.hasPersistentChangedValues)
        c.name = "Chile"
        XCTAssertTrue(c.hasPersistentChangedValues)
        XCTAssertEqual(try c.committedValues(forKeys: ["name"])["name"] as? String, "Peru")
        XCTAssertEqual(c.name, "Chile")
        XCTAssertThrowsError(try c.committedValues(forKeys: ["nmae"])) { XCTAssertEqual(($0 as? KuraError)?.code, .notFound) }
        let m = try context.insert(Mood.self)
        m.country = c
        try context.save()
        m.country = nil
        XCTAssertTrue((try m.committedValues(forKeys: ["country"])["country"] as? ManagedObject) === c)
    }

    func testWillSaveThatNeverSettlesIsRefused() throws {
        let container = try PersistentContainer.inMemory(model: model())
        let context = container.newContext()
        let r = try context.insert(Restless.self)
        XCTAssertThrowsError(try context.save()) { error in
            XCTAssertEqual((error as? KuraError)?.code, .validation)
            XCTAssertTrue((error as? KuraError)?.message.contains("after \(ManagedObjectContext.maximumWillSavePasses) passes") == true)
        }
        XCTAssertEqual(r.counter, Int64(ManagedObjectContext.maximumWillSavePasses))
        XCTAssertEqual(try container.newContext().count(for: FetchRequest<Restless>(entityName: "Restless")), 0)
    }
}
