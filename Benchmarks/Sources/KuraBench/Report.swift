// Report: the results of a run, as a Markdown table (stdout) and as JSON.
//
// Every ratio is "this engine / SQLite" in the direction where lower is better
// for the engine: time over time, bytes over bytes, and for throughputs (W9)
// time per operation, that is SQLite's rate over the engine's rate.

import Foundation

enum Unit: String {
    case seconds, bytes, perSecond = "per_second"
}

/// One workload on one engine: its samples (one per run).
struct Measurement {
    let workload: String
    let engine: String
    let rows: Int
    let unit: Unit
    var samples: [Double]
    var median: Double { medianOf(samples) }
    /// The value in "lower is better" terms (seconds per op for rates).
    var cost: Double { unit == .perSecond ? 1 / median : median }
}

struct WorkloadInfo {
    let id: String
    let title: String
    let unit: Unit
    /// Issue 6's goal for Kura/SQLite (nil: none stated).
    let goal: Double?
}

/// The workloads in report order.
let workloadInfos: [WorkloadInfo] = [
    WorkloadInfo(id: "W1", title: "insert N rows, one transaction", unit: .seconds, goal: 0.5),
    WorkloadInfo(id: "W1b", title: "create index on score", unit: .seconds, goal: 1.0),
    WorkloadInfo(id: "W2", title: "N random lookups by row ID", unit: .seconds, goal: 0.5),
    WorkloadInfo(id: "W3", title: "1000 queries score == k (~N/1000 rows each)", unit: .seconds, goal: 0.5),
    WorkloadInfo(id: "W4", title: "1000 queries score BETWEEN a AND a+100, desc, limit 100", unit: .seconds, goal: 1.0),
    WorkloadInfo(id: "W5", title: "full scan, count name CONTAINS \"99\"", unit: .seconds, goal: 0.5),
    WorkloadInfo(id: "W13", title: "20 queries name IN {2,000 names}, unindexed", unit: .seconds, goal: nil),
    WorkloadInfo(id: "W6", title: "update ts where score < 100", unit: .seconds, goal: 1.0),
    WorkloadInfo(id: "W7", title: "delete where score >= 900", unit: .seconds, goal: 1.0),
    WorkloadInfo(id: "W8", title: "1000 single-row commits, durability full", unit: .seconds, goal: 1.1),
    WorkloadInfo(id: "W9 reads", title: "reads/s, 2 reader threads, writer committing (5 s)", unit: .perSecond, goal: 1.0),
    WorkloadInfo(id: "W9 commits", title: "commits/s of the writer, same time", unit: .perSecond, goal: 1.0),
    WorkloadInfo(id: "W10 after W1", title: "file size after W1 (checkpointed)", unit: .bytes, goal: 1.0),
    WorkloadInfo(id: "W10 after W7", title: "file size after W7 + checkpoint", unit: .bytes, goal: 1.0),
    WorkloadInfo(id: "W10 compacted", title: "file size after W7 + compaction (SQLite: VACUUM)", unit: .bytes, goal: 1.0),
    WorkloadInfo(id: "W11", title: "peak RSS (VmHWM) of a fresh process streaming all N rows", unit: .bytes, goal: 1.0),
]

final class Results {
    private(set) var measurements: [Measurement] = []

    func add(_ workload: String, _ engine: String, rows: Int, _ unit: Unit, _ value: Double) {
        if let i = measurements.firstIndex(where: { $0.workload == workload && $0.engine == engine && $0.rows == rows }) {
            measurements[i].samples.append(value)
        } else {
            measurements.append(Measurement(workload: workload, engine: engine, rows: rows, unit: unit, samples: [value]))
        }
    }

    func find(_ workload: String, _ engine: String, rows: Int) -> Measurement? {
        measurements.first { $0.workload == workload && $0.engine == engine && $0.rows == rows }
    }

