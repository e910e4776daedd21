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

    // Bug: a page read or write that failed inside a write transaction could be
    // caught by the caller, and the transaction then committed whatever the
    // failed operation had half done (a tree split with one side written). Now
    // the first such failure after a change makes the commit throw, keeping the
    // failure's code, and nothing of the transaction is written.
    func testCaughtPageFailureAfterAChangeForbidsTheCommit() throws {
        let fs = FaultInjectingFileSystem()
        var o = Database.Options()
        o.fileSystem = fs
        o.pageSize = 512
        o.cacheSize = 8 * 512
        let db = try Database(path: "/f.kura", options: o)
        try db.write { tx in
            let t = try tx.createTable("t")
            for i in 0..<2_000 { try tx.insert([.integer(Int64(i)), .blob([UInt8](repeating: UInt8(i & 0xFF), count: 60))], into: t) }
        }
        try db.checkpoint()
        let reopened = try Database(path: "/f.kura", options: o)
        var caught: KuraError?
        XCTAssertThrowsError(try reopened.write { tx in
            let t = try tx.table("t")
            try tx.insert([.integer(-1), .null], into: t)
            fs.failOperation(.read, after: 1)
            do { _ = try tx.values(in: t, rowID: 1_000) } catch { caught = error as? KuraError }
            fs.clearFaults()
            try tx.insert([.integer(-2), .null], into: t)
        }) { e in
            XCTAssertEqual((e as? KuraError)?.code, .io)
            XCTAssertTrue("\(e)".contains("cannot commit"), "\(e)")
        }
        XCTAssertEqual(caught?.code, .io, "the injected read fault did not reach the caller: the test tests nothing")
        try reopened.read { tx in
            XCTAssertEqual(try tx.rowCount(try tx.table("t")), 2_000)
            XCTAssertEqual(try tx.checkIntegrity(), [])
        }
        // A failure before any change leaves the transaction free to commit.
        try reopened.write { tx in
            let t = try tx.table("t")
            fs.failOperation(.read, after: 1)
            do { _ = try tx.values(in: t, rowID: 1_500) } catch { caught = error as? KuraError }
            fs.clearFaults()
            try tx.insert([.integer(-3), .null], into: t)
        }
        try reopened.read { tx in XCTAssertEqual(try tx.rowCount(try tx.table("t")), 2_001) }
    }

    // Bug: destroying a store left its sort file (a crashed index build's keys)
    // and its external value files behind, holding the destroyed store's data.
    func testDestroyRemovesTheSortFileAndExternalValueFiles() throws {
        let fs = MemoryFileSystem()
        var o = Database.Options()
        o.fileSystem = fs
        let leftovers = ["/d.kura-sort", "/d.kura-external/a1", "/d.kura-external/b2"]
        for viaConnection in [false, true] {
            let db = try Database(path: "/d.kura", options: o)
            try db.write { tx in _ = try tx.createTable("t") }
            try fs.createDirectory("/d.kura-external")
            for path in leftovers { try Self.writeFile(fs, path, "secret") }
            if viaConnection {
                try db.destroy()
            } else {
                db.close()
                try Database.destroy(path: "/d.kura", fileSystem: fs)
            }
            for path in ["/d.kura", "/d.kura-wal"] + leftovers {
                XCTAssertFalse(fs.exists(path), "\(path) survived the destroy (via connection: \(viaConnection))")
            }
        }
    }

    private static func writeFile(_ fs: MemoryFileSystem, _ path: String, _ text: String) throws {
        let f = try fs.open(path, create: true, permissionsOf: nil)
        defer { f.close() }
        let bytes = Array(text.utf8)
        try bytes.withUnsafeBytes { b in try f.write(b, at: 0) }
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
        // Lookups by row ID (a scan's first pass leaves the cache alone:
        // ScanCacheTests), twice over, to fill the cache past its bound.
        try reopened.read { tx in
            let t = try tx.table("t")
            for _ in 0..<2 {
                for id in 1...5000 { XCTAssertNotNil(try tx.values(in: t, rowID: Int64(id))) }
            }
        }
        XCTAssertGreaterThan(reopened.cachedPageCount, 32)
        XCTAssertLessThanOrEqual(reopened.cachedPageCount, 65)
    }
}

