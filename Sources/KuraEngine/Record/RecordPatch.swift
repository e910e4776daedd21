// RecordPatch: a record with some of its values replaced, made from the old
// record's bytes without decoding the others (FORMAT.md, "Records").
//
// An update that sets a few columns (`WriteTransaction.update(_:where:set:)`)
// used to decode every value of each row (a String per text column), put the
// new values in, re-validate the whole row and encode it again. A patch copies
// the unchanged values' bytes as they stand: when every replaced value keeps
// its serial type (a double, or an integer of the same width) the output is
// the old record with those bodies overwritten; otherwise the header and body
// are rebuilt from the old pieces and the new values. The bytes produced are
// exactly what `RecordCodec.encode` gives for the old values with the changes
// put in, so a patched record and an encoded one cannot be told apart.
//
// Invariants: the changes are already validated and normalized for their
// columns (`TableSchema.validatedChange`); the positions are distinct. The old
// record is hostile (it came from disk): its header is walked with
// `RecordHeader`'s checks, and a record that does not store a changed position
// (written before that column was added) is not patched: `apply` returns nil
// and the caller takes the full decode-and-encode path, which fills the
// missing columns with their defaults.

/// Replaces values of records by position, reusing the buffers between rows.
///
/// Not thread-safe: one per update statement.
struct RecordPatch {
    /// The changes, by ascending position.
    private let changes: [(position: Int, value: Value, type: UInt64)]
    /// One past the highest changed position.
    private let width: Int
    /// Serial types and body offsets of the record being patched (reused).
    private var types: [UInt64] = []
    private var offsets: [Int] = []
    /// The length of the record read last.
    private var recordLength = 0

    /// `changes` are (column position, validated value) pairs with distinct positions.
    init(_ changes: [(position: Int, value: Value)]) {
        let sorted = changes.sorted { $0.position < $1.position }
        for k in sorted.indices.dropFirst() {
            precondition(sorted[k - 1].position != sorted[k].position, "a record patch sets column \(sorted[k].position) twice")
        }
        self.changes = sorted.map { ($0.position, $0.value, RecordCodec.serialType($0.value)) }
        width = (sorted.last?.position ?? -1) + 1
    }

    /// Positions the patch sets.
    var positions: [Int] { changes.map(\.position) }

    /// `record` with the changes put in; nil if it stores fewer values than
    /// the highest changed position needs (the caller encodes the row whole).
    ///
    /// - Throws: `.corrupt` for a malformed record header or body.
    mutating func apply(to record: [UInt8]) throws(KuraError) -> [UInt8]? {
        try record.withBytes { buf throws(KuraError) -> [UInt8]? in
            guard let sameTypes = try read(buf) else { return nil }
            if sameTypes {
                var out = record
                out.withUnsafeMutableBytes { o in writeBodies(o) }
                return out
            }
            return rebuilt(buf)
        }
    }

    /// Whether the record in `buf` (where it lies, e.g. in its leaf) can take
    /// the changes in place: every replaced value keeps its serial type, so
    /// only body bytes at fixed offsets change and the length stays. If so,
    /// `writeInPlace` then writes them into a buffer holding the same bytes.
    /// False when `apply` must rebuild it or the row must be encoded whole.
    ///
    /// - Throws: `.corrupt` for a malformed record header or body.
    mutating func preparesInPlace(_ buf: UnsafeRawBufferPointer) throws(KuraError) -> Bool {
        try read(buf) == true
    }

    /// Writes the changes into `record`, the bytes of the record
    /// `preparesInPlace` last returned true for (same length).
    func writeInPlace(_ record: UnsafeMutableRawBufferPointer) {
        precondition(record.count == recordLength, "an in-place patch written to a record of another length")
        writeBodies(record)
    }

