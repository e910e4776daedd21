// Transaction+Query: reading and changing rows by predicate.
//
// Queries address columns by name, so the table needs a schema. A query is
// resolved (table, schema, column ordinals, indexes: ResolvedQuery), planned by
// cost (QueryPlanner) and its predicate compiled to column ordinals
// (CompiledPredicate) before it runs; PreparedQuery keeps the resolution across
// runs. Every path (index or scan, read or write transaction) tests each
// candidate against the whole predicate, so the access path never changes an
// answer.

import Foundation

extension ReadTransaction {
    /// Rows of `query.table` matching the query, as a streaming cursor.
    ///
    /// The query is resolved, planned by cost (QueryPlanner) and its predicate
    /// compiled to column ordinals (CompiledPredicate) for this call; to do the
    /// resolution once for many runs, use ``prepare(_:)``.
    ///
    /// - Throws: `.notFound` for an unknown table or column (named);
    ///   `.invalidArgument` for a negative offset or limit, or a key path that
    ///   crosses a relationship (tables have none; the object layer resolves them).
    public func select(_ query: TableQuery) throws(KuraError) -> QueryCursor {
        // `resolve` validated `query` against the resolution it returns.
        try select(query, resolved: try resolve(query), validated: true)
    }

    /// All rows matching `query`, decoded.
    public func fetch(_ query: TableQuery) throws(KuraError) -> [(rowID: Int64, values: [Value])] {
        try fetchAll(try select(query))
    }

    /// Number of rows matching `query` (after offset and limit).
    public func count(_ query: TableQuery) throws(KuraError) -> Int {
        try count(query, resolved: try resolve(query))
    }

    /// A readable description of how `query` would run: the access path chosen and
    /// the estimated cost of each one considered, key ranges, the filter every
    /// candidate row is checked against, and the sort.
    public func explain(_ query: TableQuery) throws(KuraError) -> String {
        try explain(query, resolved: try resolve(query))
    }

    // MARK: Running resolved queries

    /// `validated`: `query` was validated against `r` already (`resolve` does).
    func select(_ query: TableQuery, resolved r: ResolvedQuery, validated: Bool = false) throws(KuraError) -> QueryCursor {
        if !validated { try Self.validate(query, r) }
        if query.joins.isEmpty && query.lookups.isEmpty {
            let plan = try self.plan(query, r, explaining: false)
            return QueryCursor(transaction: self, query: query, resolved: r, plan: plan)
        }
        let ownPlan = try self.plan(query, r, explaining: false)
        let setup = try joinSetup(query, r, ownPlan: ownPlan, explaining: false)
        let plan = try joinedPlan(query, r, setup, ownPlan: ownPlan)
        return QueryCursor(transaction: self, query: query, resolved: r, plan: plan, joins: setup)
    }

    /// The cheapest candidates for a query with joins (SemiJoin.swift): its own
    /// plan, the row IDs a positive join yields, or a probe of the index on a
    /// positive join's foreign-key column; the chosen rows come by row ID.
    func joinedPlan(_ query: TableQuery, _ r: ResolvedQuery, _ setup: JoinSetup, ownPlan: QueryPlan, explaining: Bool = false) throws(KuraError) -> QueryPlan {
        var plan = ownPlan
        func sortCost(_ m: Double) -> Double {
            query.sort.isEmpty ? 0 : m * log2(max(m, 2)) * QueryCost.sortStep
        }
        func fmt(_ x: Double) -> String { estimateText(x) }
        var options: [(cost: Double, note: String)] = [(plan.estimatedCost, "the table's own plan (above)")]
        var best = 0
        for c in setup.candidates {
            options.append((c.cost + sortCost(Double(c.ids.count)), c.note))
            if options[options.count - 1].cost < options[best].cost { best = options.count - 1 }
        }
        for p in setup.probes {
            options.append((p.cost + sortCost(Double(p.ids.count)), p.note))
            if options[options.count - 1].cost < options[best].cost { best = options.count - 1 }
        }
        // A sort led by a to-one lookup may come from the target's index (SemiJoin+SortWalk.swift).
        let bestRows = best == 0 ? ownPlan.estimatedRows
            : Double(best - 1 < setup.candidates.count ? setup.candidates[best - 1].ids.count : setup.probes[best - 1 - setup.candidates.count].ids.count)
        let walk = try sortWalkPlan(query, r, setup, ownPlan: ownPlan, bestCost: options[best].cost, bestRows: bestRows, explaining: explaining)
        if let p = walk?.plan {
            plan = p
        } else if best > 0 {
            var ids: [Int64]
            if best - 1 < setup.candidates.count {
                ids = Array(setup.candidates[best - 1].ids)
            } else {
                let probe = setup.probes[best - 1 - setup.candidates.count]
                ids = try probeIndex(probe.index, integers: probe.ids)
            }
            ids.sort()
            var chosen = QueryPlan(access: .rowIDs(ids), ordered: query.sort.isEmpty)
            chosen.estimatedCost = options[best].cost
            plan = chosen
        }
        if explaining {
            plan.notes = setup.notes + (best == 0 ? plan.notes : ["candidates of table \"\(r.info.name)\" from " + options[best].note] + plan.notes)
            plan.notes += walk?.notes ?? []
            plan.notes.append("candidates (joins materialized first):")
            for (i, o) in options.enumerated() {
                plan.notes.append("  \(i == best ? "*" : " ") \(o.note): cost \(fmt(o.cost))")
            }
        }
        return plan
    }

