// kura check: the engine's integrity check (IntegrityCheck.swift, the same one
// `ReadTransaction.checkIntegrity` runs) over raw pages (StoreWalker): checksums,
// tree order, depth and fill invariants, every page used once or free, freelist
// accounting, records decode, index entries equal table rows; then external
// value files. Finishes on any file, however damaged; never writes.

import KuraEngine

enum CheckCommand {
    static let spec = CommandSpec(name: "check", help: """
        usage: kura check STORE [--max N] [--json]

        Checks every page of STORE as its current snapshot sees it: the header,
        page checksums, tree structure (page kinds and owners, key order, every
        leaf at one depth, no empty page, depth <= 40), overflow chains, that
        every page is used exactly once or is free, the freelist and the free
        count, that every record decodes, row IDs and row counts, and that every
        index holds exactly the entries its table's rows need. Prints at most N
        problems (default 50), each naming its page, then the total.
        A file that is not a Kura store at all is reported as one problem.

        exit codes: 0 no problems, 1 problems found, 2 usage error,
                    3 cannot read the file (missing, unreadable, busy)
        """, valueOptions: ["max"], flags: ["json"], positional: 1...1)

    static func run(_ args: [String]) -> Int32 {
        runCommand("check") {
            guard let a = try parseArguments(args, spec) else { return ExitCode.ok }
            let limit = try a.int("max") ?? 50
            let path = a.positional[0]
            try requireStoreFile(path)
            let store: RawStore
            do throws(KuraError) { store = try RawStore(path: path) } catch {
                switch error.code {
                case .corrupt, .notADatabase, .unsupportedVersion:
                    report(path: path, summary: nil, problems: [(1, error.message)], total: 1, json: a.has("json"))
                    return ExitCode.problems
                default:
                    throw CLIError.cannotRead("cannot read \(path): \(describe(error))")
                }
            }
            defer { store.close() }
            var r = StoreWalker(store, limit: limit).run()
            if r.problemCount == 0 { checkExternalFiles(path, limit: limit, into: &r) }
            let tables = r.objects.filter { $0.kind == "table" }
            let summary = "\(store.pageCount) pages of \(store.pageSize) bytes, \(tables.count) tables, " +
                "\(r.objects.filter { $0.kind == "index" }.count) indexes, \(tables.reduce(0) { $0 + $1.tree.entries }) rows, \(r.freePages) free pages"
            report(path: path, summary: summary, problems: r.problems.map { ($0.page, $0.message) }, total: r.problemCount, json: a.has("json"))
            return r.problemCount == 0 ? ExitCode.ok : ExitCode.problems
        }
    }

    /// External values (FORMAT.md, "External values"): references to missing
    /// or damaged files, and orphan files. Checked through the engine on a
    /// read-only connection, only when the pages are sound.
    static func checkExternalFiles(_ path: String, limit: Int, into r: inout Inspection) {
        guard PosixFileSystem().exists(path + "-external") else { return }
        var o = Database.Options()
        o.fileSystem = ReadOnlyFileSystem()
        o.createIfMissing = false
        do {
            let db = try Database(path: path, options: o)
            let problems = try db.read { tx in try tx.checkExternalValues(limit: limit) }
            r.problems += problems.prefix(max(limit - r.problems.count, 0))
            r.problemCount += problems.count
        } catch {
            r.problems.append(IntegrityProblem(page: 0, message: "external values could not be checked: \((error as? KuraError)?.message ?? "\(error)")"))
            r.problemCount += 1
        }
    }

    static func report(path: String, summary: String?, problems: [(page: UInt32, message: String)], total: Int, json: Bool) {
        if json {
            out.line(JSON.object([
                ("store", .string(path)), ("ok", .bool(total == 0)),
                ("summary", summary.map { .string($0) } ?? .null),
                ("problemCount", .int(Int64(total))),
                ("problems", .array(problems.map { .object([("page", .int(Int64($0.page))), ("message", .string($0.message))]) })),
            ]).text)
            return
        }
        out.line("checked \(path)" + (summary.map { ": \($0)" } ?? ""))
        for p in problems { out.line(p.page == 0 ? p.message : "page \(p.page): \(p.message)") }
        if total == 0 { out.line("ok: no problems found") }
        else if total > problems.count { out.line("\(total) problems found (\(problems.count) shown; --max N shows more)") }
        else { out.line("\(total) \(total == 1 ? "problem" : "problems") found") }
    }
}
