// ReadOnlyFile: a store file opened with O_RDONLY, for the `kura` tool's reading
// commands (FORMAT.md, "Reading a store: checklist").
//
// Reading commands must never change a store: not its bytes, not its log, not even
// by creating a missing `-wal`. `ReadOnlyFileSystem` gives `Database` files that
// cannot be written (every write, truncate or sync throws `.misuse`) and answers a
// missing log with an empty, in-memory one instead of creating it. Opening the
// store through it runs recovery (which writes nothing) and lets read
// transactions work; a commit or checkpoint would throw.
//
// Locks: a read-only descriptor can hold shared (read) locks, which is all a reader
// needs: the reader byte shared keeps checkpoints of other connections from
// rewriting the file under it (FORMAT.md, "Concurrency and locks"). An exclusive
// lock is refused (returns false).

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A file system whose files are opened read-only; a missing `-wal` reads as empty.
package struct ReadOnlyFileSystem: FileSystem {
    package init() {}

    package func open(_ path: String, create: Bool, permissionsOf template: StorageFile?) throws(KuraError) -> StorageFile {
        let fd = openReadOnly(path)
        if fd < 0 {
            let e = errno
            if e == ENOENT {
                if path.hasSuffix("-wal") { return EmptyReadOnlyFile(path: path) }
                throw KuraError(.notFound, "no such file", path: path)
            }
            throw posixError(e, "open", path)
        }
        return ReadOnlyFile(fd: fd, path: path)
    }

    package func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    /// Listing a directory writes nothing (external values: `kura check`).
    package func directoryContents(_ path: String) throws(KuraError) -> [String] {
        try PosixFileSystem().directoryContents(path)
    }

    package func remove(_ path: String) throws(KuraError) {
        throw KuraError(.misuse, "the store was opened read-only; cannot remove files", path: path)
    }

    package func rename(_ source: String, to destination: String) throws(KuraError) {
        throw KuraError(.misuse, "the store was opened read-only; cannot rename files", path: source)
    }
}

@inline(__always)
private func openReadOnly(_ path: String) -> Int32 { open(path, O_RDONLY | O_CLOEXEC) }

@inline(__always)
private func closeDescriptor(_ fd: Int32) -> Int32 { close(fd) }

