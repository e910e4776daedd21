import Foundation
import XCTest
import Kura
import KuraEngine

/// A save of objects of several entities inserted in turn (a student, its
/// record, its courses) writes their rows grouped by table and resolves the
/// to-one keys naming inserted objects through their insert positions, not a
/// dictionary (Context+Save.swift, InsertedPositions): every key must name
/// the right row, a key naming a deleted object must be written as null, IDs
/// made permanent early (`obtainPermanentIDs`) must keep their rows, row IDs
/// must grow in insertion order within each table, and the did-save and the
/// history must list the inserts in insertion order. Typed setters find the
/// relationship and its inverse without hashing (a few entities in turn).
/// Prints its seed; KURA_SEED=<n> replays one.
final class RelationshipInsertSaveTests: XCTestCase {
    final class Student: ManagedObject {
        @Managed("number") var number: Int64
        @ToOne("record") var record: Record?
        @ToMany("courses") var courses: [Course]
    }
    final class Record: ManagedObject {
        @Managed("grade") var grade: Int64
        @ToOne("student") var student: Student?
    }
    final class Course: ManagedObject {
        @Managed("title") var title: String
        @ToOne("student") var student: Student?
    }

    private func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Student", class: Student.self) {
                AttributeDescription("number", .int64)
                // noAction: deleting a student leaves its record's key naming it.
                RelationshipDescription("record", to: "Record", inverse: "student", deleteRule: .noAction)
                RelationshipDescription("courses", to: "Course", inverse: "student", toMany: true, deleteRule: .noAction)
            }
            EntityDescription("Record", class: Record.self) {
                AttributeDescription("grade", .int64)
                RelationshipDescription("student", to: "Student", inverse: "record")
            }
            EntityDescription("Course", class: Course.self) {
                AttributeDescription("title", .string)
                RelationshipDescription("student", to: "Student", inverse: "courses")
            }
        }
    }

    func testAlternatingEntitiesWithToOneAndToManySaveEveryKeyRight() throws {
        let seed = ProcessInfo.processInfo.environment["KURA_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 0...UInt64(UInt32.max))
        print("RelationshipInsertSaveTests seed \(seed) (replay with KURA_SEED=\(seed))")
        var rng = SplitMix64(state: seed)
        let container = try PersistentContainer.inMemory(model: model(), persistentHistoryTracking: true)
        for round in 0..<2 {
            let context = container.newContext()
            var notes: [ContextDidSave] = []
            let token = context.observeDidSave { notes.append($0) }
            var inserted: [ManagedObject] = []
            var students: [(Student, Record, [Course])] = []
            var early: [ManagedObject] = []
            for i in 0..<150 {
                let s = Student(context: context)
                s.number = Int64(round * 1000 + i)
                let r = Record(context: context)
                r.grade = Int64.random(in: 0...99, using: &rng)
                s.record = r
                inserted += [s, r]
                var courses: [Course] = []
                for j in 0..<Int.random(in: 0...4, using: &rng) {
                    let c = Course(context: context)
                    c.title = "c\(i).\(j)"
                    c.student = s
                    courses.append(c)
                    inserted.append(c)
                }
                students.append((s, r, courses))
                for o in [s, r] + courses as [ManagedObject] where Int.random(in: 0..<10, using: &rng) == 0 { early.append(o) }
            }
            // Some objects take their permanent IDs before the save.
            try context.obtainPermanentIDs(for: early)
            // Some students are deleted: their records' and courses' keys
            // (noAction) still name them, and must be written as null.
            var gone = Set<ObjectIdentifier>()
            for (s, _, _) in students where Int.random(in: 0..<8, using: &rng) == 0 {
                try context.delete(s)
                gone.insert(ObjectIdentifier(s))
            }
            let live = inserted.filter { !gone.contains(ObjectIdentifier($0)) }
            try context.save()
            token.cancel()
            let context1 = "seed \(seed) round \(round)"

            // In memory: permanent IDs, keys renamed to them.
            for (s, r, courses) in students where !gone.contains(ObjectIdentifier(s)) {
                XCTAssertFalse(s.objectID.isTemporary, context1)
                XCTAssertTrue(s.record === r, context1)
                XCTAssertTrue(r.student === s, context1)
                XCTAssertEqual((try r.value(forKey: "student") as? ManagedObject)?.objectID, s.objectID, context1)
                for c in courses { XCTAssertTrue(c.student === s, context1) }
            }
            // Row IDs grow in insertion order within each entity (early IDs aside).
            let earlyIDs = Set(early.map(ObjectIdentifier.init))
            for name in ["Student", "Record", "Course"] {
                let rows = live.filter { $0.entity.name == name && !earlyIDs.contains(ObjectIdentifier($0)) }.map(\.objectID.rowID)
                XCTAssertEqual(rows, rows.sorted(), "\(context1): \(name) row IDs in insertion order")
                XCTAssertEqual(Set(rows).count, rows.count, context1)
            }
            // The did-save and the history list the inserts in insertion order.
            XCTAssertEqual(notes.count, 1, context1)
            XCTAssertEqual(notes.first?.inserted, live.map(\.objectID), context1)
            let history = try container.history()
            let inserts = history.last?.changes.filter { $0.kind == .insert }.map(\.objectID)
            XCTAssertEqual(inserts, live.map(\.objectID), context1)

            // The stored keys: each record's and course's names its
            // student's row, or is null (not a dangling row ID, which would
            // read as nil too) when the student was deleted.
            let recordKeys = try storedKeys(container, "Record", "student")
            let courseKeys = try storedKeys(container, "Course", "student")
            for (s, r, courses) in students {
                let want: Value = gone.contains(ObjectIdentifier(s)) ? .null : .integer(s.objectID.rowID)
                XCTAssertEqual(recordKeys[r.objectID.rowID], want, context1)
                for c in courses { XCTAssertEqual(courseKeys[c.objectID.rowID], want, context1) }
            }
            // In the store, read by a fresh context.
            let fresh = container.newContext()
            for (s, r, courses) in students {
                let storedRecord = try XCTUnwrap(try fresh.existingObject(with: r.objectID) as? Record, context1)
                XCTAssertEqual(storedRecord.grade, r.grade, context1)
                if gone.contains(ObjectIdentifier(s)) {
                    // The key named a deleted object: written as null.
                    XCTAssertNil(storedRecord.student, context1)
                    for c in courses {
                        XCTAssertNil(try XCTUnwrap(try fresh.existingObject(with: c.objectID) as? Course, context1).student, context1)
                    }
                    continue
                }
                let storedStudent = try XCTUnwrap(try fresh.existingObject(with: s.objectID) as? Student, context1)
                XCTAssertEqual(storedStudent.number, s.number, context1)
                XCTAssertEqual(storedRecord.student?.objectID, s.objectID, context1)
                XCTAssertEqual(storedStudent.record?.objectID, r.objectID, context1)
                XCTAssertEqual(Set(storedStudent.courses.map(\.title)), Set(courses.map(\.title)), context1)
                XCTAssertEqual(Set(storedStudent.courses.map(\.objectID)), Set(courses.map(\.objectID)), context1)
            }
        }
    }

    /// The stored value of column `column` of every row of `table`, by row ID.
    private func storedKeys(_ container: PersistentContainer, _ table: String, _ column: String) throws -> [Int64: Value] {
        try container.database.read { tx in
            let t = try tx.table(table)
            let position = try XCTUnwrap(try tx.schema(of: t)?.position(of: column))
            var out: [Int64: Value] = [:]
            for (rowID, row) in try tx.fetch(TableQuery(table)) { out[rowID] = position < row.count ? row[position] : .null }
            return out
        }
    }

    /// A target made permanent early (`obtainPermanentIDs`) and then
    /// deleted: a key naming it (noAction) is written as null, not as its
    /// reserved row ID; a live early target's key is its reserved row.
    func testKeyNamingADeletedEarlyPermanentObjectIsWrittenAsNull() throws {
        let container = try PersistentContainer.inMemory(model: model())
        let context = container.newContext()
        let kept = Student(context: context)
        kept.number = 1
        let dropped = Student(context: context)
        dropped.number = 2
        let r1 = Record(context: context)
        r1.student = kept
        let r2 = Record(context: context)
        r2.student = dropped
        try context.obtainPermanentIDs(for: [kept, dropped])
        try context.delete(dropped)
        try context.save()
        let fresh = container.newContext()
        let back1 = try XCTUnwrap(try fresh.existingObject(with: r1.objectID) as? Record)
        let back2 = try XCTUnwrap(try fresh.existingObject(with: r2.objectID) as? Record)
        XCTAssertEqual(back1.student?.objectID, kept.objectID)
        XCTAssertNil(back2.student)
        // The stored key itself is null (a key naming the reserved row would read nil too).
        XCTAssertEqual(try storedKeys(container, "Record", "student"), [r1.objectID.rowID: .integer(kept.objectID.rowID), r2.objectID.rowID: .null])
        XCTAssertEqual(try fresh.count(for: FetchRequest<Student>(entityName: "Student")), 1)
    }

    /// Typed to-one setters of several entities in turn keep both sides in
    /// step: one-to-one (both keys), one-to-many (the key and the to-many
    /// read), replacing a partner unhooks the old one.
    func testTypedToOneSettersInTurnKeepInversesInStep() throws {
        let container = try PersistentContainer.inMemory(model: model())
        let context = container.newContext()
        let a = Student(context: context)
        let b = Student(context: context)
        let r = Record(context: context)
        let c = Course(context: context)
        a.record = r
        c.student = a
        XCTAssertTrue(r.student === a)
        XCTAssertEqual(a.courses.map(ObjectIdentifier.init), [ObjectIdentifier(c)])
        // Moving the record to b unhooks a; moving the course empties a's courses.
        r.student = b
        c.student = b
        XCTAssertNil(a.record)
        XCTAssertTrue(b.record === r)
        XCTAssertTrue(a.courses.isEmpty)
        XCTAssertEqual(b.courses.map(ObjectIdentifier.init), [ObjectIdentifier(c)])
        c.student = nil
        XCTAssertTrue(b.courses.isEmpty)
        try context.save()
        let fresh = container.newContext()
        let backB = try XCTUnwrap(try fresh.existingObject(with: b.objectID) as? Student)
        XCTAssertEqual(backB.record?.objectID, r.objectID)
        XCTAssertTrue(backB.courses.isEmpty)
        XCTAssertNil(try XCTUnwrap(try fresh.existingObject(with: a.objectID) as? Student).record)
    }
}
