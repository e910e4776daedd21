// kura schema: every table (entity) with its columns and indexes, decoded from
// the catalog in raw pages.

import KuraEngine

enum SchemaCommand {
    static let spec = CommandSpec(name: "schema", help: """
        usage: kura schema STORE [--json]

        Prints every table (entity) of the store with its row count and columns
        (name, type, nullability, default), and its indexes (columns, unique,
        descending, folded); then, for a store written by the object layer, the
        version hashes of the model it records (per entity and property).
        Reads the catalog itself; never writes.

        exit codes: 0 ok, 2 usage error, 3 cannot read the file
        """, flags: ["json"], positional: 1...1)

    static func run(_ args: [String]) -> Int32 {
        runCommand("schema") {
            guard let a = try parseArguments(args, spec) else { return ExitCode.ok }
            let store = try openRaw(a.positional[0])
            defer { store.close() }
            let r = StoreWalker(store, limit: 0, catalogOnly: true).run()
            let tables = r.catalog.filter { $0.info.kind == "table" }
            let indexes = r.catalog.filter { $0.info.kind == "index" }
            func indexColumns(_ d: IndexDefinition) -> String {
                d.columns.map { $0.name + ($0.descending ? " desc" : "") + ($0.folded ? " folded" : "") }.joined(separator: ", ")
            }
            let recorded = RecordedModel.read(a.positional[0], hasTable: tables.contains { $0.info.name == "_kura_model" })
            if a.has("json") {
                var model = JSON.null
                switch recorded {
                case .success(let m)?: model = m.json
                case .failure(let e)?: model = .object([("error", .string(e.message))])
                case nil: break
                }
                out.line(JSON.object([("model", model), ("tables", .array(tables.map { t in
                    var m: [(String, JSON)] = [("name", .string(t.info.name)), ("rows", .int(t.info.rowCount)),
                                               ("nextRowID", .int(t.info.nextRowID))]
                    if let s = t.schema {
                        m.append(("columns", .array(s.columns.map { c in
                            .object([("name", .string(c.name)), ("type", .string(c.type.rawValue)), ("nullable", .bool(c.isNullable)),
                                     ("default", json(c.defaultValue, type: c.type))])
                        })))
                    } else {
                        m.append(("columns", .null))
                    }
                    if let e = t.definitionError { m.append(("error", .string(e))) }
                    m.append(("indexes", .array(indexes.filter { $0.info.owner == t.info.name }.map { i in
                        var im: [(String, JSON)] = [("name", .string(i.info.name))]
                        if let d = i.index {
                            im.append(("unique", .bool(d.isUnique)))
                            im.append(("columns", .array(d.columns.map { c in
                                .object([("name", .string(c.name)), ("descending", .bool(c.descending)), ("folded", .bool(c.folded))])
                            })))
                        } else {
                            im.append(("error", .string(i.definitionError ?? "unreadable")))
                        }
                        return .object(im)
                    })))
                    return .object(m)
                }))]).text)
                return ExitCode.ok
            }
            if tables.isEmpty { out.line("no tables") }
            for t in tables {
                out.line("table \(t.info.name) (\(t.info.rowCount) rows, next row ID \(t.info.nextRowID))")
                if let s = t.schema {
                    for c in s.columns {
                        var line = "  " + c.name + " " + c.type.rawValue
                        if !c.isNullable { line += " not null" }
                        if !c.defaultValue.isNull { line += " default " + display(c.defaultValue, type: c.type) }
                        out.line(line)
                    }
                } else if let e = t.definitionError {
                    out.line("  (schema unreadable: \(e))")
                } else {
                    out.line("  (no schema: values are addressed by position)")
                }
                for i in indexes where i.info.owner == t.info.name {
                    if let d = i.index {
                        out.line("  \(d.isUnique ? "unique index" : "index") \(d.name) (\(indexColumns(d)))")
                    } else {
                        out.line("  index \(i.info.name) (definition unreadable)")
                    }
                }
            }
            let orphans = indexes.filter { i in !tables.contains { $0.info.name == i.info.owner } }
            for i in orphans { out.line("index \(i.info.name) on missing table \(i.info.owner ?? "?")") }
            switch recorded {
            case .success(let m)?:
                out.line("model version hash \(m.hash)")
                for e in m.entities {
                    out.line("  entity \(e.name) \(e.hash)")
                    for p in e.properties { out.line("    \(p.name) \(p.hash)") }
                }
            case .failure(let e)?: out.line("model record unreadable: \(e.message)")
            case nil: break
            }
            return ExitCode.ok
        }
    }
}
