// StoreWalker: a full walk of a `RawStore` — every tree, overflow chain and the
// freelist — that records what each page is used for, measures each tree, and
// collects integrity problems instead of throwing (the `kura` tool's `check`,
// `pages`, `stats`, `schema` and `info`).
//
// It checks what IntegrityCheck.swift checks (FORMAT.md, "Validation", "Tree
// pages", "Freelist", "Index trees"), from raw pages, so that it works when the
// engine cannot open the store:
//   - the header page: checksum, fixed fields, page count against the file;
//   - every page read: present in the file, checksum, tree-page structure;
//   - each tree: page kinds and owner, key order in pages and against separators,
//     leaves at one depth, no empty non-root page, depth <= 40, overflow chains of
//     the right length and kind;
//   - table rows: keys are row IDs below the next row ID, records decode, the
//     catalog's row count equals the rows found;
//   - indexes: definitions decode, entries have empty values, every entry equals
//     the key computed from its row and every row has its entry, unique indexes
//     hold no duplicate non-null values;
//   - the freelist: trunk kinds and counts, the header's free count;
//   - every page from 2 to the page count is used exactly once or free.
//
// Bounds: each page is claimed at most once, so every walk visits at most
// `pageCount` pages; loops over cells are bounded by validated cell counts and
// overflow chains by their value length. A cyclic or garbage structure ends in a
// report, never a hang or a trap.

/// What one page is used for, as found by a walk.
package struct PageUsage: Sendable, Equatable {
    /// `header`, `table-interior`, `table-leaf`, `index-interior`, `index-leaf`,
    /// `overflow`, `freelist-trunk`, `free`, `unreadable`, `leaked`.
    package var kind: String
    /// `catalog`, `table NAME`, `index NAME`, `freelist`, or `-`.
    package var owner: String
    /// Cells of a tree page, entries of a trunk, value bytes of an overflow page.
    package var items: Int = 0
    /// Fill of a tree page (bytes of cells and pointers over the space for them).
    package var fill: Double?
    /// Overflow pages hanging off this leaf's cells.
    package var overflowPages: Int = 0
    /// Why the page is unreadable, or its raw kind byte when leaked.
    package var note: String?
}

/// Space used by one tree.
package struct ObjectSpace: Sendable, Equatable {
    package var name: String
    /// `catalog`, `table` or `index`.
    package var kind: String
    /// For an index, its table.
    package var table: String?
    package var rootPage: UInt32
    /// Row count the catalog records (tables).
    package var catalogRowCount: Int64?
    /// Leaf cells found: rows or index entries.
    package var entries = 0
    package var leafPages = 0
    package var interiorPages = 0
    package var overflowPages = 0
    /// Bytes of keys and values stored (overflow parts included).
    package var payloadBytes = 0
    /// Bytes of cells and pointers in leaf pages.
    package var leafBytesUsed = 0
    /// Bytes available for cells in leaf pages.
    package var leafBytesAvailable = 0
    /// Depth (1 = the root is a leaf).
    package var depth = 0
    /// Whether every page of the tree could be read.
    package var complete = true

    package var totalPages: Int { leafPages + interiorPages + overflowPages }
    package var leafFill: Double { leafBytesAvailable == 0 ? 0 : Double(leafBytesUsed) / Double(leafBytesAvailable) }
}

/// One catalog entry with its decoded definition.
package struct CatalogObject: Sendable {
    package let info: TableInfo
    /// The table's schema (nil for a raw table or an index, or if it does not decode).
    package let schema: TableSchema?
    /// The index definition (indexes whose definition decodes).
    package let index: IndexDefinition?
    /// Why the definition does not decode.
    package let definitionError: String?
}

