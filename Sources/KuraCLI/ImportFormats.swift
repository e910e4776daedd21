// ImportFormats: the readers behind `kura import` — CSV with typed headers and
// JSON lines — and the typing rules that turn their fields into values.
//
// CSV (RFC 4180): a header line of column names, each optionally typed as
// `name:int64`, `name:double`, `name:string`, `name:bool` or `name:date`;
// untyped columns are inferred from all their values (every value an integer:
// integer; else every value a number: double; else every value true/false: bool;
// else text). An empty field is null; a quoted empty field `""` is the empty
// string. Fields may be quoted, with `""` for a quote and line breaks inside.
//
// JSON lines: one object per line; integers (no fraction or exponent, fitting
// Int64) are int64, other numbers double, then strings, booleans, null. A new
// column takes the type of its first non-null value; an integer into a double
// column is accepted, any other mismatch is an error naming the line.
//
// A column named `_rowid` gives the row's ID; `_entity` (written by `kura dump`)
// is ignored.
//
// Both readers take their bytes from an ImportSource one record (CSV) or line
// (JSON lines) at a time, into buffers they reuse, so a record may cross any
// number of chunk boundaries; CSV lines end with LF or CRLF, JSON lines with
// LF, CRLF counting as LF. Type inference needs every value of a column, so
// it is a running `CSVTypeGuess` fed by the first pass (ImportScan.swift).

import Foundation
import KuraEngine

/// One input row: its line number and its fields by column index.
struct ImportRow {
    var line: Int
    var fields: [ImportField?]
}

/// A field as read: CSV text (with whether it was quoted) or a JSON value.
enum ImportField {
    case csv(String, quoted: Bool)
    case json(JSON)
}

/// An error in the input, naming its line.
struct ImportError: Error {
    let line: Int
    let message: String
}

/// What the first pass over an input learned: column names, declared types,
/// the type evidence of untyped CSV columns, and the number of rows.
struct ImportData {
    var columns: [String] = []
    /// Types declared in a CSV header, or taken from the first JSON value.
    var declared: [ColumnType?] = []
    /// Line where a JSON column's type was decided.
    var decidedAt: [Int] = []
    /// CSV: what the values of each column seen so far allow.
    var guesses: [CSVTypeGuess] = []
    var rowCount = 0
    var isCSV = true
}

/// The type evidence of an untyped CSV column, one value at a time: every value
/// an integer gives integer; else every value a number, double; else every
/// value true/false (any case), bool; else (or no value at all) text.
struct CSVTypeGuess {
    var allInt = true, allNumber = true, allBool = true, any = false

    var type: ColumnType {
        if !any { return .text }
        if allInt { return .integer }
        if allNumber { return .double }
        if allBool { return .bool }
        return .text
    }

    mutating func add(_ b: UnsafeBufferPointer<UInt8>) {
        any = true
        guard allInt || allNumber || allBool else { return }
        if allInt && ImportReader.parseInt64(b) == nil { allInt = false }
        if allNumber && !allInt && !ImportReader.isPlainDecimal(b) && ImportReader.parseDouble(b) == nil { allNumber = false }
        if allBool && !(ImportReader.asciiLowercased(b, equals: "true") || ImportReader.asciiLowercased(b, equals: "false")) { allBool = false }
    }
}

/// Splits CSV bytes into records of fields, one record at a time, with the
/// line each record starts on. The fields of the current record live in one
/// reused byte buffer.
struct CSVRecordReader {
    let source: ImportSource
    private var line = 1
    /// The current record: the line it starts on; its fields' bytes, each
    /// followed by one separator byte but the last (a record without quotes
    /// is its line's bytes as they are, commas included); where each field
    /// ends; and whether it was quoted (`quoted` is filled only when
    /// `quotedKnown`: a record read by the fast path has no quoted field).
    private(set) var recordLine = 0
    private(set) var bytes: [UInt8] = []
    private(set) var ends: [Int] = []
    private var quoted: [Bool] = []
    private var quotedKnown = false

    init(_ source: ImportSource) { self.source = source }