    /// Walks the header of the record in `buf` into `types` and `offsets`:
    /// nil if it stores fewer values than `width`, else whether every changed
    /// value keeps its serial type.
    private mutating func read(_ buf: UnsafeRawBufferPointer) throws(KuraError) -> Bool? {
        types.removeAll(keepingCapacity: true)
        offsets.removeAll(keepingCapacity: true)
        recordLength = buf.count
        var header = try RecordHeader(buf)
        var sameTypes = true
        var c = 0
        while let (t, at) = try header.next() {
            if c < changes.count && changes[c].position == types.count {
                if changes[c].type != t { sameTypes = false }
                c += 1
            }
            types.append(t)
            offsets.append(at)
        }
        guard types.count >= width else { return nil }
        return sameTypes
    }

    /// The changed values' bodies, at their offsets in the record read last
    /// (`read` found every changed type unchanged: each body fits where the
    /// old one was, inside the record, as `RecordHeader` checked).
    private func writeBodies(_ o: UnsafeMutableRawBufferPointer) {
        // A record has at least its header byte, so the buffer has a base address.
        for ch in changes { Self.writeBody(ch.value, to: o.baseAddress! + offsets[ch.position]) }
    }

    /// The record rebuilt from the old bodies and the new values (some serial
    /// type changed, so the header and the bodies' offsets move).
    private func rebuilt(_ buf: UnsafeRawBufferPointer) -> [UInt8] {
        var newTypes = types
        for ch in changes { newTypes[ch.position] = ch.type }
        var headerSize = 0
        var bodySize = 0
        for t in newTypes {
            headerSize += Varint.size(t)
            // Every type here is known: the old ones passed `RecordHeader`, the
            // new ones came from `serialType`.
            bodySize += RecordCodec.bodyLength(t).unsafelyUnwrapped
        }
        var out: [UInt8] = []
        out.reserveCapacity(Varint.size(UInt64(headerSize)) + headerSize + bodySize)
        Varint.append(UInt64(headerSize), to: &out)
        for t in newTypes { Varint.append(t, to: &out) }
        var c = 0
        for i in types.indices {
            if c < changes.count && changes[c].position == i {
                let n = RecordCodec.bodyLength(changes[c].type).unsafelyUnwrapped
                let start = out.count
                out.append(contentsOf: repeatElement(0, count: n))
                out.withUnsafeMutableBytes { o in Self.writeBody(changes[c].value, to: o.baseAddress! + start) }
                c += 1
            } else {
                let n = RecordCodec.bodyLength(types[i]).unsafelyUnwrapped
                out.append(contentsOf: UnsafeRawBufferPointer(rebasing: buf[offsets[i]..<(offsets[i] + n)]))
            }
        }
        return out
    }

    /// Writes the body of `value` (as `RecordCodec.encode` lays it out) at `p`,
    /// which has room for `bodyLength(serialType(value))` bytes.
    private static func writeBody(_ value: Value, to p: UnsafeMutableRawPointer) {
        switch value {
        case .null, .bool: break
        case .integer(let i):
            switch RecordCodec.serialType(value) {
            case 5: p.storeBytes(of: UInt8(bitPattern: Int8(i)), as: UInt8.self)
            case 6: p.storeBytes(of: Int16(i).littleEndian, toByteOffset: 0, as: Int16.self)
            case 7: p.storeBytes(of: Int32(i).littleEndian, toByteOffset: 0, as: Int32.self)
            case 8: p.storeBytes(of: i.littleEndian, toByteOffset: 0, as: Int64.self)
            default: break
            }
        case .double(let d): p.storeBytes(of: d.bitPattern.littleEndian, toByteOffset: 0, as: UInt64.self)
        case .blob(let b): b.withUnsafeBytes { if $0.count > 0 { p.copyMemory(from: $0.baseAddress!, byteCount: $0.count) } }
        case .text(let s):
            var s = s
            s.withUTF8 { if $0.count > 0 { p.copyMemory(from: $0.baseAddress!, byteCount: $0.count) } }
        }
    }
}
