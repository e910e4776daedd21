// WriteAheadLog: the `<store>-wal` file (FORMAT.md, "The write-ahead log").
//
//     WAL header, 40 bytes                 Frame = 24-byte header + one page image
//     0   4  magic 0x4B57414C (bytes       0   4  page number (never 0)
//            4c 41 57 4b on disk)
//     4   4  format version                4   4  commit: database page count after
//     8   4  page size                            this transaction; 0 if not the last
//     12  4  generation (bumped by reset)         frame of a transaction
//     16  4  salt 1 (random per reset)     8   4  salt 1 (copy of the header's)
//     20  4  salt 2 (random per reset)     12  4  salt 2
//     24  8  database ID (header page's)   16  8  chain checksum (below)
//     32  8  XXH64(header[0..<32], 0)
//
// Frame i's chain checksum (log version 1) is XXH64(page image,
// seed: XXH64(frameHeader[0..<16], seed: checksum of frame i-1)), where frame
// 0's "checksum" is the header's. Log version 2 (stores of format 6) chains
// over the frame header and the page's own checksum only: XXH64(frameHeader[0..<16]
// ++ pageImage[pageSize-8 ..< pageSize], seed: checksum of frame i-1), so a
// commit hashes each page once (its checksum) instead of twice; a version-2
// frame is valid only if its page image also matches that checksum. All
// integers little-endian. Frames start at offset 40 and follow each other with no
// gap: frame n (1-based) is at 40 + (n-1) * (24 + pageSize). A log whose
// database ID differs from the store's is ignored (and reset by the next writer).
//
// Validity: a frame is valid if its page number is not 0, its salts equal the
// header's and its chain checksum matches (and, in version 2, its page image
// its own checksum). Recovery reads frames in order and stops at the first invalid
// one; the valid prefix is cut back to its last commit frame. So a torn tail, a
// half-written transaction, and stale frames of an older generation (whose salts
// or chain differ) are all ignored, and exactly the committed transactions apply.
//
// State machine of the log (the pager performs each transition):
//
//     absent/invalid header --(first commit: reset())--> empty (valid header, 0 frames)
//     empty/frames --(commit: append())--> frames
//     frames --(checkpoint: pages copied to the store, synced; reset())--> empty
//
// A reset rewrites the header and keeps the file (stale frames after it fail
// the salt check), unless it is longer than `reuseLimit`.
//
// Not thread-safe: the pager calls it under its state lock or as the one writer.

struct WALFrameIndex {
    /// page number -> frame numbers holding it, ascending.
    var frames: [UInt32: [Int]] = [:]

    /// The newest frame for `page` that is <= `limit`.
    @inline(__always)
    func lookup(_ page: UInt32, limit: Int) -> Int? {
        guard let list = frames[page] else { return nil }
        var i = list.count - 1
        while i >= 0 {
            if list[i] <= limit { return list[i] }
            i -= 1
        }
        return nil
    }
}

final class WriteAheadLog {
    /// Versions of the log's own format, written in its header: 1 chains over
    /// each page image, 2 over each page's checksum (FORMAT.md, "Chain
    /// checksum"). A reset writes version 2 only in a store of format 6 or
    /// later (`FileHeader.shortChainVersion`), which builds that know only
    /// version 1 refuse, so no build that can open a store misreads its log.
    static let versions: ClosedRange<UInt32> = 1...2
    /// The log version whose chain covers each page's checksum, not its image.
    static let shortChainVersion: UInt32 = 2

    /// The chain checksum of the frame at `frame` (header and page image),
    /// after a frame whose chain checksum is `previous`, in log `version`.
    @inline(__always)
    static func chain(of frame: UnsafeRawPointer, pageSize: Int, previous: UInt64, version: UInt32) -> UInt64 {
        chain(header: frame, image: frame + frameHeaderSize, pageSize: pageSize, previous: previous, version: version)
    }

