// kura page: one page decoded — header fields, cells, freelist entries, and a
// map of the page's regions (free space included) — from raw bytes, bounds-checked,
// so damaged pages show as much as can be shown.

import KuraEngine

enum PageCommand {
    static let spec = CommandSpec(name: "page", help: """
        usage: kura page STORE N [--hex] [--json]

        Decodes page N (1 is the header page) as the store's snapshot sees it (a
        committed log frame wins over the file): checksum, header fields, every
        cell (key, row ID, value length, overflow page, record), freelist entries,
        and the free space map. --hex adds a hex dump of the page. Never writes.

        exit codes: 0 ok, 2 usage error (N not a page of the store), 3 cannot read the file
        """, flags: ["hex", "json"], positional: 2...2)

    static func run(_ args: [String]) -> Int32 {
        runCommand("page") {
            guard let a = try parseArguments(args, spec) else { return ExitCode.ok }
            guard let n = UInt32(a.positional[1]), n >= 1 else {
                throw CLIError.usage("page number must be a positive integer, got '\(a.positional[1])'")
            }
            let store = try openRaw(a.positional[0])
            defer { store.close() }
            guard n <= store.pageCount else {
                throw CLIError.usage("page \(n) is not in the store \(store.path), which has pages 1...\(store.pageCount)")
            }
            // Who uses the page, according to a walk of the whole store.
            let usage = StoreWalker(store, limit: 0, collectUsage: true).run().usage[Int(n) - 1]
            let d = store.describePage(n)
            let origin: String
            switch d.origin {
            case .file: origin = "the store file at offset \(Int64(n - 1) * Int64(d.pageSize))"
            case .frame(let f): origin = "log frame \(f)"
            }
            if a.has("json") {
                var m: [(String, JSON)] = [
                    ("page", .int(Int64(n))), ("pageSize", .int(Int64(d.pageSize))), ("from", .string(origin)),
                    ("complete", .bool(d.complete)), ("kind", .string(d.kindName)), ("usedAs", .string(usage.kind)),
                    ("owner", .string(usage.owner)),
                    ("checksum", .object([("stored", .string(hex(d.storedChecksum))), ("computed", .string(hex(d.computedChecksum))),
                                          ("valid", .bool(d.checksumValid))])),
                    ("fields", .object(d.fields.map { ($0.name, json($0.value, type: nil)) })),
                ]
                if !d.cells.isEmpty { m.append(("cells", .array(d.cells.map(cellJSON)))) }
                if !d.entries.isEmpty || d.kindName == "freelist trunk" { m.append(("entries", .array(d.entries.map { .int(Int64($0)) }))) }
                m.append(("regions", .array(d.regions.map { .object([("start", .int(Int64($0.start))), ("end", .int(Int64($0.end))), ("what", .string($0.what))]) })))
                m.append(("problems", .array(d.problems.map { .string($0) })))
                if a.has("hex") { m.append(("hex", .string(d.bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()))) }
                out.line(JSON.object(m).text)
                return ExitCode.ok
            }
            out.line("page \(n) of \(store.path) (\(d.pageSize) bytes), from \(origin)")
            out.line("kind: \(d.kindName)" + (n == 1 ? "" : " (byte 0 = \(d.kindByte))") + "; used as: \(usage.kind), owner: \(usage.owner)")
            out.line("checksum: stored \(hex(d.storedChecksum)), computed \(hex(d.computedChecksum)): " + (d.checksumValid ? "ok" : "MISMATCH"))
            for p in d.problems { out.line("problem: \(p)") }
            out.line("header:")
            for f in d.fields { out.line("  " + pad(f.name + ":", 20) + (f.value.textValue ?? f.value.description)) }
            if !d.cells.isEmpty {
                out.line("cells: \(d.cells.count)")
                for c in d.cells { out.line("  " + cellText(c)) }
            }
            if d.kindName == "freelist trunk" {
                out.line("entries: " + (d.entries.isEmpty ? "none" : d.entries.map(String.init).joined(separator: " ")))
            }
            out.line("regions:")
            for r in d.regions {
                out.line("  " + lpad(String(r.start), 5) + " ..< " + pad(String(r.end), 5) + " " + lpad("\(r.end - r.start)", 5) + " bytes  " + r.what)
            }
            if a.has("hex") {
                out.line("hex:")
                hexDump(d.bytes)
            }
            return ExitCode.ok
        }
    }

    static func cellText(_ c: CellDescription) -> String {
        var s = "#\(c.index) at \(c.offset)"
        if let size = c.size { s += ", \(size) bytes" }
        if let child = c.child { s += ", child \(child)" }
        if !c.key.isEmpty || c.size != nil {
            s += ", key " + (c.key.isEmpty ? "(empty)" : hexBytes(c.key))
            if let r = c.rowID { s += " (row \(r))" }
        }
        if let vl = c.valueLength {
            s += ", value \(vl) bytes"
            if let local = c.localLength, local < vl { s += " (\(local) here, the rest from overflow page \(c.overflowPage ?? 0))" }
        }
        if let r = c.record { s += ": [" + r.map(\.description).joined(separator: ", ") + "]" }
        if let p = c.problem { s += "  PROBLEM: \(p)" }
        return s
    }

    static func cellJSON(_ c: CellDescription) -> JSON {
        var m: [(String, JSON)] = [("index", .int(Int64(c.index))), ("offset", .int(Int64(c.offset))),
                                   ("size", c.size.map { .int(Int64($0)) } ?? .null)]
        if let child = c.child { m.append(("child", .int(Int64(child)))) }
        m.append(("key", .string(c.key.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined())))
        if let r = c.rowID { m.append(("rowID", .int(r))) }
        if let vl = c.valueLength { m.append(("valueLength", .int(Int64(vl)))) }
        if let l = c.localLength { m.append(("localLength", .int(Int64(l)))) }
        if let o = c.overflowPage { m.append(("overflowPage", .int(Int64(o)))) }
        if let r = c.record { m.append(("record", .array(r.map { json($0, type: nil) }))) }
        if let p = c.problem { m.append(("problem", .string(p))) }
        return .object(m)
    }

    /// xxd-style dump; runs of identical 16-byte lines are shown once, then `*`.
    static func hexDump(_ bytes: [UInt8]) {
        var previous: ArraySlice<UInt8>?
        var starred = false
        var o = 0
        while o < bytes.count {
            let line = bytes[o..<min(o + 16, bytes.count)]
            if let p = previous, p.elementsEqual(line), o + 16 < bytes.count {
                if !starred { out.line("*"); starred = true }
                o += 16
                continue
            }
            starred = false
            previous = line
            let h = String(o, radix: 16)
            var s = String(repeating: "0", count: max(0, 4 - h.count)) + h + "  "
            for (i, b) in line.enumerated() {
                s += (b < 16 ? "0" : "") + String(b, radix: 16) + (i == 7 ? "  " : " ")
            }
            s += String(repeating: " ", count: max(0, (16 - line.count) * 3 + (line.count <= 8 ? 1 : 0)))
            s += " " + String(line.map { $0 >= 0x20 && $0 < 0x7f ? Character(Unicode.Scalar($0)) : "." })
            out.line(s)
            o += 16
        }
    }
}
