// SemiJoin+SortWalk: a sort led by a to-one lookup, with a limit, driven from
// the target table's index (issue 15: students by `record.grade` desc, limit 10).
//
// Applies when the first sort key names a one-hop `ColumnLookup` (outer column
// F holds row IDs of target table T, the key reads T's column g), is
// descending, the query has a limit, T has an index whose first column gives
// g's order for the key (QueryPlanner.sortMatch), and the outer table has an
// index whose first column is F. Then:
//   1. walk T's index in sort order, one run of equal g values at a time;
//   2. for each target row of the run, probe the outer F index with its row ID;
//      each outer row whose F really is that integer and that passes the
//      query's predicate and joins belongs to the run;
//   3. order the run by the remaining sort keys, then row ID (the generic
//      sort's tiebreak), and append as many of its rows as are still needed
//      (the least ones, picked without sorting a long run whole);
//   4. stop at a run boundary once `offset + limit` rows are out.
// The FK index is probed from the last probe's path (`TreeCursor.seekNear`)
// and the outer rows are read through a kept path (`RowPath`): a run's
// target rows come in index order, so both land close to the last ones.
// Null g values and outer rows whose F is null, not an integer or names no
// row all read g as null, which sorts after every value in a descending sort:
// when the walk reaches the index's null entries (or its end) before the
// limit is filled, the rest is that null group, found by one pass over the
// outer candidates (its own plan) keeping the rows whose lookup is null,
// sorted the same way. An ascending first key puts the null group first, so
// the walk does not apply. The row IDs come out in the final order and the
// cursor reads them as an ordered row-ID plan (testing each again), so the
// answer is the generic sort's, row for row.
//
// Chosen by cost against the query's best plan plus one lookup per candidate
// (what the generic sort pays); `explain` shows the walk and both costs.

/// For tests: take the walk whenever it applies, whatever the costs (so
/// that small stores reach its null group and long runs).
enum SortWalkTesting {
    @TaskLocal static var always = false
}

extension ReadTransaction {
    /// An ordered row-ID plan for `query` from a walk of its sort lookup's
    /// target index (see the file header) when it applies and costs less than
    /// `bestCost` plus the generic sort's lookups, with `explain` lines; nil
    /// when it does not apply. When `explaining`, the plan's row IDs are not read.
    func sortWalkPlan(_ query: TableQuery, _ r: ResolvedQuery, _ setup: JoinSetup, ownPlan: QueryPlan, bestCost: Double, bestRows: Double,
                      explaining: Bool) throws(KuraError) -> (plan: QueryPlan?, notes: [String])? {
        guard let limit = query.limit, let k0 = query.sort.first, !k0.ascending,
              let lookup = query.lookups.first(where: { $0.name == k0.column }), lookup.hops.count == 1,
              let resolved = setup.lookups[k0.column], let step = resolved.steps.first else { return nil }
        let target = step.next
        let targetSchema = try schema(of: target)
        let targetKey = SortKey(lookup.column, ascending: false, collation: k0.collation)
        var walk: (index: IndexDefinition, reverse: Bool)?
        for index in try indexes(of: target.name) {
            if let (reverse, _) = QueryPlanner.sortMatch(index, from: 0, [targetKey], schema: targetSchema) { walk = (index, reverse); break }
        }
        guard let walk, let fk = r.indexes.first(where: { $0.columns.first?.name == lookup.hops[0].column }) else { return nil }

        // Cost: targets visited until `keep` outer rows pass, each an index
        // entry, a probe of the outer FK index and the outer rows it finds.
        let keep = Double(query.offset + limit)
        let outerRows = Double(max(try rowCount(r.info), 1))
        let targetRows = Double(max(try rowCount(target), 1))
        var selectivity = min(1, ownPlan.estimatedRows / outerRows)
        for c in setup.candidates { selectivity = min(selectivity, Double(c.ids.count) / outerRows) }
        let perTarget = max(selectivity * outerRows / targetRows, 1 / targetRows)
        let visited = min(targetRows, keep / perTarget + 1)
        let walkCost = visited * (QueryCost.indexEntry + QueryCost.rowLookup) + visited * perTarget * QueryCost.rowLookup
        let sortCost = bestCost + bestRows * QueryCost.rowLookup * Double(query.lookups.count)
        func fmt(_ x: Double) -> String { estimateText(x, decimal: false) }
        var notes: [String] = []
        if explaining {
            notes.append("sort key \"\(k0.column)\": walk index \"\(walk.index.name)\" of table \"\(target.name)\" \(walk.reverse ? "backward" : "forward") in sort order, probing index \"\(fk.name)\" with each row ID, until the limit is filled and the tie settled: cost \(fmt(walkCost)); read the candidates and sort them: cost \(fmt(sortCost))")
        }
        guard walkCost < sortCost || SortWalkTesting.always else {
            if explaining { notes.append("  * read the candidates and sort them") }
            return (nil, notes)
        }
        if explaining { notes.append("  * walk of index \"\(walk.index.name)\" (rows come out in sort order)") }
        var plan = QueryPlan(access: .rowIDs([]), ordered: true)
        plan.estimatedCost = walkCost
        plan.estimatedRows = min(keep, ownPlan.estimatedRows)
        if !explaining {
            let ids: [Int64]
            if let w = writer {
                ids = try sortWalk(query, r, setup, ownPlan: ownPlan, walk: walk, fk: fk, resolved: resolved, keep: Int(keep), w)
            } else {
                ids = try sortWalk(query, r, setup, ownPlan: ownPlan, walk: walk, fk: fk, resolved: resolved, keep: Int(keep), snapshotPages!)
            }
            plan.access = .rowIDs(ids)
        }
        return (plan, notes)
    }

