// SchemaPlan+Inheritance: the plan's steps for changes of inheritance and for
// entity renames inside a hierarchy (the steps themselves: RowMover.swift).
//
// Where an entity's objects are: in the store, in the table of its stored
// hierarchy's root (the record's parent chain, StoredModel.swift); in the
// model, in `hierarchy.table`. When the two differ (after table renames), the
// objects move: an entity gaining a parent moves into its new hierarchy's
// table, one losing its parent moves out into its own (or its new root's)
// table, and a hierarchy split or merged moves each entity whose root
// changes. Moves need the recorded model (a store without one keeps the
// refusal: its hierarchy cannot be known from the catalog alone).
// An entity renamed through its renaming identifier has its old name
// rewritten wherever rows name entities (`_entity`, `<to-one>_entity`).

import Foundation
import KuraEngine

extension SchemaPlan {
    /// Old entity name → new, for entities renamed through their renaming identifier.
    static func entityRenames(_ model: ManagedObjectModel) -> [String: String] {
        var out: [String: String] = [:]
        for e in model.entities {
            if let old = e.renamingIdentifier, old != e.name, model.entitiesByName[old] == nil { out[old] = e.name }
        }
        return out
    }

    /// The stored table a model table continues (same name, or its root's
    /// renaming identifier), nil for a table this migration creates.
    static func continuation(of table: String, _ model: ManagedObjectModel, _ storedTables: Set<String>) -> String? {
        if storedTables.contains(table) { return table }
        if let old = model.entitiesByName[table]?.renamingIdentifier, old != table, storedTables.contains(old), model.entitiesByName[old] == nil {
            return old
        }
        return nil
    }

