// ReaderMarks: the reader table of `PATH-shm` (FORMAT.md, "Reader marks"), which
// lets a connection of a format-7 store announce "inside a transaction" with one
// store to shared memory instead of two fcntl calls on the reader byte.
//
//     offset        size  field
//     128           8     checkpoint word: nonzero while a checkpointer, holding
//                         the reader byte exclusively, decides or runs
//     256 + 64 i    8     slot i (i < 60): nonzero while the connection that
//                         owns slot i is inside a transaction
//
// Slot i is owned by whoever holds lock byte 4096 + i of the `-shm` file
// exclusively (an OFD lock on Linux, released by the kernel when the owner dies).
//
// Invariants (FORMAT.md, "Reader marks"):
//   - Reader: store slot = 1, then load the checkpoint word (both sequentially
//     consistent). Word 0: the mark protects the transaction. Word nonzero:
//     store slot = 0 and take the reader byte shared instead (it waits out a
//     running checkpoint).
//   - Checkpointer: holding the reader byte exclusively, store word = 1, then load
//     every other slot. A nonzero slot whose lock byte is held (its owner is
//     alive) means a transaction may be reading: store word = 0, no checkpoint.
//     A nonzero slot whose lock byte is free is a dead owner's: ignored.
//     After the checkpoint, store word = 0 before giving back the reader byte.
//   - With both sides sequentially consistent, a reader that found word 0 has
//     its slot seen by any checkpointer that set the word after, and a
//     checkpointer that found the slot 0 has its word seen by the reader.
//   - A word left nonzero by a checkpointer that died is harmless (readers take
//     the reader byte) and is cleared by the next reader that holds the reader
//     byte shared (no checkpointer can be between setting and clearing it then)
//     or by the next checkpoint.
//   - The table lives in bytes the shared log header leaves zero; only builds of
//     format 7 or later touch it, and they use it only in a store of format 7 or
//     later, which older builds refuse.

import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// This connection's slot in the reader table of a mapped `-shm` file.
final class ReaderMarks: @unchecked Sendable {
    // @unchecked Sendable: the mapped words are accessed only through atomic
    // loads and stores (the protocol in the header comment); `file` is used only
    // for its locks (PosixFile guards its own state); `slot` is immutable. The
    // Pager calls enter/leave/checkpoint under its `txnLock`.
    static let checkpointWordOffset = 128
    static let slotsOffset = 256
    static let slotStride = 64
    static let slotCount = 60
    /// Lock byte of slot i in the `-shm` file: `lockBase + i` (past its data).
    static let lockBase: Int64 = 4096

    private let mapping: SharedMapping
    private let file: PosixFile
    /// The slot this connection owns.
    let slot: Int

    private init(mapping: SharedMapping, file: PosixFile, slot: Int) {
        self.mapping = mapping
        self.file = file
        self.slot = slot
    }

    deinit { file.close() }

    /// Claims a free slot (the first whose lock byte can be taken exclusively
    /// without waiting) and clears it. Returns nil when the mapping is too
    /// short, the platform has no `Atomic`, or every slot is owned: the
    /// connection then takes the reader byte for every transaction. `file` is
    /// the `-shm` file, kept open (it carries the slot locks) until this
    /// object goes.
    static func claim(mapping: SharedMapping, file: StorageFile) -> ReaderMarks? {
        guard let posix = file as? PosixFile, mapping.length >= slotOffset(slotCount) else { return nil }
        guard #available(macOS 15.0, iOS 18.0, *) else { return nil }
        for i in 0..<slotCount {
            // A lock the system refuses (an error, not a conflict) is one slot
            // not taken; without any, the connection uses the reader byte.
            do {
                guard try posix.lockRange(lockBase + Int64(i), .exclusive) else { continue }
            } catch {
                continue
            }
            let marks = ReaderMarks(mapping: mapping, file: posix, slot: i)
            marks.word(slotOffset(i)).pointee.store(0, ordering: .sequentiallyConsistent)
            return marks
        }
        return nil
    }

