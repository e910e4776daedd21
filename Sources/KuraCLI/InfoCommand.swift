// kura info: the header, tables and indexes, and the log's state of one store,
// read from raw pages (works on files the engine refuses to open).

import KuraEngine

enum InfoCommand {
    static let spec = CommandSpec(name: "info", help: """
        usage: kura info STORE [--json]

        Prints the header fields (format version, page size and count, free pages,
        change counter, database ID), every table (entity) with its row count and
        columns, every index, and the log: committed frames and transactions, and
        whether a checkpoint is due (1000 frames, the engine's default threshold).
        Reads pages itself, so it works on damaged stores; never writes.

        exit codes: 0 ok, 2 usage error, 3 cannot read the file
        """, flags: ["json"], positional: 1...1)

    static let checkpointThreshold = 1000

    static func run(_ args: [String]) -> Int32 {
        runCommand("info") {
            guard let a = try parseArguments(args, spec) else { return ExitCode.ok }
            let store = try openRaw(a.positional[0])
            defer { store.close() }
            let inspection = StoreWalker(store, limit: 20, catalogOnly: true).run()
            let h = inspection.header ?? store.fileHeader
            let wal = store.wal
            let due = wal.committedFrames >= checkpointThreshold
            let tables = inspection.catalog.filter { $0.info.kind == "table" }
            let indexes = inspection.catalog.filter { $0.info.kind == "index" }
            let recorded = RecordedModel.read(a.positional[0], hasTable: tables.contains { $0.info.name == "_kura_model" })
            if a.has("json") {
                var members: [(String, JSON)] = [
                    ("store", .string(store.path)),
                    ("fileSize", .int(store.fileSize)),
                    ("formatVersion", .int(Int64(h.version))),
                    ("pageSize", .int(Int64(store.pageSize))),
                    ("pageCount", .int(Int64(store.pageCount))),
                    ("freePages", .int(Int64(h.freeCount))),
                    ("freelistHead", .int(Int64(h.freelistHead))),
                    ("catalogRoot", .int(Int64(h.catalogRoot))),
                    ("changeCounter", .int(Int64(bitPattern: h.changeCounter))),
                    ("databaseID", .string(hex(store.databaseID))),
                    ("nextCatalogID", .int(h.nextCatalogID)),
                    ("headerChecksumValid", .bool(h.checksumValid)),
                ]
                members.append(("tables", .array(tables.map { t in
                    .object([("name", .string(t.info.name)), ("rows", .int(t.info.rowCount)),
                             ("nextRowID", .int(t.info.nextRowID)), ("rootPage", .int(Int64(t.info.rootPage))),
                             ("columns", .array((t.schema?.columns ?? []).map { .string($0.name) }))])
                })))
                members.append(("indexes", .array(indexes.map { i in
                    .object([("name", .string(i.info.name)), ("table", i.info.owner.map { .string($0) } ?? .null),
                             ("columns", .array((i.index?.columns ?? []).map { .string($0.name) })),
                             ("unique", .bool(i.index?.isUnique ?? false)), ("rootPage", .int(Int64(i.info.rootPage)))])
                })))
                members.append(("wal", .object([
                    ("exists", .bool(wal.exists)), ("fileSize", .int(wal.fileSize)), ("headerValid", .bool(wal.headerValid)),
                    ("frames", .int(Int64(wal.frames.count))), ("committedFrames", .int(Int64(wal.committedFrames))),
                    ("transactions", .int(Int64(wal.transactions))),
                    ("lastCommitFrame", wal.committedFrames > 0 ? .int(Int64(wal.committedFrames)) : .null),
                    ("checkpointDue", .bool(due)),
                ])))
                switch recorded {
                case .success(let m)?: members.append(("modelVersionHash", .string(m.hash)))
                case .failure(let e)?: members.append(("modelVersionHash", .object([("error", .string(e.message))])))
                case nil: members.append(("modelVersionHash", .null))
                }
                members.append(("problems", .array(inspection.problems.map { .string($0.description) })))
                out.line(JSON.object(members).text)
                return ExitCode.ok
            }
            var lines: [[String]] = [
                ["store", store.path],
                ["file size", "\(store.fileSize) bytes"],
                ["format version", "\(h.version)"],
                ["page size", "\(store.pageSize)"],
                ["page count", "\(store.pageCount)"],
                ["free pages", "\(h.freeCount)" + (h.freelistHead != 0 ? " (freelist head \(h.freelistHead))" : "")],
                ["change counter", "\(h.changeCounter)"],
                ["database ID", hex(store.databaseID)],
                ["catalog root", "\(h.catalogRoot)"],
                ["next catalog ID", "\(h.nextCatalogID)"],
            ]
            if !h.checksumValid { lines.append(["header checksum", "MISMATCH (run kura check)"]) }
            var log: String
            if !wal.exists { log = "none" }
            else if !wal.headerValid { log = "\(wal.fileSize) bytes, ignored: \(wal.headerProblem ?? "invalid header")" }
            else {
                log = "\(wal.fileSize) bytes, \(wal.committedFrames) committed frames in \(wal.transactions) transactions"
                if wal.committedFrames > 0 { log += ", last commit at frame \(wal.committedFrames)" }
                if wal.frames.count > wal.committedFrames { log += ", \(wal.frames.count - wal.committedFrames) frames past the last commit (ignored)" }
            }
            lines.append(["log", log])
            lines.append(["checkpoint due", due ? "yes (\(wal.committedFrames) frames >= \(checkpointThreshold))" : "no (\(wal.committedFrames) of \(checkpointThreshold) frames)"])
            switch recorded {
            case .success(let m)?: lines.append(["model", "version hash \(m.hash), \(m.entities.count) entities (kura schema lists them)"])
            case .failure(let e)?: lines.append(["model", "record unreadable: \(e.message)"])
            case nil: break
            }
            for l in lines { out.line(pad(l[0] + ":", 17) + l[1]) }
            out.line("tables: \(tables.count)")
            for t in tables {
                var s = "  \(t.info.name): \(t.info.rowCount) rows, root page \(t.info.rootPage)"
                if let schema = t.schema { s += ", columns: " + schema.columns.map(\.name).joined(separator: ", ") }
                else if t.definitionError != nil { s += ", schema unreadable" }
                else { s += ", no schema" }
                out.line(s)
            }
            out.line("indexes: \(indexes.count)")
            for i in indexes {
                var s = "  \(i.info.name)"
                if let d = i.index {
                    s += " on \(d.table)(" + d.columns.map(\.name).joined(separator: ", ") + ")" + (d.isUnique ? " unique" : "")
                } else {
                    s += " (definition unreadable)"
                }
                out.line(s + ", root page \(i.info.rootPage)")
            }
            if inspection.problemCount > 0 {
                out.line("problems: \(inspection.problemCount) seen while reading the header and catalog (run `kura check`)")
            }
            return ExitCode.ok
        }
    }
}
