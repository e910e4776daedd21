// Read transactions reused by their connection (Transaction.swift,
// `SpareReadTransaction`; PageSource.swift, `SnapshotPages.reopen(on:)`) and
// the transaction gate's per-thread bookkeeping (TransactionGate.swift):
// - a read after a commit (or a checkpoint) sees it, through `read` and
//   `Database.values(inTable:rowID:)`, although the transaction object and its
//   page memo are the last one's; reads on an unchanged snapshot keep the memo;
// - nested reads get transactions of their own, and the outer one keeps its
//   snapshot while the inner ones see a commit made in between;
// - a transaction (or a cursor of it) kept past its closure is never handed to
//   another closure, and keeps throwing `misuse`;
// - readers on several threads, beside a writer, each see one consistent
//   snapshot per transaction and never go back in time;
// - `close()` from inside a transaction of another connection closes that one
//   at once; from inside its own, when the transaction ends.
// Prints its seed; KURA_SEED=<n> replays one.

import Foundation
import XCTest
@testable import KuraEngine

final class ReadReuseTests: XCTestCase {
    private func options() -> Database.Options {
        var o = Database.Options()
        o.fileSystem = MemoryFileSystem()
        o.durability = .off
        return o
    }

    private func makeTable(_ db: Database, rows: Int) throws {
        try db.write { tx in
            let t = try tx.createTable("t", schema: try TableSchema([ColumnDefinition("n", .integer), ColumnDefinition("s", .text)]))
            for i in 0..<rows { _ = try tx.insert([.integer(0), .text("row \(i) " + String(repeating: "y", count: i % 50))], into: t) }
        }
    }

    /// Random reads, by `read` and by `values(inTable:rowID:)`, with commits
    /// and checkpoints between some of them: every read gives the model's row.
    func testReadsAfterCommitsSeeThem() throws {
        let seed = testSeed("ReadReuseTests.commits")
        var g = SplitMix64(seed: seed)
        let db = try Database(path: "/reuse.kura", options: options())
        defer { db.close() }
        let rows = 3_000
        try makeTable(db, rows: rows)
        var model = [Int64](repeating: 0, count: rows + 1)
        for step in 0..<3_000 {
            let id = Int64(g.next() % UInt64(rows)) + 1
            switch g.next() % 8 {
            case 0:
                let v = Int64(g.next() % 1_000_000)
                try db.write { tx in
                    let t = try tx.table("t")
                    guard var row = try tx.values(in: t, rowID: id) else { throw KuraError(.notFound, "row \(id)") }
                    row[0] = .integer(v)
                    try tx.update(row, in: t, rowID: id)
                }
                model[Int(id)] = v
            case 1 where step % 50 == 1:
                _ = try db.checkpoint()
            default:
                break
            }
            let byRead = try db.read { tx in try tx.values(in: try tx.table("t"), rowID: id) }
            XCTAssertEqual(byRead?[0], .integer(model[Int(id)]), "read of row \(id) at step \(step), seed \(seed)")
            let byName = try db.values(inTable: "t", rowID: id)
            XCTAssertEqual(byName?[0], .integer(model[Int(id)]), "values(inTable:) of row \(id) at step \(step), seed \(seed)")
        }
        XCTAssertEqual(db.activeSnapshotCount, 0)
    }

