// SharedLogHeader: the header of the `PATH-shm` file (FORMAT.md, "The shared
// log header"), a hint that lets a reader start a transaction without a system
// call when the log has not changed since its connection last read it.
//
//     offset  size  field
//     0       8     magic "KuraSHM\0"
//     8       4     version (1)
//     12      4     flags: bit 0 trusted, bit 1 the log has a valid header
//     16      8     database ID (the store's)
//     24      8     sequence: even when the fields below are the log's
//                   committed state, odd while a writer changes the log or the
//                   store file (and after it died doing so)
//     32      4     log generation          44  4  committed page count
//     36      4     salt 1                  48  8  log header checksum
//     40      4     salt 2                  56  8  last committed frame
//                                           64  8  chain checksum of that frame
//     72      8     XXH64(bytes 0 ..< 72, seed 0)
//     80      -     zero up to 4096 (the file's size)
//
// All integers little-endian. When the log has no valid header, bytes 32 ..< 72
// are zero.
//
// Invariants:
//   - Only a hint: a reader trusts it only if it is trusted, its sequence is
//     even, its checksum holds (a torn copy fails it) and it equals the state
//     its connection already indexed; anything else means reading the log
//     (`WriteAheadLog.refresh`), which stays the source of truth.
//   - The trusted flag is set only by a connection that holds the store's open
//     byte exclusively (no other connection, of any build, has the store open)
//     and found the store at format 3 or later: builds of format 2 never update
//     this header, and they refuse format 3 stores.
//   - A writer holding the store's writer lock makes the sequence odd before it
//     changes the committed log or the store file (commit, reset, checkpoint)
//     and publishes the new state after; so a hint that reads "unchanged" was
//     true at the moment it was read.
//   - Only the writer-lock holder (or the connection holding the open byte
//     exclusively) writes it; it writes a whole 80-byte image at once.

/// The committed state of a log as a connection indexed it: what a reader
/// compares with the shared header.
struct LogState: Equatable {
    var hasHeader = false
    var generation: UInt32 = 0
    var salt1: UInt32 = 0
    var salt2: UInt32 = 0
    var headerChecksum: UInt64 = 0
    var maxFrame = 0
    var chain: UInt64 = 0
    var pageCount: UInt32 = 0
}

/// The shared header, mapped from `PATH-shm`.
final class SharedLogHeader: @unchecked Sendable {
    // @unchecked Sendable: the mapped bytes are shared with other processes and
    // follow the protocol in the header comment (one writer, validated copies);
    // the `let` fields are immutable.
    static let magic: UInt64 = 0x004D_4853_6172_754B  // "KuraSHM\0" little-endian
    static let version: UInt32 = 1
    static let size = 80
    static let checksumOffset = 72
    /// Length of the `-shm` file and of the mapping (the bytes past the header
    /// are reserved, zero).
    static let fileSize = 4096

    static let trustedFlag: UInt32 = 1
    static let logHeaderFlag: UInt32 = 2

    let mapping: SharedMapping
    let databaseID: UInt64

    init(mapping: SharedMapping, databaseID: UInt64) {
        precondition(mapping.length >= Self.size)
        self.mapping = mapping
        self.databaseID = databaseID
    }

    /// The decoded header.
    struct Contents: Equatable {
        var trusted = false
        var sequence: UInt64 = 0
        var state = LogState()
    }

    /// A copy of the header, or nil if the copy is not a valid header of this
    /// store (checksum, magic, version, database ID): garbage, a torn copy
    /// taken while the writer stored a new image, or another store's file.
    func read() -> Contents? {
        Self.decode(copyImage(), databaseID: databaseID)
    }

    /// The 80 bytes of a header, as one value (copied from the mapping, or
    /// built by `store`).
    struct Image: Equatable {
        var words: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0)

