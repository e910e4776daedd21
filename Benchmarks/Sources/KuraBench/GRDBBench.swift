// GRDBBench: the workloads on GRDB 7 (DatabasePool in WAL mode), twice:
//
// - "grdb": GRDB's fastest documented path for each workload. Statements come
//   from `db.cachedStatement(sql:)` (GRDB's statement cache: parsed once per
//   connection, reused with new arguments, as the GRDB docs advise instead of
//   caching statements by hand), rows are decoded by `FastItem`, whose
//   `init(row:)` reads columns by position in the order its SELECT lists them
//   (the README's "plain struct optimized for fetching performance"), and
//   results are iterated with cursors (no intermediate arrays).
// - "grdb-idiomatic": the plain query-interface call an application writes
//   (`Item.fetchOne(db, key:)`, `Item.filter(...).fetchAll(db)`,
//   `item.insert(db)`, `updateAll`, `deleteAll`) with the record `Item`, whose
//   `init(row:)` reads columns by name.
//
// Both run on the same SQLite library with the same pragmas, so the pair shows
// what GRDB's layers cost over its own fast path, and "faster than GRDB" is
// measured against the fast one.

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

/// The row of `t` decoded by position: columns in the order of `FastItem.columns`.
struct FastItem: FetchableRecord {
    static let columns = "id, name, score, ts"
    var id: Int64
    var name: String
    var score: Int64
    var ts: Double

    init(row: Row) throws {
        id = row[0]
        name = row[1]
        score = row[2]
        ts = row[3]
    }

    var check: Int { Int(score) + name.utf8.count + (ts < 0 ? 1 : 0) }
}

class GRDBBench: BenchEngine {
    class var name: String { "grdb" }
    /// False: the fast path (cached statements); true: the idiomatic calls.
    class var idiomatic: Bool { false }
    static let companions = ["-wal", "-shm"]

    let path: String
    let pool: DatabasePool
    var idiomatic: Bool { Self.idiomatic }

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

    required init(path: String, sync: SyncMode) throws {
        self.path = path
        // DatabasePool opens in WAL mode and sets synchronous=NORMAL itself.
        pool = try DatabasePool(path: path, configuration: Self.configuration())
        try pool.writeWithoutTransaction { db in
            if sync == .full { try db.execute(sql: "PRAGMA synchronous = FULL") }
            try db.execute(sql: SQLiteBench.schema)
        }
    }

    static let insertSQL = "INSERT INTO t(name, score, ts) VALUES (?, ?, ?)"
    static let byIDSQL = "SELECT \(FastItem.columns) FROM t WHERE id = ?"

    func insertAll(_ data: Dataset) throws -> Int {
        let idiomatic = self.idiomatic
        return try pool.write { db in
            if idiomatic {
                var last: Int64 = 0
                for i in 0..<data.rows {
                    var item = Item(name: data.names[i], score: data.scores[i], ts: data.ts[i])
                    try item.insert(db)
                    last = item.id!
                }
                return Int(last)
            }
            let s = try db.cachedStatement(sql: GRDBBench.insertSQL)
            for i in 0..<data.rows {
                try s.execute(arguments: [data.names[i], data.scores[i], data.ts[i]])
            }
            return Int(db.lastInsertedRowID)
        }
    }

    func createIndex() throws {
        try pool.write { db in try db.create(index: "by_score", on: "t", columns: ["score"]) }
    }

    func lookups(_ ids: [Int64]) throws -> Int {
        let idiomatic = self.idiomatic
        return try pool.read { db in
            var sum = 0
            if idiomatic {
                for id in ids {
                    if let item = try Item.fetchOne(db, key: id) { sum += item.check }
                }
                return sum
            }
            let s = try db.cachedStatement(sql: GRDBBench.byIDSQL)
            for id in ids {
                if let item = try FastItem.fetchOne(s, arguments: [id]) { sum += item.check }
            }
            return sum
        }
    }

    func equalityQueries(_ keys: [Int64]) throws -> Int {
        let idiomatic = self.idiomatic
        return try pool.read { db in
            var rows = 0
            if idiomatic {
                for k in keys {
                    for item in try Item.filter(Item.Columns.score == k).fetchAll(db) {
                        _ = item.check
                        rows += 1
                    }
                }
                return rows
            }
            let s = try db.cachedStatement(sql: "SELECT \(FastItem.columns) FROM t WHERE score = ?")
            for k in keys {
                let c = try FastItem.fetchCursor(s, arguments: [k])
                while let item = try c.next() {
                    _ = item.check
                    rows += 1
                }
            }
            return rows
        }
    }