    /// The first `keep` (or more, a whole run) matching outer row IDs in sort order.
    private func sortWalk<S: PageSource>(_ query: TableQuery, _ r: ResolvedQuery, _ setup: JoinSetup, ownPlan: QueryPlan,
                                         walk: (index: IndexDefinition, reverse: Bool), fk: IndexDefinition, resolved: ResolvedLookup,
                                         keep: Int, _ s: S) throws(KuraError) -> [Int64] {
        let compiled = query.predicate.map { CompiledPredicate($0, columns: r.columns) }
        func matches(_ b: UnsafeRawBufferPointer, _ id: Int64) throws(KuraError) -> Bool {
            if let compiled, !(try compiled.matches(b)) { return false }
            for f in setup.filters where !(try f.passes(b, rowID: id, s)) { return false }
            return true
        }
        // The remaining sort keys' values, read as the generic sort reads them.
        let rest = Array(query.sort.dropFirst())
        var readers: [(position: Int, defaultValue: Value, lookup: ResolvedLookup?)] = []
        for k in rest {
            if let l = setup.lookups[k.column] {
                readers.append((-1, .null, l))
            } else if let schema = r.schema, let p = schema.position(of: k.column) {
                readers.append((p, schema.columns[p].defaultValue, nil))
            } else {
                throw KuraError(.notFound, "cannot sort by \"\(k.column)\": table \"\(r.info.name)\" has no such column")
            }
        }
        // The remaining keys' values of the current run's rows (and then of
        // the null group's), read as the generic sort reads them.
        var tied = TiedRows(rest)
        // `tied` is passed in (a nested function capturing the variable would
        // box it and check exclusive access on every use).
        func keyed(_ b: UnsafeRawBufferPointer, _ id: Int64, _ tied: inout TiedRows) throws(KuraError) {
            let base = tied.values.count
            for (i, read) in readers.enumerated() {
                let v: Value
                if let l = read.lookup {
                    v = try l.value(b, s)
                } else {
                    v = read.position < (try RecordCodec.count(in: b)) ? try RecordCodec.value(at: read.position, in: b) : read.defaultValue
                }
                tied.values.append(rest[i].collation.sortValue(v))
            }
            tied.rows.append((base, id))
        }
        // Outer rows are read through a path kept from one read to the next,
        // and the FK index is probed from the lowest page of the last probe's
        // path that brackets the key (`seekNear`): a run's target rows come in
        // index order, so their probes and outer rows lie close together.
        // Both keep pages across reads, which holds here: the walk writes
        // nothing, and runs to its end before the transaction can.
        var outer = RowPath(tree: BTree(root: r.info.rootPage, kind: .table))
        let walkIndex = SearchIndex(walk.index)
        let fkIndex = SearchIndex(fk)
        let fkColumn = resolved.steps[0]
        let nullSegment = QueryPlanner.segment(.null, walk.index.columns[0])
        var out: [Int64] = []
        var cursor = TreeCursor(tree: walk.index.tree)
        if walk.reverse { try cursor.last(s) } else { try cursor.first(s) }
        var runKey: [UInt8]?
        var probe = TreeCursor(tree: fk.tree)
        // The probe's key: the FK column's segment for the target row ID,
        // built in one buffer reused for every target.
        var seg: [UInt8] = []
        seg.reserveCapacity(16)
        while cursor.isValid {
            // Keys are read where they lie in their leaves (valid until the
            // cursor moves): no copy per entry; the run's key is copied only
            // when a new run starts.
            let k = cursor.key
            let segment = UnsafeRawBufferPointer(rebasing: k[0..<(try walkIndex.prefixLength(k, columns: 1))])
            if Self.sameBytes(segment, nullSegment) { break }
            if let rk = runKey, !Self.sameBytes(segment, rk) {
                // A run of equal values ends: settle its order.
                out += tied.first(keep - out.count)
                tied.removeAll()
                if out.count >= keep { return out }
                runKey = nil
            }
            if runKey == nil { runKey = Array(segment) }
            // The outer rows naming this target row.
            let targetID = try walkIndex.rowID(k)
            seg.removeAll(keepingCapacity: true)
            IndexKey.append(.integer(targetID), descending: fk.columns[0].descending, folded: fk.columns[0].folded, to: &seg)
            try seg.withBytes { b throws(KuraError) in try probe.seekNear(b, s) }
            while probe.isValid {
                let pk = probe.key
                guard pk.count >= seg.count, Self.sameBytes(UnsafeRawBufferPointer(rebasing: pk[0..<seg.count]), seg) else { break }
                let id = try fkIndex.rowID(pk)
                try probe.next(s)
                // The outer row read in place (no copy of its record).
                guard let record = try RowIDKey.withEncoded(id, { key throws(KuraError) in try outer.locate(id, key, s) }) else {
                    throw KuraError(.corrupt, "index \"\(fk.name)\" names row \(id), which table \"\(r.info.name)\" does not have", page: fk.info.rootPage)
                }
                try Self.withBytes(record) { b throws(KuraError) in
                    let n = try RecordCodec.count(in: b)
                    let v = fkColumn.position < n ? try RecordCodec.value(at: fkColumn.position, in: b) : fkColumn.defaultValue
                    // Not this integer key (a double equal to it): its lookup
                    // reads null, so the null group has it.
                    guard case .integer(let x) = v, x == targetID else { return }
                    do throws(KuraError) {
                        guard try matches(b, id) else { return }
                    } catch {
                        throw CandidateSource.locating(error, rowID: id, page: nil)
                    }
                    try keyed(b, id, &tied)
                }
            }
            if walk.reverse { try cursor.previous(s) } else { try cursor.next(s) }
        }
        out += tied.first(keep - out.count)
        tied.removeAll()
        if out.count >= keep { return out }
        // The null group: every matching outer row whose lookup reads null.
        var source = CandidateSource(plan: ownPlan, table: r.info)
        while let row = try source.next(s, matching: { b, id throws(KuraError) in
            guard try matches(b, id), case .null = try resolved.value(b, s) else { return false }
            return true
        }) {
            try row.record.withBytes { b throws(KuraError) in try keyed(b, row.rowID, &tied) }
        }
        return out + tied.first(tied.rows.count)
    }

