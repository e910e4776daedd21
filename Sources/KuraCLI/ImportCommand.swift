// kura import: loads CSV or JSON lines into an entity (table), creating the store
// and the entity if absent. Formats and typing rules: ImportFormats.swift.
//
// The whole input is read and converted before anything is written, so a bad
// line leaves the store untouched (and a store this command would have created
// is not created). Without --batch the rows go in one transaction; with --batch
// N a commit follows every N rows and prints `committed <total>`.

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

            // The entity's schema, if the store and entity exist.
            let storeExisted = FileManager.default.fileExists(atPath: path)
            var existing: TableSchema?
            var entityExists = false
            var db: Database?
            if storeExisted {
                try requireStoreFile(path)
                var options = Database.Options()
                options.createIfMissing = false
                do throws(KuraError) { db = try Database(path: path, options: options) } catch {
                    throw CLIError.cannotRead("cannot open \(path): \(describe(error))")
                }
                try db!.read { tx in
                    guard try tx.tableExists(entity) else { return }
                    entityExists = true
                    let t = try tx.table(entity)
                    guard let s = try tx.schema(of: t) else {
                        throw CLIError.usage("entity \"\(entity)\" in \(path) has no schema (a raw table); cannot import by column name")
                    }
                    existing = s
                }
            }

            // Column types: the entity's, then declared, first-value or inferred.
            var columns: [ColumnDefinition] = existing?.columns ?? []
            var newColumns: [ColumnDefinition] = []
            var rowIDColumn: Int?
            var target: [(position: Int, type: ColumnType)?] = []
            for (c, name) in data.columns.enumerated() {
                if name == "_rowid" {
                    rowIDColumn = c
                    target.append(nil)
                    continue
                }
                if let p = existing?.position(of: name) {
                    let t = existing!.columns[p].type
                    if let d = data.declared[c], d != t, isCSV {
                        throw CLIError.problems("\(file), line 1: column \"\(name)\" is \(t.rawValue) in entity \"\(entity)\", but the header says \(d.rawValue)")
                    }
                    target.append((p, t))
                } else {
                    let t = data.declared[c] ?? (isCSV ? ImportReader.inferCSVType(data, column: c) : .text)
                    let def = ColumnDefinition(name, t)
                    newColumns.append(def)
                    target.append((columns.count, t))
                    columns.append(def)
                }
            }
            for s in indexSpecs {
                for col in s where !columns.contains(where: { $0.name == col }) {
                    throw CLIError.usage("--index \(s.joined(separator: ",")): entity \"\(entity)\" has no column \"\(col)\" (columns: \(columns.map(\.name).joined(separator: ", ")))")
                }
            }

            // Convert every row before writing anything.
            var rows: [(line: Int, rowID: Int64?, values: [Value])] = []
            rows.reserveCapacity(data.rows.count)
            do throws(ImportError) {
                for r in data.rows {
                    var values = columns.map(\.defaultValue)
                    var rowID: Int64?
                    for (c, f) in r.fields.enumerated() {
                        if c == rowIDColumn {
                            let v = try ImportReader.value(f, type: .integer, column: "_rowid", line: r.line, decidedAt: nil)
                            rowID = v.integerValue
                            continue
                        }
                        guard let (p, t) = target[c] else { continue }
                        let decided = !isCSV && existing?.position(of: data.columns[c]) == nil ? data.decidedAt[c] : nil
                        values[p] = try ImportReader.value(f, type: t, column: data.columns[c], line: r.line, decidedAt: decided)
                    }
                    rows.append((r.line, rowID, values))
                }
            } catch {
                throw CLIError.problems("\(file), line \(error.line): \(error.message)")
            }

            // Write.
            if db == nil {
                var options = Database.Options()
                options.pageSize = pageSize
                do throws(KuraError) { db = try Database(path: path, options: options) } catch {
                    throw CLIError.cannotRead("cannot create \(path): \(describe(error))")
                }
            }
            let store = db!
            var committed = 0
            var start = 0
            let size = batch ?? max(rows.count, 1)
            do {
                repeat {
                    let end = min(start + size, rows.count)
                    let first = start == 0
                    let last = end == rows.count
                    try store.write { tx in
                        var t: TableInfo
                        if first && !entityExists {
                            t = try tx.createTable(entity, schema: try TableSchema(columns))
                        } else {
                            t = try tx.table(entity)
                            if first { for c in newColumns { try tx.addColumn(c, to: t) } }
                            t = try tx.table(entity)
                        }
                        for r in rows[start..<end] {
                            do throws(KuraError) {
                                if let id = r.rowID { try tx.insert(r.values, into: t, rowID: id) }
                                else { try tx.insert(r.values, into: t) }
                            } catch {
                                throw CLIError.problems("\(file), line \(r.line): \(describe(error))")
                            }
                        }
                        if last { try createIndexes(indexSpecs, entity: entity, tx) }
                    }
                    committed = end
                    if batch != nil {
                        out.line("committed \(committed)")
                        out.flush()
                    }
                    start = end
                } while start < rows.count
            } catch {
                if !storeExisted && committed == 0 {
                    try? FileManager.default.removeItem(atPath: path)
                    try? FileManager.default.removeItem(atPath: path + "-wal")
                }
                throw error
            }
            if !a.has("no-checkpoint") { _ = try store.checkpoint() }
            if batch == nil {
                out.line("imported \(rows.count) rows into \(entity) (\(path))")
            }
            return ExitCode.ok
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
