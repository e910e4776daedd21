import Foundation
import XCTest
@testable import KuraEngine

/// `kura check` on a store with external values (FORMAT.md, "External values"):
/// a missing file and an orphan file are each reported; a sound store is ok.
final class ExternalCheckTests: XCTestCase {
    func testCheckReportsMissingAndOrphanExternalFiles() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("s.kura")
        var o = Database.Options()
        o.externalThreshold = 100
        o.durability = .off
        do {
            let db = try Database(path: path, options: o)
            try db.write { tx in
                let t = try tx.createTable("photos", schema: TableSchema([ColumnDefinition("data", .external)]))
                try tx.insert([.blob([UInt8](repeating: 7, count: 500))], into: t)
            }
            db.close()
        }
        XCTAssertEqual(try KuraTool.run(["check", "s.kura"], cwd: dir.path).status, 0)
        let files = try FileManager.default.contentsOfDirectory(atPath: path + "-external")
        XCTAssertEqual(files.count, 1)
        let name = files[0]
        try FileManager.default.moveItem(atPath: path + "-external/" + name, toPath: path + "-external/ffffffffffffffff-0000000000000000")
        let r = try KuraTool.run(["check", "s.kura"], cwd: dir.path)
        XCTAssertEqual(r.status, 1, r.stdout + r.stderr)
        XCTAssertTrue(r.stdout.contains(name) && r.stdout.contains("missing"), r.stdout)
        XCTAssertTrue(r.stdout.contains("ffffffffffffffff-0000000000000000 is an orphan"), r.stdout)
    }
}
