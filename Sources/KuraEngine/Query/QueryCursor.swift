// QueryCursor: runs a `QueryPlan`, streaming matching rows.
//
// Rows are tested by the query's CompiledPredicate on the record bytes where they
// lie (a leaf page, for a scan); only matching rows are copied out as `Row`s.
//
// Memory: a query whose order comes from its access path (no sort, or a sort an
// index provides) holds one page path and one row at a time, however many rows
// match. An index search whose candidates must come back in row-ID order keeps
// one row ID per candidate (read from the index alone), sorts them, then reads
// and tests each row once. A query that must sort keeps (sort values, row ID) per
// match — only the best `offset + limit` of them when there is a limit — then
// reads those rows.

/// Iterates the rows a `TableQuery` selects.
///
/// Lifetime: valid inside the transaction that made it (`next()` throws
/// `.misuse` afterwards). Thread rules: that transaction's thread only.
public final class QueryCursor {
    let transaction: ReadTransaction
    let query: TableQuery
    let info: TableInfo
    let schema: TableSchema?
    let columns: ColumnMap
    let plan: QueryPlan
    let compiled: CompiledPredicate?
    // The cursor's state skips the runtime exclusivity checks (`@exclusivity(
    // unchecked)`: a begin and end access per field per row, about a tenth of
    // an indexed row's read). Safe because a cursor is used on its
    // transaction's thread only (see the type's thread rules), and no access
    // overlaps another: `next()` is not re-entered from the row tests it runs
    // (they read only `compiled` and `filters`, which are constants).
    @exclusivity(unchecked) private var skipped = 0
    @exclusivity(unchecked) private var returned = 0
    @exclusivity(unchecked) private var source: CandidateSource
    @exclusivity(unchecked) private var sorted: [Int64]?
    @exclusivity(unchecked) private var sortedPosition = 0
    /// True when `sorted` holds candidates (not yet tested) rather than matches.
    @exclusivity(unchecked) private var testOnRead = false
    /// The query's joins, materialized (SemiJoin.swift): every row must pass each.
    private let filters: [JoinFilter]
    private let lookups: [String: ResolvedLookup]

    init(transaction: ReadTransaction, query: TableQuery, resolved: ResolvedQuery, plan: QueryPlan, joins: JoinSetup? = nil) {
        self.transaction = transaction
        self.query = query
        self.info = resolved.info
        self.schema = resolved.schema
        self.columns = resolved.columns
        self.plan = plan
        // An exact plan's rows all satisfy the predicate (QueryPlanner, "Exact plans").
        compiled = plan.exact ? nil : query.predicate.map { CompiledPredicate($0, columns: resolved.columns) }
        filters = joins?.filters ?? []
        lookups = joins?.lookups ?? [:]
        source = CandidateSource(plan: plan, table: resolved.info, snapshot: transaction.writer == nil)
    }

    /// The next matching row, or nil at the end.
    ///
    /// - Throws: `.corrupt` for damaged pages; evaluation errors (`.typeMismatch`
    ///   for arithmetic on text, ...); `.misuse` outside the transaction.
    public func next() throws(KuraError) -> Row? {
        try transaction.checkActive()
        if let limit = query.limit, returned >= limit { return nil }
        if let w = transaction.writer { return try step(w) }
        return try step(transaction.snapshotPages!)
    }

