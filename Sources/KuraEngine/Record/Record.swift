// Record: the self-describing encoding of one row's values (FORMAT.md, "Records").
//
//     record      = headerSize:varint  serialType:varint*  body
//     headerSize  = number of bytes of the serialType varints (not counting itself)
//
// Serial types (the body of each value follows in column order, no padding):
//
//     0  null              0 bytes
//     1  false             0 bytes
//     2  true              0 bytes
//     3  integer 0         0 bytes
//     4  integer 1         0 bytes
//     5  integer, 1 byte   two's complement, little-endian, sign-extended on read
//     6  integer, 2 bytes
//     7  integer, 4 bytes
//     8  integer, 8 bytes
//     9  double, 8 bytes   IEEE 754 binary64, little-endian
//     10 double, 1 byte    (format 9) an integral double in -128...127,
//                          two's complement
//     11 double, 4 bytes   (format 9) an integral double in the Int32
//                          range, little-endian two's complement
//     n >= 12, even        blob of (n - 12) / 2 bytes
//     n >= 13, odd         UTF-8 text of (n - 13) / 2 bytes
//
// Types 10 and 11 (compact doubles) exist from format 9 on: a writer uses them
// only in a store of format 9 or later (`compactDoubles`), and only for a
// double that converts to an Int32 and back to the same bit pattern (never
// -0.0, NaN, an infinity or a fraction). They decode to `.double`, so nothing
// above this file tells them from type 9. Every decoder accepts them whatever
// the store's format (the integrity check reports them in a store below 9).
//
// Invariants: a record has as many serial types as it has values; a record with
// fewer values than its table has columns reads the missing ones as null (that is
// how adding a column rewrites nothing). Decoders are bounds-checked: a header that
// runs past the record, a body shorter than its types promise, an unknown type or
// invalid UTF-8 all throw `KuraError.corrupt`.

/// Encodes and decodes records. Decoding works on borrowed bytes so that a scan
/// touches only the columns it needs.
public enum RecordCodec {
    /// Serial type of `value` (see the table above); a double takes type 10
    /// or 11 when `compactDoubles` (a store of format 9 or later) and
    /// `compactDoubleType` allows it, else 9.
    @inline(__always)
    static func serialType(_ value: Value, compactDoubles: Bool) -> UInt64 {
        switch value {
        case .null: return 0
        case .bool(let b): return b ? 2 : 1
        case .integer(let v):
            if v == 0 { return 3 }
            if v == 1 { return 4 }
            if v >= -128 && v <= 127 { return 5 }
            if v >= -32768 && v <= 32767 { return 6 }
            if v >= -2147483648 && v <= 2147483647 { return 7 }
            return 8
        case .double(let d): return compactDoubles ? compactDoubleType(d) : 9
        case .blob(let b): return 12 + 2 * UInt64(b.count)
        case .text(let s): return 13 + 2 * UInt64(s.utf8.count)
        }
    }

    /// The format-9 serial type of double `d`: 10 when it is an integer in
    /// -128...127, 11 when it is another Int32, else 9. Only a value that
    /// comes back bit for bit from its integer takes 10 or 11: -0.0 (whose
    /// integer reads back as +0.0), NaN and the infinities (outside the range
    /// test) and fractions (truncated) keep type 9.
    @inline(__always)
    static func compactDoubleType(_ d: Double) -> UInt64 {
        // The range test is false for NaN; inside it the conversion cannot
        // trap (it is the conversion's own test, which the optimizer then
        // drops; a fraction just outside the Int32 range truncates into it
        // and fails the bit test below).
        guard d > -2147483649.0 && d < 2147483648.0 else { return 9 }
        let i = Int32(d)
        guard Double(i).bitPattern == d.bitPattern else { return 9 }
        return i >= -128 && i <= 127 ? 10 : 11
    }

    /// Body length of a serial type, or nil for a blob or text type longer
    /// than a body may be.
    @inline(__always)
    static func bodyLength(_ type: UInt64) -> Int? {
        switch type {
        case 0...4: return 0
        case 5: return 1
        case 6: return 2
        case 7: return 4
        case 8, 9: return 8
        case 10: return 1
        case 11: return 4
        default:
            let n = (type - 12) / 2
            return n > UInt64(Int32.max) ? nil : Int(n)
        }
    }

    /// The largest record `encode` writes into a temporary buffer and copies.
    static let copiedRecordLimit = 1024

    /// Encodes `values` as a record, every double in 8 bytes (serial type 9),
    /// which stores of every format read. (Rows written by a transaction of a
    /// store of format 9 or later store integral doubles shorter; any build
    /// that reads such a store decodes both forms alike.)
    public static func encode(_ values: [Value]) -> [UInt8] {
        encode(values, compactDoubles: false)
    }

