// kura wal: the write-ahead log frame by frame — page numbers, commit markers,
// salts, chain and page checksums, and which frames form the committed log —
// read from raw bytes (FORMAT.md, "The write-ahead log").

import KuraEngine

enum WalCommand {
    static let spec = CommandSpec(name: "wal", help: """
        usage: kura wal STORE [--json]

        Describes STORE-wal: its header (magic, version, page size, generation,
        salts, database ID, checksum) and every whole frame: page number, commit
        field (the page count, in the last frame of a transaction), whether its
        salts match, whether its chain checksum and its page image's checksum are
        valid, and whether it belongs to the committed log. Never writes.

        exit codes: 0 ok, 2 usage error, 3 cannot read the file
        """, flags: ["json"], positional: 1...1)

    static func run(_ args: [String]) -> Int32 {
        runCommand("wal") {
            guard let a = try parseArguments(args, spec) else { return ExitCode.ok }
            let store = try openRaw(a.positional[0])
            defer { store.close() }
            let w = store.wal
            if a.has("json") {
                var m: [(String, JSON)] = [("path", .string(w.path)), ("exists", .bool(w.exists)), ("fileSize", .int(w.fileSize))]
                if w.headerComplete {
                    m.append(("header", .object([
                        ("magicValid", .bool(w.magicValid)), ("version", .int(Int64(w.version))), ("pageSize", .int(Int64(w.pageSize))),
                        ("generation", .int(Int64(w.generation))), ("salt1", .string(hex32(w.salt1))), ("salt2", .string(hex32(w.salt2))),
                        ("databaseID", .string(hex(w.databaseID))), ("databaseIDMatches", .bool(w.databaseIDMatches)),
                        ("checksumValid", .bool(w.checksumValid)),
                    ])))
                }
                m.append(("headerValid", .bool(w.headerValid)))
                if let p = w.headerProblem { m.append(("headerProblem", .string(p))) }
                m.append(("validFrames", .int(Int64(w.validFrames))))
                m.append(("committedFrames", .int(Int64(w.committedFrames))))
                m.append(("transactions", .int(Int64(w.transactions))))
                m.append(("committedPageCount", .int(Int64(w.committedPageCount))))
                m.append(("trailingBytes", .int(w.trailingBytes)))
                m.append(("aheadBytes", .int(w.aheadBytes)))
                if let r = w.stopReason { m.append(("stopReason", .string(r))) }
                m.append(("frames", .array(w.frames.map { f in
                    .object([("frame", .int(Int64(f.number))), ("offset", .int(f.offset)), ("page", .int(Int64(f.page))),
                             ("commit", .int(Int64(f.commit))), ("saltsMatch", .bool(f.saltsMatch)), ("chainValid", .bool(f.chainValid)),
                             ("pageChecksumValid", .bool(f.pageChecksumValid)), ("committed", .bool(f.committed))])
                })))
                out.line(JSON.object(m).text)
                return ExitCode.ok
            }
            out.line("log: \(w.path)")
            guard w.exists else {
                out.line("the log file does not exist: every page comes from the store file")
                return ExitCode.ok
            }
            out.line("size: \(w.fileSize) bytes, \(w.frames.count) whole frames of \(24 + store.pageSize) bytes" +
                     (w.trailingBytes > 0 ? ", \(w.trailingBytes) bytes of a partial frame at the end" : "") +
                     (w.aheadBytes > 0 ? ", then \(w.aheadBytes) zero bytes written ahead for later commits" : ""))
            if w.headerComplete {
                out.line("header: magic \(w.magicValid ? "ok" : "WRONG"), version \(w.version), page size \(w.pageSize), generation \(w.generation), salts \(hex32(w.salt1)) \(hex32(w.salt2))")
                out.line("        database ID \(hex(w.databaseID)) (\(w.databaseIDMatches ? "matches the store" : "NOT the store's \(hex(store.databaseID))")), checksum \(w.checksumValid ? "ok" : "MISMATCH")")
            }
            out.line("header valid: " + (w.headerValid ? "yes" : "no: \(w.headerProblem ?? "?") (the log is ignored)"))
            if w.headerValid {
                out.line("committed log: \(w.committedFrames) frames in \(w.transactions) transactions" +
                         (w.committedFrames > 0 ? ", page count after the last commit \(w.committedPageCount)" : ""))
            }
            if let r = w.stopReason { out.line("valid prefix ends: \(r)") }
            guard !w.frames.isEmpty else { return ExitCode.ok }
            let rows = w.frames.map { f -> [String] in
                [String(f.number), String(f.offset), String(f.page), f.commit == 0 ? "-" : String(f.commit),
                 f.saltsMatch ? "ok" : "BAD", f.chainValid ? "ok" : "BAD", f.pageChecksumValid ? "ok" : "BAD",
                 f.committed ? (f.commit != 0 ? "committed (commit)" : "committed") : "not committed"]
            }
            for l in table(["frame", "offset", "page", "commit", "salts", "chain", "page checksum", "status"], rows, rightAligned: [0, 1, 2, 3]) {
                out.line(l)
            }
            return ExitCode.ok
        }
    }
}
