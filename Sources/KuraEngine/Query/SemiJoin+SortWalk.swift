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
//   3. sort the run by the remaining sort keys, then row ID (the generic
//      sort's tiebreak), and append it;
//   4. stop at a run boundary once `offset + limit` rows are out.
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
        func keyed(_ b: UnsafeRawBufferPointer, _ id: Int64) throws(KuraError) -> (values: [Value], rowID: Int64) {
            var vs: [Value] = []
            for (i, read) in readers.enumerated() {
                let v: Value
                if let l = read.lookup {
                    v = try l.value(b, s)
                } else {
                    v = read.position < (try RecordCodec.count(in: b)) ? try RecordCodec.value(at: read.position, in: b) : read.defaultValue
                }
                vs.append(rest[i].collation.sortValue(v))
            }
            return (vs, id)
        }
        func less(_ a: (values: [Value], rowID: Int64), _ b: (values: [Value], rowID: Int64)) -> Bool {
            for (i, k) in rest.enumerated() {
                var c = k.collation.foldsOnly ? ValueOrdering.compare(a.values[i], b.values[i]) : k.compareValues(a.values[i], b.values[i])
                if !k.ascending { c = -c }
                if c != 0 { return c < 0 }
            }
            return a.rowID < b.rowID
        }
        let outerTree = BTree(root: r.info.rootPage, kind: .table)
        let fkColumn = resolved.steps[0]
        let nullSegment = QueryPlanner.segment(.null, walk.index.columns[0])
        var out: [Int64] = []
        var cursor = TreeCursor(tree: walk.index.tree)
        if walk.reverse { try cursor.last(s) } else { try cursor.first(s) }
        var run: [(values: [Value], rowID: Int64)] = []
        var runKey: [UInt8]?
        var probe = TreeCursor(tree: fk.tree)
        while cursor.isValid {
            // Keys are read where they lie in their leaves (valid until the
            // cursor moves): no copy per entry; the run's key is copied only
            // when a new run starts.
            let k = cursor.key
            let segment = UnsafeRawBufferPointer(rebasing: k[0..<(try IndexKeyParser.prefixLength(k, columns: 1, of: walk.index))])
            if Self.sameBytes(segment, nullSegment) { break }
            if let rk = runKey, !Self.sameBytes(segment, rk) {
                // A run of equal values ends: settle its order.
                run.sort(by: less)
                out += run.map(\.rowID)
                run.removeAll(keepingCapacity: true)
                if out.count >= keep { return out }
                runKey = nil
            }
            if runKey == nil { runKey = Array(segment) }
            // The outer rows naming this target row.
            let targetID = try IndexKeyParser.rowID(k, of: walk.index)
            let seg = QueryPlanner.segment(.integer(targetID), fk.columns[0])
            try seg.withBytes { b throws(KuraError) in try probe.seek(b, s) }
            while probe.isValid {
                let pk = probe.key
                guard pk.count >= seg.count, Self.sameBytes(UnsafeRawBufferPointer(rebasing: pk[0..<seg.count]), seg) else { break }
                let id = try IndexKeyParser.rowID(pk, of: fk)
                try probe.next(s)
                // The outer row read in place (no copy of its record).
                let found: (values: [Value], rowID: Int64)?? = try RowIDKey.withEncoded(id) { key throws(KuraError) in
                    try outerTree.withValue(key, s) { b throws(KuraError) -> (values: [Value], rowID: Int64)? in
                        let n = try RecordCodec.count(in: b)
                        let v = fkColumn.position < n ? try RecordCodec.value(at: fkColumn.position, in: b) : fkColumn.defaultValue
                        // Not this integer key (a double equal to it): its lookup
                        // reads null, so the null group has it.
                        guard case .integer(let x) = v, x == targetID else { return nil }
                        do throws(KuraError) {
                            guard try matches(b, id) else { return nil }
                        } catch {
                            throw CandidateSource.locating(error, rowID: id, page: nil)
                        }
                        return try keyed(b, id)
                    }
                }
                guard let found else {
                    throw KuraError(.corrupt, "index \"\(fk.name)\" names row \(id), which table \"\(r.info.name)\" does not have", page: fk.info.rootPage)
                }
                if let entry = found { run.append(entry) }
            }
            if walk.reverse { try cursor.previous(s) } else { try cursor.next(s) }
        }
        run.sort(by: less)
        out += run.map(\.rowID)
        if out.count >= keep { return out }
        // The null group: every matching outer row whose lookup reads null.
        var nulls: [(values: [Value], rowID: Int64)] = []
        var source = CandidateSource(plan: ownPlan, table: r.info)
        while let row = try source.next(s, matching: { b, id throws(KuraError) in
            guard try matches(b, id), case .null = try resolved.value(b, s) else { return false }
            return true
        }) {
            nulls.append(try row.record.withBytes { b throws(KuraError) in try keyed(b, row.rowID) })
        }
        nulls.sort(by: less)
        return out + nulls.map(\.rowID)
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
