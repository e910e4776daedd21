// SQLiteBench: the workloads on SQLite's C API, written the way one writes fast
// SQLite code: WAL mode, one prepared statement per query shape reused with
// bound parameters, explicit transactions around batches, values read straight
// from the statement into Swift values.

import CSQLite

/// The C API's SQLITE_TRANSIENT: SQLite copies a bound value.
let sqliteTransient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

struct SQLiteError: Error, CustomStringConvertible {
    let code: Int32
    let message: String
    var description: String { "SQLite error \(code): \(message)" }
}

/// One connection (used on one thread).
final class SQLiteConnection {
    let handle: OpaquePointer

    /// Opens `path` with the benchmark's settings: page size 4096 (before WAL, so
    /// it applies to a new file), WAL journal, `synchronous` per `sync`, a page
    /// cache of `Settings.cacheBytes`, autocheckpoint at `Settings.checkpointPages`.
    init(path: String, sync: SyncMode) throws {
        var h: OpaquePointer?
        let rc = sqlite3_open_v2(path, &h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nil)
        guard rc == SQLITE_OK, let h else {
            let message = h.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            sqlite3_close(h)
            throw SQLiteError(code: rc, message: message)
        }
        handle = h
        sqlite3_busy_timeout(h, 5000)
        try exec("PRAGMA page_size = \(Settings.pageSize)")
        try exec("PRAGMA journal_mode = WAL")
        try exec("PRAGMA synchronous = \(sync == .full ? "FULL" : "NORMAL")")
        try exec("PRAGMA cache_size = -\(Settings.cacheBytes / 1024)")
        try exec("PRAGMA wal_autocheckpoint = \(Settings.checkpointPages)")
    }

    deinit { sqlite3_close_v2(handle) }

    func error(_ rc: Int32) -> SQLiteError {
        SQLiteError(code: rc, message: String(cString: sqlite3_errmsg(handle)))
    }

    func exec(_ sql: String) throws {
        let rc = sqlite3_exec(handle, sql, nil, nil, nil)
        guard rc == SQLITE_OK else { throw error(rc) }
    }

    func prepare(_ sql: String) throws -> SQLiteStatement {
        var s: OpaquePointer?
        let rc = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &s, nil)
        guard rc == SQLITE_OK, let s else { throw error(rc) }
        return SQLiteStatement(s, connection: self)
    }

    /// The first column of the first row of `sql`, as text.
    func pragma(_ sql: String) throws -> String {
        let s = try prepare(sql)
        return try s.step() ? s.text(0) : ""
    }

    func transaction<T>(_ body: () throws -> T) throws -> T {
        try exec("BEGIN")
        do {
            let r = try body()
            try exec("COMMIT")
            return r
        } catch {
            try? exec("ROLLBACK")
            throw error
        }
    }
}

/// A prepared statement, reused: `reset` and bind again for each execution.
final class SQLiteStatement {
    let handle: OpaquePointer
    let connection: SQLiteConnection

    init(_ handle: OpaquePointer, connection: SQLiteConnection) {
        self.handle = handle
        self.connection = connection
    }

    deinit { sqlite3_finalize(handle) }

    @inline(__always) func reset() { sqlite3_reset(handle) }
    @inline(__always) func bind(_ i: Int32, _ v: Int64) { sqlite3_bind_int64(handle, i, v) }
    @inline(__always) func bind(_ i: Int32, _ v: Double) { sqlite3_bind_double(handle, i, v) }
    @inline(__always) func bind(_ i: Int32, _ v: String) {
        var v = v
        v.withUTF8 { b in _ = sqlite3_bind_text(handle, i, b.baseAddress.map { UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self) }, Int32(b.count), sqliteTransient) }
    }

    /// Steps once: true for a row, false when done.
    @inline(__always) func step() throws -> Bool {
        let rc = sqlite3_step(handle)
        if rc == SQLITE_ROW { return true }
        if rc == SQLITE_DONE { return false }
        throw connection.error(rc)
    }

    @inline(__always) func int64(_ i: Int32) -> Int64 { sqlite3_column_int64(handle, i) }
    @inline(__always) func double(_ i: Int32) -> Double { sqlite3_column_double(handle, i) }
    @inline(__always) func text(_ i: Int32) -> String {
        guard let p = sqlite3_column_text(handle, i) else { return "" }
        let n = Int(sqlite3_column_bytes(handle, i))
        return String(decoding: UnsafeBufferPointer(start: p, count: n), as: UTF8.self)
    }
}

