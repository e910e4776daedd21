// Deterministic mutation loop (RELIABILITY.md, "Hostile bytes"): small valid
// stores are mutated — bits flipped, bytes and ranges overwritten, files cut or
// extended, pages and frames copied over each other — and opened, read in full,
// queried through an index, checked, and written to. Half of the mutated files
// have every checksum recomputed afterwards, so the damage reaches the decoders
// behind the checksums (tree pages, records, catalog, freelist, index keys).
//
// Every outcome must be a thrown `KuraError` or a right answer, never a trap:
//   - store-file mutations, checksums not recomputed: if everything reads
//     without error, the contents are exactly the original ones (or none, when
//     the file was cut to zero bytes: an empty file is a new store);
//   - log mutations, checksums not recomputed: the contents are the state after
//     one of the committed transactions (the log is cut at the damaged frame);
//   - checksums recomputed: any KuraError, or any answer (the bytes are "valid").
//
// 16,000 mutated files per run (KURA_LONG=1: 200,000). Fixed seeds.

import Foundation
import XCTest
@testable import KuraEngine

/// Recomputes every page checksum of a store file (FORMAT.md, "Checksums").
func resealStore(_ bytes: inout [UInt8], pageSize: Int) {
    bytes.withUnsafeMutableBytes { b in
        var n = 0
        while (n + 1) * pageSize <= b.count {
            let base = b.baseAddress! + n * pageSize
            let sum = Checksum.xxh64(base, count: pageSize - 8, seed: UInt64(n + 1))
            (base + pageSize - 8).storeBytes(of: sum.littleEndian, as: UInt64.self)
            n += 1
        }
    }
}

/// Recomputes the log header checksum, every frame's page trailer and the
/// chain checksums (FORMAT.md, "Chain checksum").
func resealLog(_ bytes: inout [UInt8], pageSize: Int) {
    guard bytes.count >= 40 else { return }
    bytes.withUnsafeMutableBytes { b in
        let p = b.baseAddress!
        // The chain rule of the header's log version (a mutated version reseals as version 1).
        let version = UInt32(littleEndian: (p + 4).loadUnaligned(as: UInt32.self))
        var chain = Checksum.xxh64(p, count: 32, seed: 0)
        (p + 32).storeBytes(of: chain.littleEndian, as: UInt64.self)
        let frameSize = 24 + pageSize
        var offset = 40
        while offset + frameSize <= b.count {
            let f = p + offset
            let page = UInt32(littleEndian: f.loadUnaligned(as: UInt32.self))
            let image = f + 24
            let trailer = Checksum.xxh64(image, count: pageSize - 8, seed: UInt64(page))
            (image + pageSize - 8).storeBytes(of: trailer.littleEndian, as: UInt64.self)
            chain = WriteAheadLog.chain(of: f, pageSize: pageSize, previous: chain, version: version)
            (f + 16).storeBytes(of: chain.littleEndian, as: UInt64.self)
            offset += frameSize
        }
    }
}

/// One random mutation of `bytes`; `unit` is the page (or frame) size and
/// `start` the offset of the first page (0 for a store, 40 for a log).
func mutate(_ bytes: inout [UInt8], unit: Int, start: Int, _ rng: inout SplitMix64) {
    guard !bytes.isEmpty else { bytes = [UInt8(truncatingIfNeeded: rng.next())]; return }
    func pos() -> Int { Int(rng.next() % UInt64(bytes.count)) }
    let units = max(1, (bytes.count - start) / unit)
    switch rng.next() % 10 {
    case 0, 1:  // flip a few bits
        for _ in 0..<(1 + rng.next() % 4) { bytes[pos()] ^= UInt8(1) << (rng.next() % 8) }
    case 2:  // interesting byte values
        for _ in 0..<(1 + rng.next() % 3) { bytes[pos()] = [0x00, 0xFF, 0x7F, 0x80, 0x01][Int(rng.next() % 5)] }
    case 3:  // a little-endian integer field set to an interesting value
        let at = pos()
        let v: UInt32 = [0, 1, 2, 0xFFFF, 0xFFFF_FFFF, 0x7FFF_FFFF, UInt32(units + 1), UInt32(units)][Int(rng.next() % 8)]
        for k in 0..<4 where at + k < bytes.count { bytes[at + k] = UInt8(truncatingIfNeeded: v >> (8 * k)) }
    case 4:  // a random range overwritten
        let at = pos()
        for k in at..<min(bytes.count, at + 1 + Int(rng.next() % 64)) { bytes[k] = UInt8(truncatingIfNeeded: rng.next()) }
    case 5:  // cut
        bytes.removeSubrange(pos()...)
    case 6:  // extended with garbage
        bytes += (0..<(1 + Int(rng.next() % UInt64(unit * 2)))).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
    case 7:  // a page (frame) copied over another
        let a = start + Int(rng.next() % UInt64(units)) * unit, b = start + Int(rng.next() % UInt64(units)) * unit
        if a + unit <= bytes.count && b + unit <= bytes.count { bytes.replaceSubrange(b..<(b + unit), with: bytes[a..<(a + unit)]) }
    case 8:  // a page (frame) zeroed
        // (A file cut shorter than `start` has no page: `a` is past its end.)
        let a = start + Int(rng.next() % UInt64(units)) * unit
        for k in a..<max(a, min(bytes.count, a + unit)) { bytes[k] = 0 }
    default:  // one byte changed near the start of a page (the header fields)
        let a = start + Int(rng.next() % UInt64(units)) * unit + Int(rng.next() % 24)
        if a < bytes.count { bytes[a] = UInt8(truncatingIfNeeded: rng.next()) }
    }
}

