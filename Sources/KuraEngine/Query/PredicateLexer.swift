// PredicateLexer: turns a predicate format string into tokens.
//
// The lexer works on Unicode scalars, so a quote followed by a combining mark is
// still a quote, and reports positions as Character (grapheme cluster) offsets, the
// unit users see. Format placeholders (`%@`, `%K`, `%d`, ...) are resolved here,
// in textual order, against the argument list; quoted text is never scanned for
// placeholders. The token grammar is in the header of PredicateParser.swift.

/// A token of the format language.
struct PredicateToken {
    enum Kind {
        /// A name. `escaped` is true for `#name` and names written with `\u` escapes:
        /// those are never keywords.
        case identifier(String, escaped: Bool)
        /// `@name`: a collection operator used as a key (`@count`, `@sum`).
        case atKey(String)
        /// `$name`
        case variable(String)
        /// A number literal without sign.
        case number(NumberLiteral)
        /// A quoted string, escapes resolved.
        case string(String)
        /// `%K`, resolved to key components.
        case argumentKeyPath([String])
        /// `%@`, `%d`, ... resolved to a constant or aggregate expression.
        case argumentValue(KuraExpression)
        /// Operators and punctuation, e.g. `"=="`, `"("`, `"**"`.
        case punctuation(String)
        case end
    }

    var kind: Kind
    /// Character offset of the token's first character.
    var offset: Int
    /// The source text, for error messages.
    var text: String

    /// "end of input" or the quoted source text, for "expected X but found Y".
    var found: String {
        if case .end = kind { return "end of input" }
        let t = text.count > 40 ? String(text.prefix(37)) + "..." : text
        return "'" + t + "'"
    }

    func isPunctuation(_ p: String) -> Bool {
        if case .punctuation(let q) = kind { return p == q }
        return false
    }

    /// The upper-cased keyword, if this is an unescaped identifier.
    var keyword: String? {
        if case .identifier(let name, false) = kind { return name.uppercased() }
        return nil
    }
}

/// A number literal's magnitude, kept exact so that `-9223372036854775808` folds.
enum NumberLiteral: Equatable {
    case integer(UInt64)
    case double(Double)

    func value(negated: Bool) -> Value {
        switch self {
        case .integer(let m):
            if !negated {
                if let i = Int64(exactly: m) { return .integer(i) }
                return .double(Double(m))
            }
            if m <= UInt64(Int64.max) { return .integer(-Int64(m)) }
            if m == UInt64(Int64.max) + 1 { return .integer(Int64.min) }
            return .double(-Double(m))
        case .double(let d):
            return .double(negated ? -d : d)
        }
    }
}

struct PredicateLexer {
    private let scalars: [Unicode.Scalar]
    /// `characterOffsets[i]` is the Character offset of scalar `i`; one extra entry
    /// for the end.
    private let characterOffsets: [Int]
    private let arguments: [PredicateArgument]
    /// Whether arguments the format does not consume are an error (the default,
    /// as in Foundation, ignores them).
    private let requireAllArguments: Bool
    private var position = 0
    private var argumentsUsed = 0

    init(_ source: String, arguments: [PredicateArgument], requireAllArguments: Bool = false) {
        var scalars: [Unicode.Scalar] = []
        var offsets: [Int] = []
        // ASCII without carriage returns (almost every format): each byte is
        // one scalar and one Character, so offsets are positions, and the
        // grapheme breaking of the general path is skipped. ("\r\n" is one
        // Character, so a carriage return takes the general path.)
        if source.utf8.allSatisfy({ $0 < 0x80 && $0 != 0x0D }) {
            scalars.reserveCapacity(source.utf8.count)
            for b in source.utf8 { scalars.append(Unicode.Scalar(b)) }
            offsets = Array(0...scalars.count)
        } else {
            var characterIndex = 0
            for character in source {
                for scalar in character.unicodeScalars {
                    scalars.append(scalar)
                    offsets.append(characterIndex)
                }
                characterIndex += 1
            }
            offsets.append(characterIndex)
        }
        self.scalars = scalars
        self.characterOffsets = offsets
        self.arguments = arguments
        self.requireAllArguments = requireAllArguments
    }

    /// Character offset of scalar position `i`.
    private func offset(_ i: Int) -> Int { characterOffsets[Swift.min(i, scalars.count)] }

    private func peek(_ ahead: Int = 0) -> Unicode.Scalar? {
        let i = position + ahead
        return i < scalars.count ? scalars[i] : nil
    }