    private func step<S: PageSource>(_ s: S) throws(KuraError) -> Row? {
        // The test below runs for every candidate row. The predicate is
        // reached unretained (`self` holds it while the cursor steps) and the
        // joins only when there are some: reading either through `self` there
        // retained and released it per row. (Closure literals at each call: a
        // closure kept in a constant was allocated on the heap per step.)
        let compiled = compiled.map { Unmanaged.passUnretained($0) }
        let joined = !filters.isEmpty
        if !plan.ordered {
            if sorted == nil {
                if query.sort.isEmpty, case .index = plan.access {
                    sorted = try candidateRowIDs(s)
                    testOnRead = true
                } else {
                    sorted = try sortMatches(s)
                }
            }
            while sortedPosition < sorted!.count {
                let id = sorted![sortedPosition]
                sortedPosition += 1
                // A row deleted since the IDs were gathered (in this write
                // transaction) is skipped, as a scan past it would.
                guard let record = try source.rowLocated(id, s) else { continue }
                let row: Row
                if testOnRead {
                    guard let r = try CandidateSource.row(id, record, { b, id throws(KuraError) in try joined ? self.matches(b, rowID: id, s) : Self.matches(b, compiled) }) else { continue }
                    row = r
                } else {
                    row = CandidateSource.row(id, record)
                }
                if skipped < query.offset { skipped += 1; continue }
                returned += 1
                return row
            }
            return nil
        }
        while let row = try source.next(s, matching: { b, id throws(KuraError) in try joined ? self.matches(b, rowID: id, s) : Self.matches(b, compiled) }) {
            if skipped < query.offset { skipped += 1; continue }
            returned += 1
            return row
        }
        return nil
    }

    /// Lets row reads keep their descent's pages (`RowPath`) in a write
    /// transaction too. Only for a cursor read to its end before the
    /// transaction changes anything (`WriteTransaction.matchingRows`): while
    /// nothing is written, the writer's pages do not change, so a kept page is
    /// still the tree's. Call before the first `next()`.
    func keepRowPathsUntilTheNextWrite() {
        precondition(sorted == nil && returned == 0 && skipped == 0, "keepRowPathsUntilTheNextWrite after the cursor started")
        source.keepRowPaths()
    }

    /// The row IDs of every row the query selects, in row-ID order, read from
    /// the index alone, when the plan is exact (every entry in its key ranges
    /// is a match: QueryPlanner, "Exact plans") and no join, offset or limit
    /// applies; nil otherwise. Call before the first `next()`. A row ID whose
    /// row is gone (deleted in this write transaction) is the caller's to
    /// skip, as `next()` skips it.
    func exactMatchRowIDs() throws(KuraError) -> [Int64]? {
        guard isExactIndexSearch else { return nil }
        try transaction.checkActive()
        if let w = transaction.writer { return try candidateRowIDs(w) }
        return try candidateRowIDs(transaction.snapshotPages!)
    }

    /// Like `exactMatchRowIDs`: the index searched and every entry inside the
    /// plan's key ranges (each one a match), their keys (copied) in the order
    /// walked and their row IDs; nil when the plan is not an exact index search.
    func exactMatchEntries() throws(KuraError) -> (index: IndexDefinition, keys: [[UInt8]], rowIDs: [Int64])? {
        guard isExactIndexSearch, case .index(let index, _, _) = plan.access else { return nil }
        try transaction.checkActive()
        var source = CandidateSource(plan: plan, table: info)
        let (keys, ids) = if let w = transaction.writer { try source.indexEntries(w) } else { try source.indexEntries(transaction.snapshotPages!) }
        return (index, keys, ids)
    }

    /// Whether the plan is an exact index search (QueryPlanner, "Exact plans")
    /// and nothing else filters, skips or limits the rows, before the first `next()`.
    private var isExactIndexSearch: Bool {
        guard plan.exact, case .index = plan.access, filters.isEmpty, query.offset == 0, query.limit == nil,
              sorted == nil, returned == 0, skipped == 0 else { return false }
        return true
    }

    /// Whether the record satisfies the predicate and every join.
    func matches<S: PageSource>(_ record: UnsafeRawBufferPointer, rowID: Int64, _ s: S) throws(KuraError) -> Bool {
        if let compiled, !(try compiled.matches(record)) { return false }
        for f in filters where !(try f.passes(record, rowID: rowID, s)) { return false }
        return true
    }

    /// `matches` for a query without joins, with its predicate passed
    /// unretained: `compiled` must be held (by the cursor) during the call.
    @inline(__always)
    private static func matches(_ record: UnsafeRawBufferPointer, _ compiled: Unmanaged<CompiledPredicate>?) throws(KuraError) -> Bool {
        guard let compiled else { return true }
        return try compiled._withUnsafeGuaranteedRef { c -> Result<Bool, KuraError> in
            do throws(KuraError) { return .success(try c.matches(record)) } catch { return .failure(error) }
        }.get()
    }

