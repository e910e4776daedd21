import Foundation
import XCTest
@testable import KuraEngine

/// External values (ExternalValues.swift, FORMAT.md "External values"): large
/// values of `external` columns in files beside the store, kept consistent with
/// commits, rollbacks, crashes and readers' snapshots.
final class ExternalValueTests: XCTestCase {
    static let path = "/ext.kura"
    static let dir = path + "-external"

    static func options(_ fs: any FileSystem) -> Database.Options {
        var o = Database.Options()
        o.fileSystem = fs
        o.pageSize = 1024
        o.externalThreshold = 1000
        return o
    }

    static func bytes(_ n: Int, _ seed: UInt8) -> [UInt8] { (0..<n).map { UInt8(truncatingIfNeeded: $0 &* 31) &+ seed } }

    static func makeTable(_ db: Database) throws {
        try db.write { tx in
            try tx.createTable("photos", schema: TableSchema([ColumnDefinition("n", .integer), ColumnDefinition("data", .external)]))
        }
    }

    // Regression: a predicate on an external column compared the stored
    // reference text ("kura-external:..."), not the value: a silently wrong
    // answer. Only nil tests are allowed; the rest is refused by name.
    func testPredicatesOnExternalColumnsAreNilTestsOrRefused() throws {
        let db = try Database(path: Self.path, options: Self.options(MemoryFileSystem()))
        try Self.makeTable(db)
        try db.write { tx in
            try tx.insert([.integer(1), .blob(Self.bytes(5000, 1))], into: try tx.table("photos"))
            try tx.insert([.integer(2), .null], into: try tx.table("photos"))
        }
        try db.read { tx in
            XCTAssertEqual(try tx.count(TableQuery("photos", where: KuraPredicate(format: "data != nil"))), 1)
            XCTAssertEqual(try tx.count(TableQuery("photos", where: KuraPredicate(format: "data == nil"))), 1)
            for bad in ["data == %@", "data BEGINSWITH %@", "uppercase(data) != %@"] {
                XCTAssertThrowsError(try tx.count(TableQuery("photos", where: KuraPredicate(format: bad, .blob([1]))))) { e in
                    XCTAssertEqual((e as? KuraError)?.code, .unsupported, "\(bad): \(e)")
                    XCTAssertTrue("\(e)".contains("\"data\"") && "\(e)".contains("externally"), "\(e)")
                }
            }
            XCTAssertThrowsError(try tx.fetch(TableQuery("photos", sort: [SortKey("data")]))) { e in
                XCTAssertEqual((e as? KuraError)?.code, .unsupported, "\(e)")
            }
        }
    }

    func testSmallValuesStayInlineLargeOnesGoToFilesAndSurviveReopen() throws {
        let fs = MemoryFileSystem()
        do {
            let db = try Database(path: Self.path, options: Self.options(fs))
            try Self.makeTable(db)
            try db.write { tx in
                let t = try tx.table("photos")
                try tx.insert([.integer(1), .blob(Self.bytes(999, 1))], into: t)
                try tx.insert([.integer(2), .blob(Self.bytes(5000, 2))], into: t)
                try tx.insert([.integer(3), .null], into: t)
            }
            XCTAssertEqual(try fs.directoryContents(Self.dir).count, 1)
            try db.read { tx in
                let t = try tx.table("photos")
                // The raw record holds the reference; resolved reads give bytes.
                let c = try tx.rows(in: t, from: 2)
                let raw = try XCTUnwrap(try c.next())
                guard case .text(let ref) = try raw.value(at: 1) else { return XCTFail("no reference in the record") }
                XCTAssertTrue(ref.hasPrefix("kura-external:"))
                XCTAssertEqual(try tx.resolvedValues(of: raw, in: t)[1], .blob(Self.bytes(5000, 2)))
            }
            db.close()
        }
        let db = try Database(path: Self.path, options: Self.options(fs))
        try db.read { tx in
            let t = try tx.table("photos")
            XCTAssertEqual(try tx.values(in: t, rowID: 1)?[1], .blob(Self.bytes(999, 1)))
            XCTAssertEqual(try tx.values(in: t, rowID: 2)?[1], .blob(Self.bytes(5000, 2)))
            XCTAssertEqual(try tx.values(in: t, rowID: 3)?[1], .null)
            XCTAssertEqual(try tx.fetch(TableQuery("photos", where: "n == 2")).first?.values[1], .blob(Self.bytes(5000, 2)))
            XCTAssertEqual(try tx.checkExternalValues(), [])
            XCTAssertEqual(try tx.checkIntegrity(), [])
        }
    }