/// The result of a walk.
package struct Inspection: Sendable {
    /// The first `limit` problems found.
    package var problems: [IntegrityProblem] = []
    /// All problems found (may exceed `problems.count`).
    package var problemCount = 0
    /// Usage of pages 1 ... pageCount (index 0 is page 1); empty unless asked for.
    package var usage: [PageUsage] = []
    /// Trees: the catalog, then tables and indexes in catalog-ID order.
    package var objects: [ObjectSpace] = []
    /// Catalog entries in catalog-ID order.
    package var catalog: [CatalogObject] = []
    /// Pages found on the freelist (trunks and leaves).
    package var freePages = 0
    /// Header fields of the snapshot's page 1.
    package var header: HeaderFields?
}

/// Walks a `RawStore`. See the header comment.
package final class StoreWalker {
    let store: RawStore
    let limit: Int
    let collectUsage: Bool
    let catalogOnly: Bool
    var result = Inspection()
    var claimed: [UInt32: String] = [:]
    let pageCount: UInt32

    /// - Parameters:
    ///   - limit: how many problems to keep (all are counted).
    ///   - collectUsage: record what every page is used for (for `kura pages`).
    ///   - catalogOnly: read the header, freelist and catalog only (for `kura
    ///     info` and `kura schema`): no table or index is walked.
    package init(_ store: RawStore, limit: Int = 100, collectUsage: Bool = false, catalogOnly: Bool = false) {
        self.store = store
        self.catalogOnly = catalogOnly
        self.limit = max(limit, 0)
        self.collectUsage = collectUsage
        pageCount = store.pageCount
        if collectUsage {
            result.usage = Array(repeating: PageUsage(kind: "leaked", owner: "-"), count: Int(pageCount))
        }
    }

    func report(_ page: UInt32, _ message: String) {
        result.problemCount += 1
        if result.problems.count < limit { result.problems.append(IntegrityProblem(page: page, message: message)) }
    }

    func use(_ page: UInt32, _ u: PageUsage) {
        guard collectUsage, page >= 1, page <= pageCount else { return }
        result.usage[Int(page) - 1] = u
    }

    /// Marks `page` as used by `what`; false if it was used already or is out of range.
    func claim(_ page: UInt32, _ what: String) -> Bool {
        guard page >= 2 && page <= pageCount else {
            report(page, "\(what) refers to page \(page), outside 2...\(pageCount)")
            return false
        }
        if let other = claimed[page] {
            report(page, "used twice: by \(other) and by \(what)")
            return false
        }
        claimed[page] = what
        return true
    }

    /// Runs the whole walk.
    package func run() -> Inspection {
        checkHeader()
        guard let header = result.header else { return result }
        checkFreelist(head: header.freelistHead, expected: header.freeCount)
        var entries: [TableInfo] = []
        if header.catalogRoot != 0 {
            var names = Set<String>()
            var space = ObjectSpace(name: "catalog", kind: "catalog", rootPage: header.catalogRoot)
            walkTree(BTree(root: header.catalogRoot, kind: .table), label: "catalog", space: &space) { p, i in
                let (ko, kl) = p.cellKey(i)
                guard let (id, used) = RowIDKey.decode(p.bytes, ko, ko + kl), used == kl else {
                    self.report(p.number, "catalog: cell \(i) key is not a catalog ID")
                    return
                }
                do throws(KuraError) {
                    let bytes = try BTree(root: header.catalogRoot, kind: .table).value(p, i, self.store)
                    let info = try TableInfo(id: id, values: RecordCodec.decode(bytes), page: p.number, legacy: header.version == 1)
                    if !names.insert(info.name).inserted {
                        self.report(p.number, "catalog names \"\(info.name)\" twice")
                    } else {
                        entries.append(info)
                    }
                } catch {
                    self.report(p.number, "catalog entry \(id): \(error.message)")
                }
            }
            result.objects.append(space)
        }
        if header.version != 1 { walkCounters(root: header.countersRoot, &entries) }
        entries.sort { $0.id < $1.id }
        checkObjects(entries)
        if !catalogOnly { checkLeaks() }
        return result
    }

    /// Walks the counters tree (format 2) and lays its entries over `entries`'
    /// tables, reporting tables without an entry and entries without a table.
    func walkCounters(root: UInt32, _ entries: inout [TableInfo]) {
        let tables = entries.indices.filter { entries[$0].kind == "table" }
        guard root != 0 else {
            if let t = tables.first { report(1, "the header names no counters tree, but table \"\(entries[t].name)\" needs one") }
            return
        }
        var found: [Int64: TableCounters] = [:]
        var space = ObjectSpace(name: "counters", kind: "counters", rootPage: root)
        walkTree(TableCounters.tree(root), label: "counters", space: &space) { p, i in
            let (ko, kl) = p.cellKey(i)
            guard let (id, used) = RowIDKey.decode(p.bytes, ko, ko + kl), used == kl else {
                self.report(p.number, "counters: cell \(i) key is not a catalog ID")
                return
            }
            do throws(KuraError) {
                found[id] = try TableCounters(id: id, record: TableCounters.tree(root).value(p, i, self.store), page: p.number)
            } catch {
                self.report(p.number, "counters: \(error.message)")
            }
        }
        result.objects.append(space)
        for t in tables {
            if let c = found.removeValue(forKey: entries[t].id) { entries[t] = entries[t].with(c) }
            else if space.complete { report(root, "table \"\(entries[t].name)\" (catalog ID \(entries[t].id)) has no counters entry") }
        }
        for id in found.keys.sorted() { report(root, "counters entry for catalog ID \(id), which is not a table") }
    }

    // MARK: Header

    func checkHeader() {
        let r = store.rawPage(1)
        let h = HeaderFields(r.page)
        use(1, PageUsage(kind: "header", owner: "-", items: 0, fill: nil))
        guard r.complete else {
            report(1, "header page is incomplete: \(r.incompleteReason)")
            result.header = h
            return
        }
        if !h.checksumValid {
            let from: String
            switch r.origin {
            case .file: from = "in the store file"
            case .frame(let f): from = "in log frame \(f)"
            }
            report(1, "header page checksum mismatch \(from): stored \(hex(h.storedChecksum ?? 0)), computed \(hex(h.computedChecksum ?? 0))")
        }
        if !h.magicValid || !FileHeader.readableVersions.contains(h.version) || Int(h.pageSize) != store.pageSize || h.databaseID != store.databaseID {
            report(1, "header page's fixed fields (magic, version, page size, database ID) differ from the store file's")
        }
        if let claimedCount = store.claimedPageCount {
            report(1, "header claims \(claimedCount) pages, but the file (\(store.fileSize) bytes) and the log hold at most \(pageCount); checking \(pageCount)")
        } else if store.wal.committedFrames > 0 && h.pageCount != store.wal.committedPageCount {
            report(1, "header page count \(h.pageCount) differs from the log's last commit (\(store.wal.committedPageCount))")
        }
        if h.freeCount > pageCount {
            report(1, "header counts \(h.freeCount) free pages, more than the \(pageCount) pages of the store")
        }
        result.header = h
    }

    // MARK: Freelist

    func checkFreelist(head: UInt32, expected: UInt32) {
        var trunk = head
        var count = 0
        while trunk != 0 {
            guard claim(trunk, "freelist trunk") else { break }
            count += 1
            let p: Page
            do { p = try store.page(trunk) } catch {
                report(trunk, "freelist trunk unreadable: \(error.message)")
                use(trunk, PageUsage(kind: "unreadable", owner: "freelist", note: error.message))
                break
            }
            guard p.u8(0) == NodeKind.freelistTrunk.rawValue else {
                report(trunk, "freelist trunk has kind \(p.u8(0)), not 6")
                use(trunk, PageUsage(kind: "unreadable", owner: "freelist", note: "kind \(p.u8(0))"))
                break
            }
            let n = Int(p.u32(8))
            let capacity = (Node.usable(p.size) - 12) / 4
            use(trunk, PageUsage(kind: "freelist-trunk", owner: "freelist", items: n, fill: Double(min(n, capacity)) / Double(capacity)))
            guard n <= capacity else {
                report(trunk, "freelist trunk claims \(n) entries; it holds at most \(capacity)")
                break
            }
            for i in 0..<n {
                let leaf = p.u32(12 + 4 * i)
                if claim(leaf, "freelist") {
                    count += 1
                    use(leaf, PageUsage(kind: "free", owner: "freelist"))
                }
            }
            trunk = p.u32(4)
        }
        result.freePages = count
        if count != Int(expected) { report(1, "header counts \(expected) free pages, the freelist holds \(count)") }
    }

    // MARK: Trees

    /// Walks a tree, claiming its pages, calling `leafCell` for every cell of
    /// every readable leaf, and measuring it into `space`.
    func walkTree(_ tree: BTree, label: String, space: inout ObjectSpace, leafCell: (Page, Int) -> Void) {
        var leafDepth: Int?
        // (page, depth, lower bound exclusive, upper bound inclusive)
        var stack: [(UInt32, Int, [UInt8]?, [UInt8]?)] = [(tree.root, 1, nil, nil)]
        var steps = 0
        while let (number, depth, lo, hi) = stack.popLast() {
            steps += 1
            if steps > Int(pageCount) + 1 { break }
            guard claim(number, label) else { space.complete = false; continue }
            let p: Page
            do { p = try tree.node(number, store) } catch {
                report(number, "\(label): \(error.message)")
                use(number, PageUsage(kind: "unreadable", owner: label, note: error.message))
                space.complete = false
                continue
            }
            if depth > BTree.maxDepth {
                report(number, "\(label) is deeper than \(BTree.maxDepth) levels (a cycle?)")
                space.complete = false
                continue
            }
            space.depth = max(space.depth, depth)
            let n = p.cellCount
            if n == 0 && number != tree.root { report(number, "\(label): empty non-root page") }
            var prev = lo
            for i in 0..<n {
                let key = p.keyBytes(i)
                if let pk = prev, !bytesPrecede(pk, key) { report(number, "\(label): key \(i) out of order"); break }
                if let h = hi, bytesPrecede(h, key) { report(number, "\(label): key \(i) above its parent's separator") }
                prev = key
            }
            // The writer's bookkeeping (Node.swift): the content area holds the
            // cells and the fragments, nothing else. A page that breaks this
            // would let the next insert overwrite a cell.
            var cellBytes = 0
            for i in 0..<n { cellBytes += p.cellSize(i) }
            if Node.usable(p.size) - p.contentStart != cellBytes + p.fragmented {
                report(number, "\(label): the content area spans \(Node.usable(p.size) - p.contentStart) bytes, but its cells take \(cellBytes) and the page counts \(p.fragmented) fragmented bytes (overlapping cells or a wrong count)")
            }
            let available = Node.usable(p.size) - Node.headerSize
            let fill = min(max(Double(p.usedSpace) / Double(available), 0), 1)
            if p.isLeafNode {
                if let d = leafDepth, d != depth { report(number, "\(label): leaf at depth \(depth), others at \(d)") }
                leafDepth = depth
                space.leafPages += 1
                space.entries += n
                space.leafBytesUsed += max(0, min(p.usedSpace, available))
                space.leafBytesAvailable += available
                var overflow = 0
                for i in 0..<n {
                    let v = p.leafValue(i)
                    space.payloadBytes += p.cellKey(i).length + v.length
                    if v.overflow != 0 {
                        do {
                            let chain = try tree.overflowPages(p, i, store)
                            let cap = BTree.overflowCapacity(store.pageSize)
                            var remaining = v.length - v.local
                            for o in chain {
                                if claim(o, "\(label) overflow") {
                                    use(o, PageUsage(kind: "overflow", owner: label, items: min(remaining, cap),
                                                     fill: Double(min(remaining, cap)) / Double(cap)))
                                }
                                remaining -= cap
                            }
                            overflow += chain.count
                            space.overflowPages += chain.count
                        } catch {
                            report(number, "\(label): cell \(i): \(error.message)")
                            space.complete = false
                            continue
                        }
                    }
                    leafCell(p, i)
                }
                use(number, PageUsage(kind: tree.kind == .table ? "table-leaf" : "index-leaf", owner: label, items: n, fill: fill, overflowPages: overflow))
            } else {
                space.interiorPages += 1
                use(number, PageUsage(kind: tree.kind == .table ? "table-interior" : "index-interior", owner: label, items: n, fill: fill))
                var children: [(UInt32, Int, [UInt8]?, [UInt8]?)] = []
                var lower = lo
                for i in 0...n {
                    let upper = i < n ? p.keyBytes(i) : hi
                    children.append((p.child(i), depth + 1, lower, upper))
                    lower = upper
                }
                stack.append(contentsOf: children.reversed())
            }
        }
    }

    // MARK: Tables and indexes

    func checkObjects(_ entries: [TableInfo]) {
        // Decode every definition first: tables' schemas, indexes' columns.
        var schemas: [String: TableSchema] = [:]
        var tableNames = Set<String>()
        var indexesOf: [String: [IndexDefinition]] = [:]
        var objects: [CatalogObject] = []
        for info in entries {
            switch info.kind {
            case "table":
                tableNames.insert(info.name)
                do {
                    let s = try TableSchema.decode(info.definition, table: info.name)
                    if let s { schemas[info.name] = s }
                    objects.append(CatalogObject(info: info, schema: s, index: nil, definitionError: nil))
                } catch {
                    report(info.rootPage, "table \"\(info.name)\": \(error.message)")
                    objects.append(CatalogObject(info: info, schema: nil, index: nil, definitionError: error.message))
                }
            case "index":
                do {
                    let d = try IndexDefinition(info: info)
                    objects.append(CatalogObject(info: info, schema: nil, index: d, definitionError: nil))
                } catch {
                    report(info.rootPage, "index \"\(info.name)\": \(error.message)")
                    objects.append(CatalogObject(info: info, schema: nil, index: nil, definitionError: error.message))
                }
            default:
                report(info.rootPage, "catalog entry \(info.id) \"\(info.name)\" has unknown kind \"\(info.kind)\"")
                objects.append(CatalogObject(info: info, schema: nil, index: nil, definitionError: "unknown kind \"\(info.kind)\""))
            }
        }
        for o in objects {
            guard let d = o.index else { continue }
            if !tableNames.contains(d.table) {
                report(o.info.rootPage, "index \"\(d.name)\" belongs to table \"\(d.table)\", which does not exist")
            } else if schemas[d.table] == nil {
                report(o.info.rootPage, "index \"\(d.name)\" is on table \"\(d.table)\", which has no schema")
            } else if let bad = d.columns.first(where: { $0.position >= schemas[d.table]!.columns.count }) {
                report(o.info.rootPage, "index \"\(d.name)\" names column position \(bad.position), past the \(schemas[d.table]!.columns.count) columns of table \"\(d.table)\"")
            } else {
                indexesOf[d.table, default: []].append(d)
            }
        }
        result.catalog = objects
        if catalogOnly { return }

        // Tables, computing the index entries their rows need.
        var expected: [String: Set<[UInt8]>] = [:]
        var comparable = Set<String>()
        var spaces: [Int64: ObjectSpace] = [:]
        for o in objects where o.info.kind == "table" {
            let info = o.info
            let label = "table \"\(info.name)\""
            let schema = schemas[info.name]
            let indexes = indexesOf[info.name] ?? []
            var uniques: [String: Set<[UInt8]>] = [:]
            var space = ObjectSpace(name: info.name, kind: "table", rootPage: info.rootPage, catalogRowCount: info.rowCount)
            let tree = BTree(root: info.rootPage, kind: .table)
            for d in indexes { expected[d.name] = [] }
            var rowsComplete = true
            walkTree(tree, label: label, space: &space) { p, i in
                let (ko, kl) = p.cellKey(i)
                guard let (rowID, used) = RowIDKey.decode(p.bytes, ko, ko + kl), used == kl else {
                    self.report(p.number, "\(label): cell \(i) key is not a row ID")
                    return
                }
                if rowID >= info.nextRowID {
                    self.report(p.number, "\(label): row \(rowID) is not below the next row ID \(info.nextRowID)")
                }
                do throws(KuraError) {
                    let record = try tree.value(p, i, self.store)
                    try record.withBytes { b throws(KuraError) in
                        let view = try RecordView(b)
                        for c in 0..<view.count { _ = try view.value(at: c) }
                        for d in indexes {
                            var (key, hasNull) = try d.valuePrefix { (c: Int) throws(KuraError) -> Value in
                                if let schema, c < schema.columns.count { return try schema.value(view, c) }
                                return try view.value(at: c)
                            }
                            if d.isUnique && !hasNull && !uniques[d.name, default: []].insert(key).inserted {
                                self.report(p.number, "unique index \"\(d.name)\": row \(rowID) repeats values another row of \(label) has")
                            }
                            RowIDKey.append(rowID, to: &key)
                            expected[d.name]!.insert(key)
                        }
                    }
                } catch {
                    self.report(p.number, "\(label): row \(rowID): \(error.message)")
                    rowsComplete = false
                }
            }
            if !rowsComplete { space.complete = false }
            if space.complete && Int64(space.entries) != info.rowCount {
                report(info.rootPage, "\(label) holds \(space.entries) rows but its row count says \(info.rowCount)")
            }
            if space.complete { for d in indexes { comparable.insert(d.name) } }
            spaces[info.id] = space
        }

        // Indexes: every entry must be one of the expected keys.
        for o in objects where o.info.kind == "index" {
            let info = o.info
            let label = "index \"\(info.name)\""
            var space = ObjectSpace(name: info.name, kind: "index", table: info.owner, rootPage: info.rootPage)
            let compare = comparable.contains(info.name)
            var unmatched = 0
            var firstUnmatched: (UInt32, [UInt8])?
            walkTree(BTree(root: info.rootPage, kind: .index), label: label, space: &space) { p, i in
                if p.leafValue(i).length != 0 {
                    self.report(p.number, "\(label): entry \(i) has a \(p.leafValue(i).length)-byte value; index entries have none")
                }
                guard compare else { return }
                let key = p.keyBytes(i)
                if expected[info.name]!.remove(key) == nil {
                    unmatched += 1
                    if firstUnmatched == nil { firstUnmatched = (p.number, key) }
                }
            }
            if let (page, key) = firstUnmatched {
                report(page, "\(label) has \(unmatched) \(unmatched == 1 ? "entry" : "entries") that match no row of table \"\(info.owner ?? "?")\" (first: \(hexBytes(key)))")
            }
            if compare && space.complete, let missing = expected[info.name], !missing.isEmpty {
                report(info.rootPage, "\(label) is missing \(missing.count) \(missing.count == 1 ? "entry" : "entries") for rows of table \"\(info.owner ?? "?")\"")
            }
            expected[info.name] = nil
            spaces[info.id] = space
        }
        for o in objects {
            if let s = spaces[o.info.id] { result.objects.append(s) }
        }
    }

    // MARK: Leaks

    func checkLeaks() {
        guard pageCount >= 2 else { return }
        for p in 2...pageCount where claimed[p] == nil {
            report(p, "page is neither in a tree nor free (leaked)")
            if collectUsage {
                let r = store.rawPage(p)
                use(p, PageUsage(kind: "leaked", owner: "-", note: r.complete ? "kind byte \(r.kindByte)" : r.readError.map { "unreadable: \($0.message)" } ?? "missing from the file"))
            }
        }
    }
}
