// Spill (FORMAT.md, "Commit"; issue 14 item 5): a write transaction whose
// changed pages pass the cache budget writes the least recently used ones to the
// log as frames without a commit mark and reads them back when it uses them again.
// These tests show, through the public API, that such a transaction commits and
// reads back whole, that a rolled-back one leaves nothing, and that readers of
// another connection never see its frames before the commit. Power loss while
// spilling is in the crash matrix (`testCrashMatrixWhileSpilling`), I/O errors in
// ReliabilityIOErrorTests (its 8-page cache makes the large transaction spill).
//
// Memory: `swift run -c release --package-path Benchmarks kura-bench` reports peak
// RSS; the bound is shown by `KURA_SPILL_RSS=1 swift test --filter
// SpillTests/testSpillMemoryReport`, which prints the RSS growth of a transaction
// 200 times the cache (no timed or memory assertion).

import Foundation
import XCTest
@testable import KuraEngine

final class SpillTests: XCTestCase {
    static let pageSize = 4096
    static let cachePages = 16

    func options() -> Database.Options {
        var o = Database.Options()
        o.pageSize = Self.pageSize
        o.cacheSize = Self.cachePages * Self.pageSize
        o.busyTimeout = 2
        return o
    }

    /// The rows of the big transaction: `count` rows of about 600 bytes, so
    /// `count` = 2,200 is about 20 times a 16-page cache.
    func row(_ k: Int) -> [Value] { [.integer(Int64(k)), .blob(payload(560 + k % 80, seed: UInt64(k)))] }

