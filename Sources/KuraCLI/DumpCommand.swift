// kura dump: rows as JSON lines, through the engine opened read-only.

import KuraEngine

enum DumpCommand {
    static let spec = CommandSpec(name: "dump", help: """
        usage: kura dump STORE [ENTITY] [--json]

        Prints the rows of ENTITY (or of every table, in name order) as JSON lines,
        in row-ID order: {"_rowid":1,"name":"Ada","age":36}. Dumping every table
        adds "_entity". Integers print as integers, doubles with a fraction or
        exponent, dates as ISO 8601 strings, blobs as hex strings, null as null.
        `kura import` reads these lines back ("_rowid" becomes the row ID).
        Output is always JSON lines (--json is accepted). Never writes.

        exit codes: 0 ok, 2 usage error (unknown entity), 3 cannot read the file
        """, flags: ["json"], positional: 1...2)

    static func run(_ args: [String]) -> Int32 {
        runCommand("dump") {
            guard let a = try parseArguments(args, spec) else { return ExitCode.ok }
            let db = try openReadOnly(a.positional[0])
            let entity = a.positional.count > 1 ? a.positional[1] : nil
            try db.read { tx in
                let names = try entity.map { [$0] } ?? tx.tableNames()
                for name in names {
                    guard try tx.tableExists(name) else {
                        throw CLIError.usage("no entity (table) named \"\(name)\" in \(db.path); tables: \(try tx.tableNames().joined(separator: ", "))")
                    }
                    let t = try tx.table(name)
                    let schema = try tx.schema(of: t)
                    let cursor = try tx.rows(in: t)
                    while let row = try cursor.next() {
                        var values = try row.values()
                        if let schema { while values.count < schema.columns.count { values.append(schema.columns[values.count].defaultValue) } }
                        let names = columnNames(schema, count: values.count)
                        var m: [(String, JSON)] = []
                        if entity == nil { m.append(("_entity", .string(name))) }
                        m.append(("_rowid", .int(row.rowID)))
                        for (i, v) in values.enumerated() {
                            m.append((names[i], json(v, type: schema.flatMap { i < $0.columns.count ? $0.columns[i].type : nil })))
                        }
                        out.line(JSON.object(m).text)
                    }
                }
            }
            return ExitCode.ok
        }
    }
}
