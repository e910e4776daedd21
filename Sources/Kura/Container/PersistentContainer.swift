// PersistentContainer: a model plus the store it lives in (Core Data's
// NSPersistentContainer / coordinator), and the factory of contexts.

import Foundation

extension KuraError.Code {
    /// The store's tables do not match the model (and the open did not ask for,
    /// or the difference needs more than, a lightweight migration).
    public static let modelMismatch = KuraError.Code(rawValue: "modelMismatch")
    /// An object failed validation at save (required value, type, uniqueness,
    /// delete rule, relationship count); the message names object, property, rule.
    public static let validation = KuraError.Code(rawValue: "validation")
}

/// A model and its store.
///
/// Two ways to open one:
/// - at once: ``init(url:model:options:persistentHistoryTracking:seed:migration:)``,
///   ``init(name:model:options:persistentHistoryTracking:)`` or ``inMemory(model:persistentHistoryTracking:)``;
/// - Core Data's way: ``init(name:managedObjectModel:)`` makes a container
///   that opens nothing; adjust ``persistentStoreDescriptions`` (a
///   ``StoreDescription``: URL, read-only, in memory, options), then call
///   ``loadPersistentStores(completionHandler:)`` (or the throwing
///   ``loadPersistentStores()``). Contexts made before the store is loaded
///   fail every read and save with `.misuse` ("database is closed").
///
/// Thread rules: `Sendable`; make a context per thread or task with
/// ``newContext()``, use ``viewContext`` on the main actor, or a
/// ``BackgroundContext`` (``newBackgroundContext()``) on its own actor.
/// Load the stores before handing the container to other threads.
/// Lifetime: the store stays open while the container lives (or until
/// ``close()``).
public final class PersistentContainer: Sendable {
    /// The model.
    public let model: ManagedObjectModel
    /// The container's name (``init(name:managedObjectModel:)``), or nil.
    public let name: String?
    /// The open store (ContainerStore.swift); a closed stand-in until loaded.
    let storeSlot = StoreSlot()
    /// Delivers every context's did-save (ContextNotifications.swift).
    let saveBroadcaster = SaveBroadcaster()
    /// Holds the view context (ContextActors.swift).
    let viewSlot = ViewContextSlot()

    /// The engine connection (for engine-level access; contexts use it too).
    /// Before ``loadPersistentStores()``: a closed connection whose calls
    /// throw `.misuse`.
    public var database: Database { storeSlot.current.database }
    /// Where the store is (nil for an in-memory store, or before loading).
    public var url: URL? { storeSlot.current.url }
    /// Whether saves through this container are recorded in the store's
    /// persistent history (Core Data's persistent history tracking).
    public var persistentHistoryTracking: Bool { storeSlot.current.persistentHistoryTracking }
    /// Whether the store was opened read-only (saves throw `.readOnly`).
    public var isReadOnly: Bool { storeSlot.current.isReadOnly }
    /// Column positions of each entity's table, by entity name (made once).
    var layouts: [String: RowLayout] { storeSlot.current.layouts }
    /// Brings other processes' saves to auto-merging contexts (StoreWatcher.swift).
    var storeWatcher: StoreWatcher { storeSlot.current.watcher }

    /// Opens (or creates) the store at `url` and checks it against `model`:
    /// tables and indexes for entities the store lacks are created; an entity
    /// whose table differs from the model is an error listing every difference,
    /// unless `migration` is `.lightweight`.
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
    /// - Parameter migration: `.none` (the default) refuses a store whose
    ///   tables or recorded model differ from the model with `.modelMismatch`;
    ///   `.lightweight` infers the changes (FORMAT.md, "Model changes": added,
    ///   renamed and removed properties and entities, exact type conversions,
    ///   optional → required, indexes and constraints) and applies them in the
    ///   open's write transaction; `.staged` goes through several versions with
    ///   custom stages (``StagedMigration``). Changes not inferred are
    ///   `.modelMismatch` naming each; values that do not convert, objects
    ///   missing a now-required value or violating an added uniqueness
    ///   constraint are `.validation` naming them. On any error the store is
    ///   left as it was. See ``compatibility(ofStoreAt:with:options:)`` to ask first.
    public convenience init(url: URL, model: ManagedObjectModel, options: Database.Options = Database.Options(),
                            persistentHistoryTracking: Bool = false, seed: URL? = nil, migration: StoreMigration = .none) throws(KuraError) {
        var d = StoreDescription(url: url)
        d.options = options
        d.persistentHistoryTracking = persistentHistoryTracking
        d.seed = seed
        d.migration = migration
        try self.init(model: model, name: nil, opening: d)
    }

