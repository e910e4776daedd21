// Page: one fixed-size page buffer (FORMAT.md, "Pages").
//
// Every page ends in an 8-byte trailer holding XXH64(page[0 ..< size-8], seed:
// page number), little-endian. The trailer is computed when a page is written to
// the log and checked whenever a page is read from disk.
//
// Ownership: a `Page` read from disk or committed is immutable and may be shared
// by any number of readers (the cache holds it, cursors hold it). A write
// transaction mutates only pages it allocated or copied for itself; at commit
// they become immutable and shareable.

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Size of the checksum trailer at the end of every page.
let pageTrailerSize = 8

final class Page: @unchecked Sendable {
    // @unchecked Sendable: a Page is mutated only by the one write transaction
    // that owns it before commit (see the header comment); after publication it
    // is immutable. `referenced` of a cached page is guarded as Pager.markLock says.
    let bytes: UnsafeMutableRawPointer
    let size: Int
    /// The page number this buffer holds (for checksums and errors).
    let number: UInt32
    /// Clock bit for the cache's second-chance eviction.
    var referenced = true

    init(number: UInt32, size: Int) {
        self.number = number
        self.size = size
        bytes = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
        bytes.initializeMemory(as: UInt8.self, repeating: 0, count: size)
    }

    /// A copy of `other`'s bytes under the same number.
    init(copying other: Page) {
        number = other.number
        size = other.size
        bytes = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
        bytes.copyMemory(from: other.bytes, byteCount: size)
    }

    /// A copy of `other`'s bytes under a different number.
    init(copying other: Page, as number: UInt32) {
        self.number = number
        size = other.size
        bytes = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
        bytes.copyMemory(from: other.bytes, byteCount: size)
    }

    deinit { bytes.deallocate() }

    var buffer: UnsafeMutableRawBufferPointer { UnsafeMutableRawBufferPointer(start: bytes, count: size) }

    // MARK: Little-endian field access (offsets are checked by the caller)

    @inline(__always) func u8(_ o: Int) -> UInt8 { bytes.load(fromByteOffset: o, as: UInt8.self) }
    @inline(__always) func u16(_ o: Int) -> UInt16 { UInt16(littleEndian: bytes.loadUnaligned(fromByteOffset: o, as: UInt16.self)) }
    @inline(__always) func u32(_ o: Int) -> UInt32 { UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: o, as: UInt32.self)) }
    @inline(__always) func u64(_ o: Int) -> UInt64 { UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: o, as: UInt64.self)) }
    @inline(__always) func setU8(_ o: Int, _ v: UInt8) { bytes.storeBytes(of: v, toByteOffset: o, as: UInt8.self) }
    @inline(__always) func setU16(_ o: Int, _ v: UInt16) { bytes.storeBytes(of: v.littleEndian, toByteOffset: o, as: UInt16.self) }
    @inline(__always) func setU32(_ o: Int, _ v: UInt32) { bytes.storeBytes(of: v.littleEndian, toByteOffset: o, as: UInt32.self) }
    @inline(__always) func setU64(_ o: Int, _ v: UInt64) { bytes.storeBytes(of: v.littleEndian, toByteOffset: o, as: UInt64.self) }

    /// Computes the checksum over everything but the trailer.
    func computeChecksum() -> UInt64 {
        Checksum.xxh64(bytes, count: size - pageTrailerSize, seed: UInt64(number))
    }

    /// Writes the trailer. Called just before the page goes to the log.
    func sealChecksum() { setU64(size - pageTrailerSize, computeChecksum()) }

    /// Whether the trailer matches the contents.
    var checksumIsValid: Bool { u64(size - pageTrailerSize) == computeChecksum() }

    func zero() { bytes.initializeMemory(as: UInt8.self, repeating: 0, count: size) }
}