    /// `body` on the bytes of `record` (in its page, or copied).
    @inline(__always)
    private static func withBytes<T>(_ record: LocatedValue, _ body: (UnsafeRawBufferPointer) throws(KuraError) -> T) throws(KuraError) -> T {
        switch record {
        case .inPage(let page, let offset, let count):
            return try withExtendedLifetime(page) { () throws(KuraError) -> T in
                try body(UnsafeRawBufferPointer(start: page.bytes + offset, count: count))
            }
        case .copied(let bytes):
            return try bytes.withBytes(body)
        }
    }

    /// Whether `a` holds the bytes of `b`.
    @inline(__always)
    private static func sameBytes(_ a: UnsafeRawBufferPointer, _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        // Short keys (a segment: a tag and a few bytes): a plain loop.
        for i in 0..<a.count where a[i] != b[i] { return false }
        return true
    }
}

/// Outer rows tied on a sort walk's first key: each row's values of the
/// remaining sort keys (stored flat, `keys.count` per row, already in the
/// form the generic sort compares) and its row ID, ordered as the generic
/// sort orders them (the keys in turn, then the row ID).
private struct TiedRows {
    typealias Row = (base: Int, rowID: Int64)
    let keys: [SortKey]
    private let ascending: [Bool]
    /// Per key, whether its collation was applied when the value was read
    /// (then the values compare plainly).
    private let foldsOnly: [Bool]
    var values: [Value] = []
    /// Each row's first value in `values`, and its row ID.
    var rows: [Row] = []

