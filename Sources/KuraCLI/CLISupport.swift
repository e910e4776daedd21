// CLISupport: what every command shares — argument parsing, exit codes, errors
// on stderr, buffered output, and formatting of values.
//
// Exit codes (documented in `kura --help`):
//   0  ok
//   1  problems found (check), no match (query), a data error in an imported file,
//      or an operation that could not be done now (checkpoint postponed)
//   2  usage error: unknown command or option, missing or bad argument, unknown
//      entity or column, predicate syntax
//   3  cannot read the file: missing, unreadable, not a Kura store, too damaged
//      for the command, or busy

import Foundation
import KuraEngine

enum ExitCode {
    static let ok: Int32 = 0
    static let problems: Int32 = 1
    static let usage: Int32 = 2
    static let cannotRead: Int32 = 3
}

/// An error a command reports on stderr before exiting with `code`.
struct CLIError: Error {
    let code: Int32
    let message: String

    static func usage(_ message: String) -> CLIError { CLIError(code: ExitCode.usage, message: message) }
    static func cannotRead(_ message: String) -> CLIError { CLIError(code: ExitCode.cannotRead, message: message) }
    static func problems(_ message: String) -> CLIError { CLIError(code: ExitCode.problems, message: message) }
}

/// Buffered standard output (one write per 64 KiB).
final class Output: @unchecked Sendable {
    // @unchecked Sendable: the tool is single-threaded; only the main thread writes.
    private var buffer: [UInt8] = []

    func write(_ s: String) {
        buffer.append(contentsOf: s.utf8)
        if buffer.count >= 1 << 16 { flush() }
    }

    func line(_ s: String = "") {
        write(s)
        write("\n")
    }

    func flush() {
        guard !buffer.isEmpty else { return }
        buffer.withUnsafeBytes { b in
            var done = 0
            while done < b.count {
                let n = Foundation.write(1, b.baseAddress! + done, b.count - done)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                done += n
            }
        }
        buffer.removeAll(keepingCapacity: true)
    }
}

let out = Output()

/// Writes `message` to stderr.
func printError(_ message: String) {
    out.flush()
    FileHandle.standardError.write(Data((message.hasSuffix("\n") ? message : message + "\n").utf8))
}

/// Runs a command body, turning thrown errors into messages and exit codes.
func runCommand(_ name: String, _ body: () throws -> Int32) -> Int32 {
    do {
        let code = try body()
        out.flush()
        return code
    } catch let e as CLIError {
        printError("kura \(name): \(e.message)")
        return e.code
    } catch let e as KuraError {
        printError("kura \(name): \(describe(e))")
        return exitCode(for: e)
    } catch {
        printError("kura \(name): \(error)")
        return ExitCode.cannotRead
    }
}

/// A KuraError as one sentence that names the file and page.
func describe(_ e: KuraError) -> String {
    var s = e.message
    if let page = e.page { s += " (page \(page)" + (e.path.map { " of \($0)" } ?? "") + ")" }
    else if let path = e.path { s += " (\(path))" }
    if let offset = e.offset, e.page == nil { s += " [at character \(offset) of the predicate]" }
    return s
}

/// Exit code for an engine error: arguments at fault are usage errors; the
/// file at fault is "cannot read".
func exitCode(for e: KuraError) -> Int32 {
    switch e.code {
    case .syntax, .notFound, .invalidArgument, .typeMismatch, .unsupported, .alreadyExists, .tooBig, .constraintViolation:
        return ExitCode.usage
    default:
        return ExitCode.cannotRead
    }
}

// MARK: Arguments

/// What a command accepts.
struct CommandSpec {
    let name: String
    let help: String
    /// Options that take a value (`--limit N`), without the dashes.
    var valueOptions: Set<String> = []
    /// Options without a value (`--json`).
    var flags: Set<String> = []
    /// How many positional arguments are allowed.
    var positional: ClosedRange<Int>
}

