// Format 9: doubles that are integers in the Int32 range are stored in serial
// type 10 (1 body byte, -128...127) or 11 (4 bytes) instead of 9 (FORMAT.md,
// "Records"). These tests check:
//   - the writer's choice at the boundaries (-0.0, NaN, infinities, fractions,
//     2^53 and Int32.min/max +- 1 keep type 9) and a bit-exact round trip
//     through every decoder; the FORMAT.md worked example byte for byte;
//   - a format-9 store and a format-8 store (type 9 only) given the same
//     random rows, updates (in place and not) and deletes answer every query
//     alike (compiled ==, <, BETWEEN, IN against integer and double
//     constants, sorts, an index on a double column) and hold the model's
//     values bit for bit, and both check clean;
//   - a W6-shaped update to 1.0 and back, in place in the leaf;
//   - the upgrade: a format-8 store opened alone becomes 9, beside another
//     connection it stays 8 and writes type 9 only (raw records too);
//   - a type-10 double in a format-8 store is reported by the checker with its page.
// Randomized tests print their seed; KURA_SEED replays it.

import Foundation
import XCTest
@testable import KuraEngine

final class CompactDoublesTests: XCTestCase {
    /// Doubles at and around every boundary of types 10 and 11.
    static let boundaries: [Double] = [
        0, -0.0, 1, -1, 127, 128, -128, -129, 127.5, -128.5, 255, 32767, -32768,
        Double(Int32.max), Double(Int32.max) + 1, Double(Int32.min), Double(Int32.min) - 1,
        Double(Int32.max) - 0.5, Double(Int32.min) + 0.5, Double(Int32.max) + 0.5, Double(Int32.min) - 0.5,
        Double(Int32.max) + 0.999, Double(Int32.min) - 0.999, 9_007_199_254_740_992, -9_007_199_254_740_992,
        .nan, -.nan, .infinity, -.infinity, .ulpOfOne, .leastNonzeroMagnitude, -.leastNonzeroMagnitude,
        .greatestFiniteMagnitude, 0.5, -0.5, 1.0000000000000002, 2.5,
        // Dates: whole seconds since 2001 (type 11 until 2069) and fractions.
        7.5e8, 7.5e8 + 0.25, 2.2e9, 3.0e9,
    ]

    /// The serial type a format-9 writer must choose for `d`.
    static func expectedType(_ d: Double) -> UInt64 {
        guard let i = Int32(exactly: d), d.sign == .plus || d != 0 else { return 9 }
        return i >= -128 && i <= 127 ? 10 : 11
    }

    static func randomDouble(_ g: inout SplitMix64) -> Double {
        switch g.next() % 8 {
        case 0, 1: return boundaries[Int(g.next() % UInt64(boundaries.count))]
        case 2: return Double(Int64(g.next() % 400) - 200)
        case 3: return Double(Int32(truncatingIfNeeded: g.next()))
        case 4: return Double(Int64(g.next() % 2_000_000) - 1_000_000) / 4
        case 5: return 7.0e8 + Double(g.next() % 100_000_000)
        case 6: return Double(bitPattern: g.next())
        default: return Double(Int64(bitPattern: g.next()) >> Int64(g.next() % 63))
        }
    }

    /// Whether two rows are equal, doubles compared bit for bit.
    static func same(_ a: [Value], _ b: [Value]) -> Bool {
        guard a.count == b.count else { return false }
        for (x, y) in zip(a, b) {
            if case .double(let p) = x, case .double(let q) = y {
                if p.bitPattern != q.bitPattern { return false }
            } else if x != y {
                return false
            }
        }
        return true
    }

    /// Serial types of each record of table `name`, counted.
    static func storedTypes(_ db: Database, _ name: String) throws -> [UInt64: Int] {
        try db.read { tx in
            var counts: [UInt64: Int] = [:]
            let c = try tx.rows(in: try tx.table(name))
            while let r = try c.next() {
                try r.record.withUnsafeBytes { b in for t in try RecordView(b).types { counts[t, default: 0] += 1 } }
            }
            return counts
        }
    }