    /// The kept transaction's memo: kept on the same snapshot, emptied on
    /// another; and the object itself is the same one.
    func testMemoIsKeptOnlyOnTheSameSnapshot() throws {
        let db = try Database(path: "/memo.kura", options: options())
        defer { db.close() }
        try makeTable(db, rows: 2_000)
        var first: ObjectIdentifier?
        try db.read { tx in
            first = ObjectIdentifier(tx)
            _ = try tx.values(in: try tx.table("t"), rowID: 1_500)
            XCTAssertGreaterThan(tx.snapshotPages!.memoizedPageCount, 1)
        }
        try db.read { tx in
            XCTAssertEqual(ObjectIdentifier(tx), first, "the connection's kept transaction is reused")
            XCTAssertGreaterThan(tx.snapshotPages!.memoizedPageCount, 1, "same snapshot: the memo is kept")
        }
        let before = try db.read { tx in tx.snapshotPages!.memoizedPageCount }
        try db.write { tx in try tx.update([.integer(7), .text("new")], in: try tx.table("t"), rowID: 1_500) }
        try db.read { tx in
            // This connection's commit wrote row 1,500's leaf (and the table's
            // right-most leaf, for its counters): the memo keeps the rest.
            let kept = tx.snapshotPages!.memoizedPageCount
            XCTAssertGreaterThan(kept, 0, "a snapshot after this connection's own commit: the memo keeps the pages the commit did not write")
            XCTAssertLessThan(kept, before, "the pages the commit wrote leave the memo")
            XCTAssertEqual(try tx.values(in: try tx.table("t"), rowID: 1_500), [.integer(7), .text("new")])
        }
        // A commit of another connection: this one's snapshot has no lineage
        // from the last, so the memo starts empty.
        let other = try Database(path: "/memo.kura", options: db.options)
        defer { other.close() }
        try other.write { tx in try tx.update([.integer(8), .text("other")], in: try tx.table("t"), rowID: 1_500) }
        try db.read { tx in
            XCTAssertEqual(tx.snapshotPages!.memoizedPageCount, 0, "a snapshot after another connection's commit: the memo starts empty")
            XCTAssertEqual(try tx.values(in: try tx.table("t"), rowID: 1_500), [.integer(8), .text("other")])
        }
    }

    /// Inserts, growing and shrinking updates and deletes (splits, merges,
    /// freed and reused pages), committed by this connection (whose readers
    /// carry their memo across) and now and then by another connection or a
    /// checkpoint (whose snapshots empty it): every read of a random row, and
    /// every scan, gives the model's rows.
    func testAMemoCarriedAcrossOwnCommitsNeverServesAChangedPage() throws {
        let seed = testSeed("ReadReuseTests.carry")
        var g = SplitMix64(seed: seed)
        let options = options()
        let db = try Database(path: "/carry.kura", options: options)
        defer { db.close() }
        let other = try Database(path: "/carry.kura", options: options)
        defer { other.close() }
        try db.write { tx in
            _ = try tx.createTable("t", schema: try TableSchema([ColumnDefinition("n", .integer), ColumnDefinition("s", .text)]))
        }
        var model: [Int64: [Value]] = [:]
        var ids: [Int64] = []   // the model's keys in a replayable order
        func row(_ g: inout SplitMix64) -> [Value] {
            [.integer(Int64(g.next() % 1_000_000)), .text(String(repeating: "z", count: Int(g.next() % 300)))]
        }
        var carried = 0
        for step in 0..<1_500 {
            let writer = g.next() % 10 == 0 ? other : db
            try writer.write { tx in
                let t = try tx.table("t")
                for _ in 0..<(1 + Int(g.next() % 12)) {
                    switch g.next() % 4 {
                    case 0, 1:
                        let v = row(&g)
                        let id = try tx.insert(v, into: t)
                        model[id] = v
                        ids.append(id)
                    case 2:
                        guard !ids.isEmpty else { continue }
                        let id = ids[Int(g.next() % UInt64(ids.count))]
                        let v = row(&g)
                        XCTAssertTrue(try tx.update(v, in: t, rowID: id))
                        model[id] = v
                    default:
                        guard !ids.isEmpty else { continue }
                        let k = Int(g.next() % UInt64(ids.count))
                        XCTAssertTrue(try tx.delete(from: t, rowID: ids[k]))
                        model[ids[k]] = nil
                        ids.swapAt(k, ids.count - 1)
                        ids.removeLast()
                    }
                }
            }
            if step % 97 == 96 { _ = try db.checkpoint() }
            for _ in 0..<4 {
                guard !ids.isEmpty else { break }
                let id = ids[Int(g.next() % UInt64(ids.count))]
                let got = try db.read { tx in
                    if tx.snapshotPages!.memoizedPageCount > 0 { carried += 1 }
                    return try tx.values(in: try tx.table("t"), rowID: id)
                }
                XCTAssertEqual(got, model[id], "row \(id) at step \(step), seed \(seed)")
            }
            if step % 25 == 0 {
                let all = try db.read { tx in
                    let c = try tx.select(TableQuery("t"))
                    var rows: [Int64: [Value]] = [:]
                    while let r = try c.next() { rows[r.rowID] = try r.values() }
                    return rows
                }
                XCTAssertEqual(all, model, "scan at step \(step), seed \(seed)")
            }
        }
        XCTAssertGreaterThan(carried, 1_000, "most reads began with a memo carried over")
        XCTAssertEqual(db.activeSnapshotCount, 0)
    }