    private func describe(_ s: Unicode.Scalar?) -> String {
        guard let s else { return "end of input" }
        return "'" + String(Character(s)) + "'"
    }

    private func syntax(_ message: String, at i: Int) -> KuraError {
        KuraError(.syntax, message, offset: offset(i))
    }

    /// All tokens, ending with `.end`.
    mutating func tokenize() throws(KuraError) -> [PredicateToken] {
        var tokens: [PredicateToken] = []
        while true {
            let token = try next()
            tokens.append(token)
            if case .end = token.kind { break }
        }
        if requireAllArguments && argumentsUsed < arguments.count {
            throw KuraError(.invalidArgument,
                            "expected \(argumentsUsed) argument\(argumentsUsed == 1 ? "" : "s") for the format's placeholders but found \(arguments.count); remove the extra arguments",
                            offset: offset(scalars.count))
        }
        return tokens
    }

    // ASCII answers without the Unicode property tables (the same answers:
    // XID_Start in ASCII is the letters, XID_Continue the letters, digits and
    // "_"; White_Space in ASCII is tab, line feed, vertical tab, form feed,
    // carriage return and space).
    static func isIdentifierStart(_ s: Unicode.Scalar) -> Bool {
        if s.isASCII { return s == "_" || (s.value | 0x20) &- 97 < 26 }
        return s.properties.isXIDStart
    }
    static func isIdentifierContinue(_ s: Unicode.Scalar) -> Bool {
        if s.isASCII { return s == "_" || (s.value | 0x20) &- 97 < 26 || s.value &- 48 < 10 }
        return s.properties.isXIDContinue
    }
    static func isWhitespace(_ s: Unicode.Scalar) -> Bool {
        if s.isASCII { return s.value == 32 || s.value &- 9 < 5 }
        return s.properties.isWhitespace
    }
    private static func isDigit(_ s: Unicode.Scalar) -> Bool { s.value >= 48 && s.value <= 57 }
    private static func digitValue(_ s: Unicode.Scalar, radix: UInt32) -> UInt32? {
        let v = s.value
        var d: UInt32
        switch v {
        case 48...57: d = v - 48
        case 65...90: d = v - 55
        case 97...122: d = v - 87
        default: return nil
        }
        if d >= radix { return nil }
        return d
    }

    private func token(_ kind: PredicateToken.Kind, from start: Int) -> PredicateToken {
        PredicateToken(kind: kind, offset: offset(start), text: Self.text(scalars[start..<position]))
    }

    /// `s` as a String. ASCII (almost every token) is written as UTF-8 bytes
    /// in one step; the scalar view's `append(contentsOf:)` costs about a
    /// hundred instructions a scalar.
    private static func text(_ s: ArraySlice<Unicode.Scalar>) -> String {
        guard s.allSatisfy({ $0.isASCII }) else {
            var view = String.UnicodeScalarView()
            view.append(contentsOf: s)
            return String(view)
        }
        return String(unsafeUninitializedCapacity: s.count) { buffer in
            var i = 0
            for scalar in s {
                buffer[i] = UInt8(truncatingIfNeeded: scalar.value)
                i += 1
            }
            return i
        }
    }

    private static let punctuation2: Set<String> = ["**", "<<", ">>", "==", "!=", "<>", "<=", "=<", ">=", "=>", "&&", "||"]
    private static let punctuation1: Set<Unicode.Scalar> = ["(", ")", "[", "]", "{", "}", ",", ".", ":", "+", "-", "*", "/", "&", "|", "^", "~", "<", ">", "=", "!"]

