import Foundation
import XCTest
import Kura

final class ObjectLayerTests: XCTestCase {
    func testInvalidModelsAreRejectedWithClearErrors() {
        XCTAssertThrowsError(try ManagedObjectModel {
            EntityDescription("A") { RelationshipDescription("b", to: "B", inverse: "nope") }
            EntityDescription("B") { AttributeDescription("x", .int16) }
        }) { e in XCTAssertTrue("\(e)".contains("inverse \"nope\""), "\(e)") }
        XCTAssertThrowsError(try ManagedObjectModel {
            EntityDescription("A") { AttributeDescription("x", .int16) }
            EntityDescription("A") { AttributeDescription("y", .int16) }
        }) { e in XCTAssertTrue("\(e)".contains("two entities are named \"A\""), "\(e)") }
        XCTAssertThrowsError(try ManagedObjectModel {
            EntityDescription("A") {
                AttributeDescription("x", .int16)
                AttributeDescription("x", .string)
            }
        }) { e in XCTAssertTrue("\(e)".contains("two properties named \"x\""), "\(e)") }
        XCTAssertThrowsError(try ManagedObjectModel {
            EntityDescription("A") { RelationshipDescription("b", to: "Missing") }
        }) { e in XCTAssertTrue("\(e)".contains("unknown entity \"Missing\""), "\(e)") }
        XCTAssertThrowsError(try ManagedObjectModel {
            EntityDescription("A") { UniqueConstraint("nope") }
        }) { e in XCTAssertTrue("\(e)".contains("\"nope\""), "\(e)") }
        XCTAssertThrowsError(try ManagedObjectModel {
            EntityDescription("A") { RelationshipDescription("bs", to: "B", inverse: "as", toMany: true, transient: true) }
            EntityDescription("B") { RelationshipDescription("as", to: "A", inverse: "bs", toMany: true) }
        }) { e in XCTAssertTrue("\(e)".contains("both sides of a pair must agree"), "\(e)") }
    }

    func testEveryAttributeTypePersistsAcrossReopenAndIDsAreStable() throws {
        let dir = try TempDir()
        let url = dir.url.appendingPathComponent("company.kura")
        let hired = Date(timeIntervalSinceReferenceDate: 123_456.5)
        let photo = Data([0, 1, 2, 255])
        var idString = ""
        var uuid = UUID()
        do {
            let container = try PersistentContainer(url: url, model: companyModel())
            let context = container.newContext()
            let e = Employee(context: context)
            XCTAssertNotNil(e.identifier, "awakeFromInsert set a UUID")
            uuid = e.identifier!
            XCTAssertEqual(e.level, 1, "default value")
            XCTAssertEqual(e.active, true)
            e.name = "Ada"
            e.salary = 1234.5
            e.level = 3
            e.hired = hired
            e.email = "ada@example.com"
            e.homepage = URL(string: "https://example.com/ada")!
            e.photo = photo
            e.bonus = Decimal(string: "19.99")!
            e.ratio = 0.25
            e.badgeCount = 70_000
            e.serial = Int64.max
            XCTAssertTrue(e.objectID.isTemporary)
            XCTAssertTrue(context.hasChanges)
            try context.save()
            XCTAssertFalse(e.objectID.isTemporary)
            XCTAssertFalse(context.hasChanges)
            idString = e.objectID.uriRepresentation
        }
        let container = try PersistentContainer(url: url, model: companyModel())
        let context = container.newContext()
        let id = try ManagedObjectID(uriRepresentation: idString)
        let e = try XCTUnwrap(context.existingObject(with: id) as? Employee)
        XCTAssertEqual(e.name, "Ada")
        XCTAssertEqual(e.salary, 1234.5)
        XCTAssertEqual(e.level, 3)
        XCTAssertEqual(e.hired, hired)
        XCTAssertEqual(e.identifier, uuid)
        XCTAssertEqual(e.homepage, URL(string: "https://example.com/ada"))
        XCTAssertEqual(e.photo, photo)
        XCTAssertEqual(e.bonus, Decimal(string: "19.99"))
        XCTAssertEqual(e.ratio, 0.25)
        XCTAssertEqual(e.badgeCount, 70_000)
        XCTAssertEqual(e.serial, Int64.max)
        XCTAssertEqual(e.objectID.uriRepresentation, idString)
        XCTAssertEqual(try context.object(with: id) as? Employee, e, "uniquing: the same instance")
    }

