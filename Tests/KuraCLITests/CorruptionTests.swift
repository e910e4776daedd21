import Foundation
import XCTest
@testable import KuraEngine

/// The raw commands on damaged stores: `check` reports the damage with page
/// numbers and exit 1; nothing crashes or hangs; the exit codes stay within
/// 0...3 whatever the bytes.
final class CorruptionTests: XCTestCase {
    var dir: TemporaryDirectory!
    static let pageSize = 512

    /// A store with several levels, overflow chains, two indexes and a freelist.
    override func setUpWithError() throws {
        dir = try TemporaryDirectory()
        var csv = "id:int64,name,city,bio\n"
        for i in 0..<400 { csv += "\(i),name\(i),city\(i % 7)," + String(repeating: "b", count: [3, 40, 600][i % 3]) + "\n" }
        try dir.write("t.csv", csv)
        let r = try kura(["import", "s.kura", "people", "t.csv", "--page-size", "512", "--index", "city", "--index", "name,id"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(try kura(["check", "s.kura"]).status, 0)
    }

    override func tearDown() { dir = nil }

    func kura(_ args: [String]) throws -> KuraTool.Result { try KuraTool.run(args, cwd: dir.path) }

    var store: Data {
        get { dir.bytes("s.kura")! }
        set { _ = FileManager.default.createFile(atPath: dir.file("s.kura"), contents: newValue) }
    }

    /// Pages of a given kind, from `kura pages --json`.
    func pages(kind: String) throws -> [Int] {
        try kura(["pages", "s.kura", "--json"]).stdout.split(separator: "\n").compactMap { line in
            guard let o = parseJSON(String(line)) as? [String: Any], o["kind"] as? String == kind else { return nil }
            return o["page"] as? Int
        }
    }

    /// Rewrites page `n`'s checksum so that the damage inside it is structural.
    func reseal(_ data: inout Data, page n: Int) {
        let base = (n - 1) * Self.pageSize
        let sum = data.withUnsafeBytes { Checksum.xxh64($0.baseAddress! + base, count: Self.pageSize - 8, seed: UInt64(n)) }
        withUnsafeBytes(of: sum.littleEndian) { data.replaceSubrange(base + Self.pageSize - 8 ..< base + Self.pageSize, with: $0) }
    }

    /// Every reading command finishes with a documented exit code.
    func assertNothingCrashes(_ context: String, file: StaticString = #filePath, line: UInt = #line) throws {
        for args in [["check"], ["check", "--json"], ["info"], ["pages"], ["pages", "--json"], ["stats"], ["schema"], ["wal"],
                     ["page", "1"], ["page", "2", "--hex"], ["page", "3", "--json"], ["dump"], ["query", "people", "city == 'city1'"]] {
            let r = try kura([args[0], "s.kura"] + args.dropFirst())
            XCTAssertTrue((0...3).contains(r.status), "\(context): kura \(args) exited \(r.status): \(r.stderr)", file: file, line: line)
        }
    }

    func testFlippedBytesInALeafAreReportedWithThePage() throws {
        let leaf = try pages(kind: "table-leaf")[3]
        var d = store
        d[(leaf - 1) * Self.pageSize + 100] ^= 0xFF
        store = d
        let r = try kura(["check", "s.kura"])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.stdout.contains("page \(leaf): table \"people\": checksum mismatch"), r.stdout)
        XCTAssertTrue(r.stdout.contains("problem"), r.stdout)
        let j = parseJSON(try kura(["check", "s.kura", "--json"]).stdout) as? [String: Any]
        XCTAssertEqual(j?["ok"] as? Bool, false)
        XCTAssertEqual((j?["problems"] as? [[String: Any]])?.first?["page"] as? Int, leaf)
        // The raw commands still work; the engine-based ones say why they cannot.
        XCTAssertEqual(try kura(["info", "s.kura"]).status, 0)
        XCTAssertTrue(try kura(["pages", "s.kura"]).stdout.contains("unreadable"))
        let p = try kura(["page", "s.kura", String(leaf)])
        XCTAssertEqual(p.status, 0)
        XCTAssertTrue(p.stdout.contains("MISMATCH"), p.stdout)
        let q = try kura(["dump", "s.kura"])
        XCTAssertEqual(q.status, 3)
        XCTAssertTrue(q.stderr.contains("page \(leaf) of s.kura"), q.stderr)
        try assertNothingCrashes("flipped leaf")
    }

    func testWellChecksummedButMalformedPages() throws {
        // A cell pointer outside the page, resealed: structure, not checksum.
        let leaf = try pages(kind: "index-leaf")[1]
        var d = store
        let base = (leaf - 1) * Self.pageSize
        d[base + 16] = 0xFF
        d[base + 17] = 0x7F
        reseal(&d, page: leaf)
        store = d
        let r = try kura(["check", "s.kura"])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.stdout.contains("page \(leaf): index \"people_"), r.stdout)
        XCTAssertTrue(r.stdout.contains("outside the content area"), r.stdout)
        XCTAssertTrue(try kura(["page", "s.kura", String(leaf)]).stdout.contains("PROBLEM: pointer"))
        try assertNothingCrashes("bad pointer")

        // An index entry whose key no longer matches its row: swap two bytes of a
        // key inside a valid page.
        try setUpWithError()
        let idx = try pages(kind: "index-leaf")[2]
        var e = store
        let b2 = (idx - 1) * Self.pageSize
        let cell = Int(e[b2 + 16]) | Int(e[b2 + 17]) << 8
        e[b2 + cell + 3] ^= 0x01
        reseal(&e, page: idx)
        store = e
        let c = try kura(["check", "s.kura"])
        XCTAssertEqual(c.status, 1)
        XCTAssertTrue(c.stdout.contains("match no row of table \"people\"") || c.stdout.contains("out of order"), c.stdout)
    }

