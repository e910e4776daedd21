// Transaction starts and ends without locks (Pager.swift: `Snapshot.addUser`
// and `removeUser`, `active` changed only when `latest` moves on, and the
// connection's count of open transactions in `openWord`):
// - a transaction open across a commit and a checkpoint keeps its snapshot
//   (the checkpoint preserves its pages: it has a user), while transactions
//   nested in it, which start without the lock, see the newest state;
// - readers on several threads of one connection, overlapping each other
//   (most start and end without `txnLock`), beside writers of that connection
//   and of another one and automatic checkpoints after almost every commit,
//   each see one consistent snapshot, never older than the last commit that
//   returned before they started (a reused transaction does not keep the
//   last one's snapshot), and no snapshot stays counted afterwards.
// - another connection cannot checkpoint while a transaction of this one is
//   open, however it started and however the others ended.
// Stores are in POSIX files: reader marks and the shared log header in use.
// Prints its seed; KURA_SEED=<n> replays one.

import Foundation
import XCTest
@testable import KuraEngine

final class TransactionLifeTests: XCTestCase {
    /// A store at `path` with table "t" of two rows whose values sum to zero.
    private func makeStore(_ path: String, threshold: Int) throws -> Database {
        let db = try Database(path: path, options: Self.options(threshold: threshold))
        try db.write { tx in
            let t = try tx.createTable("t", schema: try TableSchema([ColumnDefinition("n", .integer)]))
            try tx.insert([.integer(0)], into: t)
            try tx.insert([.integer(0)], into: t)
        }
        return db
    }

    /// Unsynced connections that checkpoint after `threshold` frames.
    private static func options(threshold: Int) -> Database.Options {
        var o = Database.Options()
        o.durability = .off
        o.checkpointThreshold = threshold
        return o
    }

    /// Sets the two rows to `k` and `-k` in one transaction.
    private func setPair(_ db: Database, _ k: Int64) throws {
        try db.write { tx in
            let t = try tx.table("t")
            try tx.update([.integer(k)], in: t, rowID: 1)
            try tx.update([.integer(-k)], in: t, rowID: 2)
        }
    }

    /// The two rows' values in `tx`.
    private static func pair(_ tx: ReadTransaction) throws -> (Int64, Int64) {
        let t = try tx.table("t")
        guard case .integer(let a)? = try tx.values(in: t, rowID: 1)?.first,
              case .integer(let b)? = try tx.values(in: t, rowID: 2)?.first else {
            throw KuraError(.corrupt, "rows 1 and 2 missing")
        }
        return (a, b)
    }

    func testOpenTransactionKeepsItsSnapshotAcrossACheckpoint() throws {
        let dir = try TemporaryDirectory()
        let db = try makeStore(dir.path + "/s.kura", threshold: 1_000_000)
        defer { db.close() }
        try setPair(db, 1)
        try db.read { outer in
            // Nothing read yet (its page memo is empty): every page it reads
            // below comes from what the checkpoint preserved for it.
            // Committed and copied into the store file while `outer` is open.
            try setPair(db, 2)
            XCTAssertTrue(try db.checkpoint(), "the checkpoint ran")
            try db.read { inner in
                // Starts while another transaction is open: no lock taken.
                XCTAssertEqual(try Self.pair(inner).0, 2)
                try db.read { innermost in XCTAssertEqual(try Self.pair(innermost).0, 2) }
            }
            XCTAssertEqual(db.activeSnapshotCount, 1)
            let (a, b) = try Self.pair(outer)
            XCTAssertEqual(a, 1, "the open transaction kept its snapshot across the checkpoint")
            XCTAssertEqual(b, -1)
            // Another commit and checkpoint: the old snapshot's preserved pages still serve it.
            try setPair(db, 3)
            XCTAssertTrue(try db.checkpoint())
            XCTAssertEqual(try Self.pair(outer).0, 1)
        }
        XCTAssertEqual(db.activeSnapshotCount, 0)
        try db.read { tx in XCTAssertEqual(try Self.pair(tx).0, 3) }
        XCTAssertEqual(db.activeSnapshotCount, 0)
    }

