import Foundation
import XCTest

/// `kura import`: CSV typed headers, inference, nulls and empty strings; JSON
/// lines type rules; errors naming the line; batches; indexes.
final class ImportTests: XCTestCase {
    var dir: TemporaryDirectory!

    override func setUpWithError() throws { dir = try TemporaryDirectory() }
    override func tearDown() { dir = nil }

    func kura(_ args: [String], stdin: String? = nil) throws -> KuraTool.Result {
        try KuraTool.run(args, stdin: stdin, cwd: dir.path)
    }

    func testCSVTypesNullsAndEmptyStrings() throws {
        try dir.write("t.csv", """
            id,name,ratio,flag,when:date,code:string,n:int64
            1,"Smith, Jo",0.5,true,2024-02-29T12:00:00Z,007,
            2,,1,false,2024-03-01,"",-5
            3,"say ""hi""
            twice",2.25,true,,x,9

            """)
        let r = try kura(["import", "s.kura", "t", "t.csv"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stdout, "imported 3 rows into t (s.kura)\n")
        let schema = try kura(["schema", "s.kura"]).stdout
        XCTAssertEqual(schema, """
            table t (3 rows, next row ID 4)
              id integer
              name text
              ratio double
              flag bool
              when date
              code text
              n integer

            """)
        let rows = try kura(["dump", "s.kura", "t"]).stdout
        XCTAssertEqual(rows, """
            {"_rowid":1,"id":1,"name":"Smith, Jo","ratio":0.5,"flag":true,"when":"2024-02-29T12:00:00Z","code":"007","n":null}
            {"_rowid":2,"id":2,"name":null,"ratio":1.0,"flag":false,"when":"2024-03-01T00:00:00Z","code":"","n":-5}
            {"_rowid":3,"id":3,"name":"say \\"hi\\"\\ntwice","ratio":2.25,"flag":true,"when":null,"code":"x","n":9}

            """)
        // Empty string and null are different values.
        XCTAssertEqual(try kura(["query", "s.kura", "t", "code == ''", "--count"]).stdout, "1\n")
        XCTAssertEqual(try kura(["query", "s.kura", "t", "name == nil", "--count"]).stdout, "1\n")
    }

    func testCSVErrorsNameTheLine() throws {
        try dir.write("bad.csv", "a:int64,b\n1,x\n2,y\nthree,z\n")
        let r = try kura(["import", "s.kura", "t", "bad.csv"])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.stderr.contains("bad.csv, line 4: \"a\" is 'three', but the column holds int64 values"), r.stderr)
        XCTAssertFalse(dir.exists("s.kura"), "a failed import must not leave a new store behind")

        try dir.write("fields.csv", "a,b\n1,2\n3\n")
        let f = try kura(["import", "s.kura", "t", "fields.csv"])
        XCTAssertEqual(f.status, 1)
        XCTAssertTrue(f.stderr.contains("fields.csv, line 3: 1 fields, but the header names 2 columns"), f.stderr)

        try dir.write("type.csv", "a:money\n1\n")
        let t = try kura(["import", "s.kura", "t", "type.csv"])
        XCTAssertEqual(t.status, 1)
        XCTAssertTrue(t.stderr.contains("line 1: column \"a:money\" has unknown type \"money\""), t.stderr)

        try dir.write("quote.csv", "a\n\"open\n")
        let q = try kura(["import", "s.kura", "t", "quote.csv"])
        XCTAssertEqual(q.status, 1)
        XCTAssertTrue(q.stderr.contains("line 2: a quoted field is never closed"), q.stderr)
    }

