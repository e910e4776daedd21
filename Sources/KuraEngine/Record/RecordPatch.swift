// RecordPatch: a record with some of its values replaced, made from the old
// record's bytes without decoding the others (FORMAT.md, "Records").
//
// An update that sets a few columns (`WriteTransaction.update(_:where:set:)`)
// used to decode every value of each row (a String per text column), put the
// new values in, re-validate the whole row and encode it again. A patch copies
// the unchanged values' bytes as they stand: when every replaced value keeps
// its serial type (a double of the same width, or an integer of the same
// width) the output is the old record with those bodies overwritten;
// otherwise the header and body are rebuilt from the old pieces and the new
// values. The bytes produced are exactly what `RecordCodec.encode` gives for
// the old values with the changes put in (with the same `compactDoubles`), so
// a patched record and an encoded one cannot be told apart.
//
// In place (`preparesInPlace`/`writeInPlace`): a record whose patched form is
// no longer than it (the same types, or a format-9 double that becomes an
// integral one and shrinks from 8 body bytes to 1 or 4) is written where it
// lies in its leaf (BTree+InPlace.swift). One whose types change is rebuilt
// there from a copy of its old bytes on the stack (no allocation per row).
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
    /// The changes, by ascending position: positions, serial types and
    /// values apart, so that the per-row walks read an integer without
    /// copying (retaining) a value.
    private let changePositions: [Int]
    private let changeTypes: [UInt64]
    private let changeValues: [Value]
    /// One past the highest changed position.
    private let width: Int
    /// Serial types and body offsets of the record being patched (reused).
    private var types: [UInt64] = []
    private var offsets: [Int] = []
    /// The length of the record read last.
    private var recordLength = 0
    /// The length of the record read last with the changes put in, and the
    /// size of its serial types (what its header's size varint says), as
    /// `read` measured them.
    private var patchedLength = 0
    private var patchedHeaderSize = 0
    /// Whether a changed value of the record read last changes its serial type.
    private var typesChange = false

    /// `changes` are (column position, validated value) pairs with distinct
    /// positions; `compactDoubles` (a store of format 9 or later) gives their
    /// doubles the serial types `RecordCodec.encode` would.
    init(_ changes: [(position: Int, value: Value)], compactDoubles: Bool) {
        let sorted = changes.sorted { $0.position < $1.position }
        for k in sorted.indices.dropFirst() {
            precondition(sorted[k - 1].position != sorted[k].position, "a record patch sets column \(sorted[k].position) twice")
        }
        changePositions = sorted.map(\.position)
        changeTypes = sorted.map { RecordCodec.serialType($0.value, compactDoubles: compactDoubles) }
        changeValues = sorted.map(\.value)
        width = (sorted.last?.position ?? -1) + 1
    }

    /// Positions the patch sets.
    var positions: [Int] { changePositions }

    /// `record` with the changes put in; nil if it stores fewer values than
    /// the highest changed position needs (the caller encodes the row whole).
    ///
    /// - Throws: `.corrupt` for a malformed record header or body.
    mutating func apply(to record: [UInt8]) throws(KuraError) -> [UInt8]? {
        try record.withBytes { buf throws(KuraError) -> [UInt8]? in
            guard try read(buf) else { return nil }
            if !typesChange {
                var out = record
                out.withUnsafeMutableBytes { o in writeBodies(o) }
                return out
            }
            // `buf` holds the record `read` walked; the new one has
            // `patchedLength` >= 1 bytes (a record has its header size).
            return [UInt8](unsafeUninitializedCapacity: patchedLength) { o, count in
                rebuild(from: buf.baseAddress!, to: UnsafeMutableRawPointer(o.baseAddress!))
                count = patchedLength
            }
        }
    }

    /// The length of the record in `buf` (where it lies, e.g. in its leaf)
    /// with the changes put in, when that is no longer than it: every
    /// replaced value keeps its serial type (only body bytes at fixed offsets
    /// change and the length stays), or a type changes and the rebuilt
    /// record is no longer. `writeInPlace` then writes it over the old one.
    /// Nil when it would grow (the caller makes room for it) or the row must
    /// be encoded whole.
    ///
    /// - Throws: `.corrupt` for a malformed record header or body.
    mutating func preparesInPlace(_ buf: UnsafeRawBufferPointer) throws(KuraError) -> Int? {
        guard try read(buf), patchedLength <= buf.count else { return nil }
        return patchedLength
    }

    /// Writes the record `preparesInPlace` last returned a length for over
    /// `record`, which holds the bytes it read (the old length): the new
    /// bodies at their offsets, or, when a type changes, the rebuilt record
    /// from `record`'s start (from a copy of the old bytes on the stack; the
    /// bytes past the new length are left as they were).
    func writeInPlace(_ record: UnsafeMutableRawBufferPointer) {
        precondition(record.count == recordLength, "an in-place patch written to a record of another length")
        if !typesChange {
            writeBodies(record)
            return
        }
        // A record has at least its header byte, so it has a base address.
        let p = record.baseAddress!
        withUnsafeTemporaryAllocation(byteCount: recordLength, alignment: 8) { old in
            old.baseAddress!.copyMemory(from: p, byteCount: recordLength)
            rebuild(from: UnsafeRawPointer(old.baseAddress!), to: p)
        }
    }

    /// Walks the header of the record in `buf` into `types` and `offsets`,
    /// and sets `typesChange`, `patchedLength` and `patchedHeaderSize`: false if it stores fewer
    /// values than `width`.
    private mutating func read(_ buf: UnsafeRawBufferPointer) throws(KuraError) -> Bool {
        types.removeAll(keepingCapacity: true)
        offsets.removeAll(keepingCapacity: true)
        recordLength = buf.count
        var header = try RecordHeader(buf)
        typesChange = false
        // Header and body sizes of the record with the changes put in.
        var headerSize = 0
        var bodySize = 0
        var c = 0
        while let (t, at) = try header.next() {
            var nt = t
            if c < changePositions.count && changePositions[c] == types.count {
                nt = changeTypes[c]
                if nt != t { typesChange = true }
                c += 1
            }
            headerSize += Varint.size(nt)
            // Known types: the old ones passed `RecordHeader`, the new ones
            // came from `serialType`.
            bodySize += RecordCodec.bodyLength(nt).unsafelyUnwrapped
            types.append(t)
            offsets.append(at)
        }
        guard types.count >= width else { return false }
        patchedHeaderSize = headerSize
        patchedLength = typesChange ? Varint.size(UInt64(headerSize)) + headerSize + bodySize : buf.count
        return true
    }

    /// The changed values' bodies, at their offsets in the record read last
    /// (`read` found every changed type unchanged: each body fits where the
    /// old one was, inside the record, as `RecordHeader` checked).
    private func writeBodies(_ o: UnsafeMutableRawBufferPointer) {
        // A record has at least its header byte, so the buffer has a base address.
        for c in changePositions.indices {
            Self.writeBody(changeValues[c], type: changeTypes[c], to: o.baseAddress! + offsets[changePositions[c]])
        }
    }

    /// The serial type value `i` of the record read last has once patched.
    @inline(__always)
    private func newType(_ i: Int, _ c: inout Int) -> UInt64 {
        guard c < changePositions.count && changePositions[c] == i else { return types[i] }
        c += 1
        return changeTypes[c - 1]
    }

    /// Writes the record read last, whose bytes are at `old`, rebuilt from
    /// its old bodies and the new values (`patchedLength` bytes) at `p`,
    /// which does not overlap `old`.
    private func rebuild(from old: UnsafeRawPointer, to p: UnsafeMutableRawPointer) {
        var at = Varint.write(UInt64(patchedHeaderSize), to: p)
        var c = 0
        for i in types.indices { at += Varint.write(newType(i, &c), to: p + at) }
        c = 0
        for i in types.indices {
            if c < changePositions.count && changePositions[c] == i {
                Self.writeBody(changeValues[c], type: changeTypes[c], to: p + at)
                at += RecordCodec.bodyLength(changeTypes[c]).unsafelyUnwrapped
                c += 1
            } else {
                // `RecordHeader` bounded every old body inside the record.
                let n = RecordCodec.bodyLength(types[i]).unsafelyUnwrapped
                if n > 0 { (p + at).copyMemory(from: old + offsets[i], byteCount: n) }
                at += n
            }
        }
        precondition(at == patchedLength, "a rebuilt record of another length than measured")
    }

    /// Writes the body of `value` (as `RecordCodec.encode` lays it out) at `p`,
    /// which has room for `bodyLength(type)` bytes; `type` is the serial type
    /// `serialType` gave `value`.
    private static func writeBody(_ value: Value, type: UInt64, to p: UnsafeMutableRawPointer) {
        switch value {
        case .null, .bool: break
        case .integer(let i):
            switch type {
            case 5: p.storeBytes(of: UInt8(bitPattern: Int8(i)), as: UInt8.self)
            case 6: p.storeBytes(of: Int16(i).littleEndian, toByteOffset: 0, as: Int16.self)
            case 7: p.storeBytes(of: Int32(i).littleEndian, toByteOffset: 0, as: Int32.self)
            case 8: p.storeBytes(of: i.littleEndian, toByteOffset: 0, as: Int64.self)
            default: break
            }
        case .double(let d): _ = RecordCodec.writeDouble(d, type: type, to: p)
        case .blob(let b): b.withUnsafeBytes { if $0.count > 0 { p.copyMemory(from: $0.baseAddress!, byteCount: $0.count) } }
        case .text(let s):
            var s = s
            s.withUTF8 { if $0.count > 0 { p.copyMemory(from: $0.baseAddress!, byteCount: $0.count) } }
        }
    }
}
