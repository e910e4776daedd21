// RowLayout: where an entity's values sit in its table's rows (the mapping is
// in ManagedObjectModel.swift and, for tables shared by an entity hierarchy,
// EntityHierarchy.swift): attributes first, then each to-one key (and its
// order and entity columns), `_entity` in a shared table, the version
// column, then decimal companions (after a migration, in the stored order,
// beside unused columns); a composite attribute's elements sit in columns
// `<attribute>.<element>` (CompositeAttributes.swift). Computed once per container, so reading a row
// needs no lookups that could fail. In a shared table an entity's attributes
// are not contiguous: `attributeColumns` says where each one is.

/// Column positions of one entity in its table (a class: contexts look it up
/// for every object they load or save, and share it).
final class RowLayout: Sendable {
    struct Slot: Sendable {
        let name: String
        let destination: String
        let column: Int
        let orderColumn: Int?
        /// The column holding the target's entity (destinations with subentities).
        let entityColumn: Int?
    }
    /// The table holding the entity's rows.
    let table: String
    /// The column of each attribute, parallel to the entity's `attributes`
    /// (nil for a transient attribute: it has none).
    let attributeColumns: [Int?]
    /// The element columns of each composite attribute (nil for others),
    /// parallel to the entity's `attributes` (CompositeAttributes.swift).
    let compositeColumns: [[Int]?]
    /// The exact companion column of each decimal attribute (nil for others),
    /// parallel to the entity's `attributes` (DecimalStorage.swift).
    let exactColumns: [Int?]
    /// The to-one relationships' key (and order) columns.
    let relationships: [Slot]
    /// The version column (the last one).
    let version: Int
    /// The `_entity` column of a shared table (nil for an entity's own table).
    let entityColumn: Int?
    /// Column names in order (attributes, to-one keys, order columns, version).
    let columns: [String]
    /// The stored default of each column: what a row written before the
    /// column was added holds there (records may be shorter than the table).
    let defaults: [Value]
    /// Whether the table has external columns (values kept in files).
    let hasExternal: Bool
    /// Each attribute's value in a newly inserted object (its default in
    /// stored form, or null), parallel to the entity's `attributes`.
    let insertValues: [Value]
    /// `insertValues` as an object's slots, copied into each inserted
    /// object's values (AttributeValues.swift).
    let insertSlots: [Value?]
    /// For a plain layout, the column of each attribute by ordinal (-1 for
    /// a transient one), which `fill` copies the object's slots into as
    /// they are; nil for any other layout. Plain: no composite or decimal
    /// attribute (their columns take converted values), no to-one key, no
    /// `_entity` column, and every column of the table is an attribute's
    /// or the version's (so a filled row holds nothing of an earlier one).
    let directColumns: [Int]?
    /// For a layout that is plain but for its to-one keys (each a column of
    /// its own, without order or entity column), the column of each
    /// attribute by ordinal (-1 for a transient one), which `fill` copies
    /// the object's slots into as they are before it writes the keys; nil
    /// for any other layout (a plain one included: `directColumns`). Every
    /// column of the table is an attribute's, a key's or the version's, so
    /// a filled row holds nothing of an earlier one.
    let keyedColumns: [Int]?
    /// For a plain layout (`directColumns`), the attribute ordinal of each
    /// column (-1 for the version's), which a fault's borrowed load
    /// (`ManagedObjectContext.loadBorrowed`) decodes each stored column
    /// into; nil for any other layout.
    let columnOrdinals: [Int]?
    /// For a layout whose rows a fetch decodes in place, straight into a
    /// new object's slots (`ManagedObjectContext.materializeStoreRows`),
    /// what each column of the table holds: an attribute's ordinal (>= 0),
    /// `Self.unusedColumn` (a column the entity does not read: left behind
    /// by a migration), `Self.versionColumn`, or `Self.toOneKeyColumn - j`
    /// for the key of `relationships[j]`. Nil for any other layout: one with
    /// a composite or decimal attribute (their values are converted), an
    /// `_entity` column (a shared table), a to-one key with an entity or
    /// order column, or external columns (values kept in files).
    let fetchColumns: [Int]?
    static let unusedColumn = -1
    static let versionColumn = -2
    static let toOneKeyColumn = -3

