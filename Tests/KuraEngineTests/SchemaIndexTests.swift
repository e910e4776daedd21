import Foundation
import XCTest
@testable import KuraEngine

final class SchemaIndexTests: XCTestCase {
    let people = try! TableSchema([
        ColumnDefinition("name", .text, nullable: false),
        ColumnDefinition("email", .text),
        ColumnDefinition("age", .integer),
        ColumnDefinition("born", .date),
    ])

    // Guards the explicit-row-ID insert that lets the tree refuse a taken
    // key (no separate lookup first): a taken row ID must still be refused
    // with .alreadyExists naming it, with or without indexes, and leave the
    // row, the row count and the index entries as they were.
    func testInsertUnderATakenRowIDIsRefusedAndChangesNothing() throws {
        let db = try Database.inMemory()
        try db.write { tx in
            let plain = try tx.createTable("plain", schema: people)
            try tx.insert([.text("Ada"), .null, .integer(36), .null], into: plain, rowID: 7)
            let indexed = try tx.createTable("indexed", schema: people)
            _ = try tx.createIndex("by_age", on: indexed, columns: [IndexColumn("age")])
            try tx.insert([.text("Ada"), .null, .integer(36), .null], into: try tx.table("indexed"), rowID: 7)
        }
        for table in ["plain", "indexed"] {
            XCTAssertThrowsError(try db.write { tx in try tx.insert([.text("Bob"), .null, .integer(40), .null], into: try tx.table(table), rowID: 7) }) { e in
                XCTAssertEqual((e as? KuraError)?.code, .alreadyExists, "\(table): \(e)")
                XCTAssertTrue("\(e)".contains("7") && "\(e)".contains("\"\(table)\""), "\(e)")
            }
            try db.read { tx in
                let t = try tx.table(table)
                XCTAssertEqual(t.rowCount, 1, table)
                XCTAssertEqual(try tx.values(in: t, rowID: 7)?.first, .text("Ada"), table)
                XCTAssertEqual(try tx.count(TableQuery(table, where: try KuraPredicate(format: "age == 40"))), 0, table)
                XCTAssertEqual(try tx.count(TableQuery(table, where: try KuraPredicate(format: "age == 36"))), 1, table)
            }
        }
    }

    func testTypedRowsAreCheckedAndErrorsNameTheColumn() throws {
        let db = try Database.inMemory()
        try db.write { tx in try tx.createTable("people", schema: people) }
        XCTAssertThrowsError(try db.write { tx in try tx.insert(["name": .text("Ada"), "age": .text("old")], into: try tx.table("people")) }) { e in
            XCTAssertEqual((e as? KuraError)?.code, .typeMismatch)
            XCTAssertTrue("\(e)".contains("\"age\""), "\(e)")
        }
        XCTAssertThrowsError(try db.write { tx in try tx.insert(["email": .text("x")], into: try tx.table("people")) }) { e in
            XCTAssertEqual((e as? KuraError)?.code, .constraintViolation)
            XCTAssertTrue("\(e)".contains("\"name\""), "\(e)")
        }
        XCTAssertThrowsError(try db.write { tx in try tx.insert(["name": .text("A"), "shoe": .integer(1)], into: try tx.table("people")) }) { e in
            XCTAssertEqual((e as? KuraError)?.code, .notFound)
            XCTAssertTrue("\(e)".contains("\"shoe\""), "\(e)")
        }
        XCTAssertThrowsError(try db.write { tx in try tx.insertRecord(RecordCodec.encode([.integer(5)]), into: try tx.table("people")) }) { e in
            XCTAssertEqual((e as? KuraError)?.code, .typeMismatch)
        }
        XCTAssertThrowsError(try db.read { tx in try tx.fetch(TableQuery("people", where: "height > 3")) }) { e in
            XCTAssertEqual((e as? KuraError)?.code, .notFound)
            XCTAssertTrue("\(e)".contains("\"height\""), "\(e)")
        }
        XCTAssertThrowsError(try db.read { tx in try tx.fetch(TableQuery("people", where: "record.grade > 3")) }) { e in
            XCTAssertEqual((e as? KuraError)?.code, .notFound)
        }
    }

