// The change counter in format 4 (FORMAT.md, "The header page"): a commit that
// changes no field of page 1 but the counter leaves page 1 out of the log, and
// every connection derives the same counter from page 1's field and the
// commits after the one that wrote it. The counter must go up by exactly one
// per commit, be the same for every reader of a snapshot (another connection,
// `kura` reading the raw files, the same connection after a reopen), survive
// checkpoints (which must bring the store file's page 1 up to date through
// the log) and never go back.

import Foundation
import XCTest
@testable import KuraEngine

final class ChangeCounterTests: XCTestCase {
    func makeStore(_ dir: TemporaryDirectory) throws -> (String, Database) {
        let path = dir.path + "/c.kura"
        let db = try Database(path: path)
        try db.write { tx in
            let t = try tx.createTable("t", schema: TableSchema([ColumnDefinition("name", .text), ColumnDefinition("score", .integer)]))
            try tx.createIndex("by_score", on: t, columns: [IndexColumn("score")])
        }
        return (path, db)
    }

    func insert(_ db: Database, _ i: Int, name: String = "n") throws {
        try db.write { tx in try tx.insert([.text(name), .integer(Int64(i))], into: try tx.table("t")) }
    }

    /// The counter as `kura info` computes it from the raw files.
    func rawCounter(_ path: String) throws -> UInt64 {
        let raw = try RawStore(path: path)
        defer { raw.close() }
        return raw.header.changeCounter
    }

    /// Page numbers of each committed transaction's frames in the log.
    func loggedTransactions(_ path: String) throws -> [[UInt32]] {
        let raw = try RawStore(path: path)
        defer { raw.close() }
        var out: [[UInt32]] = []
        var current: [UInt32] = []
        for f in raw.wal.frames where f.committed {
            current.append(f.page)
            if f.commit != 0 {
                out.append(current)
                current = []
            }
        }
        return out
    }

    func testRowCommitsLeavePageOneOutAndCountOneEach() throws {
        let dir = try TemporaryDirectory()
        let (path, db) = try makeStore(dir)
        defer { db.close() }
        XCTAssertEqual(try db.read { tx in try tx.headerPage().headerVersion }, FileHeader.formatVersion)
        try insert(db, 0)
        XCTAssertTrue(try db.checkpoint())
        let start = try db.changeCounter()
        for i in 1...5 { try insert(db, i) }
        XCTAssertEqual(try db.changeCounter(), start + 5)
        XCTAssertEqual(try rawCounter(path), start + 5)
        let transactions = try loggedTransactions(path)
        XCTAssertEqual(transactions.count, 5)
        for pages in transactions {
            // The table leaf (which ends with the table's counters, format 5)
            // and the index leaf: page 1 changed only in its counter, so it
            // is not written.
            XCTAssertFalse(pages.contains(1), "a row commit wrote page 1: \(pages)")
            XCTAssertEqual(pages.count, 2, "frames of a one-row commit: \(pages)")
        }
    }

    func testCountersAgreeAcrossConnectionsCheckpointsAndReopens() throws {
        let dir = try TemporaryDirectory()
        let (path, a) = try makeStore(dir)
        let b = try Database(path: path)
        var expected = try a.changeCounter()
        // Commits that allocate pages (so write page 1) mixed with ones that do not.
        let long = String(repeating: "x", count: 900)
        for i in 0..<40 {
            try insert(a, i, name: i % 3 == 0 ? long : "n")
            expected += 1
            XCTAssertEqual(try a.changeCounter(), expected)
            XCTAssertEqual(try b.changeCounter(), expected, "another connection derives another counter at commit \(i)")
        }
        XCTAssertTrue(try loggedTransactions(path).contains { $0.contains(1) }, "no commit allocated a page")
        XCTAssertFalse(try loggedTransactions(path).last?.contains(1) ?? true, "the last commit wrote page 1")
        XCTAssertEqual(try rawCounter(path), expected)

        // A checkpoint changes nothing the counter counts, and the store
        // file's page 1 takes the counter with it (through the log).
        XCTAssertTrue(try a.checkpoint())
        XCTAssertEqual(try a.changeCounter(), expected)
        XCTAssertEqual(try b.changeCounter(), expected)
        XCTAssertEqual(try rawCounter(path), expected)
        try insert(b, 100)
        expected += 1
        XCTAssertEqual(try a.changeCounter(), expected)
        a.close()
        b.close()
        XCTAssertEqual(try rawCounter(path), expected)
        let c = try Database(path: path)
        defer { c.close() }
        XCTAssertEqual(try c.changeCounter(), expected)
        try insert(c, 101)
        XCTAssertEqual(try c.changeCounter(), expected + 1)
    }

