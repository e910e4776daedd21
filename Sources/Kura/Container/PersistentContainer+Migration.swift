// PersistentContainer+Migration: how a store is checked against a model on
// open, and the lightweight migration that brings it to the model (issue 13,
// first subset; FORMAT.md "Object stores", "Model changes").
//
// The plan is computed from the store's catalog alone (stored table schemas
// and indexes) and the new model: the store does not record the model that
// wrote it yet, so a change is inferred from names and column types.
// `SchemaPlan.make` reads only; `apply` runs inside the open's single write
// transaction, after the plan was made in that same transaction, so the
// store another process may have changed meanwhile is never judged from a
// stale read, and a failure (or a crash) leaves the store as it was: the
// engine's commit is atomic.
//
// Steps and their cost (no step rewrites a row):
//   - new entity table / join table: created with its indexes (also without
//     migration, as before);
//   - hidden columns `_version`, `_exact_*` missing: appended (also without
//     migration: DecimalStorage.swift);
//   - attribute or to-one relationship added: column appended; old rows read
//     its default (null, or the attribute's default);
//   - attribute renamed (its `renamingIdentifier` names a stored column the
//     model no longer has, same column type): the column is renamed in the
//     catalog;
//   - attribute or to-one relationship removed: its column stays in the
//     table, unused, renamed `_retired_<name>` (`_2`, `_3`... if taken) so
//     later opens know it is retired and a property added again under the
//     old name starts empty (the engine has no drop-column); new rows hold
//     null there;
//   - index, fetch index or uniqueness constraint added, removed or changed:
//     the engine index is created (filled from the rows; a unique one that
//     rows violate fails the open with `.validation`) or dropped.
// Because columns may now sit in another order than the model's, or beside
// unused ones, row layouts are computed from the stored schemas
// (`RowLayout.all(_:schemas:)`), by column name.
//
// Refused (a `.modelMismatch` naming each, needing a migration kind Kura does
// not infer yet): a column whose type changed, a to-one that became to-many or
// back, an ordered flag changed on a to-one's inverse, inheritance changes
// (a table gaining or losing `_entity`, an entity that became a subentity
// while its own table holds rows, a destination gaining subentities), a
// required attribute without default added to a table that has rows.

import Foundation

/// What opening a store does when its tables differ from the model.
public enum StoreMigration: Sendable, Equatable {
    /// Refuse with `.modelMismatch` (the default): the store is not changed.
    case none
    /// Infer and apply a lightweight migration inside the open's write
    /// transaction (see ``PersistentContainer/init(url:model:options:persistentHistoryTracking:seed:migration:)``).
    case lightweight
}

/// The answer of ``PersistentContainer/compatibility(ofStoreAt:with:options:)``.
public struct StoreCompatibility: Sendable, Equatable {
    /// Every difference between the store and the model that opening needs a
    /// migration for, one line each (the list `.modelMismatch` gives).
    public let differences: [String]
    /// The differences a lightweight migration cannot infer (a subset of
    /// ``differences``): opening with `.lightweight` refuses while any is left.
    public let unsupported: [String]
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
            return StoreCompatibility(differences: [], unsupported: [])
        }
        defer { db.close() }
        let plan: SchemaPlan
        do { plan = try db.read { tx in try SchemaPlan.make(tx, model) } } catch let e as KuraError { throw e } catch {
            throw KuraError(.io, "\(error)", path: db.path)
        }
        return StoreCompatibility(differences: plan.differences, unsupported: plan.unsupported)
    }

    /// Whether opening the store at `url` with `model` needs a migration
    /// (``compatibility(ofStoreAt:with:options:)`` tells which differences).
    public static func isMigrationRequired(at url: URL, for model: ManagedObjectModel) throws(KuraError) -> Bool {
        try compatibility(ofStoreAt: url, with: model).isMigrationRequired
    }
}

/// The steps that bring a store to a model (see the header).
struct SchemaPlan {
    enum Step {
        case createTable(String)
        case createJoinTable(String)
        case addColumn(table: String, ColumnDefinition)
        case renameColumn(table: String, from: String, to: String)
        case dropIndex(table: String, name: String)
        case createIndex(table: String, name: String, columns: [IndexColumn], unique: Bool)
    }
    /// Steps taken on every open (new tables, hidden columns).
    var always: [Step] = []
    /// Steps that are a migration, with their descriptions.
    var migration: [(step: Step?, description: String)] = []
    /// Differences no lightweight migration infers.
    var unsupported: [String] = []

    var differences: [String] { migration.map(\.description) + unsupported }

    /// The prefix a removed property's column is renamed with (it stays, unused).
    static let retiredPrefix = "_retired_"

    static let notInferred = "needs a migration kind Kura does not infer yet"