    func testByNameAccessChecksTypesAndKeysWithoutCrashing() throws {
        let container = try PersistentContainer.inMemory(model: companyModel())
        let context = container.newContext()
        let e = try context.insert("Employee")
        try e.setValue("Bo", forKey: "name")
        XCTAssertEqual(try e.value(forKey: "name") as? String, "Bo")
        XCTAssertThrowsError(try e.setValue("high", forKey: "level")) { err in
            XCTAssertEqual((err as? KuraError)?.code, .typeMismatch)
            XCTAssertTrue("\(err)".contains("\"level\"") && "\(err)".contains("Employee"), "\(err)")
        }
        XCTAssertThrowsError(try e.setValue(40_000, forKey: "level")) { err in
            XCTAssertTrue("\(err)".contains("out of range"), "\(err)")
        }
        XCTAssertThrowsError(try e.value(forKey: "shoeSize")) { err in
            XCTAssertEqual((err as? KuraError)?.code, .notFound)
            XCTAssertTrue("\(err)".contains("\"shoeSize\""), "\(err)")
        }
        XCTAssertNil(e["shoeSize"])
        XCTAssertEqual(e.readError?.code, .notFound, "a failed subscript read goes to the failure channel")
        XCTAssertEqual(context.pendingError?.code, .notFound)
        e["level"] = "not a number"  // not applied; reported by save
        XCTAssertEqual(e["level"] as? Int16, 1)
        XCTAssertThrowsError(try context.save(), "the next save throws the failed read first") { err in
            XCTAssertEqual((err as? KuraError)?.code, .notFound)
            XCTAssertTrue("\(err)".contains("\"shoeSize\""), "\(err)")
        }
        XCTAssertNil(context.pendingError, "reported once")
        XCTAssertThrowsError(try context.save()) { err in
            XCTAssertEqual((err as? KuraError)?.code, .validation)
            XCTAssertTrue("\(err)".contains("Employee") && "\(err)".contains("\"level\""), "\(err)")
        }
        XCTAssertTrue(context.hasChanges, "a refused save keeps the changes")
    }

    func testValidationNamesObjectAttributeAndRuleAndWritesNothing() throws {
        let container = try PersistentContainer.inMemory(model: companyModel())
        let context = container.newContext()
        let a = Employee(context: context)
        a.email = "same@example.com"
        let b = Employee(context: context)
        b.name = "B"
        b.email = "same@example.com"
        XCTAssertThrowsError(try context.save()) { err in
            let text = "\(err)"
            XCTAssertEqual((err as? KuraError)?.code, .validation)
            XCTAssertTrue(text.contains("attribute \"name\" is required"), text)
            XCTAssertTrue(text.contains("uniqueness constraint (email)"), text)
            XCTAssertTrue(text.contains(a.objectID.uriRepresentation), text)
        }
        XCTAssertEqual(try container.newContext().count(for: FetchRequest<Employee>(entityName: "Employee")), 0)
        a.name = "A"
        b.email = "b@example.com"
        try context.save()
        // Unique against the store, from another context.
        let other = container.newContext()
        let c = Employee(context: other)
        c.name = "C"
        c.email = "b@example.com"
        XCTAssertThrowsError(try other.save()) { err in XCTAssertTrue("\(err)".contains("already has email"), "\(err)") }
    }