    private func explainJoined(_ query: TableQuery, _ r: ResolvedQuery) throws(KuraError) -> QueryPlan {
        let ownPlan = try self.plan(query, r, explaining: true)
        return try joinedPlan(query, r, try joinSetup(query, r, ownPlan: ownPlan, explaining: true), ownPlan: ownPlan, explaining: true)
    }

    /// Row IDs of the entries of `index` whose first column's segment is
    /// the integer segment of one of `ids` (a foreign-key probe with the
    /// inner rows' IDs), in key order, each distinct ID's once
    /// (`probeEntries`, KeyedRows.swift: one reused segment buffer, each
    /// seek from the cursor's path in a read snapshot, from the root in a
    /// write transaction, whose pages may change between reads).
    ///
    /// - Throws: `.corrupt` for a malformed index key; engine read errors.
    func probeIndex(_ index: IndexDefinition, integers ids: [Int64]) throws(KuraError) -> [Int64] {
        var out: [Int64] = []
        out.reserveCapacity(ids.count)
        if let w = writer {
            try probeEntries(index, ids, w, near: false) { out.append($0) }
        } else if let s = snapshotPages {
            try probeEntries(index, ids, s, near: true) { out.append($0) }
        }
        return out
    }

    func fetchAll(_ c: QueryCursor) throws(KuraError) -> [(rowID: Int64, values: [Value])] {
        var out: [(rowID: Int64, values: [Value])] = []
        while let r = try c.next() { out.append((r.rowID, try decodeRow(r.record, c.info, rowID: r.rowID))) }
        return out
    }

    func count(_ query: TableQuery, resolved r: ResolvedQuery) throws(KuraError) -> Int {
        try Self.validate(query, r)
        if query.predicate == nil && query.joins.isEmpty && query.offset == 0 && query.limit == nil {
            return try rowCount(r.info)
        }
        var q = query
        q.sort = []
        let c = try select(q, resolved: r)
        var n = 0
        while try c.next() != nil { n += 1 }
        return n
    }

    func explain(_ query: TableQuery, resolved r: ResolvedQuery) throws(KuraError) -> String {
        try Self.validate(query, r)
        let plan = query.joins.isEmpty && query.lookups.isEmpty ? try self.plan(query, r, explaining: true)
            : try explainJoined(query, r)
        var lines = ["query on table \"\(r.info.name)\" (\(try rowCount(r.info)) rows)"]
        lines += plan.notes.map { "  " + $0 }
        // An exact plan does not test the rows: its key ranges are the predicate.
        if let p = query.predicate, !plan.exact { lines.append("  filter each candidate row: " + p.predicateFormat) }
        if !query.sort.isEmpty && !plan.ordered {
            lines.append("  sort by " + query.sort.map(\.description).joined(separator: ", ") + (query.limit.map { ", keeping the first \(query.offset + $0)" } ?? ""))
        } else if query.sort.isEmpty && !plan.ordered {
            lines.append("  read the candidates in row-ID order")
        }
        if query.offset > 0 { lines.append("  skip \(query.offset)") }
        if let l = query.limit { lines.append("  stop after \(l)") }
        return lines.joined(separator: "\n")
    }

