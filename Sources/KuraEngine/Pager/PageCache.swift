// PageCache: a memory-bounded map from cache key to immutable page, with clock
// (second-chance) eviction. Not thread-safe: the pager calls `peek` under its
// lock held shared, everything else under its lock held exclusively.
//
// Keys: a database-file page is its page number; a WAL frame is
// `frameKeyFlag | generation << 32 | frame number`, so frames of a log that was
// reset can never be confused with the new log's.

struct PageCache {
    static let frameKeyFlag: UInt64 = 1 << 63

    let capacity: Int
    private var map: [UInt64: Page] = [:]
    private var ring: [UInt64] = []
    private var hand = 0

    init(capacity: Int) {
        self.capacity = max(capacity, 8)
        map.reserveCapacity(self.capacity)
    }

    static func frameKey(generation: UInt32, frame: Int) -> UInt64 {
        frameKeyFlag | UInt64(generation) << 32 | UInt64(UInt32(truncatingIfNeeded: frame))
    }

    var count: Int { map.count }

    /// The page under `key` without setting its clock bit: for callers that
    /// hold the pager's lock shared (Pager.page sets the bit itself).
    @inline(__always)
    func peek(_ key: UInt64) -> Page? { map[key] }

    mutating func get(_ key: UInt64) -> Page? {
        guard let p = map[key] else { return nil }
        p.referenced = true
        return p
    }

    mutating func put(_ key: UInt64, _ page: Page) {
        if map.updateValue(page, forKey: key) != nil { return }
        if map.count > capacity { evictOne() }
        ring.append(key)
        if ring.count > 2 * capacity + 64 { compactRing() }
    }

    mutating func remove(_ key: UInt64) {
        map[key] = nil  // its ring slot is dropped lazily by evictOne
    }

    mutating func removeAll() {
        map.removeAll(keepingCapacity: true)
        ring.removeAll(keepingCapacity: true)
        hand = 0
    }

    /// Removes every WAL-frame entry (after the log is reset).
    mutating func removeFrames() {
        map = map.filter { $0.key & PageCache.frameKeyFlag == 0 }
        ring.removeAll(where: { $0 & PageCache.frameKeyFlag != 0 })
        hand = 0
    }

    /// Drops stale and duplicate ring slots left by `remove`.
    private mutating func compactRing() {
        var seen = Set<UInt64>()
        ring = ring.filter { map[$0] != nil && seen.insert($0).inserted }
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
            guard let page = map[key] else {
                ring.swapAt(hand, ring.count - 1)
                ring.removeLast()
                continue
            }
            if page.referenced {
                page.referenced = false
                hand += 1
            } else {
                map[key] = nil
                ring.swapAt(hand, ring.count - 1)
                ring.removeLast()
                return
            }
        }
    }
}
