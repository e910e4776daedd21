// relationshipKeyPathsForPrefetching (issue 15 item 2, Context+Prefetch.swift):
// after a fetch that prefetches "record.school", "pets" and "courses.students",
// reading those relationships opens no read transaction, and every
// relationship reads what a context without prefetching reads — also with
// pending inserts, changes and deletes of either side made after the fetch.

import Foundation
import XCTest
@testable import Kura

final class PrefetchTests: XCTestCase {
    /// `count` new objects of `entity` in `c`, attribute `key` of the k-th set to `prefix` + k.
    private func insertNamed(_ c: ManagedObjectContext, _ entity: String, _ count: Int, key: String, _ prefix: String) throws -> [ManagedObject] {
        try (0..<count).map { i in
            let o = try c.insert(entity)
            try o.setValue("\(prefix)\(i)", forKey: key)
            return o
        }
    }

    /// The relationships of every student, as (key, sorted names of targets), read through the public API.
    private func snapshot(_ students: [ManagedObject]) throws -> [String] {
        // Unsaved objects have temporary IDs of their own context: named "new".
        func tag(_ o: ManagedObject?) -> String { o.map { $0.objectID.isTemporary ? "new" : $0.objectID.uriRepresentation } ?? "nil" }
        var out: [String] = []
        for s in students {
            let record = try s.value(forKey: "record") as? ManagedObject
            let school = try record?.value(forKey: "school") as? ManagedObject
            let pets = try XCTUnwrap(try s.value(forKey: "pets") as? ObjectList).map(tag)
            let courses = try XCTUnwrap(try s.value(forKey: "courses") as? ObjectList)
            var classmates: [String] = []
            for c in courses { classmates += try XCTUnwrap(try c.value(forKey: "students") as? ObjectList).map(tag) }
            out.append("\(tag(s)) record \(tag(record)) school \(tag(school)) pets \(pets) courses \(courses.map(tag)) classmates \(classmates)")
        }
        return out
    }

