// IntegrityCheck: the one integrity check of a store, shared by the engine's
// `ReadTransaction.checkIntegrity` (over the transaction's snapshot) and the
// `kura` tool's `check`, `pages`, `stats`, `schema` and `info` (over a
// `RawStore`: the file's pages with the committed log frames applied, read
// without the engine's pager, so that it works on stores the engine refuses).
// Both hand the checker an `IntegritySource`; only page 1's own checks and the
// note on a leaked page differ between them.
//
// What it verifies (FORMAT.md, "Validation", "Tree pages", "Freelist", "Index
// trees"); each violation is reported with its page, never thrown:
//   - the header page: readable; from raw pages also its checksum, fixed fields
//     (magic, version, page size, database ID) and page count against the file
//     and the log; the free count not above the page count;
//   - every page read: in range, present, checksum, tree-page structure
//     (`Node.validate`);
//   - each tree: page kinds and owner, key order in pages and against the
//     parent's separators, every leaf at one depth, no empty non-root page, depth
//     <= 40, the content area holding exactly the cells and the fragmented bytes,
//     overflow chains of the right length and kind;
//   - the catalog: keys are catalog IDs, entries decode, no name twice, known
//     kinds, table schemas and index definitions decode, every index on an
//     existing table with a schema and columns inside it;
//   - the counters tree (format 2): every table has one entry and no entry names
//     anything but a table (format 1 keeps counters in the catalog record);
//   - table rows: keys are row IDs below the table's next row ID, every record
//     and every column decodes (below format 9: no double of serial type 10 or
//     11), the row count equals the rows found;
//   - indexes: entries have empty values, every entry equals the key computed
//     from its row now and every row has its entry (so a stale entry, a missing
//     one, or a key computed under other Unicode tables is reported), unique
//     indexes hold no duplicate non-null values;
//   - the freelist: trunk kinds and entry counts, the header's free count;
//   - every page from 2 to the page count is used exactly once or is free.
// External value files are checked apart (`checkExternalValues`).
//
// Bounds: each page is claimed at most once, so every walk visits at most
// `pageCount` pages; loops over cells are bounded by validated cell counts,
// overflow chains by their value length, the leak scan by the problems kept. A
// cyclic or garbage structure ends in a report, never a hang or a trap.

/// One problem found by an integrity check.
public struct IntegrityProblem: Sendable, CustomStringConvertible, Hashable {
    /// The page involved (0 if none).
    public let page: UInt32
    /// What is wrong.
    public let message: String
    public var description: String { page == 0 ? message : "page \(page): \(message)" }

    package init(page: UInt32, message: String) {
        self.page = page
        self.message = message
    }
}

extension ReadTransaction {
    /// Checks the whole snapshot (the one check `kura check` runs). Returns at
    /// most `limit` problems, in the order found; empty means the store is
    /// consistent. External value files are not looked at: see
    /// `checkExternalValues(limit:)`.
    ///
    /// In a write transaction the check reads the pages as this transaction has
    /// changed them, but a table's counters and a schema change reach their
    /// pages only when the transaction commits; so once the transaction has
    /// changed rows or the schema, the check throws instead of reporting
    /// counters that look wrong. Check after the commit, or in a read transaction.
    ///
    /// - Throws: `.misuse` outside the transaction, or in a write transaction
    ///   with uncommitted row or schema changes; damage is reported, not thrown.
    public func checkIntegrity(limit: Int = 100) throws(KuraError) -> [IntegrityProblem] {
        try checkActive()
        if let w = writer {
            if let tx = self as? WriteTransaction, tx.hasUncommittedCatalogChanges {
                throw KuraError(.misuse, "checkIntegrity() in a write transaction that changed rows or the schema: table counters and catalog entries reach their pages at commit, so the check would report them wrong; check after the commit, or in a read transaction")
            }
            return Self.check(w, limit: limit)
        }
        return Self.check(snapshotPages!, limit: limit)
    }

    private static func check<P: PageSource>(_ pages: P, limit: Int) -> [IntegrityProblem] {
        let header: Page
        do { header = try pages.page(1) } catch {
            return limit > 0 ? [IntegrityProblem(page: 1, message: "header page unreadable: \(error.message)")] : []
        }
        return IntegrityChecker(SnapshotCheckSource(pages: pages, header: header), limit: limit).run().problems
    }
}

/// Pages an integrity check reads: a snapshot of the store (`PageSource`: page
/// `n` checked for range, checksum and node structure) and page 1's own checks.
protocol IntegritySource: PageSource {
    /// The pages the check covers: 1 ... pageCount.
    var pageCount: UInt32 { get }
    /// Page 1's fields (nil if they cannot be read at all), after reporting what
    /// is wrong with page 1 itself.
    func checkHeader(report: (UInt32, String) -> Void) -> HeaderFields?
    /// What a page that nothing claims holds (for `kura pages`).
    func leakedPageNote(_ page: UInt32) -> String
}

