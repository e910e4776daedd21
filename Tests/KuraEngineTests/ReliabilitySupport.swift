// Shared pieces of the reliability tests (RELIABILITY.md): a plain-Swift model of
// a store's contents, workloads of transactions generated against that model, and
// the check that a recovered store holds exactly one of the allowed states.

import Foundation
import XCTest
@testable import KuraEngine

/// Everything a store holds that a caller can see: every table's rows, and the
/// indexes of each table. Two stores with equal `StoreState`s answer every
/// query the same way.
struct StoreState: Equatable {
    var tables: [String: [Int64: [Value]]] = [:]
    /// Table name -> names of its indexes, sorted.
    var indexes: [String: [String]] = [:]
    /// Table name -> its next row ID (the counters a crash must not lose or
    /// roll back apart from the rows: compared for the tables in `tables`).
    var nextRowIDs: [String: Int64] = [:]

    static func == (a: StoreState, b: StoreState) -> Bool {
        a.tables == b.tables && a.indexes == b.indexes
            && a.nextRowIDs.filter { a.tables[$0.key] != nil } == b.nextRowIDs.filter { b.tables[$0.key] != nil }
    }

    /// Reads the state of `db` as of a new snapshot.
    static func read(_ db: Database) throws -> StoreState {
        try db.read { tx in try read(tx) }
    }

    static func read(_ tx: ReadTransaction) throws -> StoreState {
        var s = StoreState()
        for name in try tx.tableNames() {
            let t = try tx.table(name)
            var rows: [Int64: [Value]] = [:]
            let c = try tx.rows(in: t)
            while let r = try c.next() { rows[r.rowID] = try r.values() }
            guard rows.count == (try tx.rowCount(t)) else {
                throw KuraError(.corrupt, "table \(name): row count \(try tx.rowCount(t)) but \(rows.count) rows")
            }
            s.tables[name] = rows
            s.nextRowIDs[name] = t.nextRowID
            let idx = try tx.indexes(of: name).map(\.name).sorted()
            if !idx.isEmpty { s.indexes[name] = idx }
        }
        return s
    }

    var rowCount: Int { tables.values.reduce(0) { $0 + $1.count } }

    /// A short description of how `self` differs from `other` (for failures).
    func difference(from other: StoreState) -> String {
        var out: [String] = []
        for name in Set(tables.keys).union(other.tables.keys).sorted() {
            let a = tables[name], b = other.tables[name]
            if a == nil { out.append("table \(name) missing"); continue }
            if b == nil { out.append("table \(name) unexpected"); continue }
            if a! != b! {
                let missing = Set(b!.keys).subtracting(a!.keys).count
                let extra = Set(a!.keys).subtracting(b!.keys).count
                let changed = a!.filter { b![$0.key] != nil && b![$0.key] != $0.value }.count
                out.append("table \(name): \(missing) rows missing, \(extra) extra, \(changed) changed")
            }
        }
        if indexes != other.indexes { out.append("indexes \(indexes) vs \(other.indexes)") }
        for (name, next) in nextRowIDs.sorted(by: { $0.key < $1.key }) where tables[name] != nil && other.tables[name] != nil && other.nextRowIDs[name] != next {
            out.append("table \(name): next row ID \(next) vs \(other.nextRowIDs[name].map(String.init) ?? "none")")
        }
        return out.isEmpty ? "equal" : out.joined(separator: "; ")
    }
}

/// One change inside a transaction, applied the same way to a store and to the model.
enum ModelOp {
    case createTable(String, TableSchema?)
    case dropTable(String)
    case insert(String, Int64, [Value])
    case update(String, Int64, [Value])
    case delete(String, Int64)
    case createIndex(String, table: String, columns: [IndexColumn], unique: Bool)
    case dropIndex(String, table: String)

