// kura demo: the Student/Record program of seed 003 on a temporary store,
// printing each step (Examples/Shared/StudentRecords.swift).

import Foundation
import KuraExamples

enum DemoCommand {
    static let help = """
        usage: kura demo [--keep PATH]

        Runs the Student/Record program (insert, update, query, delete, reopen) on a
        temporary store (or at PATH with --keep) and prints each step.
        """

    static func run(_ args: [String]) -> Int32 {
        var keep: String?
        var i = 0
        while i < args.count {
            switch args[i] {
            case "--keep" where i + 1 < args.count:
                keep = args[i + 1]
                i += 2
            case "--help", "-h":
                print(help)
                return 0
            default:
                FileHandle.standardError.write("kura demo: unknown argument '\(args[i])'\n\n\(help)\n".data(using: .utf8)!)
                return 2
            }
        }
        let url = keep.map { URL(fileURLWithPath: $0) }
            ?? FileManager.default.temporaryDirectory.appendingPathComponent("kura-demo-\(getpid()).kura")
        defer {
            // The demo's own store under a name with this process's ID: removing
            // it is best effort (a leftover temporary file loses nobody's data).
            if keep == nil {
                try? FileManager.default.removeItem(at: url)
                try? FileManager.default.removeItem(atPath: url.path + "-wal")
                try? FileManager.default.removeItem(atPath: url.path + "-shm")
            }
        }
        do {
            try StudentRecords.run(storeURL: url)
            return 0
        } catch {
            FileHandle.standardError.write("kura demo: \(error)\n".data(using: .utf8)!)
            return 3
        }
    }
}
