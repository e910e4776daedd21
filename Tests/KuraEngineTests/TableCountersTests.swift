// Table counters (FORMAT.md, "Table counters") and the schema cookie: format-1
// stores open and migrate, counters are checked, and a connection's cached
// catalog follows schema changes made by other connections.

import Foundation
import XCTest
@testable import KuraEngine

final class TableCountersTests: XCTestCase {
    static let schema = try! TableSchema([ColumnDefinition("a", .integer), ColumnDefinition("b", .text)])

    /// Rewrites a format-2 store as format 1 wrote it: counters back in the
    /// catalog records, no counters tree, version 1 in the header.
    func downgradeToFormat1(_ db: Database) throws {
        // Through the pager, not `write`: a write transaction would migrate the
        // store back at commit.
        let snapshot = try db.pager.beginWrite()
        defer { db.pager.endWrite(snapshot) }
        let w = try PageWriter(pager: db.pager, snapshot: snapshot)
        do {
            let catalog = try Catalog.loadWithCounters(header: w.header, w)
            for info in catalog.entries.values {
                let record: [Value] = [.text(info.kind), .text(info.name), .integer(Int64(info.rootPage)),
                                       .integer(info.nextRowID), .integer(info.rowCount), .blob(info.definition),
                                       info.owner.map { .text($0) } ?? .null]
                try BTree(root: w.header.headerCatalogRoot, kind: .table).insert(RowIDKey.encode(info.id), RecordCodec.encode(record), mode: .upsert, w)
            }
            try BTree(root: w.header.headerCountersRoot, kind: .table).destroy(w)
            w.header.headerCountersRoot = 0
            w.header.headerSchemaCookie = 0
            w.header.headerVersion = 1
            w.markModified()
        }
        try w.commit()
    }

    func testFormat1StoreOpensAndMigratesInFirstWrite() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/old.kura"
        do {
            let db = try Database(path: path)
            try db.setFormatForTesting(4)
            try db.write { tx in
                let t = try tx.createTable("t", schema: Self.schema)
                try tx.createIndex("t_a", on: t, columns: [IndexColumn("a")])
                for i in 1...50 { try tx.insert([.integer(Int64(i)), .text("r\(i)")], into: t) }
                _ = try tx.reserveRowIDs(10, in: t)
                for i in 1...5 { try tx.delete(from: t, rowID: Int64(i)) }
                try tx.createTable("raw")
            }
            try downgradeToFormat1(db)
            db.close()
        }
        XCTAssertEqual(try fileVersion(path), 1)

