// Crash matrix (RELIABILITY.md, "Power loss"): every workload of `Workloads` runs
// on a FaultInjectingFileSystem whose mutation hook stops before each write, sync
// and truncate — each one a point where power can fail. At a sampled point the
// hook takes power-loss images (unsynced writes dropped, reordered, the last one
// torn at 512 bytes), recovers each in a fresh connection and checks:
//
//   - every acknowledged commit is present (durability `full`);
//   - nothing unacknowledged is: the store equals the model after the last
//     acknowledged transaction, or after the one in flight, never anything else
//     (so the in-flight transaction is all there or not at all);
//   - `checkIntegrity()` is clean; at every fourth point, also after a
//     checkpoint and one more commit;
//   - the change counter is the one the matching state had when it was
//     acknowledged (the transaction in flight: one more).
//
// A dry run first counts the crash points of a workload; the default run samples
// 1,500 (point, image seed) pairs per workload; KURA_LONG=1 checks every point
// with 8 image seeds each. The totals are printed.

import Foundation
import XCTest
@testable import KuraEngine

final class ReliabilityCrashMatrixTests: XCTestCase {
    static let long = ProcessInfo.processInfo.environment["KURA_LONG"] == "1"
    // 1,000 keeps the whole `swift test` run inside its 10-minute budget on 2 cores;
    // `KURA_LONG=1` checks every point (RELIABILITY.md, "Longer runs").
    static let sampledPoints = 1_000
    static let seedsPerPoint = long ? 8 : 4

    struct Result {
        var name: String
        var crashPoints = 0
        var checked = 0
        var deep = 0
        var failures: [String] = []
        var seconds = 0.0
    }

    /// Collects results from the mutation hook (which runs on the workload's thread).
    final class Recorder: @unchecked Sendable {
        var result: Result
        init(_ name: String) { result = Result(name: name) }
    }

    func run(_ workload: Workload, normalMode: Bool = false) throws -> Result {
        var w = workload
        if normalMode {
            w.durability = .normal
            w.name += " (normal)"
        }
        return try run(w)
    }

    private func run(_ w: Workload) throws -> Result {
        let path = "/crash.kura"
        let start = Date()

        // Dry run: count the crash points.
        let dry = FaultInjectingFileSystem()
        let counter = Recorder(w.name)
        dry.setMutationHook { _, _ in counter.result.crashPoints += 1 }
        try WorkloadRunner().run(w, path: path, fs: dry)
        let points = counter.result.crashPoints + 1  // + the state after the last call

        // Choose (point, seed) pairs: all of them in long mode, else a sample.
        var rng = SplitMix64(seed: 0xC0FFEE ^ UInt64(w.name.utf8.count))
        var sample: [Int: [UInt64]] = [:]
        let total = points * Self.seedsPerPoint
        if Self.long || total <= Self.sampledPoints {
            for p in 1...points { sample[p] = (0..<UInt64(Self.seedsPerPoint)).map { $0 &* 7919 &+ UInt64(p) } }
        } else {
            var chosen = Set<Int>()
            while chosen.count < Self.sampledPoints { chosen.insert(Int(rng.next() % UInt64(total))) }
            for c in chosen { sample[c / Self.seedsPerPoint + 1, default: []].append(UInt64(c % Self.seedsPerPoint) &* 7919 &+ UInt64(c)) }
        }

        let plan = sample
        let fs = FaultInjectingFileSystem()
        let runner = WorkloadRunner()
        let rec = Recorder(w.name)
        rec.result.crashPoints = points
        let check: @Sendable (Int, FaultInjectingFileSystem.Operation?) -> Void = { point, op in
            guard let seeds = plan[point] else { return }
            let allowed = runner.allowedStates(w)
            for seed in seeds {
                let image = fs.powerLossImage(seed: seed)
                let deep = rec.result.checked % 4 == 0
                rec.result.checked += 1
                if deep { rec.result.deep += 1 }
                if let failure = verifyRecovered(image, path: path, w, allowed: allowed, deep: deep,
                                                 expectedCounter: { runner.expectedCounter($0) }) {
                    rec.result.failures.append("point \(point) (before \(op.map { "\($0)" } ?? "end")) seed \(seed), \(runner.acknowledged) acknowledged\(runner.inFlight ? " + 1 in flight" : ""): \(failure)")
                }
            }
        }
        let seen = Recorder(w.name)
        fs.setMutationHook { op, n in
            seen.result.crashPoints = n
            check(n, op)
        }
        try runner.run(w, path: path, fs: fs)
        fs.setMutationHook(nil)
        check(points, nil)
        if seen.result.crashPoints + 1 != points { rec.result.failures.append("the run had \(seen.result.crashPoints + 1) crash points, the dry run \(points): the workload is not deterministic") }
        rec.result.seconds = Date().timeIntervalSince(start)
        return rec.result
    }

