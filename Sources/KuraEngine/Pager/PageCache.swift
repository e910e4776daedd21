// PageCache: a memory-bounded map from cache key to immutable page, with clock
// (second-chance) eviction. Not thread-safe: the pager calls `peek` under its
// lock held shared, everything else under its lock held exclusively.
//
// Keys: a database-file page is its page number; a WAL frame is
// `frameKeyFlag | generation << 32 | frame number`, so frames of a log that was
// reset can never be confused with the new log's. No key is 0 (page numbers
// start at 1, frame keys have the flag bit), so 0 marks an empty slot.
//
// The map is an open-addressing table with linear probing and a Fibonacci
// (multiplicative) hash: one slot holds the key and the page side by side,
// so a hit costs one multiply and usually one cache line, where a Dictionary
// paid a SipHash of the key and a line each for its bitmap, keys and values
// (every page lookup of a reader that misses its transaction's memo comes
// here). At most half the slots are used, so probes stay short and always
// end at an empty slot; removal shifts the following run back (no tombstones).

struct PageCache {
    static let frameKeyFlag: UInt64 = 1 << 63

    let capacity: Int

    private struct Slot {
        var key: UInt64
        var page: Page?
    }

    private var slots: [Slot]
    /// slots.count - 1 (a power of two minus one).
    private var mask: Int
    /// 64 - log2(slots.count): the hash keeps the product's top bits.
    private var shift: UInt64
    private(set) var count = 0
    /// How many of the `count` entries are WAL frames (`removeFrames`).
    private(set) var frameCount = 0
    private var ring: [UInt64] = []
    private var hand = 0
    /// Keys that sequential scans read and did not admit: one bit per hashed
    /// key (`admitsScanned`), allocated by the first scan that misses. False
    /// positives only admit a page, which is what the cache did before.
    private var scanned: [UInt64] = []
    /// Bits set in `scanned` since it was last cleared.
    private var scannedMarks = 0

    init(capacity: Int) {
        self.capacity = max(capacity, 8)
        (slots, mask, shift) = Self.table(for: self.capacity + 1)
    }

    /// An empty table with room for `entries` at a load of at most one half.
    private static func table(for entries: Int) -> ([Slot], Int, UInt64) {
        var n = 16
        while n < 2 * entries { n <<= 1 }
        return ([Slot](repeating: Slot(key: 0, page: nil), count: n), n - 1, UInt64(64 - n.trailingZeroBitCount))
    }

    static func frameKey(generation: UInt32, frame: Int) -> UInt64 {
        frameKeyFlag | UInt64(generation) << 32 | UInt64(UInt32(truncatingIfNeeded: frame))
    }

    @inline(__always)
    private func home(_ key: UInt64) -> Int { Self.hash(key, shift: shift) }

    /// `key`'s Fibonacci (multiplicative) hash: the product's top
    /// 64 - `shift` bits, an index into a power-of-two table of that many bits.
    @inline(__always)
    private static func hash(_ key: UInt64, shift: UInt64) -> Int {
        Int(truncatingIfNeeded: (key &* 0x9E37_79B9_7F4A_7C15) >> shift)
    }

    /// The slot holding `key`, or nil. Ends: at most half the slots are used.
    @inline(__always)
    private func find(_ key: UInt64) -> Int? {
        guard key != 0 else { return nil }
        var i = home(key)
        while true {
            let k = slots[i].key
            if k == key { return i }
            if k == 0 { return nil }
            i = (i + 1) & mask
        }
    }

    /// The page under `key` without setting its clock bit: for callers that
    /// hold the pager's lock shared (Pager.page sets the bit itself).
    @inline(__always)
    func peek(_ key: UInt64) -> Page? {
        guard let i = find(key) else { return nil }
        return slots[i].page
    }

    mutating func get(_ key: UInt64) -> Page? {
        guard let i = find(key), let p = slots[i].page else { return nil }
        p.referenced = true
        return p
    }

    mutating func put(_ key: UInt64, _ page: Page) {
        guard key != 0 else { return }
        if let i = find(key) {
            slots[i].page = page
            return
        }
        // Evict before inserting: the page being put is then never the one
        // evicted (a ring slot left by an earlier, removed entry under the
        // same key would otherwise reach it, and give it no second chance).
        if count >= capacity { evictOne() }
        insertNew(key, page)
        ring.append(key)
        if ring.count > 2 * capacity + 64 { compactRing() }
    }