    func testTransactionTwentyTimesTheCacheCommitsAndReadsBack() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/spill.kura"
        let db = try Database(path: path, options: options())
        let rows = 2_200
        var spilled = 0
        try db.write { tx in
            let t = try tx.createTable("t")
            for k in 0..<rows { _ = try tx.insert(row(k), into: t) }
            // Rewrite every tenth row: pages spilled earlier are read back and
            // spilled again (the newest frame must win).
            for k in stride(from: 0, to: rows, by: 10) {
                XCTAssertTrue(try tx.update([.integer(-Int64(k)), .text("second version \(k)")], in: t, rowID: Int64(k + 1)))
            }
            // Reads inside the transaction see its spilled changes.
            XCTAssertEqual(try tx.values(in: t, rowID: 1), [.integer(0), .text("second version 0")])
            XCTAssertEqual(try tx.values(in: t, rowID: 2), row(1))
            spilled = tx.writer?.spilledPageCount ?? 0
        }
        XCTAssertGreaterThan(spilled, 20 * Self.cachePages / 2, "the transaction did not spill")
        func check(_ db: Database) throws {
            try db.read { tx in
                let t = try tx.table("t")
                XCTAssertEqual(try tx.rowCount(t), rows)
                let c = try tx.rows(in: t)
                var k = 0
                while let r = try c.next() {
                    let expected: [Value] = k % 10 == 0 ? [.integer(-Int64(k)), .text("second version \(k)")] : row(k)
                    if try r.values() != expected { XCTFail("row \(r.rowID) differs"); return }
                    k += 1
                }
                XCTAssertEqual(k, rows)
                XCTAssertEqual(try tx.checkIntegrity(), [])
            }
        }
        try check(db)
        db.close()
        // Recovery from the log alone (close checkpointed; the reopened store reads the file).
        let again = try Database(path: path, options: options())
        try check(again)
        again.close()
    }

    func testRolledBackSpillingTransactionLeavesNothing() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/rollback.kura"
        let db = try Database(path: path, options: options())
        try db.write { tx in
            let t = try tx.createTable("t")
            for k in 0..<50 { _ = try tx.insert(row(k), into: t) }
        }
        let framesBefore = db.logFrameCount
        let logBytes = try FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int
        struct Abort: Error {}
        var spilled = 0
        XCTAssertThrowsError(try db.write { tx in
            let t = try tx.table("t")
            for k in 50..<2_000 { _ = try tx.insert(row(k), into: t) }
            for k in 1...50 { _ = try tx.delete(from: t, rowID: Int64(k)) }
            spilled = tx.writer?.spilledPageCount ?? 0
            throw Abort()
        }) { XCTAssertTrue($0 is Abort) }
        XCTAssertGreaterThan(spilled, 0, "the transaction did not spill")
        XCTAssertEqual(db.logFrameCount, framesBefore)
        // The spilled frames were cut off the log: it ends at its last
        // committed frame (no longer than before; a synced commit may have
        // written zero bytes ahead, which the cut removes too).
        let after = try XCTUnwrap(try FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int)
        XCTAssertLessThanOrEqual(after, try XCTUnwrap(logBytes))
        XCTAssertEqual(Int64(after), db.pager.wal.frameOffset(framesBefore + 1))
        func check(_ db: Database) throws {
            try db.read { tx in
                let t = try tx.table("t")
                XCTAssertEqual(try tx.rowCount(t), 50)
                XCTAssertEqual(try tx.values(in: t, rowID: 1), row(0))
                XCTAssertEqual(try tx.values(in: t, rowID: 51), nil)
                XCTAssertEqual(try tx.checkIntegrity(), [])
            }
        }
        try check(db)
        // A fresh connection (recovery reads the log) agrees, and a later commit works.
        let other = try Database(path: path, options: options())
        try check(other)
        try other.write { tx in _ = try tx.insert(row(7), into: try tx.table("t")) }
        XCTAssertEqual(try db.read { tx in try tx.rowCount(try tx.table("t")) }, 51)
        other.close()
        db.close()
    }

    /// Regression guard: spilled frames must not be visible to another
    /// connection (in this process, so through its own log scan) before the
    /// commit frame, nor to readers of the writer's own connection.
    func testReadersSeeTheOldStateWhileATransactionSpills() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/readers.kura"
        let db = try Database(path: path, options: options())
        try db.write { tx in
            let t = try tx.createTable("t")
            for k in 0..<300 { _ = try tx.insert(row(k), into: t) }
        }
        let reader = try Database(path: path, options: options())
        let before = try StoreState.read(reader)
        let seen = Locked<[String]>([])
        try db.write { tx in
            let t = try tx.table("t")
            for k in 300..<2_500 {
                _ = try tx.insert(row(k), into: t)
                if k % 100 == 0 {
                    _ = try tx.update([.text("changed")], in: t, rowID: Int64(k / 10 + 1))
                    // Another connection re-reads the log at every transaction start.
                    let state = try StoreState.read(reader)
                    if state != before { seen.mutate { $0.append("other connection at row \(k): \(state.difference(from: before))") } }
                    // A reader of the writer's own connection, on another thread.
                    let group = DispatchGroup()
                    group.enter()
                    Thread {
                        defer { group.leave() }
                        do {
                            let s = try StoreState.read(db)
                            if s != before { seen.mutate { $0.append("same connection at row \(k): \(s.difference(from: before))") } }
                        } catch { seen.mutate { $0.append("same connection: \(error)") } }
                    }.start()
                    group.wait()
                }
            }
            XCTAssertGreaterThan(tx.writer?.spilledPageCount ?? 0, 0, "the transaction did not spill")
        }
        XCTAssertEqual(seen.value, [])
        XCTAssertEqual(try reader.read { tx in try tx.rowCount(try tx.table("t")) }, 2_500)
        XCTAssertEqual(try reader.read { tx in try tx.checkIntegrity() }, [])
        reader.close()
        db.close()
    }

    /// Prints the resident memory a transaction 200 times the cache adds
    /// (Linux only; run with KURA_SPILL_RSS=1). Not an assertion: memory use is
    /// reported, as the benchmark reports it.
    func testSpillMemoryReport() throws {
        guard ProcessInfo.processInfo.environment["KURA_SPILL_RSS"] == "1" else { return }
        let dir = try TemporaryDirectory()
        var o = options()
        o.cacheSize = 256 * Self.pageSize  // 1 MiB
        o.durability = .normal
        let db = try Database(path: dir.path + "/rss.kura", options: o)
        let start = residentBytes()
        var peak = start
        try db.write { tx in
            let t = try tx.createTable("t")
            for k in 0..<90_000 {  // about 200 MiB of pages
                _ = try tx.insert([.integer(Int64(k)), .blob(payload(2_000, seed: UInt64(k)))], into: t)
                if k % 5_000 == 0 { peak = max(peak, residentBytes()) }
            }
        }
        print("spill RSS: cache 1 MiB, one transaction of 90,000 rows of 2,000 bytes (about 180 MiB): RSS grew by at most \((peak - start) >> 20) MiB")
        db.close()
    }

    private func residentBytes() -> Int {
        guard let s = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8),
              let pages = s.split(separator: " ").dropFirst().first.flatMap({ Int($0) }) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}