    func testAddingAColumnRewritesNoRowAndOldRowsReadTheDefault() throws {
        let db = try Database.inMemory()
        try db.write { tx in
            let t = try tx.createTable("people", schema: people)
            for i in 0..<100 { try tx.insert(["name": .text("p\(i)"), "age": .integer(Int64(i))], into: t) }
        }
        let before = try db.read { tx in try tx.statistics(of: try tx.table("people")) }
        try db.write { tx in try tx.addColumn(ColumnDefinition("score", .double, nullable: false, default: .double(1.5)), to: try tx.table("people")) }
        try db.read { tx in
            let t = try tx.table("people")
            XCTAssertEqual(try tx.statistics(of: t), before, "no page changed")
            XCTAssertEqual(try tx.values(in: t, rowID: 1)?.last, .double(1.5))
            XCTAssertEqual(try tx.count(TableQuery("people", where: "score == 1.5")), 100)
        }
        XCTAssertThrowsError(try db.write { tx in try tx.addColumn(ColumnDefinition("must", .text, nullable: false), to: try tx.table("people")) })
    }

    func testRenamingAColumnRewritesNoRowAndIsRefusedWhileAnIndexUsesIt() throws {
        let db = try Database.inMemory()
        try db.write { tx in
            let t = try tx.createTable("people", schema: people)
            for i in 0..<50 { try tx.insert(["name": .text("p\(i)"), "age": .integer(Int64(i))], into: t) }
            try tx.createIndex("people_name", on: t, columns: [IndexColumn("name")])
        }
        let before = try db.read { tx in try tx.statistics(of: try tx.table("people")) }
        try db.write { tx in try tx.renameColumn("age", to: "years", in: try tx.table("people")) }
        try db.read { tx in
            let t = try tx.table("people")
            XCTAssertEqual(try tx.statistics(of: t), before, "no page of the table changed")
            XCTAssertEqual(try tx.count(TableQuery("people", where: "years >= 40")), 10)
            XCTAssertThrowsError(try tx.count(TableQuery("people", where: "age >= 40")))
        }
        for (old, new, code) in [("name", "label", KuraError.Code.invalidArgument), ("years", "name", .invalidArgument), ("nope", "x", .notFound)] {
            XCTAssertThrowsError(try db.write { tx in try tx.renameColumn(old, to: new, in: try tx.table("people")) }) { error in
                XCTAssertEqual((error as? KuraError)?.code, code, "\(old) -> \(new)")
            }
        }
    }

    func testUniqueViolationNamesIndexAndValueAndChangesNothing() throws {
        let db = try Database.inMemory()
        try db.write { tx in
            let t = try tx.createTable("people", schema: people)
            try tx.createIndex("by_email", on: t, columns: [IndexColumn("email")], unique: true)
            try tx.insert(["name": .text("Ada"), "email": .text("ada@example.com")], into: t)
            try tx.insert(["name": .text("Bob")], into: t)  // nulls never conflict
            try tx.insert(["name": .text("Cy")], into: t)
        }
        try db.write { tx in
            let t = try tx.table("people")
            XCTAssertThrowsError(try tx.insert(["name": .text("Eve"), "email": .text("ada@example.com")], into: t)) { e in
                XCTAssertEqual((e as? KuraError)?.code, .constraintViolation)
                XCTAssertTrue("\(e)".contains("by_email") && "\(e)".contains("ada@example.com"), "\(e)")
            }
            XCTAssertThrowsError(try tx.update(["Bob", .text("ada@example.com")], in: t, rowID: 2))
            // The transaction goes on, unchanged by the failed statements.
            XCTAssertEqual(try tx.rowCount(t), 3)
            XCTAssertEqual(try tx.values(in: t, rowID: 2)?[1], .null)
            try tx.insert(["name": .text("Eve"), "email": .text("eve@example.com")], into: t)
        }
        try db.read { tx in
            XCTAssertEqual(try tx.rowCount(try tx.table("people")), 4)
            XCTAssertEqual(try tx.checkIntegrity(), [])
        }
        XCTAssertThrowsError(try db.write { tx in
            let t = try tx.table("people")
            try tx.insert(["name": .text("Ann"), "age": .integer(3)], into: t)
            try tx.insert(["name": .text("Ann"), "age": .integer(3)], into: t)
            try tx.createIndex("by_name_age", on: t, columns: [IndexColumn("name"), IndexColumn("age")], unique: true)
        }) { e in
            XCTAssertEqual((e as? KuraError)?.code, .constraintViolation)
            XCTAssertTrue("\(e)".contains("by_name_age"), "\(e)")
        }
    }

