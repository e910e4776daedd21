// RecordFields: the first columns of one record, located without copying or
// allocating (FORMAT.md, "Records").
//
// A compiled predicate reads a few columns of every row a scan visits. Instead of
// a `RecordView` (two arrays per row) or `RecordCodec.value(at:in:)` (a header walk
// per column), it keeps one `RecordFields` for the whole scan and calls `load` per
// row: one walk over the header, up to the highest column the predicate needs,
// filling reused buffers with each column's serial type and body offset. Columns
// are then decoded on demand, and text can be read as borrowed UTF-8 bytes.
//
// Invariants after `load(_:)` returned: `loaded` columns are located, each body
// lies inside the record; a column at or past `loaded` is missing from the record
// (the caller reads the column's default, as for a record written before the column
// was added). Bytes are borrowed: valid only while the buffer passed to `load` is.
//
// Hostile bytes: the header size, every serial type and every body length are
// bounds-checked, exactly as `RecordView` does; a malformed record throws
// `.corrupt`, never traps.

/// Reused, allocation-free access to the leading columns of successive records.
///
/// Lifetime: the bytes of the last `load` call. Not thread-safe (one per scan).
struct RecordFields {
    /// How many leading columns `load` locates.
    let wanted: Int
    private(set) var base: UnsafeRawPointer?
    private(set) var loaded = 0
    private var types: [UInt64]
    private var offsets: [Int]

    init(columns wanted: Int) {
        precondition(wanted >= 0)
        self.wanted = wanted
        types = Array(repeating: 0, count: wanted)
        offsets = Array(repeating: 0, count: wanted)
    }

    /// Locates the first `wanted` columns of the record in `buf`.
    ///
    /// - Throws: `.corrupt` for a malformed header or a body past the record.
    mutating func load(_ buf: UnsafeRawBufferPointer) throws(KuraError) {
        loaded = 0
        base = buf.baseAddress
        var header = try RecordHeader(buf)
        var i = 0
        while i < wanted, let (t, at) = try header.next() {
            types[i] = t
            offsets[i] = at
            i += 1
        }
        loaded = i
    }

    /// Serial type of column `i` (which must be below `loaded`).
    @inline(__always)
    func type(_ i: Int) -> UInt64 { types[i] }

    /// Decodes column `i` (below `loaded`).
    ///
    /// - Throws: `.corrupt` for text that is not valid UTF-8.
    @inline(__always)
    func value(_ i: Int) throws(KuraError) -> Value {
        precondition(i < loaded, "column \(i) was not loaded")
        // `base` is non-nil whenever `loaded > 0` (load checked it).
        return try RecordCodec.decodeBody(types[i], base.unsafelyUnwrapped + offsets[i], column: i)
    }

    /// The UTF-8 bytes of column `i` if it holds text (unvalidated), else nil.
    @inline(__always)
    func textBytes(_ i: Int) -> UnsafeRawBufferPointer? {
        guard i < loaded else { return nil }
        let t = types[i]
        guard t >= 13, t & 1 == 1 else { return nil }
        return UnsafeRawBufferPointer(start: base.unsafelyUnwrapped + offsets[i], count: Int((t - 13) / 2))
    }
}

extension RecordFields {
    /// Whether column `i` has the same serial type and body bytes here and in
    /// `other` (false if either record does not store column `i`). Both must
    /// have been loaded from buffers that are still valid.
    func sameField(_ i: Int, as other: RecordFields) -> Bool {
        guard i < loaded, i < other.loaded, type(i) == other.type(i) else { return false }
        // `load` checked that this type has a body length and that the body
        // lies inside the record, in both.
        let n = RecordCodec.bodyLength(type(i)).unsafelyUnwrapped
        return n == 0 || UnsafeRawBufferPointer(start: base.unsafelyUnwrapped + offsets[i], count: n)
            .elementsEqual(UnsafeRawBufferPointer(start: other.base.unsafelyUnwrapped + other.offsets[i], count: n))
    }
}
