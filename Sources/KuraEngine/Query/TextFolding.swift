// TextFolding: the string folding behind the [c] and [d] comparison options.
//
// [c] is Unicode case folding, approximated with the standard library's full case
//     mappings: lower, then upper, then lower again. That maps "ß", "ẞ" and "SS" to
//     "ss", "ﬁ" to "fi", final sigma to σ, and leaves caseless text alone.
// [d] removes diacritics: canonical decomposition (NFD), then every nonspacing or
//     enclosing mark is dropped ("Café" -> "Cafe", "Ångström" -> "Angstrom"), plus a
//     few letters whose stroke is not a combining mark (ø, đ, ł, ħ, ŧ, ı).
//
// Both are pure functions of the text, so a planner can fold index keys the same way.

import Foundation

/// Case and diacritic folding for string comparisons.
///
/// Thread rules: stateless; call from any thread.
public enum TextFolding {
    /// Folds `text` for the given comparison options (`[c]`, `[d]`); other options
    /// are ignored. Folded strings compare equal exactly when the originals are equal
    /// under those options.
    public static func fold(_ text: String, options: KuraComparisonOptions) -> String {
        fold(text, caseInsensitive: options.contains(.caseInsensitive),
             diacriticInsensitive: options.contains(.diacriticInsensitive))
    }

    /// Folds `text`: case-insensitively, diacritic-insensitively, or both.
    public static func fold(_ text: String, caseInsensitive: Bool, diacriticInsensitive: Bool) -> String {
        var s = text
        if diacriticInsensitive { s = removingDiacritics(s) }
        if caseInsensitive { s = s.lowercased().uppercased().lowercased() }
        return s
    }

    private static let strokeLetters: [Unicode.Scalar: Unicode.Scalar] = [
        "ø": "o", "Ø": "O", "đ": "d", "Đ": "D", "ł": "l", "Ł": "L",
        "ħ": "h", "Ħ": "H", "ŧ": "t", "Ŧ": "T", "ı": "i",
    ]

    /// `text` without diacritics (decomposed, marks removed).
    public static func removingDiacritics(_ text: String) -> String {
        // Fast path: ASCII has no diacritics.
        if text.utf8.allSatisfy({ $0 < 0x80 }) { return text }
        var out = String.UnicodeScalarView()
        for scalar in text.decomposedStringWithCanonicalMapping.unicodeScalars {
            switch scalar.properties.generalCategory {
            case .nonspacingMark, .enclosingMark:
                continue
            default:
                out.append(strokeLetters[scalar] ?? scalar)
            }
        }
        return String(out)
    }
}
