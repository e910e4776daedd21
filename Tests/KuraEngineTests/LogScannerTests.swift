// The engine's recovery (`WriteAheadLog.refresh`) and `kura`'s raw reading of a
// store (`RawStore.readLog`) once had parallel copies of the log-validity rules
// that could disagree on the same file (issue 14 item 8). Both now go through
// `LogScanner`; these tests damage real logs in the ways FORMAT.md "Validity"
// names (torn tail, corrupt frame, other salts, foreign header, stale frames of an
// older generation left by a reset that reused the file, a spilling transaction's
// frames without a commit frame) and check that both read the same committed log,
// and the committed log each damage must leave.

import Foundation
import XCTest
@testable import KuraEngine

final class LogScannerTests: XCTestCase {
    static let pageSize = 4096
    var frameSize: Int { WriteAheadLog.frameHeaderSize + Self.pageSize }

    func options() -> Database.Options {
        var o = Database.Options()
        o.pageSize = Self.pageSize
        o.checkpointThreshold = 1_000_000  // keep commits in the log
        o.cacheSize = 16 * Self.pageSize
        return o
    }

    /// A store with `commits` transactions in its log, closed without a
    /// checkpoint (the files are copied while the connection is open).
    func makeStore(_ dir: TemporaryDirectory, _ name: String, commits: Int) throws -> String {
        let path = dir.path + "/" + name + ".kura"
        let db = try Database(path: path, options: options())
        try db.write { tx in _ = try tx.createTable("t") }
        for k in 0..<commits {
            try db.write { tx in _ = try tx.insert([.integer(Int64(k)), .blob(payload(300, seed: UInt64(k)))], into: try tx.table("t")) }
        }
        let copy = dir.path + "/" + name + "-copy.kura"
        try FileManager.default.copyItem(atPath: path, toPath: copy)
        try FileManager.default.copyItem(atPath: path + "-wal", toPath: copy + "-wal")
        db.close()
        return copy
    }

