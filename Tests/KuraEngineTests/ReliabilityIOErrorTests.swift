// I/O-error loops (RELIABILITY.md, "I/O errors and a full disk"): for N = 1, 2,
// ... the Nth file operation (read, write, sync or truncate) fails with EIO or
// ENOSPC — once, or from then on until cleared — during a write transaction and
// its commit, during a checkpoint, and during recovery (opening the store and its
// first reads). Each time:
//
//   - the failure reaches the caller as a thrown `KuraError` (no trap);
//   - after `clearFaults()`, the same connection and a fresh one see every
//     committed transaction, and the failed one either entirely or not at all
//     (not at all, when the fault fired once: the writer cuts its frames off);
//   - `checkIntegrity()` is clean, and both connections can commit again.
//
// The loop ends at the first N whose fault never fires (the operation needed
// fewer than N calls). Totals are printed.

import Foundation
import XCTest
@testable import KuraEngine

final class ReliabilityIOErrorTests: XCTestCase {
    static let path = "/io.kura"

    struct Tally {
        var loops = 0
        var errorsReported = 0
        var succeededDespiteFault = 0
        var reportedByCheck = 0
        var failedTransactionKept = 0
        var failures: [String] = []
    }

    /// Mixed base workload: a schema table with indexes, overflow values.
    static let workload: Workload = {
        var w = Workloads.indexes(transactions: 14, seed: 11)
        w.add([.createTable("blobs", nil)] + (1...3).map { .insert("blobs", Int64($0), [.blob(payload(700 * $0, seed: UInt64($0)))]) })
        w.add([.update("blobs", 2, [.blob(payload(1500, seed: 99))]), .delete("blobs", 1),
               .insert("blobs", 4, [.text("small")])])
        for k in 0..<4 {
            let id = w.nextID("people")
            w.add([.insert("people", id, [.text("late \(k)"), .text("late\(k)@example.com"), .integer(Int64(k)), .blob(payload(900, seed: UInt64(k)))])])
        }
        // A large last transaction: an index build, overflow values, updates and
        // deletes across many pages.
        var big: [ModelOp] = [.createIndex("by_name", table: "people", columns: [IndexColumn("name")], unique: false)]
        var id = w.nextID("people")
        for k in 0..<12 {
            big.append(.insert("people", id, [.text("big \(k)"), .null, .integer(Int64(k)), .blob(payload(600 + 150 * k, seed: UInt64(k)))]))
            id += 1
        }
        for row in w.model.tables["people"]!.keys.sorted().prefix(6) { big.append(.delete("people", row)) }
        big.append(.update("blobs", 2, [.blob(payload(2500, seed: 7))]))
        w.add(big)
        return w
    }()

    static func options(_ fs: FileSystem, threshold: Int = 1000) -> Database.Options {
        var o = workload.options
        o.fileSystem = fs
        o.checkpointThreshold = threshold
        o.cacheSize = 8 * o.pageSize  // the minimum: transactions read from "disk"
        return o
    }

    static func apply(_ step: WorkloadStep, _ db: Database) throws {
        guard case .transaction(let ops) = step else { return }
        try db.write { tx in for op in ops { try op.apply(to: tx) } }
    }

    static func label(_ code: KuraError.Code, _ persistent: Bool) -> String {
        (code == .diskFull ? "ENOSPC" : "EIO") + (persistent ? " (persistent)" : " (once)")
    }

