// Database: a connection to one Kura store file.
//
// A `Database` owns the store's pager (page cache, log, locks). Transactions are
// closures: `read { }` runs on a snapshot taken when it starts, in parallel with
// other readers and with the writer; `write { }` runs alone among writers, and
// commits when its closure returns or rolls everything back when it throws.
//
// Format: FORMAT.md. Concurrency and durability: FORMAT.md, "Commit" and
// "Concurrency".

/// A connection to a Kura store.
///
/// ## Topics
/// - Opening: ``init(path:options:)``, ``inMemory(options:)``
/// - Transactions: ``read(_:)``, ``write(_:)``
/// - Maintenance: ``checkpoint()``, ``close()``
///
/// Thread rules: a `Database` is `Sendable`; call `read` and `write` from any
/// thread. Any number of `read`s run at once, each on its own snapshot. `write`s
/// in one connection wait for each other; across connections and processes they
/// wait up to ``Options/busyTimeout`` for the store's write lock, then throw
/// `KuraError.busy`.
///
/// Lifetime: the transaction objects handed to the closures are valid only inside
/// them; using one afterwards throws `KuraError.misuse`. After ``close()`` every
/// call throws `.misuse`.
public final class Database: Sendable {
    /// How a store is opened.
    public struct Options: Sendable {
        /// Page size for a new store (power of two, 512 to 65536). An existing
        /// store keeps the page size it was created with.
        public var pageSize: Int = 4096
        /// Memory for cached pages, in bytes. Scans of stores many times larger
        /// stay within it (plus the pages a cursor currently holds). A scan of
        /// a whole table (a query no index serves, `rows(in:)` from one end)
        /// caches the pages it reads from disk only when a scan reads them
        /// again: one pass over a table does not fill this memory, a table
        /// scanned repeatedly is cached from its second scan on; lookups and
        /// index ranges cache every page they read.
        public var cacheSize: Int = 32 << 20
        /// When commits are synced to disk.
        public var durability: Durability = .full
        /// How long to wait for another connection's write lock (seconds).
        public var busyTimeout: Double = 5
        /// Checkpoint automatically once the log holds this many pages.
        public var checkpointThreshold: Int = 1000
        /// Largest log file (`PATH-wal`, bytes) an automatic checkpoint keeps.
        /// After a checkpoint the log is rewritten from its start; a file longer
        /// than this (one large transaction made it so) is cut back to this
        /// length, so it does not keep its disk space, while a shorter one is
        /// kept as it is, since cutting a file and growing it again costs the
        /// file system more than rewriting it. ``Database/checkpoint()`` and
        /// ``close()`` cut the log to its 40-byte header whatever this says.
        /// SQLite's counterpart is `PRAGMA journal_size_limit`. A value smaller
        /// than one log frame (page size plus 24 bytes) cuts the log at every
        /// automatic checkpoint; the default is 64 MiB.
        public var logSizeLimit: Int = 64 << 20
        /// Create the file if it does not exist.
        public var createIfMissing = true
        /// Values of `external` columns of at least this many bytes are stored
        /// in files beside the store (FORMAT.md, "External values"); smaller
        /// ones stay in the record. Core Data documents no threshold; Kura's
        /// default is 128 KiB.
        public var externalThreshold: Int = 128 << 10
        /// Where files live; `PosixFileSystem()` by default.
        public var fileSystem: any FileSystem = PosixFileSystem()

        public init() {}
    }

    let pager: Pager
    /// The store's path.
    public let path: String
    /// The options the store was opened with.
    public let options: Options
    private let catalogCache = CatalogCache()
    /// Read transactions' table resolution kept across them (TableHandle.swift).
    let tableHandleCache = TableHandleCache()
    /// Transactions enter it; `close()` shuts it and waits for them.
    let gate = TransactionGate()
    /// The commit watcher, once someone observes commits.
    let watcherSlot = CommitWatcherSlot()
    /// Whether this connection swept orphaned external files yet.
    let externalState = ExternalState()
    /// What the last write transaction handed the next (PageSource.swift, "Carry").
    let writerCarry = WriterCarrySlot()
    /// The catalog and hot table the last write transaction handed the next (TableHandle.swift, `WriterTables`).
    let writerTables = WriterTablesSlot()
    /// The read transaction kept for the next one (Transaction.swift).
    let spareRead = SpareReadTransaction()

