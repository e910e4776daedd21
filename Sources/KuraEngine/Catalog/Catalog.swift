// Catalog: the list of tables (and, later, indexes) stored in the file
// (FORMAT.md, "The catalog").
//
// The catalog is a table tree whose root the header names (0 until the first
// write transaction creates it). Each row, keyed by the object's catalog ID, is a
// record:
//
//     0  kind          text: "table" (or "index")
//     1  name          text, unique among objects of the store
//     2  root page     integer
//     3  next row ID   format 1: integer, the row ID the next insert without
//                      one gets; format 2: -1 (the counters tree holds it)
//     4  row count     format 1: integer; format 2: -1 (as field 3)
//     5  definition    blob: the schema layer's description (empty for raw tables)
//     6  owner         text: for an index, its table's name; null otherwise
//
// Format 2 keeps the counters in the counters tree (TableCounters.swift) and
// writes -1 in fields 3 and 4, which a format-1 build reads as a malformed
// entry: it fails loudly instead of trusting stale counters.
//
// Invariants: names are unique; row IDs of a table are all < next row ID, so a
// row ID is never handed out twice, even after deletes; row count equals the
// number of rows in the tree (kura check verifies both).
//
// A connection caches the decoded catalog keyed by the header's schema cookie
// (Database.swift, `catalog(_:)`), which changes only with schema changes; the
// counters are looked up per transaction.

/// What the catalog records about one table.
public struct TableInfo: Sendable, Hashable {
    /// The table's name.
    public let name: String
    /// Catalog ID (stable for the table's lifetime; a dropped and re-created
    /// table gets a new one).
    public let id: Int64
    /// Root page of the table's tree.
    public let rootPage: UInt32
    /// Number of rows.
    public internal(set) var rowCount: Int64
    /// The row ID the next insert without an explicit row ID will get.
    public internal(set) var nextRowID: Int64
    /// Opaque definition bytes stored by the layer above (schema).
    public internal(set) var definition: [UInt8]
    /// "table" or "index".
    public let kind: String
    /// For an index: the table it belongs to.
    public let owner: String?

    /// The format-2 catalog record (counters live in the counters tree).
    var record: [Value] {
        [.text(kind), .text(name), .integer(Int64(rootPage)), .integer(-1), .integer(-1),
         .blob(definition), owner.map { .text($0) } ?? .null]
    }

    /// This entry with `c`'s counters.
    func with(_ c: TableCounters) -> TableInfo {
        var i = self
        i.nextRowID = c.nextRowID
        i.rowCount = c.rowCount
        return i
    }

    var counters: TableCounters { TableCounters(nextRowID: nextRowID, rowCount: rowCount) }

    init(name: String, id: Int64, rootPage: UInt32, rowCount: Int64, nextRowID: Int64, definition: [UInt8], kind: String, owner: String?) {
        self.name = name
        self.id = id
        self.rootPage = rootPage
        self.rowCount = rowCount
        self.nextRowID = nextRowID
        self.definition = definition
        self.kind = kind
        self.owner = owner
    }

    /// Decodes a catalog row; throws `corrupt` naming the catalog page otherwise.
    /// `legacy` (format 1) takes the counters from the record; otherwise they
    /// read as 0 and 1 until the counters tree's are laid over them.
    init(id: Int64, values v: [Value], page: UInt32, legacy: Bool) throws(KuraError) {
        guard v.count >= 6, case .text(let kind) = v[0], case .text(let name) = v[1],
              case .integer(let root) = v[2], root > 0, root <= Int64(UInt32.max),
              case .integer(var next) = v[3], case .integer(var count) = v[4], !legacy || count >= 0 else {
            throw KuraError(.corrupt, "catalog entry \(id) is malformed", page: page)
        }
        if !legacy { (next, count) = (1, 0) }
        var definition: [UInt8] = []
        if case .blob(let d) = v[5] { definition = d }
        var owner: String?
        if v.count > 6, case .text(let o) = v[6] { owner = o }
        self.init(name: name, id: id, rootPage: UInt32(root), rowCount: count, nextRowID: next,
                  definition: definition, kind: kind, owner: owner)
    }
}