    func testJSONLinesTypeRules() throws {
        try dir.write("t.jsonl", """
            {"i": 1, "d": 1.5, "s": "a", "b": true, "n": null}
            {"i": 2, "d": 2, "s": "", "b": false, "n": 3}

            {"i": -3, "d": 1e3, "s": "\\u00e9\\ud83d\\ude00", "b": null, "later": "x"}

            """)
        let r = try kura(["import", "s.kura", "t", "t.jsonl"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(try kura(["schema", "s.kura"]).stdout, """
            table t (3 rows, next row ID 4)
              i integer
              d double
              s text
              b bool
              n integer
              later text

            """)
        XCTAssertEqual(try kura(["dump", "s.kura", "t"]).stdout, """
            {"_rowid":1,"i":1,"d":1.5,"s":"a","b":true,"n":null,"later":null}
            {"_rowid":2,"i":2,"d":2.0,"s":"","b":false,"n":3,"later":null}
            {"_rowid":3,"i":-3,"d":1000.0,"s":"é😀","b":null,"n":null,"later":"x"}

            """)
    }

    func testJSONLinesMismatchNamesTheLine() throws {
        // A double into an integer column (typed by its first value) is an error.
        try dir.write("a.jsonl", "{\"x\": 1}\n{\"x\": null}\n{\"x\": 2.5}\n")
        let a = try kura(["import", "s.kura", "t", "a.jsonl"])
        XCTAssertEqual(a.status, 1)
        XCTAssertTrue(a.stderr.contains("a.jsonl, line 3: \"x\" is a non-integer number (2.5), but the column holds int64 values (its type comes from its first value, on line 1)"), a.stderr)
        // A string into a double column.
        try dir.write("b.jsonl", "{\"x\": 1.5}\n{\"x\": \"2\"}\n")
        let b = try kura(["import", "s.kura", "t", "b.jsonl"])
        XCTAssertEqual(b.status, 1)
        XCTAssertTrue(b.stderr.contains("b.jsonl, line 2: \"x\" is a string (\"2\"), but the column holds double values"), b.stderr)
        // Not JSON, not an object, nested values.
        try dir.write("c.jsonl", "{\"x\": 1}\n{\"x\": }\n")
        let c = try kura(["import", "s.kura", "t", "c.jsonl"])
        XCTAssertEqual(c.status, 1)
        XCTAssertTrue(c.stderr.contains("c.jsonl, line 2: not valid JSON"), c.stderr)
        try dir.write("d.jsonl", "[1, 2]\n")
        XCTAssertTrue(try kura(["import", "s.kura", "t", "d.jsonl"]).stderr.contains("line 1: expected a JSON object"))
        try dir.write("e.jsonl", "{\"x\": {\"y\": 1}}\n")
        XCTAssertTrue(try kura(["import", "s.kura", "t", "e.jsonl"]).stderr.contains("line 1: \"x\" holds a nested object"))
        XCTAssertFalse(dir.exists("s.kura"))
    }

    func testExistingEntityTypesAndConstraints() throws {
        try dir.write("a.csv", "name,age:int64\nAda,36\n")
        XCTAssertEqual(try kura(["import", "s.kura", "p", "a.csv"]).status, 0)
        // JSON lines into the existing entity: the schema's types rule; an integer
        // into... a text column is an error naming the line; new columns are added.
        try dir.write("b.jsonl", "{\"name\": \"Bo\", \"age\": 5, \"tall\": true}\n{\"name\": 7}\n")
        let b = try kura(["import", "s.kura", "p", "b.jsonl"])
        XCTAssertEqual(b.status, 1)
        XCTAssertTrue(b.stderr.contains("line 2: \"name\" is an integer (7), but the column holds strings"), b.stderr)
        XCTAssertEqual(try kura(["query", "s.kura", "p", "--count"]).stdout, "1\n", "a failed import writes nothing")
        try dir.write("c.jsonl", "{\"name\": \"Bo\", \"age\": 5, \"tall\": true}\n")
        XCTAssertEqual(try kura(["import", "s.kura", "p", "c.jsonl"]).status, 0)
        XCTAssertTrue(try kura(["schema", "s.kura"]).stdout.contains("  tall bool\n"))
        // A CSV header that contradicts the entity's type.
        try dir.write("d.csv", "age:string\nold\n")
        let d = try kura(["import", "s.kura", "p", "d.csv"])
        XCTAssertEqual(d.status, 1)
        XCTAssertTrue(d.stderr.contains("column \"age\" is integer in entity \"p\", but the header says text"), d.stderr)
        // Explicit row IDs: a duplicate names its line.
        try dir.write("e.jsonl", "{\"_rowid\": 10, \"name\": \"Ten\"}\n{\"_rowid\": 10, \"name\": \"Again\"}\n")
        let e = try kura(["import", "s.kura", "p", "e.jsonl"])
        XCTAssertEqual(e.status, 1)
        XCTAssertTrue(e.stderr.contains("e.jsonl, line 2: table \"p\" already has a row with ID 10"), e.stderr)
    }

    func testBatchesAndIndexes() throws {
        var csv = "k:int64,v\n"
        for i in 1...25 { csv += "\(i),v\(i % 4)\n" }
        try dir.write("t.csv", csv)
        let r = try kura(["import", "s.kura", "t", "t.csv", "--batch", "10", "--index", "v", "--index", "v,k"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stdout, "committed 10\ncommitted 20\ncommitted 25\n")
        XCTAssertTrue(try kura(["schema", "s.kura"]).stdout.hasSuffix("  index t_v (v)\n  index t_v_k (v, k)\n"))
        XCTAssertTrue(try kura(["explain", "s.kura", "t", "v == 'v1'"]).stdout.contains("index \"t_v"))
        XCTAssertEqual(try kura(["query", "s.kura", "t", "v == 'v1'", "--count"]).stdout, "7\n")
        XCTAssertEqual(try kura(["check", "s.kura"]).status, 0)
        // Importing again appends, and the indexes stay consistent.
        XCTAssertEqual(try kura(["import", "s.kura", "t", "t.csv", "--index", "v"]).status, 0)
        XCTAssertEqual(try kura(["query", "s.kura", "t", "v == 'v1'", "--count"]).stdout, "14\n")
        XCTAssertEqual(try kura(["check", "s.kura"]).stdout.hasSuffix("ok: no problems found\n"), true)
    }

    func testStdinAndFormatOption() throws {
        let r = try kura(["import", "s.kura", "t", "-", "--format", "jsonl"], stdin: "{\"a\": 1}\n{\"a\": 2}\n")
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(try kura(["query", "s.kura", "t", "--count"]).stdout, "2\n")
        try dir.write("data.txt", "a\n3\n")
        XCTAssertEqual(try kura(["import", "s.kura", "t", "data.txt"]).status, 2)
        XCTAssertEqual(try kura(["import", "s.kura", "t", "data.txt", "--format", "csv"]).status, 0)
        XCTAssertEqual(try kura(["import", "s.kura", "t", "data.txt", "--format", "xml"]).status, 2)
    }

    func testUnreadableInputs() throws {
        let r = try kura(["import", "s.kura", "t", "missing.csv"])
        XCTAssertEqual(r.status, 3)
        XCTAssertTrue(r.stderr.contains("cannot read missing.csv: no such file"), r.stderr)
        try dir.write("a.csv", "a\n1\n")
        let s = try kura(["import", "missing-dir/s.kura", "t", "a.csv"])
        XCTAssertEqual(s.status, 3, s.stderr)
        XCTAssertTrue(s.stderr.contains("missing-dir/s.kura"), s.stderr)
        XCTAssertEqual(try kura(["import", "s.kura", "t", "a.csv", "--index", "nope"]).status, 2)
        XCTAssertEqual(try kura(["import", "s.kura", "t", "a.csv", "--batch", "0"]).status, 2)
    }

    /// Runs `kura import ARGS` reading its input in chunks of `chunk` bytes.
    func importChunked(_ chunk: Int, _ args: [String], stdin: String? = nil) throws -> KuraTool.Result {
        try KuraTool.run(["import"] + args, stdin: stdin, cwd: dir.path, environment: ["KURA_IMPORT_CHUNK_BYTES": "\(chunk)"])
    }

    /// Streaming import (issue 14): with chunks of 1, 2, 3 and 7 bytes every
    /// quoted field, doubled quote, line break inside a field, CRLF line end and
    /// the byte order mark crosses a chunk boundary somewhere; each import must
    /// give the rows the test wrote, as the one-chunk (whole-file) import does.
    func testStreamedCSVCrossingChunkBoundaries() throws {
        var csv = "\u{FEFF}id:int64,name,ratio,note\r\n"
        var expected = ""
        for i in 1...90 {
            let name: String, nameJSON: String
            switch i % 3 {
            case 0: name = "\"say \"\"hi\"\",\r\nline \(i)\""; nameJSON = "say \\\"hi\\\",\\r\\nline \(i)"
            case 1: name = "plain\(i)"; nameJSON = "plain\(i)"
            default: name = "\"é,😀\(i)\""; nameJSON = "é,😀\(i)"
            }
            let note = i % 4 == 0 ? "" : i % 4 == 1 ? "\"\"" : "n\(i)"
            let noteJSON = i % 4 == 0 ? "null" : i % 4 == 1 ? "\"\"" : "\"n\(i)\""
            csv += "\(i),\(name),\(Double(i) / 4),\(note)\(i % 2 == 0 ? "\r\n" : "\n")"
            expected += "{\"_rowid\":\(i),\"id\":\(i),\"name\":\"\(nameJSON)\",\"ratio\":\(Double(i) / 4),\"note\":\(noteJSON)}\n"
        }
        try dir.write("t.csv", csv)
        for chunk in [1, 2, 3, 7, 1 << 20] {
            let store = "s\(chunk).kura"
            let r = try importChunked(chunk, [store, "t", "t.csv"])
            XCTAssertEqual(r.status, 0, "chunk \(chunk): \(r.stderr)")
            XCTAssertEqual(r.stdout, "imported 90 rows into t (\(store))\n")
            XCTAssertTrue(try kura(["schema", store]).stdout.contains("  ratio double\n  note text\n"), "chunk \(chunk)")
            XCTAssertEqual(try kura(["dump", store, "t"]).stdout, expected, "chunk \(chunk)")
        }
        // Standard input, kept in a temporary file for the second pass.
        let r = try importChunked(5, ["si.kura", "t", "-", "--format", "csv", "--batch", "40"], stdin: csv)
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stdout, "committed 40\ncommitted 80\ncommitted 90\n")
        XCTAssertEqual(try kura(["dump", "si.kura", "t"]).stdout, expected)
        // A pipe named by path (here /dev/stdin) cannot be read twice either; it
        // must be kept like standard input, not found empty by the second pass.
        let p = try importChunked(64, ["sp.kura", "t", "/dev/stdin", "--format", "csv"], stdin: csv)
        XCTAssertEqual(p.status, 0, p.stderr)
        XCTAssertEqual(try kura(["dump", "sp.kura", "t"]).stdout, expected)
    }

    /// JSON lines streamed in small chunks. Also a regression test: a JSON
    /// lines file with CRLF line ends was read as one line ("\r\n" is one
    /// Swift Character, so splitting the text on "\n" never split it).
    func testStreamedJSONLinesWithCRLF() throws {
        var text = "\u{FEFF}"
        var expected = ""
        for i in 1...40 {
            text += "{\"k\": \(i), \"s\": \"a\\\"b\(i)\"\(i > 30 ? ", \"late\": true" : "")}\(i % 2 == 0 ? "\r\n" : "\n")"
            expected += "{\"_rowid\":\(i),\"k\":\(i),\"s\":\"a\\\"b\(i)\",\"late\":\(i > 30 ? "true" : "null")}\n"
        }
        try dir.write("t.jsonl", text)
        for chunk in [1, 3, 1 << 20] {
            let store = "s\(chunk).kura"
            let r = try importChunked(chunk, [store, "t", "t.jsonl"])
            XCTAssertEqual(r.status, 0, "chunk \(chunk): \(r.stderr)")
            XCTAssertEqual(try kura(["dump", store, "t"]).stdout, expected, "chunk \(chunk)")
        }
    }

