// Shared by the fuzz targets and the corpus generator. Compiled into one module
// together with every file of Sources/KuraEngine (see Fuzz/build.sh), so it uses
// the engine's internal API directly.
//
// Inputs of the store and log targets start with one control byte:
//   bit 0  recompute every checksum after reading the input, so the bytes get
//          past the checksums to the page decoders (tree pages, records, ...);
//   bit 1  (log target) write the base store's database ID into the log header.

import Foundation

enum FuzzSupport {
    static let path = "/fuzz.kura"
    static let pageSize = 512

    static var options: Database.Options {
        var o = Database.Options()
        o.pageSize = pageSize
        o.cacheSize = 16 * pageSize
        o.checkpointThreshold = 1000
        o.durability = .full
        o.busyTimeout = 0.01
        return o
    }

    static let schema = try! TableSchema([
        ColumnDefinition("name", .text, nullable: false),
        ColumnDefinition("email", .text),
        ColumnDefinition("age", .integer),
        ColumnDefinition("score", .double),
        ColumnDefinition("photo", .blob),
    ])

    /// A deterministic small store: a schema table with three indexes, a raw
    /// table with overflow values, rows deleted (so the freelist has pages).
    /// `firstHalf`: only the first half of the transactions.
    static func buildStore(_ fs: FileSystem, transactions: ClosedRange<Int>) throws(KuraError) -> Database {
        var o = options
        o.fileSystem = fs
        let db = try Database(path: path, options: o)
        for k in transactions {
            try? db.write { tx in
                if k == 0 {
                    let p = try tx.createTable("people", schema: schema)
                    try tx.createIndex("by_email", on: p, columns: [IndexColumn("email")], unique: true)
                    try tx.createIndex("by_age", on: p, columns: [IndexColumn("age", descending: true), IndexColumn("name", folded: true)])
                    try tx.createTable("blobs")
                    return
                }
                let p = try tx.table("people"), b = try tx.table("blobs")
                for j in 0..<4 {
                    let n = Int64(k * 10 + j)
                    try tx.insert(["name": .text("Person \(n) é"), "email": .text("p\(n)@example.com"), "age": .integer(n % 90),
                                   "score": .double(Double(n) / 3)], into: p)
                }
                try tx.insert([.integer(Int64(k)), .blob([UInt8](repeating: UInt8(k & 0xFF), count: 200 + 300 * (k % 6)))], into: b)
                if k % 3 == 0 {
                    _ = try tx.delete(from: p, rowID: Int64(k * 4 - 5))
                    _ = try tx.delete(from: b, rowID: Int64(k / 2))
                }
                if k == 9 { try tx.createIndex("by_score", on: p, columns: [IndexColumn("score")]) }
            }
        }
        return db
    }

    /// The store file of the first half, checkpointed: the log target's base.
    nonisolated(unsafe) static var logBase: (store: [UInt8], databaseID: UInt64)?

    static func logBaseStore() -> (store: [UInt8], databaseID: UInt64) {
        if let b = logBase { return b }
        let fs = MemoryFileSystem()
        let db = try! buildStore(fs, transactions: 0...10)
        db.close()
        let bytes = fs.contents(of: path)!
        let id = bytes.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(fromByteOffset: FileHeader.databaseIDOffset, as: UInt64.self)) }
        logBase = (bytes, id)
        return logBase!
    }

    /// Recomputes every page checksum of a store file.
    static func resealStore(_ bytes: inout [UInt8]) {
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

    /// Recomputes the log header checksum, page trailers and chain checksums.
    static func resealLog(_ bytes: inout [UInt8]) {
        guard bytes.count >= 40 else { return }
        bytes.withUnsafeMutableBytes { b in
            let p = b.baseAddress!
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
                let seed = Checksum.xxh64(f, count: 16, seed: chain)
                chain = Checksum.xxh64(image, count: pageSize, seed: seed)
                (f + 16).storeBytes(of: chain.littleEndian, as: UInt64.self)
                offset += frameSize
            }
        }
    }

    /// Opens the store in `fs`, reads every row of every table, runs indexed
    /// queries, checks integrity, writes, and checkpoints. Any KuraError ends it;
    /// anything else (a trap, a sanitizer report) is a finding.
    static func exercise(_ fs: MemoryFileSystem) {
        var o = options
        o.fileSystem = fs
        do {
            let db = try Database(path: path, options: o)
            defer { db.close() }
            try db.read { tx in
                for name in try tx.tableNames() {
                    let t = try tx.table(name)
                    let c = try tx.rows(in: t)
                    var n = 0
                    while let r = try c.next(), n < 10_000 { _ = try r.values(); n += 1 }
                    let back = try tx.rows(in: t, reverse: true)
                    _ = try back.next()
                    _ = try tx.values(in: t, rowID: 3)
                    _ = try tx.indexes(of: name)
                    if try tx.schema(of: t) != nil {
                        _ = try tx.fetch(TableQuery(name, where: "email BEGINSWITH 'p1' OR age > 40", sort: [SortKey("age")], limit: 50))
                        _ = try tx.count(TableQuery(name, where: "name ==[cd] 'person 3 e' AND score < 10"))
                    }
                }
            }
            _ = try db.read { tx in try tx.checkIntegrity(limit: 20) }
            try db.write { tx in
                for name in try tx.tableNames() {
                    let t = try tx.table(name)
                    if try tx.schema(of: t) != nil {
                        try tx.insert(["name": .text("fuzz"), "email": .text("f@example.com"), "age": .integer(7)], into: t)
                    } else {
                        try tx.insert([.integer(1), .blob([UInt8](repeating: 9, count: 700))], into: t)
                    }
                    let c = try tx.rows(in: t)
                    if let first = try c.next() { _ = try tx.delete(from: t, rowID: first.rowID) }
                }
            }
            _ = try db.checkpoint()
        } catch {
            precondition(error is KuraError, "not a KuraError: \(error)")
        }
    }

    /// Predicates parse, format, re-parse to the same format, and evaluate.
    static let arguments: [PredicateArgument] = [
        .keyPath("name"), .text("Ada"), .integer(3), [1, 2, 3], .double(1.5),
        .date(secondsSinceReferenceDate: 0), .value(.null), .keyPath("age"), "x", [.text("a"), .text("b")],
    ]

    nonisolated(unsafe) static let object = EvaluatedValue.record([
        "name": .scalar(.text("Ada Lovelace")), "age": .scalar(.integer(36)), "score": .scalar(.double(2.5)),
        "tags": .collection([.scalar(.text("math")), .scalar(.text("poetry"))]),
        "friend": .record(["name": .scalar(.text("Charles")), "age": .scalar(.integer(45))]),
    ])

    static func exercisePredicate(_ text: String) {
        for args in [arguments, []] {
            guard let p = try? KuraPredicate(format: text, arguments: args) else { continue }
            let formatted = p.predicateFormat
            _ = try? p.evaluate(with: object)
            guard let again = try? KuraPredicate(format: formatted) else {
                // A formatted predicate that refers to no argument must parse again.
                if !formatted.contains("%") && !formatted.contains("$") { preconditionFailure("canonical format does not parse: \(formatted) (from \(text))") }
                continue
            }
            precondition(again.predicateFormat == formatted, "formatting is not stable: \(formatted) -> \(again.predicateFormat)")
        }
    }
}