/// Parsed arguments of one command.
struct Arguments {
    var positional: [String] = []
    var options: [String: [String]] = [:]

    func has(_ name: String) -> Bool { options[name] != nil }
    func value(_ name: String) -> String? { options[name]?.last }
    func values(_ name: String) -> [String] { options[name] ?? [] }

    /// A non-negative integer option.
    func int(_ name: String, min: Int = 0) throws -> Int? {
        guard let v = value(name) else { return nil }
        guard let n = Int(v), n >= min else { throw CLIError.usage("--\(name) needs an integer >= \(min), got '\(v)'") }
        return n
    }
}

/// Parses `args` for `spec`. Returns nil when `--help` was asked for (the help is
/// printed). Throws a usage error naming the argument at fault.
func parseArguments(_ args: [String], _ spec: CommandSpec) throws -> Arguments? {
    var a = Arguments()
    var i = 0
    var onlyPositional = false
    while i < args.count {
        let arg = args[i]
        i += 1
        if onlyPositional || !arg.hasPrefix("-") || arg == "-" {
            a.positional.append(arg)
            continue
        }
        if arg == "--" { onlyPositional = true; continue }
        if arg == "--help" || arg == "-h" {
            out.line(spec.help)
            out.flush()
            return nil
        }
        var name = String(arg.drop(while: { $0 == "-" }))
        var inline: String?
        if let eq = name.firstIndex(of: "=") {
            inline = String(name[name.index(after: eq)...])
            name = String(name[..<eq])
        }
        if spec.flags.contains(name) {
            if inline != nil { throw CLIError.usage("option --\(name) takes no value\n\n" + spec.help) }
            a.options[name, default: []].append("")
        } else if spec.valueOptions.contains(name) {
            let v: String
            if let inline { v = inline } else {
                guard i < args.count else { throw CLIError.usage("option --\(name) needs a value\n\n" + spec.help) }
                v = args[i]
                i += 1
            }
            a.options[name, default: []].append(v)
        } else {
            throw CLIError.usage("unknown option '\(arg)'\n\n" + spec.help)
        }
    }
    guard spec.positional.contains(a.positional.count) else {
        if a.positional.count < spec.positional.lowerBound {
            throw CLIError.usage("missing argument\n\n" + spec.help)
        }
        throw CLIError.usage("unexpected argument '\(a.positional[spec.positional.upperBound])'\n\n" + spec.help)
    }
    return a
}

/// Checks that `path` names an existing regular file (exit 3 otherwise).
func requireStoreFile(_ path: String) throws {
    var isDir: ObjCBool = false
    guard FileManager.default.fileExists(atPath: path, isDirectory: &isDir) else {
        throw CLIError.cannotRead("cannot open \(path): no such file")
    }
    if isDir.boolValue { throw CLIError.cannotRead("cannot open \(path): it is a directory, not a store file") }
    guard FileManager.default.isReadableFile(atPath: path) else {
        throw CLIError.cannotRead("cannot open \(path): permission denied")
    }
}

/// Opens a store for raw inspection (exit 3 if it cannot be read as a store).
func openRaw(_ path: String) throws -> RawStore {
    try requireStoreFile(path)
    do throws(KuraError) { return try RawStore(path: path) } catch {
        throw CLIError.cannotRead("cannot read \(path) as a Kura store: \(describe(error))")
    }
}

/// Opens a store through the engine without ever writing to it (no `-wal` is
/// created; commits and checkpoints are impossible).
func openReadOnly(_ path: String) throws -> Database {
    try requireStoreFile(path)
    var options = Database.Options()
    options.createIfMissing = false
    options.fileSystem = ReadOnlyFileSystem()
    options.cacheSize = 8 << 20
    do throws(KuraError) { return try Database(path: path, options: options) } catch {
        throw CLIError.cannotRead("cannot open \(path): \(describe(error))" + (error.code == .corrupt ? "; `kura check` shows the damage" : ""))
    }
}

