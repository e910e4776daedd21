// SemiJoin: conditions on other tables' rows, the engine's join primitives
// (what the object layer's relationship key paths become; issue 15).
//
// The engine knows tables, not relationships. A `SemiJoin` in a `TableQuery`
// is one more AND conjunct of the query's predicate, over a link between the
// query's ("outer") table and an inner query's table:
//   - `.foreignKey(column)`: the outer row's integer `column` is the row ID of
//     an inner row matching the inner query (a to-one relationship). A null,
//     non-integer or dangling value names no inner row.
//   - `.inverseForeignKey(column)`: some inner row matching the inner query has
//     `column` == the outer row ID (a to-many read through its inverse's key).
//   - `.joinTable(table, outerColumn, innerColumn)`: some row of the join table
//     has `outerColumn` == the outer row ID and `innerColumn` == the row ID of
//     an inner row matching the inner query (many-to-many).
//   - `.sameRow`: the inner query reads the outer table, and the outer row is
//     one of its matches (how a condition that is no single join or column
//     predicate becomes one conjunct: negated, for NOT of a conjunction; and
//     OR as NOT of the conjunction of negated disjuncts).
// With `having` (to-many links only), the outer row passes when the predicate
// holds with `$count` bound to the number of matching inner rows linked to it
// (zero for none): `children.@count > 2`, `SUBQUERY(...).@count == 0`; and
// with `valueColumn`, `$values` bound to those rows' values of that column
// (`$values.@sum > 10`, for `children.@sum.age > 10`).
// `negated` inverts the whole conjunct (an anti-join: NONE, ALL, NOT).
// Inner queries may carry joins of their own, so links compose to any depth.
//
// Execution (materialize first): each join's inner query runs before the outer
// one, with its own plan and indexes, and becomes a `JoinFilter` — a set of
// row IDs (or foreign-key values) and whether rows must be in it or out of it.
// The outer query then chooses its candidates by cost among its own plan, the
// row IDs a positive join yields (read by row ID), and a probe of an index on a
// positive join's foreign-key column with each inner row ID. Whatever the
// choice, every candidate is tested against the whole predicate and every
// filter, so the choice never changes the answer. `explain` shows each inner
// query's plan, its row count, and the outer choice with its costs.
// Two shortcuts read no inner row: a to-many count over every inner row
// (`courses.@count > 3`) is one ordered walk of an index led by the inverse
// key, counting each run of equal keys in place (the outer row IDs come out
// ascending, no lookup per outer row); and a to-one join whose inner
// predicate is `column == integer` on an indexed integer column takes the
// inner row IDs from that index's entries alone (exact: an integer column
// holds integers or null, and integers and their key segments correspond one
// to one). Other to-many joins sort the matching inner rows' keys and count
// runs. Candidate row IDs are kept ascending, so the outer rows are read in
// row-ID order.
//
// `ColumnLookup` is a column reached through foreign keys
// (`record.school.name`): each hop reads an integer column and looks the row
// up by row ID in the next table (index nested loop); a null or dangling key
// gives null. Sort keys may name a lookup; the sort then reads it per
// candidate and keeps the best `offset + limit` as a plain sort does.

/// A condition on rows of another table linked to each row of a query (see
/// the file header for the meaning of each link).
///
/// Values are immutable and `Sendable`. A join whose tables or columns do not
/// exist makes the query throw `.notFound` naming them.
public struct SemiJoin: Sendable, Hashable {
    /// How outer rows and inner rows are linked.
    public enum Link: Sendable, Hashable {
        /// The outer table's `column` holds inner row IDs.
        case foreignKey(column: String)
        /// The inner table's `column` holds outer row IDs.
        case inverseForeignKey(column: String)
        /// A join table whose `outerColumn` holds outer row IDs and
        /// `innerColumn` inner row IDs.
        case joinTable(table: String, outerColumn: String, innerColumn: String)
        /// The inner query reads the outer table; linked rows are the same row.
        case sameRow
    }