final class ReliabilityRegressionTests: XCTestCase {
    // Bug (found by the crash matrix): a power loss while a store was being
    // created could leave page 1 incomplete (only its first 512-byte sectors on
    // disk); every later open then failed with `corrupt` ("page 1 is past the end
    // of the file"), although nothing had ever been committed.
    func testStoreWhoseCreationWasCutShortOpens() throws {
        let fs = MemoryFileSystem()
        var o = Database.Options()
        o.fileSystem = fs
        _ = try Database(path: "/c.kura", options: o)
        let created = fs.contents(of: "/c.kura")!
        XCTAssertEqual(created.count, 4096)
        for kept in [512, 1024, 3584] {
            let crashed = MemoryFileSystem()
            crashed.setContents(of: "/c.kura", to: Array(created[0..<kept]))
            o.fileSystem = crashed
            let db = try Database(path: "/c.kura", options: o)
            try db.write { tx in try tx.insert([.integer(1)], into: try tx.createTable("t")) }
            try db.read { tx in
                XCTAssertEqual(try tx.rowCount(try tx.table("t")), 1)
                XCTAssertEqual(try tx.checkIntegrity(), [])
            }
        }
    }

    // Bug (found by the I/O-error loop): when a checkpoint's log reset truncated
    // the log but then failed to write the new header, the connection's log
    // index still pointed at the truncated frames, and every later read failed
    // with `corrupt` ("log frame N is past the end of the log file").
    func testFailedLogResetAfterTruncateKeepsTheConnectionReadable() throws {
        let fs = FaultInjectingFileSystem()
        var o = Database.Options()
        o.fileSystem = fs
        o.cacheSize = 8 * 4096  // pages must come from the files, not the cache
        let db = try Database(path: "/r.kura", options: o)
        try db.write { tx in
            let t = try tx.createTable("t")
            for i in 0..<50 { try tx.insert([.integer(Int64(i)), .text(String(repeating: "x", count: 900))], into: t) }
        }
        // Fail the first write after the checkpoint truncates the log.
        fs.setMutationHook { op, _ in if op == .truncate { fs.failOperation(.write, after: 1) } }
        XCTAssertThrowsError(try db.checkpoint()) { e in XCTAssertEqual((e as? KuraError)?.code, .io) }
        fs.setMutationHook(nil)
        fs.clearFaults()
        try db.read { tx in
            XCTAssertEqual(try tx.rowCount(try tx.table("t")), 50)
            XCTAssertEqual(try tx.checkIntegrity(), [])
        }
        try db.write { tx in try tx.insert([.integer(50)], into: try tx.table("t")) }
        XCTAssertTrue(try db.checkpoint())
        let other = try Database(path: "/r.kura", options: o)
        try other.read { tx in XCTAssertEqual(try tx.rowCount(try tx.table("t")), 51) }
    }

    // Bug (found by ReliabilityConcurrencyTests): a read transaction of the
    // writer's own connection that started while a commit was between writing its
    // frames and publishing them adopted those frames from the file; publishing
    // then counted them a second time, the next commit was written after a gap,
    // and on reopen the log ended at the gap: acknowledged commits were lost.
    func testReaderStartingDuringACommitDoesNotCountItsFramesTwice() throws {
        let fs = FaultInjectingFileSystem()
        var o = Database.Options()
        o.fileSystem = fs
        let db = try Database(path: "/x.kura", options: o)
        try db.write { tx in try tx.insert([.integer(0)], into: try tx.createTable("t")) }
        // Start a read at the commit's log sync, after its frames are written.
        fs.setMutationHook { op, _ in
            if op == .sync { try? db.read { tx in _ = try tx.tableNames() } }
        }
        try db.write { tx in try tx.insert([.integer(1)], into: try tx.table("t")) }
        fs.setMutationHook(nil)
        try db.write { tx in try tx.insert([.integer(2)], into: try tx.table("t")) }
        // The counted frames are the file's frames: the last counted one is a
        // frame, and only zero bytes written ahead (FORMAT.md, "Validity")
        // follow it, no frame after a gap.
        let wal = [UInt8](fs.currentImage().contents(of: "/x.kura-wal")!)
        let end = 40 + db.logFrameCount * (4096 + 24)
        XCTAssertGreaterThanOrEqual(wal.count, end)
        XCTAssertTrue(wal[(end - 4096 - 24)..<(end - 4096)].contains { $0 != 0 }, "the last counted frame is not a frame")
        XCTAssertTrue(wal[end...].allSatisfy { $0 == 0 }, "frames after the counted ones")
        let reopened = try Database(path: "/x.kura", options: o)
        try reopened.read { tx in
            XCTAssertEqual(try tx.rowCount(try tx.table("t")), 3)
            XCTAssertEqual(try tx.checkIntegrity(), [])
        }
    }

