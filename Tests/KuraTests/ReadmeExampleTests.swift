import Foundation
import XCTest
import Kura

// The README's "Using the object layer" snippet, verbatim apart from the class
// names (prefixed so they do not clash with KuraExamples'), run against a
// temporary XDG data directory.

final class ReadmeStudent: ManagedObject {
    @Managed("name") var name: String
    @Managed("age") var age: Int16
    @ToOne("record") var record: ReadmeRecord?
}
final class ReadmeRecord: ManagedObject {
    @Managed("course") var course: String
    @Managed("grade") var grade: Int32
}

final class ReadmeExampleTests: XCTestCase {
    func testReadmeSnippetRuns() throws {
        let dir = try TempDir()
        setenv("XDG_DATA_HOME", dir.url.path, 1)
        defer { unsetenv("XDG_DATA_HOME") }
        let model = try ManagedObjectModel {
            EntityDescription("Student", class: ReadmeStudent.self) {
                AttributeDescription("name", .string, optional: false, indexed: true)
                AttributeDescription("age", .int16, default: 18)
                RelationshipDescription("record", to: "Record", deleteRule: .cascade)
            }
            EntityDescription("Record", class: ReadmeRecord.self) {
                AttributeDescription("course", .string)
                AttributeDescription("grade", .int32)
            }
        }
        let container = try PersistentContainer(name: "School", model: model)
        let context = container.newContext()
        let ada = ReadmeStudent(context: context)
        ada.name = "Ada"
        let record = ReadmeRecord(context: context)
        record.grade = 90
        ada.record = record
        try context.save()

        var request = FetchRequest<ReadmeStudent>(entityName: "Student", sortDescriptors: [SortKey("record.grade", ascending: false)])
        try request.setPredicate("record.grade > %d AND name BEGINSWITH[cd] %@", 80, "a")
        let best = try context.fetch(request)
        XCTAssertEqual(best.map(\.name), ["Ada"])
    }
}
