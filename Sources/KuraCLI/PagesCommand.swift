// kura pages: one line per page — number, kind, owner, items, fill, overflow —
// from a full walk of raw pages (works on files the engine refuses to open).

import KuraEngine

enum PagesCommand {
    static let spec = CommandSpec(name: "pages", help: """
        usage: kura pages STORE [--json]

        One line per page of the store: its number, kind (header, table-leaf,
        table-interior, index-leaf, index-interior, overflow, freelist-trunk, free,
        unreadable, leaked), owner (catalog, table NAME, index NAME, freelist),
        items (cells of a tree page, entries of a freelist trunk, value bytes of
        an overflow page), fill, and the overflow pages hanging off a leaf.
        With --json, one JSON object per page. Never writes.

        exit codes: 0 ok, 2 usage error, 3 cannot read the file
        """, flags: ["json"], positional: 1...1)

    static func run(_ args: [String]) -> Int32 {
        runCommand("pages") {
            guard let a = try parseArguments(args, spec) else { return ExitCode.ok }
            let store = try openRaw(a.positional[0])
            defer { store.close() }
            let inspection = StoreWalker(store, limit: 0, collectUsage: true).run()
            if a.has("json") {
                for (i, u) in inspection.usage.enumerated() {
                    var m: [(String, JSON)] = [("page", .int(Int64(i + 1))), ("kind", .string(u.kind)), ("owner", .string(u.owner)),
                                               ("items", .int(Int64(u.items))), ("fill", u.fill.map { .double(($0 * 1000).rounded() / 1000) } ?? .null),
                                               ("overflow", .int(Int64(u.overflowPages)))]
                    if let n = u.note { m.append(("note", .string(n))) }
                    out.line(JSON.object(m).text)
                }
                return ExitCode.ok
            }
            let rows = inspection.usage.enumerated().map { (i, u) -> [String] in
                [String(i + 1), u.kind, u.owner, String(u.items), u.fill.map(percent) ?? "-",
                 String(u.overflowPages) + (u.note.map { "  (\($0))" } ?? "")]
            }
            for l in table(["page", "kind", "owner", "items", "fill", "overflow"], rows, rightAligned: [0, 3, 4]) { out.line(l) }
            return ExitCode.ok
        }
    }
}