    /// The plan for `model` over the store `tx` reads. Reads only.
    static func make(_ tx: ReadTransaction, _ model: ManagedObjectModel) throws(KuraError) -> SchemaPlan {
        var plan = SchemaPlan()
        let storedTables = Set(try tx.tableNames())
        for e in model.entities where e.superentityName != nil && storedTables.contains(e.name) {
            if try tx.rowCount(try tx.table(e.name)) > 0 {
                plan.unsupported.append("\(e.name): the store keeps its objects in table \"\(e.name)\", the model in its parent's table \"\(e.hierarchy.table)\" (an inheritance change \(notInferred))")
            }
        }
        for table in model.entityTables {
            let expected = try model.schema(ofTable: table)
            guard storedTables.contains(table) else { plan.always.append(.createTable(table)); continue }
            let info = try tx.table(table)
            guard let stored = try tx.schema(of: info) else {
                plan.unsupported.append("table \"\(table)\" has no schema (it is not an entity table)")
                continue
            }
            try plan.compareColumns(table, stored: stored, expected: expected, rows: try tx.rowCount(info), model, storedTables)
            plan.compareIndexes(table, stored: try tx.indexes(of: table), expected: model.indexes(ofTable: table), model)
        }
        for name in model.joinTables {
            if storedTables.contains(name) {
                let stored = try tx.schema(of: try tx.table(name))
                let want = ManagedObjectModel.joinSchema.columns
                if stored?.columns.map(\.name) == want.dropLast().map(\.name), let added = want.last {
                    // A join table from before ordered many-to-many: its inverse_position column is appended.
                    plan.always.append(.addColumn(table: name, added))
                } else if stored?.columns.map(\.name) != want.map(\.name) {
                    plan.unsupported.append("table \"\(name)\" is not a join table (columns \(stored?.columns.map(\.name).joined(separator: ", ") ?? "none"))")
                }
            } else {
                plan.always.append(.createJoinTable(name))
            }
        }
        return plan
    }

    private mutating func compareColumns(_ table: String, stored: TableSchema, expected: TableSchema, rows: Int,
                                         _ model: ManagedObjectModel, _ storedTables: Set<String>) throws(KuraError) {
        let members = model.entities(inTable: table)
        var attributes: [String: (AttributeDescription, String)] = [:]
        var toOnes: [String: (RelationshipDescription, String)] = [:]
        var toManys: [String: String] = [:]
        for e in members {
            for a in e.declaredAttributes where !a.isTransient { attributes[a.name] = (a, e.name) }
            for r in e.declaredRelationships where !r.isTransient { if r.isToMany { toManys[r.name] = e.name } else { toOnes[r.name] = (r, e.name) } }
        }
        var renamedFrom = Set<String>()
        for c in expected.columns {
            if let h = stored.position(of: c.name).map({ stored.columns[$0] }) {
                if h.type != c.type {
                    unsupported.append("\(table).\(c.name): the store has \(h.type.rawValue), the model \(c.type.rawValue) (a type change \(Self.notInferred))")
                }
                continue
            }
            if c.name == ManagedObjectModel.versionColumn || c.name.hasPrefix(AttributeType.exactColumn("")) {
                always.append(.addColumn(table: table, c))
            } else if c.name == ManagedObjectModel.entityColumn {
                unsupported.append("\(table): the model stores several entities in it (\(members.map(\.name).joined(separator: ", "))), the store one (an inheritance change \(Self.notInferred))")
            } else if let (a, entity) = attributes[c.name] {
                if let old = a.renamingIdentifier, old != a.name, let p = stored.position(of: old), expected.position(of: old) == nil {
                    if stored.columns[p].type != c.type {
                        unsupported.append("\(entity).\(a.name): renamed from \"\(old)\" and changed from \(stored.columns[p].type.rawValue) to \(c.type.rawValue) (a type change \(Self.notInferred))")
                    } else {
                        renamedFrom.insert(old)
                        migration.append((.renameColumn(table: table, from: old, to: a.name), "\(entity).\(a.name): renamed from \"\(old)\" (column renamed, no row rewritten)"))
                    }
                } else if !a.isOptional && a.defaultValue == nil && rows > 0 {
                    unsupported.append("\(entity).\(a.name): a required attribute without a default, added to a table that has \(rows) rows (give it a default)")
                } else {
                    migration.append((.addColumn(table: table, c), "\(entity).\(a.name): in the model, not in the store (column added, no row rewritten)"))
                }
            } else if let (r, entity) = toOnes[c.name] {
                if storedTables.contains("_\(entity)_\(r.name)") {
                    unsupported.append("\(entity).\(r.name): to-many in the store, to-one in the model (a relationship change \(Self.notInferred))")
                } else {
                    migration.append((.addColumn(table: table, c), "\(entity).\(r.name): in the model, not in the store (column added, no row rewritten)"))
                }
            } else {
                // `<to-one>_order` or `<to-one>_entity` missing beside a stored key.
                unsupported.append("\(table).\(c.name): in the model, not in the store (a relationship or inheritance change \(Self.notInferred))")
            }
        }
        for c in stored.columns where expected.position(of: c.name) == nil && !renamedFrom.contains(c.name) && !c.name.hasPrefix(Self.retiredPrefix) {
            if let entity = toManys[c.name] {
                unsupported.append("\(entity).\(c.name): to-one in the store, to-many in the model (a relationship change \(Self.notInferred))")
            } else if c.name == ManagedObjectModel.entityColumn {
                unsupported.append("\(table): the store holds several entities in it, the model one (an inheritance change \(Self.notInferred))")
            } else if c.name.hasPrefix("_") && !c.name.hasPrefix(AttributeType.exactColumn("")) {
                unsupported.append("\(table).\(c.name): in the store, not in the model")
            } else if let base = Self.companionBase(c.name), stored.position(of: base) != nil {
                unsupported.append("\(table).\(c.name): in the store, not in the model (a relationship or inheritance change \(Self.notInferred))")
            } else {
                var retired = Self.retiredPrefix + c.name
                var n = 2
                while stored.position(of: retired) != nil { retired = Self.retiredPrefix + c.name + "_\(n)"; n += 1 }
                migration.append((.renameColumn(table: table, from: c.name, to: retired),
                                  "\(table).\(c.name): in the store, not in the model (column kept unused as \"\(retired)\", no row rewritten)"))
            }
        }
    }

