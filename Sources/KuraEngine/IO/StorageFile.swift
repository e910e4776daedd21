// IO: the small file protocol everything above it uses (DESIGN.md, "Layers").
//
// Two implementations ship: `PosixFileSystem` (pread/pwrite/fsync and open file
// description locks) and `MemoryFileSystem` (files in memory, for in-memory stores
// and tests). `FaultInjectingFileSystem`, for I/O-error tests, wraps either.
//
// Lock model: a store file has three lock bytes at fixed offsets near 2 GiB (the
// bytes need not exist in the file; the locks are advisory, so pages stored at
// those offsets in larger stores are unaffected). Each handle holds at most one
// lock per byte.
//
//     writerLockByte      exclusive while a connection runs a write transaction
//     readerLockByte      shared while a connection has any transaction open;
//                         exclusive while it checkpoints (copies the WAL back and
//                         resets it), so no other process reads the WAL then
//     createLockByte      exclusive while a new file's first page is written
//     openLockByte        shared by every connection from open to close;
//                         exclusive while a store is destroyed, which is refused
//                         when another connection holds it (Database+Destroy.swift)
//
// On Linux, locks belong to the handle (not the process), so two connections in
// one process exclude each other exactly as two processes do. Darwin has only
// per-process locks (see PosixFile.swift).

/// Which bytes of a store file carry advisory locks. See the comment above.
public enum LockByte: Int64, Sendable, CaseIterable {
    case writer = 0x7FFF_0000
    case reader = 0x7FFF_0001
    case create = 0x7FFF_0002
    case open = 0x7FFF_0003
}

/// Kind of advisory lock.
public enum LockMode: Sendable {
    case shared
    case exclusive
}

/// A file Kura stores pages or log frames in.
///
/// Thread rules: implementations must allow concurrent `read` calls from several
/// threads; `write`, `truncate` and `sync` are called by one thread at a time (the
/// writer) but may overlap reads of other offsets.
///
/// Failure modes: every method throws `KuraError` with code `.io` (or `.diskFull`
/// for ENOSPC/EDQUOT) naming the path and the failing call.
public protocol StorageFile: AnyObject, Sendable {
    /// The path the file was opened at (for error messages).
    var path: String { get }
    /// Reads up to `buffer.count` bytes at `offset`; returns how many were read
    /// (fewer only at end of file). The corresponding C function is `pread`.
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(KuraError) -> Int
    /// Writes all of `buffer` at `offset`, extending the file if needed.
    /// The corresponding C function is `pwrite`.
    func write(_ buffer: UnsafeRawBufferPointer, at offset: Int64) throws(KuraError)
    /// Writes `buffers` one after another, the first at `offset` (a gathering
    /// write: a log append hands its frame headers and page images without
    /// copying them into one buffer). The corresponding C function is `pwritev`.
    func write(gathering buffers: [UnsafeRawBufferPointer], at offset: Int64) throws(KuraError)
    /// Whether `write(gathering:at:)` is one system call here (a checkpoint
    /// then writes runs of consecutive pages with it; otherwise, page by
    /// page, so that a fault-injecting file system sees each page's write).
    var hasGatheringWrite: Bool { get }
    /// Current size in bytes. The corresponding C function is `fstat`.
    func size() throws(KuraError) -> Int64
    /// Sets the size. The corresponding C function is `ftruncate`.
    func truncate(to size: Int64) throws(KuraError)
    /// Makes written data durable. `full` asks for a barrier through the drive's
    /// cache where the platform has one (F_FULLFSYNC on Darwin); otherwise `fsync`.
    func sync(full: Bool) throws(KuraError)
    /// Takes an advisory lock on one lock byte without waiting: returns false at
    /// once if another handle holds a conflicting lock. Changing a held lock's
    /// mode (shared to exclusive and back) is allowed.
    /// The corresponding C function is `fcntl(F_OFD_SETLK)`.
    func lock(_ byte: LockByte, _ mode: LockMode) throws(KuraError) -> Bool
    /// Releases this handle's lock on `byte`, if any.
    func unlock(_ byte: LockByte)
    /// Closes the handle, releasing its locks. Further calls throw `.misuse`.
    func close()
    /// Whether `path` still names the file this handle has open (false once the
    /// file was removed or replaced at that path). The corresponding C
    /// functions are `fstat` and `stat`, comparing device and inode.
    func isLinked(at path: String) throws(KuraError) -> Bool
}

