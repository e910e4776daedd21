// SharedMapping: a file's first bytes mapped into memory with MAP_SHARED, so
// every process (and every connection) that maps the same file sees the same
// bytes without a system call. Kura maps the store's `PATH-shm` file this way
// (FORMAT.md, "The shared log header"; SharedLogHeader.swift).
//
// Invariants:
//   - The file is at least `length` bytes long before it is mapped (the pager
//     grows it under the store's create lock, never shrinks it), so touching
//     the mapping never faults past the end of the file, unless someone
//     truncates the file behind Kura's back (RELIABILITY.md, assumptions).
//   - The mapping lives as long as this object; the descriptor it was made
//     from may be closed at once (the mapping keeps the file).

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `length` bytes of a file, mapped shared, readable and writable.
final class SharedMapping: @unchecked Sendable {
    // @unchecked Sendable: `base` and `length` are immutable; what the bytes
    // hold is synchronized by their users (SharedLogHeader's protocol: one
    // writer at a time under the store's writer lock, readers validate a copy).
    let base: UnsafeMutableRawPointer
    let length: Int

    private init(base: UnsafeMutableRawPointer, length: Int) {
        self.base = base
        self.length = length
    }

    deinit { _ = munmap(base, length) }

    /// Maps the first `length` bytes of `file`, which must be at least that
    /// long. Returns nil when the file is not a POSIX file (in memory, fault
    /// injecting) or the system refuses the mapping; callers then work
    /// without it. The corresponding C function is `mmap`.
    static func map(_ file: StorageFile, length: Int) -> SharedMapping? {
        guard let posix = file as? PosixFile, length > 0 else { return nil }
        return posix.withDescriptor { fd -> SharedMapping? in
            guard fd >= 0 else { return nil }
            let p = mmap(nil, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
            // MAP_FAILED is ((void *) -1), which Swift does not import.
            guard let p, p != UnsafeMutableRawPointer(bitPattern: -1) else { return nil }
            return SharedMapping(base: p, length: length)
        }
    }
}