    /// Nested reads: each its own transaction and snapshot.
    func testNestedReads() throws {
        let db = try Database(path: "/nested.kura", options: options())
        defer { db.close() }
        try makeTable(db, rows: 100)
        for round in 0..<3 {
            try db.read { outer in
                let t = try outer.table("t")
                let before = try outer.values(in: t, rowID: 5)?[0]
                try db.read { inner in
                    XCTAssertFalse(inner === outer)
                    XCTAssertEqual(try inner.values(in: try inner.table("t"), rowID: 5)?[0], before)
                }
                try db.write { tx in try tx.update([.integer(Int64(round + 100)), .text("w")], in: try tx.table("t"), rowID: 5) }
                try db.read { inner in
                    XCTAssertFalse(inner === outer)
                    XCTAssertEqual(try inner.values(in: try inner.table("t"), rowID: 5)?[0], .integer(Int64(round + 100)))
                    XCTAssertEqual(try db.values(inTable: "t", rowID: 5)?[0], .integer(Int64(round + 100)))
                }
                // The outer transaction keeps its snapshot.
                XCTAssertEqual(try outer.values(in: t, rowID: 5)?[0], before)
                XCTAssertEqual(try outer.values(in: try outer.table("t"), rowID: 5)?[0], before)
            }
            XCTAssertEqual(try db.values(inTable: "t", rowID: 5)?[0], .integer(Int64(round + 100)))
        }
        XCTAssertEqual(db.activeSnapshotCount, 0)
    }

    /// A transaction kept past its closure, or a cursor of it, is never reused.
    func testKeptTransactionIsNotReused() throws {
        let db = try Database(path: "/kept.kura", options: options())
        defer { db.close() }
        try makeTable(db, rows: 100)
        var kept: ReadTransaction?
        try db.read { tx in kept = tx }
        for _ in 0..<3 {
            try db.read { tx in
                XCTAssertFalse(tx === kept)
                XCTAssertNotNil(try tx.values(in: try tx.table("t"), rowID: 1))
            }
        }
        XCTAssertThrowsError(try kept!.table("t")) { XCTAssertEqual(($0 as? KuraError)?.code, .misuse) }
        let cursor = try db.read { tx in try tx.rows(in: try tx.table("t")) }
        try db.write { tx in try tx.update([.integer(9), .text("z")], in: try tx.table("t"), rowID: 1) }
        XCTAssertEqual(try db.read { tx in try tx.values(in: try tx.table("t"), rowID: 1)?[0] }, .integer(9))
        XCTAssertThrowsError(try cursor.next()) { XCTAssertEqual(($0 as? KuraError)?.code, .misuse) }
        XCTAssertThrowsError(try kept!.values(in: try db.read { try $0.table("t") }, rowID: 1)) {
            XCTAssertEqual(($0 as? KuraError)?.code, .misuse)
        }
    }

