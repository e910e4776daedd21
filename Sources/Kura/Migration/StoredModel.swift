// StoredModel: the model a store was last written with, as the object layer
// records it in the table `_kura_model` (FORMAT.md, "Model identity").
//
// Schema of `_kura_model` (one row per model, entity and stored property):
//   entity    text, not null   entity name ("" in the model's own row)
//   property  text             property name (null in entity and model rows)
//   kind      text, not null   "model", "entity", "attribute" or "relationship"
//   type      text             attribute: its type (`int16`, `string`, ...);
//                              relationship: `to-one`, `to-many`, `ordered to-many`;
//                              entity: `abstract` or `concrete`
//   target    text             relationship: destination entity; entity: parent
//   inverse   text             relationship: inverse name
//   optional  bool             attribute, relationship: optional
//   hash      text, not null   the version hash (ModelVersionHash.swift)
// Transient attributes are not recorded (they have no column). The table is
// rewritten whole (delete all, insert) when an open or a migration leaves the
// store at a model whose hash differs; an open at the same model writes
// nothing. A store written before the table existed has none: its model is
// then inferred from the catalog alone, and the open records it.
//
// Rows are read as hostile data: a row with a missing or mistyped field
// throws `.corrupt` naming the row.

import Foundation
import KuraEngine

/// The model recorded in a store (see the header).
struct StoredModel: Equatable {
    struct Property: Equatable {
        var kind: String
        var type: String
        var target: String?
        var inverse: String?
        var optional: Bool
        var hash: String
    }
    struct Entity: Equatable {
        var hash: String
        var parent: String?
        var abstract: Bool
        var properties: [String: Property] = [:]
    }
    var hash: String
    var entities: [String: Entity] = [:]

    static let tableName = "_kura_model"

    // `try!` cannot fail: distinct names, no defaults.
    static let schema = try! TableSchema([
        ColumnDefinition("entity", .text, nullable: false),
        ColumnDefinition("property", .text),
        ColumnDefinition("kind", .text, nullable: false),
        ColumnDefinition("type", .text),
        ColumnDefinition("target", .text),
        ColumnDefinition("inverse", .text),
        ColumnDefinition("optional", .bool),
        ColumnDefinition("hash", .text, nullable: false),
    ])

    /// The record of `model`.
    init(_ model: ManagedObjectModel) {
        hash = model.versionHash
        for e in model.entities {
            var se = Entity(hash: e.versionHash, parent: e.superentityName, abstract: e.isAbstract)
            for a in e.attributes where !a.isTransient {
                se.properties[a.name] = Property(kind: "attribute", type: a.type.rawValue, target: nil, inverse: nil, optional: a.isOptional, hash: a.versionHash)
            }
            for r in e.relationships {
                se.properties[r.name] = Property(kind: "relationship", type: r.cardinalityName, target: r.destination, inverse: r.inverse,
                                                 optional: r.isOptional, hash: r.versionHash)
            }
            entities[e.name] = se
        }
    }

    private init(hash: String) { self.hash = hash }

    /// The record in the store `tx` reads, or nil if it has none.
    static func read(_ tx: ReadTransaction) throws(KuraError) -> StoredModel? {
        guard try tx.tableExists(tableName) else { return nil }
        let t = try tx.table(tableName)
        func bad(_ rowID: Int64, _ why: String) -> KuraError {
            KuraError(.corrupt, "row \(rowID) of \(tableName) (the recorded model): \(why); run `kura check` on the store")
        }
        var model: StoredModel?
        var entities: [String: Entity] = [:]
        var properties: [(String, String, Property, Int64)] = []
        let rows = try tx.rows(in: t)
        while let row = try rows.next() {
            let v = try row.values()
            guard v.count >= 8 else { throw bad(row.rowID, "\(v.count) values, 8 expected") }
            func text(_ i: Int) throws(KuraError) -> String? {
                switch v[i] {
                case .null: return nil
                case .text(let s): return s
                default: throw bad(row.rowID, "column \(schema.columns[i].name) is not text")
                }
            }
            guard let entity = try text(0), let kind = try text(2), let hash = try text(7) else { throw bad(row.rowID, "entity, kind or hash is null") }
            switch kind {
            case "model":
                guard model == nil else { throw bad(row.rowID, "a second model row") }
                model = StoredModel(hash: hash)
            case "entity":
                guard entities[entity] == nil else { throw bad(row.rowID, "entity \"\(entity)\" recorded twice") }
                entities[entity] = Entity(hash: hash, parent: try text(4), abstract: try text(3) == "abstract")
            case "attribute", "relationship":
                guard let name = try text(1), let type = try text(3) else { throw bad(row.rowID, "property or type is null") }
                guard case .bool(let optional) = v[6] else { throw bad(row.rowID, "optional is not a bool") }
                properties.append((entity, name, Property(kind: kind, type: type, target: try text(4), inverse: try text(5), optional: optional, hash: hash), row.rowID))
            default:
                throw bad(row.rowID, "unknown kind \"\(kind)\"")
            }
        }
        guard var m = model else { throw bad(0, "no model row") }
        for (entity, name, p, rowID) in properties {
            guard entities[entity] != nil else { throw bad(rowID, "property \"\(name)\" of unrecorded entity \"\(entity)\"") }
            entities[entity]!.properties[name] = p
        }
        m.entities = entities
        return m
    }

    /// Replaces the record in the store with this one.
    func write(_ tx: WriteTransaction) throws(KuraError) {
        if try tx.tableExists(Self.tableName) { try tx.dropTable(Self.tableName) }
        let t = try tx.createTable(Self.tableName, schema: Self.schema)
        func s(_ x: String?) -> Value { x.map { .text($0) } ?? .null }
        try tx.insert([.text(""), .null, .text("model"), .null, .null, .null, .null, .text(hash)], into: t)
        for (name, e) in entities.sorted(by: { $0.key < $1.key }) {
            try tx.insert([.text(name), .null, .text("entity"), .text(e.abstract ? "abstract" : "concrete"), s(e.parent), .null, .null, .text(e.hash)], into: t)
            for (pn, p) in e.properties.sorted(by: { $0.key < $1.key }) {
                try tx.insert([.text(name), .text(pn), .text(p.kind), .text(p.type), s(p.target), s(p.inverse), .bool(p.optional), .text(p.hash)], into: t)
            }
        }
    }
}
