import Foundation
import XCTest
@testable import KuraEngine

/// Deterministic random numbers (SplitMix64), so failures reproduce by seed.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// The seed of a randomized test: KURA_SEED if set (to replay a run), else a
/// random one; printed with `name` and how to replay it.
func testSeed(_ name: String) -> UInt64 {
    let seed = ProcessInfo.processInfo.environment["KURA_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1...UInt64(UInt32.max))
    print("\(name) seed \(seed) (replay with KURA_SEED=\(seed))")
    return seed
}

/// A store in memory (its own `MemoryFileSystem`, durability off) with
/// `pageSize`-byte pages: small pages give deep trees from few rows.
func memoryStore(_ path: String, pageSize: Int = 512, cacheSize: Int? = nil) throws -> Database {
    var o = Database.Options()
    o.fileSystem = MemoryFileSystem()
    o.pageSize = pageSize
    if let cacheSize { o.cacheSize = cacheSize }
    o.durability = .off
    return try Database(path: path, options: o)
}

/// Asserts that a scan of `table` gives exactly `model`'s rows, in row-ID
/// order (`context` names the run in each failure: its seed).
func assertScanMatches(_ tx: ReadTransaction, _ table: TableInfo, _ model: [Int64: [Value]], _ context: String,
                       file: StaticString = #filePath, line: UInt = #line) throws {
    let c = try tx.rows(in: table)
    var ids: [Int64] = []
    while let r = try c.next() {
        XCTAssertEqual(try r.values(), model[r.rowID], "row \(r.rowID), \(context)", file: file, line: line)
        ids.append(r.rowID)
    }
    XCTAssertEqual(ids, model.keys.sorted(), context, file: file, line: line)
}

/// The format version the store file at `path` holds in its header page
/// (what a connection opening it reads first).
func fileVersion(_ path: String) throws -> UInt32 {
    let data = try Data(contentsOf: URL(fileURLWithPath: path))
    return data.withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: FileHeader.versionOffset, as: UInt32.self)) }
}

