// Harness: clocks, samples and medians, memory readings, files — the parts of
// kura-bench that know nothing about any engine.

import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Seconds on a monotonic clock.
func now() -> Double {
    var t = timespec()
    clock_gettime(CLOCK_MONOTONIC, &t)
    return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
}

/// Runs `body` once and returns its result and how long it took in seconds.
func timed<T>(_ body: () throws -> T) rethrows -> (T, Double) {
    let start = now()
    let result = try body()
    return (result, now() - start)
}

func medianOf(_ xs: [Double]) -> Double {
    precondition(!xs.isEmpty, "median of no samples")
    let s = xs.sorted()
    return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
}

/// A 64-bit generator with a fixed seed, so every engine sees the same data
/// and the same query sequence, run after run.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// `VmHWM` (peak resident set) and `VmRSS` of this process in bytes, from
/// /proc/self/status; nil where there is no /proc (macOS).
func processMemory() -> (peak: Int, current: Int)? {
    guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return nil }
    var peak: Int?
    var current: Int?
    for line in text.split(separator: "\n") {
        let parts = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
        guard parts.count >= 2, let kib = Int(parts[1]) else { continue }
        if parts[0] == "VmHWM:" { peak = kib * 1024 }
        if parts[0] == "VmRSS:" { current = kib * 1024 }
    }
    guard let peak, let current else { return nil }
    return (peak, current)
}

/// Size of a file in bytes, 0 if it does not exist.
func fileSize(_ path: String) -> Int {
    var st = stat()
    return stat(path, &st) == 0 ? Int(st.st_size) : 0
}

/// Bytes a store occupies: the main file and its companions (log, shared memory).
struct StoreSize {
    var main: Int
    var total: Int
    init(path: String, companions: [String]) {
        main = fileSize(path)
        total = main + companions.reduce(0) { $0 + fileSize(path + $1) }
    }
}

/// Removes a store and its companion files.
func removeStore(_ path: String) {
    for suffix in ["", "-wal", "-shm", "-journal"] { unlink(path + suffix) }
}

/// The path of this executable (to spawn it again for W11).
func executablePath() -> String {
    #if os(Linux)
    if let p = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") { return p }
    #endif
    return Bundle.main.executablePath ?? CommandLine.arguments[0]
}

/// Reads a whole text file (first line of /proc files, CPU model, ...).
func firstLine(of path: String, containing key: String) -> String? {
    guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
    return text.split(separator: "\n").first { $0.hasPrefix(key) }.map(String.init)
}

func formatSeconds(_ s: Double) -> String {
    if s >= 100 { return String(format: "%.1f s", s) }
    if s >= 1 { return String(format: "%.3f s", s) }
    if s >= 1e-3 { return String(format: "%.2f ms", s * 1e3) }
    return String(format: "%.2f us", s * 1e6)
}

func formatBytes(_ b: Double) -> String {
    String(format: "%.1f MiB", b / 1_048_576)
}

func formatRate(_ r: Double) -> String {
    if r >= 1e6 { return String(format: "%.2fM/s", r / 1e6) }
    if r >= 1e3 { return String(format: "%.1fk/s", r / 1e3) }
    return String(format: "%.0f/s", r)
}

/// Standard error, unbuffered, for progress lines.
func progress(_ s: String) {
    FileHandle.standardError.write((s + "\n").data(using: .utf8)!)
}

/// Runs `body` on a new thread (not a pool thread: W9 needs its three threads
/// running at once even on two cores). `join` waits for it.
final class Worker: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    private var result: Result<Int, any Error> = .success(0)

    init(_ body: @escaping @Sendable () throws -> Int) {
        let thread = Thread { [self] in
            do { result = .success(try body()) } catch { result = .failure(error) }
            done.signal()
        }
        thread.stackSize = 8 << 20
        thread.start()
    }

    /// Waits for the thread and returns what its body returned.
    func join() throws -> Int {
        done.wait()
        return try result.get()
    }
}

/// Waits until the monotonic clock reaches `t` (W9 threads start together).
func sleep(until t: Double) {
    let d = t - now()
    if d > 0 { usleep(UInt32(d * 1e6)) }
}
