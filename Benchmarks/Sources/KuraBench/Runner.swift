// Runner: runs the workloads on every engine, alternating, and records samples.
//
// One round per run. In a round every engine gets a fresh store in the same
// temporary directory, and the engines run in lock step: each step below runs
// on every engine in turn (the order rotates from round to round, so no engine
// always goes first) before the next step starts; then the object layer's rows
// (KuraObjectsBench.swift). The steps:
//
//   W1 insert → checkpoint, W10 size → W1b index → W2 → W3 → W4 → W5 → W13
//   → checkpoint, W11 (child process on this store) → W6 → W7 → checkpoint,
//   W10 size → compaction, W10 size → W9 (5 s, in one-second slices, the
//   engines taking turns) → close;
//   then W8 on a second fresh store opened with durability full.
//
// W6 and W7 change the table, so they come after the read-only workloads; W9
// adds rows, so it comes last. Every workload returns a check value; the values
// must agree across engines (the run stops with an error if they do not).

import Foundation

/// Every contender, in the order of the first round.
var allEngines: [any BenchEngine.Type] { [KuraEngineBench.self, SQLiteBench.self, GRDBBench.self, GRDBIdiomaticBench.self] }

struct RunOptions {
    var rows = 1_000_000
    var runs = 3
    var engines: [String] = allEngines.map { $0.name } + [KuraObjectsBench.name]
    var w9Seconds = 5.0
    var directory: String?
    var jsonPath: String?
    var scale = false
    var w11 = true
    /// Only W12 (FRCBench.swift).
    var frc = false
    var findOrCreate = false
    /// Only the relationship queries (RelationsBench.swift).
    var relations = false
    /// Only the import row (ImportBench.swift), with this kura executable if given.
    var importRow = false
    var kuraPath: String?
    /// --scale sizes, if given (else N/100, N/10, N).
    var scaleSizes: [Int]?
}

struct CheckMismatch: Error, CustomStringConvertible {
    let description: String
}

final class Runner {
    let options: RunOptions
    let results = Results()
    let directory: String
    /// Workloads that threw instead of finishing (reported after the table).
    var failures: [String] = []
    /// Check values of the current round: workload → engine → value.
    private var checks: [String: [String: Int]] = [:]

    static let printTimes = ProcessInfo.processInfo.environment["KURA_BENCH_TIMES"] != nil

    init(options: RunOptions, directory: String) {
        self.options = options
        self.directory = directory
    }

    var engines: [any BenchEngine.Type] { allEngines.filter { options.engines.contains($0.name) } }

    /// The engine order of round `r`: rotated by `r`.
    func order(_ r: Int) -> [any BenchEngine.Type] {
        let e = engines
        return e.indices.map { e[($0 + r) % e.count] }
    }

    func check(_ workload: String, _ engine: String, _ value: Int) throws {
        checks[workload, default: [:]][engine] = value
        let values = Set(checks[workload]!.values)
        if values.count > 1 {
            throw CheckMismatch(description: "engines disagree on \(workload): \(checks[workload]!)")
        }
    }

    /// Times `body`, records the sample, checks its value.
    @discardableResult
    func measure(_ workload: String, _ engine: String, rows: Int, expect: Int? = nil, _ body: () throws -> Int) throws -> Int {
        let start = now()
        let (value, seconds) = try timed(body)
        results.add(workload, engine, rows: rows, .seconds, seconds)
        // With KURA_BENCH_TIMES set, the workload's CLOCK_MONOTONIC interval, to
        // cut a profile recorded with `perf record -k mono` (`perf report --time A,B`).
        let interval = Self.printTimes ? String(format: " [monotonic %.6f,%.6f]", start, start + seconds) : ""
        progress("  \(engine) \(workload): \(formatSeconds(seconds)) (check \(value))\(interval)")
        try check(workload, engine, value)
        if let expect, value != expect {
            throw CheckMismatch(description: "\(engine) \(workload) returned \(value), expected \(expect)")
        }
        return value
    }

    // MARK: The full run

    func runAll(_ data: Dataset) throws {
        for r in 0..<options.runs {
            checks = [:]
            progress("round \(r + 1) of \(options.runs)")
            try runRound(order(r), data, round: r)
            // The object layer's rows compare with the engines' rows of the same
            // round; they run after the engines' lock-step steps, first or last
            // by the round's rotation.
            if options.engines.contains(KuraObjectsBench.name) {
                let path = directory + "/\(KuraObjectsBench.name)-\(data.rows).kura"
                removeStore(path)
                defer { removeStore(path) }
                try KuraObjectsBench.run(self, data, path: path, w11: options.w11)
            }
        }
    }

    /// One engine's store in a round.
    private struct Contender {
        let name: String
        let type: any BenchEngine.Type
        let path: String
        let engine: any BenchEngine
    }

