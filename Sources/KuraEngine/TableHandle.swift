// TableHandle: one table resolved once for a transaction — catalog entry with
// its counters, schema, indexes, tree, and (read side) the column map queries
// compile against — so row operations and queries do no lookup by name.
//
// Write transactions keep the table they last wrote as their `HotTable` (the
// same type): its counters are updated in place and written back to the
// catalog before anything else reads or changes it (Transaction.swift).
//
// Read transactions keep one handle per table they touch (`readHandle`). A read
// transaction's snapshot never changes, so a handle stays right for the whole
// transaction: its schema, indexes and root come from the catalog of that
// snapshot and its counters from the counters tree of that snapshot. Handles are
// not kept across transactions: the counters of a table (row count, next row
// ID) change with every commit, and a handle carries them. What does not change
// between commits is kept across them, per connection (`TableHandleCache`): the
// resolved entry, schema and indexes (`ResolvedTable`) for as long as the schema
// cookie stays the same, and the counters of the newest snapshot read.
// A write transaction's hot table, with its catalog, is handed to the
// connection's next write transaction (`WriterTables`) only when that one
// starts on the snapshot the first one's commit made: nothing changed the
// store in between, so the counters it carries are still the stored ones.
//
// Invariant: `info.id`, `info.name` and `info.rootPage` identify the table; a
// caller holding a `TableInfo` uses a handle only if id and name match (a table
// dropped and re-created under the same name has a new catalog ID).

final class TableHandle {
    // `@exclusivity(unchecked)` on the fields only a write transaction
    // changes (`info`'s counters, `dirty`, the insert buffers): a handle that
    // holds them is used by the one thread running that transaction, one
    // call at a time (Transaction.swift, `hot` and `parked`), so no two
    // accesses overlap; unchecked, a row's insert makes no runtime access
    // check for them.
    @exclusivity(unchecked) var info: TableInfo
    let schema: TableSchema?
    /// Whether the table has `external` columns: kept apart so that a
    /// write's and a fault's per-row check reads a flag rather than copy the
    /// optional schema out of the handle (which retains and releases each of
    /// its arrays).
    let hasExternal: Bool
    /// `schema` behind one reference, for a write's per-row `validate`:
    /// unwrapping the optional struct copied it (a retain and a release of
    /// each of its arrays, about 120 instructions a row).
    let validator: SchemaValidator?
    let indexes: [IndexDefinition]
    let tree: BTree
    /// One past the highest column position any index reads (0 without indexes).
    let indexedWidth: Int
    /// The positions of the columns some index reads, each once, ascending.
    let indexedPositions: [Int]
    @exclusivity(unchecked) var dirty = false
    /// Reused buffers locating the indexed columns of an old and a new record
    /// (made on first use: read handles never need them).
    /// Stored, not `lazy`: a lazy property is changed through a get and a
    /// set, so each `load` copied both buffers (two allocations per record
    /// and update); `prepareFields` sizes them on first use.
    @exclusivity(unchecked) private(set) var oldFields = RecordFields(columns: 0)
    @exclusivity(unchecked) private(set) var newFields = RecordFields(columns: 0)

    @inline(__always)
    private func prepareFields() {
        if oldFields.wanted != indexedWidth {
            oldFields = RecordFields(columns: indexedWidth)
            newFields = RecordFields(columns: indexedWidth)
        }
    }
    /// Reused by a write transaction's inserts into this table (`insertRow`,
    /// `insertEncoded`): the record and the row-ID key of the row being
    /// inserted. Taken out of the handle while in use (`swap`), so each is
    /// uniquely referenced and written without an allocation once grown; only
    /// the writer holding the handle touches them (read handles never do).
    @exclusivity(unchecked) var recordBuffer: [UInt8] = []
    @exclusivity(unchecked) var keyBuffer: [UInt8] = []
    /// The index keys of the row an insert is writing (IndexEntries.swift),
    /// made on a write's first insert into a table with indexes.
    var indexEntries: IndexEntries {
        if let e = madeIndexEntries { return e }
        let e = IndexEntries(indexes, width: indexedWidth)
        madeIndexEntries = e
        return e
    }
    @exclusivity(unchecked) private var madeIndexEntries: IndexEntries?
    /// Column names to positions, made on first use by a query.
    private var columnMap: ColumnMap?