    /// The same, with the frame's header and page image apart (an append
    /// writes them from where they are, `append`).
    static func chain(header: UnsafeRawPointer, image: UnsafeRawPointer, pageSize: Int, previous: UInt64, version: UInt32) -> UInt64 {
        if version >= shortChainVersion {
            // Frame header bytes 0..<16, then the page's stored checksum.
            var input: (UInt64, UInt64, UInt64) = (0, 0, 0)
            return withUnsafeMutableBytes(of: &input) { b in
                // 24 bytes of local storage: the base address exists.
                let base = b.baseAddress!
                base.copyMemory(from: header, byteCount: 16)
                (base + 16).copyMemory(from: image + pageSize - pageTrailerSize, byteCount: 8)
                return Checksum.xxh64(UnsafeRawPointer(base), count: 24, seed: previous)
            }
        }
        let seed = Checksum.xxh64(header, count: 16, seed: previous)
        return Checksum.xxh64(image, count: pageSize, seed: seed)
    }
    static let magic: UInt32 = 0x4B57_414C
    static let headerSize = 40
    static let frameHeaderSize = 24

    let file: StorageFile
    let pageSize: Int
    /// The store's database ID (header page); a log with another ID is ignored.
    let databaseID: UInt64
    var frameSize: Int { Self.frameHeaderSize + pageSize }

    // `@exclusivity(unchecked)` on the mutable fields: the pager reads them
    // under its `state` lock (shared or exclusive) and changes them under it
    // exclusively, or, for the transaction in progress, only from the thread
    // holding the writer slot; that orders every access, and the runtime
    // checks cost a commit a dozen calls.
    /// Whether the file holds a valid header.
    @exclusivity(unchecked) private(set) var hasHeader = false
    /// The version of the header this log has (valid while `hasHeader`).
    @exclusivity(unchecked) private(set) var version: UInt32 = 1
    @exclusivity(unchecked) private(set) var generation: UInt32 = 0
    @exclusivity(unchecked) private(set) var salt1: UInt32 = 0
    @exclusivity(unchecked) private(set) var salt2: UInt32 = 0
    @exclusivity(unchecked) private var headerChecksum: UInt64 = 0

    /// Last committed frame (0 when empty); frames after it are not part of the log.
    @exclusivity(unchecked) private(set) var maxFrame = 0
    /// Chain checksum of frame `maxFrame` (or the header's when 0).
    @exclusivity(unchecked) private var lastChecksum: UInt64 = 0
    /// Database page count after the last committed transaction (0 if none).
    @exclusivity(unchecked) private(set) var committedPageCount: UInt32 = 0
    @exclusivity(unchecked) private(set) var index = WALFrameIndex()
    /// Frame numbers of the committed log's commit frames, ascending (one per
    /// transaction): the change counter is derived from them
    /// (`FileHeader.changeCounter`).
    @exclusivity(unchecked) private(set) var commitFrames: [Int] = []

    /// Number of commit frames numbered `from ... through`.
    func commits(from first: Int, through last: Int) -> Int {
        guard first <= last else { return 0 }
        return Self.position(after: last, in: commitFrames) - Self.position(after: first - 1, in: commitFrames)
    }

