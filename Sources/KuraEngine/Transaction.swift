// ReadTransaction / WriteTransaction: what `Database.read` and `Database.write`
// hand to their closures.
//
// Tables are B+trees keyed by row ID (FORMAT.md, "Tables"). Row IDs are signed
// 64-bit, allocated increasing per table from its next-row-ID counter:
// an ID the engine hands out is never handed out again, even after the row with
// the largest ID is deleted. (An explicit row ID given to `insert(_:into:rowID:)`
// is the caller's choice and may be one that was used before.)
//
// Resolution: the decoded catalog (names, roots, schemas, index definitions) is
// shared by all transactions of a connection until the schema cookie changes
// (Database.swift); a transaction looks each table's counters up once in the
// counters tree (TableCounters.swift) and keeps them. A write transaction keeps
// the table it last wrote resolved (`HotTable`, its table handle: entry with
// counters, schema, indexes, tree), so a run of inserts, updates or deletes,
// by row ID or by predicate, does no lookups at all. A read transaction keeps
// a handle (TableHandle.swift) for each table it touches, made on first use,
// so lookups by row ID and queries do no lookup by name. At commit, changed
// counters go to the counters tree and only schema changes rewrite catalog
// records and move the schema cookie on. A format-1 store is migrated by the
// first write transaction that loads the catalog (`migrateCounters`).
//
// Reuse: a connection keeps its last finished read transaction (with its page
// memo) for the next one (`SpareReadTransaction`), unless the closure kept a
// reference to it; a transaction on the same snapshot keeps what the last one
// resolved, one on another snapshot starts empty.

import Synchronization

/// A transaction that reads one snapshot.
///
/// Lifetime: valid only inside the closure passed to `Database.read` (or
/// `write`); afterwards every call throws `KuraError.misuse`. Thread rules: use
/// it only on the thread running that closure.
public class ReadTransaction {
    // The mutable fields of a transaction are used only by the thread running
    // its closure (see "Thread rules"; a kept one passes between threads
    // through `SpareReadTransaction`'s atomic exchange, which orders them):
    // no runtime access checks on them.
    /// The connection; nil only while the transaction is kept for reuse by
    /// `SpareReadTransaction`, which then holds the only reference to it (so
    /// no code can reach it), and which would otherwise make a cycle
    /// (database -> spare -> transaction -> database).
    @exclusivity(unchecked) private var connection: Database?
    /// The connection this transaction runs in.
    var database: Database {
        // Set whenever anyone but `SpareReadTransaction` holds the transaction (see `connection`).
        connection!
    }
    /// A read transaction's pages (nil in a write transaction). Never
    /// replaced; a `var` only so that `park` can ask whether anything else
    /// holds it.
    @exclusivity(unchecked) private(set) var snapshotPages: SnapshotPages?
    let writer: PageWriter?
    @exclusivity(unchecked) var active = true

    init(database: Database, pages: SnapshotPages) {
        connection = database
        snapshotPages = pages
        writer = nil
    }

    init(database: Database, writer: PageWriter) {
        connection = database
        snapshotPages = nil
        self.writer = writer
    }

    func invalidate() { active = false }

    /// Makes a read transaction kept by `SpareReadTransaction` the
    /// transaction of `snapshot` in `database`. What this transaction knew
    /// about its old snapshot (page memo, table handles, catalog, counters)
    /// is kept only if `snapshot` is that same snapshot (`Snapshot.serial`),
    /// where all of it is still true; otherwise it starts empty, as a new
    /// transaction does, but for the pages the page memo may carry over
    /// (`SnapshotPages.reopen(on:)`).
    func reopen(_ database: Database, on snapshot: Snapshot) {
        connection = database
        active = true
        // A transaction kept for reuse is always a read transaction (`park`).
        if snapshotPages.unsafelyUnwrapped.reopen(on: snapshot) != .sameSnapshot {
            lastHandle = nil
            if !handles.isEmpty { handles.removeAll() }
            catalogMemo = nil
            if !countersMemo.isEmpty { countersMemo.removeAll() }
        }
    }

    /// Readies a finished read transaction to be kept for reuse: invalid,
    /// without its connection (see `connection`), and without the memos of
    /// queries. Returns false for a transaction that must not be reused (a
    /// write transaction, or one whose page source something else still
    /// holds). The caller has checked that it holds the only reference to
    /// the transaction.
    func park() -> Bool {
        // Something that kept the page source (not the transaction) would
        // see it move to another snapshot: such a transaction is not reused.
        guard writer == nil, type(of: self) == ReadTransaction.self,
              isKnownUniquelyReferenced(&snapshotPages) else { return false }
        active = false
        connection = nil
        if !schemaCache.isEmpty { schemaCache.removeAll() }
        if !indexCache.isEmpty { indexCache.removeAll() }
        fingerprintMemo = nil
        changeCount = 0
        return true
    }

    func checkActive() throws(KuraError) {
        if !active {
            throw KuraError(.misuse, "transaction used after its closure returned; do all work inside `read { }` or `write { }`", path: database.path)
        }
    }

    /// The catalog as this transaction sees it. In format 2 its table counters
    /// are placeholders: take entries through `withCounters` (or `table(_:)`).
    func currentCatalog() throws(KuraError) -> Catalog {
        if let c = catalogMemo { return c }
        let c: Catalog
        if let s = snapshotPages { c = try database.catalog(s) } else { c = try database.catalog(writer!) }
        catalogMemo = c
        return c
    }

    /// `info` (a catalog entry) with its table's counters from the counters
    /// tree; unchanged for an index or a format-1 store (whose records hold them).
    ///
    /// - Throws: `.corrupt` if the table has no counters entry.
    func withCounters(_ info: TableInfo) throws(KuraError) -> TableInfo {
        guard info.kind == "table" else { return info }
        if let c = countersMemo[info.id] { return info.with(c) }
        let header = try headerPage()
        guard header.headerVersion != 1 else { return info }
        let c: TableCounters
        if let s = snapshotPages {
            // Counters of a snapshot are the same for every transaction on it:
            // the connection keeps those of the last snapshot read.
            let cache = database.tableHandleCache
            if let known = cache.counters(info.id, snapshot: s.snapshot) {
                c = known
            } else {
                c = try storedCounters(info, header: header, s)
                cache.store(c, id: info.id, snapshot: s.snapshot)
            }
        } else {
            c = try storedCounters(info, header: header, writer!)
        }
        countersMemo[info.id] = c
        return info.with(c)
    }

    /// Table `info`'s counters as `pages` hold them: at the end of its tree's
    /// right-most leaf (format 5), or its entry in the counters tree that
    /// `header` names (formats 2 to 4).
    ///
    /// - Throws: `.corrupt` naming the table if it has none (or there is no tree).
    func storedCounters<S: PageSource>(_ info: TableInfo, header: Page, _ pages: S) throws(KuraError) -> TableCounters {
        if header.headerVersion >= FileHeader.leafCountersVersion {
            return try TableCounters.inLeaf(table: info.name, id: info.id, root: info.rootPage, pages)
        }
        let root = header.headerCountersRoot
        guard root != 0, let c = try TableCounters.get(info.id, root: root, pages) else {
            throw KuraError(.corrupt, "table \"\(info.name)\" (catalog ID \(info.id)) has no counters entry; run `kura check` on the store", path: database.path, page: root)
        }
        return c
    }

    // MARK: Tables

    /// Names of all tables, sorted.
    public func tableNames() throws(KuraError) -> [String] {
        try checkActive()
        return try currentCatalog().entries.values.filter { $0.kind == "table" }.map(\.name).sorted()
    }

    /// The table named `name`.
    ///
    /// - Throws: `KuraError.notFound` naming the table if there is none.
    public func table(_ name: String) throws(KuraError) -> TableInfo {
        try checkActive()
        if let h = cachedReadHandle(name) { return h.info }
        if let h = try cachedAcrossTransactions(name) { return h.info }
        guard let info = try currentCatalog().entries[name], info.kind == "table" else {
            throw KuraError(.notFound, "no table named \"\(name)\"", path: database.path)
        }
        return try withCounters(info)
    }

    /// Whether a table named `name` exists.
    public func tableExists(_ name: String) throws(KuraError) -> Bool {
        try checkActive()
        return try currentCatalog().entries[name]?.kind == "table"
    }

    /// Number of rows in `table`.
    public func rowCount(_ table: TableInfo) throws(KuraError) -> Int {
        try Int(self.table(table.name).rowCount)
    }

    // MARK: Rows

