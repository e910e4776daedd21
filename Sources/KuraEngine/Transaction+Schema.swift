// Transaction+Schema: typed tables and secondary indexes.
//
// A table created with a `TableSchema` checks every row written to it (types,
// nulls) and fills defaults. Indexes need a schema (so each column holds one type
// and its key encoding is ordered, FORMAT.md "Index keys"). Every insert, update
// and delete keeps every index of its table consistent in the same transaction.
// Unique indexes are checked before anything is written, so a violation leaves
// the transaction exactly as it was before the call.

extension ReadTransaction {
    /// The schema of `table`, or nil for a raw table created without one.
    ///
    /// - Throws: `.corrupt` if the stored schema does not decode.
    public func schema(of table: TableInfo) throws(KuraError) -> TableSchema? {
        try checkActive()
        // The write transaction's table handle holds it resolved (and is
        // dropped by every schema change): no lookup by name.
        // A read transaction's handle holds it too (TableHandle.swift).
        if let h = cachedReadHandle(table.name), h.isHandle(of: table) { return h.schema }
        if let w = self as? WriteTransaction, let h = w.resolvedHandle(table) { return h.schema }
        let info = try self.table(table.name)
        // The connection's decoded schema is the one, unless this (write)
        // transaction changed the table's definition.
        if let w = self as? WriteTransaction {
            if !w.schemaChanged.contains(info.name), let decoded = w.catalog?.decodedSchemas[info.id] { return try decoded.get() }
        } else if let decoded = try currentCatalog().decodedSchemas[info.id] {
            return try decoded.get()
        }
        if let cached = schemaCache[info.name], cached.id == info.id, cached.definition == info.definition { return cached.schema }
        let s = try TableSchema.decode(info.definition, table: info.name)
        schemaCache[info.name] = (info.id, info.definition, s)
        return s
    }

    /// The indexes of the table named `table`, in creation order.
    public func indexes(of table: String) throws(KuraError) -> [IndexDefinition] {
        try checkActive()
        if let cached = indexCache[table] { return cached }
        var out: [IndexDefinition] = []
        for info in try currentCatalog().entries.values where info.kind == "index" && info.owner == table {
            out.append(try IndexDefinition(info: info))
        }
        if !out.isEmpty {
            // Every column must name a column of the table's schema at the stored
            // position: the planner and key builders index the schema with it.
            let columns = try currentCatalog().entries[table].flatMap { t throws(KuraError) in try schema(of: t)?.columns } ?? []
            for index in out {
                for c in index.columns where c.position >= columns.count || columns[c.position].name != c.name {
                    throw KuraError(.corrupt, "index \"\(index.name)\" names column \"\(c.name)\" at position \(c.position), which table \"\(table)\" does not have; run `kura check` on the store", path: database.path, page: index.info.rootPage)
                }
            }
        }
        out.sort { $0.info.id < $1.info.id }
        indexCache[table] = out
        return out
    }

    /// The index named `name`.
    ///
    /// - Throws: `.notFound` naming the index.
    public func index(_ name: String) throws(KuraError) -> IndexDefinition {
        try checkActive()
        guard let info = try currentCatalog().entries[name], info.kind == "index" else {
            throw KuraError(.notFound, "no index named \"\(name)\"", path: database.path)
        }
        return try IndexDefinition(info: info)
    }

    /// Index entries (keys) of a row, one per index, in the order of `indexes`.
    func indexKeys(_ indexes: [IndexDefinition], record: [UInt8], rowID: Int64, table: TableInfo) throws(KuraError) -> [(index: IndexDefinition, key: [UInt8], prefixLength: Int, hasNull: Bool)] {
        guard !indexes.isEmpty else { return [] }
        return try indexKeys(indexes, record: record, rowID: rowID, schema: self.schema(of: table))
    }

