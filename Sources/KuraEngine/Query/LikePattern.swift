// LikePattern: the matcher behind LIKE.
//
// `*` matches zero or more characters, `?` exactly one; `\*`, `\?` and `\\` match the
// character itself. Characters are grapheme clusters (what a user sees as one
// letter). Matching is the classic two-pointer wildcard algorithm with one
// backtrack point: O(n·m) in the worst case, linear for typical patterns, and no
// recursion, so hostile patterns cannot exhaust the stack.

/// A compiled LIKE pattern.
///
/// Values are immutable and `Sendable`.
public struct LikePattern: Hashable, Sendable {
    enum Element: Hashable, Sendable {
        case character(Character)
        case anyOne
        case anyRun
    }

    let elements: [Element]
    /// The options the pattern was folded with; subjects are folded the same way.
    public let options: KuraComparisonOptions

    /// Compiles `pattern`; with `[c]`/`[d]` options, both the pattern and each
    /// subject are folded (see ``TextFolding``).
    public init(_ pattern: String, options: KuraComparisonOptions = []) {
        self.options = options
        let folded = TextFolding.fold(pattern, options: options)
        var elements: [Element] = []
        var escaping = false
        for ch in folded {
            if escaping {
                elements.append(.character(ch))
                escaping = false
                continue
            }
            switch ch {
            case "\\": escaping = true
            case "*": if elements.last != .anyRun { elements.append(.anyRun) }
            case "?": elements.append(.anyOne)
            default: elements.append(.character(ch))
            }
        }
        if escaping { elements.append(.character("\\")) }
        self.elements = elements
    }

    /// The literal text before the first wildcard (`"Al"` for `"Al*"`), useful for an
    /// index range scan. Empty if the pattern starts with a wildcard, and folded if
    /// the pattern was compiled with folding options.
    public var literalPrefix: String {
        var s = ""
        for e in elements {
            guard case .character(let c) = e else { break }
            s.append(c)
        }
        return s
    }

    /// True if the whole of `text` matches the pattern.
    public func matches(_ text: String) -> Bool {
        let subject = Array(TextFolding.fold(text, options: options))
        var s = 0, p = 0
        var starP = -1, starS = 0
        while s < subject.count {
            if p < elements.count {
                switch elements[p] {
                case .anyRun:
                    starP = p
                    starS = s
                    p += 1
                    continue
                case .anyOne:
                    s += 1; p += 1
                    continue
                case .character(let c) where c == subject[s]:
                    s += 1; p += 1
                    continue
                default:
                    break
                }
            }
            guard starP >= 0 else { return false }
            p = starP + 1
            starS += 1
            s = starS
        }
        while p < elements.count, elements[p] == .anyRun { p += 1 }
        return p == elements.count
    }
}