final class ReliabilityMutationTests: XCTestCase {
    static let long = ProcessInfo.processInfo.environment["KURA_LONG"] == "1"
    static let path = "/m.kura"
    /// KURA_MUTATION_TRACE=1: save each input before exercising it (to find the
    /// one that crashed the process).
    static let trace = ProcessInfo.processInfo.environment["KURA_MUTATION_TRACE"] == "1"

    struct Outcome {
        var files = 0
        var errors = 0
        var writeErrors = 0
        var checkProblems = 0
        var clean = 0
        var writes = 0
        var failures: [String] = []
    }

    /// Opens the mutated files, reads everything, queries, checks, and writes.
    /// Returns the state read, or nil if a KuraError stopped it.
    static func exercise(_ fs: MemoryFileSystem, _ w: Workload, write: Bool, _ out: inout Outcome) -> StoreState? {
        var o = w.options
        o.fileSystem = fs
        o.cacheSize = 16 * o.pageSize
        var state: StoreState?
        var wrote = false
        do {
            let db = try Database(path: path, options: o)
            defer { db.close() }
            state = try StoreState.read(db)
            try db.read { tx in
                if try tx.tableExists("people") {
                    _ = try tx.fetch(TableQuery("people", where: "email BEGINSWITH 'p1' OR age > 40", sort: [SortKey("age")]))
                    _ = try tx.count(TableQuery("people", where: "name ==[cd] 'ada 3'"))
                }
            }
            let problems = try db.read { tx in try tx.checkIntegrity() }
            if problems.isEmpty { out.clean += 1 } else { out.checkProblems += 1 }
            if write {
                wrote = true
                out.writes += 1
                try db.write { tx in
                    for name in try tx.tableNames() {
                        let t = try tx.table(name)
                        if try tx.schema(of: t) != nil {
                            try tx.insert(["name": .text("mutant"), "email": .text("m@example.com"), "age": .integer(7)], into: t)
                        } else {
                            try tx.insert([.integer(1), .blob(payload(700, seed: 1))], into: t)
                        }
                        let c = try tx.rows(in: t)
                        if let first = try c.next() { _ = try tx.delete(from: t, rowID: first.rowID) }
                    }
                }
                _ = try db.checkpoint()
            }
        } catch let e as KuraError {
            _ = e
            if wrote { out.writeErrors += 1 } else { out.errors += 1 }
            return state
        } catch {
            out.failures.append("not a KuraError: \(error)")
        }
        return state
    }

    /// A store built by `w` and checkpointed into the database file, and one whose
    /// log still holds the second half of its transactions.
    static func images(_ w: Workload) throws -> (store: MemoryFileSystem, logged: MemoryFileSystem, floor: Int) {
        let fs = MemoryFileSystem()
        var o = w.options
        o.fileSystem = fs
        let db = try Database(path: path, options: o)
        let half = w.steps.count / 2
        var floor = 0
        for (i, step) in w.steps.enumerated() {
            if case .transaction(let ops) = step {
                try db.write { tx in for op in ops { try op.apply(to: tx) } }
                if i < half { floor += 1 }
            }
            if i == half - 1 { XCTAssertTrue(try db.checkpoint()) }
        }
        let logged = MemoryFileSystem()
        for p in [path, path + "-wal"] { logged.setContents(of: p, to: fs.contents(of: p)!) }
        db.close()
        return (fs, logged, floor)
    }

