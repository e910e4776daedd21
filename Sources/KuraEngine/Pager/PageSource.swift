// PageSource / PageWriter: how tree code reads and changes pages inside a
// transaction, and the freelist (FORMAT.md, "Freelist").
//
// Freelist: the header names the first trunk page. A trunk page is
//
//     0   1  kind 6          4   4  next trunk page (0 = last)
//     1   3  reserved, 0     8   4  number of leaf entries n
//                            12  4n leaf page numbers
//
// Leaf pages hold nothing meaningful and are never read. `allocate` takes the
// last leaf of the first trunk, or the trunk itself when it has no leaves; `free`
// appends to the first trunk, or makes the freed page the new first trunk when
// that one is full. The header counts all free pages, trunks included.
//
// Reusing a page freed by an earlier transaction is safe while older readers
// exist: they read their own version of that page from their snapshot.

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Read access to pages in one snapshot.
protocol PageSource {
    var pageSize: Int { get }
    func page(_ number: UInt32) throws(KuraError) -> Page
    /// Page `number` for a scan of a whole tree (`TreeCursor.sequential`):
    /// the same page as `page(_:)`, but a source may keep it out of its
    /// caches, since a scan reads each page once.
    func sequentialPage(_ number: UInt32) throws(KuraError) -> Page
}

extension PageSource {
    func sequentialPage(_ number: UInt32) throws(KuraError) -> Page { try page(number) }
}

/// Pages of a read transaction.
///
/// A snapshot's pages never change, so the transaction keeps the last pages it
/// used in a direct-mapped memo (slots by page number) and serves repeated
/// pages — the root and interior pages of every descent, and the leaves a
/// transaction keeps coming back to — without the pager's lock and hash
/// lookups. The memo starts with 64 slots; a transaction that keeps missing
/// (more misses than twice its slots) grows it fourfold, up to a quarter of
/// the cache's pages (at most 4096 slots), so a transaction that reads rows
/// all over a table that fits the cache (index searches, random lookups)
/// mostly stops going to the pager. Slots are initialized on first use (`used`
/// has a bit per initialized slot), so a transaction that reads a few pages
/// pays for a few slots when it starts and ends.
///
/// Reuse: a connection keeps one finished read transaction, with its
/// `SnapshotPages`, for its next one (`SpareReadTransaction`, Transaction.swift);
/// `reopen(on:)` moves it to the next transaction's snapshot. The memo is
/// kept only when that is the same snapshot (same `Snapshot.serial`, never
/// reused): a snapshot's page n is the same immutable page in every
/// transaction on it, so a page memoized by one transaction is the right page
/// for the next. On a later snapshot that this connection's own commits made
/// from it (`Snapshot.lineage`, which lists the pages each commit wrote), the
/// memo keeps every page but those: a page no commit in between wrote is the
/// same page in both snapshots. Readers of a connection whose writer keeps
/// committing (W9's shape) so keep the table's pages they already found
/// instead of asking the pager, and its lock, again after every commit. On
/// any other snapshot the memo is emptied first (and shrunk back to its first
/// size), so no page of one snapshot is ever served in another where it
/// differs.
///
/// Memory: a memo slot keeps its page alive until the slot is reused, the
/// memo is emptied, or the object goes, even if the cache has evicted the page
/// meanwhile: at most the memo's slots (a quarter of the cache) beyond the
/// cache's bound, per read transaction running and one per connection kept
/// for reuse. Thread rules: the transaction's thread only (a kept one is used
/// by no thread until a transaction takes it, `SpareReadTransaction`).
final class SnapshotPages: PageSource {
    let pager: Pager
    // The mutable fields below are used only by the thread of the transaction
    // that owns this object (one at a time; a kept object passes between
    // threads through `SpareReadTransaction`'s atomic exchange, which orders
    // them): no runtime access checks on the hot paths.
    /// The snapshot the pages are of; changed only by `reopen(on:)`.
    @exclusivity(unchecked) private(set) var snapshot: Snapshot
    let pageSize: Int
    private static let initialSlots = 64
    private static let maxSlots = 4096
    /// Slots minus one (slots are a power of two).
    @exclusivity(unchecked) private var mask: Int
    /// Bit i of word i / 64 set: slot i holds a page (`memoNumbers[i]`,
    /// `memoPages[i]` initialized).
    @exclusivity(unchecked) private var used: UnsafeMutablePointer<UInt64>
    @exclusivity(unchecked) private var memoNumbers: UnsafeMutablePointer<UInt32>
    @exclusivity(unchecked) private var memoPages: UnsafeMutablePointer<Page>
    /// Pages asked of the pager since the memo last grew.
    @exclusivity(unchecked) private var misses = 0
    /// The most slots this transaction's memo may grow to.
    private let slotLimit: Int

    init(pager: Pager, snapshot: Snapshot) {
        self.pager = pager
        self.snapshot = snapshot
        pageSize = pager.pageSize
        let slots = Self.initialSlots
        mask = slots - 1
        (used, memoNumbers, memoPages) = Self.allocate(slots: slots)
        // A quarter of the cache's pages, as a power of two in 64...4096.
        let quarter = max(pager.spillThreshold / 4, Self.initialSlots)
        slotLimit = min(1 << (Int.bitWidth - 1 - quarter.leadingZeroBitCount), Self.maxSlots)
    }

