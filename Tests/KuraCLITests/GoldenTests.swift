import Foundation
import XCTest

/// Every command on a known store, compared with golden output. The store is
/// made by `kura import` from a fixed CSV with 512-byte pages, so its bytes are
/// the same in every run except the random database ID (and the log's random
/// generation and salts), which `masked` replaces.
final class GoldenTests: XCTestCase {
    var dir: TemporaryDirectory!

    static let csv = """
        name:string,age:int64,score:double,member:bool,joined:date,note
        Ada,36,1.5,true,2020-01-02,first
        Grace,45,2,false,2019-05-06T07:08:09Z,"with, comma"
        Linus,,3.25,true,,
        Margaret,33,,false,2021-12-31,""

        """

    override func setUpWithError() throws {
        dir = try TemporaryDirectory()
        try dir.write("people.csv", Self.csv)
        let r = try kura(["import", "s.kura", "people", "people.csv", "--index", "age", "--page-size", "512"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stdout, "imported 4 rows into people (s.kura)\n")
    }

    override func tearDown() { dir = nil }

    func kura(_ args: [String], stdin: String? = nil) throws -> KuraTool.Result {
        try KuraTool.run(args, stdin: stdin, cwd: dir.path)
    }

    /// Runs `args`, expecting exit status 0 and exactly `expected` on stdout.
    func golden(_ args: [String], _ expected: String, status: Int32 = 0, file: StaticString = #filePath, line: UInt = #line) throws {
        let r = try kura(args)
        XCTAssertEqual(r.status, status, "kura \(args.joined(separator: " ")): \(r.stderr)", file: file, line: line)
        let got = masked(r.stdout)
        if got != expected {
            XCTFail("kura \(args.joined(separator: " ")) printed:\n\(got)\n--- expected:\n\(expected)", file: file, line: line)
        }
    }

    func testInfo() throws {
        try golden(["info", "s.kura"], """
            store:           s.kura
            file size:       2560 bytes
            format version:  10
            page size:       512
            page count:      5
            free pages:      1 (freelist head 5)
            change counter:  2
            database ID:     <ID>
            catalog root:    2
            next catalog ID: 3
            log:             40 bytes, 0 committed frames in 0 transactions
            checkpoint due:  no (0 of 1000 frames)
            tables: 1
              people: 4 rows, root page 3, columns: name, age, score, member, joined, note
            indexes: 1
              people_age on people(age), root page 4

            """)
    }

    func testSchema() throws {
        try golden(["schema", "s.kura"], """
            table people (4 rows, next row ID 5)
              name text
              age integer
              score double
              member bool
              joined date
              note text
              index people_age (age)

            """)
    }

    func testStats() throws {
        try golden(["stats", "s.kura"], """
            object                  kind     pages  leaf  interior  overflow  entries  payload  fill  depth
            catalog                 catalog      1     1         0         0        2      155   33%      1
            people                  table        1     1         0         0        4      105   24%      1
            people_age (on people)  index        1     1         0         0        4       18    6%      1
            store: 5 pages of 512 bytes = 2560 bytes; 1 header, 3 in trees, 1 free, 0 leaked

            """)
    }

    func testPages() throws {
        try golden(["pages", "s.kura"], """
            page  kind            owner               items  fill  overflow
               1  header          -                       0     -  0
               2  table-leaf      catalog                 2   33%  0
               3  table-leaf      table "people"          4   24%  0
               4  index-leaf      index "people_age"      4    6%  0
               5  freelist-trunk  freelist                0    0%  0

            """)
    }

    func testCheck() throws {
        try golden(["check", "s.kura"], """
            checked s.kura: 5 pages of 512 bytes, 1 tables, 1 indexes, 4 rows, 1 free pages
            ok: no problems found

            """)
    }

    func testPage() throws {
        try golden(["page", "s.kura", "3"], """
            page 3 of s.kura (512 bytes), from the store file at offset 1024
            kind: table leaf (byte 0 = 2); used as: table-leaf, owner: table "people"
            checksum: stored 0xf2717d39bc74270a, computed 0xf2717d39bc74270a: ok
            header:
              kind:               2
              flags:              7
              cell count:         4
              content start:      379
              fragmented bytes:   0
              tree root:          3
              next row ID:        5
              row count:          4
              cell form:          compact
              header:             short
            cells: 4
              #0 at 457, 31 bytes, key 81 01 (row 1), value 28 bytes: ["Ada", 36, 1.5, true, 599616000.0, "first"]
              #1 at 425, 32 bytes, key 81 02 (row 2), value 29 bytes: ["Grace", 45, 2.0, false, 578819289.0, "with, comma"]
              #2 at 402, 23 bytes, key 81 03 (row 3), value 20 bytes: ["Linus", null, 3.25, true, null, null]
              #3 at 379, 23 bytes, key 81 04 (row 4), value 20 bytes: ["Margaret", 33, null, false, 662601600.0, ""]
            regions:
                  0 ..< 12       12 bytes  header
                 12 ..< 20        8 bytes  cell pointers
                 20 ..< 379     359 bytes  free
                379 ..< 402      23 bytes  cell 3
                402 ..< 425      23 bytes  cell 2
                425 ..< 457      32 bytes  cell 1
                457 ..< 488      31 bytes  cell 0
                488 ..< 504      16 bytes  table counters
                504 ..< 512       8 bytes  checksum

            """)
    }

    func testPageHex() throws {
        try golden(["page", "s.kura", "4", "--hex"], """
            page 4 of s.kura (512 bytes), from the store file at offset 1536
            kind: index leaf (byte 0 = 4); used as: index-leaf, owner: index "people_age"
            checksum: stored 0xd299e90c8ecccfa, computed 0xd299e90c8ecccfa: ok
            header:
              kind:               4
              flags:              6
              cell count:         4
              content start:      482
              fragmented bytes:   0
              tree root:          4
              cell form:          compact
              header:             short
            cells: 4
              #0 at 500, 4 bytes, key 00 81 03, value 0 bytes
              #1 at 494, 6 bytes, key 10 81 21 81 04, value 0 bytes
              #2 at 488, 6 bytes, key 10 81 24 81 01, value 0 bytes
              #3 at 482, 6 bytes, key 10 81 2d 81 02, value 0 bytes
            regions:
                  0 ..< 12       12 bytes  header
                 12 ..< 20        8 bytes  cell pointers
                 20 ..< 482     462 bytes  free
                482 ..< 488       6 bytes  cell 3
                488 ..< 494       6 bytes  cell 2
                494 ..< 500       6 bytes  cell 1
                500 ..< 504       4 bytes  cell 0
                504 ..< 512       8 bytes  checksum
            hex:
            0000  04 06 04 00 e2 01 00 00  04 00 00 00 f4 01 ee 01  ................
            0010  e8 01 e2 01 00 00 00 00  00 00 00 00 00 00 00 00  ................
            0020  00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00  ................
            *
            01e0  00 00 05 10 81 2d 81 02  05 10 81 24 81 01 05 10  .....-.....$....
            01f0  81 21 81 04 03 00 81 03  fa cc ec c8 90 9e 29 0d  .!............).

            """)
    }

    func testHeaderPage() throws {
        let r = try kura(["page", "s.kura", "1"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.contains("  magic:              KuraDB\\n\\0\n  format version:     10\n  page size:          512\n  page count:         5\n"), r.stdout)
    }

    func testQuery() throws {
        try golden(["query", "s.kura", "people", "age >= 30", "--sort", "age:desc"], """
            #2 name="Grace" age=45 score=2.0 member=false joined=2019-05-06T07:08:09Z note="with, comma"
            #1 name="Ada" age=36 score=1.5 member=true joined=2020-01-02T00:00:00Z note="first"
            #4 name="Margaret" age=33 score=null member=false joined=2021-12-31T00:00:00Z note=""

            """)
        try golden(["query", "s.kura", "people", "--json", "--limit", "2", "--offset", "1"], """
            {"name":"Grace","age":45,"score":2.0,"member":false,"joined":"2019-05-06T07:08:09Z","note":"with, comma"}
            {"name":"Linus","age":null,"score":3.25,"member":true,"joined":null,"note":null}

            """)
        try golden(["query", "s.kura", "people", "name BEGINSWITH[c] 'g' OR score > 3", "--sort", "name"], """
            #2 name="Grace" age=45 score=2.0 member=false joined=2019-05-06T07:08:09Z note="with, comma"
            #3 name="Linus" age=null score=3.25 member=true joined=null note=null

            """)
        try golden(["query", "s.kura", "people", "age == nil", "--count"], "1\n")
        try golden(["query", "s.kura", "people", "--count", "--json"], "{\"count\":4}\n")
        // No match: exit 1.
        try golden(["query", "s.kura", "people", "age > 100"], "", status: 1)
        try golden(["query", "s.kura", "people", "age > 100", "--count"], "0\n", status: 1)
    }

    func testExplain() throws {
        try golden(["explain", "s.kura", "people", "age >= 30", "--sort", "age:desc"], """
            query on table "people" (4 rows)
              search index "people_age" (age) using age >= 30
              key ranges: 1 [10811e ... 10887fffffffffffffff*]
              rows come out in sort order (backward index walk)
              the key ranges are exactly the predicate: rows are not tested again
              estimated costs (1 = one row scanned):
                  table scan: 4.0 rows, about 4.0 matching: cost 16
                * index "people_age": about 4.0 entries in 1 key range: cost 13

            """)
        let j = try kura(["explain", "s.kura", "people", "--json"])
        XCTAssertEqual(j.status, 0, j.stderr)
        XCTAssertNotNil((parseJSON(j.stdout) as? [String: Any])?["plan"] as? [String])
    }

    func testDump() throws {
        try golden(["dump", "s.kura", "people"], """
            {"_rowid":1,"name":"Ada","age":36,"score":1.5,"member":true,"joined":"2020-01-02T00:00:00Z","note":"first"}
            {"_rowid":2,"name":"Grace","age":45,"score":2.0,"member":false,"joined":"2019-05-06T07:08:09Z","note":"with, comma"}
            {"_rowid":3,"name":"Linus","age":null,"score":3.25,"member":true,"joined":null,"note":null}
            {"_rowid":4,"name":"Margaret","age":33,"score":null,"member":false,"joined":"2021-12-31T00:00:00Z","note":""}

            """)
        let all = try kura(["dump", "s.kura"])
        XCTAssertEqual(all.status, 0)
        XCTAssertTrue(all.stdout.hasPrefix("{\"_entity\":\"people\",\"_rowid\":1,\"name\":\"Ada\""), all.stdout)
        // A dump imports back into another store with the same rows.
        try dir.write("dump.jsonl", try kura(["dump", "s.kura", "people"]).stdout)
        let r = try kura(["import", "copy.kura", "people", "dump.jsonl"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(try kura(["query", "copy.kura", "people", "--json"]).stdout, try kura(["query", "s.kura", "people", "--json"]).stdout)
    }

    func testWalCheckpointAndInfo() throws {
        try dir.write("more.jsonl", "{\"name\":\"Zed\",\"age\":7,\"extra\":1.5}\n{\"name\":\"Amy\",\"age\":8}\n")
        try golden(["import", "s.kura", "people", "more.jsonl", "--batch", "1", "--no-checkpoint"], "committed 1\ncommitted 2\n")
        try golden(["wal", "s.kura"], """
            log: s.kura-wal
            size: 37024 bytes, 7 whole frames of 536 bytes, then 33232 zero bytes written ahead for later commits
            header: magic ok, version 2, page size 512, generation <G>, salts <S>
                    database ID <ID> (matches the store), checksum ok
            header valid: yes
            committed log: 7 frames in 2 transactions, page count after the last commit 5
            frame  offset  page  commit  salts  chain  page checksum  status
                1      40     1       -  ok     ok     ok             committed
                2     576     2       -  ok     ok     ok             committed
                3    1112     3       -  ok     ok     ok             committed
                4    1648     4       -  ok     ok     ok             committed
                5    2184     5       5  ok     ok     ok             committed (commit)
                6    2720     3       -  ok     ok     ok             committed
                7    3256     4       5  ok     ok     ok             committed (commit)

            """)
        let info = try kura(["info", "s.kura"])
        // The second commit changed no header field but the change counter,
        // so it left page 1 out (format 4); `info` derives the counter.
        XCTAssertTrue(info.stdout.contains("log:             37024 bytes, 7 committed frames in 2 transactions, last commit at frame 7\n"), info.stdout)
        XCTAssertTrue(info.stdout.contains("change counter:  4\n"), info.stdout)
        XCTAssertTrue(info.stdout.contains("people: 6 rows, root page 3, columns: name, age, score, member, joined, note, extra"), info.stdout)
        // The raw readers see the committed log: page 3 now comes from frame 6.
        XCTAssertTrue(try kura(["page", "s.kura", "3"]).stdout.hasPrefix("page 3 of s.kura (512 bytes), from log frame 6\n"))
        try golden(["check", "s.kura"], """
            checked s.kura: 5 pages of 512 bytes, 1 tables, 1 indexes, 6 rows, 0 free pages
            ok: no problems found

            """)
        try golden(["checkpoint", "s.kura"], "checkpointed 7 frames into s.kura\n")
        try golden(["checkpoint", "s.kura"], "nothing to checkpoint: the log of s.kura holds no committed frames\n")
        XCTAssertEqual(dir.bytes("s.kura-wal")?.count, 40)
        XCTAssertTrue(try kura(["page", "s.kura", "3"]).stdout.hasPrefix("page 3 of s.kura (512 bytes), from the store file at offset 1024\n"))
        // The checkpoint carried the counter into the store file's page 1.
        XCTAssertTrue(try kura(["info", "s.kura"]).stdout.contains("change counter:  4\n"))
    }

    func testCompact() throws {
        let before = try kura(["dump", "s.kura"]).stdout
        try golden(["compact", "s.kura"], "compacted s.kura: 5 pages (1 free) -> 4 pages of 512 bytes\n")
        XCTAssertEqual(dir.bytes("s.kura")?.count, 2048)
        try golden(["check", "s.kura"], """
            checked s.kura: 4 pages of 512 bytes, 1 tables, 1 indexes, 4 rows, 0 free pages
            ok: no problems found

            """)
        XCTAssertEqual(try kura(["dump", "s.kura"]).stdout, before)
        try golden(["schema", "s.kura"], try kura(["schema", "s.kura"]).stdout)
        XCTAssertTrue(try kura(["schema", "s.kura"]).stdout.contains("  index people_age (age)\n"))
        // Row IDs are never reused after compaction: the next row gets ID 5.
        try dir.write("one.csv", "name\nNew\n")
        XCTAssertEqual(try kura(["import", "s.kura", "people", "one.csv"]).status, 0)
        XCTAssertTrue(try kura(["query", "s.kura", "people", "name == 'New'"]).stdout.hasPrefix("#5 "))
    }

    func testJSONOnEveryReadingCommand() throws {
        for args in [["info", "s.kura"], ["check", "s.kura"], ["stats", "s.kura"], ["schema", "s.kura"],
                     ["page", "s.kura", "2"], ["wal", "s.kura"], ["explain", "s.kura", "people"]] {
            let r = try kura(args + ["--json"])
            XCTAssertEqual(r.status, 0, "\(args): \(r.stderr)")
            XCTAssertTrue(parseJSON(r.stdout) is [String: Any], "\(args): \(r.stdout)")
        }
        for args in [["pages", "s.kura"], ["dump", "s.kura"], ["query", "s.kura", "people"]] {
            let r = try kura(args + ["--json"])
            XCTAssertEqual(r.status, 0, "\(args): \(r.stderr)")
            let lines = r.stdout.split(separator: "\n")
            XCTAssertEqual(lines.count, args[0] == "pages" ? 5 : 4)
            for l in lines { XCTAssertTrue(parseJSON(String(l)) is [String: Any], "\(args): \(l)") }
        }
        let info = parseJSON(try kura(["info", "s.kura", "--json"]).stdout) as? [String: Any]
        XCTAssertEqual(info?["pageCount"] as? Int, 5)
        XCTAssertEqual(info?["freePages"] as? Int, 1)
        let tables = info?["tables"] as? [[String: Any]]
        XCTAssertEqual(tables?.first?["name"] as? String, "people")
        XCTAssertEqual(tables?.first?["rows"] as? Int, 4)
        let check = parseJSON(try kura(["check", "s.kura", "--json"]).stdout) as? [String: Any]
        XCTAssertEqual(check?["ok"] as? Bool, true)
        XCTAssertEqual(check?["problemCount"] as? Int, 0)
    }

    /// Reading commands never modify the store, and never create its log.
    func testReadingCommandsDoNotWrite() throws {
        try FileManager.default.removeItem(atPath: dir.file("s.kura-wal"))
        let before = dir.bytes("s.kura")
        for args in [["info"], ["pages"], ["page", "2"], ["wal"], ["check"], ["stats"], ["schema"], ["dump"],
                     ["query", "people", "age > 1"], ["explain", "people", "age > 1"]] {
            let r = try kura([args[0], "s.kura"] + args.dropFirst())
            XCTAssertEqual(r.status, 0, "\(args): \(r.stderr)")
            XCTAssertFalse(dir.exists("s.kura-wal"), "\(args) created the log")
        }
        XCTAssertEqual(dir.bytes("s.kura"), before)
    }

    func testHelpForEveryCommand() throws {
        for c in ["info", "pages", "page", "wal", "check", "stats", "schema", "dump", "query", "explain", "import",
                  "checkpoint", "compact", "tour", "codegen"] {
            let r = try kura([c, "--help"])
            XCTAssertEqual(r.status, 0, c)
            XCTAssertTrue(r.stdout.contains("usage: kura \(c)"), c)
            if c != "tour" { XCTAssertTrue(r.stdout.contains("exit codes"), c) }
        }
        let top = try kura(["--help"])
        XCTAssertTrue(top.stdout.contains("exit codes:\n  0  ok\n"), top.stdout)
    }
}