    public var link: Link
    /// The inner rows: their table, predicate and joins (sort, offset and
    /// limit must be empty).
    public var inner: TableQuery
    /// A predicate over `$count` (the number of matching inner rows linked to
    /// the outer row); nil means "at least one". Not for `.foreignKey`.
    public var having: KuraPredicate?
    /// True inverts the condition.
    public var negated: Bool
    /// A column of the inner rows whose values, for the rows linked to the
    /// outer row (in row-ID order), `having` reads as `$values`
    /// (`$values.@sum`). Not for `.foreignKey`.
    public var valueColumn: String?

    public init(_ link: Link, _ inner: TableQuery, having: KuraPredicate? = nil, valueColumn: String? = nil, negated: Bool = false) {
        self.link = link
        self.inner = inner
        self.having = having
        self.valueColumn = valueColumn
        self.negated = negated
    }

    /// The variables `having` reads.
    public static let countVariable = "count"
    public static let valuesVariable = "values"
}

/// A column read through foreign keys: start at the query's table, follow
/// each hop's integer column to the row with that ID in the hop's table, and
/// read `column` there. Null when a key is null or names no row.
public struct ColumnLookup: Sendable, Hashable {
    public struct Hop: Sendable, Hashable {
        /// The integer column read in the current table.
        public var column: String
        /// The table whose row IDs it holds.
        public var table: String
        public init(column: String, table: String) {
            self.column = column
            self.table = table
        }
    }
    /// The name sort keys use for it (by convention the key path, `record.grade`).
    public var name: String
    public var hops: [Hop]
    public var column: String

    public init(name: String, hops: [Hop], column: String) {
        self.name = name
        self.hops = hops
        self.column = column
    }
}

/// A materialized join: rows pass when their key is (or is not) in `values`.
///
/// A class: a query cursor tests each candidate row against its filters, and
/// iterating an array of structs copied each filter (its key's table
/// description, its set) per row.
final class JoinFilter {
    enum Key {
        case rowID
        case column(position: Int, defaultValue: Value)
        /// Not materialized: the foreign key at `position` is looked up in
        /// `table` and the row tested by `test` (index nested loop).
        case nested(position: Int, defaultValue: Value, table: TableInfo, test: CompiledPredicate?)
    }
    let key: Key
    let values: Set<Int64>
    /// Rows pass when `values` contains their key == member.
    let member: Bool

    init(key: Key, values: Set<Int64>, member: Bool) {
        self.key = key
        self.values = values
        self.member = member
    }

    func passes<S: PageSource>(_ record: UnsafeRawBufferPointer, rowID: Int64, _ s: S) throws(KuraError) -> Bool {
        switch key {
        case .rowID:
            return values.contains(rowID) == member
        case .column(let p, let d):
            let v = p < (try RecordCodec.count(in: record)) ? try RecordCodec.value(at: p, in: record) : d
            if case .integer(let i) = v { return values.contains(i) == member }
            return !member
        case .nested(let p, let d, let table, let test):
            let v = p < (try RecordCodec.count(in: record)) ? try RecordCodec.value(at: p, in: record) : d
            guard case .integer(let i) = v, let row = try BTree(root: table.rootPage, kind: .table).get(RowIDKey.encode(i), s) else { return !member }
            guard let test else { return member }
            return try row.withBytes { b throws(KuraError) in try test.matches(b) } == member
        }
    }
}

/// A `ColumnLookup` resolved against the tables of a transaction.
struct ResolvedLookup {
    struct Step {
        let position: Int
        let defaultValue: Value
        let next: TableInfo
    }
    let steps: [Step]
    let position: Int
    let defaultValue: Value

    /// The looked-up value for the outer row `record`.
    func value<S: PageSource>(_ record: UnsafeRawBufferPointer, _ s: S) throws(KuraError) -> Value {
        guard let first = steps.first else {
            return position < (try RecordCodec.count(in: record)) ? try RecordCodec.value(at: position, in: record) : defaultValue
        }
        let key = first.position < (try RecordCodec.count(in: record)) ? try RecordCodec.value(at: first.position, in: record) : first.defaultValue
        guard case .integer(let firstID) = key,
              var current = try BTree(root: first.next.rootPage, kind: .table).get(RowIDKey.encode(firstID), s) else { return .null }
        for step in steps.dropFirst() {
            let v = try current.withBytes { b throws(KuraError) in
                step.position < (try RecordCodec.count(in: b)) ? try RecordCodec.value(at: step.position, in: b) : step.defaultValue
            }
            guard case .integer(let id) = v,
                  let row = try BTree(root: step.next.rootPage, kind: .table).get(RowIDKey.encode(id), s) else { return .null }
            current = row
        }
        return try current.withBytes { b throws(KuraError) in
            position < (try RecordCodec.count(in: b)) ? try RecordCodec.value(at: position, in: b) : defaultValue
        }
    }
}

