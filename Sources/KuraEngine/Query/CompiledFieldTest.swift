// CompiledFieldTest: one `column <op> constant` comparison of a compiled
// predicate, with everything that does not depend on the row made once.
//
// The column is an ordinal into the record; the constant side was evaluated once
// (variables bound, arithmetic folded); LIKE patterns and regular expressions were
// compiled once (inside `generic`, the interpreter's own comparison test), and for
// the fast paths the constant is kept in the form the row's bytes compare with.
//
// Exactness rule: every fast path gives exactly the interpreter's answer, and
// falls back to `generic` (the interpreter's PredicateComparisonTest on the
// decoded value) whenever that cannot be shown cheaply:
//   - numbers (integer, double, boolean columns; constants that are numbers,
//     booleans or dates): `ValueOrdering.compareNumbers` on the decoded value is
//     what the interpreter's `equal`/`order` do for two numbers; a date column's
//     double compares with a number or a date exactly as a plain double does.
//   - text, when the stored bytes are ASCII (so they are valid UTF-8 and every
//     Character is one byte, except CR LF): `==`/`!=` are byte equality (String
//     equality is canonical equivalence, which for ASCII is identity), ordering is
//     byte order (ValueOrdering.compareText is UTF-8 byte order), BEGINSWITH /
//     ENDSWITH / CONTAINS are byte searches when the needle is ASCII without CR or
//     LF (then no match can split a CR LF), LIKE is a byte matcher when the row
//     has no CR and every pattern character is one ASCII byte. `[c]` on ASCII text
//     is ASCII lower-casing (TextFolding: lower, upper, lower) and `[d]` changes
//     nothing, so folded forms need the folded constant to be ASCII too.
//   - IN a list of numbers: the members as sorted sets, searched (not tested one
//     by one: an importer's `id IN %@` lists thousands): integers (with booleans
//     as 0 and 1, and integral doubles within Int64's range) and the other
//     doubles. An integer, boolean or integral double row is equal to a number
//     exactly when its integer is in the first set (ValueOrdering's exact
//     integer/double comparison), any other double row when it is in the second.
//   - IN a list of texts whose folded forms are all ASCII: an ASCII row is in
//     the list when its (lower-cased for `[c]`) bytes are one of the members'
//     folded bytes, found through a hash table of them. Other lists of texts:
//     a text row, folded as the interpreter folds it, is looked up in a set of
//     the folded members (String equality and hashing are both canonical
//     equivalence: the interpreter's `==`).
//   Anything else (non-ASCII rows against ASCII lists, null, a value of another
//   kind, MATCHES, IN lists mixing texts and other values, `[n]`/`[l]`-only differences are
//   ignored as the interpreter does) goes through `generic`.

/// A precompiled comparison of one record column with a constant.
struct CompiledFieldTest {
    enum NumberOp {
        case equal, notEqual, less, lessOrEqual, greater, greaterOrEqual
        case between(Value, Value)
        /// IN: sorted distinct integers (booleans and integral doubles within
        /// Int64's range among them) and sorted other doubles (no NaN), in
        /// memory of their own (freed by `releaseStorage`).
        case oneOf(integers: UnsafeBufferPointer<Int64>, doubles: UnsafeBufferPointer<Double>)
    }

    enum TextOp {
        case equal, notEqual, less, lessOrEqual, greater, greaterOrEqual
        case beginsWith, endsWith, contains
        /// Pattern bytes; -1 is `?`, -2 is `*` (storage as `Fast.text`'s needle).
        case like(UnsafeBufferPointer<Int16>)
    }

    enum Fast {
        case none
        case number(NumberOp, Value)
        /// `lower`: ASCII-lower-case the row's bytes first (`[c]`). The needle
        /// (and a LIKE pattern) live in memory of their own, not in arrays, so
        /// reading the case for a row retains nothing; `releaseStorage` frees
        /// them (the owning `CompiledPredicate` calls it once, in its deinit).
        case text(TextOp, needle: UnsafeBufferPointer<UInt8>, lower: Bool)
        /// IN a list of texts: the members' folded ASCII bytes, distinct, one
        /// after another in `bytes`; member k is `bytes[starts[k]..<starts[k + 1]]`
        /// (`starts` has one more entry than there are members); `slots` is
        /// an open-addressing hash table of them (a power of two long, at
        /// most half full: member k + 1, or 0 for an empty slot). Freed by
        /// `releaseStorage`.
        case textSet(bytes: UnsafeBufferPointer<UInt8>, starts: UnsafeBufferPointer<Int>, slots: UnsafeBufferPointer<Int32>, lower: Bool)
        /// IN a list of texts some of whose folded forms are not ASCII: the
        /// folded members as a set of Strings (whose equality and hashing are
        /// canonical equivalence, as the interpreter's `==` on texts), and
        /// the options a text row is folded with first (empty: none).
        case strings(Set<String>, fold: KuraComparisonOptions)
    }

