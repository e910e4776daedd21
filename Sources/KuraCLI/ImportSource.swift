// ImportSource: the bytes of a `kura import` input, read in fixed-size chunks.
//
// Invariants: at most one chunk plus the few bytes a reader looked ahead at are
// held (`buffer[pos...]` is what is not consumed yet; consumed bytes are dropped
// at the next refill), so memory does not grow with the input. A leading UTF-8
// byte order mark is skipped (Foundation's UTF-8 decoding, which the importer
// used before it streamed, dropped it too). Every byte read goes through an
// incremental UTF-8 check: `invalidUTF8` turns true, and stays true, once the
// bytes so far cannot be UTF-8; at the end of the input an unfinished sequence
// counts as invalid.
//
// Standard input can be read once only: with `spoolTo`, every byte read is also
// written to that file, so a second pass can read the spooled copy.
//
// The chunk size is `defaultChunkSize` unless the environment variable
// KURA_IMPORT_CHUNK_BYTES gives another (tests use tiny chunks so that fields
// and lines cross chunk boundaries).

import Foundation

final class ImportSource {
    static let defaultChunkSize = 1 << 20

    /// The chunk size from KURA_IMPORT_CHUNK_BYTES (1 ... 1 GiB), else the default.
    static var chunkSize: Int {
        if let s = ProcessInfo.processInfo.environment["KURA_IMPORT_CHUNK_BYTES"], let n = Int(s), n >= 1, n <= 1 << 30 {
            return n
        }
        return defaultChunkSize
    }

    private let fd: Int32
    private let closeAtEnd: Bool
    private let name: String
    private let chunkSize: Int
    private var spool: Int32?
    /// Not yet consumed: `buffer[pos...]`.
    private(set) var buffer: [UInt8] = []
    private(set) var pos = 0
    private var atEOF = false
    /// Bytes of an unfinished UTF-8 sequence at the end of the last chunk.
    private var utf8Carry: [UInt8] = []
    private(set) var invalidUTF8 = false

    /// Opens `file`, or standard input if it is "-".
    /// - Throws: `CLIError.cannotRead` if the file cannot be opened.
    convenience init(file: String, chunkSize: Int = ImportSource.chunkSize, spoolTo: Int32? = nil) throws {
        if file == "-" {
            try self.init(fd: 0, name: file, closeAtEnd: false, chunkSize: chunkSize, spoolTo: spoolTo)
            return
        }
        var isDir: ObjCBool = false
        let exists = FileManager.default.fileExists(atPath: file, isDirectory: &isDir)
        let f = exists && !isDir.boolValue ? open(file, O_RDONLY) : -1
        guard f >= 0 else {
            throw CLIError.cannotRead("cannot read \(file): " + (exists ? "permission denied or not a file" : "no such file"))
        }
        try self.init(fd: f, name: file, closeAtEnd: true, chunkSize: chunkSize, spoolTo: spoolTo)
    }

    /// Reads `fd` from where it is; `name` is used in messages. With
    /// `closeAtEnd` the source closes `fd` when it goes away.
    init(fd: Int32, name: String, closeAtEnd: Bool, chunkSize: Int = ImportSource.chunkSize, spoolTo: Int32? = nil) throws {
        self.fd = fd
        self.name = name
        self.closeAtEnd = closeAtEnd
        self.chunkSize = chunkSize
        self.spool = spoolTo
        buffer.reserveCapacity(chunkSize + 8)
        // Skip a byte order mark.
        _ = try peek(2)
        if buffer.count >= 3 && buffer[0] == 0xEF && buffer[1] == 0xBB && buffer[2] == 0xBF { pos = 3 }
    }

    deinit {
        if closeAtEnd { close(fd) }
    }

    /// The byte `k` places after the next unconsumed one, nil past the end.
    @inline(__always)
    func peek(_ k: Int = 0) throws -> UInt8? {
        if pos + k < buffer.count { return buffer[pos + k] }
        return try peekSlow(k)
    }

    @inline(__always)
    func advance(_ k: Int = 1) { pos += k }

