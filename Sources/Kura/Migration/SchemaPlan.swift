// SchemaPlan: the steps that bring a store to a model (issue 13; FORMAT.md
// "Object stores", "Model changes"), computed from the store's catalog and
// the model it records in `_kura_model` (StoredModel.swift), applied in the
// caller's write transaction.
//
// `make` reads only. It matches each expected table and column to the store
// by name, through renaming identifiers (entities, attributes, to-ones), and,
// when the store records its model, compares each property with its stored
// record: an attribute type change is a conversion (AttributeConversion.swift),
// optional → required a fill or a check. A store without a record is judged
// from column types alone (an int16 → int64 change is then invisible, as
// before records existed).
//
// `apply` runs the steps in phases (`Step.phase`), so each sees the store it needs:
//   0. indexes that change or go are dropped (a renamed or converted column
//      may not carry one);
//   1. tables renamed (entity renames; join tables follow);
//   2. tables created, columns added, columns renamed;
//   3. entity renames inside hierarchies written into `_entity` and key
//      companions; objects moved between tables by changes of inheritance,
//      then keys and join rows pointing at moved objects remapped
//      (SchemaPlan+Inheritance.swift, RowMover.swift);
//   4. values converted or checked; to-one keys copied into a join table or
//      the inverse's key column, or back (to-one ↔ to-many, KeyMover.swift);
//   -  a custom stage's transform, if any (StagedMigration.swift);
//   5. nulls of newly required attributes filled with the default or reported
//      (naming up to five objects); `_entity`/companion columns about to go
//      checked to name only entities still there;
//   6. removed properties' columns retired (`_retired_<name>`);
//   7. indexes built from the rows (a unique one that rows violate fails with
//      `.validation` naming the rows' values);
//   then the model recorded (`_kura_model`), if its hash differs.
// Every failure throws inside the transaction, so the store is left as it
// was: the engine's commit is atomic, and nothing reaches the file before it.
//
// Rows rewritten: only by phases 3-5, and only the rows whose value changes
// (a conversion between column types rewrites every row holding a value; a
// fill rewrites the rows holding null; a move rewrites every moved row).
// Every step streams (batches in row-ID order, no map of rows or keys). The
// transaction keeps every page it changes in memory until commit (unless the
// pager spills it), so a rewrite needs memory in proportion to the rewritten
// table (ARCHITECTURE.md, "Migration"); FORMAT.md "Model changes" lists what
// each change rewrites.

import Foundation
import KuraEngine

/// What a migration step does, for the plan a caller prints.
public enum StoreChangeKind: String, Sendable, CaseIterable {
    /// A table, column or index is added; no row is rewritten.
    case added
    /// An entity or property is renamed; no row is rewritten.
    case renamed
    /// Stored values are converted to another type (rows rewritten) or
    /// checked against a narrower one (rows read).
    case converted
    /// Rows are rewritten to fill a value (optional → required with a default)
    /// or read to check one (required without a default).
    case rewritten
    /// A removed property's column is kept unused; no row is rewritten.
    case retired
    /// An index is dropped or rebuilt from the rows.
    case indexed
    /// The recorded model changes and nothing else does (a version hash
    /// modifier, an inverse that does not change storage, a widened integer).
    case recorded
}

/// One change of a migration plan (``StoreCompatibility/changes``).
public struct StoreChange: Sendable, Equatable {
    /// What it does.
    public let kind: StoreChangeKind
    /// The entity or table, the property or index, and what happens to it.
    public let description: String
}

struct SchemaPlan {
    enum Step {
        case createTable(String)
        case createJoinTable(String)
        case renameTable(from: String, to: String)
        case addColumn(table: String, ColumnDefinition)
        case renameColumn(table: String, from: String, to: String)
        /// Converts or checks `column`'s values for `kinds` (nil: every row).
        case convert(table: String, column: String, entity: String, attribute: String, kinds: Set<String>?, from: AttributeType, to: AttributeType, definition: ColumnDefinition)
        /// Fills nulls with `fill`, or (nil) reports the objects that hold one.
        case require(table: String, column: String, entity: String, property: String, kinds: Set<String>?, fill: Value?)
        case retireColumn(table: String, from: String, to: String)
        /// Sets `column` to `value` in rows where it is absent or null (and,
        /// with `whereSet`, that column is not null).
        case fill(table: String, column: String, value: Value, whereSet: String?)
        /// Exchanges `source` and `target` in every row of a join table.
        case swapJoinColumns(table: String)
        /// Copies every non-null key of `column` into join table `join`.
        case keysToJoinTable(table: String, column: String, join: String, forward: Bool, kinds: Set<String>?)
        /// Sets `column` from join table `join` (one target per object), then drops `join`.
        case joinTableToKeys(table: String, column: String, join: String, forward: Bool, entity: String, relationship: String)
        case dropIndex(table: String, name: String)
        case createIndex(table: String, name: String, columns: [IndexColumn], unique: Bool)
        /// Rewrites renamed entities' old names in `_entity` and `companions` (RowMover.swift).
        case renameKinds(table: String, companions: [String], renames: [String: String])
        /// Moves the objects of `kinds` from table `from` into `to` (RowMover.swift).
        case moveRows(from: String, to: String, kinds: Set<String>, unsharedEntity: String, renames: [String: String],
                      columnSources: [String: String], dropSource: Bool)
        /// After the moves: keys and join rows pointing at moved objects get their offset.
        case remapKeys(keys: [RowMover.Key], sides: [RowMover.JoinSide])
        /// Every value of an `_entity` or companion column about to be retired is one of `allowed`.
        case checkKinds(table: String, column: String, allowed: Set<String>, label: String)
        /// Each key of `column` written into the inverse's key (to-one → to-many, KeyMover.swift).
        case keysToInverse(table: String, column: String, kinds: Set<String>?, inverseTable: String, inverseColumn: String, entity: String, relationship: String)
        /// `column` set from the inverse's keys (to-many → to-one, KeyMover.swift).
        case inverseKeysToKeys(table: String, column: String, companion: String?, inverseTable: String, inverseColumn: String,
                               inverseKinds: Set<String>?, inverseEntity: String, entity: String, relationship: String)

