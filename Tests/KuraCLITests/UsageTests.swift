import XCTest

final class UsageTests: XCTestCase {
    func testHelpExitsZeroAndUnknownCommandExitsTwo() throws {
        let help = try KuraTool.run(["--help"])
        XCTAssertEqual(help.status, 0)
        XCTAssertTrue(help.stdout.contains("usage: kura"))
        let bad = try KuraTool.run(["frobnicate"])
        XCTAssertEqual(bad.status, 2)
        XCTAssertTrue(bad.stderr.contains("unknown command 'frobnicate'"))
    }

    func testTourRunsAndFindsNoProblems() throws {
        let r = try KuraTool.run(["tour", "--rows", "2000"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.contains("no problems"), r.stdout)
    }
}

final class DemoTests: XCTestCase {
    /// `swift run kura demo`, the README's main job.
    func testDemoRunsTheStudentRecordProgram() throws {
        let r = try KuraTool.run(["demo"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.contains("1. insert three students"), r.stdout)
        XCTAssertTrue(r.stdout.contains("3. query students with grade > 80, best first: Han Meimei (92), Wang Fang (88), Li Lei (85)"), r.stdout)
        XCTAssertTrue(r.stdout.contains("5. reopen the store: 2 students, 2 records"), r.stdout)
        XCTAssertEqual(try KuraTool.run(["demo", "--bogus"]).status, 2)
    }
}
