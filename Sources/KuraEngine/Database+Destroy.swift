// Database+Destroy: removing a store, refused while it is open anywhere.
//
// Every connection holds the store's open lock byte shared from open to close
// (FORMAT.md, "Concurrency and locks"; Pager.openHoldingOpenLock). Destroying
// takes that byte exclusively without waiting, so the decision "nobody has it
// open" and the removal happen under one lock, never as a check followed by a
// delete another process could slip between. While the destroyer holds the
// byte, a connection being opened waits for it; once the files are gone, that
// connection finds its handle's file no longer at the path and opens the path
// again, creating a new store (or failing with `.notFound` if it may not
// create). The log is removed before the store file.
//
// Darwin has only per-process locks (FORMAT.md): there a destroy sees other
// processes' connections but not other connections of its own process.

extension Database {
    /// Removes the store at `path`, its log (`path-wal`), its sort file and its
    /// external value files, refusing while any
    /// connection, in this process or another, has the store open. Nothing to
    /// remove is not an error.
    ///
    /// - Throws: `.busy` naming the store if a connection has it open (nothing
    ///   is removed); `.io` if a file cannot be opened or removed.
    public static func destroy(path: String, fileSystem: any FileSystem = PosixFileSystem()) throws(KuraError) {
        let file: StorageFile
        do {
            file = try fileSystem.open(path, create: false)
        } catch {
            guard error.code == .notFound else { throw error }
            // No store file: a leftover log goes too (nothing can have it open).
            try fileSystem.remove(path + "-wal")
            try fileSystem.remove(path + "-shm")
            return
        }
        defer { file.close() }
        guard try file.lock(.open, .exclusive) else {
            throw KuraError(.busy, "cannot destroy the store: another connection (in this process or another) has it open; close it there first", path: path)
        }
        guard try file.isLinked(at: path) else {
            throw KuraError(.busy, "cannot destroy the store: it was replaced while being destroyed; retry", path: path)
        }
        try fileSystem.remove(path + "-wal")
        try fileSystem.remove(path + "-shm")
        try removeCompanionFiles(of: path, fileSystem)
        try fileSystem.remove(path)
    }

    /// Removes the files a store keeps beside it other than its log: the
    /// index builder's sort file (`path-sort`, KeySorter.swift) and the files of
    /// external values (`path-external/*`; the emptied directory stays, as the
    /// file protocol has no directory removal). Called with the open byte held
    /// exclusively, so no connection can be using them.
    static func removeCompanionFiles(of path: String, _ fs: any FileSystem) throws(KuraError) {
        try fs.remove(path + "-sort")
        let external = ExternalReference.directory(of: path)
        if fs.exists(external) {
            for name in try fs.directoryContents(external) { try fs.remove(external + "/" + name) }
        }
    }

    /// Removes this connection's store and log and closes the connection,
    /// refusing while any other connection (in this process or another) has
    /// the store open. After it returns every call throws `.misuse`.
    ///
    /// Thread rules: call it outside this connection's transactions.
    ///
    /// - Throws: `.busy` if another connection has the store open, or a
    ///   transaction of this connection is running (nothing is removed and
    ///   the connection stays usable); `.misuse` if already closed; `.io`.
    public func destroy() throws(KuraError) {
        let fs = options.fileSystem
        try pager.destroyFiles(fs) { () throws(KuraError) in try Database.removeCompanionFiles(of: path, fs) }
        watcherSlot.current?.stop()
        _ = gate.close {}
    }
}
