// StagedMigration: a store brought through several model versions in order
// (Core Data's NSStagedMigrationManager), with custom stages where the app
// transforms data between two versions.
//
// Which stage to start from: the store records its model's version hash
// (`_kura_model`); the migration starts after the version with that hash. A
// store without a record starts after the first version whose tables match
// the catalog exactly (the check `.none` makes). A store at none of the
// versions is first migrated lightweight to the first version (so a
// `StagedMigration` of one model is a lightweight migration with progress).
//
// Every stage runs in the open's one write transaction, one after another:
// stage k's plan is made against the store as stage k-1 left it (inside the
// same transaction), applied, and its model recorded; the commit at the end
// makes all of them visible at once, or (on any error, or a crash before the
// commit is durable) none. Memory: the transaction keeps every page it changes
// until commit, so stages that rewrite rows need memory in proportion to the
// tables they rewrite; stages that only add or rename columns and indexes
// need almost none (ARCHITECTURE.md, "Migration").

import Foundation
import KuraEngine

/// A custom step between two model versions: `transform` runs after the
/// destination's columns exist (added, renamed, converted) and before the
/// source's removed properties are retired and the destination's indexes
/// are built, so it can read both models' values and write the destination's.
/// Core Data's NSCustomMigrationStage, with one handler in place of
/// will/didMigrate.
public struct CustomMigrationStage: Sendable {
    /// The version migrated from and the one migrated to.
    public let source: ManagedObjectModel
    public let destination: ManagedObjectModel
    /// Called once, inside the migration's write transaction, with a view of
    /// the rows. Throwing aborts the whole migration (the store is left as it
    /// was).
    public let transform: @Sendable (MigrationData) throws -> Void

    public init(from source: ManagedObjectModel, to destination: ManagedObjectModel,
                transform: @escaping @Sendable (MigrationData) throws -> Void) {
        self.source = source
        self.destination = destination
        self.transform = transform
    }
}

/// Model versions, oldest first, and the custom stages between neighbours
/// (pass it as `migration: .staged(...)`). Consecutive versions without a
/// custom stage are migrated lightweight.
///
/// Thread rules: immutable, `Sendable`. The progress callback runs on the
/// thread opening the container.
public final class StagedMigration: Sendable, Equatable {
    /// Versions, oldest first; the last must be the container's model (same
    /// ``ManagedObjectModel/versionHash``).
    public let models: [ManagedObjectModel]
    public let customStages: [CustomMigrationStage]
    /// Called as the migration proceeds (``MigrationProgress``).
    public let progress: (@Sendable (MigrationProgress) -> Void)?

    /// - Precondition: every custom stage goes from one version in `models` to
    ///   the next one (checked when the migration runs: `.invalidArgument`).
    public init(models: [ManagedObjectModel], customStages: [CustomMigrationStage] = [],
                progress: (@Sendable (MigrationProgress) -> Void)? = nil) {
        self.models = models
        self.customStages = customStages
        self.progress = progress
    }

    public static func == (a: StagedMigration, b: StagedMigration) -> Bool { a === b }

    /// Brings the store in `tx` to the last version. Returns the differences
    /// that cannot be migrated (empty on success).
    func run(_ tx: WriteTransaction, model: ManagedObjectModel, path: String) throws(KuraError) -> [String] {
        guard let last = models.last, last.versionHash == model.versionHash else {
            throw KuraError(.invalidArgument, "the staged migration's last version (hash \(models.last?.versionHash ?? "none")) is not the container's model (hash \(model.versionHash))", path: path)
        }
        var stageFor: [Int: CustomMigrationStage] = [:]
        for s in customStages {
            guard let i = models.firstIndex(where: { $0 === s.source }), i + 1 < models.count, models[i + 1] === s.destination else {
                throw KuraError(.invalidArgument, "a custom migration stage does not go from one of the staged migration's versions to the next", path: path)
            }
            stageFor[i] = s
        }
        // Where the store is: the index of its version; -1 for none of them
        // (it is first migrated lightweight to the first version).
        var start = -1
        if let stored = try StoredModel.read(tx) {
            start = models.lastIndex { $0.versionHash == stored.hash } ?? -1
        } else {
            for (i, m) in models.enumerated() where try SchemaPlan.make(tx, m).differences.isEmpty { start = i; break }
        }
        let reporter = progress.map { MigrationProgressReporter($0) }
        reporter?.stageCount = max(models.count - 1 - start, 1)
        if start == models.count - 1 {
            let plan = try SchemaPlan.make(tx, model)
            try plan.apply(tx, model, migrating: false, path: path, progress: reporter)
            return []
        }
        for k in start..<(models.count - 1) {
            reporter?.stage = k - start + 1
            let custom = k >= 0 ? stageFor[k] : nil
            let plan = try SchemaPlan.make(tx, models[k + 1], custom: custom != nil)
            if !plan.unsupported.isEmpty {
                return plan.unsupported.map { "stage \(k + 1) → \(k + 2): " + $0 }
            }
            if let custom {
                let label = "\(k + 1) → \(k + 2)"
                let source = models[k]
                try plan.apply(tx, models[k + 1], migrating: true, path: path, progress: reporter,
                               transform: { (tx: WriteTransaction) throws(KuraError) -> Void in
                                   try Self.runCustom(custom, tx: tx, source: source, label: label, path: path)
                               })
            } else {
                try plan.apply(tx, models[k + 1], migrating: true, path: path, progress: reporter)
            }
        }
        return []
    }

    private static func runCustom(_ stage: CustomMigrationStage, tx: WriteTransaction, source: ManagedObjectModel,
                                  label: String, path: String) throws(KuraError) {
        let data = MigrationData(tx: tx, source: source, destination: stage.destination, path: path)
        do { try stage.transform(data) } catch let e as KuraError { throw e } catch {
            throw KuraError(.validation, "the custom migration stage \(label) failed: \(error); the store was left as it was", path: path)
        }
    }
}