    var count: Int { ends.count }
    /// Where field `i` starts in `bytes`: after the previous field's separator.
    private func start(_ i: Int) -> Int { i == 0 ? 0 : ends[i - 1] + 1 }
    func isEmpty(_ i: Int) -> Bool { ends[i] == start(i) }
    /// Whether field `i` was quoted (`""` is an empty string, an empty field null).
    func isQuoted(_ i: Int) -> Bool { quotedKnown && quoted[i] }
    func withField<T>(_ i: Int, _ body: (UnsafeBufferPointer<UInt8>) throws -> T) rethrows -> T {
        let start = start(i)
        return try bytes.withUnsafeBufferPointer { b in try body(UnsafeBufferPointer(rebasing: b[start..<ends[i]])) }
    }
    func text(_ i: Int) -> String { withField(i) { String(decoding: $0, as: UTF8.self) } }

    /// Reads the next record; false at the end of the input.
    /// - Throws: `ImportError` for bad quoting; `CLIError` if reading fails.
    mutating func next() throws -> Bool {
        let quote = UInt8(ascii: "\""), comma = UInt8(ascii: ","), lf = UInt8(ascii: "\n"), cr = UInt8(ascii: "\r")
        let s = source
        guard try s.peek() != nil else { return false }
        recordLine = line
        bytes.removeAll(keepingCapacity: true)
        ends.removeAll(keepingCapacity: true)
        quoted.removeAll(keepingCapacity: true)
        quotedKnown = false
        // Fast path: a record without quotes or carriage returns whose line
        // feed is held already, split at its commas as the loop below would,
        // its bytes copied in one step. Anything else consumes nothing here
        // and goes through the loop.
        var done = false
        s.consumeHeld { b in
            var i = 0
            while i < b.count {
                let c = b[i]
                if c == comma {
                    ends.append(i)
                } else if c == lf {
                    ends.append(i)
                    bytes.append(contentsOf: UnsafeBufferPointer(rebasing: b[0..<i]))
                    done = true
                    return i + 1
                } else if c == quote || c == cr {
                    break
                }
                i += 1
            }
            ends.removeAll(keepingCapacity: true)
            return 0
        }
        if done {
            line += 1
            return true
        }
        quotedKnown = true
        while true {
            // The separator after the previous field.
            if !ends.isEmpty { bytes.append(comma) }
            var isQuoted = false
            if try s.peek() == quote {
                isQuoted = true
                let open = line
                s.advance()
                while true {
                    s.take(into: &bytes) { $0 == quote || $0 == lf }
                    guard let c = try s.peek() else { throw ImportError(line: open, message: "a quoted field is never closed") }
                    if c == quote {
                        if try s.peek(1) == quote { bytes.append(quote); s.advance(2); continue }
                        s.advance()
                        break
                    }
                    if c == lf { line += 1 }
                    bytes.append(c)
                    s.advance()
                }
                if let c = try s.peek(), c != comma && c != lf && c != cr {
                    throw ImportError(line: line, message: "text after the closing quote of a field")
                }
            } else {
                while true {
                    s.take(into: &bytes) { $0 == comma || $0 == lf || $0 == cr || $0 == quote }
                    guard let c = try s.peek(), c != comma && c != lf else { break }
                    if c == cr {
                        let n = try s.peek(1)
                        if n == nil || n == lf { break }
                    }
                    if c == quote { throw ImportError(line: line, message: "a quote inside an unquoted field (quote the whole field and double the quote)") }
                    bytes.append(c)
                    s.advance()
                }
            }
            ends.append(bytes.count)
            quoted.append(isQuoted)
            if try s.peek() == comma { s.advance(); continue }
            if try s.peek() == cr { s.advance() }
            if try s.peek() == lf { s.advance(); line += 1 }
            break
        }
        return true
    }
}

/// The lines of a JSON lines input, one at a time, without the line feed and
/// without one carriage return before it.
struct JSONLineReader {
    let source: ImportSource
    private(set) var lineNumber = 0
    private(set) var bytes: [UInt8] = []

    init(_ source: ImportSource) { self.source = source }

    /// Reads the next line; false at the end of the input.
    mutating func next() throws -> Bool {
        let lf = UInt8(ascii: "\n")
        guard try source.peek() != nil else { return false }
        lineNumber += 1
        bytes.removeAll(keepingCapacity: true)
        while true {
            source.take(into: &bytes) { $0 == lf }
            guard let c = try source.peek() else { break }
            source.advance()
            if c == lf { break }
            bytes.append(c)
        }
        if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
        return true
    }

    /// Whether the line holds only spaces and tabs.
    var isBlank: Bool { bytes.allSatisfy { $0 == 0x20 || $0 == 0x09 } }
}

enum ImportReader {
    static let csvTypes: [String: ColumnType] = [
        "int64": .integer, "int": .integer, "integer": .integer,
        "double": .double, "float": .double, "real": .double,
        "string": .text, "text": .text,
        "bool": .bool, "boolean": .bool,
        "date": .date, "blob": .blob,
    ]

