// FaultInjectingFileSystem: an in-memory file system that fails on command and
// simulates power loss, for crash and I/O-error tests (RELIABILITY.md).
//
// Faults: `failOperation(_:after:with:)` makes the Nth matching call (read,
// write, sync, truncate) throw `.io` (EIO) or `.diskFull` (ENOSPC) — once, or
// from then on until `clearFaults()`.
//
// Power loss: every write and truncate since a file's last successful sync is
// "pending". `powerLossImage(seed:)` returns the files as a power cut could
// leave them: each file's synced contents plus a random subset of its pending
// changes, applied in a random order, the last one possibly torn at a 512-byte
// boundary. Writes that were synced are always kept: that is the honesty the
// media must have (FORMAT.md, "Assumptions about the media").
//
// Crash points: `setMutationHook(_:)` runs a closure before every write, sync
// and truncate (the calls after which a power cut can leave the disk in a new
// state), so a crash test can take `powerLossImage(seed:)` at each of them in a
// single run of its workload (ReliabilityCrashMatrixTests).

/// A file system for tests: in memory, with injectable I/O errors and
/// simulated power loss. Thread-safe.
public final class FaultInjectingFileSystem: FileSystem, @unchecked Sendable {
    // @unchecked Sendable: all mutable state is guarded by `lock`.
    public enum Operation: Sendable, CaseIterable { case read, write, sync, truncate }

    let base = MemoryFileSystem()
    private let lock = ThreadLock()
    private var counts: [Operation: Int] = [:]
    private var fault: (operation: Operation?, at: Int, code: KuraError.Code, persistent: Bool)?
    private var seen = 0
    /// Contents as of each file's last sync.
    private var durable: [String: [UInt8]] = [:]
    /// Changes since the last sync, in order: a write (offset, bytes) or a truncate (size).
    private var pending: [String: [PendingChange]] = [:]

    enum PendingChange {
        case write(Int, [UInt8])
        case truncate(Int)
    }

    /// A hook run before every write, sync and truncate; see `setMutationHook`.
    private var mutationHook: (@Sendable (Operation, Int) -> Void)?
    private var mutations = 0

    public init() {}

    /// A file system whose files start as `image`'s, all of them durable (as
    /// after a reboot): for recovering from a power-loss image with faults armed.
    public convenience init(restoring image: MemoryFileSystem) {
        self.init()
        let files = image.lock.withLock { image.files.map { ($0.key, $0.value.bytes) } }
        for (path, bytes) in files {
            base.setContents(of: path, to: bytes)
            durable[path] = bytes
            pending[path] = []
        }
    }

    /// Runs `hook` before every write, sync and truncate, with the operation and
    /// its 1-based number among those calls (counted from when the hook was set).
    /// The hook runs on the caller's thread, outside this file system's lock, so
    /// it may call `powerLossImage(seed:)` or `currentImage()`. Pass nil to remove it.
    public func setMutationHook(_ hook: (@Sendable (Operation, Int) -> Void)?) {
        lock.withLock {
            mutationHook = hook
            mutations = 0
        }
    }

    func beforeMutation(_ op: Operation) {
        let call = lock.withLock { () -> (@Sendable (Operation, Int) -> Void, Int)? in
            guard let h = mutationHook else { return nil }
            mutations += 1
            return (h, mutations)
        }
        if let (h, n) = call { h(op, n) }
    }

    /// Writes and truncates not yet made durable by a sync, over all files.
    public var pendingChangeCount: Int { lock.withLock { pending.values.reduce(0) { $0 + $1.count } } }

    /// Makes the `n`th call (1-based, counted from now) of `operation` (or of any
    /// operation when nil) fail with `code` (`.io` or `.diskFull`); with
    /// `persistent`, every later matching call fails too.
    /// While true, taking a lock byte in shared mode fails with an I/O error, as
    /// `fcntl` failing with ENOLCK would (tests of lock failures).
    public var failSharedLocks: Bool {
        get { lock.withLock { sharedLocksFail } }
        set { lock.withLock { sharedLocksFail = newValue } }
    }
    private var sharedLocksFail = false

    public func failOperation(_ operation: Operation?, after n: Int, with code: KuraError.Code = .io, persistent: Bool = false) {
        lock.withLock {
            fault = (operation, n, code, persistent)
            seen = 0
        }
    }

    /// Stops injecting faults.
    public func clearFaults() { lock.withLock { fault = nil } }

    /// Calls made so far, per operation.
    public func operationCount(_ op: Operation) -> Int { lock.withLock { counts[op, default: 0] } }

    /// Total calls of any operation so far.
    public var totalOperations: Int { lock.withLock { counts.values.reduce(0, +) } }

    /// Whether a fault is armed and has not fired yet.
    public var faultPending: Bool { lock.withLock { fault != nil && seen < fault!.at } }

    func check(_ op: Operation, _ path: String) throws(KuraError) {
        try lock.withLock { () throws(KuraError) in
            counts[op, default: 0] += 1
            guard let f = fault, f.operation == nil || f.operation == op else { return }
            seen += 1
            if seen == f.at || (f.persistent && seen > f.at) {
                if !f.persistent { fault = nil }
                let what = f.code == .diskFull ? "no space left on device (injected ENOSPC)" : "input/output error (injected EIO)"
                throw KuraError(f.code, "\(op) failed: \(what)", path: path)
            }
        }
    }

