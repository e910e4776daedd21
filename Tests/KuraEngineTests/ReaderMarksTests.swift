// Reader marks (FORMAT.md, "Reader marks"): in a format-7 store a connection
// inside a transaction announces it in the reader table of `PATH-shm` instead
// of locking the reader byte, and a checkpoint of another connection or process
// must see the mark and wait for the next commit. On Linux two connections in
// one process exclude each other exactly as two processes do (OFD locks), so
// most tests use two connections; one uses a child process it kills.

import Foundation
import XCTest
@testable import KuraEngine

final class ReaderMarksTests: XCTestCase {
    func makeStore(_ dir: TemporaryDirectory, rows: Int = 50, options: Database.Options = Database.Options()) throws -> (String, Database) {
        let path = dir.path + "/m.kura"
        let db = try Database(path: path, options: options)
        try db.write { tx in
            let t = try tx.createTable("t")
            for i in 1...rows { try tx.insert([.integer(Int64(i)), .text("row \(i)")], into: t) }
        }
        return (path, db)
    }

    func marks(_ db: Database) throws -> ReaderMarks {
        try XCTUnwrap(db.pager.readerMarksForTesting, "a format-7 store in POSIX files gives each connection a slot")
    }

    /// Adds one row as `db`'s writer (leaving frames in the log to checkpoint).
    func commitOne(_ db: Database, _ value: Int64) throws {
        try db.write { tx in try tx.insert([.integer(value), .text("more")], into: try tx.table("t")) }
    }

    func sum(_ db: Database) throws -> Int64 { try Self.sum(db) }

    static func sum(_ db: Database) throws -> Int64 {
        try db.read { tx in
            let c = try tx.rows(in: try tx.table("t"))
            var s: Int64 = 0
            while let r = try c.next() { s += try r.value(at: 0).integerValue ?? 0 }
            return s
        }
    }

    func testAReadersMarkPostponesAnotherConnectionsCheckpoint() throws {
        let dir = try TemporaryDirectory()
        let (path, writer) = try makeStore(dir)
        defer { writer.close() }
        let reader = try Database(path: path)
        defer { reader.close() }
        let readerMarks = try marks(reader)
        XCTAssertNotEqual(readerMarks.slot, try marks(writer).slot, "each connection owns its own slot")

        try commitOne(writer, 1000)
        let before = try sum(reader)
        try reader.read { tx in
            // Inside the transaction: the mark is set (and the reader byte is
            // not held: the checkpoint below sees only the mark).
            XCTAssertEqual(readerMarks.wordForTesting(slot: readerMarks.slot), 1)
            let c = try tx.rows(in: try tx.table("t"))
            try commitOne(writer, 2000)
            XCTAssertFalse(try writer.checkpoint(), "a checkpoint ran while another connection's transaction was reading")
            XCTAssertGreaterThan(writer.logFrameCount, 0)
            var s: Int64 = 0
            while let r = try c.next() { s += try r.value(at: 0).integerValue ?? 0 }
            XCTAssertEqual(s, before, "the reader's snapshot changed under it")
        }
        XCTAssertEqual(readerMarks.wordForTesting(slot: readerMarks.slot), 0, "the mark is cleared when the transaction ends")
        XCTAssertTrue(try writer.checkpoint())
        XCTAssertEqual(writer.logFrameCount, 0)
        XCTAssertEqual(try sum(reader), before + 2000)
        try reader.read { tx in XCTAssertEqual(try tx.checkIntegrity(), []) }
    }

    func testSlotsOfDeadOwnersAreIgnoredAndLiveOnesAreNot() throws {
        let dir = try TemporaryDirectory()
        let (path, writer) = try makeStore(dir)
        defer { writer.close() }
        let table = try marks(writer)
        // A set slot nobody owns: what a connection killed inside a transaction
        // leaves (its lock went with it).
        let unowned = ReaderMarks.slotCount - 1
        table.setWordForTesting(slot: unowned, 1)
        try commitOne(writer, 1)
        XCTAssertTrue(try writer.checkpoint(), "a dead owner's slot blocked the checkpoint")

        // The same word in a slot whose owner is alive (open, between
        // transactions here, but the checkpointer cannot know that).
        let other = try Database(path: path)
        let otherSlot = try marks(other).slot
        table.setWordForTesting(slot: otherSlot, 1)
        try commitOne(writer, 2)
        XCTAssertFalse(try writer.checkpoint())
        // Its owner clears it at its next transaction's end.
        _ = try sum(other)
        XCTAssertEqual(table.wordForTesting(slot: otherSlot), 0)
        XCTAssertTrue(try writer.checkpoint())
        // Once closed, the slot is free for the next connection.
        other.close()
        let third = try Database(path: path)
        defer { third.close() }
        XCTAssertEqual(try marks(third).slot, otherSlot)
        table.setWordForTesting(slot: unowned, 0)
    }

