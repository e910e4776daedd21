// IntegrityCheck: a full check of one snapshot of a store.
//
// What it verifies (each violation is reported with its page, never thrown):
//   - every page's checksum (by reading it) and node structure;
//   - each tree: page kinds and owner, key order inside pages and against the
//     parent's separators, every leaf at the same depth, no empty non-root page,
//     depth bound, overflow chains of the right length and kind;
//   - records in table trees decode; row keys are row IDs below the table's next
//     row ID; the table's row count equals the rows found (counters from the
//     counters tree in format 2, from the catalog record in format 1); every
//     table has one counters entry and no entry names anything but a table;
//   - every index holds exactly one entry per row of its table, equal to the key
//     computed from the row now (so a stale entry, a missing one, or a key
//     computed under other Unicode tables is reported);
//   - the freelist: trunk kinds, entries in range, the header's free count;
//   - every page from 2 to the page count is used exactly once or is free.
//
// Loops are bounded by the page count, so a cyclic or garbage structure ends the
// walk with a report instead of hanging.

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
    /// Checks the whole snapshot. Returns at most `limit` problems; empty means
    /// the store is consistent.
    ///
    /// - Throws: only `.misuse`; damage is reported, not thrown.
    public func checkIntegrity(limit: Int = 100) throws(KuraError) -> [IntegrityProblem] {
        try checkActive()
        if let w = writer {
            var checker = IntegrityChecker(source: w, limit: limit)
            return checker.run()
        }
        var checker = IntegrityChecker(source: snapshotPages!, limit: limit)
        return checker.run()
    }
}

struct IntegrityChecker<S: PageSource> {
    let source: S
    let limit: Int
    var problems: [IntegrityProblem] = []
    var owner: [UInt32: String] = [:]
    var pageCount: UInt32 = 0

    init(source: S, limit: Int) {
        self.source = source
        self.limit = limit
    }

    var full: Bool { problems.count >= limit }

    mutating func report(_ page: UInt32, _ message: String) {
        if problems.count < limit { problems.append(IntegrityProblem(page: page, message: message)) }
    }

    /// Marks `page` as used by `what`; false if it was already used or is out of range.
    mutating func claim(_ page: UInt32, _ what: String) -> Bool {
        guard page >= 2 && page <= pageCount else {
            report(page, "\(what) refers to page \(page), outside 2...\(pageCount)")
            return false
        }
        if let other = owner[page] {
            report(page, "used twice: by \(other) and by \(what)")
            return false
        }
        owner[page] = what
        return true
    }

    mutating func run() -> [IntegrityProblem] {
        let header: Page
        do { header = try source.page(1) } catch {
            report(1, "header page unreadable: \(error)")
            return problems
        }
        pageCount = header.headerPageCount
        checkFreelist(head: header.headerFreelistHead, expected: header.headerFreeCount)
        let catalogRoot = header.headerCatalogRoot
        var catalog = Catalog()
        if catalogRoot != 0 {
            _ = walkTree(BTree(root: catalogRoot, kind: .table), name: "catalog", nextRowID: nil)
            do { catalog = try Catalog.load(header: header, source) } catch {
                report(catalogRoot, "catalog unreadable: \(error)")
            }
        }
        if header.headerVersion != 1 { checkCounters(root: header.headerCountersRoot, &catalog) }
        for info in catalog.entries.values.sorted(by: { $0.id < $1.id }) where !full {
            let isIndex = info.kind == "index"
            let rows = walkTree(BTree(root: info.rootPage, kind: isIndex ? .index : .table),
                                name: "\(info.kind) \"\(info.name)\"", nextRowID: isIndex ? nil : info.nextRowID)
            if let rows, !isIndex, rows != info.rowCount {
                report(info.rootPage, "table \"\(info.name)\" holds \(rows) rows but its row count says \(info.rowCount)")
            }
        }
        for info in catalog.entries.values.sorted(by: { $0.id < $1.id }) where info.kind == "index" && !full {
            checkIndexEntries(info, catalog)
        }
        if !full && pageCount >= 2 {
            for p in 2...pageCount where owner[p] == nil {
                report(p, "page is neither in a tree nor free (leaked)")
                if full { break }
            }
        }
        return problems
    }

    /// Walks the counters tree and lays its entries over the catalog's tables,
    /// reporting tables without an entry and entries without a table.
    mutating func checkCounters(root: UInt32, _ catalog: inout Catalog) {
        let tables = catalog.entries.values.filter { $0.kind == "table" }
        guard root != 0 else {
            if let t = tables.first { report(1, "the header names no counters tree, but table \"\(t.name)\" needs one") }
            return
        }
        _ = walkTree(BTree(root: root, kind: .table), name: "counters", nextRowID: nil)
        let all: [Int64: TableCounters]
        do { all = try TableCounters.loadAll(root: root, source) } catch {
            report(root, "counters unreadable: \(error)")
            return
        }
        for t in tables {
            if let c = all[t.id] { catalog.entries[t.name] = t.with(c) }
            else { report(root, "table \"\(t.name)\" (catalog ID \(t.id)) has no counters entry") }
        }
        let ids = Set(tables.map(\.id))
        for id in all.keys.sorted() where !ids.contains(id) {
            report(root, "counters entry for catalog ID \(id), which is not a table")
        }
    }