    func testPrefetchedRelationshipsOpenNoReadAndReadAsWithout() throws {
        let container = try PersistentContainer.inMemory(model: RelationshipQueryTests.model())
        let c = container.newContext()
        let schools = try insertNamed(c, "School", 3, key: "name", "school")
        let courses = try insertNamed(c, "Course", 4, key: "title", "course")
        for i in 0..<20 {
            let s = try c.insert("Student")
            try s.setValue("s\(i)", forKey: "name")
            if i % 4 != 3 {
                let r = try c.insert("Record")
                try r.setValue(Int64(i), forKey: "grade")
                if i % 5 != 0 { try r.setValue(schools[i % 3], forKey: "school") }
                try s.setValue(r, forKey: "record")
            }
            for k in 0..<(i % 3) {
                let p = try c.insert(k == 1 ? "Dog" : "Pet")
                try p.setValue(Int64(k), forKey: "age")
                try p.setValue(s, forKey: "owner")
            }
            for (k, x) in courses.enumerated() where (i + k) % 3 == 0 { try s.add(x, to: "courses") }
        }
        try c.save()

        var request = FetchRequest<ManagedObject>(entityName: "Student", sortDescriptors: [SortKey("name")])
        let keyPaths = ["record.school", "pets", "courses.students"]

        // Without prefetching, reading the relationships reads the store.
        let plain = container.newContext()
        let plainStudents = try plain.fetch(request)
        let plainBefore = plain.readTransactionCount
        let want = try snapshot(plainStudents)
        XCTAssertGreaterThan(plain.readTransactionCount, plainBefore)

        request.relationshipKeyPathsForPrefetching = keyPaths
        let pre = container.newContext()
        let students = try pre.fetch(request)
        let before = pre.readTransactionCount
        XCTAssertEqual(try snapshot(students), want)
        XCTAssertEqual(pre.readTransactionCount, before, "reading prefetched relationships opened read transactions")

        // Pending changes after the fetch, the same in both contexts: a pet
        // deleted, one moved to another owner, one inserted; a record deleted;
        // a course left and one joined; a school deleted.
        for ctx in [plain, pre] {
            let ss = try ctx.fetch(FetchRequest<ManagedObject>(entityName: "Student", sortDescriptors: [SortKey("name")]))
            let pets1 = try XCTUnwrap(try ss[2].value(forKey: "pets") as? ObjectList)
            try ctx.delete(pets1[0])
            let pets2 = try XCTUnwrap(try ss[5].value(forKey: "pets") as? ObjectList)
            try pets2[0].setValue(ss[6], forKey: "owner")
            let p = try ctx.insert("Pet")
            try p.setValue(ss[0], forKey: "owner")
            if let r = try ss[1].value(forKey: "record") as? ManagedObject { try ctx.delete(r) }
            let cs = try XCTUnwrap(try ss[3].value(forKey: "courses") as? ObjectList)
            if let first = cs.first { try ss[3].remove(first, from: "courses") }
            let allCourses = try ctx.fetch(FetchRequest<ManagedObject>(entityName: "Course", sortDescriptors: [SortKey("title")]))
            try ss[4].add(allCourses[3], to: "courses")
            let school = try ctx.fetch(FetchRequest<ManagedObject>(entityName: "School", sortDescriptors: [SortKey("name")]))[1]
            try ctx.delete(school)
        }
        XCTAssertEqual(try snapshot(students), try snapshot(plainStudents))

        // Deleted objects are not prefetched; a fetch after the pending changes agrees too.
        let again = try pre.fetch(request)
        XCTAssertEqual(try snapshot(again), try snapshot(try plain.fetch(request)))

        // A save drops what was prefetched: the store is read again, and agrees.
        try pre.save()
        let afterSave = pre.readTransactionCount
        let fresh = container.newContext()
        XCTAssertEqual(try snapshot(students), try snapshot(try fresh.fetch(request)))
        XCTAssertGreaterThan(pre.readTransactionCount, afterSave)

        // A key naming no relationship is an error naming it.
        request.relationshipKeyPathsForPrefetching = ["record.nothing"]
        XCTAssertThrowsError(try container.newContext().fetch(request)) { error in
            XCTAssertEqual((error as? KuraError)?.code, .notFound)
            XCTAssertTrue("\(error)".contains("nothing"), "\(error)")
        }
    }

    /// A to-one's prefetched targets are kept in one list (a target of many
    /// owners once per owner): fetching the same objects again and again in
    /// one context keeps that list bounded by the targets it holds, and the
    /// targets, shared by many owners, read as the store has them without a
    /// read transaction. A target another context changed and saved reads
    /// as the prefetch saw it until this context refreshes it, then as stored.
    func testRepeatedToOnePrefetchKeepsTargetsOnceAndReadsThem() throws {
        let container = try PersistentContainer.inMemory(model: RelationshipQueryTests.model())
        let c = container.newContext()
        let schools = try insertNamed(c, "School", 3, key: "name", "school")
        for i in 0..<1_500 {
            let r = try c.insert("Record")
            try r.setValue(Int64(i), forKey: "grade")
            if i % 7 != 0 { try r.setValue(schools[i % 3], forKey: "school") }
        }
        try c.save()

        var request = FetchRequest<ManagedObject>(entityName: "Record", sortDescriptors: [SortKey("grade")])
        request.relationshipKeyPathsForPrefetching = ["school"]
        let pre = container.newContext()
        for round in 0..<6 {
            let records = try pre.fetch(request)
            XCTAssertEqual(records.count, 1_500)
            let before = pre.readTransactionCount
            for (i, r) in records.enumerated() {
                let school = try r.value(forKey: "school") as? ManagedObject
                let name = try school?.value(forKey: "name") as? String
                XCTAssertEqual(name, i % 7 == 0 ? nil : "school\(i % 3)", "round \(round), record \(i)")
            }
            XCTAssertEqual(pre.readTransactionCount, before, "round \(round): prefetched schools read the store")
            // 1,285 owners a round (every record but each seventh) name 3 schools: without dropping the
            // repeats the list would hold 1,285 more each round.
            XCTAssertLessThanOrEqual(pre.prefetchedTargets.count, 2 * 3 + 1_024 + 1_285, "round \(round)")
        }

        // Another context renames a school and saves; this one, not merging,
        // reads the name it prefetched until it refreshes that school.
        let other = container.newContext()
        let s0 = try XCTUnwrap(try other.fetch(FetchRequest<ManagedObject>(entityName: "School", predicate: try KuraPredicate(format: "name == 'school1'"))).first)
        try s0.setValue("renamed", forKey: "name")
        try other.save()
        let records = try pre.fetch(request)
        let school1 = try XCTUnwrap(try records[1].value(forKey: "school") as? ManagedObject)
        XCTAssertEqual(try school1.value(forKey: "name") as? String, "school1")
        try pre.refresh(school1, mergeChanges: false)
        XCTAssertEqual(try school1.value(forKey: "name") as? String, "renamed")
    }

