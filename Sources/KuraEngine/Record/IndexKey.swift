// IndexKey: order-preserving byte encodings of values, for index keys
// (FORMAT.md, "Index keys").
//
// An index key is the concatenation of one segment per indexed column, then the
// row's RowIDKey. Unsigned byte-wise comparison of keys equals comparison of the
// values column by column, then of row IDs. Each segment is prefix-free (no
// segment is a prefix of another), so segments concatenate and a descending
// column can simply complement every byte of its segment.
//
//     null      00
//     false     10 80          (numbers and booleans share tag 10; a column is
//     true      10 81 01        typed, so they never mix within one column)
//     integer   10 + RowIDKey(n)
//     double    11 + 8 bytes: the IEEE 754 bits big-endian, with the sign bit
//               flipped for +, all bits flipped for - (so -inf < ... < +inf);
//               -0.0 is encoded as +0.0; NaN is not indexable
//     text      20 + UTF-8 bytes with 00 written as 00 FF, then 00 00
//     blob      30 + bytes with 00 written as 00 FF, then 00 00
//
// A case- or diacritic-folded text column encodes the folded string.
// Descending columns complement every byte of the segment (tag included).
// Text compares by UTF-8 bytes, which is Unicode scalar order.

enum IndexKey {
    static let nullTag: UInt8 = 0x00
    static let integerTag: UInt8 = 0x10
    static let doubleTag: UInt8 = 0x11
    static let textTag: UInt8 = 0x20
    static let blobTag: UInt8 = 0x30

    /// Appends the segment of `value` (ascending).
    static func append(_ value: Value, to out: inout [UInt8]) {
        switch value {
        case .null:
            out.append(nullTag)
        case .bool(let b):
            out.append(integerTag)
            RowIDKey.append(b ? 1 : 0, to: &out)
        case .integer(let n):
            out.append(integerTag)
            RowIDKey.append(n, to: &out)
        case .double(let d):
            out.append(doubleTag)
            let bits = (d == 0 ? 0.0 : d).bitPattern
            let ordered = d.sign == .minus && d != 0 ? ~bits : bits | (1 << 63)
            withUnsafeBytes(of: ordered.bigEndian) { out.append(contentsOf: $0) }
        case .text(let s):
            out.append(textTag)
            appendEscaped(s.utf8, to: &out)
        case .blob(let b):
            out.append(blobTag)
            appendEscaped(b, to: &out)
        }
    }

    static func appendEscaped<C: Sequence>(_ bytes: C, to out: inout [UInt8]) where C.Element == UInt8 {
        for b in bytes {
            out.append(b)
            if b == 0 { out.append(0xFF) }
        }
        out.append(0)
        out.append(0)
    }

    /// Appends the segment of `value` for a column with these options.
    static func append(_ value: Value, descending: Bool, folded: Bool, to out: inout [UInt8]) {
        let start = out.count
        if folded, case .text(let s) = value {
            append(.text(TextFolding.fold(s, caseInsensitive: true, diacriticInsensitive: true)), to: &out)
        } else {
            append(value, to: &out)
        }
        if descending {
            for i in start..<out.count { out[i] = ~out[i] }
        }
    }
}
