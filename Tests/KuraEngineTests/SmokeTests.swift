import XCTest
@testable import KuraEngine

final class SmokeTests: XCTestCase {
    func testInsertGetScanReopen() throws {
        let fs = MemoryFileSystem()
        var o = Database.Options()
        o.fileSystem = fs
        o.pageSize = 512
        do {
            let db = try Database(path: "/t.kura", options: o)
            try db.write { tx in
                let t = try tx.createTable("people")
                for i in 0..<2000 { try tx.insert([.integer(Int64(i)), .text("name\(i)")], into: t) }
            }
            try db.read { tx in
                let t = try tx.table("people")
                XCTAssertEqual(try tx.rowCount(t), 2000)
                XCTAssertEqual(try tx.values(in: t, rowID: 1000), [.integer(999), .text("name999")])
                let c = try tx.rows(in: t)
                var n = 0
                var last: Int64 = 0
                while let r = try c.next() { n += 1; XCTAssertGreaterThan(r.rowID, last); last = r.rowID }
                XCTAssertEqual(n, 2000)
            }
            db.close()
        }
        let db = try Database(path: "/t.kura", options: o)
        try db.read { tx in
            let t = try tx.table("people")
            XCTAssertEqual(try tx.rowCount(t), 2000)
            XCTAssertEqual(try tx.values(in: t, rowID: 2000), [.integer(1999), .text("name1999")])
        }
        try db.write { tx in
            let t = try tx.table("people")
            for i in stride(from: 1, through: 2000, by: 2) { XCTAssertTrue(try tx.delete(from: t, rowID: Int64(i))) }
        }
        try db.read { tx in
            let t = try tx.table("people")
            XCTAssertEqual(try tx.rowCount(t), 1000)
            XCTAssertNil(try tx.values(in: t, rowID: 1))
            XCTAssertEqual(try tx.values(in: t, rowID: 2), [.integer(1), .text("name1")])
        }
    }
}
