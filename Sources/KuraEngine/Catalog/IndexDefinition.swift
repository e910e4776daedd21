// IndexDefinition: a secondary index as the catalog describes it (FORMAT.md,
// "Index trees"): its name, table, columns and uniqueness, decoded from the
// index's catalog entry, and the key segments a row's values give it (built by
// `IndexKey`, one layer down).

/// One column of an index.
public struct IndexColumn: Sendable, Hashable {
    /// Column name (in a table with a schema) — resolved to `position` when the
    /// index is created.
    public var name: String
    /// Newest first when true.
    public var descending: Bool
    /// Index the case- and diacritic-folded text (for `[cd]` queries).
    public var folded: Bool
    /// Position of the column in the table's records.
    public internal(set) var position: Int = -1

    public init(_ name: String, descending: Bool = false, folded: Bool = false) {
        self.name = name
        self.descending = descending
        self.folded = folded
    }
}

/// A secondary index: its catalog entry plus its columns.
public struct IndexDefinition: Sendable, Hashable {
    /// The index's name (unique among tables and indexes of the store).
    public let name: String
    /// The table it indexes.
    public let table: String
    public let columns: [IndexColumn]
    /// Whether two rows may not share the same (non-null) values.
    public let isUnique: Bool
    let info: TableInfo

    var tree: BTree { BTree(root: info.rootPage, kind: .index) }

    /// Definition record: [1, unique, n, then per column: name, position, descending, folded].
    static func encode(columns: [IndexColumn], unique: Bool) -> [UInt8] {
        var v: [Value] = [.integer(1), .bool(unique), .integer(Int64(columns.count))]
        for c in columns { v += [.text(c.name), .integer(Int64(c.position)), .bool(c.descending), .bool(c.folded)] }
        return RecordCodec.encode(v)
    }

    init(info: TableInfo) throws(KuraError) {
        let v = try RecordCodec.decode(info.definition)
        func bad() -> KuraError { KuraError(.corrupt, "definition of index \"\(info.name)\" in the catalog is malformed", page: info.rootPage) }
        guard v.count >= 3, v[0] == .integer(1), case .bool(let unique) = v[1], case .integer(let n) = v[2],
              n > 0, v.count == 3 + 4 * Int(n), let table = info.owner else { throw bad() }
        var cols: [IndexColumn] = []
        for i in 0..<Int(n) {
            let b = 3 + 4 * i
            guard case .text(let name) = v[b], case .integer(let pos) = v[b + 1], pos >= 0, pos < 100_000,
                  case .bool(let desc) = v[b + 2], case .bool(let folded) = v[b + 3] else { throw bad() }
            var c = IndexColumn(name, descending: desc, folded: folded)
            c.position = Int(pos)
            cols.append(c)
        }
        name = info.name
        self.table = table
        columns = cols
        isUnique = unique
        self.info = info
    }

    /// The key segments of a row's values (without the row ID).
    func valuePrefix(_ values: (Int) throws(KuraError) -> Value) throws(KuraError) -> (key: [UInt8], hasNull: Bool) {
        var key: [UInt8] = []
        let hasNull = try appendValuePrefix(to: &key, values)
        return (key, hasNull)
    }

    /// Appends the key segments of a row's values (without the row ID) to
    /// `key`, and returns whether a value is null. An index build reuses one
    /// buffer for every row this way. On a thrown error `key` holds a partial
    /// prefix.
    func appendValuePrefix(to key: inout [UInt8], _ values: (Int) throws(KuraError) -> Value) throws(KuraError) -> Bool {
        var hasNull = false
        for c in columns {
            let v = try values(c.position)
            if v.isNull { hasNull = true }
            if case .double(let d) = v, d.isNaN {
                throw KuraError(.invalidArgument, "NaN cannot be stored in column \"\(c.name)\", which index \"\(name)\" covers")
            }
            IndexKey.append(v, descending: c.descending, folded: c.folded, to: &key)
        }
        return hasNull
    }
}