    /// Resolves `query`'s table, schema, columns and indexes, and validates it.
    func resolve(_ query: TableQuery) throws(KuraError) -> ResolvedQuery {
        try checkActive()
        if writer == nil {
            // A read transaction resolves each table once (TableHandle.swift).
            let h = try readHandle(query.table)
            let r = ResolvedQuery(info: h.info, schema: h.schema, indexes: h.indexes, columns: h.columns,
                                  fingerprint: try schemaFingerprint(of: h.info.name))
            try Self.validate(query, r)
            return r
        }
        let info = try table(query.table)
        // A write transaction's hot table (TableHandle.swift) holds the
        // table's schema, indexes and column map resolved; every schema
        // change drops it (`flushHotTable`), so it is this schema's.
        if let w = self as? WriteTransaction, let h = w.resolvedHandle(info) {
            let r = ResolvedQuery(info: info, schema: h.schema, indexes: h.indexes, columns: h.columns,
                                  fingerprint: try schemaFingerprint(of: info.name))
            try Self.validate(query, r)
            return r
        }
        let schema = try self.schema(of: info)
        let r = ResolvedQuery(info: info, schema: schema, indexes: try indexes(of: info.name),
                              columns: ColumnMap(table: info.name, schema: schema),
                              fingerprint: try schemaFingerprint(of: info.name))
        try Self.validate(query, r)
        return r
    }

    /// Offset, limit, key paths and sort columns of `query` against `r`.
    static func validate(_ query: TableQuery, _ r: ResolvedQuery) throws(KuraError) {
        guard query.offset >= 0, (query.limit ?? 0) >= 0 else {
            throw KuraError(.invalidArgument, "offset and limit must not be negative (got \(query.offset), \(query.limit ?? 0))")
        }
        if let p = query.predicate { try checkKeyPaths(p, schema: r.schema, table: r.info.name) }
        for k in query.sort where r.columns.positions[k.column] == nil && !query.lookups.contains(where: { $0.name == k.column }) {
            throw KuraError(.notFound, "cannot sort by \"\(k.column)\": table \"\(r.info.name)\" has no such column")
        }
        for k in query.sort where r.schema?.hasExternal == true {
            if let schema = r.schema, let i = schema.position(of: k.column), schema.columns[i].type == .external {
                throw KuraError(.unsupported, "cannot sort by \"\(k.column)\": its values are stored externally (large binary values in files)")
            }
        }
    }

    /// The cheapest access path for `query`, from the table's row count and
    /// estimates read from the index trees (BTree.position).
    func plan(_ query: TableQuery, _ r: ResolvedQuery, explaining: Bool) throws(KuraError) -> QueryPlan {
        let rows = try rowCount(r.info)
        // The planner asks for the same estimate twice (selectivity, then the
        // index's cost): the second is the first one's answer. (Three plain
        // variables: an optional tuple was copied through generic witnesses.)
        var lastIndex: Int64 = 0
        var lastRanges: [KeyRange] = []
        var lastEntries = -1.0
        return try QueryPlanner.plan(query, schema: r.schema, indexes: r.indexes, rowCount: rows, explaining: explaining) { index, ranges throws(KuraError) in
            if lastEntries >= 0, lastIndex == index.info.id, lastRanges == ranges { return lastEntries }
            let entries = try self.estimateEntries(index, ranges, total: rows)
            (lastIndex, lastRanges, lastEntries) = (index.info.id, ranges, entries)
            return entries
        }
    }

    /// Estimated number of entries of `index` inside `ranges` (at most 8 ranges
    /// are measured; the rest are assumed alike).
    func estimateEntries(_ index: IndexDefinition, _ ranges: [KeyRange], total: Int) throws(KuraError) -> Double {
        if let w = writer { return try Self.estimate(index, ranges, total: total, w) }
        return try Self.estimate(index, ranges, total: total, snapshotPages!)
    }

    private static func estimate<S: PageSource>(_ index: IndexDefinition, _ ranges: [KeyRange], total: Int, _ s: S) throws(KuraError) -> Double {
        guard !ranges.isEmpty, total > 0 else { return 0 }
        let tree = index.tree
        var sum = 0.0
        let measured = ranges.prefix(8)
        for r in measured {
            let lo = try r.lower.withBytes { b throws(KuraError) in try tree.position(of: b, s) }
            var past = r.upper
            let hi: Double
            if past.isEmpty || !KeyRange.incrementPrefix(&past) {
                hi = 1
            } else {
                hi = try past.withBytes { b throws(KuraError) in try tree.position(of: b, s) }
            }
            // A range inside one leaf gap still holds at most a few entries: count
            // it as one, so an equality on a missing value is not free.
            sum += max(hi - lo, 0) * Double(total) + 1
        }
        return min(Double(total), sum * Double(ranges.count) / Double(measured.count))
    }