    func testRelationshipsKeepBothSidesInStepAndLoadLazily() throws {
        let dir = try TempDir()
        let url = dir.url.appendingPathComponent("rel.kura")
        let container = try PersistentContainer(url: url, model: companyModel())
        let context = container.newContext()
        let acme = Company(context: context)
        acme.name = "Acme"
        let dev = Department(context: context)
        dev.name = "Dev"
        dev.company = acme
        XCTAssertEqual(acme.departments, [dev], "inverse to-many sees the new member before save")
        let people = (0..<4).map { i -> Employee in
            let e = Employee(context: context)
            e.name = "E\(i)"
            e.department = dev
            return e
        }
        XCTAssertEqual(dev.employees.map(\.name), ["E0", "E1", "E2", "E3"], "ordered, appended in order")
        dev.employees = [people[3], people[1], people[0], people[2]]
        let badge = Badge(context: context)
        badge.code = "B-1"
        people[0].badge = badge
        XCTAssertEqual(badge.owner, people[0], "one-to-one inverse")
        people[1].badge = badge
        XCTAssertNil(people[0].badge, "moving a one-to-one unhooks the old partner")
        let p1 = Project(context: context)
        p1.title = "Rocket"
        p1.members = [people[0], people[2]]
        XCTAssertEqual(people[2].projects, [p1], "many-to-many inverse before save")
        try context.save()

        let reopened = try PersistentContainer(url: url, model: companyModel()).newContext()
        let d = try XCTUnwrap(reopened.fetch(FetchRequest<Department>(entityName: "Department")).first)
        XCTAssertEqual(d.employees.map(\.name), ["E3", "E1", "E0", "E2"], "order survives reopen")
        XCTAssertEqual(d.company?.name, "Acme")
        XCTAssertTrue(d.employees[1] === d.employees[1].badge?.owner, "uniqued across relationship reads")
        let rocket = try XCTUnwrap(reopened.fetch(FetchRequest<Project>(entityName: "Project")).first)
        XCTAssertEqual(Set(rocket.members.map(\.name)), ["E0", "E2"])
        // Remove from one side, see it on the other.
        let e0 = rocket.members.first { $0.name == "E0" }!
        try rocket.remove(e0, from: "members")
        XCTAssertEqual(e0.projects, [])
        try reopened.save()
        let third = container.newContext()  // objects hold their context weakly: keep it alive
        XCTAssertEqual(try third.fetch(FetchRequest<Project>(entityName: "Project")).first?.members.map(\.name), ["E2"])
    }

    func testDeleteRulesCascadeThreeLevelsDenyAndNullify() throws {
        let container = try PersistentContainer.inMemory(model: companyModel())
        let context = container.newContext()
        let acme = Company(context: context)
        acme.name = "Acme"
        for d in 0..<2 {
            let dept = Department(context: context)
            dept.name = "D\(d)"
            dept.company = acme
            for i in 0..<3 {
                let e = Employee(context: context)
                e.name = "E\(d)\(i)"
                e.department = dept
                let b = Badge(context: context)
                b.code = "B\(d)\(i)"
                e.badge = b
            }
        }
        let project = Project(context: context)
        project.title = "P"
        let note = Note(context: context)
        note.text = "keep me"
        try project.add(note, to: "notes")
        let loner = Employee(context: context)
        loner.name = "Loner"
        project.members = [loner]
        try context.save()

        // Cascade: company -> departments -> employees -> badges.
        try context.delete(acme)
        try context.save()
        XCTAssertEqual(try Department.countOfEntities(in: context), 0)
        XCTAssertEqual(try Employee.countOfEntities(in: context), 1)
        XCTAssertEqual(try Badge.countOfEntities(in: context), 0)

        // Deny: a project with notes cannot be deleted; nothing is written.
        try context.delete(project)
        XCTAssertThrowsError(try context.save()) { err in
            XCTAssertTrue("\(err)".contains("delete rule deny") && "\(err)".contains("\"notes\""), "\(err)")
        }
        context.rollback()
        XCTAssertEqual(try Project.countOfEntities(in: context), 1)
        try project.remove(note, from: "notes")
        // Nullify: deleting the project removes it from the member's side.
        try context.delete(project)
        try context.save()
        XCTAssertEqual(loner.projects, [])
        let other = container.newContext()
        let stored = try XCTUnwrap(other.fetch(FetchRequest<Employee>(entityName: "Employee")).first)
        XCTAssertEqual(stored.name, "Loner")
        XCTAssertEqual(stored.projects.count, 0)
        XCTAssertEqual(try other.count(for: FetchRequest<Project>(entityName: "Project")), 0)
    }

