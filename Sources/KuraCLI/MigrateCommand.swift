// kura migrate: brings a store to an Xcode model (issue 13): prints the plan
// (what is added, renamed, converted, rewritten, retired, indexed) and, unless
// --dry-run, performs it in one write transaction (a lightweight migration:
// PersistentContainer+Migration.swift), reporting progress on stderr.

import Foundation
import Kura
import KuraEngine

enum MigrateCommand {
    static let spec = CommandSpec(name: "migrate", help: """
        usage: kura migrate STORE --model MODEL [--dry-run]

        Compares the store with MODEL (an Xcode data model: a .xcdatamodeld
        bundle, whose current version is used, a .xcdatamodel directory or its
        contents file) and prints the plan, one change per line: added, renamed,
        converted, rewritten, retired, indexed or recorded, then any change that
        cannot be inferred (refused). Without --dry-run, performs the migration
        in one atomic write transaction: on any error the store is left as it
        was. Progress goes to stderr. A missing STORE is created for MODEL.

        exit codes: 0 migrated (or nothing to do, or a dry run), 1 the plan has
        refused changes or objects block it (nothing written), 2 usage error or
        a model that does not load, 3 cannot read the store
        """, valueOptions: ["model"], flags: ["dry-run"], positional: 1...1)

    static func run(_ args: [String]) -> Int32 {
        runCommand("migrate") {
            guard let a = try parseArguments(args, spec) else { return ExitCode.ok }
            guard let modelPath = a.value("model") else { throw CLIError.usage("--model MODEL is required") }
            let store = URL(fileURLWithPath: a.positional[0])
            let model: ManagedObjectModel
            do throws(KuraError) { model = try ManagedObjectModel.load(xcodeModel: URL(fileURLWithPath: modelPath)) } catch {
                throw CLIError.usage("cannot load model \(modelPath): \(describe(error))")
            }
            guard FileManager.default.fileExists(atPath: store.path) else {
                // Nothing to migrate: opening creates the store (Core Data's migration of a missing store).
                if a.has("dry-run") {
                    out.line("no store at \(store.path): migrating would create it for the model (dry run: nothing written)")
                } else {
                    try PersistentContainer(url: store, model: model).close()
                    out.line("no store at \(store.path): created it for model version hash \(model.versionHash)")
                }
                return ExitCode.ok
            }
            let check = try PersistentContainer.compatibility(ofStoreAt: store, with: model)
            out.line("store \(store.path): " + (check.storedVersionHash.map { "model version hash \($0)" } ?? "records no model"))
            out.line("model \(modelPath): version hash \(model.versionHash)")
            if !check.isMigrationRequired {
                out.line("nothing to migrate")
                if a.has("dry-run") { return ExitCode.ok }
                // Opening still creates tables of new entities and records the model.
                try PersistentContainer(url: store, model: model).close()
                return ExitCode.ok
            }
            for c in check.changes { out.line("  \(c.kind.rawValue.padding(toLength: 9, withPad: " ", startingAt: 0)) \(c.description)") }
            for u in check.unsupported { out.line("  refused   \(u)") }
            if !check.canMigrateLightweight {
                throw CLIError.problems("\(check.unsupported.count) change\(check.unsupported.count == 1 ? "" : "s") cannot be inferred; nothing written")
            }
            if a.has("dry-run") {
                out.line("dry run: nothing written")
                return ExitCode.ok
            }
            out.flush()
            let staged = StagedMigration(models: [model], progress: { p in
                if p.totalRows > 0 { printError("  \(p.completedRows)/\(p.totalRows) rows: \(p.step)") }
            })
            do {
                let c = try PersistentContainer(url: store, model: model, migration: .staged(staged))
                c.close()
            } catch let e as KuraError where e.code == .validation || e.code == .modelMismatch {
                throw CLIError.problems(describe(e))
            }
            out.line("migrated: the store records model version hash \(model.versionHash)")
            return ExitCode.ok
        }
    }
}

/// The model a store records (`_kura_model`, FORMAT.md "Model identity"), for
/// `kura info` and `kura schema`: read through the engine opened read-only, so
/// a store the engine refuses shows why instead of hashes.
struct RecordedModel {
    struct Entity { var name: String; var hash: String; var properties: [(name: String, hash: String)] }
    var hash = ""
    var entities: [Entity] = []

    /// nil when the store records no model; `.failure` with the reason when
    /// the record cannot be read.
    static func read(_ path: String, hasTable: Bool) -> Result<RecordedModel, CLIError>? {
        guard hasTable else { return nil }
        do {
            let db = try openReadOnly(path)
            defer { db.close() }
            var m = RecordedModel()
            try db.read { tx in
                let rows = try tx.rows(in: try tx.table("_kura_model"))
                while let row = try rows.next() {
                    let v = try row.values()
                    guard v.count >= 8, case .text(let entity) = v[0], case .text(let kind) = v[2], case .text(let hash) = v[7] else {
                        throw CLIError.problems("row \(row.rowID) of _kura_model is malformed")
                    }
                    switch (kind, v[1]) {
                    case ("model", _): m.hash = hash
                    case ("entity", _): m.entities.append(Entity(name: entity, hash: hash, properties: []))
                    case (_, .text(let p)):
                        if let i = m.entities.lastIndex(where: { $0.name == entity }) { m.entities[i].properties.append((p, hash)) }
                    default: throw CLIError.problems("row \(row.rowID) of _kura_model is malformed")
                    }
                }
            }
            return .success(m)
        } catch let e as CLIError {
            return .failure(e)
        } catch {
            return .failure(CLIError.problems("\(error)"))
        }
    }

    var json: JSON {
        .object([("versionHash", .string(hash)), ("entities", .array(entities.map { e in
            .object([("name", .string(e.name)), ("versionHash", .string(e.hash)),
                     ("properties", .array(e.properties.map { .object([("name", .string($0.name)), ("versionHash", .string($0.hash))]) }))])
        }))])
    }
}
