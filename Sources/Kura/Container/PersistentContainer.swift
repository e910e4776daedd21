// PersistentContainer: a model plus the store it lives in (Core Data's
// NSPersistentContainer / coordinator), and the factory of contexts.

import Foundation

extension KuraError.Code {
    /// The store's tables do not match the model (migration is not automatic yet).
    public static let modelMismatch = KuraError.Code(rawValue: "modelMismatch")
    /// An object failed validation at save (required value, type, uniqueness,
    /// delete rule, relationship count); the message names object, property, rule.
    public static let validation = KuraError.Code(rawValue: "validation")
}

/// A model and its store.
///
/// Thread rules: `Sendable`; make a context per thread or task with
/// ``newContext()``, use ``viewContext`` on the main actor, or a
/// ``BackgroundContext`` (``newBackgroundContext()``) on its own actor.
/// Lifetime: the store stays open while the container lives.
public final class PersistentContainer: Sendable {
    /// The model.
    public let model: ManagedObjectModel
    /// The engine connection (for engine-level access; contexts use it too).
    public let database: Database
    /// Where the store is (nil for an in-memory store).
    public let url: URL?
    /// Whether saves through this container are recorded in the store's
    /// persistent history (Core Data's persistent history tracking).
    public let persistentHistoryTracking: Bool
    /// Column positions of each entity's table, by entity name (made once).
    let layouts: [String: RowLayout]
    /// Delivers every context's did-save (ContextNotifications.swift).
    let saveBroadcaster = SaveBroadcaster()
    /// Brings other processes' saves to auto-merging contexts (StoreWatcher.swift).
    let storeWatcher: StoreWatcher
    /// Holds the view context (ContextActors.swift).
    let viewSlot = ViewContextSlot()

    /// Opens (or creates) the store at `url` and checks it against `model`:
    /// tables and indexes for entities the store lacks are created; an entity
    /// whose table differs from the model is an error listing every difference.
    ///
    /// - Throws: `KuraError.modelMismatch` with the differences; engine errors
    ///   (`.notADatabase`, `.corrupt`, `.busy`, `.io`, ...).
    /// - Parameter persistentHistoryTracking: record every save in the store's
    ///   persistent history (``history(after:limit:)``; FORMAT.md, "Object stores").
    /// - Parameter seed: a store to start from when none exists at `url` yet
    ///   (a read-only copy shipped with the app, seed 004's bundled store). It
    ///   is copied in full, then put in place atomically only if `url` still
    ///   does not exist, so two processes opening at once never both seed and
    ///   a store that exists is never replaced (see `Container+Seed.swift`).
    ///   Throws `.invalidArgument` if the seed has a non-empty log beside it
    ///   (checkpoint it before shipping), `.io` if it cannot be read.
    public init(url: URL, model: ManagedObjectModel, options: Database.Options = Database.Options(),
                persistentHistoryTracking: Bool = false, seed: URL? = nil) throws(KuraError) {
        self.model = model
        self.url = url
        self.persistentHistoryTracking = persistentHistoryTracking
        try Self.makeDirectory(url.deletingLastPathComponent())
        if let seed { try Self.seedIfMissing(url, from: seed) }
        database = try Database(path: url.path, options: options)
        storeWatcher = StoreWatcher(database: database, broadcaster: saveBroadcaster, tracksHistory: persistentHistoryTracking)
        try Self.prepare(database, model)
        layouts = try RowLayout.all(model)
    }

    /// Opens the store named `name` at the platform's usual place: Application
    /// Support/NAME/NAME.kura on Apple platforms, $XDG_DATA_HOME/NAME/NAME.kura
    /// (default ~/.local/share) on Linux.
    public convenience init(name: String, model: ManagedObjectModel, options: Database.Options = Database.Options(),
                            persistentHistoryTracking: Bool = false) throws(KuraError) {
        try self.init(url: Self.defaultDirectory().appendingPathComponent(name).appendingPathComponent(name + ".kura"), model: model,
                      options: options, persistentHistoryTracking: persistentHistoryTracking)
    }

    private init(memory model: ManagedObjectModel, persistentHistoryTracking: Bool) throws(KuraError) {
        self.model = model
        url = nil
        self.persistentHistoryTracking = persistentHistoryTracking
        database = try Database.inMemory()
        storeWatcher = StoreWatcher(database: database, broadcaster: saveBroadcaster, tracksHistory: persistentHistoryTracking)
        try Self.prepare(database, model)
        layouts = try RowLayout.all(model)
    }

    /// A store in memory only (for tests, MagicalRecord's in-memory stack).
    public static func inMemory(model: ManagedObjectModel, persistentHistoryTracking: Bool = false) throws(KuraError) -> PersistentContainer {
        try PersistentContainer(memory: model, persistentHistoryTracking: persistentHistoryTracking)
    }