    init(info: TableInfo, schema: TableSchema?, indexes: [IndexDefinition]) {
        self.info = info
        self.schema = schema
        hasExternal = schema?.hasExternal ?? false
        validator = schema.map(SchemaValidator.init)
        self.indexes = indexes
        tree = BTree(root: info.rootPage, kind: .table)
        indexedWidth = TableHandle.indexedWidth(indexes)
        indexedPositions = TableHandle.indexedPositions(indexes)
    }

    /// A read handle from a connection's resolved table and the counters of
    /// the transaction's snapshot (`info` is `resolved.entry` with them).
    init(info: TableInfo, resolved: ResolvedTable) {
        self.info = info
        schema = resolved.schema
        hasExternal = resolved.schema?.hasExternal ?? false
        validator = resolved.validator
        indexes = resolved.indexes
        tree = BTree(root: info.rootPage, kind: .table)
        indexedWidth = resolved.indexedWidth
        indexedPositions = TableHandle.indexedPositions(indexes)
    }

    static func indexedPositions(_ indexes: [IndexDefinition]) -> [Int] {
        Set(indexes.flatMap { $0.columns.map(\.position) }).sorted()
    }

    static func indexedWidth(_ indexes: [IndexDefinition]) -> Int {
        indexes.lazy.flatMap { $0.columns.lazy.map { $0.position + 1 } }.max() ?? 0
    }

    /// Whether `table` names this handle's table (same catalog ID and name).
    @inline(__always)
    func isHandle(of table: TableInfo) -> Bool { info.id == table.id && info.name == table.name }

    /// The table's column map (made once).
    var columns: ColumnMap {
        if let c = columnMap { return c }
        let c = ColumnMap(table: info.name, schema: schema)
        columnMap = c
        return c
    }

    /// Whether some column an index reads may differ between the records
    /// `old` and `new` (`indexesChanged` for all indexes at once, without an
    /// array or a copy of each index's definition): an update that changes
    /// no indexed column (most saves of edited objects) then writes the
    /// record alone. A column missing from one record counts as changed.
    ///
    /// - Throws: `.corrupt` if either record's header is malformed.
    func anyIndexedColumnChanged(old: [UInt8], new: [UInt8]) throws(KuraError) -> Bool {
        try old.withBytes { o throws(KuraError) -> Bool in
            try new.withBytes { n throws(KuraError) -> Bool in
                prepareFields()
                try oldFields.load(o)
                try newFields.load(n)
                for p in indexedPositions where !oldFields.sameField(p, as: newFields) { return true }
                return false
            }
        }
    }

    /// For each index, whether its key may differ between the records `old`
    /// and `new`: false only when every column it reads has the same serial
    /// type and body bytes in both (equal bytes give equal keys). A column
    /// missing from one record (written before the column was added) counts
    /// as changed, so its key is built and compared as before.
    ///
    /// - Throws: `.corrupt` if either record's header is malformed.
    func indexesChanged(old: [UInt8], new: [UInt8]) throws(KuraError) -> [Bool] {
        try old.withBytes { o throws(KuraError) -> [Bool] in
            try new.withBytes { n throws(KuraError) -> [Bool] in
                prepareFields()
                try oldFields.load(o)
                try newFields.load(n)
                return indexes.map { index in
                    index.columns.contains { !oldFields.sameField($0.position, as: newFields) }
                }
            }
        }
    }
}

/// What a read handle holds that depends only on the schema: the catalog entry
/// (its counters are placeholders), the decoded schema and the indexes.
/// Immutable; shared by the read transactions of one connection through
/// `TableHandleCache` while the schema cookie stays the same.
final class ResolvedTable: Sendable {
    let entry: TableInfo
    let schema: TableSchema?
    /// `schema` behind one reference (`TableHandle.validator`), shared by
    /// the handles made from this.
    let validator: SchemaValidator?
    let indexes: [IndexDefinition]
    let indexedWidth: Int