    func apply(to tx: WriteTransaction) throws {
        switch self {
        case .createTable(let name, let schema):
            if let schema { try tx.createTable(name, schema: schema) } else { try tx.createTable(name) }
        case .dropTable(let name): try tx.dropTable(name)
        case .insert(let table, let id, let values): try tx.insert(values, into: try tx.table(table), rowID: id)
        case .update(let table, let id, let values):
            guard try tx.update(values, in: try tx.table(table), rowID: id) else { throw KuraError(.notFound, "update of missing row \(id)") }
        case .delete(let table, let id):
            guard try tx.delete(from: try tx.table(table), rowID: id) else { throw KuraError(.notFound, "delete of missing row \(id)") }
        case .createIndex(let name, let table, let columns, let unique):
            try tx.createIndex(name, on: try tx.table(table), columns: columns, unique: unique)
        case .dropIndex(let name, _): try tx.dropIndex(name)
        }
    }

    func apply(to s: inout StoreState) {
        switch self {
        case .createTable(let name, _):
            s.tables[name] = [:]
            s.nextRowIDs[name] = 1
        case .dropTable(let name):
            s.tables[name] = nil
            s.indexes[name] = nil
        case .insert(let table, let id, let values):
            s.tables[table]![id] = values
            s.nextRowIDs[table] = max(s.nextRowIDs[table] ?? 1, id + 1)
        case .update(let table, let id, let values): s.tables[table]![id] = values
        case .delete(let table, let id): s.tables[table]![id] = nil
        case .createIndex(let name, let table, _, _): s.indexes[table, default: []].append(name); s.indexes[table]!.sort()
        case .dropIndex(let name, let table):
            s.indexes[table]!.removeAll { $0 == name }
            if s.indexes[table]!.isEmpty { s.indexes[table] = nil }
        }
    }
}

/// One step of a workload.
enum WorkloadStep {
    /// A write transaction.
    case transaction([ModelOp])
    /// `Database.checkpoint()`.
    case checkpoint
    /// `close()`, then open a new connection (recovery runs again).
    case reopen
    /// `Database.compact()`: a transaction that rewrites every page and leaves
    /// the content as it was, then a checkpoint that shortens the file.
    case compact
    /// A write transaction that applies its changes, then throws: rolled back,
    /// the model does not change.
    case rollback([ModelOp])
}

/// A named sequence of steps with the options to run it under, and the model
/// state after each transaction (`states[0]` is the empty store).
struct Workload {
    var name: String
    var pageSize = 512
    var checkpointThreshold = 1000
    var durability: Durability = .full
    /// Cache (and so spill threshold) in pages; 64 unless set.
    var cachePages = 64
    var steps: [WorkloadStep] = []
    var states: [StoreState] = [StoreState()]

    init(name: String) { self.name = name }

    mutating func add(_ ops: [ModelOp]) {
        var s = states.last!
        for op in ops { op.apply(to: &s) }
        steps.append(.transaction(ops))
        states.append(s)
    }

    /// Compacts: one more transaction whose state is the current one.
    mutating func addCompaction() {
        steps.append(.compact)
        states.append(model)
    }

    var model: StoreState { states.last! }
    var transactionCount: Int { states.count - 1 }

    var options: Database.Options {
        var o = Database.Options()
        o.pageSize = pageSize
        o.checkpointThreshold = checkpointThreshold
        o.durability = durability
        o.cacheSize = cachePages * pageSize
        o.busyTimeout = 1
        return o
    }

    /// Next free explicit row ID of `table` in the current model.
    func nextID(_ table: String) -> Int64 { (model.tables[table]?.keys.max() ?? 0) + 1 }

    func randomRow(_ table: String, _ rng: inout SplitMix64) -> Int64? {
        guard let rows = model.tables[table], !rows.isEmpty else { return nil }
        let keys = rows.keys.sorted()
        return keys[Int(rng.next() % UInt64(keys.count))]
    }
}

/// A deterministic payload: `count` bytes derived from `seed`.
func payload(_ count: Int, seed: UInt64) -> [UInt8] {
    var g = SplitMix64(seed: seed)
    var out = [UInt8](repeating: 0, count: count)
    var i = 0
    while i < count {
        var v = g.next()
        for _ in 0..<8 where i < count {
            out[i] = UInt8(truncatingIfNeeded: v)
            v >>= 8
            i += 1
        }
    }
    return out
}

