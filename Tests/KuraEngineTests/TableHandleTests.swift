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
}