/// The joins of a query, materialized, and the candidates they offer.
struct JoinSetup {
    var filters: [JoinFilter] = []
    var lookups: [String: ResolvedLookup] = [:]
    /// Row IDs that contain every match (from positive joins), ascending,
    /// with their cost.
    var candidates: [(ids: [Int64], cost: Double, note: String)] = []
    /// Foreign-key probes: an index on the outer FK column, probed with the
    /// inner row IDs (sorted).
    var probes: [(index: IndexDefinition, ids: [Int64], cost: Double, note: String)] = []
    var notes: [String] = []
}

extension ReadTransaction {
    /// Runs the inner queries of `query`'s joins and resolves its lookups.
    func joinSetup(_ query: TableQuery, _ r: ResolvedQuery, ownPlan: QueryPlan, explaining: Bool) throws(KuraError) -> JoinSetup {
        var setup = JoinSetup()
        let outerRows = Double(max(try rowCount(r.info), 1))
        for (n, j) in query.joins.enumerated() {
            guard j.inner.sort.isEmpty, j.inner.offset == 0, j.inner.limit == nil else {
                throw KuraError(.invalidArgument, "the inner query of a join on table \"\(j.inner.table)\" must have no sort, offset or limit")
            }
            let label = "join \(n + 1)"
            if explaining {
                setup.notes.append("\(label)\(j.negated ? " (negated)" : ""): \(Self.describe(j.link)) rows of table \"\(j.inner.table)\"" + (j.inner.predicate.map { " matching " + $0.predicateFormat } ?? "")
                                   + (j.having.map { " having " + $0.predicateFormat } ?? "") + ", materialized first:")
                setup.notes += try explain(j.inner).split(separator: "\n").map { "    " + $0 }
            }
            if case .foreignKey(let column) = j.link, j.inner.joins.isEmpty, j.having == nil, let c = r.columns.positions[column] {
                // Index nested loop or materialize first: per outer candidate,
                // one row lookup, against the inner query's own cost.
                let innerResolved = try resolve(j.inner)
                let innerPlan = try plan(j.inner, innerResolved, explaining: false)
                let nestedCost = ownPlan.estimatedRows * QueryCost.rowLookup
                if explaining {
                    setup.notes.append("  \(label): nested loop (look up each outer candidate's \"\(column)\"): cost \(estimateText(nestedCost, decimal: false)); materialize first: cost \(estimateText(innerPlan.estimatedCost, decimal: false))")
                }
                if nestedCost < innerPlan.estimatedCost {
                    let test = j.inner.predicate.map { CompiledPredicate($0, columns: innerResolved.columns) }
                    setup.filters.append(JoinFilter(key: .nested(position: c.position, defaultValue: c.defaultValue, table: innerResolved.info, test: test),
                                                    values: [], member: !j.negated))
                    if explaining { setup.notes.append("  \(label): * nested loop") }
                    continue
                }
                if explaining { setup.notes.append("  \(label): * materialize first") }
            }
            if case .inverseForeignKey(let column) = j.link, j.inner.predicate == nil, j.inner.joins.isEmpty, j.valueColumn == nil,
               let index = try indexes(of: j.inner.table).first(where: { $0.columns.first.map { $0.name == column && !$0.descending } ?? false }) {
                // Every inner row counts: one ordered walk of the index on
                // the inverse key, counting each run of equal keys, instead of
                // reading the rows (and no lookup per outer row).
                let counts = try groupedCounts(index)
                if explaining { setup.notes.append("  \(label): one ordered walk of index \"\(index.name)\", counting the entries per key (no row read): \(counts.count) outer row\(counts.count == 1 ? "" : "s") linked") }
                try addGrouped(j, counts, [:], label: label, outerRows: outerRows, explaining: explaining, to: &setup)
                continue
            }
            if case .foreignKey(let column) = j.link, j.having == nil, let c = r.columns.positions[column],
               let exact = try exactIndexRowIDs(j.inner) {
                // The inner rows' IDs from their index alone (no inner row read).
                setup.filters.append(JoinFilter(key: .column(position: c.position, defaultValue: c.defaultValue), values: Set(exact.ids), member: !j.negated))
                if explaining { setup.notes.append("  \(label): \(exact.ids.count) inner row\(exact.ids.count == 1 ? "" : "s"), their IDs read from index \"\(exact.index)\" alone (the equality decides every entry: no inner row read)") }
                if !j.negated { try addProbe(label, column: column, innerTable: j.inner.table, ids: exact.ids, r, outerRows: outerRows, to: &setup) }
                continue
            }
            let innerCursor = try select(j.inner)
            switch j.link {
            case .sameRow:
                guard j.having == nil, j.valueColumn == nil, j.inner.table == r.info.name else {
                    throw KuraError(.invalidArgument, "a same-row join of table \"\(r.info.name)\" reads that table and takes no count condition")
                }
                var ids: [Int64] = []
                while let row = try innerCursor.next() { ids.append(row.rowID) }
                Self.sortUnique(&ids)
                setup.filters.append(JoinFilter(key: .rowID, values: Set(ids), member: !j.negated))
                if explaining { setup.notes.append("  \(label): \(ids.count) row ID\(ids.count == 1 ? "" : "s") \(j.negated ? "fail" : "pass")") }
                if !j.negated {
                    setup.candidates.append((ids, Double(ids.count) * QueryCost.rowLookup, "\(label): read \(ids.count) row\(ids.count == 1 ? "" : "s") by row ID"))
                }
            case .foreignKey(let column):
                guard j.having == nil else {
                    throw KuraError(.invalidArgument, "a join through foreign key \"\(column)\" of table \"\(r.info.name)\" links one row: it takes no count condition")
                }
                guard let c = r.columns.positions[column] else {
                    throw KuraError(.notFound, "table \"\(r.info.name)\" has no column \"\(column)\" (join to table \"\(j.inner.table)\")")
                }
                var ids: [Int64] = []
                while let row = try innerCursor.next() { ids.append(row.rowID) }
                Self.sortUnique(&ids)
                setup.filters.append(JoinFilter(key: .column(position: c.position, defaultValue: c.defaultValue), values: Set(ids), member: !j.negated))
                if explaining { setup.notes.append("  \(label): \(ids.count) inner row\(ids.count == 1 ? "" : "s")") }
                if !j.negated { try addProbe(label, column: column, innerTable: j.inner.table, ids: ids, r, outerRows: outerRows, to: &setup) }
            case .inverseForeignKey(let column):
                guard let c = innerCursor.columns.positions[column] else {
                    throw KuraError(.notFound, "table \"\(j.inner.table)\" has no column \"\(column)\" (join from table \"\(r.info.name)\")")
                }
                let vc = try valueColumn(j, innerCursor.columns)
                // The matching inner rows' keys, sorted and counted per run
                // (no hashing per row); values per key only when asked for.
                var keys: [Int64] = []
                var values: [Int64: [EvaluatedValue]] = [:]
                while let row = try innerCursor.next() {
                    let v = try row.record.withBytes { b throws(KuraError) in
                        c.position < (try RecordCodec.count(in: b)) ? try RecordCodec.value(at: c.position, in: b) : c.defaultValue
                    }
                    guard case .integer(let id) = v else { continue }
                    keys.append(id)
                    if let vc { values[id, default: []].append(try Self.evaluated(row.record, vc)) }
                }
                let counts = Self.runCounts(&keys)
                if explaining { setup.notes.append("  \(label): \(keys.count) matching inner row\(keys.count == 1 ? "" : "s") name \(counts.count) outer row\(counts.count == 1 ? "" : "s") through \"\(column)\"") }
                try addGrouped(j, counts, values, label: label, outerRows: outerRows, explaining: explaining, to: &setup)
            case .joinTable(let table, let outerColumn, let innerColumn):
                var ids = Set<Int64>()
                let vc = try valueColumn(j, innerCursor.columns)
                var innerValues: [Int64: EvaluatedValue] = [:]
                while let row = try innerCursor.next() {
                    ids.insert(row.rowID)
                    if let vc { innerValues[row.rowID] = try Self.evaluated(row.record, vc) }
                }
                let joinQuery: TableQuery
                if ids.count <= 1000 {
                    let list = KuraExpression.aggregate(ids.sorted().map { .constant(.integer($0)) })
                    joinQuery = TableQuery(table, where: .comparison(KuraComparison(.keyPath([innerColumn]), .in, list)))
                } else {
                    joinQuery = TableQuery(table)
                }
                let joinCursor = try select(joinQuery)
                guard let o = joinCursor.columns.positions[outerColumn], let i = joinCursor.columns.positions[innerColumn] else {
                    throw KuraError(.notFound, "join table \"\(table)\" has no column \"\(outerColumn)\" or \"\(innerColumn)\"")
                }
                var keys: [Int64] = []
                var values: [Int64: [EvaluatedValue]] = [:]
                while let row = try joinCursor.next() {
                    let (ov, iv) = try row.record.withBytes { b throws(KuraError) in
                        let n = try RecordCodec.count(in: b)
                        return (o.position < n ? try RecordCodec.value(at: o.position, in: b) : o.defaultValue,
                                i.position < n ? try RecordCodec.value(at: i.position, in: b) : i.defaultValue)
                    }
                    guard case .integer(let outer) = ov, case .integer(let inner) = iv, ids.contains(inner) else { continue }
                    keys.append(outer)
                    if vc != nil, let v = innerValues[inner] { values[outer, default: []].append(v) }
                }
                let counts = Self.runCounts(&keys)
                if explaining { setup.notes.append("  \(label): \(ids.count) inner row\(ids.count == 1 ? "" : "s"), linked through join table \"\(table)\"") }
                try addGrouped(j, counts, values, label: label, outerRows: outerRows, explaining: explaining, to: &setup)
            }
        }
        for l in query.lookups {
            setup.lookups[l.name] = try resolveLookup(l, from: r)
        }
        return setup
    }