    func testSerialTypesAndBitExactRoundTrip() throws {
        for d in Self.boundaries {
            let want = Self.expectedType(d)
            XCTAssertEqual(RecordCodec.compactDoubleType(d), want, "\(d)")
            XCTAssertEqual(RecordCodec.serialType(.double(d), compactDoubles: true), want, "\(d)")
            XCTAssertEqual(RecordCodec.serialType(.double(d), compactDoubles: false), 9, "\(d)")
        }
        let seed = testSeed("CompactDoublesTests.roundTrip")
        var g = SplitMix64(seed: seed)
        for _ in 0..<5000 {
            let values: [Value] = (0..<(1 + Int(g.next() % 6))).map { _ in
                g.next() % 4 == 0 ? .integer(Int64(g.next() % 300) - 150) : .double(Self.randomDouble(&g))
            }
            for compact in [false, true] {
                let r = RecordCodec.encode(values, compactDoubles: compact)
                XCTAssertTrue(Self.same(try RecordCodec.decode(r), values), "\(values), compact \(compact), seed \(seed)")
                try r.withUnsafeBytes { b throws in
                    let view = try RecordView(b)
                    var fields = RecordFields(columns: values.count)
                    try fields.load(b)
                    for i in values.indices {
                        XCTAssertTrue(Self.same([try view.value(at: i)], [values[i]]), "\(values), seed \(seed)")
                        XCTAssertTrue(Self.same([try RecordCodec.value(at: i, in: b)], [values[i]]), "\(values), seed \(seed)")
                        XCTAssertTrue(Self.same([try fields.value(i)], [values[i]]), "\(values), seed \(seed)")
                        if case .double(let d) = values[i] {
                            XCTAssertEqual(view.types[i], compact ? Self.expectedType(d) : 9, "\(d), seed \(seed)")
                        }
                    }
                }
            }
        }
        // A type-10 or type-11 body that runs past the record is corrupt.
        for bad: [UInt8] in [[1, 10], [1, 11, 1, 2, 3]] {
            XCTAssertThrowsError(try RecordCodec.decode(bad), "\(bad)") { e in XCTAssertEqual((e as? KuraError)?.code, .corrupt) }
        }
    }

    /// FORMAT.md, "Records", the format-9 worked example.
    func testWorkedCompactDoubleExampleFromFormatMd() throws {
        let values: [Value] = [.double(1), .double(-3), .double(7.5e8), .double(2.5), .double(-0.0)]
        let bytes = RecordCodec.encode(values, compactDoubles: true)
        XCTAssertEqual(bytes.map { String(format: "%02x", $0) }.joined(separator: " "),
                       "05 0a 0a 0b 09 09 01 fd 80 17 b4 2c 00 00 00 00 00 00 04 40 00 00 00 00 00 00 00 80")
        XCTAssertTrue(Self.same(try RecordCodec.decode(bytes), values))
        // The same row as older formats store it: every double in 8 bytes.
        XCTAssertEqual(RecordCodec.encode(values).count, 6 + 5 * 8)
        XCTAssertEqual(RecordCodec.encode(values), RecordCodec.encode(values, compactDoubles: false))
    }