/// The workloads of the crash matrix and the mutation loop. Small pages and
/// small rows keep each store to a few dozen pages, so each crash image recovers
/// in about a millisecond.
enum Workloads {
    static let peopleSchema = try! TableSchema([
        ColumnDefinition("name", .text, nullable: false),
        ColumnDefinition("email", .text),
        ColumnDefinition("age", .integer),
        ColumnDefinition("photo", .blob),
    ])

    static func inserts(transactions: Int = 300, seed: UInt64 = 1) -> Workload {
        var w = Workload(name: "inserts")
        var rng = SplitMix64(seed: seed)
        w.add([.createTable("a", nil), .createTable("b", nil)])
        for k in 0..<transactions {
            var ops: [ModelOp] = []
            var next: [String: Int64] = ["a": w.nextID("a"), "b": w.nextID("b")]
            for _ in 0..<(1 + Int(rng.next() % 4)) {
                let t = rng.next() % 3 == 0 ? "b" : "a"
                let id = next[t]!
                next[t] = id + 1
                ops.append(.insert(t, id, [.integer(Int64(k)), .text("row \(id) of \(t)"), .blob(payload(Int(rng.next() % 60), seed: rng.next()))]))
            }
            w.add(ops)
        }
        return w
    }

    static func updates(transactions: Int = 300, seed: UInt64 = 2) -> Workload {
        var w = Workload(name: "updates")
        var rng = SplitMix64(seed: seed)
        w.add([.createTable("a", nil)] + (1...60).map { .insert("a", Int64($0), [.integer(Int64($0)), .text("initial")]) })
        for k in 0..<transactions {
            var ops: [ModelOp] = []
            var touched = Set<Int64>()
            for _ in 0..<(1 + Int(rng.next() % 5)) {
                guard let id = w.randomRow("a", &rng), touched.insert(id).inserted else { continue }
                let size = Int(rng.next() % 5 == 0 ? rng.next() % 100 : rng.next() % 20)
                ops.append(.update("a", id, [.integer(Int64(k)), .text(String(repeating: "u", count: size))]))
            }
            w.add(ops)
        }
        return w
    }

    static func deletes(seed: UInt64 = 3) -> Workload {
        var w = Workload(name: "deletes")
        var rng = SplitMix64(seed: seed)
        w.add([.createTable("a", nil)] + (1...400).map { .insert("a", Int64($0), [.integer(Int64($0)), .blob(payload(30, seed: UInt64($0)))]) })
        w.add([.createTable("b", nil)] + (1...100).map { .insert("b", Int64($0), [.text(String(repeating: "b", count: 40))]) })
        while let _ = w.model.tables["a"]?.first {
            var ops: [ModelOp] = []
            var gone = Set<Int64>()
            for _ in 0..<(1 + Int(rng.next() % 4)) {
                guard let id = w.randomRow("a", &rng), gone.insert(id).inserted else { continue }
                ops.append(.delete("a", id))
            }
            if rng.next() % 4 == 0, let id = w.randomRow("b", &rng) { ops.append(.delete("b", id)) }
            w.add(ops)
        }
        w.add([.dropTable("b")])
        return w
    }

