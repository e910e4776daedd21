// ImportBench: the import row (issue 14, item 7), run alone with
// `kura-bench --import [--rows N] [--runs R] [--kura PATH]` (default N =
// 1,000,000): `kura import` against `sqlite3 .import` on the same generated CSV.
//
// The CSV has a header `name,score,ts` and the W1 rows (Dataset). Each tool
// runs as a fresh process, timed from spawn to exit, its peak resident memory
// read by /usr/bin/time (`%M`, the child's VmHWM):
//
// - Kura: the `kura` executable (the CLI's own import path: KuraCLI is an
//   executable target, not a library the benchmark could call), `kura import
//   STORE t FILE` into a new store: types inferred (name string, score int64,
//   ts double), one transaction, checkpointed at the end.
// - SQLite: /usr/bin/sqlite3 on a new database with the benchmark's pragmas
//   (page_size 4096, WAL, synchronous NORMAL), a typed table `t(name TEXT,
//   score INTEGER, ts REAL)` created first, then `.import --csv --skip 1 FILE t`
//   (one transaction; the log is checkpointed when sqlite3 closes).
//
// Check: both stores hold N rows afterwards (read back in this process).
//
// The `kura` executable: --kura PATH, else `kura` next to this executable
// (`swift build -c release --package-path Benchmarks --product kura` puts it
// there), else the root package's .build/release/kura.

import Foundation
import KuraEngine

enum ImportBench {
    static func run(rows: Int, runs: Int, directory: String, kuraPath: String?) throws {
        let kura = try findKura(kuraPath)
        let sqlite3 = "/usr/bin/sqlite3"
        guard FileManager.default.isExecutableFile(atPath: sqlite3) else {
            throw CheckMismatch(description: "import: \(sqlite3) not found (apt-get install sqlite3)")
        }
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/time") else {
            throw CheckMismatch(description: "import: /usr/bin/time not found (apt-get install time), needed for the children's peak memory")
        }
        let csv = directory + "/import-\(rows).csv"
        try writeCSV(Dataset(rows: rows), to: csv)
        defer { try? FileManager.default.removeItem(atPath: csv) }
        let csvSize = (try? FileManager.default.attributesOfItem(atPath: csv)[.size] as? Int) ?? 0
        progress("import: \(rows) rows, CSV \(formatBytes(Double(csvSize))), kura at \(kura)")

