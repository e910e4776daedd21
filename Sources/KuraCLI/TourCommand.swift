// kura tour: shows the storage engine working, step by step, with timings.

import Foundation
import KuraEngine

enum TourCommand {
    static let help = """
        usage: kura tour [--rows N] [--keep PATH]

        Creates a store in a temporary directory (or at PATH with --keep), inserts N
        rows (default 100000) in one transaction, looks every row up in random
        order, scans the table, deletes half the rows, checkpoints, reopens and runs
        a full integrity check, printing each step and its rows per second.
        """

    static func run(_ args: [String]) -> Int32 {
        var rows = 100_000
        var keep: String?
        var i = 0
        while i < args.count {
            switch args[i] {
            case "--rows":
                guard i + 1 < args.count, let n = Int(args[i + 1]), n > 0 else { fail("kura tour: --rows needs a positive number", code: 2) }
                rows = n
                i += 2
            case "--keep":
                guard i + 1 < args.count else { fail("kura tour: --keep needs a path", code: 2) }
                keep = args[i + 1]
                i += 2
            case "--help", "-h":
                print(help)
                return 0
            default:
                fail("kura tour: unknown argument '\(args[i])'\n\n" + help, code: 2)
            }
        }
        let dir = NSTemporaryDirectory() + "kura-tour-\(getpid())"
        let path = keep ?? dir + "/tour.kura"
        // The tour's own temporary directory: creating it is checked when the
        // store is opened inside it; removing it is best effort.
        if keep == nil { try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true) }
        defer { if keep == nil { try? FileManager.default.removeItem(atPath: dir) } }
        do {
            try tour(path: path, rows: rows)
            return 0
        } catch {
            FileHandle.standardError.write("kura tour: \(error)\n".data(using: .utf8)!)
            return 3
        }
    }

    static func step<T>(_ title: String, rows: Int? = nil, _ body: () throws -> T) rethrows -> T {
        let start = DispatchTime.now().uptimeNanoseconds
        let result = try body()
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        var line = "  " + title.padding(toLength: 52, withPad: " ", startingAt: 0) + String(format: "%8.3f s", seconds)
        if let rows { line += String(format: "  %12.0f rows/s", Double(rows) / seconds) }
        print(line)
        return result
    }

    static func tour(path: String, rows: Int) throws {
        print("Kura tour: store \(path), \(rows) rows")
        var options = Database.Options()
        options.durability = .normal
        var db = try Database(path: path, options: options)
        try step("insert \(rows) rows in one transaction", rows: rows) {
            try db.write { tx in
                let t = try tx.tableExists("people") ? try tx.table("people") : try tx.createTable("people")
                for i in 0..<rows {
                    try tx.insert([.text("name\(i)"), .integer(Int64(i % 1000)), .double(Double(i) * 0.5)], into: t)
                }
            }
        }
        var order = Array(1...Int64(rows))
        var rng = SystemRandomNumberGenerator()
        order.shuffle(using: &rng)
        let found = try step("look up every row by row ID, random order", rows: rows) {
            try db.read { tx in
                let t = try tx.table("people")
                var n = 0
                for id in order where try tx.record(in: t, rowID: id) != nil { n += 1 }
                return n
            }
        }
        print("    found \(found) of \(rows)")
        let sum = try step("scan the table, summing column 2", rows: rows) {
            try db.read { tx in
                let c = try tx.rows(in: try tx.table("people"))
                var s: Int64 = 0
                while let r = try c.next() { s += try r.value(at: 1).integerValue ?? 0 }
                return s
            }
        }
        print("    sum \(sum)")
        try step("delete every second row", rows: rows / 2) {
            try db.write { tx in
                let t = try tx.table("people")
                for id in stride(from: Int64(1), through: Int64(rows), by: 2) { try tx.delete(from: t, rowID: id) }
            }
        }
        let frames = db.logFrameCount
        let done = try step("checkpoint (copy \(frames) logged pages into the store)") { try db.checkpoint() }
        if !done { print("    checkpoint postponed: another process is reading") }
        db.close()
        db = try step("reopen") { try Database(path: path, options: options) }
        let (count, pages, free, problems) = try step("integrity check") {
            try db.read { tx in
                (try tx.rowCount(try tx.table("people")), try tx.pageCount, try tx.freePageCount, try tx.checkIntegrity())
            }
        }
        print("    \(count) rows, \(pages) pages of \(db.pageSize) bytes, \(free) free, \(problems.isEmpty ? "no problems" : "\(problems.count) problems")")
        for p in problems { print("    problem: \(p)") }
        db.close()
    }
}