    /// The record stored under `rowID`, decoded, or nil if there is none.
    ///
    /// - Throws: `.corrupt` if the page or record does not decode.
    ///
    /// For a table with a schema, columns the record does not store (added after
    /// it was written) read as their defaults.
    /// External values (FORMAT.md, "External values") are read from their
    /// files; a missing or damaged file throws `.corrupt` naming the table,
    /// column, row and file.
    public func values(in table: TableInfo, rowID: Int64) throws(KuraError) -> [Value]? {
        try checkActive()
        if let h = try handle(for: table), let s = snapshotPages {
            // Decoded from the page where the record lies, with the handle's schema.
            return try RowIDKey.withEncoded(rowID) { k throws(KuraError) in
                try h.tree.withValue(k, s) { b throws(KuraError) in
                    var values = try RecordCodec.decode(b)
                    try complete(&values, h.schema, table: h.info.name, rowID: rowID)
                    return values
                }
            }
        }
        guard let bytes = try record(in: table, rowID: rowID) else { return nil }
        return try decodeRow(bytes, table, rowID: rowID)
    }

    /// `values(in: table(name), rowID:)` for a read transaction, through the
    /// table's read handle without making a `TableInfo` (the object layer's
    /// faults, `Database.values(inTable:rowID:)`).
    ///
    /// - Throws: as `table(_:)` and `values(in:rowID:)`.
    func values(inTableNamed name: String, rowID: Int64) throws(KuraError) -> [Value]? {
        try checkActive()
        let h = try readHandle(name)
        // A read transaction (readHandle's precondition) has its pages.
        let s = snapshotPages.unsafelyUnwrapped
        return try RowIDKey.withEncoded(rowID) { k throws(KuraError) in
            try h.tree.withValue(k, s) { b throws(KuraError) in
                var values = try RecordCodec.decode(b)
                try complete(&values, h.schema, table: h.info.name, rowID: rowID)
                return values
            }
        }
    }

    /// Decodes a row, filling schema defaults for columns it does not store
    /// and reading external values from their files.
    func decodeRow(_ record: [UInt8], _ table: TableInfo, rowID: Int64?) throws(KuraError) -> [Value] {
        var values = try RecordCodec.decode(record)
        try complete(&values, try schema(of: table), table: table.name, rowID: rowID)
        return values
    }

    /// Fills schema defaults for the columns a decoded row does not store and
    /// reads its external values from their files.
    @inline(__always)
    func complete(_ values: inout [Value], _ schema: TableSchema?, table: String, rowID: Int64?) throws(KuraError) {
        guard let schema else { return }
        schema.appendDefaults(to: &values)
        if schema.hasExternal { try resolveExternal(&values, schema, table: table, rowID: rowID) }
    }

    // MARK: Table handles (read transactions)

    /// The handle of the table named `name` if this read transaction resolved
    /// it already (nil in a write transaction, whose catalog changes).
    @inline(__always)
    func cachedReadHandle(_ name: String) -> TableHandle? {
        guard writer == nil else { return nil }
        if let h = lastHandle, h.info.name == name { return h }
        guard let h = handles[name] else { return nil }
        return remember(h)
    }

    /// The handle of the table named `name` in this read transaction's
    /// snapshot, resolved on first use (TableHandle.swift).
    ///
    /// - Throws: `.notFound` if there is no such table; `.corrupt` as `table(_:)`,
    ///   `schema(of:)` and `indexes(of:)`.
    func readHandle(_ name: String) throws(KuraError) -> TableHandle {
        precondition(writer == nil, "read handles are for read transactions")
        if let h = cachedReadHandle(name) { return h }
        if let h = try cachedAcrossTransactions(name) { return h }
        let info = try table(name)
        let resolved = ResolvedTable(entry: info, schema: try schema(of: info), indexes: try indexes(of: name))
        database.tableHandleCache.store(resolved, key: CatalogCache.Key(try headerPage()))
        return remember(TableHandle(info: info, resolved: resolved))
    }

    /// The handle of table `name` made from what the connection resolved in
    /// an earlier read transaction at the same schema (`TableHandleCache`),
    /// with this snapshot's counters; nil if it has not resolved it (or this
    /// is a write transaction).
    ///
    /// A handle made here is shared with the snapshot's later transactions
    /// (`TableHandleCache.share`): a snapshot has one catalog and one set of
    /// counters, so its handle of a table never changes.
    private func cachedAcrossTransactions(_ name: String) throws(KuraError) -> TableHandle? {
        guard let s = snapshotPages else { return nil }
        let cache = database.tableHandleCache
        if let h = cache.sharedHandle(name, snapshot: s.snapshot) { return remember(h) }
        let header = try s.page(1)
        guard let (resolved, known) = cache.lookup(name, key: CatalogCache.Key(header), snapshot: s.snapshot) else { return nil }
        let info: TableInfo
        if let known {
            info = resolved.entry.with(known)
        } else {
            info = try withCounters(resolved.entry)
        }
        let h = TableHandle(info: info, resolved: resolved)
        cache.share(h, snapshot: s.snapshot)
        return remember(h)
    }

    /// Makes `h` this transaction's handle of its table (the last one used).
    private func remember(_ h: TableHandle) -> TableHandle {
        if let last = lastHandle, last.info.name != h.info.name { handles[last.info.name] = last }
        lastHandle = h
        return h
    }

    /// The read handle of `table` if this is a read transaction and `table` is
    /// the table of that name in its snapshot (same catalog ID), else nil
    /// (callers then take the general path, which reports what is wrong).
    func handle(for table: TableInfo) throws(KuraError) -> TableHandle? {
        guard writer == nil else { return nil }
        if let h = cachedReadHandle(table.name) { return h.isHandle(of: table) ? h : nil }
        if let h = try cachedAcrossTransactions(table.name) { return h.isHandle(of: table) ? h : nil }
        guard let e = try currentCatalog().entries[table.name], e.kind == "table", e.id == table.id else { return nil }
        return try readHandle(table.name)
    }

    /// The encoded record stored under `rowID`, or nil (see `RecordView`).
    public func record(in table: TableInfo, rowID: Int64) throws(KuraError) -> [UInt8]? {
        try checkActive()
        let tree = BTree(root: table.rootPage, kind: .table)
        let key = RowIDKey.encode(rowID)
        if let w = writer { return try tree.getThroughLastLeaf(key, w) }
        return try tree.get(key, snapshotPages!)
    }

    /// Whether a row with `rowID` exists.
    public func contains(_ table: TableInfo, rowID: Int64) throws(KuraError) -> Bool {
        try checkActive()
        let tree = BTree(root: table.rootPage, kind: .table)
        let key = RowIDKey.encode(rowID)
        if let w = writer { return try tree.contains(key, w) }
        return try tree.contains(key, snapshotPages!)
    }

    /// A cursor over the rows of `table` in row-ID order (or reverse order),
    /// starting at the first row ID >= `start` (<= `start` when reversed).
    ///
    /// Lifetime: valid within this transaction. In a write transaction, changes
    /// made to the table while iterating are seen from the cursor's position on.
    public func rows(in table: TableInfo, from start: Int64? = nil, reverse: Bool = false) throws(KuraError) -> RowCursor {
        try checkActive()
        return RowCursor(transaction: self, table: table, start: start, reverse: reverse)
    }

    /// Counter of changes made in this transaction (cursors use it to re-seek).
    @exclusivity(unchecked) var changeCount = 0
    /// Decoded schemas by table name, with the definition they came from.
    @exclusivity(unchecked) var schemaCache: [String: (id: Int64, definition: [UInt8], schema: TableSchema?)] = [:]
    /// Indexes per table name, cached until an index is created or dropped in
    /// this transaction (a snapshot's indexes do not change otherwise).
    @exclusivity(unchecked) var indexCache: [String: [IndexDefinition]] = [:]
    /// The catalog, once read (a write transaction keeps its own in `catalog`).
    @exclusivity(unchecked) var catalogMemo: Catalog?
    /// Counters looked up by this (read) transaction, by catalog ID.
    @exclusivity(unchecked) var countersMemo: [Int64: TableCounters] = [:]
    /// The schema fingerprint of this (read) transaction, once computed.
    @exclusivity(unchecked) var fingerprintMemo: SchemaFingerprint?
    /// Table handles of this (read) transaction by name, and the last one used.
    @exclusivity(unchecked) var handles: [String: TableHandle] = [:]
    @exclusivity(unchecked) var lastHandle: TableHandle?
}