    // Bug (found by the I/O-error loop): after a commit failed and its frames
    // could not be cut off (the disk kept failing), the connection refused every
    // later commit ("close and reopen the store") even once the disk worked again.
    func testConnectionCommitsAgainOnceAPersistentFaultClears() throws {
        let fs = FaultInjectingFileSystem()
        var o = Database.Options()
        o.fileSystem = fs
        let db = try Database(path: "/p.kura", options: o)
        try db.write { tx in try tx.insert([.integer(0)], into: try tx.createTable("t")) }
        fs.failOperation(.sync, after: 1, persistent: true)
        XCTAssertThrowsError(try db.write { tx in try tx.insert([.integer(1)], into: try tx.table("t")) })
        fs.clearFaults()
        try db.write { tx in try tx.insert([.integer(2)], into: try tx.table("t")) }
        let other = try Database(path: "/p.kura", options: o)
        for c in [db, other] {
            try c.read { tx in
                // The failed commit's frames were complete: the log may have adopted them.
                let n = try tx.rowCount(try tx.table("t"))
                XCTAssertTrue([2, 3].contains(n))
                XCTAssertEqual(try tx.values(in: try tx.table("t"), rowID: Int64(n)), [.integer(2)])
                XCTAssertEqual(try tx.checkIntegrity(), [])
            }
        }
    }

    // Bug (found by the mutation loop): a tree page whose "fragmented bytes"
    // field claimed more free space than the page had passed validation; the
    // next insert into it defragmented past the page header and trapped
    // ("Negative value is not representable" in Page.defragment).
    func testOverstatedFragmentedBytesAreCorruptionNotATrap() throws {
        let fs = MemoryFileSystem()
        var o = Database.Options()
        o.fileSystem = fs
        o.pageSize = 512
        let original = try Database(path: "/f.kura", options: o)
        let root = try original.write { tx in
            let t = try tx.createTable("t")
            for i in 0..<5 { try tx.insert([.integer(Int64(i))], into: t) }
            return t.rootPage
        }
        original.close()  // checkpoints: the page is now in the store file
        var bytes = fs.contents(of: "/f.kura")!
        let at = Int(root - 1) * 512
        bytes[at + 6] = 0x90  // fragmented = 400 bytes
        bytes[at + 7] = 0x01
        resealStore(&bytes, pageSize: 512)
        let broken = MemoryFileSystem()
        broken.setContents(of: "/f.kura", to: bytes)
        o.fileSystem = broken
        let db = try Database(path: "/f.kura", options: o)
        XCTAssertThrowsError(try db.write { tx in
            let t = try tx.table("t")
            for i in 0..<40 { try tx.insert([.text(String(repeating: "x", count: 20 + i))], into: t) }
        }) { e in XCTAssertEqual((e as? KuraError)?.code, .corrupt, "\(e)") }
    }