    func testAStaleCheckpointWordSendsReadersToTheReaderByteAndIsCleared() throws {
        let dir = try TemporaryDirectory()
        let (path, writer) = try makeStore(dir)
        defer { writer.close() }
        let reader = try Database(path: path)
        defer { reader.close() }
        let readerMarks = try marks(reader)
        // A checkpointer that died between setting the word and clearing it.
        readerMarks.setWordForTesting(slot: nil, 1)
        try reader.read { tx in
            // Not marked: this transaction holds the reader byte shared, and
            // found the word stale.
            XCTAssertEqual(readerMarks.wordForTesting(slot: readerMarks.slot), 0)
            XCTAssertEqual(readerMarks.wordForTesting(slot: nil), 0, "a reader holding the byte clears a dead checkpointer's word")
            try commitOne(writer, 7)
            XCTAssertFalse(try writer.checkpoint(), "a checkpoint ran under a reader holding the reader byte")
            _ = try tx.table("t")
        }
        // Now marked again, and checkpoints run between transactions.
        try reader.read { _ in XCTAssertEqual(readerMarks.wordForTesting(slot: readerMarks.slot), 1) }
        XCTAssertTrue(try writer.checkpoint())
    }

    func testAReaderInAnotherProcessHoldsOffCheckpointsUntilItEndsOrDies() throws {
        guard let childURL = CrashTests.childURL else { throw XCTSkip("KuraTestChild binary not found beside the test bundle") }
        let dir = try TemporaryDirectory()
        let (path, writer) = try makeStore(dir)
        defer { writer.close() }
        for killed in [false, true] {
            let child = Process()
            child.executableURL = childURL
            child.arguments = ["reading", path]
            let toChild = Pipe(), fromChild = Pipe()
            child.standardInput = toChild
            child.standardOutput = fromChild
            try child.run()
            let line = String(decoding: fromChild.fileHandleForReading.readData(ofLength: 8), as: UTF8.self)
            XCTAssertEqual(line, "reading\n")
            try commitOne(writer, 10)
            XCTAssertFalse(try writer.checkpoint(), "a checkpoint ran while another process was inside a transaction")
            if killed {
                // Killed inside its transaction: its slot stays set, its lock goes.
                kill(child.processIdentifier, SIGKILL)
                child.waitUntilExit()
            } else {
                toChild.fileHandleForWriting.write("end\n".data(using: .utf8)!)
                XCTAssertEqual(String(decoding: fromChild.fileHandleForReading.readData(ofLength: 6), as: UTF8.self), "ended\n")
            }
            XCTAssertTrue(try writer.checkpoint(), killed ? "a dead process's mark blocked the checkpoint" : "the checkpoint did not run after the reader ended")
            if !killed {
                toChild.fileHandleForWriting.write("close\n".data(using: .utf8)!)
                child.waitUntilExit()
                XCTAssertEqual(child.terminationStatus, 0)
            }
        }
        try writer.read { tx in XCTAssertEqual(try tx.checkIntegrity(), []) }
    }

