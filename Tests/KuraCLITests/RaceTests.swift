// Processes racing on one store through the `kura` binary (issue "Nothing lost,
// nothing silently wrong").
//
// Regression: two `kura import --batch` processes started at once on a new store
// path: one failed with "a table or index named ... already exists" (it had read
// the entity's absence in one transaction and created it in another) and then
// deleted the store file, while the other went on committing into the unlinked
// file and printed `committed 30000`: every acknowledged row was lost.
//
// `KURA_RACE_ROUNDS=N swift test --filter RaceTests` runs more rounds than the
// default (RELIABILITY.md, "Longer runs").

import Foundation
import XCTest

final class RaceTests: XCTestCase {
    static var rounds: Int { ProcessInfo.processInfo.environment["KURA_RACE_ROUNDS"].flatMap(Int.init) ?? 2 }

    /// What one importer printed, and how it ended.
    struct Outcome {
        var status: Int32
        var committed: Int
        var stderr: String
    }

    /// Runs `kura ARGS` for each argument list at the same moment.
    func runTogether(_ argLists: [[String]], cwd: String) -> [KuraTool.Result?] {
        let results = ResultBox(count: argLists.count)
        DispatchQueue.concurrentPerform(iterations: argLists.count) { i in
            results.set(i, try? KuraTool.run(argLists[i], cwd: cwd))
        }
        return results.values
    }

    /// The last `committed N` line of an importer's output.
    func committed(_ r: KuraTool.Result) -> Int {
        r.stdout.split(separator: "\n").last { $0.hasPrefix("committed ") }.flatMap { Int($0.dropFirst(10)) } ?? 0
    }

    func csv(_ rows: Range<Int>, tag: String) -> String {
        var s = "n:int64,who\n"
        for i in rows { s += "\(i),\(tag)\n" }
        return s
    }

    /// Both importers succeed (or one gets `busy`, exit 3, having committed
    /// nothing it did not report), the store exists, checks clean, and holds
    /// exactly the rows each importer reported committed.
    func race(existing: Bool) throws {
        for round in 0..<Self.rounds {
            let dir = try TemporaryDirectory()
            try dir.write("a.csv", csv(0..<3000, tag: "a"))
            try dir.write("b.csv", csv(0..<3000, tag: "b"))
            var before = 0
            if existing {
                try dir.write("seed.csv", csv(0..<10, tag: "seed"))
                XCTAssertEqual(try KuraTool.run(["import", "s.kura", "Item", "seed.csv"], cwd: dir.path).status, 0)
                before = 10
            }
            let results = runTogether([
                ["import", "s.kura", "Item", "a.csv", "--batch", "250"],
                ["import", "s.kura", "Item", "b.csv", "--batch", "250", "--index", "n"],
            ], cwd: dir.path)
            var expected = ["a": 0, "b": 0, "seed": before]
            for (tag, r) in zip(["a", "b"], results) {
                guard let r else { return XCTFail("round \(round): could not run kura") }
                XCTAssertTrue(r.status == 0 || (r.status == 3 && r.stderr.contains("busy")),
                              "round \(round), importer \(tag): exit \(r.status): \(r.stderr)")
                expected[tag] = committed(r)
                if r.status == 0 { XCTAssertEqual(committed(r), 3000, "round \(round), importer \(tag)") }
            }
            XCTAssertTrue(dir.exists("s.kura"), "round \(round): the store file was removed")
            let check = try KuraTool.run(["check", "s.kura"], cwd: dir.path)
            XCTAssertEqual(check.status, 0, "round \(round): \(check.stdout)\(check.stderr)")
            for (tag, n) in expected {
                let q = try KuraTool.run(["query", "s.kura", "Item", "who == '\(tag)'", "--count"], cwd: dir.path)
                XCTAssertEqual(q.stdout, "\(n)\n", "round \(round): rows of importer \(tag)")
            }
        }
    }

    func testTwoImportersRacingOnANewStore() throws { try race(existing: false) }

    func testTwoImportersRacingOnAnExistingStore() throws { try race(existing: true) }

    /// Regression: `kura compact` renamed a new file over the store, and a process
    /// that had the store open kept committing into the old, unlinked file, so
    /// every commit it acknowledged afterwards was lost. Compaction now works in
    /// place: an importer committing in batches while compactions run loses
    /// nothing.
    func testCompactWhileAnotherProcessWrites() throws {
        for round in 0..<Self.rounds {
            let dir = try TemporaryDirectory()
            try dir.write("seed.csv", csv(0..<2000, tag: "seed"))
            XCTAssertEqual(try KuraTool.run(["import", "s.kura", "Item", "seed.csv"], cwd: dir.path).status, 0)
            try dir.write("w.csv", csv(5000..<9000, tag: "w"))
            let results = runTogether([
                ["import", "s.kura", "Item", "w.csv", "--batch", "100"],
                ["compact", "s.kura"], ["compact", "s.kura"], ["compact", "s.kura"],
            ], cwd: dir.path)
            guard let writer = results[0] else { return XCTFail("round \(round): could not run kura") }
            XCTAssertEqual(writer.status, 0, "round \(round): \(writer.stderr)")
            for r in results.dropFirst() {
                guard let r else { return XCTFail("round \(round): could not run kura") }
                XCTAssertTrue(r.status == 0 || r.stderr.contains("busy"), "round \(round): compact: \(r.stderr)")
            }
            XCTAssertEqual(try KuraTool.run(["query", "s.kura", "Item", "who == 'w'", "--count"], cwd: dir.path).stdout,
                           "\(committed(writer))\n", "round \(round)")
            XCTAssertEqual(committed(writer), 4000)
            XCTAssertEqual(try KuraTool.run(["check", "s.kura"], cwd: dir.path).status, 0)
        }
    }
}

/// Results written by concurrent closures, one slot each.
final class ResultBox: @unchecked Sendable {
    // @unchecked Sendable: `lock` guards `values`.
    private let lock = NSLock()
    private(set) var values: [KuraTool.Result?]
    init(count: Int) { values = Array(repeating: nil, count: count) }
    func set(_ i: Int, _ r: KuraTool.Result?) { lock.lock(); values[i] = r; lock.unlock() }
}