    static func indexes(transactions: Int = 300, seed: UInt64 = 4) -> Workload {
        var w = Workload(name: "index changes")
        var rng = SplitMix64(seed: seed)
        w.add([.createTable("people", peopleSchema),
               .createIndex("by_email", table: "people", columns: [IndexColumn("email")], unique: true)])
        var version = 0
        var hasAgeIndex = false
        func person(_ id: Int64, _ rng: inout SplitMix64) -> [Value] {
            version += 1
            let name = ["Ada", "Bob", "Cy", "Dee", "Eve"][Int(rng.next() % 5)] + " \(rng.next() % 50)"
            let email: Value = rng.next() % 6 == 0 ? .null : .text("p\(id)v\(version)@example.com")
            return [.text(name), email, .integer(Int64(rng.next() % 90)), .null]
        }
        for k in 0..<transactions {
            var ops: [ModelOp] = []
            var nextID = w.nextID("people")
            var touched = Set<Int64>()
            for _ in 0..<(1 + Int(rng.next() % 4)) {
                switch rng.next() % 4 {
                case 0, 1:
                    ops.append(.insert("people", nextID, person(nextID, &rng)))
                    touched.insert(nextID)
                    nextID += 1
                case 2:
                    if let id = w.randomRow("people", &rng), touched.insert(id).inserted { ops.append(.update("people", id, person(id, &rng))) }
                default:
                    if let id = w.randomRow("people", &rng), touched.insert(id).inserted { ops.append(.delete("people", id)) }
                }
            }
            if k % 25 == 12 {
                ops.append(hasAgeIndex ? .dropIndex("by_age_name", table: "people")
                                       : .createIndex("by_age_name", table: "people", columns: [IndexColumn("age", descending: true), IndexColumn("name", folded: true)], unique: false))
                hasAgeIndex.toggle()
            }
            w.add(ops)
        }
        return w
    }

    static func overflow(transactions: Int = 200, seed: UInt64 = 5) -> Workload {
        var w = Workload(name: "overflow values")
        var rng = SplitMix64(seed: seed)
        w.add([.createTable("blobs", nil)])
        for k in 0..<transactions {
            var ops: [ModelOp] = []
            let r = rng.next() % 3
            if r == 0 || w.model.tables["blobs"]!.count < 3 {
                let id = w.nextID("blobs")
                ops.append(.insert("blobs", id, [.integer(id), .blob(payload(300 + Int(rng.next() % 4000), seed: rng.next()))]))
            } else if r == 1, let id = w.randomRow("blobs", &rng) {
                ops.append(.update("blobs", id, [.integer(Int64(k)), .blob(payload(Int(rng.next() % 3000), seed: rng.next()))]))
            } else if let id = w.randomRow("blobs", &rng) {
                ops.append(.delete("blobs", id))
            }
            w.add(ops)
        }
        return w
    }

    /// Mixed changes with a tiny checkpoint threshold, explicit checkpoints and
    /// reopens, so that many crash points fall inside checkpoints.
    static func checkpoints(transactions: Int = 200, seed: UInt64 = 6) -> Workload {
        var w = Workload(name: "checkpoints in progress")
        w.checkpointThreshold = 6
        var rng = SplitMix64(seed: seed)
        w.add([.createTable("a", nil), .createTable("b", nil)])
        for k in 0..<transactions {
            var ops: [ModelOp] = []
            var next = w.nextID("a")
            var touched = Set<Int64>()
            for _ in 0..<(1 + Int(rng.next() % 5)) {
                switch rng.next() % 5 {
                case 0, 1, 2:
                    ops.append(.insert("a", next, [.integer(next), .blob(payload(Int(rng.next() % (rng.next() % 8 == 0 ? 1500 : 80)), seed: rng.next()))]))
                    touched.insert(next)
                    next += 1
                case 3:
                    if let id = w.randomRow("a", &rng), touched.insert(id).inserted { ops.append(.update("a", id, [.integer(Int64(k))])) }
                default:
                    if let id = w.randomRow("a", &rng), touched.insert(id).inserted { ops.append(.delete("a", id)) }
                }
            }
            if k % 3 == 0 { ops.append(.insert("b", w.nextID("b"), [.integer(Int64(k))])) }
            w.add(ops)
            if k % 17 == 5 { w.steps.append(.checkpoint) }
            if k % 29 == 11 { w.steps.append(.reopen) }
        }
        return w
    }