    /// Index entries of a row for a table whose schema the caller holds (a
    /// table handle): no catalog lookup.
    func indexKeys(_ indexes: [IndexDefinition], record: [UInt8], rowID: Int64, schema: TableSchema?) throws(KuraError) -> [(index: IndexDefinition, key: [UInt8], prefixLength: Int, hasNull: Bool)] {
        guard !indexes.isEmpty else { return [] }
        return try record.withBytes { b throws(KuraError) in
            let view = try RecordView(b)
            var out: [(index: IndexDefinition, key: [UInt8], prefixLength: Int, hasNull: Bool)] = []
            for index in indexes {
                var (key, hasNull) = try index.valuePrefix { (i: Int) throws(KuraError) -> Value in
                    if let schema, i < schema.columns.count { return try schema.value(view, i) }
                    return try view.value(at: i)
                }
                let prefix = key.count
                RowIDKey.append(rowID, to: &key)
                if key.count > Node.maxKey(database.pageSize) {
                    throw KuraError(.tooBig, "row \(rowID)'s key for index \"\(index.name)\" is \(key.count) bytes; keys may be at most \(Node.maxKey(database.pageSize)) bytes at this page size (index a shorter column, or use larger pages)")
                }
                out.append((index, key, prefix, hasNull))
            }
            return out
        }
    }
}

extension WriteTransaction {
    /// Whether rows this transaction writes store integral doubles in serial
    /// types 10 and 11 (FORMAT.md, "Records"): only in a store of format 9 or
    /// later, which builds that do not read them refuse. Read from this
    /// transaction's page 1, so an upgrade in the same transaction counts.
    var compactDoubles: Bool { writer!.currentHeader.headerVersion >= FileHeader.compactDoublesVersion }

    /// Encodes a row for `info`, checking it against the table's schema if it has one.
    func encodeRow(_ values: [Value], _ info: TableInfo) throws(KuraError) -> [UInt8] {
        guard let schema = try schema(of: info) else { return RecordCodec.encode(values, compactDoubles: compactDoubles) }
        return RecordCodec.encode(try schema.validate(values, table: info.name), compactDoubles: compactDoubles)
    }

    /// Throws `.constraintViolation` if a unique index already holds one of the
    /// new keys' values for another row. Checks only `only[i]` where given.
    func checkUnique(_ indexes: [IndexDefinition], _ keys: [(index: IndexDefinition, key: [UInt8], prefixLength: Int, hasNull: Bool)],
                     rowID: Int64, table: String, only: [Bool]? = nil) throws(KuraError) {
        for (i, k) in keys.enumerated() where k.index.isUnique && !k.hasNull && (only?[i] ?? true) {
            let prefix = Array(k.key[0..<k.prefixLength])
            if let other = try firstRow(in: k.index, withPrefix: prefix, excluding: rowID) {
                throw try uniqueClash(k.index, other: other, table: table)
            }
        }
    }

    /// The error of a new row whose values `index` (unique) already holds
    /// for row `other`: names the index, the table, the columns and values.
    private func uniqueClash(_ index: IndexDefinition, other: Int64, table: String) throws(KuraError) -> KuraError {
        KuraError(.constraintViolation,
                  "unique index \"\(index.name)\" on table \"\(table)\" already holds \(index.columns.map(\.name).joined(separator: ", ")) = \(try describeValues(index, rowID: other, table: table)) (row \(other))",
                  path: database.path)
    }

    /// `checkUnique` for an insert's keys in `entries` (IndexEntries.swift).
    /// `explicitRowID`: the table's tree when the caller chose the row ID,
    /// so that a row ID that is taken is reported before an index clash it
    /// would also cause (looked up only then: the insert itself refuses a
    /// taken row ID before anything is written).
    func checkUnique(_ entries: IndexEntries, rowID: Int64, table: String, explicitRowID tree: BTree?) throws(KuraError) {
        for i in 0..<entries.keys.count where entries.unique[i] && !entries.hasNull[i] {
            let other = try entries.keys[i].withBytes { k throws(KuraError) in
                try firstRow(inIndex: entries.roots[i], named: entries.definitions[i].name,
                             withPrefix: UnsafeRawBufferPointer(rebasing: k[0..<entries.prefixLengths[i]]), excluding: rowID)
            }
            guard let other else { continue }
            if let tree, try tree.contains(RowIDKey.encode(rowID), writer!) {
                throw KuraError(.alreadyExists, "table \"\(table)\" already has a row with ID \(rowID)", path: database.path)
            }
            throw try uniqueClash(entries.definitions[i], other: other, table: table)
        }
    }

    /// A row other than `excluding` whose key in `index` starts with `prefix`.
    func firstRow(in index: IndexDefinition, withPrefix prefix: [UInt8], excluding: Int64) throws(KuraError) -> Int64? {
        try prefix.withBytes { p throws(KuraError) in
            try firstRow(inIndex: index.info.rootPage, named: index.name, withPrefix: p, excluding: excluding)
        }
    }