    deinit {
        Self.release(used, memoNumbers, memoPages, slots: mask + 1)
    }

    /// The memo's current number of slots (for tests).
    var memoSlots: Int { mask + 1 }

    /// Pages in the memo now (for tests).
    var memoizedPageCount: Int {
        (0..<((mask + 1) / 64)).reduce(0) { $0 + used[$1].nonzeroBitCount }
    }

    /// What `reopen(on:)` did with the memo.
    enum Reopening: Equatable {
        /// Same snapshot: every page kept.
        case sameSnapshot
        /// A later snapshot of this connection's own commits: kept but the
        /// pages those commits wrote.
        case carried
        /// Emptied.
        case emptied
    }

    /// Makes this the page source of a new transaction on `snapshot` (see
    /// "Reuse" above): keeps the memo if `snapshot` is the one it was filled
    /// in; keeps it but the pages written since if `snapshot` follows that
    /// one by commits of this connection's writer that its lineage records
    /// (`Snapshot.lineage`: same log generation, every page written in
    /// between known); else empties it (back to its first size) before
    /// anything is read.
    @discardableResult
    func reopen(on snapshot: Snapshot) -> Reopening {
        if snapshot.serial == self.snapshot.serial { return .sameSnapshot }
        if snapshot.generation == self.snapshot.generation, let steps = snapshot.stepsSince(self.snapshot.serial) {
            for step in snapshot.lineage.prefix(steps) {
                for n in step.pages { forget(n) }
            }
            self.snapshot = snapshot
            return .carried
        }
        self.snapshot = snapshot
        misses = 0
        let slots = mask + 1
        if slots == Self.initialSlots {
            // Empty in place: release the pages held, clear the used bits.
            for w in 0..<(slots / 64) {
                var u = used[w]
                while u != 0 {
                    (memoPages + (w * 64 + u.trailingZeroBitCount)).deinitialize(count: 1)
                    u &= u &- 1
                }
                used[w] = 0
            }
        } else {
            Self.release(used, memoNumbers, memoPages, slots: slots)
            (used, memoNumbers, memoPages) = Self.allocate(slots: Self.initialSlots)
            mask = Self.initialSlots - 1
        }
        return .emptied
    }

    /// Where page `number` goes in the memo at its current size: its slot,
    /// and the word and bit of `used` that say whether the slot holds a page.
    @inline(__always)
    private func position(_ number: UInt32) -> (slot: Int, word: Int, bit: UInt64) {
        let slot = Int(number) & mask
        return (slot, slot >> 6, UInt64(1) << UInt64(slot & 63))
    }

    /// Drops page `number` from the memo if it holds it.
    private func forget(_ number: UInt32) {
        let (slot, word, bit) = position(number)
        guard used[word] & bit != 0, memoNumbers[slot] == number else { return }
        (memoPages + slot).deinitialize(count: 1)
        used[word] &= ~bit
    }

    /// The memo's three arrays in one allocation (a read transaction of one
    /// row makes one memo: one malloc and one free instead of three): the
    /// page references first (8-byte aligned), then the used bits, then the
    /// page numbers. `used` is zeroed; the others are uninitialized.
    private static func allocate(slots: Int) -> (UnsafeMutablePointer<UInt64>, UnsafeMutablePointer<UInt32>, UnsafeMutablePointer<Page>) {
        let pagesBytes = slots * MemoryLayout<Page>.stride
        let usedBytes = slots / 64 * 8
        let raw = UnsafeMutableRawPointer.allocate(byteCount: pagesBytes + usedBytes + slots * 4, alignment: 8)
        let pages = raw.bindMemory(to: Page.self, capacity: slots)
        let used = (raw + pagesBytes).bindMemory(to: UInt64.self, capacity: slots / 64)
        used.initialize(repeating: 0, count: slots / 64)
        let numbers = (raw + pagesBytes + usedBytes).bindMemory(to: UInt32.self, capacity: slots)
        return (used, numbers, pages)
    }

    private static func release(_ used: UnsafeMutablePointer<UInt64>, _ numbers: UnsafeMutablePointer<UInt32>,
                                _ pages: UnsafeMutablePointer<Page>, slots: Int) {
        for w in 0..<(slots / 64) {
            var u = used[w]
            while u != 0 {
                (pages + (w * 64 + u.trailingZeroBitCount)).deinitialize(count: 1)
                u &= u &- 1
            }
        }
        // One allocation, starting at the page references (`allocate`).
        UnsafeMutableRawPointer(pages).deallocate()
    }

    @inline(__always)
    func page(_ number: UInt32) throws(KuraError) -> Page {
        let (slot, word, bit) = position(number)
        if used[word] & bit != 0 {
            if memoNumbers[slot] == number { return memoPages[slot] }
            let p = try pager.page(number, snapshot)
            noteMiss()
            // The memo may have grown: store through the current mask.
            store(p, number)
            return p
        }
        let p = try pager.page(number, snapshot)
        noteMiss()
        store(p, number)
        return p
    }

