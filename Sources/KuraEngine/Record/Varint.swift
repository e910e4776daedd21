// Varint: unsigned LEB128, the variable-length integer used throughout FORMAT.md.
//
// Seven bits per byte, least-significant group first, high bit set on every byte
// but the last. A UInt64 takes at most 10 bytes. Decoding is bounds-checked and
// rejects encodings longer than 10 bytes or that overflow 64 bits.

enum Varint {
    /// Number of bytes `value` takes.
    @inline(__always)
    static func size(_ value: UInt64) -> Int {
        var v = value
        var n = 1
        while v >= 0x80 { v >>= 7; n += 1 }
        return n
    }

    /// Appends the encoding of `value` to `out`.
    @inline(__always)
    static func append(_ value: UInt64, to out: inout [UInt8]) {
        var v = value
        while v >= 0x80 {
            out.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        out.append(UInt8(v))
    }

    /// Writes `value` at `p` and returns the number of bytes written. The caller
    /// guarantees `size(value)` bytes of room.
    @inline(__always)
    static func write(_ value: UInt64, to p: UnsafeMutableRawPointer) -> Int {
        var v = value
        var i = 0
        while v >= 0x80 {
            p.storeBytes(of: UInt8(truncatingIfNeeded: v) | 0x80, toByteOffset: i, as: UInt8.self)
            v >>= 7
            i += 1
        }
        p.storeBytes(of: UInt8(v), toByteOffset: i, as: UInt8.self)
        return i + 1
    }

    /// Reads a varint at `p[offset..<end]`. Returns nil if it runs past `end`, is
    /// longer than 10 bytes, or overflows 64 bits.
    @inline(__always)
    static func read(_ p: UnsafeRawPointer, _ offset: Int, _ end: Int) -> (value: UInt64, length: Int)? {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        var i = offset
        while i < end {
            let b = p.load(fromByteOffset: i, as: UInt8.self)
            i += 1
            if shift == 63 && b > 1 { return nil }
            result |= UInt64(b & 0x7F) << shift
            if b < 0x80 { return (result, i - offset) }
            shift += 7
            if shift > 63 { return nil }
        }
        return nil
    }
}