        var phase: Int {
            switch self {
            case .dropIndex: 0
            case .renameTable: 1
            case .createTable, .createJoinTable, .addColumn, .renameColumn: 2
            case .renameKinds, .moveRows, .remapKeys: 3
            case .convert, .swapJoinColumns, .keysToJoinTable, .joinTableToKeys, .keysToInverse, .inverseKeysToKeys, .fill: 4
            case .require, .checkKinds: 5
            case .retireColumn: 6
            case .createIndex: 7
            }
        }
    }
    /// Steps taken on every open (new tables, hidden columns).
    var always: [Step] = []
    /// Steps that are a migration, with what they do.
    var migration: [(step: Step?, change: StoreChange)] = []
    /// Differences no lightweight migration infers.
    var unsupported: [String] = []
    /// The model the store records (nil: none).
    var stored: StoredModel?
    /// Whether the model's record differs from the store's.
    var recordChanges = true

    var differences: [String] { migration.map(\.change.description) + unsupported }

    /// The prefix a removed property's column is renamed with (it stays, unused).
    static let retiredPrefix = "_retired_"

    static let notInferred = "needs a migration kind Kura does not infer; use a custom migration stage"

    mutating func add(_ kind: StoreChangeKind, _ step: Step?, _ text: String) {
        migration.append((step, StoreChange(kind: kind, description: text)))
    }

    /// The plan for `model` over the store `tx` reads. Reads only. With
    /// `custom`, a required attribute added without default is a check after
    /// the stage's transform rather than a refusal.
    static func make(_ tx: ReadTransaction, _ model: ManagedObjectModel, custom: Bool = false) throws(KuraError) -> SchemaPlan {
        var plan = SchemaPlan()
        plan.stored = try StoredModel.read(tx)
        let record = StoredModel(model)
        plan.recordChanges = plan.stored?.hash != record.hash
        let storedTables = Set(try tx.tableNames())
        // A store recorded at this very model: only new hidden columns can be missing.
        let sameModel = plan.stored?.hash == record.hash
        var renamedTables: [String: String] = [:]  // model table → stored table
        let entityRenames = Self.entityRenames(model)
        // Without a record the stored hierarchy is unknown: objects cannot be moved.
        for e in model.entities where e.superentityName != nil && storedTables.contains(e.name) && !sameModel && plan.stored == nil {
            if try tx.rowCount(try tx.table(e.name)) > 0 {
                plan.unsupported.append("\(e.name): the store keeps its objects in table \"\(e.name)\", the model in its parent's table \"\(e.hierarchy.table)\" (an inheritance change \(notInferred))")
            }
        }
        for table in model.entityTables {
            let expected = try model.schema(ofTable: table)
            var storedName = table
            if !storedTables.contains(table) {
                let root = model.entitiesByName[table]
                if let old = root?.renamingIdentifier, old != table, storedTables.contains(old), model.entitiesByName[old] == nil {
                    storedName = old
                    renamedTables[table] = old
                    plan.add(.renamed, .renameTable(from: old, to: table), "\(table): renamed from \"\(old)\" (table renamed, no row rewritten)")
                } else {
                    plan.always.append(.createTable(table))
                    continue
                }
            }
            let info = try tx.table(storedName)
            guard let storedSchema = try tx.schema(of: info) else {
                plan.unsupported.append("table \"\(storedName)\" has no schema (it is not an entity table)")
                continue
            }
            let converted = try plan.compareColumns(table, stored: storedSchema, expected: expected, rows: try tx.rowCount(info), model, storedTables,
                                                    oldTable: renamedTables[table], custom: custom)
            plan.compareIndexes(table, stored: try tx.indexes(of: storedName), expected: model.indexes(ofTable: table), converted: converted)
        }
        for name in model.joinTables {
            if storedTables.contains(name) {
                let s = try tx.schema(of: try tx.table(name))
                let want = ManagedObjectModel.joinSchema.columns
                if s?.columns.map(\.name) == want.dropLast().map(\.name), let added = want.last {
                    // A join table from before ordered many-to-many: its inverse_position column is appended.
                    plan.always.append(.addColumn(table: name, added))
                } else if s?.columns.map(\.name) != want.map(\.name) {
                    plan.unsupported.append("table \"\(name)\" is not a join table (columns \(s?.columns.map(\.name).joined(separator: ", ") ?? "none"))")
                }
            } else if let (old, flipped) = Self.renamedJoinTable(name, model), storedTables.contains(old) {
                plan.add(.renamed, .renameTable(from: old, to: name), "join table \"\(name)\": renamed from \"\(old)\" with its entity or relationship (no row rewritten)")
                if flipped {
                    plan.add(.rewritten, .swapJoinColumns(table: name), "join table \"\(name)\": its sides swap with the renamed names' order (source and target exchanged, rows rewritten)")
                }
            } else {
                plan.always.append(.createJoinTable(name))
            }
        }
        if !sameModel { try plan.planInheritance(tx, model, storedTables, renames: entityRenames) }
        if plan.recordChanges && plan.stored != nil && plan.migration.isEmpty && plan.unsupported.isEmpty {
            plan.add(.recorded, nil, "the model's version hash changed (\(plan.stored?.hash ?? "") → \(record.hash)) without a change to storage (recorded)")
        }
        return plan
    }

