// The shared log header (FORMAT.md, "The shared log header"): readers skip
// reading the log while it is unchanged, and fall back to reading it whenever
// the hint is missing, damaged, marked as changing or not yet trusted.
// Whether the fast path was taken is read from the pager's counters
// (`logReads`, `logReadsSkipped`), never from timings.

import Foundation
import XCTest
@testable import KuraEngine

final class SharedLogHeaderTests: XCTestCase {
    /// A store with table "t" of `rows` rows; in format `format` (2 to 4, as
    /// a build of that format left it, checkpointed into the store file) if given.
    func makeStore(_ dir: TemporaryDirectory, rows: Int = 3, format: UInt32? = nil) throws -> String {
        let path = dir.path + "/s.kura"
        let db = try Database(path: path)
        if let format { try db.setFormatForTesting(format) }
        try db.write { tx in
            let t = try tx.createTable("t")
            for i in 1...rows { try tx.insert([.integer(Int64(i))], into: t) }
        }
        db.close()
        if let format { XCTAssertEqual(try fileVersion(path), format) }
        return path
    }

    func rows(_ db: Database, _ table: String = "t") throws -> Int {
        try db.read { tx in try tx.rowCount(try tx.table(table)) }
    }

    func counts(_ db: Database) -> (reads: Int, skipped: Int) {
        db.pager.logReadCounts
    }

    /// Overwrites bytes of `path` in place (never truncates: another
    /// connection has the file mapped).
    func overwrite(_ path: String, at offset: UInt64, with bytes: [UInt8]) throws {
        let h = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        defer { try? h.close() }
        try h.seek(toOffset: offset)
        h.write(Data(bytes))
    }

    func testReadersSkipTheLogUntilAnotherConnectionCommits() throws {
        let dir = try TemporaryDirectory()
        let path = try makeStore(dir)
        let a = try Database(path: path)
        let b = try Database(path: path)
        defer { a.close(); b.close() }
        XCTAssertEqual(try fileVersion(path), FileHeader.formatVersion)
        _ = try rows(b)
        let before = counts(b)
        for _ in 0..<5 { XCTAssertEqual(try rows(b), 3) }
        XCTAssertEqual(counts(b).reads, before.reads, "unchanged log read again")
        XCTAssertEqual(counts(b).skipped, before.skipped + 5)

        try a.write { tx in try tx.insert([.integer(4)], into: try tx.table("t")) }
        XCTAssertEqual(try rows(b), 4)
        XCTAssertEqual(counts(b).reads, before.reads + 1)
        XCTAssertEqual(try rows(b), 4)
        XCTAssertEqual(counts(b).skipped, before.skipped + 6)
        // The writer's own connection: its commit is already indexed.
        let aBefore = counts(a)
        XCTAssertEqual(try rows(a), 4)
        XCTAssertEqual(counts(a).reads, aBefore.reads)

        // A checkpoint (another connection's) changes the store file: readers
        // read the log again once, then skip it.
        XCTAssertTrue(try a.checkpoint())
        XCTAssertEqual(try rows(b), 4)
        XCTAssertEqual(counts(b).reads, before.reads + 2)
        XCTAssertEqual(try rows(b), 4)
        XCTAssertEqual(counts(b).skipped, before.skipped + 7)
    }

    func testCommitsOfAnotherProcessAreSeenAtTheNextTransaction() throws {
        guard let child = CrashTests.childURL else { throw XCTSkip("KuraTestChild binary not found beside the test bundle") }
        let dir = try TemporaryDirectory()
        let path = dir.path + "/p.kura"
        let db = try makeChildWriterStore(at: path)
        defer { db.close() }
        XCTAssertEqual(try rows(db, "writes"), 0)
        for (round, threshold) in [1000, 2].enumerated() {
            // Threshold 2: the child also checkpoints, and its close truncates the log.
            try runChildWriter(child, path: path, round: round + 1, commits: 5, threshold: threshold)
            let before = counts(db)
            XCTAssertEqual(try rows(db, "writes"), 5 * (round + 1))
            XCTAssertEqual(counts(db).reads, before.reads + 1)
            XCTAssertEqual(try rows(db, "writes"), 5 * (round + 1))
            XCTAssertEqual(counts(db).skipped, before.skipped + 1)
        }
        try db.read { tx in XCTAssertEqual(try tx.checkIntegrity(), []) }
    }

