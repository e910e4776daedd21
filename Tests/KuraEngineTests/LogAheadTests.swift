import Foundation
import XCTest
@testable import KuraEngine

/// Zero bytes written ahead of the log's end (FORMAT.md, "Validity";
/// `WriteAheadLog.prepareAhead`): synced commits leave zero bytes for later
/// commits to overwrite; the log still ends at its last commit frame for
/// recovery, other connections and tools; the space never passes the log size
/// limit; commits that are not synced write none.
final class LogAheadTests: XCTestCase {
    func options(_ durability: Durability) -> Database.Options {
        var o = Database.Options()
        o.durability = durability
        o.checkpointThreshold = 1_000_000
        return o
    }

    func logBytes(_ path: String) throws -> [UInt8] { [UInt8](try Data(contentsOf: URL(fileURLWithPath: path + "-wal"))) }

    /// Random numbers of synced one-row and many-row commits, each followed by
    /// a copy of the files as a killed process leaves them: every copy has
    /// zero bytes after its frames (and no more than 64 frames of them, and
    /// no partial frame), and recovers exactly the rows committed so far; the
    /// store written on reopens, checks clean and takes more commits.
    func testSyncedCommitsLeaveZerosThatRecoveryIgnores() throws {
        let seed = testSeed("testSyncedCommitsLeaveZerosThatRecoveryIgnores")
        var g = SplitMix64(seed: seed)
        let dir = try TemporaryDirectory()
        let path = dir.path + "/s.kura"
        let db = try Database(path: path, options: options(.full))
        try db.write { tx in _ = try tx.createTable("t") }
        var rows = 0
        let frame = WriteAheadLog.frameHeaderSize + 4096
        for round in 0..<12 {
            let n = Int.random(in: 1...(round % 3 == 0 ? 400 : 3), using: &g)
            try db.write { tx in
                let t = try tx.table("t")
                for _ in 0..<n { _ = try tx.insert([.integer(Int64(rows)), .text(String(repeating: "r", count: 50))], into: t) }
            }
            rows += n
            let log = try logBytes(path)
            let frames = db.logFrameCount
            let end = WriteAheadLog.headerSize + frames * frame
            XCTAssertGreaterThan(log.count, end, "round \(round): no zero bytes after the frames (seed \(seed))")
            XCTAssertLessThanOrEqual(log.count, end + WriteAheadLog.framesAhead * frame, "round \(round) (seed \(seed))")
            XCTAssertEqual((log.count - WriteAheadLog.headerSize) % frame, 0, "round \(round): a partial frame (seed \(seed))")
            XCTAssertTrue(log[end...].allSatisfy { $0 == 0 }, "round \(round): not zeros after the frames (seed \(seed))")
            // A killed process's files: recovery finds every commit and nothing more.
            let copy = dir.path + "/copy\(round).kura"
            try FileManager.default.copyItem(atPath: path, toPath: copy)
            try FileManager.default.copyItem(atPath: path + "-wal", toPath: copy + "-wal")
            let raw = try RawStore(path: copy)
            XCTAssertEqual(raw.wal.committedFrames, frames)
            XCTAssertEqual(raw.wal.frames.count, frames, "zero space listed as frames")
            XCTAssertEqual(raw.wal.aheadBytes, Int64(log.count - end))
            raw.close()
            let reopened = try Database(path: copy, options: options(.full))
            try reopened.read { tx in
                XCTAssertEqual(try tx.checkIntegrity(), [])
                XCTAssertEqual(try tx.rowCount(try tx.table("t")), rows, "round \(round) (seed \(seed))")
            }
            try reopened.write { tx in _ = try tx.insert([.integer(-1)], into: try tx.table("t")) }
            XCTAssertEqual(try reopened.read { tx in try tx.rowCount(try tx.table("t")) }, rows + 1)
            reopened.close()
        }
        db.close()
    }

    /// The space written ahead stops at the log size limit, and commits that
    /// are not synced (durability normal) write none.
    func testLimitAndUnsyncedCommits() throws {
        let dir = try TemporaryDirectory()
        let frame = WriteAheadLog.frameHeaderSize + 4096
        var o = options(.full)
        o.logSizeLimit = WriteAheadLog.headerSize + 10 * frame
        let limited = try Database(path: dir.path + "/a.kura", options: o)
        try limited.write { tx in _ = try tx.createTable("t") }
        for i in 0..<3 { try limited.write { tx in _ = try tx.insert([.integer(Int64(i))], into: try tx.table("t")) } }
        XCTAssertEqual(try logBytes(dir.path + "/a.kura").count, WriteAheadLog.headerSize + 10 * frame)
        limited.close()

        let normal = try Database(path: dir.path + "/b.kura", options: options(.normal))
        try normal.write { tx in _ = try tx.createTable("t") }
        for i in 0..<3 { try normal.write { tx in _ = try tx.insert([.integer(Int64(i))], into: try tx.table("t")) } }
        XCTAssertEqual(try logBytes(dir.path + "/b.kura").count, WriteAheadLog.headerSize + normal.logFrameCount * frame)
        normal.close()
    }
}