    func testPendingChangesAreVisibleToFetchesAndRollbackUndoesThem() throws {
        let container = try PersistentContainer.inMemory(model: companyModel())
        let context = container.newContext()
        for (i, n) in ["Ann", "Bob", "Cy"].enumerated() {
            let e = Employee(context: context)
            e.name = n
            e.salary = Double(i * 100)
        }
        try context.save()
        let cy = try XCTUnwrap(Employee.findFirst(byAttribute: "name", value: "Cy", in: context))
        cy.salary = 5
        let dan = Employee(context: context)
        dan.name = "Dan"
        dan.salary = 1
        let ann = try XCTUnwrap(Employee.findFirst(byAttribute: "name", value: "Ann", in: context))
        try context.delete(ann)
        var request = FetchRequest<Employee>(entityName: "Employee", sortDescriptors: [SortKey("salary")])
        try request.setPredicate("salary < %@", 50)
        XCTAssertEqual(try context.fetch(request).map(\.name), ["Dan", "Cy"], "unsaved insert, change and delete all seen")
        request.includesPendingChanges = false
        XCTAssertEqual(context.insertedObjects.count, 1)
        XCTAssertEqual(context.updatedObjects.map { $0["name"] as? String }, ["Cy"])
        XCTAssertEqual(context.deletedObjects.count, 1)
        context.rollback()
        XCTAssertEqual(cy.salary, 200)
        XCTAssertFalse(ann.isDeleted)
        XCTAssertEqual(try Employee.countOfEntities(in: context), 3)
        XCTAssertFalse(context.hasChanges)
    }

    func testFetchSortLimitOffsetResultTypesAndAggregates() throws {
        let container = try PersistentContainer.inMemory(model: companyModel())
        let context = container.newContext()
        let depts = ["Ops", "dev", "Art"].map { n -> Department in
            let d = Department(context: context)
            d.name = n
            return d
        }
        for i in 0..<30 {
            let e = Employee(context: context)
            e.name = "e\(i % 10)"
            e.salary = Double(i)
            e.department = depts[i % 3]
        }
        try context.save()
        var r = FetchRequest<Employee>(entityName: "Employee")
        r.sortDescriptors = [SortKey("department.name", caseInsensitive: true), SortKey("salary", ascending: false)]
        r.fetchOffset = 2
        r.fetchLimit = 3
        XCTAssertEqual(try context.fetch(r).map(\.salary), [23, 20, 17], "Art first (case-insensitive), salary descending")
        r.predicate = try KuraPredicate(format: "department.name ==[c] 'DEV'")
        XCTAssertEqual(try context.count(for: r), 3)
        r.fetchOffset = 0
        r.fetchLimit = nil
        XCTAssertEqual(try context.fetchObjectIDs(r).count, 10)
        let dicts = try context.fetchDictionaries(FetchRequest<Employee>(entityName: "Employee", sortDescriptors: [SortKey("name")]), properties: ["name"], distinct: true)
        XCTAssertEqual(dicts.count, 10)
        XCTAssertEqual(dicts.first?["name"] as? String, "e0")
        let all = FetchRequest<Employee>(entityName: "Employee")
        XCTAssertEqual(try context.aggregate(.sum, of: "salary", matching: all), .double(435))
        XCTAssertEqual(try context.aggregate(.max, of: "salary", matching: all), .double(29))
        XCTAssertEqual(try context.aggregate(.average, of: "salary", matching: all), .double(14.5))
        XCTAssertEqual(try context.aggregate(.count, of: "department.name", matching: all), .integer(30))
    }

