import Foundation
import XCTest

/// Runs the `kura` binary built beside the test bundle.
enum KuraTool {
    static var url: URL? {
        let candidates = [
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent(),
            Bundle(for: Marker.self).bundleURL.deletingLastPathComponent(),
        ]
        for dir in candidates {
            let u = dir.appendingPathComponent("kura")
            if FileManager.default.isExecutableFile(atPath: u.path) { return u }
        }
        return nil
    }

    final class Marker {}

    struct Result {
        let status: Int32
        let stdout: String
        let stderr: String
    }

    /// Runs `kura ARGS` (in directory `cwd`, if given, with `environment` added
    /// to this process's), returning its exit status and output.
    static func run(_ args: [String], stdin: String? = nil, cwd: String? = nil, environment: [String: String] = [:]) throws -> Result {
        guard let url else { throw XCTSkip("kura binary not found beside the test bundle") }
        let p = Process()
        if !environment.isEmpty {
            p.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        p.executableURL = url
        p.arguments = args
        if let cwd { p.currentDirectoryURL = URL(fileURLWithPath: cwd) }
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        if let stdin {
            let inp = Pipe()
            p.standardInput = inp
            inp.fileHandleForWriting.write(stdin.data(using: .utf8)!)
            inp.fileHandleForWriting.closeFile()
        }
        try p.run()
        // Read stderr on another thread so that neither pipe can fill up and
        // block the child.
        let errData = DataBox()
        let group = DispatchGroup()
        group.enter()
        DispatchQueue.global().async {
            errData.data = err.fileHandleForReading.readDataToEndOfFile()
            group.leave()
        }
        let o = out.fileHandleForReading.readDataToEndOfFile()
        group.wait()
        let e = errData.data
        p.waitUntilExit()
        return Result(status: p.terminationStatus, stdout: String(decoding: o, as: UTF8.self), stderr: String(decoding: e, as: UTF8.self))
    }
}

/// Holds data read on another thread (the reader finishes before it is used).
final class DataBox: @unchecked Sendable {
    var data = Data()
}

/// A temporary directory, removed when the value is released.
final class TemporaryDirectory {
    let path: String

    init() throws {
        path = NSTemporaryDirectory() + "kura-cli-tests-\(getpid())-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    func file(_ name: String) -> String { path + "/" + name }

    func write(_ name: String, _ text: String) throws {
        try text.write(toFile: file(name), atomically: true, encoding: .utf8)
    }

    func exists(_ name: String) -> Bool { FileManager.default.fileExists(atPath: file(name)) }

    func bytes(_ name: String) -> Data? { FileManager.default.contents(atPath: file(name)) }
}

/// Replaces the parts of `kura` output that differ from store to store (the
/// random database ID, log generation and salts) with fixed markers.
func masked(_ s: String) -> String {
    var t = s
    for (pattern, replacement) in [
        ("database ID( +|: +)0x[0-9a-f]+", "database ID$1<ID>"),
        ("generation [0-9]+", "generation <G>"),
        ("salts 0x[0-9a-f]+ 0x[0-9a-f]+", "salts <S>"),
        ("\"databaseID\":\"0x[0-9a-f]+\"", "\"databaseID\":\"<ID>\""),
    ] {
        let re = try! NSRegularExpression(pattern: pattern)
        t = re.stringByReplacingMatches(in: t, range: NSRange(t.startIndex..., in: t), withTemplate: replacement)
    }
    return t
}

/// Parses one JSON document (fails the test if it is not JSON).
func parseJSON(_ s: String, file: StaticString = #filePath, line: UInt = #line) -> Any? {
    do { return try JSONSerialization.jsonObject(with: Data(s.utf8), options: [.fragmentsAllowed]) } catch {
        XCTFail("not JSON: \(s.prefix(300))", file: file, line: line)
        return nil
    }
}