    /// Readers of two connections and a writer of a third that checkpoints
    /// every few commits: every snapshot a reader sees is consistent (the sum
    /// of the table is what the commits it can see made it), and checkpoints
    /// do run between the readers' transactions.
    func testReadersSeeConsistentSnapshotsWhileAnotherConnectionCheckpoints() throws {
        let dir = try TemporaryDirectory()
        var options = Database.Options()
        options.checkpointThreshold = 4
        options.durability = .off
        // Small pages and a tiny cache: the readers load most pages from the
        // log or the store file, where a checkpoint under them would show.
        options.pageSize = 512
        options.cacheSize = 8 * 512
        let rows = 1500
        let (path, writer) = try makeStore(dir, rows: rows, options: options)
        defer { writer.close() }
        // Every commit moves 1 between two rows: the total never changes.
        let total = try sum(writer)
        let readers = try (0..<2).map { _ in try Database(path: path, options: options) }
        defer { for r in readers { r.close() } }
        let threads = ReaderThreads(count: 2) { threads in
            for r in readers {
                let s = try ReaderMarksTests.sum(r)
                if s != total { threads.fail("a reader saw a total of \(s), expected \(total)") }
            }
            // A pause, so that moments without any reader occur.
            usleep(2000)
        }
        var checkpoints = 0
        let seed = testSeed("ReaderMarksTests.consistent")
        var rng = SplitMix64(seed: seed)
        // Until 20 checkpoints ran (bounded: a broken test must not hang).
        for _ in 0..<4000 where checkpoints < 20 {
            let a = Int64(rng.next() % UInt64(rows)) + 1, b = Int64(rng.next() % UInt64(rows)) + 1
            try writer.write { tx in
                let t = try tx.table("t")
                let va = try XCTUnwrap(tx.values(in: t, rowID: a))[0].integerValue ?? 0
                _ = try tx.update([.integer(va - 1), .text("moved")], in: t, rowID: a)
                let vb = try XCTUnwrap(tx.values(in: t, rowID: b))[0].integerValue ?? 0
                _ = try tx.update([.integer(vb + 1), .text("moved")], in: t, rowID: b)
            }
            if writer.logFrameCount == 0 { checkpoints += 1 }
            if threads.failures.value.count > 0 { break }
        }
        threads.stop()
        XCTAssertEqual(threads.failures.value, [])
        XCTAssertGreaterThan(threads.reads.value, 0)
        XCTAssertGreaterThan(checkpoints, 0, "no checkpoint ran between the readers' transactions")
        XCTAssertEqual(try sum(writer), total)
        try writer.read { tx in XCTAssertEqual(try tx.checkIntegrity(), []) }
    }

    /// Holds the store's open byte shared through a descriptor of its own, as
    /// a connection of an older build would (OFD lock on Linux).
    final class ForeignOpenLock {
        let fd: Int32
        init(_ path: String) throws {
            fd = open(path, O_RDWR | O_CLOEXEC)
            guard fd >= 0 else { throw KuraError(.io, "open failed", path: path) }
            var fl = PosixFile.lockRecord(Int32(F_RDLCK), LockByte.open)
            guard fcntl(fd, PosixFile.setLockCommand, &fl) == 0 else { throw KuraError(.io, "lock failed", path: path) }
        }
        deinit { close(fd) }
    }

    func testFormat6StoreMovesToMarksOnlyWhenOpenedAlone() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/six.kura"
        do {
            let db = try Database(path: path)
            try db.setFormatForTesting(6)
            try db.write { tx in try tx.insert([.integer(1)], into: try tx.createTable("t")) }
            db.close()
        }
        do {
            // Beside another connection the store keeps format 6, and so does
            // the protocol: the reader byte for every transaction.
            let other = try ForeignOpenLock(path)
            let beside = try Database(path: path)
            XCTAssertNil(beside.pager.readerMarksForTesting, "a format-6 store beside another connection keeps the reader byte")
            try beside.write { tx in try tx.insert([.integer(2)], into: try tx.table("t")) }
            XCTAssertTrue(try beside.checkpoint())
            XCTAssertEqual(try fileVersion(path), 6)
            beside.close()
            withExtendedLifetime(other) {}
        }
        let alone = try Database(path: path)
        defer { alone.close() }
        XCTAssertNotNil(alone.pager.readerMarksForTesting, "opened alone, the store moves to format 7 and its connection to marks")
        XCTAssertEqual(try fileVersion(path), FileHeader.formatVersion)
        try alone.read { tx in XCTAssertEqual(try tx.rowCount(try tx.table("t")), 2) }
        let next = try Database(path: path)
        defer { next.close() }
        XCTAssertNotNil(next.pager.readerMarksForTesting)
    }

    func testStoresInMemoryUseTheReaderByte() throws {
        let db = try Database.inMemory()
        try db.write { tx in try tx.insert([.integer(1)], into: try tx.createTable("t")) }
        XCTAssertNil(db.pager.readerMarksForTesting)
        XCTAssertTrue(try db.checkpoint())
    }
}
