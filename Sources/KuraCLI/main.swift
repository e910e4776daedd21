// kura: the command-line tool for Kura stores.
//
// One file per command; this file only dispatches. Exit codes: 0 ok, 1 problems
// found, 2 usage error, 3 cannot read the file.

import Foundation
import KuraEngine

let usage = """
    usage: kura COMMAND [ARGS]

    commands:
      tour [--rows N] [--keep PATH]   create a store, write, read, scan, delete,
                                      checkpoint, reopen and check it, printing
                                      each step with its speed

    exit codes: 0 ok, 1 problems found, 2 usage error, 3 cannot read the file
    """

func fail(_ message: String, code: Int32) -> Never {
    FileHandle.standardError.write((message + "\n").data(using: .utf8)!)
    exit(code)
}

var arguments = Array(CommandLine.arguments.dropFirst())
guard let command = arguments.first else { fail(usage, code: 2) }
arguments.removeFirst()
switch command {
case "tour":
    exit(TourCommand.run(arguments))
case "--help", "-h", "help":
    print(usage)
default:
    fail("kura: unknown command '\(command)'\n\n" + usage, code: 2)
}