    /// A page for a scan of a whole tree: served from the memo when it holds
    /// it, otherwise from the pager without being memoized (a scan reads each
    /// leaf once; memoizing them would only grow the memo and keep pages
    /// alive) and with the pager's scan admission (`Pager.page(_:_:sequential:)`).
    func sequentialPage(_ number: UInt32) throws(KuraError) -> Page {
        let (slot, word, bit) = position(number)
        if used[word] & bit != 0 && memoNumbers[slot] == number { return memoPages[slot] }
        return try pager.page(number, snapshot, sequential: true)
    }

    @inline(__always)
    private func noteMiss() {
        misses += 1
        if misses > 2 * (mask + 1) && mask + 1 < slotLimit { grow() }
    }

    @inline(__always)
    private func store(_ p: Page, _ number: UInt32) {
        let (slot, word, bit) = position(number)
        memoNumbers[slot] = number
        if used[word] & bit != 0 {
            memoPages[slot] = p
        } else {
            (memoPages + slot).initialize(to: p)
            used[word] |= bit
        }
    }

    /// Four times the slots (within `slotLimit`), keeping the pages held.
    private func grow() {
        let oldSlots = mask + 1
        let slots = min(oldSlots * 4, slotLimit)
        let (oldUsed, oldNumbers, oldPages) = (used, memoNumbers, memoPages)
        (used, memoNumbers, memoPages) = Self.allocate(slots: slots)
        mask = slots - 1
        misses = 0
        for w in 0..<(oldSlots / 64) {
            var u = oldUsed[w]
            while u != 0 {
                let i = w * 64 + u.trailingZeroBitCount
                store(oldPages[i], oldNumbers[i])
                u &= u &- 1
            }
        }
        Self.release(oldUsed, oldNumbers, oldPages, slots: oldSlots)
    }
}

/// Pages of a write transaction: reads see the transaction's own changes; the
/// first change to a page copies it.
///
/// Spill: the changed pages are kept in memory (`dirty`) up to the pager's
/// `spillThreshold`. Past it, the least recently used changed pages (clock:
/// `Page.referenced` is set on every use, cleared by a pass) are written to
/// the log as uncommitted frames (`Pager.spill`) and dropped; `spilled` then
/// names the frame holding each one's newest version, and a later use reads it
/// back (a later change writes it again, and the newest frame wins). A page
/// is spilled only while `dirty` holds its sole reference, so no caller
/// (a tree operation in progress, a cursor) ever keeps a page that is no
/// longer the transaction's copy. Page 1 (`header`) is never spilled.
/// Invariants: a page number is in at most one of `dirty` and `spilled`;
/// `inLog` is the subset of `dirty` read back and unchanged since (its frame
/// is still its newest version, so it is dropped again without a write).
///
/// Carry (`WriterCarry`): pages the previous write transaction of the
/// connection read or committed are the pages of the snapshot it committed,
/// page for page, as long as that snapshot is the newest (no commit,
/// checkpoint or log refresh made another since: `Snapshot.serial`). A writer
/// that starts on that snapshot is handed them (its page memo), and the append
/// hints that were valid at its end, so the root and interior pages of the
/// trees every commit touches, and the leaves it appends to, come without the
/// pager's locks and lookups. Pages are immutable once committed or cached,
/// and a writer changes only its own copies, so sharing them is safe. At most
/// one page per memo slot (`memoMask`) is kept and carried, outside the
/// cache's bound as a read transaction's memo; a transaction that spilled,
/// or replaced every page, carries nothing.
///
/// Failure (SQLite's pager "error state"): a page operation that throws once
/// the transaction has changed a page may have left a tree change half made
/// (a split with one side written). The first such error is kept in
/// `failure`, and `commit` refuses to write anything after it: the caller may
/// catch the error and go on reading, but the transaction can only roll back.
final class PageWriter: PageSource {
    // `@exclusivity(unchecked)` on the mutable fields: a page writer is used
    // only by the thread running its write transaction (which holds the
    // connection's writer slot), so no two accesses overlap in time, and a
    // one-row commit made some forty runtime access checks on them.
    let pager: Pager
    let snapshot: Snapshot
    /// Changed pages by number. Made with room for a few pages, so that a
    /// small transaction (a one-row commit changes two to four pages) grows
    /// its table once, not at every second page.
    @exclusivity(unchecked) private(set) var dirty: [UInt32: Page] = Dictionary(minimumCapacity: 8)
    /// Changed pages written to the log and dropped: page -> its newest frame.
    @exclusivity(unchecked) private var spilled: [UInt32: Int] = [:]
    /// Pages of `dirty` identical to their newest spilled frame, and that frame.
    @exclusivity(unchecked) private var inLog: [UInt32: Int] = [:]
    private let spillThreshold: Int
    /// `dirty.count` past which the next spill runs: the threshold, raised for
    /// a while when a spill found too few pages it could drop (all held).
    @exclusivity(unchecked) private var spillAt: Int
    /// The clock of `dirty`: page numbers in the order they were kept, with
    /// stale and repeated entries dropped lazily (a deterministic order, so a
    /// workload spills the same pages in every run).
    @exclusivity(unchecked) private var ring: [UInt32] = []
    @exclusivity(unchecked) private var hand = 0
    /// Page 1 as this transaction has it now, for reading only: the
    /// snapshot's page 1 (immutable, shared with the cache and readers) until
    /// the transaction first asks for `header`, then its copy. Never change
    /// a page through it: changes go through `header`.
    @exclusivity(unchecked) private(set) var currentHeader: Page
    /// Whether `currentHeader` is this transaction's copy (kept in `dirty`).
    @exclusivity(unchecked) private var headerCopied = false
    /// Page 1 for change: the transaction's copy (in `dirty`), made on first
    /// use. A transaction that only appends rows never changes page 1 and so
    /// never copies it (its commit leaves page 1 out in format 4 and later).
    /// Every change of page 1 goes through here.
    var header: Page {
        if headerCopied { return currentHeader }
        return copyHeader()
    }