    /// Two stores, one of format 9 and one kept at 8 (type 9 only), get the
    /// same rows, updates and deletes; every query answers alike in both,
    /// values match the model bit for bit, and both check clean.
    func testFormatNineAnswersLikeFormatEight() throws {
        let seed = testSeed("CompactDoublesTests.differential")
        var g = SplitMix64(seed: seed)
        let nine = try memoryStore("/nine.kura")
        let eight = try memoryStore("/eight.kura")
        try eight.setFormatForTesting(8)
        let stores = [nine, eight]
        let schema = try TableSchema([ColumnDefinition("d", .double), ColumnDefinition("e", .double), ColumnDefinition("n", .integer)])
        for db in stores {
            try db.write { tx in
                let t = try tx.createTable("t", schema: schema)
                try tx.createIndex("by_d", on: t, columns: [IndexColumn("d")])
                try tx.createIndex("by_n", on: t, columns: [IndexColumn("n")])
            }
        }
        var model: [Int64: [Value]] = [:]
        // An index refuses NaN: column d (indexed) gets none, e (not indexed) does.
        func indexable(_ d: Double) -> Double { d.isNaN ? 0.5 : d }
        func row() -> [Value] { [.double(indexable(Self.randomDouble(&g))), .double(Self.randomDouble(&g)), .integer(Int64(g.next() % 100))] }
        func constant() -> PredicateArgument {
            g.next() % 2 == 0 ? .value(.integer(Int64(g.next() % 600) - 300)) : .value(.double(Self.randomDouble(&g)))
        }
        for round in 0..<12 {
            // The same random operations on both stores.
            var ops: [(kind: UInt64, rows: [[Value]], k: Int64, set: [String: Value], id: Int64)] = []
            for _ in 0..<6 {
                let kind = g.next() % 5
                let id = model.keys.sorted().dropFirst(Int(g.next() % UInt64(max(model.count, 1)))).first ?? 0
                let set: [String: Value] = g.next() % 3 == 0 ? ["d": .double(indexable(Self.randomDouble(&g)))] : ["e": .double(Self.randomDouble(&g))]
                ops.append((kind, (0..<(round == 0 ? 300 : 20)).map { _ in row() }, Int64(g.next() % 100), set, id))
            }
            var ids: [[Int64]] = []
            for db in stores {
                try db.write { tx in
                    let t = try tx.table("t")
                    var inserted: [Int64] = []
                    for op in ops {
                        switch op.kind {
                        case 0, 1:
                            for r in op.rows { inserted.append(try tx.insert(r, into: t)) }
                        case 2:
                            // By predicate on the indexed integer: in place for "e".
                            _ = try tx.update("t", where: try KuraPredicate(format: "n < %@", arguments: [.value(.integer(op.k / 4))]), set: op.set)
                        case 3:
                            if model[op.id] != nil { _ = try tx.update(op.rows[0], in: t, rowID: op.id) }
                        default:
                            _ = try tx.delete(from: "t", where: try KuraPredicate(format: "n == %@", arguments: [.value(.integer(op.k))]))
                        }
                    }
                    ids.append(inserted)
                }
            }
            XCTAssertEqual(ids[0], ids[1], "seed \(seed)")
            // The model, replaying the operations.
            var at = 0
            for op in ops {
                switch op.kind {
                case 0, 1:
                    for r in op.rows { model[ids[0][at]] = r; at += 1 }
                case 2:
                    for (id, r) in model {
                        guard case .integer(let n) = r[2], n < op.k / 4 else { continue }
                        var v = r
                        for (name, x) in op.set { v[name == "d" ? 0 : 1] = x }
                        model[id] = v
                    }
                case 3:
                    if model[op.id] != nil { model[op.id] = op.rows[0] }
                default:
                    model = model.filter { $0.value[2] != .integer(op.k) }
                }
            }
            for db in stores {
                try db.read { tx in
                    let c = try tx.rows(in: try tx.table("t"))
                    var seen = 0
                    while let r = try c.next() {
                        XCTAssertTrue(Self.same(try r.values(), model[r.rowID] ?? []), "row \(r.rowID), round \(round), seed \(seed)")
                        seen += 1
                    }
                    XCTAssertEqual(seen, model.count, "seed \(seed)")
                    XCTAssertEqual(try tx.checkIntegrity(), [], "round \(round), seed \(seed)")
                }
            }
            // Queries: compiled comparisons, index lookups and sorts.
            for _ in 0..<20 {
                let column = g.next() % 2 == 0 ? "d" : "e"
                let a = constant(), b = constant()
                let (format, args): (String, [PredicateArgument]) = switch g.next() % 6 {
                case 0: ("\(column) == %@", [a])
                case 1: ("\(column) < %@", [a])
                case 2: ("\(column) >= %@", [a])
                case 3: ("\(column) BETWEEN {%@, %@}", [a, b])
                case 4: ("\(column) IN %@", [.list([a, b, .value(.double(1))])])
                default: ("\(column) != %@ AND n < 50", [a])
                }
                let q = TableQuery("t", where: try KuraPredicate(format: format, arguments: args), sort: [SortKey(column), SortKey("n")])
                let answers = try stores.map { db in try db.read { tx in try tx.fetch(q).map(\.rowID) } }
                XCTAssertEqual(answers[0], answers[1], "\(format) \(args), seed \(seed)")
                let counts = try stores.map { db in try db.read { tx in try tx.count(q) } }
                XCTAssertEqual(counts[0], answers[0].count, "\(format) \(args), seed \(seed)")
                XCTAssertEqual(counts[1], answers[1].count, "\(format) \(args), seed \(seed)")
            }
        }
        // The format-9 store holds all three double types, the format-8 one type 9 only.
        let nineTypes = try Self.storedTypes(nine, "t")
        let eightTypes = try Self.storedTypes(eight, "t")
        XCTAssertGreaterThan(nineTypes[10, default: 0], 0, "\(nineTypes)")
        XCTAssertGreaterThan(nineTypes[11, default: 0], 0, "\(nineTypes)")
        XCTAssertEqual(eightTypes[10, default: 0] + eightTypes[11, default: 0], 0, "\(eightTypes)")
        XCTAssertEqual(try eight.read { tx in try tx.headerPage().headerVersion }, 8)
        XCTAssertEqual(try nine.read { tx in try tx.headerPage().headerVersion }, FileHeader.formatVersion)
    }

