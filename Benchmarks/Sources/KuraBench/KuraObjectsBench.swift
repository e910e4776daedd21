// KuraObjectsBench: the object-level rows (engine "kura-objects") on Kura's
// object layer: a model with one entity, a context, inserts and one save,
// objects looked up by ID, a fetch request with fetchBatchSize = 1000.
//
// Rows: W1 (insert N objects, one save), W2 (N random lookups by object ID in
// a fresh context, each object materialized and read), W11 (a fresh process
// iterating a fetch with batch size 1000), and on a second store W3–W7 and W13:
// W3/W4 `context.fetch` with the same predicates as the engine rows (parsed
// once with `$K`, substituted per query, as SQLite binds; W4 sorted by score
// descending, fetchLimit 100), W5 `count(for:)` with `name CONTAINS "99"`,
// W13 `context.fetch` with `name IN %@` (`name` unindexed; the list as the
// argument, parsed per query as an importer writes it), each object's score read;
// W6 fetch `score < 100`, set `ts` on each object, save; W7 fetch
// `score >= 900`, delete each object, save. Each of W3, W4, W5 and W13 runs in
// one fresh context (objects fetched by an earlier query of the same workload
// stay registered, as in Core Data); W6 and W7 each in a fresh context.
//
// W3/W4 need an index on score, which a model declares up front (`indexed:
// true`), so they run on a second store whose model indexes score, filled with
// the same N objects (not timed); W1 stays index-free to compare with the other
// engines' W1. The report compares the rows with SQLite's raw C API and with
// GRDB (fast path and idiomatic).

import Foundation
import Kura

/// The entity "Item" (name, score, ts), as a managed object subclass.
final class BenchItem: ManagedObject {
    @Managed("name") var name: String
    @Managed("score") var score: Int64
    @Managed("ts") var ts: Double

    /// Folds the object as the other engines fold their rows.
    var check: Int { Int(score) + name.utf8.count + (ts < 0 ? 1 : 0) }
}

enum KuraObjectsBench {
    static let name = "kura-objects"