    /// The stored name of join table `name` before its entity or relationship
    /// was renamed (through renaming identifiers), and whether its sides swap.
    static func renamedJoinTable(_ name: String, _ model: ManagedObjectModel) -> (String, Bool)? {
        for e in model.entities {
            for r in e.declaredRelationships {
                guard case .joinTable(let n, let forward) = model.storage(of: r, in: e), n == name, forward else { continue }
                let oldE = e.renamingIdentifier ?? e.name, oldR = r.renamingIdentifier ?? r.name
                guard let inv = r.inverse, let d = model.entitiesByName[r.destination], let ir = d.relationshipsByName[inv] else {
                    let old = "_\(oldE)_\(oldR)"
                    return old == name ? nil : (old, false)
                }
                let oldD = d.renamingIdentifier ?? d.name, oldI = ir.renamingIdentifier ?? ir.name
                let first = (oldE, oldR) <= (oldD, oldI)
                let old = first ? "_\(oldE)_\(oldR)" : "_\(oldD)_\(oldI)"
                return old == name ? nil : (old, !first)
            }
        }
        return nil
    }

    /// The stored record of `e` (through its renaming identifier).
    private func storedEntity(_ e: EntityDescription, renamedFrom: String?) -> StoredModel.Entity? {
        if let s = stored?.entities[e.name] { return s }
        if let old = e.renamingIdentifier { return stored?.entities[old] }
        return renamedFrom.flatMap { stored?.entities[$0] }
    }

