// kura checkpoint: copies the committed log into the store file and resets it.

import KuraEngine

enum CheckpointCommand {
    static let spec = CommandSpec(name: "checkpoint", help: """
        usage: kura checkpoint STORE

        Copies every committed transaction in STORE-wal into STORE and empties the
        log (FORMAT.md, "Checkpoint"). If another connection is inside a
        transaction the checkpoint is postponed: nothing changes, exit 1.

        exit codes: 0 done, 1 postponed (another connection is reading or writing),
                    2 usage error, 3 cannot read the file (missing, damaged, busy)
        """, positional: 1...1)

    static func run(_ args: [String]) -> Int32 {
        runCommand("checkpoint") {
            guard let a = try parseArguments(args, spec) else { return ExitCode.ok }
            let path = a.positional[0]
            try requireStoreFile(path)
            var options = Database.Options()
            options.createIfMissing = false
            let db: Database
            do throws(KuraError) { db = try Database(path: path, options: options) } catch {
                throw CLIError.cannotRead("cannot open \(path): \(describe(error))")
            }
            let frames = db.logFrameCount
            guard try db.checkpoint() else {
                db.close()
                throw CLIError.problems("checkpoint postponed: another connection is inside a transaction on \(path); retry later")
            }
            db.close()
            out.line(frames == 0 ? "nothing to checkpoint: the log of \(path) holds no committed frames"
                                 : "checkpointed \(frames) frames into \(path)")
            return ExitCode.ok
        }
    }
}