    /// One round, in lock step: every engine opens a fresh store, then each
    /// step runs on every engine in turn (in the round's rotated order) before
    /// the next step starts. So Kura's W3 and SQLite's W3 run seconds apart,
    /// not a whole sequence apart: on a shared machine whose speed swings
    /// twofold from minute to minute, the two samples of a ratio see the same
    /// machine. W9 runs in one-second slices, the engines taking turns; W8
    /// runs engine after engine at the end.
    func runRound(_ order: [any BenchEngine.Type], _ data: Dataset, round r: Int) throws {
        let n = data.rows
        var contenders: [Contender] = []
        defer { for c in contenders { try? c.engine.close(); removeStore(c.path) } }
        for E in order {
            let path = directory + "/\(E.name)-\(n).db"
            removeStore(path)
            contenders.append(Contender(name: E.name, type: E, path: path, engine: try E.init(path: path, sync: .normal)))
        }
        func each(_ body: (Contender) throws -> Void) throws { for c in contenders { try body(c) } }
        func size(_ c: Contender) -> Double { Double(StoreSize(path: c.path, companions: c.type.companions).total) }

        try each { c in try measure("W1", c.name, rows: n, expect: n) { try c.engine.insertAll(data) } }
        try each { c in
            try c.engine.checkpoint()
            results.add("W10 after W1", c.name, rows: n, .bytes, size(c))
        }
        try each { c in try measure("W1b", c.name, rows: n) { try c.engine.createIndex(); return 0 } }
        try each { c in try measure("W2", c.name, rows: n) { try c.engine.lookups(data.lookupIDs) } }
        try each { c in try measure("W3", c.name, rows: n, expect: n) { try c.engine.equalityQueries(data.equalityKeys) } }
        try each { c in try measure("W4", c.name, rows: n) { try c.engine.rangeQueries(data.rangeStarts) } }
        try each { c in try measure("W5", c.name, rows: n, expect: data.expectedContains) { try c.engine.scanContains() } }
        // W13 reads the table W1 filled, so it comes before W6 and W7 change it.
        try each { c in try measure("W13", c.name, rows: n, expect: data.expectedInLists) { try c.engine.inListQueries(data.inLists) } }

        if options.w11 {
            try each { c in
                try c.engine.checkpoint()
                let (rows, peak) = try spawnStream(engine: c.name, path: c.path)
                guard rows == n else { throw CheckMismatch(description: "W11: \(c.name) streamed \(rows) rows, expected \(n)") }
                results.add("W11", c.name, rows: n, .bytes, Double(peak))
                progress("  \(c.name) W11: peak RSS \(formatBytes(Double(peak)))")
            }
        }

        try each { c in try measure("W6", c.name, rows: n) { try c.engine.updateLowScores() } }
        try each { c in try measure("W7", c.name, rows: n) { try c.engine.deleteHighScores() } }
        try each { c in
            try c.engine.checkpoint()
            results.add("W10 after W7", c.name, rows: n, .bytes, size(c))
        }
        try each { c in
            if try c.engine.compact() {
                results.add("W10 compacted", c.name, rows: n, .bytes, size(c))
            }
        }

        if options.w9Seconds > 0 {
            // W9 in slices of about a second, the engines taking turns (the
            // order rotating per slice), so that each engine's rate is summed
            // over the same stretch of the machine's time rather than over
            // two separate five-second windows. An error is an engine bug
            // under concurrency: it is reported (the engine's samples are then
            // missing) and the run goes on.
            let slices = max(1, Int(options.w9Seconds.rounded()))
            var reads: [String: Int] = [:]
            var commits: [String: Int] = [:]
            var failed: Set<String> = []
            for k in 0..<slices {
                for j in contenders.indices {
                    let c = contenders[(j + k) % contenders.count]
                    guard !failed.contains(c.name) else { continue }
                    do {
                        let (rd, cm) = try c.engine.concurrent(rows: n, seconds: options.w9Seconds / Double(slices))
                        reads[c.name, default: 0] += rd
                        commits[c.name, default: 0] += cm
                    } catch {
                        failed.insert(c.name)
                        failures.append("round \(r + 1), \(c.name) W9: \(error)")
                        progress("  \(c.name) W9 FAILED: \(error)")
                    }
                }
            }
            for c in contenders where !failed.contains(c.name) {
                let rd = Double(reads[c.name] ?? 0) / options.w9Seconds
                let cm = Double(commits[c.name] ?? 0) / options.w9Seconds
                results.add("W9 reads", c.name, rows: n, .perSecond, rd)
                results.add("W9 commits", c.name, rows: n, .perSecond, cm)
                progress("  \(c.name) W9: \(formatRate(rd)) reads, \(formatRate(cm)) commits")
            }
        }
        for c in contenders { try? c.engine.close(); removeStore(c.path) }
        contenders = []

        // W8 measures fsync: first flush what earlier workloads left dirty in the
        // kernel (up to a million rows' pages per engine), or their writeback
        // lands in W8.
        sync()
        for E in order {
            let w8Path = directory + "/\(E.name)-w8.db"
            removeStore(w8Path)
            defer { removeStore(w8Path) }
            let f = try E.init(path: w8Path, sync: .full)
            try measure("W8", E.name, rows: n) { try f.singleRowCommits(data, count: Settings.w8Commits) }
            try f.close()
        }
    }