    func testReplacedAndDeletedFilesOutliveOlderReadersThenGo() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/s.kura"
        var o = Database.Options()
        o.externalThreshold = 1000
        o.durability = .off
        let a = try Database(path: path, options: o)
        let b = try Database(path: path, options: o)
        try Self.makeTable(a)
        try a.write { tx in
            let t = try tx.table("photos")
            try tx.insert([.integer(1), .blob(Self.bytes(4000, 1))], into: t)
            try tx.insert([.integer(2), .blob(Self.bytes(4000, 2))], into: t)
        }
        func files() throws -> Set<String> { Set(try FileManager.default.contentsOfDirectory(atPath: path + "-external")) }
        let before = try files()
        XCTAssertEqual(before.count, 2)
        // An update with the same bytes keeps the file.
        try b.write { tx in _ = try tx.update([.integer(1), .blob(Self.bytes(4000, 1))], in: try tx.table("photos"), rowID: 1) }
        XCTAssertEqual(try files(), before)
        try a.read { tx in
            let t = try tx.table("photos")
            // Another connection replaces row 1's value and deletes row 2, then
            // commits again: the old files stay while this snapshot may read them.
            try b.write { tx in
                let t = try tx.table("photos")
                _ = try tx.update([.integer(1), .blob(Self.bytes(3000, 9))], in: t, rowID: 1)
                _ = try tx.delete(from: t, rowID: 2)
            }
            try b.write { tx in try tx.insert([.integer(3), .null], into: try tx.table("photos")) }
            XCTAssertTrue(before.isSubset(of: try files()))
            XCTAssertEqual(try tx.values(in: t, rowID: 1)?[1], .blob(Self.bytes(4000, 1)))
            XCTAssertEqual(try tx.values(in: t, rowID: 2)?[1], .blob(Self.bytes(4000, 2)))
        }
        // No reader left: the next write transaction removes them.
        try b.write { tx in try tx.insert([.integer(4), .null], into: try tx.table("photos")) }
        let after = try files()
        XCTAssertTrue(after.isDisjoint(with: before))
        XCTAssertEqual(after.count, 1)
        try b.read { tx in
            XCTAssertEqual(try tx.values(in: try tx.table("photos"), rowID: 1)?[1], .blob(Self.bytes(3000, 9)))
            XCTAssertEqual(try tx.checkExternalValues(), [])
        }
        // Dropping the table trashes the rest.
        try b.write { tx in try tx.dropTable("photos") }
        try b.write { tx in _ = try tx.createTable("other") }
        XCTAssertEqual(try files(), [])
        a.close()
        b.close()
    }

    func testRollbackAndFailedWritesLeaveNoFile() throws {
        let fs = FaultInjectingFileSystem()
        let db = try Database(path: Self.path, options: Self.options(fs))
        try Self.makeTable(db)
        struct Abort: Error {}
        XCTAssertThrowsError(try db.write { tx in
            try tx.insert([.integer(1), .blob(Self.bytes(5000, 1))], into: try tx.table("photos"))
            throw Abort()
        })
        XCTAssertEqual(try fs.directoryContents(Self.dir), [])
        // A full disk while writing the file fails the insert, and the save.
        fs.failOperation(.write, after: 1, with: .diskFull)
        XCTAssertThrowsError(try db.write { tx in
            try tx.insert([.integer(2), .blob(Self.bytes(5000, 2))], into: try tx.table("photos"))
        }) { XCTAssertEqual(($0 as? KuraError)?.code, .diskFull) }
        fs.clearFaults()
        XCTAssertEqual(try fs.directoryContents(Self.dir), [])
        try db.read { tx in XCTAssertEqual(try tx.rowCount(try tx.table("photos")), 0) }
        // A unique-index failure after the file was written trashes it.
        try db.write { tx in
            let t = try tx.table("photos")
            try tx.createIndex("photos_n", on: t, columns: [IndexColumn("n")], unique: true)
            try tx.insert([.integer(7), .null], into: t)
            XCTAssertThrowsError(try tx.insert([.integer(7), .blob(Self.bytes(5000, 3))], into: t))
        }
        try db.write { tx in _ = try tx.createTable("touch") }
        XCTAssertEqual(try fs.directoryContents(Self.dir), [])
        XCTAssertThrowsError(try db.write { tx in
            try tx.createIndex("photos_data", on: try tx.table("photos"), columns: [IndexColumn("data")])
        }) { XCTAssertEqual(($0 as? KuraError)?.code, .invalidArgument) }
    }

    func testOrphanOfACrashedTransactionIsReportedThenSwept() throws {
        let fs = MemoryFileSystem()
        let db = try Database(path: Self.path, options: Self.options(fs))
        try Self.makeTable(db)
        try db.write { tx in try tx.insert([.integer(1), .blob(Self.bytes(5000, 1))], into: try tx.table("photos")) }
        // The crash: the process dies after writing the file, before the commit.
        var crashed: MemoryFileSystem?
        struct Abort: Error {}
        _ = try? db.write { tx in
            try tx.insert([.integer(2), .blob(Self.bytes(6000, 2))], into: try tx.table("photos"))
            crashed = MemoryFileSystem()
            for (p, d) in fs.lock.withLock({ fs.files }) { crashed!.setContents(of: p, to: d.bytes) }
            throw Abort()
        }
        let image = try XCTUnwrap(crashed)
        XCTAssertEqual(try image.directoryContents(Self.dir).count, 2)
        let reopened = try Database(path: Self.path, options: Self.options(image))
        let problems = try reopened.read { tx in try tx.checkExternalValues() }
        XCTAssertEqual(problems.count, 1)
        XCTAssertTrue(problems.first?.message.contains("orphan") == true, "\(problems)")
        try reopened.write { _ in }
        XCTAssertEqual(try image.directoryContents(Self.dir).count, 1)
        try reopened.read { tx in
            XCTAssertEqual(try tx.checkExternalValues(), [])
            XCTAssertEqual(try tx.values(in: try tx.table("photos"), rowID: 1)?[1], .blob(Self.bytes(5000, 1)))
        }
    }

    func testMissingOrDamagedFileIsAnErrorNamingColumnRowAndFile() throws {
        let fs = MemoryFileSystem()
        let db = try Database(path: Self.path, options: Self.options(fs))
        try Self.makeTable(db)
        try db.write { tx in try tx.insert([.integer(1), .blob(Self.bytes(5000, 1))], into: try tx.table("photos")) }
        let name = try XCTUnwrap(try fs.directoryContents(Self.dir).first)
        let file = Self.dir + "/" + name
        var damaged = try XCTUnwrap(fs.contents(of: file))
        damaged[100] ^= 1
        fs.setContents(of: file, to: damaged)
        for expected in ["damaged", "missing"] {
            XCTAssertThrowsError(try db.read { tx in try tx.values(in: try tx.table("photos"), rowID: 1) }) { e in
                let e = e as? KuraError
                XCTAssertEqual(e?.code, .corrupt)
                for part in ["\"data\"", "\"photos\"", "row 1", name, expected] {
                    XCTAssertTrue(e?.message.contains(part) == true, "\(part) not in \(e?.message ?? "")")
                }
            }
            let problems = try db.read { tx in try tx.checkExternalValues() }
            XCTAssertTrue(problems.contains { $0.message.contains(name) && $0.message.contains(expected) }, "\(problems)")
            try fs.remove(file)
        }
    }
}
