// Relationship predicates and sorts run in the engine (issue 15 item 1:
// EntityPredicate.swift's translation into KuraEngine's SemiJoin.swift joins
// and lookups). The in-memory evaluator is the oracle: random predicates and
// sorts through to-one (any depth), to-many (inverse key, join table, an
// entity hierarchy) relationships, with ANY/ALL/NONE, @count and SUBQUERY,
// OR, NOT, `record == nil`, nested to-many (`ANY courses.students.x`),
// over random object graphs with nils, asked of a context without pending
// changes (engine path) and of one forced onto the object path
// (FetchPathTesting), must give identical object IDs in identical order. Sorts led by
// `record.grade` descending with limits and offsets take the walk of Record's
// grade index (SemiJoin+SortWalk.swift), forced half the time. Schools asked
// for `records.@count` take one ordered walk of Record's index on `school`;
// `record.grade == k` may take the inner row IDs from the grade index alone
// (both SemiJoin.swift; SemiJoinCountTests checks them in the engine).
// The same questions are asked of two contexts with the same pending changes
// (students edited and inserted, sometimes relationship edits), one free to
// run the joins in the engine and correct for them, one in memory.
// Prints its seed; KURA_SEED=<n> replays one; KURA_LONG=1 asks of 20 graphs.

import Foundation
import XCTest
@testable import Kura
@testable import KuraEngine

