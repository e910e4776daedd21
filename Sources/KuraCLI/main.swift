// kura: the command-line tool for Kura stores.
//
// One file per command (`InfoCommand.swift` is `kura info`, ...); this file only
// dispatches. The inspection commands (info, pages, page, wal, check, stats,
// schema) decode pages themselves through KuraEngine's `RawStore`, so they work on
// files the engine refuses to open; dump, query and explain read through the
// engine opened read-only. Reading commands never modify the store. Exit codes
// are listed in the usage text below and in CLISupport.swift.

import Foundation
import KuraEngine

let usage = """
    usage: kura COMMAND [ARGS]   (kura COMMAND --help for details)

    inspect (work on damaged files; read-only):
      info STORE                  header, tables, indexes, log state
      pages STORE                 one line per page: kind, owner, items, fill, overflow
      page STORE N [--hex]        one page decoded: header, cells, free space map
      wal STORE                   log frames: page numbers, commits, checksums
      check STORE [--max N]       full integrity check; exit 1 if problems are found
      stats STORE                 space per table and index
      schema STORE                tables (entities), columns and indexes

    read (read-only):
      dump STORE [ENTITY]         rows as JSON lines
      query STORE ENTITY [PREDICATE] [--sort KEY[:desc]]... [--limit N]
                                  [--offset N] [--count] [--json]
      explain STORE ENTITY [PREDICATE] ...   the plan of the same query

    generate:
      codegen MODEL [--output DIR | --stdout] [--name NAME]
                                  Swift classes for an Xcode model or a store

    demo:
      demo [--keep PATH]          the Core Data-style Student/Record program, step by step

    change:
      import STORE ENTITY FILE [--format csv|jsonl] [--batch N] [--index COL]...
      checkpoint STORE            copy the log into the store file
      compact STORE               rewrite the store without free pages
      migrate STORE --model MODEL [--dry-run]   bring the store to an Xcode model
      tour [--rows N] [--keep PATH]   the engine step by step, with speeds

    Reading commands accept --json. An ENTITY is a table of the store.

    exit codes:
      0  ok
      1  problems found (check), no match (query), bad data in an imported file,
         or a checkpoint that had to be postponed
      2  usage error: unknown command or option, bad argument, unknown entity or
         column, predicate syntax error
      3  cannot read the file: missing, unreadable, not a Kura store, too damaged
         for the command, or busy
    """

var arguments = Array(CommandLine.arguments.dropFirst())
guard let command = arguments.first else {
    printError(usage)
    exit(ExitCode.usage)
}
arguments.removeFirst()
let status: Int32
switch command {
case "tour": status = TourCommand.run(arguments)
case "demo": status = DemoCommand.run(arguments)
case "info": status = InfoCommand.run(arguments)
case "pages": status = PagesCommand.run(arguments)
case "page": status = PageCommand.run(arguments)
case "wal": status = WalCommand.run(arguments)
case "check": status = CheckCommand.run(arguments)
case "stats": status = StatsCommand.run(arguments)
case "schema": status = SchemaCommand.run(arguments)
case "dump": status = DumpCommand.run(arguments)
case "query": status = QueryCommand.run(arguments)
case "explain": status = ExplainCommand.run(arguments)
case "import": status = ImportCommand.run(arguments)
case "checkpoint": status = CheckpointCommand.run(arguments)
case "compact": status = CompactCommand.run(arguments)
case "codegen": status = CodegenCommand.run(arguments)
case "migrate": status = MigrateCommand.run(arguments)
case "--help", "-h", "help":
    print(usage)
    status = ExitCode.ok
default:
    printError("kura: unknown command '\(command)'\n\n" + usage)
    status = ExitCode.usage
}
out.flush()
exit(status)
