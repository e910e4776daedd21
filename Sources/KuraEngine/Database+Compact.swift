// Database+Compact: compaction in place, through the log (as SQLite's VACUUM).
//
// Other connections, in this process or others, may keep the store open and keep
// using it: the store file is never replaced or renamed, so nobody is left
// writing into an unlinked file. The steps:
//
//   1. Start a write transaction: from here to the commit no other connection of
//      any process can commit, so the copy is of one consistent state.
//   2. Copy every table and index, in catalog-ID order, into a scratch store in
//      memory with the same page size: same names, catalog IDs, definitions, row
//      IDs, next row IDs and row counts, keys in key order (appending fills pages
//      completely, FORMAT.md "Tree pages"). Check the copy's integrity.
//   3. Commit, as one ordinary transaction, the copy's pages 1...N as the store's
//      pages 1...N with page count N: page 1 keeps the store's database ID, and
//      its change counter goes on from the store's (so every cache keyed by it is
//      invalidated). Readers that started earlier keep their snapshots; readers
//      that start later see the compacted store. A crash before the commit
//      record is durable leaves the old store; after it, recovery replays it.
//   4. Checkpoint. The checkpoint copies pages 1...N into the file and, because
//      the page count went down, truncates the file to N pages (Pager.checkpoint,
//      step 2b). If another process is inside a transaction the checkpoint waits
//      for a later commit or checkpoint; the data is already compact in the log.
//
// Memory: the scratch copy and the transaction's pages are held in memory (about
// twice the compacted size) until the write transaction can spill to the log.
//
// Format: nothing new on disk (FORMAT.md, "Keeping the log bounded" describes the
// truncation at checkpoint).

extension Database {
    /// What ``compact()`` did.
    public struct CompactionResult: Sendable {
        /// Pages in the store before compaction.
        public var pagesBefore = 0
        /// Free pages (on the freelist) before compaction.
        public var freePagesBefore = 0
        /// Pages in the store after compaction.
        public var pagesAfter = 0
        /// The store's page size in bytes.
        public var pageSize = 0
        /// Tables and indexes copied.
        public var objects = 0
        /// Whether the store file was already cut to `pagesAfter` pages. False when
        /// another process was inside a transaction at the end: a later
        /// checkpoint cuts it (the compacted data is committed either way).
        public var fileTruncated = false
    }

    /// Rewrites the store without free pages, in place, and shrinks the file.
    ///
    /// Safe while other connections and processes have the store open: they keep
    /// reading their snapshots and see the compacted store in their next
    /// transaction. Like a write transaction, it waits up to the busy timeout for
    /// other writers.
    ///
    /// - Returns: page counts before and after.
    /// - Throws: `.busy` if another connection holds the write lock past the busy
    ///   timeout; `.corrupt` if the store cannot be read (nothing is changed);
    ///   `.diskFull`/`.io` if the commit cannot be written (nothing is changed);
    ///   `.misuse` after ``close()``.
    @discardableResult
    public func compact() throws(KuraError) -> CompactionResult {
        try gate.enter(path: path)
        defer { gate.leave() }
        var out = CompactionResult()
        out.pageSize = pageSize
        do {
            let snapshot = try pager.beginWrite()
            defer { pager.endWrite(snapshot) }
            let w = try PageWriter(pager: pager, snapshot: snapshot)
            let header = w.header
            out.pagesBefore = Int(header.headerPageCount)
            out.freePagesBefore = Int(header.headerFreeCount)
            let pages = try Database.compactedPages(of: w, pageSize: pageSize, objects: &out.objects)
            out.pagesAfter = pages.count
            w.replaceAllPages(with: pages)
            try w.commit()
        }
        watcherSlot.current?.poke()
        // Truncating the log too: the compacted copy went through it, and a
        // compaction that left a log as large as the store would not shrink
        // what the store takes on disk (automatic checkpoints keep the log's
        // file for reuse; this one must not).
        let checkpointed = try pager.checkpointAsWriter(truncatingLog: true)
        let length = try pager.file.size()
        out.fileTruncated = checkpointed && length <= Int64(out.pagesAfter) * Int64(pageSize)
        return out
    }

