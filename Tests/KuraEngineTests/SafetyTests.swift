// Engine side of "Nothing lost, nothing silently wrong": closing while other
// threads read, compaction in place while others use the store, permissions of
// the files beside a store, logs that may hold the only copy of committed data,
// and a lost reader lock. Each test opens with the bug it guards.

import Foundation
import XCTest
@testable import KuraEngine

final class SafetyTests: XCTestCase {
    /// Regression: `Database.close()` closed the descriptors while read
    /// transactions on other threads were still running (`Database` is
    /// Sendable), so a reused descriptor could be read or written by them. Now
    /// close waits for them, and transactions after it throw `misuse`.
    func testCloseWaitsForTransactionsOnOtherThreads() throws {
        let dir = try TemporaryDirectory()
        let db = try Database(path: dir.path + "/s.kura")
        try db.write { tx in
            let t = try tx.createTable("t")
            for i in 0..<2000 { try tx.insert([.integer(Int64(i)), .text(String(repeating: "x", count: 50))], into: t) }
        }
        let inside = Locked(0)
        let closed = Locked(false)
        let readers = ReaderThreads(count: 3) { r in
            do {
                try db.read { tx in
                    inside.mutate { $0 += 1 }
                    defer { inside.mutate { $0 -= 1 } }
                    if closed.value { r.fail("a transaction started after close() returned") }
                    let rows = try tx.rows(in: try tx.table("t"))
                    var n = 0
                    while try rows.next() != nil { n += 1 }
                    if n != 2000 { r.fail("read \(n) rows") }
                }
            } catch let e as KuraError where e.code == .misuse {
                if !closed.value && !db.gate.isShut { r.fail("misuse before close: \(e)") }
                usleep(1000)
            }
        }
        while readers.reads.value < 20 { usleep(1000) }
        db.close()
        closed.mutate { $0 = true }
        XCTAssertEqual(inside.value, 0, "a transaction was still running when close() returned")
        readers.stop()
        XCTAssertEqual(readers.failures.value, [])
        XCTAssertThrowsError(try db.read { _ in }) { XCTAssertEqual(($0 as? KuraError)?.code, .misuse) }
        XCTAssertThrowsError(try db.write { _ in }) { XCTAssertEqual(($0 as? KuraError)?.code, .misuse) }
        XCTAssertThrowsError(try db.checkpoint()) { XCTAssertEqual(($0 as? KuraError)?.code, .misuse) }
        XCTAssertThrowsError(try db.compact()) { XCTAssertEqual(($0 as? KuraError)?.code, .misuse) }
        // Everything committed is there after reopening.
        let again = try Database(path: dir.path + "/s.kura")
        XCTAssertEqual(try again.read { tx in try tx.table("t").rowCount }, 2000)
    }

    /// `close()` called inside one of the database's own transactions cannot wait
    /// for itself: it returns, the transaction finishes, then the files close.
    func testCloseFromInsideATransactionClosesWhenItEnds() throws {
        let dir = try TemporaryDirectory()
        let db = try Database(path: dir.path + "/s.kura")
        try db.write { tx in try tx.insert([.integer(7)], into: try tx.createTable("t")) }
        let n = try db.read { tx in
            db.close()
            return try tx.table("t").rowCount
        }
        XCTAssertEqual(n, 1)
        XCTAssertThrowsError(try db.read { _ in }) { XCTAssertEqual(($0 as? KuraError)?.code, .misuse) }
        db.close()  // a second close does nothing
        XCTAssertEqual(try Database(path: dir.path + "/s.kura").read { tx in try tx.table("t").rowCount }, 1)
    }

    /// Regression: opening a store took a snapshot for recovery and never
    /// released it, so every checkpoint for the connection's lifetime preserved
    /// page versions for a snapshot nobody used (memory that grew with the pages
    /// written), and a compacted store could not be cut shorter.
    func testOpeningLeavesNoSnapshotInUse() throws {
        let dir = try TemporaryDirectory()
        let db = try Database(path: dir.path + "/s.kura")
        XCTAssertEqual(db.activeSnapshotCount, 0)
        try db.write { tx in try tx.insert([.integer(1)], into: try tx.createTable("t")) }
        try db.read { _ in XCTAssertEqual(db.activeSnapshotCount, 1) }
        XCTAssertEqual(db.activeSnapshotCount, 0)
        let reopened = try Database(path: dir.path + "/s.kura")
        XCTAssertEqual(reopened.activeSnapshotCount, 0)
    }