    /// Whether a page that a sequential scan (a cursor walking a whole tree
    /// from one end) just read from disk should enter the cache. Only on the
    /// scan's second pass over the key: the first read only marks it. One
    /// pass over a table (a count, an export, a stream of every row in a
    /// fresh process) so leaves the cache, and the process's memory, as they
    /// were, where it used to fill the cache with pages nothing reads again;
    /// a table scanned again is cached from that second scan on, and pages
    /// reached any other way (lookups, index ranges) are cached as always.
    /// This is 2Q's "ghost" list (Johnson and Shasha, 1994) as a bitmap: four
    /// bits per page the cache holds, cleared once it has marked as many keys
    /// as the cache holds pages, so that at most a quarter of its bits are
    /// set and a scan of a table larger than the cache, which the cache
    /// could not keep anyway, does not leave it full of marks.
    mutating func admitsScanned(_ key: UInt64) -> Bool {
        if scanned.isEmpty {
            var bits = 4096
            while bits < 4 * capacity { bits <<= 1 }
            scanned = [UInt64](repeating: 0, count: bits / 64)
        }
        let bits = scanned.count * 64
        let h = Self.hash(key, shift: UInt64(64 - bits.trailingZeroBitCount))
        let bit: UInt64 = 1 << UInt64(h & 63)
        if scanned[h >> 6] & bit != 0 { return true }
        if scannedMarks >= capacity {
            for i in scanned.indices { scanned[i] = 0 }
            scannedMarks = 0
        }
        scanned[h >> 6] |= bit
        scannedMarks += 1
        return false
    }

    /// Adds `key`, which is not in the table.
    private mutating func insertNew(_ key: UInt64, _ page: Page) {
        if 2 * (count + 1) > slots.count { rehash(for: 2 * (count + 1)) }
        var i = home(key)
        while slots[i].key != 0 { i = (i + 1) & mask }
        slots[i] = Slot(key: key, page: page)
        count += 1
        if key & Self.frameKeyFlag != 0 { frameCount += 1 }
    }

    /// Rebuilds the table with room for `entries` (keeping every entry).
    private mutating func rehash(for entries: Int) {
        let old = slots
        (slots, mask, shift) = Self.table(for: entries)
        count = 0
        frameCount = 0
        for s in old where s.key != 0 {
            if let p = s.page { insertNew(s.key, p) }
        }
    }

    mutating func remove(_ key: UInt64) {
        // Its ring slot is dropped lazily by evictOne.
        if let i = find(key) { removeSlot(i) }
    }

    /// Empties slot `i`, then moves back each entry of the run after it that
    /// may no longer be reached from its home slot (backward-shift deletion).
    private mutating func removeSlot(_ slot: Int) {
        var hole = slot
        if slots[hole].key & Self.frameKeyFlag != 0 { frameCount -= 1 }
        slots[hole] = Slot(key: 0, page: nil)
        count -= 1
        var j = hole
        while true {
            j = (j + 1) & mask
            let k = slots[j].key
            if k == 0 { return }
            // The entry at j stays if its home lies cyclically in (hole, j].
            let h = home(k)
            let stays = hole <= j ? (h > hole && h <= j) : (h > hole || h <= j)
            if !stays {
                slots[hole] = slots[j]
                slots[j] = Slot(key: 0, page: nil)
                hole = j
            }
        }
    }

    mutating func removeAll() {
        for i in slots.indices where slots[i].key != 0 { slots[i] = Slot(key: 0, page: nil) }
        count = 0
        frameCount = 0
        ring.removeAll(keepingCapacity: true)
        hand = 0
    }

    /// Removes every WAL-frame entry (after the log is reset).
    ///
    /// `generation` and `lastFrame`, when given, say which frames the cache
    /// can hold (those of the log just reset, 1 through its last committed
    /// frame): each is then removed by its key, which costs one probe per
    /// frame, not a pass over the whole table (a checkpoint of a few hundred
    /// frames in a cache of thousands of pages). Entries of other frames, if
    /// any are left (`frameCount` says so), are removed by the full pass.
    mutating func removeFrames(generation: UInt32? = nil, lastFrame: Int = 0) {
        if let generation, lastFrame > 0, lastFrame <= slots.count {
            var f = 1
            while f <= lastFrame && frameCount > 0 {
                remove(Self.frameKey(generation: generation, frame: f))
                f += 1
            }
            // Their ring slots go lazily, as after `remove`.
            if frameCount == 0 { return }
        }
        let kept = slots.filter { $0.key != 0 && $0.key & PageCache.frameKeyFlag == 0 }
        for i in slots.indices where slots[i].key != 0 { slots[i] = Slot(key: 0, page: nil) }
        count = 0
        frameCount = 0
        for s in kept { if let p = s.page { insertNew(s.key, p) } }
        ring.removeAll(where: { $0 & PageCache.frameKeyFlag != 0 })
        hand = 0
    }

    /// Drops stale and duplicate ring slots left by `remove`.
    private mutating func compactRing() {
        var seen = Set<UInt64>()
        ring = ring.filter { find($0) != nil && seen.insert($0).inserted }
        hand = 0
    }

    private mutating func evictOne() {
        // Each pass either evicts, drops a stale slot, or clears one bit, so
        // 2 * ring.count + 1 steps always suffice.
        var steps = 2 * ring.count + 1
        while steps > 0 && !ring.isEmpty {
            steps -= 1
            if hand >= ring.count { hand = 0 }
            let key = ring[hand]
            guard let i = find(key), let page = slots[i].page else {
                ring.swapAt(hand, ring.count - 1)
                ring.removeLast()
                continue
            }
            if page.referenced {
                page.referenced = false
                hand += 1
            } else {
                removeSlot(i)
                ring.swapAt(hand, ring.count - 1)
                ring.removeLast()
                return
            }
        }
    }
}
