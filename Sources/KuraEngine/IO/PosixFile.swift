// PosixFile: StorageFile over a POSIX file descriptor.
//
// Reads and writes use pread/pwrite (no shared file offset, so reads from many
// threads need no lock). Locks are open file description locks on Linux
// (F_OFD_SETLK: owned by the handle, not the process, and not dropped when some
// other descriptor of the same file closes). Darwin has no OFD locks; there Kura
// uses F_SETLK, whose locks belong to the process: two connections to one file in
// the same process then do not exclude each other through the file, and closing
// one drops the other's locks. Open each store once per process on Darwin.

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The real file system.
public struct PosixFileSystem: FileSystem {
    public init() {}

    public func open(_ path: String, create: Bool, permissionsOf template: StorageFile?) throws(KuraError) -> StorageFile {
        // With a template, the file is created 0600 (never more open than the
        // template for an instant) and then given the template's mode and owner.
        // O_EXCL tells whether this call created it; the bounded loop covers a
        // file removed or created by someone else between the two opens.
        for _ in 0..<8 {
            if create {
                let fd = systemOpen(path, O_RDWR | O_CLOEXEC | O_CREAT | O_EXCL, template == nil ? 0o666 : 0o600)
                if fd >= 0 {
                    let file = PosixFile(fd: fd, path: path)
                    if let template { try file.copyPermissions(of: template) }
                    return file
                }
                if errno != EEXIST { throw posixError(errno, "open", path) }
            }
            let fd = systemOpen(path, O_RDWR | O_CLOEXEC, 0)
            if fd >= 0 { return PosixFile(fd: fd, path: path) }
            let e = errno
            if e != ENOENT { throw posixError(e, "open", path) }
            if !create { throw KuraError(.notFound, "no such file", path: path) }
        }
        throw KuraError(.io, "open: the file kept appearing and disappearing while it was opened; retry", path: path)
    }

    public func exists(_ path: String) -> Bool {
        access(path, F_OK) == 0
    }

    public func remove(_ path: String) throws(KuraError) {
        if unlink(path) != 0 && errno != ENOENT { throw posixError(errno, "unlink", path) }
    }

    public func rename(_ source: String, to destination: String) throws(KuraError) {
        if systemRename(source, destination) != 0 { throw posixError(errno, "rename", source) }
    }

    public func directoryContents(_ path: String) throws(KuraError) -> [String] {
        guard let dir = opendir(path) else {
            if errno == ENOENT { return [] }
            throw posixError(errno, "opendir", path)
        }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    public func createDirectory(_ path: String) throws(KuraError) {
        if mkdir(path, 0o777) != 0 && errno != EEXIST { throw posixError(errno, "mkdir", path) }
    }

    public func syncDirectory(_ path: String) throws(KuraError) {
        let fd = systemOpen(path, O_RDONLY | O_CLOEXEC | O_DIRECTORY, 0)
        if fd < 0 { throw posixError(errno, "open", path) }
        defer { _ = systemClose(fd) }
        if fsync(fd) != 0 { throw posixError(errno, "fsync", path) }
    }
}

@inline(__always)
private func systemOpen(_ path: String, _ flags: Int32, _ mode: mode_t) -> Int32 {
    open(path, flags, mode)
}

@inline(__always)
private func systemRename(_ a: String, _ b: String) -> Int32 {
    rename(a, b)
}

func posixError(_ e: Int32, _ call: String, _ path: String) -> KuraError {
    let text = String(cString: strerror(e))
    if e == ENOSPC || e == EDQUOT {
        return KuraError(.diskFull, "\(call) failed: \(text); free some space and retry (nothing committed was lost)", path: path)
    }
    return KuraError(.io, "\(call) failed: \(text) (errno \(e))", path: path)
}

/// A file opened with `open(2)`.
final class PosixFile: StorageFile, @unchecked Sendable {
    // @unchecked Sendable: `fd` is immutable after init except in `close`, which the
    // owner calls once when no other thread uses the handle; `held` is guarded
    // by `stateLock`. pread/pwrite are thread-safe on one descriptor.
    private var fd: Int32
    let path: String
    private let stateLock = ThreadLock()
    /// The mode this handle holds each lock byte in (nil: not held). Four
    /// fixed slots, not a dictionary: a read transaction takes and gives back
    /// the reader byte, and hashing the key cost as much as a third of the
    /// system call.
    private var held = HeldLocks()

    init(fd: Int32, path: String) {
        self.fd = fd
        self.path = path
    }

    deinit { if fd >= 0 { _ = systemClose(fd) } }

    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(KuraError) -> Int {
        while true {
            let n = pread(fd, buffer.baseAddress, buffer.count, off_t(offset))
            if n >= 0 { return n }
            if errno == EINTR { continue }
            throw posixError(errno, "pread at offset \(offset)", path)
        }
    }