    /// The pages of a compacted copy of the store `source` reads, numbered
    /// 1...N, page 1 first; checked for integrity.
    private static func compactedPages(of source: PageWriter, pageSize: Int, objects: inout Int) throws(KuraError) -> [Page] {
        var options = Options()
        options.pageSize = pageSize
        options.fileSystem = MemoryFileSystem()
        options.durability = .off
        options.checkpointThreshold = Int.max / 2
        let copy = try Database(path: ":compaction:", options: options)
        defer { copy.close() }
        let header = source.header
        let layout = max(header.headerVersion, FileHeader.countersFormatVersion)
        if layout < FileHeader.formatVersion {
            // The copy takes the layout of the store's format, which
            // `replaceAllPages` keeps (connections of an older build may share
            // the store): made at this build's version, it goes back to that
            // format while it is still empty, so its counters go to a counters
            // tree below format 5, its leaves hold wide cells below format 8
            // and have the 16-byte header below format 10.
            try typed {
                try copy.write { tx in
                    tx.writer!.header.headerVersion = layout
                    tx.writer!.markModified()
                }
            }
        }
        let catalog = try Catalog.loadWithCounters(header: header, source)
        for info in catalog.entries.values.sorted(by: { $0.id < $1.id }) {
            try copyObject(info, from: source, to: copy, nextCatalogID: header.headerNextCatalogID)
            objects += 1
        }
        guard try copy.checkpoint() else {
            throw KuraError(.busy, "could not checkpoint the in-memory compaction copy", path: source.pager.path)
        }
        return try typed {
            try copy.read { tx in
                let problems = try tx.checkIntegrity(limit: 5)
                if !problems.isEmpty {
                    throw KuraError(.corrupt, "the compacted copy does not check clean (\(problems.map(\.description).joined(separator: "; "))); the store was left unchanged", path: source.pager.path)
                }
                // A transaction made by `read` always has snapshot pages.
                let sp = tx.snapshotPages!
                let count = try tx.pageCount
                var pages: [Page] = []
                pages.reserveCapacity(count)
                for n in 1...UInt32(count) { pages.append(Page(copying: try sp.page(n))) }
                return pages
            }
        }
    }

    /// Copies one table or index (catalog entry and tree) into `copy`, in
    /// transactions of `compactionBatch` entries.
    private static func copyObject(_ info: TableInfo, from source: PageWriter, to copy: Database, nextCatalogID: Int64) throws(KuraError) {
        let kind: TreeKind = info.kind == "index" ? .index : .table
        let sourceTree = BTree(root: info.rootPage, kind: kind)
        var cursor = TreeCursor(tree: sourceTree)
        try cursor.first(source)
        var root: UInt32 = 0
        var copied: Int64 = 0
        repeat {
            try typed {
                try copy.write { tx in
                    // A transaction made by `write` always has a page writer.
                    let w = tx.writer!
                    if root == 0 {
                        if w.header.headerCatalogRoot == 0 {
                            w.header.headerCatalogRoot = try BTree.create(.table, in: w)
                        }
                        root = try BTree.create(kind, in: w)
                        try tx.installEntry(TableInfo(name: info.name, id: info.id, rootPage: root, rowCount: info.rowCount,
                                                      nextRowID: info.nextRowID, definition: info.definition,
                                                      kind: info.kind, owner: info.owner))
                        w.header.headerNextCatalogID = max(w.header.headerNextCatalogID, nextCatalogID, info.id + 1)
                        w.markModified()
                    }
                    let tree = BTree(root: root, kind: kind)
                    var n = 0
                    while cursor.isValid && n < compactionBatch {
                        let key = Array(cursor.key)
                        // A table key from disk must be a row-ID key (the copy's
                        // compact leaves rely on it; FORMAT.md, "Row-ID keys").
                        guard kind == .index || RowIDKey.decode(key) != nil else {
                            throw KuraError(.corrupt, "\(info.kind) \"\(info.name)\" has a key that is not a row ID", path: source.pager.path, page: cursor.leaf.number)
                        }
                        let value = kind == .table ? try sourceTree.value(cursor.leaf, cursor.index, source) : []
                        guard try tree.insert(key, value, mode: .insertNew, w) else {
                            throw KuraError(.corrupt, "\(info.kind) \"\(info.name)\" holds a key twice", path: source.pager.path, page: cursor.leaf.number)
                        }
                        n += 1
                        copied += 1
                        try cursor.next(source)
                    }
                    if !cursor.isValid && kind == .table && copied != info.rowCount {
                        // The catalog's row count disagreed with the tree: the copy
                        // records what it actually holds.
                        if var e = try tx.countedEntry(info.name) {
                            e.rowCount = copied
                            tx.catalog!.entries[info.name] = e
                            tx.changedTables.insert(info.name)
                        }
                    }
                }
            }
        } while cursor.isValid
    }

    /// Entries copied per write transaction of the scratch copy.
    private static var compactionBatch: Int { 20_000 }

    /// Runs `body`, which calls the engine's untyped-throwing transaction API,
    /// and rethrows its error as the `KuraError` it is.
    static func typed<T>(_ body: () throws -> T) throws(KuraError) -> T {
        do { return try body() } catch let e as KuraError { throw e } catch {
            throw KuraError(.io, "\(error)")
        }
    }
}