    /// Compares an index's entries with the keys its table's rows produce.
    mutating func checkIndexEntries(_ info: TableInfo, _ catalog: Catalog) {
        do {
            let index = try IndexDefinition(info: info)
            guard let table = catalog.entries[index.table], table.kind == "table" else {
                report(info.rootPage, "index \"\(info.name)\" belongs to table \"\(index.table)\", which does not exist")
                return
            }
            let schema = try TableSchema.decode(table.definition, table: table.name)
            var expected = Set<[UInt8]>()
            var rows = TreeCursor(tree: BTree(root: table.rootPage, kind: .table))
            try rows.first(source)
            // Bounded by what the pages can hold, never by on-disk counts (which
            // may be hostile): at most one cell per 4 bytes of every page.
            let maxEntries = Int(pageCount) * (source.pageSize / 4) + 1
            var steps = 0
            while rows.isValid && steps <= maxEntries {
                steps += 1
                let k = rows.key
                guard let (rowID, _) = RowIDKey.decode(k.baseAddress!, 0, k.count) else { try rows.next(source); continue }
                let record = try rows.tree.value(rows.leaf, rows.index, source)
                try record.withBytes { b throws(KuraError) in
                    let view = try RecordView(b)
                    var (key, _) = try index.valuePrefix { (i: Int) throws(KuraError) -> Value in
                        if let schema, i < schema.columns.count { return try schema.value(view, i) }
                        return try view.value(at: i)
                    }
                    RowIDKey.append(rowID, to: &key)
                    expected.insert(key)
                }
                try rows.next(source)
            }
            var entries = TreeCursor(tree: index.tree)
            try entries.first(source)
            steps = 0
            while entries.isValid && steps <= maxEntries {
                steps += 1
                let key = Array(entries.key)
                if expected.remove(key) == nil {
                    report(entries.leaf.number, "index \"\(info.name)\" has an entry that matches no row of table \"\(table.name)\" (\(hexBytes(key)))")
                    if full { return }
                }
                try entries.next(source)
            }
            if !expected.isEmpty {
                report(info.rootPage, "index \"\(info.name)\" is missing \(expected.count) entries for rows of table \"\(table.name)\"")
            }
        } catch {
            report(info.rootPage, "index \"\(info.name)\": \(error.message)")
        }
    }

    mutating func checkFreelist(head: UInt32, expected: UInt32) {
        var trunk = head
        var count: UInt32 = 0
        while trunk != 0 && !full {
            guard claim(trunk, "freelist trunk") else { return }
            count += 1
            let p: Page
            do { p = try source.page(trunk) } catch {
                report(trunk, "freelist trunk unreadable: \(error.message)")
                return
            }
            guard p.u8(0) == NodeKind.freelistTrunk.rawValue else {
                report(trunk, "freelist trunk has kind \(p.u8(0))")
                return
            }
            let n = Int(p.u32(8))
            guard n <= (Node.usable(p.size) - 12) / 4 else { report(trunk, "freelist trunk claims \(n) entries"); return }
            for i in 0..<n {
                if claim(p.u32(12 + 4 * i), "freelist") { count += 1 }
            }
            trunk = p.u32(4)
        }
        if count != expected { report(1, "header counts \(expected) free pages, freelist holds \(count)") }
    }

    /// Walks a tree; returns its number of leaf cells (nil if the walk failed).
    mutating func walkTree(_ tree: BTree, name: String, nextRowID: Int64?) -> Int64? {
        var leafDepth: Int?
        var rows: Int64 = 0
        // (page, depth, lower bound exclusive, upper bound inclusive)
        var stack: [(UInt32, Int, [UInt8]?, [UInt8]?)] = [(tree.root, 0, nil, nil)]
        var steps = 0
        while let (number, depth, lo, hi) = stack.popLast() {
            steps += 1
            if full || steps > Int(pageCount) + 1 { return nil }
            guard claim(number, name) else { continue }
            let p: Page
            do { p = try tree.node(number, source) } catch {
                report(number, "\(name): \(error.message)")
                continue
            }
            if depth > BTree.maxDepth { report(number, "\(name) is deeper than \(BTree.maxDepth)"); return nil }
            let n = p.cellCount
            if n == 0 && number != tree.root { report(number, "\(name): empty non-root page") }
            var prev = lo
            for i in 0..<n {
                let key = p.keyBytes(i)
                if let pk = prev, !bytesPrecede(pk, key) { report(number, "\(name): key \(i) out of order"); break }
                if let h = hi, bytesPrecede(h, key) { report(number, "\(name): key \(i) above its parent's separator") }
                prev = key
            }
            if p.isLeafNode {
                if let d = leafDepth, d != depth { report(number, "\(name): leaf at depth \(depth), others at \(d)") }
                leafDepth = depth
                rows += Int64(n)
                for i in 0..<n {
                    do {
                        for o in try tree.overflowPages(p, i, source) { _ = claim(o, "\(name) overflow") }
                        if tree.kind == .table {
                            let (ko, kl) = p.cellKey(i)
                            guard let (rid, used) = RowIDKey.decode(p.bytes, ko, ko + kl), used == kl else {
                                report(number, "\(name): cell \(i) key is not a row ID")
                                continue
                            }
                            if let next = nextRowID, rid >= next { report(number, "\(name): row \(rid) is not below the next row ID \(next)") }
                            _ = try RecordCodec.decode(tree.value(p, i, source))
                        }
                    } catch {
                        report(number, "\(name): cell \(i): \(error.message)")
                    }
                }
            } else {
                var lower = lo
                for i in 0...n {
                    let upper = i < n ? p.keyBytes(i) : hi
                    stack.append((p.child(i), depth + 1, lower, upper))
                    lower = upper
                }
            }
        }
        return rows
    }
}
