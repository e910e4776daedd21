import Foundation
import XCTest
@testable import KuraEngine

/// A child process commits in a loop and is killed with SIGKILL at random
/// moments; after each kill every commit it reported must be there, nothing it
/// did not commit may be, and the store must check clean.
final class CrashTests: XCTestCase {
    static var childURL: URL? {
        let candidates = [
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent(),
            Bundle(for: CrashTests.self).bundleURL.deletingLastPathComponent(),
        ]
        for dir in candidates {
            let u = dir.appendingPathComponent("KuraTestChild")
            if FileManager.default.isExecutableFile(atPath: u.path) { return u }
        }
        return nil
    }

    func testKilledWriterLosesNothingAcknowledged() throws {
        guard let child = Self.childURL else { throw XCTSkip("KuraTestChild binary not found beside the test bundle") }
        let dir = try TemporaryDirectory()
        let path = dir.path + "/crash.kura"
        var rng = SplitMix64(seed: UInt64(Date().timeIntervalSince1970))
        var acknowledged: Int64 = 0
        var kills = 0
        for round in 0..<24 {
            let p = Process()
            p.executableURL = child
            p.arguments = [path, round % 3 == 0 ? "full" : "normal", "\(20 + Int(rng.next() % 60))"]
            let out = Pipe()
            p.standardOutput = out
            p.standardError = FileHandle.standardError
            try p.run()
            usleep(UInt32(40_000 + rng.next() % 250_000))
            kill(p.processIdentifier, SIGKILL)
            p.waitUntilExit()
            kills += 1
            let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            // Only complete lines were acknowledged; a torn last line was not.
            let lines = text.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
            if let last = lines.last, let k = Int64(last) { acknowledged = max(acknowledged, k) }

            let db = try Database(path: path)
            try db.read { tx in
                guard try tx.tableExists("log") else {
                    XCTAssertEqual(acknowledged, 0)
                    return
                }
                let log = try tx.table("log")
                let counter = try tx.values(in: try tx.table("counter"), rowID: 1)![0].integerValue!
                XCTAssertGreaterThanOrEqual(counter, acknowledged, "round \(round): an acknowledged commit was lost")
                XCTAssertLessThanOrEqual(counter, acknowledged + 1, "round \(round): more than the one in-flight commit appeared")
                // Both tables changed in one transaction: the log holds exactly 1...counter.
                XCTAssertEqual(try tx.rowCount(log), Int(counter))
                let c = try tx.rows(in: log)
                var expected: Int64 = 1
                while let r = try c.next() {
                    XCTAssertEqual(r.rowID, expected)
                    XCTAssertEqual(try r.value(at: 0), .integer(expected))
                    if case .blob(let b) = try r.value(at: 1) { XCTAssertTrue(b.allSatisfy { $0 == UInt8(truncatingIfNeeded: expected) }) }
                    expected += 1
                }
                XCTAssertEqual(try tx.checkIntegrity(), [], "round \(round)")
                acknowledged = counter
            }
            db.close()
        }
        XCTAssertEqual(kills, 24)
        XCTAssertGreaterThan(acknowledged, 100, "the child committed too little to test anything")
        print("crash test: \(kills) kills, \(acknowledged) commits survived")
    }
}