    /// Row IDs of every index candidate, in row-ID order (no row is read).
    private func candidateRowIDs<S: PageSource>(_ s: S) throws(KuraError) -> [Int64] {
        var source = CandidateSource(plan: plan, table: info)
        var ids: [Int64] = []
        while let id = try source.nextIndexRowID(s) { ids.append(id) }
        ids.sort()
        return ids
    }

    /// Row IDs of every match in sort order (only the first offset+limit when limited).
    private func sortMatches<S: PageSource>(_ s: S) throws(KuraError) -> [Int64] {
        var keys: [(values: [Value], rowID: Int64)] = []
        let keep = query.limit.map { query.offset + $0 }
        var positions: [(Int, ColumnDefinition?)] = []
        var lookupAt: [Int: ResolvedLookup] = [:]
        for (i, k) in query.sort.enumerated() {
            if let l = lookups[k.column] {
                lookupAt[i] = l
                positions.append((-1, nil))
                continue
            }
            guard let schema, let p = schema.position(of: k.column) else {
                throw KuraError(.notFound, "cannot sort by \"\(k.column)\": table \"\(info.name)\" has no such column")
            }
            positions.append((p, schema.columns[p]))
        }
        let sortKeys = query.sort
        func less(_ a: (values: [Value], rowID: Int64), _ b: (values: [Value], rowID: Int64)) -> Bool {
            for (i, k) in sortKeys.enumerated() {
                // Folding collations were applied when the values were read.
                var c = k.collation.foldsOnly ? ValueOrdering.compare(a.values[i], b.values[i]) : k.compareValues(a.values[i], b.values[i])
                if !k.ascending { c = -c }
                if c != 0 { return c < 0 }
            }
            return a.rowID < b.rowID
        }
        var source = CandidateSource(plan: plan, table: info)
        let compiled = compiled.map { Unmanaged.passUnretained($0) }
        let joined = !filters.isEmpty
        while let row = try source.next(s, matching: { b, id throws(KuraError) in try joined ? self.matches(b, rowID: id, s) : Self.matches(b, compiled) }) {
            var values: [Value] = []
            values.reserveCapacity(positions.count)
            try row.record.withBytes { b throws(KuraError) in
                for (i, (p, def)) in positions.enumerated() {
                    let v = if let l = lookupAt[i] { try l.value(b, s) } else {
                        p < (try RecordCodec.count(in: b)) ? try RecordCodec.value(at: p, in: b) : def?.defaultValue ?? .null
                    }
                    values.append(sortKeys[i].collation.sortValue(v))
                }
            }
            keys.append((values, row.rowID))
            if let keep, keys.count >= 2 * keep + 64 {
                keys.sort(by: less)
                keys.removeSubrange(keep...)
            }
        }
        keys.sort(by: less)
        if let keep, keys.count > keep { keys.removeSubrange(keep...) }
        return keys.map(\.rowID)
    }
}

/// An index plan's index, by reference (CandidateSource reads it per row),
/// with what parsing its keys needs taken out once: passing the definition
/// itself to the key parser per entry copied it (a retain and release of each
/// of its strings and arrays).
final class SearchIndex: Sendable {
    let definition: IndexDefinition
    let tree: BTree
    /// Per index column, whether its segments are stored complemented.
    let descending: [Bool]
    init(_ definition: IndexDefinition) {
        self.definition = definition
        tree = definition.tree
        descending = definition.columns.map(\.descending)
    }

    /// The length of the first `columns` segments of `key`.
    ///
    /// - Throws: `.corrupt` naming the index if a segment is malformed.
    @inline(__always)
    func prefixLength(_ key: UnsafeRawBufferPointer, columns: Int) throws(KuraError) -> Int {
        var pos = 0
        var i = 0
        let n = min(columns, descending.count)
        while i < n {
            guard let len = IndexKeyParser.segmentLength(key, pos, descending: descending[i]) else {
                throw malformed()
            }
            pos += len
            i += 1
        }
        return pos
    }

