// kura stats: space used by the catalog and by each table and index — pages
// (leaf, interior, overflow), entries, payload bytes, leaf fill — from a walk of
// raw pages.

import KuraEngine

enum StatsCommand {
    static let spec = CommandSpec(name: "stats", help: """
        usage: kura stats STORE [--json]

        Space per tree: the catalog, then every table and index in creation order,
        with its pages (leaf, interior, overflow), entries (rows or index entries),
        payload bytes (keys and values, overflow parts included), average leaf
        fill and depth; then the whole store: header, free and leaked pages.
        Reads pages itself; never writes.

        exit codes: 0 ok, 2 usage error, 3 cannot read the file
        """, flags: ["json"], positional: 1...1)

    static func run(_ args: [String]) -> Int32 {
        runCommand("stats") {
            guard let a = try parseArguments(args, spec) else { return ExitCode.ok }
            let store = try openRaw(a.positional[0])
            defer { store.close() }
            let r = StoreWalker(store, limit: 0).run()
            let inTrees = r.objects.reduce(0) { $0 + $1.totalPages }
            let leaked = max(0, Int(store.pageCount) - 1 - r.freePages - inTrees)
            if a.has("json") {
                out.line(JSON.object([
                    ("store", .string(store.path)), ("pageSize", .int(Int64(store.pageSize))), ("pageCount", .int(Int64(store.pageCount))),
                    ("freePages", .int(Int64(r.freePages))), ("leakedPages", .int(Int64(leaked))),
                    ("objects", .array(r.objects.map { o in
                        .object([("name", .string(o.name)), ("kind", .string(o.kind)), ("table", o.table.map { .string($0) } ?? .null),
                                 ("rootPage", .int(Int64(o.rootPage))), ("pages", .int(Int64(o.totalPages))),
                                 ("leafPages", .int(Int64(o.tree.leafPages))), ("interiorPages", .int(Int64(o.tree.interiorPages))),
                                 ("overflowPages", .int(Int64(o.tree.overflowPages))), ("entries", .int(Int64(o.tree.entries))),
                                 ("payloadBytes", .int(Int64(o.payloadBytes))), ("leafFill", .double((o.leafFill * 1000).rounded() / 1000)),
                                 ("depth", .int(Int64(o.tree.depth))), ("complete", .bool(o.complete))])
                    })),
                    ("problemCount", .int(Int64(r.problemCount))),
                ]).text)
                return ExitCode.ok
            }
            let rows = r.objects.map { o -> [String] in
                [o.kind == "index" ? "\(o.name) (on \(o.table ?? "?"))" : o.name, o.kind, String(o.totalPages), String(o.tree.leafPages),
                 String(o.tree.interiorPages), String(o.tree.overflowPages), String(o.tree.entries), String(o.payloadBytes),
                 percent(o.leafFill), String(o.tree.depth)]
            }
            for l in table(["object", "kind", "pages", "leaf", "interior", "overflow", "entries", "payload", "fill", "depth"], rows,
                           rightAligned: [2, 3, 4, 5, 6, 7, 8, 9]) { out.line(l) }
            out.line("store: \(store.pageCount) pages of \(store.pageSize) bytes = \(Int64(store.pageCount) * Int64(store.pageSize)) bytes; " +
                     "1 header, \(inTrees) in trees, \(r.freePages) free, \(leaked) leaked")
            if r.problemCount > 0 { out.line("\(r.problemCount) problems seen while walking (run `kura check`)") }
            return ExitCode.ok
        }
    }
}