    /// `firstRow(in:withPrefix:excluding:)` by the index's root page.
    func firstRow(inIndex root: UInt32, named name: String, withPrefix prefix: UnsafeRawBufferPointer, excluding: Int64) throws(KuraError) -> Int64? {
        var c = TreeCursor(tree: BTree(root: root, kind: .index))
        try c.seek(prefix, writer!)
        var steps = 0
        while c.isValid && steps < 2 {
            let key = c.key
            guard key.count > prefix.count, key.starts(with: prefix) else { return nil }
            let rest = UnsafeRawBufferPointer(rebasing: key[prefix.count...])
            guard let (rid, n) = RowIDKey.decode(rest.baseAddress!, 0, rest.count), n == rest.count else {
                throw KuraError(.corrupt, "index \"\(name)\" has a key that does not end in a row ID", page: c.leaf.number)
            }
            if rid != excluding { return rid }
            steps += 1
            try c.next(writer!)
        }
        return nil
    }

    private func describeValues(_ index: IndexDefinition, rowID: Int64, table: String) throws(KuraError) -> String {
        guard let values = try values(in: self.table(table), rowID: rowID) else { return "?" }
        let shown = index.columns.map { $0.position < values.count ? values[$0.position].description : "null" }
        return shown.count == 1 ? shown[0] : "(" + shown.joined(separator: ", ") + ")"
    }

    // MARK: Typed tables

    /// Creates a table whose rows are checked against `schema`.
    ///
    /// - Throws: `.alreadyExists`, `.invalidArgument` as `createTable(_:)`.
    @discardableResult
    public func createTable(_ name: String, schema: TableSchema) throws(KuraError) -> TableInfo {
        try createTable(name, definition: schema.encoded)
    }

    /// Adds a column to a table's schema. No row is rewritten: existing rows read
    /// the column's default.
    ///
    /// - Throws: `.invalidArgument` for a raw table, a duplicate name, or a
    ///   non-null column without a default on a table that has rows.
    public func addColumn(_ column: ColumnDefinition, to table: TableInfo) throws(KuraError) {
        let info = try entry(table)
        guard var schema = try schema(of: info) else {
            throw KuraError(.invalidArgument, "table \"\(info.name)\" has no schema; create it with one to add columns")
        }
        if !column.isNullable && column.defaultValue.isNull && info.rowCount > 0 {
            throw KuraError(.invalidArgument, "column \"\(column.name)\" may not be null and has no default, but table \"\(info.name)\" has rows")
        }
        do { try schema.append(column) } catch { throw KuraError(error.code, error.message + " in table \"\(info.name)\"") }
        try setDefinition(schema.encoded, of: info)
    }

    /// Renames a column of a table's schema. No row is rewritten: records are
    /// positional, so only the name in the catalog changes.
    ///
    /// - Throws: `.notFound` for an unknown column; `.invalidArgument` for a
    ///   raw table, a taken name, or a column an index uses (drop the index
    ///   first and create it again after).
    public func renameColumn(_ old: String, to new: String, in table: TableInfo) throws(KuraError) {
        let info = try entry(table)
        guard var schema = try schema(of: info) else {
            throw KuraError(.invalidArgument, "table \"\(info.name)\" has no schema; only typed columns can be renamed")
        }
        if let ix = try indexes(of: info.name).first(where: { $0.columns.contains { $0.name == old } }) {
            throw KuraError(.invalidArgument, "column \"\(old)\" of table \"\(info.name)\" is used by index \"\(ix.name)\"; drop it before renaming the column")
        }
        do { try schema.rename(old, to: new) } catch { throw KuraError(error.code, error.message + " in table \"\(info.name)\"") }
        try setDefinition(schema.encoded, of: info)
    }

    /// Inserts a row given by column name; missing columns get their defaults.
    ///
    /// - Throws: `.notFound` for an unknown column, `.typeMismatch` or
    ///   `.constraintViolation` naming the column, `.invalidArgument` for a raw table.
    @discardableResult
    public func insert(_ values: [String: Value], into table: TableInfo) throws(KuraError) -> Int64 {
        let info = try entry(table)
        guard let schema = try schema(of: info) else {
            throw KuraError(.invalidArgument, "table \"\(info.name)\" has no schema; insert values by position")
        }
        return try insertEncoded(RecordCodec.encode(schema.row(from: values, table: info.name), compactDoubles: compactDoubles), into: info)
    }

