// KeySorter: sorts index entries within a memory budget (an external merge
// sort, after SQLite's vdbesort.c), for building an index on a filled table.
//
// Entries are added one at a time and kept in memory until their estimated size
// passes the budget; then that run is sorted and appended to a temporary file
// beside the store, `PATH-sort`, written through the store's own `FileSystem`
// (so an in-memory store sorts in a memory file and fault injection reaches the
// sort). When every entry fits in one run no file is written. Reading merges the
// runs with a binary heap and streams entries in key order; it can be done more
// than once (`createIndex` checks uniqueness in one pass and loads the tree in
// the next).
//
// Order: keys compare as unsigned bytes (`bytesPrecede`). Each entry carries its
// key's first eight bytes as a big-endian integer (`head`), so most comparisons
// are one integer comparison; equal heads fall back to comparing the whole keys.
// Zero-padding the head of a shorter key keeps the order: a key that ends inside
// the head is a prefix of any longer key with the same head bytes, and sorts
// first in both orders. Index keys end in their row ID, so no two are equal.
// An index build adds its entries in row-ID order; then the radix passes look
// only at the bytes of the column values (the row-ID bytes are zeroed in the
// sorted head), the sort being stable: entries with the same values keep the
// order they came in, which is their key order. Every run of equal sorted
// heads is still checked against the whole keys (and sorted if it is not in
// order), and a sorter that sees a row ID not above the one before sorts on
// the whole head.
//
// In memory, entries are `HeldEntry`s (head, row ID, arena offset, key length,
// prefix length with the null flag) whose keys lie back to back in one byte
// arena; a sort moves only the 24-byte entries. A sort that never passed the
// budget is read straight from the arena (`forEachInMemory`), with no file and
// no merge.
//
// Memory: the budget (the connection's page cache size, so a build uses about
// twice the cache size with the page cache) bounds the entries held while
// adding, counted exactly (24 bytes and the key per entry; the entry array is
// reserved up front from the number of rows, `reserve`, so it does not grow
// past what is counted; the radix sort borrows a second array of entries while
// it runs); merging holds one read buffer per run (`budget / runs`, at least 4 KiB
// and at most 64 KiB) and one entry per run. There is one merge level, so a
// table of R budgets needs R buffers: 1000 runs use about 4 MiB.
//
// Run file (private to one sort, never read by another version, not part of the
// store format): runs one after another, each a sequence of entries
//
//     u32 key length | u32 key prefix length | u8 flags (1 = a key value is null)
//     | i64 row ID | key bytes                        (little-endian integers)
//
// Reading checks every length against the run's end and the largest key the
// page size allows, and throws `.corrupt` naming the file and offset otherwise.
//
// Stray files: only the writer sorts, and a store has one writer at a time, so
// the name is fixed. A sort truncates a file left there by a crash before using
// it and removes the file when it finishes or fails (`close`/`discard`); a file
// left by a crash stays until the next sort that spills, which reuses and then
// removes it. Nothing reads it at open.

/// One index entry to sort: the key (column values then row ID), how many of
/// its bytes are the column values, whether one of them is null, and the row.
struct SortEntry {
    var key: [UInt8]
    var head: UInt64
    var prefix: Int
    var hasNull: Bool
    var rowID: Int64

    init(key: [UInt8], prefix: Int, hasNull: Bool, rowID: Int64) {
        self.key = key
        self.prefix = prefix
        self.hasNull = hasNull
        self.rowID = rowID
        head = Self.head(of: key)
    }

    /// The first eight bytes of `key` as a big-endian integer, zero-padded
    /// (see the order note at the top of this file).
    @inline(__always)
    static func head(of key: [UInt8]) -> UInt64 {
        key.withUnsafeBytes { head(of: $0) }
    }

    /// The same for a key given by its bytes.
    @inline(__always)
    static func head(of key: UnsafeRawBufferPointer) -> UInt64 {
        var h: UInt64 = 0
        for j in 0..<8 { h = h << 8 | UInt64(j < key.count ? key[j] : 0) }
        return h
    }