final class SQLiteBench: BenchEngine {
    static let name = "sqlite"
    static let companions = ["-wal", "-shm"]
    static let schema = "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, score INTEGER, ts REAL)"

    let path: String
    let db: SQLiteConnection

    init(path: String, sync: SyncMode) throws {
        self.path = path
        db = try SQLiteConnection(path: path, sync: sync)
        try db.exec(Self.schema)
    }

    /// Version of the linked library, for the settings line.
    static var libraryVersion: String { String(cString: sqlite3_libversion()) }

    func insertAll(_ data: Dataset) throws -> Int {
        let s = try db.prepare("INSERT INTO t(name, score, ts) VALUES (?1, ?2, ?3)")
        try db.transaction {
            for i in 0..<data.rows {
                s.reset()
                s.bind(1, data.names[i])
                s.bind(2, data.scores[i])
                s.bind(3, data.ts[i])
                _ = try s.step()
            }
        }
        return Int(sqlite3_last_insert_rowid(db.handle))
    }

    func createIndex() throws {
        try db.exec("CREATE INDEX by_score ON t(score)")
    }

    /// Reads the row a statement selected as (id, name, score, ts) into Swift
    /// values and folds them as Kura's `check` does.
    @inline(__always)
    static func check(_ s: SQLiteStatement) -> Int {
        let name = s.text(1)
        let score = s.int64(2)
        let ts = s.double(3)
        return Int(score) + name.utf8.count + (ts < 0 ? 1 : 0)
    }

    func lookups(_ ids: [Int64]) throws -> Int {
        let s = try db.prepare("SELECT id, name, score, ts FROM t WHERE id = ?1")
        return try db.transaction {
            var sum = 0
            for id in ids {
                s.reset()
                s.bind(1, id)
                if try s.step() { sum += Self.check(s) }
            }
            return sum
        }
    }

    func equalityQueries(_ keys: [Int64]) throws -> Int {
        let s = try db.prepare("SELECT id, name, score, ts FROM t WHERE score = ?1")
        return try db.transaction {
            var rows = 0
            for k in keys {
                s.reset()
                s.bind(1, k)
                while try s.step() {
                    _ = Self.check(s)
                    rows += 1
                }
            }
            return rows
        }
    }

    func rangeQueries(_ starts: [Int64]) throws -> Int {
        let s = try db.prepare("SELECT id, name, score, ts FROM t WHERE score BETWEEN ?1 AND ?2 ORDER BY score DESC LIMIT 100")
        return try db.transaction {
            var sum = 0
            for a in starts {
                s.reset()
                s.bind(1, a)
                s.bind(2, a + 100)
                while try s.step() {
                    _ = Self.check(s)
                    sum += Int(s.int64(2))
                }
            }
            return sum
        }
    }

    func scanContains() throws -> Int {
        // instr() is CONTAINS exactly (case-sensitive); LIKE would fold case.
        let s = try db.prepare("SELECT count(*) FROM t WHERE instr(name, ?1) > 0")
        s.bind(1, "99")
        return try s.step() ? Int(s.int64(0)) : 0
    }

    /// `SELECT score FROM t WHERE name IN (?1, ..., ?L)`, one placeholder per
    /// list member (SQLite's default limit is 32766 variables since 3.32; a
    /// longer list fails to prepare with "too many SQL variables").
    static func inListSQL(_ length: Int) -> String {
        "SELECT score FROM t WHERE name IN (" + (1...max(length, 1)).map { "?\($0)" }.joined(separator: ", ") + ")"
    }

