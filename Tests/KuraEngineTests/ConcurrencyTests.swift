import Foundation
import XCTest
@testable import KuraEngine

final class ConcurrencyTests: XCTestCase {
    func testReaderKeepsItsSnapshotWhileAWriterCommits() throws {
        let db = try Database.inMemory()
        try db.write { tx in try tx.insert([.integer(1)], into: try tx.createTable("t")) }
        let inside = DispatchSemaphore(value: 0)
        let committed = DispatchSemaphore(value: 0)
        let result = Locked<[Int]>([])
        let reader = Thread {
            try? db.read { tx in
                let t = try tx.table("t")
                result.mutate { $0.append(try! tx.rowCount(t)) }
                inside.signal()
                committed.wait()
                result.mutate { $0.append(try! tx.rowCount(t)) }
                let c = try tx.rows(in: t)
                var n = 0
                while try c.next() != nil { n += 1 }
                result.mutate { $0.append(n) }
            }
            inside.signal()
        }
        reader.start()
        inside.wait()
        try db.write { tx in
            let t = try tx.table("t")
            for i in 0..<500 { try tx.insert([.integer(Int64(i))], into: t) }
        }
        _ = try db.checkpoint()  // even a checkpoint does not disturb the old snapshot
        committed.signal()
        inside.wait()
        XCTAssertEqual(result.value, [1, 1, 1])
        try db.read { tx in XCTAssertEqual(try tx.rowCount(try tx.table("t")), 501) }
    }

    /// Money moves between accounts; every snapshot must see the same total, while
    /// checkpoints run often and readers overlap continuously.
    func testConcurrentReadersSeeConsistentSnapshotsAndTheLogStaysBounded() throws {
        let dir = try TemporaryDirectory()
        var o = Database.Options()
        o.durability = .normal
        o.checkpointThreshold = 30
        o.cacheSize = 64 * 4096
        let db = try Database(path: dir.path + "/bank.kura", options: o)
        let accounts = 200
        try db.write { tx in
            let t = try tx.createTable("accounts")
            for _ in 0..<accounts { try tx.insert([.integer(100)], into: t) }
        }
        let maxLog = Locked(0)
        let readers = ReaderThreads(count: 3) { r in
            try db.read { tx in
                let c = try tx.rows(in: try tx.table("accounts"))
                var sum: Int64 = 0
                var n = 0
                while let row = try c.next() { sum += try row.value(at: 0).integerValue!; n += 1 }
                if sum != Int64(accounts * 100) || n != accounts { r.fail("sum \(sum) over \(n) rows") }
            }
        }
        var rng = SplitMix64(seed: 5)
        let deadline = Date().addingTimeInterval(2)
        var transfers = 0
        while Date() < deadline {
            try db.write { tx in
                let t = try tx.table("accounts")
                let a = Int64(1 + rng.next() % UInt64(accounts)), b = Int64(1 + rng.next() % UInt64(accounts))
                let va = try tx.values(in: t, rowID: a)![0].integerValue!
                try tx.update([.integer(va - 7)], in: t, rowID: a)
                let vb = try tx.values(in: t, rowID: b)![0].integerValue!
                try tx.update([.integer(vb + 7)], in: t, rowID: b)
            }
            transfers += 1
            maxLog.mutate { $0 = max($0, db.logFrameCount) }
        }
        readers.stop()
        print("bank: transfers \(transfers), snapshot reads \(readers.reads.value), max log frames \(maxLog.value)")
        XCTAssertEqual(readers.failures.value, [])
        XCTAssertGreaterThan(readers.reads.value, 10)
        XCTAssertGreaterThan(transfers, 100)
        // Readers overlapped the whole time, yet the log never grew past the
        // checkpoint threshold plus one transaction's pages.
        XCTAssertLessThanOrEqual(maxLog.value, 30 + 10)
        try db.read { tx in XCTAssertEqual(try tx.checkIntegrity(), []) }
    }