    // A writer that dies between writing its commit to the log and publishing
    // it leaves the header marked as changing: readers must not trust it.
    func testWriterKilledBeforePublishingLeavesReadersCorrect() throws {
        let dir = try TemporaryDirectory()
        let path = try makeStore(dir)
        let a = try Database(path: path)
        let b = try Database(path: path)
        defer { a.close(); b.close() }
        _ = try rows(b)
        a.pager.skipsSharedPublishForTesting = true
        try a.write { tx in try tx.insert([.integer(4)], into: try tx.table("t")) }
        a.pager.skipsSharedPublishForTesting = false
        let before = counts(b)
        XCTAssertEqual(try rows(b), 4)
        XCTAssertEqual(try rows(b), 4)
        XCTAssertEqual(counts(b).reads, before.reads + 2, "a header marked as changing was trusted")
        XCTAssertEqual(counts(b).skipped, before.skipped)

        // The next writer reads the log and publishes it, even if it rolls back.
        struct Stop: Error {}
        XCTAssertThrowsError(try a.write { _ in throw Stop() })
        XCTAssertEqual(try rows(b), 4)
        XCTAssertEqual(counts(b).skipped, before.skipped + 1)
        try a.write { tx in try tx.insert([.integer(5)], into: try tx.table("t")) }
        XCTAssertEqual(try rows(b), 5)
        XCTAssertEqual(try rows(b), 5)
        XCTAssertEqual(counts(b).reads, before.reads + 3)
        XCTAssertEqual(counts(b).skipped, before.skipped + 2)
    }

