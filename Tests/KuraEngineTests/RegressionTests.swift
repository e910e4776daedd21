import Foundation
import XCTest
@testable import KuraEngine

final class RegressionTests: XCTestCase {
    // Bug: the first commit on a store whose log had no valid header trapped
    // (precondition in writeFrames) when another connection had a read open,
    // because starting the log waited for that reader and was silently skipped.
    func testFirstCommitWhileAnotherConnectionReads() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/first.kura"
        let a = try Database(path: path)
        let b = try Database(path: path)
        let reading = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        Thread {
            try? a.read { _ in
                reading.signal()
                done.wait()
            }
            reading.signal()
        }.start()
        reading.wait()
        try b.write { tx in try tx.insert([.integer(1)], into: try tx.createTable("t")) }
        done.signal()
        reading.wait()
        try a.read { tx in XCTAssertEqual(try tx.rowCount(try tx.table("t")), 1) }
    }

    // Bug: a checkpoint torn inside page 1 of the store file made the store
    // unopenable (`corrupt`), although the log held a good copy of page 1.
    func testTornHeaderPageIsRepairedFromTheLog() throws {
        let fs = MemoryFileSystem()
        var o = Database.Options()
        o.fileSystem = fs
        let db = try Database(path: "/h.kura", options: o)
        try db.write { tx in try tx.insert([.integer(7)], into: try tx.createTable("t")) }
        // The log holds the newest page 1; tear the file's page 1 past its fixed fields.
        var bytes = fs.contents(of: "/h.kura")!
        for i in 600..<1100 { bytes[i] ^= 0x5A }
        let crashed = MemoryFileSystem()
        crashed.setContents(of: "/h.kura", to: bytes)
        crashed.setContents(of: "/h.kura-wal", to: fs.contents(of: "/h.kura-wal")!)
        o.fileSystem = crashed
        let reopened = try Database(path: "/h.kura", options: o)
        try reopened.read { tx in
            XCTAssertEqual(try tx.values(in: try tx.table("t"), rowID: 1), [.integer(7)])
        }
        XCTAssertTrue(try reopened.checkpoint())
        try reopened.read { tx in XCTAssertEqual(try tx.checkIntegrity(), []) }
        _ = db
    }

    // Bug: a commit whose log sync failed threw, yet its complete frames stayed
    // in the log and the next transaction read them as committed.
    func testCommitWhoseSyncFailsNeverAppears() throws {
        let fs = FaultInjectingFileSystem()
        var o = Database.Options()
        o.fileSystem = fs
        o.durability = .full
        let db = try Database(path: "/s.kura", options: o)
        try db.write { tx in try tx.insert([.integer(1)], into: try tx.createTable("t")) }
        fs.failOperation(.sync, after: 1)
        XCTAssertThrowsError(try db.write { tx in try tx.insert([.integer(2)], into: try tx.table("t")) }) { e in
            XCTAssertEqual((e as? KuraError)?.code, .io)
        }
        try db.read { tx in XCTAssertEqual(try tx.rowCount(try tx.table("t")), 1) }
        let other = try Database(path: "/s.kura", options: o)
        try other.read { tx in XCTAssertEqual(try tx.rowCount(try tx.table("t")), 1) }
        // Once the fault clears, writing works and keeps everything committed.
        try db.write { tx in try tx.insert([.integer(3)], into: try tx.table("t")) }
        try other.read { tx in
            XCTAssertEqual(try tx.values(in: try tx.table("t"), rowID: 1), [.integer(1)])
            XCTAssertEqual(try tx.rowCount(try tx.table("t")), 2)
        }
    }

    // Bug: catalog IDs were "largest existing + 1", so dropping the newest table
    // and creating another reused its ID.
    func testCatalogIDsAreNeverReused() throws {
        let db = try Database.inMemory()
        let first = try db.write { tx in try tx.createTable("a").id }
        try db.write { tx in try tx.dropTable("a") }
        let second = try db.write { tx in try tx.createTable("b").id }
        XCTAssertGreaterThan(second, first)
    }

    // Bug: an explicit insert of row ID Int64.max left the next row ID at
    // Int64.max, breaking "every row ID is below the next row ID".
    func testRowIDInt64MaxIsRejected() throws {
        let db = try Database.inMemory()
        XCTAssertThrowsError(try db.write { tx in try tx.insert([.null], into: try tx.createTable("t"), rowID: Int64.max) }) { e in
            XCTAssertEqual((e as? KuraError)?.code, .invalidArgument)
        }
        try db.write { tx in try tx.insert([.null], into: try tx.createTable("t"), rowID: Int64.max - 1) }
        try db.read { tx in XCTAssertEqual(try tx.checkIntegrity(), []) }
    }

    // Bug: the cache size in pages came from Options.pageSize instead of the
    // opened store's page size.
    func testCacheBoundUsesTheStoresPageSize() throws {
        let fs = MemoryFileSystem()
        var o = Database.Options()
        o.fileSystem = fs
        o.pageSize = 512
        o.cacheSize = 64 * 512
        let db = try Database(path: "/p.kura", options: o)
        try db.write { tx in
            let t = try tx.createTable("t")
            for i in 0..<5000 { try tx.insert([.integer(Int64(i)), .text("padding padding")], into: t) }
        }
        db.close()
        o.pageSize = 65536  // ignored for an existing store
        let reopened = try Database(path: "/p.kura", options: o)
        try reopened.read { tx in
            let c = try tx.rows(in: try tx.table("t"))
            while try c.next() != nil {}
        }
        XCTAssertLessThanOrEqual(reopened.cachedPageCount, 65)
    }
}
