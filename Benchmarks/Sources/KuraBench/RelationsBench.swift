// RelationsBench: queries through relationships (issue 15, item 4), run alone
// with `kura-bench --relations [--rows N] [--runs R]` (default N = 100,000).
//
// The model: N students (number, name), each with one record (number, grade
// uniform in 0...99, indexed) and 0...4 courses (title, one of 50, indexed).
// The workloads, each run `queries` times with the arguments below, every
// result read into Swift values (the report gives the time per query):
//
//   R0  Record where grade == k (the single-table indexed reference)
//   R1  Student where record.grade == k (to-one key path)
//   R2  Student sorted by record.grade descending, then number, limit 10
//   R3  Student where ANY courses.title == x (to-many)
//   R4  Student where courses.@count > 3 (to-many count)
//
// then three traversals, the paths an app takes after a fetch (each its
// query's result then walked, every value read):
//
//   R5  R0's records, then each record's student (a to-one fault) and its number
//   R6  R1's students, then each student's courses (the to-many) and their titles
//   R7  R6 with prefetching: Kura's relationshipKeyPathsForPrefetching
//       ["courses"], GRDB's including(all:), by hand one more query for all
//       the students' courses, grouped in Swift by student
//
// and "R insert", filling the store (N students, N records, ~2N courses, one
// transaction / one save). The issue's goal: R1 within 2x of R0 on the same
// engine.
//
// Contenders:
// - kura: Kura's engine alone, R insert only (RelationsEngine.swift): the
//   tables and indexes below as KuraEngine tables with schemas, rows inserted
//   in the same order in one write transaction.
// - kura-objects: Kura's object layer, each query a `FetchRequest` in a fresh
//   context (objects read from the store, not from an earlier query); R5–R7
//   traverse in the fetch's context.
// - sqlite: SQLite's C API by hand: tables `student(id, number, name)`,
//   `record(id, student_id, number, grade)`, `course(id, student_id, title)`,
//   indexes on both foreign keys, on grade and on title; one prepared JOIN (or
//   IN / GROUP BY subquery) per query shape, reused with bound parameters;
//   R5 a per-record `SELECT number FROM student WHERE id = ?`, R6 a per-student
//   `SELECT id, title FROM course WHERE student_id = ?`, each prepared once; R7
//   R1's query plus one JOIN for all the selected students' courses.
// - grdb: GRDB's fast path: the same SQL through `db.cachedStatement(sql:)`,
//   rows decoded by position through cursors.
// - grdb-idiomatic: GRDB records with associations (`hasOne`, `hasMany`,
//   `belongsTo`): `joining(required:)`, `having(courses.isEmpty == false)`,
//   `having(courses.count > 3)`, `fetchAll`; R5 `record.request(for:
//   GRecord.student).fetchOne`, R6 `student.request(for:
//   GStudent.courses).fetchAll`, R7 `including(all: GStudent.courses)` into a
//   record that decodes the association.
//
// The GRDB contenders are in RelationsGRDB.swift (GRDB and Kura both name a
// `Row` and a `FetchRequest`, so the two never share a file).
//
// Check values (sums of the students' numbers, or of records' numbers for R0,
// which equal their students'; R6 and R7 add the UTF-8 lengths of the course
// titles read) must agree across engines.

import Foundation
import Kura
import CSQLite

// MARK: Kura model

final class RStudent: ManagedObject {
    @Managed("number") var number: Int64
    @Managed("name") var name: String
    @ToOne("record") var record: RRecord?
    @ToMany("courses") var courses: [RCourse]
}

final class RRecord: ManagedObject {
    @Managed("number") var number: Int64
    @Managed("grade") var grade: Int64
    @ToOne("student") var student: RStudent?
}

final class RCourse: ManagedObject {
    @Managed("title") var title: String
    @ToOne("student") var student: RStudent?
}

// MARK: The data

/// The object graph, generated once from a fixed seed.
struct RelationsData {
    let students: Int
    /// `grade` of student i+1's record.
    let grades: [Int64]
    /// Titles of student i+1's courses.
    let titles: [[String]]
    var courseCount: Int { titles.reduce(0) { $0 + $1.count } }
    var objectCount: Int { 2 * students + courseCount }