        var times: [String: [Double]] = [:]
        var peaks: [String: [Double]] = [:]
        for r in 0..<runs {
            progress("round \(r + 1) of \(runs)")
            let order = r % 2 == 0 ? ["kura", "sqlite"] : ["sqlite", "kura"]
            for engine in order {
                let store = directory + "/import-\(engine).db"
                removeStore(store)
                defer { removeStore(store) }
                sync()
                let (seconds, peak): (Double, Int)
                let count: Int
                if engine == "kura" {
                    (seconds, peak) = try timedChild(kura, ["import", store, "t", csv], stdin: nil)
                    var o = KuraEngineBench.options(.normal)
                    o.createIfMissing = false
                    let db = try Database(path: store, options: o)
                    defer { db.close() }
                    count = try db.read { tx in try tx.rowCount(try tx.table("t")) }
                } else {
                    let script = """
                        PRAGMA page_size = \(Settings.pageSize);
                        PRAGMA journal_mode = WAL;
                        PRAGMA synchronous = NORMAL;
                        CREATE TABLE t(name TEXT, score INTEGER, ts REAL);
                        .import --csv --skip 1 \(csv) t

                        """
                    (seconds, peak) = try timedChild(sqlite3, [store], stdin: script)
                    let db = try SQLiteConnection(path: store, sync: .normal)
                    count = Int(try db.pragma("SELECT count(*) FROM t")) ?? -1
                }
                guard count == rows else {
                    throw CheckMismatch(description: "import: \(engine) stored \(count) rows, expected \(rows)")
                }
                times[engine, default: []].append(seconds)
                peaks[engine, default: []].append(Double(peak))
                progress("  \(engine) import: \(formatSeconds(seconds)), peak RSS \(formatBytes(Double(peak)))")
            }
        }
        let kt = medianOf(times["kura"]!), st = medianOf(times["sqlite"]!)
        let kp = medianOf(peaks["kura"]!), sp = medianOf(peaks["sqlite"]!)
        print("""
        ## Import, \(rows) rows (CSV \(formatBytes(Double(csvSize)))), median of \(runs) runs

        | tool | time | peak RSS | time / sqlite3 | peak / sqlite3 |
        | --- | ---: | ---: | ---: | ---: |
        | `sqlite3 .import` (typed table, WAL) | \(formatSeconds(st)) | \(formatBytes(sp)) | 1.00 | 1.00 |
        | `kura import` | \(formatSeconds(kt)) | \(formatBytes(kp)) | \(String(format: "%.2f", kt / st)) | \(String(format: "%.2f", kp / sp)) |

        Goal (issue 14): kura import at least as fast as sqlite3 .import (time / sqlite3 ≤ 1.0), bounded memory.

        """)
    }

    /// The `kura` executable to run (see the file header).
    static func findKura(_ given: String?) throws -> String {
        let here = URL(fileURLWithPath: executablePath()).deletingLastPathComponent()
        var candidates: [String] = []
        if let given { candidates.append(given) }
        candidates.append(here.appendingPathComponent("kura").path)
        // Benchmarks/.build/<triple>/release/kura-bench → <root>/.build/release/kura
        let root = here.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        candidates.append(root.appendingPathComponent(".build/release/kura").path)
        if let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) { return found }
        throw CheckMismatch(description: """
            import: no kura executable (looked at \(candidates.joined(separator: ", "))); \
            build it with `swift build -c release --package-path Benchmarks --product kura` or pass --kura PATH
            """)
    }

    /// Writes the CSV (header and one line per row), a buffer at a time.
    static func writeCSV(_ data: Dataset, to path: String) throws {
        guard FileManager.default.createFile(atPath: path, contents: nil),
              let out = FileHandle(forWritingAtPath: path) else {
            throw CheckMismatch(description: "import: cannot create \(path)")
        }
        defer { try? out.close() }
        var buffer = "name,score,ts\n"
        for i in 0..<data.rows {
            buffer += "\(data.names[i]),\(data.scores[i]),\(data.ts[i])\n"
            if buffer.utf8.count >= 1 << 20 {
                try out.write(contentsOf: Data(buffer.utf8))
                buffer = ""
            }
        }
        try out.write(contentsOf: Data(buffer.utf8))
    }

    /// Runs `tool` under /usr/bin/time; returns wall seconds (spawn to exit)
    /// and the child's peak RSS in bytes. Throws if it exits non-zero.
    static func timedChild(_ tool: String, _ arguments: [String], stdin: String?) throws -> (Double, Int) {
        let report = FileManager.default.temporaryDirectory.appendingPathComponent("kura-bench-time-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: report) }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/time")
        p.arguments = ["-f", "%M", "-o", report, tool] + arguments
        let input = Pipe()
        if stdin != nil { p.standardInput = input }
        let output = Pipe()
        p.standardOutput = output
        p.standardError = output
        let start = now()
        try p.run()
        if let stdin {
            try input.fileHandleForWriting.write(contentsOf: Data(stdin.utf8))
            try input.fileHandleForWriting.close()
        }
        let text = output.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        let seconds = now() - start
        guard p.terminationStatus == 0 else {
            throw CheckMismatch(description: "import: \(tool) \(arguments.joined(separator: " ")) exited with \(p.terminationStatus): \(String(decoding: text, as: UTF8.self))")
        }
        let timeReport = (try? String(contentsOfFile: report, encoding: .utf8)) ?? ""
        guard let kib = timeReport.split(separator: "\n").last.flatMap({ Int($0.trimmingCharacters(in: .whitespaces)) }) else {
            throw CheckMismatch(description: "import: /usr/bin/time wrote no peak memory for \(tool): \(timeReport)")
        }
        return (seconds, kib * 1024)
    }
}
