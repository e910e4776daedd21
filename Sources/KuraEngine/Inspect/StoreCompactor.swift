// StoreCompactor: `kura compact` — rewrites a store without free pages.
//
// The store is copied object by object into a new file next to it, which then
// replaces the old one with rename(2), so a crash at any moment leaves either the
// old store or the new one, never a mixture:
//
//   1. open the store and checkpoint it (refused, `busy`, if another connection is
//      inside a transaction);
//   2. take the writer lock byte on a separate handle and keep it to the end, so
//      no other connection commits while the copy is made;
//   3. create `PATH.compact-tmp` with the same page size and copy, in catalog-ID
//      order, every table and index: same names, catalog IDs, definitions, next
//      row IDs and row counts, keys and values in key order (appending fills
//      pages completely, FORMAT.md "Tree pages"); the header's next catalog ID is
//      kept, so IDs are still never reused;
//   4. checkpoint the copy, check its integrity, sync it, remove its log;
//   5. take the reader lock byte exclusively (refused if another connection is
//      inside a transaction), rename the copy over the store, remove the old
//      log (its database ID no longer matches, so it would be ignored anyway) and
//      sync the directory.
//
// The new store has a new database ID. Connections that had the store open
// before the rename keep reading (and would keep writing) the old, unlinked file:
// run `compact` only when no other process has the store open.

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Rewrites a store without free pages. See the header comment.
package enum StoreCompactor {
    /// Sizes before and after.
    package struct Outcome: Sendable {
        package var pagesBefore = 0
        package var freePagesBefore = 0
        package var pagesAfter = 0
        package var pageSize = 0
        package var objects = 0
    }

    /// Entries copied per write transaction of the copy (bounds its memory).
    static let batch = 20_000

    /// Compacts the store at `path`.
    ///
    /// - Throws: `.notFound` if there is no store; `.busy` if another connection
    ///   is inside a transaction or holds the write lock; `.corrupt` if the store
    ///   (or, which would be a bug, the copy) does not check clean; `.io`.
    package static func compact(path: String, busyTimeout: Double = 2) throws(KuraError) -> Outcome {
        guard access(path, F_OK) == 0 else { throw KuraError(.notFound, "no such file", path: path) }
        var options = Database.Options()
        options.createIfMissing = false
        options.busyTimeout = busyTimeout
        options.durability = .full
        var out = Outcome()
        let tmp = path + ".compact-tmp"
        let fs = PosixFileSystem()
        var renamed = false
        defer {
            if !renamed {
                try? fs.remove(tmp)
                try? fs.remove(tmp + "-wal")
            }
        }
        let guardFile: StorageFile
        do {
            let source = try Database(path: path, options: options)
            defer { source.pager.close() }
            guard try source.checkpoint() else {
                throw KuraError(.busy, "another connection is inside a transaction; compact needs the store to itself (close other programs using it and retry)", path: path)
            }
            guardFile = try fs.open(path, create: false)
            guard try guardFile.lock(.writer, .exclusive) else {
                throw KuraError(.busy, "another connection is writing to the store; compact needs the store to itself", path: path)
            }
            try fs.remove(tmp)
            try fs.remove(tmp + "-wal")
            var tmpOptions = Database.Options()
            tmpOptions.pageSize = source.pageSize
            tmpOptions.durability = .off
            tmpOptions.checkpointThreshold = Int.max / 2
            let copy = try Database(path: tmp, options: tmpOptions)
            defer { copy.pager.close() }
            out.pageSize = source.pageSize
            try typed {
                try source.read { tx in
                    let sp = tx.snapshotPages!
                    let header = try sp.page(1)
                    out.pagesBefore = Int(header.headerPageCount)
                    out.freePagesBefore = Int(header.headerFreeCount)
                    let catalog = try Catalog.load(root: header.headerCatalogRoot, sp)
                    let nextCatalogID = header.headerNextCatalogID
                    for info in catalog.entries.values.sorted(by: { $0.id < $1.id }) {
                        try copyObject(info, from: sp, to: copy, nextCatalogID: nextCatalogID)
                        out.objects += 1
                    }
                }
            }
            guard try copy.checkpoint() else {
                throw KuraError(.busy, "could not checkpoint the copy at \(tmp)", path: tmp)
            }
            let problems = try typed {
                try copy.read { tx in
                    out.pagesAfter = try tx.pageCount
                    return try tx.checkIntegrity(limit: 5)
                }
            }
            if !problems.isEmpty {
                throw KuraError(.corrupt, "the compacted copy does not check clean (\(problems.map(\.description).joined(separator: "; "))); the store was left unchanged", path: tmp)
            }
        }
        defer { guardFile.close() }
        let tmpFile = try fs.open(tmp, create: false)
        try tmpFile.sync(full: true)
        tmpFile.close()
        try fs.remove(tmp + "-wal")
        guard try guardFile.lock(.reader, .exclusive) else {
            throw KuraError(.busy, "another connection started a transaction during the copy; the store was left unchanged, retry", path: path)
        }
        try fs.rename(tmp, to: path)
        renamed = true
        try fs.remove(path + "-wal")
        syncDirectory(of: path)
        return out
    }

    /// Copies one table or index (catalog entry and tree) into `copy`.
    static func copyObject(_ info: TableInfo, from sp: SnapshotPages, to copy: Database, nextCatalogID: Int64) throws(KuraError) {
        let kind: TreeKind = info.kind == "index" ? .index : .table
        let sourceTree = BTree(root: info.rootPage, kind: kind)
        var cursor = TreeCursor(tree: sourceTree)
        try cursor.first(sp)
        var root: UInt32 = 0
        var copied: Int64 = 0
        repeat {
            try typed {
                try copy.write { tx in
                    let w = tx.writer!
                    if root == 0 {
                        var c = try tx.loadCatalog()
                        if w.header.headerCatalogRoot == 0 {
                            w.header.headerCatalogRoot = try BTree.create(.table, in: w)
                        }
                        root = try BTree.create(kind, in: w)
                        c.entries[info.name] = TableInfo(name: info.name, id: info.id, rootPage: root, rowCount: info.rowCount,
                                                         nextRowID: info.nextRowID, definition: info.definition,
                                                         kind: info.kind, owner: info.owner)
                        c.nextID = max(c.nextID, info.id + 1)
                        tx.catalog = c
                        tx.changedTables.insert(info.name)
                        w.header.headerNextCatalogID = max(w.header.headerNextCatalogID, nextCatalogID, info.id + 1)
                        w.markModified()
                    }
                    let tree = BTree(root: root, kind: kind)
                    var n = 0
                    while cursor.isValid && n < batch {
                        let key = Array(cursor.key)
                        let value = kind == .table ? try sourceTree.value(cursor.leaf, cursor.index, sp) : []
                        guard try tree.insert(key, value, mode: .insertNew, w) else {
                            throw KuraError(.corrupt, "\(info.kind) \"\(info.name)\" holds a key twice", page: cursor.leaf.number)
                        }
                        n += 1
                        copied += 1
                        try cursor.next(sp)
                    }
                    if !cursor.isValid && kind == .table && copied != info.rowCount {
                        var c = try tx.loadCatalog()
                        c.entries[info.name]!.rowCount = copied
                        tx.catalog = c
                        tx.changedTables.insert(info.name)
                    }
                }
            }
        } while cursor.isValid
    }

    /// Runs `body`, which calls the engine's untyped-throwing transaction API,
    /// and rethrows its error as the `KuraError` it is.
    static func typed<T>(_ body: () throws -> T) throws(KuraError) -> T {
        do { return try body() } catch let e as KuraError { throw e } catch {
            throw KuraError(.io, "\(error)")
        }
    }

    static func syncDirectory(of path: String) {
        var dir = path
        if let slash = dir.lastIndex(of: "/") { dir = String(dir[..<slash]) } else { dir = "." }
        if dir.isEmpty { dir = "/" }
        let fd = open(dir, O_RDONLY)
        if fd >= 0 {
            _ = fsync(fd)
            _ = close(fd)
        }
    }
}