    /// How many elements of the ascending `list` are <= `value`.
    private static func position(after value: Int, in list: [Int]) -> Int {
        var lo = 0
        var hi = list.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if list[mid] <= value { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    /// The committed state indexed, as the shared header holds it
    /// (SharedLogHeader.swift); all zero without a valid header.
    var state: LogState {
        guard hasHeader else { return LogState() }
        return LogState(hasHeader: true, generation: generation, salt1: salt1, salt2: salt2, headerChecksum: headerChecksum,
                        maxFrame: maxFrame, chain: lastChecksum, pageCount: committedPageCount)
    }

    /// Page numbers of the frames the writer's transaction in progress has
    /// written after the committed log (spilled pages, FORMAT.md "Commit"), in
    /// frame order: frame `maxFrame + 1 + k` holds `uncommittedPages[k]`. They
    /// carry commit field 0, so no reader and no recovery counts them until the
    /// transaction's commit frame follows them. Writer only.
    @exclusivity(unchecked) private(set) var uncommittedPages: [UInt32] = []
    /// Chain checksum of the last uncommitted frame (valid when there is one).
    @exclusivity(unchecked) private var uncommittedChain: UInt64 = 0

    /// Largest log file a reset keeps (bytes, whole frames); a longer one is
    /// cut back to this length (`Database.Options.logSizeLimit`).
    let reuseLimit: Int64

    /// Whether this connection knows the current header to be on disk: it
    /// synced it itself (`reset(sync: true)` or `syncHeader()`). False after a
    /// reset without sync and whenever `refresh` finds a header another
    /// connection wrote. In a store where resets do not sync (FORMAT.md,
    /// "Reset"), the writer syncs the header before the first frame of a
    /// generation unless this is set. Writer only.
    @exclusivity(unchecked) private(set) var headerDurable = false

    /// How many frames of zero bytes a synced commit that reaches the end of
    /// the file writes after its frames (`prepareAhead`).
    static let framesAhead = 64

    /// Bytes of the log file this connection knows to exist (frames or zero
    /// bytes written ahead), or less: 0 after any cut it makes. A write below
    /// it overwrites; it only decides when `prepareAhead` looks at the file.
    /// If another connection cut the file, it is too high until this writer
    /// passes it, and commits meanwhile simply grow the file. Writer only.
    @exclusivity(unchecked) private var preparedEnd: Int64 = 0

    init(file: StorageFile, pageSize: Int, databaseID: UInt64, reuseFrames: Int) {
        self.file = file
        self.pageSize = pageSize
        self.databaseID = databaseID
        reuseLimit = Int64(Self.headerSize) + Int64(max(reuseFrames, 0)) * Int64(Self.frameHeaderSize + pageSize)
    }

    func frameOffset(_ frame: Int) -> Int64 {
        Int64(Self.headerSize) + Int64(frame - 1) * Int64(frameSize)
    }

    /// What `refresh` found.
    enum RefreshResult {
        /// Same generation; `newFrames` committed frames were appended by someone.
        case appended(newFrames: Int)
        /// The log was reset or replaced: any cached copy of database-file pages
        /// may be stale.
        case reset
    }

    /// Brings the index up to date with the file: reads the header and any frames
    /// past `maxFrame`. This is recovery on open and how a connection sees other
    /// processes' commits. Bounded by the file size.
    func refresh() throws(KuraError) -> RefreshResult {
        let size = try file.size()
        var hdr = [UInt8](repeating: 0, count: Self.headerSize)
        let got = size >= Int64(Self.headerSize)
            ? try hdr.withMutableBytes { b throws(KuraError) in try file.readFully(into: b, at: 0) }
            : false
        let parsed = got ? parseHeader(hdr) : nil
        guard let h = parsed else {
            let wasValid = hasHeader
            hasHeader = false
            clearIndex()
            return wasValid ? .reset : .appended(newFrames: 0)
        }
        var result = RefreshResult.appended(newFrames: 0)
        if !hasHeader || h.generation != generation || h.salt1 != salt1 || h.salt2 != salt2 || h.checksum != headerChecksum {
            hasHeader = true
            version = h.version
            generation = h.generation
            salt1 = h.salt1
            salt2 = h.salt2
            headerChecksum = h.checksum
            headerDurable = false
            clearIndex()
            result = .reset
        }
        let added = try scanFrames(fileSize: size)
        if case .appended = result { result = .appended(newFrames: added) }
        return result
    }

    private func clearIndex() {
        precondition(uncommittedPages.isEmpty, "the log changed under a writer's uncommitted frames")
        maxFrame = 0
        lastChecksum = headerChecksum
        committedPageCount = 0
        index = WALFrameIndex()
        commitFrames = []
    }

    private func parseHeader(_ h: [UInt8]) -> (version: UInt32, generation: UInt32, salt1: UInt32, salt2: UInt32, checksum: UInt64)? {
        let c = h.withUnsafeBytes { LogScanner.checkHeader($0, fileSize: Int64(h.count), pageSize: pageSize, databaseID: databaseID) }
        return c.isValid ? (c.version, c.generation, c.salt1, c.salt2, c.storedChecksum) : nil
    }

    /// Reads frames after `maxFrame` in chunks (the first of one frame,
    /// doubling up to 1 MiB: after a reset the file usually holds stale frames
    /// of the old generation, and the first one ends the scan), validating them
    /// with `LogScanner`; commits the valid prefix up to its last commit frame.
    /// Returns the number of frames newly committed.
    private func scanFrames(fileSize: Int64) throws(KuraError) -> Int {
        let available = Int((fileSize - frameOffset(maxFrame + 1)) / Int64(frameSize))
        guard available > 0 else { return 0 }
        let maxChunk = max(1, min(available, (1 << 20) / frameSize))
        var chunk = 1
        // Sized for the chunk actually read and grown as chunks double: after
        // a reset the first (one-frame) chunk usually ends the scan, and this
        // runs at the start of every transaction.
        var buffer: [UInt8] = []
        let start = maxFrame
        var scanner = LogScanner(pageSize: pageSize, version: version, salt1: salt1, salt2: salt2, chain: lastChecksum, framesBefore: start)
        var pages: [UInt32] = []
        var commitsSeen: [Int] = []
        let lastFrame = start + available
        var frame = start + 1
        scan: while frame <= lastFrame {
            let n = min(chunk, lastFrame - frame + 1)
            chunk = min(chunk * 2, maxChunk)
            if buffer.count < n * frameSize { buffer = [UInt8](repeating: 0, count: n * frameSize) }
            let ok = try buffer.withMutableBytes { b throws(KuraError) in
                try file.readFully(into: UnsafeMutableRawBufferPointer(rebasing: b[0..<n * frameSize]), at: frameOffset(frame))
            }
            if !ok { break }
            for k in 0..<n {
                let check = buffer.withUnsafeBytes { b in scanner.next(b.baseAddress! + k * frameSize) }
                guard check.problem == nil else { break scan }
                pages.append(check.page)
                if check.commit != 0 { commitsSeen.append(frame) }
                frame += 1
            }
        }
        let committed = scanner.committedFrames
        guard committed > 0 else { return 0 }
        for k in 0..<committed { index.frames[pages[k], default: []].append(start + 1 + k) }
        maxFrame = start + committed
        // The scan's committed prefix ends at a commit frame: every commit
        // frame seen up to it is one.
        for f in commitsSeen where f <= maxFrame { commitFrames.append(f) }
        lastChecksum = scanner.committedChain
        committedPageCount = scanner.committedPageCount
        return committed
    }

    /// Reads the page image of `frame` into `page`. Throws `corrupt` on a short
    /// read (the log shrank under us, which only a foreign writer can cause).
    /// Throws `.io` if the frame is no longer in the log: it was reset under the
    /// caller's transaction, which only a connection that ignores the locks
    /// (FORMAT.md, "Concurrency and locks") can do.
    func readFrame(_ frame: Int, into page: Page) throws(KuraError) {
        guard frame >= 1 && frame <= maxFrame + uncommittedPages.count else {
            throw KuraError(.io, "log frame \(frame) is no longer in the log: another connection reset it under this transaction, ignoring the reader lock; end the transaction and retry", path: file.path, page: page.number)
        }
        let ok = try file.readFully(into: page.buffer, at: frameOffset(frame) + Int64(Self.frameHeaderSize))
        if !ok {
            throw KuraError.corruption("log frame \(frame) is past the end of the log file", page: page.number, path: file.path)
        }
    }

    /// Starts a new generation: writes a fresh header (new salts) over the old
    /// one. The file is reused, as SQLite restarts its log: the old frames stay
    /// until the new generation's frames overwrite them, and never count (their
    /// salts are the old header's). A file longer than `reuseLimit` is cut back
    /// to that length first, so one large transaction does not keep its space
    /// while the file keeps what the next generations will rewrite (cutting a
    /// file and growing it again costs the file system far more than
    /// rewriting it). With `truncate` (an explicit checkpoint, a connection
    /// closing), the file is cut back to its header.
    /// Not synced unless `sync`: see `syncHeader`.
    /// The caller guarantees that no reader needs the old frames.
    func reset(sync: Bool, truncate: Bool = false, version newVersion: UInt32) throws(KuraError) {
        precondition(Self.versions.contains(newVersion))
        let newGeneration = hasHeader ? generation &+ 1 : UInt32.random(in: 1...UInt32.max / 2)
        var h = [UInt8](repeating: 0, count: Self.headerSize)
        let s1 = UInt32.random(in: 0...UInt32.max)
        let s2 = UInt32.random(in: 0...UInt32.max)
        h.withUnsafeMutableBytes { b in
            b.storeBytes(of: Self.magic.littleEndian, toByteOffset: 0, as: UInt32.self)
            b.storeBytes(of: newVersion.littleEndian, toByteOffset: 4, as: UInt32.self)
            b.storeBytes(of: UInt32(pageSize).littleEndian, toByteOffset: 8, as: UInt32.self)
            b.storeBytes(of: newGeneration.littleEndian, toByteOffset: 12, as: UInt32.self)
            b.storeBytes(of: s1.littleEndian, toByteOffset: 16, as: UInt32.self)
            b.storeBytes(of: s2.littleEndian, toByteOffset: 20, as: UInt32.self)
            b.storeBytes(of: databaseID.littleEndian, toByteOffset: 24, as: UInt64.self)
            let sum = Checksum.xxh64(b.baseAddress!, count: 32, seed: 0)
            b.storeBytes(of: sum.littleEndian, toByteOffset: 32, as: UInt64.self)
        }
        let size = try file.size()
        if truncate {
            preparedEnd = 0
            if size > Int64(Self.headerSize) { try file.truncate(to: Int64(Self.headerSize)) }
        } else if size > reuseLimit {
            preparedEnd = 0
            try file.truncate(to: reuseLimit)
        }
        // The frames no longer count: if writing the new header fails, the
        // index must not point at them. The next `refresh` re-reads the header.
        hasHeader = false
        headerDurable = false
        clearIndex()
        try h.withBytes { b throws(KuraError) in try file.write(b, at: 0) }
        if sync { try file.sync(full: true) }
        headerDurable = sync
        hasHeader = true
        version = newVersion
        generation = newGeneration
        salt1 = s1
        salt2 = s2
        headerChecksum = h.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(fromByteOffset: 32, as: UInt64.self)) }
        clearIndex()
    }