    let ordinal: Int
    let isDate: Bool
    let defaultValue: Value
    let generic: PredicateComparisonTest
    let fast: Fast

    /// Whether the test at `t` holds for the row whose columns `f` located.
    ///
    /// Through a pointer, reading each field in place: a method called on the
    /// struct loaded it whole first (its default value, its interpreter test,
    /// its constant), retaining each reference it holds, once per row.
    @inline(__always)
    static func holds(_ t: UnsafeMutablePointer<CompiledFieldTest>, _ f: borrowing RecordFields) throws(KuraError) -> Bool {
        let ordinal = t.pointee.ordinal
        guard ordinal < f.loaded else { return try t.pointee.generic.holds(for: wrap(t.pointee.defaultValue, isDate: t.pointee.isDate)) }
        switch t.pointee.fast {
        case .none:
            break
        case .number(let op, let c):
            let ty = f.type(ordinal)
            // Booleans (1, 2), integers (3...8) and doubles (9...11) are numbers.
            guard ty >= 1 && ty <= 11 else { break }
            let v = try f.value(ordinal)
            switch op {
            case .equal: return ValueOrdering.compareNumbers(v, c) == 0
            case .notEqual: return ValueOrdering.compareNumbers(v, c) != 0
            case .less: return ValueOrdering.compareNumbers(v, c).map { $0 < 0 } ?? false
            case .lessOrEqual: return ValueOrdering.compareNumbers(v, c).map { $0 <= 0 } ?? false
            case .greater: return ValueOrdering.compareNumbers(v, c).map { $0 > 0 } ?? false
            case .greaterOrEqual: return ValueOrdering.compareNumbers(v, c).map { $0 >= 0 } ?? false
            case .between(let lo, let hi):
                guard let a = ValueOrdering.compareNumbers(v, lo), let b = ValueOrdering.compareNumbers(v, hi) else { return false }
                return a >= 0 && b <= 0
            case .oneOf(let integers, let doubles):
                return isOneOf(v, integers, doubles)
            }
        case .text(let op, let needle, let lower):
            guard let b = f.textBytes(ordinal) else { break }
            if let r = asciiTest(op, b, needle, lower) { return r }
        case .textSet(let bytes, let starts, let slots, let lower):
            guard let b = f.textBytes(ordinal), b.isASCII else { break }
            return isOneOf(b, bytes, starts, slots, lower)
        case .strings(let members, let fold):
            guard f.textBytes(ordinal) != nil, case .text(let x) = try f.value(ordinal) else { break }
            return members.contains(fold.isEmpty ? x : TextFolding.fold(x, options: fold))
        }
        return try t.pointee.generic.holds(for: wrap(try f.value(ordinal), isDate: t.pointee.isDate))
    }

    @inline(__always)
    private static func wrap(_ v: Value, isDate: Bool) -> EvaluatedValue {
        if isDate, case .double(let d) = v { return .date(d) }
        return .scalar(v)
    }

    // MARK: IN lists

    /// Whether number `v` (a row's integer, double or boolean) equals one of
    /// the members `integers` and `doubles` hold (see `NumberOp.oneOf`).
    @inline(__always)
    static func isOneOf(_ v: Value, _ integers: UnsafeBufferPointer<Int64>, _ doubles: UnsafeBufferPointer<Double>) -> Bool {
        switch v {
        case .integer(let i): return contains(integers, i)
        case .bool(let b): return contains(integers, b ? 1 : 0)
        case .double(let d):
            if let i = exactInteger(d) { return contains(integers, i) }
            return !d.isNaN && contains(doubles, d)
        default: return false
        }
    }

    /// `d` as an Int64 when it is integral and within Int64's range (the
    /// doubles an integer can equal), else nil.
    @inline(__always)
    static func exactInteger(_ d: Double) -> Int64? {
        guard d >= -9223372036854775808.0, d < 9223372036854775808.0, d.rounded(.down) == d else { return nil }
        return Int64(d)  // exact: integral and in range
    }