    /// W6's shape: an update by an exact index plan sets a double column to
    /// 1.0 on a tenth of the rows (8 body bytes become 1, in place in each
    /// leaf: no page is added, the cells stay where they were), then back to
    /// fractions (they grow again). Values and the checker agree throughout.
    func testWSixShapedUpdateShrinksInPlaceAndBack() throws {
        let db = try memoryStore("/w6.kura", pageSize: 4096)
        try db.write { tx in
            let t = try tx.createTable("t", schema: TableSchema([ColumnDefinition("name", .text), ColumnDefinition("score", .integer),
                                                                 ColumnDefinition("ts", .double)]))
            for i in 0..<2000 { _ = try tx.insert([.text("name \(i)"), .integer(Int64(i * 7919 % 1000)), .double(Double(i) * 0.25 + 0.125)], into: t) }
            try tx.createIndex("by_score", on: t, columns: [IndexColumn("score")])
        }
        func state() throws -> (pages: Int, offsets: [Int64: Int], fragmented: Int) {
            try db.read { tx in
                let s = try XCTUnwrap(tx.snapshotPages)
                var offsets: [Int64: Int] = [:]
                var fragmented = 0
                var cursor = TreeCursor(tree: BTree(root: try tx.table("t").rootPage, kind: .table))
                try cursor.first(s)
                var leaves = Set<UInt32>()
                while cursor.isValid {
                    let id = try XCTUnwrap(RowIDKey.decode(Array(cursor.key)))
                    offsets[id] = Int(cursor.leaf.number) << 16 | cursor.leaf.cellOffset(cursor.index)
                    if leaves.insert(cursor.leaf.number).inserted { fragmented += cursor.leaf.fragmented }
                    try cursor.next(s)
                }
                return (Int(try tx.headerPage().headerPageCount), offsets, fragmented)
            }
        }
        let before = try state()
        let q = try TableQuery("t", where: "score < 100")
        XCTAssertTrue(try db.read { tx in try tx.plan(q, try tx.resolve(q), explaining: false) }.exact)
        let n = try db.write { tx in try tx.update("t", where: try KuraPredicate(format: "score < 100"), set: ["ts": .double(1)]) }
        XCTAssertEqual(n, 200)
        let after = try state()
        XCTAssertEqual(after.pages, before.pages)
        XCTAssertEqual(after.offsets, before.offsets, "every cell stays where it was")
        XCTAssertEqual(after.fragmented - before.fragmented, 200 * 7, "each updated row's value is 7 bytes shorter")
        XCTAssertEqual(try db.read { tx in try tx.checkIntegrity() }, [])
        XCTAssertEqual(try db.read { tx in try tx.count(try TableQuery("t", where: "ts == 1")) }, 200)
        XCTAssertEqual(try db.read { tx in try tx.count(try TableQuery("t", where: "ts == 1.0 AND score < 100")) }, 200)
        XCTAssertEqual(try Self.storedTypes(db, "t")[10], 200)
        // Back to fractions: the values grow again (the general path).
        try db.write { tx in _ = try tx.update("t", where: try KuraPredicate(format: "score < 100"), set: ["ts": .double(0.5)]) }
        XCTAssertEqual(try Self.storedTypes(db, "t")[10, default: 0], 0)
        XCTAssertEqual(try db.read { tx in try tx.count(try TableQuery("t", where: "ts == 0.5")) }, 200)
        XCTAssertEqual(try db.read { tx in try tx.checkIntegrity() }, [])
        // And to an integer again, then one outside Int32.
        try db.write { tx in _ = try tx.update("t", where: try KuraPredicate(format: "score < 100"), set: ["ts": .double(-100_000)]) }
        XCTAssertEqual(try Self.storedTypes(db, "t")[11], 200)
        try db.write { tx in _ = try tx.update("t", where: try KuraPredicate(format: "score < 100"), set: ["ts": .double(3e9)]) }
        XCTAssertEqual(try Self.storedTypes(db, "t")[11, default: 0], 0)
        XCTAssertEqual(try db.read { tx in try tx.count(try TableQuery("t", where: "ts == 3000000000")) }, 200)
        XCTAssertEqual(try db.read { tx in try tx.checkIntegrity() }, [])
    }