    @inline(never)
    private func copyHeader() -> Page {
        let p = Page(copying: originalHeader)
        currentHeader = p
        headerCopied = true
        dirty[1] = p
        return p
    }
    var pageSize: Int { pager.pageSize }
    /// The first error a page operation threw after the transaction changed a
    /// page (see the header): set once, never cleared.
    @exclusivity(unchecked) private(set) var failure: KuraError?

    /// Records `error` as the transaction's failure if it changed a page.
    private func failed(_ error: KuraError) -> KuraError {
        if modified && failure == nil { failure = error }
        structureEpoch &+= 1
        return error
    }

    /// Moves on whenever a page is allocated or freed, every page is replaced
    /// (compaction), or a page operation fails. Tree code changes the shape of
    /// a tree (splits, merges, root moves) only together with an allocation or
    /// a free, so a path recorded at one epoch (`AppendHint`) still leads where
    /// it did while the epoch is unchanged. Page numbers, not pages, are kept
    /// across it: spilling and reading back keeps numbers.
    @exclusivity(unchecked) private(set) var structureEpoch: UInt64 = 0

    /// The right-most paths of the trees appended to last (BTree+Insert.swift),
    /// at most `maxAppendHints`, newest last.
    @exclusivity(unchecked) private var appendHints: [AppendHint] = []
    /// Enough for the trees one save writes in turn: a few tables and each
    /// one's indexes (an object graph of three entities writes seven trees
    /// row after row; with four hints each insert found its tree's hint
    /// pushed out by the others and descended from the root).
    static let maxAppendHints = 16

    /// The leaf each tree last changed through a descent (`BTree.rememberedLeaf`),
    /// at most `maxAppendHints`, newest last: the next change of a key in the
    /// same leaf skips the descent.
    @exclusivity(unchecked) private var lastLeaves: [(root: UInt32, leaf: UInt32, epoch: UInt64)] = []

    /// The leaf remembered for the tree rooted at `root`, if still valid.
    @inline(__always)
    func lastLeaf(of root: UInt32) -> UInt32? {
        for l in lastLeaves where l.root == root {
            return l.epoch == structureEpoch ? l.leaf : nil
        }
        return nil
    }

    /// Remembers `leaf` (a leaf of the tree rooted at `root` now) at the current epoch.
    func rememberLeaf(_ leaf: UInt32, of root: UInt32) {
        if let i = lastLeaves.firstIndex(where: { $0.root == root }) {
            lastLeaves[i] = (root, leaf, structureEpoch)
            return
        }
        lastLeaves.removeAll { $0.epoch != structureEpoch }
        if lastLeaves.count == Self.maxAppendHints { lastLeaves.removeFirst() }
        lastLeaves.append((root, leaf, structureEpoch))
    }

    /// The hint recorded for the tree rooted at `root`, if still valid.
    @inline(__always)
    func appendHint(for root: UInt32) -> AppendHint? {
        for h in appendHints where h.root == root {
            return h.epoch == structureEpoch ? h : nil
        }
        return nil
    }

    /// Records the right-most path of the tree rooted at `hint.root` (at the
    /// current epoch), replacing any earlier one for that tree.
    func setAppendHint(_ hint: AppendHint) {
        precondition(hint.epoch == structureEpoch, "append hint recorded at a stale epoch")
        appendHints.removeAll { $0.root == hint.root || $0.epoch != structureEpoch }
        if appendHints.count == Self.maxAppendHints { appendHints.removeFirst() }
        appendHints.append(hint)
    }