    /// The row ID at the end of index key `key`.
    ///
    /// - Throws: `.corrupt` naming the index if the key is malformed.
    @inline(__always)
    func rowID(_ key: UnsafeRawBufferPointer) throws(KuraError) -> Int64 {
        let p = try prefixLength(key, columns: descending.count)
        guard let base = key.baseAddress, let (v, n) = RowIDKey.decode(base, p, key.count), p + n == key.count else {
            throw KuraError(.corrupt, "index \"\(definition.name)\" has a key that does not end in a row ID", page: definition.info.rootPage)
        }
        return v
    }

    private func malformed() -> KuraError {
        KuraError(.corrupt, "index \"\(definition.name)\" has a malformed key", page: definition.info.rootPage)
    }
}

/// Produces candidate rows from the access path, filtered by `matching`.
struct CandidateSource {
    let plan: QueryPlan
    let table: TableInfo
    let tableTree: BTree
    /// Row reads reuse the previous descent's pages and child ranges
    /// (RowPath.swift; read transactions only).
    private var rowPath: RowPath?
    /// Rows hold the snapshot page their record lies in instead of a copy
    /// (read transactions only: a write transaction's pages change).
    private let borrowsPages: Bool
    private var cursor: TreeCursor?
    private var rangeIndex = 0
    private var started = false
    /// Row IDs of the current run of equal order values, in row-ID order.
    private var run: [Int64] = []
    private var runPosition = 0
    /// The order values (key prefix) of the current run.
    private var runKey: [UInt8] = []
    /// A backward walk over every column of its index reads each run of tied
    /// entries forward from the run's first entry (lowest row ID), one entry
    /// per row asked for (`nextInForwardRun`), instead of collecting and
    /// sorting the whole run: `limit` rows then cost about `limit` entries.
    private var inForwardRun = false
    private var forwardRunStarted = false
    /// An index plan's index, key ranges and direction, taken out of `plan.access`
    /// once (matching the enum per row would copy them per row); the index is
    /// held by reference, as a copy of its definition retains each of its
    /// strings and arrays.
    private let searchIndex: SearchIndex?
    private let searchRanges: [KeyRange]
    private let searchReverse: Bool

    /// `snapshot`: the pages are a read transaction's (immutable), so row
    /// reads may keep their path (`RowPath`) and rows may borrow the page
    /// their record lies in (Row.swift).
    init(plan: QueryPlan, table: TableInfo, snapshot: Bool = false) {
        self.plan = plan
        self.table = table
        tableTree = BTree(root: table.rootPage, kind: .table)
        if snapshot { rowPath = RowPath(tree: tableTree) }
        borrowsPages = snapshot
        if case .index(let index, let ranges, let reverse) = plan.access {
            (searchIndex, searchRanges, searchReverse) = (SearchIndex(index), ranges, reverse)
        } else {
            (searchIndex, searchRanges, searchReverse) = (nil, [], false)
        }
    }

    /// Row reads keep their path from here on (see `QueryCursor.keepRowPathsUntilTheNextWrite`).
    mutating func keepRowPaths() {
        if rowPath == nil { rowPath = RowPath(tree: tableTree) }
    }