    func recordWrite(_ path: String, _ offset: Int64, _ bytes: UnsafeRawBufferPointer) {
        lock.withLock { pending[path, default: []].append(.write(Int(offset), Array(bytes))) }
    }

    func recordTruncate(_ path: String, _ size: Int64) {
        lock.withLock { pending[path, default: []].append(.truncate(Int(size))) }
    }

    func recordSync(_ path: String) {
        let now = base.contents(of: path) ?? []
        lock.withLock {
            durable[path] = now
            pending[path] = []
        }
    }

    /// The files as a power cut now could leave them (see the header comment).
    /// Deterministic for a given seed.
    public func powerLossImage(seed: UInt64) -> MemoryFileSystem {
        var rng = SeededGenerator(seed)
        let image = MemoryFileSystem()
        let (files, changes) = lock.withLock { (durable, pending) }
        let paths = Set(files.keys).union(changes.keys).union(base.lock.withLock { Array(base.files.keys) })
        for path in paths {
            var bytes = files[path] ?? []
            let list = changes[path] ?? []
            // Keep a random subset, in a random order; tear the last kept write.
            var kept = list.filter { _ in rng.next() % 3 != 0 }
            if rng.next() % 2 == 0 { kept.shuffle(using: &rng) }
            for (i, change) in kept.enumerated() {
                switch change {
                case .truncate(let size):
                    if size < bytes.count { bytes.removeSubrange(size...) } else { bytes += [UInt8](repeating: 0, count: size - bytes.count) }
                case .write(let offset, var data):
                    if i == kept.count - 1 && data.count > 512 && rng.next() % 2 == 0 {
                        data = Array(data[0..<(512 * Int(1 + rng.next() % UInt64(data.count / 512)))])
                    }
                    if bytes.count < offset + data.count { bytes += [UInt8](repeating: 0, count: offset + data.count - bytes.count) }
                    bytes.replaceSubrange(offset..<(offset + data.count), with: data)
                }
            }
            if files[path] != nil || !kept.isEmpty { image.setContents(of: path, to: bytes) }
        }
        return image
    }

    /// The files as they are now, as if every write had reached the disk.
    public func currentImage() -> MemoryFileSystem {
        let image = MemoryFileSystem()
        for (path, data) in base.lock.withLock({ base.files.map { ($0.key, $0.value.bytes) } }) {
            image.setContents(of: path, to: data)
        }
        return image
    }

    // MARK: FileSystem

    public func open(_ path: String, create: Bool, permissionsOf template: StorageFile?) throws(KuraError) -> StorageFile {
        let existed = base.exists(path)
        let f = try base.open(path, create: create, permissionsOf: (template as? FaultFile)?.inner ?? template)
        if !existed { recordSync(path) }  // a new empty file: durable as empty
        return FaultFile(fs: self, inner: f)
    }

    public func exists(_ path: String) -> Bool { base.exists(path) }

    public func remove(_ path: String) throws(KuraError) {
        try base.remove(path)
        lock.withLock {
            durable[path] = nil
            pending[path] = nil
        }
    }

    public func directoryContents(_ path: String) throws(KuraError) -> [String] { try base.directoryContents(path) }

    public func createDirectory(_ path: String) throws(KuraError) { try base.createDirectory(path) }

    public func syncDirectory(_ path: String) throws(KuraError) {
        try check(.sync, path)
        try base.syncDirectory(path)
    }

    public func rename(_ source: String, to destination: String) throws(KuraError) {
        try base.rename(source, to: destination)
        lock.withLock {
            durable[destination] = durable[source]
            pending[destination] = pending[source]
            durable[source] = nil
            pending[source] = nil
        }
    }
}

final class FaultFile: StorageFile, @unchecked Sendable {
    // @unchecked Sendable: immutable references; the file system locks its state.
    let fs: FaultInjectingFileSystem
    let inner: StorageFile
    var path: String { inner.path }

    init(fs: FaultInjectingFileSystem, inner: StorageFile) {
        self.fs = fs
        self.inner = inner
    }

    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(KuraError) -> Int {
        try fs.check(.read, path)
        return try inner.read(into: buffer, at: offset)
    }

    func write(_ buffer: UnsafeRawBufferPointer, at offset: Int64) throws(KuraError) {
        fs.beforeMutation(.write)
        try fs.check(.write, path)
        try inner.write(buffer, at: offset)
        fs.recordWrite(path, offset, buffer)
    }

    func size() throws(KuraError) -> Int64 { try inner.size() }

    func truncate(to size: Int64) throws(KuraError) {
        fs.beforeMutation(.truncate)
        try fs.check(.truncate, path)
        try inner.truncate(to: size)
        fs.recordTruncate(path, size)
    }

    func sync(full: Bool) throws(KuraError) {
        fs.beforeMutation(.sync)
        try fs.check(.sync, path)
        try inner.sync(full: full)
        fs.recordSync(path)
    }

    func lock(_ byte: LockByte, _ mode: LockMode) throws(KuraError) -> Bool {
        if mode == .shared && fs.failSharedLocks {
            throw KuraError(.io, "fcntl lock failed: no locks available (injected)", path: path)
        }
        return try inner.lock(byte, mode)
    }
    func unlock(_ byte: LockByte) { inner.unlock(byte) }
    func close() { inner.close() }
}

/// SplitMix64, so power-loss images reproduce by seed.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(_ seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