    /// Pages of the snapshot this transaction may read (never its changed
    /// copies), direct-mapped by page number: `memoMask + 1` slots (128, or
    /// a quarter of a smaller cache's pages), number 0 for an empty one.
    /// Starts with what the previous write transaction handed over (see
    /// "Carry" above). Through pointers, so a lookup has no exclusivity
    /// check; a slot's page is initialized while its number is not 0.
    private let memoMask: Int
    private let memoNumbers: UnsafeMutablePointer<UInt32>
    private let memoPages: UnsafeMutablePointer<Page>
    /// Bit i of word i / 64: slot i was used by this transaction (only
    /// those are carried, so what is carried is what the last transaction
    /// used, not everything ever carried).
    private let memoUsed: UnsafeMutablePointer<UInt64>
    /// Set when a page was spilled or every page replaced: nothing is carried.
    @exclusivity(unchecked) private var carriesNothing = false
    /// Changed pages used last, direct-mapped by page number (`recentMask + 1`
    /// slots, each nil or `dirty`'s page of its number: the only changes of
    /// `dirty` that could replace one, `free`, `replaceAllPages` and `spill`,
    /// clear them all). A run of changes to one leaf (an update by
    /// predicate, rows in row-ID order), or writes that go round a few trees
    /// (a save's tables and their indexes), find their pages without a hash
    /// lookup. Through a pointer, so reading a slot has no exclusivity check.
    private let recent: UnsafeMutablePointer<Page?>
    private static let recentMask = 15

    @inline(__always)
    private func recentSlot(_ number: UInt32) -> Int { Int(number) & Self.recentMask }

    private func forgetRecent() {
        for i in 0...Self.recentMask { recent[i] = nil }
    }

    /// `carried`: what the previous write transaction of this connection
    /// handed over, used only if it was made for `snapshot`.
    init(pager: Pager, snapshot: Snapshot, carried: WriterCarry? = nil) throws(KuraError) {
        self.pager = pager
        self.snapshot = snapshot
        spillThreshold = pager.spillThreshold
        spillAt = spillThreshold
        let first = try pager.page(1, snapshot)
        // A power of two in 16...128.
        let quarter = max(pager.spillThreshold / 4, 16)
        let slots = min(1 << (Int.bitWidth - 1 - quarter.leadingZeroBitCount), 128)
        memoMask = slots - 1
        memoNumbers = .allocate(capacity: slots)
        memoNumbers.initialize(repeating: 0, count: slots)
        memoPages = .allocate(capacity: slots)
        memoUsed = .allocate(capacity: (slots + 63) / 64)
        memoUsed.initialize(repeating: 0, count: (slots + 63) / 64)
        recent = .allocate(capacity: Self.recentMask + 1)
        recent.initialize(repeating: nil, count: Self.recentMask + 1)
        originalHeader = first
        currentHeader = first
        snapshotCatalogKey = CatalogCache.Key(first)
        if let carried, carried.serial == snapshot.serial {
            for p in carried.pages { memoize(p) }
            appendHints = carried.hints.map { AppendHint(root: $0.root, epoch: 0, interior: $0.interior, leaf: $0.leaf) }
        }
    }

    /// Page 1 as the snapshot has it (immutable): a format-4 commit leaves
    /// page 1 out when `header` still equals it but for the change counter.
    private let originalHeader: Page

    var pageCount: UInt32 { currentHeader.headerPageCount }

    /// The catalog key (schema cookie) of the snapshot's page 1.
    private let snapshotCatalogKey: CatalogCache.Key

    /// The catalog key of the snapshot's page 1 while `header` still has it
    /// (nothing in this transaction moved the schema cookie, the format or
    /// the database ID: no schema commit pending, no migration, no
    /// compaction); nil otherwise, and for a format-1 store, whose key is its
    /// change counter. Equal keys mean equal catalogs (`CatalogCache.Key`).
    var unchangedCatalogKey: CatalogCache.Key? {
        guard snapshotCatalogKey.version != 1, CatalogCache.Key(currentHeader) == snapshotCatalogKey else { return nil }
        return snapshotCatalogKey
    }

    /// Pages written to the log before commit so far (for tests).
    var spilledPageCount: Int { spilled.count }

    @inline(__always)
    func page(_ number: UInt32) throws(KuraError) -> Page {
        let slot = recentSlot(number)
        if let r = recent[slot], r.number == number {
            r.referenced = true
            return r
        }
        if let d = dirty[number] {
            d.referenced = true
            recent[slot] = d
            return d
        }
        guard number <= currentHeader.headerPageCount else {
            throw failed(KuraError.corruption("reference to page \(number), beyond the last page (\(currentHeader.headerPageCount))", page: number, path: pager.path))
        }
        do {
            if !spilled.isEmpty, let frame = spilled[number] { return try readBack(number, frame: frame, clean: true) }
            // Not changed by this transaction: the snapshot's page.
            let slot = Int(number) & memoMask
            if memoNumbers[slot] == number {
                markUsed(slot)
                return memoPages[slot]
            }
            let p = try pager.page(number, snapshot)
            memoize(p)
            markUsed(slot)
            return p
        } catch {
            throw failed(error)
        }
    }

    deinit {
        for slot in 0...memoMask where memoNumbers[slot] != 0 { (memoPages + slot).deinitialize(count: 1) }
        memoPages.deallocate()
        memoNumbers.deallocate()
        memoUsed.deallocate()
        recent.deinitialize(count: Self.recentMask + 1)
        recent.deallocate()
    }

    /// Puts `p` (a page of the snapshot) in its memo slot.
    /// Records that this transaction used memo slot `slot` (`memoUsed`).
    @inline(__always)
    private func markUsed(_ slot: Int) { memoUsed[slot >> 6] |= 1 << UInt64(slot & 63) }