    /// Forgets the header written by the last `reset` (its sync failed): the
    /// next append starts the log afresh with a synced header, and the next
    /// `refresh` reads whatever header the file holds.
    func forgetHeader() {
        hasHeader = false
        headerDurable = false
        clearIndex()
    }

    /// Syncs the log file so that its header is on disk before the first
    /// frame of its generation follows it (FORMAT.md, "Reset"): should a
    /// crash keep frames of the new generation but lose the new header, the
    /// old header would validate a prefix of the old generation's frames and
    /// recovery would copy stale page versions over the checkpointed store.
    func syncHeader() throws(KuraError) {
        precondition(hasHeader && maxFrame == 0 && uncommittedPages.isEmpty)
        try file.sync(full: true)
        headerDurable = true
    }

    /// Cuts a log without committed frames back to its header (the frames
    /// after it are stale: older generations', or a rolled-back transaction's).
    /// Not synced: those frames never count, whether or not the cut survives.
    func truncateStaleFrames() throws(KuraError) {
        precondition(maxFrame == 0 && uncommittedPages.isEmpty)
        preparedEnd = 0
        if try file.size() > Int64(Self.headerSize) { try file.truncate(to: Int64(Self.headerSize)) }
    }

    /// Frames written to the file but not yet part of the index.
    struct PendingCommit {
        let pages: [UInt32]
        let chain: UInt64
        let pageCount: UInt32
    }

