import XCTest
import Kura

final class ModuleTests: XCTestCase {
    /// `import Kura` alone gives the engine's public types too.
    func testKuraReexportsTheEngine() throws {
        let db = try Database.inMemory()
        try db.write { tx in try tx.insert([.integer(1)], into: try tx.createTable("t")) }
        XCTAssertEqual(try db.read { tx in try tx.rowCount(try tx.table("t")) }, 1)
    }
}