    func testRelationshipPredicatesMatchANaiveEvaluationOverAllObjects() throws {
        let container = try PersistentContainer.inMemory(model: companyModel())
        let context = container.newContext()
        var rng = SystemRandomNumberGenerator()
        let depts = (0..<6).map { i -> Department in
            let d = Department(context: context)
            d.name = ["Ops", "Dev", "Art", "Café", "R&D", "Zoo"][i]
            return d
        }
        let projects = (0..<5).map { i -> Project in
            let p = Project(context: context)
            p.title = "P\(i)"
            return p
        }
        var employees: [Employee] = []
        for i in 0..<120 {
            let e = Employee(context: context)
            e.name = "emp\(i)"
            e.salary = Double(Int.random(in: 0..<100, using: &rng))
            e.level = Int16.random(in: 1...5, using: &rng)
            if i % 7 != 0 { e.department = depts[Int.random(in: 0..<6, using: &rng)] }
            employees.append(e)
        }
        for p in projects { p.members = Array(employees.shuffled(using: &rng).prefix(Int.random(in: 0...5, using: &rng))) }
        try context.save()
        let checks: [(String, (Employee) -> Bool)] = [
            ("department.name == 'Dev'", { $0.department?.name == "Dev" }),
            ("department.name BEGINSWITH[cd] 'cafe'", { $0.department?.name == "Café" }),
            ("department == nil", { $0.department == nil }),
            ("ANY projects.title == 'P1'", { $0.projects.contains { $0.title == "P1" } }),
            ("projects.@count >= 2", { $0.projects.count >= 2 }),
            ("NONE projects.title IN {'P0', 'P2'}", { !$0.projects.contains { ["P0", "P2"].contains($0.title) } }),
            ("ALL projects.title != 'P3' AND salary > 50", { !$0.projects.contains { $0.title == "P3" } && $0.salary > 50 }),
            ("SUBQUERY(projects, $p, $p.members.@count > 3).@count > 0", { $0.projects.contains { $0.members.count > 3 } }),
            ("ANY projects.title == 'P0' OR ANY projects.title == 'P4'", { $0.projects.contains { ["P0", "P4"].contains($0.title) } }),
            ("department.employees.@count > 20 AND level >= 3", { ($0.department?.employees.count ?? 0) > 20 && $0.level >= 3 }),
            ("name MATCHES 'emp1[0-9]'", { $0.name.range(of: "^emp1[0-9]$", options: .regularExpression) != nil }),
        ]
        for (format, naive) in checks {
            let fetched = try context.fetch(FetchRequest<Employee>(entityName: "Employee", predicate: try KuraPredicate(format: format)))
            let expected = employees.filter(naive)
            XCTAssertEqual(Set(fetched.map(\.objectID)), Set(expected.map(\.objectID)), format)
        }
    }

    func testBatchedIterationKeepsFewObjectsAlive() throws {
        let container = try PersistentContainer.inMemory(model: companyModel())
        try container.save { context in
            for i in 0..<20_000 {
                let e = try context.insert("Employee")
                try e.setValue("n\(i)", forKey: "name")
            }
        }
        let context = container.newContext()
        var r = FetchRequest<Employee>(entityName: "Employee", sortDescriptors: [SortKey("name")])
        r.fetchBatchSize = 500
        let results = try context.fetchResults(r)
        XCTAssertEqual(results.count, 20_000)
        var seen = 0
        var peak = 0
        for (i, e) in results.enumerated() {
            if e.name.hasPrefix("n") { seen += 1 }
            if i % 1000 == 999 { peak = max(peak, context.registeredObjectCount) }
        }
        XCTAssertEqual(seen, 20_000)
        XCTAssertLessThanOrEqual(peak, 1000, "only about one batch of objects is alive at a time")
    }

