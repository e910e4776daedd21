// kura import: loads CSV or JSON lines into an entity (table), creating the store
// and the entity if absent. Formats and typing rules: ImportFormats.swift.
//
// The whole input is read and converted before anything is written, so a bad
// line leaves the store untouched (and a store this command would have created
// is not created). Without --batch the rows go in one transaction; with --batch
// N a commit follows every N rows and prints `committed <total>`.
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

            // Read and parse the input.
            let bytes: Data
            if file == "-" {
                bytes = FileHandle.standardInput.readDataToEndOfFile()
            } else {
                var isDir: ObjCBool = false
                guard FileManager.default.fileExists(atPath: file, isDirectory: &isDir), !isDir.boolValue,
                      let d = FileManager.default.contents(atPath: file) else {
                    throw CLIError.cannotRead("cannot read \(file): " + (FileManager.default.fileExists(atPath: file) ? "permission denied or not a file" : "no such file"))
                }
                bytes = d
            }
            guard let text = String(data: bytes, encoding: .utf8) else {
                throw CLIError.problems("\(file) is not valid UTF-8 text")
            }
            let data: ImportData
            do throws(ImportError) { data = isCSV ? try ImportReader.readCSV(text) : try ImportReader.readJSONLines(text) } catch {
                throw CLIError.problems("\(file), line \(error.line): \(error.message)")
            }

            // A first plan from the entity as it is now, if the store exists, so
            // that bad data is reported before anything is created or written.
            // It decides nothing: every write transaction plans again from the
            // schema it sees itself (another importer may have created the entity
            // or added columns in between).
            let ctx = Context(entity: entity, file: file, isCSV: isCSV, data: data, indexSpecs: indexSpecs)
            var db: Database?
            var existing: TableSchema?
            if FileManager.default.fileExists(atPath: path) {
                try requireStoreFile(path)
                var options = Database.Options()
                options.createIfMissing = false
                do throws(KuraError) { db = try Database(path: path, options: options) } catch {
                    throw CLIError.cannotRead("cannot open \(path): \(describe(error))")
                }
                existing = try db?.read { tx in try ctx.schema(tx) } ?? nil
            }
            let firstPlan = try ctx.plan(existing)
            let converted = try ctx.convert(data.rows[...], firstPlan)

            // Write.
            if db == nil {
                var options = Database.Options()
                options.pageSize = pageSize
                do throws(KuraError) { db = try Database(path: path, options: options) } catch {
                    throw CLIError.cannotRead("cannot create \(path): \(describe(error))")
                }
            }
            // Invariant: db was set just above if it was nil.
            let store = db!
            var start = 0
            let size = batch ?? max(data.rows.count, 1)
            // A store this command created is never removed on failure: another
            // process may have opened it and committed to it in the meantime.
            repeat {
                let end = min(start + size, data.rows.count)
                try store.write { tx in
                    let schema = try ctx.schema(tx)
                    let plan = schema == existing ? firstPlan : try ctx.plan(schema)
                    let rows = plan.columns == firstPlan.columns ? Array(converted[start..<end]) : try ctx.convert(data.rows[start..<end], plan)
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
                    for r in rows {
                        do throws(KuraError) {
                            if let id = r.rowID { try tx.insert(r.values, into: t, rowID: id) }
                            else { try tx.insert(r.values, into: t) }
                        } catch {
                            throw CLIError.problems("\(file), line \(r.line): \(describe(error))")
                        }
                    }
                    if end == data.rows.count { try createIndexes(indexSpecs, entity: entity, tx) }
                }
                if batch != nil {
                    out.line("committed \(end)")
                    out.flush()
                }
                start = end
            } while start < data.rows.count
            if !a.has("no-checkpoint") { _ = try store.checkpoint() }
            if batch == nil {
                out.line("imported \(data.rows.count) rows into \(entity) (\(path))")
            }
            return ExitCode.ok
        }
    }

    /// One row ready to insert.
    struct ConvertedRow {
        var line: Int
        var rowID: Int64?
        var values: [Value]
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
                    let t = data.declared[c] ?? (isCSV ? ImportReader.inferCSVType(data, column: c) : .text)
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

        /// Converts input rows to the plan's column types.
        func convert(_ rows: ArraySlice<ImportRow>, _ plan: Plan) throws -> [ConvertedRow] {
            var out: [ConvertedRow] = []
            out.reserveCapacity(rows.count)
            do throws(ImportError) {
                for r in rows {
                    var values = plan.columns.map(\.defaultValue)
                    var rowID: Int64?
                    for (c, f) in r.fields.enumerated() {
                        if c == plan.rowIDColumn {
                            rowID = try ImportReader.value(f, type: .integer, column: "_rowid", line: r.line, decidedAt: nil).integerValue
                            continue
                        }
                        guard let t = plan.target[c] else { continue }
                        values[t.position] = try ImportReader.value(f, type: t.type, column: data.columns[c], line: r.line,
                                                                    decidedAt: t.typedHere ? data.decidedAt[c] : nil)
                    }
                    out.append(ConvertedRow(line: r.line, rowID: rowID, values: values))
                }
            } catch {
                throw CLIError.problems("\(file), line \(error.line): \(error.message)")
            }
            return out
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