    /// Another connection cannot checkpoint while this one has a transaction
    /// open, whether it started first (taking the connection's reader mark)
    /// or beside others (no lock); once the last one ends it can.
    func testOpenTransactionsKeepOtherConnectionsCheckpointsOut() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/s.kura"
        let db = try makeStore(path, threshold: 1_000_000)
        defer { db.close() }
        let other = try Database(path: path, options: Self.options(threshold: 1_000_000))
        defer { other.close() }
        try setPair(other, 1)
        try db.read { outer in
            try db.read { inner in
                XCTAssertEqual(try Self.pair(inner).0, 1)
                XCTAssertFalse(try other.checkpoint(), "checkpointed under two open transactions")
            }
            // The inner one ended without the lock: the outer one still keeps checkpoints out.
            XCTAssertFalse(try other.checkpoint(), "checkpointed under an open transaction")
            XCTAssertEqual(try Self.pair(outer).0, 1)
        }
        XCTAssertTrue(try other.checkpoint(), "no transaction open: the checkpoint runs")
        try db.read { tx in XCTAssertFalse(try other.checkpoint()); XCTAssertEqual(try Self.pair(tx).0, 1) }
    }

    func testOverlappingReadersWithWritersAndCheckpoints() throws {
        let seed = testSeed("TransactionLifeTests.overlapping")
        let dir = try TemporaryDirectory()
        let path = dir.path + "/s.kura"
        let db = try makeStore(path, threshold: 3)
        defer { db.close() }
        let other = try Database(path: path, options: Self.options(threshold: 3))
        defer { other.close() }

        /// The last value a commit that returned wrote (a reader starting
        /// later must see it or a newer one), and the first error seen.
        final class Shared: @unchecked Sendable {
            // @unchecked Sendable: every field is guarded by `lock`.
            let lock = NSLock()
            var published: Int64 = 0
            var failure: String?
            func publish(_ k: Int64) { lock.lock(); published = k; lock.unlock() }
            var last: Int64 { lock.lock(); defer { lock.unlock() }; return published }
            func fail(_ s: String) { lock.lock(); if failure == nil { failure = s }; lock.unlock() }
        }
        let shared = Shared()
        let commits = 300
        let readers = 3
        let group = DispatchGroup()
        for r in 0..<readers {
            group.enter()
            let thread = Thread { [db] in
                defer { group.leave() }
                var g = SplitMix64(seed: seed &+ UInt64(r) &* 0x9E37_79B9)
                var lastSeen: Int64 = 0
                do {
                    while shared.last < Int64(commits) && shared.failure == nil {
                        let floor = shared.last
                        let depth = Int(g.next() % 3)
                        func check(_ tx: ReadTransaction, _ level: Int) throws {
                            let (a, b) = try TransactionLifeTests.pair(tx)
                            if a != -b { shared.fail("reader \(r): inconsistent snapshot \(a), \(b), seed \(seed)") }
                            if a < floor { shared.fail("reader \(r): read \(a) after \(floor) was committed, seed \(seed)") }
                            if level < depth {
                                try db.read { inner in try check(inner, level + 1) }
                                // The outer snapshot is unchanged by the inner one.
                                let again = try TransactionLifeTests.pair(tx)
                                if again.0 != a { shared.fail("reader \(r): snapshot moved from \(a) to \(again.0), seed \(seed)") }
                            }
                        }
                        try db.read { tx in
                            try check(tx, 0)
                            let (a, _) = try TransactionLifeTests.pair(tx)
                            if a < lastSeen { shared.fail("reader \(r): went back from \(lastSeen) to \(a), seed \(seed)") }
                            lastSeen = a
                        }
                    }
                } catch {
                    shared.fail("reader \(r): \(error), seed \(seed)")
                }
            }
            thread.start()
        }
        var g = SplitMix64(seed: seed)
        for k in 1...Int64(commits) {
            if shared.failure != nil { break }
            // Both connections write: readers of `db` see `other`'s commits
            // by reading the log, `db`'s own without.
            try setPair(g.next() % 3 == 0 ? other : db, k)
            shared.publish(k)
        }
        group.wait()
        XCTAssertNil(shared.failure)
        XCTAssertEqual(db.activeSnapshotCount, 0)
        XCTAssertEqual(other.activeSnapshotCount, 0)
        try db.read { tx in XCTAssertEqual(try Self.pair(tx).0, Int64(commits)) }
    }
}
