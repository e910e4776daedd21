// kura import: loads CSV or JSON lines into an entity (table), creating the store
// and the entity if absent. Formats and typing rules: ImportFormats.swift.
//
// The input is read twice, streaming (ImportScan.swift): a first pass checks
// every line and value and decides the column types before anything is
// written, so a bad line leaves the store untouched (and a store this command
// would have created is not created); a second pass inserts the rows one at a
// time. Neither holds more than one chunk of the input and one row, and the
// store is opened with a small cache (`cacheSize`), so memory is bounded
// whatever the input's size. Without --batch the rows go in one transaction;
// with --batch N a commit follows every N rows and prints `committed <total>`.
//
// Other processes may import into the same store at the same time. Whether the
// entity exists, and which columns it has, is decided inside each write
// transaction, from what that transaction sees; two importers into a new store
// both succeed (one creates the entity, the other adds to it) or one gets `busy`.
// A store file is never removed, even one this command created: another process
// may have opened it and committed to it in the meantime.

import Foundation
import KuraEngine

enum ImportCommand {
    static let spec = CommandSpec(name: "import", help: """
        usage: kura import STORE ENTITY FILE [--format csv|jsonl] [--batch N] [--index COL]...
                           [--page-size N] [--no-checkpoint]

        Loads FILE (or standard input if FILE is -) into ENTITY, creating STORE and
        the entity if absent; new columns are added to an existing entity. The
        format comes from the extension (.csv; .jsonl, .ndjson, .json) or --format.
        FILE is read twice, a chunk at a time: once to check every line and decide
        the column types, once to insert; memory does not grow with its size
        (standard input is kept in a temporary file for the second reading).

        CSV: a header line; a column may be typed name:int64, name:double,
        name:string, name:bool or name:date (ISO 8601); untyped columns are
        inferred from their values. An empty field is null, a quoted empty
        field "" is the empty string.
        JSON lines: one object per line; integers are int64, other numbers double,
        strings, booleans, null. A column's type is that of its first non-null
        value; an integer into a double column is accepted, any other mismatch is
        an error naming the line.
        A column "_rowid" gives each row's ID (as `kura dump` writes it).

        --batch N         commit every N rows, printing `committed <total>` after each
                          commit (default: one transaction)
        --index COL       create an index on COL (COL1,COL2 for a compound index),
                          named ENTITY_COL; repeatable
        --page-size N     page size of a new store (512 ... 65536, default 4096)
        --no-checkpoint   leave the committed transactions in STORE-wal

        exit codes: 0 ok, 1 bad data in FILE (the message names the line; nothing
                    of the failing transaction is written), 2 usage error,
                    3 cannot read FILE or STORE
        """, valueOptions: ["format", "batch", "index", "page-size"], flags: ["no-checkpoint"], positional: 3...3)

