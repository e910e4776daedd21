// Engine: what every contender implements, and the data they all get.
//
// Each method is one workload of issue 6 on one open store; the harness times
// the call. Every method returns a check value (rows seen, a sum of scores,
// ...) that must agree across engines: a fast wrong answer is caught, and the
// optimizer cannot skip work whose result is never used.

/// The shared settings every engine is opened with (printed at the start).
enum Settings {
    static let pageSize = 4096
    /// Kura's default page cache; SQLite's `cache_size` is set to the same bytes.
    static let cacheBytes = 32 << 20
    /// Kura checkpoints after this many log frames; SQLite's `wal_autocheckpoint`
    /// (pages) is its default, the same number.
    static let checkpointPages = 1000
    /// Single-row commits in W8.
    static let w8Commits = 1000
    /// Queries in W3 and W4.
    static let queries = 1000
    /// W13: queries, each `name IN` a list of `inListLength` names.
    static let inQueries = 20
    /// W13: names per list, one SQLite variable each (SQLite's default limit is
    /// 32766 variables, Debian's library's 250000).
    static let inListLength = 2000
    /// W13: the share of a list's names that name existing rows; the rest are
    /// "absent<k>", which no row has.
    static let inListPresent = 0.9
}

/// How commits are synced (Kura `Durability`, SQLite `synchronous`).
enum SyncMode: String {
    /// Sync at checkpoints only: Kura `.normal`, SQLite `synchronous=NORMAL`.
    case normal
    /// Sync every commit: Kura `.full`, SQLite `synchronous=FULL`.
    case full
}

/// The rows and the query arguments, generated once from fixed seeds.
struct Dataset: Sendable {
    let rows: Int
    /// `name` of row i+1: "name<i+1>".
    let names: [String]
    /// `score` of row i+1, uniform in 0...999.
    let scores: [Int64]
    /// `ts` of row i+1.
    let ts: [Double]
    /// W2: N row IDs, uniform in 1...N.
    let lookupIDs: [Int64]
    /// W3: each score 0...999 once, shuffled.
    let equalityKeys: [Int64]
    /// W4: 1000 lower bounds in 0...899 (`score BETWEEN a AND a+100`).
    let rangeStarts: [Int64]
    /// W13: `Settings.inQueries` lists of `Settings.inListLength` names each,
    /// different per query: about 90% names of random rows (drawn with
    /// replacement, so a name may repeat), the rest "absent<k>" (no row has
    /// it), in random order.
    let inLists: [[String]]

    init(rows: Int) {
        self.rows = rows
        var g = SplitMix64(seed: 0x4B55_5241)
        names = (0..<rows).map { "name\($0 + 1)" }
        scores = (0..<rows).map { _ in Int64.random(in: 0...999, using: &g) }
        ts = (0..<rows).map { i in Double(i) * 0.25 + Double.random(in: 0..<1, using: &g) }
        lookupIDs = (0..<rows).map { _ in Int64.random(in: 1...Int64(max(rows, 1)), using: &g) }
        equalityKeys = (0..<Int64(Settings.queries)).shuffled(using: &g).map { $0 % 1000 }
        rangeStarts = (0..<Settings.queries).map { _ in Int64.random(in: 0...899, using: &g) }
        // Drawn last, so the data the other workloads see is unchanged.
        inLists = (0..<Settings.inQueries).map { _ in
            (0..<Settings.inListLength).map { _ in
                if rows > 0 && Double.random(in: 0..<1, using: &g) < Settings.inListPresent {
                    return "name\(Int.random(in: 1...rows, using: &g))"
                }
                return "absent\(UInt32.random(in: 0...UInt32.max, using: &g))"
            }
        }
    }

    /// What W5 must count: names containing "99".
    var expectedContains: Int { names.reduce(0) { $0 + ($1.contains("99") ? 1 : 0) } }

    /// What W13 must return: for each list, the scores of the rows whose name
    /// is in it (each row once, however often its name repeats), summed over
    /// all lists. Row i+1 is named "name<i+1>", so a name maps to its row.
    var expectedInLists: Int {
        var total = 0
        for list in inLists {
            var rowsInList = Set<Int>()
            for name in list where name.hasPrefix("name") {
                if let i = Int(name.dropFirst(4)), i >= 1, i <= rows { rowsInList.insert(i) }
            }
            for i in rowsInList { total += Int(scores[i - 1]) }
        }
        return total
    }
}

/// A contender: one open store in the benchmark's temporary directory.
protocol BenchEngine: AnyObject {
    /// Short name used in tables and JSON ("kura", "sqlite", "grdb").
    static var name: String { get }
    /// The files next to the store that count towards its size.
    static var companions: [String] { get }
    /// Opens (creating) the store at `path` and creates the empty table `t`.
    init(path: String, sync: SyncMode) throws

    /// W1: inserts every row of `data` in one transaction. Returns the last row ID.
    func insertAll(_ data: Dataset) throws -> Int
    /// W1b: creates the index `by_score` on `score`.
    func createIndex() throws
    /// W2: reads each row in `ids` by row ID, in one read transaction.
    /// Returns the sum of scores plus name lengths of the rows found.
    func lookups(_ ids: [Int64]) throws -> Int
    /// W3: `score == k` for each key, reading every matching row. Returns rows read.
    func equalityQueries(_ keys: [Int64]) throws -> Int
    /// W4: `score BETWEEN a AND a+100 ORDER BY score DESC LIMIT 100`.
    /// Returns the sum of the scores read.
    func rangeQueries(_ starts: [Int64]) throws -> Int
    /// W5: counts rows whose name contains "99" by a full scan.
    func scanContains() throws -> Int
    /// W13: `name IN list` for each list (`name` has no index), reading the
    /// score of every matching row. Returns the sum of the scores read.
    func inListQueries(_ lists: [[String]]) throws -> Int
    /// W6: sets `ts` on every row with score < 100. Returns rows changed.
    func updateLowScores() throws -> Int
    /// W7: deletes every row with score >= 900. Returns rows deleted.
    func deleteHighScores() throws -> Int
    /// W8: `count` single-row insert commits (the store is opened with `.full`).
    func singleRowCommits(_ data: Dataset, count: Int) throws -> Int
    /// W9: one writer (this thread) inserting one row per commit while two reader
    /// threads look up random row IDs in 1...rows, all until `seconds` pass.
    /// Returns (reads, commits).
    func concurrent(rows: Int, seconds: Double) throws -> (reads: Int, commits: Int)
    /// Copies the log into the store file and empties it.
    func checkpoint() throws
    /// Rewrites the store without free pages, if the engine can; false if not.
    func compact() throws -> Bool
    func close() throws

    /// W11 (in a fresh child process): opens the store at `path` read-only in
    /// spirit and streams every row, decoding each. Returns rows read.
    static func streamAll(path: String) throws -> Int
}
