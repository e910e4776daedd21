// Format 5 keeps each table's row count and next row ID at the end of its
// tree's right-most leaf (FORMAT.md, "Table counters"). Splits and merges move
// and rebuild that leaf; the commit writes the counters again wherever it is.
// These tests drive the tree through appends, growth and shrinking of records,
// deletes at the end and in the middle, and rollbacks, and check the counters
// against a plain model and `checkIntegrity` after every transaction.

import Foundation
import XCTest
@testable import KuraEngine

final class LeafCountersTests: XCTestCase {
    /// The seed of a run: `fixed`, unless KURA_SEED=<n> replays another (printed).
    static func seed(_ fixed: UInt64, _ test: String) -> UInt64 {
        let seed = ProcessInfo.processInfo.environment["KURA_SEED"].flatMap { UInt64($0) } ?? fixed
        print("LeafCountersTests.\(test) seed \(seed) (replay with KURA_SEED=\(seed))")
        return seed
    }

    func testCountersFollowTheRightMostLeafThroughSplitsMergesAndRollbacks() throws {
        let seed = Self.seed(5, "testCountersFollowTheRightMostLeafThroughSplitsMergesAndRollbacks")
        var rng = SplitMix64(seed: seed)
        let dir = try TemporaryDirectory()
        let path = dir.path + "/c.kura"
        var options = Database.Options()
        options.pageSize = 512
        var db = try Database(path: path, options: options)
        defer { db.close() }
        // Model: row ID -> size of the row's text; the next row ID.
        var rows: [Int64: Int] = [:]
        var next: Int64 = 1
        try db.write { tx in _ = try tx.createTable("t") }
        struct Rollback: Error {}
        for step in 0..<400 {
            var newRows = rows
            var newNext = next
            let rollback = rng.next() % 10 == 0
            do {
                try db.write { tx in
                    let t = try tx.table("t")
                    let ops = 1 + Int(rng.next() % 12)
                    for _ in 0..<ops {
                        let ids = newRows.keys.sorted()
                        // Sizes up to past the local limit of a 512-byte page,
                        // so that a few records overflow and leaves hold 1 to 20 cells.
                        let size = Int(rng.next() % 8 == 0 ? 100 + rng.next() % 300 : rng.next() % 40)
                        switch rng.next() % 6 {
                        case 0, 1:
                            let id = try tx.insert([.text(String(repeating: "a", count: size))], into: t)
                            XCTAssertEqual(id, newNext, "step \(step)")
                            newRows[id] = size
                            newNext = id + 1
                        case 2 where !ids.isEmpty:
                            // Grow or shrink a record anywhere: splits and merges
                            // that change no counter.
                            let id = ids[Int(rng.next() % UInt64(ids.count))]
                            XCTAssertTrue(try tx.update([.text(String(repeating: "b", count: size))], in: t, rowID: id))
                            newRows[id] = size
                        case 3 where !ids.isEmpty:
                            // Delete from the end: the right-most leaf empties and merges.
                            let n = min(ids.count, 1 + Int(rng.next() % 15))
                            for id in ids.suffix(n) {
                                XCTAssertTrue(try tx.delete(from: t, rowID: id))
                                newRows[id] = nil
                            }
                        case 4 where !ids.isEmpty:
                            let id = ids[Int(rng.next() % UInt64(ids.count))]
                            XCTAssertTrue(try tx.delete(from: t, rowID: id))
                            newRows[id] = nil
                        default:
                            // The last row grows: the right-most leaf splits
                            // without an insert.
                            if let id = ids.last {
                                XCTAssertTrue(try tx.update([.text(String(repeating: "c", count: 150 + size))], in: t, rowID: id))
                                newRows[id] = 150 + size
                            }
                        }
                    }
                    if rollback { throw Rollback() }
                }
                rows = newRows
                next = newNext
            } catch is Rollback {}
            if step % 50 == 49 {
                db.close()
                db = try Database(path: path, options: options)
            }
            try db.read { tx in
                let t = try tx.table("t")
                XCTAssertEqual(t.rowCount, Int64(rows.count), "step \(step), seed \(seed)")
                XCTAssertEqual(t.nextRowID, next, "step \(step), seed \(seed)")
                XCTAssertEqual(try tx.checkIntegrity(), [], "step \(step), seed \(seed)")
            }
        }
        XCTAssertEqual(StoreWalker(try RawStore(path: path)).run().problems, [])
    }

