// Tests the parser and formatter against real-world NSPredicate format strings
// collected from public projects (../shared/corpus/predicates.tsv) and strings that
// Foundation rejects (predicates-invalid.tsv). See ../shared/corpus/README.md.

import XCTest
@testable import KuraEngine

final class PredicateCorpusTests: XCTestCase {
    struct Line {
        var number: Int
        var format: String
        var argumentKinds: String
    }

    /// The corpus directory: the repository root is three levels above this file.
    private func corpusFile(_ name: String) throws -> URL {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let url = root.appendingPathComponent("../shared/corpus/" + name).standardized
        guard FileManager.default.fileExists(atPath: url.path) else {
            throw XCTSkip("corpus file \(url.path) not found; the predicate corpus lives in ../shared/corpus next to the repository")
        }
        return url
    }

    private func lines(_ name: String) throws -> [Line] {
        let text = try String(contentsOf: try corpusFile(name), encoding: .utf8)
        var out: [Line] = []
        for (i, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() where i > 0 {
            let columns = raw.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            guard let format = columns.first, !format.isEmpty else { continue }
            out.append(Line(number: i + 1, format: format, argumentKinds: columns.count > 1 ? columns[1] : "-"))
        }
        return out
    }

    /// The placeholders of a format string outside quotes, in order (`%@`, `%K`, `%d`, `%lu`, ...).
    static func placeholders(in format: String) -> [String] {
        var result: [String] = []
        let chars = Array(format)
        var i = 0
        var quote: Character?
        while i < chars.count {
            let c = chars[i]
            if let q = quote {
                if c == "\\" { i += 2; continue }
                if c == q { quote = nil }
                i += 1
                continue
            }
            if c == "'" || c == "\"" { quote = c; i += 1; continue }
            if c == "%", i + 1 < chars.count {
                var j = i + 1
                if chars[j] == "%" { i += 2; continue }
                while j < chars.count, "hlqLztj".contains(chars[j]) { j += 1 }
                if j < chars.count {
                    result.append(String(chars[i...j]))
                    i = j + 1
                    continue
                }
            }
            i += 1
        }
        return result
    }

    /// Placeholder arguments for a corpus line, guided by its argument-kinds column
    /// (`%@=date[...]`, `%@=collection[...]`, `%K=keypath[#keyPath(Person.age)]`).
    static func arguments(for line: Line) -> [PredicateArgument] {
        let kinds = line.argumentKinds == "-" ? [] : line.argumentKinds.components(separatedBy: " | ")[0].components(separatedBy: "; ")
        var args: [PredicateArgument] = []
        for (i, placeholder) in placeholders(in: line.format).enumerated() {
            let kind = i < kinds.count ? kinds[i] : ""
            switch placeholder.last {
            case "K":
                args.append(.keyPath(keyPathName(kind) ?? "key\(i)"))
            case "@":
                if kind.contains("=collection") { args.append([1, 2]) }
                else if kind.contains("=date") { args.append(.date(secondsSinceReferenceDate: 700_000_000)) }
                else if kind.contains("=integer") || kind.contains("=number") { args.append(7) }
                else if kind.contains("=data") { args.append(.blob([1, 2, 3])) }
                else { args.append(.text("text\(i)")) }
            case "f", "e", "g":
                args.append(40.5)
            case "s":
                args.append("text")
            default:
                args.append(7)
            }
        }
        return args
    }

    /// A usable key path from a kinds entry: `@"Record1.Name"` -> `Record1.Name`,
    /// `#keyPath(Person.age)` -> `age`.
    private static func keyPathName(_ kind: String) -> String? {
        guard let open = kind.firstIndex(of: "["), let close = kind.lastIndex(of: "]"), open < close else { return nil }
        var inner = String(kind[kind.index(after: open)..<close])
        if inner.hasPrefix("#keyPath("), inner.hasSuffix(")") {
            inner = String(inner.dropFirst("#keyPath(".count).dropLast())
            return inner.split(separator: ".").dropFirst().joined(separator: ".")
        }
        if inner.hasPrefix("@") { inner.removeFirst() }
        if inner.hasPrefix("\""), inner.hasSuffix("\""), inner.count >= 2 {
            return String(inner.dropFirst().dropLast())
        }
        return nil
    }

    private static func mayBeUnsupported(_ format: String) -> Bool {
        format.range(of: "FUNCTION(", options: .caseInsensitive) != nil || format.contains("isKindOfClass:")
    }

    func testEveryCorpusPredicateParsesAndRoundTrips() throws {
        let corpus = try lines("predicates.tsv")
        XCTAssertGreaterThan(corpus.count, 250)
        var parsed = 0, unsupported = 0
        for line in corpus {
            let args = Self.arguments(for: line)
            let predicate: KuraPredicate
            do {
                predicate = try KuraPredicate(format: line.format, arguments: args)
            } catch {
                if error.code == .unsupported, Self.mayBeUnsupported(line.format) {
                    unsupported += 1
                } else {
                    XCTFail("line \(line.number): \(line.format) with \(args): \(error)")
                }
                continue
            }
            parsed += 1
            let formatted = predicate.predicateFormat
            do {
                let reparsed = try KuraPredicate(format: formatted)
                XCTAssertEqual(reparsed, predicate, "line \(line.number): \(line.format) -> \(formatted)")
                XCTAssertEqual(reparsed.predicateFormat, formatted, "line \(line.number): formatting is not stable")
            } catch {
                XCTFail("line \(line.number): \(line.format) formatted as \(formatted), which does not parse: \(error)")
            }
        }
        XCTAssertLessThanOrEqual(unsupported, 5)
        XCTAssertEqual(parsed + unsupported, corpus.count)
    }

    func testEveryInvalidCorpusPredicateIsRejected() throws {
        let corpus = try lines("predicates-invalid.tsv")
        XCTAssertFalse(corpus.isEmpty)
        for line in corpus {
            let args = Self.arguments(for: line)
            XCTAssertThrowsError(try KuraPredicate(format: line.format, arguments: args), "line \(line.number): \(line.format)") { error in
                XCTAssertEqual((error as? KuraError)?.code, .syntax, "line \(line.number): \(line.format): \(error)")
            }
        }
    }
}