    // Bug (found by the mutation loop): an index definition in the catalog whose
    // column position lay outside its table's schema trapped the query planner
    // (array index out of range) instead of being reported as corruption.
    func testIndexColumnOutsideTheSchemaIsCorruptionNotATrap() throws {
        let db = try Database.inMemory()
        try db.write { tx in
            let t = try tx.createTable("people", schema: try TableSchema([ColumnDefinition("name", .text), ColumnDefinition("age", .integer)]))
            try tx.insert(["name": .text("Ada"), "age": .integer(36)], into: t)
            var column = IndexColumn("age")
            column.position = 9
            _ = try tx.createObject("bad", kind: "index", owner: "people", definition: IndexDefinition.encode(columns: [column], unique: false))
        }
        XCTAssertThrowsError(try db.read { tx in try tx.fetch(TableQuery("people", where: "age > 30")) }) { e in
            XCTAssertEqual((e as? KuraError)?.code, .corrupt, "\(e)")
            XCTAssertTrue("\(e)".contains("bad"), "\(e)")
        }
    }

    // Bug (found by the mutation loop): a header page count near 2^32 made the
    // next checkpoint write a page at about 2 TiB; the in-memory file system
    // then trapped trying to allocate it. It now fails with `diskFull`.
    func testHugePageCountFailsWithDiskFullInMemory() throws {
        let fs = MemoryFileSystem()
        var o = Database.Options()
        o.fileSystem = fs
        o.pageSize = 512
        let db = try Database(path: "/h.kura", options: o)
        try db.write { tx in try tx.insert([.integer(1)], into: try tx.createTable("t")) }
        db.close()
        var bytes = fs.contents(of: "/h.kura")!
        bytes.replaceSubrange(16..<20, with: [0xF0, 0xFF, 0xFF, 0xFF])  // page count
        resealStore(&bytes, pageSize: 512)
        let broken = MemoryFileSystem()
        broken.setContents(of: "/h.kura", to: bytes)
        o.fileSystem = broken
        let reopened = try Database(path: "/h.kura", options: o)
        try reopened.write { tx in try tx.insert([.blob([UInt8](repeating: 1, count: 2000))], into: try tx.table("t")) }
        XCTAssertThrowsError(try reopened.checkpoint()) { e in XCTAssertEqual((e as? KuraError)?.code, .diskFull, "\(e)") }
    }

    // Bug: a checkpoint kept every page it copied from the log in memory, to put
    // them all back in the cache (an import of 3M rows peaked 65 MiB above one of
    // 1M). It now puts back at most the cache's capacity. This guards the other
    // side of that bound: after a checkpoint of many more pages than the cache
    // holds, every read returns the checkpointed version (the memory itself is
    // measured by `kura-bench --import`, not here).
    func testCheckpointOfMoreThanTheCacheLeavesNoStaleCachedPages() throws {
        var o = Database.Options()
        o.fileSystem = MemoryFileSystem()
        o.pageSize = 512
        o.cacheSize = 8 * 512
        o.durability = .off
        o.checkpointThreshold = 1_000_000
        let db = try Database(path: "/c.kura", options: o)
        let rows = 600
        try db.write { tx in
            let t = try tx.createTable("t", schema: TableSchema([ColumnDefinition("v", .text)]))
            for i in 0..<rows { _ = try tx.insert([.text("first \(i) " + String(repeating: "a", count: 60))], into: t) }
        }
        XCTAssertTrue(try db.checkpoint())
        // Every page read from the file once, so the cache holds file versions.
        try db.read { tx in XCTAssertEqual(try tx.fetch(TableQuery("t")).count, rows) }
        try db.write { tx in
            let t = try tx.table("t")
            for id in 1...Int64(rows) { XCTAssertTrue(try tx.update([.text("second \(id) " + String(repeating: "b", count: 60))], in: t, rowID: id)) }
        }
        XCTAssertTrue(try db.checkpoint())
        let values = try db.read { tx in try tx.fetch(TableQuery("t")).map { $0.values[0] } }
        XCTAssertEqual(values.count, rows)
        for (k, v) in values.enumerated() {
            XCTAssertEqual(v, .text("second \(k + 1) " + String(repeating: "b", count: 60)), "row \(k + 1)")
        }
    }
}