// MARK: Formatting

func hex(_ v: UInt64) -> String { "0x" + String(v, radix: 16) }
func hex32(_ v: UInt32) -> String { "0x" + String(v, radix: 16) }

func hexBytes(_ b: [UInt8]) -> String {
    b.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined(separator: " ")
}

func percent(_ f: Double) -> String { String(Int((f * 100).rounded())) + "%" }

/// Pads `s` on the right to `width` characters.
func pad(_ s: String, _ width: Int) -> String {
    s.count >= width ? s : s + String(repeating: " ", count: width - s.count)
}

/// Pads `s` on the left to `width` characters.
func lpad(_ s: String, _ width: Int) -> String {
    s.count >= width ? s : String(repeating: " ", count: width - s.count) + s
}

/// Formats rows as aligned columns (numbers right-aligned).
func table(_ header: [String], _ rows: [[String]], rightAligned: Set<Int> = []) -> [String] {
    var widths = header.map(\.count)
    for r in rows { for (i, c) in r.enumerated() where i < widths.count { widths[i] = max(widths[i], c.count) } }
    func format(_ r: [String]) -> String {
        var parts: [String] = []
        for (i, c) in r.enumerated() {
            let last = i == r.count - 1
            parts.append(rightAligned.contains(i) ? lpad(c, widths[i]) : (last ? c : pad(c, widths[i])))
        }
        var s = parts.joined(separator: "  ")
        while s.hasSuffix(" ") { s.removeLast() }
        return s
    }
    return [format(header)] + rows.map(format)
}

/// Seconds since 2001-01-01 as an ISO 8601 string (UTC).
func isoDate(_ seconds: Double) -> String {
    guard seconds.isFinite, abs(seconds) < 1e15 else { return String(seconds) }
    let f = ISO8601DateFormatter()
    f.timeZone = TimeZone(identifier: "UTC")
    if seconds != seconds.rounded() { f.formatOptions = [.withInternetDateTime, .withFractionalSeconds] }
    return f.string(from: Date(timeIntervalSinceReferenceDate: seconds))
}

/// Parses an ISO 8601 date (`2024-01-31`, `2024-01-31T12:00:00Z`, with or
/// without fractional seconds or a numeric offset) into seconds since 2001.
func parseISODate(_ s: String) -> Double? {
    let f = ISO8601DateFormatter()
    f.timeZone = TimeZone(identifier: "UTC")
    for options: ISO8601DateFormatter.Options in [[.withInternetDateTime], [.withInternetDateTime, .withFractionalSeconds], [.withFullDate]] {
        f.formatOptions = options
        if let d = f.date(from: s) { return d.timeIntervalSinceReferenceDate }
    }
    return nil
}

/// A value as text for people: text in quotes, dates in ISO 8601.
func display(_ v: Value, type: ColumnType?) -> String {
    if type == .date, let d = v.doubleValue { return isoDate(d) }
    return v.description
}

/// A value as JSON: dates as ISO 8601 strings, blobs as hex strings.
func json(_ v: Value, type: ColumnType?) -> JSON {
    switch v {
    case .null: return .null
    case .bool(let b): return .bool(b)
    case .integer(let i): return type == .date ? .string(isoDate(Double(i))) : .int(i)
    case .double(let d): return type == .date ? .string(isoDate(d)) : .double(d)
    case .text(let s): return .string(s)
    case .blob(let b): return .string(b.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined())
    }
}

/// Names of a row's values: the schema's columns, else positions.
func columnNames(_ schema: TableSchema?, count: Int) -> [String] {
    var names = schema?.columns.map(\.name) ?? []
    while names.count < count { names.append(String(names.count)) }
    return names
}

/// Prints `message` to stderr and exits with `code`.
func fail(_ message: String, code: Int32) -> Never {
    printError(message)
    exit(code)
}