    /// A write transaction copies page 1 only when it changes it
    /// (PageWriter.header): a commit that grows the store, frees pages,
    /// reuses free pages or changes the schema still logs page 1, and another
    /// connection, the raw files and a reopen see its fields; a row commit
    /// that changes none of them leaves it out.
    func testCommitsThatChangePageOneLogIt() throws {
        let dir = try TemporaryDirectory()
        let (path, db) = try makeStore(dir)
        var reopened: Database?
        defer { reopened?.close() }
        try insert(db, 0)
        XCTAssertTrue(try db.checkpoint())
        /// Commits `body` and returns whether its transaction logged page 1;
        /// then another connection must see the page count, the free pages
        /// and the schema cookie of the writer's own view, and a clean store.
        func commit(_ what: String, _ body: (WriteTransaction) throws -> Void) throws -> Bool {
            let before = try loggedTransactions(path).count
            try db.write { tx in try body(tx) }
            let logged = try loggedTransactions(path)
            XCTAssertEqual(logged.count, before + 1, what)
            let mine = try db.read { tx in (try tx.pageCount, try tx.freePageCount, try tx.headerPage().headerSchemaCookie) }
            let other = try Database(path: path)
            defer { other.close() }
            try other.read { tx in
                XCTAssertEqual(try tx.pageCount, mine.0, what)
                XCTAssertEqual(try tx.freePageCount, mine.1, what)
                XCTAssertEqual(try tx.headerPage().headerSchemaCookie, mine.2, what)
                XCTAssertEqual(try tx.checkIntegrity(), [], what)
            }
            return logged.last?.contains(1) ?? false
        }
        let pages = try db.read { tx in try tx.pageCount }
        XCTAssertFalse(try commit("one row") { tx in _ = try tx.insert([.text("a"), .integer(1)], into: try tx.table("t")) })
        XCTAssertTrue(try commit("growth") { tx in
            let t = try tx.table("t")
            for i in 0..<3000 { _ = try tx.insert([.text("grow-\(i)"), .integer(Int64(i))], into: t) }
        })
        XCTAssertGreaterThan(try db.read { tx in try tx.pageCount }, pages)
        XCTAssertTrue(try commit("frees") { tx in
            let t = try tx.table("t")
            for id in Int64(2)...2500 { XCTAssertTrue(try tx.delete(from: t, rowID: id)) }
        })
        XCTAssertGreaterThan(try db.read { tx in try tx.freePageCount }, 0)
        let free = try db.read { tx in try tx.freePageCount }
        XCTAssertTrue(try commit("reuses") { tx in
            let t = try tx.table("t")
            for i in 0..<400 { _ = try tx.insert([.text("again-\(i)"), .integer(Int64(i))], into: t) }
        })
        XCTAssertLessThan(try db.read { tx in try tx.freePageCount }, free)
        XCTAssertTrue(try commit("schema") { tx in try tx.createIndex("by_name", on: try tx.table("t"), columns: [IndexColumn("name")]) })
        XCTAssertFalse(try commit("one row again") { tx in _ = try tx.insert([.text("b"), .integer(2)], into: try tx.table("t")) })
        let counter = try db.changeCounter()
        let rows = try db.read { tx in try tx.rowCount(try tx.table("t")) }
        db.close()
        XCTAssertEqual(try rawCounter(path), counter)
        let again = try Database(path: path)
        reopened = again
        XCTAssertEqual(try again.changeCounter(), counter)
        try again.read { tx in
            XCTAssertEqual(try tx.rowCount(try tx.table("t")), rows)
            XCTAssertEqual(try tx.checkIntegrity(), [])
        }
    }

