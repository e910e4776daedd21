// MemoryFileSystem: files held in memory, for in-memory stores and tests.
//
// A `MemoryFileSystem` value is a handle on shared storage: copies see the same
// files, so a test can close a store and reopen it from the same instance. Locks
// follow the POSIX model of PosixFile on Linux (per handle, shared/exclusive).

/// An in-memory file system. Thread-safe; all files share one lock.
public final class MemoryFileSystem: FileSystem, @unchecked Sendable {
    // @unchecked Sendable: `files` and `locks` are guarded by `lock`.
    let lock = ThreadLock()
    var files: [String: MemoryFileData] = [:]
    /// Largest size a file may grow to; a write or truncate past it throws
    /// `.diskFull`, as a real disk would, instead of trapping when the memory
    /// cannot be allocated (a hostile page count can put a page at 2 TiB).
    public let maxFileSize: Int64

    public init(maxFileSize: Int64 = 1 << 32) {
        self.maxFileSize = maxFileSize
    }

    public func open(_ path: String, create: Bool, permissionsOf template: StorageFile?) throws(KuraError) -> StorageFile {
        try lock.withLock { () throws(KuraError) -> StorageFile in
            if let data = files[path] { return MemoryFile(fs: self, data: data, path: path) }
            guard create else { throw KuraError(.notFound, "no such file", path: path) }
            let data = MemoryFileData()
            files[path] = data
            return MemoryFile(fs: self, data: data, path: path)
        }
    }

    /// Whether `path` is a file, or a directory (a prefix of a file's path).
    public func exists(_ path: String) -> Bool {
        lock.withLock { files[path] != nil || files.keys.contains { $0.hasPrefix(path + "/") } }
    }

    public func remove(_ path: String) throws(KuraError) { lock.withLock { files[path] = nil } }

    public func rename(_ source: String, to destination: String) throws(KuraError) {
        try lock.withLock { () throws(KuraError) in
            guard let d = files[source] else { throw KuraError(.notFound, "no such file", path: source) }
            files[destination] = d
            files[source] = nil
        }
    }

    /// Directories are implicit: the entries of `path` are the files whose
    /// paths are `path/name` with no further "/".
    public func directoryContents(_ path: String) throws(KuraError) -> [String] {
        let prefix = path + "/"
        return lock.withLock {
            files.keys.filter { $0.hasPrefix(prefix) && !$0.dropFirst(prefix.count).contains("/") }.map { String($0.dropFirst(prefix.count)) }
        }
    }

    public func createDirectory(_ path: String) throws(KuraError) {}

    public func syncDirectory(_ path: String) throws(KuraError) {}

    /// A copy of a file's bytes (tests use it to corrupt or inspect a store).
    public func contents(of path: String) -> [UInt8]? { lock.withLock { files[path]?.bytes } }

    /// Replaces a file's bytes (tests use it to plant corrupt data).
    public func setContents(of path: String, to bytes: [UInt8]) {
        lock.withLock {
            let d = files[path] ?? MemoryFileData()
            d.bytes = bytes
            files[path] = d
        }
    }
}

/// The bytes and lock table of one in-memory file. Guarded by the file system's lock.
final class MemoryFileData {
    var bytes: [UInt8] = []
    /// Lock holders per byte: handle identity -> mode.
    var locks: [LockByte: [ObjectIdentifier: LockMode]] = [:]
}

final class MemoryFile: StorageFile, @unchecked Sendable {
    // @unchecked Sendable: every access to `data` and `closed` holds `fs.lock`.
    let fs: MemoryFileSystem
    let data: MemoryFileData
    let path: String
    private var closed = false

    init(fs: MemoryFileSystem, data: MemoryFileData, path: String) {
        self.fs = fs
        self.data = data
        self.path = path
    }

    deinit { close() }

    private func checkOpen() throws(KuraError) {
        if closed { throw KuraError(.misuse, "file handle used after close", path: path) }
    }

    private func checkSize(_ end: Int64) throws(KuraError) {
        if end > fs.maxFileSize || end < 0 {
            throw KuraError(.diskFull, "in-memory file cannot grow to \(end) bytes (limit \(fs.maxFileSize))", path: path)
        }
    }

    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(KuraError) -> Int {
        try fs.lock.withLock { () throws(KuraError) -> Int in
            try checkOpen()
            let start = Int(offset)
            guard start < data.bytes.count else { return 0 }
            let n = min(buffer.count, data.bytes.count - start)
            data.bytes.withUnsafeBytes { src in
                buffer.baseAddress!.copyMemory(from: src.baseAddress! + start, byteCount: n)
            }
            return n
        }
    }

    func write(_ buffer: UnsafeRawBufferPointer, at offset: Int64) throws(KuraError) {
        try fs.lock.withLock { () throws(KuraError) in
            try checkOpen()
            try checkSize(offset + Int64(buffer.count))
            let end = Int(offset) + buffer.count
            if data.bytes.count < end { data.bytes.appendZeros(end - data.bytes.count) }
            data.bytes.withUnsafeMutableBytes { dst in
                (dst.baseAddress! + Int(offset)).copyMemory(from: buffer.baseAddress!, byteCount: buffer.count)
            }
        }
    }

    func size() throws(KuraError) -> Int64 {
        try fs.lock.withLock { () throws(KuraError) -> Int64 in
            try checkOpen()
            return Int64(data.bytes.count)
        }
    }

    func truncate(to size: Int64) throws(KuraError) {
        try fs.lock.withLock { () throws(KuraError) in
            try checkOpen()
            try checkSize(size)
            let n = Int(size)
            if n < data.bytes.count { data.bytes.removeSubrange(n...) }
            else { data.bytes.appendZeros(n - data.bytes.count) }
        }
    }

    func sync(full: Bool) throws(KuraError) { try fs.lock.withLock { () throws(KuraError) in try checkOpen() } }

    func lock(_ byte: LockByte, _ mode: LockMode) throws(KuraError) -> Bool {
        try fs.lock.withLock { () throws(KuraError) -> Bool in
            try checkOpen()
            let me = ObjectIdentifier(self)
            let others = (data.locks[byte] ?? [:]).filter { $0.key != me }
            if mode == .exclusive && !others.isEmpty { return false }
            if mode == .shared && others.values.contains(.exclusive) { return false }
            data.locks[byte, default: [:]][me] = mode
            return true
        }
    }

    func unlock(_ byte: LockByte) {
        fs.lock.withLock { _ = data.locks[byte]?.removeValue(forKey: ObjectIdentifier(self)) }
    }

    func close() {
        fs.lock.withLock {
            guard !closed else { return }
            closed = true
            let me = ObjectIdentifier(self)
            for b in LockByte.allCases { _ = data.locks[b]?.removeValue(forKey: me) }
        }
    }
}

extension Array where Element == UInt8 {
    /// Appends `count` zero bytes with one bulk copy per 64 KiB (appending a
    /// `repeatElement` goes element by element in unoptimised builds, which made
    /// the test suite's in-memory checkpoints slow).
    mutating func appendZeros(_ count: Int) {
        var missing = count
        reserveCapacity(self.count + count)
        while missing > 0 {
            let n = Swift.min(missing, zeroChunk.count)
            append(contentsOf: zeroChunk[0..<n])
            missing -= n
        }
    }
}

/// 64 KiB of zeros, the source of `appendZeros`.
private let zeroChunk = [UInt8](repeating: 0, count: 65_536)
