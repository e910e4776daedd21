// KuraEngineBench: the workloads on Kura's engine API (KuraEngine), the way an
// application would write them: `Database.write`/`read` closures, positional
// inserts, `TableQuery` with NSPredicate-style predicates, rows decoded with
// `Row.values()`.

import KuraEngine

final class KuraEngineBench: BenchEngine {
    static let name = "kura"
    /// The log and the shared-memory file (`PATH-shm`, 4 KiB: the shared log
    /// header and reader marks), as SQLite's row counts its `-wal` and `-shm`.
    static let companions = ["-wal", "-shm"]

    let db: Database
    let path: String

    static func options(_ sync: SyncMode) -> Database.Options {
        var o = Database.Options()
        o.pageSize = Settings.pageSize
        o.cacheSize = Settings.cacheBytes
        o.durability = sync == .full ? .full : .normal
        o.checkpointThreshold = Settings.checkpointPages
        return o
    }

    init(path: String, sync: SyncMode) throws {
        self.path = path
        db = try Database(path: path, options: Self.options(sync))
        try db.write { tx in
            _ = try tx.createTable("t", schema: TableSchema([
                ColumnDefinition("name", .text),
                ColumnDefinition("score", .integer),
                ColumnDefinition("ts", .double),
            ]))
        }
    }

    func insertAll(_ data: Dataset) throws -> Int {
        try db.write { tx in
            let t = try tx.table("t")
            var last: Int64 = 0
            for i in 0..<data.rows {
                last = try tx.insert([.text(data.names[i]), .integer(data.scores[i]), .double(data.ts[i])], into: t)
            }
            return Int(last)
        }
    }

    func createIndex() throws {
        try db.write { tx in
            _ = try tx.createIndex("by_score", on: try tx.table("t"), columns: [IndexColumn("score")])
        }
    }

    func lookups(_ ids: [Int64]) throws -> Int {
        try db.read { tx in
            let t = try tx.table("t")
            var sum = 0
            for id in ids {
                guard let v = try tx.values(in: t, rowID: id) else { continue }
                sum += Self.check(v)
            }
            return sum
        }
    }

    /// Turns a row into Swift values the way an application would, and folds
    /// them into a check number.
    @inline(__always)
    static func check(_ v: [Value]) -> Int {
        let name = v[0].textValue ?? ""
        let score = v[1].integerValue ?? 0
        let ts = v[2].doubleValue ?? 0
        return Int(score) + name.utf8.count + (ts < 0 ? 1 : 0)
    }

    func equalityQueries(_ keys: [Int64]) throws -> Int {
        // Parsed once and bound per query, as SQLite's prepared statement is.
        let prepared = try KuraPredicate(format: "score == $K")
        return try db.read { tx in
            var rows = 0
            for k in keys {
                let q = TableQuery("t", where: try prepared.substituting(["K": .integer(k)]))
                let c = try tx.select(q)
                while let r = try c.next() {
                    _ = Self.check(try r.values())
                    rows += 1
                }
            }
            return rows
        }
    }

    func rangeQueries(_ starts: [Int64]) throws -> Int {
        let prepared = try KuraPredicate(format: "score BETWEEN {$LO, $HI}")
        return try db.read { tx in
            var sum = 0
            for a in starts {
                let q = TableQuery("t",
                                   where: try prepared.substituting(["LO": .integer(a), "HI": .integer(a + 100)]),
                                   sort: [SortKey("score", ascending: false)], limit: 100)
                let c = try tx.select(q)
                while let r = try c.next() {
                    let v = try r.values()
                    _ = Self.check(v)
                    sum += Int(v[1].integerValue ?? 0)
                }
            }
            return sum
        }
    }

    func scanContains() throws -> Int {
        try db.read { tx in
            try tx.count(TableQuery("t", where: try KuraPredicate(format: "name CONTAINS %@", arguments: [.text("99")])))
        }
    }

    func inListQueries(_ lists: [[String]]) throws -> Int {
        // Parsed once and bound per query, as SQLite's prepared statement is;
        // the list becomes the `{...}` collection the compiled test searches.
        let prepared = try KuraPredicate(format: "name IN $L")
        return try db.read { tx in
            var sum = 0
            for list in lists {
                let q = TableQuery("t", where: try prepared.substituting(["L": .list(list.map { .text($0) })]))
                let c = try tx.select(q)
                while let r = try c.next() {
                    sum += Int(try r.value(at: 1).integerValue ?? 0)
                }
            }
            return sum
        }
    }

    func updateLowScores() throws -> Int {
        try db.write { tx in
            try tx.update("t", where: try KuraPredicate(format: "score < %@", arguments: [.integer(100)]), set: ["ts": .double(1)])
        }
    }

    func deleteHighScores() throws -> Int {
        try db.write { tx in
            try tx.delete(from: "t", where: try KuraPredicate(format: "score >= %@", arguments: [.integer(900)]))
        }
    }

    func singleRowCommits(_ data: Dataset, count: Int) throws -> Int {
        var n = 0
        for i in 0..<count {
            let j = i % max(data.rows, 1)
            try db.write { tx in
                _ = try tx.insert([.text(data.names[j]), .integer(data.scores[j]), .double(data.ts[j])], into: try tx.table("t"))
            }
            n += 1
        }
        return n
    }

    func concurrent(rows: Int, seconds: Double) throws -> (reads: Int, commits: Int) {
        let db = self.db
        let start = now() + 0.05
        let end = start + seconds
        let readers = (0..<2).map { r in
            Worker {
                var g = SplitMix64(seed: 0x5245_4144 + UInt64(r))
                var reads = 0
                sleep(until: start)
                while now() < end {
                    for _ in 0..<64 {
                        let id = Int64.random(in: 1...Int64(rows), using: &g)
                        _ = try db.read { tx in try tx.values(in: try tx.table("t"), rowID: id) }
                        reads += 1
                    }
                }
                return reads
            }
        }
        var g = SplitMix64(seed: 0x5752_4954)
        var commits = 0
        sleep(until: start)
        while now() < end {
            let score = Int64.random(in: 0...999, using: &g)
            try db.write { tx in
                _ = try tx.insert([.text("w9-\(commits)"), .integer(score), .double(0)], into: try tx.table("t"))
            }
            commits += 1
        }
        var reads = 0
        for r in readers { reads += try r.join() }
        return (reads, commits)
    }

    func checkpoint() throws { _ = try db.checkpoint() }

    /// W10 compaction: `Database.compact()` rewrites the store in place through
    /// the log and checkpoints, which cuts the file (SQLite's row is VACUUM).
    func compact() throws -> Bool {
        let r = try db.compact()
        return r.fileTruncated
    }

    func close() throws { db.close() }

    static func streamAll(path: String) throws -> Int {
        var o = options(.normal)
        o.createIfMissing = false
        let db = try Database(path: path, options: o)
        defer { db.close() }
        return try db.read { tx in
            let c = try tx.select(TableQuery("t"))
            var n = 0
            while let r = try c.next() {
                _ = check(try r.values())
                n += 1
            }
            return n
        }
    }
}