    // MARK: Indexes

    /// Creates an index on `table`'s columns and fills it from the table's rows
    /// (sorted once, written page by page). The sort keeps at most about
    /// `Options.cacheSize` bytes of keys in memory; larger tables are sorted in
    /// runs written to a temporary file `PATH-sort` beside the store, removed
    /// before this returns or throws (FORMAT.md, "Index trees").
    ///
    /// - Throws: `.alreadyExists` if the name is taken; `.notFound` for an unknown
    ///   column; `.invalidArgument` for a raw table or no columns; for a unique
    ///   index, `.constraintViolation` naming two rows that share values; `.io`,
    ///   `.diskFull` or `.corrupt` from the temporary file. Errors found while
    ///   reading the table and sorting (all of the above but I/O errors while the
    ///   sorted keys are read back into the new tree) create nothing; after such
    ///   a late I/O error, throw out of the write transaction so it rolls back.
    @discardableResult
    public func createIndex(_ name: String, on table: TableInfo, columns: [IndexColumn], unique: Bool = false) throws(KuraError) -> IndexDefinition {
        let info = try entry(table)
        guard let schema = try schema(of: info) else {
            throw KuraError(.invalidArgument, "table \"\(info.name)\" has no schema; indexes need typed columns")
        }
        guard !columns.isEmpty, columns.count <= 32 else {
            throw KuraError(.invalidArgument, "an index needs 1 to 32 columns")
        }
        var resolved = columns
        for i in resolved.indices {
            let (pos, def) = try schema.column(resolved[i].name, table: info.name)
            if def.type == .external {
                throw KuraError(.invalidArgument, "column \"\(def.name)\" of table \"\(info.name)\" is external (its large values live in files); it cannot be indexed")
            }
            if resolved[i].folded && def.type != .text {
                throw KuraError(.invalidArgument, "column \"\(def.name)\" is \(def.type.rawValue); only text columns can be folded")
            }
            resolved[i].position = pos
        }
        if try currentCatalog().entries[name] != nil {
            throw KuraError(.alreadyExists, "a table or index named \"\(name)\" already exists", path: database.path)
        }
        // Compute and sort every key, and check uniqueness, before creating
        // anything, so a failure creates nothing.
        let definition = IndexDefinition.encode(columns: resolved, unique: unique)
        let probe = try IndexDefinition(info: TableInfo(name: name, id: 0, rootPage: 1, rowCount: 0, nextRowID: 1, definition: definition, kind: "index", owner: info.name))
        let sorter = KeySorter(fileSystem: database.options.fileSystem, storePath: database.path, permissionsOf: writer!.pager.file,
                               budget: database.options.cacheSize, maxKey: Node.maxKey(database.pageSize))
        sorter.reserve(entries: Int(info.rowCount))
        do throws(KuraError) {
            try addIndexEntries(of: info, schema: schema, to: probe, sorter)
            try sorter.finish()
            if sorter.isInMemory {
                // Everything fit the budget: no run file, no merge; the sorted
                // keys go from the sorter's arena straight into leaf pages.
                if unique, let (p, e) = sorter.firstSharedValuesInMemory() {
                    throw KuraError(.constraintViolation, "cannot create unique index \"\(name)\": rows \(p.rowID) and \(e.rowID) of table \"\(info.name)\" share \(resolved.map(\.name).joined(separator: ", ")) = \(try describeValues(probe, rowID: e.rowID, table: info.name))")
                }
                let created = try createObject(name, kind: "index", owner: info.name, definition: definition)
                let index = try IndexDefinition(info: created)
                var loader = BTree.BulkLoader(tree: index.tree, writer!)
                try sorter.forEachInMemory { key, _ throws(KuraError) in try loader.append(key: key) }
                try loader.finish()
                indexCache[info.name] = nil
                return index
            }
            if unique {
                let entries = try sorter.merged()
                var previous: SortEntry? = nil
                while let e = try entries.next() {
                    if let p = previous, !e.hasNull, e.sharesValues(with: p) {
                        throw KuraError(.constraintViolation, "cannot create unique index \"\(name)\": rows \(p.rowID) and \(e.rowID) of table \"\(info.name)\" share \(resolved.map(\.name).joined(separator: ", ")) = \(try describeValues(probe, rowID: e.rowID, table: info.name))")
                    }
                    previous = e
                }
            }
            let created = try createObject(name, kind: "index", owner: info.name, definition: definition)
            let index = try IndexDefinition(info: created)
            let entries = try sorter.merged()
            try index.tree.bulkLoad(writer!) { () throws(KuraError) -> (key: [UInt8], value: [UInt8])? in
                try entries.next().map { ($0.key, []) }
            }
            try sorter.close()
            indexCache[info.name] = nil
            return index
        } catch {
            sorter.discard()
            throw error
        }
    }