    /// A probe of an index on the outer foreign-key `column` with the inner
    /// row IDs `ids` (ascending), if the outer table has one.
    private func addProbe(_ label: String, column: String, innerTable: String, ids: [Int64], _ r: ResolvedQuery, outerRows: Double,
                          to setup: inout JoinSetup) throws(KuraError) {
        let innerRows = Double(max(try rowCount(try table(innerTable)), 1))
        for index in r.indexes where index.columns.first?.name == column {
            let entries = Double(ids.count) * outerRows / innerRows
            let cost = Double(ids.count) * QueryCost.rowLookup + entries * (QueryCost.indexEntry + QueryCost.rowLookup)
            setup.probes.append((index, ids, cost, "\(label): probe index \"\(index.name)\" with \(ids.count) row ID\(ids.count == 1 ? "" : "s"), about \(estimateText(entries, decimal: false)) entries"))
            return
        }
    }

    /// The row IDs of `query`'s rows, ascending, read from an index alone,
    /// when its predicate is one equality of an integer column with an
    /// integer constant and an index is led by that column: an integer
    /// column holds integers or null, and equal integers have equal key
    /// segments while different values have different ones (IndexKey.swift),
    /// so the entries with the constant's segment are exactly the matching
    /// rows. Nil when the query has another shape.
    func exactIndexRowIDs(_ query: TableQuery) throws(KuraError) -> (ids: [Int64], index: String)? {
        guard query.joins.isEmpty, query.lookups.isEmpty, query.sort.isEmpty, query.offset == 0, query.limit == nil,
              case .comparison(let c)? = query.predicate, c.quantifier == .direct, c.operator == .equalTo, c.options.isEmpty else { return nil }
        let column: String, value: Int64
        switch (c.left, c.right) {
        case (.keyPath(let k), .constant(.integer(let n))) where k.count == 1: (column, value) = (k[0], n)
        case (.constant(.integer(let n)), .keyPath(let k)) where k.count == 1: (column, value) = (k[0], n)
        default: return nil
        }
        let r = try resolve(query)
        guard let type = r.schema?.columns.first(where: { $0.name == column })?.type, type == .integer,
              let index = r.indexes.first(where: { $0.columns.first?.name == column }) else { return nil }
        var ids = try probeIndex(index, integers: [value])
        Self.sortUnique(&ids)
        return (ids, index.name)
    }

