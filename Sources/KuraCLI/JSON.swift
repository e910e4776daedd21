// JSON: a small JSON value with a writer (for `--json` output) and a strict
// reader (for `kura import` of JSON lines) that keeps integers apart from other
// numbers: a number without fraction or exponent that fits Int64 is an integer.

enum JSON: Equatable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSON])
    /// Members in order.
    case object([(String, JSON)])

    static func == (a: JSON, b: JSON) -> Bool {
        switch (a, b) {
        case (.null, .null): return true
        case (.bool(let x), .bool(let y)): return x == y
        case (.int(let x), .int(let y)): return x == y
        case (.double(let x), .double(let y)): return x == y
        case (.string(let x), .string(let y)): return x == y
        case (.array(let x), .array(let y)): return x == y
        case (.object(let x), .object(let y)): return x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: return false
        }
    }

    /// Compact JSON text.
    var text: String {
        var s = ""
        write(to: &s)
        return s
    }

    func write(to s: inout String) {
        switch self {
        case .null: s += "null"
        case .bool(let b): s += b ? "true" : "false"
        case .int(let i): s += String(i)
        case .double(let d):
            if !d.isFinite { s += "null" }
            else if d == d.rounded() && abs(d) < 1e15 { s += String(Int64(d)) + ".0" }
            else { s += String(d) }
        case .string(let str): JSON.escape(str, into: &s)
        case .array(let xs):
            s += "["
            for (i, x) in xs.enumerated() {
                if i > 0 { s += "," }
                x.write(to: &s)
            }
            s += "]"
        case .object(let members):
            s += "{"
            for (i, (k, v)) in members.enumerated() {
                if i > 0 { s += "," }
                JSON.escape(k, into: &s)
                s += ":"
                v.write(to: &s)
            }
            s += "}"
        }
    }

    static func escape(_ str: String, into s: inout String) {
        s += "\""
        for u in str.unicodeScalars {
            switch u {
            case "\"": s += "\\\""
            case "\\": s += "\\\\"
            case "\n": s += "\\n"
            case "\r": s += "\\r"
            case "\t": s += "\\t"
            default:
                if u.value < 0x20 {
                    let h = String(u.value, radix: 16)
                    s += "\\u" + String(repeating: "0", count: 4 - h.count) + h
                } else {
                    s.unicodeScalars.append(u)
                }
            }
        }
        s += "\""
    }

    // MARK: Reading

    struct ParseError: Error {
        let message: String
        /// Byte offset in the text.
        let offset: Int
    }

    /// Parses one JSON value that makes up all of `text` (whitespace aside).
    static func parse(_ text: String) throws(ParseError) -> JSON {
        var p = Parser(bytes: Array(text.utf8))
        p.skipSpace()
        let v = try p.value(depth: 0)
        p.skipSpace()
        if p.i != p.bytes.count { throw ParseError(message: "unexpected text after the value", offset: p.i) }
        return v
    }

    struct Parser {
        let bytes: [UInt8]
        var i = 0

        mutating func skipSpace() {
            while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x09 || bytes[i] == 0x0A || bytes[i] == 0x0D { i += 1 }
        }

        func fail(_ m: String) -> ParseError { ParseError(message: m, offset: i) }

        mutating func value(depth: Int) throws(ParseError) -> JSON {
            guard depth < 64 else { throw fail("nested too deeply") }
            guard i < bytes.count else { throw fail("unexpected end of the line") }
            switch bytes[i] {
            case UInt8(ascii: "{"):
                i += 1
                var members: [(String, JSON)] = []
                skipSpace()
                if i < bytes.count && bytes[i] == UInt8(ascii: "}") { i += 1; return .object(members) }
                while true {
                    skipSpace()
                    guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw fail("expected a member name in quotes") }
                    let k = try string()
                    skipSpace()
                    guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { throw fail("expected ':' after a member name") }
                    i += 1
                    skipSpace()
                    members.append((k, try value(depth: depth + 1)))
                    skipSpace()
                    guard i < bytes.count else { throw fail("unexpected end of the line inside an object") }
                    if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
                    if bytes[i] == UInt8(ascii: "}") { i += 1; return .object(members) }
                    throw fail("expected ',' or '}'")
                }
            case UInt8(ascii: "["):
                i += 1
                var xs: [JSON] = []
                skipSpace()
                if i < bytes.count && bytes[i] == UInt8(ascii: "]") { i += 1; return .array(xs) }
                while true {
                    skipSpace()
                    xs.append(try value(depth: depth + 1))
                    skipSpace()
                    guard i < bytes.count else { throw fail("unexpected end of the line inside an array") }
                    if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
                    if bytes[i] == UInt8(ascii: "]") { i += 1; return .array(xs) }
                    throw fail("expected ',' or ']'")
                }
            case UInt8(ascii: "\""):
                return .string(try string())
            case UInt8(ascii: "t"): return try literal("true", .bool(true))
            case UInt8(ascii: "f"): return try literal("false", .bool(false))
            case UInt8(ascii: "n"): return try literal("null", .null)
            default:
                return try number()
            }
        }

        mutating func literal(_ word: String, _ v: JSON) throws(ParseError) -> JSON {
            let w = Array(word.utf8)
            guard i + w.count <= bytes.count, Array(bytes[i..<i + w.count]) == w else { throw fail("unknown word") }
            i += w.count
            return v
        }

        mutating func number() throws(ParseError) -> JSON {
            let start = i
            var integral = true
            if i < bytes.count && bytes[i] == UInt8(ascii: "-") { i += 1 }
            let digitsStart = i
            while i < bytes.count, bytes[i] >= 0x30 && bytes[i] <= 0x39 { i += 1 }
            guard i > digitsStart else { throw fail("expected a value") }
            if bytes[digitsStart] == 0x30 && i - digitsStart > 1 { throw fail("a number may not start with 0") }
            if i < bytes.count && bytes[i] == UInt8(ascii: ".") {
                integral = false
                i += 1
                let f = i
                while i < bytes.count, bytes[i] >= 0x30 && bytes[i] <= 0x39 { i += 1 }
                guard i > f else { throw fail("expected digits after '.'") }
            }
            if i < bytes.count && (bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E")) {
                integral = false
                i += 1
                if i < bytes.count && (bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-")) { i += 1 }
                let e = i
                while i < bytes.count, bytes[i] >= 0x30 && bytes[i] <= 0x39 { i += 1 }
                guard i > e else { throw fail("expected digits in the exponent") }
            }
            let lexeme = String(decoding: bytes[start..<i], as: UTF8.self)
            if integral, let n = Int64(lexeme) { return .int(n) }
            guard let d = Double(lexeme) else { throw fail("number out of range") }
            return .double(d)
        }

        mutating func string() throws(ParseError) -> String {
            i += 1
            var scalars = String.UnicodeScalarView()
            var run: [UInt8] = []
            func flushRun(_ run: inout [UInt8], _ scalars: inout String.UnicodeScalarView) {
                if !run.isEmpty { scalars.append(contentsOf: String(decoding: run, as: UTF8.self).unicodeScalars); run.removeAll() }
            }
            while i < bytes.count {
                let b = bytes[i]
                if b == UInt8(ascii: "\"") {
                    i += 1
                    flushRun(&run, &scalars)
                    return String(scalars)
                }
                if b < 0x20 { throw fail("control character inside a string") }
                if b != UInt8(ascii: "\\") {
                    run.append(b)
                    i += 1
                    continue
                }
                flushRun(&run, &scalars)
                i += 1
                guard i < bytes.count else { break }
                let e = bytes[i]
                i += 1
                switch e {
                case UInt8(ascii: "\""): scalars.append("\"")
                case UInt8(ascii: "\\"): scalars.append("\\")
                case UInt8(ascii: "/"): scalars.append("/")
                case UInt8(ascii: "b"): scalars.append("\u{08}")
                case UInt8(ascii: "f"): scalars.append("\u{0C}")
                case UInt8(ascii: "n"): scalars.append("\n")
                case UInt8(ascii: "r"): scalars.append("\r")
                case UInt8(ascii: "t"): scalars.append("\t")
                case UInt8(ascii: "u"):
                    var code = try hex4()
                    if code >= 0xD800 && code < 0xDC00 {
                        guard i + 1 < bytes.count, bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u") else {
                            throw fail("unpaired surrogate in \\u escape")
                        }
                        i += 2
                        let low = try hex4()
                        guard low >= 0xDC00 && low < 0xE000 else { throw fail("unpaired surrogate in \\u escape") }
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let u = Unicode.Scalar(code) else { throw fail("invalid \\u escape") }
                    scalars.append(u)
                default: throw fail("unknown escape \\\(Character(Unicode.Scalar(e)))")
                }
            }
            throw fail("unterminated string")
        }

        mutating func hex4() throws(ParseError) -> UInt32 {
            guard i + 4 <= bytes.count, let v = UInt32(String(decoding: bytes[i..<i + 4], as: UTF8.self), radix: 16) else {
                throw fail("\\u needs four hex digits")
            }
            i += 4
            return v
        }
    }
}
