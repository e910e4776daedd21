// PersistentContainer+Loading: opening a container's store explicitly
// (Core Data's loadPersistentStores) and the slot that holds the open store.
//
// A container holds at most one store. Until it is loaded, the slot holds a
// closed stand-in (a closed in-memory connection, no layouts): every read or
// save of a context reaches it and throws `.misuse`, never a crash. Loading
// replaces the stand-in once; a context resolves the loaded store on first
// use after that and keeps it (ManagedObjectContext.store), so contexts pay
// no lock per access.

import Foundation
import KuraEngine

extension KuraError.Code {
    /// A write through a container whose store was opened read-only
    /// (``StoreDescription/isReadOnly``).
    public static let readOnly = KuraError.Code(rawValue: "readOnly")
}

/// What an open store is: the connection and what was made for it once.
final class LoadedStore: Sendable {
    let database: Database
    let url: URL?
    let persistentHistoryTracking: Bool
    let isReadOnly: Bool
    let layouts: [String: RowLayout]
    let watcher: StoreWatcher
    let isLoaded: Bool
    /// What was opened (nil for the stand-in).
    let description: StoreDescription?

    init(database: Database, url: URL?, persistentHistoryTracking: Bool, isReadOnly: Bool,
         layouts: [String: RowLayout], watcher: StoreWatcher, isLoaded: Bool, description: StoreDescription?) {
        self.description = description
        self.database = database
        self.url = url
        self.persistentHistoryTracking = persistentHistoryTracking
        self.isReadOnly = isReadOnly
        self.layouts = layouts
        self.watcher = watcher
        self.isLoaded = isLoaded
    }

    /// The closed stand-in of a container not loaded yet.
    static func notLoaded(_ broadcaster: SaveBroadcaster) -> LoadedStore {
        var o = Database.Options()
        o.fileSystem = MemoryFileSystem()
        o.durability = .off
        // An in-memory open cannot fail; if it ever did, the stand-in would
        // be a second attempt's error surfaced at load time instead.
        let db: Database
        do { db = try Database(path: "(store not loaded: call loadPersistentStores first)", options: o) } catch {
            preconditionFailure("an in-memory store could not be opened: \(error) (a Kura bug)")
        }
        db.close()
        return LoadedStore(database: db, url: nil, persistentHistoryTracking: false, isReadOnly: false, layouts: [:],
                           watcher: StoreWatcher(database: db, broadcaster: broadcaster, tracksHistory: false), isLoaded: false, description: nil)
    }
}

/// The container's store and descriptions, behind a lock.
final class StoreSlot: @unchecked Sendable {
    // @unchecked Sendable: `loaded` and `descriptionList` are read and written
    // only with `lock` held.
    private let lock = NSLock()
    private var loaded: LoadedStore?
    private var descriptionList: [StoreDescription] = []
    private var standIn: LoadedStore?

    var current: LoadedStore {
        lock.lock()
        defer { lock.unlock() }
        if let loaded { return loaded }
        if let standIn { return standIn }
        let s = LoadedStore.notLoaded(SaveBroadcaster())
        standIn = s
        return s
    }

    var isLoaded: Bool {
        lock.lock()
        defer { lock.unlock() }
        return loaded != nil
    }

    var descriptions: [StoreDescription] {
        get {
            lock.lock()
            defer { lock.unlock() }
            return descriptionList
        }
        set {
            lock.lock()
            descriptionList = newValue
            lock.unlock()
        }
    }

    /// Installs `store` unless one is loaded already; returns whether it did.
    func install(_ store: LoadedStore) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        if loaded != nil { return false }
        loaded = store
        return true
    }
}

extension PersistentContainer {
    /// How the store is (to be) opened (Core Data's
    /// `persistentStoreDescriptions`). A Kura container holds one store:
    /// ``loadPersistentStores(completionHandler:)`` refuses any count but one.
    /// Changing it after loading changes nothing about the open store.
    public var persistentStoreDescriptions: [StoreDescription] {
        get { storeSlot.descriptions }
        set { storeSlot.descriptions = newValue }
    }

    /// Whether the store is open (loaded at init or by ``loadPersistentStores()``).
    public var isLoaded: Bool { storeSlot.isLoaded }