    /// The number of entries of `index` per integer value of its first
    /// column (other values are no row ID and link nothing), ascending by
    /// value, read from the index alone: one ordered walk that counts each run
    /// of equal keys in place (no copy of a key, no hashing per entry).
    func groupedCounts(_ index: IndexDefinition) throws(KuraError) -> [(id: Int64, count: Int64)] {
        if let w = writer { return try groupedCounts(index, w) }
        return try groupedCounts(index, snapshotPages!)
    }

    private func groupedCounts<S: PageSource>(_ index: IndexDefinition, _ s: S) throws(KuraError) -> [(id: Int64, count: Int64)] {
        precondition(index.columns.first.map { !$0.descending } ?? false, "groupedCounts needs an index led by an ascending column")
        var out: [(id: Int64, count: Int64)] = []
        var cursor = TreeCursor(tree: index.tree)
        cursor.sequential = true
        try cursor.first(s)
        var current: Int64 = 0, run: Int64 = 0, ordered = true
        while cursor.isValid {
            // The cells of one leaf are read in a loop of their own (the leaf
            // held once, not fetched through the cursor per entry); the
            // cursor then steps from the leaf's last cell to the next leaf.
            let leaf = cursor.leaf
            let n = leaf.cellCount
            var i = cursor.index
            while i < n {
                let (o, l) = leaf.cellKey(i)
                let base = UnsafeRawPointer(leaf.bytes + o)
                i += 1
                // An integer segment: its tag, then the value as a row-ID key
                // (IndexKey.swift), whose bytes sort as the values do.
                guard l > 0, base.load(as: UInt8.self) == IndexKey.integerTag else { continue }
                guard let (v, _) = RowIDKey.decode(base, 1, l) else {
                    throw KuraError(.corrupt, "index \"\(index.name)\" has a malformed integer key", page: leaf.number)
                }
                if run > 0 && v == current {
                    run += 1
                } else {
                    if run > 0 {
                        out.append((current, run))
                        if v < current { ordered = false }
                    }
                    current = v
                    run = 1
                }
            }
            if n > 0 { cursor.moveInLeaf(to: n - 1) }
            try cursor.next(s)
        }
        if run > 0 { out.append((current, run)) }
        if !ordered {
            // Only a damaged index is out of order; the counts stay right.
            var merged: [Int64: Int64] = [:]
            for (id, n) in out { merged[id, default: 0] += n }
            out = merged.map { (id: $0.key, count: $0.value) }.sorted { $0.id < $1.id }
        }
        return out
    }