    mutating func next<S: PageSource>(_ s: S, matching: (UnsafeRawBufferPointer, Int64) throws(KuraError) -> Bool) throws(KuraError) -> Row? {
        // Index plans test `searchIndex` (set once in init) instead of matching
        // `plan.access`, whose payload made the match an outlined call per row.
        if searchIndex == nil, case .rowIDs(let ids) = plan.access {
            while rangeIndex < ids.count {
                let rowID = ids[rangeIndex]
                rangeIndex += 1
                // A row deleted since the IDs were gathered (in this write
                // transaction) is skipped, as a scan past it would.
                guard let record = try rowLocated(rowID, s) else { continue }
                if let row = try Self.row(rowID, record, matching) { return row }
            }
            return nil
        }
        guard let search = searchIndex else {
            return try nextFromTable(s, matching)
        }
        let reverse = searchReverse
        // Ties in the order columns must come out in row-ID order; the index
        // gives that by itself only when walked forward over all its columns.
        // A run of tied entries is collected as row IDs only (they end each
        // key), sorted, and its rows are read one by one as they are asked
        // for, so `limit` rows cost about `limit` row reads.
        let needsRun = plan.orderColumns > 0 && (reverse || plan.orderColumns < search.definition.columns.count)
        if !needsRun {
            // Each entry's row in the order walked (no run to collect and
            // sort: the index order is the order asked for, or none is).
            while let rowID = try nextIndexEntry(s, search) {
                guard let record = try rowLocated(rowID, s) else {
                    throw missingRow(rowID, search)
                }
                if let row = try Self.row(rowID, record, matching) { return row }
            }
            return nil
        }
        // Backward over every column, the entries of a run differ only in
        // their row-ID suffix, so walking the run forward gives its row IDs in
        // order. Read transactions only: a writer's changes could move a run
        // between its entries.
        let forwardRuns = reverse && borrowsPages && plan.orderColumns >= search.definition.columns.count
        while true {
            if inForwardRun {
                if let row = try nextInForwardRun(s, search, matching) { return row }
                // The run is over; the cursor is back on its first entry.
                continue
            }
            while runPosition < run.count {
                let rowID = run[runPosition]
                runPosition += 1
                guard let record = try rowLocated(rowID, s) else {
                    throw missingRow(rowID, search)
                }
                if let row = try Self.row(rowID, record, matching) { return row }
            }
            run.removeAll(keepingCapacity: true)
            runPosition = 0
            // The run's order values (`runKey`, reused across runs).
            var haveRunKey = false
            while let rowID = try nextIndexEntry(s, search) {
                // The entry's key, borrowed from the page the cursor holds.
                let key = cursor!.key
                let orderKey = UnsafeRawBufferPointer(rebasing: key[0..<(try search.prefixLength(key, columns: plan.orderColumns))])
                if forwardRuns {
                    // The run's last entry: go to its first (every key with
                    // this prefix is at or after the prefix, and any key at or
                    // after it without the prefix is after every key with it)
                    // and read forward. Every entry of the run is inside the
                    // current key range: range bounds cover index columns
                    // only, which the prefix holds whole.
                    runKey.removeAll(keepingCapacity: true)
                    runKey.append(contentsOf: orderKey)
                    try runKey.withBytes { b throws(KuraError) in try cursor!.seek(b, s) }
                    inForwardRun = true
                    forwardRunStarted = false
                    break
                }
                if haveRunKey {
                    if !Self.sameBytes(orderKey, runKey) {
                        // One past the run: step back so it is read again next time.
                        try stepBack(s, reverse)
                        break
                    }
                } else {
                    runKey.removeAll(keepingCapacity: true)
                    runKey.append(contentsOf: orderKey)
                    haveRunKey = true
                }
                run.append(rowID)
            }
            if inForwardRun { continue }
            if run.isEmpty { return nil }
            if run.count > 1 { run.sort() }
        }
    }

    /// The error for an index entry whose row the table does not have.
    private func missingRow(_ rowID: Int64, _ search: SearchIndex) -> KuraError {
        KuraError(.corrupt, "index \"\(search.definition.name)\" names row \(rowID), which table \"\(table.name)\" does not have", page: search.definition.info.rootPage)
    }

    /// The next row of the current forward run (see `inForwardRun`) whose
    /// record passes `matching`, or nil once the run is over; the cursor is
    /// then back on the run's first entry, from which the backward walk
    /// (`nextIndexEntry`) goes on to the entry before it.
    private mutating func nextInForwardRun<S: PageSource>(_ s: S, _ search: SearchIndex,
                                                          _ matching: (UnsafeRawBufferPointer, Int64) throws(KuraError) -> Bool) throws(KuraError) -> Row? {
        while true {
            if forwardRunStarted { try cursor!.next(s) } else { forwardRunStarted = true }
            if cursor!.isValid {
                let key = cursor!.key
                let n = try search.prefixLength(key, columns: plan.orderColumns)
                if Self.sameBytes(UnsafeRawBufferPointer(rebasing: key[0..<n]), runKey) {
                    let rowID = try search.rowID(key)
                    guard let record = try rowLocated(rowID, s) else {
                        throw missingRow(rowID, search)
                    }
                    if let row = try Self.row(rowID, record, matching) { return row }
                    continue
                }
            }
            try runKey.withBytes { b throws(KuraError) in try cursor!.seek(b, s) }
            inForwardRun = false
            return nil
        }
    }

