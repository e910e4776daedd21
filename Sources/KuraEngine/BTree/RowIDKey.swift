// RowIDKey: the order-preserving byte encoding of a signed 64-bit integer, used as
// the key of table trees and as the last component of every index key (FORMAT.md,
// "Row-ID keys").
//
//     n >= 0:  byte 0x80 + k, then the k big-endian bytes of n (k = 0...8 is the
//              fewest bytes that hold n; 0 is the single byte 0x80)
//     n <  0:  byte 0x7F - k, then the low k bytes of n's two's complement,
//              big-endian, where k is the fewest bytes that hold ~n (-1 is the
//              single byte 0x7F)
//
// Unsigned byte-wise comparison of encodings equals signed comparison of the
// integers, and the first byte gives the length, so encodings concatenate.

enum RowIDKey {
    static func byteCount(_ m: UInt64) -> Int { m == 0 ? 0 : (64 - m.leadingZeroBitCount + 7) / 8 }

    /// Number of bytes the encoding of `n` takes.
    static func size(_ n: Int64) -> Int {
        1 + byteCount(n >= 0 ? UInt64(n) : UInt64(~n))
    }

    static func append(_ n: Int64, to out: inout [UInt8]) {
        if n >= 0 {
            let m = UInt64(n)
            let k = byteCount(m)
            out.append(0x80 + UInt8(k))
            var s = k
            while s > 0 { s -= 1; out.append(UInt8(truncatingIfNeeded: m >> (8 * UInt64(s)))) }
        } else {
            let m = UInt64(~n)
            let k = byteCount(m)
            out.append(0x7F - UInt8(k))
            let v = UInt64(bitPattern: n)
            var s = k
            while s > 0 { s -= 1; out.append(UInt8(truncatingIfNeeded: v >> (8 * UInt64(s)))) }
        }
    }

    /// Makes `out` the encoding of `n` (as `append` to an empty array does),
    /// writing over its bytes in place when it already has the encoding's
    /// length (a run of row IDs mostly has): no `removeAll` and appends,
    /// which went through `replaceSubrange` and a capacity check per byte.
    @inline(__always)
    static func write(_ n: Int64, over out: inout [UInt8]) {
        let k = byteCount(n >= 0 ? UInt64(n) : UInt64(~n))
        if out.count != k + 1 { out = [UInt8](repeating: 0, count: k + 1) }
        // Both signs store the low `k` bytes of the two's-complement pattern
        // (for n >= 0 that is `n` itself), most significant first.
        let v = UInt64(bitPattern: n)
        out.withUnsafeMutableBufferPointer { b in
            b[0] = n >= 0 ? 0x80 + UInt8(k) : 0x7F - UInt8(k)
            var s = 0
            while s < k {
                b[1 + s] = UInt8(truncatingIfNeeded: v >> (8 * UInt64(k - 1 - s)))
                s += 1
            }
        }
    }

    static func encode(_ n: Int64) -> [UInt8] {
        // Built on the stack and copied into an array of the exact size:
        // `Array(UnsafeRawBufferPointer)` is specialized for bytes, while
        // growing an empty array (`reserveCapacity`, `append`) goes through
        // the standard library's unspecialized allocation, which looks the
        // array's metadata up on every call (Linux).
        var storage: (UInt64, UInt64) = (0, 0)
        return withUnsafeMutableBytes(of: &storage) { raw in
            Array(UnsafeRawBufferPointer(rebasing: raw[0..<write(n, to: raw)]))
        }
    }

    /// Writes the encoding of `n` at the start of `raw` (at least 9 bytes);
    /// returns its length.
    @inline(__always)
    private static func write(_ n: Int64, to raw: UnsafeMutableRawBufferPointer) -> Int {
        let m = n >= 0 ? UInt64(n) : UInt64(~n)
        let k = byteCount(m)
        raw[0] = n >= 0 ? 0x80 + UInt8(k) : 0x7F - UInt8(k)
        let v = UInt64(bitPattern: n)
        var s = 0
        while s < k {
            raw[1 + s] = UInt8(truncatingIfNeeded: v >> (8 * UInt64(k - 1 - s)))
            s += 1
        }
        return 1 + k
    }

    /// `body` applied to the encoding of `n`, built on the stack (no array).
    @inline(__always)
    static func withEncoded<T>(_ n: Int64, _ body: (UnsafeRawBufferPointer) throws(KuraError) -> T) throws(KuraError) -> T {
        var storage: (UInt64, UInt64) = (0, 0)
        return try withUnsafeMutableBytes(of: &storage) { raw in
            let length = write(n, to: raw)
            return Result { () throws(KuraError) in try body(UnsafeRawBufferPointer(rebasing: raw[0..<length])) }
        }.get()
    }

    /// The length of an encoding whose first byte is `b`, which must be a
    /// first byte of some encoding (0x77 ... 0x88; `isFirstByte`): 1 ... 9.
    @inline(__always)
    static func length(firstByte b: UInt8) -> Int {
        // b >= 0x80: (b & 0x7F) + 1; else (~b & 0x7F) + 1 = 0x80 - b. The
        // mask is 0 or 0xFF, so no branch.
        Int((b ^ ((b >> 7) &- 1)) & 0x7F) + 1
    }

    /// Whether `b` can start an encoding (0x77 ... 0x88).
    @inline(__always)
    static func isFirstByte(_ b: UInt8) -> Bool { b >= 0x77 && b <= 0x88 }

    /// Decodes an encoding at `p[offset..<end]`; nil if malformed.
    static func decode(_ p: UnsafeRawPointer, _ offset: Int, _ end: Int) -> (value: Int64, length: Int)? {
        guard offset < end else { return nil }
        let b = p.load(fromByteOffset: offset, as: UInt8.self)
        if b >= 0x80 {
            let k = Int(b - 0x80)
            guard k <= 8, offset + 1 + k <= end else { return nil }
            var m: UInt64 = 0
            for i in 0..<k { m = m << 8 | UInt64(p.load(fromByteOffset: offset + 1 + i, as: UInt8.self)) }
            guard m <= UInt64(Int64.max), byteCount(m) == k else { return nil }
            return (Int64(m), 1 + k)
        } else {
            let k = Int(0x7F - b)
            guard k <= 8, offset + 1 + k <= end else { return nil }
            // Sign-extend: ones above the k low bytes, which the loop fills in.
            var m: UInt64 = k == 8 ? 0 : ~0 << (8 * UInt64(k))
            for i in 0..<k { m |= UInt64(p.load(fromByteOffset: offset + 1 + i, as: UInt8.self)) << (8 * UInt64(k - 1 - i)) }
            let v = Int64(bitPattern: m)
            guard v < 0, byteCount(UInt64(~v)) == k else { return nil }
            return (v, 1 + k)
        }
    }

    static func decode(_ bytes: [UInt8]) -> Int64? {
        bytes.withUnsafeBytes { b in
            guard let base = b.baseAddress, let (v, n) = decode(base, 0, b.count), n == b.count else { return nil }
            return v
        }
    }
}
