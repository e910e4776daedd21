// RelationsBench's "kura" contender: the R insert fill through Kura's engine
// alone (KuraEngine tables, schemas and indexes, no objects), the tables and
// indexes of the SQL schema (RelationsBench.schema): what the object layer's
// save stands on, against the same rows through SQLite's prepared inserts.
// Only R insert has an engine form here; the queries are the object layer's.

import Foundation
import KuraEngine

enum RelationsEngine {
    static func run(_ runner: Runner, _ data: RelationsData, path: String) throws {
        let name = "kura"
        let n = data.students
        var o = KuraEngineBench.options(.normal)
        o.createIfMissing = true
        let db = try Database(path: path, options: o)
        defer { db.close() }
        try db.write { tx in
            _ = try tx.createTable("student", schema: TableSchema([ColumnDefinition("number", .integer), ColumnDefinition("name", .text)]))
            let record = try tx.createTable("record", schema: TableSchema([
                ColumnDefinition("student_id", .integer), ColumnDefinition("number", .integer), ColumnDefinition("grade", .integer),
            ]))
            _ = try tx.createIndex("record_student", on: record, columns: [IndexColumn("student_id")])
            _ = try tx.createIndex("record_grade", on: try tx.table("record"), columns: [IndexColumn("grade")])
            let course = try tx.createTable("course", schema: TableSchema([ColumnDefinition("student_id", .integer), ColumnDefinition("title", .text)]))
            _ = try tx.createIndex("course_student", on: course, columns: [IndexColumn("student_id")])
            _ = try tx.createIndex("course_title", on: try tx.table("course"), columns: [IndexColumn("title")])
        }
        try runner.measure("R insert", name, rows: n, expect: data.objectCount) {
            try db.write { tx in
                let student = try tx.table("student"), record = try tx.table("record"), course = try tx.table("course")
                var made = 0
                for i in 0..<n {
                    let id = try tx.insert([.integer(Int64(i + 1)), .text("student\(i + 1)")], into: student)
                    try tx.insert([.integer(id), .integer(Int64(i + 1)), .integer(data.grades[i])], into: record)
                    made += 2
                    for t in data.titles[i] {
                        try tx.insert([.integer(id), .text(t)], into: course)
                        made += 1
                    }
                }
                return made
            }
        }
    }
}
