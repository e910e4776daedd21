// FileHeader: page 1 of every store (FORMAT.md, "The header page").
//
// Offsets are derived from each other, never typed twice (redb's habit):
//
//     offset  size  field
//     0       8     magic "KuraDB\n\0"
//     8       4     format version
//     12      4     page size in bytes
//     16      4     page count (pages 1 ... count exist in the database image)
//     20      4     first freelist trunk page, 0 if none
//     24      4     number of free pages (trunks and leaves)
//     28      4     catalog tree root page, 0 until the first write transaction
//     32      8     change counter: the counter after the commit that wrote
//                   this version of page 1 (format 4: commits that leave the
//                   other fields alone do not write page 1; the counter is
//                   derived, `FileHeader.changeCounter`)
//     40      8     database ID: random, fixed at creation; the log carries it
//                   too, so a log left over from another store is never applied
//     48      8     next catalog ID: the ID the next table or index gets (IDs
//                   are never reused, even after a drop); 0 means 1
//     56      4     counters tree root page (formats 2 to 4), 0 until the first
//                   table; 0 in format 5
//     60      4     zero
//     64      8     schema cookie (format 2): changes with every commit that
//                   creates, drops or alters a table or index, and only then
//     72      -     zero up to the trailer
//
// Format 1 stores have zeros at 56...71 and keep row counts and next row IDs
// in the catalog records; the first write transaction that loads the catalog
// migrates them to format 2 (Transaction.swift, `migrateCounters`). Format 3
// differs from 2 only in the `-shm` protocol (FORMAT.md, "The shared log
// header"). Format 4 differs from 3 only in when page 1 is written: a commit
// writes it only if a field other than the change counter changed, and the
// change counter of a snapshot is derived from the log (FORMAT.md, "The
// header page"). A connection that opens a format-2 or format-3 store alone
// moves it to 4. Format 5 keeps each table's counters at the end of its tree's
// right-most leaf instead of in the counters tree (FORMAT.md, "Table
// counters"); format 6 lets its log be of log version 2, which chains over
// each page's checksum (FORMAT.md, "Chain checksum"); format 7 differs from 6
// only in the `-shm` protocol: readers may mark themselves in its reader table
// instead of locking the reader byte (FORMAT.md, "Reader marks"); format 8
// lets leaves hold compact cells, a byte shorter each (FORMAT.md, "Cells";
// BTree/Node.swift). A connection that opens a format-2 to format-7 store
// alone moves it to 8 (Database, `upgradeFormat`); its old leaves stay as
// they are until a writer rebuilds them. Format 8 also moves the sync of a
// reset log's header from the reset to the first frame after it (FORMAT.md,
// "Reset"). Format 9 stores integral doubles in serial types 10 and 11
// (FORMAT.md, "Records"); a connection that opens a format-2 to format-8 store
// alone moves it to 9, and its old records keep type 9. Format 10 gives the
// leaves its writers build a 12-byte header without the right-most-child
// field (tree-page flag bit 2; FORMAT.md, "Layout"; BTree/Node.swift); a
// connection that opens a format-2 to format-9 store alone moves it to 10, and
// its old leaves keep the 16-byte header until a writer rebuilds them.
//     size-8  8     page checksum
//
// All integers little-endian. Page 1 is written through the log like any other
// page, so the header a reader sees always matches its snapshot.

