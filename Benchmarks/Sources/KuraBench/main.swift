// kura-bench: Kura against SQLite (C API) and GRDB (records), same workloads,
// same process, alternating engines (issue 6). See Benchmarks/README.md.
//
//     swift run -c release --package-path Benchmarks kura-bench [options]

import Foundation

let usage = """
usage: kura-bench [--rows N] [--runs R] [--engines kura,sqlite,grdb,grdb-idiomatic,kura-objects]
                  [--w9-seconds S] [--dir DIR] [--json [FILE]] [--scale] [--scale-sizes LIST] [--no-w11]
                  [--frc] [--find-or-create] [--relations] [--import] [--kura PATH]

  --rows N        rows in the table (default 1000000)
  --runs R        runs of every workload per engine; the median is reported (default 3, at least 3 for a report)
  --engines LIST  engines to run (default kura,sqlite,grdb,grdb-idiomatic,kura-objects; grdb is
                  GRDB's fastest documented path, grdb-idiomatic its plain query-interface calls)
  --w9-seconds S  length of W9 (default 5; 0 skips it)
  --dir DIR       where the stores are created (default: a new directory under $TMPDIR or /tmp)
  --json [FILE]   also write the results as JSON (default file kura-bench.json)
  --scale         run W1, W2, W3, W5 at N/100, N/10 and N rows (10000, 100000, 1000000
                  by default) and print how time per row grows
  --scale-sizes LIST  with --scale, the sizes to run instead (e.g. 100000,1000000,10000000)
  --no-w11        skip W11 (the child processes measuring peak memory)
  --frc           run only W12: one change delivered to a fetched-results controller
                  of --rows rows (default 100000), against SQLite's update + re-query
  --find-or-create  run only the find-or-create import: up to --rows children (default 80000)
                  of 200 parents, each parent fetched by code in one context before its child
  --relations     run only the relationship queries (R0–R7) over --rows students (default
                  100000): Kura objects, SQLite by hand, GRDB fast path and GRDB associations
  --import        run only the import row: `kura import` against `sqlite3 .import` on the same
                  CSV of --rows rows (default 1000000), time and peak memory
  --kura PATH     the kura executable for --import (default: next to kura-bench, then the
                  root package's .build/release/kura)
"""

func parseOptions(_ args: [String]) -> RunOptions {
    var o = RunOptions()
    var i = 0
    func value() -> String {
        i += 1
        guard i < args.count else { fail("\(args[i - 1]) needs a value\n\n\(usage)") }
        return args[i]
    }
    while i < args.count {
        switch args[i] {
        case "--rows": guard let n = Int(value()), n > 0 else { fail("--rows takes a positive number") }; o.rows = n
        case "--runs": guard let n = Int(value()), n > 0 else { fail("--runs takes a positive number") }; o.runs = n
        case "--engines":
            o.engines = value().split(separator: ",").map(String.init)
            let known = allEngines.map { $0.name } + [KuraObjectsBench.name]
            for e in o.engines where !known.contains(e) { fail("unknown engine \(e); known: \(known.joined(separator: ", "))") }
        case "--w9-seconds": guard let s = Double(value()), s >= 0 else { fail("--w9-seconds takes a number") }; o.w9Seconds = s
        case "--dir": o.directory = value()
        case "--json":
            if i + 1 < args.count, !args[i + 1].hasPrefix("--") { o.jsonPath = value() } else { o.jsonPath = "kura-bench.json" }
        case "--scale": o.scale = true
        case "--no-w11": o.w11 = false
        case "--frc": o.frc = true
        case "--find-or-create": o.findOrCreate = true
        case "--relations": o.relations = true
        case "--import": o.importRow = true
        case "--kura": o.kuraPath = value()
        case "--scale-sizes":
            let sizes = value().split(separator: ",").compactMap { Int($0) }
            guard !sizes.isEmpty, sizes.allSatisfy({ $0 > 0 }) else { fail("--scale-sizes takes positive numbers separated by commas") }
            o.scaleSizes = sizes
        case "-h", "--help": print(usage); exit(0)
        default: fail("unknown option \(args[i])\n\n\(usage)")
        }
        i += 1
    }
    if o.frc && !args.contains("--rows") { o.rows = 100_000 }
    if o.findOrCreate && !args.contains("--rows") { o.rows = 80_000 }
    if o.relations && !args.contains("--rows") { o.rows = 100_000 }
    return o
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(("kura-bench: " + message + "\n").data(using: .utf8)!)
    exit(2)
}

func machineDescription() -> [String: String] {
    var m: [String: String] = [:]
    m["cpus"] = String(ProcessInfo.processInfo.activeProcessorCount)
    if let line = firstLine(of: "/proc/cpuinfo", containing: "model name"), let v = line.split(separator: ":", maxSplits: 1).last {
        m["cpu"] = v.trimmingCharacters(in: .whitespaces)
    }
    m["memory"] = formatBytes(Double(ProcessInfo.processInfo.physicalMemory))
    m["os"] = ProcessInfo.processInfo.operatingSystemVersionString
    let f = ISO8601DateFormatter()
    m["date"] = f.string(from: Date())
    return m
}

