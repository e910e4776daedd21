// MigrationData: what a custom migration stage sees (StagedMigration.swift):
// the rows of the store in the middle of one stage, where the destination
// model's columns exist and the source model's removed properties still hold
// their values. Values are engine `Value`s as stored (FORMAT.md, "Attribute
// types → column types": an int16 is `.integer`, a date `.date`, a UUID its
// uppercase `.text`).
//
// Lifetime: valid only inside the stage's transform; the rows are those of
// the migration's write transaction, which commits after the last stage.

import Foundation
import KuraEngine

/// The store's rows during a custom migration stage, read through the source
/// model's property names and written through the destination's.
///
/// Thread rules: use it on the thread that called the transform, only during
/// the call.
public final class MigrationData {
    /// The version migrated from, and the one migrated to.
    public let source: ManagedObjectModel
    public let destination: ManagedObjectModel
    let tx: WriteTransaction
    let path: String

    init(tx: WriteTransaction, source: ManagedObjectModel, destination: ManagedObjectModel, path: String) {
        self.tx = tx
        self.source = source
        self.destination = destination
        self.path = path
    }

    /// Calls `body` with every object of destination entity `entity` (and
    /// its subentities), in row-ID order, and writes back the objects whose
    /// values `body` set. Reads in batches (bounded memory apart from the
    /// transaction's changed pages).
    ///
    /// - Throws: `.notFound` for an entity the destination lacks; the
    ///   engine's `.typeMismatch` for a value of the wrong type (naming the
    ///   column); whatever `body` throws.
    public func forEachObject(of entity: String, _ body: (MigratingObject) throws -> Void) throws {
        let e = try destination.entity(entity)
        let table = e.hierarchy.table
        guard let schema = try tx.schema(of: try tx.table(table)) else {
            throw KuraError(.notFound, "table \"\(table)\" of entity \"\(entity)\" has no schema", path: path)
        }
        let sourceEntity = source.entitiesByName[e.name] ?? e.renamingIdentifier.flatMap { source.entitiesByName[$0] }
        let rewriter = RowRewriter(tx: tx, table: table, kinds: e.hierarchy.isShared ? e.hierarchy.kinds : nil, path: path, progress: nil)
        var failure: (any Error)?
        do {
            try rewriter.forEachRow { (rowID, values) throws(KuraError) -> Bool in
                while values.count < schema.columns.count { values.append(schema.columns[values.count].defaultValue) }
                let o = MigratingObject(entity: e, sourceEntity: sourceEntity, rowID: rowID, values: values, schema: schema)
                do { try body(o) } catch let k as KuraError { throw k } catch {
                    failure = error
                    throw KuraError(.validation, "")
                }
                guard o.changed else { return false }
                values = o.values
                return true
            }
        } catch {
            if let failure { throw failure }
            throw error
        }
    }

    /// The number of rows in the table of `entity` (its hierarchy's table).
    public func tableRowCount(of entity: String) throws -> Int {
        try tx.rowCount(try tx.table(try destination.entity(entity).hierarchy.table))
    }
}

/// One object during a custom migration stage (``MigrationData``).
public final class MigratingObject {
    /// Its row ID (its object ID's number; unchanged by migration).
    public let rowID: Int64
    let entity: EntityDescription
    let sourceEntity: EntityDescription?
    var values: [Value]
    let schema: TableSchema
    var changed = false

    init(entity: EntityDescription, sourceEntity: EntityDescription?, rowID: Int64, values: [Value], schema: TableSchema) {
        self.entity = entity
        self.sourceEntity = sourceEntity
        self.rowID = rowID
        self.values = values
        self.schema = schema
    }

    /// The value of the source model's property `name` (an attribute, or a
    /// to-one's target row ID), as the store holds it now.
    ///
    /// - Throws: `.notFound` if the source entity has no such stored property.
    public func sourceValue(_ name: String) throws -> Value {
        guard let se = sourceEntity, se.attributesByName[name] != nil || se.relationshipsByName[name].map({ !$0.isToMany }) == true else {
            throw KuraError(.notFound, "the source model's entity \"\(sourceEntity?.name ?? entity.name)\" has no stored property \"\(name)\"")
        }
        // Renamed in this stage: the column already carries the new name.
        let renamed = entity.attributes.first { $0.renamingIdentifier == name && $0.name != name }?.name
            ?? entity.relationships.first { $0.renamingIdentifier == name && $0.name != name }?.name
        let column = schema.position(of: name) != nil && renamed == nil ? name : (renamed ?? name)
        guard let p = schema.position(of: column) else {
            throw KuraError(.notFound, "property \"\(name)\" of entity \"\(se.name)\" has no column in the store")
        }
        return values[p]
    }

    /// The value of the destination model's property `name` (an attribute or
    /// a to-one's target row ID); setting it writes the object back after
    /// the body returns.
    ///
    /// - Throws: `.notFound` if the destination entity has no such stored property.
    public func value(_ name: String) throws -> Value {
        values[try position(name)]
    }

    /// Sets the destination model's property `name`. The value must suit the
    /// column (checked when the row is written: `.typeMismatch`).
    public func setValue(_ value: Value, for name: String) throws {
        let p = try position(name)
        values[p] = value
        changed = true
    }

    private func position(_ name: String) throws(KuraError) -> Int {
        guard entity.attributesByName[name].map({ !$0.isTransient }) == true || entity.relationshipsByName[name].map({ !$0.isToMany }) == true,
              let p = schema.position(of: name) else {
            throw KuraError(.notFound, "the destination model's entity \"\(entity.name)\" has no stored property \"\(name)\"")
        }
        return p
    }
}
