// RelationsGRDB: the GRDB contenders of the relationship queries
// (RelationsBench.swift): records with associations for the idiomatic path,
// the hand-written SQL through cached statements for the fast path.
// The traversals (R5–R7): the idiomatic path asks each record for its
// association (`request(for:)`) or prefetches with `including(all:)`; the fast
// path runs RelationsBench's per-row statements (R5, R6) or its one course
// query grouped in Swift (R7), as SQLite by hand does.

import GRDB

// MARK: GRDB records

/// A student decoded by column name (the idiomatic record).
struct GStudent: FetchableRecord, PersistableRecord {
    static let databaseTableName = "student"
    static let record = hasOne(GRecord.self, using: ForeignKey(["student_id"]))
    static let courses = hasMany(GCourse.self, using: ForeignKey(["student_id"]))
    var id: Int64
    var number: Int64
    var name: String

    init(id: Int64, number: Int64, name: String) {
        self.id = id
        self.number = number
        self.name = name
    }

    init(row: Row) throws {
        id = row["id"]
        number = row["number"]
        name = row["name"]
    }

    func encode(to container: inout PersistenceContainer) throws {
        container["id"] = id
        container["number"] = number
        container["name"] = name
    }
}

struct GRecord: FetchableRecord, PersistableRecord {
    static let databaseTableName = "record"
    static let student = belongsTo(GStudent.self, using: ForeignKey(["student_id"]))
    var studentID: Int64
    var number: Int64
    var grade: Int64

    init(studentID: Int64, number: Int64, grade: Int64) {
        self.studentID = studentID
        self.number = number
        self.grade = grade
    }

    init(row: Row) throws {
        studentID = row["student_id"]
        number = row["number"]
        grade = row["grade"]
    }

    func encode(to container: inout PersistenceContainer) throws {
        container["student_id"] = studentID
        container["number"] = number
        container["grade"] = grade
    }
}

struct GCourse: FetchableRecord, PersistableRecord {
    static let databaseTableName = "course"
    var studentID: Int64
    var title: String

    init(studentID: Int64, title: String) {
        self.studentID = studentID
        self.title = title
    }

    init(row: Row) throws {
        studentID = row["student_id"]
        title = row["title"]
    }

    func encode(to container: inout PersistenceContainer) throws {
        container["student_id"] = studentID
        container["title"] = title
    }
}

/// A student with its courses, fetched by `including(all: GStudent.courses)`:
/// the record that decodes the association (GRDB's documented way, the
/// prefetched rows under the association's key).
struct GStudentWithCourses: FetchableRecord {
    var student: GStudent
    var courses: [GCourse]
    init(row: Row) throws {
        student = try GStudent(row: row)
        courses = try row.decode(forKey: "courses")
    }
}

/// A student row decoded by position (`SELECT s.id, s.number, s.name`): GRDB's fast path.
struct GStudentFast: FetchableRecord {
    var id: Int64
    var number: Int64
    var name: String
    init(row: Row) throws {
        id = row[0]
        number = row[1]
        name = row[2]
    }
}

