// EntityHierarchy: entity inheritance (Core Data's superentity, subentities and
// abstract entities) and how a hierarchy is stored.
//
// Storage (FORMAT.md, "Object stores"; ARCHITECTURE.md says why): one table per
// hierarchy, named after its root entity, as Core Data does. An entity with no
// parent and no subentities is a hierarchy of one and its table is exactly what
// it was before inheritance existed. A table shared by several entities has:
//   - one column per attribute declared anywhere in the hierarchy (in preorder:
//     the root's, then each subentity's, depth first, children in model order);
//     a row of an entity leaves its non-inherited relatives' columns null;
//   - one foreign-key column per to-one relationship declared anywhere in it
//     (plus `<name>_order` for an ordered inverse, as for any table);
//   - `_entity` (text, not null): the name of the row's own entity;
//   - `_version`, as every entity table, then the exact companions of decimal
//     attributes (DecimalStorage.swift).
// Transient attributes have no column.
// Columns are named after the property. Two entities of one hierarchy that
// are not ancestor and descendant may declare the same name: they share the
// column when the column types agree (a row belongs to one entity); otherwise
// the model is refused, naming both.
//
// Consequences:
//   - row IDs are allocated by the shared table, so they are unique across the
//     hierarchy: an object ID `Country/p7` is found in table `Region` at row 7,
//     and a to-one key pointing into the hierarchy is just a row ID;
//   - a to-one whose destination has subentities also stores the target's
//     entity name in a text column `<name>_entity` (Core Data keeps the same
//     companion column), so loading an object never needs a second read to know
//     which class its targets are;
//   - a uniqueness constraint declared on the root is a unique engine index on
//     the shared table (two siblings cannot share a value); one declared on a
//     subentity is enforced by `save` over that subentity's rows (the engine
//     index on those columns is then a plain one: rows of other branches may
//     hold the same values legitimately);
//   - a fetch of an entity with subentities filters `_entity` to its kinds (the
//     entity and its descendants) unless it is the root; `_entity` is indexed.
//
// Model invariants (thrown as `ModelError` by `ManagedObjectModel.init`): every
// parent exists; parent chains have no cycle; a subentity may redeclare an
// inherited attribute only with the same type (its description then replaces
// the inherited one, e.g. to change the default); it may not redeclare an
// inherited relationship, nor give an attribute a relationship's name; a
// subentity's class is its parent's class or a subclass of it (a subentity
// bound to no class takes its parent's).

import Foundation

/// Where an entity's rows live and what it spans. Computed by the model.
struct EntityHierarchyInfo: Sendable {
    /// The table holding the rows: the hierarchy root's name.
    let table: String
    /// This entity and all its descendants.
    let kinds: Set<String>
    /// Whether the table holds several entities (and so has the `_entity` column).
    let isShared: Bool
    /// Parallel to `uniquenessConstraints`: the entity that declares each.
    let uniquenessScopes: [String]
    /// The entity that declares each relationship, by relationship name.
    let relationshipOwners: [String: String]

    /// The info of an entity that stands alone (no parent, no subentities).
    init(standalone name: String, attributes: [AttributeDescription], relationships: [RelationshipDescription], uniques: [[String]]) {
        table = name
        kinds = [name]
        isShared = false
        uniquenessScopes = uniques.map { _ in name }
        relationshipOwners = Dictionary(relationships.map { ($0.name, name) }, uniquingKeysWith: { a, _ in a })
    }

    init(table: String, kinds: Set<String>, isShared: Bool, uniquenessScopes: [String], relationshipOwners: [String: String]) {
        self.table = table
        self.kinds = kinds
        self.isShared = isShared
        self.uniquenessScopes = uniquenessScopes
        self.relationshipOwners = relationshipOwners
    }
}

extension ManagedObjectModel {
    /// The column of a shared table that names each row's entity. Property names
    /// may not start with "_", so it never clashes with one.
    static let entityColumn = "_entity"