    /// An update that splits the right-most leaf changes no counter, but the
    /// leaf that held them is rebuilt: the commit writes them to the new one.
    func testUpdateThatSplitsTheRightMostLeafKeepsTheCounters() throws {
        var options = Database.Options()
        options.pageSize = 512
        let db = try Database.inMemory(options: options)
        try db.write { tx in
            let t = try tx.createTable("t")
            for _ in 0..<40 { try tx.insert([.text(String(repeating: "x", count: 30))], into: t) }
            XCTAssertTrue(try tx.delete(from: t, rowID: 40))
        }
        let leaves = try db.read { tx in try tx.statistics(of: try tx.table("t")).leafPages }
        for round in 0..<4 {
            try db.write { tx in
                let t = try tx.table("t")
                XCTAssertTrue(try tx.update([.text(String(repeating: "y", count: 300))], in: t, rowID: 39 - Int64(round)))
            }
            try db.read { tx in
                let t = try tx.table("t")
                XCTAssertEqual(t.rowCount, 39, "round \(round)")
                XCTAssertEqual(t.nextRowID, 41, "round \(round)")
                XCTAssertEqual(try tx.checkIntegrity(), [], "round \(round)")
            }
        }
        let after = try db.read { tx in try tx.statistics(of: try tx.table("t")).leafPages }
        XCTAssertGreaterThan(after, leaves, "the updates split no leaf")
    }

    /// A leaf that becomes the right-most one with fewer than 16 bytes free
    /// gives its last cell to a new right-most leaf, which takes the counters.
    func testFullLeafThatBecomesRightMostGivesUpItsLastCell() throws {
        var options = Database.Options()
        options.pageSize = 512
        let db = try Database.inMemory(options: options)
        try db.write { tx in
            let t = try tx.createTable("t")
            for _ in 0..<3 { try tx.insert([.text(String(repeating: "x", count: 40))], into: t) }
        }
        // Below the transaction layer: the right-most (root) leaf loses its
        // counters and its free space is filled with a cell, as a merge may
        // leave it; then a commit that touches the table must find room.
        let root = try db.read { tx in try tx.table("t").rootPage }
        let s = try db.pager.beginWrite()
        let w = try PageWriter(pager: db.pager, snapshot: s)
        let leaf = try w.writable(root)
        XCTAssertTrue(leaf.hasCounters)
        let counters = try XCTUnwrap(leaf.tableCounters)
        leaf.setU8(Node.flagsOffset, leaf.u8(Node.flagsOffset) & ~Node.countersFlag)
        leaf.defragment(from: leaf.contentEnd - Node.countersSize)
        let tree = BTree(root: root, kind: .table)
        var id: Int64 = 4
        // Cells of at most 60 text bytes, the last one sized to leave fewer
        // than 16 bytes free.
        fill: while try w.page(root).freeSpace >= Node.countersSize {
            let room = try w.page(root).freeSpace - 2
            let key = RowIDKey.encode(id)
            var n = 60
            while true {
                let value = RecordCodec.encode([.text(String(repeating: "y", count: n))])
                if Node.leafLayout(keyLength: key.count, valueLength: value.count, pageSize: 512).size <= room {
                    guard try tree.insert(key, value, mode: .insertNew, w) else { return XCTFail("insert") }
                    id += 1
                    continue fill
                }
                if n == 0 { break fill }
                n -= 1
            }
        }
        XCTAssertTrue(try w.page(root).isLeafNode, "the filler split the root; the test needs a full leaf root")
        XCTAssertLessThan(try w.page(root).freeSpace, Node.countersSize)
        try TableCounters.storeInLeaf(TableCounters(nextRowID: id, rowCount: counters.rowCount + id - 4), root: root, w)
        try w.commit()
        db.pager.endWrite(s)
        try db.read { tx in
            let t = try tx.table("t")
            XCTAssertEqual(t.rowCount, id - 1)
            XCTAssertEqual(t.nextRowID, id)
            XCTAssertEqual(try tx.rowCount(t), Int(id - 1))
            XCTAssertEqual(try tx.checkIntegrity(), [])
            let rootPage = try tx.snapshotPages!.page(root)
            XCTAssertFalse(rootPage.isLeafNode, "the full root leaf split")
            XCTAssertFalse(rootPage.hasCounters)
        }
        // The next insert appends to the new right-most leaf and keeps counting.
        try db.write { tx in _ = try tx.insert([.text("z")], into: try tx.table("t")) }
        try db.read { tx in
            XCTAssertEqual(try tx.table("t").rowCount, id)
            XCTAssertEqual(try tx.checkIntegrity(), [])
        }
    }