    /// Whether sorted `xs` holds `x` (binary search).
    @inline(__always)
    private static func contains<T: Comparable>(_ xs: UnsafeBufferPointer<T>, _ x: T) -> Bool {
        var lo = 0, hi = xs.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if xs[mid] < x { lo = mid + 1 } else { hi = mid }
        }
        return lo < xs.count && xs[lo] == x
    }

    /// Whether ASCII row bytes `h` (lower-cased first when `lower`) are one
    /// of the members in `bytes`/`starts`, found through `slots` (see
    /// `Fast.textSet`).
    static func isOneOf(_ h: UnsafeRawBufferPointer, _ bytes: UnsafeBufferPointer<UInt8>, _ starts: UnsafeBufferPointer<Int>,
                        _ slots: UnsafeBufferPointer<Int32>, _ lower: Bool) -> Bool {
        @inline(__always) func at(_ i: Int) -> UInt8 {
            let x = h[i]
            return lower && x >= 0x41 && x <= 0x5A ? x | 0x20 : x
        }
        var hash = textHashSeed
        for i in 0..<h.count { hash = textHash(hash, at(i)) }
        let mask = slots.count - 1
        var slot = Int(truncatingIfNeeded: hash) & mask
        // At most half the slots are taken: the probe ends at an empty one.
        while slots[slot] != 0 {
            let k = Int(slots[slot]) - 1
            let start = starts[k]
            if starts[k + 1] - start == h.count {
                var i = 0
                while i < h.count, at(i) == bytes[start + i] { i += 1 }
                if i == h.count { return true }
            }
            slot = (slot + 1) & mask
        }
        return false
    }

    /// FNV-1a over bytes, for `Fast.textSet`'s table.
    static let textHashSeed: UInt64 = 0xcbf2_9ce4_8422_2325
    @inline(__always)
    static func textHash(_ h: UInt64, _ byte: UInt8) -> UInt64 { (h ^ UInt64(byte)) &* 0x100_0000_01b3 }

    // MARK: ASCII text

    /// The answer for ASCII row bytes, or nil when the row is not ASCII (or has a
    /// CR where that matters) and the interpreter must decide.
    static func asciiTest(_ op: TextOp, _ h: UnsafeRawBufferPointer, _ n: UnsafeBufferPointer<UInt8>, _ lower: Bool) -> Bool? {
        guard h.isASCII else { return nil }
        @inline(__always) func at(_ i: Int) -> UInt8 {
            let x = h[i]
            return lower && x >= 0x41 && x <= 0x5A ? x | 0x20 : x
        }
        func compare() -> Int {
            let m = min(h.count, n.count)
            var i = 0
            while i < m {
                let x = at(i)
                if x != n[i] { return x < n[i] ? -1 : 1 }
                i += 1
            }
            return h.count == n.count ? 0 : h.count < n.count ? -1 : 1
        }
        func matchesAt(_ start: Int) -> Bool {
            var k = 0
            while k < n.count {
                if at(start + k) != n[k] { return false }
                k += 1
            }
            return true
        }
        switch op {
        case .equal: return h.count == n.count && matchesAt(0)
        case .notEqual: return !(h.count == n.count && matchesAt(0))
        case .less: return compare() < 0
        case .lessOrEqual: return compare() <= 0
        case .greater: return compare() > 0
        case .greaterOrEqual: return compare() >= 0
        case .beginsWith: return !n.isEmpty && n.count <= h.count && matchesAt(0)
        case .endsWith: return !n.isEmpty && n.count <= h.count && matchesAt(h.count - n.count)
        case .contains:
            guard !n.isEmpty, n.count <= h.count else { return false }
            if !lower { return containsBytes(h, n) }
            let first = n[0]
            var i = 0
            let last = h.count - n.count
            while i <= last {
                if at(i) == first && matchesAt(i) { return true }
                i += 1
            }
            return false
        case .like(let pattern):
            if h.contains(0x0D) { return nil }
            return like(pattern, count: h.count, at)
        }
    }

    /// Whether `n` (not empty, at most as long as `h`) occurs in `h`, bytes as
    /// they are: a scan for `n`'s first byte, then the rest compared in place.
    @inline(__always)
    private static func containsBytes(_ h: UnsafeRawBufferPointer, _ n: UnsafeBufferPointer<UInt8>) -> Bool {
        // Both are non-empty (the caller checked), so both have a base address.
        let hp = h.baseAddress!
        let np = n.baseAddress!
        let m = n.count
        let first = np[0]
        let last = h.count - m
        var i = 0
        while i <= last {
            if hp.load(fromByteOffset: i, as: UInt8.self) == first {
                var k = 1
                while k < m, hp.load(fromByteOffset: i + k, as: UInt8.self) == np[k] { k += 1 }
                if k == m { return true }
            }
            i += 1
        }
        return false
    }

    /// LikePattern's two-pointer wildcard match, on bytes.
    private static func like(_ p: UnsafeBufferPointer<Int16>, count: Int, _ at: (Int) -> UInt8) -> Bool {
        var s = 0, i = 0
        var starP = -1, starS = 0
        while s < count {
            if i < p.count {
                let e = p[i]
                if e == -2 { starP = i; starS = s; i += 1; continue }
                if e == -1 || e == Int16(at(s)) { s += 1; i += 1; continue }
            }
            guard starP >= 0 else { return false }
            i = starP + 1
            starS += 1
            s = starS
        }
        while i < p.count, p[i] == -2 { i += 1 }
        return i == p.count
    }
}

