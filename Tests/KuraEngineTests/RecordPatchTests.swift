// Updates by predicate patch each record instead of decoding and re-encoding it,
// and skip index maintenance when no indexed column changes (RecordPatch.swift,
// `WriteTransaction.updateRows`; issue 14 item 5, W6). These tests check:
//   - a patched record has exactly the bytes `RecordCodec.encode` gives for the
//     changed values (same serial types: bodies overwritten; other types: the
//     header rebuilt), and a record too short for a change is not patched;
//   - updates by predicate of indexed and unindexed columns, fixed-width and
//     size-changing values, null, and a column added after some rows were
//     written (short records take the full path), with rollbacks, a cache of 8
//     pages (the transaction spills and reads pages back) and power loss at
//     sampled write/sync/truncate points, match a model; every recovered image
//     equals the last acknowledged state or the one in flight and checks clean.
// Both are seeded: the seed is printed; KURA_SEED replays it.

import Foundation
import XCTest
@testable import KuraEngine

final class RecordPatchTests: XCTestCase {
    struct Rollback: Error {}

    static func seed(_ name: String) -> UInt64 {
        let seed = ProcessInfo.processInfo.environment["KURA_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1...UInt64(UInt32.max))
        print("RecordPatchTests.\(name) seed \(seed) (replay with KURA_SEED=\(seed))")
        return seed
    }

    static func randomValue(_ rng: inout SplitMix64) -> Value {
        switch rng.next() % 9 {
        case 0: return .null
        case 1: return .bool(rng.next() % 2 == 0)
        case 2: return .integer(Int64(rng.next() % 3))
        case 3: return .integer(Int64(bitPattern: rng.next()) >> Int64(rng.next() % 64))
        case 4: return .integer(-Int64(rng.next() % 40_000))
        case 5, 6: return .double(Double(Int64(rng.next() % 1_000_000)) / 7)
        case 7: return .text(String(repeating: "é", count: Int(rng.next() % 9)))
        default: return .blob((0..<Int(rng.next() % 12)).map { _ in UInt8(truncatingIfNeeded: rng.next()) })
        }
    }

    func testPatchedRecordEqualsTheEncodedRow() throws {
        let seed = Self.seed("patch")
        var rng = SplitMix64(seed: seed)
        var sameType = 0, rebuilt = 0, short = 0, shrunkInPlace = 0
        for _ in 0..<3000 {
            // Half the records as a format-9 store writes them (integral
            // doubles in types 10 and 11), half as older formats do.
            let compact = rng.next() % 2 == 0
            let count = 1 + Int(rng.next() % 8)
            var values = (0..<count).map { _ in Self.randomValue(&rng) }
            var changes: [(position: Int, value: Value)] = []
            for p in 0..<(count + 2) where rng.next() % 3 == 0 {
                // Same kind as the old value half the time (a double for a
                // double: integral or not, so its width may change).
                let v: Value = if p < count, case .double = values[p], rng.next() % 2 == 0 {
                    .double(rng.next() % 2 == 0 ? Double(rng.next() % 999) : Double(rng.next() % 99_999) / 8)
                } else { Self.randomValue(&rng) }
                changes.append((p, v))
            }
            var patch = RecordPatch(changes.shuffled(using: &rng), compactDoubles: compact)
            let old = RecordCodec.encode(values, compactDoubles: compact)
            let patched = try patch.apply(to: old)
            if changes.contains(where: { $0.position >= count }) {
                XCTAssertNil(patched, "a record of \(count) values was patched at \(changes.map(\.position)), seed \(seed)")
                short += 1
                continue
            }
            if changes.allSatisfy({ RecordCodec.serialType($0.value, compactDoubles: compact) == RecordCodec.serialType(values[$0.position], compactDoubles: compact) }) { sameType += 1 } else { rebuilt += 1 }
            for c in changes { values[c.position] = c.value }
            let expected = RecordCodec.encode(values, compactDoubles: compact)
            XCTAssertEqual(patched, expected, "values \(values), seed \(seed)")
            // In place: offered exactly when the record does not grow, and
            // then written over the old bytes it gives the same record.
            let length = try old.withUnsafeBytes { b throws(KuraError) in try patch.preparesInPlace(b) }
            XCTAssertEqual(length, expected.count <= old.count ? expected.count : nil, "values \(values), seed \(seed)")
            if let length {
                var buffer = old
                buffer.withUnsafeMutableBytes { patch.writeInPlace($0) }
                XCTAssertEqual(Array(buffer[..<length]), expected, "values \(values), seed \(seed)")
                if length < old.count { shrunkInPlace += 1 }
            }
        }
        XCTAssertGreaterThan(sameType, 300)
        XCTAssertGreaterThan(rebuilt, 300)
        XCTAssertGreaterThan(short, 300)
        XCTAssertGreaterThan(shrunkInPlace, 100)
    }

    func testPatchRejectsAMalformedRecord() {
        // A header that promises more body than the record has.
        var patch = RecordPatch([(0, .double(1))], compactDoubles: true)
        XCTAssertThrowsError(try patch.apply(to: [1, 9, 0, 0])) { e in
            XCTAssertEqual((e as? KuraError)?.code, .corrupt)
        }
    }

    func testUpdatesByPredicateMatchTheModelAcrossRollbacksSpillsAndPowerLoss() throws {
        let seed = Self.seed("updates")
        var rng = SplitMix64(seed: seed)
        let fs = FaultInjectingFileSystem()
        var o = Database.Options()
        o.fileSystem = fs
        o.pageSize = 512
        o.cacheSize = 8 * 512
        o.durability = .full
        o.checkpointThreshold = 60
        o.busyTimeout = 1
        let path = "/patch.kura"
        let db = try Database(path: path, options: o)
        let columns = [ColumnDefinition("name", .text), ColumnDefinition("score", .integer), ColumnDefinition("ts", .double),
                       ColumnDefinition("n", .integer), ColumnDefinition("tag", .text)]
        let extra = ColumnDefinition("extra", .integer, default: .integer(7))
        var width = columns.count
        try db.write { tx in
            let t = try tx.createTable("t", schema: TableSchema(columns))
            try tx.createIndex("by_score", on: t, columns: [IndexColumn("score")])
            try tx.createIndex("by_tag", on: t, columns: [IndexColumn("tag"), IndexColumn("n")])
        }
        func row(_ rng: inout SplitMix64) -> [Value] {
            [.text(String(repeating: "r", count: Int(rng.next() % 30))), .integer(Int64(rng.next() % 100)), .double(Double(rng.next() % 1000)),
             .integer(Int64(rng.next() % 300)), rng.next() % 4 == 0 ? .null : .text("t\(rng.next() % 5)")]
        }
        /// States after each acknowledged transaction (`states[0]`: the empty table).
        var states: [[Int64: [Value]]] = [[:]]
        var model: [Int64: [Value]] = [:]
        try db.write { tx in
            let t = try tx.table("t")
            for _ in 0..<150 {
                let v = row(&rng)
                model[try tx.insert(v, into: t)] = v + []
            }
        }
        states.append(model)

        // Power-loss images taken at sampled mutation points, with how many
        // transactions were acknowledged when each was taken.
        final class Images: @unchecked Sendable {
            // @unchecked Sendable: used only on the test's thread (the hook runs on the writer's, which is it).
            var taken: [(MemoryFileSystem, acknowledged: Int)] = []
            var acknowledged = 0
            var every: UInt64 = 1
        }
        let images = Images()
        images.acknowledged = states.count - 1
        images.every = 7 + rng.next() % 11
        fs.setMutationHook { _, n in
            if UInt64(n) % images.every == 0 && images.taken.count < 10 {
                images.taken.append((fs.powerLossImage(seed: UInt64(n) &* 31 &+ seed), images.acknowledged))
            }
        }

        var counts = (patched: 0, indexed: 0, short: 0, rollbacks: 0)
        for round in 0..<12 {
            if round == 5 {
                // Rows written before this have one value fewer than the schema.
                try db.write { tx in try tx.addColumn(extra, to: try tx.table("t")) }
                width += 1
                states.append(model)
                images.acknowledged = states.count - 1
            }
            let rollback = round % 5 == 4
            var staged = model
            do {
                try db.write { tx in
                    let t = try tx.table("t")
                    for _ in 0..<(3 + Int(rng.next() % 4)) {
                        if rng.next() % 3 == 0 {
                            var v = row(&rng)
                            if width > columns.count { v.append(.integer(Int64(rng.next() % 50))) }
                            staged[try tx.insert(v, into: t)] = v
                            continue
                        }
                        let below = Int64(rng.next() % 100)
                        var set: [String: Value] = [:]
                        switch rng.next() % 6 {
                        case 0, 1: set["ts"] = .double(Double(rng.next() % 10_000) / 4)   // fixed width: in place
                        case 2: set["n"] = rng.next() % 3 == 0 ? .null : .integer(Int64(bitPattern: rng.next()) >> Int64(rng.next() % 64))
                        case 3: set["name"] = .text(String(repeating: "N", count: Int(rng.next() % 60)))
                        case 4: set["score"] = .integer(Int64(rng.next() % 100)); set["ts"] = .integer(5)   // indexed; integer normalized to double
                        default: set["tag"] = rng.next() % 3 == 0 ? .null : .text("t\(rng.next() % 5)")   // indexed
                        }
                        if width > columns.count && rng.next() % 3 == 0 { set["extra"] = .integer(Int64(rng.next() % 1000)) }
                        let n = try tx.update("t", where: try KuraPredicate(format: "score < %@", arguments: [.integer(below)]), set: set)
                        let ids = staged.filter { $0.value[1].integerValue! < below }.map(\.key)
                        XCTAssertEqual(n, ids.count, "seed \(seed)")
                        let all = columns + [extra]
                        for id in ids {
                            for (name, v) in set {
                                let p = all.firstIndex { $0.name == name }!
                                var r = staged[id]!
                                while r.count <= p { r.append(all[r.count].defaultValue) }
                                r[p] = name == "ts" ? .double(v.doubleValue ?? Double(v.integerValue!)) : v
                                staged[id] = r
                            }
                        }
                        if set["score"] != nil || set["tag"] != nil { counts.indexed += 1 } else { counts.patched += 1 }
                        if set["extra"] != nil { counts.short += 1 }
                    }
                    if rollback { throw Rollback() }
                }
                model = staged
                states.append(model)
                images.acknowledged = states.count - 1
            } catch is Rollback {
                counts.rollbacks += 1
            }
            try check(db, model, width: width, columns + [extra], deep: round % 3 == 2, "round \(round), seed \(seed)")
        }
        fs.setMutationHook(nil)
        db.close()

        // Each image recovers to the last acknowledged state or the one after it.
        XCTAssertGreaterThan(images.taken.count, 3)
        for (k, (image, acknowledged)) in images.taken.enumerated() {
            var ro = o
            ro.fileSystem = image
            let recovered = try Database(path: path, options: ro)
            defer { recovered.close() }
            let rows = try recovered.read { tx in try Self.rows(tx, width: columns.count + 1, columns + [extra]) }
            let candidates = [acknowledged, acknowledged + 1].filter { $0 < states.count }.map { Self.padded(states[$0], columns + [extra]) }
            XCTAssertTrue(candidates.contains(rows), "image \(k) (\(acknowledged) acknowledged) matches neither that state nor the next, seed \(seed)")
            XCTAssertEqual(try recovered.read { try $0.checkIntegrity() }, [], "image \(k), seed \(seed)")
        }
        XCTAssertGreaterThan(counts.patched, 5)
        XCTAssertGreaterThan(counts.indexed, 2)
        XCTAssertGreaterThan(counts.rollbacks, 1)
    }

    /// Every row, padded with the defaults of columns it does not store.
    static func rows(_ tx: ReadTransaction, width: Int, _ all: [ColumnDefinition]) throws -> [Int64: [Value]] {
        var out: [Int64: [Value]] = [:]
        let c = try tx.rows(in: try tx.table("t"))
        while let r = try c.next() {
            var v = try r.values()
            while v.count < width { v.append(all[v.count].defaultValue) }
            out[r.rowID] = v
        }
        return out
    }

    static func padded(_ state: [Int64: [Value]], _ all: [ColumnDefinition]) -> [Int64: [Value]] {
        state.mapValues { r in
            var r = r
            while r.count < all.count { r.append(all[r.count].defaultValue) }
            return r
        }
    }

    func check(_ db: Database, _ model: [Int64: [Value]], width: Int, _ all: [ColumnDefinition], deep: Bool, _ context: String) throws {
        try db.read { tx in
            let rows = try Self.rows(tx, width: all.count, all)
            XCTAssertEqual(rows, Self.padded(model, all), context)
            // The indexes agree with the rows (an index scan against the model).
            let below = Int64(50)
            let c = try tx.select(TableQuery("t", where: try KuraPredicate(format: "score < %@", arguments: [.integer(below)])))
            var ids: [Int64] = []
            while let r = try c.next() { ids.append(r.rowID) }
            XCTAssertEqual(Set(ids), Set(model.filter { $0.value[1].integerValue! < below }.keys), context)
            if deep { XCTAssertEqual(try tx.checkIntegrity(), [], context) }
        }
    }
}
