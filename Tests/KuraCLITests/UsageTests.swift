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
