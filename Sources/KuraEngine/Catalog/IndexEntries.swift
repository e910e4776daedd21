// IndexEntries: the index keys of the row an insert is writing, built in
// buffers a table handle keeps (TableHandle.swift), for the insert path of a
// table with indexes (`WriteTransaction.insertEncoded`).
//
// `ReadTransaction.indexKeys` builds the same keys as an array of tuples, each
// holding a copy of its `IndexDefinition` and a new key array, and decodes
// every indexed column into a `Value` (a String per text column): about a
// thousand instructions and several allocations per index and row. Here the
// indexes' columns are flattened once per handle, each key is written into a
// buffer kept from the last row, the record's header is walked once
// (`RecordFields`) and a text column that is neither folded nor descending is
// escaped from the record's bytes straight into the key. The keys are the
// same bytes (FORMAT.md, "Index keys"); `IndexEntriesTests` compares the two.

final class IndexEntries {
    // `@exclusivity(unchecked)` on the mutable fields: an instance belongs
    // to one table handle, used only by the write transaction holding it
    // (TableHandle.swift), one call at a time.

    /// One indexed column: where it is in the row and how it is encoded
    /// (trivial, so reading one copies no reference).
    struct Column {
        let position: Int
        let descending: Bool
        let folded: Bool
    }

    /// The indexes, in the handle's order.
    let definitions: [IndexDefinition]
    /// Every index's columns, flattened: index `i`'s are
    /// `columns[columnStarts[i]..<columnStarts[i + 1]]`.
    let columns: [Column]
    let columnStarts: [Int]
    /// Each index's root page and whether it is unique (no struct copy per row).
    let roots: [UInt32]
    let unique: [Bool]
    let hasUnique: Bool
    /// The keys of the last row built: value segments then the row ID key.
    @exclusivity(unchecked) var keys: [[UInt8]]
    /// The length of each key's value segments (before the row ID).
    @exclusivity(unchecked) var prefixLengths: [Int]
    /// Whether a key's values include a null (a unique index ignores it).
    @exclusivity(unchecked) var hasNull: [Bool]
    /// The record's indexed columns, located once per row.
    @exclusivity(unchecked) var fields: RecordFields

    init(_ indexes: [IndexDefinition], width: Int) {
        definitions = indexes
        var flat: [Column] = []
        var starts: [Int] = [0]
        for ix in indexes {
            for c in ix.columns { flat.append(Column(position: c.position, descending: c.descending, folded: c.folded)) }
            starts.append(flat.count)
        }
        columns = flat
        columnStarts = starts
        roots = indexes.map(\.info.rootPage)
        unique = indexes.map(\.isUnique)
        hasUnique = indexes.contains { $0.isUnique }
        keys = Array(repeating: [], count: indexes.count)
        prefixLengths = Array(repeating: 0, count: indexes.count)
        hasNull = Array(repeating: false, count: indexes.count)
        fields = RecordFields(columns: width)
    }

    /// Builds every index's key for the row `rowID` whose record is
    /// `record`, checked against `schema` (nil for a raw table). A column
    /// the record does not store (added after it was written) reads the
    /// schema's default, as `TableSchema.value` does.
    ///
    /// - Throws: `.corrupt` for a malformed record; `.invalidArgument` for a
    ///   NaN in an indexed column; `.tooBig` for a key longer than `maxKey`.
    func build(_ record: UnsafeRawBufferPointer, rowID: Int64, schema: TableSchema?, maxKey: Int) throws(KuraError) {
        try fields.load(record)
        for i in 0..<keys.count {
            var key: [UInt8] = []
            swap(&key, &keys[i])
            defer { swap(&key, &keys[i]) }
            key.removeAll(keepingCapacity: true)
            var null = false
            for k in columnStarts[i]..<columnStarts[i + 1] {
                let c = columns[k]
                if !c.folded && !c.descending, let text = fields.textBytes(c.position) {
                    // The record holds the text's UTF-8 bytes: escaped into
                    // the key as `IndexKey.append(.text(...))` would.
                    key.append(IndexKey.textTag)
                    IndexKey.appendEscaped(bytes: text, to: &key)
                    continue
                }
                let v: Value
                if c.position < fields.loaded {
                    v = try fields.value(c.position)
                } else if let schema, c.position < schema.columns.count {
                    v = schema.columns[c.position].defaultValue
                } else {
                    v = .null
                }
                if v.isNull { null = true }
                if case .double(let d) = v, d.isNaN {
                    let index = definitions[i]
                    throw KuraError(.invalidArgument, "NaN cannot be stored in column \"\(index.columns[k - columnStarts[i]].name)\", which index \"\(index.name)\" covers")
                }
                IndexKey.append(v, descending: c.descending, folded: c.folded, to: &key)
            }
            prefixLengths[i] = key.count
            hasNull[i] = null
            RowIDKey.append(rowID, to: &key)
            if key.count > maxKey {
                throw KuraError(.tooBig, "row \(rowID)'s key for index \"\(definitions[i].name)\" is \(key.count) bytes; keys may be at most \(maxKey) bytes at this page size (index a shorter column, or use larger pages)")
            }
        }
    }
}

extension IndexKey {
    /// `appendEscaped` for bytes in memory: runs without a zero byte are
    /// copied whole.
    static func appendEscaped(bytes: UnsafeRawBufferPointer, to out: inout [UInt8]) {
        var start = 0
        var i = 0
        while i < bytes.count {
            if bytes[i] == 0 {
                out.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[start...i]))
                out.append(0xFF)
                start = i + 1
            }
            i += 1
        }
        if start < bytes.count { out.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[start...])) }
        out.append(0)
        out.append(0)
    }
}
