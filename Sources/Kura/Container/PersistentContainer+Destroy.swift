// PersistentContainer+Destroy: removing a store and starting over (Core
// Data's destroyPersistentStore(at:), seed 004's destroyAndSetup).
//
// The refusal is the engine's (Database+Destroy.swift): every connection holds
// the store's open lock byte shared while open, and a destroy takes it
// exclusively, without waiting, around the removal of the log and the store
// file. So "no other connection has it open" and "removed" are one step under
// one lock, across threads and processes; a connection being opened meanwhile
// waits and then opens (creates) the new store.

import Foundation
import KuraEngine

extension PersistentContainer {
    /// Removes the store at `url` and its log (Core Data's
    /// `destroyPersistentStore(at:)`), refusing while any connection, in this
    /// process or another, has it open (a container, a `kura` command, a
    /// `Database`). Nothing at `url` is not an error. The next container
    /// opened at `url` creates a new store (or seeds it).
    ///
    /// Thread rules: any thread. On Darwin, whose file locks are per process,
    /// connections of the calling process are not seen (FORMAT.md,
    /// "Concurrency and locks"): close them first.
    ///
    /// - Throws: `.busy` naming the store while another connection has it
    ///   open (nothing is removed); `.io` if a file cannot be removed.
    public static func destroyStore(at url: URL, options: Database.Options = Database.Options()) throws(KuraError) {
        try Database.destroy(path: url.path, fileSystem: options.fileSystem)
    }

    /// Destroys this container's store and opens a new, empty one at the same
    /// place with the same description (seeded again if it has a seed; seed
    /// 004's `destroyAndSetup`). Returns the new container; this one is
    /// closed (its contexts fail with `.misuse` from now on: make new ones
    /// from the returned container).
    ///
    /// Thread rules: call it when no context of this container is inside a
    /// fetch or save.
    ///
    /// - Throws: `.busy` while another connection (another container on the
    ///   same file, another process) has the store open: nothing is removed
    ///   and this container stays usable; `.misuse` if the store is not
    ///   loaded; `.invalidArgument` for a store in memory; `.readOnly` for a
    ///   store opened read-only; errors of opening the new store (then the
    ///   old one is already gone).
    public func destroyAndRecreate() throws(KuraError) -> PersistentContainer {
        let s = storeSlot.current
        guard s.isLoaded, let d = s.description else {
            throw KuraError(.misuse, "the container's store is not loaded; there is nothing to destroy")
        }
        guard !d.isInMemory else {
            throw KuraError(.invalidArgument, "the store is in memory; make a new in-memory container instead", path: s.database.path)
        }
        try refuseWritesIfReadOnly("destroy the store")
        try s.database.destroy()
        return try PersistentContainer(model: model, name: name, opening: d)
    }
}