/// The catalog as loaded by one transaction.
struct Catalog {
    var entries: [String: TableInfo] = [:]
    var nextID: Int64 = 1
    /// Each table's schema decoded once (by catalog ID), filled by
    /// `decodeSchemas` before the catalog is shared; a definition that does not
    /// decode keeps its error, thrown when the table is used.
    var decodedSchemas: [Int64: Result<TableSchema?, KuraError>] = [:]

    /// Decodes every table's schema into `decodedSchemas`.
    mutating func decodeSchemas() {
        for info in entries.values where info.kind == "table" {
            do { decodedSchemas[info.id] = .success(try TableSchema.decode(info.definition, table: info.name)) } catch {
                decodedSchemas[info.id] = .failure(error)
            }
        }
    }

    static func tree(_ root: UInt32) -> BTree { BTree(root: root, kind: .table) }

    /// Reads every catalog row of the snapshot whose header is `header`; table
    /// counters are those of format 1 or placeholders (see `withCounters`).
    static func load<S: PageSource>(header: Page, _ s: S) throws(KuraError) -> Catalog {
        try load(root: header.headerCatalogRoot, legacy: header.headerVersion == 1, s)
    }

    /// Reads every catalog row and lays each table's counters over it (for
    /// callers that need every table's counters: compaction): from the
    /// tables' right-most leaves (format 5) or the counters tree (formats 2 to 4).
    ///
    /// - Throws: `.corrupt` if a table has no counters.
    static func loadWithCounters<S: PageSource>(header: Page, _ s: S) throws(KuraError) -> Catalog {
        var c = try load(header: header, s)
        if header.headerVersion >= FileHeader.leafCountersVersion {
            for (name, info) in c.entries where info.kind == "table" {
                c.entries[name] = info.with(try TableCounters.inLeaf(table: name, id: info.id, root: info.rootPage, s))
            }
            return c
        }
        let root = header.headerCountersRoot
        guard header.headerVersion != 1, root != 0 else { return c }
        let all = try TableCounters.loadAll(root: root, s)
        for (name, info) in c.entries where info.kind == "table" {
            guard let counters = all[info.id] else {
                throw KuraError(.corrupt, "table \"\(name)\" (catalog ID \(info.id)) has no counters entry", page: root)
            }
            c.entries[name] = info.with(counters)
        }
        return c
    }

    /// Reads every catalog row.
    static func load<S: PageSource>(root: UInt32, legacy: Bool, _ s: S) throws(KuraError) -> Catalog {
        var c = Catalog()
        guard root != 0 else { return c }
        let tree = tree(root)
        var cursor = TreeCursor(tree: tree)
        try cursor.first(s)
        var n = 0
        while cursor.isValid {
            n += 1
            let leaf = cursor.leaf
            let (ko, kl) = leaf.cellKey(cursor.index)
            guard let (id, n) = RowIDKey.decode(leaf.bytes, ko, ko + kl), n == kl else {
                throw KuraError(.corrupt, "catalog key is not a row ID", page: leaf.number)
            }
            let bytes = try tree.value(leaf, cursor.index, s)
            let info = try TableInfo(id: id, values: RecordCodec.decode(bytes), page: leaf.number, legacy: legacy)
            guard c.entries[info.name] == nil else {
                throw KuraError(.corrupt, "catalog names \"\(info.name)\" twice", page: leaf.number)
            }
            c.entries[info.name] = info
            c.nextID = max(c.nextID, id + 1)
            try cursor.next(s)
        }
        return c
    }

    /// Writes one entry's row.
    static func store(_ info: TableInfo, root: UInt32, _ w: PageWriter) throws(KuraError) {
        try tree(root).insert(RowIDKey.encode(info.id), RecordCodec.encode(info.record), mode: .upsert, w)
    }

    static func remove(_ info: TableInfo, root: UInt32, _ w: PageWriter) throws(KuraError) {
        try tree(root).delete(RowIDKey.encode(info.id), w)
    }
}