    @inline(__always)
    func precedes(_ other: SortEntry) -> Bool {
        head != other.head ? head < other.head : bytesPrecede(key, other.key)
    }

    /// Whether both keys start with the same column values (same prefix bytes).
    func sharesValues(with other: SortEntry) -> Bool {
        prefix == other.prefix && key[0..<prefix] == other.key[0..<other.prefix]
    }
}

/// An entry held in memory: its key is `length` bytes at `offset` in the
/// sorter's arena. 24 bytes: the arena is at most `UInt32.max` bytes (a run is
/// written before it would pass that) and keys at most `maxKey` (< 32 KiB at
/// the largest page size), checked by `add`.
struct HeldEntry {
    var head: UInt64
    var rowID: Int64
    var offset32: UInt32
    var length16: UInt16
    /// The prefix length, with the top bit set when a key value is null.
    var prefixAndNull: UInt16

    var offset: Int { Int(offset32) }
    var length: Int { Int(length16) }
    var prefix: Int { Int(prefixAndNull & 0x7FFF) }
    var hasNull: Bool { prefixAndNull & 0x8000 != 0 }
}

/// Sorts `SortEntry`s within a memory budget, spilling sorted runs to a
/// temporary file. Used by one thread (the writer); not Sendable.
///
/// Entries held in memory keep their keys back to back in one arena (no array
/// per key), and are sorted as 24-byte `HeldEntry`s by head, then by the arena
/// bytes. When they all fit the budget, `forEachInMemory` hands them out in
/// order as borrowed bytes, with no run file and no merge.
final class KeySorter {
    static let entryHeader = 17
    /// Bytes counted per entry besides its key.
    static let entryOverhead = MemoryLayout<HeldEntry>.stride

    private let fs: any FileSystem
    private let template: StorageFile?
    let path: String
    private let budget: Int
    private let maxKey: Int
    // The fields `add` touches for every entry skip the runtime's exclusivity
    // checks: a KeySorter is used by one thread at a time (it is not
    // Sendable), and no method hands out access to them across a call back
    // into code that could reach this sorter (`forEachInMemory`'s body gets
    // bytes of the arena; the builds that call it feed a BTree.BulkLoader).
    @exclusivity(unchecked) private var arena: [UInt8] = []
    @exclusivity(unchecked) private var pending: [HeldEntry] = []
    @exclusivity(unchecked) private var pendingBytes = 0
    private var file: StorageFile?
    /// Byte ranges of the runs in the file.
    private(set) var runs: [(start: Int64, end: Int64)] = []
    private var fileEnd: Int64 = 0
    private var finished = false
    /// Entries added.
    @exclusivity(unchecked) private(set) var count = 0
    /// Whether every entry so far came with a larger row ID than the one
    /// before (an index build reads its table in row-ID order): then the
    /// key order is the order of the column values, ties in the order added,
    /// and a stable sort on the column-value bytes alone is enough.
    @exclusivity(unchecked) private var addedInRowIDOrder = true
    @exclusivity(unchecked) private var lastRowID = Int64.min

    /// A sorter whose run file, if one is needed, is `storePath + "-sort"` on `fs`,
    /// created with the permissions of `template` (the store file: the runs hold
    /// its data). `budget` is the bytes of entries kept in memory; `maxKey` the
    /// longest key a run may hold (checked when reading it back).
    init(fileSystem fs: any FileSystem, storePath: String, permissionsOf template: StorageFile?, budget: Int, maxKey: Int) {
        self.fs = fs
        self.template = template
        self.path = storePath + "-sort"
        self.budget = max(budget, 1)
        self.maxKey = maxKey
    }

    /// Adds an entry; writes a sorted run once the entries held pass the budget.
    func add(_ e: SortEntry) throws(KuraError) {
        try add(key: e.key, prefix: e.prefix, hasNull: e.hasNull, rowID: e.rowID)
    }