    /// `engine`'s cost over `baseline`'s for the same workload and rows.
    func ratio(_ m: Measurement, to baseline: String) -> Double? {
        guard let b = find(m.workload, baseline, rows: m.rows), b.cost > 0 else { return nil }
        return m.cost / b.cost
    }

    static func format(_ v: Double, _ unit: Unit) -> String {
        switch unit {
        case .seconds: return formatSeconds(v)
        case .bytes: return formatBytes(v)
        case .perSecond: return formatRate(v)
        }
    }

    /// The main table: one line per workload, engines side by side. "GRDB" is
    /// GRDB's fast path, "GRDB idiomatic" its plain query-interface calls
    /// (GRDBBench.swift); the objects ratios are to SQLite and to GRDB's fast path.
    func table(rows: Int, engines: [String]) -> String {
        let objects = engines.contains("kura-objects")
        var out = "| workload | SQLite | Kura | GRDB (fast path) | GRDB idiomatic | Kura/SQLite | goal | Kura objects | objects/SQLite | objects/GRDB | objects/GRDB idiomatic |\n"
        out += "| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |\n"
        for w in workloadInfos {
            func cell(_ e: String) -> String {
                find(w.id, e, rows: rows).map { Self.format($0.median, w.unit) } ?? "–"
            }
            var ratioText = "–"
            var goalText = w.goal.map { "≤ " + String(format: "%.1f", $0) } ?? ""
            if let k = find(w.id, "kura", rows: rows), let r = ratio(k, to: "sqlite") {
                ratioText = String(format: "%.2f", r)
                if let g = w.goal { goalText += r <= g ? " met" : " missed" }
            }
            var objectsCell = "–"
            var objectsSQLite = "–"
            var objectsRatio = "–"
            var objectsIdiomatic = "–"
            if objects, let o = find(w.id, "kura-objects", rows: rows) {
                objectsCell = Self.format(o.median, w.unit)
                if let r = ratio(o, to: "sqlite") { objectsSQLite = String(format: "%.2f", r) }
                if let r = ratio(o, to: "grdb") { objectsRatio = String(format: "%.2f", r) }
                if let r = ratio(o, to: "grdb-idiomatic") { objectsIdiomatic = String(format: "%.2f", r) }
            }
            if w.id == "W10 compacted" && find(w.id, "kura", rows: rows) == nil {
                ratioText = "not measured (the file was not cut: another reader)"
            }
            out += "| \(w.id): \(w.title) | \(cell("sqlite")) | \(cell("kura")) | \(cell("grdb")) | \(cell("grdb-idiomatic")) | \(ratioText) | \(goalText) | \(objectsCell) | \(objectsSQLite) | \(objectsRatio) | \(objectsIdiomatic) |\n"
        }
        return out
    }

    /// JSON for tools: one object per (engine, workload, rows).
    func json(settings: [String: String]) throws -> Data {
        var items: [[String: Any]] = []
        for m in measurements {
            var d: [String: Any] = ["engine": m.engine, "workload": m.workload, "rows": m.rows, "samples": m.samples]
            switch m.unit {
            case .seconds: d["median_seconds"] = m.median
            case .perSecond:
                d["median_seconds"] = 1 / m.median   // seconds per operation
                d["median_per_second"] = m.median
            case .bytes: d["median_bytes"] = m.median
            }
            if m.engine != "sqlite", let r = ratio(m, to: "sqlite") { d["ratio"] = r; d["ratio_to"] = "sqlite" }
            if m.engine == "kura-objects", let r = ratio(m, to: "grdb") { d["ratio_to_grdb"] = r }
            if m.engine == "kura-objects", let r = ratio(m, to: "grdb-idiomatic") { d["ratio_to_grdb_idiomatic"] = r }
            items.append(d)
        }
        let root: [String: Any] = ["settings": settings, "results": items]
        return try JSONSerialization.data(withJSONObject: root, options: [.prettyPrinted, .sortedKeys])
    }
}