    /// Every key path read from the row must name a column.
    static func checkKeyPaths(_ p: KuraPredicate, schema: TableSchema?, table: String) throws(KuraError) {
        switch p {
        case .truePredicate, .falsePredicate: return
        case .not(let x): try checkKeyPaths(x, schema: schema, table: table)
        case .and(let xs), .or(let xs): for x in xs { try checkKeyPaths(x, schema: schema, table: table) }
        case .comparison(let c):
            try checkKeyPaths(c.left, schema: schema, table: table)
            try checkKeyPaths(c.right, schema: schema, table: table)
            // An external column holds a reference to its file (ExternalValues.swift):
            // only whether it is nil can be asked; comparing the reference's
            // text would be a silently wrong answer about the value.
            let nilTest: Bool = {
                guard c.quantifier == .direct, c.operator == .equalTo || c.operator == .notEqualTo else { return false }
                switch (c.left, c.right) {
                case (.keyPath, .constant(.null)), (.constant(.null), .keyPath): return true
                default: return false
                }
            }()
            // Only a schema with an external column has one to find.
            if schema?.hasExternal == true, !nilTest, let name = externalColumn(in: c.left, schema) ?? externalColumn(in: c.right, schema) {
                throw KuraError(.unsupported, "column \"\(name)\" of table \"\(table)\" is stored externally (large binary values in files): a predicate can only test it against nil, not in \"\(KuraPredicate.comparison(c).predicateFormat)\"")
            }
        }
    }

    /// The first external column `e` reads, if any.
    static func externalColumn(in e: KuraExpression, _ schema: TableSchema?) -> String? {
        guard let schema else { return nil }
        switch e {
        case .keyPath(let keys):
            guard let first = keys.first, let i = schema.position(of: first), schema.columns[i].type == .external else { return nil }
            return first
        case .member(let b, _), .index(let b, _), .unary(_, let b), .cast(let b, _): return externalColumn(in: b, schema)
        case .aggregate(let xs), .function(_, let xs): return xs.lazy.compactMap { externalColumn(in: $0, schema) }.first
        case .binary(_, let a, let b): return externalColumn(in: a, schema) ?? externalColumn(in: b, schema)
        default: return nil
        }
    }

    static func checkKeyPaths(_ e: KuraExpression, schema: TableSchema?, table: String) throws(KuraError) {
        switch e {
        case .keyPath(let keys):
            guard let first = keys.first else { return }
            if first.hasPrefix("@") { return }
            guard schema?.position(of: first) != nil else {
                throw KuraError(.notFound, "table \"\(table)\" has no column \"\(first)\"" + (schema == nil ? " (it has no schema; create it with one to query by name)" : ""))
            }
            if keys.count > 1 && !keys[1].hasPrefix("@") {
                throw KuraError(.invalidArgument, "key path \"\(keys.joined(separator: "."))\" follows a relationship; tables have none (the object layer resolves relationships)")
            }
        case .constant, .date, .variable, .variableKeyPath: return
        case .member(let b, _), .index(let b, _), .unary(_, let b), .cast(let b, _): try checkKeyPaths(b, schema: schema, table: table)
        case .aggregate(let xs), .function(_, let xs): for x in xs { try checkKeyPaths(x, schema: schema, table: table) }
        case .binary(_, let a, let b):
            try checkKeyPaths(a, schema: schema, table: table)
            try checkKeyPaths(b, schema: schema, table: table)
        case .subquery(let collection, _, _): try checkKeyPaths(collection, schema: schema, table: table)
        }
    }
}

extension WriteTransaction {
    /// Sets `changes` (column name → value) on every row matching `predicate`;
    /// returns how many rows changed. Indexes follow.
    ///
    /// - Throws: as `select`, plus `.typeMismatch`/`.constraintViolation` naming the
    ///   column or unique index. Rows updated before a failing one stay updated
    ///   in this transaction; throw from the `write` closure to undo them all.
    @discardableResult
    public func update(_ table: String, where predicate: KuraPredicate?, set changes: [String: Value]) throws(KuraError) -> Int {
        let info = try self.table(table)
        guard let schema = try schema(of: info) else {
            throw KuraError(.invalidArgument, "table \"\(info.name)\" has no schema; update rows by row ID")
        }
        var positions: [(Int, Value)] = []
        for (name, v) in changes { positions.append((try schema.column(name, table: info.name).position, v)) }
        if let n = try updateInPlace(TableQuery(table, where: predicate), info, schema, set: positions) { return n }
        // The scan already read each row's record: it is the current one (no row
        // is visited twice, and updating one row leaves the others' records as
        // they are), so each update starts from it instead of descending again.
        // In row-ID order: consecutive rows mostly share a leaf, which the
        // tree then changes without descending again (BTree+Insert.swift).
        let rows = try matchingRows(TableQuery(table, where: predicate)).sorted { $0.rowID < $1.rowID }
        return try updateRows(rows, in: info, schema: schema, set: positions)
    }