    /// Adds an entry given by its parts (see `SortEntry`).
    func add(key: [UInt8], prefix: Int, hasNull: Bool, rowID: Int64) throws(KuraError) {
        try key.withBytes { k throws(KuraError) in try add(keyBytes: k, prefix: prefix, hasNull: hasNull, rowID: rowID) }
    }

    /// Adds an entry whose key is `key`'s bytes (copied into the arena).
    func add(keyBytes key: UnsafeRawBufferPointer, prefix: Int, hasNull: Bool, rowID: Int64) throws(KuraError) {
        precondition(!finished, "KeySorter.add after finish")
        precondition(prefix <= key.count)
        guard key.count <= min(maxKey, 0x7FFF) else {
            throw KuraError(.tooBig, "an index key of \(key.count) bytes is longer than the \(min(maxKey, 0x7FFF)) bytes a sort holds")
        }
        if arena.count + key.count > Int(UInt32.max) { try spill() }
        pendingBytes += key.count + Self.entryOverhead
        let h = SortEntry.head(of: key)
        if rowID <= lastRowID { addedInRowIDOrder = false }
        lastRowID = rowID
        // Both fit: key.count <= 0x7FFF (checked above), arena.count <= UInt32.max (a spill empties it first).
        pending.append(HeldEntry(head: h, rowID: rowID, offset32: UInt32(arena.count), length16: UInt16(key.count),
                                 prefixAndNull: UInt16(prefix) | (hasNull ? 0x8000 : 0)))
        arena.append(contentsOf: key)
        count += 1
        if pendingBytes > budget { try spill() }
    }

    /// The first two neighbouring entries (in key order) that share their
    /// column values with neither holding a null, or nil. Only when `isInMemory`.
    func firstSharedValuesInMemory() -> (HeldEntry, HeldEntry)? {
        precondition(isInMemory, "KeySorter.firstSharedValuesInMemory with runs on disk")
        guard pending.count > 1 else { return nil }
        return arena.withUnsafeBytes { a -> (HeldEntry, HeldEntry)? in
            for k in 1..<pending.count {
                let p = pending[k - 1], e = pending[k]
                guard !e.hasNull, e.prefix == p.prefix else { continue }
                let n = Int(e.prefix)
                if n == 0 || memcmpBytes(a.baseAddress! + p.offset, a.baseAddress! + e.offset, n) == 0 { return (p, e) }
            }
            return nil
        }
    }

    /// Whether every entry stayed in memory (after `finish`): then
    /// `forEachInMemory` gives them without a run file or a merge.
    var isInMemory: Bool { finished && file == nil }

    /// Calls `body` with each entry in key order: its key bytes (valid during
    /// the call only) and its parts. Only when `isInMemory`.
    func forEachInMemory(_ body: (UnsafeRawBufferPointer, HeldEntry) throws(KuraError) -> Void) throws(KuraError) {
        precondition(isInMemory, "KeySorter.forEachInMemory with runs on disk")
        try arena.withBytes { a throws(KuraError) in
            for e in pending {
                try body(UnsafeRawBufferPointer(rebasing: a[e.offset..<(e.offset + e.length)]), e)
            }
        }
    }

    /// Reserves room for `entries` more entries, as far as the budget holds
    /// them (a build knows its table's row count): the entry array then does
    /// not grow past what the budget counts.
    func reserve(entries: Int) {
        let fit = max(0, budget - pendingBytes) / (Self.entryOverhead + 8)
        pending.reserveCapacity(pending.count + min(max(entries, 0), fit + 1))
    }

    /// Ends adding: the last run is written too if earlier ones were.
    func finish() throws(KuraError) {
        guard !finished else { return }
        finished = true
        if file != nil && !pending.isEmpty { try spill() } else { sortPending() }
    }

    /// The entries in key order. Call after `finish`; each call starts over.
    func merged() throws(KuraError) -> KeyMerge {
        precondition(finished, "KeySorter.merged before finish")
        guard let file else {
            return KeyMerge(memory: pending.map { e in
                SortEntry(key: Array(arena[e.offset..<(e.offset + e.length)]), prefix: e.prefix, hasNull: e.hasNull, rowID: e.rowID)
            })
        }
        let bufferSize = min(max(budget / max(runs.count, 1), 4096), 1 << 16)
        var readers: [RunReader] = []
        for r in runs {
            readers.append(RunReader(file: file, start: r.start, end: r.end, bufferSize: bufferSize, maxKey: maxKey))
        }
        return try KeyMerge(readers: readers)
    }