    /// The row ID of the next index entry inside the plan's ranges (index plans only).
    mutating func nextIndexRowID<S: PageSource>(_ s: S) throws(KuraError) -> Int64? {
        guard let search = searchIndex else { preconditionFailure("nextIndexRowID on a table scan") }
        return try nextIndexEntry(s, search)
    }

    /// Every index entry inside the plan's ranges, in the order walked: its
    /// key (copied) and its row ID (index plans only).
    mutating func indexEntries<S: PageSource>(_ s: S) throws(KuraError) -> (keys: [[UInt8]], rowIDs: [Int64]) {
        guard let search = searchIndex else { preconditionFailure("indexEntries on a table scan") }
        var keys: [[UInt8]] = []
        var ids: [Int64] = []
        while let id = try nextIndexEntry(s, search) {
            // `nextIndexEntry` returned an entry: the cursor is on it.
            keys.append([UInt8](cursor!.key))
            ids.append(id)
        }
        return (keys, ids)
    }

    /// The record of row `rowID`, or nil: in place in its snapshot page in a
    /// read transaction (rows then borrow the page: Row.swift), else copied
    /// out of its page.
    @inline(__always)
    mutating func rowLocated<S: PageSource>(_ rowID: Int64, _ s: S) throws(KuraError) -> LocatedValue? {
        if rowPath != nil {
            let found = try RowIDKey.withEncoded(rowID) { k throws(KuraError) in try rowPath!.locate(rowID, k, s) }
            if borrowsPages { return found }
            // A write transaction's page changes later: the row gets a copy.
            switch found {
            case .inPage(let page, let offset, let count)?:
                return .copied(withExtendedLifetime(page) { Array(UnsafeRawBufferPointer(start: page.bytes + offset, count: count)) })
            case let other:
                return other
            }
        }
        let tree = tableTree
        return try RowIDKey.withEncoded(rowID) { k throws(KuraError) in try tree.get(k, s) }.map { .copied($0) }
    }

    private mutating func stepBack<S: PageSource>(_ s: S, _ reverse: Bool) throws(KuraError) {
        if reverse { try cursor!.next(s) } else { try cursor!.previous(s) }
    }

    private mutating func nextFromTable<S: PageSource>(_ s: S, _ matching: (UnsafeRawBufferPointer, Int64) throws(KuraError) -> Bool) throws(KuraError) -> Row? {
        if !started {
            started = true
            cursor = TreeCursor(tree: tableTree)
            // A scan of the whole table: its leaves should not fill the cache.
            cursor!.sequential = true
            try cursor!.first(s)
        } else {
            try cursor!.next(s)
        }
        // The cells of one leaf are tested in a loop of their own: the leaf is
        // held once, not fetched from the cursor per row.
        while cursor!.isValid {
            let leaf = cursor!.leaf
            var i = cursor!.index
            let n = leaf.cellCount
            while i < n {
                // Key and value from one read of the cell's header.
                let v = leaf.leafCell(i)
                let (ko, kl) = (v.keyOffset, v.keyLength)
                guard let (rowID, used) = RowIDKey.decode(leaf.bytes, ko, ko + kl), used == kl else {
                    throw KuraError(.corrupt, "table \"\(table.name)\" has a key that is not a row ID", page: leaf.number)
                }
                var matched: Bool
                var full: [UInt8]?
                do throws(KuraError) {
                    if v.overflow == 0 {
                        matched = try matching(UnsafeRawBufferPointer(start: leaf.bytes + v.offset, count: v.length), rowID)
                    } else {
                        full = try tableTree.value(leaf, i, s)
                        matched = try full!.withBytes { b throws(KuraError) in try matching(b, rowID) }
                    }
                } catch {
                    throw Self.locating(error, rowID: rowID, page: leaf.number)
                }
                if matched {
                    cursor!.moveInLeaf(to: i)
                    if let full { return Row(rowID: rowID, record: full) }
                    if borrowsPages { return Row(rowID: rowID, page: leaf, offset: v.offset, count: v.length) }
                    return Row(rowID: rowID, record: Array(UnsafeRawBufferPointer(start: leaf.bytes + v.offset, count: v.length)))
                }
                i += 1
            }
            // Past the leaf's last cell: the cursor's next step goes to the next leaf.
            cursor!.moveInLeaf(to: n - 1)
            try cursor!.next(s)
        }
        return nil
    }