    /// `keys` sorted, and the length of each run of equal keys, ascending by key.
    static func runCounts(_ keys: inout [Int64]) -> [(id: Int64, count: Int64)] {
        keys.sort()
        var out: [(id: Int64, count: Int64)] = []
        var i = 0
        while i < keys.count {
            var j = i + 1
            while j < keys.count && keys[j] == keys[i] { j += 1 }
            out.append((keys[i], Int64(j - i)))
            i = j
        }
        return out
    }

    /// `ids` sorted, each once.
    static func sortUnique(_ ids: inout [Int64]) {
        ids.sort()
        var n = 0
        for i in ids.indices where n == 0 || ids[i] != ids[n - 1] {
            ids[n] = ids[i]
            n += 1
        }
        ids.removeLast(ids.count - n)
    }

    /// The filter of a to-many join from the number of matching inner rows
    /// per outer row ID (`counts`, ascending by row ID).
    private func addGrouped(_ j: SemiJoin, _ counts: [(id: Int64, count: Int64)], _ grouped: [Int64: [EvaluatedValue]], label: String, outerRows: Double,
                            explaining: Bool, to setup: inout JoinSetup) throws(KuraError) {
        var ids: [Int64] = []
        var member = true
        if let having = j.having {
            // Without values the answer depends on the count alone: memoized
            // (small counts in an array, the rest in a dictionary).
            var small = [Bool?](repeating: nil, count: 64)
            var memo: [Int64: Bool] = [:]
            func holds(_ n: Int64, _ vs: [EvaluatedValue]?) throws(KuraError) -> Bool {
                if vs == nil {
                    if n >= 0 && n < small.count, let m = small[Int(n)] { return m }
                    if let m = memo[n] { return m }
                }
                var variables: [String: EvaluatedValue] = [SemiJoin.countVariable: .scalar(.integer(n))]
                if let vs { variables[SemiJoin.valuesVariable] = .collection(vs) }
                let v = try having.evaluate(with: .null, variables: variables)
                if vs == nil {
                    if n >= 0 && n < small.count { small[Int(n)] = v } else { memo[n] = v }
                }
                return v
            }
            let withValues = j.valueColumn != nil
            // Outer rows without links have count 0 (and no values): when that
            // passes, the filter lists the rows that fail instead.
            member = !(try holds(0, withValues ? [] : nil))
            for (id, n) in counts where try holds(n, withValues ? grouped[id] ?? [] : nil) == member { ids.append(id) }
        } else {
            ids = counts.map(\.id)
        }
        if j.negated { member.toggle() }
        setup.filters.append(JoinFilter(key: .rowID, values: Set(ids), member: member))
        if explaining { setup.notes.append("  \(label): \(ids.count) outer row ID\(ids.count == 1 ? "" : "s") \(member ? "pass" : "fail")") }
        if member {
            setup.candidates.append((ids, Double(ids.count) * QueryCost.rowLookup,
                                     "\(label): read \(ids.count) row\(ids.count == 1 ? "" : "s") by row ID, in row-ID order"))
        }
    }