    /// Removes the run file, if one was written. Call when done.
    func close() throws(KuraError) {
        guard let f = file else { return }
        file = nil
        f.close()
        try fs.remove(path)
    }

    /// `close` on an error path: a failure to remove the file is dropped, since
    /// the caller is already throwing the error that matters; the next sort that
    /// spills reuses and removes the file.
    func discard() {
        do { try close() } catch { /* see above */ }
    }

    /// Sorts `pending` by head, then by the keys' arena bytes (memcmp, then
    /// length: `bytesPrecede`'s order).
    ///
    /// Many entries: a stable radix sort on a sort head (a byte per pass,
    /// passes whose byte is the same in every entry skipped), then each run
    /// of equal sort heads is checked and, only if out of order, sorted. The
    /// sort head is the head itself, or, when the entries came in row-ID
    /// order (`addedInRowIDOrder`), the head with every byte past the column
    /// values zeroed: the row-ID bytes then cost no pass, and entries with
    /// the same column values keep the order they came in, which is their
    /// key order. Few entries: one comparison sort.
    private func sortPending() {
        let n = pending.count
        guard n > 1 else { return }
        let masked = addedInRowIDOrder
        if n >= 512 { radixSortByHead(masked: masked) }
        arena.withUnsafeBytes { a in
            let base = a.baseAddress
            if n < 512 {
                pending.sort { x, y in Self.precedes(x, y, base) }
                return
            }
            pending.withUnsafeMutableBufferPointer { p in
                var i = 0
                while i < n {
                    let h = Self.sortHead(p[i], masked: masked)
                    var j = i + 1
                    while j < n && Self.sortHead(p[j], masked: masked) == h { j += 1 }
                    if j - i > 1 {
                        var ordered = true
                        for k in (i + 1)..<j where Self.precedes(p[k], p[k - 1], base) { ordered = false; break }
                        if !ordered { p[i..<j].sort { x, y in Self.precedes(x, y, base) } }
                    }
                    i = j
                }
            }
        }
    }

    /// What the radix passes order `e` by: its head, or (`masked`) its head
    /// with the bytes past its column values (its row ID's) zeroed.
    @inline(__always)
    private static func sortHead(_ e: HeldEntry, masked: Bool) -> UInt64 {
        guard masked else { return e.head }
        let p = e.prefix
        if p >= 8 { return e.head }
        return p == 0 ? 0 : e.head & ~(UInt64.max >> UInt64(8 * p))
    }

    /// Whether `x`'s key sorts before `y`'s (head, then the arena bytes).
    @inline(__always)
    private static func precedes(_ x: HeldEntry, _ y: HeldEntry, _ base: UnsafeRawPointer?) -> Bool {
        if x.head != y.head { return x.head < y.head }
        let n = min(x.length, y.length)
        // A key within eight bytes is all head: equal heads then differ by length only.
        if n > 8, let base {
            let c = memcmpBytes(base + x.offset + 8, base + y.offset + 8, n - 8)
            if c != 0 { return c < 0 }
        }
        return x.length < y.length
    }

