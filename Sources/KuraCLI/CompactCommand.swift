// kura compact: rewrites a store without free pages, in place through the log
// (KuraEngine's `Database.compact()`), and shrinks the file.

import KuraEngine

enum CompactCommand {
    static let spec = CommandSpec(name: "compact", help: """
        usage: kura compact STORE

        Rewrites STORE without free pages: copies every table and index (same
        names, IDs, row IDs and definitions; pages filled completely) and commits
        the copy as one transaction through the log, then checkpoints, which cuts
        the file to its new length. Other programs may keep the store open while
        it runs: they see the compacted store in their next transaction. A crash
        leaves either the old store or the compacted one. If another process is
        reading at the end, the file is cut at a later checkpoint.

        exit codes: 0 done, 2 usage error, 3 cannot read the file (missing,
                    damaged, busy)
        """, positional: 1...1)

    static func run(_ args: [String]) -> Int32 {
        runCommand("compact") {
            guard let a = try parseArguments(args, spec) else { return ExitCode.ok }
            let path = a.positional[0]
            try requireStoreFile(path)
            let r: Database.CompactionResult
            do throws(KuraError) {
                var options = Database.Options()
                options.createIfMissing = false
                let db = try Database(path: path, options: options)
                defer { db.close() }
                r = try db.compact()
            } catch {
                throw CLIError.cannotRead("cannot compact \(path): \(describe(error))")
            }
            out.line("compacted \(path): \(r.pagesBefore) pages (\(r.freePagesBefore) free) -> \(r.pagesAfter) pages of \(r.pageSize) bytes"
                     + (r.fileTruncated ? "" : " (another process is reading: the file shrinks at a later checkpoint)"))
            return ExitCode.ok
        }
    }
}