    /// Resolves inheritance: each entity of a hierarchy becomes a copy with its
    /// inherited properties; entities outside any hierarchy are returned as made.
    ///
    /// - Throws: `ModelError` naming the entity and property (see the header).
    static func resolveInheritance(_ entities: [EntityDescription]) throws(ModelError) -> [EntityDescription] {
        let byName = Dictionary(entities.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        var children: [String: [String]] = [:]
        for e in entities {
            guard let p = e.superentityName else { continue }
            guard byName[p] != nil else {
                throw ModelError(message: "entity \"\(e.name)\": parent entity \"\(p)\" is not in the model (entities: \(entities.map(\.name).joined(separator: ", ")))")
            }
            children[p, default: []].append(e.name)
        }
        for e in entities {
            var chain = [e.name]
            var parent = e.superentityName
            while let p = parent {
                if chain.contains(p) {
                    throw ModelError(message: "entity \"\(e.name)\": its parent chain \((chain + [p]).joined(separator: " → ")) is a cycle")
                }
                chain.append(p)
                parent = byName[p]?.superentityName
            }
        }
        if children.isEmpty { return entities }

        // Every entity's kinds (itself and its descendants); no cycle, so this ends.
        func kinds(_ name: String) -> Set<String> {
            var out: Set<String> = [name]
            for c in children[name] ?? [] { out.formUnion(kinds(c)) }
            return out
        }
        var resolved: [String: EntityDescription] = [:]
        /// Per resolved entity: attribute name → the entity whose declaration it uses.
        var attributeOwners: [String: [String: String]] = [:]
        func resolve(_ name: String, parent: EntityDescription?, table: String) throws(ModelError) {
            guard let e = byName[name] else { return }
            var attrs = parent?.attributes ?? []
            var attrOwner = parent.flatMap { attributeOwners[$0.name] } ?? [:]
            var rels = parent?.relationships ?? []
            var owners = parent?.hierarchy.relationshipOwners ?? [:]
            var uniques = parent?.uniquenessConstraints ?? []
            var scopes = parent?.hierarchy.uniquenessScopes ?? []
            for a in e.declaredAttributes {
                if let i = attrs.firstIndex(where: { $0.name == a.name }) {
                    guard attrs[i].type == a.type else {
                        throw ModelError(message: "entity \"\(name)\": attribute \"\(a.name)\" is \(a.type), but it inherits \"\(a.name)\" as \(attrs[i].type) from entity \"\(attrOwner[a.name] ?? "?")\"; a subentity may not change an inherited attribute's type")
                    }
                    attrs[i] = a
                    attrOwner[a.name] = name
                } else if let owner = owners[a.name] {
                    throw ModelError(message: "entity \"\(name)\": attribute \"\(a.name)\" has the name of relationship \"\(a.name)\" it inherits from entity \"\(owner)\"")
                } else {
                    attrs.append(a)
                    attrOwner[a.name] = name
                }
            }
            for r in e.declaredRelationships {
                if let owner = owners[r.name] {
                    throw ModelError(message: "entity \"\(name)\": relationship \"\(r.name)\" redeclares the relationship it inherits from entity \"\(owner)\"; subentities inherit relationships unchanged")
                }
                if attrs.contains(where: { $0.name == r.name }) {
                    throw ModelError(message: "entity \"\(name)\": relationship \"\(r.name)\" has the name of attribute \"\(r.name)\" it inherits from entity \"\(attrOwner[r.name] ?? "?")\"")
                }
                rels.append(r)
                owners[r.name] = name
            }
            for u in e.declaredUniquenessConstraints {
                uniques.append(u)
                scopes.append(name)
            }
            var cls = e.objectClass
            if let parent, parent.objectClass != ManagedObject.self {
                if cls == ManagedObject.self {
                    cls = parent.objectClass
                } else if !isClass(cls, subclassOf: parent.objectClass) {
                    throw ModelError(message: "entity \"\(name)\": its class \(cls) is not \(parent.objectClass) (the class of parent entity \"\(parent.name)\") or a subclass of it; objects of \"\(name)\" fetched as \"\(parent.name)\" must be \(parent.objectClass)s")
                }
            }
            let mine = kinds(name)
            let info = EntityHierarchyInfo(table: table, kinds: mine, isShared: true, uniquenessScopes: scopes, relationshipOwners: owners)
            let copy = EntityDescription(name: name, superentityName: e.superentityName, isAbstract: e.isAbstract, objectClass: cls,
                                         declared: (e.declaredAttributes, e.declaredRelationships, e.declaredUniquenessConstraints),
                                         resolved: (attrs, rels, uniques), subentityNames: children[name] ?? [], hierarchy: info,
                                         userInfo: e.userInfo, renamingIdentifier: e.renamingIdentifier,
                                         versionHashModifier: e.versionHashModifier, representedClassName: e.representedClassName,
                                         fetchIndexes: (e.declaredFetchIndexes, (parent?.fetchIndexes ?? []) + e.declaredFetchIndexes),
                                         fetchedProperties: (e.declaredFetchedProperties, (parent?.fetchedProperties ?? []) + e.declaredFetchedProperties))
            resolved[name] = copy
            attributeOwners[name] = attrOwner
            for c in children[name] ?? [] { try resolve(c, parent: copy, table: table) }
        }
        for e in entities where e.superentityName == nil && children[e.name] != nil {
            try resolve(e.name, parent: nil, table: e.name)
        }
        return entities.map { resolved[$0.name] ?? $0 }
    }

    /// Whether class `c` is `p` or a subclass of it (through the superclass
    /// chain `Mirror` reports for a probe instance).
    static func isClass(_ c: ManagedObject.Type, subclassOf p: ManagedObject.Type) -> Bool {
        if c == p { return true }
        let probe = c.init(entity: EntityDescription("_probe", attributes: [], relationships: []),
                           objectID: ManagedObjectID(entity: "_probe", rowID: 0, temporary: true))
        var mirror: Mirror? = Mirror(reflecting: probe)
        while let m = mirror {
            if m.subjectType == p { return true }
            mirror = m.superclassMirror
        }
        return false
    }

    // MARK: Hierarchy queries

    /// Whether `e` is the entity named `ancestor` or one of its descendants.
    func isKind(_ e: EntityDescription, of ancestor: String) -> Bool {
        e.name == ancestor || (entitiesByName[ancestor]?.hierarchy.kinds.contains(e.name) ?? false)
    }

    /// The entities stored in `table`, root first, then depth first (children in model order).
    func entities(inTable table: String) -> [EntityDescription] {
        guard let root = entitiesByName[table] else { return [] }
        var out: [EntityDescription] = []
        func walk(_ e: EntityDescription) {
            out.append(e)
            for c in e.subentityNames { if let x = entitiesByName[c] { walk(x) } }
        }
        walk(root)
        return out
    }

    /// The tables of the model: one per hierarchy root (entity order).
    var entityTables: [String] {
        entities.filter { $0.superentityName == nil }.map(\.name)
    }

    /// Whether to-one keys pointing at `destination` need the target's entity
    /// stored beside them (the destination has subentities).
    func needsEntityCompanion(_ destination: String) -> Bool {
        !(entitiesByName[destination]?.subentityNames.isEmpty ?? true)
    }

    /// The rows of `table` that belong to `e` (and, if `includingSubentities`,
    /// its descendants) as a predicate on `_entity`; nil when every row does.
    func entityFilter(_ e: EntityDescription, includingSubentities: Bool) -> KuraPredicate? {
        guard e.hierarchy.isShared else { return nil }
        if includingSubentities && e.superentityName == nil { return nil }
        let names = includingSubentities ? e.hierarchy.kinds.sorted() : [e.name]
        let column = KuraExpression.keyPath([Self.entityColumn])
        if names.count == 1 { return .comparison(KuraComparison(column, .equalTo, .constant(.text(names[0])))) }
        return .comparison(KuraComparison(column, .in, .aggregate(names.map { .constant(.text($0)) })))
    }

    /// The columns of an entity table (see the header), checked for clashes.
    ///
    /// - Throws: `ModelError` naming the two entities that give one column name
    ///   two types.
    func tableColumns(_ table: String) throws(ModelError) -> [ColumnDefinition] {
        let members = entities(inTable: table)
        var cols: [ColumnDefinition] = []
        var owner: [String: (entity: String, type: ColumnType)] = [:]
        func add(_ c: ColumnDefinition, by entity: String) throws(ModelError) {
            if let o = owner[c.name] {
                guard o.type == c.type else {
                    throw ModelError(message: "entities \"\(o.entity)\" and \"\(entity)\" (both stored in table \"\(table)\") use the name \"\(c.name)\" for a \(o.type.rawValue) and a \(c.type.rawValue) column; rename one of the properties")
                }
                return
            }
            owner[c.name] = (entity, c.type)
            cols.append(c)
        }
        for e in members {
            for a in e.declaredAttributes where !a.isTransient {
                if let elements = a.compositeElements {
                    for el in elements {
                        try add(ColumnDefinition(AttributeDescription.compositeColumn(a.name, el.name), el.type.columnType, nullable: true,
                                                 default: el.defaultValue.map { el.type.engineValue(el.type.stored($0)) } ?? .null), by: e.name)
                    }
                    continue
                }
                try add(ColumnDefinition(a.name, a.storedColumnType, nullable: true, default: a.defaultValue.map { a.type.engineValue(a.type.stored($0)) } ?? .null), by: e.name)
            }
        }
        for e in members {
            for r in e.declaredRelationships where !r.isToMany && !r.isTransient {
                try add(ColumnDefinition(r.name, .integer), by: e.name)
                let inverse = reciprocalInverse(of: r)
                if inverse?.isOrdered == true { try add(ColumnDefinition(r.name + "_order", .double), by: e.name) }
                if needsEntityCompanion(r.destination) { try add(ColumnDefinition(r.name + Self.companionSuffix, .text), by: e.name) }
            }
        }
        if members.count > 1 { try add(ColumnDefinition(Self.entityColumn, .text, nullable: false), by: table) }
        cols.append(ColumnDefinition(Self.versionColumn, .integer, nullable: false, default: .integer(0)))
        // Exact companions of decimal attributes, after `_version` (DecimalStorage.swift).
        for e in members {
            for a in e.declaredAttributes where a.type == .decimal && !a.isTransient {
                try add(ColumnDefinition(AttributeType.exactColumn(a.name), .text), by: e.name)
            }
        }
        return cols
    }

    /// The suffix of a to-one's companion column holding the target's entity.
    static let companionSuffix = "_entity"
}
