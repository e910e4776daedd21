// PreparedQuery: a table query parsed, resolved and validated once, then run any
// number of times with `$NAME` variables bound per run (SQLite's prepared
// statement: prepare once, bind, step).
//
// What is made once: the predicate (parsed by the caller, usually through
// `TableQuery(_:where:)`), the table's resolution — its catalog entry, schema,
// column ordinals (`ColumnMap`) and indexes — and the check that every key path
// and sort column names a column. What is made per run: the bound predicate, the
// access path (its cost depends on the bound values: `score < 10` and
// `score < 900` deserve different plans) and the compiled predicate.
//
// Schema changes: each run compares the schema it was resolved against (the
// store's schema cookie, plus a per-transaction number for uncommitted schema
// changes: the `SchemaFingerprint`) with the running transaction's. When they differ — an
// index added or dropped, the table altered, dropped and re-created — the query
// is resolved again and re-planned, so it keeps giving the same answers and picks
// up new indexes; if it no longer resolves (table dropped, column removed), the
// run throws `.notFound` naming the table or column. A run never uses a stale
// root page.

/// A table query prepared once and run many times with different bindings.
///
/// Make one with ``ReadTransaction/prepare(_:)`` or ``Database/prepare(_:)``;
/// run it with ``ReadTransaction/select(_:bindings:)``, ``ReadTransaction/fetch(_:bindings:)``,
/// ``ReadTransaction/count(_:bindings:)`` or ``ReadTransaction/explain(_:bindings:)``.
///
/// Lifetime: not tied to a transaction or connection; valid as long as its table
/// exists. After a schema change it re-resolves itself on the next run (see the
/// file header); if the table or a column it uses is gone, runs throw `.notFound`.
///
/// Thread rules: a prepared query may be shared by threads and run in several
/// transactions at once; its cached resolution is guarded by a lock.
public final class PreparedQuery: @unchecked Sendable {
    // @unchecked Sendable: `resolved` is read and written only under `lock`; the
    // other stored properties are immutable.

    /// The query as prepared, with its `$NAME` variables unbound.
    public let query: TableQuery
    private let lock = ThreadLock()
    private var resolved: ResolvedQuery?

    init(_ query: TableQuery, resolved: ResolvedQuery) {
        self.query = query
        self.resolved = resolved
    }

    /// The resolution valid in `tx`: the cached one if the schema is unchanged,
    /// else a new one (cached for the next runs).
    func resolution(in tx: ReadTransaction) throws(KuraError) -> ResolvedQuery {
        let fingerprint = try tx.schemaFingerprint(of: query.table)
        if let r = lock.withLock({ resolved }), r.fingerprint == fingerprint { return r }
        let r = try tx.resolve(query)
        lock.withLock { resolved = r }
        return r
    }

    /// The query with `bindings` substituted for its variables.
    func bound(_ bindings: [String: PredicateArgument]) throws(KuraError) -> TableQuery {
        guard !bindings.isEmpty, let p = query.predicate else { return query }
        var q = query
        q.predicate = try p.substituting(bindings)
        return q
    }
}

/// What a query's table resolves to in one schema.
struct ResolvedQuery {
    let info: TableInfo
    let schema: TableSchema?
    let indexes: [IndexDefinition]
    let columns: ColumnMap
    let fingerprint: SchemaFingerprint
}

/// Identifies the schema a query was resolved against: equal fingerprints mean the
/// same catalog (store, format, schema cookie), so the same table tree,
/// definition and index trees. A write transaction that changed the schema has
/// a `local` number no other transaction has.
struct SchemaFingerprint: Equatable {
    let catalog: CatalogCache.Key
    let local: UInt64
}

extension ReadTransaction {
    /// Prepares `query` for repeated runs: resolves its table, schema, columns and
    /// indexes and checks its key paths and sort columns now. Variables (`$NAME`)
    /// in the predicate are bound per run.
    ///
    /// - Throws: `.notFound` for an unknown table or column; `.invalidArgument` for
    ///   a negative offset or limit, or a key path that crosses a relationship;
    ///   `.misuse` outside the transaction.
    public func prepare(_ query: TableQuery) throws(KuraError) -> PreparedQuery {
        PreparedQuery(query, resolved: try resolve(query))
    }

    /// Rows matching `prepared` with `bindings` for its variables, as a streaming
    /// cursor (see ``select(_:)-(TableQuery)``).
    ///
    /// - Throws: as ``select(_:)-(TableQuery)``; `.invalidArgument` for a binding
    ///   of the wrong kind; `.notFound` if the schema changed so that the query no
    ///   longer resolves.
    public func select(_ prepared: PreparedQuery, bindings: [String: PredicateArgument] = [:]) throws(KuraError) -> QueryCursor {
        try checkActive()
        let r = try prepared.resolution(in: self)
        return try select(try prepared.bound(bindings), resolved: r)
    }

    /// All rows matching `prepared` with `bindings`, decoded.
    public func fetch(_ prepared: PreparedQuery, bindings: [String: PredicateArgument] = [:]) throws(KuraError) -> [(rowID: Int64, values: [Value])] {
        try fetchAll(try select(prepared, bindings: bindings))
    }

    /// Number of rows matching `prepared` with `bindings` (after offset and limit).
    public func count(_ prepared: PreparedQuery, bindings: [String: PredicateArgument] = [:]) throws(KuraError) -> Int {
        try checkActive()
        let r = try prepared.resolution(in: self)
        return try count(try prepared.bound(bindings), resolved: r)
    }

    /// How `prepared` would run with `bindings`; see ``explain(_:)-(TableQuery)``.
    public func explain(_ prepared: PreparedQuery, bindings: [String: PredicateArgument] = [:]) throws(KuraError) -> String {
        try checkActive()
        let r = try prepared.resolution(in: self)
        return try explain(try prepared.bound(bindings), resolved: r)
    }

    /// The fingerprint of the schema `table` has in this transaction.
    ///
    /// - Throws: `.notFound` if there is no such table.
    func schemaFingerprint(of table: String) throws(KuraError) -> SchemaFingerprint {
        if writer == nil, let f = fingerprintMemo { return f }
        if let w = self as? WriteTransaction {
            return SchemaFingerprint(catalog: CatalogCache.Key(w.writer!.currentHeader), local: w.localSchemaGeneration)
        }
        // A read transaction's snapshot never changes: compute it once.
        if let f = fingerprintMemo { return f }
        let f = SchemaFingerprint(catalog: CatalogCache.Key(try headerPage()), local: 0)
        fingerprintMemo = f
        return f
    }
}

extension Database {
    /// Prepares `query` in a read transaction; see ``ReadTransaction/prepare(_:)``.
    /// The result may be run in any later transaction of any connection to this
    /// store.
    ///
    /// - Throws: ``KuraError`` as ``ReadTransaction/prepare(_:)``, or from
    ///   beginning the transaction.
    public func prepare(_ query: TableQuery) throws -> PreparedQuery {
        try read { tx in try tx.prepare(query) }
    }
}