    init(table: String, attributeColumns: [Int?], compositeColumns: [[Int]?], exactColumns: [Int?], relationships: [Slot], version: Int,
         entityColumn: Int?, columns: [String], defaults: [Value], hasExternal: Bool, insertValues: [Value], hasDecimal: Bool) {
        self.table = table
        self.attributeColumns = attributeColumns
        self.compositeColumns = compositeColumns
        self.exactColumns = exactColumns
        self.relationships = relationships
        self.version = version
        self.entityColumn = entityColumn
        self.columns = columns
        self.defaults = defaults
        self.hasExternal = hasExternal
        self.insertValues = insertValues
        insertSlots = insertValues.map { Optional($0) }
        // The columns written: each stored attribute's and the version's,
        // which must be distinct and cover the table's columns exactly.
        let written = attributeColumns.compactMap { $0 } + [version]
        let distinct = Set(written)
        let plain = !hasDecimal && relationships.isEmpty && entityColumn == nil
            && compositeColumns.allSatisfy { $0 == nil } && exactColumns.allSatisfy { $0 == nil }
            && distinct.count == written.count && distinct.count == columns.count
            && distinct.allSatisfy { $0 >= 0 && $0 < columns.count }
        directColumns = plain ? attributeColumns.map { $0 ?? -1 } : nil
        // The same with the key columns written too.
        let keyed = written + relationships.map(\.column)
        let distinctKeyed = Set(keyed)
        let plainButKeys = !plain && !hasDecimal && !relationships.isEmpty && entityColumn == nil
            && relationships.allSatisfy { $0.orderColumn == nil && $0.entityColumn == nil }
            && compositeColumns.allSatisfy { $0 == nil } && exactColumns.allSatisfy { $0 == nil }
            && distinctKeyed.count == keyed.count && distinctKeyed.count == columns.count
            && distinctKeyed.allSatisfy { $0 >= 0 && $0 < columns.count }
        keyedColumns = plainButKeys ? attributeColumns.map { $0 ?? -1 } : nil
        if plain {
            var ordinals = [Int](repeating: -1, count: columns.count)
            for (k, c) in attributeColumns.enumerated() { if let c { ordinals[c] = k } }
            columnOrdinals = ordinals
        } else {
            columnOrdinals = nil
        }
        fetchColumns = Self.fetchColumns(attributeColumns: attributeColumns, relationships: relationships, version: version, count: columns.count,
                                         converted: hasDecimal || entityColumn != nil || hasExternal
                                             || compositeColumns.contains { $0 != nil } || exactColumns.contains { $0 != nil })
    }

    /// `fetchColumns` for these columns (nil if `converted`, or if two
    /// things claim one column, or a column is out of range).
    private static func fetchColumns(attributeColumns: [Int?], relationships: [Slot], version: Int, count: Int, converted: Bool) -> [Int]? {
        guard !converted, relationships.allSatisfy({ $0.entityColumn == nil && $0.orderColumn == nil }) else { return nil }
        var out = [Int](repeating: unusedColumn, count: count)
        func claim(_ c: Int, _ what: Int) -> Bool {
            guard c >= 0, c < count, out[c] == unusedColumn else { return false }
            out[c] = what
            return true
        }
        for (k, c) in attributeColumns.enumerated() {
            if let c, !claim(c, k) { return nil }
        }
        for (j, r) in relationships.enumerated() where !claim(r.column, toOneKeyColumn - j) { return nil }
        return claim(version, versionColumn) ? out : nil
    }