    func testIndexBuiltOnAFilledTableIsFullAndConsistent() throws {
        let db = try Database.inMemory()
        try db.write { tx in
            let t = try tx.createTable("people", schema: people)
            for i in 0..<20_000 { try tx.insert(["name": .text("name\(i * 7919 % 20_000)"), "age": .integer(Int64(i % 90))], into: t) }
            try tx.createIndex("by_name", on: t, columns: [IndexColumn("name")])
        }
        try db.read { tx in
            let st = try tx.statistics(of: try tx.index("by_name").info)
            XCTAssertEqual(st.entries, 20_000)
            XCTAssertGreaterThan(st.leafFill, 0.9)
            XCTAssertEqual(try tx.checkIntegrity(), [])
            let q = try TableQuery("people", where: "name BEGINSWITH 'name1999'")
            XCTAssertEqual(try tx.count(q), 11)
            let plan = try tx.explain(q)
            XCTAssertTrue(plan.contains("search index \"by_name\"") && plan.contains("BEGINSWITH"), plan)
        }
    }

    func testDatesCompareWithDatePredicates() throws {
        let db = try Database.inMemory()
        let base = Date(timeIntervalSinceReferenceDate: 700_000_000)
        try db.write { tx in
            let t = try tx.createTable("people", schema: people)
            try tx.createIndex("by_born", on: t, columns: [IndexColumn("born")])
            for i in 0..<10 { try tx.insert(["name": .text("p\(i)"), "born": .double(base.timeIntervalSinceReferenceDate + Double(i) * 86400)], into: t) }
        }
        try db.read { tx in
            let q = try TableQuery("people", where: "born >= %@", PredicateArgument(base.addingTimeInterval(5 * 86400)))
            XCTAssertEqual(try tx.fetch(q).map(\.rowID), [6, 7, 8, 9, 10])
            XCTAssertTrue(try tx.explain(q).contains("by_born"))
        }
    }

    /// Index consistency after long random insert/update/delete sequences,
    /// including rolled-back transactions and failed unique inserts.
    func testIndexesStayConsistentUnderRandomChangesAndRollbacks() throws {
        struct Rollback: Error {}
        var rng = SplitMix64(seed: 77)
        let db = try Database.inMemory()
        try db.write { tx in
            let t = try tx.createTable("people", schema: people)
            try tx.createIndex("by_email", on: t, columns: [IndexColumn("email")], unique: true)
            try tx.createIndex("by_age_name", on: t, columns: [IndexColumn("age", descending: true), IndexColumn("name")])
            try tx.createIndex("by_name_folded", on: t, columns: [IndexColumn("name", folded: true)])
        }
        var violations = 0
        var rollbacks = 0
        for round in 0..<300 {
            do {
                try db.write { tx in
                    let t = try tx.table("people")
                    for _ in 0..<30 {
                        let email: Value = rng.next() % 4 == 0 ? .null : .text("u\(rng.next() % 3000)@x")
                        let row: [Value] = [.text(["Zoë", "zoe", "Ada", "ÅSA", "åsa"][Int(rng.next() % 5)] + String(rng.next() % 50)), email,
                                            rng.next() % 5 == 0 ? .null : .integer(Int64(rng.next() % 100)), .null]
                        let id = Int64(1 + rng.next() % UInt64(max(1, round * 20)))
                        do {
                            switch rng.next() % 3 {
                            case 0: try tx.insert(row, into: t)
                            case 1: try tx.update(row, in: t, rowID: id)
                            default: try tx.delete(from: t, rowID: id)
                            }
                        } catch KuraError.constraintViolation {
                            violations += 1
                        }
                    }
                    if rng.next() % 5 == 0 { throw Rollback() }
                }
            } catch is Rollback { rollbacks += 1 }
            if round % 100 == 99 {
                try db.read { tx in XCTAssertEqual(try tx.checkIntegrity(), [], "round \(round)") }
            }
        }
        XCTAssertGreaterThan(violations, 10)
        XCTAssertGreaterThan(rollbacks, 20)
        try db.read { tx in
            XCTAssertGreaterThan(try tx.rowCount(try tx.table("people")), 1000)
            XCTAssertEqual(try tx.checkIntegrity(), [])
        }
    }