    static func run(_ args: [String]) -> Int32 {
        runCommand("import") {
            guard let a = try parseArguments(args, spec) else { return ExitCode.ok }
            let (path, entity, file) = (a.positional[0], a.positional[1], a.positional[2])
            guard !entity.isEmpty, entity.utf8.count <= 255 else { throw CLIError.usage("entity name must be 1 to 255 bytes") }
            let batch = try a.int("batch", min: 1)
            let pageSize = try a.int("page-size", min: 512) ?? 4096
            guard pageSize <= 65536, pageSize & (pageSize - 1) == 0 else {
                throw CLIError.usage("--page-size must be a power of two from 512 to 65536, got \(pageSize)")
            }
            var format = a.value("format")?.lowercased()
            if format == nil {
                let ext = (file as NSString).pathExtension.lowercased()
                switch ext {
                case "csv": format = "csv"
                case "jsonl", "ndjson", "json": format = "jsonl"
                default: throw CLIError.usage("cannot tell the format of '\(file)' from its extension; add --format csv or --format jsonl")
                }
            }
            guard format == "csv" || format == "jsonl" || format == "json" else {
                throw CLIError.usage("--format must be csv or jsonl, got '\(format!)'")
            }
            let isCSV = format == "csv"
            let indexSpecs = a.values("index").map { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }
            for s in indexSpecs where s.isEmpty || s.contains(where: \.isEmpty) {
                throw CLIError.usage("--index needs column names (COL or COL1,COL2)")
            }

            // Pass 1 streams the input once: it checks every line and finds the
            // columns, their types and the row count, holding one chunk and one
            // row at a time (standard input, or a pipe or other file that cannot
            // be read twice, is kept in an unlinked temporary file for pass 2).
            // The store is opened first, so that values can be checked against
            // the entity's column types, but a failure to open it is reported
            // after the input's own errors, as before.
            var spool: Int32?
            defer { if let spool { close(spool) } }
            if file == "-" || isReadOnce(file) { spool = try makeSpoolFile() }
            let first = try ImportSource(file: file, spoolTo: spool)
            var db: Database?
            var existing: TableSchema?
            var storeError: Error?
            let ctx0 = Context(entity: entity, file: file, isCSV: isCSV, data: ImportData(), indexSpecs: indexSpecs)
            if FileManager.default.fileExists(atPath: path) {
                do {
                    try requireStoreFile(path)
                    var options = Database.Options()
                    options.createIfMissing = false
                    options.cacheSize = cacheSize
                    do throws(KuraError) { db = try Database(path: path, options: options) } catch {
                        throw CLIError.cannotRead("cannot open \(path): \(describe(error))")
                    }
                    existing = try db?.read { tx in try ctx0.schema(tx) } ?? nil
                } catch {
                    storeError = error
                }
            }
            let (data, conversionError) = try scan(first, ctx0, existing: existing)
            if let storeError { throw storeError }

            // A first plan from the entity as it is now, if the store exists, so
            // that bad data is reported before anything is created or written.
            // It decides nothing: every write transaction plans again from the
            // schema it sees itself (another importer may have created the entity
            // or added columns in between).
            let ctx = Context(entity: entity, file: file, isCSV: isCSV, data: data, indexSpecs: indexSpecs)
            let firstPlan = try ctx.plan(existing)
            if let conversionError { throw ctx.problem(conversionError) }

            // Write.
            if db == nil {
                var options = Database.Options()
                options.pageSize = pageSize
                options.cacheSize = cacheSize
                do throws(KuraError) { db = try Database(path: path, options: options) } catch {
                    throw CLIError.cannotRead("cannot create \(path): \(describe(error))")
                }
            }
            // Invariant: db was set just above if it was nil.
            let store = db!
            // Pass 2 reads the input again, one row at a time, and inserts.
            let second: ImportSource
            if let spool {
                guard lseek(spool, 0, SEEK_SET) == 0 else {
                    throw CLIError.cannotRead("cannot read back the copy of standard input: \(String(cString: strerror(errno)))")
                }
                second = try ImportSource(fd: spool, name: file, closeAtEnd: false)
            } else {
                second = try ImportSource(file: file)
            }
            let feed = RowFeed(second, ctx)
            let total = data.rowCount
            var start = 0
            let size = batch ?? max(total, 1)
            // A store this command created is never removed on failure: another
            // process may have opened it and committed to it in the meantime.
            repeat {
                let end = min(start + size, total)
                try store.write { tx in
                    let schema = try ctx.schema(tx)
                    let plan = schema == existing ? firstPlan : try ctx.plan(schema)
                    var t: TableInfo
                    if schema == nil {
                        t = try tx.createTable(entity, schema: try TableSchema(plan.columns))
                    } else {
                        t = try tx.table(entity)
                        if !plan.newColumns.isEmpty {
                            for c in plan.newColumns { try tx.addColumn(c, to: t) }
                            t = try tx.table(entity)
                        }
                    }
                    try feed.insert(end - start, plan: plan, into: t, tx)
                    if end == total {
                        guard try !feed.next() else { throw ctx.changed() }
                        try createIndexes(indexSpecs, entity: entity, tx)
                    }
                    // Pass 1 found the input valid UTF-8: a second reading that is not changed.
                    if second.invalidUTF8 { throw ctx.changed() }
                }
                if batch != nil {
                    out.line("committed \(end)")
                    out.flush()
                }
                start = end
            } while start < total
            if !a.has("no-checkpoint") { _ = try store.checkpoint() }
            if batch == nil {
                out.line("imported \(total) rows into \(entity) (\(path))")
            }
            return ExitCode.ok
        }
    }

    /// The page cache of the importing connection, which is also what its
    /// write transaction keeps of changed pages before spilling them to the
    /// log, and the index sort's memory: `sqlite3`'s default cache size. An
    /// import appends rows, so each page fills once and a larger cache buys
    /// little; the default (32 MiB) would be most of the command's memory.
    static let cacheSize = 2 << 20

