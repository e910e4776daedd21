// Transaction+Query: reading and changing rows by predicate.
//
// Queries address columns by name, so the table needs a schema. Every path
// (index or scan, read or write transaction) evaluates the same predicate with
// the same evaluator; see QueryPlanner for how candidates are chosen.

extension ReadTransaction {
    /// Rows of `query.table` matching the query, as a streaming cursor.
    ///
    /// - Throws: `.notFound` for an unknown table or column (named);
    ///   `.invalidArgument` for a negative offset or limit, or a key path that
    ///   crosses a relationship (tables have none; the object layer resolves them).
    public func select(_ query: TableQuery) throws(KuraError) -> QueryCursor {
        let (info, schema, plan) = try prepare(query)
        return QueryCursor(transaction: self, query: query, info: info, schema: schema, plan: plan)
    }

    /// All rows matching `query`, decoded.
    public func fetch(_ query: TableQuery) throws(KuraError) -> [(rowID: Int64, values: [Value])] {
        let c = try select(query)
        var out: [(rowID: Int64, values: [Value])] = []
        while let r = try c.next() { out.append((r.rowID, try decodeRow(r.record, c.info, rowID: r.rowID))) }
        return out
    }

    /// Number of rows matching `query` (after offset and limit).
    public func count(_ query: TableQuery) throws(KuraError) -> Int {
        if query.predicate == nil && query.offset == 0 && query.limit == nil {
            return try rowCount(try table(query.table))
        }
        var q = query
        q.sort = []
        let c = try select(q)
        var n = 0
        while try c.next() != nil { n += 1 }
        return n
    }

    /// A readable description of how `query` would run: access path, key ranges,
    /// the filter every candidate row is checked against, and the sort.
    public func explain(_ query: TableQuery) throws(KuraError) -> String {
        let (info, _, plan) = try prepare(query, explaining: true)
        var lines = ["query on table \"\(info.name)\" (\(info.rowCount) rows)"]
        lines += plan.notes.map { "  " + $0 }
        if let p = query.predicate { lines.append("  filter each candidate row: " + p.predicateFormat) }
        if !query.sort.isEmpty && !plan.ordered {
            lines.append("  sort by " + query.sort.map(\.description).joined(separator: ", ") + (query.limit != nil ? ", keeping the first \(query.offset + query.limit!)" : ""))
        } else if query.sort.isEmpty && !plan.ordered {
            lines.append("  sort the matches by row ID")
        }
        if query.offset > 0 { lines.append("  skip \(query.offset)") }
        if let l = query.limit { lines.append("  stop after \(l)") }
        return lines.joined(separator: "\n")
    }

    func prepare(_ query: TableQuery, explaining: Bool = false) throws(KuraError) -> (TableInfo, TableSchema?, QueryPlan) {
        try checkActive()
        guard query.offset >= 0, (query.limit ?? 0) >= 0 else {
            throw KuraError(.invalidArgument, "offset and limit must not be negative (got \(query.offset), \(query.limit ?? 0))")
        }
        let info = try table(query.table)
        let schema = try self.schema(of: info)
        if let p = query.predicate { try Self.checkKeyPaths(p, schema: schema, table: info.name) }
        for k in query.sort where schema?.position(of: k.column) == nil {
            throw KuraError(.notFound, "cannot sort by \"\(k.column)\": table \"\(info.name)\" has no such column")
        }
        let plan = QueryPlanner.plan(query, schema: schema, indexes: try indexes(of: info.name), explaining: explaining)
        return (info, schema, plan)
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
        // The scan already read each row's record: it is the current one (no row
        // is visited twice, and updating one row leaves the others' records as
        // they are), so each update starts from it instead of descending again.
        let rows = try matchingRows(TableQuery(table, where: predicate))
        for row in rows {
            var values = try RecordCodec.decode(row.record)
            while values.count < schema.columns.count { values.append(schema.columns[values.count].defaultValue) }
            for (p, v) in positions { values[p] = v }
            if schema.hasExternal {
                _ = try withExternal(values, info, schema, old: row.record) { r throws(KuraError) in
                    try updateEncoded(r, in: info, rowID: row.rowID, current: row.record)
                }
                continue
            }
            _ = try updateEncoded(try encodeRow(values, info), in: info, rowID: row.rowID, current: row.record)
        }
        return rows.count
    }

    /// Deletes every row matching `predicate`; returns how many.
    @discardableResult
    public func delete(from table: String, where predicate: KuraPredicate?) throws(KuraError) -> Int {
        let info = try self.table(table)
        let rows = try matchingRows(TableQuery(table, where: predicate))
        for row in rows { try delete(from: info, rowID: row.rowID, current: row.record) }
        return rows.count
    }

    /// The matching rows first, so changing rows does not disturb the scan.
    private func matchingRows(_ q: TableQuery) throws(KuraError) -> [Row] {
        let c = try select(q)
        var rows: [Row] = []
        while let r = try c.next() { rows.append(r) }
        return rows
    }
}