    func testIntegrityCheckReportsAStaleIndexEntry() throws {
        let db = try Database.inMemory()
        try db.write { tx in
            let t = try tx.createTable("people", schema: people)
            let index = try tx.createIndex("by_age", on: t, columns: [IndexColumn("age")])
            try tx.insert(["name": .text("a"), "age": .integer(1)], into: t)
            // Plant an entry no row produces, under the engine's feet.
            var key = QueryPlanner.segment(.integer(99), index.columns[0])
            RowIDKey.append(1, to: &key)
            try index.tree.insert(key, [], mode: .insertNew, tx.writer!)
        }
        let problems = try db.read { tx in try tx.checkIntegrity() }
        // One checker for the engine and `kura check` (IntegrityCheck.swift): it
        // reports an index's unmatched entries once, with their count and the first.
        XCTAssertTrue(problems.contains { $0.message.contains("has 1 entry that match no row of table \"people\"") }, "\(problems)")
    }
    /// Update and delete by predicate reuse the record the scan read instead of
    /// reading each row again; rows, indexes on changed and unchanged columns,
    /// and counts must stay exactly what a plain Swift model says.
    func testUpdateAndDeleteByPredicateKeepRowsAndIndexesExact() throws {
        let db = try Database.inMemory()
        let schema = try TableSchema([ColumnDefinition("a", .integer), ColumnDefinition("b", .integer), ColumnDefinition("s", .text)])
        var model: [Int64: (a: Int64, b: Int64, s: String)] = [:]
        try db.write { tx in
            let t = try tx.createTable("t", schema: schema)
            for i in 0..<3000 {
                let row = (a: Int64(i % 997), b: Int64(i % 13), s: String(repeating: "q", count: i % 700))
                let id = try tx.insert([.integer(row.a), .integer(row.b), .text(row.s)], into: t)
                model[id] = row
            }
            _ = try tx.createIndex("t_a", on: t, columns: [IndexColumn("a")])
            _ = try tx.createIndex("t_b_a", on: t, columns: [IndexColumn("b"), IndexColumn("a")])
        }
        try db.write { tx in
            // Changes an indexed column (b) and leaves the others.
            let n = try tx.update("t", where: try KuraPredicate(format: "a < 300"), set: ["b": .integer(100)])
            XCTAssertEqual(n, model.values.filter { $0.a < 300 }.count)
            for (id, r) in model where r.a < 300 { model[id] = (r.a, 100, r.s) }
            // Changes an unindexed column only.
            let m = try tx.update("t", where: try KuraPredicate(format: "b == 5"), set: ["s": .text("five")])
            XCTAssertEqual(m, model.values.filter { $0.b == 5 }.count)
            for (id, r) in model where r.b == 5 { model[id] = (r.a, r.b, "five") }
            let d = try tx.delete(from: "t", where: try KuraPredicate(format: "b == 100 AND a >= 150"))
            XCTAssertEqual(d, model.values.filter { $0.b == 100 && $0.a >= 150 }.count)
            model = model.filter { !($0.value.b == 100 && $0.value.a >= 150) }
        }
        try db.read { tx in
            XCTAssertEqual(try tx.checkIntegrity(), [])
            let rows = try tx.fetch(TableQuery("t"))
            XCTAssertEqual(rows.count, model.count)
            for r in rows {
                guard let m = model[r.rowID] else { XCTFail("row \(r.rowID) should be gone"); continue }
                XCTAssertEqual(r.values, [.integer(m.a), .integer(m.b), .text(m.s)], "row \(r.rowID)")
            }
            XCTAssertEqual(try tx.count(try TableQuery("t", where: "b == 100")), model.values.filter { $0.b == 100 }.count)
            XCTAssertEqual(try tx.count(try TableQuery("t", where: "a == 12")), model.values.filter { $0.a == 12 }.count)
        }
    }