    /// Inserts and deletes that leave free pages, with compactions between them
    /// (compaction commits every page through the log and truncates the file).
    static func compactions(seed: UInt64 = 8) -> Workload {
        var w = Workload(name: "compactions")
        var rng = SplitMix64(seed: seed)
        w.add([.createTable("a", nil), .createTable("people", peopleSchema),
               .createIndex("by_email", table: "people", columns: [IndexColumn("email")], unique: true)])
        for round in 0..<5 {
            let base = Int64(round * 1000)
            w.add((1...200).map { .insert("a", base + Int64($0), [.integer(base + Int64($0)), .blob(payload(Int(rng.next() % 120), seed: rng.next()))]) })
            w.add((1...40).map { .insert("people", base + Int64($0), [.text("p\($0)"), .text("p\(base + Int64($0))@example.com"), .integer(Int64($0)), .null]) })
            for _ in 0..<4 {
                var ops: [ModelOp] = []
                var gone = Set<Int64>()
                for _ in 0..<25 {
                    guard let id = w.randomRow("a", &rng), gone.insert(id).inserted else { continue }
                    ops.append(.delete("a", id))
                }
                if let id = w.randomRow("people", &rng) { ops.append(.delete("people", id)) }
                w.add(ops)
            }
            w.addCompaction()
        }
        return w
    }

    /// Transactions much larger than the cache (8 pages), so each spills
    /// changed pages to the log before its commit, with rolled-back spilling
    /// transactions between them and checkpoints (FORMAT.md, "Commit").
    static func spills(transactions: Int = 12, seed: UInt64 = 9) -> Workload {
        var w = Workload(name: "spilling transactions")
        w.cachePages = 8
        w.checkpointThreshold = 200
        var rng = SplitMix64(seed: seed)
        w.add([.createTable("a", nil)] + (1...150).map { .insert("a", Int64($0), [.integer(Int64($0)), .blob(payload(40, seed: UInt64($0)))]) })
        for k in 0..<transactions {
            var ops: [ModelOp] = []
            var next = w.nextID("a")
            var touched = Set<Int64>()
            for _ in 0..<(60 + Int(rng.next() % 60)) {
                switch rng.next() % 4 {
                case 0, 1:
                    ops.append(.insert("a", next, [.integer(next), .blob(payload(Int(rng.next() % 90), seed: rng.next()))]))
                    touched.insert(next)
                    next += 1
                case 2:
                    if let id = w.randomRow("a", &rng), touched.insert(id).inserted { ops.append(.update("a", id, [.integer(Int64(k)), .text(String(repeating: "s", count: Int(rng.next() % 50)))])) }
                default:
                    if let id = w.randomRow("a", &rng), touched.insert(id).inserted { ops.append(.delete("a", id)) }
                }
            }
            if k % 3 == 1 {
                w.steps.append(.rollback(ops))
            } else {
                w.add(ops)
            }
            if k % 5 == 4 { w.steps.append(.checkpoint) }
        }
        return w
    }

    static var all: [Workload] { [inserts(), updates(), deletes(), indexes(), overflow(), checkpoints(), compactions()] }
}

/// Runs a workload's steps on `fs`, calling `progress(acknowledged, inFlight)`
/// before every step so a crash hook knows which states are allowed.
final class WorkloadRunner: @unchecked Sendable {
    // @unchecked Sendable: read by the file system's mutation hook, which runs
    // synchronously on the thread running the workload.
    private(set) var acknowledged = 0
    private(set) var inFlight = false
    /// In `normal` mode: the last transaction known to be in the database file
    /// (a checkpoint completed after it).
    private(set) var durableFloor = 0
    private(set) var database: Database?
    /// Pages the transactions had spilled to the log when they ended.
    private(set) var spilledPages = 0
    /// The store's change counter in each acknowledged state (index 0: the
    /// new store), read from the connection after the step.
    private(set) var counters: [UInt64] = []

    /// The change counter state `i` must have: as recorded, or, for the
    /// transaction in flight, one more than the last acknowledged state's
    /// (every transaction step changes something).
    func expectedCounter(_ i: Int) -> UInt64? {
        if i < counters.count { return counters[i] }
        if i == counters.count, let last = counters.last { return last + 1 }
        return nil
    }