        static func == (a: Image, b: Image) -> Bool {
            let x = a.words, y = b.words
            return (x.0 ^ y.0) | (x.1 ^ y.1) | (x.2 ^ y.2) | (x.3 ^ y.3) | (x.4 ^ y.4)
                | (x.5 ^ y.5) | (x.6 ^ y.6) | (x.7 ^ y.7) | (x.8 ^ y.8) | (x.9 ^ y.9) == 0
        }
    }

    /// A copy of the mapped header (a torn one if the writer stores a new
    /// image meanwhile, which its checksum then fails).
    private func copyImage() -> Image {
        var image = Image()
        withUnsafeMutableBytes(of: &image.words) { b in
            // 80 bytes of local storage: the base address exists.
            b.baseAddress!.copyMemory(from: mapping.base, byteCount: Self.size)
        }
        return image
    }

    /// The header `image` holds, or nil if it is not a valid header of the
    /// store `databaseID` names.
    private static func decode(_ image: Image, databaseID: UInt64) -> Contents? {
        withUnsafeBytes(of: image.words) { b -> Contents? in
            // 80 bytes of local storage: the base address exists.
            let p = b.baseAddress!
            func u32(_ o: Int) -> UInt32 { UInt32(littleEndian: p.loadUnaligned(fromByteOffset: o, as: UInt32.self)) }
            func u64(_ o: Int) -> UInt64 { UInt64(littleEndian: p.loadUnaligned(fromByteOffset: o, as: UInt64.self)) }
            guard u64(Self.checksumOffset) == Checksum.xxh64(p, count: Self.checksumOffset, seed: 0),
                  u64(0) == Self.magic, u32(8) == Self.version, u64(16) == databaseID else { return nil }
            let flags = u32(12)
            var c = Contents()
            c.trusted = flags & Self.trustedFlag != 0
            c.sequence = u64(24)
            if flags & Self.logHeaderFlag != 0 {
                c.state = LogState(hasHeader: true, generation: u32(32), salt1: u32(36), salt2: u32(40),
                                   headerChecksum: u64(48), maxFrame: Int(truncatingIfNeeded: u64(56)),
                                   chain: u64(64), pageCount: u32(44))
            }
            return c
        }
    }

    /// The last image this connection stored or found current with the
    /// trusted flag and an even sequence, and the state it holds: a copy of
    /// the mapped header equal to it byte for byte is that same header (every
    /// change moves the sequence on), so `isCurrent` need not hash it again.
    /// Written only by `publish` and `initialize`, whose callers hold the
    /// pager's `state` lock exclusively; read by `isCurrent`, whose callers
    /// hold it shared or exclusively (so no runtime access checks: that lock
    /// orders every access). Kept as fields, not an optional tuple, so that
    /// `isCurrent` reads them in place.
    @exclusivity(unchecked) private var verifiedImage = Image()
    @exclusivity(unchecked) private var verifiedState = LogState()
    @exclusivity(unchecked) private var hasVerified = false

    private func setVerified(_ image: Image, _ state: LogState) {
        verifiedImage = image
        verifiedState = state
        hasVerified = true
    }

    /// Whether the mapped header equals `verifiedImage`, compared where it
    /// lies: each word read once, as a copy would read it (a header changing
    /// meanwhile reads as some mix of its images, which equals the verified
    /// one only if every word read does, exactly as a copy would).
    @inline(__always)
    private func mappedEqualsVerified() -> Bool {
        let p = UnsafeRawPointer(mapping.base)
        let x = verifiedImage.words
        func w(_ i: Int) -> UInt64 { p.loadUnaligned(fromByteOffset: i * 8, as: UInt64.self) }
        let d0 = (w(0) ^ x.0) | (w(1) ^ x.1) | (w(2) ^ x.2) | (w(3) ^ x.3) | (w(4) ^ x.4)
        let d1 = (w(5) ^ x.5) | (w(6) ^ x.6) | (w(7) ^ x.7) | (w(8) ^ x.8) | (w(9) ^ x.9)
        return d0 | d1 == 0
    }

    /// Whether the header says, right now, that the committed log is `state`.
    func isCurrent(_ state: LogState) -> Bool {
        if hasVerified && verifiedState == state && mappedEqualsVerified() { return true }
        guard let c = Self.decode(copyImage(), databaseID: databaseID) else { return false }
        return c.trusted && c.sequence & 1 == 0 && c.state == state
    }

    /// Writer, before it changes the committed log or the store file: makes the
    /// sequence odd, so that no reader trusts the header until `publish`.
    func beginChange() {
        guard var c = read(), c.trusted, c.sequence & 1 == 0 else { return }
        c.sequence &+= 1
        store(c)
    }

    /// Writer, after a change (or after reading the log under the writer lock):
    /// `state` is the committed log now.
    func publish(_ state: LogState) {
        let image = copyImage()
        guard var c = Self.decode(image, databaseID: databaseID), c.trusted else { return }
        if c.sequence & 1 == 0 && c.state == state {
            setVerified(image, state)
            return
        }
        c.sequence = (c.sequence | 1) &+ 1
        c.state = state
        setVerified(store(c), state)
    }

    /// Writes a whole new header. Only for a connection that holds the store's
    /// open byte exclusively: `trusted` only for a store at format 3 or later.
    func initialize(trusted: Bool, state: LogState) {
        var c = Contents()
        c.trusted = trusted
        c.sequence = ((read()?.sequence ?? 0) | 1) &+ 1
        c.state = state
        let image = store(c)
        if trusted { setVerified(image, state) } else { hasVerified = false }
    }

    /// Writes `c` as the mapped header; returns the image written.
    @discardableResult
    private func store(_ c: Contents) -> Image {
        var image = Image()
        withUnsafeMutableBytes(of: &image.words) { (b: UnsafeMutableRawBufferPointer) in
            // 80 bytes of local storage, zeroed: the base address exists.
            let p = b.baseAddress!
            func put32(_ o: Int, _ v: UInt32) { p.storeBytes(of: v.littleEndian, toByteOffset: o, as: UInt32.self) }
            func put64(_ o: Int, _ v: UInt64) { p.storeBytes(of: v.littleEndian, toByteOffset: o, as: UInt64.self) }
            put64(0, Self.magic)
            put32(8, Self.version)
            put32(12, (c.trusted ? Self.trustedFlag : 0) | (c.state.hasHeader ? Self.logHeaderFlag : 0))
            put64(16, databaseID)
            put64(24, c.sequence)
            if c.state.hasHeader {
                put32(32, c.state.generation)
                put32(36, c.state.salt1)
                put32(40, c.state.salt2)
                put32(44, c.state.pageCount)
                put64(48, c.state.headerChecksum)
                put64(56, UInt64(c.state.maxFrame))
                put64(64, c.state.chain)
            }
            put64(Self.checksumOffset, Checksum.xxh64(UnsafeRawPointer(p), count: Self.checksumOffset, seed: 0))
            mapping.base.copyMemory(from: UnsafeRawPointer(p), byteCount: Self.size)
        }
        return image
    }
}