    func testLeakedAndDoublyUsedPages() throws {
        // Point the table's first interior cell at another tree's page.
        let interior = try pages(kind: "table-interior")[0]
        let indexLeaf = try pages(kind: "index-leaf")[0]
        var d = store
        let base = (interior - 1) * Self.pageSize
        let cell = Int(d[base + 16]) | Int(d[base + 17]) << 8
        let old = Int(d[base + cell]) | Int(d[base + cell + 1]) << 8
        d[base + cell] = UInt8(indexLeaf & 0xFF)
        d[base + cell + 1] = UInt8(indexLeaf >> 8)
        reseal(&d, page: interior)
        store = d
        let r = try kura(["check", "s.kura", "--max", "500"])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.stdout.contains("page \(old): page is neither in a tree nor free (leaked)"), r.stdout)
        XCTAssertTrue(r.stdout.contains("page \(indexLeaf): "), r.stdout)
        try assertNothingCrashes("redirected child")
    }

    func testTruncatedShortAndForeignFiles() throws {
        store = store.prefix(Self.pageSize * 20 + 100)
        let r = try kura(["check", "s.kura"])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.stdout.contains("past the end of the file; the file is truncated"), r.stdout)
        try assertNothingCrashes("truncated")

        store = Data("KuraDB\n\0".utf8) + Data([1, 0, 0, 0])
        let short = try kura(["check", "s.kura"])
        XCTAssertEqual(short.status, 1)
        XCTAssertTrue(short.stdout.contains("page 1: file is 12 bytes, too short"), short.stdout)
        let info = try kura(["info", "s.kura"])
        XCTAssertEqual(info.status, 3)
        XCTAssertTrue(info.stderr.contains("s.kura"), info.stderr)
        try assertNothingCrashes("short")

        store = Data((0..<3000).map { UInt8(truncatingIfNeeded: $0 &* 7919) })
        let foreign = try kura(["check", "s.kura"])
        XCTAssertEqual(foreign.status, 1)
        XCTAssertTrue(foreign.stdout.contains("not a Kura store"), foreign.stdout)
        XCTAssertEqual(try kura(["pages", "s.kura"]).status, 3)
        try assertNothingCrashes("foreign")
    }

    func testDamagedHeaderCounts() throws {
        var d = store
        // Page count 2^32 - 1 and a free count that is wrong, resealed.
        d.replaceSubrange(16..<20, with: [0xFF, 0xFF, 0xFF, 0xFF])
        d[24] &+= 3
        reseal(&d, page: 1)
        store = d
        let r = try kura(["check", "s.kura", "--max", "1000"])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.stdout.contains("page 1: header claims 4294967295 pages"), r.stdout)
        XCTAssertTrue(r.stdout.contains("page 1: header counts"), r.stdout)
        try assertNothingCrashes("header counts")
    }

    func testTornAndForeignLog() throws {
        try dir.write("more.csv", "id:int64,name\n1000,x\n1001,y\n")
        XCTAssertEqual(try kura(["import", "s.kura", "people", "more.csv", "--batch", "1", "--no-checkpoint"]).status, 0)
        var wal = dir.bytes("s.kura-wal")!
        // The frames end where zero bytes written ahead begin (a frame header of zeros), or at the file's end.
        var frames = 0
        while 40 + (frames + 1) * (24 + Self.pageSize) <= wal.count,
              wal[(40 + frames * (24 + Self.pageSize))..<(40 + frames * (24 + Self.pageSize) + 24)].contains(where: { $0 != 0 }) {
            frames += 1
        }
        XCTAssertGreaterThan(frames, 2)
        // Tear the last frame: the second transaction is dropped, the first stays.
        wal = wal.prefix(40 + frames * (24 + Self.pageSize) - 100)
        _ = FileManager.default.createFile(atPath: dir.file("s.kura-wal"), contents: wal)
        let w = try kura(["wal", "s.kura"])
        XCTAssertEqual(w.status, 0)
        XCTAssertTrue(w.stdout.contains("not committed"), w.stdout)
        XCTAssertTrue(w.stdout.contains("bytes of a partial frame at the end"), w.stdout)
        XCTAssertTrue(w.stdout.contains("committed log: ") && w.stdout.contains(" in 1 transactions"), w.stdout)
        XCTAssertEqual(try kura(["check", "s.kura"]).status, 0)
        XCTAssertEqual(try kura(["query", "s.kura", "people", "id >= 1000", "--count"]).stdout, "1\n")
        // Flip a byte in the first frame's page image: in log version 2 (a
        // format-6 store) the image no longer matches its page checksum, so
        // no frame counts and the store reads as the file alone.
        wal[40 + 24 + 100] ^= 0x55
        _ = FileManager.default.createFile(atPath: dir.file("s.kura-wal"), contents: wal)
        let f = try kura(["wal", "s.kura"])
        XCTAssertTrue(f.stdout.contains("version 2,"), f.stdout)
        XCTAssertTrue(f.stdout.contains("frame 1 holds a page image that fails its own checksum"), f.stdout)
        XCTAssertTrue(f.stdout.contains("BAD"), f.stdout)
        XCTAssertEqual(try kura(["check", "s.kura"]).status, 0)
        // A log of another store is ignored.
        wal[24] ^= 0x01
        _ = FileManager.default.createFile(atPath: dir.file("s.kura-wal"), contents: wal)
        XCTAssertTrue(try kura(["wal", "s.kura"]).stdout.contains("NOT the store's"))
        try assertNothingCrashes("foreign log")
    }

    /// Random damage, fixed seed: every reading command ends with 0...3.
    func testRandomDamageNeverCrashes() throws {
        let original = store
        let count = original.count / Self.pageSize
        var rng = SplitMix64(seed: 20261122)
        for round in 0..<12 {
            var d = original
            for _ in 0..<3 {
                let page = Int(rng.next() % UInt64(count)) + 1
                let base = (page - 1) * Self.pageSize
                for _ in 0..<4 {
                    let off = rng.next() % 2 == 0 ? Int(rng.next() % 24) : Int(rng.next() % UInt64(Self.pageSize - 8))
                    d[base + off] = UInt8(truncatingIfNeeded: rng.next())
                }
                if round % 2 == 0 { reseal(&d, page: page) }
            }
            store = d
            try assertNothingCrashes("round \(round)")
        }
    }
}

/// Seeded random numbers, so failures reproduce.
struct SplitMix64 {
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
