// Commit observation (CommitWatcher.swift): a connection learns of commits made
// by itself, by other connections in the process and by other processes, without
// polling; observations end on cancel and on close.

import Foundation
import XCTest
@testable import KuraEngine

final class CommitWatcherTests: XCTestCase {
    /// Collects the counters a handler receives and lets the test wait for one.
    final class Seen: @unchecked Sendable {
        // @unchecked Sendable: `values` is guarded by `lock`.
        private let lock = NSCondition()
        private var values: [UInt64] = []
        func add(_ v: UInt64) { lock.lock(); values.append(v); lock.broadcast(); lock.unlock() }
        var all: [UInt64] { lock.lock(); defer { lock.unlock() }; return values }
        /// Waits (at most `seconds`, a failure bound, not a speed goal) until a
        /// value >= `target` arrived.
        func wait(atLeast target: UInt64, seconds: Double = 20) -> Bool {
            let deadline = Date().addingTimeInterval(seconds)
            lock.lock()
            defer { lock.unlock() }
            while !(values.last.map { $0 >= target } ?? false) {
                if !lock.wait(until: deadline) { return false }
            }
            return true
        }
    }

    func testCommitsOfAnotherConnectionAndOfThisOneAreObserved() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/s.kura"
        let a = try Database(path: path)
        let b = try Database(path: path)
        try a.write { tx in try tx.insert([.integer(0)], into: try tx.createTable("t")) }
        let seen = Seen()
        let observation = try a.observeCommits { seen.add($0) }
        var latencies: [Double] = []
        for i in 1...20 {
            let writer = i % 2 == 0 ? a : b
            let start = Date()
            try writer.write { tx in try tx.insert([.integer(Int64(i))], into: try tx.table("t")) }
            let target = try writer.changeCounter()
            XCTAssertTrue(seen.wait(atLeast: target), "commit \(i) was not observed")
            latencies.append(Date().timeIntervalSince(start))
        }
        let counters = seen.all
        XCTAssertEqual(counters, counters.sorted(), "counters out of order")
        XCTAssertEqual(Set(counters).count, counters.count, "a counter was delivered twice")
        latencies.sort()
        print("commit observation (another connection's commit and this one's, through the log file): median \(String(format: "%.2f", latencies[latencies.count / 2] * 1000)) ms, max \(String(format: "%.2f", latencies.last! * 1000)) ms over 20 commits")
        // Cancelled: no more calls.
        observation.cancel()
        let before = seen.all.count
        try b.write { tx in try tx.insert([.integer(99)], into: try tx.table("t")) }
        usleep(200_000)
        XCTAssertEqual(seen.all.count, before)
    }

    func testCommitsOfAnotherProcessAreObserved() throws {
        guard let child = CrashTests.childURL else { throw XCTSkip("KuraTestChild binary not found beside the test bundle") }
        let dir = try TemporaryDirectory()
        let path = dir.path + "/s.kura"
        let db = try Database(path: path)
        let seen = Seen()
        let observation = try db.observeCommits { seen.add($0) }
        defer { observation.cancel() }
        try runChildWriter(child, path: path, round: 1, commits: 30, threshold: 1000)
        let final = try db.changeCounter()
        XCTAssertTrue(seen.wait(atLeast: final), "the other process's last commit was not observed (saw \(seen.all.suffix(3)), counter \(final))")
        XCTAssertGreaterThan(seen.all.count, 0)
    }

    func testInMemoryStoreObservesItsOwnCommitsAndTheStreamEndsOnClose() async throws {
        let db = try Database.inMemory()
        let stream = try db.commits()
        let first = try db.changeCounter()
        try db.write { tx in try tx.createTable("t") }
        var iterator = stream.makeAsyncIterator()
        let got = await iterator.next()
        XCTAssertNotNil(got)
        XCTAssertGreaterThan(got ?? 0, first)
        db.close()
        // The sequence finishes once the watcher has stopped.
        while let _ = await iterator.next() {}
        XCTAssertThrowsError(try db.observeCommits { _ in }) { XCTAssertEqual(($0 as? KuraError)?.code, .misuse) }
    }
}