    /// After the faults are cleared: both the old connection and a new one must see
    /// one of `allowed` states, check clean, and accept a commit. Returns the state.
    @discardableResult
    func verifyAfterClearing(_ db: Database?, _ fs: FaultInjectingFileSystem, allowed: [Int], _ what: String, _ tally: inout Tally) -> Int? {
        let w = Self.workload
        var seen: Int?
        for (name, connection) in [("same connection", db), ("fresh connection", nil)] {
            do {
                let c = try connection ?? Database(path: Self.path, options: Self.options(fs))
                var state = try StoreState.read(c)
                state.tables["probe"] = nil
                guard let k = allowed.first(where: { w.states[$0] == state }) else {
                    let matched = w.states.indices.filter { w.states[$0] == state }
                    tally.failures.append("\(what), \(name): state is not transaction \(allowed) (matches \(matched))")
                    return nil
                }
                if let s = seen, s != k { tally.failures.append("\(what): the two connections disagree (\(s) vs \(k))") }
                seen = k
                let problems = try c.read { tx in try tx.checkIntegrity() }
                if !problems.isEmpty { tally.failures.append("\(what), \(name): integrity \(problems.prefix(3))") }
                // Usable: a commit works and is seen.
                let before = try c.read { tx in try tx.tableExists("probe") ? try tx.rowCount(try tx.table("probe")) : 0 }
                try c.write { tx in
                    let t = try tx.tableExists("probe") ? try tx.table("probe") : try tx.createTable("probe")
                    try tx.insert([.text(name)], into: t)
                }
                let after = try c.read { tx in try tx.rowCount(try tx.table("probe")) }
                if after != before + 1 { tally.failures.append("\(what), \(name): probe commit not seen") }
                if connection == nil { c.close() }
            } catch {
                tally.failures.append("\(what), \(name): \(error)")
                return nil
            }
        }
        return seen
    }

    static let long = ProcessInfo.processInfo.environment["KURA_LONG"] == "1"

    /// Runs `body` under a fault at N = 1, 2, ... until the fault no longer fires:
    /// every N with KURA_LONG=1; in `swift test` every N up to 40, then every
    /// third (the suite must stay under ten minutes on two cores).
    func loop(_ phase: String, _ body: (Int, KuraError.Code, Bool, inout Tally) throws -> Bool) rethrows -> Tally {
        var tally = Tally()
        for code in [KuraError.Code.io, .diskFull] {
            for persistent in [false, true] {
                var n = 1
                while try body(n, code, persistent, &tally) {
                    tally.loops += 1
                    n += Self.long || n < 40 ? 1 : 3
                    if n > 5_000 { tally.failures.append("\(phase): loop did not end"); break }
                }
            }
        }
        print("I/O-error loop, \(phase): \(tally.loops) injected faults (EIO and ENOSPC, once and persistent), \(tally.errorsReported) reported as KuraError, \(tally.reportedByCheck) reported by checkIntegrity, \(tally.succeededDespiteFault) absorbed, \(tally.failedTransactionKept) failed commits later adopted from the log, \(tally.failures.count) failures")
        for f in tally.failures.prefix(10) { XCTFail(f) }
        return tally
    }

    /// A fault during a write transaction (its reads) and its commit (log writes,
    /// sync, the cut-back of failed frames, the first log reset).
    func testFaultsDuringCommit() throws {
        let w = Self.workload
        // Fault in the first transaction (creates the log), a small later one,
        // and the large last one, also with an automatic checkpoint after it.
        for (target, threshold) in [(1, 1000), (w.transactionCount - 1, 1000), (w.transactionCount, 1000), (w.transactionCount, 10)] {
            _ = try loop("commit of transaction \(target)\(threshold < 1000 ? " + automatic checkpoint" : "")") { n, code, persistent, tally in
                let fs = FaultInjectingFileSystem()
                let db = try Database(path: Self.path, options: Self.options(fs, threshold: threshold))
                for step in w.steps.prefix(target - 1) { try Self.apply(step, db) }
                fs.failOperation(nil, after: n, with: code, persistent: persistent)
                var failed = false
                do { try Self.apply(w.steps[target - 1], db) } catch {
                    failed = true
                    if error is KuraError { tally.errorsReported += 1 } else { tally.failures.append("N=\(n): not a KuraError: \(error)") }
                }
                let fired = !fs.faultPending
                fs.clearFaults()
                if !fired { return false }
                if !failed { tally.succeededDespiteFault += 1 }
                let what = "commit \(target), \(Self.label(code, persistent)) at operation \(n)"
                // A fault that fired once is always cut off; a persistent one can
                // also block the cut-back, and then the log decides.
                let allowed = !failed ? [target] : persistent ? [target - 1, target] : [target - 1]
                if let k = verifyAfterClearing(db, fs, allowed: allowed, what, &tally), failed && k == target { tally.failedTransactionKept += 1 }
                db.close()
                return true
            }
        }
    }