    /// Encodes `values` as a record; `compactDoubles` (only for a store of
    /// format 9 or later) writes integral doubles as types 10 and 11.
    static func encode(_ values: [Value], compactDoubles: Bool) -> [UInt8] {
        let n = values.count
        return withUnsafeTemporaryAllocation(of: UInt64.self, capacity: max(n, 1)) { types in
            let size = measure(values, types, compactDoubles: compactDoubles)
            // A small record is written into a temporary buffer and copied
            // into an array made from it: on Linux,
            // `[UInt8](unsafeUninitializedCapacity:)` calls the standard
            // library's unspecialized buffer allocation, which looks the
            // array's type metadata up by hash on every call (a few hundred
            // instructions per record, about 4% of an object insert), while
            // `Array(UnsafeRawBufferPointer)` is specialized for UInt8 and
            // finds the metadata in a cache. A large record (a blob) is
            // written in place, sparing the copy.
            if size.total <= Self.copiedRecordLimit {
                return withUnsafeTemporaryAllocation(byteCount: size.total, alignment: 8) { buf in
                    // `buf` has `size.total` >= 1 bytes (a record has at least its header's size).
                    write(values, types, headerSize: size.header, to: buf.baseAddress!)
                    return Array(UnsafeRawBufferPointer(buf))
                }
            }
            return [UInt8](unsafeUninitializedCapacity: size.total) { buf, count in
                // `buf` has room for `size.total` bytes (its capacity).
                write(values, types, headerSize: size.header, to: UnsafeMutableRawPointer(buf.baseAddress!))
                count = size.total
            }
        }
    }

    /// Makes `out` the record of `values` (as `encode(_:compactDoubles:)`),
    /// reusing its storage: a caller that keeps `out` uniquely referenced
    /// between rows (a table handle's `recordBuffer`) encodes without an
    /// allocation once the buffer has grown to its largest record.
    static func encode(_ values: [Value], compactDoubles: Bool, reusing out: inout [UInt8]) {
        let n = values.count
        withUnsafeTemporaryAllocation(of: UInt64.self, capacity: max(n, 1)) { types in
            let size = measure(values, types, compactDoubles: compactDoubles)
            let have = out.count
            if have > size.total {
                out.removeLast(have - size.total)
            } else if have < size.total {
                out.append(contentsOf: repeatElement(0, count: size.total - have))
            }
            out.withUnsafeMutableBytes { buf in
                // `buf` holds exactly `size.total` >= 1 bytes (resized just above),
                // and `write` fills every one of them.
                write(values, types, headerSize: size.header, to: buf.baseAddress!)
            }
        }
    }

    /// Appends the encoding of `values` to `out`, every double in 8 bytes (as
    /// `encode(_:)`).
    public static func encode(_ values: [Value], into out: inout [UInt8]) {
        let n = values.count
        withUnsafeTemporaryAllocation(of: UInt64.self, capacity: max(n, 1)) { types in
            let size = measure(values, types, compactDoubles: false)
            let start = out.count
            out.append(contentsOf: repeatElement(0, count: size.total))
            out.withUnsafeMutableBytes { buf in
                // `buf` holds `start + size.total` bytes: the record's room was just appended.
                write(values, types, headerSize: size.header, to: buf.baseAddress! + start)
            }
        }
    }

    /// Each value's serial type into `types`, the header's size (the serial
    /// types' varints) and the whole record's.
    @inline(__always)
    private static func measure(_ values: [Value], _ types: UnsafeMutableBufferPointer<UInt64>, compactDoubles: Bool) -> (header: Int, total: Int) {
        var headerSize = 0
        var bodySize = 0
        for i in values.indices {
            let v = values[i]
            let t = serialType(v, compactDoubles: compactDoubles)
            types[i] = t
            headerSize += Varint.size(t)
            switch v {
            case .null, .bool: break
            case .integer: bodySize += t <= 4 ? 0 : t == 5 ? 1 : t == 6 ? 2 : t == 7 ? 4 : 8
            // Types 9, 10, 11: 8, 1, 4 bytes (a table in one constant).
            case .double: bodySize += Int(truncatingIfNeeded: 0x04_01_08 &>> ((t &- 9) &* 8)) & 0xFF
            case .blob(let b): bodySize += b.count
            case .text(let s): bodySize += s.utf8.count
            }
        }
        return (headerSize, Varint.size(UInt64(headerSize)) + headerSize + bodySize)
    }