    func rangeQueries(_ starts: [Int64]) throws -> Int {
        let idiomatic = self.idiomatic
        return try pool.read { db in
            var sum = 0
            if idiomatic {
                for a in starts {
                    let items = try Item.filter((a...a + 100).contains(Item.Columns.score))
                        .order(Item.Columns.score.desc).limit(100).fetchAll(db)
                    for item in items { sum += Int(item.score) }
                }
                return sum
            }
            let s = try db.cachedStatement(sql: "SELECT \(FastItem.columns) FROM t WHERE score BETWEEN ? AND ? ORDER BY score DESC LIMIT 100")
            for a in starts {
                let c = try FastItem.fetchCursor(s, arguments: [a, a + 100])
                while let item = try c.next() {
                    _ = item.check
                    sum += Int(item.score)
                }
            }
            return sum
        }
    }

    func scanContains() throws -> Int {
        if idiomatic {
            // LIKE folds ASCII case; "99" has no letters, so it counts what CONTAINS counts.
            return try pool.read { db in try Item.filter(Item.Columns.name.like("%99%")).fetchCount(db) }
        }
        return try pool.read { db in
            try Int.fetchOne(db.cachedStatement(sql: "SELECT count(*) FROM t WHERE instr(name, ?) > 0"), arguments: ["99"]) ?? 0
        }
    }

    func inListQueries(_ lists: [[String]]) throws -> Int {
        let idiomatic = self.idiomatic
        return try pool.read { db in
            var sum = 0
            if idiomatic {
                for list in lists {
                    for item in try Item.filter(list.contains(Item.Columns.name)).fetchAll(db) {
                        sum += Int(item.score)
                    }
                }
                return sum
            }
            let s = try db.cachedStatement(sql: SQLiteBench.inListSQL(lists.first?.count ?? 0))
            for list in lists {
                let c = try Int64.fetchCursor(s, arguments: StatementArguments(list))
                while let score = try c.next() { sum += Int(score) }
            }
            return sum
        }
    }

    func updateLowScores() throws -> Int {
        if idiomatic {
            return try pool.write { db in try Item.filter(Item.Columns.score < 100).updateAll(db, Item.Columns.ts.set(to: 1.0)) }
        }
        return try pool.write { db in
            try db.cachedStatement(sql: "UPDATE t SET ts = ? WHERE score < ?").execute(arguments: [1.0, 100])
            return db.changesCount
        }
    }

    func deleteHighScores() throws -> Int {
        if idiomatic {
            return try pool.write { db in try Item.filter(Item.Columns.score >= 900).deleteAll(db) }
        }
        return try pool.write { db in
            try db.cachedStatement(sql: "DELETE FROM t WHERE score >= ?").execute(arguments: [900])
            return db.changesCount
        }
    }

    func singleRowCommits(_ data: Dataset, count: Int) throws -> Int {
        let idiomatic = self.idiomatic
        for i in 0..<count {
            let j = i % max(data.rows, 1)
            try pool.write { db in
                if idiomatic {
                    var item = Item(name: data.names[j], score: data.scores[j], ts: data.ts[j])
                    try item.insert(db)
                } else {
                    try db.cachedStatement(sql: GRDBBench.insertSQL).execute(arguments: [data.names[j], data.scores[j], data.ts[j]])
                }
            }
        }
        return count
    }

    func concurrent(rows: Int, seconds: Double) throws -> (reads: Int, commits: Int) {
        let pool = self.pool
        let idiomatic = self.idiomatic
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
                        if idiomatic {
                            if let item = try pool.read({ db in try Item.fetchOne(db, key: id) }) { _ = item.check }
                        } else {
                            let item = try pool.read { db in try FastItem.fetchOne(db.cachedStatement(sql: GRDBBench.byIDSQL), arguments: [id]) }
                            if let item { _ = item.check }
                        }
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
            let name = "w9-\(commits)"
            try pool.write { db in
                if idiomatic {
                    var item = Item(name: name, score: score, ts: 0)
                    try item.insert(db)
                } else {
                    try db.cachedStatement(sql: GRDBBench.insertSQL).execute(arguments: [name, score, 0.0])
                }
            }
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

    class func streamAll(path: String) throws -> Int {
        let pool = try DatabasePool(path: path, configuration: configuration())
        defer { try? pool.close() }
        let idiomatic = Self.idiomatic
        return try pool.read { db in
            var n = 0
            if idiomatic {
                let cursor = try Item.fetchCursor(db)
                while let item = try cursor.next() {
                    _ = item.check
                    n += 1
                }
                return n
            }
            let cursor = try FastItem.fetchCursor(db.cachedStatement(sql: "SELECT \(FastItem.columns) FROM t"))
            while let item = try cursor.next() {
                _ = item.check
                n += 1
            }
            return n
        }
    }
}

/// GRDB's idiomatic calls (see the file header), reported beside the fast path.
final class GRDBIdiomaticBench: GRDBBench {
    override class var name: String { "grdb-idiomatic" }
    override class var idiomatic: Bool { true }
}