    init(entry: TableInfo, schema: TableSchema?, indexes: [IndexDefinition]) {
        self.entry = entry
        self.schema = schema
        validator = schema.map(SchemaValidator.init)
        self.indexes = indexes
        indexedWidth = TableHandle.indexedWidth(indexes)
    }
}

/// A table schema behind a reference, so that the per-row check of an
/// insert (`WriteTransaction.insertRow`, `encode(_:for:)`) reads it in place
/// through one pointer instead of copying the struct out of an optional.
///
/// Thread rules: immutable, any thread.
final class SchemaValidator: Sendable {
    let schema: TableSchema

    init(_ schema: TableSchema) { self.schema = schema }

    /// `schema.validate(values, table:)`.
    @inline(__always)
    func validate(_ values: [Value], table: String) throws(KuraError) -> [Value] {
        try schema.validate(values, table: table)
    }
}

/// One connection's read-side table resolution, kept across read transactions
/// so that a transaction that reads one row does no catalog lookup:
///
/// - resolved tables by name, valid for the catalog `key` they were made at
///   (database ID, format, schema cookie; format 1: change counter). A schema
///   change by any connection moves the cookie on, so a transaction whose
///   header page has another key finds nothing here and resolves again; the
///   table's catalog ID is checked too.
/// - table counters as of one snapshot (the last one a reader stored them
///   for), and the read handles made for that snapshot, which its later
///   transactions share instead of each making its own (`sharedHandle`). A
///   snapshot's pages never change, so its counters do not either. The
///   snapshot is named by its serial, never reused, rather than held (it may
///   hold preserved pages) or referenced weakly (which would slow every
///   retain of it, see `Snapshot.serial`).
///
/// Thread rules: any thread; lookups take `lock` shared (readers of one
/// connection look up side by side), stores exclusively.
final class TableHandleCache: @unchecked Sendable {
    // @unchecked Sendable: every field is guarded by `lock` (a readers-writer
    // lock: only loads happen under it shared). No runtime access checks on
    // them: the lock orders every access.
    private let lock = SpinReadWriteLock()
    @exclusivity(unchecked) private var key: CatalogCache.Key?
    @exclusivity(unchecked) private var tables: [String: ResolvedTable] = [:]
    /// `Snapshot.serial` of the snapshot `counters` and `snapshotHandles`
    /// hold; 0 for none.
    @exclusivity(unchecked) private var countersSnapshot: UInt64 = 0
    @exclusivity(unchecked) private var counters: [Int64: TableCounters] = [:]
    /// Read handles of that snapshot by table name. Shared by read
    /// transactions on any thread, so never changed once stored: a read
    /// handle's column map is made before it is stored (`share`), and read
    /// transactions never change a handle's `info`, `dirty` or field buffers
    /// (only a write transaction's `HotTable`, which is never stored here).
    @exclusivity(unchecked) private var snapshotHandles: [String: TableHandle] = [:]
    /// The handle of `snapshotHandles` stored last: most transactions of a
    /// connection use the table the one before used, and comparing a name
    /// costs less than hashing it.
    @exclusivity(unchecked) private var lastShared: TableHandle?

    /// The read handle of table `name` stored for `snapshot`, if any.
    func sharedHandle(_ name: String, snapshot: Snapshot) -> TableHandle? {
        lock.withShared {
            guard countersSnapshot == snapshot.serial else { return nil }
            if let h = lastShared, h.info.name == name { return h }
            return snapshotHandles[name]
        }
    }

    /// Stores read handle `h`, made in a read transaction of `snapshot`, for
    /// that snapshot's later transactions.
    func share(_ h: TableHandle, snapshot: Snapshot) {
        _ = h.columns
        lock.withLock {
            if moveTo(snapshot) {
                snapshotHandles[h.info.name] = h
                lastShared = h
            }
        }
    }

