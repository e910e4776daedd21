// StoreDescription: how a container opens its store (Core Data's
// NSPersistentStoreDescription, under a name that collides with neither
// Foundation nor CoreData).

import Foundation
import KuraEngine

/// How a ``PersistentContainer`` opens its store: where, read-only or not,
/// in memory or not, and the engine, history, seeding and migration options.
/// Give it to a container made with ``PersistentContainer/init(name:managedObjectModel:)``
/// through ``PersistentContainer/persistentStoreDescriptions``, then call
/// ``PersistentContainer/loadPersistentStores(completionHandler:)``.
///
/// A value type: changing a description after the store was loaded changes
/// nothing about the open store.
public struct StoreDescription: Sendable {
    /// The store file (its log is beside it, `URL-wal`). Nil for a store in
    /// memory.
    public var url: URL?
    /// Whether the store lives in memory only (gone when the container is).
    public var isInMemory: Bool
    /// Open without ever writing: the store must exist and match the model
    /// (no tables are created, no migration runs), and every save,
    /// `obtainPermanentIDs` and history purge through the container throws
    /// `.readOnly`. (The engine connection, ``PersistentContainer/database``,
    /// is not itself read-only; leave it alone too.)
    public var isReadOnly = false
    /// Engine options: page size for a new store, cache size, durability,
    /// busy timeout, checkpoint threshold, whether a missing file is created
    /// (forced off for a read-only store), file system.
    public var options = Database.Options()
    /// Record every save in the store's persistent history (Core Data's
    /// `NSPersistentHistoryTrackingKey`).
    public var persistentHistoryTracking = false
    /// How a store whose tables differ from the model is treated (Core Data's
    /// migration options): `.none` refuses it, `.lightweight` migrates it.
    public var migration: StoreMigration = .none
    /// A store to copy into place when none exists at ``url`` yet (seed 004's
    /// bundled store; see ``PersistentContainer/init(url:model:options:persistentHistoryTracking:seed:migration:)``).
    public var seed: URL?

    /// A description of the store file at `url`, with default options.
    public init(url: URL) {
        self.url = url
        isInMemory = false
    }

    /// A description of a store in memory only.
    public static func inMemory() -> StoreDescription {
        var d = StoreDescription(url: URL(fileURLWithPath: "/dev/null"))
        d.url = nil
        d.isInMemory = true
        return d
    }
}