enum FileHeader {
    static let magic: [UInt8] = Array("KuraDB\n\0".utf8)
    /// Bumped by every change to the on-disk format (FORMAT.md, "Version history").
    /// New stores are created at this version.
    static let formatVersion: UInt32 = 10
    /// The version the counters migration writes (format 1 to 2, the first
    /// write transaction that loads the catalog). Formats 2 and 3 become 4
    /// only when a connection opens the store alone (Pager, `setUpSharedHeader`).
    static let countersFormatVersion: UInt32 = 2
    /// From this version on, a commit that changes no field of page 1 but the
    /// change counter leaves page 1 out (FORMAT.md, "The header page"). Builds
    /// before it read the counter from page 1 alone, so they must refuse such
    /// a store, which the version does.
    static let derivedCounterVersion: UInt32 = 4
    /// From this version on, a table's counters live at the end of its tree's
    /// right-most leaf and the header names no counters tree (FORMAT.md,
    /// "Table counters"). Builds before it would look for the counters tree.
    static let leafCountersVersion: UInt32 = 5
    /// From this version on, the store's log may be of log version 2, whose
    /// chain checksum covers each page's checksum instead of its image
    /// (FORMAT.md, "Chain checksum"). Builds before it read only log version
    /// 1 and would take such a log for an invalid one, losing its commits,
    /// so they must refuse the store, which the version does.
    static let shortChainVersion: UInt32 = 6
    /// From this version on, a connection inside a transaction may announce it
    /// with its mark in the reader table of `PATH-shm` instead of the reader
    /// byte, and a checkpoint must find every live mark clear (FORMAT.md,
    /// "Reader marks"). Builds before it look only at the reader byte and
    /// would checkpoint under such a reader, so they must refuse the store,
    /// which the version does.
    static let readerMarksVersion: UInt32 = 7
    /// From this version on, writers build leaves of compact cells (tree-page
    /// flag bit 1: a table cell without its key length, an index cell without
    /// its value length; FORMAT.md, "Cells"). Builds before it would read
    /// such a leaf's cells wrong (they refuse the flag too), so they must
    /// refuse the store, which the version does. A store of an older format
    /// keeps wide leaves, which every build reads.
    static let compactCellsVersion: UInt32 = 8
    /// From this version on, a log reset does not sync the new header; the
    /// writer that appends the first frame of a generation syncs it first
    /// (FORMAT.md, "Reset"). Builds before it sync at the reset and append
    /// without syncing, so beside a connection of this build their frames could
    /// reach the disk before the header they follow: they must refuse the
    /// store, which the version does.
    static let lazyHeaderSyncVersion: UInt32 = 8
    /// From this version on, writers store a double that is an integer in
    /// the Int32 range in serial type 10 (1 body byte) or 11 (4 bytes)
    /// instead of 9 (FORMAT.md, "Records"). Builds before it reject those
    /// types as corrupt, so they must refuse the store, which the version
    /// does. Every record of an older store keeps type 9, which this build
    /// reads in every format.
    static let compactDoublesVersion: UInt32 = 9
    /// From this version on, writers build leaves with the short header
    /// (tree-page flag bit 2: no right-most-child field, the root at offset
    /// 8, cell pointers from 12; FORMAT.md, "Layout"). Builds before it
    /// would read such a leaf's root and pointers at the wrong offsets (their
    /// validation refuses the flag too), so they must refuse the store, which
    /// the version does. A store of an older format keeps 16-byte headers,
    /// which every build reads.
    static let shortLeafHeaderVersion: UInt32 = 10
    /// Versions this build opens: format 1 is migrated by the first write
    /// transaction that loads the catalog, formats 2 to 9 by a connection
    /// that opens the store alone.
    static let readableVersions: ClosedRange<UInt32> = 1...10

    static let magicOffset = 0
    static let magicLength = 8
    static let versionOffset = magicOffset + magicLength
    static let pageSizeOffset = versionOffset + 4
    static let pageCountOffset = pageSizeOffset + 4
    static let freelistHeadOffset = pageCountOffset + 4
    static let freeCountOffset = freelistHeadOffset + 4
    static let catalogRootOffset = freeCountOffset + 4
    static let changeCounterOffset = catalogRootOffset + 4
    static let databaseIDOffset = changeCounterOffset + 8
    static let nextCatalogIDOffset = databaseIDOffset + 8
    static let countersRootOffset = nextCatalogIDOffset + 8
    static let schemaCookieOffset = countersRootOffset + 8
    static let endOffset = schemaCookieOffset + 8

    static let minPageSize = 512
    static let maxPageSize = 65536

    /// A snapshot's change counter (FORMAT.md, "The change counter"): `field`,
    /// the counter field of the version of page 1 the snapshot sees, plus the
    /// commits of its log after the commit that wrote that version. That
    /// commit is the first commit frame at or after page 1's frame
    /// `pageOneFrame`, so those are the commit frames from `pageOneFrame` on,
    /// less one; a page 1 from the database file (`pageOneFrame` nil) was
    /// written by a checkpoint, and every commit of the log counts.
    /// `commits(f)` is the number of the snapshot's commit frames numbered
    /// `f` or more. In formats 1 to 3 every commit writes page 1, so this is
    /// the field. The pager and the raw inspector both derive it here.
    static func changeCounter(field: UInt64, pageOneFrame: Int?, commits: (_ from: Int) -> Int) -> UInt64 {
        guard let p = pageOneFrame else { return field &+ UInt64(commits(1)) }
        return field &+ UInt64(max(commits(p) - 1, 0))
    }