    /// Below format 4 every commit writes page 1 (builds of those formats
    /// read the counter from it alone), also one that changed nothing of it.
    func testOldFormatRowCommitsLogPageOne() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/o.kura"
        let db = try Database(path: path)
        defer { db.close() }
        try db.setFormatForTesting(3)
        try db.write { tx in _ = try tx.createTable("t", schema: TableSchema([ColumnDefinition("n", .integer)])) }
        let start = try db.changeCounter()
        // Inserts change the counters (in the counters tree, found through
        // page 1); updates change no counter and nothing else of page 1.
        for i in 0..<5 { try db.write { tx in _ = try tx.insert([.integer(Int64(i))], into: try tx.table("t")) } }
        for i in 0..<5 { try db.write { tx in XCTAssertTrue(try tx.update([.integer(Int64(10 + i))], in: try tx.table("t"), rowID: Int64(1 + i))) } }
        let logged = try loggedTransactions(path)
        for t in logged.suffix(10) { XCTAssertTrue(t.contains(1), "\(t)") }
        XCTAssertEqual(try db.changeCounter(), start + 10)
        XCTAssertEqual(try rawCounter(path), start + 10)
        let other = try Database(path: path)
        defer { other.close() }
        XCTAssertEqual(try other.changeCounter(), start + 10)
    }

    func testEmptyWriteTransactionDoesNotCount() throws {
        let dir = try TemporaryDirectory()
        let (_, db) = try makeStore(dir)
        defer { db.close() }
        let before = try db.changeCounter()
        try db.write { tx in _ = try tx.rowCount(try tx.table("t")) }
        XCTAssertEqual(try db.changeCounter(), before)
    }

    func testReaderKeepsItsCounterAcrossCommitsAndCheckpoint() throws {
        let dir = try TemporaryDirectory()
        let (_, db) = try makeStore(dir)
        defer { db.close() }
        try insert(db, 1)
        let seen = try db.read { tx in
            let seen = try tx.changeCounter
            for i in 2...4 { try insert(db, i) }
            XCTAssertTrue(try db.checkpoint())
            XCTAssertEqual(try tx.changeCounter, seen)
            XCTAssertEqual(try tx.rowCount(try tx.table("t")), 1)
            return seen
        }
        XCTAssertEqual(try db.changeCounter(), seen + 3)
    }

    /// A crash after a checkpoint synced the store file and before it reset
    /// the log: the log is still whole and the file's page 1 already holds
    /// the counter. Reopening must give the same counter, not count the log's
    /// commits twice.
    func testCheckpointCutShortBeforeTheResetKeepsTheCounter() throws {
        let dir = try TemporaryDirectory()
        let (path, db) = try makeStore(dir)
        for i in 0..<6 { try insert(db, i) }
        let expected = try db.changeCounter()
        let log = try Data(contentsOf: URL(fileURLWithPath: path + "-wal"))
        XCTAssertTrue(try db.checkpoint())
        db.close()
        // Put the pre-reset log back: the state of a crash between the file's
        // sync and the reset.
        try log.write(to: URL(fileURLWithPath: path + "-wal"))
        XCTAssertEqual(try rawCounter(path), expected)
        let again = try Database(path: path)
        defer { again.close() }
        XCTAssertEqual(try again.changeCounter(), expected)
        XCTAssertEqual(try again.read { tx in try tx.rowCount(try tx.table("t")) }, 6)
        try insert(again, 7)
        XCTAssertEqual(try again.changeCounter(), expected + 1)
    }
}
