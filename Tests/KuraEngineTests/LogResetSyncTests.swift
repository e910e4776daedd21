import XCTest
@testable import KuraEngine

/// A log reset and the first frames after it (FORMAT.md, "Reset"): from format 8
/// on, a checkpoint writes the new log header without syncing it, and the writer
/// that appends the generation's first frame syncs it first. These tests cut the
/// power at the moment that matters and check what recovery finds.
final class LogResetSyncTests: XCTestCase {
    private static let path = "/reset.kura"

    private func options(_ fs: FaultInjectingFileSystem) -> Database.Options {
        var o = Database.Options()
        o.fileSystem = fs
        o.pageSize = 4096
        o.durability = .normal
        o.checkpointThreshold = 8
        return o
    }

    private func value(_ db: Database) throws -> Int64? {
        try db.read { tx in
            guard let v = try tx.values(in: try tx.table("t"), rowID: 1) else { return nil }
            guard case .integer(let n) = v[0] else { return nil }
            return n
        }
    }

    /// The old generation's log holds one commit per value of row 1 (1, 2, ...),
    /// all in the store once the automatic checkpoint has run; the new generation
    /// then commits 1000 and 1001 without a sync (durability normal). Were its
    /// frames to reach the disk without the new header, the old header would
    /// validate the old frames before them, and recovery would copy row 1's old
    /// value over the checkpointed one. Every power-loss image must recover the
    /// checkpointed value or a newer one, and pass the integrity check.
    func testAPowerCutAfterAResetNeverReplaysTheOldGenerationsFrames() throws {
        XCTAssertGreaterThanOrEqual(FileHeader.formatVersion, FileHeader.lazyHeaderSyncVersion,
                                    "new stores do not sync at a reset; this test checks what replaces that sync")
        let fs = FaultInjectingFileSystem()
        let db = try Database(path: Self.path, options: options(fs))
        try db.write { tx in
            let t = try tx.createTable("t", schema: TableSchema([ColumnDefinition("v", .integer)]))
            _ = try tx.insert([.integer(0)], into: t)
        }
        // From an empty log, one frame per commit (row 1's leaf), each a commit
        // frame: the automatic checkpoint runs after the commit that brings the
        // log to the threshold.
        XCTAssertTrue(try db.checkpoint())
        var checkpointed: Int64 = 0
        for v in Int64(1)...40 {
            try db.write { tx in _ = try tx.update([.integer(v)], in: try tx.table("t"), rowID: 1) }
            checkpointed = v
            if db.pager.wal.maxFrame == 0 { break }
        }
        XCTAssertEqual(db.pager.wal.maxFrame, 0, "an automatic checkpoint reset the log")
        XCTAssertGreaterThan(checkpointed, 2, "the old generation holds several commits of row 1")
        let syncsBefore = fs.operationCount(.sync)
        for v in Int64(1000)...1001 {
            try db.write { tx in _ = try tx.update([.integer(v)], in: try tx.table("t"), rowID: 1) }
        }
        XCTAssertEqual(fs.operationCount(.sync) - syncsBefore, 1, "the first frame of the generation syncs the header once; durability normal syncs nothing else")

        var recovered: Set<Int64> = []
        for seed in UInt64(0)..<128 {
            let image = fs.powerLossImage(seed: seed)
            let after = try Database(path: Self.path, options: options(FaultInjectingFileSystem(restoring: image)))
            let v = try value(after)
            XCTAssertTrue(v == checkpointed || v == 1000 || v == 1001,
                          "seed \(seed): row 1 recovered as \(v.map(String.init) ?? "missing"), not the checkpointed \(checkpointed) or a newer value")
            let problems = try after.read { tx in try tx.checkIntegrity() }
            XCTAssertEqual(problems.count, 0, "seed \(seed): \(problems)")
            if let v { recovered.insert(v) }
            after.close()
        }
        XCTAssertTrue(recovered.contains(checkpointed), "some image lost both new commits (they were not synced)")
        XCTAssertTrue(recovered.contains(1001), "some image kept both new commits")
        db.close()
    }

    /// A checkpoint that no write follows costs no sync of the log: the header
    /// is synced by the next writer, or never if none comes.
    func testACheckpointDoesNotSyncTheNewHeaderItself() throws {
        let fs = FaultInjectingFileSystem()
        var o = options(fs)
        o.durability = .full
        let db = try Database(path: Self.path, options: o)
        defer { db.close() }
        try db.write { tx in
            let t = try tx.createTable("t", schema: TableSchema([ColumnDefinition("v", .integer)]))
            _ = try tx.insert([.integer(0)], into: t)
        }
        // The commit syncs the log; the checkpoint syncs the log before copying
        // and the store after; the new header waits for the next writer.
        let before = fs.operationCount(.sync)
        XCTAssertTrue(try db.checkpoint())
        XCTAssertEqual(fs.operationCount(.sync) - before, 2, "a checkpoint syncs the log and the store, not the new header")
        XCTAssertFalse(db.pager.wal.headerDurable)
        let beforeWrite = fs.operationCount(.sync)
        try db.write { tx in _ = try tx.update([.integer(5)], in: try tx.table("t"), rowID: 1) }
        XCTAssertEqual(fs.operationCount(.sync) - beforeWrite, 2, "the first commit of the generation syncs the header, then its frames")
        XCTAssertTrue(db.pager.wal.headerDurable)
        let beforeNext = fs.operationCount(.sync)
        try db.write { tx in _ = try tx.update([.integer(6)], in: try tx.table("t"), rowID: 1) }
        XCTAssertEqual(fs.operationCount(.sync) - beforeNext, 1, "later commits sync once")
        XCTAssertEqual(try value(db), 6)
    }