/// The read transaction a connection keeps for its next one (Database.swift,
/// `read` and `values(inTable:rowID:)`): a one-row read transaction then
/// allocates nothing, and one on the same snapshot as the last finds its
/// pages, table handle, catalog and counters where that one left them
/// (`ReadTransaction.reopen`, `SnapshotPages.reopen(on:)`).
///
/// Invariants: the slot holds at most one transaction, parked (`park`:
/// invalid, no connection), and holds the only reference to it and to its
/// page source; a transaction is put here only by the code that made or took
/// it, after its closure returned and only if it held the only reference
/// (`isKnownUniquelyReferenced`): a transaction a closure kept (stored it, or
/// a cursor of it) is never reused, and keeps throwing `misuse`. Taking is an
/// atomic exchange, so two transactions (nested, or on two threads) never get
/// the same object: the second finds the slot empty and makes a new one.
///
/// Thread rules: any thread. Failure modes: none.
final class SpareReadTransaction: @unchecked Sendable {
    // @unchecked Sendable: `word` is accessed only through `Atomic` operations
    // (`value` only under `fallback`, on platforms without `Atomic`); the
    // transaction it names is owned by the slot alone while parked, then by
    // the one thread whose exchange took it out (the exchange orders the
    // parking thread's writes before the taking thread's reads).
    private let word: UnsafeMutableRawPointer
    private let fallback = ThreadLock()
    private var value: UInt = 0

    init() {
        word = .allocate(byteCount: 8, alignment: 8)
        // Zero bytes are an `Atomic<UInt>` holding 0 (no transaction).
        word.initializeMemory(as: UInt.self, repeating: 0, count: 1)
    }

    deinit {
        // Releases the parked transaction, if any.
        _ = take()
        word.deallocate()
    }

    /// Swaps `new` (a retained transaction's address, or 0) into the slot
    /// and returns what it held.
    private func exchange(_ new: UInt) -> UInt {
        guard #available(macOS 15.0, iOS 18.0, *) else {
            return fallback.withLock {
                let old = value
                value = new
                return old
            }
        }
        return word.assumingMemoryBound(to: Atomic<UInt>.self).pointee.exchange(new, ordering: .acquiringAndReleasing)
    }

    /// The parked transaction, now owned by the caller, or nil.
    func take() -> ReadTransaction? {
        let bits = exchange(0)
        guard let p = UnsafeRawPointer(bitPattern: bits) else { return nil }
        // A nonzero word is the address of a transaction `put` retained.
        return Unmanaged<ReadTransaction>.fromOpaque(p).takeRetainedValue()
    }

    /// Keeps `tx` (parked, referenced by nothing else) for the next
    /// transaction. If the slot already holds one (a nested transaction
    /// parked first), that one is released instead.
    func put(_ tx: ReadTransaction) {
        let old = exchange(UInt(bitPattern: Unmanaged.passRetained(tx).toOpaque()))
        if let p = UnsafeRawPointer(bitPattern: old) {
            Unmanaged<ReadTransaction>.fromOpaque(p).release()
        }
    }
}

/// A transaction that reads its own snapshot and changes the database.
///
/// Everything it changes is committed atomically when the `write` closure
/// returns, or discarded if the closure throws. Lifetime and thread rules are
/// those of ``ReadTransaction``.
public final class WriteTransaction: ReadTransaction {
    // `@exclusivity(unchecked)` on the mutable fields, as on
    // `ReadTransaction`'s: only the thread running the transaction's closure
    // uses them (see "Thread rules"), so no two accesses overlap in time.
    @exclusivity(unchecked) var catalog: Catalog?
    /// Tables whose counters changed (written to the counters tree at commit).
    @exclusivity(unchecked) var changedTables: Set<String> = []
    /// Tables and indexes whose catalog record changed (created, altered).
    @exclusivity(unchecked) var schemaChanged: Set<String> = []
    @exclusivity(unchecked) var droppedTables: [TableInfo] = []
    /// Catalog IDs whose entry in `catalog` holds the table's real counters.
    @exclusivity(unchecked) var counted: Set<Int64> = []
    /// Nonzero once this transaction changed the schema: tells its schema
    /// apart from every committed one (`schemaFingerprint`).
    @exclusivity(unchecked) var localSchemaGeneration: UInt64 = 0
    /// Names of the external files this transaction wrote (ExternalValues.swift).
    @exclusivity(unchecked) var externalWritten: [String] = []

    func loadCatalog() throws(KuraError) -> Catalog {
        flushHotTable()
        if let c = catalog { return c }
        return try firstCatalog()
    }

    /// `loadCatalog` for a caller that changes the catalog entry of one table
    /// only, one without a handle (`hotTable` resolving a new one): the
    /// handles' counters are written back (`syncHandles`), so the catalog
    /// holds every table's current counters, but the handles are kept: a
    /// save that alternates between a few tables resolves each once, not
    /// at every switch.
    private func loadCatalogKeepingHandles() throws(KuraError) -> Catalog {
        syncHandles()
        if let c = catalog { return c }
        return try firstCatalog()
    }

    private func firstCatalog() throws(KuraError) -> Catalog {
        let c = try database.catalog(writer!)
        catalog = c
        if writer!.currentHeader.headerVersion == 1 { try migrateCounters() }
        return catalog!
    }

    /// Moves a format-1 store to format 2 (FORMAT.md, "Version history"): creates
    /// the counters tree from the catalog records' counters, rewrites every
    /// record without them, and sets the header's version. Part of this
    /// transaction: committed with it, or not at all.
    private func migrateCounters() throws(KuraError) {
        let w = writer!
        precondition(w.header.headerVersion == 1 && catalog != nil, "migrating a store that is not format 1")
        if w.header.headerCatalogRoot != 0 {
            w.header.headerCountersRoot = try BTree.create(.table, in: w)
            for info in catalog!.entries.values {
                schemaChanged.insert(info.name)
                if info.kind == "table" { changedTables.insert(info.name) }
                counted.insert(info.id)
            }
        }
        w.header.headerVersion = FileHeader.countersFormatVersion
        noteSchemaChange()
        w.markModified()
    }

    /// Records that this transaction changed the schema: the cookie moves on at
    /// commit, and prepared queries resolved before re-resolve.
    func noteSchemaChange() {
        localSchemaGeneration = SchemaGenerations.shared.next()
        indexCache = [:]
    }

    /// The catalog entry named `name` with its real counters, or nil.
    /// `keepingHandles`: for a table that has no handle, which the caller
    /// is about to resolve one for (`loadCatalogKeepingHandles`).
    func countedEntry(_ name: String, keepingHandles: Bool = false) throws(KuraError) -> TableInfo? {
        guard var info = try (keepingHandles ? loadCatalogKeepingHandles() : loadCatalog()).entries[name] else { return nil }
        guard info.kind == "table", !counted.contains(info.id) else { return info }
        let w = writer!
        if w.currentHeader.headerVersion >= FileHeader.leafCountersVersion && w.touchedTableRoots.contains(info.rootPage) {
            // From the snapshot the transaction began on: the writer's copy of
            // the right-most leaf may have been rebuilt (a split) without them.
            info = info.with(try storedCounters(info, header: w.currentHeader, SnapshotPages(pager: w.pager, snapshot: w.snapshot)))
        } else if w.currentHeader.headerVersion != 1 {
            // No page of the table's tree changed yet (or formats 2 to 4, whose
            // counters tree the commit alone writes): the writer's pages,
            // through its memo.
            info = info.with(try storedCounters(info, header: w.currentHeader, w))
        }
        counted.insert(info.id)
        catalog!.entries[name] = info
        return info
    }

    override func withCounters(_ info: TableInfo) throws(KuraError) -> TableInfo {
        guard info.kind == "table" else { return info }
        guard let current = try countedEntry(info.name), current.id == info.id else { return info }
        return current
    }

    /// Puts `info` (with its counters) into the catalog as a new or changed
    /// object, written at commit (compaction's copy builds its catalog so).
    func installEntry(_ info: TableInfo) throws(KuraError) {
        var c = try loadCatalog()
        c.entries[info.name] = info
        c.nextID = max(c.nextID, info.id + 1)
        catalog = c
        counted.insert(info.id)
        schemaChanged.insert(info.name)
        if info.kind == "table" { changedTables.insert(info.name) }
        noteSchemaChange()
    }

