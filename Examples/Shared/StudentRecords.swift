// The Student/Record program of seed 003 (a Chinese Core Data tutorial): a
// Student has a name, an age and a to-one `record` (course, grade); four buttons
// insert, delete, update and query. Here each button is a function, and the
// demo presses them in turn, printing what happens.

import Foundation
import Kura

public final class Student: ManagedObject {
    @Managed("name") public var name: String
    @Managed("age") public var age: Int16
    @ToOne("record") public var record: Record?
}

public final class Record: ManagedObject {
    @Managed("course") public var course: String
    @Managed("grade") public var grade: Int32
    @ToOne("student") public var student: Student?
}

public enum StudentRecords {
    /// The model: Student 1—1 Record, deleting a student deletes its record.
    public static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Student", class: Student.self) {
                AttributeDescription("name", .string, optional: false, indexed: true)
                AttributeDescription("age", .int16, default: 18)
                RelationshipDescription("record", to: "Record", inverse: "student", deleteRule: .cascade)
            }
            EntityDescription("Record", class: Record.self) {
                AttributeDescription("course", .string)
                AttributeDescription("grade", .int32, default: 0)
                RelationshipDescription("student", to: "Student", inverse: "record")
            }
        }
    }

    /// "Insert" button.
    public static func insert(_ name: String, age: Int16, course: String, grade: Int32, in context: ManagedObjectContext) throws {
        let s = Student(context: context)
        s.name = name
        s.age = age
        let r = Record(context: context)
        r.course = course
        r.grade = grade
        s.record = r
        try context.save()
    }

    /// "Delete" button: deletes the students with this name (their records go too).
    public static func delete(named name: String, in context: ManagedObjectContext) throws -> Int {
        let n = try Student.deleteAll(matching: try KuraPredicate(format: "name == %@", arguments: [.text(name)]), in: context)
        try context.save()
        return n
    }

    /// "Update" button: sets a student's grade.
    public static func update(_ name: String, grade: Int32, in context: ManagedObjectContext) throws {
        guard let s = try Student.findFirst(byAttribute: "name", value: name, in: context) else { return }
        s.record?.grade = grade
        try context.save()
    }

    /// "Query" button: students with a grade above `minimum`, best first.
    public static func query(gradeAbove minimum: Int32, in context: ManagedObjectContext) throws -> [Student] {
        var request = FetchRequest<Student>(entityName: "Student", sortDescriptors: [SortKey("record.grade", ascending: false), SortKey("name")])
        try request.setPredicate("record.grade > %d", .integer(Int64(minimum)))
        return try context.fetch(request)
    }

    /// Runs the whole program on a store at `url`, printing each step.
    public static func run(storeURL url: URL, log: (String) -> Void = { print($0) }) throws {
        let container = try PersistentContainer(url: url, model: model())
        let context = container.newContext()
        func show(_ title: String) throws {
            log(title)
            for s in try Student.findAll(sortedBy: "name", in: context) {
                log("    \(s.name), \(s.age): \(s.record.map { "\($0.course) \($0.grade)" } ?? "no record")")
            }
        }
        log("Kura demo: the Student/Record program, store \(url.path)")
        try insert("Li Lei", age: 20, course: "Math", grade: 85, in: context)
        try insert("Han Meimei", age: 19, course: "English", grade: 92, in: context)
        try insert("Wang Fang", age: 21, course: "Physics", grade: 78, in: context)
        try show("1. insert three students, each with a record:")
        try update("Wang Fang", grade: 88, in: context)
        try show("2. update Wang Fang's grade to 88:")
        let found = try query(gradeAbove: 80, in: context)
        log("3. query students with grade > 80, best first: " + found.map { "\($0.name) (\($0.record?.grade ?? 0))" }.joined(separator: ", "))
        let removed = try delete(named: "Li Lei", in: context)
        try show("4. delete Li Lei (\(removed) student; the cascade deletes the record):")
        log("   records left: \(try Record.countOfEntities(in: context))")
        // Reopen the store: everything was saved.
        let again = try PersistentContainer(url: url, model: model()).newContext()
        log("5. reopen the store: \(try Student.countOfEntities(in: again)) students, \(try Record.countOfEntities(in: again)) records")
    }
}