    /// Writes one transaction's last frames after the committed log and any
    /// frames it spilled before (`spill`): `pages` in order, the last marked as
    /// the commit with `pageCount`, then syncs if asked. Pages must already carry
    /// their checksum trailer. Changes nothing in memory: on failure the frames
    /// on disk are not a valid commit and the next append overwrites them (the
    /// caller cuts them off). Only the writer calls it; readers may run meanwhile.
    func writeFrames(_ pages: [Page], pageCount: UInt32, sync: Bool, fullSync: Bool) throws(KuraError) -> PendingCommit {
        precondition(pageCount != 0)
        let chain = try append(pages, commit: pageCount)
        if sync {
            try prepareAhead(after: frameOffset(maxFrame + 1 + uncommittedPages.count + pages.count))
            try file.sync(full: fullSync)
        }
        return PendingCommit(pages: uncommittedPages + pages.map(\.number), chain: chain, pageCount: pageCount)
    }

    /// Before a synced commit's sync, when the next one-frame commit would
    /// grow the file (its frames end at `end`): writes zero bytes for
    /// `framesAhead` frames after `end` (never past `reuseLimit`, the most a
    /// reset keeps), synced with the commit. The next commits then overwrite
    /// space the file has. A sync after an append must also commit the file's
    /// new size to the file system's journal; after an overwrite it flushes
    /// the data alone, which on ext4 takes about half the time (1000 one-frame
    /// commits, each synced: 405–463 ms appending, 191–294 ms overwriting).
    ///
    /// Zero bytes are never a valid frame (a frame naming page 0 ends the
    /// valid prefix: `LogScanner`), so the log still ends where its last
    /// commit frame is, whatever survives a crash; a reset's reuse and cut
    /// treat them as the stale frames they already handle.
    private func prepareAhead(after end: Int64) throws(KuraError) {
        guard end + Int64(frameSize) > preparedEnd else { return }
        let target = min(end + Int64(Self.framesAhead * frameSize), max(reuseLimit, end))
        let size = try file.size()
        preparedEnd = size
        guard target > size, target > end else { return }
        let from = max(size, end)
        let zeros = [UInt8](repeating: 0, count: Int(target - from))
        try zeros.withBytes { b throws(KuraError) in try file.write(b, at: from) }
        preparedEnd = target
    }