    /// A one-row insert into a table with an index logs two pages: the table
    /// leaf, which carries the counters, and the index leaf.
    func testAppendCommitWritesNoPageForTheCounters() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/a.kura"
        let db = try Database(path: path)
        defer { db.close() }
        try db.write { tx in
            let t = try tx.createTable("t", schema: try TableSchema([ColumnDefinition("a", .integer)]))
            try tx.createIndex("t_a", on: t, columns: [IndexColumn("a")])
            for i in 0..<2000 { try tx.insert([.integer(Int64(i % 97))], into: t) }
        }
        XCTAssertTrue(try db.checkpoint())
        let before = db.logFrameCount
        for i in 0..<10 { try db.write { tx in _ = try tx.insert([.integer(Int64(i))], into: try tx.table("t")) } }
        XCTAssertEqual(db.logFrameCount - before, 20)
        try db.read { tx in
            XCTAssertEqual(try tx.table("t").rowCount, 2010)
            XCTAssertEqual(try tx.headerPage().headerCountersRoot, 0)
            XCTAssertEqual(try tx.checkIntegrity(), [])
        }
    }

    /// One-row commits (the W9 writer's shape) store the counters in the leaf
    /// the tree's append hint names, without a descent (TableCounters.storeInLeaf).
    /// The hint is carried from commit to commit; appends split the right-most
    /// leaf (the hint goes stale and the commit descends), deletes at the end
    /// empty and merge it, larger rows split it in the middle of a commit. After
    /// every commit another connection reads the counters from the store.
    func testOneRowCommitsKeepCountersThroughHintedRightMostLeaf() throws {
        let seed = Self.seed(9, "testOneRowCommitsKeepCountersThroughHintedRightMostLeaf")
        var rng = SplitMix64(seed: seed)
        let dir = try TemporaryDirectory()
        let path = dir.path + "/h.kura"
        var options = Database.Options()
        options.pageSize = 512
        let db = try Database(path: path, options: options)
        defer { db.close() }
        try db.write { tx in
            let t = try tx.createTable("t", schema: try TableSchema([ColumnDefinition("name", .text), ColumnDefinition("score", .integer)]))
            try tx.createIndex("t_score", on: t, columns: [IndexColumn("score")])
        }
        var ids: [Int64] = []
        var next: Int64 = 1
        var leaves = 0
        for step in 0..<600 {
            let r = rng.next() % 20
            try db.write { tx in
                let t = try tx.table("t")
                switch r {
                case 0 where !ids.isEmpty:
                    // Delete from the end: the right-most leaf empties and merges.
                    for id in ids.suffix(1 + Int(rng.next() % 12)) {
                        XCTAssertTrue(try tx.delete(from: t, rowID: id))
                        ids.removeLast()
                    }
                case 1:
                    // Several rows, some large: splits within the commit.
                    for _ in 0..<(2 + Int(rng.next() % 6)) {
                        let size = rng.next() % 3 == 0 ? 200 : 10
                        let id = try tx.insert([.text(String(repeating: "m", count: size)), .integer(Int64(rng.next() % 50))], into: t)
                        XCTAssertEqual(id, next, "step \(step), seed \(seed)")
                        ids.append(id)
                        next = id + 1
                    }
                default:
                    let id = try tx.insert([.text("w9-\(step)"), .integer(Int64(rng.next() % 50))], into: t)
                    XCTAssertEqual(id, next, "step \(step), seed \(seed)")
                    ids.append(id)
                    next = id + 1
                }
            }
            let other = try Database(path: path, options: options)
            defer { other.close() }
            try other.read { tx in
                let t = try tx.table("t")
                XCTAssertEqual(t.rowCount, Int64(ids.count), "step \(step), seed \(seed)")
                XCTAssertEqual(t.nextRowID, next, "step \(step), seed \(seed)")
                XCTAssertEqual(try tx.rowCount(t), ids.count, "step \(step), seed \(seed)")
                if step % 25 == 24 {
                    XCTAssertEqual(try tx.checkIntegrity(), [], "step \(step), seed \(seed)")
                }
                leaves = max(leaves, try tx.statistics(of: t).leafPages)
            }
        }
        XCTAssertGreaterThan(leaves, 10, "the appends split no leaf")
        XCTAssertEqual(StoreWalker(try RawStore(path: path)).run().problems, [])
    }

    /// Writes one page below the transaction layer (which would repair what
    /// these tests damage), as a damaged or hostile store holds it.
    func damage(_ db: Database, page number: UInt32, _ body: (Page) -> Void) throws {
        let s = try db.pager.beginWrite()
        defer { db.pager.endWrite(s) }
        let w = try PageWriter(pager: db.pager, snapshot: s)
        body(try w.writable(number))
        try w.commit()
    }

    /// Counters no table can have (a next row ID below 1, a negative row
    /// count) are `corrupt`, naming the table and the leaf.
    func testMalformedCountersAreCorruptionNamingTheLeaf() throws {
        let db = try Database.inMemory()
        try db.write { tx in _ = try tx.insert([.integer(1)], into: try tx.createTable("t")) }
        let root = try db.read { tx in try tx.table("t").rootPage }
        try damage(db, page: root) { XCTAssertTrue($0.setTableCounters(nextRowID: 0, rowCount: -1)) }
        XCTAssertThrowsError(try db.read { tx in try tx.table("t") }) { e in
            XCTAssertEqual((e as? KuraError)?.code, .corrupt)
            XCTAssertEqual((e as? KuraError)?.page, root)
            XCTAssertTrue((e as? KuraError)?.message.contains("counters of table \"t\"") == true, "\(e)")
        }
        let problems = try db.read { tx in try tx.checkIntegrity() }.map(\.message)
        XCTAssertTrue(problems.contains { $0.contains("are malformed: next row ID 0, row count -1") }, "\(problems)")
    }

    /// The counters flag on a page that may not carry it: on an index leaf it
    /// fails the page's validation when the page is read from disk; on a table
    /// leaf that is not the right-most one, `checkIntegrity` reports it.
    func testCountersFlagOutOfPlaceIsReported() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/f.kura"
        var options = Database.Options()
        options.pageSize = 512
        do {
            let db = try Database(path: path, options: options)
            defer { db.close() }
            try db.write { tx in
                let t = try tx.createTable("t", schema: try TableSchema([ColumnDefinition("a", .integer)]))
                try tx.createIndex("t_a", on: t, columns: [IndexColumn("a")])
                for i in 0..<200 { try tx.insert([.integer(Int64(i))], into: t) }
                // Room in the first leaf for the counters below.
                for id in 1...10 { XCTAssertTrue(try tx.delete(from: t, rowID: Int64(id))) }
            }
            let firstLeaf = try db.read { tx -> UInt32 in
                var cursor = TreeCursor(tree: BTree(root: try tx.table("t").rootPage, kind: .table))
                try cursor.first(tx.snapshotPages!)
                return cursor.leaf.number
            }
            XCTAssertNotEqual(firstLeaf, try db.read { tx in try tx.table("t").rootPage }, "the table needs more than one leaf")
            try damage(db, page: firstLeaf) { XCTAssertTrue($0.setTableCounters(nextRowID: 1, rowCount: 0)) }
            let problems = try db.read { tx in try tx.checkIntegrity() }
            XCTAssertEqual(problems.map(\.page), [firstLeaf], "\(problems)")
            XCTAssertTrue(problems.first?.message.contains("is not its tree's right-most leaf") == true, "\(problems)")
            let indexRoot = try db.read { tx in try tx.indexes(of: "t")[0].info.rootPage }
            try damage(db, page: indexRoot) { $0.setU8(Node.flagsOffset, Node.countersFlag) }
        }
        // Read from disk again: the index page fails validation.
        let db = try Database(path: path, options: options)
        defer { db.close() }
        XCTAssertThrowsError(try db.read { tx in try tx.fetch(try TableQuery("t", where: "a == 50")) }) { e in
            XCTAssertEqual((e as? KuraError)?.code, .corrupt)
            XCTAssertTrue((e as? KuraError)?.message.contains("flags byte 1 is not allowed") == true, "\(e)")
            XCTAssertNotNil((e as? KuraError)?.page)
        }
    }
}