    /// Opens the store named `name` at the platform's usual place: Application
    /// Support/NAME/NAME.kura on Apple platforms, $XDG_DATA_HOME/NAME/NAME.kura
    /// (default ~/.local/share) on Linux.
    public convenience init(name: String, model: ManagedObjectModel, options: Database.Options = Database.Options(),
                            persistentHistoryTracking: Bool = false) throws(KuraError) {
        var d = StoreDescription(url: Self.defaultStoreURL(name: name))
        d.options = options
        d.persistentHistoryTracking = persistentHistoryTracking
        try self.init(model: model, name: name, opening: d)
    }

    /// A container that opens nothing yet (Core Data's
    /// `NSPersistentContainer(name:managedObjectModel:)`): its
    /// ``persistentStoreDescriptions`` hold one description for the store
    /// named `name` at the platform's usual place (see
    /// ``defaultStoreURL(name:)``); change it, then call
    /// ``loadPersistentStores(completionHandler:)``.
    public init(name: String, managedObjectModel model: ManagedObjectModel) {
        self.model = model
        self.name = name
        storeSlot.descriptions = [StoreDescription(url: Self.defaultStoreURL(name: name))]
    }

    /// Opens `description` at once.
    init(model: ManagedObjectModel, name: String?, opening description: StoreDescription) throws(KuraError) {
        self.model = model
        self.name = name
        storeSlot.descriptions = [description]
        try load(description)
    }

    /// A store in memory only (for tests, MagicalRecord's in-memory stack).
    public static func inMemory(model: ManagedObjectModel, persistentHistoryTracking: Bool = false) throws(KuraError) -> PersistentContainer {
        var d = StoreDescription.inMemory()
        d.persistentHistoryTracking = persistentHistoryTracking
        return try PersistentContainer(model: model, name: nil, opening: d)
    }

    /// Where the store named `name` lives by default:
    /// ``defaultDirectory()``/NAME/NAME.kura.
    public static func defaultStoreURL(name: String) -> URL {
        defaultDirectory().appendingPathComponent(name).appendingPathComponent(name + ".kura")
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

    static func makeDirectory(_ dir: URL) throws(KuraError) {
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

    /// Checks the store against the model and brings it there inside one
    /// write transaction (PersistentContainer+Migration.swift); returns the
    /// stored schema of every entity table, which row layouts follow.
    static func prepare(_ db: Database, _ model: ManagedObjectModel, migration: StoreMigration) throws(KuraError) -> [String: TableSchema] {
        var refused: [String] = []
        do {
            return try db.write { tx in
                refused = try SchemaPlan.migrate(tx, model, migration, path: db.path)
                if !refused.isEmpty { throw KuraError(.modelMismatch, "") }
                var schemas: [String: TableSchema] = [:]
                for table in model.entityTables {
                    guard let s = try tx.schema(of: try tx.table(table)) else {
                        throw KuraError(.modelMismatch, "table \"\(table)\" has no schema (a Kura bug: the plan checked it)", path: db.path)
                    }
                    schemas[table] = s
                }
                return schemas
            }
        } catch let e as KuraError where e.code == .modelMismatch && !refused.isEmpty {
            let why = migration != .none ? "a lightweight migration cannot bring the store to the model" : "the store does not match the model (open with migration: .lightweight to migrate it)"
            throw KuraError(.modelMismatch, why + ":\n  " + refused.joined(separator: "\n  "), path: db.path)
        } catch let e as KuraError {
            throw e
        } catch {
            throw KuraError(.io, "\(error)", path: db.path)
        }
    }
}