    /// The layouts of every entity of `model`, by entity name, over the
    /// stored schemas of its tables (by table name): columns are found by
    /// name, so a migrated table may hold them in another order than the
    /// model's, or hold unused ones (PersistentContainer+Migration.swift).
    static func all(_ model: ManagedObjectModel, schemas: [String: TableSchema]) throws(KuraError) -> [String: RowLayout] {
        var out: [String: RowLayout] = [:]
        for e in model.entities {
            guard let schema = schemas[e.hierarchy.table] else {
                throw KuraError(.invalidArgument, "entity \"\(e.name)\": table \"\(e.hierarchy.table)\" has no schema (a Kura bug)")
            }
            func position(_ name: String) throws(KuraError) -> Int {
                guard let p = schema.position(of: name) else {
                    throw KuraError(.invalidArgument, "entity \"\(e.name)\": table \"\(e.hierarchy.table)\" lacks column \"\(name)\" (a Kura bug)")
                }
                return p
            }
            var attributes: [Int?] = []
            var composites: [[Int]?] = []
            for a in e.attributes {
                if let elements = a.compositeElements {
                    var cols: [Int] = []
                    for el in elements { cols.append(try position(AttributeDescription.compositeColumn(a.name, el.name))) }
                    composites.append(cols)
                    attributes.append(nil)
                } else {
                    composites.append(nil)
                    attributes.append(a.isTransient ? nil : try position(a.name))
                }
            }
            var exact: [Int?] = []
            for a in e.attributes { exact.append(a.type == .decimal && !a.isTransient ? try position(AttributeType.exactColumn(a.name)) : nil) }
            var slots: [Slot] = []
            for r in e.relationships where !r.isToMany && !r.isTransient {
                slots.append(Slot(name: r.name, destination: r.destination, column: try position(r.name),
                                  orderColumn: schema.position(of: r.name + "_order"),
                                  entityColumn: model.needsEntityCompanion(r.destination) ? try position(r.name + ManagedObjectModel.companionSuffix) : nil))
            }
            let version = try position(ManagedObjectModel.versionColumn)
            let entityColumn = e.hierarchy.isShared ? try position(ManagedObjectModel.entityColumn) : nil
            out[e.name] = RowLayout(table: e.hierarchy.table, attributeColumns: attributes, compositeColumns: composites, exactColumns: exact, relationships: slots, version: version,
                                    entityColumn: entityColumn, columns: schema.columns.map(\.name),
                                    defaults: schema.columns.map(\.defaultValue), hasExternal: schema.columns.contains { $0.type == .external },
                                    insertValues: e.attributes.map { a in a.defaultValue.map { a.type.stored($0) } ?? .null },
                                    hasDecimal: e.attributeStorageTypes.contains(.decimal))
        }
        return out
    }

    /// The row `rowID` of this layout's table as `ReadTransaction.values`
    /// gives it (decoded, padded with the column defaults, external values
    /// read from their files). In a read transaction the record is decoded
    /// where it lies in its page, with the schema the transaction's table
    /// handle already holds.
    ///
    /// - Throws: `.corrupt` for an undecodable record; engine read errors.
    func values(_ tx: ReadTransaction, _ table: TableInfo, rowID: Int64) throws(KuraError) -> [Value]? {
        try tx.values(in: table, rowID: rowID)
    }

    /// The values of a row a query cursor of this layout's table gave, as
    /// `ReadTransaction.resolvedValues` gives them (padded with the column
    /// defaults, external values read from their files) without looking up
    /// the table's schema per row.
    ///
    /// - Throws: `.corrupt` for an undecodable record or a bad external value.
    func values(of row: Row, _ tx: ReadTransaction, _ table: TableInfo) throws(KuraError) -> [Value] {
        if hasExternal { return try tx.resolvedValues(of: row, in: table) }
        var values = try RecordCodec.decode(row.record)
        if values.count < defaults.count { values += defaults[values.count...] }
        return values
    }

    /// The stored row of `o` (width of the table; other entities' columns
    /// null), with `rowID` mapping to-one targets to row IDs (nil: no key).
    /// `saved` takes the values the context last read instead of the current ones.
    func row(_ o: ManagedObject, saved: Bool, targetRowID: (ManagedObjectID) -> Int64?) -> [Value] {
        var out: [Value] = []
        fill(&out, o, saved: saved, targetRowID: targetRowID)
        return out
    }