    /// Writes `pages` (checksums sealed) as frames of the transaction in
    /// progress, with commit field 0, after its earlier frames; they stay
    /// invisible to every reader until `writeFrames` ends the transaction with
    /// its commit frame. Not synced: only a commit frame needs to be durable.
    /// Returns the frame number of `pages[0]`; `pages[k]` is in the frame after.
    func spill(_ pages: [Page]) throws(KuraError) -> Int {
        let first = maxFrame + 1 + uncommittedPages.count
        uncommittedChain = try append(pages, commit: 0)
        uncommittedPages.append(contentsOf: pages.map(\.number))
        return first
    }

    /// Writes `pages` as frames after the last frame written, the last one with
    /// `commit` in its commit field; returns the last frame's chain checksum.
    private func append(_ pages: [Page], commit lastCommit: UInt32) throws(KuraError) -> UInt64 {
        precondition(hasHeader && !pages.isEmpty)
        var chain = uncommittedPages.isEmpty ? lastChecksum : uncommittedChain
        // The frame headers in one buffer (every byte written below, so it is
        // not zeroed first); the page images are written from the pages
        // themselves, which stay alive (and unchanged: they are sealed) in
        // `pages` until the write returns.
        let h = Self.frameHeaderSize
        let headers = [UInt8](unsafeUninitializedCapacity: pages.count * h) { raw, initialized in
            let b = UnsafeMutableRawBufferPointer(raw)
            for (k, page) in pages.enumerated() {
                // `pages` is not empty (checked above): the buffer has a base address.
                let base = b.baseAddress! + k * h
                base.storeBytes(of: page.number.littleEndian, toByteOffset: 0, as: UInt32.self)
                let commit: UInt32 = k == pages.count - 1 ? lastCommit : 0
                base.storeBytes(of: commit.littleEndian, toByteOffset: 4, as: UInt32.self)
                base.storeBytes(of: salt1.littleEndian, toByteOffset: 8, as: UInt32.self)
                base.storeBytes(of: salt2.littleEndian, toByteOffset: 12, as: UInt32.self)
                chain = Self.chain(header: base, image: page.bytes, pageSize: pageSize, previous: chain, version: version)
                base.storeBytes(of: chain.littleEndian, toByteOffset: 16, as: UInt64.self)
            }
            initialized = pages.count * h
        }
        try headers.withBytes { hb throws(KuraError) in
            var parts: [UnsafeRawBufferPointer] = []
            parts.reserveCapacity(pages.count * 2)
            for (k, page) in pages.enumerated() {
                parts.append(UnsafeRawBufferPointer(rebasing: hb[k * h ..< (k + 1) * h]))
                parts.append(UnsafeRawBufferPointer(start: page.bytes, count: pageSize))
            }
            try withExtendedLifetime(pages) { () throws(KuraError) in
                try file.write(gathering: parts, at: frameOffset(maxFrame + 1 + uncommittedPages.count))
            }
        }
        return chain
    }

    /// Forgets the frames of a transaction that ends without committing (rolled
    /// back, or its commit failed). With `truncate`, also cuts them off the file
    /// (not synced: frames without a commit frame never count, so a crash that
    /// loses the truncation loses nothing).
    func forgetUncommittedFrames(truncate: Bool) throws(KuraError) {
        uncommittedPages.removeAll()
        if truncate {
            preparedEnd = 0
            try file.truncate(to: frameOffset(maxFrame + 1))
        }
    }

    /// Cuts the file back to the end of the last committed frame, so frames of a
    /// failed commit can never be read as committed.
    func discardUncommittedFrames() throws(KuraError) {
        uncommittedPages.removeAll()
        preparedEnd = 0
        try file.truncate(to: frameOffset(maxFrame + 1))
        try file.sync(full: false)
    }

    /// Makes written frames part of the log. Called under the pager's state lock.
    func publish(_ c: PendingCommit) {
        for (k, page) in c.pages.enumerated() { index.frames[page, default: []].append(maxFrame + 1 + k) }
        maxFrame += c.pages.count
        commitFrames.append(maxFrame)
        lastChecksum = c.chain
        committedPageCount = c.pageCount
        uncommittedPages.removeAll()
    }
}