/// A transaction's snapshot as an integrity source. The pager checked page 1's
/// checksum and fixed fields when it read them, and a writer's own header page
/// has no checksum until it commits, so only the page count is judged here.
struct SnapshotCheckSource<P: PageSource>: IntegritySource {
    let pages: P
    let header: Page
    var pageSize: Int { pages.pageSize }
    var pageCount: UInt32 { header.headerPageCount }

    func page(_ number: UInt32) throws(KuraError) -> Page { try pages.page(number) }

    func checkHeader(report: (UInt32, String) -> Void) -> HeaderFields? {
        let h = HeaderFields(header)
        if h.freeCount > h.pageCount {
            report(1, "header counts \(h.freeCount) free pages, more than the \(h.pageCount) pages of the store")
        }
        return h
    }

    func leakedPageNote(_ page: UInt32) -> String {
        do { return "kind byte \(try pages.page(page).u8(0))" } catch { return "unreadable: \(error.message)" }
    }
}

/// The integrity checker. See the header comment.
///
/// Thread rules: one thread; one `run()` per checker.
final class IntegrityChecker<S: IntegritySource> {
    let source: S
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
    init(_ source: S, limit: Int, collectUsage: Bool = false, catalogOnly: Bool = false) {
        self.source = source
        self.catalogOnly = catalogOnly
        self.limit = max(limit, 0)
        self.collectUsage = collectUsage
        pageCount = source.pageCount
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

    /// Runs the whole check.
    func run() -> Inspection {
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
                    let bytes = try BTree(root: header.catalogRoot, kind: .table).value(p, i, self.source)
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
        if header.version >= FileHeader.leafCountersVersion {
            leafCounters(header: header, &entries)
        } else if header.version != 1 {
            walkCounters(root: header.countersRoot, &entries)
        }
        entries.sort { $0.id < $1.id }
        checkObjects(entries)
        if !catalogOnly { checkLeaks() }
        return result
    }

    /// Format 5: reads each table's counters from the end of its tree's
    /// right-most leaf and lays them over `entries` (the table walk then
    /// compares them with the tree); a header that still names a counters
    /// tree is reported.
    func leafCounters(header: HeaderFields, _ entries: inout [TableInfo]) {
        if header.countersRoot != 0 {
            report(1, "the header names a counters tree (page \(header.countersRoot)), which a format-\(header.version) store does not have")
        }
        for t in entries.indices where entries[t].kind == "table" {
            do throws(KuraError) {
                entries[t] = entries[t].with(try TableCounters.inLeaf(table: entries[t].name, id: entries[t].id, root: entries[t].rootPage, source))
            } catch {
                report(error.page ?? entries[t].rootPage, error.message)
            }
        }
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
                found[id] = try TableCounters(id: id, record: TableCounters.tree(root).value(p, i, self.source), page: p.number)
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
        use(1, PageUsage(kind: "header", owner: "-", items: 0, fill: nil))
        result.header = source.checkHeader { self.report($0, $1) }
    }

    // MARK: Freelist

    func checkFreelist(head: UInt32, expected: UInt32) {
        var trunk = head
        var count = 0
        while trunk != 0 {
            guard claim(trunk, "freelist trunk") else { break }
            count += 1
            let p: Page
            do { p = try source.page(trunk) } catch {
                report(trunk, "freelist trunk unreadable: \(error.message)")
                use(trunk, PageUsage(kind: "unreadable", owner: "freelist", note: error.message))
                break
            }
            guard p.u8(0) == PageKind.freelistTrunk.rawValue else {
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
            do { p = try tree.node(number, source) } catch {
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
            space.tree.depth = max(space.tree.depth, depth)
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
            if p.contentEnd - p.contentStart != cellBytes + p.fragmented {
                report(number, "\(label): the content area spans \(p.contentEnd - p.contentStart) bytes, but its cells take \(cellBytes) and the page counts \(p.fragmented) fragmented bytes (overlapping cells or a wrong count)")
            }
            // Counters (format 5) end only the right-most leaf of a tree: the
            // one no separator bounds from above.
            if p.hasCounters && (hi != nil || (result.header?.version ?? 0) < FileHeader.leafCountersVersion) {
                report(number, "\(label): the page holds table counters but is not its tree's right-most leaf in a format-5 store")
            }
            // Compact cells (format 8) in an older store would be misread by
            // the builds that store's format admits.
            if p.isCompactLeaf && (result.header?.version ?? 0) < FileHeader.compactCellsVersion {
                report(number, "\(label): the leaf holds compact cells, which only a store of format \(FileHeader.compactCellsVersion) or later may have")
            }
            // A leaf with the short header (format 10) would be misread by
            // the builds an older store's format admits.
            if p.hasShortHeader && (result.header?.version ?? 0) < FileHeader.shortLeafHeaderVersion {
                report(number, "\(label): the leaf has the short header, which only a store of format \(FileHeader.shortLeafHeaderVersion) or later may have")
            }
            let available = Node.usable(p.size) - p.cellPointerStart
            let fill = min(max(Double(p.usedSpace) / Double(available), 0), 1)
            if p.isLeafNode {
                if let d = leafDepth, d != depth { report(number, "\(label): leaf at depth \(depth), others at \(d)") }
                leafDepth = depth
                space.tree.leafPages += 1
                space.tree.entries += n
                space.tree.leafBytesUsed += max(0, min(p.usedSpace, available))
                space.tree.leafBytesAvailable += available
                var overflow = 0
                for i in 0..<n {
                    let v = p.leafValue(i)
                    space.payloadBytes += p.cellKey(i).length + v.length
                    if v.overflow != 0 {
                        // A hostile length would have the chain walk follow a
                        // cycle millions of times: no chain is longer than the store.
                        let cap = BTree.overflowCapacity(source.pageSize)
                        let needed = (v.length - v.local + cap - 1) / cap
                        if needed > Int(pageCount) {
                            report(number, "\(label): cell \(i): a \(v.length)-byte value needs \(needed) overflow pages, more than the \(pageCount) pages of the store")
                            space.complete = false
                            continue
                        }
                        do {
                            let chain = try tree.overflowPages(p, i, source)
                            var remaining = v.length - v.local
                            for o in chain {
                                if claim(o, "\(label) overflow") {
                                    use(o, PageUsage(kind: "overflow", owner: label, items: min(remaining, cap),
                                                     fill: Double(min(remaining, cap)) / Double(cap)))
                                }
                                remaining -= cap
                            }
                            overflow += chain.count
                            space.tree.overflowPages += chain.count
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
                space.tree.interiorPages += 1
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
            } else if let columnCount = schemas[d.table]?.columns.count, let bad = d.columns.first(where: { $0.position >= columnCount }) {
                report(o.info.rootPage, "index \"\(d.name)\" names column position \(bad.position), past the \(columnCount) columns of table \"\(d.table)\"")
            } else {
                indexesOf[d.table, default: []].append(d)
            }
        }
        result.catalog = objects
        if catalogOnly { return }

        // Tables, computing the index entries their rows need.
        var expected: [String: Set<[UInt8]>] = [:]
        var comparable = Set<String>()
        // Doubles of serial types 10 and 11 (format 9) in an older store would
        // be taken for corruption by the builds that store's format admits.
        // (An unreadable header is reported already; its rows are not judged.)
        let compactDoublesAllowed = (result.header?.version).map { $0 >= FileHeader.compactDoublesVersion } ?? true
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
                    let record = try tree.value(p, i, self.source)
                    try record.withBytes { b throws(KuraError) in
                        let view = try RecordView(b)
                        for c in 0..<view.count { _ = try view.value(at: c) }
                        if !compactDoublesAllowed, let c = view.types.firstIndex(where: { $0 == 10 || $0 == 11 }) {
                            self.report(p.number, "\(label): row \(rowID): value \(c) is a double of serial type \(view.types[c]), which only a store of format \(FileHeader.compactDoublesVersion) or later may have")
                        }
                        for d in indexes {
                            var (key, hasNull) = try d.valuePrefix { (c: Int) throws(KuraError) -> Value in
                                if let schema, c < schema.columns.count { return try schema.value(view, c) }
                                return try view.value(at: c)
                            }
                            if d.isUnique && !hasNull && !uniques[d.name, default: []].insert(key).inserted {
                                self.report(p.number, "unique index \"\(d.name)\": row \(rowID) repeats values another row of \(label) has")
                            }
                            RowIDKey.append(rowID, to: &key)
                            expected[d.name, default: []].insert(key)
                        }
                    }
                } catch {
                    self.report(p.number, "\(label): row \(rowID): \(error.message)")
                    rowsComplete = false
                }
            }
            if !rowsComplete { space.complete = false }
            if space.complete && Int64(space.tree.entries) != info.rowCount {
                report(info.rootPage, "\(label) holds \(space.tree.entries) rows but its row count says \(info.rowCount)")
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
                // `compare` implies the table loop filled expected[info.name]; were it
                // missing, the entry counts as unmatched, never as a match.
                if expected[info.name]?.remove(key) == nil {
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

    /// Reports every page from 2 to the page count that nothing claimed. Claimed
    /// pages are all in that range, so the number of leaks is known up front:
    /// once the kept problems are full (and no usage is wanted), the rest are
    /// counted without visiting them, however large a hostile page count is.
    func checkLeaks() {
        guard pageCount >= 2 else { return }
        let leaked = Int(pageCount) - 1 - claimed.count
        var found = 0
        var p: UInt32 = 2
        while found < leaked {
            if claimed[p] == nil {
                found += 1
                report(p, "page is neither in a tree nor free (leaked)")
                if collectUsage {
                    use(p, PageUsage(kind: "leaked", owner: "-", note: source.leakedPageNote(p)))
                } else if result.problems.count >= limit {
                    result.problemCount += leaked - found
                    return
                }
            }
            if p == pageCount { break }
            p += 1
        }
    }
}