    /// The to-one a `<name>_order` or `<name>_entity` column belongs to.
    static func companionBase(_ column: String) -> String? {
        for suffix in ["_order", ManagedObjectModel.companionSuffix] where column.hasSuffix(suffix) && column.count > suffix.count {
            return String(column.dropLast(suffix.count))
        }
        return nil
    }

    private mutating func compareIndexes(_ table: String, stored: [IndexDefinition],
                                         expected: [(name: String, columns: [IndexColumn], unique: Bool)], _ model: ManagedObjectModel) {
        func same(_ a: [IndexColumn], _ b: [IndexColumn]) -> Bool {
            a.map { [$0.name, "\($0.descending)", "\($0.folded)"] } == b.map { [$0.name, "\($0.descending)", "\($0.folded)"] }
        }
        let want = Dictionary(expected.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        for ix in stored {
            if let w = want[ix.name], same(w.columns, ix.columns), w.unique == ix.isUnique { continue }
            migration.append((.dropIndex(table: table, name: ix.name), "\(table): index \"\(ix.name)\" on \(ix.columns.map(\.name).joined(separator: ", "))\(ix.isUnique ? " (unique)" : "") is not in the model (dropped)"))
        }
        let have = Dictionary(stored.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        for w in expected {
            if let h = have[w.name], same(w.columns, h.columns), w.unique == h.isUnique { continue }
            migration.append((.createIndex(table: table, name: w.name, columns: w.columns, unique: w.unique),
                              "\(table): index \"\(w.name)\" on \(w.columns.map(\.name).joined(separator: ", "))\(w.unique ? " (unique)" : "") is not in the store (built from the rows)"))
        }
    }

    /// Takes the steps in `tx`: drops first, then columns, then new indexes.
    func apply(_ tx: WriteTransaction, _ model: ManagedObjectModel, migrating: Bool, path: String) throws(KuraError) {
        let steps = always + (migrating ? migration.compactMap(\.step) : [])
        func order(_ s: Step) -> Int {
            switch s {
            case .dropIndex: 0
            case .createTable, .createJoinTable, .addColumn, .renameColumn: 1
            case .createIndex: 2
            }
        }
        for step in steps.sorted(by: { order($0) < order($1) }) {
            switch step {
            case .createTable(let table):
                let t = try tx.createTable(table, schema: try model.schema(ofTable: table))
                for ix in model.indexes(ofTable: table) { try tx.createIndex(ix.name, on: t, columns: ix.columns, unique: ix.unique) }
            case .createJoinTable(let name):
                let t = try tx.createTable(name, schema: ManagedObjectModel.joinSchema)
                try tx.createIndex(name + "_source", on: t, columns: [IndexColumn("source"), IndexColumn("target")])
                try tx.createIndex(name + "_target", on: t, columns: [IndexColumn("target"), IndexColumn("source")])
            case .addColumn(let table, let c):
                try tx.addColumn(c, to: try tx.table(table))
            case .renameColumn(let table, let from, let to):
                try tx.renameColumn(from, to: to, in: try tx.table(table))
            case .dropIndex(_, let name):
                try tx.dropIndex(name)
            case .createIndex(let table, let name, let columns, let unique):
                do {
                    try tx.createIndex(name, on: try tx.table(table), columns: columns, unique: unique)
                } catch where error.code == .constraintViolation {
                    throw KuraError(.validation, "cannot add the uniqueness constraint of table \"\(table)\" on \(columns.map(\.name).joined(separator: ", ")): objects in the store violate it (\(error.message)); the store was left as it was", path: path)
                }
            }
        }
    }
}