    /// Whether `path` names something that exists but is neither a regular
    /// file nor a directory (a pipe, a device): its bytes can be read once.
    /// False if it cannot be examined: opening it will say why.
    static func isReadOnce(_ path: String) -> Bool {
        var st = stat()
        guard stat(path, &st) == 0 else { return false }
        let kind = st.st_mode & S_IFMT
        return kind != S_IFREG && kind != S_IFDIR
    }

    /// An unlinked temporary file to keep standard input in for pass 2.
    static func makeSpoolFile() throws -> Int32 {
        var template = Array((NSTemporaryDirectory() + "/kura-import-XXXXXX").utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else {
            throw CLIError.cannotRead("cannot create a temporary file to hold standard input: \(String(cString: strerror(errno)))")
        }
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        return fd
    }

    /// How the input's columns map onto the entity: its columns after the import
    /// (existing ones first, in order, then the new ones), the new ones, and for
    /// each input column its position and type (nil for `_rowid`).
    struct Plan: Equatable {
        var columns: [ColumnDefinition] = []
        var newColumns: [ColumnDefinition] = []
        var rowIDColumn: Int?
        var target: [Target?] = []
        struct Target: Equatable {
            var position: Int
            var type: ColumnType
            /// Whether the column was typed by this input (JSON lines: its first
            /// non-null value), for error messages.
            var typedHere: Bool
        }
    }

    /// The input and options, shared by planning and conversion.
    struct Context {
        let entity: String
        let file: String
        let isCSV: Bool
        let data: ImportData
        let indexSpecs: [[String]]

        /// The entity's schema in `tx`, nil if it does not exist.
        func schema(_ tx: ReadTransaction) throws -> TableSchema? {
            guard try tx.tableExists(entity) else { return nil }
            guard let s = try tx.schema(of: try tx.table(entity)) else {
                throw CLIError.usage("entity \"\(entity)\" has no schema (a raw table); cannot import by column name")
            }
            return s
        }

        /// Column types: the entity's, then declared, first-value or inferred.
        func plan(_ existing: TableSchema?) throws -> Plan {
            var plan = Plan(columns: existing?.columns ?? [])
            for (c, name) in data.columns.enumerated() {
                if name == "_rowid" {
                    plan.rowIDColumn = c
                    plan.target.append(nil)
                    continue
                }
                if let existing, let p = existing.position(of: name) {
                    let t = existing.columns[p].type
                    if let d = data.declared[c], d != t, isCSV {
                        throw CLIError.problems("\(file), line 1: column \"\(name)\" is \(t.rawValue) in entity \"\(entity)\", but the header says \(d.rawValue)")
                    }
                    plan.target.append(.init(position: p, type: t, typedHere: false))
                } else {
                    let t = data.declared[c] ?? (isCSV ? data.guesses[c].type : .text)
                    let def = ColumnDefinition(name, t)
                    plan.newColumns.append(def)
                    plan.target.append(.init(position: plan.columns.count, type: t, typedHere: !isCSV))
                    plan.columns.append(def)
                }
            }
            for s in indexSpecs {
                for col in s where !plan.columns.contains(where: { $0.name == col }) {
                    throw CLIError.usage("--index \(s.joined(separator: ",")): entity \"\(entity)\" has no column \"\(col)\" (columns: \(plan.columns.map(\.name).joined(separator: ", ")))")
                }
            }
            return plan
        }

        /// An input error as the command reports it.
        func problem(_ e: ImportError) -> CLIError {
            CLIError.problems("\(file), line \(e.line): \(e.message)")
        }

        /// The error of an input whose second reading differs from the first.
        func changed() -> CLIError {
            CLIError.problems("\(file) changed while it was being imported (its second reading differs from the first)")
        }
    }

    /// Creates the `--index` indexes that do not exist yet.
    static func createIndexes(_ specs: [[String]], entity: String, _ tx: WriteTransaction) throws {
        guard !specs.isEmpty else { return }
        let t = try tx.table(entity)
        let existing = try tx.indexes(of: entity)
        for cols in specs {
            let name = ([entity] + cols).joined(separator: "_")
            if existing.contains(where: { $0.name == name || $0.columns.map(\.name) == cols }) { continue }
            _ = try tx.createIndex(name, on: t, columns: cols.map { IndexColumn($0) })
        }
    }
}