    func testCrashMatrix() throws {
        var results: [Result] = []
        for w in Workloads.all { results.append(try run(w)) }
        // `normal` durability: a crash may lose the commits since the last
        // checkpoint, but the store is always some earlier committed state.
        results.append(try run(Workloads.checkpoints(), normalMode: true))
        // 4096-byte pages: power loss tears inside a page (at 512 bytes).
        var big = Workloads.checkpoints(transactions: 120, seed: 7)
        big.pageSize = 4096
        big.name += " (4 KiB pages)"
        results.append(try run(big))

        var report = "crash matrix (\(Self.long ? "long: every point" : "sampled") , \(Self.seedsPerPoint) image seeds per point):\n"
        for r in results {
            report += "  \(r.name.padding(toLength: 34, withPad: " ", startingAt: 0)) \(String(r.crashPoints).leftPad(6)) crash points, \(String(r.checked).leftPad(6)) images recovered (\(r.deep) deep), \(r.failures.count) failures, \(String(format: "%.1f", r.seconds)) s\n"
        }
        let checked = results.reduce(0) { $0 + $1.checked }
        let failures = results.reduce(0) { $0 + $1.failures.count }
        report += "  total: \(results.count) workloads x points = \(checked) recovered images, \(failures) failures"
        print(report)
        for r in results {
            for f in r.failures.prefix(5) { XCTFail("\(r.name): \(f)") }
            XCTAssertGreaterThanOrEqual(r.checked, Self.long ? r.crashPoints : 1_000, r.name)
        }
    }

    /// Power loss at every sampled point of transactions that spill pages to
    /// the log before they commit, and of rolled-back ones: recovery never
    /// replays a spilled frame without its transaction's commit frame.
    func testCrashMatrixWhileSpilling() throws {
        let w = Workloads.spills()
        let dry = WorkloadRunner()
        try dry.run(w, path: "/spill-dry.kura", fs: FaultInjectingFileSystem())
        XCTAssertGreaterThan(dry.spilledPages, 100, "the workload does not spill: it tests nothing new")
        let r = try run(w)
        print("crash matrix, spilling: \(r.crashPoints) crash points, \(r.checked) images recovered (\(r.deep) deep), \(r.failures.count) failures, \(dry.spilledPages) pages spilled")
        for f in r.failures.prefix(5) { XCTFail("\(r.name): \(f)") }
        XCTAssertGreaterThanOrEqual(r.checked, 1_000)
    }

    /// The matrix can fail: with durability `off` nothing is synced, and power
    /// loss must lose acknowledged commits or corrupt the store.
    func testMatrixDetectsLostCommitsWithoutSync() throws {
        var w = Workloads.updates(transactions: 40)
        w.durability = .off
        let r = try run(w)
        XCTAssertGreaterThan(r.failures.count, 0, "durability off survived every power loss: the matrix checks nothing")
    }
}

extension String {
    func leftPad(_ n: Int) -> String { count >= n ? self : String(repeating: " ", count: n - count) + self }
}