    /// Adds the kind renames, moves, key remaps and checks for `model`.
    mutating func planInheritance(_ tx: ReadTransaction, _ model: ManagedObjectModel, _ storedTables: Set<String>,
                                  renames: [String: String]) throws(KuraError) {
        let continued = Dictionary(model.entityTables.compactMap { t in Self.continuation(of: t, model, storedTables).map { ($0, t) } },
                                   uniquingKeysWith: { a, _ in a })  // stored table → model table
        // Kind renames: in every model table that names entities in its rows.
        if !renames.isEmpty {
            for table in model.entityTables {
                guard let old = Self.continuation(of: table, model, storedTables), let s = try tx.schema(of: try tx.table(old)) else { continue }
                let companions = model.entities(inTable: table).flatMap { e in
                    e.declaredRelationships.filter { !$0.isToMany && !$0.isTransient }.map { $0.name + ManagedObjectModel.companionSuffix }
                }
                let renamed = Set(renames.values)
                let members = model.entities(inTable: table)
                let inRows = s.position(of: ManagedObjectModel.entityColumn) != nil && members.contains { renamed.contains($0.name) }
                let inKeys = members.contains { e in
                    e.declaredRelationships.contains { r in
                        guard !r.isToMany, !r.isTransient, let d = model.entitiesByName[r.destination] else { return false }
                        let stored = [r.name, r.renamingIdentifier ?? r.name].contains { s.position(of: $0 + ManagedObjectModel.companionSuffix) != nil }
                        return stored && model.entities(inTable: d.hierarchy.table).contains { renamed.contains($0.name) }
                    }
                }
                guard inRows || inKeys else { continue }
                let here = model.entities(inTable: table).filter { e in renames.values.contains(e.name) }.map { e in
                    "\(e.name) (was \(renames.first { $0.value == e.name }?.key ?? e.name))"
                }
                add(.rewritten, .renameKinds(table: table, companions: companions, renames: renames),
                    "\(table): " + (here.isEmpty ? "keys naming renamed entities" : "entities renamed inside the hierarchy: \(here.joined(separator: ", "))")
                    + " (rows naming an old name in \(ManagedObjectModel.entityColumn) or a companion rewritten)")
            }
        }
        guard let stored else { return }
        // The stored hierarchy.
        func storedRoot(_ name: String) -> String {
            var x = name
            var seen: Set<String> = [x]
            while let p = stored.entities[x]?.parent, stored.entities[p] != nil, seen.insert(p).inserted { x = p }
            return x
        }
        func oldName(_ e: EntityDescription) -> String? {
            if let old = renames.first(where: { $0.value == e.name })?.key, stored.entities[old] != nil { return old }
            return stored.entities[e.name] != nil ? e.name : nil
        }
        func newName(_ old: String) -> String { renames[old] ?? old }
        /// The stored entities (model names) that were `old` or below it.
        func storedKinds(_ old: String) -> Set<String> {
            var out = Set<String>()
            for name in stored.entities.keys {
                var x = name
                var seen: Set<String> = [x]
                while true {
                    if x == old { out.insert(newName(name)); break }
                    guard let p = stored.entities[x]?.parent, seen.insert(p).inserted else { break }
                    x = p
                }
            }
            return out
        }
        // A hierarchy that stays shared but lost entities: their objects would
        // be left naming an entity the model lacks.
        for table in model.entityTables where model.entities(inTable: table).count > 1 {
            guard let old = Self.continuation(of: table, model, storedTables) else { continue }
            let members = Set(model.entities(inTable: table).map(\.name))
            let gone = stored.entities.keys.filter { storedRoot($0) == old && model.entitiesByName[newName($0)] == nil }.sorted()
            guard !gone.isEmpty else { continue }
            add(.rewritten, .checkKinds(table: table, column: ManagedObjectModel.entityColumn, allowed: members, label: "\(table) (entities removed: \(gone.joined(separator: ", ")))"),
                "\(table): entities removed from the hierarchy (\(gone.joined(separator: ", "))): every row checked to be of an entity still in it (an object of a removed one fails the migration naming it)")
        }
        // Moves, grouped by (source table, target table).
        var groups: [String: [String: Set<String>]] = [:]
        for e in model.entities {
            guard let old = oldName(e) else { continue }
            let source = storedRoot(old)
            guard storedTables.contains(source) else { continue }
            let target = e.hierarchy.table
            if Self.continuation(of: target, model, storedTables) == source { continue }
            groups[source, default: [:]][target, default: []].insert(e.name)
        }
        guard !groups.isEmpty else { return }
        for (source, targets) in groups.sorted(by: { $0.key < $1.key }) {
            let kept = continued[source]  // the model table continuing `source`, if any
            guard let storedSchema = try tx.schema(of: try tx.table(source)) else {
                unsupported.append("table \"\(source)\" has no schema (it is not an entity table)")
                continue
            }
            let ordered = targets.sorted { $0.key < $1.key }
            for (i, (target, kinds)) in ordered.enumerated() {
                // Columns: by name; when the source goes, through renaming identifiers.
                var sources: [String: String] = [:]
                if kept == nil {
                    for e in model.entities(inTable: target) where kinds.contains(e.name) {
                        for a in e.attributes where !a.isTransient {
                            if let rid = a.renamingIdentifier, rid != a.name, storedSchema.position(of: a.name) == nil, storedSchema.position(of: rid) != nil { sources[a.name] = rid }
                        }
                        for r in e.relationships where !r.isToMany && !r.isTransient {
                            if let rid = r.renamingIdentifier, rid != r.name, storedSchema.position(of: r.name) == nil, storedSchema.position(of: rid) != nil {
                                sources[r.name] = rid
                                for suffix in ["_order", ManagedObjectModel.companionSuffix] { sources[r.name + suffix] = rid + suffix }
                            }
                        }
                    }
                }
                let expected = try model.schema(ofTable: target)
                for c in expected.columns where c.name != ManagedObjectModel.entityColumn {
                    let name = sources[c.name] ?? c.name
                    guard let p = storedSchema.position(of: name), storedSchema.columns[p].type != c.type else { continue }
                    unsupported.append("\(target).\(c.name): objects of \(kinds.sorted().joined(separator: ", ")) move into table \"\(target)\" and the column changes type (\(storedSchema.columns[p].type.rawValue) → \(c.type.rawValue)) at once; change the type in a separate model version")
                }
                let from = kept ?? source
                let unshared = storedSchema.position(of: ManagedObjectModel.entityColumn) == nil ? newName(source) : source
                let drop = kept == nil && i == ordered.count - 1
                let gainsParent = kept == nil
                add(.rewritten, .moveRows(from: from, to: target, kinds: kinds, unsharedEntity: unshared, renames: renames,
                                          columnSources: sources, dropSource: drop),
                    "\(kinds.sorted().joined(separator: ", ")): " + (gainsParent ? "now in hierarchy \"\(target)\"" : "no longer in hierarchy \"\(from)\"")
                    + " (objects moved from table \"\(from)\" into \"\(target)\", rows rewritten; row IDs kept unless \"\(target)\" used them, else offset and every key pointing at them remapped)"
                    + (drop ? "; table \"\(source)\" dropped" : ""))
            }
        }
        // Keys and join rows that may point at moved objects.
        var keys: [RowMover.Key] = []
        var sides: [RowMover.JoinSide] = []
        for table in model.entityTables {
            for e in model.entities(inTable: table) {
                let se = oldName(e).flatMap { stored.entities[$0] }
                for r in e.declaredRelationships where !r.isTransient {
                    let sr = se?.properties[r.name] ?? r.renamingIdentifier.flatMap { se?.properties[$0] }
                    guard let d = model.entitiesByName[r.destination] else { continue }
                    if !r.isToMany {
                        keys.append(RowMover.Key(table: table, column: r.name, companion: r.name + ManagedObjectModel.companionSuffix,
                                                 storedTarget: sr?.target.map(newName), destination: d.name, destinationKinds: d.hierarchy.kinds,
                                                 label: "\(e.name).\(r.name)"))
                    } else if case .joinTable(let join, true) = model.storage(of: r, in: e), sr != nil {
                        let owner = e.hierarchy.relationshipOwners[r.name] ?? e.name
                        if let o = model.entitiesByName[owner], let old = oldName(o) {
                            sides.append(RowMover.JoinSide(join: join, column: 0, storedKinds: storedKinds(old), sideTable: o.hierarchy.table, label: "\(e.name).\(r.name)"))
                        }
                        if let old = oldName(d) {
                            sides.append(RowMover.JoinSide(join: join, column: 1, storedKinds: storedKinds(old), sideTable: d.hierarchy.table, label: "\(e.name).\(r.name)"))
                        }
                    }
                }
            }
        }
        add(.rewritten, .remapKeys(keys: keys, sides: sides),
            "keys and join rows pointing at moved objects remapped (rows rewritten only where a row ID changed; a key to an object no longer of its destination fails the migration naming it)")
    }
}