final class RelationshipQueryTests: XCTestCase {
    /// School ←records— Record ←record— Student —pets→ Pet (Dog a subentity),
    /// Student ↔ Course (many-to-many), Marker (unrelated, forces the object path).
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("School") {
                AttributeDescription("name", .string)
                AttributeDescription("rank", .int64)
                RelationshipDescription("records", to: "Record", inverse: "school", toMany: true)
            }
            EntityDescription("Record") {
                AttributeDescription("grade", .int64, indexed: true)
                AttributeDescription("note", .string)
                RelationshipDescription("school", to: "School", inverse: "records")
                RelationshipDescription("student", to: "Student", inverse: "record")
            }
            EntityDescription("Student") {
                AttributeDescription("name", .string)
                AttributeDescription("age", .int64)
                RelationshipDescription("record", to: "Record", inverse: "student")
                RelationshipDescription("pets", to: "Pet", inverse: "owner", toMany: true)
                RelationshipDescription("courses", to: "Course", inverse: "students", toMany: true)
            }
            EntityDescription("Pet") {
                AttributeDescription("kind", .string)
                AttributeDescription("age", .int64)
                RelationshipDescription("owner", to: "Student", inverse: "pets")
            }
            EntityDescription("Dog", parent: "Pet") {
                AttributeDescription("barks", .bool)
            }
            EntityDescription("Course") {
                AttributeDescription("title", .string)
                AttributeDescription("credits", .int64)
                RelationshipDescription("students", to: "Student", inverse: "courses", toMany: true)
            }
            EntityDescription("Marker") {
                AttributeDescription("n", .int64)
            }
        }
    }

    func testEngineJoinsMatchInMemoryEvaluation() throws {
        let seed = ProcessInfo.processInfo.environment["KURA_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 0...UInt64(UInt32.max))
        print("RelationshipQueryTests seed \(seed) (replay with KURA_SEED=\(seed))")
        var rng = SplitMix64(state: seed)
        func rand(_ n: Int) -> Int { Int(rng.next() % UInt64(n)) }
        let names = ["Ann", "bob", "Émile", "emile", "Zoë", "al"]
        var translated = 0, asked = 0, walked = 0, correctedInEngine = 0, countWalks = 0, indexOnly = 0
        let long = ProcessInfo.processInfo.environment["KURA_LONG"] == "1"
        for graph in 0..<(long ? 20 : 3) {
            let container = try PersistentContainer.inMemory(model: Self.model())
            let c = container.newContext()
            func maybe<T>(_ v: T) -> T? { rand(6) == 0 ? nil : v }
            var schools: [ManagedObject] = [], records: [ManagedObject] = [], students: [ManagedObject] = [], courses: [ManagedObject] = []
            for _ in 0..<3 {
                let s = try c.insert("School")
                try s.setValue(maybe(names[rand(names.count)]), forKey: "name")
                try s.setValue(maybe(Int64(rand(3))), forKey: "rank")
                schools.append(s)
            }
            for _ in 0..<4 {
                let x = try c.insert("Course")
                try x.setValue(maybe(["math", "Math", "art"][rand(3)]), forKey: "title")
                try x.setValue(maybe(Int64(rand(4))), forKey: "credits")
                courses.append(x)
            }
            for _ in 0..<14 {
                let r = try c.insert("Record")
                try r.setValue(maybe(Int64(rand(5))), forKey: "grade")
                try r.setValue(maybe(names[rand(names.count)]), forKey: "note")
                if rand(4) != 0 { try r.setValue(schools[rand(schools.count)], forKey: "school") }
                records.append(r)
            }
            for i in 0..<18 {
                let s = try c.insert("Student")
                try s.setValue(maybe(names[rand(names.count)]), forKey: "name")
                try s.setValue(maybe(Int64(rand(4))), forKey: "age")
                if i < records.count && rand(5) != 0 { try s.setValue(records[i], forKey: "record") }
                for _ in 0..<rand(4) {
                    let p = try c.insert(rand(3) == 0 ? "Dog" : "Pet")
                    try p.setValue(maybe(["cat", "Cat", "fish"][rand(3)]), forKey: "kind")
                    try p.setValue(maybe(Int64(rand(5))), forKey: "age")
                    if p.entity.name == "Dog" { try p.setValue(rand(2) == 0, forKey: "barks") }
                    try p.setValue(s, forKey: "owner")
                }
                for x in courses where rand(3) == 0 { try s.add(x, to: "courses") }
                students.append(s)
            }
            // Pets without owner, records of no student.
            for _ in 0..<3 { try c.insert("Pet").setValue(Int64(rand(5)), forKey: "age") }
            try c.save()
            // A record deleted with its student kept points nowhere from no one
            // (the inverse is nullified); delete a school too.
            if rand(2) == 0 { try c.delete(schools[0]); try c.save() }

            let engine = container.newContext()
            let objects = container.newContext()
            _ = try objects.insert("Marker")  // an unrelated pending change
            // The same pending changes in two contexts, one answering in the
            // engine (corrected for them), one in memory: students edited and
            // inserted (their table only), and in every third graph relationship
            // edits too (a pet moved, a course joined: those take the object path).
            let pending = container.newContext(), pendingOracle = container.newContext()
            let edits = (0..<4).map { _ in (rand(18), names[rand(names.count)], Int64(rand(4))) }
            let relationshipEdits = graph % 3 == 1 ? [(rand(18), rand(18), rand(4))] : []
            for ctx in [pending, pendingOracle] {
                let ss = try ctx.fetch(FetchRequest<ManagedObject>(entityName: "Student", sortDescriptors: [SortKey("name"), SortKey("age")]))
                    .sorted { $0.objectID.rowID < $1.objectID.rowID }
                for (i, name, age) in edits {
                    try ss[i].setValue(name, forKey: "name")
                    try ss[i].setValue(age, forKey: "age")
                }
                let fresh = try ctx.insert("Student")
                try fresh.setValue(edits[0].1, forKey: "name")
                try fresh.setValue(edits[0].2, forKey: "age")
                for (from, to, course) in relationshipEdits {
                    if let pet = try XCTUnwrap(try ss[from].value(forKey: "pets") as? ObjectList).first { try pet.setValue(ss[to], forKey: "owner") }
                    let cs = try ctx.fetch(FetchRequest<ManagedObject>(entityName: "Course")).sorted { $0.objectID.rowID < $1.objectID.rowID }
                    try ss[to].add(cs[course], to: "courses")
                }
            }

            func n() -> String { rand(7) == 0 ? "nil" : String(rand(5)) }
            func op() -> String { ["==", "!=", "<", ">=", ">"][rand(5)] }
            func str() -> String { "'" + ["ann", "Emile", "cat", "math", "Z"][rand(5)] + "'" }
            func sop() -> String { ["==", "==[c]", "==[cd]", "BEGINSWITH[c]", "!=", "CONTAINS[d]"][rand(6)] }
            func studentAtom() -> String {
                switch rand(19) {
                case 17: return ["record == nil", "record != nil", "nil == record"][rand(3)]
                case 18: return ["record.school == nil", "record.school != nil"][rand(2)]
                case 0: return "record.grade \(op()) \(n())"
                case 1: return "record.school.name \(sop()) \(str())"
                case 2: return "record.note \(sop()) \(str())"
                case 3: return "ANY pets.age \(op()) \(n())"
                case 4: return "ALL pets.age \(op()) \(n())"
                case 5: return "NONE pets.kind \(sop()) \(str())"
                case 6: return "ANY courses.title \(sop()) \(str())"
                case 7: return "ALL courses.credits \(op()) \(n())"
                case 8: return "pets.@count \(op()) \(rand(4))"
                case 9: return "courses.@count \(op()) \(rand(3))"
                case 10: return "SUBQUERY(pets, $p, $p.age \(op()) \(n()) AND $p.kind \(sop()) \(str())).@count \(op()) \(rand(3))"
                case 11: return "age \(op()) \(n())"
                case 12: return "record.grade + 1 \(op()) \(rand(5))"
                case 13: return ["pets.@sum.age", "pets.@avg.age", "pets.@min.age", "courses.@max.credits"][rand(4)] + " \(op()) \(n())"
                case 14: return "record.school.rank \(op()) record.grade"
                case 15: return "ANY courses.students.record.grade \(op()) \(n())"
                default: return "\(rand(5)) \(op()) record.grade"
                }
            }
            func petAtom() -> String {
                switch rand(6) {
                case 0: return "owner.record.grade \(op()) \(n())"
                case 1: return "owner.name \(sop()) \(str())"
                case 2: return "owner.pets.@count \(op()) \(rand(4))"
                case 3: return "ANY owner.courses.credits \(op()) \(n())"
                case 4: return "age \(op()) \(n())"
                default: return "owner.record.school == nil"
                }
            }
            // School: `records.@count` over every record is one ordered walk of
            // Record's index on `school` (SemiJoin.swift).
            func schoolAtom() -> String {
                switch rand(4) {
                case 0, 1: return "records.@count \(op()) \(rand(5))"
                case 2: return "ANY records.grade \(op()) \(n())"
                default: return "rank \(op()) \(n())"
                }
            }
            func predicate(_ atom: () -> String, depth: Int = 0) -> String {
                switch depth < 2 ? rand(6) : 0 {
                case 0, 1, 2: return atom()
                case 3: return "(\(predicate(atom, depth: depth + 1))) AND (\(predicate(atom, depth: depth + 1)))"
                case 4: return "NOT (\(predicate(atom, depth: depth + 1)))"
                default: return "(\(predicate(atom, depth: depth + 1))) OR (\(predicate(atom, depth: depth + 1)))"
                }
            }
            for step in 0..<40 {
                let kind = rand(8)
                let isPet = kind < 2, isSchool = kind == 2
                let format = isPet ? predicate(petAtom) : isSchool ? predicate(schoolAtom) : predicate(studentAtom)
                var request = FetchRequest<ManagedObject>(entityName: isPet ? "Pet" : isSchool ? "School" : "Student", predicate: try KuraPredicate(format: format))
                if rand(2) == 0 {
                    let keys = isPet ? ["owner.record.grade", "owner.name", "age", "owner.record.school.name"]
                             : isSchool ? ["name", "rank"] : ["record.grade", "record.school.name", "name", "age", "record.note"]
                    request.sortDescriptors = (0..<(1 + rand(2))).map { _ in
                        SortKey(keys[rand(keys.count)], ascending: rand(2) == 0, collation: [.binary, .caseInsensitive, .caseDiacriticInsensitive][rand(3)])
                    }
                    // Often the shape a walk of Record's grade index serves
                    // (SemiJoin+SortWalk.swift): led by record.grade descending.
                    if !isPet && !isSchool && rand(2) == 0 { request.sortDescriptors.insert(SortKey("record.grade", ascending: false), at: 0) }
                    if rand(2) == 0 { request.fetchLimit = 1 + rand(5) }
                    if rand(3) == 0 { request.fetchOffset = rand(4) }
                }
                if isPet && rand(2) == 0 { request.includesSubentities = false }
                asked += 1
                let e = try container.model.entity(request.entityName)
                // Half the time the walk is taken whenever it applies (SemiJoin+SortWalk.swift).
                let force = rand(2) == 0
                if let q = engine.joinedQuery(request, e, kinds: nil, limit: request.fetchLimit) {
                    translated += 1
                    let plan = try SortWalkTesting.$always.withValue(force) { try container.database.read { tx in try tx.explain(q) } }
                    if plan.contains("* walk of index") { walked += 1 }
                    if plan.contains("one ordered walk of index") { countWalks += 1 }
                    if plan.contains("alone (the equality decides every entry") { indexOnly += 1 }
                }
                let got = try SortWalkTesting.$always.withValue(force) { try engine.fetchObjectIDs(request) }
                let want = try FetchPathTesting.$objectsOnly.withValue(true) { try objects.fetchObjectIDs(request) }
                XCTAssertEqual(got, want, "graph \(graph) step \(step): \(request.entityName) \(format) sorted by \(request.sortDescriptors) (seed \(seed))")
                if got != want { return }
                XCTAssertEqual(try engine.count(for: request), want.count)
                if step % 4 == 0 {
                    let got = try SortWalkTesting.$always.withValue(force) { try pending.fetchObjectIDs(request) }
                    let want = try FetchPathTesting.$objectsOnly.withValue(true) { try pendingOracle.fetchObjectIDs(request) }
                    XCTAssertEqual(got.count, want.count, "pending changes \(edits) \(relationshipEdits), graph \(graph) step \(step): \(request.entityName) \(format) sorted by \(request.sortDescriptors) (seed \(seed))")
                    // Unsaved objects have temporary IDs of their own context.
                    XCTAssertEqual(got.map { $0.isTemporary ? nil : $0 }, want.map { $0.isTemporary ? nil : $0 },
                                   "pending changes \(edits) \(relationshipEdits), graph \(graph) step \(step): \(request.entityName) \(format) sorted by \(request.sortDescriptors) (seed \(seed))")
                    if !relationshipEdits.isEmpty || request.entityName == "Pet" { continue }
                    if let q = pending.joinedQuery(request, e, kinds: nil, limit: nil), !pending.pendingChangesReach(q) { correctedInEngine += 1 }
                }
            }
        }
        print("RelationshipQueryTests: \(translated) of \(asked) predicates translated, \(walked) sorts from an index walk, \(countWalks) counts from one index walk, "
              + "\(indexOnly) to-one joins from an index alone, \(correctedInEngine) with pending changes in the engine")
        // Most questions must take the engine path.
        XCTAssertGreaterThan(translated * 5, asked * 4, "only \(translated) of \(asked) predicates were translated")
        XCTAssertGreaterThan(walked, 0, "no sort was driven from an index walk")
        XCTAssertGreaterThan(countWalks, 0, "no to-many count came from one walk of the inverse key's index")
        XCTAssertGreaterThan(correctedInEngine, 0, "no fetch with pending changes ran its joins in the engine")
    }

    /// `explain` of a fetch through a to-one: the inner side is materialized
    /// first through its index, then the outer rows come from probing the
    /// foreign-key index, when few inner rows match; when the inner side
    /// matches most rows, an index nested loop from the outer's own plan.
    func testExplainShowsJoinOrderAndChoice() throws {
        let container = try PersistentContainer.inMemory(model: Self.model())
        let c = container.newContext()
        for i in 0..<400 {
            let r = try c.insert("Record")
            try r.setValue(Int64(i % 100), forKey: "grade")
            let s = try c.insert("Student")
            try s.setValue(Int64(i % 3), forKey: "age")
            try s.setValue(r, forKey: "record")
        }
        try c.save()
        let e = try container.model.entity("Student")
        func explain(_ format: String) throws -> String {
            let request = FetchRequest<ManagedObject>(entityName: "Student", predicate: try KuraPredicate(format: format))
            let q = try XCTUnwrap(c.joinedQuery(request, e, kinds: nil, limit: nil), format)
            return try container.database.read { tx in try tx.explain(q) }
        }
        let selective = try explain("record.grade == 7")
        XCTAssertTrue(selective.contains("join 1: column \"record\" names rows of table \"Record\""), selective)
        XCTAssertTrue(selective.contains("index \"Record_grade\"") || selective.contains("index \""), selective)
        XCTAssertTrue(selective.contains("* join 1: probe index"), selective)
        XCTAssertEqual(try c.count(for: FetchRequest<ManagedObject>(entityName: "Student", predicate: try KuraPredicate(format: "record.grade == 7"))), 4)
        let broad = try explain("record.grade >= 0 AND age == 1")
        XCTAssertTrue(broad.contains("* the table's own plan"), broad)
        XCTAssertTrue(broad.contains("join 1: * nested loop"), broad)
        XCTAssertTrue(selective.contains("join 1: * materialize first"), selective)
        XCTAssertEqual(try c.count(for: FetchRequest<ManagedObject>(entityName: "Student", predicate: try KuraPredicate(format: "record.grade >= 0 AND age == 1"))), 133)
        let toMany = try explain("ANY pets.age == 1")
        XCTAssertTrue(toMany.contains("row ID is in column \"owner\""), toMany)
    }

    /// A sort led by a to-one key path with a limit walks the target's index
    /// (`explain` says so) and gives the in-memory order: ties on the grade
    /// by name then row ID, students without a record or with a nil grade
    /// last (nil sorts first ascending, so last descending), offsets across
    /// runs and into the nil group.
    func testSortThroughToOneWalksTargetIndex() throws {
        let container = try PersistentContainer.inMemory(model: Self.model())
        let c = container.newContext()
        for i in 0..<300 {
            let s = try c.insert("Student")
            try s.setValue(["b", "a", "c"][i % 3], forKey: "name")
            try s.setValue(Int64(i % 4), forKey: "age")
            if i % 10 == 9 { continue }  // no record
            let r = try c.insert("Record")
            try r.setValue(i % 25 == 0 ? nil : Int64(i % 7), forKey: "grade")
            try s.setValue(r, forKey: "record")
        }
        try c.save()
        let objects = container.newContext()
        _ = try objects.insert("Marker")  // a pending change: the in-memory oracle
        let e = try container.model.entity("Student")
        // (predicate, limit, offset, matches, whether the costs choose the walk
        // by themselves; else it is forced, to reach the nil group).
        for (format, limit, offset, total, chosen) in [("TRUEPREDICATE", 10, 0, 300, true), ("age == 1", 3, 0, 75, true), ("age != 2", 7, 10, 225, true),
                                                       ("TRUEPREDICATE", 20, 262, 300, false), ("age == 1", 5, 70, 75, false), ("age == 3", 50, 0, 75, false)] {
            var request = FetchRequest<ManagedObject>(entityName: "Student", predicate: try KuraPredicate(format: format))
            request.sortDescriptors = [SortKey("record.grade", ascending: false), SortKey("name")]
            request.fetchLimit = limit
            request.fetchOffset = offset
            let q = try XCTUnwrap(c.joinedQuery(request, e, kinds: nil, limit: limit))
            let plan = try SortWalkTesting.$always.withValue(!chosen) { try container.database.read { tx in try tx.explain(q) } }
            XCTAssertTrue(plan.contains("* walk of index \"Record_grade_index\""), plan)
            // The in-memory evaluation (a pending change of another entity does
            // not keep a fetch off the engine).
            let want = try FetchPathTesting.$objectsOnly.withValue(true) { try objects.fetchObjectIDs(request) }
            XCTAssertEqual(want.count, min(limit, max(0, total - offset)), format)
            XCTAssertEqual(try SortWalkTesting.$always.withValue(!chosen) { try c.fetchObjectIDs(request) }, want, "\(format) limit \(limit) offset \(offset)")
        }
    }

    /// The walk's long runs (hundreds of students tied on a grade, a few
    /// asked for) whose remaining key grows with the row ID come out of the
    /// walk in order or in reverse (the walk goes backward), or shuffled when
    /// the key does not follow the row ID; each shape gives the generic
    /// sort's answer (the in-memory oracle), at several limits and offsets.
    func testWalkRunsInAndAgainstRowOrder() throws {
        let container = try PersistentContainer.inMemory(model: Self.model())
        let c = container.newContext()
        var rng = SplitMix64(state: testSeed("RelationshipQueryTests.walkRuns"))
        for i in 0..<600 {
            let s = try c.insert("Student")
            try s.setValue(String(format: "s%04d", i), forKey: "name")
            try s.setValue(Int64(rng.next() % 1000), forKey: "age")
            let r = try c.insert("Record")
            try r.setValue(Int64(i % 3), forKey: "grade")
            try s.setValue(r, forKey: "record")
        }
        try c.save()
        let e = try container.model.entity("Student")
        for key in ["name", "age"] {
            for ascending in [true, false] {
                for (limit, offset) in [(1, 0), (5, 0), (7, 3), (30, 190), (12, 395)] {
                    var request = FetchRequest<ManagedObject>(entityName: "Student")
                    request.sortDescriptors = [SortKey("record.grade", ascending: false), SortKey(key, ascending: ascending)]
                    request.fetchLimit = limit
                    request.fetchOffset = offset
                    let q = try XCTUnwrap(c.joinedQuery(request, e, kinds: nil, limit: limit))
                    let plan = try SortWalkTesting.$always.withValue(true) { try container.database.read { tx in try tx.explain(q) } }
                    XCTAssertTrue(plan.contains("* walk of index \"Record_grade_index\""), plan)
                    // The in-memory evaluation, sorting every student.
                    let want = try FetchPathTesting.$objectsOnly.withValue(true) { try container.newContext().fetchObjectIDs(request) }
                    XCTAssertEqual(want.count, limit, "\(key) \(ascending)")
                    XCTAssertEqual(try SortWalkTesting.$always.withValue(true) { try c.fetchObjectIDs(request) }, want,
                                   "by \(key) ascending \(ascending), limit \(limit) offset \(offset)")
                }
            }
        }
    }
}