    /// Writes the record of `values` (serial types `types`, header of
    /// `headerSize` bytes) at `p`, which has room for it (`measure`).
    @inline(__always)
    private static func write(_ values: [Value], _ types: UnsafeMutableBufferPointer<UInt64>, headerSize: Int, to p: UnsafeMutableRawPointer) {
        var at = Varint.write(UInt64(headerSize), to: p)
        for i in values.indices { at += Varint.write(types[i], to: p + at) }
        for i in values.indices {
            switch values[i] {
            case .null, .bool: break
            case .integer(let x):
                switch types[i] {
                case 5: p.storeBytes(of: Int8(truncatingIfNeeded: x), toByteOffset: at, as: Int8.self); at += 1
                case 6: p.storeBytes(of: Int16(truncatingIfNeeded: x).littleEndian, toByteOffset: at, as: Int16.self); at += 2
                case 7: p.storeBytes(of: Int32(truncatingIfNeeded: x).littleEndian, toByteOffset: at, as: Int32.self); at += 4
                case 8: p.storeBytes(of: x.littleEndian, toByteOffset: at, as: Int64.self); at += 8
                default: break
                }
            case .double(let d):
                at += writeDouble(d, type: types[i], to: p + at)
            case .blob(let b):
                b.withUnsafeBytes { src in
                    if let base = src.baseAddress, src.count > 0 { (p + at).copyMemory(from: base, byteCount: src.count) }
                }
                at += b.count
            case .text(let s):
                var s = s
                s.withUTF8 { src in
                    if let base = src.baseAddress, src.count > 0 { (p + at).copyMemory(from: base, byteCount: src.count) }
                }
                at += s.utf8.count
            }
        }
    }

    /// Writes the body of double `d` in serial type `type` (9, or the 10 or
    /// 11 `compactDoubleType` chose for it) at `p`; returns its length.
    @inline(__always)
    static func writeDouble(_ d: Double, type: UInt64, to p: UnsafeMutableRawPointer) -> Int {
        switch type {
        case 10:
            // `compactDoubleType` chose 10: d is an integer in -128...127.
            p.storeBytes(of: Int8(d), as: Int8.self)
            return 1
        case 11:
            // `compactDoubleType` chose 11: d is an integer in the Int32 range.
            p.storeBytes(of: Int32(d).littleEndian, toByteOffset: 0, as: Int32.self)
            return 4
        default:
            p.storeBytes(of: d.bitPattern.littleEndian, toByteOffset: 0, as: UInt64.self)
            return 8
        }
    }

    /// Decodes every value of a record.
    public static func decode(_ bytes: [UInt8]) throws(KuraError) -> [Value] {
        try bytes.withBytes { buf throws(KuraError) in try decode(buf) }
    }

    /// Decodes every value of a record held in `buf`.
    ///
    /// The header is checked whole first, with `RecordView`'s checks and
    /// messages, then each value is decoded straight from the bytes (no
    /// `RecordView` arrays: this runs for every row an application reads).
    public static func decode(_ buf: UnsafeRawBufferPointer) throws(KuraError) -> [Value] {
        var header = try RecordHeader(buf)
        var out: [Value] = []
        // Each serial type takes at least one header byte: the header's size
        // bounds the count (exact when every type fits one byte: values
        // other than text or blobs over 57 bytes), so one walk suffices.
        out.reserveCapacity(header.typeBytes)
        while let (t, at) = try header.next() {
            out.append(try decodeBody(t, header.base + at, column: out.count))
        }
        return out
    }
}

/// A borrowed, lazily decoded view of one record's bytes.
///
/// Lifetime: valid only while the bytes it was made from are; inside a cursor or
/// transaction callback, do not let it escape. ``value(at:)`` decodes one column;
/// columns past the end of the record read as `.null`.
public struct RecordView {
    let base: UnsafeRawPointer?
    let length: Int
    /// Offsets of each value's body, and its serial type, computed on first use.
    private(set) var types: [UInt64] = []
    private(set) var offsets: [Int] = []

    /// Parses the header of the record in `buf`. Throws `corrupt` if it is malformed.
    public init(_ buf: UnsafeRawBufferPointer) throws(KuraError) {
        base = buf.baseAddress
        length = buf.count
        var header = try RecordHeader(buf)
        while let (t, at) = try header.next() {
            types.append(t)
            offsets.append(at)
        }
    }

    /// Number of values stored in the record.
    public var count: Int { types.count }

    /// Decodes value `i`; values past the end of the record are `.null`.
    public func value(at i: Int) throws(KuraError) -> Value {
        guard i < types.count, let p = base else { return .null }
        return try RecordCodec.decodeBody(types[i], p + offsets[i], column: i)
    }

    /// The raw UTF-8 bytes of value `i` if it is text, without building a String.
    public func textBytes(at i: Int) -> UnsafeRawBufferPointer? {
        guard i < types.count, let p = base else { return nil }
        let t = types[i]
        guard t >= 13, t & 1 == 1 else { return nil }
        return UnsafeRawBufferPointer(start: p + offsets[i], count: Int((t - 13) / 2))
    }

