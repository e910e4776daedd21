// Readers make progress during a checkpoint: a checkpoint holds the reader
// byte exclusively (no other process may read while it rewrites the store
// file), but this connection's own transactions start, read the newest
// snapshot and end while it writes and syncs. The checkpoint here is held
// inside its first sync by the file system's mutation hook, so the reads
// below run while it is provably in progress; before readers stopped waiting
// for the checkpoint's lock they blocked until it ended, and this test timed
// out. A second connection must still be kept out until the checkpoint ends,
// even after the first connection's reads have all ended (the byte stays
// exclusive), the store cannot be destroyed meanwhile, and everything reads
// back after it.

import Dispatch
import Foundation
import XCTest
@testable import KuraEngine

final class CheckpointProgressTests: XCTestCase {
    /// A one-shot latch the mutation hook can wait on (the hook is @Sendable).
    final class Latch: @unchecked Sendable {
        // @unchecked Sendable: `armed` is guarded by `lock`; the semaphores are thread-safe.
        private let lock = NSLock()
        private var armed = false
        let entered = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        func arm() { lock.lock(); armed = true; lock.unlock() }
        /// True once, for the first sync after `arm`.
        func takeIfArmed() -> Bool {
            lock.lock(); defer { lock.unlock() }
            if armed { armed = false; return true }
            return false
        }
    }

    func testReadsRunWhileACheckpointSyncsAndOtherConnectionsWait() throws {
        let fs = FaultInjectingFileSystem()
        var options = Database.Options()
        options.fileSystem = fs
        options.durability = .normal
        options.checkpointThreshold = 1_000_000
        options.busyTimeout = 0.2
        let db = try Database(path: "/p.kura", options: options)
        defer { db.close() }
        try db.write { tx in
            let t = try tx.createTable("t")
            for i in 0..<500 { try tx.insert([.integer(Int64(i)), .text("row \(i)")], into: t) }
        }
        try db.write { tx in
            let t = try tx.table("t")
            for i in stride(from: 1, through: 500, by: 7) { _ = try tx.update([.integer(-Int64(i)), .text("changed")], in: t, rowID: Int64(i)) }
        }
        let other = try Database(path: "/p.kura", options: options)
        defer { other.close() }

        let latch = Latch()
        fs.setMutationHook { op, _ in
            guard op == .sync, latch.takeIfArmed() else { return }
            latch.entered.signal()
            // Bounded: a broken test must not hang the run.
            _ = latch.release.wait(timeout: .now() + 20)
        }
        defer { fs.setMutationHook(nil) }
        latch.arm()

        let result = Result<Bool, Error>.Box()
        let checkpointer = Thread {
            do { result.set(.success(try db.checkpoint())) } catch { result.set(.failure(error)) }
        }
        checkpointer.start()
        XCTAssertEqual(latch.entered.wait(timeout: .now() + 20), .success, "the checkpoint never reached its first sync")

        // The checkpoint is inside its sync now. Reads of this connection run
        // (on another thread, so that a regression shows as a timeout, not a hang).
        let reads = DispatchSemaphore(value: 0)
        let readResult = Result<[Int64], Error>.Box()
        Thread {
            do {
                let sums = try (0..<3).map { _ in
                    try db.read { tx -> Int64 in
                        let t = try tx.table("t")
                        var sum: Int64 = 0
                        for id in 1...500 { sum += try tx.values(in: t, rowID: Int64(id))?[0].integerValue ?? 0 }
                        return sum
                    }
                }
                readResult.set(.success(sums))
            } catch { readResult.set(.failure(error)) }
            reads.signal()
        }.start()
        let readsFinished = reads.wait(timeout: .now() + 10) == .success
        XCTAssertTrue(readsFinished, "reads of the checkpointing connection waited for the checkpoint")

        // Every read of this connection has ended; the other connection is
        // still kept out (the reader byte stays the checkpoint's).
        XCTAssertThrowsError(try other.read { tx in _ = try tx.table("t") }) { error in
            XCTAssertEqual((error as? KuraError)?.code, .busy, "\(error)")
        }

        // Nor may this connection's store be destroyed under the checkpoint.
        XCTAssertThrowsError(try db.destroy()) { error in
            XCTAssertEqual((error as? KuraError)?.code, .busy, "\(error)")
            XCTAssertTrue("\(error)".contains("while it checkpoints"), "\(error)")
        }

        latch.release.signal()
        let deadline = Date().addingTimeInterval(20)
        while result.value == nil && Date() < deadline { usleep(1000) }
        XCTAssertEqual(try XCTUnwrap(result.value).get(), true)

        // What the reads saw: rows 1, 8, 15, ... negated, the others as inserted.
        var expected: Int64 = 0
        for id in 1...500 { expected += id % 7 == 1 ? -Int64(id) : Int64(id - 1) }
        if readsFinished { XCTAssertEqual(try XCTUnwrap(readResult.value).get(), [expected, expected, expected]) }
        // After the checkpoint both connections read the same, from the store file.
        for d in [db, other] {
            let sum = try d.read { tx -> Int64 in
                let t = try tx.table("t")
                var sum: Int64 = 0
                for id in 1...500 { sum += try tx.values(in: t, rowID: Int64(id))?[0].integerValue ?? 0 }
                return sum
            }
            XCTAssertEqual(sum, expected)
        }
        XCTAssertTrue(try db.read { tx in try tx.checkIntegrity() }.isEmpty)
    }
}

extension Result {
    /// A value set once on one thread and read on another.
    final class Box: @unchecked Sendable {
        // @unchecked Sendable: `stored` is guarded by `lock`.
        private let lock = NSLock()
        private var stored: Result?
        func set(_ r: Result) { lock.lock(); stored = r; lock.unlock() }
        var value: Result? { lock.lock(); defer { lock.unlock() }; return stored }
    }
}
