// RowPathTests: row reads through RowPath (Query/RowPath.swift: kept pages and
// the row-ID range of each kept child, so a read inside it skips that level's
// search) agree with BTree.get and a model on table trees several levels deep
// (512-byte pages), for row IDs read in increasing order (dense and sparse),
// decreasing, random, and in runs of near neighbours; the IDs include
// negatives, Int64.min and Int64.max - 1, IDs on both sides of every
// separator, gaps left by deleted rows and IDs the table does not have. Then
// index queries (which read their rows through RowPath in read transactions)
// against a full scan of the same table filtered in Swift, on random data with
// deletes and inserts between the queries, an empty table and a single row.
// Prints its seed; KURA_SEED=<n> replays one.

import Foundation
import XCTest
@testable import KuraEngine

final class RowPathTests: XCTestCase {
    func testRowPathReadsAgreeWithTheTree() throws {
        let seed = testSeed("RowPathTests.reads")
        var g = SplitMix64(seed: seed)
        let db = try memoryStore("/rowpath.kura", cacheSize: 1 << 20)
        let (model, probes) = try makeSparseRowIDTable(db, rows: 4000, neighbours: 700, &g)
        let present = model.keys.sorted()
        let increasing = probes.sorted()
        try db.read { tx in
            let info = try tx.table("t")
            let s = tx.snapshotPages!
            let tree = BTree(root: info.rootPage, kind: .table)
            XCTAssertGreaterThanOrEqual(try tree.statistics(s).depth, 3, "seed \(seed)")
            // Every separator of every interior page, and its neighbours:
            // the edges of the kept ranges.
            var separators: [Int64] = []
            var stack = [info.rootPage]
            while let n = stack.popLast() {
                let p = try tree.node(n, s)
                if p.isLeafNode { continue }
                for i in 0..<p.cellCount {
                    let k = p.keyBytes(i)
                    let id = try k.withBytes { b throws(KuraError) in RowIDKey.decode(b.baseAddress!, 0, b.count)!.value }
                    separators += [id &- 1, id, id &+ 1]
                }
                for i in 0...p.cellCount { stack.append(p.child(i)) }
            }
            XCTAssertFalse(separators.isEmpty, "seed \(seed)")
            func check(_ order: [Int64], _ what: String) throws {
                var path = RowPath(tree: tree)
                for id in order {
                    let located = try RowIDKey.withEncoded(id) { k throws(KuraError) in try path.locate(id, k, s) }
                    let got: [UInt8]? = switch located {
                    case nil: nil
                    case .inPage(let p, let o, let c)?: withExtendedLifetime(p) { Array(UnsafeRawBufferPointer(start: p.bytes + o, count: c)) }
                    case .copied(let b)?: b
                    }
                    let expected = try RowIDKey.withEncoded(id) { k throws(KuraError) in try tree.get(k, s) }
                    XCTAssertEqual(got, expected, "row \(id), \(what), seed \(seed)")
                    XCTAssertEqual(got != nil, model[id] != nil, "row \(id), \(what), seed \(seed)")
                    if let got { XCTAssertEqual(try RecordCodec.decode(got), model[id], "row \(id), \(what), seed \(seed)") }
                }
            }
            try check(increasing, "increasing")
            try check(present, "increasing, present rows only")
            try check(Array(present.enumerated().filter { $0.offset % 37 == 0 }.map(\.element)), "increasing, sparse")
            try check(separators.sorted(), "separators, increasing")
            try check(separators.shuffled(using: &g), "separators, random")
            try check(increasing.reversed(), "decreasing")
            try check(probes.shuffled(using: &g), "random")
            var runs: [Int64] = []
            for _ in 0..<200 {
                let start = Int(g.next() % UInt64(increasing.count))
                runs += increasing[start..<min(start + Int(g.next() % 30), increasing.count)]
            }
            try check(runs, "runs")
        }
    }

    /// Index searches (rows read by row ID through RowPath) give the rows a
    /// full scan filtered in Swift gives, through several rounds of deletes
    /// and inserts, in read transactions and write transactions.
    func testIndexQueriesAgreeWithAFilteredScan() throws {
        let seed = testSeed("RowPathTests.queries")
        var g = SplitMix64(seed: seed)
        let db = try memoryStore("/rowpath-queries.kura", cacheSize: 1 << 20)
        try db.write { tx in
            let t = try tx.createTable("t", schema: TableSchema([ColumnDefinition("name", .text), ColumnDefinition("score", .integer)]))
            _ = try tx.createIndex("by_score", on: t, columns: [IndexColumn("score")])
        }
        var model: [Int64: [Value]] = [:]
        func check(_ tx: ReadTransaction, _ context: String) throws {
            // Scores 0..<40: dense values (many rows each, in shared leaves)
            // and sparse ones (value 39 is rare), and absent ones (-1, 40).
            for k in Int64(-1)...40 {
                let got = try tx.fetch(TableQuery("t", where: try KuraPredicate(format: "score == %@", arguments: [.integer(k)])))
                let expected = model.filter { $0.value[1] == .integer(k) }.sorted { $0.key < $1.key }
                XCTAssertEqual(got.map(\.rowID), expected.map(\.key), "score == \(k), \(context)")
                XCTAssertEqual(got.map(\.values), expected.map(\.value), "score == \(k), \(context)")
            }
            for _ in 0..<10 {
                let a = Int64(g.next() % 40)
                let q = TableQuery("t", where: try KuraPredicate(format: "score BETWEEN {%@, %@}", arguments: [.integer(a), .integer(a + 5)]),
                                   sort: [SortKey("score", ascending: false)], limit: 25)
                let got = try tx.fetch(q)
                let expected = model.filter { if case .integer(let s) = $0.value[1] { return s >= a && s <= a + 5 } else { return false } }
                    .sorted { l, r in
                        let (x, y) = (l.value[1].integerValue ?? 0, r.value[1].integerValue ?? 0)
                        return x != y ? x > y : l.key < r.key
                    }.prefix(25)
                XCTAssertEqual(got.map(\.rowID), expected.map(\.key), "BETWEEN \(a), \(context)")
                XCTAssertEqual(got.map(\.values), expected.map(\.value), "BETWEEN \(a), \(context)")
            }
        }
        try db.read { tx in try check(tx, "empty table, seed \(seed)") }
        try db.write { tx in
            let t = try tx.table("t")
            let v: [Value] = [.text("only"), .integer(7)]
            try tx.insert(v, into: t, rowID: Int64.max - 1)
            model[Int64.max - 1] = v
        }
        try db.read { tx in try check(tx, "one row, seed \(seed)") }
        for round in 0..<4 {
            try db.write { tx in
                let t = try tx.table("t")
                for _ in 0..<1500 {
                    // Mostly new IDs at the end; some negative, some far apart.
                    let id: Int64 = g.next() % 10 == 0 ? -Int64(g.next() % 1_000_000) - 1 : Int64(g.next() % 3_000_000)
                    guard model[id] == nil else { continue }
                    let score = g.next() % 50 == 0 ? Int64(39) : Int64(g.next() % 39)
                    let v: [Value] = [.text(String(repeating: "n", count: Int(g.next() % 30))), .integer(score)]
                    try tx.insert(v, into: t, rowID: id)
                    model[id] = v
                }
                for id in model.keys.shuffled(using: &g).prefix(model.count / 5) {
                    _ = try tx.delete(from: t, rowID: id)
                    model[id] = nil
                }
                try check(tx, "round \(round), write transaction, seed \(seed)")
            }
            try db.read { tx in try check(tx, "round \(round), read transaction, seed \(seed)") }
        }
    }
}
