import Foundation
import XCTest
@testable import KuraEngine

/// Long random operation sequences checked against a plain Dictionary, with
/// reopen, rollback, checkpoints, big (overflow) values and table drops mixed in.
final class ModelBasedTests: XCTestCase {
    struct Rollback: Error {}

    /// The reference model of one table: rows plus their IDs kept sorted.
    struct TableModel {
        var rows: [Int64: [Value]] = [:]
        var keys: [Int64] = []
        var count: Int { rows.count }

        func position(_ id: Int64) -> Int {
            var lo = 0, hi = keys.count
            while lo < hi { let m = (lo + hi) / 2; if keys[m] < id { lo = m + 1 } else { hi = m } }
            return lo
        }
        subscript(id: Int64) -> [Value]? {
            get { rows[id] }
            set {
                let had = rows[id] != nil
                rows[id] = newValue
                if newValue != nil && !had { keys.insert(id, at: position(id)) }
                if newValue == nil && had { keys.remove(at: position(id)) }
            }
        }
        func randomKey(_ rng: inout SplitMix64) -> Int64? {
            keys.isEmpty ? nil : keys[Int(rng.next() % UInt64(keys.count))]
        }
        /// Up to `n` IDs from `start` on (or down, reversed).
        func stretch(from start: Int64?, reverse: Bool, _ n: Int) -> [Int64] {
            if reverse {
                let end = start.map { position($0 + 1) } ?? keys.count
                return Array(keys[max(0, end - n)..<end].reversed())
            }
            let begin = start.map { position($0) } ?? 0
            return Array(keys[begin..<min(keys.count, begin + n)])
        }
    }

    func run(operations: Int, pageSize: Int, cacheBytes: Int, fs: FileSystem, path: String, seed: UInt64) throws {
        var rng = SplitMix64(seed: seed)
        var o = Database.Options()
        o.fileSystem = fs
        o.pageSize = pageSize
        o.cacheSize = cacheBytes
        o.durability = .off
        o.checkpointThreshold = 200
        var db: Database? = try Database(path: path, options: o)
        var model: [String: TableModel] = [:]
        var nextRowID: [String: Int64] = [:]
        let names = ["a", "b", "c"]
        var done = 0
        var checks = 0
        var reopens = 0, rollbacks = 0, bigValues = 0, maxRows = 0

        func randomValues() -> [Value] {
            let n = Int(rng.next() % 5)
            return (0..<n).map { _ in
                switch rng.next() % 7 {
                case 0: return .null
                case 1: return .integer(Int64(bitPattern: rng.next()) >> Int64(rng.next() % 64))
                case 2: return .double(Double(Int64(rng.next() % 100000)) / 7)
                case 3: return .bool(rng.next() % 2 == 0)
                case 4: return .blob((0..<Int(rng.next() % 40)).map { _ in UInt8(truncatingIfNeeded: rng.next()) })
                case 5 where rng.next() % 20 == 0:
                    bigValues += 1
                    return .text(String(repeating: "é", count: 1000 + Int(rng.next() % 3000)))  // overflow
                default: return .text("v\(rng.next() % 1000)")
                }
            }
        }

        while done < operations {
            let action = rng.next() % 100
            if action < 2 {
                // Reopen.
                db!.close()
                db = nil
                db = try Database(path: path, options: o)
                reopens += 1
                continue
            }
            if action < 3 {
                _ = try db!.checkpoint()
                continue
            }
            let rollback = action < 10
            let batch = 1 + Int(rng.next() % 40)
            var staged = model
            var stagedNext = nextRowID
            do {
                try db!.write { tx in
                    for _ in 0..<batch {
                        done += 1
                        let name = names[Int(rng.next() % 3)]
                        if staged[name] == nil {
                            try tx.createTable(name)
                            staged[name] = TableModel()
                            stagedNext[name] = 1
                            continue
                        }
                        let t = try tx.table(name)
                        let rows = staged[name]!
                        let op = rng.next() % 100
                        if op < 40 {
                            let v = randomValues()
                            let id = try tx.insert(v, into: t)
                            XCTAssertEqual(id, stagedNext[name]!)
                            XCTAssertNil(rows[id])
                            staged[name]![id] = v
                            stagedNext[name] = id + 1
                        } else if op < 45 {
                            let id = Int64(rng.next() % 3000) - 100
                            let v = randomValues()
                            if rows[id] != nil {
                                XCTAssertThrowsError(try tx.insert(v, into: t, rowID: id)) { e in
                                    XCTAssertEqual((e as? KuraError)?.code, .alreadyExists)
                                }
                            } else {
                                try tx.insert(v, into: t, rowID: id)
                                staged[name]![id] = v
                                if id >= stagedNext[name]! { stagedNext[name] = id + 1 }
                            }
                        } else if op < 55 {
                            let id = rows.randomKey(&rng) ?? 1
                            let v = randomValues()
                            XCTAssertEqual(try tx.update(v, in: t, rowID: id), rows[id] != nil)
                            if rows[id] != nil { staged[name]![id] = v }
                        } else if op < 73 {
                            let id = rng.next() % 4 == 0 ? Int64(rng.next() % 3000) : (rows.randomKey(&rng) ?? 1)
                            XCTAssertEqual(try tx.delete(from: t, rowID: id), rows[id] != nil)
                            staged[name]![id] = nil
                        } else if op < 90 {
                            let id = rows.randomKey(&rng) ?? Int64(rng.next() % 100)
                            XCTAssertEqual(try tx.values(in: t, rowID: id), rows[id])
                        } else if op < 99 {
                            // Scan a stretch, forward or backward, from a random start.
                            let reverse = rng.next() % 2 == 0
                            let start: Int64? = rng.next() % 3 == 0 ? nil : Int64(rng.next() % 3000) - 100
                            let c = try tx.rows(in: t, from: start, reverse: reverse)
                            let expected = rows.stretch(from: start, reverse: reverse, 31)
                            for want in expected.prefix(30) {
                                let row = try c.next()
                                XCTAssertEqual(row?.rowID, want)
                                XCTAssertEqual(try row?.values(), rows[want])
                            }
                            if expected.count <= 30 { XCTAssertNil(try c.next()) }
                        } else if rng.next() % 100 == 0 {
                            try tx.dropTable(name)
                            staged[name] = nil
                            stagedNext[name] = nil
                        }
                    }
                    if rollback { throw Rollback() }
                }
                model = staged
                nextRowID = stagedNext
            } catch is Rollback {
                // The model keeps its pre-transaction state.
                rollbacks += 1
            }
            maxRows = max(maxRows, model.values.map(\.count).max() ?? 0)
            checks += 1
            if checks % 1000 == 0 {
                try verify(db!, model)
            }
        }
        try verify(db!, model)
        db!.close()
        db = try Database(path: path, options: o)
        try verify(db!, model)
        // The run must really have exercised what it claims to.
        // (Thresholds scale with the run: 50, 100, 100 at 100,000 operations.)
        XCTAssertGreaterThan(reopens, operations / 2_000)
        XCTAssertGreaterThan(rollbacks, operations / 1_000)
        XCTAssertGreaterThan(bigValues, operations / 1_000)
        XCTAssertGreaterThan(maxRows, 1000)
    }