    func write(_ buffer: UnsafeRawBufferPointer, at offset: Int64) throws(KuraError) {
        var done = 0
        while done < buffer.count {
            let n = pwrite(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done))
            if n < 0 {
                if errno == EINTR { continue }
                throw posixError(errno, "pwrite at offset \(offset + Int64(done))", path)
            }
            if n == 0 { throw posixError(ENOSPC, "pwrite at offset \(offset + Int64(done))", path) }
            done += n
        }
    }

    /// `pwritev`, at most `maxVectors` buffers per call, resuming after a
    /// partial write.
    func write(gathering buffers: [UnsafeRawBufferPointer], at offset: Int64) throws(KuraError) {
        // The vectors in a temporary buffer (on the stack for the few of a
        // commit: a commit's frames made three array growths here).
        try withUnsafeTemporaryAllocation(of: iovec.self, capacity: max(buffers.count, 1)) { v throws(KuraError) in
            var count = 0
            for b in buffers {
                guard let base = b.baseAddress, b.count > 0 else { continue }
                // Capacity at least 1: the buffer has a base address.
                (v.baseAddress! + count).initialize(to: iovec(iov_base: UnsafeMutableRawPointer(mutating: base), iov_len: b.count))
                count += 1
            }
            // iovec is a trivial type: nothing to deinitialize.
            try writeVectors(UnsafeMutableBufferPointer(rebasing: v[0..<count]), at: offset)
        }
    }

    /// Writes every byte `v` describes from `offset` on, in `pwritev` calls of
    /// at most `maxVectors` vectors (moving `v`'s entries past what each
    /// call wrote).
    private func writeVectors(_ v: UnsafeMutableBufferPointer<iovec>, at offset: Int64) throws(KuraError) {
        var first = 0
        var position = offset
        while first < v.count {
            let count = min(v.count - first, PosixFile.maxVectors)
            // `v` is not empty here (first < v.count): it has a base address.
            let n = pwritev(fd, v.baseAddress! + first, Int32(count), off_t(position))
            if n < 0 {
                if errno == EINTR { continue }
                throw posixError(errno, "pwritev at offset \(position)", path)
            }
            if n == 0 { throw posixError(ENOSPC, "pwritev at offset \(position)", path) }
            position += Int64(n)
            // Skip what was written: whole buffers, then part of one.
            var left = n
            while left > 0 && first < v.count {
                if left >= v[first].iov_len {
                    left -= v[first].iov_len
                    first += 1
                } else {
                    // Non-nil: only buffers with a base address were kept above.
                    v[first].iov_base = v[first].iov_base! + left
                    v[first].iov_len -= left
                    left = 0
                }
            }
        }
    }

    var hasGatheringWrite: Bool { true }

    /// Buffers per `pwritev` call (IOV_MAX is 1024 on Linux and Darwin).
    static let maxVectors = 1024

    func size() throws(KuraError) -> Int64 {
        var st = stat()
        if fstat(fd, &st) != 0 { throw posixError(errno, "fstat", path) }
        return Int64(st.st_size)
    }

    func truncate(to size: Int64) throws(KuraError) {
        while ftruncate(fd, off_t(size)) != 0 {
            if errno == EINTR { continue }
            throw posixError(errno, "ftruncate to \(size)", path)
        }
    }

    func sync(full: Bool) throws(KuraError) {
        #if canImport(Darwin)
        if full, fcntl(fd, F_FULLFSYNC) == 0 { return }
        while fsync(fd) != 0 {
            if errno == EINTR { continue }
            throw posixError(errno, "fsync", path)
        }
        #else
        // fdatasync also flushes the metadata needed to read the data back (the
        // file size), which is all Kura needs; it skips timestamps.
        while fdatasync(fd) != 0 {
            if errno == EINTR { continue }
            throw posixError(errno, "fdatasync", path)
        }
        #endif
    }

    /// Gives this file the permission bits of `template` and, when the process
    /// runs as root, its owner and group (as SQLite does for its journal and log,
    /// so a root process does not leave a log other users cannot open).
    /// The corresponding C functions are `fstat`, `fchmod` and `fchown`.
    func copyPermissions(of template: StorageFile) throws(KuraError) {
        var st = stat()
        let got = (template as? PosixFile).map { fstat($0.fd, &st) } ?? stat(template.path, &st)
        if got != 0 { throw posixError(errno, "stat", template.path) }
        if fchmod(fd, st.st_mode & 0o777) != 0 { throw posixError(errno, "fchmod", path) }
        if geteuid() == 0 && fchown(fd, st.st_uid, st.st_gid) != 0 { throw posixError(errno, "fchown", path) }
    }