    /// Compares columns; returns the columns whose values change type (their
    /// indexes are rebuilt).
    private mutating func compareColumns(_ table: String, stored: TableSchema, expected: TableSchema, rows: Int,
                                         _ model: ManagedObjectModel, _ storedTables: Set<String>,
                                         oldTable: String?, custom: Bool) throws(KuraError) -> Set<String> {
        let members = model.entities(inTable: table)
        let shared = members.count > 1
        var attributes: [String: (AttributeDescription, EntityDescription)] = [:]
        var toOnes: [String: (RelationshipDescription, EntityDescription)] = [:]
        var toManys: [String: (RelationshipDescription, EntityDescription)] = [:]
        for e in members {
            for a in e.declaredAttributes where !a.isTransient { attributes[a.name] = (a, e) }
            for r in e.declaredRelationships where !r.isTransient { if r.isToMany { toManys[r.name] = (r, e) } else { toOnes[r.name] = (r, e) } }
        }
        var renamedFrom = Set<String>()
        var converted = Set<String>()
        for c in expected.columns {
            // The stored column this one continues: same name, or its renaming identifier.
            var storedColumn = stored.position(of: c.name).map { stored.columns[$0] }
            var oldName = c.name
            if storedColumn == nil, let old = (attributes[c.name]?.0.renamingIdentifier ?? toOnes[c.name]?.0.renamingIdentifier),
               old != c.name, let p = stored.position(of: old), expected.position(of: old) == nil {
                storedColumn = stored.columns[p]
                oldName = old
            }
            if let h = storedColumn {
                if oldName != c.name {
                    renamedFrom.insert(oldName)
                    let entity = attributes[c.name]?.1.name ?? toOnes[c.name]?.1.name ?? table
                    add(.renamed, .renameColumn(table: table, from: oldName, to: c.name), "\(entity).\(c.name): renamed from \"\(oldName)\" (column renamed, no row rewritten)")
                    if let (r, _) = toOnes[c.name] {
                        // The key's companions follow it.
                        for suffix in ["_order", ManagedObjectModel.companionSuffix] where stored.position(of: oldName + suffix) != nil && expected.position(of: r.name + suffix) != nil {
                            renamedFrom.insert(oldName + suffix)
                            add(.renamed, .renameColumn(table: table, from: oldName + suffix, to: r.name + suffix), "\(entity).\(r.name)\(suffix): renamed from \"\(oldName)\(suffix)\" (column renamed)")
                        }
                    }
                }
                if let (a, e) = attributes[c.name] {
                    let old = storedEntity(e, renamedFrom: oldTable)?.properties[oldName]
                    let fromType = old.flatMap { $0.kind == "attribute" ? AttributeType(rawValue: $0.type) : nil }
                        ?? (h.type == c.type ? a.type : AttributeConversion.representative(h.type))
                    let kinds: Set<String>? = shared ? e.hierarchy.kinds : nil
                    if fromType != a.type {
                        switch AttributeConversion.cost(from: fromType, to: a.type) {
                        case nil:
                            unsupported.append("\(e.name).\(a.name): the store has \(fromType.rawValue) (a \(h.type.rawValue) column), the model \(a.type.rawValue) (a type change \(Self.notInferred))")
                        case .nothing?:
                            add(.recorded, nil, "\(e.name).\(a.name): \(fromType.rawValue) → \(a.type.rawValue) (same stored values, no row rewritten)")
                        case .check?:
                            add(.converted, .convert(table: table, column: c.name, entity: e.name, attribute: a.name, kinds: kinds, from: fromType, to: a.type, definition: c),
                                "\(e.name).\(a.name): \(fromType.rawValue) → \(a.type.rawValue) (every value checked to fit, no row rewritten)")
                        case .rewrite?:
                            converted.insert(c.name)
                            add(.converted, .convert(table: table, column: c.name, entity: e.name, attribute: a.name, kinds: kinds, from: fromType, to: a.type, definition: c),
                                "\(e.name).\(a.name): \(fromType.rawValue) → \(a.type.rawValue) (values converted, rows rewritten)")
                        }
                    } else if h.type != c.type {
                        unsupported.append("\(table).\(c.name): the store has \(h.type.rawValue), the model \(c.type.rawValue) (a type change \(Self.notInferred))")
                    }
                    if let old, old.optional, !a.isOptional {
                        let fill = a.defaultValue.map { _ in c.defaultValue }
                        add(.rewritten, .require(table: table, column: c.name, entity: e.name, property: a.name, kinds: kinds, fill: fill),
                            "\(e.name).\(a.name): optional → required (" + (fill == nil ? "every object checked to have a value)" : "objects without a value get the default, those rows rewritten)"))
                    }
                } else if let (r, e) = toOnes[c.name] {
                    if let old = storedEntity(e, renamedFrom: oldTable)?.properties[oldName], old.optional, !r.isOptional {
                        add(.rewritten, .require(table: table, column: c.name, entity: e.name, property: r.name, kinds: shared ? e.hierarchy.kinds : nil, fill: nil),
                            "\(e.name).\(r.name): optional → required (every object checked to have one)")
                    }
                    if h.type != c.type { unsupported.append("\(table).\(c.name): the store has \(h.type.rawValue), the model \(c.type.rawValue)") }
                } else if h.type != c.type {
                    unsupported.append("\(table).\(c.name): the store has \(h.type.rawValue), the model \(c.type.rawValue) (a type change \(Self.notInferred))")
                }
                continue
            }
            if c.name == ManagedObjectModel.versionColumn || c.name.hasPrefix(AttributeType.exactColumn("")) {
                always.append(.addColumn(table: table, c))
            } else if c.name == ManagedObjectModel.entityColumn {
                // The entity gained subentities: its rows are all of the root
                // entity, which the column's default says without a rewrite.
                let column = ColumnDefinition(c.name, c.type, nullable: false, default: .text(table))
                add(.added, .addColumn(table: table, column), "\(table): gained subentities (\(members.dropFirst().map(\.name).joined(separator: ", "))); column \"\(c.name)\" added")
                add(.rewritten, .fill(table: table, column: c.name, value: .text(table), whereSet: nil), "\(table): every stored object marked as \(table) in \"\(c.name)\" (rows rewritten)")
            } else if let (a, e) = attributes[c.name] {
                if !a.isOptional && a.defaultValue == nil && rows > 0 {
                    if custom {
                        add(.added, .addColumn(table: table, c), "\(e.name).\(a.name): in the model, not in the store (column added, no row rewritten)")
                        add(.rewritten, .require(table: table, column: c.name, entity: e.name, property: a.name, kinds: shared ? e.hierarchy.kinds : nil, fill: nil),
                            "\(e.name).\(a.name): required without a default (every object checked to have a value after the custom stage)")
                    } else {
                        unsupported.append("\(e.name).\(a.name): a required attribute without a default, added to a table that has \(rows) rows (give it a default, or fill it in a custom migration stage)")
                    }
                } else {
                    add(.added, .addColumn(table: table, c), "\(e.name).\(a.name): in the model, not in the store (column added, no row rewritten)")
                }
            } else if let (r, e) = toOnes[c.name] {
                let (join, forward) = Self.joinTable(ifToMany: r, in: e, model)
                if storedTables.contains(join) && !model.joinTables.contains(join) {
                    // To-many (through a join table) → to-one: each object's one
                    // target moves into the new key column; the join table goes.
                    add(.added, .addColumn(table: table, c), "\(e.name).\(r.name): to-many in the store, to-one in the model (key column added)")
                    add(.rewritten, .joinTableToKeys(table: table, column: c.name, join: join, forward: forward, entity: e.name, relationship: r.name),
                        "\(e.name).\(r.name): each object's target copied from join table \"\(join)\" into the key (rows with a target rewritten; an object with several fails the migration), then the join table dropped")
                } else if storedTables.contains("_\(e.name)_\(r.name)") {
                    unsupported.append("\(e.name).\(r.name): to-many in the store, to-one in the model (a relationship change \(Self.notInferred))")
                } else if let old = storedEntity(e, renamedFrom: oldTable)?.properties[r.renamingIdentifier ?? r.name] ?? storedEntity(e, renamedFrom: oldTable)?.properties[r.name],
                          old.kind == "relationship", old.type != "to-one", let inv = model.reciprocalInverse(of: r), !inv.isToMany,
                          let d = model.entitiesByName[r.destination],
                          storedEntity(d, renamedFrom: nil)?.properties[inv.renamingIdentifier ?? inv.name]?.type == "to-one" {
                    // One-to-many → one-to-one: each object's key comes from the
                    // inverse's keys (stored as a to-one, so it holds them).
                    let owner = d.hierarchy.relationshipOwners[inv.name] ?? d.name
                    let invKinds: Set<String>? = d.hierarchy.isShared ? model.entitiesByName[owner]?.hierarchy.kinds : nil
                    add(.added, .addColumn(table: table, c), "\(e.name).\(r.name): to-many in the store, to-one in the model (key column added)")
                    add(.rewritten, .inverseKeysToKeys(table: table, column: c.name, companion: model.needsEntityCompanion(r.destination) ? c.name + ManagedObjectModel.companionSuffix : nil,
                                                       inverseTable: d.hierarchy.table, inverseColumn: inv.name, inverseKinds: invKinds, inverseEntity: owner,
                                                       entity: e.name, relationship: r.name),
                        "\(e.name).\(r.name): each object's target copied from the inverse \(d.name).\(inv.name) (rows with a target rewritten; an object with several fails the migration)")
                } else if let old = storedEntity(e, renamedFrom: oldTable)?.properties[r.renamingIdentifier ?? r.name], old.kind == "relationship", old.type != "to-one" {
                    // A to-many whose keys are neither in a join table found above nor in the inverse's key: an empty column would lose them.
                    unsupported.append("\(e.name).\(r.name): to-many in the store, to-one in the model, its keys in neither a matching join table nor a to-one inverse (a relationship change \(Self.notInferred))")
                } else {
                    add(.added, .addColumn(table: table, c), "\(e.name).\(r.name): in the model, not in the store (column added, no row rewritten)")
                }
            } else if c.name.hasSuffix("_order"), let base = Self.companionBase(c.name), let (r, e) = toOnes[base], expected.position(of: base) != nil {
                // The inverse to-many became ordered: positions start empty, and
                // an empty position sorts after the others in row-ID order, the
                // order the unordered relationship had.
                add(.added, .addColumn(table: table, c), "\(e.name).\(r.name): its inverse became ordered (column \"\(c.name)\" added; objects keep their row-ID order until positions are saved; no row rewritten)")
            } else if c.name.hasSuffix(ManagedObjectModel.companionSuffix), let base = Self.companionBase(c.name), let (r, e) = toOnes[base],
                      expected.position(of: base) != nil, stored.position(of: base) != nil || attributes[base] == nil {
                // The destination gained subentities: every stored key points at
                // an object of the destination itself, which the default says.
                add(.added, .addColumn(table: table, c), "\(e.name).\(r.name): its destination \(r.destination) gained subentities (column \"\(c.name)\" added)")
                add(.rewritten, .fill(table: table, column: c.name, value: .text(r.destination), whereSet: base),
                    "\(e.name).\(r.name): stored keys marked as pointing at \(r.destination) (rows with a key rewritten)")
            } else {
                // `<to-one>_order` or `<to-one>_entity` missing beside a stored key.
                unsupported.append("\(table).\(c.name): in the model, not in the store (a relationship or inheritance change \(Self.notInferred))")
            }
        }
        for c in stored.columns where expected.position(of: c.name) == nil && !renamedFrom.contains(c.name) && !c.name.hasPrefix(Self.retiredPrefix) {
            if let (r, e) = toManys[c.name] {
                if case .joinTable(let join, let forward) = model.storage(of: r, in: e), !storedTables.contains(join) {
                    // To-one → to-many through a join table: every key becomes a join row.
                    let retired = Self.retiredName(c.name, stored)
                    add(.rewritten, .keysToJoinTable(table: table, column: c.name, join: join, forward: forward, kinds: shared ? e.hierarchy.kinds : nil),
                        "\(e.name).\(r.name): to-one in the store, to-many in the model (each key copied into join table \"\(join)\", join rows written)")
                    add(.retired, .retireColumn(table: table, from: c.name, to: retired), "\(table).\(c.name): the to-one's key column kept unused as \"\(retired)\" (no row rewritten)")
                    for suffix in ["_order", ManagedObjectModel.companionSuffix] where stored.position(of: c.name + suffix) != nil {
                        let rc = Self.retiredName(c.name + suffix, stored)
                        renamedFrom.insert(c.name + suffix)
                        add(.retired, .retireColumn(table: table, from: c.name + suffix, to: rc), "\(table).\(c.name)\(suffix): kept unused as \"\(rc)\" (no row rewritten)")
                    }
                } else if case .inverseForeignKey(let invEntity, let invColumn, _) = model.storage(of: r, in: e), let d = model.entitiesByName[invEntity] {
                    // One-to-one → one-to-many: the keys live on the inverse's side.
                    let retired = Self.retiredName(c.name, stored)
                    add(.rewritten, .keysToInverse(table: table, column: c.name, kinds: shared ? e.hierarchy.kinds : nil, inverseTable: d.hierarchy.table,
                                                   inverseColumn: invColumn, entity: e.name, relationship: r.name),
                        "\(e.name).\(r.name): to-one in the store, to-many in the model (each key written into the inverse \(d.name).\(invColumn); rows rewritten where it differs; a target claimed by two objects fails the migration)")
                    add(.retired, .retireColumn(table: table, from: c.name, to: retired), "\(table).\(c.name): the to-one's key column kept unused as \"\(retired)\" (no row rewritten)")
                    for suffix in ["_order", ManagedObjectModel.companionSuffix] where stored.position(of: c.name + suffix) != nil {
                        let rc = Self.retiredName(c.name + suffix, stored)
                        renamedFrom.insert(c.name + suffix)
                        add(.retired, .retireColumn(table: table, from: c.name + suffix, to: rc), "\(table).\(c.name)\(suffix): kept unused as \"\(rc)\" (no row rewritten)")
                    }
                } else {
                    unsupported.append("\(e.name).\(c.name): to-one in the store, to-many in the model without a join table (a relationship change \(Self.notInferred))")
                }
            } else if c.name == ManagedObjectModel.entityColumn {
                // The hierarchy lost its subentities (moved out or removed): every
                // row left must be of the table's one entity.
                let retired = Self.retiredName(c.name, stored)
                add(.rewritten, .checkKinds(table: table, column: c.name, allowed: Set(members.map(\.name)), label: "\(table) (no longer a hierarchy)"),
                    "\(table): no longer holds several entities (every row checked to be a \(table); an object of another entity fails the migration naming it)")
                add(.retired, .retireColumn(table: table, from: c.name, to: retired), "\(table).\(c.name): kept unused as \"\(retired)\" (no row rewritten)")
            } else if c.name.hasPrefix("_") && !c.name.hasPrefix(AttributeType.exactColumn("")) {
                unsupported.append("\(table).\(c.name): in the store, not in the model")
            } else if c.name.hasSuffix("_order"), let base = Self.companionBase(c.name), toOnes[base] != nil, expected.position(of: base) != nil {
                var retired = Self.retiredPrefix + c.name
                var n = 2
                while stored.position(of: retired) != nil { retired = Self.retiredPrefix + c.name + "_\(n)"; n += 1 }
                add(.retired, .retireColumn(table: table, from: c.name, to: retired),
                    "\(table).\(base): its inverse is no longer ordered (positions kept unused as \"\(retired)\", no row rewritten)")
            } else if c.name.hasSuffix(ManagedObjectModel.companionSuffix), let base = Self.companionBase(c.name), let (r, _) = toOnes[base],
                      expected.position(of: base) != nil, let d = model.entitiesByName[r.destination] {
                // The destination lost its subentities: every key must point at one of its entities.
                let retired = Self.retiredName(c.name, stored)
                renamedFrom.insert(c.name)
                add(.rewritten, .checkKinds(table: table, column: c.name, allowed: d.hierarchy.kinds, label: "\(table).\(base)"),
                    "\(table).\(base): its destination \(d.name) no longer has subentities (every key checked to point at a \(d.name))")
                add(.retired, .retireColumn(table: table, from: c.name, to: retired), "\(table).\(c.name): kept unused as \"\(retired)\" (no row rewritten)")
            } else if let base = Self.companionBase(c.name), stored.position(of: base) != nil {
                unsupported.append("\(table).\(c.name): in the store, not in the model (a relationship or inheritance change \(Self.notInferred))")
            } else {
                var retired = Self.retiredPrefix + c.name
                var n = 2
                while stored.position(of: retired) != nil { retired = Self.retiredPrefix + c.name + "_\(n)"; n += 1 }
                add(.retired, .retireColumn(table: table, from: c.name, to: retired),
                    "\(table).\(c.name): in the store, not in the model (column kept unused as \"\(retired)\", no row rewritten)")
            }
        }
        return converted
    }

