// Read transactions' table handles (TableHandle.swift): a read transaction
// resolves each table once and keeps it for its snapshot; handles never carry
// over to another transaction, so counters and schema changes committed by
// other connections are seen by the next transaction. What a connection keeps
// across transactions (TableHandleCache: resolution per schema cookie,
// counters per snapshot) must follow the same rules.

import Foundation
import XCTest
@testable import KuraEngine

final class TableHandleTests: XCTestCase {
    static let schemaAB = try! TableSchema([ColumnDefinition("a", .integer), ColumnDefinition("b", .text)])
    static let schemaC = try! TableSchema([ColumnDefinition("c", .text)])

    // Guards the read handle's lifetime: a handle resolved in one read
    // transaction must keep serving that snapshot while another connection
    // drops and re-creates the table with another schema, and must not leak
    // into the next transaction (which sees the new table).
    func testHandleKeepsItsSnapshotAndNextTransactionSeesOtherConnectionsSchemaChange() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/h.kura"
        let db1 = try Database(path: path)
        let db2 = try Database(path: path)
        defer { db1.close(); db2.close() }
        try db1.write { tx in
            let t = try tx.createTable("t", schema: Self.schemaAB)
            _ = try tx.createIndex("t_a", on: t, columns: [IndexColumn("a")])
            for i in 1...20 { try tx.insert([.integer(Int64(i % 5)), .text("r\(i)")], into: t) }
        }
        try db1.read { tx in
            let t = try tx.table("t")
            XCTAssertEqual(try tx.values(in: t, rowID: 3), [.integer(3), .text("r3")])
            XCTAssertEqual(try tx.count(TableQuery("t", where: try KuraPredicate(format: "a == 2"))), 4)
            // Another connection replaces the table while this snapshot is open.
            try db2.write { w in
                try w.dropTable("t")
                let n = try w.createTable("t", schema: Self.schemaC)
                try w.insert([.text("new")], into: n)
            }
            XCTAssertEqual(try tx.values(in: t, rowID: 3), [.integer(3), .text("r3")])
            XCTAssertEqual(try tx.values(in: try tx.table("t"), rowID: 20), [.integer(0), .text("r20")])
            XCTAssertEqual(try tx.rowCount(t), 20)
            XCTAssertEqual(try tx.count(TableQuery("t", where: try KuraPredicate(format: "a == 2"))), 4)
            XCTAssertEqual(try tx.schema(of: t)?.columns.map(\.name), ["a", "b"])
        }
        try db1.read { tx in
            let t = try tx.table("t")
            XCTAssertEqual(try tx.rowCount(t), 1)
            XCTAssertEqual(try tx.schema(of: t)?.columns.map(\.name), ["c"])
            XCTAssertEqual(try tx.values(in: t, rowID: 1), [.text("new")])
            XCTAssertEqual(try tx.indexes(of: "t").count, 0)
            XCTAssertThrowsError(try tx.count(TableQuery("t", where: try KuraPredicate(format: "a == 2")))) { e in
                XCTAssertEqual((e as? KuraError)?.code, .notFound)
            }
        }
    }

    // Guards the counters a read handle carries: they are the snapshot's, so
    // a later read transaction must see rows another connection committed
    // (row count, and queries the planner costs from it).
    func testNextReadTransactionSeesOtherConnectionsRows() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/c.kura"
        let db1 = try Database(path: path)
        let db2 = try Database(path: path)
        defer { db1.close(); db2.close() }
        try db1.write { tx in
            let t = try tx.createTable("t", schema: Self.schemaAB)
            for i in 1...10 { try tx.insert([.integer(Int64(i)), .text("x")], into: t) }
        }
        XCTAssertEqual(try db1.read { tx in try tx.rowCount(try tx.table("t")) }, 10)
        try db2.write { tx in
            let t = try tx.table("t")
            for i in 11...15 { try tx.insert([.integer(Int64(i)), .text("y")], into: t) }
        }
        try db1.read { tx in
            let t = try tx.table("t")
            XCTAssertEqual(t.rowCount, 15)
            XCTAssertEqual(t.nextRowID, 16)
            XCTAssertEqual(try tx.values(in: t, rowID: 15), [.integer(15), .text("y")])
            XCTAssertNil(try tx.values(in: t, rowID: 16))
            XCTAssertEqual(try tx.count(TableQuery("t", where: try KuraPredicate(format: "b == 'y'"))), 5)
        }
    }

    // Guards the resolution a connection keeps across read transactions
    // (TableHandleCache): a column and an index another connection adds move
    // the schema cookie on, so the next read transaction must see them (not
    // the schema it resolved before); and counters kept for the newest
    // snapshot must not be handed to a transaction still on an older one.
    func testResolutionKeptAcrossTransactionsFollowsSchemaAndSnapshots() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/k.kura"
        let db1 = try Database(path: path)
        let db2 = try Database(path: path)
        defer { db1.close(); db2.close() }
        try db1.write { tx in
            let t = try tx.createTable("t", schema: Self.schemaAB)
            for i in 1...10 { try tx.insert([.integer(Int64(i)), .text("x\(i % 2)")], into: t) }
        }
        for _ in 0..<2 {
            try db1.read { tx in
                XCTAssertEqual(try tx.values(in: try tx.table("t"), rowID: 1), [.integer(1), .text("x1")])
                XCTAssertEqual(try tx.indexes(of: "t").count, 0)
            }
        }
        try db2.write { tx in
            let t = try tx.table("t")
            try tx.addColumn(ColumnDefinition("c", .integer, default: .integer(7)), to: t)
            _ = try tx.createIndex("t_b", on: try tx.table("t"), columns: [IndexColumn("b")])
        }
        try db1.read { tx in
            let t = try tx.table("t")
            XCTAssertEqual(try tx.values(in: t, rowID: 1), [.integer(1), .text("x1"), .integer(7)])
            XCTAssertEqual(try tx.schema(of: t)?.columns.map(\.name), ["a", "b", "c"])
            XCTAssertEqual(try tx.indexes(of: "t").map(\.name), ["t_b"])
            XCTAssertEqual(try tx.count(TableQuery("t", where: try KuraPredicate(format: "b == 'x0'"))), 5)
        }
        // An older snapshot of the same connection next to a newer one whose
        // counters the connection keeps.
        try db1.read { old in
            try db1.write { w in _ = try w.insert([.integer(11), .text("x1")], into: try w.table("t")) }
            try db1.read { new in
                XCTAssertEqual(try new.table("t").rowCount, 11)
                XCTAssertEqual(try new.values(in: try new.table("t"), rowID: 11)?.first, .integer(11))
            }
            let t = try old.table("t")
            XCTAssertEqual(t.rowCount, 10)
            XCTAssertEqual(t.nextRowID, 11)
            XCTAssertNil(try old.values(in: t, rowID: 11))
        }
        try db1.read { tx in
            XCTAssertEqual(try tx.table("t").rowCount, 11)
            XCTAssertEqual(try tx.table("t").nextRowID, 12)
        }
    }
    // Guards the cross-transaction table resolution against compaction:
    // `Database.compact()` by another connection moves tables' root pages, so a
    // connection that kept "t" resolved with its old root must resolve it again
    // (compaction moves the schema cookie on) and read the rows from the new tree.
    func testResolutionKeptAcrossTransactionsFollowsCompactionByAnotherConnection() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/k.kura"
        let db1 = try Database(path: path)
        let db2 = try Database(path: path)
        defer { db1.close(); db2.close() }
        try db1.write { tx in
            // A filler table created first, dropped later, so that compaction
            // moves "t" down into its pages.
            let f = try tx.createTable("filler", schema: Self.schemaAB)
            for i in 1...400 { try tx.insert([.integer(Int64(i)), .text(String(repeating: "f", count: 200))], into: f) }
            let t = try tx.createTable("t", schema: Self.schemaAB)
            for i in 1...300 { try tx.insert([.integer(Int64(i)), .text("t\(i)")], into: t) }
        }
        let rootBefore = try db1.read { tx in
            XCTAssertEqual(try tx.values(in: try tx.table("t"), rowID: 7), [.integer(7), .text("t7")])
            return try tx.table("t").rootPage
        }
        try db2.write { tx in try tx.dropTable("filler") }
        _ = try db2.compact()
        try db1.read { tx in
            let t = try tx.table("t")
            XCTAssertNotEqual(t.rootPage, rootBefore, "compaction did not move the table, so this test shows nothing")
            XCTAssertEqual(try tx.values(in: t, rowID: 7), [.integer(7), .text("t7")])
            XCTAssertEqual(try tx.values(in: t, rowID: 300), [.integer(300), .text("t300")])
            XCTAssertEqual(try tx.count(TableQuery("t")), 300)
        }
    }

    // MARK: Write transactions

    /// Whether connection `db` holds table `name` resolved at its newest schema
    /// (what its next write transaction takes instead of decoding it again).
    private func sharesResolution(_ db: Database, _ name: String) throws -> Bool {
        let key = try db.read { tx in CatalogCache.Key(try tx.headerPage()) }
        return db.tableHandleCache.resolved(name, key: key) != nil
    }

    // Guards the write transactions' shared table resolution (schema and
    // indexes kept per schema cookie, `WriteTransaction.sharedResolution`):
    // another connection adding an index, a unique index, dropping one, and
    // replacing the table between two write transactions of this connection
    // must each be seen by the next insert, which maintains exactly the
    // indexes that exist now.
    func testWriteTransactionsFollowOtherConnectionsIndexChanges() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/w.kura"
        let db1 = try Database(path: path)
        let db2 = try Database(path: path)
        defer { db1.close(); db2.close() }
        try db1.write { tx in
            let t = try tx.createTable("t", schema: Self.schemaAB)
            for i in 1...10 { try tx.insert([.integer(Int64(i)), .text("r\(i)")], into: t) }
        }
        func insert(_ a: Int64, _ b: String) throws -> Int64 {
            try db1.write { tx in try tx.insert([.integer(a), .text(b)], into: try tx.table("t")) }
        }
        _ = try insert(11, "r11")
        _ = try insert(12, "r12")
        XCTAssertTrue(try sharesResolution(db1, "t"), "the writer does not keep the table resolved, so this test shows nothing")

        // An index added by another connection gets the next row's entry.
        try db2.write { tx in _ = try tx.createIndex("t_a", on: try tx.table("t"), columns: [IndexColumn("a")]) }
        let r13 = try insert(500, "r13")
        let r14 = try insert(500, "r14")
        XCTAssertTrue(try sharesResolution(db1, "t"))
        try db1.read { tx in
            let q = TableQuery("t", where: try KuraPredicate(format: "a == 500"))
            XCTAssertTrue(try tx.explain(q).contains("t_a"), "the query does not use the index")
            XCTAssertEqual(try tx.fetch(q).map(\.rowID).sorted(), [r13, r14])
            XCTAssertEqual(try tx.checkIntegrity(), [])
        }

        // A unique index added by another connection is enforced.
        try db2.write { tx in _ = try tx.createIndex("t_b", on: try tx.table("t"), columns: [IndexColumn("b")], unique: true) }
        XCTAssertThrowsError(try insert(1, "r13")) { e in
            XCTAssertEqual((e as? KuraError)?.code, .constraintViolation)
        }
        _ = try insert(1, "unique")

        // Indexes dropped by another connection are no longer written (their
        // pages may be reused by then).
        try db2.write { tx in
            try tx.dropIndex("t_a")
            try tx.dropIndex("t_b")
            let filler = try tx.createTable("filler", schema: Self.schemaC)
            for i in 1...50 { try tx.insert([.text("f\(i)")], into: filler) }
        }
        _ = try insert(2, "unique")
        try db1.read { tx in
            XCTAssertEqual(try tx.indexes(of: "t").count, 0)
            XCTAssertEqual(try tx.rowCount(try tx.table("t")), 16)
            XCTAssertEqual(try tx.checkIntegrity(), [])
        }

        // The table replaced by another connection under the same name.
        let old = try db1.read { tx in try tx.table("t") }
        try db2.write { tx in
            try tx.dropTable("t")
            _ = try tx.createTable("t", schema: Self.schemaC)
        }
        XCTAssertThrowsError(try db1.write { tx in try tx.insert([.integer(1), .text("x")], into: old) }) { e in
            XCTAssertEqual((e as? KuraError)?.code, .notFound)
        }
        XCTAssertThrowsError(try insert(1, "x")) { e in
            XCTAssertEqual((e as? KuraError)?.code, .invalidArgument)
        }
        try db1.write { tx in _ = try tx.insert([.text("c")], into: try tx.table("t")) }
        try db1.read { tx in
            XCTAssertEqual(try tx.values(in: try tx.table("t"), rowID: 1), [.text("c")])
            XCTAssertEqual(try tx.checkIntegrity(), [])
        }
    }

    // Guards the same sharing inside one write transaction: once it changes
    // the schema (here: an index on the table it is writing), its inserts
    // maintain the new index, and `table(_:)` answers the counters its own
    // inserts moved.
    func testWriteTransactionSeesItsOwnIndexAndCounters() throws {
        let dir = try TemporaryDirectory()
        let db = try Database(path: dir.path + "/o.kura")
        defer { db.close() }
        try db.write { tx in
            let t = try tx.createTable("t", schema: Self.schemaAB)
            for i in 1...5 { try tx.insert([.integer(Int64(i)), .text("r\(i)")], into: t) }
        }
        try db.write { tx in _ = try tx.insert([.integer(6), .text("r6")], into: try tx.table("t")) }
        XCTAssertTrue(try sharesResolution(db, "t"), "the writer does not keep the table resolved, so this test shows nothing")
        try db.write { tx in
            XCTAssertEqual(try tx.table("t").rowCount, 6)
            _ = try tx.insert([.integer(7), .text("r7")], into: try tx.table("t"))
            XCTAssertEqual(try tx.table("t").rowCount, 7)
            XCTAssertEqual(try tx.table("t").nextRowID, 8)
            _ = try tx.createIndex("t_a", on: try tx.table("t"), columns: [IndexColumn("a")])
            _ = try tx.insert([.integer(99), .text("r8")], into: try tx.table("t"))
            XCTAssertEqual(try tx.table("t").rowCount, 8)
            XCTAssertEqual(try tx.fetch(TableQuery("t", where: try KuraPredicate(format: "a == 99"))).map(\.rowID), [8])
        }
        try db.read { tx in
            XCTAssertEqual(try tx.table("t").rowCount, 8)
            XCTAssertEqual(try tx.checkIntegrity(), [])
        }
    }

    // Guards the pages and append hints a write transaction hands the next
    // one of its connection (PageSource.swift, "Carry"): they are valid only
    // on the snapshot that transaction committed. Another connection's
    // commits (appends that split the right-most leaves, index entries, a
    // delete), a checkpoint and a rolled-back transaction between two writes
    // of this connection must leave every row and index entry in place.
    func testWriterCarryFollowsOtherConnectionsCommits() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/carry.kura"
        var options = Database.Options()
        options.pageSize = 512
        let db1 = try Database(path: path, options: options)
        let db2 = try Database(path: path, options: options)
        defer { db1.close(); db2.close() }
        try db1.write { tx in
            let t = try tx.createTable("t", schema: Self.schemaAB)
            _ = try tx.createIndex("t_a", on: t, columns: [IndexColumn("a")])
        }
        var expected = 0
        func insert(_ db: Database, _ count: Int, _ a: Int64) throws {
            try db.write { tx in
                for _ in 0..<count { _ = try tx.insert([.integer(a), .text(String(repeating: "v", count: 40))], into: try tx.table("t")) }
            }
            expected += count
        }
        for round in 0..<6 {
            try insert(db1, 1, 1)
            try insert(db1, 1, 2)
            XCTAssertNotNil(db1.writerCarry.take().map { db1.writerCarry.keep($0) }, "nothing carried, so this test shows nothing")
            switch round {
            case 0, 1: try insert(db2, 40, 3)  // splits db1's carried leaves
            case 2: try db2.write { tx in _ = try tx.delete(from: try tx.table("t"), rowID: 2) }; expected -= 1
            case 3: _ = try db2.checkpoint()
            case 4: XCTAssertThrowsError(try db1.write { tx in
                        _ = try tx.insert([.integer(9), .text("x")], into: try tx.table("t"))
                        throw KuraError(.invalidArgument, "roll back")
                    })
            default: try insert(db2, 40, 3); _ = try db1.checkpoint()
            }
            try insert(db1, 3, 4)
        }
        try db1.read { tx in
            XCTAssertEqual(try tx.rowCount(try tx.table("t")), expected)
            XCTAssertEqual(try tx.count(TableQuery("t")), expected)
            XCTAssertEqual(try tx.count(TableQuery("t", where: try KuraPredicate(format: "a == 4"))), 18)
            XCTAssertEqual(try tx.checkIntegrity(), [])
        }
    }

    // Guards the catalog and hot table a write transaction hands the next
    // one of its connection (TableHandle.swift, `WriterTables`): they are
    // valid only on the snapshot its commit made, at the same schema cookie.
    // Between two one-row commits of connection 1, connection 2 moves the
    // counters, adds a column, adds an index, drops and re-creates the table,
    // checkpoints and compacts, and connection 1 rolls a transaction back and
    // changes the schema itself; connection 1's next insert must see each:
    // the next row ID and row count, the new schema, the new index, the new
    // table. A stale carry reuses a row ID (the insert throws), writes a row
    // the old schema accepts, or leaves an index entry out (integrity check).
    func testWriterTablesFollowOtherConnectionsChanges() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/tables.kura"
        let db1 = try Database(path: path)
        let db2 = try Database(path: path)
        defer { db1.close(); db2.close() }
        try db1.write { tx in
            let t = try tx.createTable("t", schema: Self.schemaAB)
            for i in 1...5 { try tx.insert([.integer(Int64(i)), .text("r\(i)")], into: t) }
        }
        func insert(_ db: Database, _ values: [Value]) throws -> Int64 {
            try db.write { tx in try tx.insert(values, into: try tx.table("t")) }
        }
        func assertCarried(_ line: UInt = #line) {
            let t = db1.writerTables.take()
            XCTAssertNotNil(t?.hot, "nothing carried, so this step shows nothing", line: line)
            db1.writerTables.keep(t)
        }
        func check(_ rows: Int64, _ line: UInt = #line) throws {
            try db1.read { tx in
                XCTAssertEqual(try tx.table("t").rowCount, rows, line: line)
                XCTAssertEqual(try tx.count(TableQuery("t")), Int(rows), line: line)
                XCTAssertEqual(try tx.checkIntegrity(), [], line: line)
            }
        }
        XCTAssertEqual(try insert(db1, [.integer(6), .text("r6")]), 6)
        XCTAssertEqual(try insert(db1, [.integer(7), .text("r7")]), 7)
        assertCarried()

        // Counters moved by another connection.
        for i in 8...10 { XCTAssertEqual(try insert(db2, [.integer(Int64(i)), .text("r\(i)")]), Int64(i)) }
        XCTAssertEqual(try insert(db1, [.integer(11), .text("r11")]), 11)
        try check(11)
        assertCarried()

        // A column added by another connection: a three-value row fits only the new schema.
        try db2.write { tx in try tx.addColumn(ColumnDefinition("c", .text, nullable: true), to: try tx.table("t")) }
        XCTAssertEqual(try insert(db1, [.integer(12), .text("r12"), .text("c12")]), 12)
        XCTAssertEqual(try db1.read { tx in try tx.values(in: try tx.table("t"), rowID: 12) }, [.integer(12), .text("r12"), .text("c12")])
        try check(12)
        assertCarried()

        // An index added by another connection gets the next row's entry.
        try db2.write { tx in _ = try tx.createIndex("t_a", on: try tx.table("t"), columns: [IndexColumn("a")]) }
        XCTAssertEqual(try insert(db1, [.integer(777), .text("r13"), .null]), 13)
        try db1.read { tx in
            let q = TableQuery("t", where: try KuraPredicate(format: "a == 777"))
            XCTAssertTrue(try tx.explain(q).contains("t_a"), "the query does not use the index")
            XCTAssertEqual(try tx.fetch(q).map(\.rowID), [13])
        }
        try check(13)
        assertCarried()

        // A rolled-back transaction of this connection hands nothing on.
        XCTAssertThrowsError(try db1.write { tx in
            _ = try tx.insert([.integer(1), .text("x"), .null], into: try tx.table("t"))
            throw KuraError(.invalidArgument, "roll back")
        })
        XCTAssertEqual(try insert(db1, [.integer(14), .text("r14"), .null]), 14)
        try check(14)
        assertCarried()

        // A checkpoint, then a compaction, by another connection.
        _ = try db2.checkpoint()
        XCTAssertEqual(try insert(db1, [.integer(15), .text("r15"), .null]), 15)
        assertCarried()
        _ = try db2.compact()
        XCTAssertEqual(try insert(db1, [.integer(16), .text("r16"), .null]), 16)
        try check(16)
        assertCarried()

        // A schema change by this connection, then rows again.
        try db1.write { tx in _ = try tx.createIndex("t_b", on: try tx.table("t"), columns: [IndexColumn("b")]) }
        XCTAssertEqual(try insert(db1, [.integer(17), .text("r17"), .null]), 17)
        XCTAssertEqual(try insert(db1, [.integer(18), .text("r18"), .null]), 18)
        try check(18)
        assertCarried()

        // The table replaced by another connection under the same name.
        try db2.write { tx in
            try tx.dropTable("t")
            _ = try tx.createTable("t", schema: Self.schemaC)
        }
        XCTAssertEqual(try insert(db1, [.text("c1")]), 1)
        XCTAssertEqual(try insert(db1, [.text("c2")]), 2)
        try db1.read { tx in
            XCTAssertEqual(try tx.values(in: try tx.table("t"), rowID: 1), [.text("c1")])
            XCTAssertEqual(try tx.indexes(of: "t").count, 0)
        }
        try check(2)
    }

    // The same across processes: another process's commits (KuraTestChild
    // `writer`: rows with automatic row IDs into the table this connection
    // appends to, and its own checkpoints in the second round) between two
    // one-row commits of this connection. A stale carry would hand out a row
    // ID the child took (the insert throws) and count rows wrong.
    func testWriterTablesFollowAnotherProcessesCommits() throws {
        guard let child = CrashTests.childURL else { throw XCTSkip("KuraTestChild binary not found beside the test bundle") }
        let dir = try TemporaryDirectory()
        let path = dir.path + "/p.kura"
        let db = try makeChildWriterStore(at: path)
        defer { db.close() }
        func insert() throws -> Int64 {
            try db.write { tx in try tx.insert([.integer(99), .integer(0), .blob([])], into: try tx.table("writes")) }
        }
        var expected: Int64 = 0
        for (round, threshold) in [1000, 2].enumerated() {
            XCTAssertEqual(try insert(), expected + 1)
            XCTAssertEqual(try insert(), expected + 2)
            expected += 2
            let carried = db.writerTables.take()
            db.writerTables.keep(carried)
            XCTAssertNotNil(carried?.hot, "nothing carried, so this test shows nothing")
            try runChildWriter(child, path: path, round: round + 1, commits: 5, threshold: threshold)
            expected += 5
            XCTAssertEqual(try insert(), expected + 1)
            expected += 1
        }
        try db.read { tx in
            XCTAssertEqual(try tx.table("writes").rowCount, expected)
            XCTAssertEqual(try tx.count(TableQuery("writes")), Int(expected))
            XCTAssertEqual(try tx.checkIntegrity(), [])
        }
    }
}