extension RelationsBench {
    static func grdb(_ runner: Runner, _ data: RelationsData, path: String, idiomatic: Bool) throws {
        let name = idiomatic ? "grdb-idiomatic" : "grdb"
        let n = data.students
        let pool = try DatabasePool(path: path, configuration: GRDBBench.configuration())
        defer { try? pool.close() }
        try pool.write { db in try db.execute(sql: schema) }

        try runner.measure("R insert", name, rows: n, expect: data.objectCount) {
            try pool.write { db in
                var made = 0
                if idiomatic {
                    for i in 0..<n {
                        let id = Int64(i + 1)
                        try GStudent(id: id, number: id, name: "student\(i + 1)").insert(db)
                        try GRecord(studentID: id, number: id, grade: data.grades[i]).insert(db)
                        made += 2
                        for t in data.titles[i] {
                            try GCourse(studentID: id, title: t).insert(db)
                            made += 1
                        }
                    }
                    return made
                }
                let s = try db.cachedStatement(sql: insertStudent)
                let r = try db.cachedStatement(sql: insertRecord)
                let c = try db.cachedStatement(sql: insertCourse)
                for i in 0..<n {
                    let id = Int64(i + 1)
                    try s.execute(arguments: [id, id, "student\(i + 1)"])
                    try r.execute(arguments: [id, id, data.grades[i]])
                    made += 2
                    for t in data.titles[i] {
                        try c.execute(arguments: [id, t])
                        made += 1
                    }
                }
                return made
            }
        }
        try pool.writeWithoutTransaction { db in _ = try db.checkpoint(.truncate) }

        /// The fast path: `sql` from the statement cache, rows by position.
        func fast(_ sql: String, _ arguments: StatementArguments) throws -> Int {
            try pool.read { db in
                let cursor = try GStudentFast.fetchCursor(db.cachedStatement(sql: sql), arguments: arguments)
                var total = 0
                while let s = try cursor.next() {
                    _ = s.name
                    total += Int(s.number)
                }
                return total
            }
        }
        /// The idiomatic path: `request` fetched as an array of records.
        func records(_ request: QueryInterfaceRequest<GStudent>) throws -> Int {
            try pool.read { db in
                var total = 0
                for s in try request.fetchAll(db) {
                    _ = s.name
                    total += Int(s.number)
                }
                return total
            }
        }

        try measureQueries(runner, "R0", name, rows: n) { q in
            let k = RelationsData.gradeKeys[q]
            if idiomatic {
                return try pool.read { db in try GRecord.filter(Column("grade") == k).fetchAll(db).reduce(0) { $0 + Int($1.number) } }
            }
            return try pool.read { db in
                let cursor = try Row.fetchCursor(db.cachedStatement(sql: r0), arguments: [k])
                var total = 0
                while let row = try cursor.next() { total += Int(row[1] as Int64) }
                return total
            }
        }
        try measureQueries(runner, "R1", name, rows: n) { q in
            let k = RelationsData.gradeKeys[q]
            if idiomatic { return try records(GStudent.joining(required: GStudent.record.filter(Column("grade") == k))) }
            return try fast(r1, [k])
        }
        try measureQueries(runner, "R2", name, rows: n) { _ in
            if idiomatic {
                let record = TableAlias<GRecord>()
                return try records(GStudent.joining(required: GStudent.record.aliased(record))
                    .order(record["grade"].desc, Column("number")).limit(10))
            }
            return try fast(r2, [])
        }
        try measureQueries(runner, "R3", name, rows: n) { q in
            let x = RelationsData.titleKeys[q]
            if idiomatic { return try records(GStudent.having(GStudent.courses.filter(Column("title") == x).isEmpty == false)) }
            return try fast(r3, [x])
        }
        try measureQueries(runner, "R4", name, rows: n) { _ in
            if idiomatic { return try records(GStudent.having(GStudent.courses.count > RelationsData.countThreshold)) }
            return try fast(r4, [RelationsData.countThreshold])
        }
        try measureQueries(runner, "R5", name, rows: n) { q in
            let k = RelationsData.gradeKeys[q]
            return try pool.read { db in
                var total = 0
                if idiomatic {
                    for r in try GRecord.filter(Column("grade") == k).fetchAll(db) {
                        if let s = try r.request(for: GRecord.student).fetchOne(db) { total += Int(s.number) }
                    }
                    return total
                }
                let student = try db.cachedStatement(sql: r5Student)
                let cursor = try Row.fetchCursor(db.cachedStatement(sql: r5), arguments: [k])
                while let row = try cursor.next() {
                    if let number = try Int64.fetchOne(student, arguments: [row[1] as Int64]) { total += Int(number) }
                }
                return total
            }
        }
        try measureQueries(runner, "R6", name, rows: n) { q in
            let k = RelationsData.gradeKeys[q]
            return try pool.read { db in
                var total = 0
                if idiomatic {
                    for s in try GStudent.joining(required: GStudent.record.filter(Column("grade") == k)).fetchAll(db) {
                        total += Int(s.number)
                        for c in try s.request(for: GStudent.courses).fetchAll(db) { total += c.title.utf8.count }
                    }
                    return total
                }
                let courses = try db.cachedStatement(sql: r6Courses)
                let cursor = try GStudentFast.fetchCursor(db.cachedStatement(sql: r1), arguments: [k])
                while let s = try cursor.next() {
                    total += Int(s.number)
                    let rows = try Row.fetchCursor(courses, arguments: [s.id])
                    while let c = try rows.next() { total += (c[1] as String).utf8.count }
                }
                return total
            }
        }
        try measureQueries(runner, "R7", name, rows: n) { q in
            let k = RelationsData.gradeKeys[q]
            return try pool.read { db in
                var total = 0
                if idiomatic {
                    let request = GStudent.joining(required: GStudent.record.filter(Column("grade") == k))
                        .including(all: GStudent.courses)
                        .asRequest(of: GStudentWithCourses.self)
                    for s in try request.fetchAll(db) {
                        total += Int(s.student.number)
                        for c in s.courses { total += c.title.utf8.count }
                    }
                    return total
                }
                var students: [(id: Int64, number: Int64)] = []
                let cursor = try GStudentFast.fetchCursor(db.cachedStatement(sql: r1), arguments: [k])
                while let s = try cursor.next() { students.append((s.id, s.number)) }
                var courses: [Int64: [(id: Int64, title: String)]] = [:]
                let rows = try Row.fetchCursor(db.cachedStatement(sql: r7Courses), arguments: [k])
                while let c = try rows.next() { courses[c[0] as Int64, default: []].append((c[1] as Int64, c[2] as String)) }
                for s in students {
                    total += Int(s.number)
                    for c in courses[s.id] ?? [] { total += c.title.utf8.count }
                }
                return total
            }
        }
    }
}