    static let titleChoices = 50
    static let queries = 3
    static let gradeKeys: [Int64] = [99, 0, 50]
    static let titleKeys = ["title7", "title0", "title33"]
    static let countThreshold: Int64 = 3

    init(students: Int) {
        self.students = students
        var g = SplitMix64(seed: 0x5245_4C41)
        grades = (0..<students).map { _ in Int64.random(in: 0...99, using: &g) }
        titles = (0..<students).map { _ in
            (0..<Int.random(in: 0...4, using: &g)).map { _ in "title\(Int.random(in: 0..<Self.titleChoices, using: &g))" }
        }
    }
}

// MARK: The run

enum RelationsBench {
    static let engines = ["kura-objects", "kura", "sqlite", "grdb", "grdb-idiomatic"]
    static let workloads: [(id: String, title: String)] = [
        ("R insert", "insert N students, N records, ~2N courses (one transaction)"),
        ("R0", "Record where grade == k (single table, indexed; the reference)"),
        ("R1", "Student where record.grade == k (to-one key path)"),
        ("R2", "Student sorted by record.grade desc, number, limit 10"),
        ("R3", "Student where ANY courses.title == x (to-many)"),
        ("R4", "Student where courses.@count > 3 (to-many count)"),
        ("R5", "R0's records' students (to-one fault), number read"),
        ("R6", "R1's students' courses (to-many read), titles read"),
        ("R7", "R6 with prefetching (courses loaded with the fetch)"),
    ]

    static func run(rows: Int, runs: Int, engines chosen: [String], directory: String) throws {
        let data = RelationsData(students: rows)
        progress("relations: \(rows) students, \(data.courseCount) courses")
        let runner = Runner(options: RunOptions(), directory: directory)
        let names = engines.filter { chosen.contains($0) || (chosen.contains("kura") && $0 == "kura-objects") }
        for r in 0..<runs {
            progress("round \(r + 1) of \(runs)")
            for i in names.indices {
                let name = names[(i + r) % names.count]
                let path = directory + "/relations-\(name).db"
                removeStore(path)
                defer { removeStore(path) }
                switch name {
                case "kura-objects": try kura(runner, data, path: path)
                case "kura": try RelationsEngine.run(runner, data, path: path)
                case "sqlite": try sqlite(runner, data, path: path)
                default: try grdb(runner, data, path: path, idiomatic: name == "grdb-idiomatic")
                }
            }
        }
        print(table(runner.results, rows: rows, engines: names))
    }

    /// Runs `body` `RelationsData.queries` times (its argument the query's
    /// index), records the time per query and checks the summed value.
    static func measureQueries(_ runner: Runner, _ workload: String, _ engine: String, rows: Int, _ body: (Int) throws -> Int) throws {
        let (value, seconds) = try timed { () throws -> Int in
            var sum = 0
            for q in 0..<RelationsData.queries { sum += try body(q) }
            return sum
        }
        let perQuery = seconds / Double(RelationsData.queries)
        runner.results.add(workload, engine, rows: rows, .seconds, perQuery)
        progress("  \(engine) \(workload): \(formatSeconds(perQuery)) per query (check \(value))")
        try runner.check(workload, engine, value)
    }