    /// Where named stores live on this platform.
    public static func defaultDirectory() -> URL {
        #if os(Linux)
        if let xdg = ProcessInfo.processInfo.environment["XDG_DATA_HOME"], !xdg.isEmpty {
            return URL(fileURLWithPath: xdg, isDirectory: true)
        }
        return FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".local/share", isDirectory: true)
        #else
        return FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask).first
            ?? FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent("Library/Application Support")
        #endif
    }

    private static func makeDirectory(_ dir: URL) throws(KuraError) {
        do { try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true) } catch {
            throw KuraError(.io, "cannot create directory \(dir.path): \(error.localizedDescription)", path: dir.path)
        }
    }

    /// A new context on this store, confined to the thread (or actor) that
    /// uses it: use it on one thread at a time. It merges other contexts'
    /// saves by pull (see ``ManagedObjectContext/automaticallyMergesChangesFromStore``);
    /// ``viewContext`` and ``newBackgroundContext()`` give contexts isolated
    /// to an actor, which merge by push.
    public func newContext() -> ManagedObjectContext { ManagedObjectContext(container: self) }

    /// Runs `block` with a new context and saves it (MagicalRecord's
    /// `saveWithBlock:`). If `block` throws, nothing is saved.
    public func save(_ block: (ManagedObjectContext) throws -> Void) throws {
        let context = newContext()
        try block(context)
        try context.save()
    }

    // MARK: Model check

    static func prepare(_ db: Database, _ model: ManagedObjectModel) throws(KuraError) {
        var differences: [String] = []
        do {
            try db.write { tx in
                // One table per entity hierarchy (an entity alone is a hierarchy of one).
                for table in model.entityTables {
                    let schema = try model.schema(ofTable: table)
                    if try tx.tableExists(table) {
                        var t = try tx.table(table)
                        // A store written before rows carried versions or decimals
                        // their exact companions: when the stored columns are the
                        // model's first ones and only `_version` and `_exact_*`
                        // columns are missing, append those (no row is rewritten;
                        // old rows read version 0 and a null companion). If
                        // anything else differs, the transaction rolls back.
                        if let stored = try tx.schema(of: t), stored.columns.count < schema.columns.count,
                           stored.columns.map(\.name) == schema.columns.prefix(stored.columns.count).map(\.name) {
                            let missing = schema.columns.dropFirst(stored.columns.count)
                            if missing.allSatisfy({ $0.name == ManagedObjectModel.versionColumn || $0.name.hasPrefix(AttributeType.exactColumn("")) }) {
                                for c in missing { try tx.addColumn(c, to: t) }
                                t = try tx.table(table)
                            }
                        }
                        differences += compare(table, stored: try tx.schema(of: t), expected: schema)
                    } else {
                        let t = try tx.createTable(table, schema: schema)
                        for ix in model.indexes(ofTable: table) {
                            try tx.createIndex(ix.name, on: t, columns: ix.columns, unique: ix.unique)
                        }
                    }
                }
                for name in model.joinTables {
                    if try tx.tableExists(name) {
                        differences += compare(name, stored: try tx.schema(of: try tx.table(name)), expected: ManagedObjectModel.joinSchema)
                    } else {
                        let t = try tx.createTable(name, schema: ManagedObjectModel.joinSchema)
                        try tx.createIndex(name + "_source", on: t, columns: [IndexColumn("source"), IndexColumn("target")])
                        try tx.createIndex(name + "_target", on: t, columns: [IndexColumn("target"), IndexColumn("source")])
                    }
                }
                if !differences.isEmpty { throw KuraError(.modelMismatch, "") }
            }
        } catch let e as KuraError where e.code == .modelMismatch {
            throw KuraError(.modelMismatch, "the store does not match the model (migration is not automatic):\n  " + differences.joined(separator: "\n  "), path: db.path)
        } catch let e as KuraError {
            throw e
        } catch {
            throw KuraError(.io, "\(error)", path: db.path)
        }
    }

    static func compare(_ table: String, stored: TableSchema?, expected: TableSchema) -> [String] {
        guard let stored else { return ["table \"\(table)\" has no schema (it is not an entity table)"] }
        var out: [String] = []
        let have = Dictionary(stored.columns.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        let want = Dictionary(expected.columns.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        for c in expected.columns {
            guard let h = have[c.name] else { out.append("\(table).\(c.name): in the model, not in the store"); continue }
            if h.type != c.type { out.append("\(table).\(c.name): the store has \(h.type.rawValue), the model \(c.type.rawValue)") }
        }
        for c in stored.columns where want[c.name] == nil { out.append("\(table).\(c.name): in the store, not in the model") }
        if out.isEmpty && stored.columns.map(\.name) != expected.columns.map(\.name) {
            out.append("\(table): columns are in another order than the model's")
        }
        return out
    }
}