    // MARK: CSV

    /// The header's column names and declared types, or the error it holds.
    static func csvHeader(_ r: CSVRecordReader) -> Result<(columns: [String], declared: [ColumnType?]), ImportError> {
        var columns: [String] = [], declared: [ColumnType?] = []
        var seen = Set<String>()
        for i in 0..<r.count {
            var name = r.text(i)
            var type: ColumnType?
            if let colon = name.lastIndex(of: ":") {
                let t = name[name.index(after: colon)...].lowercased()
                guard let ct = csvTypes[t] else {
                    return .failure(ImportError(line: r.recordLine, message: "column \"\(name)\" has unknown type \"\(t)\" (use int64, double, string, bool or date)"))
                }
                type = ct
                name = String(name[..<colon])
            }
            name = name.trimmingCharacters(in: .whitespaces)
            guard !name.isEmpty else { return .failure(ImportError(line: r.recordLine, message: "the header has an empty column name")) }
            guard seen.insert(name).inserted else { return .failure(ImportError(line: r.recordLine, message: "column \"\(name)\" appears twice in the header")) }
            columns.append(name)
            declared.append(type)
        }
        return .success((columns, declared))
    }

    /// Whether the current record is an empty line, skipped when there is more
    /// than one column.
    static func isBlank(_ r: CSVRecordReader, columns: Int) -> Bool {
        r.count == 1 && r.isEmpty(0) && !r.isQuoted(0) && columns > 1
    }

    /// The error of a record whose field count is not the header's, if it is not.
    static func fieldCountError(_ r: CSVRecordReader, columns: Int) -> ImportError? {
        r.count == columns ? nil : ImportError(line: r.recordLine, message: "\(r.count) fields, but the header names \(columns) columns")
    }

    /// Field `i` of the current record converted to `type`: the same value or
    /// error as `value(field(r, i), ...)`, without the intermediate string for
    /// plain integers and text.
    static func csvValue(_ r: CSVRecordReader, _ i: Int, type: ColumnType, column: String, line: Int) throws(ImportError) -> Value {
        if r.isEmpty(i) && !r.isQuoted(i) { return .null }
        switch type {
        case .text:
            return .text(r.text(i))
        case .integer:
            if let n = r.withField(i, { parseInt64($0) }) { return .integer(n) }
        case .double:
            // Ends that are not whitespace: trimming (as `value` does) changes nothing.
            let plain = r.withField(i) { b in
                guard let f = b.first, let l = b.last else { return false }
                return f < 0x80 && l < 0x80 && f != 0x20 && l != 0x20 && f != 0x09 && l != 0x09
            }
            if plain, let d = r.withField(i, { parseDouble($0) }) { return .double(d) }
        default:
            break
        }
        return try value(.csv(r.text(i), quoted: r.isQuoted(i)), type: type, column: column, line: line, decidedAt: nil)
    }

    /// `Int64(String(decoding: b, as: UTF8.self))` without the string: an
    /// optional sign and one or more ASCII digits, nil on overflow.
    static func parseInt64(_ b: UnsafeBufferPointer<UInt8>) -> Int64? {
        var i = 0
        var negative = false
        if let f = b.first, f == UInt8(ascii: "-") || f == UInt8(ascii: "+") { negative = f == UInt8(ascii: "-"); i = 1 }
        guard i < b.count else { return nil }
        var n: Int64 = 0
        while i < b.count {
            let d = b[i] &- UInt8(ascii: "0")
            guard d < 10 else { return nil }
            let (m, o1) = n.multipliedReportingOverflow(by: 10)
            let (s, o2) = negative ? m.subtractingReportingOverflow(Int64(d)) : m.addingReportingOverflow(Int64(d))
            guard !o1 && !o2 else { return nil }
            n = s
            i += 1
        }
        return n
    }