    func lock(_ byte: LockByte, _ mode: LockMode) throws(KuraError) -> Bool {
        try stateLock.withLock { () throws(KuraError) -> Bool in
            if held[byte] == mode { return true }
            guard try setLock(mode, at: byte.rawValue) else { return false }
            held[byte] = mode
            return true
        }
    }

    func unlock(_ byte: LockByte) {
        stateLock.withLock {
            guard held[byte] != nil else { return }
            var fl = PosixFile.lockRecord(F_UNLCK, byte)
            _ = fcntl(fd, PosixFile.setLockCommand, &fl)
            held[byte] = nil
        }
    }

    /// Takes an advisory lock on the byte at `offset` without waiting, outside
    /// the `LockByte` bookkeeping (the reader marks' slot locks in `PATH-shm`,
    /// ReaderMarks.swift). Returns false if another handle holds a
    /// conflicting lock.
    func lockRange(_ offset: Int64, _ mode: LockMode) throws(KuraError) -> Bool {
        try stateLock.withLock { () throws(KuraError) -> Bool in
            guard fd >= 0 else { throw KuraError(.misuse, "file is closed", path: path) }
            return try setLock(mode, at: offset)
        }
    }

    /// One `fcntl` lock of the byte at `offset` without waiting: false on a
    /// conflicting lock (or an interrupted call), an error otherwise. Caller
    /// holds `stateLock`.
    private func setLock(_ mode: LockMode, at offset: Int64) throws(KuraError) -> Bool {
        var fl = PosixFile.lockRecord(mode == .shared ? F_RDLCK : F_WRLCK, offset)
        if fcntl(fd, PosixFile.setLockCommand, &fl) == 0 { return true }
        let e = errno
        if e == EAGAIN || e == EACCES || e == EINTR { return false }
        throw posixError(e, "fcntl lock", path)
    }

    /// Releases a lock taken with `lockRange`.
    func unlockRange(_ offset: Int64) {
        stateLock.withLock {
            guard fd >= 0 else { return }
            var fl = PosixFile.lockRecord(F_UNLCK, offset)
            _ = fcntl(fd, PosixFile.setLockCommand, &fl)
        }
    }

    func isLinked(at path: String) throws(KuraError) -> Bool {
        var mine = stat(), there = stat()
        if fstat(fd, &mine) != 0 { throw posixError(errno, "fstat", self.path) }
        if stat(path, &there) != 0 {
            if errno == ENOENT { return false }
            throw posixError(errno, "stat", path)
        }
        return mine.st_dev == there.st_dev && mine.st_ino == there.st_ino
    }

    /// Runs `body` with the descriptor (-1 once closed), which stays open
    /// meanwhile (SharedMapping.swift maps it).
    func withDescriptor<T>(_ body: (Int32) -> T) -> T {
        stateLock.withLock { body(fd) }
    }

    func close() {
        stateLock.withLock {
            if fd >= 0 { _ = systemClose(fd) }
            fd = -1
            held = HeldLocks()
        }
    }

    /// The `flock` record for one lock byte (`F_RDLCK`, `F_WRLCK` or `F_UNLCK`).
    static func lockRecord(_ type: Int32, _ byte: LockByte) -> flock {
        lockRecord(type, byte.rawValue)
    }

    /// The `flock` record for the byte at `offset`.
    static func lockRecord(_ type: Int32, _ offset: Int64) -> flock {
        var fl = flock()
        fl.l_type = Int16(type)
        fl.l_whence = Int16(SEEK_SET)
        fl.l_start = off_t(offset)
        fl.l_len = 1
        fl.l_pid = 0
        return fl
    }

    #if canImport(Glibc)
    /// F_OFD_SETLK (Linux 3.15+); Glibc hides the macro without _GNU_SOURCE.
    static let setLockCommand: Int32 = 37
    #else
    static let setLockCommand: Int32 = F_SETLK
    #endif
}

@inline(__always)
private func systemClose(_ fd: Int32) -> Int32 { close(fd) }

/// One optional `LockMode` per `LockByte` (PosixFile's bookkeeping).
struct HeldLocks {
    private var writer: LockMode?
    private var reader: LockMode?
    private var create: LockMode?
    private var open: LockMode?

    subscript(byte: LockByte) -> LockMode? {
        get {
            switch byte {
            case .writer: return writer
            case .reader: return reader
            case .create: return create
            case .open: return open
            }
        }
        set {
            switch byte {
            case .writer: writer = newValue
            case .reader: reader = newValue
            case .create: create = newValue
            case .open: open = newValue
            }
        }
    }
}
