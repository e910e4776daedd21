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
    // `summary` is set before publication (by the validation of a page read from
    // disk, or as a commit publishes a page it wrote) and cleared by any write
    // through the setters below.
    let bytes: UnsafeMutableRawPointer
    /// Header facts of a tree page, copied out of its bytes by the tree layer
    /// when the page is read from disk (`Node.validate`) or published by a
    /// commit (`Node.summarizeBuilt`, through `Pager.summarizer`), so that a
    /// descent finds them in this object, which it touches anyway, instead of
    /// in the page's first cache line and its first and last cells (one cache
    /// miss each on a page not read lately). Empty (`kind == 0`) while a page
    /// is being built or changed in memory: any setter below empties it.
    /// (`@exclusivity(unchecked)`: no runtime access check on each read of a
    /// descent; it is written only before publication or by the page's one
    /// owning writer, as the Sendable comment above says.)
    @exclusivity(unchecked) var summary = NodeSummary.none
    /// Clock bit for the cache's second-chance eviction.
    var referenced = true
    /// The page number this buffer holds (for checksums and errors).
    let number: UInt32
    let size: Int

    init(number: UInt32, size: Int) {
        self.number = number
        self.size = size
        bytes = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
        bytes.initializeMemory(as: UInt8.self, repeating: 0, count: size)
    }

    /// A page whose bytes the caller fills at once, entirely (a read from disk
    /// that either fills the buffer or throws, after which the page is dropped):
    /// the buffer is not zeroed first.
    init(number: UInt32, size: Int, toBeFilledEntirely: Void) {
        self.number = number
        self.size = size
        bytes = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
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
    // Every setter empties `summary`: a page being changed is no longer the
    // page it summarized. (Pages with a summary come from disk and are never
    // changed; this keeps a stale summary impossible if one ever were.)
    @inline(__always) func setU8(_ o: Int, _ v: UInt8) { summary.kind = 0; bytes.storeBytes(of: v, toByteOffset: o, as: UInt8.self) }
    @inline(__always) func setU16(_ o: Int, _ v: UInt16) { summary.kind = 0; bytes.storeBytes(of: v.littleEndian, toByteOffset: o, as: UInt16.self) }
    @inline(__always) func setU32(_ o: Int, _ v: UInt32) { summary.kind = 0; bytes.storeBytes(of: v.littleEndian, toByteOffset: o, as: UInt32.self) }
    @inline(__always) func setU64(_ o: Int, _ v: UInt64) { summary.kind = 0; bytes.storeBytes(of: v.littleEndian, toByteOffset: o, as: UInt64.self) }

    /// Computes the checksum over everything but the trailer.
    func computeChecksum() -> UInt64 {
        Checksum.xxh64(bytes, count: size - pageTrailerSize, seed: UInt64(number))
    }

    /// Writes the trailer. Called just before the page goes to the log.
    func sealChecksum() { setU64(size - pageTrailerSize, computeChecksum()) }

    /// Whether the trailer matches the contents.
    var checksumIsValid: Bool { u64(size - pageTrailerSize) == computeChecksum() }

    func zero() {
        summary.kind = 0
        bytes.initializeMemory(as: UInt8.self, repeating: 0, count: size)
    }
}

/// What `Page.summary` holds: a tree page's kind, flags, cell count, tree root
/// and right-most child as its header has them, and, for a table-tree page, the
/// row IDs of its first and last cells. Filled only from a page that passed
/// `Node.validate`, or one a commit publishes (built by the tree code:
/// `Node.summarizeBuilt`); `Node.summarize` decides what the fields mean.
struct NodeSummary {
    /// Row ID of the first cell, or `Int64.max` when unknown (no cells, an
    /// index page, or a key that is not a row-ID key).
    var firstRowID: Int64
    /// Row ID of the last cell, or `Int64.min` when unknown.
    var lastRowID: Int64
    var treeRoot: UInt32
    var rightChild: UInt32
    var cellCount: UInt16
    /// The page's flags byte (byte 1: counters, compact cells).
    var flags: UInt8
    /// The page's kind byte (1...4); 0 = no summary.
    var kind: UInt8

    static let none = NodeSummary(firstRowID: .max, lastRowID: .min, treeRoot: 0, rightChild: 0, cellCount: 0, flags: 0, kind: 0)
}
