// Pager: pages, snapshots, commit and checkpoint over a store file and its log.
//
// On-disk format: FORMAT.md, "Pages", "The header page", "The write-ahead log".
//
// A reader's view of the database is a `Snapshot`: the log generation and last
// committed frame it started at, and the page count then. Page n in snapshot S is:
//
//     1. S.preserved[n], if a checkpoint saved S's version of n before
//        overwriting it (see below);
//     2. else, if S is attached to the current log generation, the newest log
//        frame for n numbered <= S.maxFrame;
//     3. else page n of the database file.
//
// Invariants:
//   - A committed page image never changes: log frames are append-only within a
//     generation, and a database-file page changes only in a checkpoint.
//   - Before a checkpoint overwrites database-file pages or resets the log, every
//     active snapshot gets, in `preserved`, its own version of each page the
//     checkpoint writes, and is detached from the log. So a checkpoint never waits
//     for in-process readers and the log never grows because readers overlap.
//     Across processes, a checkpoint needs the reader lock byte exclusively; while
//     another process is inside a transaction the checkpoint is skipped and tried
//     again after the next commit (FORMAT.md, "Keeping the log bounded").
//   - Pages come from disk only through `load`, which verifies the checksum (and
//     hands tree pages to `validator`) before anything else sees them.
//   - A transaction start skips reading the log only when the shared header
//     (`PATH-shm`, FORMAT.md "The shared log header") is trusted, not marked as
//     changing, and equals the log state this connection indexed; a writer
//     decides the same way, then publishes what it has; it marks the header
//     before changing the committed log or the store file (commit, reset,
//     checkpoint) and publishes after, so a crash in between leaves the mark.
//
// State machine of a connection's locks (functions that perform each transition):
//
//     idle --beginTransaction--> reading (reader byte shared, counted)
//     reading --beginWrite--> writing (writer byte exclusive) --endWrite--> reading
//     writing --checkpoint--> checkpointing (reader byte exclusive) --> writing
//     reading --endTransaction (last one)--> idle
//
// The open byte is held shared from init (openHoldingOpenLock) to close.
//
// Lock order inside a process: writerMutex -> txnLock -> fileLock -> state
// (a readers-writer lock; page lookups and most transaction starts take it
// shared) -> markLock, snapshotLock (each innermost, never nested).

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Durability of commits (FORMAT.md, "Commit").
public enum Durability: String, Sendable, CaseIterable {
    /// Sync the log at every commit (F_FULLFSYNC on Darwin). A commit that
    /// returned survives power loss.
    case full
    /// Sync only at checkpoints. A power loss may drop the last commits, never
    /// corrupt the store. A process crash loses nothing.
    case normal
    /// Never sync. A process crash loses nothing; a power loss may corrupt.
    case off
}

/// One reader's view of the database. See the header comment for how a page is
/// resolved in a snapshot.
final class Snapshot: @unchecked Sendable {
    // @unchecked Sendable: `preserved` and `detached` are guarded by the owning
    // pager's `state` lock (written exclusively, read shared); `use` is
    // atomic; the `let` fields are immutable.
    let generation: UInt32
    let maxFrame: Int
    let pageCount: UInt32
    /// The store's change counter in this snapshot (FORMAT.md, "The header
    /// page"): page 1's field plus the commits after the one that wrote that
    /// version of page 1 (`FileHeader.changeCounter`). Fixed when the snapshot
    /// is made, so a later checkpoint (which rewrites page 1 in the file)
    /// cannot change it. 0 in a probe snapshot, which never reaches a reader.
    let changeCounter: UInt64
    // Read by every page lookup: no runtime access check (`state` orders them).
    @exclusivity(unchecked) var detached = false
    @exclusivity(unchecked) var preserved: [UInt32: Page] = [:]
    /// The transactions on this snapshot (bits 1 and up) and whether a
    /// checkpoint may have preserved pages for it (bit 0, set before the
    /// pages go in: a transaction ending on a snapshot without it need not
    /// take `state` exclusively to empty `preserved`). One atomic word, so
    /// that a transaction's start adds itself (under `state` shared) and its
    /// end removes itself with one atomic operation each, and a checkpoint
    /// (under `state` exclusively) sets the bit and learns whether anyone
    /// uses the snapshot in one more: an end either comes before that
    /// operation (the checkpoint sees no user and preserves nothing) or
    /// after it (the end sees the bit and empties `preserved`).
    private let use = AtomicWord()
    static let preservedBit = 1
    static let oneUser = 2

    /// Transactions on this snapshot now.
    var users: Int { use.load() >> 1 }

    /// Counts a transaction starting on this snapshot. Caller holds the
    /// pager's `state` (shared is enough: a checkpoint, which reads the users
    /// to decide what to preserve, holds it exclusively).
    @inline(__always)
    func addUser() { use.add(Self.oneUser) }

    /// Uncounts a transaction ending on this snapshot; returns whether it was
    /// the last one and a checkpoint may have preserved pages for it.
    @inline(__always)
    func removeUser() -> (last: Bool, mayHavePreserved: Bool) {
        let now = use.add(-Self.oneUser)
        return (now >> 1 == 0, now & Self.preservedBit != 0)
    }

    /// Sets the "may have preserved" bit; returns the users before. Caller
    /// holds `state` exclusively (a checkpoint about to preserve pages).
    func markPreserving() -> Int { use.setBits(Self.preservedBit) >> 1 }

    /// Unique among the snapshots of this process, never reused: caches keyed
    /// by a snapshot hold this instead of a weak reference (a weak reference
    /// gives the object a side table, and every retain and release of it, one
    /// per transaction of every reader, then takes the runtime's slow path).
    let serial: UInt64

    /// One commit of this connection's writer that led to this snapshot: the
    /// serial of the snapshot it was made on top of and the pages it wrote.
    struct LineageStep: Sendable {
        let from: UInt64
        let pages: [UInt32]
    }

    /// The last commits of this connection's writer that led to this snapshot,
    /// newest first, each made on top of the snapshot the next entry leads to
    /// (`lineage[0].from` is the snapshot this one was committed on, and so
    /// on), in the same log generation. Empty for a snapshot made any other
    /// way (a refresh that read other connections' commits, a checkpoint,
    /// opening). At most `lineageDepth` steps and `lineagePages` pages in all.
    /// A page not written by any step between an older snapshot and this one
    /// is the same page in both: a read transaction moving to this snapshot
    /// keeps what it memoized of the older one but those pages
    /// (`SnapshotPages.reopen(on:)`).
    let lineage: [LineageStep]
    static let lineageDepth = 8
    static let lineagePages = 256

    init(generation: UInt32, maxFrame: Int, pageCount: UInt32, changeCounter: UInt64, lineage: [LineageStep] = []) {
        self.generation = generation
        self.maxFrame = maxFrame
        self.pageCount = pageCount
        self.changeCounter = changeCounter
        self.lineage = lineage
        serial = Snapshot.serials.next()
    }

    /// How many steps of `lineage` lead from the snapshot with `serial` to this
    /// one (their pages are the ones that differ), or nil if it is not among
    /// them (or is this one).
    func stepsSince(_ serial: UInt64) -> Int? {
        for (k, step) in lineage.enumerated() where step.from == serial { return k + 1 }
        return nil
    }

    /// The lineage of the snapshot a commit of `pages` on top of `self` makes,
    /// when `self` is the end of the log the commit appends to (`atLogEnd`);
    /// empty otherwise, or when the commit wrote too many pages to be worth
    /// carrying a memo across.
    func lineage(afterCommitting pages: [UInt32], atLogEnd: Bool) -> [LineageStep] {
        guard atLogEnd, pages.count <= Self.lineagePages else { return [] }
        var steps: [LineageStep] = []
        steps.reserveCapacity(min(lineage.count + 1, Self.lineageDepth))
        steps.append(LineageStep(from: serial, pages: pages))
        var total = pages.count
        for step in lineage.prefix(Self.lineageDepth - 1) {
            total += step.pages.count
            if total > Self.lineagePages { break }
            steps.append(step)
        }
        return steps
    }

    /// Hands out serials; snapshots are made per commit or log refresh, not
    /// per transaction, so a mutex costs nothing that matters.
    private static let serials = SerialCounter()
}

/// A process-wide counter (`Snapshot.serial`).
final class SerialCounter: @unchecked Sendable {
    // @unchecked Sendable: `last` is guarded by `lock`.
    private let lock = ThreadLock()
    private var last: UInt64 = 0

    func next() -> UInt64 {
        lock.withLock {
            last += 1
            return last
        }
    }
}