    /// Another connection's reset: a writer that had synced the old header
    /// finds a new one it did not sync, and syncs it before its first frame.
    func testAHeaderAnotherConnectionWroteIsSyncedBeforeTheFirstFrame() throws {
        let fs = FaultInjectingFileSystem()
        let a = try Database(path: Self.path, options: options(fs))
        defer { a.close() }
        try a.write { tx in
            let t = try tx.createTable("t", schema: TableSchema([ColumnDefinition("v", .integer)]))
            _ = try tx.insert([.integer(0)], into: t)
        }
        let b = try Database(path: Self.path, options: options(fs))
        defer { b.close() }
        XCTAssertTrue(try a.checkpoint())
        try b.write { tx in _ = try tx.update([.integer(1)], in: try tx.table("t"), rowID: 1) }
        XCTAssertTrue(b.pager.wal.headerDurable, "b synced the header a's checkpoint wrote before its first frame")
        // a resets the log again; b's next first frame finds that header.
        XCTAssertTrue(try a.checkpoint())
        let before = fs.operationCount(.sync)
        try b.write { tx in _ = try tx.update([.integer(2)], in: try tx.table("t"), rowID: 1) }
        XCTAssertEqual(fs.operationCount(.sync) - before, 1, "the new header is synced once; durability normal syncs nothing else")
        XCTAssertTrue(b.pager.wal.headerDurable)
        XCTAssertEqual(try a.read { tx in try tx.values(in: try tx.table("t"), rowID: 1) }, [.integer(2)])
    }

    /// A log longer than `logSizeLimit` is cut back to it (whole frames) at an
    /// automatic checkpoint, a shorter one is kept for reuse, and an explicit
    /// checkpoint cuts it to its header.
    func testTheLogIsKeptUpToItsSizeLimit() throws {
        let fs = FaultInjectingFileSystem()
        var o = options(fs)
        o.checkpointThreshold = 4
        let frame = 4096 + WriteAheadLog.frameHeaderSize
        o.logSizeLimit = WriteAheadLog.headerSize + 10 * frame + 100
        let db = try Database(path: Self.path, options: o)
        defer { db.close() }
        func logSize() throws -> Int64 { try fs.open(Self.path + "-wal", create: false, permissionsOf: nil).size() }
        try db.write { tx in
            let t = try tx.createTable("t", schema: TableSchema([ColumnDefinition("v", .text)]))
            // About 30 leaves: one transaction logs more than the limit.
            for i in 0..<900 { _ = try tx.insert([.text(String(repeating: "x", count: 100) + "\(i)")], into: t) }
        }
        XCTAssertEqual(db.pager.wal.maxFrame, 0, "the large transaction was checkpointed")
        XCTAssertEqual(try logSize(), Int64(WriteAheadLog.headerSize + 10 * frame), "cut back to the limit, in whole frames")
        try db.write { tx in _ = try tx.insert([.text("small")], into: try tx.table("t")) }
        try db.write { tx in _ = try tx.insert([.text("small")], into: try tx.table("t")) }
        XCTAssertEqual(try logSize(), Int64(WriteAheadLog.headerSize + 10 * frame), "small commits rewrite the kept file")
        XCTAssertTrue(try db.checkpoint())
        XCTAssertEqual(try logSize(), Int64(WriteAheadLog.headerSize), "an explicit checkpoint cuts the log to its header")
        try db.read { tx in XCTAssertEqual(try tx.rowCount(try tx.table("t")), 902) }
    }

    /// A limit below one frame, down to `Int.min`, cuts the log to its header
    /// at every automatic checkpoint (and opening with it does not trap).
    func testALimitBelowOneFrameCutsTheLogAtEveryCheckpoint() throws {
        for limit in [Int.min, -1, 0, 4096] {
            let fs = FaultInjectingFileSystem()
            var o = options(fs)
            o.checkpointThreshold = 4
            o.logSizeLimit = limit
            let db = try Database(path: Self.path, options: o)
            defer { db.close() }
            try db.write { tx in
                let t = try tx.createTable("t", schema: TableSchema([ColumnDefinition("v", .text)]))
                for i in 0..<200 { _ = try tx.insert([.text(String(repeating: "x", count: 100) + "\(i)")], into: t) }
            }
            XCTAssertEqual(db.pager.wal.maxFrame, 0, "limit \(limit): the transaction was checkpointed")
            let size = try fs.open(Self.path + "-wal", create: false, permissionsOf: nil).size()
            XCTAssertEqual(size, Int64(WriteAheadLog.headerSize), "limit \(limit): the log is cut to its header")
        }
    }
}