    /// The table most recently written (inserted into, updated, deleted from),
    /// resolved once (`TableHandle`). Inserts, updates and deletes by row ID or
    /// by predicate take it instead of looking the table up by name per row.
    /// Its row count and next row ID are updated in place and written back to
    /// `catalog` before anything else reads or changes the catalog
    /// (`loadCatalog` calls `flushHotTable`, which also forgets it). Every
    /// schema change starts with `loadCatalog` (or `flushHotTable`), so a
    /// handle never outlives the schema it was resolved from.
    typealias HotTable = TableHandle
    @exclusivity(unchecked) private var hot: HotTable?
    /// The handles of other tables this transaction wrote before `hot`, at
    /// most `parkedLimit`, under the same rules as `hot` (written back and
    /// forgotten by `flushHotTable`): writes that alternate between a few
    /// tables (an object graph's save: a student, its record, its courses,
    /// the next student) find each table resolved instead of resolving it
    /// again, with a catalog lookup and a handle allocation, at every switch.
    @exclusivity(unchecked) private var parked: [HotTable] = []
    static let parkedLimit = 7

    /// The handle of `table` if it is resolved now (`hot` or parked), else
    /// nil (no lookup by name).
    func resolvedHandle(_ table: TableInfo) -> HotTable? {
        if let h = hot, h.isHandle(of: table) { return h }
        for h in parked where h.isHandle(of: table) { return h }
        return nil
    }

    func hotTable(_ table: TableInfo) throws(KuraError) -> HotTable {
        try checkActive()
        if let h = hot, h.isHandle(of: table) { return h }
        for i in parked.indices where parked[i].isHandle(of: table) {
            // Promoted to `hot`; the previous one takes its place.
            let h = parked[i]
            if let previous = hot { parked[i] = previous } else { parked.remove(at: i) }
            hot = h
            return h
        }
        guard let info = try countedEntry(table.name, keepingHandles: true), info.id == table.id else {
            throw KuraError(.notFound, "no table named \"\(table.name)\" (was it dropped?)", path: database.path)
        }
        if let r = sharedResolution(info.name), r.entry.id == info.id {
            let h = HotTable(info: info, resolved: r)
            install(h)
            return h
        }
        let r = ResolvedTable(entry: info, schema: try schema(of: info), indexes: try indexes(of: info.name))
        if let key = sharedCatalogKey { database.tableHandleCache.store(r, key: key) }
        let h = HotTable(info: info, resolved: r)
        install(h)
        return h
    }

    /// Makes `h` (a table with no handle yet) the hot table, parking the
    /// previous one; past `parkedLimit`, the oldest parked handle is written
    /// back and forgotten.
    private func install(_ h: HotTable) {
        if let previous = hot {
            parked.insert(previous, at: 0)
            if parked.count > Self.parkedLimit { writeBack(parked.removeLast()) }
        }
        hot = h
    }

    /// Writes `h`'s counters to `catalog` if they changed.
    private func writeBack(_ h: HotTable) {
        guard h.dirty else { return }
        catalog!.entries[h.info.name] = h.info
        changedTables.insert(h.info.name)
        h.dirty = false
    }

    /// Writes every handle's changed counters to `catalog`, keeping the
    /// handles (`loadCatalogKeepingHandles`).
    private func syncHandles() {
        if let h = hot { writeBack(h) }
        for h in parked { writeBack(h) }
    }

    /// The catalog key under which this transaction may share the
    /// connection's resolved tables (`TableHandleCache`): while it has not
    /// changed the schema, its catalog is the committed one of its snapshot's
    /// schema cookie, which is what the key names. Nil once it has (or on a
    /// format-1 store, which it migrates).
    private var sharedCatalogKey: CatalogCache.Key? {
        localSchemaGeneration == 0 && schemaChanged.isEmpty ? writer!.unchangedCatalogKey : nil
    }

    /// What this connection resolved for table `name` (schema, indexes) at
    /// this transaction's catalog, by a read or an earlier write transaction,
    /// so that a write transaction does not decode them again. Its entry's
    /// counters are not this transaction's: callers take those from `entry`.
    func sharedResolution(_ name: String) -> ResolvedTable? {
        guard let key = sharedCatalogKey else { return nil }
        return database.tableHandleCache.resolved(name, key: key)
    }

    /// The table named `name`, with this transaction's counters. When the
    /// connection has it resolved at this schema (`sharedResolution`), it
    /// becomes the hot table at once, so the write that usually follows
    /// (`tx.insert(values, into: try tx.table(name))`) finds it resolved.
    public override func table(_ name: String) throws(KuraError) -> TableInfo {
        try checkActive()
        if let h = hot, h.info.name == name { return h.info }
        for h in parked where h.info.name == name { return h.info }
        if let r = sharedResolution(name), let info = try countedEntry(name, keepingHandles: true), info.id == r.entry.id {
            install(HotTable(info: info, resolved: r))
            return info
        }
        return try super.table(name)
    }

    /// A row's record, checked against the table's schema if it has one.
    /// (Inlined into each insert and update, as it was before it read the
    /// store's format.)
    @inline(__always)
    func encode(_ values: [Value], for h: HotTable) throws(KuraError) -> [UInt8] {
        // Through the validator, not a copy of the schema (see `insertRow`).
        guard let v = h.validator else { return RecordCodec.encode(values, compactDoubles: compactDoubles) }
        return RecordCodec.encode(try v.validate(values, table: h.info.name), compactDoubles: compactDoubles)
    }

    /// Whether this transaction changed counters or catalog entries that only
    /// its commit writes to their pages (`commit`): a check of the pages
    /// before then would find them stale.
    var hasUncommittedCatalogChanges: Bool {
        hot?.dirty == true || parked.contains { $0.dirty } || !changedTables.isEmpty || !schemaChanged.isEmpty || !droppedTables.isEmpty
    }

    /// Writes back the counters of the hot and parked handles and forgets
    /// them (before a catalog read or change they could outlive).
    func flushHotTable() {
        syncHandles()
        hot = nil
        parked.removeAll()
    }

    /// The catalog as `loadCatalog` gives it, without writing back and
    /// forgetting the hot table: for a caller that reads only what the hot
    /// table does not change (which objects exist, their roots and
    /// definitions), never counters.
    func peekCatalog() throws(KuraError) -> Catalog {
        if let c = catalog { return c }
        // No catalog yet, so no hot table either (resolving one loads it).
        return try loadCatalog()
    }

    /// Takes over what the previous write transaction of this connection
    /// handed on (`WriterTables`), if it was made for the snapshot this
    /// transaction runs on and at its catalog key: checked here, under the
    /// writer lock, against this transaction's own snapshot and header, so
    /// a commit, compaction or checkpoint by any connection or process since
    /// (a new snapshot) or a schema change (a new cookie) discards it.
    func adopt(_ carried: WriterTables?) {
        guard let carried, carried.serial == writer!.snapshot.serial,
              let key = writer!.unchangedCatalogKey, key == carried.key else { return }
        catalog = carried.catalog
        counted = carried.counted
        hot = carried.hot
        parked = carried.parked
    }

    /// What this transaction hands the next write transaction of its
    /// connection once it committed, as of `serial` (the snapshot its commit
    /// made, or its own if it wrote nothing): nil unless it loaded the
    /// catalog and changed no schema (no table or index created, altered or
    /// dropped, no migration or format upgrade: the header's catalog key is
    /// the snapshot's), in a store whose counters live in the tables' leaves.
    /// Its catalog then holds the committed entries, those of `counted` with
    /// the committed counters (the hot table's written back at commit).
    func tableCarry(to serial: UInt64) -> WriterTables? {
        guard let c = catalog, localSchemaGeneration == 0, schemaChanged.isEmpty, droppedTables.isEmpty,
              let w = writer, w.currentHeader.headerVersion >= FileHeader.leafCountersVersion,
              let key = w.unchangedCatalogKey else { return nil }
        // The handles were written back to the catalog at commit (`dirty`
        // cleared); one that was not is not carried.
        return WriterTables(serial: serial, key: key, catalog: c, counted: counted, hot: hot?.dirty == false ? hot : nil,
                            parked: parked.filter { !$0.dirty })
    }

    override func currentCatalog() throws(KuraError) -> Catalog { try loadCatalog() }

    /// Current catalog entry for `table` with its counters, by name, checking it
    /// is the same table.
    func entry(_ table: TableInfo) throws(KuraError) -> TableInfo {
        try checkActive()
        guard let info = try countedEntry(table.name), info.id == table.id else {
            throw KuraError(.notFound, "no table named \"\(table.name)\" (was it dropped?)", path: database.path)
        }
        return info
    }

    // MARK: Tables

    /// Creates a table. `definition` is stored verbatim in the catalog for the
    /// layer above (a schema); raw tables leave it empty.
    ///
    /// - Throws: `.alreadyExists` if the name is taken; `.invalidArgument` for an
    ///   empty name or one longer than 255 bytes.
    @discardableResult
    public func createTable(_ name: String, definition: [UInt8] = []) throws(KuraError) -> TableInfo {
        try createObject(name, kind: "table", owner: nil, definition: definition)
    }