    @available(macOS 15.0, iOS 18.0, *)
    private func word(_ offset: Int) -> UnsafeMutablePointer<Atomic<UInt64>> {
        // The mapping is page-aligned and at least `slotsOffset + slotStride *
        // slotCount` bytes long (checked in `claim`); every offset used is a
        // multiple of 8 below that.
        (mapping.base + offset).assumingMemoryBound(to: Atomic<UInt64>.self)
    }

    private static func slotOffset(_ i: Int) -> Int { slotsOffset + slotStride * i }

    /// Reader, when its connection's first transaction starts: sets the slot,
    /// then returns true if no checkpoint is deciding or running (the mark
    /// protects the transaction), or clears it and returns false (take the
    /// reader byte shared instead).
    func enter() -> Bool {
        guard #available(macOS 15.0, iOS 18.0, *) else { return false }
        let mine = word(Self.slotOffset(slot))
        mine.pointee.store(1, ordering: .sequentiallyConsistent)
        if word(Self.checkpointWordOffset).pointee.load(ordering: .sequentiallyConsistent) == 0 { return true }
        mine.pointee.store(0, ordering: .sequentiallyConsistent)
        return false
    }

    /// Reader, when its connection's last transaction ends.
    func leave() {
        guard #available(macOS 15.0, iOS 18.0, *) else { return }
        word(Self.slotOffset(slot)).pointee.store(0, ordering: .sequentiallyConsistent)
    }

    /// Checkpointer, holding the reader byte exclusively: sets the checkpoint
    /// word and returns true if no other live connection's slot is set; else
    /// clears the word and returns false (a transaction may be reading).
    func beginCheckpoint() -> Bool {
        guard #available(macOS 15.0, iOS 18.0, *) else { return false }
        let w = word(Self.checkpointWordOffset)
        w.pointee.store(1, ordering: .sequentiallyConsistent)
        for i in 0..<Self.slotCount where i != slot {
            guard word(Self.slotOffset(i)).pointee.load(ordering: .sequentiallyConsistent) != 0 else { continue }
            if ownerIsAlive(i) {
                w.pointee.store(0, ordering: .sequentiallyConsistent)
                return false
            }
        }
        return true
    }

    /// Checkpointer, before it gives back the reader byte; also a reader that
    /// holds the reader byte shared and found the word set (a dead
    /// checkpointer's: no live one can be between setting and clearing it).
    func clearCheckpointWord() {
        guard #available(macOS 15.0, iOS 18.0, *) else { return }
        word(Self.checkpointWordOffset).pointee.store(0, ordering: .sequentiallyConsistent)
    }

    /// Whether the checkpoint word is set (for a reader on the reader byte,
    /// which clears a stale one).
    var checkpointWordSet: Bool {
        guard #available(macOS 15.0, iOS 18.0, *) else { return false }
        return word(Self.checkpointWordOffset).pointee.load(ordering: .sequentiallyConsistent) != 0
    }

    /// Whether slot `i`'s lock byte is held by someone: probed by taking it
    /// exclusively without waiting (and giving it back at once). A lock the
    /// system refuses to probe counts as held: the checkpoint is only postponed.
    private func ownerIsAlive(_ i: Int) -> Bool {
        let byte = Self.lockBase + Int64(i)
        do {
            guard try file.lockRange(byte, .exclusive) else { return true }
        } catch {
            return true
        }
        file.unlockRange(byte)
        return false
    }

    /// Test hook: sets or clears slot `i` as a connection that died inside a
    /// transaction would leave it, or the checkpoint word as a checkpointer
    /// that died would (`i == nil`).
    func setWordForTesting(slot i: Int?, _ value: UInt64) {
        guard #available(macOS 15.0, iOS 18.0, *) else { return }
        word(i.map(Self.slotOffset) ?? Self.checkpointWordOffset).pointee.store(value, ordering: .sequentiallyConsistent)
    }

    /// Test hook: slot `i`'s word now.
    func wordForTesting(slot i: Int?) -> UInt64 {
        guard #available(macOS 15.0, iOS 18.0, *) else { return 0 }
        return word(i.map(Self.slotOffset) ?? Self.checkpointWordOffset).pointee.load(ordering: .sequentiallyConsistent)
    }
}