    /// Errors found beyond the first chunk name their line, come in the order
    /// they did when the whole file was read first (invalid UTF-8, then quoting
    /// or field counts anywhere, then values), and create no store.
    func testStreamedErrorsBeyondTheFirstChunk() throws {
        var rows = "a:int64,b\n"
        for i in 2...60 { rows += "\(i),x\(i)\n" }
        // A bad value on line 61, a field count error on line 70.
        try dir.write("value.csv", rows + "sixty,x\n" + "1,y\n")
        let v = try importChunked(8, ["s.kura", "t", "value.csv"])
        XCTAssertEqual(v.status, 1)
        XCTAssertTrue(v.stderr.contains("value.csv, line 61: \"a\" is 'sixty', but the column holds int64 values"), v.stderr)
        try dir.write("count.csv", rows + "sixty,x\n" + String(repeating: "1,y\n", count: 8) + "1,y,z\n")
        let c = try importChunked(8, ["s.kura", "t", "count.csv"])
        XCTAssertTrue(c.stderr.contains("count.csv, line 70: 3 fields, but the header names 2 columns"), c.stderr)
        // A quoted field opened on line 62 and never closed outranks both.
        try dir.write("quote.csv", rows + "sixty,x\n" + "1,\"open\n2,z\n")
        let q = try importChunked(8, ["s.kura", "t", "quote.csv"])
        XCTAssertTrue(q.stderr.contains("quote.csv, line 62: a quoted field is never closed"), q.stderr)
        // A byte that is not UTF-8 near the end outranks everything.
        var bad = Data((rows + "1,\"open\n").utf8)
        bad.append(contentsOf: [0x31, 0x2C, 0xC3, 0x0A])
        try bad.write(to: URL(fileURLWithPath: dir.path + "/utf8.csv"))
        let u = try importChunked(8, ["s.kura", "t", "utf8.csv"])
        XCTAssertEqual(u.status, 1)
        XCTAssertTrue(u.stderr.contains("utf8.csv is not valid UTF-8 text"), u.stderr)
        // JSON lines: a type mismatch far from the line that typed the column.
        var json = ""
        for i in 1...50 { json += "{\"x\": \(i)}\n" }
        try dir.write("j.jsonl", json + "{\"x\": \"fifty-one\"}\n")
        let j = try importChunked(8, ["s.kura", "t", "j.jsonl"])
        XCTAssertTrue(j.stderr.contains("j.jsonl, line 51: \"x\" is a string (\"fifty-one\"), but the column holds int64 values (its type comes from its first value, on line 1)"), j.stderr)
        XCTAssertFalse(dir.exists("s.kura"), "a failed import must not leave a new store behind")
    }