extension CompiledFieldTest {
    /// The test for `column <op> right`, or nil when it cannot be compiled (the
    /// interpreter then evaluates the comparison).
    static func make(ordinal: Int, isDate: Bool, defaultValue: Value, op: KuraComparisonOperator,
                     right: EvaluatedValue, options: KuraComparisonOptions) -> CompiledFieldTest? {
        let generic: PredicateComparisonTest
        do {
            generic = try PredicateComparisonTest(op, right: right, options: options)
        } catch {
            // A bad MATCHES pattern: the interpreter throws it for each row it tests.
            return nil
        }
        return CompiledFieldTest(ordinal: ordinal, isDate: isDate, defaultValue: defaultValue, generic: generic,
                                 fast: fastPath(op, right, options))
    }

    static func number(_ v: EvaluatedValue) -> Value? {
        switch v {
        case .scalar(.integer), .scalar(.double), .scalar(.bool): if case .scalar(let x) = v { return x }; return nil
        case .date(let d): return .double(d)
        default: return nil
        }
    }

    private static func fastPath(_ op: KuraComparisonOperator, _ right: EvaluatedValue, _ options: KuraComparisonOptions) -> Fast {
        if let c = number(right) {
            switch op {
            case .equalTo: return .number(.equal, c)
            case .notEqualTo: return .number(.notEqual, c)
            case .lessThan: return .number(.less, c)
            case .lessThanOrEqualTo: return .number(.lessOrEqual, c)
            case .greaterThan: return .number(.greater, c)
            case .greaterThanOrEqualTo: return .number(.greaterOrEqual, c)
            default: return .none
            }
        }
        if case .collection(let xs) = right {
            if op == .in, let set = textList(xs, options) { return set }
            var integers: [Int64] = [], doubles: [Double] = []
            for x in xs {
                // Null, text and blob members never equal a number; anything else
                // (a nested collection, an object) is left to the interpreter.
                switch number(x) {
                case .integer(let i)?: integers.append(i); continue
                case .bool(let b)?: integers.append(b ? 1 : 0); continue
                case .double(let d)?:
                    if let i = exactInteger(d) { integers.append(i) } else if !d.isNaN { doubles.append(d) }
                    continue
                case _?: return .none
                case nil: break
                }
                switch x {
                case .scalar(.null), .scalar(.text), .scalar(.blob): continue
                default: return .none
                }
            }
            if op == .in {
                return .number(.oneOf(integers: owned(Array(Set(integers)).sorted()), doubles: owned(Array(Set(doubles)).sorted())), .null)
            }
            if op == .between, xs.count == 2, let lo = number(xs[0]), let hi = number(xs[1]) {
                return .number(.between(lo, hi), .null)
            }
            return .none
        }
        guard case .scalar(.text(let constant)) = right else { return .none }
        let folds = !options.isDisjoint(with: [.caseInsensitive, .diacriticInsensitive])
        let lower = options.contains(.caseInsensitive)
        if op == .like {
            var pattern: [Int16] = []
            for e in LikePattern(constant, options: options).elements {
                switch e {
                case .anyOne: pattern.append(-1)
                case .anyRun: pattern.append(-2)
                case .character(let ch):
                    guard let a = ch.asciiValue, ch.utf8.count == 1 else { return .none }
                    pattern.append(Int16(a))
                }
            }
            return .text(.like(owned(pattern)), needle: owned([]), lower: lower)
        }
        let needle = Array((folds ? TextFolding.fold(constant, options: options) : constant).utf8)
        guard needle.allSatisfy({ $0 < 0x80 }) else { return .none }
        let noLineBreak = !needle.contains(0x0A) && !needle.contains(0x0D)
        let text: TextOp
        switch op {
        case .equalTo: text = .equal
        case .notEqualTo: text = .notEqual
        case .lessThan: text = .less
        case .lessThanOrEqualTo: text = .lessOrEqual
        case .greaterThan: text = .greater
        case .greaterThanOrEqualTo: text = .greaterOrEqual
        case .beginsWith where noLineBreak: text = .beginsWith
        case .endsWith where noLineBreak: text = .endsWith
        case .contains where noLineBreak: text = .contains
        default: return .none
        }
        return .text(text, needle: owned(needle), lower: lower)
    }