    /// The model; `indexedScore` declares the index on score (the store of W3–W7 and W13).
    static func model(indexedScore: Bool = false) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Item", class: BenchItem.self) {
                AttributeDescription("name", .string)
                AttributeDescription("score", .int64, indexed: indexedScore)
                AttributeDescription("ts", .double)
            }
        }
    }

    /// The same engine options as the engine rows (page size, cache, `.normal`).
    static func open(_ path: String, create: Bool, indexedScore: Bool = false) throws -> PersistentContainer {
        var o = KuraEngineBench.options(.normal)
        o.createIfMissing = create
        return try PersistentContainer(url: URL(fileURLWithPath: path), model: model(indexedScore: indexedScore), options: o)
    }

    /// One round: W1, W2 and (if asked) W11 on a fresh store at `path`, then
    /// W3–W7 and W13 on a second store (`path` + "-indexed") whose model indexes score.
    static func run(_ runner: Runner, _ data: Dataset, path: String, w11: Bool) throws {
        let n = data.rows
        let container = try open(path, create: true)
        var ids: [ManagedObjectID] = []

        try runner.measure("W1", name, rows: n, expect: n) {
            let context = container.newContext()
            var objects: [BenchItem] = []
            objects.reserveCapacity(n)
            for i in 0..<n {
                let o = BenchItem(context: context)
                o.name = data.names[i]
                o.score = data.scores[i]
                o.ts = data.ts[i]
                objects.append(o)
            }
            try context.save()
            ids = objects.map(\.objectID)
            return Int(ids.last?.rowID ?? 0)
        }

        try runner.measure("W2", name, rows: n) {
            // A fresh context: nothing registered, every object loads from the store.
            let context = container.newContext()
            var sum = 0
            for id in data.lookupIDs {
                let o = try context.existingObject(with: ids[Int(id) - 1]) as! BenchItem
                sum += o.check
            }
            return sum
        }

        if w11 {
            _ = try container.database.checkpoint()
            let (rows, peak) = try runner.spawnStream(engine: name, path: path)
            guard rows == n else { throw CheckMismatch(description: "W11: \(name) streamed \(rows) rows, expected \(n)") }
            runner.results.add("W11", name, rows: n, .bytes, Double(peak))
            progress("  \(name) W11: peak RSS \(formatBytes(Double(peak)))")
        }
        container.database.close()

        let indexedPath = path + "-indexed"
        removeStore(indexedPath)
        defer { removeStore(indexedPath) }
        try queries(runner, data, path: indexedPath)
    }

    /// W3–W5, W13, W6 and W7 on a fresh store whose model indexes score (and
    /// not name), filled (not timed)
    /// with the same N objects as W1.
    static func queries(_ runner: Runner, _ data: Dataset, path: String) throws {
        let n = data.rows
        let container = try open(path, create: true, indexedScore: true)
        defer { container.database.close() }
        do {
            let context = container.newContext()
            for i in 0..<n {
                let o = BenchItem(context: context)
                o.name = data.names[i]
                o.score = data.scores[i]
                o.ts = data.ts[i]
            }
            try context.save()
        }
        _ = try container.database.checkpoint()

        try runner.measure("W3", name, rows: n, expect: n) {
            let prepared = try KuraPredicate(format: "score == $K")
            let context = container.newContext()
            var rows = 0
            for k in data.equalityKeys {
                let request = FetchRequest<BenchItem>(entityName: "Item", predicate: try prepared.substituting(["K": .integer(k)]))
                for o in try context.fetch(request) {
                    _ = o.check
                    rows += 1
                }
            }
            return rows
        }

        try runner.measure("W4", name, rows: n) {
            let prepared = try KuraPredicate(format: "score BETWEEN {$LO, $HI}")
            let context = container.newContext()
            var sum = 0
            for a in data.rangeStarts {
                var request = FetchRequest<BenchItem>(entityName: "Item",
                                                      predicate: try prepared.substituting(["LO": .integer(a), "HI": .integer(a + 100)]),
                                                      sortDescriptors: [SortKey("score", ascending: false)])
                request.fetchLimit = 100
                for o in try context.fetch(request) {
                    _ = o.check
                    sum += Int(o.score)
                }
            }
            return sum
        }

        try runner.measure("W5", name, rows: n, expect: data.expectedContains) {
            let context = container.newContext()
            let request = FetchRequest<BenchItem>(entityName: "Item", predicate: try KuraPredicate(format: "name CONTAINS %@", arguments: [.text("99")]))
            return try context.count(for: request)
        }

        try runner.measure("W13", name, rows: n, expect: data.expectedInLists) {
            // The importer's "fetch the existing objects whose ID is in this
            // batch": the list as the `%@` argument, every object's score read.
            let context = container.newContext()
            var sum = 0
            for list in data.inLists {
                let request = FetchRequest<BenchItem>(entityName: "Item",
                                                      predicate: try KuraPredicate(format: "name IN %@", arguments: [.list(list.map { .text($0) })]))
                for o in try context.fetch(request) { sum += Int(o.score) }
            }
            return sum
        }

        try runner.measure("W6", name, rows: n) {
            let context = container.newContext()
            let request = FetchRequest<BenchItem>(entityName: "Item", predicate: try KuraPredicate(format: "score < %@", arguments: [.integer(100)]))
            var changed = 0
            for o in try context.fetch(request) {
                o.ts = 1.0
                changed += 1
            }
            try context.save()
            return changed
        }

        try runner.measure("W7", name, rows: n) {
            let context = container.newContext()
            let request = FetchRequest<BenchItem>(entityName: "Item", predicate: try KuraPredicate(format: "score >= %@", arguments: [.integer(900)]))
            var deleted = 0
            for o in try context.fetch(request) {
                try context.delete(o)
                deleted += 1
            }
            try context.save()
            return deleted
        }
    }

    /// W11's child: iterates every object through a fetch with batch size 1000.
    static func streamAll(path: String) throws -> Int {
        let container = try open(path, create: false)
        defer { container.database.close() }
        let context = container.newContext()
        var request = FetchRequest<BenchItem>(entityName: "Item")
        request.fetchBatchSize = 1000
        var n = 0
        for o in try context.fetchResults(request) {
            _ = o.check
            n += 1
        }
        return n
    }
}