    /// A free `_retired_<column>` name in `stored`.
    static func retiredName(_ column: String, _ stored: TableSchema) -> String {
        var retired = retiredPrefix + column
        var n = 2
        while stored.position(of: retired) != nil { retired = retiredPrefix + column + "_\(n)"; n += 1 }
        return retired
    }

    /// The join table `r` (now a to-one) would use as a to-many, and whether
    /// `e` is its source side (ManagedObjectModel.storage's naming).
    static func joinTable(ifToMany r: RelationshipDescription, in e: EntityDescription, _ model: ManagedObjectModel) -> (String, Bool) {
        let owner = e.hierarchy.relationshipOwners[r.name] ?? e.name
        guard let inv = r.inverse else { return ("_\(owner)_\(r.name)", true) }
        let first = (owner, r.name) <= (r.destination, inv)
        return first ? ("_\(owner)_\(r.name)", true) : ("_\(r.destination)_\(inv)", false)
    }

    /// The to-one a `<name>_order` or `<name>_entity` column belongs to.
    static func companionBase(_ column: String) -> String? {
        for suffix in ["_order", ManagedObjectModel.companionSuffix] where column.hasSuffix(suffix) && column.count > suffix.count {
            return String(column.dropLast(suffix.count))
        }
        return nil
    }