    /// Appends to `out`, and consumes, the held bytes before the next one for
    /// which `stop` is true (or all held bytes). The readers' fast path: the
    /// bytes they would otherwise take one at a time.
    @inline(__always)
    func take(into out: inout [UInt8], until stop: (UInt8) -> Bool) {
        let start = pos
        let end = buffer.withUnsafeBufferPointer { b in
            var i = start
            while i < b.count && !stop(b[i]) { i += 1 }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: b[start..<i]))
            return i
        }
        pos = end
    }

    /// Calls `body` with the held bytes not consumed yet (`buffer[pos...]`);
    /// `body` returns how many of them it consumed. The CSV reader's fast path
    /// reads a whole record this way when its line feed is held already.
    @inline(__always)
    func consumeHeld(_ body: (UnsafeBufferPointer<UInt8>) -> Int) {
        let start = pos
        let n = buffer.withUnsafeBufferPointer { b in body(UnsafeBufferPointer(rebasing: b[start...])) }
        pos = start + n
    }

    /// Reads chunks until byte `pos + k` is held or the input ends.
    private func peekSlow(_ k: Int) throws -> UInt8? {
        while pos + k >= buffer.count {
            guard try refill() else { return nil }
        }
        return buffer[pos + k]
    }

    /// Drops consumed bytes and reads one more chunk; false at the end.
    private func refill() throws -> Bool {
        if atEOF { return false }
        if pos > 0 {
            buffer.removeSubrange(0..<pos)
            pos = 0
        }
        let old = buffer.count
        buffer.append(contentsOf: repeatElement(0, count: chunkSize))
        var n: Int
        repeat {
            n = buffer.withUnsafeMutableBytes { b in read(fd, b.baseAddress! + old, chunkSize) }
        } while n < 0 && errno == EINTR
        guard n >= 0 else {
            let e = String(cString: strerror(errno))
            buffer.removeLast(chunkSize)
            throw CLIError.cannotRead("cannot read \(name): \(e)")
        }
        buffer.removeLast(chunkSize - n)
        if n == 0 {
            atEOF = true
            if !utf8Carry.isEmpty { invalidUTF8 = true }
            return false
        }
        try buffer.withUnsafeBytes { b throws in
            let chunk = UnsafeRawBufferPointer(rebasing: b[old...])
            checkUTF8(chunk)
            if let spool { try write(chunk, to: spool) }
        }
        return true
    }

    /// Reads the rest of the input (to finish the UTF-8 check and the spool).
    func drain() throws {
        pos = buffer.count
        while try refill() { pos = buffer.count }
    }

    private func write(_ bytes: UnsafeRawBufferPointer, to f: Int32) throws {
        var done = 0
        while done < bytes.count {
            let n = Foundation.write(f, bytes.baseAddress! + done, bytes.count - done)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                throw CLIError.cannotRead("cannot keep a copy of standard input in a temporary file: \(String(cString: strerror(errno)))")
            }
            done += n
        }
    }

    /// Whether every byte is below 0x80 (eight at a time).
    static func isASCII(_ b: UnsafeRawBufferPointer) -> Bool {
        var i = 0
        while i + 8 <= b.count {
            if b.loadUnaligned(fromByteOffset: i, as: UInt64.self) & 0x8080_8080_8080_8080 != 0 { return false }
            i += 8
        }
        while i < b.count {
            if b[i] >= 0x80 { return false }
            i += 1
        }
        return true
    }

    /// Checks a chunk as the continuation of the bytes before it.
    private func checkUTF8(_ chunk: UnsafeRawBufferPointer) {
        guard !invalidUTF8 else { return }
        // Plain ASCII needs no decoding.
        if utf8Carry.isEmpty && Self.isASCII(chunk) { return }
        var bytes = utf8Carry
        bytes.append(contentsOf: chunk)
        // Keep back a sequence the chunk ends inside of.
        var cut = bytes.count
        var j = bytes.count - 1
        while j >= 0 && j >= bytes.count - 3 && bytes[j] & 0xC0 == 0x80 { j -= 1 }
        if j >= 0 {
            let lead = bytes[j]
            let length = lead < 0x80 ? 1 : lead >= 0xF0 && lead <= 0xF7 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1
            if j + length > bytes.count { cut = j }
        }
        utf8Carry = Array(bytes[cut...])
        if String(validating: bytes[..<cut], as: UTF8.self) == nil { invalidUTF8 = true }
    }
}