    /// Orders `pending` by `sortHead` alone, stably (least significant byte first).
    private func radixSortByHead(masked: Bool) {
        let n = pending.count
        var counts = [Int](repeating: 0, count: 8 * 256)
        counts.withUnsafeMutableBufferPointer { c in
            pending.withUnsafeBufferPointer { entries in
                // c has 8 * 256 slots and d * 256 + (a byte) < 8 * 256.
                let cp = c.baseAddress!
                for e in entries {
                    var h = Self.sortHead(e, masked: masked)
                    for d in 0..<8 {
                        cp[d &* 256 &+ Int(h & 0xff)] &+= 1
                        h >>= 8
                    }
                }
            }
        }
        var other = pending
        var fromPending = true
        for d in 0..<8 {
            let first = d * 256
            // A byte every head shares orders nothing.
            if counts[first..<(first + 256)].contains(n) { continue }
            var next = [Int](repeating: 0, count: 256)
            var sum = 0
            for b in 0..<256 {
                next[b] = sum
                sum += counts[first + b]
            }
            let shift = UInt64(8 * d)
            next.withUnsafeMutableBufferPointer { slots in
                if fromPending {
                    pending.withUnsafeMutableBufferPointer { src in other.withUnsafeMutableBufferPointer { dst in Self.scatter(src, dst, slots, shift, masked) } }
                } else {
                    other.withUnsafeMutableBufferPointer { src in pending.withUnsafeMutableBufferPointer { dst in Self.scatter(src, dst, slots, shift, masked) } }
                }
            }
            fromPending.toggle()
        }
        if !fromPending { pending = other }
    }

    /// One radix pass: each entry of `src` to the next slot of its byte
    /// (`next`, advanced) in `dst`. Through buffer pointers, so the loop
    /// has no exclusivity checks.
    private static func scatter(_ src: UnsafeMutableBufferPointer<HeldEntry>, _ dst: UnsafeMutableBufferPointer<HeldEntry>,
                                _ next: UnsafeMutableBufferPointer<Int>, _ shift: UInt64, _ masked: Bool) {
        for e in src {
            let b = Int((sortHead(e, masked: masked) >> shift) & 0xff)
            dst[next[b]] = e
            next[b] += 1
        }
    }

    private func spill() throws(KuraError) {
        sortPending()
        if file == nil {
            let f = try fs.open(path, create: true, permissionsOf: template)
            file = f
            try f.truncate(to: 0)
        }
        guard let file else { return }
        let start = fileEnd
        var buffer: [UInt8] = []
        buffer.reserveCapacity(1 << 16)
        for e in pending {
            appendLE(UInt32(e.length), to: &buffer)
            appendLE(UInt32(e.prefix), to: &buffer)
            buffer.append(e.hasNull ? 1 : 0)
            appendLE(UInt64(bitPattern: e.rowID), to: &buffer)
            buffer.append(contentsOf: arena[e.offset..<(e.offset + e.length)])
            if buffer.count >= 1 << 16 { try flush(&buffer, file) }
        }
        try flush(&buffer, file)
        runs.append((start, fileEnd))
        pending.removeAll(keepingCapacity: true)
        arena.removeAll(keepingCapacity: true)
        pendingBytes = 0
    }

    private func flush(_ buffer: inout [UInt8], _ file: StorageFile) throws(KuraError) {
        guard !buffer.isEmpty else { return }
        let at = fileEnd
        try buffer.withBytes { b throws(KuraError) in try file.write(b, at: at) }
        fileEnd += Int64(buffer.count)
        buffer.removeAll(keepingCapacity: true)
    }

    private func appendLE<T: FixedWidthInteger>(_ v: T, to out: inout [UInt8]) {
        withUnsafeBytes(of: v.littleEndian) { out.append(contentsOf: $0) }
    }
}

/// Reads one run of a sort file, entry by entry, through a buffer.
struct RunReader {
    let file: StorageFile
    let end: Int64
    let maxKey: Int
    let bufferSize: Int
    /// File offset of `buffer[0]`.
    private var bufferStart: Int64
    private var buffer: [UInt8] = []
    private var position = 0

    init(file: StorageFile, start: Int64, end: Int64, bufferSize: Int, maxKey: Int) {
        self.file = file
        self.end = end
        self.maxKey = maxKey
        self.bufferSize = bufferSize
        bufferStart = start
    }

