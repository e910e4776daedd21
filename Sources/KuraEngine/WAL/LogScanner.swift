// LogScanner: the one place that decides which bytes of a `<store>-wal` file
// count (FORMAT.md, "Header (40 bytes)", "Chain checksum", "Validity"). The
// engine's recovery (`WriteAheadLog.refresh`) and `kura`'s raw reading of a
// store (`RawStore.readLog`) both go through it, so they cannot disagree on a
// torn, foreign, stale or corrupt log.
//
//   - `LogScanner.checkHeader`: a header is valid when the file holds 40 bytes,
//     magic, version, page size and database ID equal the store's, and
//     XXH64(header[0 ..< 32], seed 0) equals the stored checksum.
//   - `LogScanner.next`: frame i is valid when frame i - 1 was (or i = 1), its
//     page number is not 0, both salts equal the header's, and its stored chain
//     checksum equals c(i) (`WriteAheadLog.chain`): in log version 1
//     XXH64(image, seed: XXH64(frameHeader[0 ..< 16], seed: c(i - 1))); in
//     version 2 XXH64(frameHeader[0 ..< 16] ++ image[pageSize - 8 ..< pageSize],
//     seed: c(i - 1)), and the image must also match its own checksum (its
//     last 8 bytes, XXH64(image[0 ..< pageSize - 8], seed: page number)),
//     c(0) being the header checksum. The first invalid frame ends
//     the scan; the committed log is the valid prefix cut back to its last frame
//     with a non-zero commit field.
//
// The caller reads the bytes (whole frames only: a partial frame at the end of
// the file is not a frame) and feeds them in order.

/// The fields of a log header and whether it is valid for a store.
struct LogHeaderCheck {
    var complete = false
    var magicValid = false
    var version: UInt32 = 0
    var pageSize: UInt32 = 0
    var generation: UInt32 = 0
    var salt1: UInt32 = 0
    var salt2: UInt32 = 0
    var databaseID: UInt64 = 0
    var storedChecksum: UInt64 = 0
    var checksumValid = false
    var databaseIDMatches = false
    /// Why the header is not valid (nil when it is), in words for `kura`.
    var problem: String?
    var isValid: Bool { problem == nil }
}

/// What `LogScanner.next` found in one frame.
struct LogFrameCheck {
    var page: UInt32
    var commit: UInt32
    var storedChain: UInt64
    var saltsMatch: Bool
    var chainValid: Bool
    /// Log version 2, when the chain matched: whether the page image matches
    /// its own checksum (`imageMatchesChecksum`); nil when not checked (version
    /// 1, whose chain covers the image, or a chain that failed).
    var imageValid: Bool?
    /// Why the frame is not valid (nil when it is), in words for `kura`.
    var problem: String?
}

/// Validates a log's frames in order (see the header comment). One scanner per
/// pass over a log; not thread-safe.
struct LogScanner {
    let pageSize: Int
    /// The log header's version (`WriteAheadLog.versions`).
    let version: UInt32
    let salt1: UInt32
    let salt2: UInt32
    /// Chain checksum of the last valid frame (the header's before any).
    private(set) var chain: UInt64
    /// Valid frames fed so far (the valid prefix).
    private(set) var validFrames = 0
    /// Length of the valid prefix up to its last commit frame.
    private(set) var committedFrames = 0
    /// Chain checksum and commit field of that last commit frame.
    private(set) var committedChain: UInt64
    private(set) var committedPageCount: UInt32 = 0
    /// Commit frames in the valid prefix.
    private(set) var transactions = 0
    /// Why the valid prefix ended (nil while every frame fed was valid).
    private(set) var stopReason: String?

    var frameSize: Int { WriteAheadLog.frameHeaderSize + pageSize }

    /// A scanner continuing after a committed prefix whose last chain checksum
    /// is `chain` (the header checksum for a scan from frame 1), with
    /// `framesBefore` frames before the first one fed (for messages).
    init(pageSize: Int, version: UInt32, salt1: UInt32, salt2: UInt32, chain: UInt64, framesBefore: Int = 0) {
        self.pageSize = pageSize
        self.version = version
        self.salt1 = salt1
        self.salt2 = salt2
        self.chain = chain
        committedChain = chain
        self.framesBefore = framesBefore
    }

    private let framesBefore: Int