    // MARK: Kura objects

    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Student", class: RStudent.self) {
                AttributeDescription("number", .int64)
                AttributeDescription("name", .string)
                RelationshipDescription("record", to: "Record", inverse: "student", deleteRule: .cascade)
                RelationshipDescription("courses", to: "Course", inverse: "student", toMany: true, deleteRule: .cascade)
            }
            EntityDescription("Record", class: RRecord.self) {
                AttributeDescription("number", .int64)
                AttributeDescription("grade", .int64, indexed: true)
                RelationshipDescription("student", to: "Student", inverse: "record")
            }
            EntityDescription("Course", class: RCourse.self) {
                AttributeDescription("title", .string, indexed: true)
                RelationshipDescription("student", to: "Student", inverse: "courses")
            }
        }
    }

    static func kura(_ runner: Runner, _ data: RelationsData, path: String) throws {
        let name = "kura-objects"
        let n = data.students
        var o = KuraEngineBench.options(.normal)
        o.createIfMissing = true
        let container = try PersistentContainer(url: URL(fileURLWithPath: path), model: model(), options: o)
        defer { container.database.close() }

        try runner.measure("R insert", name, rows: n, expect: data.objectCount) {
            let context = container.newContext()
            var made = 0
            for i in 0..<n {
                let s = RStudent(context: context)
                s.number = Int64(i + 1)
                s.name = "student\(i + 1)"
                let r = RRecord(context: context)
                r.number = Int64(i + 1)
                r.grade = data.grades[i]
                s.record = r
                made += 2
                for t in data.titles[i] {
                    let c = RCourse(context: context)
                    c.title = t
                    c.student = s
                    made += 1
                }
            }
            try context.save()
            return made
        }
        _ = try container.database.checkpoint()

        func students(_ request: FetchRequest<RStudent>) throws -> Int {
            var sum = 0
            for s in try container.newContext().fetch(request) {
                _ = s.name
                sum += Int(s.number)
            }
            return sum
        }
        try measureQueries(runner, "R0", name, rows: n) { q in
            let request = FetchRequest<RRecord>(entityName: "Record", predicate: try KuraPredicate(format: "grade == %@", arguments: [.integer(RelationsData.gradeKeys[q])]))
            var sum = 0
            for r in try container.newContext().fetch(request) { sum += Int(r.number) }
            return sum
        }
        try measureQueries(runner, "R1", name, rows: n) { q in
            try students(FetchRequest<RStudent>(entityName: "Student", predicate: try KuraPredicate(format: "record.grade == %@", arguments: [.integer(RelationsData.gradeKeys[q])])))
        }
        try measureQueries(runner, "R2", name, rows: n) { _ in
            var request = FetchRequest<RStudent>(entityName: "Student", sortDescriptors: [SortKey("record.grade", ascending: false), SortKey("number")])
            request.fetchLimit = 10
            return try students(request)
        }
        try measureQueries(runner, "R3", name, rows: n) { q in
            try students(FetchRequest<RStudent>(entityName: "Student", predicate: try KuraPredicate(format: "ANY courses.title == %@", arguments: [.text(RelationsData.titleKeys[q])])))
        }
        try measureQueries(runner, "R4", name, rows: n) { _ in
            try students(FetchRequest<RStudent>(entityName: "Student", predicate: try KuraPredicate(format: "courses.@count > %@", arguments: [.integer(RelationsData.countThreshold)])))
        }
        try measureQueries(runner, "R5", name, rows: n) { q in
            let request = FetchRequest<RRecord>(entityName: "Record", predicate: try KuraPredicate(format: "grade == %@", arguments: [.integer(RelationsData.gradeKeys[q])]))
            // The context stays alive for the traversal (objects refer to it weakly).
            let context = container.newContext()
            return try withExtendedLifetime(context) {
                var sum = 0
                for r in try context.fetch(request) {
                    // A missing student adds nothing, which the check catches.
                    if let s = r.student { sum += Int(s.number) }
                }
                return sum
            }
        }
        /// R1's students in a fresh context, each one's courses read (titles
        /// included) in that context: the number plus the titles' lengths.
        func courses(prefetching: Bool) throws -> (Int) throws -> Int {
            { q in
                var request = FetchRequest<RStudent>(entityName: "Student", predicate: try KuraPredicate(format: "record.grade == %@", arguments: [.integer(RelationsData.gradeKeys[q])]))
                if prefetching { request.relationshipKeyPathsForPrefetching = ["courses"] }
                let context = container.newContext()
                return try withExtendedLifetime(context) {
                    var sum = 0
                    for s in try context.fetch(request) {
                        sum += Int(s.number)
                        for c in s.courses { sum += c.title.utf8.count }
                    }
                    return sum
                }
            }
        }
        try measureQueries(runner, "R6", name, rows: n, courses(prefetching: false))
        try measureQueries(runner, "R7", name, rows: n, courses(prefetching: true))
    }

    // MARK: SQL (SQLite by hand and GRDB's fast path share it)

    static let schema = """
        CREATE TABLE student(id INTEGER PRIMARY KEY, number INTEGER, name TEXT);
        CREATE TABLE record(id INTEGER PRIMARY KEY, student_id INTEGER REFERENCES student(id), number INTEGER, grade INTEGER);
        CREATE TABLE course(id INTEGER PRIMARY KEY, student_id INTEGER REFERENCES student(id), title TEXT);
        CREATE INDEX record_student ON record(student_id);
        CREATE INDEX record_grade ON record(grade);
        CREATE INDEX course_student ON course(student_id);
        CREATE INDEX course_title ON course(title);
        """
    static let insertStudent = "INSERT INTO student(id, number, name) VALUES (?1, ?2, ?3)"
    static let insertRecord = "INSERT INTO record(student_id, number, grade) VALUES (?1, ?2, ?3)"
    static let insertCourse = "INSERT INTO course(student_id, title) VALUES (?1, ?2)"
    static let r0 = "SELECT id, number, grade FROM record WHERE grade = ?1"
    static let r1 = "SELECT s.id, s.number, s.name FROM record r JOIN student s ON s.id = r.student_id WHERE r.grade = ?1"
    static let r2 = "SELECT s.id, s.number, s.name FROM record r JOIN student s ON s.id = r.student_id ORDER BY r.grade DESC, s.number LIMIT 10"
    static let r3 = "SELECT s.id, s.number, s.name FROM student s WHERE s.id IN (SELECT student_id FROM course WHERE title = ?1)"
    static let r4 = "SELECT s.id, s.number, s.name FROM (SELECT student_id FROM course GROUP BY student_id HAVING count(*) > ?1) c JOIN student s ON s.id = c.student_id"
    /// R5: R0's records with their foreign key, then one student per record.
    static let r5 = "SELECT id, student_id, number, grade FROM record WHERE grade = ?1"
    static let r5Student = "SELECT number FROM student WHERE id = ?1"
    /// R6: R1's students, then one query per student for its courses.
    static let r6Courses = "SELECT id, title FROM course WHERE student_id = ?1"
    /// R7: R1's students, then all their courses in one query.
    static let r7Courses = "SELECT c.student_id, c.id, c.title FROM course c JOIN record r ON r.student_id = c.student_id WHERE r.grade = ?1"

    static func sqlite(_ runner: Runner, _ data: RelationsData, path: String) throws {
        let name = "sqlite"
        let n = data.students
        let db = try SQLiteConnection(path: path, sync: .normal)
        try db.exec(schema)
        try runner.measure("R insert", name, rows: n, expect: data.objectCount) {
            let s = try db.prepare(insertStudent)
            let r = try db.prepare(insertRecord)
            let c = try db.prepare(insertCourse)
            return try db.transaction { () throws -> Int in
                var made = 0
                for i in 0..<n {
                    let id = Int64(i + 1)
                    s.reset(); s.bind(1, id); s.bind(2, id); s.bind(3, "student\(i + 1)")
                    _ = try s.step()
                    r.reset(); r.bind(1, id); r.bind(2, id); r.bind(3, data.grades[i])
                    _ = try r.step()
                    made += 2
                    for t in data.titles[i] {
                        c.reset(); c.bind(1, id); c.bind(2, t)
                        _ = try c.step()
                        made += 1
                    }
                }
                return made
            }
        }
        let rc = sqlite3_wal_checkpoint_v2(db.handle, nil, SQLITE_CHECKPOINT_TRUNCATE, nil, nil)
        guard rc == SQLITE_OK else { throw db.error(rc) }

        /// Runs `s` (reset, bound by `bind`) in a read transaction, summing column 1.
        func sum(_ s: SQLiteStatement, _ bind: (SQLiteStatement) -> Void) throws -> Int {
            try db.transaction { () throws -> Int in
                s.reset()
                bind(s)
                var total = 0
                while try s.step() {
                    _ = s.text(2)
                    total += Int(s.int64(1))
                }
                return total
            }
        }
        let s0 = try db.prepare(r0), s1 = try db.prepare(r1), s2 = try db.prepare(r2), s3 = try db.prepare(r3), s4 = try db.prepare(r4)
        try measureQueries(runner, "R0", name, rows: n) { q in
            try db.transaction { () throws -> Int in
                s0.reset(); s0.bind(1, RelationsData.gradeKeys[q])
                var total = 0
                while try s0.step() { total += Int(s0.int64(1)) }
                return total
            }
        }
        try measureQueries(runner, "R1", name, rows: n) { q in try sum(s1) { $0.bind(1, RelationsData.gradeKeys[q]) } }
        try measureQueries(runner, "R2", name, rows: n) { _ in try sum(s2) { _ in } }
        try measureQueries(runner, "R3", name, rows: n) { q in try sum(s3) { $0.bind(1, RelationsData.titleKeys[q]) } }
        try measureQueries(runner, "R4", name, rows: n) { _ in try sum(s4) { $0.bind(1, RelationsData.countThreshold) } }

        let s5 = try db.prepare(r5), s5Student = try db.prepare(r5Student)
        try measureQueries(runner, "R5", name, rows: n) { q in
            try db.transaction { () throws -> Int in
                s5.reset(); s5.bind(1, RelationsData.gradeKeys[q])
                var total = 0
                while try s5.step() {
                    s5Student.reset(); s5Student.bind(1, s5.int64(1))
                    if try s5Student.step() { total += Int(s5Student.int64(0)) }
                }
                return total
            }
        }
        let s6Courses = try db.prepare(r6Courses)
        try measureQueries(runner, "R6", name, rows: n) { q in
            try db.transaction { () throws -> Int in
                s1.reset(); s1.bind(1, RelationsData.gradeKeys[q])
                var total = 0
                while try s1.step() {
                    total += Int(s1.int64(1))
                    s6Courses.reset(); s6Courses.bind(1, s1.int64(0))
                    while try s6Courses.step() { total += s6Courses.text(1).utf8.count }
                }
                return total
            }
        }
        let s7Courses = try db.prepare(r7Courses)
        try measureQueries(runner, "R7", name, rows: n) { q in
            try db.transaction { () throws -> Int in
                let k = RelationsData.gradeKeys[q]
                s1.reset(); s1.bind(1, k)
                var students: [(id: Int64, number: Int64)] = []
                while try s1.step() { students.append((s1.int64(0), s1.int64(1))) }
                s7Courses.reset(); s7Courses.bind(1, k)
                var courses: [Int64: [(id: Int64, title: String)]] = [:]
                while try s7Courses.step() { courses[s7Courses.int64(0), default: []].append((s7Courses.int64(1), s7Courses.text(2))) }
                var total = 0
                for s in students {
                    total += Int(s.number)
                    for c in courses[s.id] ?? [] { total += c.title.utf8.count }
                }
                return total
            }
        }
    }

    // MARK: Report

    static func table(_ results: Results, rows: Int, engines: [String]) -> String {
        func cell(_ w: String, _ e: String) -> String {
            results.find(w, e, rows: rows).map { formatSeconds($0.median) } ?? "–"
        }
        func ratio(_ w: String, _ e: String, _ to: String, _ toWorkload: String? = nil) -> String {
            guard let a = results.find(w, e, rows: rows), let b = results.find(toWorkload ?? w, to, rows: rows), b.median > 0 else { return "–" }
            return String(format: "%.2f", a.median / b.median)
        }
        var out = "## Relationship queries, \(rows) students (time per query; R insert: the whole fill)\n\n"
        out += "| workload | SQLite by hand | GRDB (fast path) | GRDB idiomatic | Kura engine | Kura objects | engine/SQLite | objects/SQLite | objects/GRDB | objects/GRDB idiomatic | objects: this / R0 |\n"
        out += "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n"
        for (w, title) in workloads {
            let vsR0 = (w == "R insert" || w == "R0") ? "–" : ratio(w, "kura-objects", "kura-objects", "R0")
            out += "| \(w): \(title) | \(cell(w, "sqlite")) | \(cell(w, "grdb")) | \(cell(w, "grdb-idiomatic")) | \(cell(w, "kura")) | \(cell(w, "kura-objects")) | \(ratio(w, "kura", "sqlite")) | \(ratio(w, "kura-objects", "sqlite")) | \(ratio(w, "kura-objects", "grdb")) | \(ratio(w, "kura-objects", "grdb-idiomatic")) | \(vsR0) |\n"
        }
        out += "\nGoal (issue 15): R1 within 2x of R0 (\"objects: this / R0\" ≤ 2), objects at least 3x faster than GRDB (objects/GRDB ≤ 0.33).\n"
        return out
    }
}