        let db = try Database(path: path)
        // Reads take the counters from the format-1 records and change nothing.
        try db.read { tx in
            let t = try tx.table("t")
            XCTAssertEqual(t.rowCount, 45)
            XCTAssertEqual(t.nextRowID, 61)
            XCTAssertEqual(try tx.checkIntegrity(), [])
        }
        XCTAssertEqual(db.logFrameCount, 0)
        // The first write migrates; the row IDs go on where they stopped.
        let id = try db.write { tx in try tx.insert([.integer(99), .text("new")], into: try tx.table("t")) }
        XCTAssertEqual(id, 61)
        try db.read { tx in
            let header = try tx.headerPage()
            XCTAssertEqual(header.headerVersion, FileHeader.countersFormatVersion)
            XCTAssertNotEqual(header.headerCountersRoot, 0)
            XCTAssertEqual(try tx.table("t").rowCount, 46)
            XCTAssertEqual(try tx.table("raw").nextRowID, 1)
            XCTAssertEqual(try tx.checkIntegrity(), [])
            XCTAssertEqual(try tx.fetch(TableQuery("t", where: "a == 99")).map(\.rowID), [61])
        }
        db.close()
        XCTAssertEqual(try fileVersion(path), FileHeader.countersFormatVersion)
        let inspection = StoreWalker(try RawStore(path: path)).run()
        XCTAssertEqual(inspection.problems, [])
        // Format 2 becomes 5 when a connection opens it alone (SharedLogHeaderTests).
        try Database(path: path).close()
        XCTAssertEqual(try fileVersion(path), FileHeader.formatVersion)
        XCTAssertEqual(StoreWalker(try RawStore(path: path)).run().problems, [])
        let reopened = try Database(path: path)
        defer { reopened.close() }
        try reopened.read { tx in
            XCTAssertEqual(try tx.headerPage().headerCountersRoot, 0)
            XCTAssertEqual(try tx.table("t").rowCount, 46)
            XCTAssertEqual(try tx.table("t").nextRowID, 62)
            XCTAssertEqual(try tx.table("raw").nextRowID, 1)
        }
    }

    // A format-1 store whose migration is rolled back stays format 1 and readable.
    func testMigrationRolledBackWithItsTransaction() throws {
        let db = try Database.inMemory()
        try db.setFormatForTesting(4)
        try db.write { tx in try tx.insert([.integer(1)], into: try tx.createTable("t")) }
        try downgradeToFormat1(db)
        struct Stop: Error {}
        XCTAssertThrowsError(try db.write { tx in
            try tx.insert([.integer(2)], into: try tx.table("t"))
            throw Stop()
        })
        try db.read { tx in
            XCTAssertEqual(try tx.headerPage().headerVersion, 1)
            XCTAssertEqual(try tx.table("t").rowCount, 1)
            XCTAssertEqual(try tx.checkIntegrity(), [])
        }
    }

    func testRowCommitsKeepTheSchemaCookie() throws {
        let db = try Database.inMemory()
        try db.write { tx in _ = try tx.createTable("t", schema: Self.schema) }
        let cookie = try db.read { tx in try tx.headerPage().headerSchemaCookie }
        for i in 0..<3 { try db.write { tx in try tx.insert([.integer(Int64(i))], into: try tx.table("t")) } }
        try db.write { tx in _ = try tx.delete(from: try tx.table("t"), rowID: 1) }
        try db.read { tx in
            XCTAssertEqual(try tx.headerPage().headerSchemaCookie, cookie)
            XCTAssertEqual(try tx.table("t").rowCount, 2)
            XCTAssertEqual(try tx.table("t").nextRowID, 4)
        }
        try db.write { tx in try tx.addColumn(ColumnDefinition("c", .integer), to: try tx.table("t")) }
        try db.read { tx in XCTAssertGreaterThan(try tx.headerPage().headerSchemaCookie, cookie) }
    }

    func testCachedCatalogFollowsAnotherConnectionsSchemaChange() throws {
        let fs = MemoryFileSystem()
        var o = Database.Options()
        o.fileSystem = fs
        let a = try Database(path: "/s.kura", options: o)
        let b = try Database(path: "/s.kura", options: o)
        try a.write { tx in
            let t = try tx.createTable("t", schema: Self.schema)
            for i in 0..<20 { try tx.insert([.integer(Int64(i)), .text("x\(i)")], into: t) }
        }
        let prepared = try a.read { tx in try tx.prepare(TableQuery("t", where: "a == 7")) }
        try a.read { tx in
            XCTAssertEqual(try tx.schema(of: try tx.table("t"))?.columns.count, 2)
            XCTAssertEqual(try tx.fetch(prepared).count, 1)
            XCTAssertFalse(try tx.explain(prepared).contains("t_a"))
        }
        // Another connection adds a column and an index, and inserts.
        try b.write { tx in
            let t = try tx.table("t")
            try tx.addColumn(ColumnDefinition("c", .integer, default: .integer(5)), to: t)
            try tx.createIndex("t_a", on: try tx.table("t"), columns: [IndexColumn("a")])
            try tx.insert([.integer(7), .text("y"), .integer(6)], into: try tx.table("t"))
        }
        try a.read { tx in
            let t = try tx.table("t")
            XCTAssertEqual(try tx.schema(of: t)?.columns.map(\.name), ["a", "b", "c"])
            XCTAssertEqual(t.rowCount, 21)
            XCTAssertEqual(try tx.indexes(of: "t").map(\.name), ["t_a"])
            XCTAssertEqual(try tx.fetch(prepared).count, 2)
            let plan = try tx.explain(prepared)
            XCTAssertTrue(plan.contains("t_a"), plan)
        }
        // Dropped and re-created with another schema by the other connection.
        try b.write { tx in
            try tx.dropTable("t")
            try tx.createTable("t", schema: TableSchema([ColumnDefinition("a", .text)]))
        }
        try a.read { tx in
            XCTAssertEqual(try tx.schema(of: try tx.table("t"))?.columns.map(\.name), ["a"])
            XCTAssertEqual(try tx.table("t").rowCount, 0)
            XCTAssertEqual(try tx.fetch(prepared).count, 0)
        }
        a.close()
        b.close()
    }

    // A prepared query resolved inside a write transaction that then changes the
    // schema (and rolls back) must not keep a resolution of the uncommitted schema.
    func testPreparedQueryInsideSchemaChangingTransaction() throws {
        let db = try Database.inMemory()
        try db.write { tx in
            let t = try tx.createTable("t", schema: Self.schema)
            for i in 0..<5 { try tx.insert([.integer(Int64(i))], into: t) }
        }
        let prepared = try db.read { tx in try tx.prepare(TableQuery("t", where: "a >= 3")) }
        struct Stop: Error {}
        XCTAssertThrowsError(try db.write { tx in
            try tx.dropTable("t")
            let t = try tx.createTable("t", schema: Self.schema)
            try tx.insert([.integer(9)], into: t)
            XCTAssertEqual(try tx.fetch(prepared).map(\.rowID), [1])
            throw Stop()
        })
        try db.read { tx in XCTAssertEqual(try tx.fetch(prepared).map(\.rowID), [4, 5]) }
    }

    /// Format 5: counters at the end of the right-most leaf that disagree
    /// with the tree, a right-most leaf without counters, and a header that
    /// still names a counters tree are reported by both checks.
    func testCheckCatchesWrongLeafCounters() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/bad.kura"
        let db = try Database(path: path)
        try db.write { tx in
            let t = try tx.createTable("t", schema: Self.schema)
            for i in 0..<10 { try tx.insert([.integer(Int64(i))], into: t) }
            _ = try tx.createTable("u")
        }
        // Row count one too high, next row ID at a row that exists: counters
        // the commit writes as they are.
        try db.write { tx in
            guard var t = try tx.countedEntry("t") else { return XCTFail("no table t") }
            t.rowCount = 11
            t.nextRowID = 5
            tx.catalog!.entries["t"] = t
            tx.changedTables.insert("t")
        }
        // Table u's leaf loses its counters, and the header names a counters
        // tree: written below the transaction layer, which would repair both.
        let u = try db.read { tx in try tx.table("u") }
        let snapshot = try db.pager.beginWrite()
        let w = try PageWriter(pager: db.pager, snapshot: snapshot)
        let leaf = try w.writable(u.rootPage)
        leaf.setU8(Node.flagsOffset, leaf.u8(Node.flagsOffset) & ~Node.countersFlag)
        leaf.contentStart = leaf.contentEnd
        w.header.headerCountersRoot = u.rootPage
        w.markModified()
        try w.commit()
        db.pager.endWrite(snapshot)
        let expected = ["holds 10 rows but its row count says 11", "is not below the next row ID 5",
                        "right-most leaf of table \"u\"", "names a counters tree"]
        let engine = try db.read { tx in try tx.checkIntegrity() }.map(\.message)
        XCTAssertThrowsError(try db.read { tx in try tx.table("u") }) { e in
            XCTAssertEqual((e as? KuraError)?.code, .corrupt)
            XCTAssertEqual((e as? KuraError)?.page, u.rootPage)
        }
        db.close()
        let walker = StoreWalker(try RawStore(path: path)).run().problems.map(\.message)
        for e in expected {
            XCTAssertTrue(engine.contains { $0.contains(e) }, "engine check misses \"\(e)\": \(engine)")
            XCTAssertTrue(walker.contains { $0.contains(e) }, "kura check misses \"\(e)\": \(walker)")
        }
    }

    func testCheckCatchesWrongCounters() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/bad.kura"
        let db = try Database(path: path)
        try db.setFormatForTesting(4)
        try db.write { tx in
            let t = try tx.createTable("t", schema: Self.schema)
            for i in 0..<10 { try tx.insert([.integer(Int64(i))], into: t) }
            _ = try tx.createTable("u")
        }
        // Row count one too high, next row ID at a row that exists.
        try db.write { tx in
            let w = tx.writer!
            let t = try tx.table("t")
            try TableCounters.store(TableCounters(nextRowID: 5, rowCount: 11), id: t.id, root: w.header.headerCountersRoot, w)
            try TableCounters.remove(id: try tx.table("u").id, root: w.header.headerCountersRoot, w)
            try TableCounters.store(TableCounters(nextRowID: 1, rowCount: 0), id: 999, root: w.header.headerCountersRoot, w)
        }
        let expected = ["holds 10 rows but its row count says 11", "is not below the next row ID 5",
                        "table \"u\" (catalog ID", "counters entry for catalog ID 999"]
        let engine = try db.read { tx in try tx.checkIntegrity() }.map(\.message)
        db.close()
        let walker = StoreWalker(try RawStore(path: path)).run().problems.map(\.message)
        for e in expected {
            XCTAssertTrue(engine.contains { $0.contains(e) }, "engine check misses \"\(e)\": \(engine)")
            XCTAssertTrue(walker.contains { $0.contains(e) }, "kura check misses \"\(e)\": \(walker)")
        }
    }
}