    /// `Double(String(decoding: b, as: UTF8.self))` without the string: the
    /// standard library's parse is `strtod` in the C locale on the string's
    /// bytes, NUL-terminated, succeeding if it consumes up to the first NUL and
    /// rejecting leading whitespace; this calls `strtod` the same way on a
    /// copy on the stack. It takes the string path instead wherever that could
    /// differ: fields over 63 bytes, non-ASCII bytes, an `s` (the standard
    /// library reads "snan" itself), an out-of-range value (`errno` set), or a
    /// process locale whose decimal point is not ".".
    static func parseDouble(_ b: UnsafeBufferPointer<UInt8>) -> Double? {
        guard let f = b.first else { return nil }
        switch f {
        case 9, 10, 11, 12, 13, 32: return nil
        default: break
        }
        func viaString() -> Double? { Double(String(decoding: b, as: UTF8.self)) }
        guard b.count <= 63, cDecimalPoint, !b.contains(where: { $0 >= 0x80 || $0 | 0x20 == UInt8(ascii: "s") }) else {
            return viaString()
        }
        return withUnsafeTemporaryAllocation(of: CChar.self, capacity: 64) { buffer -> Double? in
            // Invariant: capacity 64 > b.count, so the copy and its NUL fit.
            let p = buffer.baseAddress!
            for i in 0..<b.count { p[i] = CChar(bitPattern: b[i]) }
            p[b.count] = 0
            var end: UnsafeMutablePointer<CChar>?
            errno = 0
            let d = strtod(p, &end)
            if errno != 0 { return viaString() }
            guard let end, end.pointee == 0 else { return nil }
            return d
        }
    }

    /// Whether `b` is a decimal number without an exponent, at most 63 bytes:
    /// an optional sign, then digits with at most one decimal point and at
    /// least one digit (`12`, `-0.5`, `.5`, `5.`). Every such field converts
    /// (`parseDouble` is not nil): `strtod` consumes all of it, and within 63
    /// bytes its magnitude is between 1e-62 and 1e63, so it neither overflows
    /// nor underflows. Type inference asks this first and calls `parseDouble`
    /// only for the rest, so a column of decimals is typed without converting
    /// each value twice (pass 2 converts it).
    static func isPlainDecimal(_ b: UnsafeBufferPointer<UInt8>) -> Bool {
        guard b.count <= 63, var i = b.indices.first else { return false }
        if b[i] == UInt8(ascii: "-") || b[i] == UInt8(ascii: "+") { i += 1 }
        var digits = 0, points = 0
        while i < b.count {
            let c = b[i]
            if c &- UInt8(ascii: "0") < 10 { digits += 1 }
            else if c == UInt8(ascii: ".") { points += 1 }
            else { return false }
            i += 1
        }
        return digits > 0 && points <= 1
    }

    /// Whether the process locale's decimal point is "." (as in the C locale
    /// the standard library parses numbers in), so that `strtod` agrees with it.
    static let cDecimalPoint: Bool = {
        guard let lc = localeconv(), let point = lc.pointee.decimal_point else { return false }
        return strcmp(point, ".") == 0
    }()

    /// Whether `b`, ASCII letters lowercased, is `word` (lowercase ASCII).
    static func asciiLowercased(_ b: UnsafeBufferPointer<UInt8>, equals word: StaticString) -> Bool {
        guard b.count == word.utf8CodeUnitCount else { return false }
        let w = word.utf8Start
        for i in 0..<b.count {
            let c = b[i] >= 0x41 && b[i] <= 0x5A ? b[i] | 0x20 : b[i]
            guard c == w[i] else { return false }
        }
        return true
    }

    // MARK: JSON lines

    /// The row on the current line (nil for a blank line). A key not seen
    /// before becomes a new column, or, with `fixedColumns`, an error (the
    /// second pass knows every column from the first).
    static func jsonRow(_ l: JSONLineReader, _ data: inout ImportData, index: inout [String: Int], fixedColumns: Bool) throws(ImportError) -> ImportRow? {
        if l.isBlank { return nil }
        let lineNumber = l.lineNumber
        let value: JSON
        do { value = try JSON.parse(String(decoding: l.bytes, as: UTF8.self)) } catch {
            throw ImportError(line: lineNumber, message: "not valid JSON: \(error.message) (at byte \(error.offset + 1))")
        }
        guard case .object(let members) = value else {
            throw ImportError(line: lineNumber, message: "expected a JSON object ({\"name\": value, ...})")
        }
        var row = ImportRow(line: lineNumber, fields: Array(repeating: nil, count: data.columns.count))
        var keys = Set<String>()
        for (k, v) in members {
            guard keys.insert(k).inserted else { throw ImportError(line: lineNumber, message: "key \"\(k)\" appears twice") }
            if k == "_entity" { continue }
            let c: Int
            if let i = index[k] { c = i } else {
                guard !fixedColumns else { throw ImportError(line: lineNumber, message: "key \"\(k)\" was not in the file a moment ago; the file changed while it was being imported") }
                c = data.columns.count
                index[k] = c
                data.columns.append(k)
                data.declared.append(nil)
                data.decidedAt.append(0)
                row.fields.append(nil)
            }
            switch v {
            case .null: continue
            case .array, .object:
                throw ImportError(line: lineNumber, message: "\"\(k)\" holds a nested \(v.isArray ? "array" : "object"); values must be numbers, strings, booleans or null")
            default: break
            }
            if data.declared[c] == nil && k != "_rowid" {
                data.declared[c] = v.columnType
                data.decidedAt[c] = lineNumber
            }
            row.fields[c] = .json(v)
        }
        return row
    }