    func inListQueries(_ lists: [[String]]) throws -> Int {
        let length = lists.first?.count ?? 0
        let s = try db.prepare(Self.inListSQL(length))
        return try db.transaction {
            var sum = 0
            for list in lists {
                precondition(list.count == length, "W13's lists have one length")
                s.reset()
                for (i, name) in list.enumerated() { s.bind(Int32(i + 1), name) }
                while try s.step() { sum += Int(s.int64(0)) }
            }
            return sum
        }
    }

    func updateLowScores() throws -> Int {
        let s = try db.prepare("UPDATE t SET ts = ?1 WHERE score < ?2")
        return try db.transaction {
            s.bind(1, 1.0)
            s.bind(2, Int64(100))
            _ = try s.step()
            return Int(sqlite3_changes(db.handle))
        }
    }

    func deleteHighScores() throws -> Int {
        let s = try db.prepare("DELETE FROM t WHERE score >= ?1")
        return try db.transaction {
            s.bind(1, Int64(900))
            _ = try s.step()
            return Int(sqlite3_changes(db.handle))
        }
    }

    func singleRowCommits(_ data: Dataset, count: Int) throws -> Int {
        let s = try db.prepare("INSERT INTO t(name, score, ts) VALUES (?1, ?2, ?3)")
        for i in 0..<count {
            let j = i % max(data.rows, 1)
            // Autocommit: each INSERT is its own transaction, synced (FULL).
            s.reset()
            s.bind(1, data.names[j])
            s.bind(2, data.scores[j])
            s.bind(3, data.ts[j])
            _ = try s.step()
        }
        return count
    }

    func concurrent(rows: Int, seconds: Double) throws -> (reads: Int, commits: Int) {
        let path = self.path
        let start = now() + 0.05
        let end = start + seconds
        let readers = (0..<2).map { r in
            Worker {
                // Each reader thread has its own connection, as SQLite requires
                // for parallel reads; each lookup is its own (autocommit) read
                // transaction, as each Kura lookup is its own `read`.
                let c = try SQLiteConnection(path: path, sync: .normal)
                let s = try c.prepare("SELECT id, name, score, ts FROM t WHERE id = ?1")
                var g = SplitMix64(seed: 0x5245_4144 + UInt64(r))
                var reads = 0
                sleep(until: start)
                while now() < end {
                    for _ in 0..<64 {
                        s.reset()
                        s.bind(1, Int64.random(in: 1...Int64(rows), using: &g))
                        if try s.step() { _ = SQLiteBench.check(s) }
                        reads += 1
                    }
                }
                s.reset()
                return reads
            }
        }
        let ins = try db.prepare("INSERT INTO t(name, score, ts) VALUES (?1, ?2, ?3)")
        var g = SplitMix64(seed: 0x5752_4954)
        var commits = 0
        sleep(until: start)
        while now() < end {
            ins.reset()
            ins.bind(1, "w9-\(commits)")
            ins.bind(2, Int64.random(in: 0...999, using: &g))
            ins.bind(3, 0.0)
            _ = try ins.step()
            commits += 1
        }
        var reads = 0
        for r in readers { reads += try r.join() }
        return (reads, commits)
    }

    func checkpoint() throws {
        let rc = sqlite3_wal_checkpoint_v2(db.handle, nil, SQLITE_CHECKPOINT_TRUNCATE, nil, nil)
        guard rc == SQLITE_OK else { throw db.error(rc) }
    }

    func compact() throws -> Bool {
        try db.exec("VACUUM")
        try checkpoint()
        return true
    }

    func close() throws {}

    static func streamAll(path: String) throws -> Int {
        let db = try SQLiteConnection(path: path, sync: .normal)
        let s = try db.prepare("SELECT id, name, score, ts FROM t")
        return try db.transaction {
            var n = 0
            while try s.step() {
                _ = check(s)
                n += 1
            }
            return n
        }
    }
}