    /// Creates a table or index tree with a catalog entry.
    package func createObject(_ name: String, kind: String, owner: String?, definition: [UInt8]) throws(KuraError) -> TableInfo {
        try checkActive()
        guard !name.isEmpty, name.utf8.count <= 255 else {
            throw KuraError(.invalidArgument, "name \"\(name)\" must be 1 to 255 bytes of UTF-8", path: database.path)
        }
        var c = try loadCatalog()
        if c.entries[name] != nil {
            throw KuraError(.alreadyExists, "a table or index named \"\(name)\" already exists", path: database.path)
        }
        let w = writer!
        if w.header.headerCatalogRoot == 0 {
            w.header.headerCatalogRoot = try BTree.create(.table, in: w)
            w.markModified()
        }
        let root = try BTree.create(kind == "index" ? .index : .table, in: w)
        // IDs come from the header's counter, so a dropped object's ID is never reused.
        let id = max(w.header.headerNextCatalogID, c.nextID)
        w.header.headerNextCatalogID = id + 1
        let info = TableInfo(name: name, id: id, rootPage: root, rowCount: 0, nextRowID: 1,
                             definition: definition, kind: kind, owner: owner)
        c.nextID = id + 1
        c.entries[name] = info
        catalog = c
        counted.insert(id)
        schemaChanged.insert(name)
        if kind == "table" { changedTables.insert(name) }
        noteSchemaChange()
        changeCount += 1
        return info
    }

    /// Drops a table and frees all its pages.
    ///
    /// - Throws: `.notFound` if there is no such table.
    public func dropTable(_ name: String) throws(KuraError) {
        let info = try table(name)
        if let schema = try schema(of: info), schema.hasExternal {
            let c = try rows(in: info)
            while let r = try c.next() { try releaseExternal(ofRecord: r.record, schema) }
        }
        for index in try indexes(of: info.name) { try dropObject(index.name) }
        indexCache[info.name] = nil
        try dropObject(name)
    }

    package func dropObject(_ name: String) throws(KuraError) {
        try checkActive()
        var c = try loadCatalog()
        guard let info = c.entries[name] else {
            throw KuraError(.notFound, "no table or index named \"\(name)\"", path: database.path)
        }
        try BTree(root: info.rootPage, kind: info.kind == "index" ? .index : .table).destroy(writer!)
        c.entries[name] = nil
        catalog = c
        changedTables.remove(name)
        schemaChanged.remove(name)
        droppedTables.append(info)
        noteSchemaChange()
        changeCount += 1
    }

    /// Renames a table or an index; a table's indexes follow it (their owner
    /// changes, their names do not). Pages and row IDs stay; only catalog
    /// entries change (the object layer's entity renames).
    ///
    /// - Throws: `.notFound` for an unknown name; `.alreadyExists` if `newName`
    ///   is taken; `.invalidArgument` for an empty or over-long name.
    package func renameObject(_ name: String, to newName: String) throws(KuraError) {
        try checkActive()
        flushHotTable()
        guard !newName.isEmpty, newName.utf8.count <= 255 else {
            throw KuraError(.invalidArgument, "name \"\(newName)\" must be 1 to 255 bytes of UTF-8", path: database.path)
        }
        var c = try loadCatalog()
        guard let info = c.entries[name] else {
            throw KuraError(.notFound, "no table or index named \"\(name)\"", path: database.path)
        }
        if c.entries[newName] != nil {
            throw KuraError(.alreadyExists, "a table or index named \"\(newName)\" already exists", path: database.path)
        }
        c.entries[name] = nil
        c.entries[newName] = TableInfo(name: newName, id: info.id, rootPage: info.rootPage, rowCount: info.rowCount, nextRowID: info.nextRowID,
                                       definition: info.definition, kind: info.kind, owner: info.owner)
        // Catalog records are keyed by catalog ID: the renamed record replaces
        // the old one at commit. Counters follow the name they are kept under.
        if changedTables.remove(name) != nil { changedTables.insert(newName) }
        schemaChanged.remove(name)
        schemaChanged.insert(newName)
        if info.kind == "table" {
            for (n, e) in c.entries where e.kind == "index" && e.owner == name {
                c.entries[n] = TableInfo(name: n, id: e.id, rootPage: e.rootPage, rowCount: e.rowCount, nextRowID: e.nextRowID,
                                         definition: e.definition, kind: e.kind, owner: newName)
                schemaChanged.insert(n)
            }
            indexCache[name] = nil
            indexCache[newName] = nil
        } else if let owner = info.owner {
            indexCache[owner] = nil
        }
        schemaCache[name] = nil
        catalog = c
        noteSchemaChange()
        changeCount += 1
    }

    /// Replaces the definition bytes of a table (the schema layer's).
    package func setDefinition(_ definition: [UInt8], of table: TableInfo) throws(KuraError) {
        flushHotTable()  // its cached schema would outlive the new definition
        var info = try entry(table)
        info.definition = definition
        catalog!.entries[info.name] = info
        schemaChanged.insert(info.name)
        noteSchemaChange()
    }

    // MARK: Rows

    /// Inserts a row with the next row ID and returns that ID.
    ///
    /// - Throws: `.notFound` if the table was dropped; `.tooBig` when row IDs are
    ///   exhausted.
    @discardableResult
    public func insert(_ values: [Value], into table: TableInfo) throws(KuraError) -> Int64 {
        let h = try hotTable(table)
        if h.hasExternal, let schema = h.schema {
            return try withExternal(values, h.info, schema, old: nil) { r throws(KuraError) in try insertEncoded(r, into: table) }
        }
        return try insertEncoded(try encode(values, for: h), into: table, handle: h, rowID: nil)
    }

    /// Inserts an encoded record with the next row ID. A table with a schema
    /// checks the record's values against it.
    ///
    /// - Throws: `.corrupt` if the bytes are not a record; `.typeMismatch` and
    ///   `.constraintViolation` as `insert(_:into:)`.
    @discardableResult
    public func insertRecord(_ record: [UInt8], into table: TableInfo) throws(KuraError) -> Int64 {
        let h = try hotTable(table)
        if let schema = h.schema, schema.hasExternal {
            return try withExternal(RecordCodec.decode(record), h.info, schema, old: nil) { r throws(KuraError) in try insertEncoded(r, into: table) }
        }
        return try insertEncoded(checkedRecord(record, h), into: table)
    }

    /// The record itself, re-encoded with defaults and normalized values if the
    /// table has a schema. In a store below format 9, a record holding
    /// doubles of serial type 10 or 11 (which only format 9 allows) is
    /// re-encoded with type 9.
    private func checkedRecord(_ record: [UInt8], _ h: HotTable) throws(KuraError) -> [UInt8] {
        guard h.schema != nil else {
            let compactTypes = try record.withBytes { b throws(KuraError) in
                try RecordView(b).types.contains { $0 == 10 || $0 == 11 }
            }
            if compactTypes && !compactDoubles { return RecordCodec.encode(try RecordCodec.decode(record)) }
            return record
        }
        return try encode(RecordCodec.decode(record), for: h)
    }

    /// Inserts a checked record under `explicitRowID`, or the next row ID.
    func insertEncoded(_ record: [UInt8], into table: TableInfo, rowID explicitRowID: Int64? = nil) throws(KuraError) -> Int64 {
        try insertEncoded(record, into: table, handle: try hotTable(table), rowID: explicitRowID)
    }