    /// Type inference reads every value, however far past the first chunk: a
    /// column of integers with one fraction on its last line is double, a bool
    /// column with one other word on its last line is text.
    func testStreamedInferenceSeesTheLastLine() throws {
        var csv = "v,b,t\n"
        for i in 1...60 { csv += "\(i),\(i % 2 == 0 ? "TRUE" : "false"),\(i)\n" }
        try dir.write("t.csv", csv + "2.5,maybe,61\n")
        let r = try importChunked(4, ["s.kura", "t", "t.csv"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let schema = try kura(["schema", "s.kura"]).stdout
        XCTAssertTrue(schema.hasSuffix("  v double\n  b text\n  t integer\n"), schema)
        XCTAssertEqual(try kura(["query", "s.kura", "t", "v == 2.5 AND b == 'maybe' AND t == 61", "--count"]).stdout, "1\n")
        XCTAssertEqual(try kura(["query", "s.kura", "t", "b == 'TRUE'", "--count"]).stdout, "30\n")
    }

    /// Inference and conversion of number-like CSV fields agree with Swift's
    /// parsers (seeded; replay with KURA_SEED=n): each untyped column holds
    /// decimals (`12`, `-0.5`, `.5`, `5.`), decimals with exponents, or those
    /// with one malformed value among them (`1.2.3`, `-`, `.`, `+-1`); a
    /// column is integer when `Int64(_:)` takes every value, else double when
    /// `Double(_:)` takes every value (with exactly those doubles stored),
    /// else text.
    func testNumberLikeFieldsInferAndConvertAsSwiftParsesThem() throws {
        let seed = ProcessInfo.processInfo.environment["KURA_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1...UInt64(UInt32.max))
        print("testNumberLikeFieldsInferAndConvertAsSwiftParsesThem seed \(seed) (replay with KURA_SEED=\(seed))")
        var rng = SplitMix64(seed: seed)
        func below(_ n: Int) -> Int { Int(rng.next() % UInt64(n)) }
        func digits(_ n: Int) -> String { String((0..<n).map { _ in Character(String(below(10))) }) }
        func decimal() -> String {
            let sign = ["", "", "-", "+"][below(4)]
            switch below(5) {
            case 0: return sign + digits(1 + below(9))
            case 1: return sign + "." + digits(1 + below(6))
            case 2: return sign + digits(1 + below(6)) + "."
            default: return sign + digits(1 + below(6)) + "." + digits(1 + below(12))
            }
        }
        func malformed() -> String {
            let alphabet = Array("0123456789.-+")
            return String((0..<(1 + below(6))).map { _ in alphabet[below(alphabet.count)] })
        }
        let rows = 25
        var cells = Array(repeating: [String](), count: 40)
        for c in 0..<cells.count {
            let kind = below(4)
            for _ in 0..<rows {
                switch kind {
                case 0: cells[c].append(decimal())
                case 1: cells[c].append(decimal() + "e" + ["", "-", "+"][below(3)] + String(below(20)))
                case 2: cells[c].append(below(rows) == 0 ? malformed() : decimal())
                default: cells[c].append(malformed())
                }
            }
        }
        // And always: one malformed value of each kind among decimals.
        for bad in ["1.2.3", ".", "-", "+-1", "1-2", "..5", "-.", "5.."] {
            cells.append((0..<rows).map { $0 == rows / 2 ? bad : decimal() })
        }
        let columns = cells.count
        var csv = (0..<columns).map { "c\($0)" }.joined(separator: ",") + "\n"
        for r in 0..<rows { csv += (0..<columns).map { cells[$0][r] }.joined(separator: ",") + "\n" }
        try dir.write("n.csv", csv)
        let r = try kura(["import", "s.kura", "t", "n.csv"])
        XCTAssertEqual(r.status, 0, "seed \(seed): " + r.stderr)
        let schema = try kura(["schema", "s.kura"]).stdout
        // Each dumped row's fields as their JSON text (`JSONSerialization`
        // does not round every double correctly; Swift's parsers do). The
        // values hold no commas, braces or escapes.
        let dumped: [[String: String]] = try kura(["dump", "s.kura", "t"]).stdout.split(separator: "\n").map { line in
            var fields: [String: String] = [:]
            for part in line.dropFirst().dropLast().split(separator: ",") {
                let kv = part.split(separator: ":", maxSplits: 1)
                guard kv.count == 2 else { continue }
                fields[String(kv[0].dropFirst().dropLast())] = String(kv[1])
            }
            return fields
        }
        XCTAssertEqual(dumped.count, rows)
        for c in 0..<columns {
            let values = cells[c]
            let expected = values.allSatisfy({ Int64($0) != nil }) ? "integer"
                : values.allSatisfy({ Double($0) != nil }) ? "double" : "text"
            XCTAssertTrue(schema.contains("  c\(c) \(expected)\n"), "seed \(seed): c\(c) \(values) should be \(expected): \(schema)")
            for (row, v) in values.enumerated() where row < dumped.count {
                let got = dumped[row]["c\(c)"]
                switch expected {
                case "integer": XCTAssertEqual(got.flatMap { Int64($0) }, Int64(v), "seed \(seed): c\(c) row \(row) '\(v)'")
                case "double": XCTAssertEqual(got.flatMap { Double($0) }, Double(v), "seed \(seed): c\(c) row \(row) '\(v)'")
                default: XCTAssertEqual(got, "\"\(v)\"", "seed \(seed): c\(c) row \(row)")
                }
            }
        }
    }
}