    /// Readers on several threads (by `read` and `values(inTable:)`) beside a
    /// writer that moves an amount between two rows per commit: each read
    /// transaction sees the total unchanged, and the commit count it sees
    /// never goes back.
    func testReadersOnSeveralThreadsBesideAWriter() throws {
        let seed = testSeed("ReadReuseTests.threads")
        let db = try Database(path: "/threads.kura", options: options())
        defer { db.close() }
        let rows = 200
        try makeTable(db, rows: rows)
        // Row 1 counts commits; rows 2... hold amounts that sum to 0.
        let commits = 400
        let failures = Failures()
        let writer: @Sendable () -> Void = {
            var g = SplitMix64(seed: seed)
            do {
                for c in 1...commits {
                    let a = Int64(g.next() % UInt64(rows - 1)) + 2
                    let b = Int64(g.next() % UInt64(rows - 1)) + 2
                    let x = Int64(g.next() % 100)
                    try db.write { tx in
                        let t = try tx.table("t")
                        func add(_ id: Int64, _ d: Int64) throws {
                            guard var row = try tx.values(in: t, rowID: id), case .integer(let v) = row[0] else { throw KuraError(.notFound, "row \(id)") }
                            row[0] = .integer(v + d)
                            try tx.update(row, in: t, rowID: id)
                        }
                        try add(a, x)
                        try add(b, -x)
                        try add(1, 1)
                        _ = c
                    }
                }
            } catch { failures.add("writer: \(error)") }
            failures.writerDone = true
        }
        let done = DispatchGroup()
        for r in 0..<3 {
            done.enter()
            let t = Thread {
                defer { done.leave() }
                var last: Int64 = 0
                do {
                    // Until the writer is done, then once more: that read
                    // must see every commit.
                    var finalRound = false
                    while true {
                        if finalRound { break }
                        if failures.writerDone { finalRound = true }
                        let (count, total) = try db.read { tx -> (Int64, Int64) in
                            let t = try tx.table("t")
                            guard case .integer(let n)? = try tx.values(in: t, rowID: 1)?[0] else { throw KuraError(.corrupt, "row 1") }
                            var sum: Int64 = 0
                            for id in 2...Int64(rows) {
                                guard case .integer(let v)? = try tx.values(in: t, rowID: id)?[0] else { throw KuraError(.corrupt, "row \(id)") }
                                sum += v
                            }
                            return (n, sum)
                        }
                        if total != 0 { failures.add("reader \(r): total \(total) at commit \(count)") }
                        if count < last { failures.add("reader \(r): commit count went back from \(last) to \(count)") }
                        last = count
                        guard case .integer(let n)? = try db.values(inTable: "t", rowID: 1)?[0] else { throw KuraError(.corrupt, "row 1") }
                        if n < last { failures.add("reader \(r): values(inTable:) went back from \(last) to \(n)") }
                        last = n
                    }
                    if last != Int64(commits) { failures.add("reader \(r): the last read saw \(last) commits of \(commits)") }
                } catch { failures.add("reader \(r): \(error)") }
            }
            t.start()
        }
        done.enter()
        let w = Thread {
            writer()
            done.leave()
        }
        w.start()
        done.wait()
        XCTAssertEqual(failures.all, [], "seed \(seed)")
        XCTAssertEqual(db.activeSnapshotCount, 0)
    }

    /// `close()` from inside another connection's transaction closes that
    /// one; from inside its own, the transaction goes on and the connection
    /// closes when it ends.
    func testCloseFromInsideTransactions() throws {
        let fs = MemoryFileSystem()
        var o = options()
        o.fileSystem = fs
        let a = try Database(path: "/a.kura", options: o)
        let b = try Database(path: "/b.kura", options: o)
        try makeTable(a, rows: 10)
        try makeTable(b, rows: 10)
        try a.read { _ in
            try b.read { _ in }
            b.close()
            XCTAssertThrowsError(try b.read { _ in }) { XCTAssertEqual(($0 as? KuraError)?.code, .misuse) }
            // Closed now: its files are, so nothing holds the store open.
            XCTAssertNoThrow(try Database.destroy(path: "/b.kura", fileSystem: fs))
        }
        try a.read { tx in
            try a.read { inner in
                a.close()
                XCTAssertNotNil(try inner.values(in: try inner.table("t"), rowID: 1))
            }
            // Still inside the outer one: it goes on.
            XCTAssertNotNil(try tx.values(in: try tx.table("t"), rowID: 1))
            XCTAssertThrowsError(try a.read { _ in }) { XCTAssertEqual(($0 as? KuraError)?.code, .misuse) }
        }
        XCTAssertThrowsError(try a.read { _ in }) { XCTAssertEqual(($0 as? KuraError)?.code, .misuse) }
        XCTAssertThrowsError(try a.values(inTable: "t", rowID: 1)) { XCTAssertEqual(($0 as? KuraError)?.code, .misuse) }
        // The deferred close ran when the outer transaction ended.
        XCTAssertNoThrow(try Database.destroy(path: "/a.kura", fileSystem: fs))
    }
}

/// Failures collected from several threads.
private final class Failures: @unchecked Sendable {
    // @unchecked Sendable: `list` is guarded by `lock`.
    private let lock = NSLock()
    private var list: [String] = []
    private var done = false
    /// Set by the writer when it has committed everything.
    var writerDone: Bool {
        get { lock.lock(); defer { lock.unlock() }; return done }
        set { lock.lock(); done = newValue; lock.unlock() }
    }
    func add(_ s: String) { lock.lock(); list.append(s); lock.unlock() }
    var all: [String] { lock.lock(); defer { lock.unlock() }; return list }
}