    /// Opens the store at `path`, creating it if missing (unless
    /// `options.createIfMissing` is false). Recovers committed transactions from
    /// the log.
    ///
    /// - Throws: `.notFound` (missing and not to be created), `.notADatabase`,
    ///   `.unsupportedVersion`, `.corrupt` (bad header, truncated file), `.busy`
    ///   (another process is creating the file), `.io`.
    public init(path: String, options: Options = Options()) throws(KuraError) {
        self.path = path
        self.options = options
        pager = try Pager(path: path, fs: options.fileSystem, pageSize: options.pageSize,
                          cacheBytes: options.cacheSize,
                          durability: options.durability, busyTimeout: options.busyTimeout,
                          checkpointThreshold: options.checkpointThreshold, logSizeLimit: options.logSizeLimit,
                          create: options.createIfMissing,
                          validator: { (p: Page) throws(KuraError) in try Node.validate(p) },
                          summarizer: { (p: Page) in Node.summarizeBuilt(p) })
        if pager.openedAlone {
            if pager.versionOpenedAlone >= FileHeader.countersFormatVersion && pager.versionOpenedAlone < FileHeader.formatVersion,
               upgradeFormat() {
                pager.adoptReaderMarks()
            }
            try pager.finishOpening()
        }
    }

    /// Moves a format-2 to format-8 store to format 9 (counters in the tables'
    /// right-most leaves, a log of version 2, reader marks, compact leaf cells
    /// in the leaves writers build from then on, integral doubles in serial
    /// types 10 and 11 in the rows they write; FORMAT.md, "Version
    /// history"): one write transaction, then a checkpoint, so that the store
    /// file says 9 before any other connection can open it, and the log is
    /// reset in version 2. Returns whether the transaction committed.
    /// Called only while this connection is the only one with the store open
    /// (`Pager.openedAlone`): a connection of an older build would
    /// look for the counters tree or take the new log for garbage. A failure
    /// (a full disk, an I/O error, a damaged tree) leaves the old format, which
    /// works as before; the next connection that opens the store alone tries again.
    private func upgradeFormat() -> Bool {
        do {
            // The transaction decides from its own header (the log may hold a newer one than the file).
            try write { tx in try tx.upgradeFormat() }
        } catch {
            // Not an error of the open: see above.
            return false
        }
        // Committed: the store is at the new format even if the checkpoint
        // fails (its log then holds the new page 1, which connections that
        // open it read at recovery).
        do {
            _ = try checkpoint()
        } catch {
            // Nothing lost: the log keeps the commit, and a later commit's
            // checkpoint copies it.
        }
        return true
    }

    /// A store that lives in memory only, gone when the `Database` is released.
    public static func inMemory(options: Options = Options()) throws(KuraError) -> Database {
        var o = options
        o.fileSystem = MemoryFileSystem()
        o.durability = .off
        return try Database(path: ":memory:", options: o)
    }

    deinit {
        watcherSlot.current?.stop()
        pager.close()
    }

    /// Page size of the store.
    public var pageSize: Int { pager.pageSize }

    /// Runs `body` on a snapshot of the database as of now. Other transactions
    /// committing meanwhile do not change what it sees.
    ///
    /// - Throws: whatever `body` throws; `KuraError` for I/O errors, corruption,
    ///   or `.busy` if another process is checkpointing past the busy timeout.
    @discardableResult
    public func read<T>(_ body: (ReadTransaction) throws -> T) throws -> T {
        try gate.enter(path: path)
        defer { gate.leave() }
        let snapshot = try pager.beginTransaction()
        defer { pager.endTransaction(snapshot) }
        var tx = openRead(snapshot)
        defer { closeRead(&tx) }
        return try body(tx)
    }

