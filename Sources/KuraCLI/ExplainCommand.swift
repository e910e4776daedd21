// kura explain: the plan the engine would use for a `kura query`.

import KuraEngine

enum ExplainCommand {
    static let help = """
        usage: kura explain STORE ENTITY [PREDICATE] [--sort KEY[:desc]]... [--limit N]
                            [--offset N] [--json]

        Prints how `kura query` with the same arguments would run: the access path
        (an index and its key ranges, or a scan), the filter each candidate row is
        checked against, the sort, offset and limit. --json prints
        {"plan":[lines]}. Never writes.

        exit codes: 0 ok, 2 usage error (unknown entity or column, predicate
                    syntax), 3 cannot read the file
        """

    static func run(_ args: [String]) -> Int32 {
        runCommand("explain") {
            guard let a = try parseArguments(args, QueryCommand.spec("explain", help)) else { return ExitCode.ok }
            let q = try QueryCommand.query(a)
            let db = try openReadOnly(a.positional[0])
            let plan = try db.read { tx in
                guard try tx.tableExists(q.table) else {
                    throw CLIError.usage("no entity (table) named \"\(q.table)\" in \(db.path); tables: \(try tx.tableNames().joined(separator: ", "))")
                }
                return try tx.explain(q)
            }
            let lines = plan.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            if a.has("json") {
                out.line(JSON.object([("plan", .array(lines.map { .string($0) }))]).text)
            } else {
                for l in lines { out.line(l) }
            }
            return ExitCode.ok
        }
    }
}
