// GRDBBench: the workloads on GRDB's record API (GRDB 7, DatabasePool in WAL
// mode). `Item` is a record with hand-written `init(row:)` and `encode(to:)`,
// GRDB's documented fast path (Codable records are slower).

import GRDB

struct Item: FetchableRecord, MutablePersistableRecord {
    static let databaseTableName = "t"
    enum Columns {
        static let id = Column("id")
        static let name = Column("name")
        static let score = Column("score")
        static let ts = Column("ts")
    }

    var id: Int64?
    var name: String
    var score: Int64
    var ts: Double

    init(id: Int64? = nil, name: String, score: Int64, ts: Double) {
        self.id = id
        self.name = name
        self.score = score
        self.ts = ts
    }

    init(row: Row) throws {
        id = row[Columns.id]
        name = row[Columns.name]
        score = row[Columns.score]
        ts = row[Columns.ts]
    }

    func encode(to container: inout PersistenceContainer) throws {
        container[Columns.id] = id
        container[Columns.name] = name
        container[Columns.score] = score
        container[Columns.ts] = ts
    }

    mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }

    /// Folds the record as the other engines fold their rows.
    var check: Int { Int(score) + name.utf8.count + (ts < 0 ? 1 : 0) }
}

final class GRDBBench: BenchEngine {
    static let name = "grdb"
    static let companions = ["-wal", "-shm"]

    let path: String
    let pool: DatabasePool

    static func configuration() -> Configuration {
        var c = Configuration()
        c.busyMode = .timeout(5)   // as the C API connections' sqlite3_busy_timeout
        c.prepareDatabase { db in
            try db.execute(sql: "PRAGMA page_size = \(Settings.pageSize)")
            try db.execute(sql: "PRAGMA cache_size = -\(Settings.cacheBytes / 1024)")
            try db.execute(sql: "PRAGMA wal_autocheckpoint = \(Settings.checkpointPages)")
        }
        return c
    }

    init(path: String, sync: SyncMode) throws {
        self.path = path
        // DatabasePool opens in WAL mode and sets synchronous=NORMAL itself.
        pool = try DatabasePool(path: path, configuration: Self.configuration())
        try pool.writeWithoutTransaction { db in
            if sync == .full { try db.execute(sql: "PRAGMA synchronous = FULL") }
            try db.execute(sql: SQLiteBench.schema)
        }
    }

    func insertAll(_ data: Dataset) throws -> Int {
        try pool.write { db in
            var last: Int64 = 0
            for i in 0..<data.rows {
                var item = Item(name: data.names[i], score: data.scores[i], ts: data.ts[i])
                try item.insert(db)
                last = item.id!
            }
            return Int(last)
        }
    }

    func createIndex() throws {
        try pool.write { db in try db.create(index: "by_score", on: "t", columns: ["score"]) }
    }

    func lookups(_ ids: [Int64]) throws -> Int {
        try pool.read { db in
            var sum = 0
            for id in ids {
                if let item = try Item.fetchOne(db, key: id) { sum += item.check }
            }
            return sum
        }
    }

    func equalityQueries(_ keys: [Int64]) throws -> Int {
        try pool.read { db in
            var rows = 0
            for k in keys {
                for item in try Item.filter(Item.Columns.score == k).fetchAll(db) {
                    _ = item.check
                    rows += 1
                }
            }
            return rows
        }
    }

    func rangeQueries(_ starts: [Int64]) throws -> Int {
        try pool.read { db in
            var sum = 0
            for a in starts {
                let items = try Item.filter((a...a + 100).contains(Item.Columns.score))
                    .order(Item.Columns.score.desc).limit(100).fetchAll(db)
                for item in items { sum += Int(item.score) }
            }
            return sum
        }
    }

    func scanContains() throws -> Int {
        // LIKE folds ASCII case; "99" has no letters, so it counts what CONTAINS counts.
        try pool.read { db in try Item.filter(Item.Columns.name.like("%99%")).fetchCount(db) }
    }

    func updateLowScores() throws -> Int {
        try pool.write { db in try Item.filter(Item.Columns.score < 100).updateAll(db, Item.Columns.ts.set(to: 1.0)) }
    }

    func deleteHighScores() throws -> Int {
        try pool.write { db in try Item.filter(Item.Columns.score >= 900).deleteAll(db) }
    }

    func singleRowCommits(_ data: Dataset, count: Int) throws -> Int {
        for i in 0..<count {
            let j = i % max(data.rows, 1)
            try pool.write { db in
                var item = Item(name: data.names[j], score: data.scores[j], ts: data.ts[j])
                try item.insert(db)
            }
        }
        return count
    }

    func concurrent(rows: Int, seconds: Double) throws -> (reads: Int, commits: Int) {
        let pool = self.pool
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
                        if let item = try pool.read({ db in try Item.fetchOne(db, key: id) }) { _ = item.check }
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
            var item = Item(name: "w9-\(commits)", score: Int64.random(in: 0...999, using: &g), ts: 0)
            try pool.write { db in try item.insert(db) }
            commits += 1
        }
        var reads = 0
        for r in readers { reads += try r.join() }
        return (reads, commits)
    }

    func checkpoint() throws {
        try pool.writeWithoutTransaction { db in _ = try db.checkpoint(.truncate) }
    }

    func compact() throws -> Bool {
        try pool.vacuum()
        try checkpoint()
        return true
    }

    func close() throws { try pool.close() }

    static func streamAll(path: String) throws -> Int {
        let pool = try DatabasePool(path: path, configuration: configuration())
        defer { try? pool.close() }
        return try pool.read { db in
            var n = 0
            let cursor = try Item.fetchCursor(db)
            while let item = try cursor.next() {
                _ = item.check
                n += 1
            }
            return n
        }
    }
}