    private mutating func next() throws(KuraError) -> PredicateToken {
        while let s = peek(), Self.isWhitespace(s) { position += 1 }
        let start = position
        guard let c = peek() else { return PredicateToken(kind: .end, offset: offset(start), text: "") }

        if Self.isIdentifierStart(c) || c == "\\" {
            let (name, escaped) = try identifierBody()
            return token(.identifier(name, escaped: escaped), from: start)
        }
        if Self.isDigit(c) { return try number(start) }
        switch c {
        case "'", "\"":
            return token(.string(try string(quote: c)), from: start)
        case "#":
            position += 1
            guard let n = peek(), Self.isIdentifierStart(n) || n == "\\" else {
                throw syntax("expected a name after '#' but found \(describe(peek()))", at: position)
            }
            let (name, _) = try identifierBody()
            return token(.identifier(name, escaped: true), from: start)
        case "@":
            position += 1
            guard let n = peek(), Self.isIdentifierStart(n) || n == "\\" else {
                throw syntax("expected a collection operator name after '@' (such as @count) but found \(describe(peek()))", at: position)
            }
            let (name, _) = try identifierBody()
            return token(.atKey("@" + name), from: start)
        case "$":
            position += 1
            var name = ""
            while let n = peek(), Self.isIdentifierContinue(n) {
                name.unicodeScalars.append(n)
                position += 1
            }
            if name.isEmpty {
                throw syntax("expected a variable name after '$' but found \(describe(peek()))", at: position)
            }
            return token(.variable(name), from: start)
        case "%":
            return try placeholder(start)
        default:
            break
        }
        if let n = peek(1) {
            var pair = String(Character(c))
            pair.unicodeScalars.append(n)
            if Self.punctuation2.contains(pair) {
                position += 2
                return token(.punctuation(pair), from: start)
            }
        }
        if Self.punctuation1.contains(c) {
            position += 1
            return token(.punctuation(String(Character(c))), from: start)
        }
        if c == "?" {
            throw syntax("expected an operator or expression but found '?' (the ? wildcard belongs inside a quoted LIKE pattern)", at: start)
        }
        throw syntax("expected an operator or expression but found \(describe(c))", at: start)
    }

    /// An identifier's characters; `\uXXXX`, `\xXX` and `\ooo` escapes are allowed.
    private mutating func identifierBody() throws(KuraError) -> (String, Bool) {
        var name = String.UnicodeScalarView()
        var escaped = false
        while let c = peek() {
            if c == "\\" {
                guard let s = try escapeSequence(strict: true) else { break }
                name.append(s)
                escaped = true
            } else if Self.isIdentifierContinue(c) {
                name.append(c)
                position += 1
            } else {
                break
            }
        }
        return (String(name), escaped)
    }

    /// Reads `\uXXXX` (with surrogate pairs), `\xXX` or `\ooo` at `position`.
    /// With `strict`, anything else is an error; otherwise returns nil and leaves
    /// `position` unchanged, so the caller keeps the backslash as written.
    private mutating func escapeSequence(strict: Bool) throws(KuraError) -> Unicode.Scalar? {
        let start = position
        guard let kind = peek(1) else {
            if strict { throw syntax("expected an escape such as \\u0041 after '\\' but found end of input", at: start + 1) }
            return nil
        }
        func hex(_ count: Int, at i: Int) -> UInt32? {
            var v: UInt32 = 0
            for k in 0..<count {
                guard i + k < scalars.count, let d = Self.digitValue(scalars[i + k], radix: 16) else { return nil }
                v = v * 16 + d
            }
            return v
        }
        switch kind {
        case "u", "U":
            guard let v = hex(4, at: start + 2) else {
                throw syntax("expected 4 hexadecimal digits after '\\\(kind)' but found \(describe(firstNonHex(from: start + 2)))", at: firstNonHexIndex(from: start + 2))
            }
            position = start + 6
            if (0xD800...0xDBFF).contains(v) {
                if peek() == "\\", let k = peek(1), k == "u" || k == "U", let low = hex(4, at: position + 2),
                   (0xDC00...0xDFFF).contains(low) {
                    position += 6
                    return Unicode.Scalar(0x10000 + ((v - 0xD800) << 10) + (low - 0xDC00))
                }
                throw syntax("expected a low surrogate \\uDC00-\\uDFFF after the high surrogate but found \(describe(peek()))", at: position)
            }
            guard let s = Unicode.Scalar(v) else {
                throw syntax("expected a Unicode scalar value but found the lone surrogate \\u\(String(v, radix: 16, uppercase: true))", at: start)
            }
            return s
        case "x", "X":
            guard let v = hex(2, at: start + 2), let s = Unicode.Scalar(v) else {
                throw syntax("expected 2 hexadecimal digits after '\\\(kind)' but found \(describe(firstNonHex(from: start + 2)))", at: firstNonHexIndex(from: start + 2))
            }
            position = start + 4
            return s
        default:
            var v: UInt32 = 0
            var isOctal = true
            for k in 0..<3 {
                let i = start + 1 + k
                guard i < scalars.count, let d = Self.digitValue(scalars[i], radix: 8) else { isOctal = false; break }
                v = v * 8 + d
            }
            if isOctal, v <= 0o377, let s = Unicode.Scalar(v) {
                position = start + 4
                return s
            }
            if strict {
                throw syntax("expected an escape such as \\u0041 after '\\' but found \(describe(kind))", at: start + 1)
            }
            return nil
        }
    }

