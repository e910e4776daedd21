import Foundation
import XCTest
import Kura
import KuraExamples

/// The seed programs' idioms through the public API.
final class IdiomTests: XCTestCase {
    func testStudentRecordsProgramSteps() throws {
        let dir = try TempDir()
        var lines: [String] = []
        try StudentRecords.run(storeURL: dir.url.appendingPathComponent("s.kura")) { lines.append($0) }
        let text = lines.joined(separator: "\n")
        XCTAssertTrue(text.contains("3. query students with grade > 80, best first: Han Meimei (92), Wang Fang (88), Li Lei (85)"), text)
        XCTAssertTrue(text.contains("records left: 2"), text)
        XCTAssertTrue(text.contains("5. reopen the store: 2 students, 2 records"), text)
    }

    func testMagicalRecordIdioms() throws {
        let container = try PersistentContainer.inMemory(model: StudentRecords.model())  // in-memory stack
        let context = container.newContext()
        try container.save { c in                                                       // save(block)
            for (n, a) in [("Ann", 20), ("Bob", 22), ("Cy", 19)] {
                let s = try Student.createEntity(in: c)
                s.name = n
                s.age = Int16(a)
            }
        }
        XCTAssertEqual(try Student.findAll(in: context).count, 3)
        XCTAssertEqual(try Student.findAll(sortedBy: "age", ascending: false, in: context).map(\.name), ["Bob", "Ann", "Cy"])
        XCTAssertEqual(try Student.findFirst(byAttribute: "name", value: "Cy", in: context)?.age, 19)
        let dan = try Student.findFirstOrCreate(byAttribute: "name", value: "Dan", in: context)
        XCTAssertTrue(dan.isInserted)
        XCTAssertEqual(try Student.findFirstOrCreate(byAttribute: "name", value: "Ann", in: context).age, 20)
        XCTAssertEqual(try Student.countOfEntities(in: context), 4, "counts include the unsaved Dan")
        try context.save()
        XCTAssertEqual(try Student.deleteAll(matching: try KuraPredicate(format: "age < 20"), in: context), 2, "Cy (19) and Dan (default 18)")
        try context.save()
        XCTAssertEqual(try Student.truncateAll(in: context), 2)
        try context.save()
        XCTAssertEqual(try Student.countOfEntities(in: container.newContext()), 0)
    }

    func testCoreDataManagerIdioms() throws {
        let container = try PersistentContainer.inMemory(model: StudentRecords.model())
        let context = container.newContext()
        for n in ["d", "b", "a", "c"] { try context.new("Student")["name"] = n }
        try context.save()
        let sorted = [SortKey("name")]
        XCTAssertEqual(try context.select("Student", sortedBy: sorted, limit: 2, offset: 1).map { $0["name"] as? String }, ["b", "c"])
        XCTAssertEqual(try context.select("Student", where: "name IN %@", ["a", "d"]).count, 2)
        try context.deleteFrom("Student", at: 0, sortedBy: sorted)
        try context.save()
        XCTAssertEqual(try context.select("Student", sortedBy: sorted).map { $0["name"] as? String }, ["b", "c", "d"])
        XCTAssertThrowsError(try context.deleteFrom("Student", at: 9, sortedBy: sorted))
        XCTAssertThrowsError(try context.select("Nope")) { e in XCTAssertTrue("\(e)".contains("\"Nope\""), "\(e)") }
    }

    func testNaFilterCreateGetOrCreateSyncAndAsync() async throws {
        let container = try PersistentContainer.inMemory(model: StudentRecords.model())
        let context = container.newContext()
        let made = try await Student.create(["name": "Ann", "age": 30], in: context)
        XCTAssertFalse(made.objectID.isTemporary, "saved by the background context")
        XCTAssertTrue(made.managedObjectContext === context, "handed back in the caller's context")
        let again = try await Student.getOrCreate(["name": "Ann", "age": 30], in: context)
        XCTAssertTrue(again === made, "getOrCreate returns the existing match, uniqued")
        let other = try await Student.getOrCreate(["name": "Bo"], in: context)
        XCTAssertEqual(other.age, 18, "created with the default age")
        let found = try await Student.filter(["name": "Bo"], in: context)
        XCTAssertEqual(found, [other])
        try syncFlow(context)
    }

    func syncFlow(_ context: ManagedObjectContext) throws {
        XCTAssertEqual(try Student.filter(["age": 30], in: context).map(\.name), ["Ann"])
        let c = try Student.create(["name": "Cy", "age": 5], in: context)
        XCTAssertTrue(c.isInserted)
        XCTAssertTrue(try Student.getOrCreate(["name": "Cy"], in: context) === c, "pending objects count as existing")
        XCTAssertThrowsError(try Student.filter(["shoe": 1], in: context))
    }
}