    /// A destination several owners share (a school of many students, a
    /// course of many students through the join table) is loaded once by a
    /// prefetch: its `awakeFromFetch` runs once, and it reads as stored.
    func testSharedPrefetchedDestinationsAwakeOnce() throws {
        let model = try ManagedObjectModel {
            EntityDescription("School", class: OnceAwake.self) {
                AttributeDescription("name", .string)
                RelationshipDescription("students", to: "Student", inverse: "school", toMany: true)
            }
            EntityDescription("Course", class: OnceAwake.self) {
                AttributeDescription("name", .string)
                RelationshipDescription("students", to: "Student", inverse: "courses", toMany: true)
            }
            EntityDescription("Student") {
                AttributeDescription("name", .string)
                RelationshipDescription("school", to: "School", inverse: "students")
                RelationshipDescription("courses", to: "Course", inverse: "students", toMany: true)
            }
        }
        let container = try PersistentContainer.inMemory(model: model)
        let c = container.newContext()
        let schools = try insertNamed(c, "School", 3, key: "name", "school")
        let courses = try insertNamed(c, "Course", 4, key: "name", "course")
        for i in 0..<12 {
            let s = try c.insert("Student")
            try s.setValue("s\(i)", forKey: "name")
            try s.setValue(schools[i % 3], forKey: "school")
            for (k, x) in courses.enumerated() where (i + k) % 2 == 0 { try s.add(x, to: "courses") }
        }
        try c.save()

        var request = FetchRequest<ManagedObject>(entityName: "Student", sortDescriptors: [SortKey("name")])
        request.relationshipKeyPathsForPrefetching = ["school", "courses"]
        let pre = container.newContext()
        let students = try pre.fetch(request)
        var seen: [ObjectIdentifier: OnceAwake] = [:]
        for s in students {
            let school = try XCTUnwrap(try s.value(forKey: "school") as? OnceAwake)
            seen[ObjectIdentifier(school)] = school
            for x in try XCTUnwrap(try s.value(forKey: "courses") as? ObjectList) {
                let course = try XCTUnwrap(x as? OnceAwake)
                seen[ObjectIdentifier(course)] = course
            }
        }
        XCTAssertEqual(seen.count, 7)
        for o in seen.values {
            XCTAssertEqual(o.awakes, 1, "\(o.objectID) awoke \(o.awakes) times")
            XCTAssertNotNil(try o.value(forKey: "name") as? String)
        }
    }
}

/// Counts its own `awakeFromFetch` calls.
final class OnceAwake: ManagedObject {
    var awakes = 0
    override func awakeFromFetch() {
        super.awakeFromFetch()
        awakes += 1
    }
}