final class Pager: @unchecked Sendable {
    // @unchecked Sendable: mutable state is guarded as documented per field; the
    // lock order is in the header comment. The mutable fields that
    // transaction starts, page lookups and commits touch are
    // `@exclusivity(unchecked)`: the lock (or the writer slot) that guards
    // each orders its accesses, and runtime checks on them cost every call.
    let path: String
    let file: StorageFile
    let walFile: StorageFile
    let wal: WriteAheadLog
    let pageSize: Int
    let databaseID: UInt64
    let durability: Durability
    let busyTimeout: Double
    let checkpointThreshold: Int
    /// How many changed pages a write transaction keeps in memory before it
    /// spills the least recently used ones to the log: the cache's page budget.
    let spillThreshold: Int
    /// Validates a tree page's structure after its checksum, on every load from
    /// disk (the tree layer's `Node.validate`, passed in to keep calls going down).
    let validator: @Sendable (Page) throws(KuraError) -> Void
    /// Fills the summary (`Page.summary`) of a tree page this connection built,
    /// as a commit publishes it (the tree layer's `Node.summarizeBuilt`, passed
    /// in like `validator`). Readers of the new snapshot then descend through
    /// it as through a page read from disk; without it, every page a writer
    /// left in the cache costs each later lookup its header and first and last
    /// cells.
    let summarizer: @Sendable (Page) -> Void

    /// Guards cache, snapshots, `latest`, `checkpointEpoch` and the log's index.
    /// A readers-writer lock: a page lookup (`page`) only reads what it guards
    /// and takes it shared, so readers' cache hits run side by side; everything
    /// that changes what it guards takes it exclusively. Every hold is short
    /// (no system call but a checkpoint's rare page load), so its waiters spin
    /// rather than sleep in the kernel (SpinReadWriteLock).
    let state = SpinReadWriteLock()
    /// Taken (without waiting) by a page lookup holding `state` shared to set a
    /// cached page's clock bit (`Page.referenced`); when it is busy the bit is
    /// left alone, which only makes that page a little likelier to be evicted.
    /// `referenced` of a cached page is touched only under `state` exclusive,
    /// or under `state` shared plus this lock.
    private let markLock = ThreadLock()
    // `@exclusivity(unchecked)` on the fields every page lookup reads: no
    // runtime access check per read; `state` already orders every access
    // (read under it shared, changed under it exclusively).
    @exclusivity(unchecked) private var cache: PageCache
    @exclusivity(unchecked) private(set) var latest: Snapshot
    @exclusivity(unchecked) private var checkpointEpoch = 0
    /// The snapshots that may have users (checkpoints preserve pages for
    /// those that do): `latest`, and each older one that still had users
    /// when `latest` last moved on (`setLatest`, which drops the others). A
    /// transaction starts only on `latest`, so a snapshot dropped here (not
    /// `latest`, no users) never has a user again. Changed only under
    /// `state` exclusively, read under `state` in either mode: a transaction
    /// start or end does not touch it (`Snapshot.addUser`, `removeUser`).
    /// A few entries at most: a linear search beats hashing.
    // No runtime access checks here and on the fields guarded by
    // `snapshotLock` or `txnLock` below: every access holds the lock, which
    // orders them.
    @exclusivity(unchecked) private var active: [Snapshot] = []
    /// Guards `logReads`; taken inside `state` (either mode) or alone,
    /// never around another lock.
    private let snapshotLock = ThreadLock()
    /// Shared while reading database-file or log pages from disk; exclusive while
    /// a checkpoint writes the database file and resets the log.
    private let fileLock = ReadWriteLock()
    /// Guards `readerExclusiveHeld`, `presence`, `closed` and the mode of the
    /// reader lock byte, and the changes of `openWord` that start or end
    /// this connection's presence (see there).
    private let txnLock = ThreadLock()
    /// This connection's open transactions (bits 1 and up) and whether it
    /// was closed (bit 0). A transaction that is not the only one open
    /// starts and ends with one compare-and-swap here and takes no lock
    /// (`enterIfOthersOpen`, `leaveIfOthersOpen`): the transactions already
    /// open hold the presence that keeps other connections' checkpoints out
    /// (`presence`, or the checkpoint's own exclusive byte), and it is given
    /// up only under `txnLock` by the transaction that takes the count from
    /// one to zero, after which no compare-and-swap can start one (it
    /// requires a count of at least one). The first transaction (count from
    /// zero) and the last (from one) change it under `txnLock`, around
    /// taking and giving up the presence.
    private let openWord = AtomicWord()
    /// Open transactions of this connection now (see `openWord`).
    private var openTransactions: Int { openWord.load() >> 1 }
    /// Set while this connection holds the reader byte exclusively for a
    /// checkpoint (`withReaderExclusive`). Its transactions still start and
    /// end meanwhile, without touching the byte: the exclusive hold already
    /// keeps other processes out and covers them; it becomes shared again
    /// (or is released) when the checkpoint ends. Guarded by `txnLock`.
    @exclusivity(unchecked) private var readerExclusiveHeld = false
    /// How this connection's open transactions keep other connections'
    /// checkpoints out while `openTransactions > 0` (and no checkpoint of its
    /// own holds the reader byte): its reader mark, or the reader byte shared.
    /// Guarded by `txnLock`.
    @exclusivity(unchecked) private var presence = ReaderPresence.none
    private enum ReaderPresence { case none, mark, byte }
    /// This connection's slot in the reader table of `PATH-shm` (FORMAT.md,
    /// "Reader marks"); nil without one (a store before format 7, no shared
    /// memory, every slot taken): then every transaction takes the reader
    /// byte. Guarded by `txnLock`.
    @exclusivity(unchecked) private var marks: ReaderMarks?
    /// Whether the store is at format 7 or later (readers of other connections
    /// may be inside transactions with only their mark set): a checkpoint must
    /// then see the reader table, or find the store open by no one else.
    /// Guarded by `txnLock`.
    @exclusivity(unchecked) private var marksRequired = false
    /// One writer per connection: guards `writerActive`.
    let writerMutex = ThreadLock()
    @exclusivity(unchecked) private var writerActive = false
    @exclusivity(unchecked) private var closed = false
    /// The header of `PATH-shm` (FORMAT.md, "The shared log header"); nil
    /// where there is no shared memory (in memory, fault injecting, or the
    /// file could not be opened or mapped): readers then read the log at every
    /// transaction start.
    private let sharedHeader: SharedLogHeader?
    /// Whether this connection's readers may skip reading the log when the
    /// shared header says it is unchanged: the store was at format 3 or later
    /// when this connection opened it (or it upgraded it). Set in init only.
    @exclusivity(unchecked) private var sharedHeaderUsable = false
    /// Transaction starts that read the log, and those the shared header let
    /// skip it (for tests: the fast path is taken). `logReads` is guarded
    /// by `snapshotLock`; `logReadsSkipped`, counted at most starts, is atomic.
    @exclusivity(unchecked) private var logReads = 0
    private let logReadsSkipped = AtomicWord()
    /// `(logReads, logReadsSkipped)` now.
    var logReadCounts: (reads: Int, skipped: Int) { (snapshotLock.withLock { logReads }, logReadsSkipped.load()) }
    /// Test hook: commits leave the shared header marked as changing instead of
    /// publishing, as a writer killed between its log write and the publish
    /// would. Writer only.
    @exclusivity(unchecked) var skipsSharedPublishForTesting = false