    static func isValidPageSize(_ n: Int) -> Bool {
        n >= minPageSize && n <= maxPageSize && n & (n - 1) == 0
    }

    /// Validates the fixed fields of a header page read from disk. The checksum
    /// is checked by the caller (it needs the page size first).
    static func validate(_ raw: UnsafeRawBufferPointer, path: String) throws(KuraError) -> (version: UInt32, pageSize: Int) {
        guard raw.count >= endOffset else {
            throw KuraError(.corrupt, "file is \(raw.count) bytes, too short to hold a Kura header; it is truncated or not a Kura store", path: path, page: 1)
        }
        guard Array(raw[magicOffset..<magicOffset + magicLength]) == magic else {
            throw KuraError(.notADatabase, "file does not start with Kura's magic number \"KuraDB\\n\\0\"; it is not a Kura store", path: path, page: 1)
        }
        let version = UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: versionOffset, as: UInt32.self))
        guard readableVersions.contains(version) else {
            throw KuraError(.unsupportedVersion, "file has format version \(version); this build reads versions \(readableVersions.lowerBound) to \(readableVersions.upperBound)", path: path, page: 1)
        }
        let ps = Int(UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: pageSizeOffset, as: UInt32.self)))
        guard isValidPageSize(ps) else {
            throw KuraError.corruption("header names page size \(ps), not a power of two from 512 to 65536", page: 1, path: path)
        }
        return (version, ps)
    }
}

extension Page {
    var headerPageCount: UInt32 {
        get { u32(FileHeader.pageCountOffset) }
        set { setU32(FileHeader.pageCountOffset, newValue) }
    }
    var headerFreelistHead: UInt32 {
        get { u32(FileHeader.freelistHeadOffset) }
        set { setU32(FileHeader.freelistHeadOffset, newValue) }
    }
    var headerFreeCount: UInt32 {
        get { u32(FileHeader.freeCountOffset) }
        set { setU32(FileHeader.freeCountOffset, newValue) }
    }
    var headerCatalogRoot: UInt32 {
        get { u32(FileHeader.catalogRootOffset) }
        set { setU32(FileHeader.catalogRootOffset, newValue) }
    }
    var headerDatabaseID: UInt64 {
        get { u64(FileHeader.databaseIDOffset) }
        set { setU64(FileHeader.databaseIDOffset, newValue) }
    }
    var headerNextCatalogID: Int64 {
        get { max(Int64(bitPattern: u64(FileHeader.nextCatalogIDOffset)), 1) }
        set { setU64(FileHeader.nextCatalogIDOffset, UInt64(bitPattern: newValue)) }
    }
    var headerVersion: UInt32 {
        get { u32(FileHeader.versionOffset) }
        set { setU32(FileHeader.versionOffset, newValue) }
    }
    var headerCountersRoot: UInt32 {
        get { u32(FileHeader.countersRootOffset) }
        set { setU32(FileHeader.countersRootOffset, newValue) }
    }
    var headerSchemaCookie: UInt64 {
        get { u64(FileHeader.schemaCookieOffset) }
        set { setU64(FileHeader.schemaCookieOffset, newValue) }
    }
    var headerChangeCounter: UInt64 {
        get { u64(FileHeader.changeCounterOffset) }
        set { setU64(FileHeader.changeCounterOffset, newValue) }
    }

    /// Fills a fresh header page.
    func initializeHeader(pageSize: Int, catalogRoot: UInt32) {
        zero()
        for (i, b) in FileHeader.magic.enumerated() { setU8(FileHeader.magicOffset + i, b) }
        setU32(FileHeader.versionOffset, FileHeader.formatVersion)
        setU32(FileHeader.pageSizeOffset, UInt32(pageSize))
        headerPageCount = 1
        headerFreelistHead = 0
        headerFreeCount = 0
        headerCatalogRoot = catalogRoot
        headerChangeCounter = 1
        headerDatabaseID = UInt64.random(in: 1...UInt64.max)
    }
}
