import XCTest
@testable import KuraEngine

/// Damaged files give a clear error naming the page, or recover cleanly; never a crash.
final class CorruptionTests: XCTestCase {
    let path = "/c.kura"

    func options(_ fs: MemoryFileSystem, threshold: Int = 1000) -> Database.Options {
        var o = Database.Options()
        o.fileSystem = fs
        o.durability = .normal
        o.checkpointThreshold = threshold
        return o
    }

    /// A store with one table of 3000 rows, checkpointed into the main file.
    func makeStore() throws -> MemoryFileSystem {
        let fs = MemoryFileSystem()
        let db = try Database(path: path, options: options(fs))
        try db.write { tx in
            let t = try tx.createTable("t")
            for i in 0..<3000 { try tx.insert([.integer(Int64(i)), .text("row \(i)")], into: t) }
        }
        db.close()
        return fs
    }

    func scanAll(_ db: Database) throws -> Int {
        try db.read { tx in
            let c = try tx.rows(in: try tx.table("t"))
            var n = 0
            while let r = try c.next() { _ = try r.values(); n += 1 }
            return n
        }
    }

    func assertCorrupt(_ body: () throws -> Void, page: UInt32?, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try body(), file: file, line: line) { e in
            guard let k = e as? KuraError else { return XCTFail("not a KuraError: \(e)", file: file, line: line) }
            XCTAssertEqual(k.code, .corrupt, "\(k)", file: file, line: line)
            if let page { XCTAssertEqual(k.page, page, "\(k)", file: file, line: line) }
        }
    }

    func testFlippedByteInADataPageNamesThePage() throws {
        let fs = try makeStore()
        var bytes = fs.contents(of: path)!
        let page: UInt32 = 5
        bytes[Int(page - 1) * 4096 + 100] ^= 0x40
        fs.setContents(of: path, to: bytes)
        let db = try Database(path: path, options: options(fs))
        assertCorrupt({ _ = try scanAll(db) }, page: page)
        let problems = try db.read { tx in try tx.checkIntegrity() }
        XCTAssertTrue(problems.contains { $0.page == page }, "\(problems)")
    }

    func testTruncatedFileNamesTheMissingPage() throws {
        let fs = try makeStore()
        let bytes = fs.contents(of: path)!
        fs.setContents(of: path, to: Array(bytes[0..<(bytes.count / 2)]))
        let db = try Database(path: path, options: options(fs))
        XCTAssertThrowsError(try scanAll(db)) { e in
            XCTAssertEqual((e as? KuraError)?.code, .corrupt)
            XCTAssertTrue("\(e)".contains("truncated"), "\(e)")
            XCTAssertNotNil((e as? KuraError)?.page)
        }
    }

    func testFileShorterThanAHeaderIsRejected() throws {
        let fs = try makeStore()
        fs.setContents(of: path, to: Array(fs.contents(of: path)![0..<10]))
        assertCorrupt({ _ = try Database(path: path, options: options(fs)) }, page: 1)
    }

    func testWrongMagicIsNotADatabase() throws {
        let fs = try makeStore()
        var bytes = fs.contents(of: path)!
        bytes[0] = UInt8(ascii: "S")
        fs.setContents(of: path, to: bytes)
        XCTAssertThrowsError(try Database(path: path, options: options(fs))) { e in
            XCTAssertEqual((e as? KuraError)?.code, .notADatabase)
        }
    }

    func testNewerFormatVersionIsRefused() throws {
        let fs = try makeStore()
        var bytes = fs.contents(of: path)!
        bytes[FileHeader.versionOffset] = 99
        fs.setContents(of: path, to: bytes)
        XCTAssertThrowsError(try Database(path: path, options: options(fs))) { e in
            XCTAssertEqual((e as? KuraError)?.code, .unsupportedVersion)
            XCTAssertTrue("\(e)".contains("99"))
        }
    }

    func testDamagedHeaderChecksumIsRefused() throws {
        let fs = try makeStore()
        var bytes = fs.contents(of: path)!
        bytes[FileHeader.endOffset + 10] ^= 1
        fs.setContents(of: path, to: bytes)
        assertCorrupt({ _ = try Database(path: path, options: options(fs)) }, page: 1)
    }

    /// Three commits stay in the log; the log is then cut inside the last one.
    func testTornLogTailKeepsExactlyTheCompleteCommits() throws {
        let fs = MemoryFileSystem()
        let db = try Database(path: path, options: options(fs))
        for k in 0..<3 {
            try db.write { tx in
                let t = try tx.tableExists("t") ? try tx.table("t") : try tx.createTable("t")
                try tx.insert([.integer(Int64(k))], into: t)
            }
        }
        let wal = fs.contents(of: path + "-wal")!
        let frame = WriteAheadLog.frameHeaderSize + 4096
        // Copy the files as a crash would leave them (no close, so no checkpoint).
        let crashed = MemoryFileSystem()
        crashed.setContents(of: path, to: fs.contents(of: path)!)
        crashed.setContents(of: path + "-wal", to: Array(wal[0..<(wal.count - frame / 2)]))
        let reopened = try Database(path: path, options: options(crashed))
        try reopened.read { tx in
            let t = try tx.table("t")
            XCTAssertEqual(try tx.rowCount(t), 2)
            XCTAssertEqual(try tx.values(in: t, rowID: 2), [.integer(1)])
            XCTAssertNil(try tx.values(in: t, rowID: 3))
            XCTAssertEqual(try tx.checkIntegrity(), [])
        }
        // The next commit goes where the torn one was, and survives a reopen.
        try reopened.write { tx in try tx.insert([.integer(9)], into: try tx.table("t")) }
        let again = try Database(path: path, options: options(crashed))
        try again.read { tx in XCTAssertEqual(try tx.values(in: try tx.table("t"), rowID: 3), [.integer(9)]) }
        _ = db
    }

    func testFlippedBitInALogFrameDropsThatCommitAndLater() throws {
        let fs = MemoryFileSystem()
        let db = try Database(path: path, options: options(fs))
        var framesAfter: [Int] = []
        for k in 0..<3 {
            try db.write { tx in
                let t = try tx.tableExists("t") ? try tx.table("t") : try tx.createTable("t")
                try tx.insert([.integer(Int64(k))], into: t)
            }
            framesAfter.append(db.logFrameCount)
        }
        var wal = fs.contents(of: path + "-wal")!
        // Damage the first frame of the second commit.
        let offset = WriteAheadLog.headerSize + framesAfter[0] * (WriteAheadLog.frameHeaderSize + 4096) + 200
        wal[offset] ^= 0x01
        let crashed = MemoryFileSystem()
        crashed.setContents(of: path, to: fs.contents(of: path)!)
        crashed.setContents(of: path + "-wal", to: wal)
        let reopened = try Database(path: path, options: options(crashed))
        try reopened.read { tx in
            XCTAssertEqual(try tx.rowCount(try tx.table("t")), 1)
            XCTAssertEqual(try tx.checkIntegrity(), [])
        }
        _ = db
    }

    func testLogOfAnotherStoreIsIgnored() throws {
        let fsA = MemoryFileSystem()
        let a = try Database(path: path, options: options(fsA))
        try a.write { tx in try tx.insert([.integer(1)], into: try tx.createTable("t")) }
        let fsB = try makeStore()
        fsB.setContents(of: path + "-wal", to: fsA.contents(of: path + "-wal")!)
        let b = try Database(path: path, options: options(fsB))
        XCTAssertEqual(try scanAll(b), 3000)
        _ = a
    }

    /// A page whose checksum is right but whose structure is not (as a buggy or
    /// hostile writer could produce) is caught by validation, not trusted.
    func testWellChecksummedButMalformedPageIsRejected() throws {
        let fs = try makeStore()
        var bytes = fs.contents(of: path)!
        let number: UInt32 = 4
        let base = Int(number - 1) * 4096
        bytes[base + Node.cellCountOffset] = 0xFF
        bytes[base + Node.cellCountOffset + 1] = 0x0F
        let sum = bytes.withUnsafeBytes { Checksum.xxh64($0.baseAddress! + base, count: 4096 - 8, seed: UInt64(number)) }
        withUnsafeBytes(of: sum.littleEndian) { for k in 0..<8 { bytes[base + 4088 + k] = $0[k] } }
        fs.setContents(of: path, to: bytes)
        let db = try Database(path: path, options: options(fs))
        assertCorrupt({ _ = try scanAll(db) }, page: number)
    }

    /// Deterministic mutation loop: random byte changes anywhere in the file must
    /// give errors or right answers, never a crash or hang.
    func testRandomlyMutatedFilesNeverCrash() throws {
        let original = try makeStore().contents(of: path)!
        var rng = SplitMix64(seed: 99)
        var outcomes: [String: Int] = [:]
        for _ in 0..<300 {
            var bytes = original
            for _ in 0..<(1 + Int(rng.next() % 4)) {
                let i = Int(rng.next() % UInt64(bytes.count))
                bytes[i] = UInt8(truncatingIfNeeded: rng.next())
            }
            if rng.next() % 8 == 0 { bytes = Array(bytes[0..<Int(rng.next() % UInt64(bytes.count))]) }
            let fs = MemoryFileSystem()
            fs.setContents(of: path, to: bytes)
            do {
                let db = try Database(path: path, options: options(fs))
                let n = try scanAll(db)
                _ = try db.read { tx in try tx.checkIntegrity() }
                outcomes[n == 3000 ? "intact" : "rows \(n)", default: 0] += 1
            } catch let e as KuraError {
                outcomes["\(e.code)", default: 0] += 1
            }
        }
        print("mutation outcomes:", outcomes)
        XCTAssertGreaterThan(outcomes["corrupt", default: 0], 50, "\(outcomes)")
        XCTAssertNil(outcomes.keys.first { $0.hasPrefix("rows") }, "a damaged file gave a silently wrong row count: \(outcomes)")
    }
}

final class IntegrityCheckHostileTests: XCTestCase {
    // Bug: the integrity check bounded its index walk by the catalog's row count,
    // so a hostile count of Int64.max trapped on `Int(rowCount) + 1`.
    func testHostileRowCountIsReportedNotTrapped() throws {
        let db = try Database.inMemory()
        try db.write { tx in
            let t = try tx.createTable("t", schema: try TableSchema([ColumnDefinition("a", .integer)]))
            try tx.createIndex("by_a", on: t, columns: [IndexColumn("a")])
            try tx.insert([.integer(1)], into: t)
        }
        try db.write { tx in
            // A row count the commit writes as it is.
            guard var info = try tx.countedEntry("t") else { return XCTFail("no table t") }
            info.rowCount = Int64.max
            tx.catalog!.entries["t"] = info
            tx.changedTables.insert("t")
        }
        let problems = try db.read { tx in try tx.checkIntegrity() }
        XCTAssertTrue(problems.contains { $0.message.contains("row count says 9223372036854775807") }, "\(problems)")
    }
}