    /// `insertEncoded(_:into:rowID:)` with `table`'s hot handle `handle`
    /// already taken (`hotTable(table)`, with nothing between that could
    /// flush it), sparing a second lookup.
    private func insertEncoded(_ record: [UInt8], into table: TableInfo, handle: HotTable, rowID explicitRowID: Int64?) throws(KuraError) -> Int64 {
        var h = handle
        let rowID = explicitRowID ?? h.info.nextRowID
        guard rowID < Int64.max else {
            throw KuraError(.tooBig, "table \"\(h.info.name)\" has used every row ID", path: database.path)
        }
        let indexed = !h.indexes.isEmpty
        if indexed {
            // The keys go to the handle's buffers (IndexEntries.swift).
            let entries = h.indexEntries
            try record.withBytes { b throws(KuraError) in
                try entries.build(b, rowID: rowID, schema: h.schema, maxKey: Node.maxKey(database.pageSize))
            }
            if entries.hasUnique {
                try checkUnique(entries, rowID: rowID, table: h.info.name, explicitRowID: explicitRowID != nil ? h.tree : nil)
            }
            // Nothing above reads the catalog (which would flush the handle);
            // re-taking it costs one comparison and keeps the counters safe if that changes.
            h = try hotTable(table)
        }
        // The tree refuses a key it holds (`.insertNew`), so an explicit row
        // ID that is taken costs no descent of its own; nothing was written
        // yet (index entries go in after the row).
        // The key is written into the handle's reused buffer (taken out of
        // the handle so it is uniquely referenced: no allocation per row).
        var key: [UInt8] = []
        swap(&key, &h.keyBuffer)
        RowIDKey.write(rowID, over: &key)
        let inserted = try h.tree.insert(key, record, mode: .insertNew, writer!)
        swap(&key, &h.keyBuffer)
        guard inserted else {
            if explicitRowID != nil {
                throw KuraError(.alreadyExists, "table \"\(h.info.name)\" already has a row with ID \(rowID)", path: database.path)
            }
            throw KuraError(.corrupt, "table \"\(h.info.name)\" already holds row \(rowID), at or past its next row ID", page: h.info.rootPage)
        }
        if indexed {
            let entries = h.indexEntries
            for i in 0..<entries.keys.count {
                guard try BTree(root: entries.roots[i], kind: .index).insert(entries.keys[i], [], mode: .insertNew, writer!) else {
                    throw KuraError(.corrupt, "index \"\(entries.definitions[i].name)\" already holds an entry for this row", page: entries.roots[i])
                }
            }
        }
        if rowID >= h.info.nextRowID { h.info.nextRowID = rowID + 1 }
        h.info.rowCount += 1
        h.dirty = true
        changeCount += 1
        return rowID
    }

    /// Reserves `count` row IDs of `table` without inserting rows: returns the
    /// first; the table's next row ID moves past them, so no later insert
    /// without an explicit row ID takes one (the object layer's
    /// `obtainPermanentIDs`). Row IDs are never reused, so an unused
    /// reservation is only a gap.
    ///
    /// - Throws: `.tooBig` if the table has fewer than `count` row IDs left;
    ///   `.invalidArgument` for a count below 1.
    public func reserveRowIDs(_ count: Int64, in table: TableInfo) throws(KuraError) -> Int64 {
        guard count > 0 else { throw KuraError(.invalidArgument, "cannot reserve \(count) row IDs", path: database.path) }
        let h = try hotTable(table)
        let first = h.info.nextRowID
        guard first < Int64.max - count else {
            throw KuraError(.tooBig, "table \"\(h.info.name)\" has used every row ID", path: database.path)
        }
        h.info.nextRowID = first + count
        h.dirty = true
        changeCount += 1
        return first
    }

    /// Inserts a row under an explicit row ID. Later inserts without one get
    /// IDs above it.
    ///
    /// - Throws: `.alreadyExists` naming the row ID if the table has that row.
    public func insert(_ values: [Value], into table: TableInfo, rowID: Int64) throws(KuraError) {
        try insertRow(values, into: table, rowID: rowID)
    }

    /// The largest record buffer (bytes of capacity) a table handle keeps
    /// between `insertRow` calls.
    static let keptRecordBuffer = 64 << 10

    /// `insert(_:into:rowID:)`, which is this, by the name the object
    /// layer's save calls (it inserts runs of rows into one table): schema
    /// types, NOT NULL, unique indexes and a taken row ID checked, indexes
    /// and counters kept; the record is encoded into the table handle's
    /// reused buffer rather than a new array per row, and the table is
    /// resolved once per row rather than twice. A table with `external`
    /// columns writes their files first (`withExternal`).
    ///
    /// - Throws: as `insert(_:into:rowID:)`.
    package func insertRow(_ values: [Value], into table: TableInfo, rowID: Int64) throws(KuraError) {
        guard rowID < Int64.max else {
            throw KuraError(.invalidArgument, "row ID \(rowID) is reserved; explicit row IDs must be below Int64.max", path: database.path)
        }
        let h = try hotTable(table)
        if h.hasExternal, let schema = h.schema {
            _ = try withExternal(values, h.info, schema, old: nil) { r throws(KuraError) in try insertEncoded(r, into: table, rowID: rowID) }
            return
        }
        _ = try withEncodedRecord(values, h) { record throws(KuraError) in try insertEncoded(record, into: table, handle: h, rowID: rowID) }
    }

    /// `body` on `values` encoded (through the table's validator, if any) in
    /// the handle's reused record buffer: taken out of the handle while in
    /// use (uniquely referenced, so written in place) and put back however
    /// `body` ends; one grown past `keptRecordBuffer` (a large blob) is
    /// dropped rather than kept by the handle, which may outlive the
    /// transaction (`WriterTables`).
    @inline(__always)
    private func withEncodedRecord<T>(_ values: [Value], _ h: HotTable, _ body: ([UInt8]) throws(KuraError) -> T) throws(KuraError) -> T {
        var record: [UInt8] = []
        swap(&record, &h.recordBuffer)
        defer { if record.capacity <= Self.keptRecordBuffer { swap(&record, &h.recordBuffer) } }
        if let v = h.validator {
            // Through the validator: no copy of the schema per row (binding
            // `h.schema` with `if let` made one).
            RecordCodec.encode(try v.validate(values, table: h.info.name), compactDoubles: compactDoubles, reusing: &record)
        } else {
            RecordCodec.encode(values, compactDoubles: compactDoubles, reusing: &record)
        }
        return try body(record)
    }

    /// Replaces the values of row `rowID`. Returns false if there is no such row.
    @discardableResult
    public func update(_ values: [Value], in table: TableInfo, rowID: Int64) throws(KuraError) -> Bool {
        let h = try hotTable(table)
        if let schema = h.schema, schema.hasExternal {
            guard let old = try record(in: h.info, rowID: rowID) else { return false }
            return try withExternal(values, h.info, schema, old: old) { r throws(KuraError) in try updateEncoded(r, in: table, rowID: rowID, current: old) }
        }
        return try updateEncoded(encode(values, for: h), in: table, rowID: rowID)
    }

    /// `update(_:in:rowID:)` for a caller that read the row's record in this
    /// transaction (`record(in:rowID:)`) and has not changed the row since:
    /// `current` spares reading it again for its index keys and external
    /// values (the object layer's save reads each row to check its version
    /// first). A `current` that is not the row's record leaves wrong index
    /// entries, hence package access only.
    ///
    /// The record is encoded into the table handle's reused buffer (as
    /// `insertRow` does), and the row-ID key too: no array made per row.
    @discardableResult
    package func update(_ values: [Value], in table: TableInfo, rowID: Int64, current: [UInt8]) throws(KuraError) -> Bool {
        let h = try hotTable(table)
        if h.hasExternal, let schema = h.schema {
            return try withExternal(values, h.info, schema, old: current) { r throws(KuraError) in try updateEncoded(r, in: table, rowID: rowID, current: current) }
        }
        return try withEncodedRecord(values, h) { record throws(KuraError) in try updateEncoded(record, handle: h, rowID: rowID, current: current) }
    }

    /// Replaces the encoded record of row `rowID`. Returns false if there is none.
    @discardableResult
    public func updateRecord(_ record: [UInt8], in table: TableInfo, rowID: Int64) throws(KuraError) -> Bool {
        let h = try hotTable(table)
        if let schema = h.schema, schema.hasExternal {
            guard let old = try self.record(in: h.info, rowID: rowID) else { return false }
            return try withExternal(RecordCodec.decode(record), h.info, schema, old: old) { r throws(KuraError) in try updateEncoded(r, in: table, rowID: rowID, current: old) }
        }
        return try updateEncoded(checkedRecord(record, h), in: table, rowID: rowID)
    }

    /// `current`, when given, is the row's record as this transaction has it now
    /// (the caller just read it), which saves a descent to read it again.
    ///
    /// Keys are built only for indexes one of whose columns changed bytes
    /// (`HotTable.indexesChanged`); of those, only the ones whose key changed
    /// are checked for uniqueness and rewritten.
    func updateEncoded(_ record: [UInt8], in table: TableInfo, rowID: Int64, current: [UInt8]? = nil) throws(KuraError) -> Bool {
        try updateEncoded(record, handle: try hotTable(table), rowID: rowID, current: current)
    }