    /// A fault during an explicit checkpoint (log sync, page copies, file sync,
    /// log reset): committed transactions stay, from the log or the file.
    func testFaultsDuringCheckpoint() throws {
        let w = Self.workload
        _ = try loop("checkpoint") { n, code, persistent, tally in
            let fs = FaultInjectingFileSystem()
            let db = try Database(path: Self.path, options: Self.options(fs))
            for step in w.steps { try Self.apply(step, db) }
            fs.failOperation(nil, after: n, with: code, persistent: persistent)
            do { try db.checkpoint() } catch {
                if error is KuraError { tally.errorsReported += 1 } else { tally.failures.append("N=\(n): not a KuraError: \(error)") }
            }
            let fired = !fs.faultPending
            fs.clearFaults()
            if !fired { return false }
            let what = "checkpoint, \(Self.label(code, persistent)) at operation \(n)"
            verifyAfterClearing(db, fs, allowed: [w.transactionCount], what, &tally)
            // And a checkpoint now completes.
            do {
                XCTAssertTrue(try db.checkpoint())
                XCTAssertEqual(db.logFrameCount, 0)
                let problems = try db.read { tx in try tx.checkIntegrity() }
                if !problems.isEmpty { tally.failures.append("\(what): integrity after a second checkpoint \(problems.prefix(3))") }
            } catch { tally.failures.append("\(what): second checkpoint: \(error)") }
            db.close()
            return true
        }
    }

    /// A fault while opening a store whose log holds committed transactions (as a
    /// crash leaves it) and reading it for the first time.
    func testFaultsDuringRecovery() throws {
        let w = Self.workload
        let setup = FaultInjectingFileSystem()
        let writer = try Database(path: Self.path, options: Self.options(setup))
        for step in w.steps { try Self.apply(step, writer) }
        // Two crashed stores: every transaction still in the log, and a
        // checkpoint stopped halfway through copying pages into the store file.
        let logged = setup.currentImage()
        XCTAssertGreaterThan(writer.logFrameCount, 0)
        final class Box: @unchecked Sendable { var image: MemoryFileSystem? }
        let halfway = Box()
        setup.setMutationHook { op, k in if k == 20 { halfway.image = setup.currentImage() } }
        XCTAssertTrue(try writer.checkpoint())
        setup.setMutationHook(nil)
        writer.close()
        for (name, image) in [("log", logged), ("half-done checkpoint", halfway.image!)] {
        _ = loop("recovery (\(name))") { n, code, persistent, tally in
            let fs = FaultInjectingFileSystem(restoring: image)
            fs.failOperation(nil, after: n, with: code, persistent: persistent)
            var db: Database?
            var checkProblems = -1
            do {
                db = try Database(path: Self.path, options: Self.options(fs))
                let state = try StoreState.read(db!)
                if state != w.states.last! { tally.failures.append("recovery N=\(n): wrong state read under fault") }
                checkProblems = try db!.read { tx in try tx.checkIntegrity() }.count
            } catch {
                if error is KuraError { tally.errorsReported += 1 } else { tally.failures.append("N=\(n): not a KuraError: \(error)") }
            }
            let fired = !fs.faultPending
            fs.clearFaults()
            if !fired { return false }
            if checkProblems == 0 { tally.succeededDespiteFault += 1 } else if checkProblems > 0 { tally.reportedByCheck += 1 }
            let what = "recovery, \(Self.label(code, persistent)) at operation \(n)"
            verifyAfterClearing(db, fs, allowed: [w.transactionCount], what, &tally)
            db?.close()
            return true
        }
        }
    }
}