    func testDamagedSharedHeaderFallsBackToTheLog() throws {
        let seed = ProcessInfo.processInfo.environment["KURA_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1...UInt64(UInt32.max))
        print("SharedLogHeaderTests seed \(seed) (replay with KURA_SEED=\(seed))")
        var rng = SplitMix64(seed: seed)
        let dir = try TemporaryDirectory()
        let path = try makeStore(dir)
        let shm = path + "-shm"

        // Torn: one byte of a valid header changed, its checksum not.
        do {
            let a = try Database(path: path)
            let b = try Database(path: path)
            defer { a.close(); b.close() }
            let offset = 24 + Int(rng.next() % 48)
            var byte = [UInt8](try Data(contentsOf: URL(fileURLWithPath: shm))[offset...offset])
            byte[0] ^= UInt8(1 + rng.next() % 255)
            try overwrite(shm, at: UInt64(offset), with: byte)
            let before = counts(b)
            XCTAssertEqual(try rows(b), 3)
            XCTAssertEqual(try rows(b), 3)
            XCTAssertEqual(counts(b).reads, before.reads + 2)
            XCTAssertEqual(counts(b).skipped, before.skipped)
        }
        // Garbage: readers and writers go on through the log; nothing trusts
        // the header until a connection opens the store alone.
        do {
            let a = try Database(path: path)
            let b = try Database(path: path)
            defer { a.close(); b.close() }
            try overwrite(shm, at: 0, with: (0..<SharedLogHeader.fileSize).map { _ in UInt8(truncatingIfNeeded: rng.next()) })
            let before = counts(b)
            for i in 4...6 {
                try a.write { tx in try tx.insert([.integer(Int64(i))], into: try tx.table("t")) }
                XCTAssertEqual(try rows(b), i)
                XCTAssertEqual(try rows(a), i)
            }
            XCTAssertEqual(counts(b).skipped, before.skipped)
            XCTAssertEqual(counts(b).reads, before.reads + 3)
        }
        // Short: a connection opening the store grows the file and trusts it.
        try FileManager.default.removeItem(atPath: shm)
        XCTAssertTrue(FileManager.default.createFile(atPath: shm, contents: Data([1, 2, 3, 4, 5])))
        do {
            let a = try Database(path: path)
            defer { a.close() }
            XCTAssertEqual(try FileManager.default.attributesOfItem(atPath: shm)[.size] as? Int, SharedLogHeader.fileSize)
            XCTAssertEqual(try rows(a), 6)
            XCTAssertEqual(try rows(a), 6)
            XCTAssertEqual(counts(a).skipped, 2)
        }
        // Unusable (a directory where the file should be): everything reads
        // the log, and works.
        try FileManager.default.removeItem(atPath: shm)
        try FileManager.default.createDirectory(atPath: shm, withIntermediateDirectories: false)
        do {
            let a = try Database(path: path)
            defer { a.close() }
            try a.write { tx in try tx.insert([.integer(7)], into: try tx.table("t")) }
            XCTAssertEqual(try rows(a), 7)
            XCTAssertEqual(counts(a).skipped, 0)
        }
    }

    func testFormat2StoreIsUpgradedOnlyWhenOpenedAlone() throws {
        let dir = try TemporaryDirectory()
        let path = try makeStore(dir, format: 2)

        // Beside another connection (here a stand-in for a format-2 build,
        // holding the open byte as every connection does): stays 2, and no
        // reader trusts the header.
        do {
            let other = try PosixFileSystem().open(path, create: false)
            defer { other.close() }
            XCTAssertTrue(try other.lock(.open, .shared))
            let db = try Database(path: path)
            try db.write { tx in try tx.insert([.integer(4)], into: try tx.table("t")) }
            XCTAssertEqual(try rows(db), 4)
            XCTAssertEqual(try rows(db), 4)
            XCTAssertEqual(counts(db).skipped, 0)
            db.close()
            XCTAssertEqual(try fileVersion(path), 2)
        }
        // Alone: upgraded before anyone else can open it, and readers skip the log.
        let db = try Database(path: path)
        defer { db.close() }
        XCTAssertEqual(try fileVersion(path), FileHeader.formatVersion)
        let before = counts(db).skipped
        XCTAssertEqual(try rows(db), 4)
        XCTAssertEqual(try rows(db), 4)
        XCTAssertEqual(counts(db).skipped, before + 2)
        try db.read { tx in
            XCTAssertEqual(try tx.headerPage().headerVersion, FileHeader.formatVersion)
            XCTAssertEqual(try tx.checkIntegrity(), [])
        }
    }

    /// A format-3 store beside another connection (a format-3 build reads the
    /// change counter from page 1 alone) keeps writing page 1 in every commit;
    /// opened alone it becomes format 4, and its counter goes on from where
    /// it was (the upgrade's commit counts as one).
    func testFormat3StoreWritesPageOneUntilUpgradedAlone() throws {
        let dir = try TemporaryDirectory()
        let path = try makeStore(dir, format: 3)
        var counter: UInt64 = 0
        do {
            let other = try PosixFileSystem().open(path, create: false)
            defer { other.close() }
            XCTAssertTrue(try other.lock(.open, .shared))
            let db = try Database(path: path)
            counter = try db.changeCounter()
            for i in 4...6 {
                try db.write { tx in try tx.insert([.integer(Int64(i))], into: try tx.table("t")) }
                counter += 1
                XCTAssertEqual(try db.changeCounter(), counter)
            }
            let raw = try RawStore(path: path)
            let committed = raw.wal.frames.filter(\.committed)
            let commitFrames = committed.filter { $0.commit != 0 }.count
            XCTAssertEqual(commitFrames, 3)
            XCTAssertEqual(committed.filter { $0.page == 1 }.count, 3, "a format-3 commit left page 1 out")
            XCTAssertEqual(raw.header.changeCounter, counter)
            raw.close()
            db.close()
            XCTAssertEqual(try fileVersion(path), 3)
        }
        let db = try Database(path: path)
        defer { db.close() }
        XCTAssertEqual(try fileVersion(path), FileHeader.formatVersion)
        // Two commits count: 3 to 4 (page 1), then 4 to 5 (counters to the leaves).
        XCTAssertEqual(try db.changeCounter(), counter + 2)
        XCTAssertEqual(try rows(db), 6)
        try db.read { tx in XCTAssertEqual(try tx.checkIntegrity(), []) }
    }

    /// Compaction copies page 1 from a scratch store of this build's format;
    /// a store shared with connections of an older format must keep its own
    /// version (they would otherwise read a format they do not know), and
    /// its change counter goes on.
    func testCompactionKeepsTheStoresFormat() throws {
        let dir = try TemporaryDirectory()
        let path = try makeStore(dir, rows: 50, format: 3)
        let other = try PosixFileSystem().open(path, create: false)
        defer { other.close() }
        XCTAssertTrue(try other.lock(.open, .shared))
        let db = try Database(path: path)
        defer { db.close() }
        try db.write { tx in
            let t = try tx.table("t")
            for id in 1...40 { XCTAssertTrue(try tx.delete(from: t, rowID: Int64(id))) }
        }
        let before = try db.changeCounter()
        _ = try db.compact()
        XCTAssertEqual(try db.read { tx in try tx.headerPage().headerVersion }, 3)
        XCTAssertEqual(try fileVersion(path), 3)
        XCTAssertEqual(try db.changeCounter(), before + 1)
        XCTAssertEqual(try rows(db), 10)
        try db.read { tx in XCTAssertEqual(try tx.checkIntegrity(), []) }
    }

    func testDestroyRemovesTheSharedHeaderFile() throws {
        let dir = try TemporaryDirectory()
        let path = try makeStore(dir)
        XCTAssertTrue(FileManager.default.fileExists(atPath: path + "-shm"))
        try Database.destroy(path: path)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path + "-shm"))
        let db = try Database(path: path)
        XCTAssertTrue(FileManager.default.fileExists(atPath: path + "-shm"))
        try db.destroy()
        XCTAssertFalse(FileManager.default.fileExists(atPath: path + "-shm"))
    }

    func testStoresWithoutSharedMemoryReadTheLog() throws {
        let db = try Database.inMemory()
        try db.write { tx in try tx.insert([.integer(1)], into: try tx.createTable("t")) }
        XCTAssertEqual(try rows(db), 1)
        XCTAssertEqual(try rows(db), 1)
        XCTAssertEqual(counts(db).skipped, 0)
    }
}
