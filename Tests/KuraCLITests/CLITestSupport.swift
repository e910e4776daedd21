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

    /// Runs `kura ARGS`, returning its exit status and output.
    static func run(_ args: [String], stdin: String? = nil) throws -> Result {
        guard let url else { throw XCTSkip("kura binary not found beside the test bundle") }
        let p = Process()
        p.executableURL = url
        p.arguments = args
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
        let o = out.fileHandleForReading.readDataToEndOfFile()
        let e = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return Result(status: p.terminationStatus, stdout: String(decoding: o, as: UTF8.self), stderr: String(decoding: e, as: UTF8.self))
    }
}