    /// Makes `snapshot` the one counters and handles are kept for, unless the
    /// cache holds a snapshot made after it (serials grow with creation):
    /// readers of an older snapshot, still running beside readers of the
    /// newest one while a writer commits, would otherwise evict the newest
    /// snapshot's entries at every store, and each side would read its
    /// counters again. Returns whether the cache is now `snapshot`'s. Caller
    /// holds `lock` exclusively.
    private func moveTo(_ snapshot: Snapshot) -> Bool {
        if countersSnapshot == snapshot.serial { return true }
        guard snapshot.serial > countersSnapshot else { return false }
        countersSnapshot = snapshot.serial
        counters.removeAll(keepingCapacity: true)
        snapshotHandles.removeAll(keepingCapacity: true)
        lastShared = nil
        return true
    }

    /// The table resolved as `name` at catalog `key`, and its counters if they
    /// are known for `snapshot`.
    func lookup(_ name: String, key: CatalogCache.Key, snapshot: Snapshot) -> (ResolvedTable, TableCounters?)? {
        lock.withShared {
            guard self.key == key, let r = tables[name] else { return nil }
            return (r, countersSnapshot == snapshot.serial ? counters[r.entry.id] : nil)
        }
    }

    /// The table resolved as `name` at catalog `key`, if stored (a write
    /// transaction's hot table: its counters come from the transaction).
    func resolved(_ name: String, key: CatalogCache.Key) -> ResolvedTable? {
        lock.withShared { self.key == key ? tables[name] : nil }
    }

    /// Counters of table `id` in `snapshot`, if stored.
    func counters(_ id: Int64, snapshot: Snapshot) -> TableCounters? {
        lock.withShared { countersSnapshot == snapshot.serial ? counters[id] : nil }
    }

    func store(_ r: ResolvedTable, key: CatalogCache.Key) {
        lock.withLock {
            if self.key != key {
                self.key = key
                tables.removeAll()
            }
            tables[r.entry.name] = r
        }
    }

    func store(_ c: TableCounters, id: Int64, snapshot: Snapshot) {
        lock.withLock {
            if moveTo(snapshot) { counters[id] = c }
        }
    }
}

/// What a write transaction that committed hands the next write transaction
/// of its connection (`Database.write`): its catalog (with the counters of
/// every table it looked up, `WriteTransaction.counted`) and its table handles,
/// as of `serial`, the snapshot its commit made. Valid only for a write
/// transaction that starts on that very snapshot (`Snapshot.serial`: no commit
/// by any connection or process, no checkpoint and no log refresh came in
/// between, so the catalog and counters are still the store's, page for
/// page), at the same catalog key (`key`: database ID, format, schema cookie).
/// Made only by a transaction that changed no schema (`WriteTransaction.tableCarry`).
/// A one-row commit that follows then does no catalog lookup, no counters
/// descent and no handle allocation. A class, so that handing it over copies
/// one reference. Immutable.
final class WriterTables {
    let serial: UInt64
    let key: CatalogCache.Key
    let catalog: Catalog
    let counted: Set<Int64>
    let hot: TableHandle?
    /// The transaction's other handles (`WriteTransaction.parked`).
    let parked: [TableHandle]

    init(serial: UInt64, key: CatalogCache.Key, catalog: Catalog, counted: Set<Int64>, hot: TableHandle?, parked: [TableHandle]) {
        self.serial = serial
        self.key = key
        self.catalog = catalog
        self.counted = counted
        self.hot = hot
        self.parked = parked
    }
}

/// One connection's `WriterTables` from its last write transaction to its
/// next, taken by the next writer whatever its snapshot (so a transaction
/// that rolls back hands nothing on).
final class WriterTablesSlot: @unchecked Sendable {
    // @unchecked Sendable: `tables` is guarded by `lock`. The handle and
    // catalog it holds are used only by the write transaction that took them,
    // which holds the connection's writer lock; the lock orders the handover
    // between the threads of two successive write transactions.
    private let lock = ThreadLock()
    private var tables: WriterTables?

    func take() -> WriterTables? { lock.withLock { () -> WriterTables? in defer { tables = nil }; return tables } }

    func keep(_ t: WriterTables?) { lock.withLock { tables = t } }
}
