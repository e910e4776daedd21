import Foundation
import XCTest
@testable import KuraEngine

/// One integrity checker (IntegrityCheck.swift): the engine's
/// `ReadTransaction.checkIntegrity` and `kura check` were parallel copies that
/// could disagree on the same file. On a store damaged in several ways, both
/// must report the same problems on the same pages, in the same order.
final class CheckAgreementTests: XCTestCase {
    static let pageSize = 512

    func kura(_ args: [String], _ dir: TemporaryDirectory) throws -> KuraTool.Result { try KuraTool.run(args, cwd: dir.path) }

    /// Rewrites page `n`'s checksum so that the damage inside it is structural.
    func reseal(_ data: inout Data, page n: Int) {
        let base = (n - 1) * Self.pageSize
        let sum = data.withUnsafeBytes { Checksum.xxh64($0.baseAddress! + base, count: Self.pageSize - 8, seed: UInt64(n)) }
        withUnsafeBytes(of: sum.littleEndian) { data.replaceSubrange(base + Self.pageSize - 8 ..< base + Self.pageSize, with: $0) }
    }

    /// Pages of a given kind, as `kura pages` lists them (its walker, run in
    /// this process: a debug `kura` process costs seconds to start).
    func pages(kind: String, _ dir: TemporaryDirectory) throws -> [Int] {
        let store = try RawStore(path: dir.file("s.kura"))
        defer { store.close() }
        return StoreWalker(store, limit: 0, collectUsage: true).run().usage.enumerated().compactMap { $0.element.kind == kind ? $0.offset + 1 : nil }
    }

    /// The problems `kura check` reports, from the walker it runs (in this
    /// process; `cliProblems` runs the real command, and the test does that
    /// once to tie the two together).
    func walkerProblems(_ dir: TemporaryDirectory) throws -> [IntegrityProblem] {
        let store: RawStore
        do throws(KuraError) { store = try RawStore(path: dir.file("s.kura")) } catch {
            return [IntegrityProblem(page: 1, message: error.message)]
        }
        defer { store.close() }
        return StoreWalker(store, limit: 1000).run().problems
    }

    /// `kura check --json`'s problems.
    func cliProblems(_ dir: TemporaryDirectory, file: StaticString = #filePath, line: UInt = #line) throws -> [IntegrityProblem] {
        let r = try kura(["check", "s.kura", "--json", "--max", "1000"], dir)
        XCTAssertEqual(r.status, 1, r.stdout + r.stderr, file: file, line: line)
        guard let o = parseJSON(r.stdout) as? [String: Any], let list = o["problems"] as? [[String: Any]] else {
            XCTFail("no JSON from kura check: \(r.stdout)", file: file, line: line)
            return []
        }
        return list.map { IntegrityProblem(page: UInt32($0["page"] as? Int ?? -1), message: $0["message"] as? String ?? "") }
    }

    /// The engine's problems, on a read-only connection (as `kura check` opens one).
    func engineProblems(_ dir: TemporaryDirectory) throws -> [IntegrityProblem] {
        var o = Database.Options()
        o.fileSystem = ReadOnlyFileSystem()
        o.createIfMissing = false
        let db = try Database(path: dir.file("s.kura"), options: o)
        defer { db.close() }
        return try db.read { tx in try tx.checkIntegrity(limit: 1000) }
    }

    func testEngineAndCLIReportTheSameProblems() throws {
        let dir = try TemporaryDirectory()
        var csv = "id:int64,name,city,bio\n"
        for i in 0..<400 { csv += "\(i),name\(i),city\(i % 7)," + String(repeating: "b", count: [3, 40, 600][i % 3]) + "\n" }
        try dir.write("t.csv", csv)
        let r = try kura(["import", "s.kura", "people", "t.csv", "--page-size", "512", "--index", "city", "--index", "name,id"], dir)
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(try walkerProblems(dir), [])
        let clean = dir.bytes("s.kura")!
        let leaves = try pages(kind: "table-leaf", dir)
        let interiors = try pages(kind: "table-interior", dir)
        XCTAssertGreaterThan(leaves.count, 4)
        XCTAssertFalse(interiors.isEmpty)

        // (what, damage, whether messages must match too: a page that does not
        // read is described by the pager or by the raw store in its own words)
        var damages: [(String, (inout Data) -> Void, Bool)] = []
        damages.append(("flipped byte in a leaf", { d in d[(leaves[2] - 1) * Self.pageSize + 100] ^= 0xFF }, false))
        damages.append(("two cells of a leaf swapped", { d in
            // The leaf's pointers start after its header (12 bytes with the
            // short header of format 10, flag bit 2 of byte 1).
            let base = (leaves[3] - 1) * Self.pageSize + Node.headerSize(flags: d[(leaves[3] - 1) * Self.pageSize + Node.flagsOffset])
            let (a, b) = (d[base], d[base + 1])
            (d[base], d[base + 1]) = (d[base + 2], d[base + 3])
            (d[base + 2], d[base + 3]) = (a, b)
            self.reseal(&d, page: leaves[3])
        }, true))
        damages.append(("an interior page's first child pointing at its second", { d in
            let n = interiors[0]
            let base = (n - 1) * Self.pageSize
            let cell0 = Int(d[base + Node.headerSize]) | Int(d[base + Node.headerSize + 1]) << 8
            let cell1 = Int(d[base + Node.headerSize + 2]) | Int(d[base + Node.headerSize + 3]) << 8
            for k in 0..<4 { d[base + cell0 + k] = d[base + cell1 + k] }
            self.reseal(&d, page: n)
        }, true))
        damages.append(("header free count off by three", { d in
            let o = FileHeader.freeCountOffset
            d[o] = d[o] &+ 3
            self.reseal(&d, page: 1)
        }, true))

        for (i, (what, damage, sameMessages)) in damages.enumerated() {
            var d = clean
            damage(&d)
            _ = FileManager.default.createFile(atPath: dir.file("s.kura"), contents: d)
            let cli = i == 0 ? try cliProblems(dir) : try walkerProblems(dir)
            let engine = try engineProblems(dir)
            XCTAssertFalse(cli.isEmpty, what)
            XCTAssertEqual(engine.map(\.page), cli.map(\.page), "\(what)\nengine: \(engine)\ncli: \(cli)")
            if sameMessages { XCTAssertEqual(engine, cli, what) }
        }

        // Damage the engine writes itself: wrong counters and a stale index entry.
        _ = FileManager.default.createFile(atPath: dir.file("s.kura"), contents: clean)
        let db = try Database(path: dir.file("s.kura"))
        try db.write { tx in
            let w = tx.writer!
            // Counters the commit writes as they are (at the end of the
            // table's right-most leaf).
            guard var t = try tx.countedEntry("people") else { return XCTFail("no table people") }
            t.rowCount = 401
            t.nextRowID = 5
            tx.catalog!.entries["people"] = t
            tx.changedTables.insert("people")
            let index = try tx.indexes(of: "people")[0]
            var key = QueryPlanner.segment(.text("nowhere"), index.columns[0])
            RowIDKey.append(1, to: &key)
            try index.tree.insert(key, [], mode: .insertNew, w)
        }
        db.close()
        let cli = try cliProblems(dir)
        let engine = try engineProblems(dir)
        for e in ["holds 400 rows but its row count says 401", "is not below the next row ID 5", "match no row of table \"people\""] {
            XCTAssertTrue(cli.contains { $0.message.contains(e) }, "kura check misses \"\(e)\": \(cli)")
        }
        XCTAssertEqual(engine, cli)
    }
}
