// FRCBench: W12, one change delivered to a fetched-results controller of N
// rows (issue 11: "updating one row of a 100,000-row controller must not
// refetch 100,000 rows"). Run alone with `kura-bench --frc [--rows N]`
// (default N = 100,000).
//
// Kura objects: N objects (the W1 dataset) saved; a FetchedResultsController
// on them sorted by score, then name. Each of C changes sets one random
// object's score to a random value, then:
//   W12        `processPendingChanges()`: the controller locates the row by
//              binary search, moves it and delivers its change set (no save);
//   W12 save   `save()` instead: the same plus the store write.
// The controller's `lastChangeStatistics` after each change give the rows it
// touched (comparisons, rows shifted in memory, chunk references walked).
// For scale, "Kura refetch" is what a controller without incremental updates
// would do: the same fetch request run again (a few times, it is slow).
//
// SQLite (C API, an index on (score, name), so the ORDER BY walks the index):
// each change is `UPDATE t SET score = ? WHERE id = ?` then `SELECT id FROM t
// ORDER BY score, name` read to the end: what a table view without a
// results controller re-runs after a change.
//
// Check: after all changes, the controller's object order (row IDs) equals
// SQLite's ORDER BY result.

import Foundation
import Kura
import CSQLite

enum FRCBench {
    static let changes = 201

    static func run(rows n: Int, directory: String) throws {
        let data = Dataset(rows: n)
        var g = SplitMix64(seed: 0x4652_4331)
        let edits: [(Int, Int64)] = (0..<changes).map { _ in (Int.random(in: 0..<n, using: &g), Int64.random(in: 0...999, using: &g)) }

        // Kura objects.
        let kuraPath = directory + "/frc-kura.kura"
        removeStore(kuraPath)
        let container = try KuraObjectsBench.open(kuraPath, create: true)
        var objects: [BenchItem] = []
        do {
            let setup = container.newContext()
            for i in 0..<n {
                let o = BenchItem(context: setup)
                o.name = data.names[i]
                o.score = data.scores[i]
                o.ts = data.ts[i]
            }
            try setup.save()
        }
        let context = container.newContext()
        let request = FetchRequest<BenchItem>(entityName: "Item", sortDescriptors: [SortKey("score"), SortKey("name")])
        let controller = FetchedResultsController(fetchRequest: request, context: context)
        var delivered = 0
        controller.onChange = { delivered += $0.changes.count }
        let (_, fetchTime) = try timed { try controller.performFetch() }
        objects = controller.fetchedObjects ?? []
        guard objects.count == n else { throw CheckMismatch(description: "W12: controller holds \(objects.count) rows, expected \(n)") }
        let byRow = Dictionary(uniqueKeysWithValues: objects.map { (Int($0.objectID.rowID), $0) })
        progress("W12 kura-objects: performFetch of \(n) rows \(formatSeconds(fetchTime))")

        var deliverTimes: [Double] = [], saveTimes: [Double] = []
        var touched: [FetchedResultsChangeStatistics] = []
        for (k, (row, score)) in edits.enumerated() {
            guard let o = byRow[row + 1] else { throw CheckMismatch(description: "W12: no object for row \(row + 1)") }
            o.score = score
            if k % 2 == 0 {
                let (_, t) = timed { context.processPendingChanges() }
                deliverTimes.append(t)
            } else {
                let (_, t) = try timed { try context.save() }
                saveTimes.append(t)
            }
            touched.append(controller.lastChangeStatistics)
        }
        try context.save()
        guard delivered >= changes, controller.lastError == nil else {
            throw CheckMismatch(description: "W12: \(delivered) changes delivered for \(changes) edits, error \(String(describing: controller.lastError))")
        }
        let kuraOrder = (controller.fetchedObjects ?? []).map(\.objectID.rowID)

        var refetchTimes: [Double] = []
        for _ in 0..<3 {
            let fresh = container.newContext()
            let (count, t) = try timed { try fresh.fetch(request).count }
            guard count == n else { throw CheckMismatch(description: "W12: refetch gave \(count) rows") }
            refetchTimes.append(t)
        }
        container.database.close()

        // SQLite.
        let sqlitePath = directory + "/frc-sqlite.db"
        removeStore(sqlitePath)
        let sqlite = try SQLiteBench(path: sqlitePath, sync: .normal)
        _ = try sqlite.insertAll(data)
        try sqlite.db.exec("CREATE INDEX by_score_name ON t(score, name)")
        let update = try sqlite.db.prepare("UPDATE t SET score = ?1 WHERE id = ?2")
        let select = try sqlite.db.prepare("SELECT id FROM t ORDER BY score, name")
        var sqliteTimes: [Double] = [], sqliteUpdateTimes: [Double] = []
        var sqliteOrder: [Int64] = []
        for (row, score) in edits {
            let (_, tu) = try timed {
                update.reset()
                update.bind(1, score)
                update.bind(2, Int64(row + 1))
                _ = try update.step()
            }
            let (ids, tq) = try timed { () throws -> [Int64] in
                select.reset()
                var ids: [Int64] = []
                ids.reserveCapacity(n)
                while try select.step() { ids.append(select.int64(0)) }
                return ids
            }
            sqliteUpdateTimes.append(tu)
            sqliteTimes.append(tu + tq)
            sqliteOrder = ids
        }
        guard sqliteOrder == kuraOrder else { throw CheckMismatch(description: "W12: the controller's order differs from SQLite's ORDER BY score, name") }
        removeStore(sqlitePath)
        removeStore(kuraPath)

        let sqliteMedian = medianOf(sqliteTimes)
        func row(_ what: String, _ t: Double) -> String {
            "| \(what) | \(formatSeconds(t)) | \(String(format: "%.4f", t / sqliteMedian)) |"
        }
        func stat(_ f: (FetchedResultsChangeStatistics) -> Int) -> String {
            let xs = touched.map { Double(f($0)) }
            return "median \(Int(medianOf(xs))), max \(Int(xs.max() ?? 0))"
        }
        print("""
        ## W12: one change delivered to a fetched-results controller, \(n) rows, median of \(deliverTimes.count)/\(saveTimes.count) changes

        | what | time per change | ratio to SQLite update + re-query |
        | --- | ---: | ---: |
        \(row("Kura: set score, processPendingChanges (controller moves the row, delivers the change set)", medianOf(deliverTimes)))
        \(row("Kura: set score, save (the same plus the store write)", medianOf(saveTimes)))
        \(row("Kura: the fetch run again instead (what a refetch would cost)", medianOf(refetchTimes)))
        \(row("SQLite: UPDATE one row + SELECT id ORDER BY score, name (index on score, name)", sqliteMedian))
        \(row("SQLite: the UPDATE alone", medianOf(sqliteUpdateTimes)))

        Rows touched per change (controller statistics): objects evaluated \(stat(\.objectsEvaluated)); sort-value comparisons \(stat(\.comparisons)); rows shifted in memory \(stat(\.rowsShifted)); chunk references walked \(stat(\.chunksScanned)); refetched: \(touched.contains { $0.refetched } ? "yes" : "never").
        performFetch of \(n) rows: \(formatSeconds(fetchTime)). Check: the controller's final order equals SQLite's ORDER BY.

        """)
    }
}
