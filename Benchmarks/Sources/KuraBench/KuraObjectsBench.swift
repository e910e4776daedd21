// KuraObjectsBench: the object-level rows (engine "kura-objects") on Kura's
// object layer: a model with one entity, a context, inserts and one save,
// objects looked up by ID, a fetch request with fetchBatchSize = 1000.
//
// Rows so far: W1 (insert N objects, one save), W2 (N random lookups by object
// ID in a fresh context, each object materialized and read), W11 (a fresh
// process iterating a fetch with batch size 1000). The report compares them with
// GRDB's records ("objects/GRDB") and with SQLite's raw C API.
//
// HOOK for the other workloads: W3/W4/W5 = `context.fetch` with the same
// predicates (and SortKey("score", ascending: false), fetchLimit 100 for W4);
// W6/W7 = fetch, change or delete each object, save. W3/W4 need an index on
// score, which the model can only declare up front (`indexed: true`), so they
// belong on a second store whose model indexes score (W1 must stay index-free
// to compare with the other engines' W1). Add them to `run` below.

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

    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Item", class: BenchItem.self) {
                AttributeDescription("name", .string)
                AttributeDescription("score", .int64)
                AttributeDescription("ts", .double)
            }
        }
    }

    /// The same engine options as the engine rows (page size, cache, `.normal`).
    static func open(_ path: String, create: Bool) throws -> PersistentContainer {
        var o = KuraEngineBench.options(.normal)
        o.createIfMissing = create
        return try PersistentContainer(url: URL(fileURLWithPath: path), model: model(), options: o)
    }

    /// One round: W1, W2 and (if asked) W11 on a fresh store at `path`.
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
