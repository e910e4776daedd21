// Checksum: XXH64, the checksum of every page and every WAL frame (FORMAT.md,
// "Checksums"). XXH64 is Yann Collet's public-domain 64-bit hash (specification:
// xxhash's doc/xxhash_spec.md); this is an independent implementation checked
// against the specification's reference values in ChecksumTests.
//
// Kura seeds it with the page number for pages, so a page written to the wrong
// place fails its check, and with the previous frame's checksum for WAL frames, so
// frames form a chain that a torn or stale tail cannot continue.

package enum Checksum {
    static let p1: UInt64 = 0x9E37_79B1_85EB_CA87
    static let p2: UInt64 = 0xC2B2_AE3D_27D4_EB4F
    static let p3: UInt64 = 0x1656_67B1_9E37_79F9
    static let p4: UInt64 = 0x85EB_CA77_C2B2_AE63
    static let p5: UInt64 = 0x27D4_EB2F_1656_67C5

    @inline(__always) static func rotl(_ x: UInt64, _ r: UInt64) -> UInt64 { (x << r) | (x >> (64 - r)) }

    @inline(__always) static func round(_ acc: UInt64, _ lane: UInt64) -> UInt64 {
        rotl(acc &+ lane &* p2, 31) &* p1
    }

    @inline(__always) static func merge(_ h: UInt64, _ v: UInt64) -> UInt64 {
        (h ^ round(0, v)) &* p1 &+ p4
    }

    /// XXH64 of `count` bytes at `p` with `seed`.
    static func xxh64(_ p: UnsafeRawPointer, count: Int, seed: UInt64) -> UInt64 {
        var i = 0
        var h: UInt64
        if count >= 32 {
            var v1 = seed &+ p1 &+ p2
            var v2 = seed &+ p2
            var v3 = seed
            var v4 = seed &- p1
            // Stripes of 32 bytes up to `end`, walked by pointer: no overflow
            // check per stripe (a page's hash is mostly this loop).
            i = count & ~31
            var q = p
            let end = p + i
            repeat {
                v1 = round(v1, UInt64(littleEndian: q.loadUnaligned(as: UInt64.self)))
                v2 = round(v2, UInt64(littleEndian: q.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
                v3 = round(v3, UInt64(littleEndian: q.loadUnaligned(fromByteOffset: 16, as: UInt64.self)))
                v4 = round(v4, UInt64(littleEndian: q.loadUnaligned(fromByteOffset: 24, as: UInt64.self)))
                q += 32
            } while q < end
            h = rotl(v1, 1) &+ rotl(v2, 7) &+ rotl(v3, 12) &+ rotl(v4, 18)
            h = merge(h, v1); h = merge(h, v2); h = merge(h, v3); h = merge(h, v4)
        } else {
            h = seed &+ p5
        }
        h = h &+ UInt64(count)
        while i + 8 <= count {
            let k = round(0, UInt64(littleEndian: p.loadUnaligned(fromByteOffset: i, as: UInt64.self)))
            h ^= k
            h = rotl(h, 27) &* p1 &+ p4
            i += 8
        }
        if i + 4 <= count {
            h ^= UInt64(UInt32(littleEndian: p.loadUnaligned(fromByteOffset: i, as: UInt32.self))) &* p1
            h = rotl(h, 23) &* p2 &+ p3
            i += 4
        }
        while i < count {
            h ^= UInt64(p.load(fromByteOffset: i, as: UInt8.self)) &* p5
            h = rotl(h, 11) &* p1
            i += 1
        }
        h ^= h >> 33
        h = h &* p2
        h ^= h >> 29
        h = h &* p3
        h ^= h >> 32
        return h
    }

    package static func xxh64(_ bytes: [UInt8], seed: UInt64 = 0) -> UInt64 {
        bytes.withUnsafeBytes { xxh64($0.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!, count: $0.count, seed: seed) }
    }
}