    /// The next entry, or nil at the end of the run.
    mutating func next() throws(KuraError) -> SortEntry? {
        let offset = bufferStart + Int64(position)
        if offset == end { return nil }
        try ensure(KeySorter.entryHeader, at: offset)
        let (keyLength, prefix, flags, rowID) = buffer.withUnsafeBytes { b in
            (Int(UInt32(littleEndian: b.loadUnaligned(fromByteOffset: position, as: UInt32.self))),
             Int(UInt32(littleEndian: b.loadUnaligned(fromByteOffset: position + 4, as: UInt32.self))),
             b[position + 8],
             Int64(bitPattern: UInt64(littleEndian: b.loadUnaligned(fromByteOffset: position + 9, as: UInt64.self))))
        }
        guard keyLength <= maxKey, prefix <= keyLength, flags <= 1 else {
            throw KuraError(.corrupt, "sort file entry at offset \(offset) is malformed (key length \(keyLength), prefix \(prefix), flags \(flags))", path: file.path)
        }
        position += KeySorter.entryHeader
        try ensure(keyLength, at: offset + Int64(KeySorter.entryHeader))
        let key = Array(buffer[position..<position + keyLength])
        position += keyLength
        return SortEntry(key: key, prefix: prefix, hasNull: flags == 1, rowID: rowID)
    }

    /// Makes `n` bytes from file offset `offset` (the current position) available
    /// in the buffer, reading more of the run; throws if the run ends first.
    private mutating func ensure(_ n: Int, at offset: Int64) throws(KuraError) {
        if buffer.count - position >= n { return }
        guard end - offset >= Int64(n) else {
            throw KuraError(.corrupt, "sort file run ends inside the entry at offset \(offset)", path: file.path)
        }
        buffer.removeSubrange(0..<position)
        bufferStart = offset
        position = 0
        let want = Int(min(Int64(max(n, bufferSize)), end - offset)) - buffer.count
        let have = buffer.count
        buffer.append(contentsOf: repeatElement(0, count: want))
        let readAt = offset + Int64(have)
        let complete = try buffer.withMutableBytes { b throws(KuraError) in
            try file.readFully(into: UnsafeMutableRawBufferPointer(rebasing: b[have...]), at: readAt)
        }
        guard complete else {
            throw KuraError(.corrupt, "sort file is shorter than its runs (reading offset \(readAt))", path: file.path)
        }
    }
}

/// Entries of all runs in key order: a k-way merge over a binary min-heap of
/// the runs' current entries, or a walk over one in-memory run.
final class KeyMerge {
    private var memory: [SortEntry] = []
    private var memoryIndex = 0
    private var readers: [RunReader] = []
    /// Current entry of each reader (nil once it ended).
    private var current: [SortEntry?] = []
    /// Reader indices, a min-heap by their current entries.
    private var heap: [Int] = []

    init(memory: [SortEntry]) { self.memory = memory }

    init(readers: [RunReader]) throws(KuraError) {
        self.readers = readers
        for i in self.readers.indices {
            let e = try self.readers[i].next()
            current.append(e)
            if e != nil { heap.append(i) }
        }
        var i = heap.count / 2
        while i > 0 { i -= 1; siftDown(i) }
    }

    /// The next entry in key order, or nil when all are read.
    func next() throws(KuraError) -> SortEntry? {
        if readers.isEmpty {
            guard memoryIndex < memory.count else { return nil }
            memoryIndex += 1
            return memory[memoryIndex - 1]
        }
        guard let top = heap.first, let e = current[top] else { return nil }
        let following = try readers[top].next()
        current[top] = following
        if following == nil {
            heap[0] = heap[heap.count - 1]
            heap.removeLast()
        }
        if !heap.isEmpty { siftDown(0) }
        return e
    }

    private func less(_ a: Int, _ b: Int) -> Bool {
        // Readers in the heap always have a current entry.
        current[a]!.precedes(current[b]!)
    }

    private func siftDown(_ start: Int) {
        var i = start
        while true {
            let l = 2 * i + 1, r = l + 1
            var m = i
            if l < heap.count && less(heap[l], heap[m]) { m = l }
            if r < heap.count && less(heap[r], heap[m]) { m = r }
            if m == i { return }
            heap.swapAt(i, m)
            i = m
        }
    }
}