/// A fresh directory under the system temporary directory, removed on deinit.
final class TemporaryDirectory {
    let path: String
    init() throws {
        path = NSTemporaryDirectory() + "kura-test-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// Reader threads for the concurrency tests: each runs `body` in a loop until
/// `stop()`, counting the passes and collecting thrown errors and reported failures.
final class ReaderThreads: @unchecked Sendable {
    // @unchecked Sendable: all mutable state is in `Locked` boxes (each guarded by its NSLock).
    private let stopped = Locked(false)
    private let group = DispatchGroup()
    /// Passes of `body` that returned normally.
    let reads = Locked(0)
    /// Errors thrown by `body` and messages given to `fail`.
    let failures = Locked<[String]>([])

    init(count: Int, _ body: @escaping @Sendable (ReaderThreads) throws -> Void) {
        for _ in 0..<count {
            group.enter()
            Thread { [self] in
                defer { group.leave() }
                while !stopped.value {
                    do {
                        try body(self)
                        reads.mutate { $0 += 1 }
                    } catch {
                        failures.mutate { $0.append("\(error)") }
                    }
                }
            }.start()
        }
    }

    /// Records a failed check.
    func fail(_ message: String) { failures.mutate { $0.append(message) } }

    /// Stops the threads and waits for them.
    func stop() {
        stopped.mutate { $0 = true }
        group.wait()
    }
}

extension Database {
    /// Sets the format version of a store that has no table yet, so that the
    /// tables created next are laid out as a build of that format lays them
    /// out (formats 2 to 4 keep the counters in the counters tree). Reopened
    /// alone, a format-2 to format-4 store then moves to format 5.
    func setFormatForTesting(_ version: UInt32) throws {
        try write { tx in
            let names = try tx.tableNames()
            precondition(names.isEmpty, "setFormatForTesting on a store with tables")
            tx.writer!.header.headerVersion = version
            tx.writer!.markModified()
        }
    }
}

/// Creates table "t" in `db` with `rows` rows whose IDs mix dense runs, sparse
/// gaps, negatives and both extremes (values: the ID and a short text), then
/// deletes a tenth of them again. Returns the rows left, and probes: their IDs,
/// the neighbours (±1, often absent) of the first `neighbours` of them in
/// order, and `Int64.min`, `Int64.max` and 0.
func makeSparseRowIDTable(_ db: Database, rows: Int, neighbours: Int,
                          _ g: inout SplitMix64) throws -> (model: [Int64: [Value]], probes: [Int64]) {
    try db.write { tx in _ = try tx.createTable("t") }
    var ids = Set<Int64>([Int64.min, Int64.min + 1, -1, 0, 1, Int64.max - 2, Int64.max - 1])
    var next = Int64(-5000)
    while ids.count < rows {
        next += Int64(g.next() % 4 == 0 ? g.next() % 5000 : 1 + g.next() % 3)
        ids.insert(next)
    }
    var model: [Int64: [Value]] = [:]
    try db.write { tx in
        let t = try tx.table("t")
        for id in ids.shuffled(using: &g) {
            let v: [Value] = [.integer(id), .text(String(repeating: "x", count: Int(g.next() % 40)))]
            try tx.insert(v, into: t, rowID: id)
            model[id] = v
        }
        for id in ids.shuffled(using: &g).prefix(ids.count / 10) {
            _ = try tx.delete(from: t, rowID: id)
            model[id] = nil
        }
    }
    var probes = model.keys.sorted()
    for id in probes.prefix(neighbours) { probes.append(id &+ 1); probes.append(id &- 1) }
    probes += [Int64.min, Int64.max, 0]
    return (model, probes)
}

/// How many leaves the first index of table `table` spans in the current
/// snapshot (tests that need an index over many leaves check it).
func indexLeafCount(_ db: Database, table: String) throws -> Int {
    try db.read { tx in
        guard let index = try tx.indexes(of: table).first, let pages = tx.snapshotPages else { return 0 }
        var c = TreeCursor(tree: index.tree)
        var leaves = Set<UInt32>()
        try c.first(pages)
        while c.isValid {
            leaves.insert(c.leaf.number)
            try c.next(pages)
        }
        return leaves.count
    }
}

/// A store at `path` made for KuraTestChild's `writer` mode: tables `writes`
/// (which the child appends to) and `counter` (one row, ID 1, value 0).
func makeChildWriterStore(at path: String) throws -> Database {
    let db = try Database(path: path)
    try db.write { tx in
        try tx.createTable("writes")
        try tx.insert([.integer(0)], into: try tx.createTable("counter"), rowID: 1)
    }
    return db
}

/// Runs KuraTestChild `child` in `writer` mode on `path`: `commits` commits of
/// a row each into `writes` (round `round`), checkpointing at `threshold`
/// pages, and asserts it exits with status 0.
func runChildWriter(_ child: URL, path: String, round: Int, commits: Int, threshold: Int,
                    file: StaticString = #filePath, line: UInt = #line) throws {
    let p = Process()
    p.executableURL = child
    p.arguments = ["writer", path, "\(round)", "\(commits)", "\(threshold)"]
    p.standardOutput = FileHandle.nullDevice
    try p.run()
    p.waitUntilExit()
    XCTAssertEqual(p.terminationStatus, 0, "KuraTestChild writer exited with \(p.terminationStatus)", file: file, line: line)
}

/// Writes a 512-byte-page store of 300 rows in table "t" (`CompactCellsTests.schema()`)
/// at `path` in a new in-memory file system, checks that every table leaf carries
/// `leafFlag`, then changes one middle leaf with `damage`, seals its checksum
/// again (as a buggy or hostile writer could) and puts it back. Returns the
/// file system, the options to open it with and the damaged page's number.
func storeWithResealedLeaf(_ path: String, leafFlag: UInt8, damage: (Page) -> Void) throws -> (fs: MemoryFileSystem, options: Database.Options, page: UInt32) {
    let fs = MemoryFileSystem()
    var o = Database.Options()
    o.fileSystem = fs
    o.pageSize = 512
    do {
        let db = try Database(path: path, options: o)
        try db.write { tx in
            let t = try tx.createTable("t", schema: try CompactCellsTests.schema())
            for i in 0..<300 { _ = try tx.insert([.integer(Int64(i % 50)), .text("row \(i)")], into: t) }
        }
        db.close()
    }
    var bytes = try XCTUnwrap(fs.contents(of: path))
    var leaves: [UInt32] = []
    for n in 2...(bytes.count / 512) where bytes[(n - 1) * 512] == PageKind.tableLeaf.rawValue {
        XCTAssertNotEqual(bytes[(n - 1) * 512 + Node.flagsOffset] & leafFlag, 0)
        leaves.append(UInt32(n))
    }
    XCTAssertGreaterThan(leaves.count, 4)
    let number = leaves[leaves.count / 2]
    let base = Int(number - 1) * 512
    let p = Page(number: number, size: 512)
    bytes.withUnsafeBytes { p.bytes.copyMemory(from: $0.baseAddress! + base, byteCount: 512) }
    damage(p)
    p.sealChecksum()
    for k in 0..<512 { bytes[base + k] = p.u8(k) }
    fs.setContents(of: path, to: bytes)
    return (fs, o, number)
}

/// Asserts that scanning table "t" of `db` throws a corruption error naming
/// `page`, and returns what the integrity check reports.
func assertScanReportsCorruptPage(_ db: Database, _ page: UInt32, file: StaticString = #filePath, line: UInt = #line) throws -> [IntegrityProblem] {
    XCTAssertThrowsError(try db.read { tx in
        let c = try tx.rows(in: try tx.table("t"))
        while let r = try c.next() { _ = try r.values() }
    }, file: file, line: line) { e in
        XCTAssertEqual((e as? KuraError)?.code, .corrupt, "\(e)", file: file, line: line)
        XCTAssertEqual((e as? KuraError)?.page, page, "\(e)", file: file, line: line)
    }
    return try db.read { tx in try tx.checkIntegrity() }
}

/// Checks table "t" of `db` (column 0: an indexed score) against `model`
/// (row ID to values): the rows, the row count, the rows an index search on
/// the score finds (every non-null score is above -1000), and a clean
/// integrity check; `context` names the case in failures.
func assertScoreTableMatches(_ db: Database, _ model: [Int64: [Value]], _ context: String,
                             file: StaticString = #filePath, line: UInt = #line) throws {
    try db.read { tx in
        var rows: [Int64: [Value]] = [:]
        let c = try tx.rows(in: try tx.table("t"))
        while let r = try c.next() { rows[r.rowID] = try r.values() }
        XCTAssertEqual(rows, model, context, file: file, line: line)
        XCTAssertEqual(try tx.rowCount(try tx.table("t")), model.count, context, file: file, line: line)
        let found = try tx.fetch(try TableQuery("t", where: "score > -1000")).map(\.rowID)
        XCTAssertEqual(Set(found), Set(model.filter { !$0.value[0].isNull }.keys), context, file: file, line: line)
        XCTAssertEqual(try tx.checkIntegrity(), [], context, file: file, line: line)
    }
}
