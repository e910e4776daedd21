// PersistentContainer+Seed: starting a store from a copy shipped with the app,
// closing a container, and the registered-objects view of a context (Core
// Data names a porting app looks for).
//
// Seeding never replaces or truncates a store: the seed is written to a new
// file beside the destination (a unique name, created exclusively, mode
// 0666 & ~umask whatever the seed's own mode), synced, then linked to the
// destination name with link(2), which fails if the name exists. A process
// that loses the race (another one seeded or created the store first)
// removes only its own temporary file and opens the store that won.

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import KuraEngine

extension PersistentContainer {
    static func seedIfMissing(_ url: URL, from seed: URL) throws(KuraError) {
        let path = url.path
        if FileManager.default.fileExists(atPath: path) { return }
        let log = seed.path + "-wal"
        var st = stat()
        var hasLog = false
        if stat(log, &st) == 0 {
            hasLog = st.st_size > 0
        } else if errno != ENOENT {
            throw KuraError(.io, "cannot check the seed store's log \(log): \(String(cString: strerror(errno)))", path: log)
        }
        let bytes = hasLog ? try checkpointedCopy(of: seed, log: log, beside: url) : try readAll(seed)
        let temp = path + ".seed-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o666)
        guard fd >= 0 else {
            throw KuraError(.io, "cannot create \(temp) to seed the store: \(String(cString: strerror(errno)))", path: temp)
        }
        var failure: String?
        var failureCode = KuraError.Code.io
        bytes.withUnsafeBytes { (b: UnsafeRawBufferPointer) in
            var done = 0
            while done < b.count {
                // `baseAddress` is non-nil: the loop runs only for a non-empty buffer.
                let n = write(fd, b.baseAddress! + done, b.count - done)
                if n < 0 {
                    if errno == EINTR { continue }
                    if errno == ENOSPC { failureCode = .diskFull }
                    failure = "cannot write \(temp): \(String(cString: strerror(errno)))"
                    return
                }
                done += n
            }
            if fsync(fd) != 0 { failure = "cannot sync \(temp): \(String(cString: strerror(errno)))" }
        }
        closeDescriptor(fd)
        defer { unlink(temp) }  // only ever our own temporary name
        if let failure { throw KuraError(failureCode, failure, path: temp) }
        if link(temp, path) != 0 && errno != EEXIST {
            throw KuraError(.io, "cannot put the seed store in place at \(path): \(String(cString: strerror(errno)))", path: path)
        }
        // EEXIST: another process created the store first; open that one.
    }

    private static func readAll(_ url: URL) throws(KuraError) -> Data {
        do { return try Data(contentsOf: url) } catch {
            throw KuraError(.io, "cannot read the seed store \(url.path): \(error.localizedDescription)", path: url.path)
        }
    }

    /// The seed's store file with its log's commits applied: both are copied
    /// into a private directory beside the destination (the seed itself may be
    /// read-only), opened there, checkpointed in full, and the store file read
    /// back. The private copies are removed.
    private static func checkpointedCopy(of seed: URL, log: String, beside url: URL) throws(KuraError) -> Data {
        let work = url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).seeding-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        defer { removePrivateDirectory(work) }
        let copy = work.appendingPathComponent("seed.kura")
        do {
            try FileManager.default.createDirectory(at: work, withIntermediateDirectories: false)
            try readAll(seed).write(to: copy)
            try readAll(URL(fileURLWithPath: log)).write(to: URL(fileURLWithPath: copy.path + "-wal"))
        } catch let e as KuraError {
            throw e
        } catch {
            throw KuraError(.io, "cannot copy the seed store \(seed.path) to \(work.path): \(error.localizedDescription)", path: work.path)
        }
        let db = try Database(path: copy.path)
        defer { db.close() }
        guard try db.checkpoint() else {
            throw KuraError(.busy, "could not apply the seed store's log (\(log)) to a private copy", path: seed.path)
        }
        return try readAll(copy)
    }

    /// Removes the private seeding directory (only ever one this process made).
    private static func removePrivateDirectory(_ dir: URL) {
        do { try FileManager.default.removeItem(at: dir) } catch {
            // A leftover hidden directory beside the store holds only copies of
            // the seed; nothing the store needs is lost.
        }
    }

    /// Closes the store: waits for running transactions, checkpoints if it
    /// can, and releases the files (Core Data's store removal). Contexts of
    /// this container fail with `.misuse` afterwards. Calling it again does
    /// nothing.
    public func close() {
        database.close()
    }
}

/// close(2), out of reach of `PersistentContainer.close()`'s name.
private func closeDescriptor(_ fd: Int32) {
    _ = close(fd)
}

extension ManagedObjectContext {
    /// The objects this context holds now: every inserted, changed or deleted
    /// one, and the clean ones something else still references (Core Data's
    /// `registeredObjects`; clean objects are held weakly here).
    public var registeredObjects: Set<ManagedObject> {
        Set(registry.values.map { $0.takeUnretainedValue() })
    }
}