    @inline(__always)
    private func memoize(_ p: Page) {
        let slot = Int(p.number) & memoMask
        if memoNumbers[slot] != 0 {
            memoPages[slot] = p
        } else {
            (memoPages + slot).initialize(to: p)
        }
        memoNumbers[slot] = p.number
    }

    /// What this transaction hands the next write transaction of its
    /// connection once it committed (or changed nothing): the pages it read
    /// and the pages it changed (page 1 aside; at most one per memo
    /// slot), as of `serial`, the snapshot its commit made (or its own, if it
    /// wrote nothing), and its valid append hints. Nil if it spilled, failed
    /// or replaced every page.
    func carry(to serial: UInt64) -> WriterCarry? {
        guard !carriesNothing, failure == nil, spilled.isEmpty, inLog.isEmpty else { return nil }
        // The changed pages are the snapshot's now (committed): they take
        // their slots (the memo is not used again).
        if modified {
            for (n, p) in dirty where n > 1 {
                memoize(p)
                markUsed(Int(n) & memoMask)
            }
        }
        var used = 0
        for w in 0..<((memoMask + 64) / 64) { used += memoUsed[w].nonzeroBitCount }
        var pages: [Page] = []
        pages.reserveCapacity(used)
        for w in 0..<((memoMask + 64) / 64) {
            var bits = memoUsed[w]
            while bits != 0 {
                let slot = w * 64 + bits.trailingZeroBitCount
                if memoNumbers[slot] > 1 { pages.append(memoPages[slot]) }
                bits &= bits &- 1
            }
        }
        return WriterCarry(serial: serial, pages: pages, hints: appendHints.filter { $0.epoch == structureEpoch })
    }

    /// The page, copied for change if this transaction has not changed it yet.
    func writable(_ number: UInt32) throws(KuraError) -> Page {
        // A page in `recent` is `dirty`'s. One read back from the log
        // unchanged (`inLog`, put in `recent` by `page`) goes the way below,
        // which forgets its frame: it is about to change.
        let slot = recentSlot(number)
        if let r = recent[slot], r.number == number, inLog.isEmpty || inLog[number] == nil {
            modified = true
            r.referenced = true
            return r
        }
        modified = true
        if let d = dirty[number] {
            d.referenced = true
            if !inLog.isEmpty { inLog[number] = nil }
            recent[slot] = d
            return d
        }
        if number == 1 {
            // Page 1 is `header`, never a second copy (nor spilled).
            let h = header
            recent[slot] = h
            return h
        }
        do {
            if !spilled.isEmpty, let frame = spilled[number] {
                let p = try readBack(number, frame: frame, clean: false)
                recent[slot] = p
                return p
            }
            let p = Page(copying: try page(number))
            let kind = p.u8(Node.kindOffset)
            if kind == PageKind.tableLeaf.rawValue || kind == PageKind.tableInterior.rawValue {
                touchedTableRoots.insert(p.treeRoot)
            }
            try keep(p)
            recent[slot] = p
            return p
        } catch {
            throw failed(error)
        }
    }

    /// Roots of the table trees a page of which this transaction changed (the
    /// root a tree page records; pages allocated here are not counted, but a
    /// tree change that allocates also changes an existing page of the tree).
    /// In format 5 the commit writes the counters of these tables' trees into
    /// their right-most leaves (WriteTransaction.commit), since a split or a
    /// merge may have moved or rebuilt that leaf.
    @exclusivity(unchecked) private(set) var touchedTableRoots: Set<UInt32> = []

    /// Brings a spilled page back into `dirty`.
    private func readBack(_ number: UInt32, frame: Int, clean: Bool) throws(KuraError) -> Page {
        let p = try pager.loadSpilled(number, frame: frame)
        spilled[number] = nil
        if clean { inLog[number] = frame }
        try keep(p)
        return p
    }

    /// Adds a changed page to `dirty`, spilling others when over the threshold.
    private func keep(_ p: Page) throws(KuraError) {
        p.referenced = true
        dirty[p.number] = p
        ring.append(p.number)
        if ring.count > 2 * dirty.count + 64 {
            var seen = Set<UInt32>()
            ring = ring.filter { dirty[$0] != nil && seen.insert($0).inserted }
            hand = 0
        }
        if dirty.count > spillAt { try spill(keeping: p.number) }
    }