    /// A copy of `a` in memory of its own (see `Fast.text`).
    private static func owned<T>(_ a: [T]) -> UnsafeBufferPointer<T> {
        let b = UnsafeMutableBufferPointer<T>.allocate(capacity: max(a.count, 1))
        _ = b.initialize(from: a)
        return UnsafeBufferPointer(start: b.baseAddress, count: a.count)
    }

    /// Frees the needle and pattern memory of a text test. Called exactly once
    /// per test made by `make`, by the owning `CompiledPredicate`'s deinit.
    func releaseStorage() {
        switch fast {
        case .text(let op, let needle, _):
            needle.deallocate()
            if case .like(let pattern) = op { pattern.deallocate() }
        case .textSet(let bytes, let starts, let slots, _):
            bytes.deallocate()
            starts.deallocate()
            slots.deallocate()
        case .number(.oneOf(let integers, let doubles), _):
            integers.deallocate()
            doubles.deallocate()
        case .number, .strings, .none:
            break
        }
    }

    /// The set test for `IN` members `xs`, all texts (at least one; nil
    /// otherwise: numbers, nulls, mixed lists go to the number test or the
    /// interpreter), each folded once as `==` with `options` folds it: a
    /// hash table of their bytes when every folded member is ASCII, else a
    /// `Set<String>` of them.
    private static func textList(_ xs: [EvaluatedValue], _ options: KuraComparisonOptions) -> Fast? {
        let folds = !options.isDisjoint(with: [.caseInsensitive, .diacriticInsensitive])
        var folded: [String] = []
        folded.reserveCapacity(xs.count)
        for x in xs {
            guard case .scalar(.text(let t)) = x else { return nil }
            folded.append(folds ? TextFolding.fold(t, options: options) : t)
        }
        guard !folded.isEmpty else { return nil }
        if folded.allSatisfy({ $0.utf8.allSatisfy { $0 < 0x80 } }),
           let hashed = hashedASCII(folded.map { Array($0.utf8) }, lower: options.contains(.caseInsensitive)) {
            return hashed
        }
        return .strings(Set(folded), fold: folds ? options : [])
    }

    /// `Fast.textSet` for `members`, folded ASCII bytes (at least one); nil
    /// for more members than its table's slots can number.
    private static func hashedASCII(_ members: [[UInt8]], lower: Bool) -> Fast? {
        guard members.count < Int(Int32.max / 2) else { return nil }
        var capacity = 8
        while capacity < 2 * members.count { capacity *= 2 }
        var slots = [Int32](repeating: 0, count: capacity)
        var bytes: [UInt8] = [], starts: [Int] = [0]
        for m in members {
            var hash = textHashSeed
            for b in m { hash = textHash(hash, b) }
            var slot = Int(truncatingIfNeeded: hash) & (capacity - 1)
            var known = false
            while slots[slot] != 0 {
                let k = Int(slots[slot]) - 1
                if bytes[starts[k]..<starts[k + 1]].elementsEqual(m) { known = true; break }
                slot = (slot + 1) & (capacity - 1)
            }
            if known { continue }
            slots[slot] = Int32(starts.count)  // the new member's k + 1
            bytes += m
            starts.append(bytes.count)
        }
        return .textSet(bytes: owned(bytes), starts: owned(starts), slots: owned(slots), lower: lower)
    }
}