    // MARK: Conversion

    /// Converts a field to a value of `type`, or throws naming the line and column.
    static func value(_ f: ImportField?, type: ColumnType, column: String, line: Int, decidedAt: Int?) throws(ImportError) -> Value {
        guard let f else { return .null }
        func mismatch(_ what: String) -> ImportError {
            var m = "\"\(column)\" is \(what), but the column holds \(typeName(type))"
            if let d = decidedAt, d > 0 { m += " (its type comes from its first value, on line \(d))" }
            return ImportError(line: line, message: m)
        }
        switch f {
        case .csv(let t, _):
            switch type {
            case .text: return .text(t)
            case .integer:
                guard let n = Int64(t.trimmingCharacters(in: .whitespaces)) else { throw mismatch("'\(t)'") }
                return .integer(n)
            case .double:
                guard let d = Double(t.trimmingCharacters(in: .whitespaces)) else { throw mismatch("'\(t)'") }
                return .double(d)
            case .bool:
                switch t.trimmingCharacters(in: .whitespaces).lowercased() {
                case "true", "1", "yes": return .bool(true)
                case "false", "0", "no": return .bool(false)
                default: throw mismatch("'\(t)'")
                }
            case .date:
                guard let d = parseISODate(t.trimmingCharacters(in: .whitespaces)) else { throw mismatch("'\(t)', not an ISO 8601 date") }
                return .double(d)
            case .blob, .external:
                guard let bytes = parseHex(t) else { throw mismatch("'\(t)', not hex bytes") }
                return .blob(bytes)
            }
        case .json(let j):
            switch (j, type) {
            case (.null, _): return .null
            case (.int(let n), .integer): return .integer(n)
            case (.int(let n), .double): return .double(Double(n))
            case (.double(let d), .double): return .double(d)
            case (.string(let s), .text): return .text(s)
            case (.bool(let b), .bool): return .bool(b)
            case (.int(let n), .date): return .double(Double(n))
            case (.double(let d), .date): return .double(d)
            case (.string(let s), .date):
                guard let d = parseISODate(s) else { throw mismatch("\"\(s)\", not an ISO 8601 date") }
                return .double(d)
            case (.string(let s), .blob), (.string(let s), .external):
                guard let bytes = parseHex(s) else { throw mismatch("\"\(s)\", not hex bytes") }
                return .blob(bytes)
            default:
                throw mismatch(j.typeDescription)
            }
        }
    }

    static func typeName(_ t: ColumnType) -> String {
        switch t {
        case .integer: return "int64 values"
        case .double: return "double values"
        case .text: return "strings"
        case .bool: return "booleans"
        case .date: return "dates"
        case .blob, .external: return "blobs"
        }
    }

    static func parseHex(_ s: String) -> [UInt8]? {
        let chars = Array(s.utf8)
        guard chars.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(chars.count / 2)
        var i = 0
        while i < chars.count {
            guard let b = UInt8(String(decoding: chars[i..<i + 2], as: UTF8.self), radix: 16) else { return nil }
            out.append(b)
            i += 2
        }
        return out
    }
}

extension JSON {
    var isArray: Bool { if case .array = self { return true } else { return false } }

    /// The column type a first value gives its column.
    var columnType: ColumnType? {
        switch self {
        case .int: return .integer
        case .double: return .double
        case .string: return .text
        case .bool: return .bool
        default: return nil
        }
    }

    var typeDescription: String {
        switch self {
        case .null: return "null"
        case .bool(let b): return "a boolean (\(b))"
        case .int(let n): return "an integer (\(n))"
        case .double(let d): return "a non-integer number (\(d))"
        case .string(let s): return "a string (\"\(s.count > 40 ? String(s.prefix(40)) + "..." : s)\")"
        case .array: return "an array"
        case .object: return "an object"
        }
    }
}