    private func firstNonHexIndex(from i: Int) -> Int {
        var j = i
        while j < scalars.count, j < i + 4, Self.digitValue(scalars[j], radix: 16) != nil { j += 1 }
        return j
    }
    private func firstNonHex(from i: Int) -> Unicode.Scalar? {
        let j = firstNonHexIndex(from: i)
        return j < scalars.count ? scalars[j] : nil
    }

    private mutating func string(quote: Unicode.Scalar) throws(KuraError) -> String {
        let start = position
        position += 1
        var text = String.UnicodeScalarView()
        while true {
            guard let c = peek() else {
                throw syntax("expected a closing \(quote) for the string that starts here but found end of input", at: start)
            }
            if c == quote { position += 1; break }
            if c == "\\" {
                guard let n = peek(1) else {
                    throw syntax("expected a closing \(quote) for the string that starts here but found end of input", at: start)
                }
                switch n {
                case "\\": text.append("\\"); position += 2
                case "'": text.append("'"); position += 2
                case "\"": text.append("\""); position += 2
                case "n": text.append("\n"); position += 2
                case "t": text.append("\t"); position += 2
                case "r": text.append("\r"); position += 2
                default:
                    if let s = try escapeSequence(strict: false) {
                        text.append(s)
                    } else {
                        // Unknown escapes stay as written, so regular expressions
                        // such as 'i\w{18}n' keep their meaning.
                        text.append("\\")
                        position += 1
                    }
                }
                continue
            }
            text.append(c)
            position += 1
        }
        return String(text)
    }

    private mutating func number(_ start: Int) throws(KuraError) -> PredicateToken {
        if peek() == "0", let p = peek(1) {
            let radix: UInt64?
            switch p {
            case "x", "X": radix = 16
            case "o", "O": radix = 8
            case "b", "B": radix = 2
            default: radix = nil
            }
            if let radix {
                position += 2
                var magnitude: UInt64 = 0
                var asDouble: Double = 0
                var overflow = false
                var digits = 0
                while let c = peek(), let d = Self.digitValue(c, radix: UInt32(radix)) {
                    let (m1, o1) = magnitude.multipliedReportingOverflow(by: radix)
                    let (m2, o2) = m1.addingReportingOverflow(UInt64(d))
                    if o1 || o2 { overflow = true }
                    magnitude = m2
                    asDouble = asDouble * Double(radix) + Double(d)
                    digits += 1
                    position += 1
                }
                if digits == 0 {
                    let name = radix == 16 ? "hexadecimal" : radix == 8 ? "octal" : "binary"
                    throw syntax("expected a \(name) digit after '0\(p)' but found \(describe(peek()))", at: position)
                }
                if let c = peek(), Self.isIdentifierContinue(c) {
                    throw syntax("expected a digit or the end of the number but found \(describe(c))", at: position)
                }
                return token(.number(overflow ? .double(asDouble) : .integer(magnitude)), from: start)
            }
        }
        var text = ""
        var isInteger = true
        while let c = peek(), Self.isDigit(c) { text.unicodeScalars.append(c); position += 1 }
        if peek() == ".", let d = peek(1), Self.isDigit(d) {
            isInteger = false
            text += "."
            position += 1
            while let c = peek(), Self.isDigit(c) { text.unicodeScalars.append(c); position += 1 }
        }
        if let e = peek(), e == "e" || e == "E" {
            var k = 1
            if let sign = peek(1), sign == "+" || sign == "-" { k = 2 }
            if let d = peek(k), Self.isDigit(d) {
                isInteger = false
                text += "e"
                if k == 2 { text.unicodeScalars.append(peek(1)!) }
                position += k
                while let c = peek(), Self.isDigit(c) { text.unicodeScalars.append(c); position += 1 }
            }
        }
        if let c = peek(), Self.isIdentifierContinue(c) {
            throw syntax("expected a digit or the end of the number but found \(describe(c))", at: position)
        }
        if isInteger, let m = UInt64(text) {
            return token(.number(.integer(m)), from: start)
        }
        return token(.number(.double(Double(text) ?? .infinity)), from: start)
    }

    // MARK: Placeholders

    private enum Conversion { case integer, double, string }