    /// (committed frames, committed page count) as the engine and as RawStore read them.
    func bothReadings(_ path: String) throws -> (engine: (Int, UInt32), raw: (Int, UInt32)) {
        let db = try PosixFileSystem().open(path, create: false)
        defer { db.close() }
        var first = [UInt8](repeating: 0, count: 64)
        _ = try first.withMutableBytes { b throws(KuraError) in try db.readFully(into: b, at: 0) }
        let id = first.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(fromByteOffset: FileHeader.databaseIDOffset, as: UInt64.self)) }
        let walFile = try PosixFileSystem().open(path + "-wal", create: false)
        defer { walFile.close() }
        let wal = WriteAheadLog(file: walFile, pageSize: Self.pageSize, databaseID: id, reuseFrames: 1)
        _ = try wal.refresh()
        let (info, log) = try RawStore.readLog(path + "-wal", pageSize: Self.pageSize, databaseID: id)
        log?.close()
        return ((wal.maxFrame, wal.committedPageCount), (info.committedFrames, info.committedPageCount))
    }

    func patch(_ path: String, at offset: Int, _ bytes: [UInt8]) throws {
        let h = try XCTUnwrap(FileHandle(forUpdatingAtPath: path))
        defer { try? h.close() }  // test cleanup
        try h.seek(toOffset: UInt64(offset))
        try h.write(contentsOf: Data(bytes))
    }

    func frameOffset(_ n: Int) -> Int { WriteAheadLog.headerSize + (n - 1) * frameSize }

    func testEngineAndRawReadingAgreeOnDamagedLogs() throws {
        let dir = try TemporaryDirectory()
        var cases: [(String, String, (Int) -> Bool)] = []  // name, path, expected committed frames

        let clean = try makeStore(dir, "clean", commits: 6)
        let total = try bothReadings(clean).engine.0
        XCTAssertGreaterThan(total, 6)
        cases.append(("clean", clean, { $0 == total }))

        let torn = try makeStore(dir, "torn", commits: 6)
        let tornSize = frameOffset(total) + 100  // inside the last frame
        let tornHandle = try XCTUnwrap(FileHandle(forUpdatingAtPath: torn + "-wal"))
        try tornHandle.truncate(atOffset: UInt64(tornSize))
        try tornHandle.close()
        cases.append(("torn tail", torn, { $0 < total && $0 > 0 }))

        let corrupt = try makeStore(dir, "corrupt", commits: 6)
        try patch(corrupt + "-wal", at: frameOffset(3) + WriteAheadLog.frameHeaderSize + 200, [0xFF, 0x00, 0xAA])
        cases.append(("corrupt frame 3", corrupt, { $0 < 3 }))

        let salts = try makeStore(dir, "salts", commits: 6)
        try patch(salts + "-wal", at: frameOffset(4) + 8, [1, 2, 3, 4])
        cases.append(("other salts in frame 4", salts, { $0 < 4 }))

        let pageZero = try makeStore(dir, "zero", commits: 6)
        try patch(pageZero + "-wal", at: frameOffset(2), [0, 0, 0, 0])
        cases.append(("page 0 in frame 2", pageZero, { $0 < 2 }))

        let foreign = try makeStore(dir, "foreign", commits: 6)
        try patch(foreign + "-wal", at: 24, [9, 9, 9, 9, 9, 9, 9, 9])
        cases.append(("foreign database ID", foreign, { $0 == 0 }))

        let header = try makeStore(dir, "header", commits: 6)
        // A generation byte (random) changed to a value it does not have, so
        // the header's checksum no longer matches (writing a fixed 7 left it
        // whole about one run in 256).
        let generationByte = try XCTUnwrap(FileManager.default.contents(atPath: header + "-wal"))[12]
        try patch(header + "-wal", at: 12, [generationByte ^ 0x5A])
        cases.append(("header checksum", header, { $0 == 0 }))

        // Stale frames: commits up to an automatic checkpoint (its reset keeps
        // the file), then fewer commits over the old frames.
        let stalePath = dir.path + "/stale.kura"
        var o = options()
        o.checkpointThreshold = 40
        let staleDB = try Database(path: stalePath, options: o)
        try staleDB.write { tx in _ = try tx.createTable("t") }
        var logged = staleDB.logFrameCount
        for k in 0..<200 {
            try staleDB.write { tx in _ = try tx.insert([.integer(Int64(k))], into: try tx.table("t")) }
            if staleDB.logFrameCount < logged { break }  // checkpointed
            logged = staleDB.logFrameCount
        }
        XCTAssertEqual(staleDB.logFrameCount, 0, "no automatic checkpoint")
        for k in 0..<3 { try staleDB.write { tx in _ = try tx.insert([.integer(Int64(k))], into: try tx.table("t")) } }
        let newFrames = staleDB.logFrameCount
        let staleSize = try FileManager.default.attributesOfItem(atPath: stalePath + "-wal")[.size] as? Int ?? 0
        XCTAssertGreaterThan(staleSize, frameOffset(newFrames + 1), "the reset did not keep the old frames")
        try FileManager.default.copyItem(atPath: stalePath, toPath: stalePath + ".copy")
        try FileManager.default.copyItem(atPath: stalePath + "-wal", toPath: stalePath + ".copy-wal")
        staleDB.close()
        cases.append(("stale frames after a reset", stalePath + ".copy", { $0 == newFrames }))

        // A spilling transaction's frames, copied before its commit.
        let spillPath = dir.path + "/spill.kura"
        let spillDB = try Database(path: spillPath, options: options())
        try spillDB.write { tx in _ = try tx.insert([.integer(1)], into: try tx.createTable("t")) }
        let committedBefore = spillDB.logFrameCount
        try spillDB.write { tx in
            let t = try tx.table("t")
            for k in 0..<600 { _ = try tx.insert([.blob(payload(500, seed: UInt64(k)))], into: t) }
            XCTAssertGreaterThan(tx.writer?.spilledPageCount ?? 0, 0)
            try FileManager.default.copyItem(atPath: spillPath, toPath: spillPath + ".copy")
            try FileManager.default.copyItem(atPath: spillPath + "-wal", toPath: spillPath + ".copy-wal")
        }
        spillDB.close()
        cases.append(("spilled frames without a commit frame", spillPath + ".copy", { $0 == committedBefore }))

        for (name, path, expected) in cases {
            let r = try bothReadings(path)
            XCTAssertEqual(r.engine.0, r.raw.0, "\(name): committed frames differ")
            XCTAssertEqual(r.engine.1, r.raw.1, "\(name): committed page counts differ")
            XCTAssertTrue(expected(r.engine.0), "\(name): \(r.engine.0) committed frames (of \(total) in the clean log)")
        }
    }
}