    // Bug: once automatic checkpoints kept the log file for reuse, compaction's
    // own checkpoint kept it too: the compacted copy, written through the log,
    // stayed on disk beside the store, and "compacting" doubled the space used.
    func testCompactionLeavesNoLargeLog() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/c.kura"
        var options = Database.Options()
        options.pageSize = 1024
        let db = try Database(path: path, options: options)
        defer { db.close() }
        try db.write { tx in
            let t = try tx.createTable("t", schema: try TableSchema([ColumnDefinition("n", .integer), ColumnDefinition("s", .text)]))
            for i in 0..<3000 { try tx.insert([.integer(Int64(i)), .text(String(repeating: "z", count: 200))], into: t) }
        }
        try db.write { tx in try tx.delete(from: "t", where: try KuraPredicate(format: "n >= 500")) }
        XCTAssertTrue(try db.checkpoint())
        let r = try db.compact()
        XCTAssertLessThan(r.pagesAfter, r.pagesBefore)
        let store = try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int ?? -1
        let log = try FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int ?? 0
        XCTAssertEqual(store, r.pagesAfter * 1024)
        XCTAssertLessThan(log, 1024, "compaction left a \(log)-byte log beside a \(store)-byte store")
    }

    /// Compaction in place: free pages go, the file shrinks, every row, row ID,
    /// index and counter stays; a reader that started before keeps its snapshot;
    /// a second connection (its own file handle and locks, as another process
    /// has) sees the compacted store and writes on.
    func testCompactInPlaceWithOtherConnectionsOpen() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/s.kura"
        var options = Database.Options()
        options.pageSize = 1024
        let db = try Database(path: path, options: options)
        let other = try Database(path: path, options: options)
        try db.write { tx in
            let t = try tx.createTable("t", schema: try TableSchema([ColumnDefinition("n", .integer), ColumnDefinition("s", .text)]))
            for i in 0..<5000 { try tx.insert([.integer(Int64(i)), .text("row \(i) " + String(repeating: "y", count: i % 300))], into: t) }
            _ = try tx.createIndex("t_n", on: t, columns: [IndexColumn("n")])
        }
        try db.write { tx in try tx.delete(from: "t", where: try KuraPredicate(format: "n >= 1000 AND n < 4000")) }
        XCTAssertTrue(try db.checkpoint())
        let sizeBefore = try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int ?? 0
        let expected = try db.read { tx in try tx.fetch(TableQuery("t")).map { [$0.rowID.description] + $0.values.map { "\($0)" } } }

        // A reader in another thread holds a snapshot from before the compaction.
        let started = DispatchSemaphore(value: 0), resume = DispatchSemaphore(value: 0)
        let oldCount = Locked<Int64>(-1)
        let reader = Thread {
            do {
                try db.read { tx in
                    started.signal()
                    resume.wait()
                    let n = try tx.fetch(TableQuery("t")).count
                    oldCount.mutate { $0 = Int64(n) }
                }
            } catch { oldCount.mutate { $0 = -2 } }
        }
        reader.start()
        started.wait()
        let r = try other.compact()
        XCTAssertLessThan(r.pagesAfter, r.pagesBefore)
        XCTAssertGreaterThan(r.freePagesBefore, 0)
        resume.signal()
        while oldCount.value == -1 { usleep(1000) }
        XCTAssertEqual(oldCount.value, Int64(expected.count), "the earlier snapshot changed under its reader")
        XCTAssertTrue(try db.checkpoint())
        let sizeAfter = try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int ?? 0
        XCTAssertEqual(sizeAfter, r.pagesAfter * 1024)
        XCTAssertLessThan(sizeAfter, sizeBefore)

        for conn in [db, other] {
            let rows = try conn.read { tx in try tx.fetch(TableQuery("t")).map { [$0.rowID.description] + $0.values.map { "\($0)" } } }
            XCTAssertEqual(rows, expected)
            XCTAssertEqual(try conn.read { tx in try tx.checkIntegrity(limit: 10) }.map(\.description), [])
            XCTAssertEqual(try conn.read { tx in try tx.count(try TableQuery("t", where: "n == 4500")) }, 1)
        }
        // Row IDs are never reused: the next row comes after the last one ever given.
        let id = try db.write { tx in try tx.insert([.integer(-1), .text("new")], into: try tx.table("t")) }
        XCTAssertEqual(id, 5001)
        XCTAssertEqual(try other.read { tx in try tx.table("t").rowCount }, Int64(expected.count + 1))
    }

    /// Regression: the log of a store created `0600` was created `0644`, readable
    /// by every user of the machine, and new stores ignored the umask. Now a new
    /// store gets 0666 & ~umask, and its log the store file's mode.
    func testFilesBesideAStoreKeepItsPermissions() throws {
        let dir = try TemporaryDirectory()
        func mode(_ p: String) throws -> Int { (try FileManager.default.attributesOfItem(atPath: p)[.posixPermissions] as? Int) ?? -1 }
        let old = umask(0o077)
        defer { umask(old) }
        let a = dir.path + "/a.kura"
        try Database(path: a).write { tx in try tx.createTable("t") }
        XCTAssertEqual(try mode(a), 0o600)
        XCTAssertEqual(try mode(a + "-wal"), 0o600)

        umask(0o022)
        let b = dir.path + "/b.kura"
        let first = try Database(path: b)
        try first.write { tx in try tx.createTable("t") }
        first.close()  // checkpoints: the log holds nothing the store needs
        XCTAssertEqual(try mode(b), 0o644)
        // A store made private later: a log created afterwards is private too.
        XCTAssertEqual(chmod(b, 0o600), 0)
        try FileManager.default.removeItem(atPath: b + "-wal")
        let db = try Database(path: b)
        try db.write { tx in try tx.insert([.integer(1)], into: try tx.table("t")) }
        XCTAssertEqual(try mode(b + "-wal"), 0o600)
        try db.compact()
        XCTAssertEqual(try mode(b), 0o600)
        XCTAssertEqual(try mode(b + "-wal"), 0o600)
    }

    /// Regression: an empty (zero-byte) store file opened as a new store and
    /// removed its log, even if the log held the only copy of committed data.
    func testEmptyStoreFileBesideANonEmptyLogIsRefused() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/s.kura"
        var options = Database.Options()
        options.checkpointThreshold = 1_000_000
        let db = try Database(path: path, options: options)
        try db.write { tx in try tx.insert([.integer(1)], into: try tx.createTable("t")) }
        let log = FileManager.default.contents(atPath: path + "-wal")
        XCTAssertGreaterThan(log?.count ?? 0, 40)
        XCTAssertEqual(truncate(path, 0), 0)
        XCTAssertThrowsError(try Database(path: path)) { error in
            XCTAssertEqual((error as? KuraError)?.code, .corrupt)
            XCTAssertTrue("\(error)".contains("its log"), "\(error)")
        }
        XCTAssertEqual(FileManager.default.contents(atPath: path + "-wal"), log, "the log was changed")
        // An empty log beside an empty store is no one's data: a new store starts.
        XCTAssertEqual(truncate(path + "-wal", 0), 0)
        XCTAssertNoThrow(try Database(path: path).write { tx in try tx.createTable("t") })
    }

    /// Regression: the pager ignored a failure to turn its exclusive reader lock
    /// back into a shared one after a checkpoint, so this connection's running
    /// transactions went on without the lock that keeps other processes from
    /// checkpointing under them. Now their page reads fail until they end.
    func testLostReaderLockFailsReadsInsteadOfReadingANewerState() throws {
        let fs = FaultInjectingFileSystem()
        var options = Database.Options()
        options.fileSystem = fs
        options.durability = .off
        let db = try Database(path: "/s.kura", options: options)
        try db.write { tx in
            let t = try tx.createTable("t")
            for i in 0..<300 { try tx.insert([.integer(Int64(i))], into: t) }
        }
        let started = DispatchSemaphore(value: 0), resume = DispatchSemaphore(value: 0)
        let outcome = Locked("")
        let reader = Thread {
            do {
                try db.read { tx in
                    started.signal()
                    resume.wait()
                    _ = try tx.fetch(TableQuery("t"))
                    outcome.mutate { $0 = "read" }
                }
            } catch { outcome.mutate { $0 = "\(error)" } }
        }
        reader.start()
        started.wait()
        fs.failSharedLocks = true
        try db.write { tx in try tx.insert([.integer(1000)], into: try tx.table("t")) }
        XCTAssertTrue(try db.checkpoint())
        fs.failSharedLocks = false
        resume.signal()
        while outcome.value.isEmpty { usleep(1000) }
        XCTAssertTrue(outcome.value.contains("lost its reader lock"), outcome.value)
        // Once that transaction ended, the connection reads again.
        XCTAssertEqual(try db.read { tx in try tx.table("t").rowCount }, 301)
    }
    /// Compaction under I/O errors: a fault (EIO or ENOSPC, once or persistent)
    /// at every read, write, sync and truncate of the store's files in turn. The
    /// compaction throws or completes; either way, once the fault clears, the
    /// same connection and a new one read exactly the rows there were, the store
    /// checks clean and accepts a commit.
    func testIOErrorsDuringCompactionLoseNothing() throws {
        var checked = 0
        for code in [KuraError.Code.io, .diskFull] {
            for persistent in [false, true] {
                var n = 1
                while n < 10_000 {
                    let fs = FaultInjectingFileSystem()
                    var options = Database.Options()
                    options.fileSystem = fs
                    options.pageSize = 512
                    options.cacheSize = 8 * 512
                    let db = try Database(path: "/s.kura", options: options)
                    try db.write { tx in
                        let t = try tx.createTable("t", schema: try TableSchema([ColumnDefinition("n", .integer), ColumnDefinition("s", .text)]))
                        for i in 0..<300 { try tx.insert([.integer(Int64(i)), .text(String(repeating: "z", count: i % 90))], into: t) }
                        _ = try tx.createIndex("t_n", on: t, columns: [IndexColumn("n")])
                    }
                    try db.write { tx in _ = try tx.delete(from: "t", where: try KuraPredicate(format: "n >= 50 AND n < 250")) }
                    XCTAssertTrue(try db.checkpoint())
                    func rows(_ d: Database) throws -> [String] {
                        try d.read { tx in try tx.fetch(TableQuery("t")).map { "\($0.rowID) \($0.values)" } }
                    }
                    let expected = try rows(db)
                    fs.failOperation(nil, after: n, with: code, persistent: persistent)
                    do { try db.compact() } catch {
                        XCTAssertTrue([.io, .diskFull].contains(error.code), "fault \(n): \(error)")
                    }
                    let fired = !fs.faultPending
                    fs.clearFaults()
                    let fresh = try Database(path: "/s.kura", options: options)
                    for conn in [db, fresh] {
                        XCTAssertEqual(try rows(conn), expected, "fault \(n) (\(code), persistent: \(persistent))")
                        XCTAssertEqual(try conn.read { tx in try tx.checkIntegrity(limit: 5) }.map(\.description), [], "fault \(n)")
                    }
                    try db.write { tx in _ = try tx.insert([.integer(-1), .text("after")], into: try tx.table("t")) }
                    XCTAssertEqual(try fresh.read { tx in try tx.table("t").rowCount }, Int64(expected.count + 1))
                    checked += 1
                    if !fired { break }  // the fault came after the last operation: every point was tried
                    n += 1
                }
            }
        }
        print("compaction I/O-error loop: \(checked) faults checked")
        XCTAssertGreaterThan(checked, 40)
    }
}
