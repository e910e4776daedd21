// Log version 2 (stores of format 6; FORMAT.md, "Chain checksum"): the chain
// checksum covers each frame's header and its page's own checksum, and a frame
// counts only if its page image matches that checksum. A torn page image ends
// the committed log where it is, as a torn version-1 frame does; a format-5
// store keeps a version-1 log until a connection opens it alone.

import Foundation
import XCTest
@testable import KuraEngine

final class LogVersionTests: XCTestCase {
    /// A store with table "t" and `commits` one-row commits left in its log
    /// (no checkpoint), copied aside while open as a killed process leaves it.
    func killedStore(_ dir: TemporaryDirectory, commits: Int, format: UInt32? = nil) throws -> String {
        let path = dir.path + "/s.kura"
        var options = Database.Options()
        options.checkpointThreshold = 1_000_000
        let db = try Database(path: path, options: options)
        if let format { try db.setFormatForTesting(format) }
        try db.write { tx in _ = try tx.createTable("t") }
        XCTAssertTrue(try db.checkpoint())
        for i in 0..<commits { try db.write { tx in _ = try tx.insert([.integer(Int64(i))], into: try tx.table("t")) } }
        let copy = dir.path + "/copy.kura"
        try FileManager.default.copyItem(atPath: path, toPath: copy)
        try FileManager.default.copyItem(atPath: path + "-wal", toPath: copy + "-wal")
        db.close()
        return copy
    }

    func logVersion(_ path: String) throws -> UInt32 {
        let raw = try RawStore(path: path)
        defer { raw.close() }
        return raw.wal.version
    }

    func rows(_ path: String) throws -> Int {
        let db = try Database(path: path)
        defer { db.close() }
        return try db.read { tx in
            XCTAssertEqual(try tx.checkIntegrity(), [])
            return try tx.rowCount(try tx.table("t"))
        }
    }

    /// A frame the log no longer has (reset under a running transaction,
    /// which only a connection ignoring the locks can do) is an I/O error
    /// naming the frame and the page, not a trap.
    func testReadingAFrameTheLogNoLongerHasIsAnError() throws {
        let fs = MemoryFileSystem()
        let file = try fs.open("/gone.kura-wal", create: true, permissionsOf: nil)
        let wal = WriteAheadLog(file: file, pageSize: 512, databaseID: 1, reuseFrames: 16)
        XCTAssertThrowsError(try wal.readFrame(3, into: Page(number: 7, size: 512))) { error in
            XCTAssertEqual((error as? KuraError)?.code, .io, "\(error)")
            XCTAssertEqual((error as? KuraError)?.page, 7)
            XCTAssertTrue("\(error)".contains("log frame 3 is no longer in the log"), "\(error)")
        }
    }

    func testNewStoresWriteVersion2AndRecoverEveryCommit() throws {
        let dir = try TemporaryDirectory()
        let path = try killedStore(dir, commits: 5)
        XCTAssertEqual(try logVersion(path), WriteAheadLog.shortChainVersion)
        XCTAssertEqual(try rows(path), 5)
    }

    /// A byte of the last frame's page image changed, its checksum and the
    /// chain left as they were: the frame does not count (a torn write), so
    /// the last commit is lost and every earlier one kept, with no error.
    func testTornPageImageEndsTheLogThere() throws {
        let dir = try TemporaryDirectory()
        let path = try killedStore(dir, commits: 5)
        let raw = try RawStore(path: path)
        let frames = raw.wal.committedFrames
        let pageSize = Int(raw.header.pageSize)
        raw.close()
        XCTAssertEqual(frames, 5, "one frame per one-row commit")
        var log = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path + "-wal")))
        let lastImage = WriteAheadLog.headerSize + (frames - 1) * (WriteAheadLog.frameHeaderSize + pageSize) + WriteAheadLog.frameHeaderSize
        log[lastImage + 100] ^= 0x40
        try Data(log).write(to: URL(fileURLWithPath: path + "-wal"))
        let check = try RawStore(path: path)
        XCTAssertEqual(check.wal.committedFrames, 4)
        XCTAssertTrue(check.wal.stopReason?.contains("fails its own checksum") == true, "\(String(describing: check.wal.stopReason))")
        check.close()
        XCTAssertEqual(try rows(path), 4)
    }

    /// A format-5 store (its log in version 1, which a format-5 build reads)
    /// recovers its log, and opened alone moves to format 6 and a version-2 log.
    func testFormat5StoreKeepsVersion1UntilOpenedAlone() throws {
        let dir = try TemporaryDirectory()
        let path = try killedStore(dir, commits: 3, format: 5)
        XCTAssertEqual(try logVersion(path), 1)
        let db = try Database(path: path)
        defer { db.close() }
        XCTAssertEqual(try db.read { tx in try tx.headerPage().headerVersion }, FileHeader.formatVersion)
        XCTAssertEqual(try db.read { tx in try tx.rowCount(try tx.table("t")) }, 3)
        try db.write { tx in _ = try tx.insert([.integer(9)], into: try tx.table("t")) }
        XCTAssertEqual(try logVersion(path), WriteAheadLog.shortChainVersion)
        try db.read { tx in XCTAssertEqual(try tx.checkIntegrity(), []) }
    }
}