    /// `updateEncoded(_:in:rowID:current:)` with the table's handle at hand.
    /// The row-ID key is written into the handle's reused key buffer.
    private func updateEncoded(_ record: [UInt8], handle h: HotTable, rowID: Int64, current: [UInt8]?) throws(KuraError) -> Bool {
        let tree = h.tree
        var key: [UInt8] = []
        swap(&key, &h.keyBuffer)
        defer { swap(&key, &h.keyBuffer) }
        RowIDKey.write(rowID, over: &key)
        if h.indexes.isEmpty {
            let done = try tree.insert(key, record, mode: .replaceExisting, writer!)
            if done { changeCount += 1 }
            return done
        }
        let stored: [UInt8]?
        if let current { stored = current } else { stored = try tree.get(key, writer!) }
        guard let old = stored else { return false }
        if try !h.anyIndexedColumnChanged(old: old, new: record) {
            // No column an index reads changed: the record alone.
            try tree.insert(key, record, mode: .replaceExisting, writer!)
            changeCount += 1
            return true
        }
        let touched = try h.indexesChanged(old: old, new: record)
        let indexes = zip(h.indexes, touched).filter(\.1).map(\.0)
        let oldKeys = try indexKeys(indexes, record: old, rowID: rowID, schema: h.schema)
        let newKeys = try indexKeys(indexes, record: record, rowID: rowID, schema: h.schema)
        let changed = zip(oldKeys, newKeys).map { $0.key != $1.key }
        try checkUnique(indexes, newKeys, rowID: rowID, table: h.info.name, only: changed)
        try tree.insert(key, record, mode: .replaceExisting, writer!)
        for (i, index) in indexes.enumerated() where changed[i] {
            try index.tree.delete(oldKeys[i].key, writer!)
            try index.tree.insert(newKeys[i].key, [], mode: .insertNew, writer!)
        }
        changeCount += 1
        return true
    }

    /// Deletes row `rowID`. Returns false if there was no such row.
    @discardableResult
    public func delete(from table: TableInfo, rowID: Int64) throws(KuraError) -> Bool {
        try delete(from: table, rowID: rowID, current: nil)
    }

    /// Deletes row `rowID`; `current`, when given, is its record as this
    /// transaction has it now (saves reading it again for its index keys and
    /// external values; package access, as `update(_:in:rowID:current:)`).
    @discardableResult
    package func delete(from table: TableInfo, rowID: Int64, current: [UInt8]?) throws(KuraError) -> Bool {
        var h = try hotTable(table)
        let tree = h.tree
        if let schema = h.schema, schema.hasExternal {
            let stored: [UInt8]?
            if let current { stored = current } else { stored = try tree.get(RowIDKey.encode(rowID), writer!) }
            guard let old = stored else { return false }
            try releaseExternal(ofRecord: old, schema)
            // Releasing writes the external-file tables (another handle): take this one again.
            h = try hotTable(table)
        }
        if !h.indexes.isEmpty {
            let stored: [UInt8]?
            if let current { stored = current } else { stored = try tree.get(RowIDKey.encode(rowID), writer!) }
            guard let old = stored else { return false }
            for k in try indexKeys(h.indexes, record: old, rowID: rowID, schema: h.schema) { try k.index.tree.delete(k.key, writer!) }
        }
        guard try tree.delete(RowIDKey.encode(rowID), writer!) else { return false }
        h.info.rowCount -= 1
        h.dirty = true
        changeCount += 1
        return true
    }

    /// Sets `changes` (column position, value) on `rows` of `table`, each
    /// given with its record as this transaction has it now (a scan of it just
    /// read them; no row twice), in row-ID order so consecutive rows mostly
    /// land in the leaf the previous one changed. Returns `rows.count`.
    ///
    /// The new values are validated once, not per row, and put into each
    /// record by a `RecordPatch` (the other values' bytes are copied, never
    /// decoded). When no index reads a changed column, no index key is built
    /// or compared: the new record only replaces the old one in the table tree
    /// (in place in its leaf when the size is unchanged, BTree+Insert.swift).
    /// A record that does not store a changed column, and a table with
    /// external columns, take the full decode-validate-encode path.
    ///
    /// - Throws: `.typeMismatch`/`.constraintViolation` naming the column or
    ///   unique index (before any row changes for a bad value; rows updated
    ///   before a unique violation stay updated in this transaction).
    func updateRows(_ rows: [Row], in table: TableInfo, schema: TableSchema, set changes: [(Int, Value)]) throws(KuraError) -> Int {
        guard !rows.isEmpty else { return 0 }
        let h = try hotTable(table)
        // In column order, so that a bad value is reported as a full row's would be.
        var validated: [(position: Int, value: Value)] = []
        for (p, v) in changes.sorted(by: { $0.0 < $1.0 }) {
            validated.append((p, try schema.validatedChange(v, at: p, table: h.info.name)))
        }
        func whole(_ row: Row) throws(KuraError) {
            var values = try RecordCodec.decode(row.record)
            while values.count < schema.columns.count { values.append(schema.columns[values.count].defaultValue) }
            for (p, v) in validated { values[p] = v }
            if schema.hasExternal {
                _ = try withExternal(values, h.info, schema, old: row.record) { r throws(KuraError) in
                    try updateEncoded(r, in: table, rowID: row.rowID, current: row.record)
                }
                return
            }
            _ = try updateEncoded(try encode(values, for: hotTable(table)), in: table, rowID: row.rowID, current: row.record)
        }
        if schema.hasExternal {
            for row in rows { try whole(row) }
            return rows.count
        }
        var patch = RecordPatch(validated, compactDoubles: compactDoubles)
        let changed = Set(validated.map(\.position))
        let touchesIndex = h.indexes.contains { $0.columns.contains { changed.contains($0.position) } }
        let tree = h.tree
        for row in rows {
            guard let record = try patch.apply(to: row.record) else {
                try whole(row)
                continue
            }
            if touchesIndex {
                _ = try updateEncoded(record, in: table, rowID: row.rowID, current: row.record)
            } else if try tree.insert(RowIDKey.encode(row.rowID), record, mode: .replaceExisting, writer!) {
                changeCount += 1
            }
        }
        return rows.count
    }

    /// `record(in:rowID:)` for the object layer's save, which reads each
    /// row it updates or deletes (to check its version) just before writing
    /// it: the row-ID key is written into the table handle's reused buffer
    /// (no array per row), and the handle is the one the write then uses.
    package func currentRecord(in table: TableInfo, rowID: Int64) throws(KuraError) -> [UInt8]? {
        let h = try hotTable(table)
        var key: [UInt8] = []
        swap(&key, &h.keyBuffer)
        defer { swap(&key, &h.keyBuffer) }
        RowIDKey.write(rowID, over: &key)
        return try h.tree.getThroughLastLeaf(key, writer!)
    }

    /// Deletes rows `rowIDs` of `table`, `records[i]` being row `rowIDs[i]`'s
    /// record as this transaction has it now (the caller read it in this
    /// transaction and has not changed the row since; no row twice): the
    /// object layer's save of deleted objects, which reads each row to check
    /// its version first. Returns how many rows were deleted (a row ID the
    /// table does not have is skipped).
    ///
    /// As `deleteRows`: each index's entries go in key order, then the rows
    /// in row-ID order, so consecutive deletes mostly land in the leaf the
    /// previous one changed instead of descending from the root per row. The
    /// keys are built in the table handle's buffers (`IndexEntries`, as an
    /// insert builds them), without decoding the indexed values into
    /// `Value`s. A table with external columns releases their files row by
    /// row. A record that is not its row's leaves wrong index entries, hence
    /// package access only.
    ///
    /// - Throws: `.corrupt` for a malformed record; engine write errors.
    @discardableResult
    package func deleteRows(_ rowIDs: [Int64], records: [[UInt8]], from table: TableInfo) throws(KuraError) -> Int {
        precondition(rowIDs.count == records.count, "deleteRows: one record per row ID")
        let h = try hotTable(table)
        if h.hasExternal {
            var n = 0
            for i in rowIDs.indices where try delete(from: table, rowID: rowIDs[i], current: records[i]) { n += 1 }
            return n
        }
        try deleteIndexEntries(of: h, rows: rowIDs.count) { i, build throws(KuraError) in
            try records[i].withBytes { b throws(KuraError) in try build(b, rowIDs[i]) }
        }
        return try deleteRowKeys(rowIDs, of: h)
    }

