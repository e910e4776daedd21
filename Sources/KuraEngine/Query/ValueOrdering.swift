// ValueOrdering: the one total order of Values, used by sorting, by the
// evaluator's <, <=, >, >= and BETWEEN, and shared with the planner.
//
// Order: null < numbers (booleans count as 0 and 1; NaN below every other
// number) < text (Unicode scalar order, which is UTF-8 byte order) < blobs (byte
// order). Integers and doubles compare exactly by value: no rounding through Double,
// so 2^53 + 1 > 2^53 as a double.
//
// Text equality here is scalar equality; the evaluator's `==` uses Swift's String
// equality (canonical equivalence, as NSString's compare does). For NFC text the two
// agree.

/// The total order of ``Value``s for sorting and range comparisons.
///
/// Thread rules: stateless; call from any thread.
public enum ValueOrdering {
    /// Compares two values: negative if `a` sorts first, zero if equal, positive
    /// if `b` sorts first. A total preorder: every pair compares, and
    /// `.bool(true)` ties with `.integer(1)`.
    public static func compare(_ a: Value, _ b: Value) -> Int {
        let ra = rank(a), rb = rank(b)
        if ra != rb { return ra < rb ? -1 : 1 }
        switch (a, b) {
        case (.text(let x), .text(let y)): return compareText(x, y)
        case (.blob(let x), .blob(let y)): return compareBytes(x, y)
        case (.null, .null): return 0
        default:
            if let c = compareNumbers(a, b) { return c }
            // NaN sorts below every other number, and equal to itself.
            let an = isNaN(a), bn = isNaN(b)
            return an == bn ? 0 : an ? -1 : 1
        }
    }

    /// `compare(a, b) < 0`, for `sort(by:)`.
    public static func areInIncreasingOrder(_ a: Value, _ b: Value) -> Bool { compare(a, b) < 0 }

    private static func rank(_ v: Value) -> Int {
        switch v {
        case .null: return 0
        case .bool, .integer, .double: return 1
        case .text: return 2
        case .blob: return 3
        }
    }

    private static func isNaN(_ v: Value) -> Bool {
        if case .double(let d) = v { return d.isNaN }
        return false
    }

    /// Exact numeric comparison of two numbers or booleans; nil if either is not a
    /// number or is NaN.
    public static func compareNumbers(_ a: Value, _ b: Value) -> Int? {
        switch (a, b) {
        case (.integer(let x), .integer(let y)): return x < y ? -1 : x == y ? 0 : 1
        case (.double(let x), .double(let y)): return compareDoubles(x, y)
        case (.integer(let x), .double(let y)): return compareIntegerToDouble(x, y)
        case (.double(let x), .integer(let y)): return compareIntegerToDouble(y, x).map { -$0 }
        case (.bool(let x), _): return compareNumbers(.integer(x ? 1 : 0), b)
        case (_, .bool(let y)): return compareNumbers(a, .integer(y ? 1 : 0))
        default: return nil
        }
    }

    static func compareDoubles(_ x: Double, _ y: Double) -> Int? {
        if x.isNaN || y.isNaN { return nil }
        return x < y ? -1 : x == y ? 0 : 1
    }

    /// Exact comparison of an integer with a double; nil for NaN.
    public static func compareIntegerToDouble(_ i: Int64, _ d: Double) -> Int? {
        if d.isNaN { return nil }
        // Every Int64 lies in [-2^63, 2^63).
        if d >= 9223372036854775808.0 { return -1 }
        if d < -9223372036854775808.0 { return 1 }
        let whole = d.rounded(.down)
        let w = Int64(whole)  // exact: whole is integral and in range
        if i != w { return i < w ? -1 : 1 }
        return whole == d ? 0 : -1  // d has a fractional part above w == i
    }

    /// Unicode scalar order (equal to UTF-8 byte order).
    public static func compareText(_ a: String, _ b: String) -> Int {
        var x = a.utf8.makeIterator(), y = b.utf8.makeIterator()
        while true {
            switch (x.next(), y.next()) {
            case (nil, nil): return 0
            case (nil, _): return -1
            case (_, nil): return 1
            case (let p?, let q?): if p != q { return p < q ? -1 : 1 }
            }
        }
    }

    /// Lexicographic byte order.
    public static func compareBytes(_ a: [UInt8], _ b: [UInt8]) -> Int {
        for (p, q) in zip(a, b) where p != q { return p < q ? -1 : 1 }
        return a.count == b.count ? 0 : a.count < b.count ? -1 : 1
    }
}
