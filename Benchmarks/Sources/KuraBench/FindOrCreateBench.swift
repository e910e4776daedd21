// FindOrCreateBench: "import with find-or-create" (issue 15), the way every
// Core Data importer is written (objc.io's Moody): for each incoming child,
// fetch its parent by code in the same context, create the parent if
// missing, insert the child pointing at it; one save at the end. 200
// parents; N children at N = rows/8, rows/4, rows/2, rows (default rows
// 80,000). Run alone with `kura-bench --find-or-create [--rows N]`.
//
// Time per child must stay flat as N grows (the fetches find the pending
// parents through the context's pending-object index, not a scan of every
// unsaved object). SQLite does the same by hand in one transaction:
// `SELECT id FROM parent WHERE code = ?` (indexed), an INSERT of the parent
// if missing, an INSERT of the child.
//
// Check: Kura's and SQLite's parents and children counts agree.

import Foundation
import Kura
import CSQLite

final class FCParent: ManagedObject {
    @Managed("code") var code: String
}

final class FCChild: ManagedObject {
    @Managed("mood") var mood: Int64
    @ToOne("parent") var parent: FCParent?
}

enum FindOrCreateBench {
    static let parents = 200

    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Parent", class: FCParent.self) {
                AttributeDescription("code", .string, indexed: true)
                RelationshipDescription("children", to: "Child", inverse: "parent", toMany: true)
            }
            EntityDescription("Child", class: FCChild.self) {
                AttributeDescription("mood", .int64)
                RelationshipDescription("parent", to: "Parent", inverse: "children")
            }
        }
    }

    static func run(rows: Int, directory: String) throws {
        let sizes = [rows / 8, rows / 4, rows / 2, rows].filter { $0 > 0 }
        var lines: [String] = []
        var firstPerChild: Double?
        for n in sizes {
            var g = SplitMix64(seed: 0x4643_0001 &+ UInt64(n))
            let codes = (0..<n).map { _ in "c\(Int.random(in: 0..<parents, using: &g))" }

            let kuraPath = directory + "/foc-kura.kura"
            removeStore(kuraPath)
            var o = KuraEngineBench.options(.normal)
            o.createIfMissing = true
            let container = try PersistentContainer(url: URL(fileURLWithPath: kuraPath), model: model(), options: o)
            let (kuraParents, kuraTime) = try timed { () throws -> Int in
                let context = container.newContext()
                var made = 0
                for (i, code) in codes.enumerated() {
                    let found = try context.fetch(FetchRequest<FCParent>(entityName: "Parent", predicate: KuraPredicate(format: "code == %@", .text(code))))
                    let parent: FCParent
                    if let p = found.first { parent = p } else {
                        parent = try context.insert(FCParent.self)
                        parent.code = code
                        made += 1
                    }
                    let child = try context.insert(FCChild.self)
                    child.mood = Int64(i % 7)
                    child.parent = parent
                }
                try context.save()
                return made
            }
            container.database.close()
            removeStore(kuraPath)

            let sqlitePath = directory + "/foc-sqlite.db"
            removeStore(sqlitePath)
            let db = try SQLiteConnection(path: sqlitePath, sync: .normal)
            try db.exec("CREATE TABLE parent(id INTEGER PRIMARY KEY, code TEXT); CREATE INDEX parent_code ON parent(code)")
            try db.exec("CREATE TABLE child(id INTEGER PRIMARY KEY, mood INTEGER, parent INTEGER); CREATE INDEX child_parent ON child(parent)")
            let find = try db.prepare("SELECT id FROM parent WHERE code = ?1")
            let makeParent = try db.prepare("INSERT INTO parent(code) VALUES (?1)")
            let makeChild = try db.prepare("INSERT INTO child(mood, parent) VALUES (?1, ?2)")
            let (sqliteParents, sqliteTime) = try timed { () throws -> Int in
                try db.exec("BEGIN")
                var made = 0
                for (i, code) in codes.enumerated() {
                    find.reset()
                    find.bind(1, code)
                    var parent: Int64
                    if try find.step() { parent = find.int64(0) } else {
                        makeParent.reset()
                        makeParent.bind(1, code)
                        _ = try makeParent.step()
                        parent = sqlite3_last_insert_rowid(db.handle)
                        made += 1
                    }
                    makeChild.reset()
                    makeChild.bind(1, Int64(i % 7))
                    makeChild.bind(2, parent)
                    _ = try makeChild.step()
                }
                try db.exec("COMMIT")
                return made
            }
            removeStore(sqlitePath)
            guard kuraParents == sqliteParents else {
                throw CheckMismatch(description: "find-or-create: Kura made \(kuraParents) parents, SQLite \(sqliteParents)")
            }
            let perChild = kuraTime / Double(n)
            if firstPerChild == nil { firstPerChild = perChild }
            lines.append("| \(n) | \(formatSeconds(kuraTime)) | \(formatSeconds(perChild)) | \(String(format: "%.2f", perChild / (firstPerChild ?? perChild))) | \(formatSeconds(sqliteTime)) | \(String(format: "%.2f", kuraTime / sqliteTime)) |")
            progress("find-or-create \(n): kura \(formatSeconds(kuraTime)), sqlite \(formatSeconds(sqliteTime))")
        }
        print("""
        ## Import with find-or-create: \(parents) parents, one context, one save at the end

        | children | Kura objects | per child | per child vs smallest run | SQLite by hand | ratio to SQLite |
        | ---: | ---: | ---: | ---: | ---: | ---: |
        \(lines.joined(separator: "\n"))

        Linear growth shows as a flat "per child vs smallest run" column.

        """)
    }
}
