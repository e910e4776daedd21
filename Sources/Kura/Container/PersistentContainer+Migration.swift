// PersistentContainer+Migration: how a store is checked against a model on
// open, and the migrations that bring it to the model (issue 13; FORMAT.md
// "Object stores", "Model identity", "Model changes").
//
// The store records the model that last wrote it (its version hashes, per
// entity and property: Migration/StoredModel.swift). A compatibility check
// whose hashes match answers from them alone; otherwise the plan
// (Migration/SchemaPlan.swift) compares the catalog and the recorded model
// with the new model. `SchemaPlan.make` reads only; every migration runs
// inside the open's single write transaction, after the plan was made in
// that same transaction, so a store another process changed meanwhile is
// never judged from a stale read, and a failure (or a crash) leaves the
// store as it was: the engine's commit is atomic.
//
// What is inferred, and what each change costs: Migration/SchemaPlan.swift
// and AttributeConversion.swift; staged migrations with custom stages:
// Migration/StagedMigration.swift.

import Foundation

/// What opening a store does when its tables differ from the model.
public enum StoreMigration: Sendable, Equatable {
    /// Refuse with `.modelMismatch` (the default): the store is not changed.
    case none
    /// Infer and apply a lightweight migration inside the open's write
    /// transaction (see ``PersistentContainer/init(url:model:options:persistentHistoryTracking:seed:migration:)``).
    case lightweight
    /// Migrate through the versions of a ``StagedMigration`` (lightweight
    /// between neighbours, or its custom stages), starting from the version
    /// the store records, all in the open's write transaction.
    case staged(StagedMigration)
}

/// The answer of ``PersistentContainer/compatibility(ofStoreAt:with:options:)``.
public struct StoreCompatibility: Sendable, Equatable {
    /// Every difference between the store and the model that opening needs a
    /// migration for, one line each (the list `.modelMismatch` gives).
    public let differences: [String]
    /// The differences a lightweight migration cannot infer (a subset of
    /// ``differences``): opening with `.lightweight` refuses while any is left.
    public let unsupported: [String]
    /// The migration plan: each change a lightweight migration would make,
    /// with its kind (what the store writes).
    public let changes: [StoreChange]
    /// The version hash the store records (nil: the store records none; it
    /// was written before stores recorded their model, or does not exist).
    public let storedVersionHash: String?
    /// Whether opening with this model needs a migration.
    public var isMigrationRequired: Bool { !differences.isEmpty }
    /// Whether `.lightweight` can migrate the store.
    public var canMigrateLightweight: Bool { unsupported.isEmpty }
}

extension PersistentContainer {
    /// Checks the store at `url` against `model` without changing it: whether
    /// opening needs a migration, and the differences found. A store that does
    /// not exist needs none (opening creates it). Entities the store lacks are
    /// not differences (opening creates their tables in any case).
    ///
    /// When the store records the model it was written with and its version
    /// hash equals `model`'s, the answer comes from the hashes alone.
    ///
    /// Reads one snapshot; another process may change the store afterwards, so
    /// the open decides again inside its own write transaction. Opening the
    /// file recovers committed log records as any open does.
    ///
    /// - Throws: engine errors (`.notADatabase`, `.corrupt`, `.busy`, `.io`, ...).
    public static func compatibility(ofStoreAt url: URL, with model: ManagedObjectModel,
                                     options: Database.Options = Database.Options()) throws(KuraError) -> StoreCompatibility {
        var options = options
        options.createIfMissing = false
        let db: Database
        do { db = try Database(path: url.path, options: options) } catch where error.code == .notFound {
            return StoreCompatibility(differences: [], unsupported: [], changes: [], storedVersionHash: nil)
        }
        defer { db.close() }
        let plan: SchemaPlan
        do {
            plan = try db.read { tx in
                // The hashes answer when they match (nothing else is compared).
                if let stored = try StoredModel.read(tx), stored.hash == model.versionHash {
                    return SchemaPlan(stored: stored, recordChanges: false)
                }
                return try SchemaPlan.make(tx, model)
            }
        } catch let e as KuraError { throw e } catch {
            throw KuraError(.io, "\(error)", path: db.path)
        }
        return StoreCompatibility(differences: plan.differences, unsupported: plan.unsupported,
                                  changes: plan.migration.map(\.change), storedVersionHash: plan.stored?.hash)
    }

    /// Whether opening the store at `url` with `model` needs a migration
    /// (``compatibility(ofStoreAt:with:options:)`` tells which differences).
    public static func isMigrationRequired(at url: URL, for model: ManagedObjectModel) throws(KuraError) -> Bool {
        try compatibility(ofStoreAt: url, with: model).isMigrationRequired
    }
}

extension SchemaPlan {
    /// Brings the store in `tx` to `model` as `migration` asks (the body of
    /// the open's write transaction). Returns the differences that refuse the
    /// open (empty on success); throws for a failed step.
    static func migrate(_ tx: WriteTransaction, _ model: ManagedObjectModel, _ migration: StoreMigration, path: String) throws(KuraError) -> [String] {
        switch migration {
        case .staged(let staged):
            return try staged.run(tx, model: model, path: path)
        case .none, .lightweight:
            let plan = try SchemaPlan.make(tx, model)
            let refused = migration == .lightweight ? plan.unsupported : plan.differences
            if !refused.isEmpty { return refused }
            try plan.apply(tx, model, migrating: migration == .lightweight, path: path)
            return []
        }
    }
}