    /// Value `i` as an integer without allocation, if it is one.
    public func integer(at i: Int) -> Int64? {
        guard i < types.count, types[i] >= 3, types[i] <= 8 else { return nil }
        // Cannot fail: `decodeBody` throws only for text (invalid UTF-8), and
        // serial types 3...8 are integers whose bytes `init` bounds-checked.
        return (try? value(at: i))?.integerValue
    }
}

extension String {
    /// Strict UTF-8 validation of borrowed bytes.
    init?(validating bytes: UnsafeRawBufferPointer, as _: UTF8.Type) {
        // ASCII bytes are valid UTF-8 as they stand: one pass, no comparison.
        // Built by copying into the new string's storage, which for up to 15
        // bytes (a small string) checks ASCII-ness on its 16 bytes at once
        // instead of running the full UTF-8 validation `String(decoding:)` does.
        if bytes.isASCII {
            self = String(unsafeUninitializedCapacity: bytes.count) { buffer in
                UnsafeMutableRawBufferPointer(buffer).copyMemory(from: bytes)
                return bytes.count
            }
            return
        }
        let s = String(decoding: bytes, as: UTF8.self)
        // String(decoding:) repairs invalid sequences with U+FFFD; a length
        // mismatch or a replacement character that was not in the input means the
        // bytes were invalid.
        if s.utf8.count != bytes.count || !s.utf8.elementsEqual(bytes) { return nil }
        self = s
    }
}

extension UnsafeRawBufferPointer {
    /// Whether every byte is below 0x80 (eight bytes at a time).
    @inline(__always)
    var isASCII: Bool {
        guard let p = baseAddress else { return true }
        var i = 0
        while i + 8 <= count {
            if p.loadUnaligned(fromByteOffset: i, as: UInt64.self) & 0x8080_8080_8080_8080 != 0 { return false }
            i += 8
        }
        while i < count {
            if p.load(fromByteOffset: i, as: UInt8.self) >= 0x80 { return false }
            i += 1
        }
        return true
    }
}

extension RecordCodec {
    /// Decodes only value `index` of the record in `buf`, walking the header
    /// without allocating. Values past the end of the record are `.null`.
    ///
    /// - Throws: `.corrupt` for a malformed header or body.
    public static func value(at index: Int, in buf: UnsafeRawBufferPointer) throws(KuraError) -> Value {
        var header = try RecordHeader(buf)
        var i = 0
        while let (t, at) = try header.next() {
            if i == index { return try decodeBody(t, header.base + at, column: i) }
            i += 1
        }
        return .null
    }

    /// Number of values in the record in `buf`.
    public static func count(in buf: UnsafeRawBufferPointer) throws(KuraError) -> Int {
        guard let p = buf.baseAddress, buf.count > 0,
              let (hsize, hlen) = Varint.read(p, 0, buf.count), hsize <= UInt64(buf.count - hlen) else {
            throw KuraError(.corrupt, "record header size runs past the record (\(buf.count) bytes)")
        }
        var pos = hlen
        var n = 0
        while pos < hlen + Int(hsize) {
            guard let (_, len) = Varint.read(p, pos, hlen + Int(hsize)) else {
                throw KuraError(.corrupt, "record header has a malformed serial type at byte \(pos)")
            }
            pos += len
            n += 1
        }
        return n
    }

    @inline(__always)
    static func decodeBody(_ t: UInt64, _ p: UnsafeRawPointer, column i: Int) throws(KuraError) -> Value {
        switch t {
        case 0: return .null
        case 1: return .bool(false)
        case 2: return .bool(true)
        case 3: return .integer(0)
        case 4: return .integer(1)
        case 5: return .integer(Int64(p.load(as: Int8.self)))
        case 6: return .integer(Int64(Int16(littleEndian: p.loadUnaligned(as: Int16.self))))
        case 7: return .integer(Int64(Int32(littleEndian: p.loadUnaligned(as: Int32.self))))
        case 8: return .integer(Int64(littleEndian: p.loadUnaligned(as: Int64.self)))
        case 9: return .double(Double(bitPattern: UInt64(littleEndian: p.loadUnaligned(as: UInt64.self))))
        case 10: return .double(Double(p.load(as: Int8.self)))
        case 11: return .double(Double(Int32(littleEndian: p.loadUnaligned(as: Int32.self))))
        default:
            let n = Int((t - 12) / 2)
            let bytes = UnsafeRawBufferPointer(start: p, count: n)
            if t & 1 == 0 { return .blob(Array(bytes)) }
            guard let s = String(validating: bytes, as: UTF8.self) else {
                throw KuraError(.corrupt, "record value \(i) is text that is not valid UTF-8")
            }
            return .text(s)
        }
    }
}