    func testTwoConnectionsSeeEachOthersCommitsAndWritersExcludeEachOther() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/two.kura"
        var o = Database.Options()
        o.busyTimeout = 0.2
        let a = try Database(path: path, options: o)
        let b = try Database(path: path, options: o)
        try a.write { tx in try tx.insert([.text("from a")], into: try tx.createTable("t")) }
        try b.read { tx in XCTAssertEqual(try tx.values(in: try tx.table("t"), rowID: 1), [.text("from a")]) }
        try b.write { tx in try tx.insert([.text("from b")], into: try tx.table("t")) }
        try a.read { tx in XCTAssertEqual(try tx.rowCount(try tx.table("t")), 2) }
        // a holds the write lock; b gives up after its busy timeout with `busy`.
        let holding = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        Thread {
            try? a.write { tx in
                try tx.insert([.text("slow")], into: try tx.table("t"))
                holding.signal()
                release.wait()
            }
            holding.signal()
        }.start()
        holding.wait()
        let started = Date()
        XCTAssertThrowsError(try b.write { tx in try tx.insert([.null], into: try tx.table("t")) }) { e in
            guard case KuraError.busy = e else { return XCTFail("expected busy, got \(e)") }
            XCTAssertTrue("\(e)".contains("busy timeout"), "\(e)")
        }
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 0.2)
        // Readers are not blocked by the writer.
        try b.read { tx in XCTAssertEqual(try tx.rowCount(try tx.table("t")), 2) }
        release.signal()
        holding.wait()
        try b.read { tx in XCTAssertEqual(try tx.rowCount(try tx.table("t")), 3) }
        // b's checkpoint and a's later reads and writes interleave safely.
        XCTAssertTrue(try b.checkpoint())
        try a.write { tx in try tx.insert([.text("after checkpoint")], into: try tx.table("t")) }
        try b.read { tx in
            XCTAssertEqual(try tx.rowCount(try tx.table("t")), 4)
            XCTAssertEqual(try tx.checkIntegrity(), [])
        }
    }

    // Guards readers that take no exclusive lock (Pager.page and most
    // transaction starts hold `state` shared; checkpoints write and sync
    // outside it) and reuse the connection's table resolution and counters:
    // one-row read transactions racing single-row commits, with checkpoints
    // every few commits and a cache small enough to evict, must each see one
    // snapshot (the counter row agrees with the row count and the last row).
    func testOneRowReadersSeeOneSnapshotAcrossCommitsAndCheckpoints() throws {
        let dir = try TemporaryDirectory()
        var o = Database.Options()
        o.durability = .normal
        o.checkpointThreshold = 12
        o.cacheSize = 16 * 4096
        let db = try Database(path: dir.path + "/w9.kura", options: o)
        try db.write { tx in
            let log = try tx.createTable("log")
            for k in 1...300 { try tx.insert([.integer(Int64(k))], into: log, rowID: Int64(k)) }
            try tx.insert([.integer(300)], into: try tx.createTable("counter"), rowID: 1)
        }
        let readers = ReaderThreads(count: 2) { r in
            try db.read { tx in
                let n = try tx.values(in: try tx.table("counter"), rowID: 1)![0].integerValue!
                let log = try tx.table("log")
                if Int64(log.rowCount) != n || log.nextRowID != n + 1 { r.fail("counter \(n) but \(log.rowCount) rows, next \(log.nextRowID)") }
                if try tx.values(in: log, rowID: n) != [.integer(n)] { r.fail("row \(n) missing at counter \(n)") }
                if try tx.values(in: try tx.table("log"), rowID: n + 1) != nil { r.fail("row \(n + 1) seen at counter \(n)") }
            }
        }
        var k: Int64 = 300
        let deadline = Date().addingTimeInterval(1)
        while Date() < deadline {
            k += 1
            let key = k
            try db.write { tx in
                try tx.insert([.integer(key)], into: try tx.table("log"), rowID: key)
                try tx.update([.integer(key)], in: try tx.table("counter"), rowID: 1)
            }
        }
        readers.stop()
        print("one-row readers: \(k - 300) commits, \(readers.reads.value) reads, max log \(db.logFrameCount)")
        XCTAssertEqual(Array(readers.failures.value.prefix(5)), [])
        XCTAssertGreaterThan(readers.reads.value, 10)
        try db.read { tx in
            XCTAssertEqual(try tx.rowCount(try tx.table("log")), Int(k))
            XCTAssertEqual(try tx.checkIntegrity(), [])
        }
    }
}

/// A value behind a lock, for test threads.
final class Locked<T>: @unchecked Sendable {
    // @unchecked Sendable: `stored` is only touched while holding `lock`.
    private let lock = NSLock()
    private var stored: T
    init(_ v: T) { stored = v }
    var value: T { lock.lock(); defer { lock.unlock() }; return stored }
    func mutate(_ f: (inout T) throws -> Void) rethrows { lock.lock(); defer { lock.unlock() }; try f(&stored) }
}

final class WriterPublishRaceTests: XCTestCase {
    // Bug: a reader starting while its own connection's writer had written a
    // commit's frames but not yet published them indexed those frames itself; the
    // writer's publish then counted them again, so the next commit was written
    // past a gap of zeros and readers hit "checksum mismatch (stored 0x0) in log
    // frame N" (seen in benchmark W9).
    func testReadersStartingDuringCommitsNeverDoubleCountFrames() throws {
        let dir = try TemporaryDirectory()
        var o = Database.Options()
        o.durability = .full  // an fsync between writing and publishing widens the window
        o.checkpointThreshold = 50
        let db = try Database(path: dir.path + "/race.kura", options: o)
        try db.write { tx in try tx.insert([.integer(0)], into: try tx.createTable("t")) }
        let readers = ReaderThreads(count: 2) { _ in
            _ = try db.read { tx in try tx.values(in: try tx.table("t"), rowID: 1) }
        }
        var commits = 0
        let deadline = Date().addingTimeInterval(1.5)
        while Date() < deadline {
            try db.write { tx in try tx.insert([.integer(Int64(commits))], into: try tx.table("t")) }
            commits += 1
        }
        readers.stop()
        XCTAssertEqual(readers.failures.value, [])
        // Copy the files as a crash would leave them (the cache can hide a
        // misplaced frame from readers, and a checkpoint on close would heal it).
        let fm = FileManager.default
        try fm.copyItem(atPath: dir.path + "/race.kura", toPath: dir.path + "/crash.kura")
        try fm.copyItem(atPath: dir.path + "/race.kura-wal", toPath: dir.path + "/crash.kura-wal")
        let recovered = try Database(path: dir.path + "/crash.kura", options: o)
        try recovered.read { tx in
            XCTAssertEqual(try tx.rowCount(try tx.table("t")), commits + 1, "every acknowledged commit survives the crash")
            XCTAssertEqual(try tx.checkIntegrity(), [])
        }
        _ = db
    }
}
