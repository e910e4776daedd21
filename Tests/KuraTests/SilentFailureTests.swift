import Foundation
import XCTest
import Kura

// A class bound to no entity, and classes whose property wrappers do not
// match their entity (see testWrongBindingsAreModelErrors).
final class Unregistered: ManagedObject {
    @Managed("name") var name: String
}

final class Typo: ManagedObject {
    @Managed("titel") var title: String
}

final class WrongType: ManagedObject {
    @Managed("count") var count: Double
}

final class WrongKind: ManagedObject {
    @ToOne("items") var items: WrongKind?
}

/// Issue 10: read errors turned into default values, and other silent
/// outcomes met while porting Core Data apps. Each test names the bug.
final class SilentFailureTests: XCTestCase {
    // Regression: an engine `Value` given as an attribute value was stored
    // as it was, unchecked: `.text("x")` landed in an integer column, and a
    // later read turned it into the property's zero value.
    func testEngineValuesAreCheckedAgainstTheAttributeType() throws {
        let container = try PersistentContainer.inMemory(model: companyModel())
        let context = container.newContext()
        let e = try context.insert("Employee")
        XCTAssertThrowsError(try e.setValue(Value.text("x"), forKey: "level")) { err in
            XCTAssertEqual((err as? KuraError)?.code, .typeMismatch, "\(err)")
        }
        XCTAssertThrowsError(try e.setValue(Value.integer(70_000), forKey: "level")) { err in
            XCTAssertTrue("\(err)".contains("out of range"), "\(err)")
        }
        XCTAssertThrowsError(try e.setValue(Value.text("not a uuid"), forKey: "identifier"))
        try e.setValue(Value.integer(3), forKey: "level")
        XCTAssertEqual(e["level"] as? Int16, 3)
        try e.setValue(Value.null, forKey: "email")
        XCTAssertNil(e["email"])
    }

    /// A store on a fault-injecting file system with a tiny page cache, so
    /// reads after the setup reach the file system; 1,000 employees.
    func faultyStore() throws -> (FaultInjectingFileSystem, PersistentContainer, [ManagedObjectID]) {
        let fs = FaultInjectingFileSystem()
        var options = Database.Options()
        options.fileSystem = fs
        options.cacheSize = 16 * 4096
        let container = try PersistentContainer(url: URL(fileURLWithPath: "/faulty/reads.kura"), model: companyModel(), options: options)
        let context = container.newContext()
        var objects: [Employee] = []
        for i in 0..<1000 {
            let e = Employee(context: context)
            e.name = "employee \(i) " + String(repeating: "x", count: 40)
            e.email = "e\(i)@example.com"
            objects.append(e)
        }
        try context.save()
        return (fs, container, objects.map(\.objectID))
    }

    func testAFaultWhoseLoadFailsReportsInsteadOfReadingEmpty() throws {
        // Bug: typed properties of a fault whose load failed read "" / 0.
        let (fs, container, ids) = try faultyStore()
        let context = container.newContext()
        let e = try XCTUnwrap(context.object(with: ids[900]) as? Employee)
        XCTAssertTrue(e.isFault)
        fs.failOperation(.read, after: 1, with: .io, persistent: true)
        XCTAssertEqual(e.name, "", "a getter cannot throw: it returns the zero value ...")
        fs.clearFaults()
        XCTAssertEqual(e.readError?.code, .io, "... and records the error on the object")
        XCTAssertEqual(context.pendingError?.code, .io, "... and on the context")
        XCTAssertThrowsError(try context.fetch(FetchRequest<Employee>(entityName: "Employee"))) { err in
            XCTAssertEqual((err as? KuraError)?.code, .io, "the next fetch throws it")
        }
        XCTAssertNil(context.pendingError)
        XCTAssertEqual(e.name, "employee 900 " + String(repeating: "x", count: 40), "the fault loads once reads work again")
        XCTAssertNil(e.readError)
        // The throwing accessor reports at once.
        let f = try context.object(with: ids[600])
        fs.failOperation(.read, after: 1, with: .io, persistent: true)
        XCTAssertThrowsError(try f.value(forKey: "name")) { err in XCTAssertEqual((err as? KuraError)?.code, .io) }
        fs.clearFaults()
    }

