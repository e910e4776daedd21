// kura query: rows of one entity matching an NSPredicate-syntax predicate, sorted,
// offset and limited, through the engine opened read-only.

import KuraEngine

enum QueryCommand {
    static func spec(_ name: String, _ help: String) -> CommandSpec {
        CommandSpec(name: name, help: help, valueOptions: ["sort", "limit", "offset"], flags: ["count", "json"], positional: 2...3)
    }

    static let help = """
        usage: kura query STORE ENTITY [PREDICATE] [--sort KEY[:desc]]... [--limit N]
                          [--offset N] [--count] [--json]

        Prints the rows of ENTITY that match PREDICATE (NSPredicate syntax, e.g.
        'age >= 30 AND name BEGINSWITH[c] "a"'), in row-ID order unless sorted.
        --sort KEY or KEY:asc or KEY:desc, repeatable (the first key sorts first);
        --offset N skips N rows, --limit N returns at most N; --count prints just
        the number of matching rows; --json prints one JSON object per row,
        attribute name to value (null as null). Without --json a row prints as
        `#ROWID name="Ada" age=36`. Never writes.

        exit codes: 0 rows found, 1 no row matched, 2 usage error (bad option,
                    unknown entity or column, predicate syntax), 3 cannot read the file
        """

    /// Parses the query arguments shared with `kura explain`.
    static func query(_ a: Arguments) throws -> TableQuery {
        var predicate: KuraPredicate?
        if a.positional.count > 2 {
            do { predicate = try KuraPredicate(format: a.positional[2], arguments: []) } catch {
                throw CLIError.usage("predicate '\(a.positional[2])' does not parse: \(error.message)" + (error.offset.map { " (at character \($0))" } ?? ""))
            }
        }
        var sort: [SortKey] = []
        for s in a.values("sort") {
            var key = s
            var ascending = true
            if let colon = s.lastIndex(of: ":") {
                let dir = s[s.index(after: colon)...].lowercased()
                key = String(s[..<colon])
                switch dir {
                case "asc", "ascending": ascending = true
                case "desc", "descending": ascending = false
                default: throw CLIError.usage("--sort \(s): the direction after ':' must be asc or desc")
                }
            }
            guard !key.isEmpty else { throw CLIError.usage("--sort needs a column name, got '\(s)'") }
            sort.append(SortKey(key, ascending: ascending))
        }
        return TableQuery(a.positional[1], where: predicate, sort: sort, offset: try a.int("offset") ?? 0, limit: try a.int("limit"))
    }

    static func run(_ args: [String]) -> Int32 {
        runCommand("query") {
            guard let a = try parseArguments(args, spec("query", help)) else { return ExitCode.ok }
            let q = try query(a)
            let db = try openReadOnly(a.positional[0])
            return try db.read { tx in
                guard try tx.tableExists(q.table) else {
                    throw CLIError.usage("no entity (table) named \"\(q.table)\" in \(db.path); tables: \(try tx.tableNames().joined(separator: ", "))")
                }
                if a.has("count") {
                    let n = try tx.count(q)
                    out.line(a.has("json") ? JSON.object([("count", .int(Int64(n)))]).text : String(n))
                    return n == 0 ? ExitCode.problems : ExitCode.ok
                }
                let t = try tx.table(q.table)
                let schema = try tx.schema(of: t)
                let cursor = try tx.select(q)
                var n = 0
                while let row = try cursor.next() {
                    n += 1
                    var values = try row.values()
                    if let schema { while values.count < schema.columns.count { values.append(schema.columns[values.count].defaultValue) } }
                    let names = columnNames(schema, count: values.count)
                    let types = values.indices.map { i in schema.flatMap { i < $0.columns.count ? $0.columns[i].type : nil } }
                    if a.has("json") {
                        out.line(JSON.object(values.enumerated().map { (names[$0.offset], json($0.element, type: types[$0.offset])) }).text)
                    } else {
                        out.line("#\(row.rowID) " + values.enumerated().map { names[$0.offset] + "=" + display($0.element, type: types[$0.offset]) }.joined(separator: " "))
                    }
                }
                return n == 0 ? ExitCode.problems : ExitCode.ok
            }
        }
    }
}