extension StorageFile {
    /// Files that cannot be unlinked under an open handle (in memory): always true.
    public func isLinked(at path: String) throws(KuraError) -> Bool { true }

    /// No: the default `write(gathering:at:)` copies.
    public var hasGatheringWrite: Bool { false }

    /// Copies `buffers` into one and writes it with one `write(_:at:)` call:
    /// a file system without a gathering write (in memory, fault injecting)
    /// sees exactly the write it would have seen from a contiguous buffer.
    public func write(gathering buffers: [UnsafeRawBufferPointer], at offset: Int64) throws(KuraError) {
        if buffers.count == 1 { return try write(buffers[0], at: offset) }
        let total = buffers.reduce(0) { $0 + $1.count }
        let joined = [UInt8](unsafeUninitializedCapacity: total) { raw, initialized in
            var at = 0
            for b in buffers where b.count > 0 {
                // `raw` has `total` bytes, the sum of the buffers' counts.
                UnsafeMutableRawPointer(raw.baseAddress!).advanced(by: at).copyMemory(from: b.baseAddress!, byteCount: b.count)
                at += b.count
            }
            initialized = total
        }
        try joined.withBytes { b throws(KuraError) in try write(b, at: offset) }
    }
}

/// Opens and removes files by path: the seam where tests put an in-memory or
/// fault-injecting file system under a store.
public protocol FileSystem: Sendable {
    /// Opens `path`, creating it empty if `create` is true and it does not exist.
    /// Throws `.notFound` if it does not exist and `create` is false.
    ///
    /// A file this call creates gets the permission bits (and, where the process
    /// may set it, the owner and group) of `template` when one is given, as a
    /// store's log takes its store's; without a template, read and write for
    /// everyone the process's umask allows (0666 & ~umask), as `open(2)` does.
    func open(_ path: String, create: Bool, permissionsOf template: StorageFile?) throws(KuraError) -> StorageFile
    /// Whether `path` exists.
    func exists(_ path: String) -> Bool
    /// Removes `path`; no error if it does not exist.
    func remove(_ path: String) throws(KuraError)
    /// Atomically replaces `destination` with `source` (rename(2)).
    func rename(_ source: String, to destination: String) throws(KuraError)
    /// Names of the entries of directory `path` (without "." and ".."), in no
    /// particular order; empty if the directory does not exist. The
    /// corresponding C functions are `opendir` and `readdir`.
    func directoryContents(_ path: String) throws(KuraError) -> [String]
    /// Creates directory `path` if it does not exist (`mkdir`, mode 0777 &
    /// ~umask); the parent must exist.
    func createDirectory(_ path: String) throws(KuraError)
    /// Makes the creation and removal of entries in directory `path` durable
    /// (`fsync` on the directory).
    func syncDirectory(_ path: String) throws(KuraError)
}

extension FileSystem {
    /// File systems without directories (the default): external values
    /// (FORMAT.md, "External values") cannot be stored on them.
    public func directoryContents(_ path: String) throws(KuraError) -> [String] {
        throw KuraError(.misuse, "this file system has no directories", path: path)
    }
    public func createDirectory(_ path: String) throws(KuraError) {
        throw KuraError(.misuse, "this file system has no directories", path: path)
    }
    public func syncDirectory(_ path: String) throws(KuraError) {
        throw KuraError(.misuse, "this file system has no directories", path: path)
    }

    /// Opens `path`, creating it (0666 & ~umask) if `create` is true and it does
    /// not exist. See ``open(_:create:permissionsOf:)``.
    public func open(_ path: String, create: Bool) throws(KuraError) -> StorageFile {
        try open(path, create: create, permissionsOf: nil)
    }
}

extension StorageFile {
    /// Reads exactly `buffer.count` bytes at `offset`; returns false on a short read.
    func readFully(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(KuraError) -> Bool {
        var done = 0
        while done < buffer.count {
            let n = try read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[done...]), at: offset + Int64(done))
            if n == 0 { return false }
            done += n
        }
        return true
    }
}