    func testSaveIsAtomicUnderAnInjectedWriteFailure() throws {
        let fs = FaultInjectingFileSystem()
        var options = Database.Options()
        options.fileSystem = fs
        let container = try PersistentContainer(url: URL(fileURLWithPath: "/faulty/company.kura"), model: companyModel(), options: options)
        let context = container.newContext()
        let d = Department(context: context)
        d.name = "Dev"
        try context.save()
        for i in 0..<50 {
            let e = Employee(context: context)
            e.name = "E\(i)"
            e.department = d
        }
        d.name = "Development"
        fs.failOperation(.write, after: 1, with: .diskFull)
        XCTAssertThrowsError(try context.save()) { err in XCTAssertEqual((err as? KuraError)?.code, .diskFull) }
        XCTAssertTrue(context.hasChanges, "the context keeps its changes")
        XCTAssertEqual(context.insertedObjects.count, 50)
        let other = container.newContext()
        XCTAssertEqual(try other.count(for: FetchRequest<Employee>(entityName: "Employee")), 0)
        XCTAssertEqual(try other.fetch(FetchRequest<Department>(entityName: "Department")).first?.name, "Dev")
        try context.save()  // the fault was one-shot: retrying succeeds
        XCTAssertEqual(try container.newContext().count(for: FetchRequest<Employee>(entityName: "Employee")), 50)
    }

    func testModelMismatchListsTheDifferences() throws {
        let dir = try TempDir()
        let url = dir.url.appendingPathComponent("m.kura")
        _ = try PersistentContainer(url: url, model: ManagedObjectModel {
            EntityDescription("Memo") {
                AttributeDescription("title", .string)
                AttributeDescription("body", .string)
            }
        })
        XCTAssertThrowsError(try PersistentContainer(url: url, model: ManagedObjectModel {
            EntityDescription("Memo") {
                AttributeDescription("title", .int64)
                AttributeDescription("created", .date)
            }
        })) { err in
            let text = "\(err)"
            XCTAssertEqual((err as? KuraError)?.code, .modelMismatch)
            XCTAssertTrue(text.contains("Memo.title: string → int64 (values converted, rows rewritten)"), text)
            XCTAssertTrue(text.contains("Memo.created: in the model, not in the store"), text)
            XCTAssertTrue(text.contains("Memo.body: in the store, not in the model"), text)
        }
    }

    func testNamedStoreLivesInTheXDGDataDirectory() throws {
        let dir = try TempDir()
        setenv("XDG_DATA_HOME", dir.url.path, 1)
        defer { unsetenv("XDG_DATA_HOME") }
        #if os(Linux)
        let container = try PersistentContainer(name: "MemoApp", model: companyModel())
        XCTAssertEqual(container.url?.path, dir.url.appendingPathComponent("MemoApp/MemoApp.kura").path)
        XCTAssertTrue(FileManager.default.fileExists(atPath: container.url!.path))
        #endif
    }

    func testObjectIDsWorkInAnotherContextAndStringsRoundTrip() throws {
        let container = try PersistentContainer.inMemory(model: companyModel())
        let a = container.newContext()
        let e = Employee(context: a)
        e.name = "Ada"
        let temp = e.objectID
        XCTAssertThrowsError(try container.newContext().existingObject(with: temp))
        try a.save()
        let b = container.newContext()
        let same = try b.existingObject(with: try ManagedObjectID(uriRepresentation: e.objectID.uriRepresentation))
        XCTAssertEqual(same["name"] as? String, "Ada")
        XCTAssertFalse(same === e, "each context has its own instance")
        XCTAssertThrowsError(try ManagedObjectID(uriRepresentation: "x-coredata://nope"))
    }
}