    /// Deletes the index entries of `n` rows of `h` (none without indexes):
    /// `each(i, build)` calls `build` once with row `i`'s record (as this
    /// transaction has it now) and row ID. The keys are built in the
    /// handle's buffers (`IndexEntries`, as an insert builds them: no
    /// `Value` decoded per text column, no array per record), then each
    /// index's entries are deleted in key order.
    ///
    /// - Throws: `.corrupt` for a malformed record; engine write errors.
    /// Inlined into its two callers, so that the closures are too (a call
    /// through them per row cost about a hundred instructions).
    @inline(__always)
    private func deleteIndexEntries(of h: HotTable, rows n: Int,
                                    _ each: (Int, (UnsafeRawBufferPointer, Int64) throws(KuraError) -> Void) throws(KuraError) -> Void) throws(KuraError) {
        guard !h.indexes.isEmpty else { return }
        let entries = h.indexEntries
        let schema = h.schema
        let maxKey = Node.maxKey(database.pageSize)
        var keys: [[[UInt8]]] = Array(repeating: [], count: h.indexes.count)
        for k in keys.indices { keys[k].reserveCapacity(n) }
        for i in 0..<n {
            try each(i) { b, rowID throws(KuraError) in try entries.build(b, rowID: rowID, schema: schema, maxKey: maxKey) }
            for k in keys.indices { keys[k].append(entries.keys[k]) }
        }
        for k in keys.indices {
            _ = try BTree(root: entries.roots[k], kind: .index).delete(Self.inKeyOrder(keys[k]), writer!)
        }
    }

    /// `keys` in `bytesPrecede` order, compared first by their heads
    /// (`SortEntry.head(of:)`, the index sorter's order), so that most
    /// comparisons are one integer comparison.
    static func inKeyOrder(_ keys: [[UInt8]]) -> [[UInt8]] {
        var headed = keys.map { (head: SortEntry.head(of: $0), key: $0) }
        headed.sort { $0.head != $1.head ? $0.head < $1.head : bytesPrecede($0.key, $1.key) }
        return headed.map(\.key)
    }

    /// Deletes `rows` of `table`, each given with its record as this
    /// transaction has it now (a scan of it just read them; no row twice), and
    /// returns how many were deleted. Order makes the work cheap: each index's
    /// entries go in key order, then the rows in row-ID order, so consecutive
    /// deletes mostly land in the leaf the previous one changed (the tree's
    /// remembered leaf, BTree+Delete.swift) instead of descending from the root.
    /// A table with external columns releases their files row by row.
    func deleteRows(_ rows: [Row], from table: TableInfo) throws(KuraError) -> Int {
        let h = try hotTable(table)
        if let schema = h.schema, schema.hasExternal {
            var n = 0
            for row in rows {
                if try delete(from: table, rowID: row.rowID, current: row.record) { n += 1 }
            }
            return n
        }
        // Each record read where it lies (a scan's row borrows its page).
        try deleteIndexEntries(of: h, rows: rows.count) { i, build throws(KuraError) in
            try rows[i].withRecord { b throws(KuraError) in try build(b, rows[i].rowID) }
        }
        return try deleteRowKeys(rows.map(\.rowID), of: h)
    }

    /// Removes the rows `rowIDs` (their index entries already gone) from
    /// `h`'s tree in row-ID order, through the writer's remembered leaf, and
    /// counts them in the table's row count; returns how many there were
    /// (a row ID the table does not have is skipped).
    func deleteRowKeys(_ rowIDs: [Int64], of h: HotTable) throws(KuraError) -> Int {
        // Most callers give them in order already (a scan, a save's storage order).
        var ascending = true
        for i in rowIDs.indices.dropFirst() where rowIDs[i] < rowIDs[i - 1] {
            ascending = false
            break
        }
        let deleted = try h.tree.delete((ascending ? rowIDs : rowIDs.sorted()).map { RowIDKey.encode($0) }, writer!)
        if deleted > 0 {
            h.info.rowCount -= Int64(deleted)
            h.dirty = true
            changeCount += deleted
        }
        return deleted
    }

    // MARK: Commit

    /// Format 5: writes the counters of every table whose counters changed, or
    /// one of whose tree pages this transaction changed (a split or a merge
    /// may have rebuilt the right-most leaf without them), at the end of its
    /// tree's right-most leaf. A leaf that holds them already is not written:
    /// an append's commit writes no page for the counters. `hot`: the hot
    /// table the commit wrote back to `c`, whose counters it stores without
    /// a lookup when it is the only table concerned.
    func storeLeafCounters(_ c: Catalog, hot: HotTable? = nil) throws(KuraError) {
        let w = writer!
        let touched = w.touchedTableRoots
        if let h = hot, !h.dirty, changedTables.count == 1, changedTables.contains(h.info.name),
           touched.isEmpty || (touched.count == 1 && touched.contains(h.info.rootPage)) {
            // Only the hot table's counters changed and no other table's tree
            // was touched (a run of writes to one table): the names below
            // would be that table alone, and its counters those of `h`, just
            // written back to the catalog.
            try TableCounters.storeInLeaf(h.info.counters, root: h.info.rootPage, w)
            return
        }
        var names = changedTables
        if !touched.isEmpty {
            for (name, info) in c.entries where info.kind == "table" && touched.contains(info.rootPage) { names.insert(name) }
        }
        for name in names.sorted() {
            guard let info = c.entries[name], info.kind == "table" else { continue }
            let counted = try countedEntry(name) ?? info
            try TableCounters.storeInLeaf(counted.counters, root: info.rootPage, w)
        }
    }

    /// Moves a format-2 to format-8 store to this build's format (FORMAT.md,
    /// "Version history"): below format 5, every table's counters go from the
    /// counters tree to the end of its tree's right-most leaf and the counters
    /// tree is freed; then the header's version becomes 9 (whose log the next
    /// reset writes in log version 2, whose connections use reader marks, and
    /// whose writers build compact leaves and store integral doubles in
    /// serial types 10 and 11; the leaves and records already written keep
    /// their form, which format 9 reads as well). Part of this transaction: committed
    /// with it, or not at all. The caller makes sure no other connection has
    /// the store open (Database, `upgradeFormat`): an older build's connection
    /// would look for the counters tree, or take a version-2 log for garbage.
    func upgradeFormat() throws(KuraError) {
        let w = writer!
        let version = w.header.headerVersion
        guard version >= FileHeader.countersFormatVersion, version < FileHeader.formatVersion else { return }
        if version < FileHeader.leafCountersVersion {
            // Every table's counters, read from the counters tree now, go to
            // the leaves at commit (`storeLeafCounters`).
            let c = try loadCatalog()
            for (name, info) in c.entries where info.kind == "table" {
                _ = try countedEntry(name)
                changedTables.insert(name)
            }
            if w.header.headerCountersRoot != 0 {
                try TableCounters.tree(w.header.headerCountersRoot).destroy(w)
                w.header.headerCountersRoot = 0
            }
        }
        w.header.headerVersion = FileHeader.formatVersion
        w.markModified()
    }

    /// Writes changed catalog entries and commits. Called by `Database.write`.
    func commit() throws(KuraError) {
        try checkActive()
        try writer!.checkNotFailed()
        try collectExternalGarbage()
        // The hot table's counters go to the catalog; the handle itself is
        // kept for `tableCarry` (nothing below changes a counter or the schema).
        // The flush writes their counters back (`dirty` cleared); a
        // transaction without a catalog has no handle.
        let kept = hot
        let keptParked = parked
        if catalog != nil { flushHotTable() }
        let w = writer!
        if let c = catalog {
            let root = w.currentHeader.headerCatalogRoot
            let leafCounters = w.currentHeader.headerVersion >= FileHeader.leafCountersVersion
            for info in droppedTables {
                try Catalog.remove(info, root: root, w)
                if info.kind == "table" && !leafCounters && w.currentHeader.headerCountersRoot != 0 {
                    try TableCounters.remove(id: info.id, root: w.currentHeader.headerCountersRoot, w)
                }
            }
            for name in schemaChanged.sorted() {
                if let info = c.entries[name] { try Catalog.store(info, root: root, w) }
            }
            if leafCounters {
                try storeLeafCounters(c, hot: kept)
            } else {
                for name in changedTables.sorted() {
                    guard let info = c.entries[name], info.kind == "table" else { continue }
                    // Created with the first table's counters (after its tree's pages).
                    if w.header.headerCountersRoot == 0 { w.header.headerCountersRoot = try BTree.create(.table, in: w) }
                    try TableCounters.store(info.counters, id: info.id, root: w.header.headerCountersRoot, w)
                }
            }
            if localSchemaGeneration != 0 {
                w.header.headerSchemaCookie += 1
                w.markModified()
            }
        }
        guard w.modified else {
            hot = kept
            parked = keptParked
            return
        }
        try w.commit()
        hot = kept
        parked = keptParked
    }
}

/// Numbers that tell the schemas of uncommitted write transactions apart.
final class SchemaGenerations: @unchecked Sendable {
    // @unchecked Sendable: `last` is guarded by `lock`.
    static let shared = SchemaGenerations()
    private let lock = ThreadLock()
    private var last: UInt64 = 0

    /// A number no earlier call returned (never 0).
    func next() -> UInt64 { lock.withLock { last += 1; return last } }
}
