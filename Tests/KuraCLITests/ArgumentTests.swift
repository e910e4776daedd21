import Foundation
import XCTest

/// Missing files (exit 3, the message names the file) and bad arguments
/// (exit 2, the message names the argument), for every command.
final class ArgumentTests: XCTestCase {
    var dir: TemporaryDirectory!

    override func setUpWithError() throws {
        dir = try TemporaryDirectory()
        try dir.write("a.csv", "name,age:int64\nAda,36\n")
        XCTAssertEqual(try kura(["import", "s.kura", "people", "a.csv"]).status, 0)
    }

    override func tearDown() { dir = nil }

    func kura(_ args: [String]) throws -> KuraTool.Result { try KuraTool.run(args, cwd: dir.path) }

    func testMissingStoreExitsThreeAndNamesTheFile() throws {
        for args in [["info"], ["pages"], ["page", "1"], ["wal"], ["check"], ["stats"], ["schema"], ["dump"],
                     ["query", "people"], ["explain", "people"], ["checkpoint"], ["compact"]] {
            let r = try kura([args[0], "missing.kura"] + args.dropFirst())
            XCTAssertEqual(r.status, 3, "\(args): \(r.stderr)")
            XCTAssertTrue(r.stderr.contains("missing.kura"), "\(args): \(r.stderr)")
            XCTAssertFalse(dir.exists("missing.kura"), "\(args) created the store")
            XCTAssertFalse(dir.exists("missing.kura-wal"), "\(args) created a log")
        }
        let d = try kura(["info", "."])
        XCTAssertEqual(d.status, 3)
        XCTAssertTrue(d.stderr.contains("directory"), d.stderr)
    }

    func testBadArgumentsExitTwoAndNameTheArgument() throws {
        let cases: [([String], String)] = [
            (["info"], "missing argument"),
            (["info", "s.kura", "extra"], "unexpected argument 'extra'"),
            (["info", "s.kura", "--bogus"], "unknown option '--bogus'"),
            (["pages", "s.kura", "--json=yes"], "takes no value"),
            (["page", "s.kura", "zero"], "'zero'"),
            (["page", "s.kura", "0"], "'0'"),
            (["page", "s.kura", "99"], "page 99 is not in the store s.kura"),
            (["check", "s.kura", "--max", "-1"], "--max"),
            (["query", "s.kura", "people", "--limit"], "--limit needs a value"),
            (["query", "s.kura", "people", "--limit", "x"], "--limit"),
            (["query", "s.kura", "people", "--sort", "age:sideways"], "asc or desc"),
            (["query", "s.kura", "nobody"], "no entity (table) named \"nobody\""),
            (["query", "s.kura", "people", "age >"], "does not parse"),
            (["query", "s.kura", "people", "height > 3"], "no column \"height\""),
            (["query", "s.kura", "people", "--sort", "height"], "height"),
            (["explain", "s.kura", "nobody"], "nobody"),
            (["dump", "s.kura", "nobody"], "nobody"),
            (["import", "s.kura", "people"], "missing argument"),
            (["import", "s.kura", "people", "a.csv", "--format", "yaml"], "yaml"),
            (["frobnicate"], "unknown command 'frobnicate'"),
        ]
        for (args, message) in cases {
            let r = try kura(args)
            XCTAssertEqual(r.status, 2, "\(args): \(r.stderr)")
            XCTAssertTrue(r.stderr.contains(message), "\(args): expected '\(message)' in: \(r.stderr)")
        }
        let none = try kura([])
        XCTAssertEqual(none.status, 2)
        XCTAssertTrue(none.stderr.contains("usage: kura"))
    }

    func testDoubleDashEndsOptions() throws {
        // A predicate may start with '-' after `--`.
        let r = try kura(["query", "s.kura", "people", "--count", "--", "-age < 0"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stdout, "1\n")
    }
}

/// While another connection is inside a transaction (here: this test process
/// holding the reader lock byte shared, as a reading connection does; FORMAT.md,
/// "Concurrency and locks"), a checkpoint is postponed, and compaction commits
/// through the log but leaves the store file as it is until a later checkpoint.
final class BusyTests: XCTestCase {
    func testCompactAndCheckpointWhileAnotherConnectionReads() throws {
        let dir = try TemporaryDirectory()
        try dir.write("a.csv", "name\nAda\nGrace\n")
        XCTAssertEqual(try KuraTool.run(["import", "s.kura", "people", "a.csv", "--no-checkpoint"], cwd: dir.path).status, 0)
        let before = dir.bytes("s.kura")
        let fd = open(dir.file("s.kura"), O_RDWR)
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { close(fd) }
        var fl = flock()
        fl.l_type = Int16(F_RDLCK)
        fl.l_whence = Int16(SEEK_SET)
        fl.l_start = 0x7FFF_0001
        fl.l_len = 1
        // An open file description lock (F_OFD_SETLK = 37), like the engine's: a
        // classic POSIX lock would vanish when this process closes any other
        // descriptor of the file.
        XCTAssertEqual(fcntl(fd, 37, &fl), 0)

        let c = try KuraTool.run(["compact", "s.kura"], cwd: dir.path)
        XCTAssertEqual(c.status, 0, c.stderr)
        XCTAssertTrue(c.stdout.contains("the file shrinks at a later checkpoint"), c.stdout)
        let p = try KuraTool.run(["checkpoint", "s.kura"], cwd: dir.path)
        XCTAssertEqual(p.status, 1, p.stderr)
        XCTAssertTrue(p.stderr.contains("postponed"), p.stderr)
        XCTAssertEqual(dir.bytes("s.kura"), before)
        // Readers are not blocked by readers.
        XCTAssertEqual(try KuraTool.run(["check", "s.kura"], cwd: dir.path).status, 0)
        XCTAssertEqual(try KuraTool.run(["query", "s.kura", "people", "--count"], cwd: dir.path).stdout, "2\n")

        fl.l_type = Int16(F_UNLCK)
        XCTAssertEqual(fcntl(fd, 37, &fl), 0)
        XCTAssertEqual(try KuraTool.run(["checkpoint", "s.kura"], cwd: dir.path).status, 0)
        XCTAssertEqual(try KuraTool.run(["query", "s.kura", "people", "--count"], cwd: dir.path).stdout, "2\n")
        XCTAssertEqual(try KuraTool.run(["check", "s.kura"], cwd: dir.path).status, 0)
    }
}