    /// Updates build index keys only for indexes one of whose columns changed
    /// bytes (the table handle compares the old and new records' fields first).
    /// Guards that skipping never misses a change: a folded column whose bytes
    /// change but whose key does not, a column added after the rows were written
    /// (old records lack it), a unique index while only other columns change,
    /// and a unique violation on an indexed column, which must change nothing.
    func testUpdatesRebuildExactlyTheIndexesWhoseColumnsChanged() throws {
        let db = try Database.inMemory()
        try db.write { tx in
            let t = try tx.createTable("people", schema: people)
            for i in 0..<200 {
                try tx.insert(["name": .text("n\(i)"), "email": .text("e\(i)@x"), "age": .integer(Int64(i % 10))], into: t)
            }
            try tx.addColumn(ColumnDefinition("rank", .integer, default: .integer(7)), to: t)
            try tx.createIndex("by_email", on: t, columns: [IndexColumn("email")], unique: true)
            try tx.createIndex("by_name", on: try tx.table("people"), columns: [IndexColumn("name", folded: true)], unique: true)
            try tx.createIndex("by_rank", on: try tx.table("people"), columns: [IndexColumn("rank")])
        }
        try db.write { tx in
            let t = try tx.table("people")
            // Only an unindexed column: every unique key is the row's own.
            XCTAssertEqual(try tx.update("people", where: try KuraPredicate(format: "age < 5"), set: ["age": .integer(50)]), 100)
            // Folded key unchanged though the bytes change; old records lack `rank`.
            XCTAssertTrue(try tx.update([.text("N3"), .text("e3@x"), .integer(50), .null], in: t, rowID: 4))
            // The added column itself, on old records.
            XCTAssertEqual(try tx.update("people", where: try KuraPredicate(format: "age == 9"), set: ["rank": .integer(1)]), 20)
            XCTAssertThrowsError(try tx.update("people", where: try KuraPredicate(format: "name == 'n5'"), set: ["email": .text("e6@x")])) { e in
                XCTAssertEqual((e as? KuraError)?.code, .constraintViolation)
            }
            XCTAssertThrowsError(try tx.update([.text("n7"), .text("e8@x"), .integer(1), .integer(7)], in: t, rowID: 9)) { e in
                XCTAssertEqual((e as? KuraError)?.code, .constraintViolation)
            }
        }
        try db.read { tx in
            XCTAssertEqual(try tx.checkIntegrity(), [])
            XCTAssertEqual(try tx.count(try TableQuery("people", where: "rank == 1")), 20)
            XCTAssertEqual(try tx.count(try TableQuery("people", where: "rank == 7")), 180)
            XCTAssertEqual(try tx.fetch(try TableQuery("people", where: "email == 'e6@x'")).map(\.rowID), [7])
            XCTAssertEqual(try tx.fetch(try TableQuery("people", where: "name ==[c] 'n3'")).map(\.rowID), [4])
            XCTAssertEqual(try tx.values(in: try tx.table("people"), rowID: 9)?[0], .text("n8"))
        }
    }

    /// Inserts, updates and deletes keep row counts and next row IDs in one
    /// resolved table handle per table; the counters must stay exact when writes
    /// alternate between tables and reads of the counters interleave.
    func testCountersStayExactWhenWritesAlternateBetweenTables() throws {
        let db = try Database.inMemory()
        try db.write { tx in
            for name in ["a", "b"] {
                let t = try tx.createTable(name, schema: people)
                try tx.createIndex("\(name)_age", on: t, columns: [IndexColumn("age")])
            }
        }
        var model: [String: Set<Int64>] = ["a": [], "b": []]
        var next: [String: Int64] = ["a": 1, "b": 1]
        let seed = ProcessInfo.processInfo.environment["KURA_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1...UInt64(UInt32.max))
        print("testCountersStayExactWhenWritesAlternateBetweenTables seed \(seed) (replay with KURA_SEED=\(seed))")
        var rng = SplitMix64(seed: seed)
        try db.write { tx in
            // Resolved once, so runs of writes to one table keep its handle.
            let tables = ["a": try tx.table("a"), "b": try tx.table("b")]
            for step in 0..<600 {
                let name = rng.next() % 2 == 0 ? "a" : "b"
                let t = tables[name]!
                switch rng.next() % 4 {
                case 0, 1:
                    let id = try tx.insert(["name": .text("x"), "age": .integer(Int64(rng.next() % 20))], into: t)
                    XCTAssertEqual(id, next[name], "seed \(seed)")
                    next[name] = id + 1
                    model[name]!.insert(id)
                case 2:
                    let id = Int64(1 + rng.next() % UInt64(next[name]!))
                    XCTAssertEqual(try tx.delete(from: t, rowID: id), model[name]!.remove(id) != nil)
                default:
                    let k = Int64(rng.next() % 20)
                    let gone = try tx.fetch(try TableQuery(name, where: "age == \(k)")).map(\.rowID)
                    XCTAssertEqual(try tx.delete(from: name, where: try KuraPredicate(format: "age == \(k)")), gone.count)
                    model[name]!.subtract(gone)
                }
                if step % 7 == 0 { XCTAssertEqual(try tx.rowCount(try tx.table(name)), model[name]!.count, "seed \(seed) step \(step)") }
            }
        }
        try db.read { tx in
            XCTAssertEqual(try tx.checkIntegrity(), [])
            for name in ["a", "b"] {
                XCTAssertEqual(try tx.rowCount(try tx.table(name)), model[name]!.count)
                XCTAssertEqual(try tx.table(name).nextRowID, next[name]!)
            }
        }
    }
}