    private mutating func placeholder(_ start: Int) throws(KuraError) -> PredicateToken {
        position += 1
        guard let c = peek() else {
            throw syntax("expected a format specifier such as %@ or %K after '%' but found end of input", at: start)
        }
        if c == "%" {
            position += 1
            return token(.argumentValue(.constant(.text("%"))), from: start)
        }
        if c == "@" {
            position += 1
            let argument = try takeArgument(start)
            return token(.argumentValue(try Self.expression(for: argument, placeholder: "%@", offset: offset(start))), from: start)
        }
        if c == "K" {
            position += 1
            let argument = try takeArgument(start)
            return token(.argumentKeyPath(try Self.keys(for: argument, placeholder: "%K", offset: offset(start))), from: start)
        }
        // printf-style: optional length modifier, then a conversion character.
        var i = position
        let lengthModifiers: Set<Unicode.Scalar> = ["h", "l", "q", "L", "z", "t", "j"]
        var modifierCount = 0
        while i < scalars.count, lengthModifiers.contains(scalars[i]), modifierCount < 2 { i += 1; modifierCount += 1 }
        var conversion: Conversion?
        if i < scalars.count {
            switch scalars[i] {
            case "d", "D", "i", "u", "U", "o", "O", "x", "X", "c", "C": conversion = .integer
            case "f", "F", "e", "E", "g", "G", "a", "A": conversion = .double
            case "s", "S": conversion = .string
            default: conversion = nil
            }
        }
        guard let conversion else {
            throw syntax("expected a format specifier such as %@, %K, %d or %f but found '%\(String(String.UnicodeScalarView(scalars[position..<Swift.min(i + 1, scalars.count)])))'", at: start)
        }
        position = i + 1
        let spelled = token(.end, from: start).text
        let argument = try takeArgument(start)
        let value = try Self.scalar(for: argument, conversion: conversion, placeholder: spelled, offset: offset(start))
        return token(.argumentValue(.constant(value)), from: start)
    }

    private mutating func takeArgument(_ start: Int) throws(KuraError) -> PredicateArgument {
        guard argumentsUsed < arguments.count else {
            throw KuraError(.invalidArgument,
                            "expected an argument for placeholder #\(argumentsUsed + 1) but found only \(arguments.count) argument\(arguments.count == 1 ? "" : "s")",
                            offset: offset(start))
        }
        defer { argumentsUsed += 1 }
        return arguments[argumentsUsed]
    }

    /// What `%@` (or a variable) becomes.
    static func expression(for argument: PredicateArgument, placeholder: String, offset: Int?) throws(KuraError) -> KuraExpression {
        switch argument {
        case .value(let v): return .constant(v)
        case .date(let d): return .date(secondsSinceReferenceDate: d)
        case .list(let items):
            var out: [KuraExpression] = []
            for item in items { out.append(try expression(for: item, placeholder: placeholder, offset: offset)) }
            return .aggregate(out)
        case .keyPath(let path):
            if placeholder == "%@" {
                throw KuraError(.invalidArgument, "expected a value for %@ but found the key path '\(path)'; use %K for key paths", offset: offset)
            }
            return .keyPath(try keys(for: argument, placeholder: placeholder, offset: offset))
        }
    }

    /// What `%K` becomes.
    static func keys(for argument: PredicateArgument, placeholder: String, offset: Int?) throws(KuraError) -> [String] {
        let path: String
        switch argument {
        case .keyPath(let p): path = p
        case .value(.text(let p)): path = p
        default:
            throw KuraError(.invalidArgument, "expected a key path string for \(placeholder) but found a \(argument.kindName) argument", offset: offset)
        }
        let keys = path.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        if keys.contains(where: \.isEmpty) {
            throw KuraError(.invalidArgument, "expected a key path such as 'owner.name' for \(placeholder) but found '\(path)', which has an empty key", offset: offset)
        }
        return keys
    }

    private static func scalar(for argument: PredicateArgument, conversion: Conversion, placeholder: String, offset: Int) throws(KuraError) -> Value {
        switch (conversion, argument) {
        case (.integer, .value(.integer(let i))): return .integer(i)
        case (.integer, .value(.bool(let b))): return .integer(b ? 1 : 0)
        case (.integer, .value(.double(let d))):
            if let i = Int64(exactly: d) { return .integer(i) }
        case (.double, .value(.double(let d))): return .double(d)
        case (.double, .value(.integer(let i))): return .double(Double(i))
        case (.string, .value(.text(let s))): return .text(s)
        default: break
        }
        let wanted = conversion == .integer ? "an integer" : conversion == .double ? "a number" : "a string"
        throw KuraError(.invalidArgument, "expected \(wanted) for \(placeholder) but found a \(argument.kindName) argument", offset: offset)
    }
}
