// RecordHeader: the one walk over a record's header (FORMAT.md, "Records"),
// shared by every decoder (`RecordCodec.decode`, `RecordCodec.value(at:in:)`,
// `RecordView`, `RecordFields`).
//
// Invariants: `next()` returns a value's serial type only if it is a known type
// and its whole body lies inside the record; the walk is bounded by the header
// size (each serial type takes at least one header byte). Errors are `.corrupt`
// and say which byte or length is wrong.

/// Steps through the serial types of one record's header.
///
/// Lifetime: borrows the bytes it was made from; use it only while they are
/// valid (inside the `withBytes`/page callback that produced them).
struct RecordHeader {
    let base: UnsafeRawPointer
    let length: Int
    private let headerEnd: Int
    private var pos: Int
    private var body: Int

    /// Reads the header size of the record in `buf`.
    ///
    /// - Throws: `.corrupt` if the record is empty or its header size runs past it.
    @inline(__always)
    init(_ buf: UnsafeRawBufferPointer) throws(KuraError) {
        guard let p = buf.baseAddress, buf.count > 0 else {
            throw KuraError(.corrupt, "record is empty")
        }
        guard let (hsize, hlen) = Varint.read(p, 0, buf.count), hsize <= UInt64(buf.count - hlen) else {
            throw KuraError(.corrupt, "record header size runs past the record (\(buf.count) bytes)")
        }
        base = p
        length = buf.count
        headerEnd = hlen + Int(hsize)
        pos = hlen
        body = headerEnd
    }

    /// Bytes of serial types in the header: at least the number of values
    /// (each type takes one byte or more), at most the record's length.
    var typeBytes: Int { headerEnd - pos }

    /// The next value's serial type and the offset of its body in the record,
    /// or nil after the last value.
    ///
    /// - Throws: `.corrupt` for a malformed or unknown serial type, or a body
    ///   that ends past the record.
    @inline(__always)
    mutating func next() throws(KuraError) -> (type: UInt64, body: Int)? {
        guard pos < headerEnd else { return nil }
        guard let (t, n) = Varint.read(base, pos, headerEnd), let blen = RecordCodec.bodyLength(t) else {
            throw KuraError(.corrupt, "record header has a malformed or unknown serial type at byte \(pos)")
        }
        guard body + blen <= length else {
            throw KuraError(.corrupt, "record body is shorter than its header promises (\(body + blen) > \(length) bytes)")
        }
        let at = body
        pos += n
        body += blen
        return (t, at)
    }
}