    /// Opens (or creates) the store at `path` on `fs`.
    init(path: String, fs: FileSystem, pageSize requestedPageSize: Int, cacheBytes: Int,
         durability: Durability, busyTimeout: Double, checkpointThreshold: Int, logSizeLimit: Int, create: Bool,
         validator: @escaping @Sendable (Page) throws(KuraError) -> Void,
         summarizer: @escaping @Sendable (Page) -> Void = { _ in }) throws(KuraError) {
        self.path = path
        self.validator = validator
        self.summarizer = summarizer
        self.durability = durability
        self.busyTimeout = busyTimeout
        self.checkpointThreshold = max(checkpointThreshold, 1)
        let file = try Pager.openHoldingOpenLock(path, fs, create: create, busyTimeout: busyTimeout)
        self.file = file
        var success = false
        defer { if !success { file.close() } }

        // Create: the first connection to find the file empty writes page 1.
        if try file.size() == 0 {
            try Pager.waitForLock(file, .create, .exclusive, timeout: busyTimeout, what: "create the store")
            defer { file.unlock(.create) }
            if try file.size() == 0 {
                guard FileHeader.isValidPageSize(requestedPageSize) else {
                    throw KuraError(.invalidArgument, "page size \(requestedPageSize) is not a power of two from 512 to 65536", path: path)
                }
                try Pager.refuseOrphanedLog(path, fs)
                // The catalog tree is created by the first write transaction.
                let header = Page(number: 1, size: requestedPageSize)
                header.initializeHeader(pageSize: requestedPageSize, catalogRoot: 0)
                header.sealChecksum()
                try file.write(UnsafeRawBufferPointer(header.buffer), at: 0)
                if durability != .off { try file.sync(full: durability == .full) }
            }
        }

        // Read the header's fixed fields straight from the file. Its checksum is
        // not checked here: a checkpoint torn inside page 1 leaves a page whose
        // fixed fields (magic, version, page size, database ID: never rewritten
        // after creation) are intact, and whose current version is in the log.
        // Page 1 is checksum-verified when it is first read through a snapshot.
        var first = [UInt8](repeating: 0, count: FileHeader.endOffset)
        let n = try first.withMutableBytes { b throws(KuraError) in try file.read(into: b, at: 0) }
        let (version, ps) = try first.withBytes { b throws(KuraError) in
            try FileHeader.validate(UnsafeRawBufferPointer(rebasing: b[0..<n]), path: path)
        }
        pageSize = ps
        databaseID = first.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(fromByteOffset: FileHeader.databaseIDOffset, as: UInt64.self)) }

        walFile = try fs.open(path + "-wal", create: true, permissionsOf: file)
        // A reset keeps a log of up to `logSizeLimit` bytes (whole frames).
        let frameBytes = WriteAheadLog.frameHeaderSize + ps
        wal = WriteAheadLog(file: walFile, pageSize: ps, databaseID: databaseID,
                            reuseFrames: (max(logSizeLimit, WriteAheadLog.headerSize) - WriteAheadLog.headerSize) / frameBytes)
        try Pager.finishInterruptedCreation(file, wal, pageSize: ps, databaseID: databaseID,
                                            durability: durability, busyTimeout: busyTimeout)
        cache = PageCache(capacity: max(cacheBytes / ps, 8))
        spillThreshold = max(cacheBytes / ps, 8)
        let initial = Snapshot(generation: 0, maxFrame: 0, pageCount: 1, changeCounter: 0)
        latest = initial
        active = [initial]
        self.fs = fs
        sharedHeader = Pager.openSharedHeader(path, fs, file, databaseID: databaseID, busyTimeout: busyTimeout)
        success = true
        // Recovery: index the committed frames of the log. The snapshot is
        // released, or it would stay active for the connection's lifetime and
        // every checkpoint would preserve pages for it.
        let recovered = try beginTransaction()
        let committedVersion: UInt32
        do {
            committedVersion = try page(1, recovered).headerVersion
        } catch {
            endTransaction(recovered)
            throw error
        }
        endTransaction(recovered)
        // The format the store has committed (its log may hold a newer page 1
        // than its file, after an upgrade whose checkpoint failed) decides
        // whether every connection keeps the reader table's protocol.
        // Only a store in POSIX files can have marked readers: the table is
        // shared memory, which no other file system here has.
        if max(version, committedVersion) >= FileHeader.readerMarksVersion && file is PosixFile {
            txnLock.withLock {
                marksRequired = true
                claimReaderMarks()
            }
        }
        try setUpSharedHeader(fileVersion: version)
    }

    /// Opens and maps `PATH-shm` (FORMAT.md, "The shared log header"),
    /// creating it if missing and growing it, never shrinking it, under the
    /// create lock: another connection may have it mapped. Returns nil where
    /// the store is not in POSIX files, or the file cannot be opened, sized or
    /// mapped (a directory without write access, no shared memory): not an
    /// error, readers then read the log at every transaction start.
    private static func openSharedHeader(_ path: String, _ fs: FileSystem, _ file: StorageFile, databaseID: UInt64,
                                         busyTimeout: Double) -> SharedLogHeader? {
        guard file is PosixFile else { return nil }
        let size = Int64(SharedLogHeader.fileSize)
        do {
            let shm = try fs.open(path + "-shm", create: true, permissionsOf: file)
            defer { shm.close() }  // the mapping keeps the file
            if try shm.size() < size {
                try waitForLock(file, .create, .exclusive, timeout: busyTimeout, what: "size the shared log header")
                defer { file.unlock(.create) }
                if try shm.size() < size { try shm.truncate(to: size) }
            }
            guard let mapping = SharedMapping.map(shm, length: SharedLogHeader.fileSize) else { return nil }
            return SharedLogHeader(mapping: mapping, databaseID: databaseID)
        } catch {
            // Only a hint: without it every reader takes the slow path.
            return nil
        }
    }

    /// The file system the store is in (for the `-shm` file's slot locks).
    private let fs: FileSystem

    /// Claims a slot in the reader table (FORMAT.md, "Reader marks") for a
    /// store of format 7 or later; without the shared memory or a free slot,
    /// the connection's transactions take the reader byte. Called from init
    /// and, after an upgrade to format 7, by `adoptReaderMarks`. Caller holds
    /// `txnLock`.
    ///
    /// The slot locks go through a handle of their own, not the one the
    /// header was mapped from: a mapping keeps its file's open description
    /// alive until it is unmapped, and with it any OFD lock taken through it,
    /// which must go when the connection closes. The `-shm` file exists (the
    /// header is mapped) and cannot be removed meanwhile (a destroy needs the
    /// open byte exclusively).
    private func claimReaderMarks() {
        guard let header = sharedHeader else { return }
        let locks: StorageFile
        do {
            locks = try fs.open(path + "-shm", create: false, permissionsOf: nil)
        } catch {
            // No slot locks: the connection takes the reader byte.
            return
        }
        marks = ReaderMarks.claim(mapping: header.mapping, file: locks)
        // ReaderMarks closes the handle when it goes; without a slot it is not needed.
        if marks == nil { locks.close() }
    }

    /// After the database moved the store to format 7 or later while this
    /// connection had it open alone (Database, `upgradeFormat`): from now on
    /// every connection of the store keeps the reader table's protocol.
    func adoptReaderMarks() {
        txnLock.withLock {
            guard !marksRequired, file is PosixFile else { return }
            marksRequired = true
            claimReaderMarks()
        }
    }

    /// Test hook: the reader table through this connection's slot.
    var readerMarksForTesting: ReaderMarks? { txnLock.withLock { marks } }

    /// Decides whether this connection's readers may trust the shared header
    /// (FORMAT.md, "The shared log header"). A connection that finds no other
    /// connection (of any build) has the store open (the open byte can be
    /// taken exclusively) writes the header afresh: untrusted, then moves a
    /// format-2 or format-3 store to format 4, then, at format 3 or later,
    /// trusted with the log's state. Beside other connections, a format-3 or
    /// format-4 store's header is used as it is (the connection that set it
    /// trusted was alone with such a store, and builds before format 3 refuse
    /// it); a format-1 or format-2 store is left as it is and every read takes
    /// the slow path.
    private func setUpSharedHeader(fileVersion: UInt32) throws(KuraError) {
        guard let shm = sharedHeader else { return }
        var version = fileVersion
        if try file.lock(.open, .exclusive) {
            shm.initialize(trusted: false, state: LogState())
            if version == 2 || version == 3 { version = upgradeToFormat4(from: version) }
            if version >= 3 {
                let s = try beginTransaction(fromFile: true)
                state.withLock { shm.initialize(trusted: true, state: wal.state) }
                endTransaction(s)
            }
            // The open byte stays exclusive until `finishOpening`: the
            // database may still move the store to a newer format.
            openedAlone = true
            versionOpenedAlone = version
        }
        sharedHeaderUsable = version >= 3
    }

    /// The log version a reset writes for a store of format `storeVersion`:
    /// 2 from format 6 on (builds that read only version 1 refuse such a
    /// store), else 1. The caller reads `storeVersion` from the page 1 the
    /// store file holds once the log is empty or checkpointed.
    func logVersion(for storeVersion: UInt32) -> UInt32 {
        storeVersion >= FileHeader.shortChainVersion ? WriteAheadLog.shortChainVersion : 1
    }

    /// Whether this connection found no other connection with the store open
    /// and still holds the open byte exclusively: from `init` until
    /// `finishOpening`, while the database may upgrade the store's format
    /// (Database, `upgradeFormat`).
    private(set) var openedAlone = false
    /// The store file's format version once `init` upgraded what it could
    /// (set when `openedAlone`).
    private(set) var versionOpenedAlone: UInt32 = 0

    /// Turns the open byte that `init` kept exclusive (`openedAlone`) back into
    /// a shared one, letting other connections open the store. Nothing if it
    /// is shared already.
    ///
    /// - Throws: `.io` (and closes the pager) if fcntl refuses the conversion.
    func finishOpening() throws(KuraError) {
        guard openedAlone else { return }
        openedAlone = false
        do {
            try retakeSharedOpenLock()
        } catch {
            close()
            throw error
        }
    }

    /// Turns this connection's exclusive open byte back into a shared one.
    /// The conversion cannot meet a conflicting lock (this handle holds the
    /// byte exclusively); should the system still refuse it three times, an
    /// `.io` error says so.
    private func retakeSharedOpenLock() throws(KuraError) {
        var shared = false
        for _ in 0..<3 where !shared { shared = try file.lock(.open, .shared) }
        guard shared else {
            throw KuraError(.io, "fcntl refused to turn this connection's exclusive open lock back into a shared one; retry", path: path)
        }
    }

    /// Moves a format-2 or format-3 store to format 4 (FORMAT.md, "Version
    /// history"): a commit of page 1 with version 4, then a checkpoint, so that
    /// the store file says 4 before any other connection can open it. The
    /// caller holds the open byte exclusively (no other connection has the
    /// store open). Returns the version the store file has afterwards; a
    /// failure (a full disk, an I/O error) leaves the old format, which works
    /// as before, and the next connection that opens the store alone tries
    /// again.
    private func upgradeToFormat4(from fileVersion: UInt32) -> UInt32 {
        do {
            let s = try beginWrite()
            do {
                let h = try page(1, s)
                // Version 4 already in the log: an upgrade stopped before its
                // checkpoint, which the one below completes.
                if h.headerVersion < FileHeader.derivedCounterVersion {
                    let p = Page(copying: h)
                    p.headerVersion = FileHeader.derivedCounterVersion
                    p.headerChangeCounter = s.changeCounter &+ 1
                    try commit([p], pageCount: s.pageCount, changeCounter: s.changeCounter &+ 1)
                }
            } catch {
                endWrite(s)
                throw error
            }
            endWrite(s)
            _ = try checkpointAsWriter()
            var bytes = [UInt8](repeating: 0, count: FileHeader.versionOffset + 4)
            guard try bytes.withMutableBytes({ b throws(KuraError) in try file.readFully(into: b, at: 0) }) else { return fileVersion }
            return bytes.withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: FileHeader.versionOffset, as: UInt32.self)) }
        } catch {
            // Not an error of the open: the old format stays fully usable.
            return fileVersion
        }
    }

    /// A creation cut short by a power loss can leave page 1 incomplete (the file
    /// shorter than a page) or torn (its checksum fails) while its first bytes
    /// (magic, version, page size, database ID) already read as valid: the store
    /// then failed every open with `corrupt`. If the file is at most one page long,
    /// its header fields are those of a new store (one page, no catalog, change
    /// counter 1) and the log has no valid header, nothing was ever committed (the
    /// first commit starts the log) and the file holds nothing but page 1, so
    /// page 1 is written again, as creation would have. Runs under the create lock.
    private static func finishInterruptedCreation(_ file: StorageFile, _ wal: WriteAheadLog, pageSize: Int, databaseID: UInt64,
                                                  durability: Durability, busyTimeout: Double) throws(KuraError) {
        guard try file.size() <= Int64(pageSize) else { return }
        try waitForLock(file, .create, .exclusive, timeout: busyTimeout, what: "check a newly created store")
        defer { file.unlock(.create) }
        guard try file.size() <= Int64(pageSize) else { return }
        let header = Page(number: 1, size: pageSize)
        if try file.readFully(into: header.buffer, at: 0), header.checksumIsValid { return }
        // Only a page 1 that still reads as creation writes it (its first sector,
        // which holds every field, intact): a store that ever held data says so.
        guard header.headerPageCount == 1, header.headerCatalogRoot == 0, header.headerFreelistHead == 0,
              header.headerChangeCounter == 1 else { return }
        _ = try wal.refresh()
        if wal.hasHeader { return }  // committed data may exist: leave it to the normal checks
        header.initializeHeader(pageSize: pageSize, catalogRoot: 0)
        header.headerDatabaseID = databaseID
        header.sealChecksum()
        try file.write(UnsafeRawBufferPointer(header.buffer), at: 0)
        if durability != .off { try file.sync(full: durability == .full) }
    }

    /// An empty store file with a log beside it that holds bytes: the log may be
    /// the only copy of committed transactions (the store file was truncated or
    /// replaced), so it is neither removed nor reused. A log of a deleted store is
    /// recognised the same way; the user decides. Runs under the create lock.
    private static func refuseOrphanedLog(_ path: String, _ fs: FileSystem) throws(KuraError) {
        guard fs.exists(path + "-wal") else { return }
        let log = try fs.open(path + "-wal", create: false)
        defer { log.close() }
        let size = try log.size()
        guard size > 0 else { return }
        throw KuraError(.corrupt, "the store file is empty but its log \(path)-wal holds \(size) bytes, which may be committed data of a store that was truncated or deleted; restore the store file, or move the log away to start a new store here", path: path)
    }

    /// Opens the store file and takes its open byte shared, held until the
    /// connection closes (FORMAT.md, "Concurrency and locks"): a destroy
    /// (Database+Destroy.swift) takes it exclusively and is refused while any
    /// connection holds it. A connection that waited while a destroy removed
    /// the files finds its handle's file no longer at `path` and opens the
    /// path again (a few times, then `.busy`).
    private static func openHoldingOpenLock(_ path: String, _ fs: FileSystem, create: Bool, busyTimeout: Double) throws(KuraError) -> StorageFile {
        for _ in 0..<8 {
            let file = try fs.open(path, create: create)
            do {
                try waitForLock(file, .open, .shared, timeout: busyTimeout, what: "open the store (it is being destroyed)")
                if try file.isLinked(at: path) { return file }
            } catch {
                file.close()
                throw error
            }
            file.close()
        }
        throw KuraError(.busy, "the store was destroyed and created again repeatedly while this connection opened it; retry", path: path)
    }

    static func waitForLock(_ file: StorageFile, _ byte: LockByte, _ mode: LockMode, timeout: Double, what: String) throws(KuraError) {
        var waited = 0.0
        var delay = 0.0001
        while !(try file.lock(byte, mode)) {
            if waited >= timeout {
                throw KuraError(.busy, "another connection held the lock for \(timeout) s, so Kura could not \(what); retry, or raise the busy timeout", path: file.path)
            }
            usleep(UInt32(delay * 1e6))
            waited += delay
            delay = min(delay * 2, 0.01)
        }
    }

    // MARK: Transactions

    /// Enters a transaction: takes the reader byte (first transaction only), picks
    /// up other processes' commits, and returns the snapshot to read from.
    /// With `fromFile`, the log is read even if the shared header says it is
    /// unchanged (a writer under the write lock, which publishes what it read).
    @discardableResult
    func beginTransaction(fromFile: Bool = false) throws(KuraError) -> Snapshot {
        if !enterIfOthersOpen() { try enterFirst() }
        do throws(KuraError) {
            // Most starts find the log unchanged (the shared header says so,
            // or this connection's writer holds the write lock): then `state`
            // is only read, shared with other readers' page lookups.
            state.lockShared()
            if !fromFile, unchangedSinceIndexed {
                let s = latest
                s.addUser()
                let skippedLogRead = !ownWriterActive
                state.unlockShared()
                if skippedLogRead { logReadsSkipped.add(1) }
                return s
            }
            state.unlockShared()
            return try state.withLock { () throws(KuraError) -> Snapshot in
                try refreshLocked(fromFile: fromFile)
                latest.addUser()
                return latest
            }
        } catch {
            endTransaction()
            throw error
        }
    }

    /// Counts a transaction in `openWord` if others are open (and the
    /// connection is not closed), with no lock: their presence covers it.
    /// Returns false when it must take the slow way (`enterFirst`).
    @inline(__always)
    private func enterIfOthersOpen() -> Bool {
        var w = openWord.load()
        while w >= 2 && w & 1 == 0 {
            let (done, found) = openWord.compareExchange(expected: w, desired: w + 2)
            if done { return true }
            w = found
        }
        return false
    }

    /// Uncounts a transaction in `openWord` if others stay open, with no
    /// lock. Returns false when it may be the last (`endTransaction` then
    /// takes `txnLock`).
    @inline(__always)
    private func leaveIfOthersOpen() -> Bool {
        var w = openWord.load()
        while w >= 4 {
            let (done, found) = openWord.compareExchange(expected: w, desired: w - 2)
            if done { return true }
            w = found
        }
        return false
    }

    /// Counts a transaction under `txnLock`, taking the connection's
    /// presence first if it is the only one open.
    private func enterFirst() throws(KuraError) {
        try txnLock.withLock { () throws(KuraError) in
            if closed { throw KuraError(.misuse, "database is closed", path: path) }
            if openTransactions == 0 && !readerExclusiveHeld {
                if let marks, marks.enter() {
                    presence = .mark
                } else {
                    try Pager.waitForLock(file, .reader, .shared, timeout: busyTimeout, what: "start a transaction (a checkpoint is running)")
                    presence = .byte
                    // With the byte shared no checkpointer is between setting
                    // and clearing the word: one still set is a dead one's.
                    if let marks, marks.checkpointWordSet { marks.clearCheckpointWord() }
                }
            }
            openWord.add(2)
        }
    }

    /// Makes `s` the newest snapshot, and drops from `active` the older ones
    /// nobody uses (no transaction can start on them again: see `active`),
    /// with the pages a checkpoint preserved for them. Caller holds `state`
    /// exclusively.
    private func setLatest(_ s: Snapshot) {
        latest = s
        active.removeAll { old in
            guard old.users == 0 else { return false }
            old.preserved.removeAll()
            return true
        }
        active.append(s)
    }

    /// Leaves a transaction started with `beginTransaction`.
    func endTransaction(_ snapshot: Snapshot? = nil) {
        if let snapshot {
            let (last, mayHavePreserved) = snapshot.removeUser()
            if last && mayHavePreserved {
                // Its preserved pages go (under `state`, which guards them),
                // unless a transaction started on it again meanwhile.
                state.withLock {
                    if snapshot.users == 0 { snapshot.preserved.removeAll() }
                }
            }
        }
        if leaveIfOthersOpen() { return }
        txnLock.withLock {
            // A transaction may have started meanwhile without the lock
            // (`enterIfOthersOpen`): the count after says who is last.
            let left = openWord.add(-2) >> 1
            // During a checkpoint the byte is the checkpoint's (exclusive): it
            // is given back when the checkpoint ends.
            if left == 0 && !readerExclusiveHeld { releasePresence() }
        }
    }

    /// Ends what keeps other connections' checkpoints out once this
    /// connection has no transaction open: its mark or the reader byte.
    /// Caller holds `txnLock`.
    private func releasePresence() {
        switch presence {
        case .mark: marks?.leave()
        case .byte: releaseReaderByte()
        case .none: break
        }
        presence = .none
    }

    /// Reads the log for commits made by other connections. Caller holds `state`.
    ///
    /// Skipped while this connection's writer holds the store's write lock: then
    /// no other connection can append or reset the log, and the writer's own
    /// frames, written before it publishes them, must not be indexed twice.
    ///
    /// Skipped too, without a system call, when the shared header says the
    /// committed log is still the one this connection indexed (FORMAT.md, "The
    /// shared log header"): the reader byte is held, so no checkpoint can have
    /// changed the store file since, and a hint read as "unchanged" was true
    /// when it was read. `fromFile` reads the log anyway.
    private func refreshLocked(fromFile: Bool = false) throws(KuraError) {
        if ownWriterActive { return }
        if !fromFile, unchangedSinceIndexed {
            logReadsSkipped.add(1)
            return
        }
        snapshotLock.withLock { logReads += 1 }
        let result = try wal.refresh()
        switch result {
        case .reset:
            cache.removeAll()
        case .appended(let n):
            if n == 0 && latestIsCurrent && latest.generation == wal.generation && latest.maxFrame == wal.maxFrame { return }
        }
        // Page 1 as the new snapshot sees it (from the database file when the
        // log has no committed frame): the page count then, and the change
        // counter always (FileHeader.changeCounter).
        let m = wal.maxFrame
        let probe = Snapshot(generation: wal.generation, maxFrame: m, pageCount: 1, changeCounter: 0)
        let h = try pageLocked(1, probe)
        let counter = FileHeader.changeCounter(field: h.headerChangeCounter, pageOneFrame: wal.index.lookup(1, limit: m)) { from in
            wal.commits(from: from, through: m)
        }
        setLatest(Snapshot(generation: wal.generation, maxFrame: m, pageCount: m == 0 ? h.headerPageCount : wal.committedPageCount,
                           changeCounter: counter))
        latestIsCurrent = true
    }

    /// Whether a transaction may start on `latest` without reading the log:
    /// this connection's writer holds the write lock, or the shared header
    /// says the log is the one indexed. Caller holds `state` (either mode).
    private var unchangedSinceIndexed: Bool {
        if ownWriterActive { return true }
        guard sharedHeaderUsable, latestIsCurrent, let shm = sharedHeader else { return false }
        return latest.generation == wal.generation && latest.maxFrame == wal.maxFrame && shm.isCurrent(wal.state)
    }

    @exclusivity(unchecked) private var latestIsCurrent = false
    /// True from the moment this connection's writer has refreshed under the
    /// write lock until it releases it. Only a writer (holding the writer
    /// slot) stores it, under `state` in either mode: a reader that reads the
    /// log under `state` held exclusively (`refreshLocked`) is ordered with
    /// every store, and one that only checks it under `state` shared
    /// (`unchangedSinceIndexed`) is right with either value (the log has not
    /// changed until the writer publishes, under `state` exclusively). An
    /// atomic, so that `beginWrite` sets it without waiting for the readers'
    /// page lookups to drain.
    private let writerFlag = AtomicFlag()
    private var ownWriterActive: Bool { writerFlag.load() }

    // MARK: Reading pages

    /// Page `number` as seen by `snapshot`. The page is immutable; keep it only
    /// while the snapshot is in use. `sequential`: a scan of a whole tree asks
    /// for it, and a page read from disk then enters the cache only on a
    /// scan's second read of it (`PageCache.admitsScanned`).
    func page(_ number: UInt32, _ snapshot: Snapshot, sequential: Bool = false) throws(KuraError) -> Page {
        guard number >= 1 && number <= snapshot.pageCount else {
            throw KuraError.corruption("reference to page \(number), beyond the last page (\(snapshot.pageCount))", page: number, path: path)
        }
        while true {
            // Shared: lookups of any number of readers (and the writer's) run
            // together; only what changes the cache, the log index or the
            // snapshots takes `state` exclusively.
            state.lockShared()
            if readerLockLost {
                state.unlockShared()
                throw KuraError(.io, "this connection lost its reader lock (fcntl refused to convert it), so another process could have checkpointed under this transaction; end the transaction and retry", path: path, page: number)
            }
            if !snapshot.preserved.isEmpty, let p = snapshot.preserved[number] {
                state.unlockShared()
                return p
            }
            var frame = 0
            var key = UInt64(number)
            if !snapshot.detached && snapshot.generation == wal.generation, let f = wal.index.lookup(number, limit: snapshot.maxFrame) {
                frame = f
                key = PageCache.frameKey(generation: wal.generation, frame: f)
            }
            if let p = cache.peek(key) {
                if markLock.tryLock() {
                    p.referenced = true
                    markLock.unlock()
                }
                state.unlockShared()
                return p
            }
            let epoch = checkpointEpoch
            state.unlockShared()

            fileLock.lockShared()
            defer { fileLock.unlock() }
            let stillValid = state.withShared { epoch == checkpointEpoch }
            if !stillValid { continue }
            let p = try load(number, frame: frame, shared: true)
            state.withLock {
                if epoch == checkpointEpoch && (!sequential || cache.admitsScanned(key)) { cache.put(key, p) }
            }
            return p
        }
    }

    /// Same as `page` for a caller that holds `state` (and excludes checkpoints).
    private func pageLocked(_ number: UInt32, _ snapshot: Snapshot) throws(KuraError) -> Page {
        if let p = snapshot.preserved[number] { return p }
        var frame = 0
        var key = UInt64(number)
        if !snapshot.detached && snapshot.generation == wal.generation, let f = wal.index.lookup(number, limit: snapshot.maxFrame) {
            frame = f
            key = PageCache.frameKey(generation: wal.generation, frame: f)
        }
        if let p = cache.get(key) { return p }
        let p = try load(number, frame: frame, shared: true)
        cache.put(key, p)
        return p
    }

    /// Reads a page from the log (frame > 0) or the database file, verifying its
    /// checksum and structure. `shared`: the page goes to the cache, immutable;
    /// otherwise (a writer's spilled page, which it goes on changing) the
    /// summary the validator recorded (`Page.summary`) is dropped, so that no
    /// change to the bytes can leave it stale.
    private func load(_ number: UInt32, frame: Int, shared: Bool = false) throws(KuraError) -> Page {
        // Not zeroed: both reads below fill the whole buffer or throw.
        let p = Page(number: number, size: pageSize, toBeFilledEntirely: ())
        if frame > 0 {
            try wal.readFrame(frame, into: p)
        } else {
            let ok = try file.readFully(into: p.buffer, at: Int64(number - 1) * Int64(pageSize))
            guard ok else {
                throw KuraError(.corrupt, "page \(number) is past the end of the file; the file is truncated", path: path, page: number)
            }
        }
        guard p.checksumIsValid else {
            throw KuraError.corruption("checksum mismatch (stored \(hex(p.u64(pageSize - pageTrailerSize))), computed \(hex(p.computeChecksum())))" + (frame > 0 ? " in log frame \(frame)" : ""), page: number, path: path)
        }
        try validator(p)
        if !shared { p.summary = .none }
        return p
    }

    // MARK: Writing

    /// Takes the connection's writer slot and the store's writer lock, then
    /// enters a transaction. Waits for other writers in this connection; waits at
    /// most the busy timeout for other connections.
    func beginWrite(timeout: Double? = nil) throws(KuraError) -> Snapshot {
        writerMutex.lock()
        while writerActive { writerMutex.wait() }
        writerActive = true
        writerMutex.unlock()
        do {
            try Pager.waitForLock(file, .writer, .exclusive, timeout: timeout ?? busyTimeout, what: "start a write transaction")
        } catch {
            releaseWriterSlot()
            throw error
        }
        do {
            // The hint serves the writer as it serves readers: every writer
            // marks it before changing the log, so an even header equal to this
            // connection's state means nobody has changed the log since (and,
            // under the writer lock, nobody can now). Anything else reads the
            // log from the file under `state`, and the publish below clears a
            // "changing" mark that a writer killed between its log write and its
            // publish left. (Reading the file at every write held `state`, which
            // every reader's page lookup needs, across an fstat and a pread.)
            let snapshot = try beginTransaction()
            // Shared, as readers' lookups take it: the flag is atomic, and the
            // header needs a publish (under `state` exclusively) only when it
            // does not already say the log is the one this connection indexed.
            let publish = state.withShared { () -> Bool in
                writerFlag.store(true)
                guard let shm = sharedHeader else { return false }
                return !shm.isCurrent(wal.state)
            }
            if publish { state.withLock { sharedHeader?.publish(wal.state) } }
            return snapshot
        } catch {
            file.unlock(.writer)
            releaseWriterSlot()
            throw error
        }
    }

    private func releaseWriterSlot() {
        writerMutex.withLock {
            writerActive = false
            writerMutex.broadcast()
        }
    }

    /// Ends a write transaction (after commit or rollback). With
    /// `checkpointIfDue`, runs an automatic checkpoint first when the log is past
    /// the threshold; a failing automatic checkpoint is not an error of the commit
    /// (it is retried after the next one).
    func endWrite(_ snapshot: Snapshot, checkpointIfDue: Bool = false) {
        if !wal.uncommittedPages.isEmpty {
            // Rolled back after spilling: its frames never count (no commit
            // frame); cutting them off only gives the space back. If the cut
            // fails, the next commit overwrites them.
            do { try wal.forgetUncommittedFrames(truncate: true) } catch {}
        }
        endTransaction(snapshot)
        if checkpointIfDue && checkpointDue {
            do { _ = try checkpoint() } catch {
                // Not an error of the commit, which is durable in the log: the
                // log keeps every frame until a checkpoint succeeds (a later
                // commit retries, and recovery replays the log after a crash).
            }
        }
        // Cleared by the commit unless a checkpoint was due. Only a writer
        // (holding the writer slot, as this thread does) sets or clears the
        // flag, so reading it here without `state` sees the last write.
        if ownWriterActive { state.withLock { writerFlag.store(false) } }
        file.unlock(.writer)
        releaseWriterSlot()
    }

    /// Commits `pages` (already final, any order) as one transaction with the
    /// database now `pageCount` pages long and the change counter at
    /// `changeCounter` (FORMAT.md, "The header page": one more than the
    /// writer's snapshot's, unless it is a checkpoint's page-1 commit).
    /// Returns once the commit is durable per the durability mode (a commit
    /// with `sync: false` is not synced: the checkpoint that makes one syncs
    /// the log next). On a thrown error nothing is committed.
    func commit(_ pages: [Page], pageCount: UInt32, changeCounter: UInt64, sync: Bool = true) throws(KuraError) {
        precondition(!pages.isEmpty)
        try prepareLogForAppend()
        let sorted = pages.sorted { $0.number < $1.number }
        // Final bytes, then the summary (sealing empties it): from here on the
        // pages are never changed (a later writer copies a page to change it).
        for p in sorted {
            p.sealChecksum()
            summarizer(p)
        }
        // Readers stop trusting the shared header until the publish below; a
        // crash in between leaves the mark, so readers read the log until the
        // next writer publishes.
        sharedHeader?.beginChange()
        let pending: WriteAheadLog.PendingCommit
        do {
            pending = try wal.writeFrames(sorted, pageCount: pageCount, sync: sync && durability == .full, fullSync: true)
        } catch {
            // The frames may be complete on disk even though the write or sync
            // failed: cut them off so that no one ever reads them as committed.
            do { try wal.discardUncommittedFrames() } catch {
                poisoned = true
            }
            throw error
        }
        state.withLock {
            let firstFrame = wal.maxFrame + 1 + wal.uncommittedPages.count
            // The versions these pages replace leave the cache: new
            // transactions read the new frames, and a transaction still on an
            // older snapshot reads an evicted version again from the log or
            // the file. Kept, a writer's every commit would add a cached copy
            // of the same hot leaves (one per frame until the next checkpoint)
            // and push out the pages readers use.
            for p in sorted {
                if let old = wal.index.lookup(p.number, limit: wal.maxFrame) {
                    cache.remove(PageCache.frameKey(generation: wal.generation, frame: old))
                } else {
                    cache.remove(UInt64(p.number))
                }
            }
            // The new snapshot differs from `latest` in exactly the pages of
            // these frames when `latest` is the whole log before them.
            let previous = latest
            let lineage = previous.lineage(afterCommitting: pending.pages,
                                           atLogEnd: previous.generation == wal.generation && previous.maxFrame == wal.maxFrame)
            wal.publish(pending)
            for (k, p) in sorted.enumerated() {
                p.referenced = true
                cache.put(PageCache.frameKey(generation: wal.generation, frame: firstFrame + k), p)
            }
            setLatest(Snapshot(generation: wal.generation, maxFrame: wal.maxFrame, pageCount: pageCount, changeCounter: changeCounter,
                               lineage: lineage))
            if !skipsSharedPublishForTesting { sharedHeader?.publish(wal.state) }
            // A write transaction commits once, and writes no frame after
            // its commit: unless the checkpoint `endWrite` runs is due, this
            // connection's readers may read the log again from here on, and
            // `endWrite` need not take `state` a third time to say so.
            if wal.maxFrame < checkpointThreshold { writerFlag.store(false) }
        }
    }

    /// Before the first frame of a write transaction: starts the log if it has
    /// no valid header, and cuts off a failed commit's leftover frames.
    private func prepareLogForAppend() throws(KuraError) {
        guard wal.uncommittedPages.isEmpty else { return }  // done at the first spill
        if !wal.hasHeader {
            // No valid log header: nobody can be reading frames, so a new log can
            // be started without waiting for other connections' readers.
            sharedHeader?.beginChange()
            try state.withLock { () throws(KuraError) in
                try wal.reset(sync: false, version: logVersion(for: try pageLocked(1, latest).headerVersion))
            }
        }
        if wal.maxFrame == 0 && durability != .off && !wal.headerDurable {
            // The first frame of a generation, after a header this connection
            // has not synced: from format 8 on a reset does not sync the
            // header it writes (whoever reset the log), and one this writer
            // just wrote above is not synced either. It must be on disk before
            // any frame after it (FORMAT.md, "Reset").
            try wal.syncHeader()
        }
        if poisoned {
            // An earlier commit failed and its frames could not be cut off then.
            // This writer has re-read the log since (beginTransaction), so what
            // follows the committed log now is garbage: cut it off before going on.
            try wal.discardUncommittedFrames()
            poisoned = false
        }
    }

    /// Writes pages of the write transaction in progress to the log as frames
    /// without a commit mark, so the transaction can drop them from memory
    /// (FORMAT.md, "Commit"). No reader, in this process or another, and no
    /// recovery sees them before the transaction's commit frame is written: the
    /// log index is not changed, and scans cut the log back to its last commit
    /// frame. Returns the frame of `pages[0]`; the others follow in order. On a
    /// thrown error the transaction must not commit (its frames are unknown).
    func spill(_ pages: [Page]) throws(KuraError) -> Int {
        precondition(!pages.isEmpty)
        try prepareLogForAppend()
        for p in pages { p.sealChecksum() }
        return try wal.spill(pages)
    }

    /// Reads back a page the write transaction in progress spilled to `frame`,
    /// checking its checksum and structure like any page from disk.
    func loadSpilled(_ number: UInt32, frame: Int) throws(KuraError) -> Page {
        precondition(frame > wal.maxFrame)
        return try load(number, frame: frame)
    }

    /// Set when a failed commit's frames could not be cut off. Until the next
    /// commit cuts them off, a reader (of any connection) that re-reads the log
    /// may adopt them if they are complete (FORMAT.md, "Commit"). Writer only.
    @exclusivity(unchecked) private var poisoned = false

    /// Frames in the log now. Shared: it only reads, and the writer asks at
    /// every commit's end (`checkpointDue`) while readers look pages up.
    var logFrames: Int { state.withShared { wal.maxFrame } }

    /// Whether the log is past the automatic checkpoint threshold.
    var checkpointDue: Bool { logFrames >= checkpointThreshold }

    /// Runs `body` with the reader byte held exclusively (no other process in a
    /// transaction). Returns nil without running it if that is not possible now.
    ///
    /// `txnLock` is held only to take and to give back the byte, not across
    /// `body` (a checkpoint's writes and syncs): this connection's own
    /// transactions start and end meanwhile (`readerExclusiveHeld`), reading
    /// the newest snapshot, which a checkpoint keeps valid (see `checkpoint`).
    @discardableResult
    private func withReaderExclusive<T>(_ body: () throws(KuraError) -> T) throws(KuraError) -> T? {
        let taken = try txnLock.withLock { () throws(KuraError) -> Bool in
            precondition(!readerExclusiveHeld, "a checkpoint runs only under the writer lock, one at a time")
            guard try file.lock(.reader, .exclusive) else { return false }
            // In a format-7 store, readers of other connections may hold only
            // their mark (FORMAT.md, "Reader marks").
            if marksRequired {
                let clear: Bool
                if let marks {
                    clear = marks.beginCheckpoint()
                } else {
                    // No reader table here: only a store nobody else has open.
                    clear = try storeOpenAlone()
                }
                if !clear {
                    giveBackReaderByteAfterCheckpoint()
                    return false
                }
            }
            readerExclusiveHeld = true
            return true
        }
        guard taken else { return nil }
        defer {
            txnLock.withLock {
                readerExclusiveHeld = false
                marks?.clearCheckpointWord()
                if openTransactions > 0 && presence == .none {
                    // Transactions that started during the checkpoint: a mark
                    // (no checkpointer can set the word while this connection
                    // holds the byte exclusively), else the byte shared.
                    if let marks, marks.enter() {
                        presence = .mark
                        file.unlock(.reader)
                    } else {
                        presence = .byte
                        retakeSharedReaderLock()
                    }
                } else if openTransactions == 0 {
                    if presence == .mark { marks?.leave() }
                    presence = .none
                    releaseReaderByte()
                } else {
                    giveBackReaderByteAfterCheckpoint()
                }
            }
        }
        return try body()
    }

    /// After holding the reader byte exclusively: back to shared if this
    /// connection's transactions hold it that way, else released. Caller
    /// holds `txnLock`.
    private func giveBackReaderByteAfterCheckpoint() {
        if presence == .byte { retakeSharedReaderLock() } else { file.unlock(.reader) }
    }

    /// Whether no other connection has the store open: the open byte, held
    /// shared, can be taken exclusively without waiting (it goes back to
    /// shared at once). Caller holds `txnLock`.
    private func storeOpenAlone() throws(KuraError) -> Bool {
        if openedAlone { return true }
        guard try file.lock(.open, .exclusive) else { return false }
        try retakeSharedOpenLock()
        return true
    }

    /// Gives the reader byte back when no transaction of this connection is
    /// open any more. Caller holds `txnLock`.
    private func releaseReaderByte() {
        file.unlock(.reader)
        // Every write of `readerLockLost` holds `txnLock` too, so it can be
        // read here without `state`; taking `state` exclusively at the end of
        // every read transaction would stall the other readers' page lookups.
        if readerLockLost { state.withLock { readerLockLost = false } }
    }

    /// Turns the exclusive reader lock back into a shared one for this
    /// connection's running transactions. The conversion cannot meet a conflicting
    /// lock (this handle holds the byte exclusively); should the system still
    /// refuse it (ENOLCK), another process could checkpoint under those
    /// transactions, so every page read fails with an I/O error until they have
    /// all ended (`readerLockLost`), rather than read pages of a newer state.
    /// Caller holds `txnLock`.
    private func retakeSharedReaderLock() {
        for _ in 0..<3 {
            do { if try file.lock(.reader, .shared) { return } } catch { break }
        }
        file.unlock(.reader)
        state.withLock { readerLockLost = true }
    }

    /// Whether `snapshot` (the caller's write transaction's) is the only one in
    /// use anywhere: no other in-process snapshot is active, and no other
    /// connection is inside a transaction (the reader byte can be taken
    /// exclusively, without waiting, then goes back to shared). A reader that
    /// starts after this returns sees a snapshot no older than `snapshot`.
    /// Caller holds the writer lock (ExternalValues.swift, invariant 3).
    func isOnlySnapshot(_ snapshot: Snapshot) throws(KuraError) -> Bool {
        let alone = state.withShared { active.allSatisfy { $0 === snapshot || $0.users == 0 } }
        guard alone else { return false }
        return try withReaderExclusive { true } ?? false
    }

    /// Set when this connection could not keep the reader lock while transactions
    /// were open; cleared when the last of them ends. Written under both
    /// `txnLock` and `state` (exclusive), so either lock suffices to read it.
    @exclusivity(unchecked) private var readerLockLost = false

    /// Copies the log into the database file and resets the log. The caller holds
    /// the writer lock. Returns false if another process is inside a transaction
    /// (then nothing happens; the next commit tries again).
    /// With `truncatingLog` (on close), the log file is also cut back to its
    /// header instead of being kept for reuse.
    @discardableResult
    func checkpoint(truncatingLog: Bool = false) throws(KuraError) -> Bool {
        let done = try withReaderExclusive { () throws(KuraError) -> Bool in
            guard wal.hasHeader else { return true }
            if wal.maxFrame == 0 {
                // Only stale frames of older generations, if any: nobody reads them.
                if truncatingLog { try wal.truncateStaleFrames() }
                return true
            }
            try logPageOneForCheckpoint()
            // From here until the publish after the reset, the store file may
            // hold pages newer than a reader's index: the shared header says
            // "changing", and keeps saying it if this checkpoint fails or the
            // process dies (readers then read the log; the next writer
            // publishes what it finds).
            sharedHeader?.beginChange()
            if durability != .off { try walFile.sync(full: true) }
            fileLock.lockExclusive()
            defer { fileLock.unlock() }
            // `state` is held exclusively only while the cache, the snapshots
            // and the log index change (steps 1 and 3, and the lookups of each
            // batch of step 2), not across the file writes and syncs: readers
            // whose pages are cached or preserved go on meanwhile. Nothing else
            // changes the log here (this connection is the writer, and its
            // `refresh` is skipped while it is). This connection's
            // transactions that start meanwhile (`withReaderExclusive` does
            // not hold `txnLock` across this) register `latest`, the newest
            // snapshot, whose pages are the ones written here (it needs
            // nothing preserved: a page it reads from the file is either
            // unchanged or already its own newest version), and step 3
            // detaches them with the others. Other processes' cannot start.
            // 1. Preserve every active snapshot's version of the pages about to change.
            let (current, numbers, keep) = try state.withLock { () throws(KuraError) -> (Snapshot, [UInt32], Int) in
                let newest = wal.maxFrame
                for s in active {
                    let isNewest = !s.detached && s.generation == wal.generation && s.maxFrame == newest
                    if !isNewest {
                        // One that nobody uses now never has a user again
                        // unless it is `latest` (see `active`).
                        if s.markPreserving() == 0 && s !== latest { continue }
                        for pageNo in wal.index.frames.keys where s.preserved[pageNo] == nil && pageNo <= s.pageCount {
                            s.preserved[pageNo] = try pageLocked(pageNo, s)
                        }
                    }
                }
                let current = Snapshot(generation: wal.generation, maxFrame: newest, pageCount: wal.committedPageCount,
                                       changeCounter: latest.changeCounter)
                let numbers = wal.index.frames.keys.filter { $0 <= current.pageCount }.sorted()
                return (current, numbers, min(numbers.count, cache.capacity))
            }
            // 2. Copy the newest version of each logged page into the file.
            // Pages to put back in the cache after the reset, at most what
            // it holds: a checkpoint of a large log (an import, a
            // migration) must not keep every page it copies in memory.
            var written: [Page] = []
            written.reserveCapacity(keep)
            var batch: [Page] = []
            var next = 0
            while next < numbers.count {
                let end = min(next + 64, numbers.count)
                batch.removeAll(keepingCapacity: true)
                try state.withLock { () throws(KuraError) in
                    for pageNo in numbers[next..<end] { batch.append(try pageLocked(pageNo, current)) }
                }
                next = end
                // Runs of consecutive page numbers go in one gathering write
                // where that is one system call.
                let gathering = file.hasGatheringWrite
                var runStart = 0
                while runStart < batch.count {
                    var runEnd = runStart + 1
                    while gathering && runEnd < batch.count && batch[runEnd].number == batch[runEnd - 1].number + 1 { runEnd += 1 }
                    let parts = batch[runStart..<runEnd].map { UnsafeRawBufferPointer($0.buffer) }
                    try withExtendedLifetime(batch) { () throws(KuraError) in
                        try file.write(gathering: parts, at: Int64(batch[runStart].number - 1) * Int64(pageSize))
                    }
                    runStart = runEnd
                }
                for p in batch {
                    if written.count < keep {
                        written.append(p)
                    } else {
                        // Not put back: its old file version must not stay cached.
                        state.withLock { cache.remove(UInt64(p.number)) }
                    }
                }
            }
            if durability != .off { try file.sync(full: true) }
            let storeVersion = try state.withLock { () throws(KuraError) -> UInt32 in
                // Those in use (nobody can start on one now: `state` is held).
                let snapshots = active.filter { $0.users > 0 }
                // 2b. A compaction made the store shorter: cut the file to its page
                // count, unless an in-process snapshot of the longer store is still
                // reading (then a later checkpoint does it). No other process is
                // inside a transaction (reader byte exclusive), and every one
                // reads the page count from the log or page 1 before any page.
                let length = Int64(current.pageCount) * Int64(pageSize)
                if try file.size() > length, snapshots.allSatisfy({ $0.pageCount <= current.pageCount }) {
                    try file.truncate(to: length)
                    if durability != .off { try file.sync(full: true) }
                }
                // 3. Detach every snapshot in use from the log, then reset it.
                let storeVersion = try pageLocked(1, current).headerVersion
                // Those in use only, as before `active` kept unused ones: an
                // unused `latest` stays attached to the log, which it reads
                // correctly if the reset below fails and it stays `latest`.
                for s in snapshots { s.detached = true }
                checkpointEpoch += 1
                // The frames the cache can hold: this generation's, up to its last.
                let (oldGeneration, lastFrame) = (wal.generation, wal.maxFrame)
                try wal.reset(sync: false, truncate: truncatingLog, version: logVersion(for: storeVersion))
                cache.removeFrames(generation: oldGeneration, lastFrame: lastFrame)
                for p in written { cache.put(UInt64(p.number), p) }
                setLatest(Snapshot(generation: wal.generation, maxFrame: 0, pageCount: current.pageCount,
                                   changeCounter: current.changeCounter))
                sharedHeader?.publish(wal.state)
                return storeVersion
            }
            // The new log header must be on disk before any frame follows it.
            // A crash before that leaves the old header (its frames are all in
            // the synced store file already, and replaying them changes
            // nothing), the new one, or a torn one, which fails its checksum:
            // the log is then empty either way. From format 8 on, the writer
            // that appends the generation's first frame syncs it
            // (`prepareLogForAppend`), so a checkpoint that no write follows
            // costs no sync here. In older formats, which other builds may
            // write beside this one, it is synced here, outside `state`
            // (readers' page lookups need it), before this returns.
            if durability != .off && storeVersion < FileHeader.lazyHeaderSyncVersion {
                do throws(KuraError) { try walFile.sync(full: true) } catch {
                    // The header may not be on disk: frames must not follow it.
                    state.withLock { wal.forgetHeader() }
                    throw error
                }
            }
            return true
        }
        return done ?? false
    }

    /// Before a checkpoint copies the log: makes the log's newest page 1 one
    /// written by its last commit, holding the change counter after it, so
    /// that the store file's page 1 says the counter once the log is reset
    /// (FORMAT.md, "Checkpoint"). In format 4 most commits leave page 1 out;
    /// then this commits page 1 alone with the counter unchanged (a commit
    /// that does not count). The page goes through the log, never straight
    /// into the file, where a torn write could not be repaired. Not synced
    /// here: the checkpoint syncs the log next. Caller is the writer, inside
    /// the checkpoint's exclusive reader lock.
    private func logPageOneForCheckpoint() throws(KuraError) {
        let (snapshot, header, needed) = try state.withLock { () throws(KuraError) -> (Snapshot, Page, Bool) in
            let s = latest
            // The writer's commits keep `latest` at the log's end; should that
            // ever not hold, copying now could lose the counter: postpone.
            guard s.generation == wal.generation && s.maxFrame == wal.maxFrame && !s.detached else {
                throw KuraError(.busy, "checkpoint postponed: this connection's newest snapshot is not the end of the log; the next checkpoint retries", path: path)
            }
            let h = try pageLocked(1, s)
            guard let p = wal.index.lookup(1, limit: s.maxFrame) else { return (s, h, true) }
            return (s, h, wal.commits(from: p, through: s.maxFrame) != 1 || h.headerChangeCounter != s.changeCounter)
        }
        guard needed else { return }
        let p = Page(copying: header)
        p.headerChangeCounter = snapshot.changeCounter
        try commit([p], pageCount: snapshot.pageCount, changeCounter: snapshot.changeCounter, sync: false)
    }

    /// Removes the store file and its log if no other connection has the store
    /// open, then closes this connection (Database+Destroy.swift). Decided
    /// under the open byte: this handle's shared hold is converted to
    /// exclusive, which fails while any other handle (connection) holds it.
    ///
    /// - Throws: `.busy` if another connection has the store open or this one
    ///   is inside a transaction (nothing is removed, the connection stays
    ///   open); `.misuse` if closed; `.io` if a file cannot be removed.
    /// `companions` removes the files the layers above keep beside the store
    /// (sort file, external values); it runs after the log, before the store.
    func destroyFiles(_ fs: FileSystem, companions: () throws(KuraError) -> Void) throws(KuraError) {
        try txnLock.withLock { () throws(KuraError) in
            if closed { throw KuraError(.misuse, "database is closed", path: path) }
            guard openTransactions == 0 && !readerExclusiveHeld else {
                throw KuraError(.busy, "cannot destroy the store from inside one of its transactions or while it checkpoints", path: path)
            }
            guard try file.lock(.open, .exclusive) else {
                throw KuraError(.busy, "cannot destroy the store: another connection (in this process or another) has it open; close it there first", path: path)
            }
            guard try file.isLinked(at: path) else {
                _ = try file.lock(.open, .shared)
                throw KuraError(.busy, "cannot destroy the store: the file at this path is no longer the one this connection opened", path: path)
            }
            // The log first: a store file without its log is never mistaken
            // for one whose log holds commits (refuseOrphanedLog).
            try fs.remove(path + "-wal")
            try fs.remove(path + "-shm")
            try companions()
            try fs.remove(path)
            closed = true
            openWord.setBits(1)
        }
        file.close()
        walFile.close()
    }

    /// Closes the files. Checkpoints first when possible.
    func close() {
        let wasClosed = txnLock.withLock { () -> Bool in
            let c = closed
            closed = true
            openWord.setBits(1)
            marks?.leave()
            marks = nil
            return c
        }
        if wasClosed { return }
        file.close()
        walFile.close()
    }

    /// Runs a checkpoint as the writer (used by `close` and on request, both
    /// with `truncatingLog`; automatic checkpoints keep the file for reuse).
    /// `waiting: false` (close) takes the store's writer lock only if it is free
    /// at once: a connection closing does not wait for another's writer (which
    /// will checkpoint itself), and a read-only one, which can never take the
    /// lock, does not wait out the busy timeout.
    func checkpointAsWriter(truncatingLog: Bool = false, waiting: Bool = true) throws(KuraError) -> Bool {
        let s = try beginWrite(timeout: waiting ? nil : 0)
        endTransaction(s)
        defer {
            state.withLock { writerFlag.store(false) }
            file.unlock(.writer)
            releaseWriterSlot()
        }
        return try checkpoint(truncatingLog: truncatingLog)
    }

    /// Number of pages in the cache (for tests of the memory bound).
    var cachedPageCount: Int { state.withLock { cache.count } }

    /// Snapshots with at least one user (for tests: zero when no transaction runs).
    var activeSnapshotCount: Int { state.withShared { active.count { $0.users > 0 } } }
}

func hex(_ v: UInt64) -> String { "0x" + String(v, radix: 16) }