    /// Writes about a quarter of the threshold's worth of the least recently
    /// used changed pages to the log and drops them (pages read back unchanged
    /// are dropped without a write). Skips page 1, `keepingNumber` and pages
    /// someone else holds a reference to.
    private func spill(keeping keepingNumber: UInt32) throws(KuraError) {
        carriesNothing = true
        // The `recent` slots let go of their pages, which a spill would
        // otherwise skip as held (a small cache budget would then spill
        // little); they fill again from `dirty`.
        forgetRecent()
        let target = max(1, spillThreshold / 4)
        var victims: [UInt32] = []
        var chosen = Set<UInt32>()
        victims.reserveCapacity(target)
        // Clock (second chance): a page used since the hand last passed loses
        // its bit and stays; one not used is taken. Two turns take any page.
        var steps = 2 * ring.count
        while victims.count < target && steps > 0 {
            steps -= 1
            if hand >= ring.count { hand = 0 }
            let n = ring[hand]
            hand += 1
            guard n != 1, n != keepingNumber, let p = dirty[n], !chosen.contains(n) else { continue }
            if p.referenced {
                p.referenced = false
            } else {
                victims.append(n)
                chosen.insert(n)
            }
        }
        var out: [Page] = []
        out.reserveCapacity(victims.count)
        for n in victims.sorted() {
            guard var p = dirty.removeValue(forKey: n) else { continue }
            guard isKnownUniquelyReferenced(&p) else {
                dirty[n] = p
                continue
            }
            if let frame = inLog.removeValue(forKey: n) {
                // Unchanged since it was read back: its frame is still newest.
                spilled[n] = frame
                continue
            }
            out.append(p)
        }
        spillAt = max(spillThreshold, dirty.count + target)
        guard !out.isEmpty else { return }
        let first: Int
        do { first = try pager.spill(out) } catch {
            // Nothing was recorded as spilled: keep the pages, so the
            // transaction stays whole if the caller goes on.
            for p in out { dirty[p.number] = p }
            throw error
        }
        for (k, p) in out.enumerated() { spilled[p.number] = first + k }
    }

    private var trunkCapacity: Int { ((pageSize - pageTrailerSize) - 12) / 4 }

    /// A zeroed page to use, from the freelist or the end of the file.
    func allocate() throws(KuraError) -> Page {
        modified = true
        structureEpoch &+= 1
        do { return try allocateFromFreelistOrEnd() } catch { throw failed(error) }
    }

    private func allocateFromFreelistOrEnd() throws(KuraError) -> Page {
        let head = header.headerFreelistHead
        if head != 0 {
            let trunk = try writable(head)
            guard trunk.u8(0) == PageKind.freelistTrunk.rawValue else {
                throw KuraError.corruption("freelist trunk page has kind \(trunk.u8(0))", page: head, path: pager.path)
            }
            let n = Int(trunk.u32(8))
            guard n <= trunkCapacity, header.headerFreeCount > 0 else {
                throw KuraError.corruption("freelist trunk claims \(n) entries", page: head, path: pager.path)
            }
            header.headerFreeCount -= 1
            if n > 0 {
                let leaf = trunk.u32(12 + 4 * (n - 1))
                guard leaf > 1 && leaf <= header.headerPageCount && dirty[leaf] == nil && spilled[leaf] == nil else {
                    throw KuraError.corruption("freelist entry names page \(leaf)", page: head, path: pager.path)
                }
                trunk.setU32(8, UInt32(n - 1))
                let p = Page(number: leaf, size: pageSize)
                try keep(p)
                return p
            }
            let next = trunk.u32(4)
            guard next <= header.headerPageCount, next != head else {
                throw KuraError.corruption("freelist trunk points to page \(next)", page: head, path: pager.path)
            }
            header.headerFreelistHead = next
            trunk.zero()
            return trunk
        }
        guard header.headerPageCount < UInt32.max - 1 else {
            throw KuraError(.tooBig, "the store has reached the maximum number of pages", path: pager.path)
        }
        header.headerPageCount += 1
        let p = Page(number: header.headerPageCount, size: pageSize)
        try keep(p)
        return p
    }

    /// Returns `number` to the freelist. The caller no longer references it.
    func free(_ number: UInt32) throws(KuraError) {
        precondition(number > 1)
        forgetRecent()
        modified = true
        structureEpoch &+= 1
        do { try putOnFreelist(number) } catch { throw failed(error) }
    }

    private func putOnFreelist(_ number: UInt32) throws(KuraError) {
        let head = header.headerFreelistHead
        if head != 0 {
            let trunk = try writable(head)
            let n = Int(trunk.u32(8))
            guard trunk.u8(0) == PageKind.freelistTrunk.rawValue, n <= trunkCapacity else {
                throw KuraError.corruption("freelist trunk is malformed", page: head, path: pager.path)
            }
            if n < trunkCapacity {
                trunk.setU32(12 + 4 * n, number)
                trunk.setU32(8, UInt32(n + 1))
                header.headerFreeCount += 1
                dirty[number] = nil
                forgetSpilled(number)
                return
            }
        }
        let p = Page(number: number, size: pageSize)
        p.setU8(0, PageKind.freelistTrunk.rawValue)
        p.setU32(4, head)
        dirty[number] = p
        ring.append(number)
        forgetSpilled(number)
        header.headerFreelistHead = number
        header.headerFreeCount += 1
    }

    /// A freed page's spilled frames stay in the log (a free leaf is never
    /// read); it just is no longer this transaction's to read back.
    private func forgetSpilled(_ number: UInt32) {
        if !spilled.isEmpty { spilled[number] = nil }
        if !inLog.isEmpty { inLog[number] = nil }
    }