    /// Moves to the next index entry inside the ranges and returns its row ID;
    /// its key is then `cursor!.key`.
    /// `search` is `searchIndex`, passed by the caller that holds it (taking
    /// it again here retained and released it once more per entry).
    private mutating func nextIndexEntry<S: PageSource>(_ s: S, _ search: SearchIndex) throws(KuraError) -> Int64? {
        let reverse = searchReverse
        while rangeIndex < searchRanges.count {
            // The range is read in place (a copy of it per entry retained and
            // released both its arrays).
            let ri = reverse ? searchRanges.count - 1 - rangeIndex : rangeIndex
            if !started {
                started = true
                if cursor == nil { cursor = TreeCursor(tree: search.tree) }
                if reverse {
                    // Position on the last key within the upper prefix bound.
                    var past = searchRanges[ri].upper
                    if !incrementPrefix(&past) { try cursor!.last(s) } else {
                        try past.withBytes { b throws(KuraError) in try cursor!.seek(b, s) }
                        if cursor!.isValid { try cursor!.previous(s) } else { try cursor!.last(s) }
                    }
                } else {
                    // A later range's lower bound (a probe with many row IDs:
                    // R1's foreign-key index) is searched from the lowest page
                    // of the cursor's path that brackets it (`seekNear`): in
                    // the same leaf, or below the same interior page, without
                    // a descent from the root. Snapshot pages only: a writer's
                    // may have changed since the cursor read them.
                    try searchRanges[ri].lower.withBytes { b throws(KuraError) in
                        if borrowsPages { try cursor!.seekNear(b, s) } else { try cursor!.seek(b, s) }
                    }
                }
            } else {
                if reverse { try cursor!.previous(s) } else { try cursor!.next(s) }
            }
            if cursor!.isValid {
                let key = cursor!.key
                let inRange = reverse ? !Self.precedes(key, searchRanges[ri].lower) : withinUpper(key, searchRanges[ri].upper)
                if inRange {
                    return try search.rowID(key)
                }
            }
            rangeIndex += 1
            started = false
        }
        return nil
    }

    /// A corruption error from reading a row, with the row ID and page added.
    /// Row `rowID` if its record passes `matching`, else nil; a corruption
    /// error from the test names the row.
    @inline(__always)
    static func row(_ rowID: Int64, _ record: LocatedValue,
                    _ matching: (UnsafeRawBufferPointer, Int64) throws(KuraError) -> Bool) throws(KuraError) -> Row? {
        let matched: Bool
        do throws(KuraError) {
            switch record {
            case .inPage(let page, let offset, let count):
                defer { withExtendedLifetime(page) {} }
                matched = try matching(UnsafeRawBufferPointer(start: page.bytes + offset, count: count), rowID)
            case .copied(let bytes):
                matched = try bytes.withBytes { b throws(KuraError) in try matching(b, rowID) }
            }
        } catch {
            throw locating(error, rowID: rowID, page: nil)
        }
        return matched ? row(rowID, record) : nil
    }

    /// Row `rowID` with `record`.
    @inline(__always)
    static func row(_ rowID: Int64, _ record: LocatedValue) -> Row {
        switch record {
        case .inPage(let page, let offset, let count): return Row(rowID: rowID, page: page, offset: offset, count: count)
        case .copied(let bytes): return Row(rowID: rowID, record: bytes)
        }
    }

    static func locating(_ error: KuraError, rowID: Int64?, page: UInt32?) -> KuraError {
        guard error.code == .corrupt else { return error }
        var e = error
        if let rowID { e.message += " (row \(rowID))" }
        if e.page == nil { e.page = page }
        return e
    }