    private mutating func compareIndexes(_ table: String, stored: [IndexDefinition],
                                         expected: [(name: String, columns: [IndexColumn], unique: Bool)], converted: Set<String>) {
        func same(_ a: [IndexColumn], _ b: [IndexColumn]) -> Bool {
            a.map { [$0.name, "\($0.descending)", "\($0.folded)"] } == b.map { [$0.name, "\($0.descending)", "\($0.folded)"] }
        }
        func touched(_ cols: [IndexColumn]) -> Bool { cols.contains { converted.contains($0.name) } }
        let want = Dictionary(expected.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        var kept = Set<String>()
        for ix in stored {
            if let w = want[ix.name], same(w.columns, ix.columns), w.unique == ix.isUnique, !touched(w.columns) { kept.insert(ix.name); continue }
            add(.indexed, .dropIndex(table: table, name: ix.name), "\(table): index \"\(ix.name)\" on \(ix.columns.map(\.name).joined(separator: ", "))\(ix.isUnique ? " (unique)" : "") is not in the model\(touched(ix.columns) ? " as stored (its column is converted)" : "") (dropped)")
        }
        for w in expected where !kept.contains(w.name) {
            add(.indexed, .createIndex(table: table, name: w.name, columns: w.columns, unique: w.unique),
                "\(table): index \"\(w.name)\" on \(w.columns.map(\.name).joined(separator: ", "))\(w.unique ? " (unique)" : "") is not in the store (built from the rows)")
        }
    }

    /// Takes the steps in `tx` in phase order (see the header), calling
    /// `transform` between the value steps and the retirements, and records
    /// the model. `progress` gets each step's description and row counts.
    func apply(_ tx: WriteTransaction, _ model: ManagedObjectModel, migrating: Bool, path: String,
               progress: MigrationProgressReporter? = nil,
               transform: ((WriteTransaction) throws(KuraError) -> Void)? = nil) throws(KuraError) {
        var steps: [(Step, String)] = always.map { ($0, "") }
        if migrating { steps += migration.compactMap { m in m.step.map { ($0, m.change.description) } } }
        let ordered = steps.enumerated().sorted { ($0.element.0.phase, $0.offset) < ($1.element.0.phase, $1.offset) }.map(\.element)
        var transformed = transform == nil
        let mover = RowMover(tx: tx, path: path, progress: progress)
        var moved: [RowMover.Moved] = []
        for (step, text) in ordered {
            if !transformed && step.phase > 4 {
                transformed = true
                try transform?(tx)
            }
            progress?.begin(text)
            switch step {
            case .createTable(let table):
                let t = try tx.createTable(table, schema: try model.schema(ofTable: table))
                for ix in model.indexes(ofTable: table) { try tx.createIndex(ix.name, on: t, columns: ix.columns, unique: ix.unique) }
            case .createJoinTable(let name):
                let t = try tx.createTable(name, schema: ManagedObjectModel.joinSchema)
                try tx.createIndex(name + "_source", on: t, columns: [IndexColumn("source"), IndexColumn("target")])
                try tx.createIndex(name + "_target", on: t, columns: [IndexColumn("target"), IndexColumn("source")])
            case .renameTable(let from, let to):
                try tx.renameObject(from, to: to)
                // A join table's indexes are named after it.
                for ix in try tx.indexes(of: to) where ix.name.hasPrefix(from + "_") {
                    try tx.renameObject(ix.name, to: to + ix.name.dropFirst(from.count))
                }
            case .addColumn(let table, let c):
                try tx.addColumn(c, to: try tx.table(table))
            case .renameColumn(let table, let from, let to), .retireColumn(let table, let from, let to):
                try tx.renameColumn(from, to: to, in: try tx.table(table))
            case .convert(let table, let column, let entity, let attribute, let kinds, let from, let to, let definition):
                try RowRewriter(tx: tx, table: table, kinds: kinds, path: path, progress: progress)
                    .convert(column: column, entity: entity, attribute: attribute, from: from, to: to, definition: definition)
            case .keysToJoinTable(let table, let column, let join, let forward, let kinds):
                let j = try tx.table(join)
                guard let p = try tx.schema(of: try tx.table(table))?.position(of: column) else {
                    throw KuraError(.corrupt, "table \"\(table)\" lost column \"\(column)\" during the migration (a Kura bug)", path: path)
                }
                try RowRewriter(tx: tx, table: table, kinds: kinds, path: path, progress: progress).forEachRow { (rowID, values) throws(KuraError) -> Bool in
                    if p < values.count, case .integer(let target) = values[p] {
                        try tx.insert(forward ? [.integer(rowID), .integer(target), .double(0)] : [.integer(target), .integer(rowID), .double(0)], into: j)
                    }
                    return false
                }
            case .joinTableToKeys(let table, let column, let join, let forward, let entity, let relationship):
                try KeyMover(tx: tx, path: path, progress: progress).joinRowsToKeys(table: table, column: column, join: join, forward: forward,
                                                                                   entity: entity, relationship: relationship)
                try tx.dropTable(join)
            case .fill(let table, let column, let value, let whereSet):
                guard let schema = try tx.schema(of: try tx.table(table)), let p = schema.position(of: column) else {
                    throw KuraError(.corrupt, "table \"\(table)\" lost column \"\(column)\" during the migration (a Kura bug)", path: path)
                }
                let q = whereSet.flatMap { schema.position(of: $0) }
                try RowRewriter(tx: tx, table: table, kinds: nil, path: path, progress: progress).forEachRow { (_, values) throws(KuraError) -> Bool in
                    if p < values.count, values[p] != .null { return false }
                    if let q { guard q < values.count, values[q] != .null else { return false } }
                    while values.count <= p { values.append(schema.columns[values.count].defaultValue) }
                    values[p] = value
                    return true
                }
            case .swapJoinColumns(let table):
                try RowRewriter(tx: tx, table: table, kinds: nil, path: path, progress: progress).forEachRow { (_, values) throws(KuraError) -> Bool in
                    guard values.count >= 2 else { return false }
                    values.swapAt(0, 1)
                    // Each side's order travels with it: position orders the
                    // source side, inverse_position the target side.
                    if values.count >= 4 { values.swapAt(2, 3) }
                    return true
                }
            case .require(let table, let column, let entity, let property, let kinds, let fill):
                try RowRewriter(tx: tx, table: table, kinds: kinds, path: path, progress: progress)
                    .require(column: column, entity: entity, property: property, fill: fill)
            case .renameKinds(let table, let companions, let renames):
                try mover.renameKinds(table: table, companions: companions, renames: renames)
            case .moveRows(let from, let to, let kinds, let unsharedEntity, let renames, let columnSources, let dropSource):
                moved.append(try mover.move(from: from, to: to, kinds: kinds, unsharedEntity: unsharedEntity, renames: renames,
                                            columnSources: columnSources, dropSource: dropSource))
            case .remapKeys(let keys, let sides):
                try mover.remap(moved, keys: keys, sides: sides) { table, values, _, schema in
                    if let p = schema.position(of: ManagedObjectModel.entityColumn), p < values.count, case .text(let e) = values[p] { return e }
                    return table
                }
            case .checkKinds(let table, let column, let allowed, let label):
                try mover.checkKinds(table: table, column: column, allowed: allowed, label: label)
            case .keysToInverse(let table, let column, let kinds, let inverseTable, let inverseColumn, let entity, let relationship):
                try KeyMover(tx: tx, path: path, progress: progress).keysToInverse(table: table, column: column, kinds: kinds, inverseTable: inverseTable,
                                                                                  inverseColumn: inverseColumn, entity: entity, relationship: relationship)
            case .inverseKeysToKeys(let table, let column, let companion, let inverseTable, let inverseColumn, let inverseKinds, let inverseEntity, let entity, let relationship):
                try KeyMover(tx: tx, path: path, progress: progress).inverseKeysToKeys(table: table, column: column, companion: companion, inverseTable: inverseTable,
                                                                                      inverseColumn: inverseColumn, inverseKinds: inverseKinds, inverseEntity: inverseEntity,
                                                                                      entity: entity, relationship: relationship)
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
        if !transformed { try transform?(tx) }
        if recordChanges { try StoredModel(model).write(tx) }
    }
}