    func run(_ w: Workload, path: String, fs: FileSystem) throws {
        var o = w.options
        o.fileSystem = fs
        var db = try Database(path: path, options: o)
        database = db
        counters = [try db.changeCounter()]
        for step in w.steps {
            switch step {
            case .transaction(let ops):
                inFlight = true
                try db.write { tx in
                    for op in ops { try op.apply(to: tx) }
                    spilledPages += tx.writer?.spilledPageCount ?? 0
                }
                acknowledged += 1
                counters.append(try db.changeCounter())
                inFlight = false
                if db.logFrameCount == 0 { durableFloor = acknowledged }
            case .checkpoint:
                if try db.checkpoint() { durableFloor = acknowledged }
            case .compact:
                inFlight = true
                try db.compact()
                acknowledged += 1
                counters.append(try db.changeCounter())
                inFlight = false
                if db.logFrameCount == 0 { durableFloor = acknowledged }
            case .rollback(let ops):
                struct RolledBack: Error {}
                do {
                    try db.write { tx in
                        for op in ops { try op.apply(to: tx) }
                        spilledPages += tx.writer?.spilledPageCount ?? 0
                        throw RolledBack()
                    }
                } catch is RolledBack {}
            case .reopen:
                db.close()
                durableFloor = acknowledged
                db = try Database(path: path, options: o)
                database = db
            }
        }
        db.close()
        durableFloor = acknowledged
        database = nil
    }

    /// The model states a crash now may leave: with `full` durability, the last
    /// acknowledged one or (while a transaction is in flight) the next; with
    /// `normal`, any from the durable floor on.
    func allowedStates(_ w: Workload) -> ClosedRange<Int> {
        let upper = acknowledged + (inFlight ? 1 : 0)
        return (w.durability == .full ? acknowledged : durableFloor)...upper
    }
}

/// Opens the store at `path` in `image`, and checks that it holds one of
/// `w.states[allowed]` and passes the integrity check, and, given
/// `expectedCounter`, that its change counter is the one of a state it
/// matches (FORMAT.md, "The change counter": a crash neither moves it back
/// nor counts a commit twice); with `deep`, also that a checkpoint and a
/// further commit keep it so. Returns a failure description.
func verifyRecovered(_ image: FileSystem, path: String, _ w: Workload, allowed: ClosedRange<Int>, deep: Bool,
                     expectedCounter: ((Int) -> UInt64?)? = nil) -> String? {
    var o = w.options
    o.fileSystem = image
    do {
        let db = try Database(path: path, options: o)
        defer { db.close() }
        let state = try StoreState.read(db)
        guard allowed.contains(where: { w.states[$0] == state }) else {
            let matched = w.states.indices.filter { w.states[$0] == state }
            return "recovered state is not one of transactions \(allowed) (matches \(matched.isEmpty ? "none" : "\(matched)"); vs \(allowed.upperBound): \(state.difference(from: w.states[allowed.upperBound])))"
        }
        let problems = try db.read { tx in try tx.checkIntegrity() }
        if !problems.isEmpty { return "integrity: \(problems.prefix(3))" }
        if let expectedCounter {
            let counter = try db.changeCounter()
            let expected = allowed.filter { w.states[$0] == state }.compactMap(expectedCounter)
            if !expected.isEmpty && !expected.contains(counter) {
                return "change counter \(counter) after recovery; the matching states had \(expected)"
            }
        }
        if deep {
            try db.checkpoint()
            try db.write { tx in
                let t = try tx.tableExists("after_crash") ? try tx.table("after_crash") : try tx.createTable("after_crash")
                try tx.insert([.integer(1)], into: t)
            }
            var after = try StoreState.read(db)
            after.tables["after_crash"] = nil
            guard after == state else { return "state changed by checkpoint + commit after recovery: \(after.difference(from: state))" }
            let p = try db.read { tx in try tx.checkIntegrity() }
            if !p.isEmpty { return "integrity after checkpoint + commit: \(p.prefix(3))" }
        }
        return nil
    } catch {
        return "recovery failed: \(error)"
    }
}

extension KuraError {
    /// Whether `error` is a `KuraError` (the only kind the engine may throw).
    static func isKura(_ error: any Error) -> Bool { error is KuraError }
}