    /// Adds the entry of every row of `table` for `index` to `sorter`. Walks
    /// the table's leaves directly and locates the indexed columns in place
    /// (`RecordFields`): no copy of a record unless it has an overflow chain.
    /// Keys are built as `indexKeys` builds them (a column a record does not
    /// store reads as its default).
    ///
    /// - Throws: `.corrupt` for a malformed page, key or record; `.tooBig` for
    ///   a key longer than the page size allows; errors of `sorter`.
    private func addIndexEntries(of table: TableInfo, schema: TableSchema, to index: IndexDefinition, _ sorter: KeySorter) throws(KuraError) {
        let w = writer!
        let tree = BTree(root: table.rootPage, kind: .table)
        let maxKey = Node.maxKey(database.pageSize)
        var fields = RecordFields(columns: index.columns.map { $0.position + 1 }.max() ?? 0)
        // One key buffer for every row: the sorter copies each key into its
        // arena, so no array is made per row.
        var key: [UInt8] = []
        key.reserveCapacity(64)
        var cursor = TreeCursor(tree: tree)
        try cursor.first(w)
        while cursor.isValid {
            let leaf = cursor.leaf, i = cursor.index
            let (ko, kl) = leaf.cellKey(i)
            guard let (rowID, n) = RowIDKey.decode(leaf.bytes, ko, ko + kl), n == kl else {
                throw KuraError(.corrupt, "table \"\(table.name)\" has a key that is not a row ID", path: database.path, page: leaf.number)
            }
            let v = leaf.leafValue(i)
            if v.overflow == 0 {
                try Self.addIndexEntry(UnsafeRawBufferPointer(start: leaf.bytes + v.offset, count: v.length), rowID: rowID, index: index, schema: schema,
                                       maxKey: maxKey, fields: &fields, key: &key, sorter)
            } else {
                try tree.value(leaf, i, w).withBytes { r throws(KuraError) in
                    try Self.addIndexEntry(r, rowID: rowID, index: index, schema: schema, maxKey: maxKey, fields: &fields, key: &key, sorter)
                }
            }
            try cursor.next(w)
        }
    }

    /// Adds row `rowID`'s entry for `index` (its `record`) to `sorter`, built
    /// in `key` (cleared first). `fields` and `key` are the build's scratch
    /// state, passed in so the per-row work touches no captured variable.
    private static func addIndexEntry(_ record: UnsafeRawBufferPointer, rowID: Int64, index: IndexDefinition, schema: TableSchema, maxKey: Int,
                                      fields: inout RecordFields, key: inout [UInt8], _ sorter: KeySorter) throws(KuraError) {
        try fields.load(record)
        key.removeAll(keepingCapacity: true)
        let hasNull = try index.appendValuePrefix(to: &key) { (i: Int) throws(KuraError) -> Value in
            if i < fields.loaded { return try fields.value(i) }
            return i < schema.columns.count ? schema.columns[i].defaultValue : .null
        }
        let prefix = key.count
        RowIDKey.append(rowID, to: &key)
        if key.count > maxKey {
            throw KuraError(.tooBig, "row \(rowID)'s key for index \"\(index.name)\" is \(key.count) bytes; keys may be at most \(maxKey) bytes at this page size (index a shorter column, or use larger pages)")
        }
        try key.withBytes { k throws(KuraError) in try sorter.add(keyBytes: k, prefix: prefix, hasNull: hasNull, rowID: rowID) }
    }

    /// Drops an index.
    ///
    /// - Throws: `.notFound` naming the index.
    public func dropIndex(_ name: String) throws(KuraError) {
        let index = try self.index(name)
        try dropObject(index.name)
        indexCache[index.table] = nil
    }
}
