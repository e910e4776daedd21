// kura compact: rewrites a store without free pages, atomically (KuraEngine's
// StoreCompactor: copy next to it, sync, rename over).

import KuraEngine

enum CompactCommand {
    static let spec = CommandSpec(name: "compact", help: """
        usage: kura compact STORE

        Rewrites STORE without free pages: checkpoints it, copies every table and
        index (same names, IDs, row IDs and definitions; pages filled completely)
        into STORE.compact-tmp, checks and syncs the copy, then renames it over
        STORE. A crash leaves either the old store or the new one. Refused if
        another connection is inside a transaction or writing; do not run it while
        another process has the store open (it would keep using the old file).
        The new store gets a new database ID.

        exit codes: 0 done, 2 usage error, 3 cannot read the file (missing,
                    damaged, busy)
        """, positional: 1...1)

    static func run(_ args: [String]) -> Int32 {
        runCommand("compact") {
            guard let a = try parseArguments(args, spec) else { return ExitCode.ok }
            let path = a.positional[0]
            try requireStoreFile(path)
            let r: StoreCompactor.Outcome
            do throws(KuraError) { r = try StoreCompactor.compact(path: path) } catch {
                throw CLIError.cannotRead("cannot compact \(path): \(describe(error))")
            }
            out.line("compacted \(path): \(r.pagesBefore) pages (\(r.freePagesBefore) free) -> \(r.pagesAfter) pages of \(r.pageSize) bytes")
            return ExitCode.ok
        }
    }
}