    /// Opens the store of ``persistentStoreDescriptions`` and calls
    /// `completionHandler` with the description and nil, or with the error
    /// that kept it from opening (Core Data's shape; the handler runs on the
    /// calling thread before this returns).
    ///
    /// Errors handed to the handler: `.invalidArgument` for no description or
    /// more than one, or a file description without URL; `.misuse` if the
    /// store is loaded already; `.notFound` for a read-only store that does
    /// not exist; `.modelMismatch` for a store that does not match the model
    /// (for a read-only one, also one that lacks tables); engine errors
    /// (`.notADatabase`, `.corrupt`, `.busy`, `.io`). After an error the
    /// container stays unloaded and the call may be repeated.
    public func loadPersistentStores(completionHandler: (StoreDescription, KuraError?) -> Void) {
        let list = persistentStoreDescriptions
        guard list.count == 1, let d = list.first else {
            let placeholder = list.first ?? StoreDescription.inMemory()
            completionHandler(placeholder, KuraError(.invalidArgument, "a Kura container holds exactly one store, but persistentStoreDescriptions has \(list.count)"))
            return
        }
        do {
            try load(d)
            completionHandler(d, nil)
        } catch {
            completionHandler(d, error)
        }
    }

    /// ``loadPersistentStores(completionHandler:)`` as a throwing call.
    ///
    /// - Throws: the error the completion handler would get.
    public func loadPersistentStores() throws(KuraError) {
        var failure: KuraError?
        loadPersistentStores { _, error in failure = error }
        if let failure { throw failure }
    }

    /// Opens `d` and installs it.
    func load(_ d: StoreDescription) throws(KuraError) {
        if storeSlot.isLoaded {
            throw KuraError(.misuse, "the container's store is loaded already (a Kura container holds one store)", path: url?.path)
        }
        let database: Database
        if d.isInMemory {
            database = try Database.inMemory(options: d.options)
        } else {
            guard let url = d.url else {
                throw KuraError(.invalidArgument, "the store description has no URL and is not in memory")
            }
            var options = d.options
            if d.isReadOnly {
                options.createIfMissing = false
                if let seed = d.seed { try Self.seedIfMissing(url, from: seed) }
            } else {
                try Self.makeDirectory(url.deletingLastPathComponent())
                if let seed = d.seed { try Self.seedIfMissing(url, from: seed) }
            }
            database = try Database(path: url.path, options: options)
        }
        let schemas: [String: TableSchema]
        do {
            schemas = d.isReadOnly ? try Self.prepareReadOnly(database, model) : try Self.prepare(database, model, migration: d.migration)
        } catch {
            database.close()
            throw error
        }
        let store = LoadedStore(database: database, url: d.isInMemory ? nil : d.url, persistentHistoryTracking: d.persistentHistoryTracking,
                                isReadOnly: d.isReadOnly, layouts: try RowLayout.all(model, schemas: schemas),
                                watcher: StoreWatcher(database: database, broadcaster: saveBroadcaster, tracksHistory: d.persistentHistoryTracking),
                                isLoaded: true, description: d)
        guard storeSlot.install(store) else {
            database.close()
            throw KuraError(.misuse, "the container's store was loaded by another call meanwhile", path: database.path)
        }
    }

    /// The read-only counterpart of `prepare`: checks the store against the
    /// model in a read transaction and refuses anything `prepare` would write.
    static func prepareReadOnly(_ db: Database, _ model: ManagedObjectModel) throws(KuraError) -> [String: TableSchema] {
        do {
            return try db.read { tx in
                let plan = try SchemaPlan.make(tx, model)
                var problems = plan.differences
                if !plan.always.isEmpty && problems.isEmpty {
                    problems.append("the store lacks tables or columns the model needs (\(plan.always.count) change\(plan.always.count == 1 ? "" : "s") an open for writing would make)")
                }
                if !problems.isEmpty {
                    throw KuraError(.modelMismatch, "the store opened read-only does not match the model, and a read-only open changes nothing:\n  " + problems.joined(separator: "\n  "), path: db.path)
                }
                var schemas: [String: TableSchema] = [:]
                for table in model.entityTables {
                    guard let s = try tx.schema(of: try tx.table(table)) else {
                        throw KuraError(.modelMismatch, "table \"\(table)\" has no schema", path: db.path)
                    }
                    schemas[table] = s
                }
                return schemas
            }
        } catch let e as KuraError {
            throw e
        } catch {
            throw KuraError(.io, "\(error)", path: db.path)
        }
    }

    /// Throws `.readOnly` naming `what` if the store was opened read-only.
    func refuseWritesIfReadOnly(_ what: String) throws(KuraError) {
        let s = storeSlot.current
        if s.isReadOnly {
            throw KuraError(.readOnly, "cannot \(what): the store was opened read-only (StoreDescription.isReadOnly); nothing was written", path: s.database.path)
        }
    }
}