    /// The position of `j.valueColumn` in the inner table, if it has one.
    private func valueColumn(_ j: SemiJoin, _ columns: ColumnMap) throws(KuraError) -> ColumnMap.Column? {
        guard let name = j.valueColumn else { return nil }
        guard let c = columns.positions[name] else {
            throw KuraError(.notFound, "table \"\(columns.table)\" has no column \"\(name)\" (the values of a join)")
        }
        return c
    }

    /// A column's value as the evaluator sees it (dates as dates, as RowContext reads them).
    static func evaluated(_ record: [UInt8], _ c: ColumnMap.Column) throws(KuraError) -> EvaluatedValue {
        let v = try record.withBytes { b throws(KuraError) in
            c.position < (try RecordCodec.count(in: b)) ? try RecordCodec.value(at: c.position, in: b) : c.defaultValue
        }
        if c.isDate, case .double(let d) = v { return .date(d) }
        return .scalar(v)
    }

    func resolveLookup(_ l: ColumnLookup, from r: ResolvedQuery) throws(KuraError) -> ResolvedLookup {
        var columns = r.columns
        var steps: [ResolvedLookup.Step] = []
        for hop in l.hops {
            guard let c = columns.positions[hop.column] else {
                throw KuraError(.notFound, "lookup \"\(l.name)\": table \"\(columns.table)\" has no column \"\(hop.column)\"")
            }
            let next = try table(hop.table)
            steps.append(.init(position: c.position, defaultValue: c.defaultValue, next: next))
            columns = ColumnMap(table: next.name, schema: try schema(of: next))
        }
        guard let c = columns.positions[l.column] else {
            throw KuraError(.notFound, "lookup \"\(l.name)\": table \"\(columns.table)\" has no column \"\(l.column)\"")
        }
        return ResolvedLookup(steps: steps, position: c.position, defaultValue: c.defaultValue)
    }

    static func describe(_ link: SemiJoin.Link) -> String {
        switch link {
        case .foreignKey(let c): return "column \"\(c)\" names"
        case .inverseForeignKey(let c): return "row ID is in column \"\(c)\" of"
        case .joinTable(let t, let o, let i): return "linked through join table \"\(t)\" (\(o) -> \(i)) to"
        case .sameRow: return "the same row among the"
        }
    }
}