    /// A format-8 store: beside another connection it stays 8 and its rows
    /// (raw records too) keep type 9; opened alone it becomes 9, its old
    /// rows read as before and new rows take types 10 and 11.
    func testUpgradeFromFormatEight() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/eight.kura"
        let schema = try TableSchema([ColumnDefinition("d", .double)])
        do {
            let db = try Database(path: path)
            try db.setFormatForTesting(8)
            try db.write { tx in
                let t = try tx.createTable("t", schema: schema)
                let raw = try tx.createTable("raw")
                for i in 0..<50 { _ = try tx.insert([.double(Double(i))], into: t) }
                // A raw record with a type-10 double is stored with type 9.
                _ = try tx.insertRecord(RecordCodec.encode([.double(5)], compactDoubles: true), into: raw)
            }
            db.close()
        }
        XCTAssertEqual(try fileVersion(path), 8)
        do {
            let other = try ReaderMarksTests.ForeignOpenLock(path)
            let beside = try Database(path: path)
            try beside.write { tx in
                for i in 0..<50 { _ = try tx.insert([.double(Double(i))], into: try tx.table("t")) }
                _ = try tx.update("t", where: try KuraPredicate(format: "d < 10"), set: ["d": .double(1)])
                _ = try tx.updateRecord(RecordCodec.encode([.double(6)], compactDoubles: true), in: try tx.table("raw"), rowID: 1)
            }
            XCTAssertTrue(try beside.checkpoint())
            XCTAssertEqual(try fileVersion(path), 8)
            XCTAssertEqual(try Self.storedTypes(beside, "t"), [9: 100])
            XCTAssertEqual(try Self.storedTypes(beside, "raw"), [9: 1])
            XCTAssertEqual(try beside.read { tx in try tx.values(in: try tx.table("raw"), rowID: 1) }, [.double(6)])
            XCTAssertEqual(try beside.read { tx in try tx.checkIntegrity() }, [])
            beside.close()
            withExtendedLifetime(other) {}
        }
        let alone = try Database(path: path)
        defer { alone.close() }
        XCTAssertEqual(try fileVersion(path), FileHeader.formatVersion, "opened alone, the store moves to this build's format")
        XCTAssertEqual(try Self.storedTypes(alone, "t"), [9: 100], "the move rewrites no row")
        try alone.write { tx in
            let t = try tx.table("t")
            _ = try tx.insert([.double(2)], into: t)
            _ = try tx.insert([.double(1000)], into: t)
            _ = try tx.insert([.double(2.5)], into: t)
        }
        XCTAssertEqual(try Self.storedTypes(alone, "t"), [9: 101, 10: 1, 11: 1])
        XCTAssertEqual(try alone.read { tx in try tx.count(try TableQuery("t", where: "d == 1")) }, 20)
        XCTAssertEqual(try alone.read { tx in try tx.count(try TableQuery("t", where: "d == 2")) }, 1)
        XCTAssertEqual(try alone.read { tx in try tx.checkIntegrity() }, [])
    }

    /// A type-10 double in a store of format 8 (which only format 9 allows)
    /// is reported by the checker with its leaf page; it still reads as the
    /// double it encodes.
    func testCompactDoubleInAFormatEightStoreIsReported() throws {
        let db = try memoryStore("/bad.kura")
        // Made at format 9, whose leaves (16-byte headers) a format-8 store
        // may hold: the doubles are the only thing out of place.
        try db.setFormatForTesting(9)
        try db.write { tx in
            let t = try tx.createTable("t", schema: TableSchema([ColumnDefinition("d", .double)]))
            for i in 0..<40 { _ = try tx.insert([.double(Double(i) + 0.5)], into: t) }
            _ = try tx.insert([.double(7)], into: t)
        }
        XCTAssertEqual(try db.read { tx in try tx.checkIntegrity() }, [])
        // As a buggy writer would leave it: the header says 8.
        try db.write { tx in
            tx.writer!.header.headerVersion = 8
            tx.writer!.markModified()
        }
        let leaf = try db.read { tx -> UInt32 in
            var cursor = TreeCursor(tree: BTree(root: try tx.table("t").rootPage, kind: .table))
            let s = try XCTUnwrap(tx.snapshotPages)
            try cursor.first(s)
            var leaf: UInt32 = 0
            while cursor.isValid {
                if RowIDKey.decode(Array(cursor.key)) == 41 { leaf = cursor.leaf.number }
                try cursor.next(s)
            }
            return leaf
        }
        let problems = try db.read { tx in try tx.checkIntegrity() }
        XCTAssertEqual(problems.count, 1, "\(problems)")
        XCTAssertEqual(problems.first?.page, leaf, "\(problems)")
        XCTAssertTrue(problems.first?.message.contains("serial type 10") == true, "\(problems)")
        XCTAssertEqual(try db.read { tx in try tx.values(in: try tx.table("t"), rowID: 41) }, [.double(7)])
    }
}
