// TextCollation: how a sort key orders text, as sort descriptors choose a
// comparison selector (`compare:`, `caseInsensitiveCompare:`,
// `localizedStandardCompare:`, ...).
//
// COLLATIONS (every one is a total order; non-text values ignore the collation)
//   binary                    Unicode scalar order (= UTF-8 byte order); `compare:`.
//   caseInsensitive           scalar order of the case-folded text (TextFolding [c]);
//                             `caseInsensitiveCompare:`. Texts equal after folding tie.
//   diacriticInsensitive      scalar order of the text without diacritics ([d]).
//   caseDiacriticInsensitive  scalar order of the text folded both ways ([cd]): the
//                             order a folded index stores, so such an index walk
//                             gives it without sorting.
//   localized                 a multi-level order in the manner of the Unicode
//                             Collation Algorithm's root order (`localizedCompare:`):
//                               1. the [cd]-folded texts in scalar order, so
//                                  "Émile" sorts beside "Emile" and before "Zed";
//                               2. then the [c]-folded texts (unaccented first);
//                               3. then case, lowercase first at the first
//                                  difference ("a" before "A");
//                               4. then binary, so distinct texts never tie.
//   localizedStandard         as localized, but runs of ASCII digits compare by
//                             numeric value at level 1 ("File 9" before "File 10"),
//                             as `localizedStandardCompare:` (Finder order) does.
//
// DECISION: the localized collations do not use the operating system's ICU or the
// current locale. They are Kura's own functions of the text, so the order is the
// same on Linux and Apple platforms, on every device and after an OS update (a
// stored order must not change under an app). They are not tailored to a language
// (Swedish "ä" after "z", for instance, is not honoured); level 1 is folded scalar
// order, so scripts sort by code point and symbols by their ASCII position.

/// How a ``SortKey`` orders text values; other values ignore it.
///
/// Thread rules: a value type; stateless comparisons, callable from any thread.
public enum TextCollation: String, Sendable, Hashable, CaseIterable {
    /// Unicode scalar order (`compare:`).
    case binary
    /// Case-insensitive (`caseInsensitiveCompare:`).
    case caseInsensitive
    /// Diacritic-insensitive.
    case diacriticInsensitive
    /// Case- and diacritic-insensitive: the order of a folded index.
    case caseDiacriticInsensitive
    /// Multi-level, accent- and case-aware (`localizedCompare:`); see the file header.
    case localized
    /// As `localized`, with numbers in text compared by value (`localizedStandardCompare:`).
    case localizedStandard

    /// Compares two texts: negative if `a` sorts first, zero if they tie, positive
    /// if `b` sorts first.
    public func compare(_ a: String, _ b: String) -> Int {
        switch self {
        case .binary:
            return ValueOrdering.compareText(a, b)
        case .caseInsensitive, .diacriticInsensitive, .caseDiacriticInsensitive:
            return ValueOrdering.compareText(folded(a), folded(b))
        case .localized, .localizedStandard:
            if a == b { return 0 }
            let p = TextFolding.fold(a, caseInsensitive: true, diacriticInsensitive: true)
            let q = TextFolding.fold(b, caseInsensitive: true, diacriticInsensitive: true)
            let primary = self == .localizedStandard ? Self.compareNumeric(p, q) : ValueOrdering.compareText(p, q)
            if primary != 0 { return primary }
            let secondary = ValueOrdering.compareText(TextFolding.fold(a, caseInsensitive: true, diacriticInsensitive: false),
                                                      TextFolding.fold(b, caseInsensitive: true, diacriticInsensitive: false))
            if secondary != 0 { return secondary }
            for (x, y) in zip(a, b) where x.isUppercase != y.isUppercase {
                return x.isUppercase ? 1 : -1
            }
            return ValueOrdering.compareText(a, b)
        }
    }

    /// Compares two values for sorting: text by this collation, everything else
    /// (and text against non-text) by ``ValueOrdering/compare(_:_:)``.
    public func compare(_ a: Value, _ b: Value) -> Int {
        if self != .binary, case .text(let x) = a, case .text(let y) = b { return compare(x, y) }
        return ValueOrdering.compare(a, b)
    }

    /// For the folding collations, `v` with its text folded, so that a sort can
    /// fold each value once and then compare binary (`compare(a, b)` equals
    /// `ValueOrdering.compare(sortValue(a), sortValue(b))`); other collations return
    /// `v` and must compare with ``compare(_:_:)-(Value,Value)``.
    func sortValue(_ v: Value) -> Value {
        guard foldsOnly, case .text(let s) = v else { return v }
        return .text(folded(s))
    }

    /// True for the collations that are binary order of a folded text.
    var foldsOnly: Bool { self == .caseInsensitive || self == .diacriticInsensitive || self == .caseDiacriticInsensitive }

    /// The text as the case/diacritic collations compare it.
    func folded(_ s: String) -> String {
        switch self {
        case .caseInsensitive: return TextFolding.fold(s, caseInsensitive: true, diacriticInsensitive: false)
        case .diacriticInsensitive: return TextFolding.fold(s, caseInsensitive: false, diacriticInsensitive: true)
        case .caseDiacriticInsensitive: return TextFolding.fold(s, caseInsensitive: true, diacriticInsensitive: true)
        default: return s
        }
    }

    private static func isDigit(_ s: Unicode.Scalar) -> Bool { s.value >= 48 && s.value <= 57 }

    /// Scalar order, except that runs of ASCII digits compare by numeric value
    /// (leading zeros ignored; equal numbers continue with the text after them).
    static func compareNumeric(_ a: String, _ b: String) -> Int {
        let x = Array(a.unicodeScalars), y = Array(b.unicodeScalars)
        var i = 0, j = 0
        while i < x.count && j < y.count {
            if isDigit(x[i]) && isDigit(y[j]) {
                var ie = i, je = j
                while ie < x.count && isDigit(x[ie]) { ie += 1 }
                while je < y.count && isDigit(y[je]) { je += 1 }
                var is0 = i, js0 = j
                while is0 < ie - 1 && x[is0] == "0" { is0 += 1 }
                while js0 < je - 1 && y[js0] == "0" { js0 += 1 }
                let lx = ie - is0, ly = je - js0
                if lx != ly { return lx < ly ? -1 : 1 }
                for k in 0..<lx where x[is0 + k] != y[js0 + k] {
                    return x[is0 + k].value < y[js0 + k].value ? -1 : 1
                }
                i = ie
                j = je
                continue
            }
            if x[i] != y[j] { return x[i].value < y[j].value ? -1 : 1 }
            i += 1
            j += 1
        }
        if i < x.count { return 1 }
        if j < y.count { return -1 }
        return 0
    }
}