    /// `row(_:saved:targetRowID:)` written into `out`, which is reused: a
    /// caller writing many rows passes the same array each time, so that
    /// (once the engine has let go of the previous row) no array is made,
    /// looked up by type and freed per row. Every column is written: what
    /// `out` held before does not show through.
    func fill(_ out: inout [Value], _ o: ManagedObject, saved: Bool, targetRowID: (ManagedObjectID) -> Int64?) {
        if let direct = directColumns {
            // A plain layout: each slot goes to its column as it is, and
            // every column is written (see `directColumns`).
            if out.count != columns.count { out = [Value](repeating: .null, count: columns.count) }
            if saved {
                (o.savedValues ?? AttributeValues(o.entity)).write(into: &out, columns: direct)
            } else {
                o.values.write(into: &out, columns: direct)
            }
            out[version] = .integer(o.version)
            return
        }
        if let keyed = keyedColumns {
            // Plain but for its keys: the slots go to their columns as
            // they are, then each key (or null); every column is written
            // (see `keyedColumns`).
            if out.count != columns.count { out = [Value](repeating: .null, count: columns.count) }
            if saved {
                (o.savedValues ?? AttributeValues(o.entity)).write(into: &out, columns: keyed)
            } else {
                o.values.write(into: &out, columns: keyed)
            }
            let toOne = saved ? o.savedToOne : o.toOne
            // By index (a slot copied out of the array retains its names).
            for j in relationships.indices {
                let column = relationships[j].column
                if let id = toOne[relationships[j].name], let rid = targetRowID(id) {
                    out[column] = .integer(rid)
                } else {
                    out[column] = .null
                }
            }
            out[version] = .integer(o.version)
            return
        }
        if out.count == columns.count {
            for i in out.indices { out[i] = .null }
        } else {
            out = [Value](repeating: .null, count: columns.count)
        }
        let values = saved ? (o.savedValues ?? AttributeValues(o.entity)) : o.values
        // By ordinal (iterating the descriptions would copy each one).
        let types = o.entity.attributeStorageTypes
        for i in attributeColumns.indices {
            if let cols = compositeColumns[i], let elements = o.entity.attributes[i].compositeElements {
                // Cannot fail: the value at this ordinal is only ever set by compositeStoredValue or
                // compositeValue, which write null or a record of exactly one value per element.
                let parts = (try? o.entity.attributes[i].compositeElementValues(values[ordinal: i] ?? .null, elements, of: o.objectID)) ?? []
                for (c, v) in zip(cols, parts) { out[c] = v }
                continue
            }
            guard let c = attributeColumns[i] else { continue }
            let v = values[ordinal: i] ?? .null
            out[c] = types[i] == .decimal ? AttributeType.decimal.engineValue(v) : v
            if let x = exactColumns[i], case .text = v { out[x] = v }
        }
        // An entity without to-one keys reads neither dictionary (fields in
        // another cache line of the object: ManagedObject.swift, "Layout").
        if !relationships.isEmpty {
            let toOne = saved ? o.savedToOne : o.toOne
            let order = saved ? o.savedOrder : o.order
            for slot in relationships {
                if let id = toOne[slot.name], let rid = targetRowID(id) {
                    out[slot.column] = .integer(rid)
                    if let ec = slot.entityColumn { out[ec] = .text(id.entityName) }
                }
                if let oc = slot.orderColumn { out[oc] = order[slot.name + "_order"].map { .double($0) } ?? .null }
            }
        }
        if let entityColumn { out[entityColumn] = .text(o.entity.name) }
        out[version] = .integer(o.version)
    }
}

/// The object IDs of one batch of a batched fetch (`fetchBatchSize`): when one
/// of its faults fires, the context loads all of them in one read.
final class BatchGroup {
    let ids: [ManagedObjectID]
    init(_ ids: [ManagedObjectID]) { self.ids = ids }
}

extension RowLayout {
    /// The in-memory value of a composite attribute from its element columns'
    /// values (CompositeAttributes.swift): null when all are null.
    static func compositeValue(_ values: [Value]) -> Value {
        values.allSatisfy(\.isNull) ? .null : .blob(RecordCodec.encode(values))
    }
}