    func testABatchThatFailsToLoadReportsThroughFetchResultsAndTheContext() throws {
        // Bug: FetchResults batches swallowed read errors (objects read empty)
        // and its subscript trapped on a wrong class.
        let (fs, container, _) = try faultyStore()
        let context = container.newContext()
        var request = FetchRequest<Employee>(entityName: "Employee")
        request.fetchBatchSize = 100
        let results = try context.fetchResults(request)
        XCTAssertEqual(results.count, 1000)
        XCTAssertTrue(results[0].name.hasPrefix("employee 0 "))
        fs.failOperation(.read, after: 1, with: .io, persistent: true)
        let far = results[900]
        XCTAssertEqual(results.error?.code, .io)
        XCTAssertEqual(context.pendingError?.code, .io)
        XCTAssertTrue(far.isFault, "not an object with empty values")
        XCTAssertThrowsError(try results.object(at: 901)) { err in XCTAssertEqual((err as? KuraError)?.code, .io) }
        fs.clearFaults()
        XCTAssertThrowsError(try context.save(), "the next save throws the batch's error") { err in
            XCTAssertEqual((err as? KuraError)?.code, .io)
        }
        XCTAssertTrue(try results.object(at: 901).name.hasPrefix("employee 901 "))
        // A wrong class is refused when the results are made, not trapped later.
        XCTAssertThrowsError(try context.fetchResults(FetchRequest<Department>(entityName: "Employee"))) { err in
            XCTAssertEqual((err as? KuraError)?.code, .typeMismatch)
        }
    }

    func testAReadErrorDuringSaveReachesTheCaller() throws {
        // Bug: the uniqueness pre-check of save turned a read error into
        // "no clash" and went on.
        let (fs, container, _) = try faultyStore()
        let context = container.newContext()
        let e = Employee(context: context)
        e.name = "new"
        e.email = "e17@example.com"  // clashes with a stored row
        // One failing read: the save's first (the uniqueness check). Taking it
        // as "no clash" would go on to the write and fail differently.
        fs.failOperation(.read, after: 1, with: .io)
        XCTAssertThrowsError(try context.save()) { err in XCTAssertEqual((err as? KuraError)?.code, .io, "\(err)") }
        XCTAssertFalse(fs.faultPending, "the fault fired")
        XCTAssertThrowsError(try context.save(), "once reads work, the clash is found") { err in
            XCTAssertEqual((err as? KuraError)?.code, .validation)
            XCTAssertTrue("\(err)".contains("uniqueness constraint (email)"), "\(err)")
        }
        e.email = "fresh@example.com"
        try context.save()
    }

    func testAMalformedStoredValueIsAnErrorNotNil() throws {
        // Bug: a stored UUID string that does not parse read as nil.
        let container = try PersistentContainer.inMemory(model: companyModel())
        let context = container.newContext()
        let e = Employee(context: context)
        e.name = "Ada"
        try context.save()
        try container.database.write { tx in
            _ = try tx.update("Employee", where: nil, set: ["identifier": .text("not-a-uuid")])
        }
        let other = container.newContext()
        let stored = try XCTUnwrap(other.fetch(FetchRequest<Employee>(entityName: "Employee")).first)
        XCTAssertThrowsError(try stored.value(forKey: "identifier")) { err in
            XCTAssertEqual((err as? KuraError)?.code, .typeMismatch)
            XCTAssertTrue("\(err)".contains("identifier") && "\(err)".contains("not-a-uuid"), "\(err)")
        }
        XCTAssertNil(stored.identifier)
        XCTAssertEqual(stored.readError?.code, .typeMismatch, "the typed getter reports through the channel")
        XCTAssertThrowsError(try other.save())
    }

    func testWrongBindingsAreModelErrors() throws {
        // Bug: @Managed("titel") (a typo) read "" until a save reported it.
        func model(_ c: ManagedObject.Type) throws -> ManagedObjectModel {
            try ManagedObjectModel {
                EntityDescription("Item", class: c) {
                    AttributeDescription("title", .string)
                    AttributeDescription("count", .int16)
                    RelationshipDescription("items", to: "Item", toMany: true)
                }
            }
        }
        XCTAssertThrowsError(try model(Typo.self)) { err in
            XCTAssertTrue("\(err)".contains("Typo.title is @Managed(\"titel\")") && "\(err)".contains("no attribute \"titel\""), "\(err)")
        }
        XCTAssertThrowsError(try model(WrongType.self)) { err in
            XCTAssertTrue("\(err)".contains("of type Double") && "\(err)".contains("int16"), "\(err)")
        }
        XCTAssertThrowsError(try model(WrongKind.self)) { err in
            XCTAssertTrue("\(err)".contains("@ToOne(\"items\")") && "\(err)".contains("to-many"), "\(err)")
        }
    }