    /// KURA_MUTANT=FILE KURA_MUTANT_TARGET=indexes|overflow:store|log: exercises
    /// one saved mutated file (from KURA_MUTATION_TRACE or a failure message).
    func testReproduceSavedMutant() throws {
        let env = ProcessInfo.processInfo.environment
        guard let file = env["KURA_MUTANT"], let target = env["KURA_MUTANT_TARGET"] else { throw XCTSkip("set KURA_MUTANT and KURA_MUTANT_TARGET") }
        let parts = target.split(separator: ":").map(String.init)
        let w = parts[0] == "indexes" ? Workloads.indexes(transactions: 30, seed: 21) : Workloads.overflow(transactions: 30, seed: 22)
        let (store, logged, _) = try Self.images(w)
        let fs = parts[1] == "log" ? logged : store
        fs.setContents(of: parts[1] == "log" ? Self.path + "-wal" : Self.path, to: [UInt8](try Data(contentsOf: URL(fileURLWithPath: file))))
        var out = Outcome()
        let state = Self.exercise(fs, w, write: true, &out)
        print("reproduced: \(out), state: \(state.map { "\($0.rowCount) rows" } ?? "none")")
    }

    func testMutatedStoresAndLogsFailCleanlyOrAnswerRight() throws {
        let perBase = Self.long ? 50_000 : 4_000
        var total = Outcome()
        let start = Date()
        var shortW = Workloads.indexes(transactions: 30, seed: 21)
        shortW.name = "indexes"
        var overflowW = Workloads.overflow(transactions: 30, seed: 22)
        overflowW.name = "overflow"
        for w in [shortW, overflowW] {
            let (store, logged, floor) = try Self.images(w)
            XCTAssertGreaterThan(floor, 0)
            let ps = w.pageSize
            let targets: [(name: String, fs: MemoryFileSystem, file: String, allowed: ClosedRange<Int>)] = [
                ("store file", store, Self.path, w.transactionCount...w.transactionCount),
                ("log", logged, Self.path + "-wal", floor...w.transactionCount),
            ]
            for target in targets {
                var rng = SplitMix64(seed: 0x5EED ^ UInt64(ps) ^ UInt64(target.name.utf8.count) ^ UInt64(w.name.utf8.count))
                let original = target.fs.contents(of: target.file)!
                let isLog = target.file.hasSuffix("-wal")
                for i in 0..<perBase {
                    var bytes = original
                    for _ in 0..<(1 + rng.next() % 3) { mutate(&bytes, unit: isLog ? ps + 24 : ps, start: isLog ? 40 : 0, &rng) }
                    let resealed = rng.next() % 2 == 0
                    if resealed { if isLog { resealLog(&bytes, pageSize: ps) } else { resealStore(&bytes, pageSize: ps) } }
                    let fs = MemoryFileSystem(maxFileSize: 64 << 20)
                    for p in [Self.path, Self.path + "-wal"] { fs.setContents(of: p, to: target.fs.contents(of: p)!) }
                    fs.setContents(of: target.file, to: bytes)
                    total.files += 1
                    if Self.trace {
                        // Leaves the input that was being exercised if the process dies.
                        _ = FileManager.default.createFile(atPath: NSTemporaryDirectory() + "kura-mutant-current", contents: Data(bytes))
                        FileHandle.standardError.write(Data("mutant \(w.name) \(target.name) #\(i) resealed \(resealed)\n".utf8))
                    }
                    let before = total.failures.count
                    let state = Self.exercise(fs, w, write: i % 4 == 0, &total)
                    // An empty store file is a new store by definition (FORMAT.md, "The
                    // header page", Creation): it reads as empty, and its log is dropped.
                    let emptied = !isLog && bytes.isEmpty && state == StoreState()
                    if !resealed, !emptied, let state, !target.allowed.contains(where: { w.states[$0] == state }) {
                        total.failures.append("\(w.name) \(target.name) #\(i): read without error but wrong: \(state.difference(from: w.states[target.allowed.upperBound]))")
                    }
                    if total.failures.count > before, total.failures.count < 3 {
                        let dump = NSTemporaryDirectory() + "kura-mutant-\(w.name)-\(target.name.replacingOccurrences(of: " ", with: "-"))-\(i)"
                        _ = FileManager.default.createFile(atPath: dump, contents: Data(bytes))
                        total.failures[total.failures.count - 1] += " (file saved to \(dump))"
                    }
                }
            }
        }
        print("mutation loop: \(total.files) mutated files (store files and logs, half with checksums recomputed): \(total.errors) stopped by a KuraError while reading, \(total.checkProblems) read but flagged by checkIntegrity, \(total.clean) read and checked clean; \(total.writes) written to (\(total.writeErrors) of them refused with a KuraError), \(total.failures.count) failures, \(String(format: "%.1f", Date().timeIntervalSince(start))) s")
        XCTAssertGreaterThanOrEqual(total.files, 10_000)
        for f in total.failures.prefix(10) { XCTFail(f) }
    }
}