    /// Deletes every row matching `predicate`; returns how many.
    @discardableResult
    public func delete(from table: String, where predicate: KuraPredicate?) throws(KuraError) -> Int {
        let info = try self.table(table)
        let q = TableQuery(table, where: predicate)
        if let n = try deleteExactMatches(q, info) { return n }
        return try deleteRows(try matchingRows(q), from: info)
    }

    /// `delete` of the rows an exact index plan selects (QueryPlanner, "Exact
    /// plans") when that index is the table's only one and the table has no
    /// external columns; nil, changing nothing, in every other case.
    ///
    /// Every entry inside the plan's key ranges is a match, and those entries
    /// are all the index holds for the matching rows: they are taken from the
    /// index walk itself (already in key order) and removed, then the rows by
    /// row ID in order. No record is read, no index key is built from one and
    /// none is sorted (`deleteRows` does all three for the general case).
    private func deleteExactMatches(_ q: TableQuery, _ info: TableInfo) throws(KuraError) -> Int? {
        let cursor = try select(q)
        let h = try hotTable(info)
        guard h.schema?.hasExternal != true, h.indexes.count == 1,
              let entries = try cursor.exactMatchEntries(), entries.index.info.id == h.indexes[0].info.id else { return nil }
        _ = try h.indexes[0].tree.delete(entries.keys, writer!)
        // An entry naming a row the table does not have is gone with the
        // others; nothing else is deleted for it (the general path skips it too).
        return try deleteRowKeys(entries.rowIDs, of: h)
    }

    /// `update` of the rows an exact index plan selects (QueryPlanner, "Exact
    /// plans"), when no index reads a changed column and the table has no
    /// external columns; nil, changing nothing, in every other case.
    ///
    /// The row IDs come from the index alone (all of them before any row
    /// changes), in row-ID order. Each row's record is read where it lies in
    /// its leaf; when every changed value keeps its serial type (RecordPatch)
    /// the new bodies are written over the old ones there
    /// (`BTree.changeInPlace`): no copy of the record, no second lookup, no
    /// cell replaced. Any other row (a value's type or size changes, an
    /// overflowing record, one that does not store a changed column) takes
    /// `updateRows`, as every row did before. The new values are validated
    /// before any row changes.
    private func updateInPlace(_ q: TableQuery, _ info: TableInfo, _ schema: TableSchema, set changes: [(Int, Value)]) throws(KuraError) -> Int? {
        guard !schema.hasExternal, !changes.isEmpty else { return nil }
        let cursor = try select(q)
        let h = try hotTable(info)
        let changed = Set(changes.map(\.0))
        guard !h.indexes.contains(where: { $0.columns.contains { changed.contains($0.position) } }),
              let ids = try cursor.exactMatchRowIDs() else { return nil }
        // In column order, as `updateRows` validates them.
        var validated: [(position: Int, value: Value)] = []
        for (p, v) in changes.sorted(by: { $0.0 < $1.0 }) {
            validated.append((p, try schema.validatedChange(v, at: p, table: h.info.name)))
        }
        var patch = RecordPatch(validated, compactDoubles: compactDoubles)
        let tree = h.tree
        var n = 0
        for id in ids {
            let outcome = try tree.changeInPlace(rowID: id, writer!, read: { b throws(KuraError) in try patch.preparesInPlace(b) },
                                                 write: { patch.writeInPlace($0) })
            switch outcome {
            case .written:
                changeCount += 1
                n += 1
            case .absent:
                continue
            case .declined:
                guard let record = try tree.getThroughLastLeaf(RowIDKey.encode(id), writer!) else { continue }
                n += try updateRows([Row(rowID: id, record: record)], in: info, schema: schema, set: changes)
            }
        }
        return n
    }

    /// The matching rows first, so changing rows does not disturb the scan.
    private func matchingRows(_ q: TableQuery) throws(KuraError) -> [Row] {
        let c = try select(q)
        // Nothing is written until every row is read: row reads may keep their path.
        c.keepRowPathsUntilTheNextWrite()
        var rows: [Row] = []
        while let r = try c.next() { rows.append(r) }
        return rows
    }
}