    private func withinUpper(_ key: UnsafeRawBufferPointer, _ upper: [UInt8]) -> Bool {
        upper.isEmpty || key.starts(with: upper) || !upper.withUnsafeBytes { u in Self.precedes(u, key) }
    }

    /// `bytesPrecede` on borrowed key bytes.
    @inline(__always)
    private static func precedes(_ a: UnsafeRawBufferPointer, _ b: [UInt8]) -> Bool {
        b.withUnsafeBytes { y in precedes(a, y) }
    }

    /// Whether `a` holds the bytes of `b`.
    @inline(__always)
    private static func sameBytes(_ a: UnsafeRawBufferPointer, _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        if a.isEmpty { return true }
        // Both are non-empty here, so both have a base address.
        return b.withUnsafeBytes { y in memcmpBytes(a.baseAddress!, y.baseAddress!, a.count) == 0 }
    }

    @inline(__always)
    private static func precedes(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        let n = min(a.count, b.count)
        let c = n == 0 ? 0 : memcmpBytes(a.baseAddress!, b.baseAddress!, n)
        return c != 0 ? c < 0 : a.count < b.count
    }

    private func incrementPrefix(_ p: inout [UInt8]) -> Bool { KeyRange.incrementPrefix(&p) }
}

/// Splits index keys into their column segments and row ID.
enum IndexKeyParser {
    /// Length of the segment at `offset`, or nil if malformed.
    static func segmentLength<K: RandomAccessCollection<UInt8>>(_ key: K, _ offset: Int, descending: Bool) -> Int? where K.Index == Int {
        func byte(_ i: Int) -> UInt8? { i < key.count ? (descending ? ~key[i] : key[i]) : nil }
        guard let tag = byte(offset) else { return nil }
        switch tag {
        case IndexKey.nullTag: return 1
        case IndexKey.integerTag:
            guard let b = byte(offset + 1) else { return nil }
            let k = b >= 0x80 ? Int(b - 0x80) : Int(0x7F - b)
            guard k <= 8, offset + 2 + k <= key.count else { return nil }
            return 2 + k
        case IndexKey.doubleTag:
            return offset + 9 <= key.count ? 9 : nil
        case IndexKey.textTag, IndexKey.blobTag:
            var i = offset + 1
            while let b = byte(i) {
                if b == 0 {
                    guard let n = byte(i + 1) else { return nil }
                    if n == 0 { return i + 2 - offset }
                    i += 2
                } else {
                    i += 1
                }
            }
            return nil
        default:
            return nil
        }
    }

    /// The bytes of the first `columns` segments.
    static func prefix(_ key: [UInt8], columns: Int, of index: IndexDefinition) throws(KuraError) -> [UInt8] {
        Array(key[0..<(try key.withBytes { b throws(KuraError) in try prefixLength(b, columns: columns, of: index) })])
    }

    /// The length of the first `columns` segments.
    static func prefixLength(_ key: UnsafeRawBufferPointer, columns: Int, of index: IndexDefinition) throws(KuraError) -> Int {
        var pos = 0
        for c in index.columns.prefix(columns) {
            guard let n = segmentLength(key, pos, descending: c.descending) else {
                throw KuraError(.corrupt, "index \"\(index.name)\" has a malformed key", page: index.info.rootPage)
            }
            pos += n
        }
        return pos
    }

    /// The row ID at the end of an index key.
    static func rowID(_ key: [UInt8], of index: IndexDefinition) throws(KuraError) -> Int64 {
        try key.withBytes { b throws(KuraError) in try rowID(b, of: index) }
    }

    /// The row ID at the end of an index key held in `key`.
    static func rowID(_ key: UnsafeRawBufferPointer, of index: IndexDefinition) throws(KuraError) -> Int64 {
        let p = try prefixLength(key, columns: index.columns.count, of: index)
        let id: Int64? = {
            guard let base = key.baseAddress, let (v, n) = RowIDKey.decode(base, p, key.count), p + n == key.count else { return nil }
            return v
        }()
        guard let id else {
            throw KuraError(.corrupt, "index \"\(index.name)\" has a key that does not end in a row ID", page: index.info.rootPage)
        }
        return id
    }
}
