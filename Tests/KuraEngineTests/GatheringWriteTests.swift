// Gathering writes (StorageFile.write(gathering:at:)): a log append hands its
// frame headers and page images as separate buffers, and a checkpoint runs of
// consecutive pages. The file must hold exactly their concatenation, on POSIX
// files (pwritev, more buffers than one call takes) and on the file systems
// that copy them into one buffer.

import Foundation
import XCTest
@testable import KuraEngine

final class GatheringWriteTests: XCTestCase {
    func buffers(_ rng: inout SplitMix64, count: Int) -> [[UInt8]] {
        (0..<count).map { k in
            // Some empty buffers, some one byte, most a frame header or a small page.
            let size = k % 17 == 0 ? 0 : (k % 5 == 0 ? 1 : Int(rng.next() % 600))
            return (0..<size).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
        }
    }

    func check(_ file: StorageFile, _ parts: [[UInt8]], at offset: Int64) throws {
        let expected = parts.flatMap { $0 }
        try withExtendedLifetime(parts) {
            let raw = parts.map { p in p.withUnsafeBytes { $0 } }
            try file.write(gathering: raw, at: offset)
        }
        var back = [UInt8](repeating: 0, count: expected.count)
        let n = try back.withUnsafeMutableBytes { b in try file.read(into: b, at: offset) }
        XCTAssertEqual(n, expected.count)
        XCTAssertEqual(back, expected)
    }

    func testPosixFileWritesMoreBuffersThanOneCallTakes() throws {
        let seed = testSeed("GatheringWriteTests.posix")
        var rng = SplitMix64(seed: seed)
        let dir = try TemporaryDirectory()
        let file = try PosixFileSystem().open(dir.path + "/g", create: true, permissionsOf: nil)
        defer { file.close() }
        XCTAssertTrue(file.hasGatheringWrite)
        let parts = buffers(&rng, count: PosixFile.maxVectors * 2 + 77)
        try check(file, parts, at: 4096 + 3)
        // Over what is there, at another offset.
        try check(file, buffers(&rng, count: 9), at: 100)
        try check(file, [], at: 0)
    }

    func testFileSystemsWithoutGatheringWriteSeeOneWrite() throws {
        let seed = testSeed("GatheringWriteTests.memory")
        var rng = SplitMix64(seed: seed)
        let fs = FaultInjectingFileSystem()
        let file = try fs.open("/g", create: true, permissionsOf: nil)
        XCTAssertFalse(file.hasGatheringWrite)
        let parts = buffers(&rng, count: 40)
        let writes = Locked(0)
        fs.setMutationHook { op, _ in if op == .write { writes.mutate { $0 += 1 } } }
        try check(file, parts, at: 10)
        fs.setMutationHook(nil)
        XCTAssertEqual(writes.value, 1, "the buffers reach the file system as one write")
    }
}