    /// The values of row `rowID` of table `name` (schema defaults filled in, as
    /// `ReadTransaction.values(in:rowID:)` gives them), or nil if there is no
    /// such row, read in a transaction of its own on the newest committed
    /// state: the same answer as `read { tx in try tx.values(in: try
    /// tx.table(name), rowID: rowID) }`. The object layer faults one object
    /// in this way.
    ///
    /// It runs in the read transaction the connection keeps for reuse
    /// (`SpareReadTransaction`): on the same snapshot as the one before, the
    /// table's handle and the pages of the last descents are where that one
    /// left them.
    ///
    /// Thread rules: any thread, like `read`. Failure modes: as `read` and
    /// `ReadTransaction.values(in:rowID:)` (`.notFound` for an unknown table,
    /// `.corrupt` naming the page).
    package func values(inTable name: String, rowID: Int64) throws(KuraError) -> [Value]? {
        try readTyped { tx throws(KuraError) in try tx.values(inTableNamed: name, rowID: rowID) }
    }

    /// `read` for the engine's own one-row reads (`values(inTable:rowID:)`,
    /// `withRecord(inTable:rowID:_:)`): the same gate, snapshot registration
    /// and kept transaction, with typed throws, so that no error is boxed and
    /// the body is inlined rather than called through a generic closure.
    @inline(__always)
    func readTyped<T>(_ body: (ReadTransaction) throws(KuraError) -> T) throws(KuraError) -> T {
        try gate.enter(path: path)
        defer { gate.leave() }
        let snapshot = try pager.beginTransaction()
        defer { pager.endTransaction(snapshot) }
        var tx = openRead(snapshot)
        defer { closeRead(&tx) }
        return try body(tx)
    }

    /// A read transaction on `snapshot`: the one this connection kept from an
    /// earlier transaction (`SpareReadTransaction`), or a new one.
    @inline(__always)
    private func openRead(_ snapshot: Snapshot) -> ReadTransaction {
        if let tx = spareRead.take() {
            tx.reopen(self, on: snapshot)
            return tx
        }
        return ReadTransaction(database: self, pages: SnapshotPages(pager: pager, snapshot: snapshot))
    }

    /// Ends read transaction `tx` (every later use throws `misuse`) and keeps
    /// it for the next one if nothing but `tx` refers to it or its pages: a
    /// transaction the closure kept (stored, or a cursor of it) is never
    /// handed to another closure.
    @inline(__always)
    private func closeRead(_ tx: inout ReadTransaction) {
        tx.invalidate()
        if isKnownUniquelyReferenced(&tx), tx.park() { spareRead.put(tx) }
    }

    /// Runs `body` as the only writer, then commits its changes atomically. If
    /// `body` throws, every change it made is discarded and the error rethrown.
    ///
    /// - Throws: whatever `body` throws; `KuraError.busy` if another connection
    ///   holds the write lock past the busy timeout; `.diskFull` or `.io` if the
    ///   commit cannot be written (then nothing is committed).
    @discardableResult
    public func write<T>(_ body: (WriteTransaction) throws -> T) throws -> T {
        try gate.enter(path: path)
        defer { gate.leave() }
        let snapshot = try pager.beginWrite()
        var committed = false
        defer { pager.endWrite(snapshot, checkpointIfDue: committed) }
        // Taken whatever happens: a transaction that rolls back hands nothing on.
        let writer = try PageWriter(pager: pager, snapshot: snapshot, carried: writerCarry.take())
        let tx = WriteTransaction(database: self, writer: writer)
        // Taken whatever happens too; used only if made for this snapshot.
        tx.adopt(writerTables.take())
        defer {
            // Rolled back: its external files go before the writer lock does.
            if !committed { tx.removeUncommittedExternalFiles() }
            tx.invalidate()
        }
        let result = try body(tx)
        try tx.commit()
        committed = true
        // The snapshot the commit made (or, if it wrote nothing, the one it
        // ran on): still the newest, as this connection holds the writer lock.
        let pager = self.pager
        let serial = pager.state.withShared { pager.latest.serial }
        writerCarry.keep(writer.carry(to: serial))
        writerTables.keep(tx.tableCarry(to: serial))
        watcherSlot.current?.poke()
        return result
    }