    func verify(_ db: Database, _ model: [String: TableModel]) throws {
        try db.read { tx in
            XCTAssertEqual(try tx.tableNames(), model.keys.sorted())
            for (name, rows) in model {
                let t = try tx.table(name)
                XCTAssertEqual(try tx.rowCount(t), rows.count, "row count of \(name)")
                let c = try tx.rows(in: t)
                var seen = 0
                while let r = try c.next() {
                    XCTAssertEqual(try r.values(), rows[r.rowID], "row \(r.rowID) of \(name)")
                    seen += 1
                }
                XCTAssertEqual(seen, rows.count)
            }
            let problems = try tx.checkIntegrity()
            XCTAssertEqual(problems, [], "integrity: \(problems)")
        }
    }

    /// Operations per run: 40,000 by default (the suite's time budget),
    /// 100,000 with KURA_LONG=1 (RELIABILITY.md, "Longer runs").
    static let operations = ProcessInfo.processInfo.environment["KURA_LONG"] == "1" ? 100_000 : 40_000

    /// The seed of a run: `fixed`, unless KURA_SEED=<n> replays another (printed).
    static func seed(_ fixed: UInt64, _ test: String) -> UInt64 {
        let seed = ProcessInfo.processInfo.environment["KURA_SEED"].flatMap { UInt64($0) } ?? fixed
        print("ModelBasedTests.\(test) seed \(seed) (replay with KURA_SEED=\(seed)), \(operations) operations")
        return seed
    }

    func testRandomOperations4KPages() throws {
        let dir = try TemporaryDirectory()
        try run(operations: Self.operations, pageSize: 4096, cacheBytes: 4 << 20, fs: PosixFileSystem(), path: dir.path + "/model.kura",
                seed: Self.seed(1, "testRandomOperations4KPages"))
    }

    func testRandomOperationsSmallPagesTinyCache() throws {
        try run(operations: Self.operations, pageSize: 512, cacheBytes: 16 * 512, fs: MemoryFileSystem(), path: "/model.kura",
                seed: Self.seed(2, "testRandomOperationsSmallPagesTinyCache"))
    }
}