    /// Commits every changed page as one transaction: the pages still in
    /// memory (except those read back unchanged) follow the spilled frames.
    ///
    /// - Throws: `failure`'s code, saying the transaction was rolled back, if
    ///   a page operation failed after a change (see the header).
    ///
    /// The change counter moves on by one (FORMAT.md, "The header page"). In
    /// format 4 page 1 is written only when another of its fields changed (or
    /// it is the only page left to write: a commit has at least one frame);
    /// in formats 1 to 3 every commit writes it, as builds of those formats
    /// read the counter from page 1 alone.
    func commit() throws(KuraError) {
        try checkNotFailed()
        let counter = snapshot.changeCounter &+ 1
        var pages = Array(dirty.values)
        if !inLog.isEmpty { pages.removeAll { inLog[$0.number] != nil } }
        if !headerCopied {
            // Nothing changed page 1 (it is not in `pages`): left out unless
            // the format needs it in every commit or it is the only page.
            if currentHeader.headerVersion < FileHeader.derivedCounterVersion || pages.isEmpty {
                let h = header
                h.headerChangeCounter = counter
                pages.append(h)
            }
        } else if header.headerVersion >= FileHeader.derivedCounterVersion && pages.count > 1 && headerUnchanged {
            pages.removeAll { $0.number == 1 }
        } else {
            header.headerChangeCounter = counter
        }
        try pager.commit(pages, pageCount: currentHeader.headerPageCount, changeCounter: counter)
    }

    /// Whether `header` equals the snapshot's page 1 in every byte before the
    /// checksum trailer, the change counter aside.
    private var headerUnchanged: Bool {
        let counterRange = FileHeader.changeCounterOffset..<(FileHeader.changeCounterOffset + 8)
        let end = pageSize - pageTrailerSize
        // Page buffers are never empty (at least 512 bytes), so their base
        // addresses exist.
        let a = UnsafeRawBufferPointer(header.buffer), b = UnsafeRawBufferPointer(originalHeader.buffer)
        return memcmp(a.baseAddress!, b.baseAddress!, counterRange.lowerBound) == 0
            && memcmp(a.baseAddress! + counterRange.upperBound, b.baseAddress! + counterRange.upperBound, end - counterRange.upperBound) == 0
    }

    /// Makes `pages` (numbered 1...N in order, page 1 first) the whole store, as
    /// compaction does: page 1 takes the fields of `pages[0]` except the database
    /// ID (it names this store's log), the format version (a store shared with
    /// connections of an older build keeps the format they read; compaction
    /// builds `pages` in that format's layout, see Database+Compact.swift) and
    /// the change counter (it goes
    /// on from this store's, set at commit). The page count becomes N. Pages
    /// past N are no longer part of the store.
    func replaceAllPages(with pages: [Page]) {
        precondition(!pages.isEmpty && pages.indices.allSatisfy { pages[$0].number == UInt32($0 + 1) } && pages[0].size == pageSize)
        let databaseID = header.headerDatabaseID
        let counter = header.headerChangeCounter
        let cookie = header.headerSchemaCookie
        // A format-1 store's copy is laid out as format 2 (counters tree),
        // which any writer may move it to.
        let version = max(header.headerVersion, FileHeader.countersFormatVersion)
        header.buffer.copyMemory(from: UnsafeRawBufferPointer(pages[0].buffer))
        header.headerDatabaseID = databaseID
        header.headerVersion = version
        header.headerChangeCounter = counter
        // Every root page may have moved: the schema cookie moves on, never back,
        // so no connection keeps a catalog decoded before the replacement.
        header.headerSchemaCookie = max(cookie, header.headerSchemaCookie) + 1
        dirty = [1: header]
        spilled = [:]
        inLog = [:]
        for p in pages.dropFirst() { dirty[p.number] = p }
        ring = pages.dropFirst().map(\.number)
        hand = 0
        modified = true
        carriesNothing = true
        forgetRecent()
        structureEpoch &+= 1
    }

    /// Throws if an earlier page operation failed after a change (the header's
    /// "Failure"): the error keeps the first failure's code, page and path.
    func checkNotFailed() throws(KuraError) {
        guard let f = failure else { return }
        throw KuraError(f.code, "the write transaction cannot commit and was rolled back: an earlier operation in it failed after it had changed pages (\(f.message)), which may have left a change half made; nothing of it was written", path: f.path ?? pager.path, page: f.page)
    }

    /// Whether the transaction changed any page (set by `writable`, `allocate`,
    /// `free` and `markModified`).
    @exclusivity(unchecked) private(set) var modified = false

    /// Records a change made directly to `header`.
    func markModified() { modified = true }
}

/// What a write transaction hands the next one of its connection
/// (`PageWriter.carry`): pages of snapshot `serial` and the append hints
/// valid in it. Its pages are immutable (committed or cached).
struct WriterCarry: Sendable {
    let serial: UInt64
    let pages: [Page]
    let hints: [AppendHint]
}

/// One connection's carry from its last write transaction to its next
/// (Database.write), taken by the next writer whatever its snapshot.
final class WriterCarrySlot: @unchecked Sendable {
    // @unchecked Sendable: `carry` is guarded by `lock`.
    private let lock = ThreadLock()
    private var carry: WriterCarry?

    func take() -> WriterCarry? { lock.withLock { () -> WriterCarry? in defer { carry = nil }; return carry } }

    func keep(_ c: WriterCarry?) { lock.withLock { carry = c } }
}