    /// Copies the log into the store file and empties it. Returns false if
    /// another process is inside a transaction (try again later). Kura also does
    /// this on its own once the log passes `checkpointThreshold` pages.
    @discardableResult
    public func checkpoint() throws(KuraError) -> Bool {
        try gate.enter(path: path)
        defer { gate.leave() }
        return try pager.checkpointAsWriter(truncatingLog: true)
    }

    /// Closes the connection: new transactions throw `.misuse` from now on; the
    /// transactions other threads are running finish first (`close` waits for
    /// them), then the log is checkpointed if possible and the files are closed.
    /// No file descriptor is used after that.
    ///
    /// Called from inside one of this database's own transactions, `close`
    /// returns at once and the files are closed when the last running transaction
    /// ends (it cannot wait for itself). Calling it again does nothing.
    ///
    /// Failure modes: none reported. The checkpoint on the way out is only a
    /// convenience, taken only if no other connection holds the write lock at
    /// that moment (close never waits for the busy timeout): if it is skipped or
    /// fails (another connection writing or reading, a read-only file, a disk
    /// error), the committed transactions stay in the log and the next open
    /// recovers them.
    public func close() {
        let pager = self.pager
        watcherSlot.current?.stop()
        gate.close {
            do { _ = try pager.checkpointAsWriter(truncatingLog: true, waiting: false) } catch {
                // Nothing is lost: see "Failure modes" above.
            }
            pager.close()
        }
    }

    /// Pages currently in the cache (for tests of the memory bound).
    package var cachedPageCount: Int { pager.cachedPageCount }

    /// Snapshots in use (for tests: zero when no transaction runs).
    package var activeSnapshotCount: Int { pager.activeSnapshotCount }

    /// Frames in the log (for tests and `kura info`).
    public var logFrameCount: Int { pager.logFrames }

    // MARK: Catalog cache

    /// The catalog as of the snapshot whose header is `header`: decoded once per
    /// schema cookie (format 1: per change counter, its records hold counters),
    /// then shared by every transaction until a schema change. Table counters in
    /// it are placeholders in format 2 (`ReadTransaction.withCounters`).
    func catalog<S: PageSource>(_ s: S) throws(KuraError) -> Catalog {
        let header = try s.page(1)
        let key = CatalogCache.Key(header)
        if let c = catalogCache.get(key) { return c }
        var c = try Catalog.load(header: header, s)
        c.decodeSchemas()
        catalogCache.set(key, c)
        return c
    }
}

/// One decoded catalog, keyed by the schema it was read at.
final class CatalogCache: @unchecked Sendable {
    // @unchecked Sendable: `entry` is guarded by `lock`.
    private let lock = ThreadLock()
    private var entry: (Key, Catalog)?

    /// What identifies a catalog's contents: the store, its format, and the
    /// schema cookie (format 2) or change counter (format 1). Cookies only grow
    /// (compaction too moves the cookie on), so equal keys mean equal catalogs.
    struct Key: Equatable {
        let databaseID: UInt64
        let version: UInt32
        let stamp: UInt64

        init(_ header: Page) {
            databaseID = header.headerDatabaseID
            version = header.headerVersion
            stamp = version == 1 ? header.headerChangeCounter : header.headerSchemaCookie
        }
    }

    func get(_ key: Key) -> Catalog? {
        lock.withLock { entry.flatMap { $0.0 == key ? $0.1 : nil } }
    }

    func set(_ key: Key, _ c: Catalog) { lock.withLock { entry = (key, c) } }
}