    /// W11: runs this executable again as `kura-bench __stream ENGINE PATH` and
    /// reads the child's rows streamed and peak RSS.
    func spawnStream(engine: String, path: String) throws -> (rows: Int, peak: Int) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: executablePath())
        p.arguments = ["__stream", engine, path]
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        var fields: [String: Int] = [:]
        for part in text.split(whereSeparator: { $0 == " " || $0 == "\n" }) {
            let kv = part.split(separator: "=")
            if kv.count == 2, let v = Int(kv[1]) { fields[String(kv[0])] = v }
        }
        guard p.terminationStatus == 0, let rows = fields["rows"], let peak = fields["peak"] else {
            throw CheckMismatch(description: "W11 child for \(engine) failed (status \(p.terminationStatus)): \(text)")
        }
        return (rows, peak)
    }

    // MARK: --scale

    /// N/100, N/10 and N: 10000, 100000 and 1000000 by default.
    var scaleSizes: [Int] { options.scaleSizes ?? [max(options.rows / 100, 1), max(options.rows / 10, 1), options.rows] }
    static let scaleWorkloads = ["W1", "W2", "W3", "W5"]

    /// W1, W2, W3 and W5 at each size; the report divides by the rows touched
    /// (N inserts, N lookups, N rows matched by the 1000 queries, N rows scanned).
    func runScale() throws {
        for size in scaleSizes {
            progress("scale: \(size) rows")
            let data = Dataset(rows: size)
            for r in 0..<options.runs {
                checks = [:]
                for E in order(r) {
                    let name = E.name
                    let path = directory + "/\(name)-scale-\(size).db"
                    removeStore(path)
                    defer { removeStore(path) }
                    let e = try E.init(path: path, sync: .normal)
                    try measure("W1", name, rows: size, expect: size) { try e.insertAll(data) }
                    try e.createIndex()
                    try measure("W2", name, rows: size) { try e.lookups(data.lookupIDs) }
                    try measure("W3", name, rows: size, expect: size) { try e.equalityQueries(data.equalityKeys) }
                    try measure("W5", name, rows: size, expect: data.expectedContains) { try e.scanContains() }
                    try e.close()
                }
            }
        }
    }

    /// Time per row at each size and its growth from the smallest size.
    func scaleTable() -> String {
        let sizes = scaleSizes
        var out = "| workload | engine | " + sizes.map { "ns/row at \($0)" }.joined(separator: " | ") + " | growth \(sizes.first!)→\(sizes.last!) | Kura/SQLite at " + sizes.map(String.init).joined(separator: ", ") + " |\n"
        out += "| --- | --- |" + String(repeating: " ---: |", count: sizes.count + 2) + "\n"
        for w in Self.scaleWorkloads {
            for e in engines.map({ $0.name }) {
                let perRow: [Double?] = sizes.map { n in results.find(w, e, rows: n).map { $0.median / Double(n) * 1e9 } }
                let cells = perRow.map { $0.map { String(format: "%.0f", $0) } ?? "–" }
                var growth = "–"
                if let a = perRow.first ?? nil, let b = perRow.last ?? nil, a > 0 { growth = String(format: "%.2f x", b / a) }
                var ratios = "–"
                if e == "kura" {
                    ratios = sizes.map { n in
                        results.find(w, "kura", rows: n).flatMap { results.ratio($0, to: "sqlite") }.map { String(format: "%.2f", $0) } ?? "–"
                    }.joined(separator: ", ")
                }
                out += "| \(w) | \(e) | " + cells.joined(separator: " | ") + " | \(growth) | \(ratios) |\n"
            }
        }
        return out
    }
}

/// The hidden `__stream ENGINE PATH` subcommand (W11's child): streams every
/// row of the store and prints `rows=N peak=BYTES baseline=BYTES`.
func streamChild(engine: String, path: String) throws {
    let baseline = processMemory()?.peak ?? 0
    let stream: (String) throws -> Int
    if engine == KuraObjectsBench.name {
        stream = KuraObjectsBench.streamAll
    } else if let E = allEngines.first(where: { $0.name == engine }) {
        stream = E.streamAll
    } else {
        throw CheckMismatch(description: "unknown engine \(engine)")
    }
    let (rows, seconds) = try timed { try stream(path) }
    let peak = processMemory()?.peak ?? 0
    print("rows=\(rows) peak=\(peak) baseline=\(baseline) micros=\(Int(seconds * 1e6))")
}