    init(_ keys: [SortKey]) {
        self.keys = keys
        ascending = keys.map(\.ascending)
        foldsOnly = keys.map(\.collation.foldsOnly)
    }

    /// The row IDs of the first `need` rows in order (all of them when
    /// fewer). A long run for a short limit (a thousand rows tied on a grade,
    /// ten asked for) is not sorted whole: rows already in order (or in
    /// reverse) are taken as they lie, others pass through a heap of the
    /// least `need`.
    func first(_ need: Int) -> [Int64] {
        guard need > 0, !rows.isEmpty else { return [] }
        return values.withUnsafeBufferPointer { v in
            // Values compared where they lie (no copy of a value per
            // comparison). `v` is not empty when the loop reads it: each row
            // stored one value per key.
            func less(_ x: Row, _ y: Row) -> Bool {
                var i = 0
                while i < ascending.count {
                    let a = v.baseAddress! + x.base + i
                    let b = v.baseAddress! + y.base + i
                    var c: Int
                    if case .integer(let p) = a.pointee, case .integer(let q) = b.pointee {
                        c = p < q ? -1 : p == q ? 0 : 1
                    } else {
                        c = foldsOnly[i] ? ValueOrdering.compare(a.pointee, b.pointee) : keys[i].compareValues(a.pointee, b.pointee)
                    }
                    if !ascending[i] { c = -c }
                    if c != 0 { return c < 0 }
                    i += 1
                }
                return x.rowID < y.rowID
            }
            if rows.count <= need * 4 {
                return rows.sorted(by: less).prefix(need).map(\.rowID)
            }
            // Rows often come already in order, or in reverse (the remaining
            // key grows with the row ID, and the walk goes backward): one pass
            // finds that (rows differ in row ID, so no two are equal).
            var forward = true
            var backward = true
            for j in 1..<rows.count where forward || backward {
                if less(rows[j], rows[j - 1]) { forward = false } else { backward = false }
            }
            if forward { return rows.prefix(need).map(\.rowID) }
            if backward { return rows.suffix(need).reversed().map(\.rowID) }
            // A heap whose first row is the greatest kept.
            var heap: [Row] = []
            heap.reserveCapacity(need)
            for r in rows {
                if heap.count < need {
                    heap.append(r)
                    var i = heap.count - 1
                    while i > 0 {
                        let parent = (i - 1) / 2
                        guard less(heap[parent], heap[i]) else { break }
                        heap.swapAt(parent, i)
                        i = parent
                    }
                } else if less(r, heap[0]) {
                    heap[0] = r
                    var i = 0
                    while true {
                        var greatest = i
                        let left = 2 * i + 1
                        let right = left + 1
                        if left < heap.count, less(heap[greatest], heap[left]) { greatest = left }
                        if right < heap.count, less(heap[greatest], heap[right]) { greatest = right }
                        if greatest == i { break }
                        heap.swapAt(i, greatest)
                        i = greatest
                    }
                }
            }
            return heap.sorted(by: less).map(\.rowID)
        }
    }

    mutating func removeAll() {
        values.removeAll(keepingCapacity: true)
        rows.removeAll(keepingCapacity: true)
    }
}