    func testAClassBoundToNoEntityThrowsInsteadOfTrapping() throws {
        // Bug: a class not registered with the model trapped (Illegal
        // instruction) in a release build.
        let container = try PersistentContainer.inMemory(model: companyModel())
        let context = container.newContext()
        XCTAssertThrowsError(try context.insert(Unregistered.self)) { err in
            XCTAssertEqual((err as? KuraError)?.code, .notFound)
            XCTAssertTrue("\(err)".contains("class Unregistered") && "\(err)".contains("Employee (class Employee)"), "\(err)")
        }
        let u = Unregistered(context: context)
        XCTAssertNil(u.managedObjectContext, "not inserted")
        XCTAssertEqual(u.readError?.code, .notFound)
        XCTAssertEqual(u.name, "")
        XCTAssertThrowsError(try context.save()) { err in
            XCTAssertTrue("\(err)".contains("class Unregistered"), "\(err)")
        }
        XCTAssertThrowsError(try Unregistered.findAll(in: context)) { err in
            XCTAssertTrue("\(err)".contains("class Unregistered"), "\(err)")
        }
    }

    func testAnObjectWhoseContextIsGoneReportsInsteadOfReadingEmpty() throws {
        // Bug: an object whose context was released read empty values and nil
        // relationships.
        let container = try PersistentContainer.inMemory(model: companyModel())
        var ids: [ManagedObjectID] = []
        do {
            let c = container.newContext()
            let d = Department(context: c)
            d.name = "Dev"
            let e = Employee(context: c)
            e.name = "Ada"
            e.department = d
            try c.save()
            ids = [e.objectID]
        }
        var fault: Employee?
        var loaded: Employee?
        do {
            let context = container.newContext()
            fault = try context.object(with: ids[0]) as? Employee
            loaded = try context.existingObject(with: ids[0]) as? Employee
            XCTAssertTrue(fault === loaded)
            fault = nil
            let other = container.newContext()
            fault = try other.object(with: ids[0]) as? Employee
            _ = other
        }
        let f = try XCTUnwrap(fault), l = try XCTUnwrap(loaded)
        XCTAssertNil(f.managedObjectContext)
        XCTAssertEqual(f.name, "")
        XCTAssertEqual(f.readError?.code, .misuse, "a fault without a context reports")
        XCTAssertEqual(l.name, "Ada", "loaded values stay readable")
        XCTAssertNil(l.department)
        XCTAssertEqual(l.readError?.code, .misuse, "a relationship without a context reports")
        XCTAssertThrowsError(try l.value(forKey: "department")) { err in XCTAssertEqual((err as? KuraError)?.code, .misuse) }
    }

    func testFetchHonoursResultTypeAndBatchSize() throws {
        // Bug: fetch() ignored fetchBatchSize and resultType (a count request
        // returned objects).
        let container = try PersistentContainer.inMemory(model: companyModel())
        try container.save { c in
            for i in 0..<250 { try c.insert("Employee").setValue("n\(i)", forKey: "name") }
        }
        let context = container.newContext()
        var request = FetchRequest<Employee>(entityName: "Employee", sortDescriptors: [SortKey("name")])
        request.resultType = .count
        XCTAssertThrowsError(try context.fetch(request)) { err in
            XCTAssertEqual((err as? KuraError)?.code, .invalidArgument)
            XCTAssertTrue("\(err)".contains("execute"), "\(err)")
        }
        guard case .count(let n) = try context.execute(request) else { return XCTFail("execute of a count request") }
        XCTAssertEqual(n, 250)
        request.resultType = .managedObjectIDs
        guard case .objectIDs(let ids) = try context.execute(request) else { return XCTFail("execute of an ID request") }
        XCTAssertEqual(ids.count, 250)
        request.resultType = .dictionaries(properties: ["name"], distinct: false)
        guard case .dictionaries(let dicts) = try context.execute(request) else { return XCTFail("execute of a dictionary request") }
        XCTAssertEqual(dicts.first?["name"] as? String, "n0")

        request.resultType = .managedObjects
        request.fetchBatchSize = 100
        let objects = try context.fetch(request)
        XCTAssertEqual(objects.count, 250)
        XCTAssertTrue(objects.allSatisfy(\.isFault), "nothing loaded yet")
        let sortedNames = (0..<250).map { "n\($0)" }.sorted()
        XCTAssertEqual(objects[120].name, sortedNames[120])
        XCTAssertEqual(objects.filter { !$0.isFault }.count, 100, "touching one object loaded its batch of 100")
        XCTAssertFalse(objects[100].isFault)
        XCTAssertTrue(objects[99].isFault && objects[200].isFault)
        XCTAssertEqual(objects.map(\.name), sortedNames, "every batch loads, in order")
    }
}