/// A file opened with `open(path, O_RDONLY)`.
package final class ReadOnlyFile: StorageFile, @unchecked Sendable {
    // @unchecked Sendable: `fd` changes only in `close`, which the owner calls once
    // when no other thread uses the handle; `held` is guarded by `stateLock`.
    private var fd: Int32
    package let path: String
    private let stateLock = ThreadLock()
    private var held: Set<LockByte> = []

    init(fd: Int32, path: String) {
        self.fd = fd
        self.path = path
    }

    /// Opens `path` read-only.
    ///
    /// - Throws: `.notFound` if it does not exist, `.io` naming the path otherwise.
    package static func open(_ path: String) throws(KuraError) -> ReadOnlyFile {
        let fd = openReadOnly(path)
        if fd < 0 {
            let e = errno
            if e == ENOENT { throw KuraError(.notFound, "no such file", path: path) }
            throw posixError(e, "open", path)
        }
        var st = stat()
        if fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR {
            _ = closeDescriptor(fd)
            throw KuraError(.io, "is a directory, not a store file", path: path)
        }
        return ReadOnlyFile(fd: fd, path: path)
    }

    deinit { if fd >= 0 { _ = closeDescriptor(fd) } }

    package func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(KuraError) -> Int {
        guard buffer.count > 0 else { return 0 }
        while true {
            let n = pread(fd, buffer.baseAddress, buffer.count, off_t(offset))
            if n >= 0 { return n }
            if errno == EINTR { continue }
            throw posixError(errno, "pread at offset \(offset)", path)
        }
    }

    /// Reads as many bytes as exist at `offset` (up to `buffer.count`).
    package func readAvailable(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(KuraError) -> Int {
        var done = 0
        while done < buffer.count {
            let n = try read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[done...]), at: offset + Int64(done))
            if n == 0 { break }
            done += n
        }
        return done
    }

    package func write(_ buffer: UnsafeRawBufferPointer, at offset: Int64) throws(KuraError) {
        throw KuraError(.misuse, "the store was opened read-only; a reading command never writes", path: path)
    }

    package func size() throws(KuraError) -> Int64 {
        var st = stat()
        if fstat(fd, &st) != 0 { throw posixError(errno, "fstat", path) }
        return Int64(st.st_size)
    }

    package func truncate(to size: Int64) throws(KuraError) {
        throw KuraError(.misuse, "the store was opened read-only; a reading command never truncates", path: path)
    }

    package func sync(full: Bool) throws(KuraError) {
        throw KuraError(.misuse, "the store was opened read-only; a reading command never syncs", path: path)
    }

    package func lock(_ byte: LockByte, _ mode: LockMode) throws(KuraError) -> Bool {
        guard mode == .shared else {
            // A read-only descriptor cannot hold a write lock. The create byte is
            // taken exclusively by every open of a store of at most one page
            // (Pager.finishInterruptedCreation), only to exclude a concurrent
            // creator: report it free when no other handle holds it. This handle
            // never writes, so the only thing it must not do is read a page 1
            // that a creator is writing, which the check excludes. Other bytes
            // are refused.
            guard byte == .create else { return false }
            var fl = PosixFile.lockRecord(F_WRLCK, byte)
            guard fcntl(fd, ReadOnlyFile.getLockCommand, &fl) == 0 else { return false }
            return fl.l_type == Int16(F_UNLCK)
        }
        return try stateLock.withLock { () throws(KuraError) -> Bool in
            if held.contains(byte) { return true }
            var fl = PosixFile.lockRecord(F_RDLCK, byte)
            if fcntl(fd, PosixFile.setLockCommand, &fl) == 0 {
                held.insert(byte)
                return true
            }
            let e = errno
            if e == EAGAIN || e == EACCES || e == EINTR { return false }
            throw posixError(e, "fcntl lock", path)
        }
    }

    package func unlock(_ byte: LockByte) {
        stateLock.withLock {
            guard held.contains(byte) else { return }
            var fl = PosixFile.lockRecord(F_UNLCK, byte)
            _ = fcntl(fd, PosixFile.setLockCommand, &fl)
            held.remove(byte)
        }
    }

    #if canImport(Glibc)
    /// F_OFD_GETLK (Linux 3.15+); Glibc hides the macro without _GNU_SOURCE.
    static let getLockCommand: Int32 = 36
    #else
    static let getLockCommand: Int32 = F_GETLK
    #endif

    package func close() {
        stateLock.withLock {
            if fd >= 0 { _ = closeDescriptor(fd) }
            fd = -1
            held.removeAll()
        }
    }
}

/// Stands in for a `-wal` that does not exist: empty, never written.
final class EmptyReadOnlyFile: StorageFile, @unchecked Sendable {
    // @unchecked Sendable: no mutable state.
    let path: String
    init(path: String) { self.path = path }
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(KuraError) -> Int { 0 }
    func write(_ buffer: UnsafeRawBufferPointer, at offset: Int64) throws(KuraError) {
        throw KuraError(.misuse, "the store was opened read-only; a reading command never writes", path: path)
    }
    func size() throws(KuraError) -> Int64 { 0 }
    func truncate(to size: Int64) throws(KuraError) {
        throw KuraError(.misuse, "the store was opened read-only", path: path)
    }
    func sync(full: Bool) throws(KuraError) {}
    func lock(_ byte: LockByte, _ mode: LockMode) throws(KuraError) -> Bool { mode == .shared }
    func unlock(_ byte: LockByte) {}
    func close() {}
}
