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

import Foundation
import KuraEngine

/// One input row: its line number and its fields by column index.
struct ImportRow {
    let line: Int
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

/// What an input file holds: column names (and declared types), rows.
struct ImportData {
    var columns: [String] = []
    /// Types declared in a CSV header, or taken from the first JSON value.
    var declared: [ColumnType?] = []
    /// Line where a JSON column's type was decided.
    var decidedAt: [Int] = []
    var rows: [ImportRow] = []
    var isCSV = true
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

    static func readCSV(_ text: String) throws(ImportError) -> ImportData {
        var records = try csvRecords(Array(text.utf8))
        guard !records.isEmpty else { throw ImportError(line: 1, message: "the file is empty; a CSV file starts with a header line") }
        let header = records.removeFirst()
        var data = ImportData()
        var seen = Set<String>()
        for f in header.fields {
            var name = f.text
            var type: ColumnType?
            if let colon = name.lastIndex(of: ":") {
                let t = name[name.index(after: colon)...].lowercased()
                guard let ct = csvTypes[t] else {
                    throw ImportError(line: header.line, message: "column \"\(name)\" has unknown type \"\(t)\" (use int64, double, string, bool or date)")
                }
                type = ct
                name = String(name[..<colon])
            }
            name = name.trimmingCharacters(in: .whitespaces)
            guard !name.isEmpty else { throw ImportError(line: header.line, message: "the header has an empty column name") }
            guard seen.insert(name).inserted else { throw ImportError(line: header.line, message: "column \"\(name)\" appears twice in the header") }
            data.columns.append(name)
            data.declared.append(type)
        }
        for r in records {
            if r.fields.count == 1 && r.fields[0].text.isEmpty && !r.fields[0].quoted && data.columns.count > 1 { continue }
            guard r.fields.count == data.columns.count else {
                throw ImportError(line: r.line, message: "\(r.fields.count) fields, but the header names \(data.columns.count) columns")
            }
            data.rows.append(ImportRow(line: r.line, fields: r.fields.map { f in
                f.text.isEmpty && !f.quoted ? nil : .csv(f.text, quoted: f.quoted)
            }))
        }
        return data
    }

    struct CSVField {
        var text: String
        var quoted: Bool
    }

    /// Splits CSV bytes into records of fields, with the line each starts on.
    static func csvRecords(_ b: [UInt8]) throws(ImportError) -> [(line: Int, fields: [CSVField])] {
        var out: [(line: Int, fields: [CSVField])] = []
        var i = 0
        var line = 1
        let quote = UInt8(ascii: "\""), comma = UInt8(ascii: ","), lf = UInt8(ascii: "\n"), cr = UInt8(ascii: "\r")
        if b.count >= 3 && b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF { i = 3 }
        while i < b.count {
            let start = line
            var fields: [CSVField] = []
            while true {
                var bytes: [UInt8] = []
                var quoted = false
                if i < b.count && b[i] == quote {
                    quoted = true
                    let open = line
                    i += 1
                    while true {
                        guard i < b.count else { throw ImportError(line: open, message: "a quoted field is never closed") }
                        if b[i] == quote {
                            if i + 1 < b.count && b[i + 1] == quote { bytes.append(quote); i += 2; continue }
                            i += 1
                            break
                        }
                        if b[i] == lf { line += 1 }
                        bytes.append(b[i])
                        i += 1
                    }
                    if i < b.count && b[i] != comma && b[i] != lf && b[i] != cr {
                        throw ImportError(line: line, message: "text after the closing quote of a field")
                    }
                } else {
                    while i < b.count && b[i] != comma && b[i] != lf && !(b[i] == cr && (i + 1 == b.count || b[i + 1] == lf)) {
                        if b[i] == quote { throw ImportError(line: line, message: "a quote inside an unquoted field (quote the whole field and double the quote)") }
                        bytes.append(b[i])
                        i += 1
                    }
                }
                fields.append(CSVField(text: String(decoding: bytes, as: UTF8.self), quoted: quoted))
                if i < b.count && b[i] == comma { i += 1; continue }
                if i < b.count && b[i] == cr { i += 1 }
                if i < b.count && b[i] == lf { i += 1; line += 1 }
                break
            }
            out.append((start, fields))
        }
        return out
    }

    /// The type an untyped CSV column gets from its values.
    static func inferCSVType(_ data: ImportData, column c: Int) -> ColumnType {
        var allInt = true, allNumber = true, allBool = true, any = false
        for r in data.rows {
            guard case .csv(let t, _)? = r.fields[c] else { continue }
            any = true
            if allInt && Int64(t) == nil { allInt = false }
            if allNumber && Double(t) == nil { allNumber = false }
            if allBool && !["true", "false"].contains(t.lowercased()) { allBool = false }
            if !allInt && !allNumber && !allBool { break }
        }
        if !any { return .text }
        if allInt { return .integer }
        if allNumber { return .double }
        if allBool { return .bool }
        return .text
    }

    // MARK: JSON lines

    static func readJSONLines(_ text: String) throws(ImportError) -> ImportData {
        var data = ImportData()
        data.isCSV = false
        var index: [String: Int] = [:]
        var lineNumber = 0
        for raw in text.split(separator: "\n", omittingEmptySubsequences: false) {
            lineNumber += 1
            let line = raw.hasSuffix("\r") ? raw.dropLast() : raw
            if line.allSatisfy({ $0 == " " || $0 == "\t" }) { continue }
            let value: JSON
            do { value = try JSON.parse(String(line)) } catch {
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
            data.rows.append(row)
        }
        return data
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