func runnerSizes(_ o: RunOptions) -> String {
    (o.scaleSizes ?? [o.rows / 100, o.rows / 10, o.rows]).map(String.init).joined(separator: ", ")
}

func main() throws {
    let args = Array(CommandLine.arguments.dropFirst())
    if args.first == "__stream" {
        guard args.count == 3 else { fail("__stream ENGINE PATH") }
        try streamChild(engine: args[1], path: args[2])
        return
    }
    let options = parseOptions(args)

    let directory: String
    var madeDirectory = false
    if let d = options.directory {
        directory = d
        try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
    } else {
        let base = ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp"
        directory = base + "/kura-bench-\(getpid())"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        madeDirectory = true
    }
    defer { if madeDirectory { try? FileManager.default.removeItem(atPath: directory) } }

    let machine = machineDescription()
    var settings: [String: String] = [
        "rows": String(options.rows),
        "runs": String(options.runs),
        "engines": options.engines.joined(separator: ","),
        "directory": directory,
        "page_size": String(Settings.pageSize),
        "cache_bytes": String(Settings.cacheBytes),
        "sqlite_version": SQLiteBench.libraryVersion,
        "grdb_version": "7.10.0",
        "w9_seconds": String(options.w9Seconds),
    ]
    for (k, v) in machine { settings[k] = v }

    print("""
    # kura-bench
    machine: \(machine["cpus"] ?? "?") CPUs, \(machine["cpu"] ?? "unknown CPU"), \(machine["memory"] ?? "?") RAM; \(machine["os"] ?? "")
    date: \(machine["date"] ?? "")
    rows: \(options.scale ? runnerSizes(options) + " (--scale)" : String(options.rows)); runs per workload and engine: \(options.runs) (median reported); engines in lock step (each workload on every engine in turn), order rotating each round
    stores: fresh files in \(directory), one per engine and round
    Fair settings:
      Kura engine: page size \(Settings.pageSize), cacheSize \(Settings.cacheBytes / 1_048_576) MiB, durability .normal (W8: .full), checkpointThreshold \(Settings.checkpointPages) frames
      SQLite \(SQLiteBench.libraryVersion) (C API): page_size \(Settings.pageSize), journal_mode=WAL, synchronous=NORMAL (W8: FULL), cache_size=-\(Settings.cacheBytes / 1024) (\(Settings.cacheBytes / 1_048_576) MiB), wal_autocheckpoint=\(Settings.checkpointPages); prepared statements reused, bound parameters
      GRDB 7.10.0 (same SQLite library): DatabasePool (WAL), same pragmas; "grdb" = fastest documented path (db.cachedStatement, rows decoded by position, cursors), "grdb-idiomatic" = query interface and records (init(row:) by column name, fetchOne(db, key:), filter/fetchAll, insert, updateAll, deleteAll)
      Kura objects: Kura's object layer on the same engine options (one entity, a context, one save; lookups by object ID in a fresh context; W3–W7 and W13 fetch requests on a second store whose model indexes score; fetchBatchSize 1000 for W11)
      Rows are read into Swift values (String, Int64, Double) by every engine.
    Ratios are engine/SQLite with lower = better for the engine (time, bytes; for W9 throughputs, time per operation).

    """)

    if options.findOrCreate {
        try FindOrCreateBench.run(rows: options.rows, directory: directory)
        return
    }
    if options.frc {
        try FRCBench.run(rows: options.rows, directory: directory)
        return
    }
    if options.relations {
        try RelationsBench.run(rows: options.rows, runs: options.runs, engines: options.engines, directory: directory)
        return
    }
    if options.importRow {
        try ImportBench.run(rows: options.rows, runs: options.runs, directory: directory, kuraPath: options.kuraPath)
        return
    }
    let runner = Runner(options: options, directory: directory)
    if options.scale {
        try runner.runScale()
        print("## Time per row as the table grows (--scale)\n")
        print(runner.scaleTable())
    } else {
        progress("generating \(options.rows) rows")
        let data = Dataset(rows: options.rows)
        try runner.runAll(data)
        print("## Results, \(options.rows) rows, median of \(options.runs) runs\n")
        print(runner.results.table(rows: options.rows, engines: options.engines))
        if !runner.failures.isEmpty {
            print("Failures (these samples are missing from the medians):")
            for f in runner.failures { print("- " + f) }
            print("")
        }
        print("""
        W10 compaction: Kura's row is after Database.compact() (in place, through the log); SQLite's is after VACUUM.
        Kura objects: W1, W2, W11 on the index-free store, W3–W7 and W13 on a second store whose model indexes score (KuraObjectsBench.swift);
        W1b, W8, W9 and W10 have no object form here. objects/GRDB is to GRDB's fast path.
        """)
    }
    if let path = options.jsonPath {
        try runner.results.json(settings: settings).write(to: URL(fileURLWithPath: path))
        print("JSON written to \(path)")
    }
}

do {
    try main()
} catch {
    fail("\(error)")
}