    /// Checks the first 40 bytes of a log (`bytes` may be shorter when the file
    /// is) against the store's page size and database ID.
    static func checkHeader(_ bytes: UnsafeRawBufferPointer, fileSize: Int64, pageSize: Int, databaseID: UInt64) -> LogHeaderCheck {
        var h = LogHeaderCheck()
        h.complete = bytes.count >= WriteAheadLog.headerSize
        if h.complete {
            func u32(_ o: Int) -> UInt32 { UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: o, as: UInt32.self)) }
            func u64(_ o: Int) -> UInt64 { UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: o, as: UInt64.self)) }
            h.magicValid = u32(0) == WriteAheadLog.magic
            h.version = u32(4)
            h.pageSize = u32(8)
            h.generation = u32(12)
            h.salt1 = u32(16)
            h.salt2 = u32(20)
            h.databaseID = u64(24)
            h.storedChecksum = u64(32)
            // `complete` guarantees 40 bytes, so the base address exists.
            h.checksumValid = Checksum.xxh64(bytes.baseAddress!, count: 32, seed: 0) == h.storedChecksum
            h.databaseIDMatches = h.databaseID == databaseID
        }
        if !h.complete { h.problem = fileSize == 0 ? "the log is empty (no header yet)" : "the log is \(fileSize) bytes, shorter than its 40-byte header" }
        else if !h.magicValid { h.problem = "the log header has the wrong magic number" }
        else if !WriteAheadLog.versions.contains(h.version) { h.problem = "the log header has format version \(h.version)" }
        else if Int(h.pageSize) != pageSize { h.problem = "the log header names page size \(h.pageSize), the store has \(pageSize)" }
        else if !h.databaseIDMatches { h.problem = "the log belongs to another store (database ID \(hex(h.databaseID)), the store's is \(hex(databaseID)))" }
        else if !h.checksumValid { h.problem = "the log header checksum does not match" }
        return h
    }

    /// Checks the frame at `frame` (`frameSize` bytes) as the frame after
    /// those fed so far, and advances the prefix if it is valid. After a frame
    /// was invalid, it only describes frames (chained from the stored checksum
    /// of the frame before, for display), the prefix no longer moves.
    mutating func next(_ frame: UnsafeRawPointer, previousStored: UInt64? = nil) -> LogFrameCheck {
        func u32(_ o: Int) -> UInt32 { UInt32(littleEndian: frame.loadUnaligned(fromByteOffset: o, as: UInt32.self)) }
        let stored = UInt64(littleEndian: frame.loadUnaligned(fromByteOffset: 16, as: UInt64.self))
        let number = framesBefore + validFrames + 1
        let page = u32(0), commit = u32(4)
        let saltsMatch = u32(8) == salt1 && u32(12) == salt2
        let previous = stopReason == nil ? chain : (previousStored ?? chain)
        let chainValid = WriteAheadLog.chain(of: frame, pageSize: pageSize, previous: previous, version: version) == stored
        var check = LogFrameCheck(page: page, commit: commit, storedChain: stored, saltsMatch: saltsMatch, chainValid: chainValid)
        if version >= WriteAheadLog.shortChainVersion && chainValid {
            check.imageValid = Self.imageMatchesChecksum(frame, pageSize: pageSize)
        }
        if page == 0 && commit == 0 && stored == 0 && u32(8) == 0 && u32(12) == 0 {
            check.problem = "frame \(number) is zero bytes (space written ahead of the log's end)"
        } else if page == 0 { check.problem = "frame \(number) names page 0" }
        else if !saltsMatch { check.problem = "frame \(number) has other salts (left from an older generation)" }
        else if !chainValid { check.problem = "frame \(number) fails its chain checksum (torn or stale)" }
        else if check.imageValid == false { check.problem = "frame \(number) holds a page image that fails its own checksum (torn)" }
        guard stopReason == nil else { return check }
        if let problem = check.problem {
            stopReason = problem
            return check
        }
        chain = stored
        validFrames += 1
        if commit != 0 {
            committedFrames = validFrames
            committedChain = stored
            committedPageCount = commit
            transactions += 1
        }
        return check
    }

    /// Whether the page image of the frame at `frame` matches the checksum in
    /// its last 8 bytes (seeded with the frame's page number; FORMAT.md,
    /// "Checksums").
    static func imageMatchesChecksum(_ frame: UnsafeRawPointer, pageSize: Int) -> Bool {
        let page = UInt32(littleEndian: frame.loadUnaligned(as: UInt32.self))
        let image = frame + WriteAheadLog.frameHeaderSize
        let trailer = UInt64(littleEndian: image.loadUnaligned(fromByteOffset: pageSize - pageTrailerSize, as: UInt64.self))
        return Checksum.xxh64(image, count: pageSize - pageTrailerSize, seed: UInt64(page)) == trailer
    }

    /// Whether frames can still extend the valid prefix.
    var isOpen: Bool { stopReason == nil }
}
