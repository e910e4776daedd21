// RawStore: a store file and its log read byte by byte, for the `kura` tool's
// inspection commands (`info`, `pages`, `page`, `wal`, `check`, `stats`, `schema`).
//
// It follows FORMAT.md, "Reading a store: checklist", without the engine's pager,
// so that it works on files the engine refuses to open:
//
//   1. the file is opened read-only (O_RDONLY) and never written; a missing
//      `-wal` is not created;
//   2. the reader lock byte is held shared while the store is inspected, so no
//      checkpoint rewrites the file meanwhile (another process is only ever
//      blocked from checkpointing, which it postpones);
//   3. the fixed header fields (magic, version, page size, database ID) come from
//      the file's page 1 without trusting its checksum (FORMAT.md, "The header
//      page"); a file too short, with another magic, version or page size, is
//      refused with the engine's error codes;
//   4. the log is scanned frame by frame (bounded by its size): every whole frame
//      is described (salts, chain checksum, page checksum), and the committed log
//      (longest valid prefix cut back to its last commit frame) is indexed;
//   5. page n is the newest committed frame of n, else page n of the file.
//
// Hostile bytes: every read is bounds-checked; a short read of a page is reported
// as a missing page; a page count larger than the file and log could hold is
// clamped (and reported by the walker), so that no loop runs over billions of
// pages that do not exist.

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The fields of a header page (page 1), decoded without judging them.
package struct HeaderFields: Sendable, Equatable {
    package var magicValid: Bool
    package var version: UInt32
    package var pageSize: UInt32
    package var pageCount: UInt32
    package var freelistHead: UInt32
    package var freeCount: UInt32
    package var catalogRoot: UInt32
    package var changeCounter: UInt64
    package var databaseID: UInt64
    package var nextCatalogID: Int64
    /// Root of the counters tree (format 2; 0 in format 1 or before the first table).
    package var countersRoot: UInt32
    /// Schema cookie (format 2).
    package var schemaCookie: UInt64
    /// Stored and computed checksums (nil when the page is incomplete).
    package var storedChecksum: UInt64?
    package var computedChecksum: UInt64?
    package var checksumValid: Bool { storedChecksum != nil && storedChecksum == computedChecksum }

    init(_ p: Page) {
        magicValid = (0..<FileHeader.magicLength).allSatisfy { p.u8(FileHeader.magicOffset + $0) == FileHeader.magic[$0] }
        version = p.u32(FileHeader.versionOffset)
        pageSize = p.u32(FileHeader.pageSizeOffset)
        pageCount = p.headerPageCount
        freelistHead = p.headerFreelistHead
        freeCount = p.headerFreeCount
        catalogRoot = p.headerCatalogRoot
        changeCounter = p.headerChangeCounter
        databaseID = p.headerDatabaseID
        nextCatalogID = p.headerNextCatalogID
        countersRoot = p.headerCountersRoot
        schemaCookie = p.headerSchemaCookie
        storedChecksum = p.u64(p.size - pageTrailerSize)
        computedChecksum = p.computeChecksum()
    }
}

/// One whole frame of the log, as found in the file.
package struct WALFrameInfo: Sendable {
    /// Frame number, from 1.
    package let number: Int
    /// Byte offset of the frame header in the log.
    package let offset: Int64
    package let page: UInt32
    /// Commit field: the page count after the transaction in its last frame, else 0.
    package let commit: UInt32
    /// Both salts equal the log header's.
    package let saltsMatch: Bool
    /// The stored chain checksum equals the one computed from the previous frame's
    /// stored checksum (the header's for frame 1).
    package let chainValid: Bool
    /// The page image's own trailer matches (seed = the frame's page number).
    package let pageChecksumValid: Bool
    /// Part of the committed log (FORMAT.md, "Validity").
    package internal(set) var committed: Bool
}

/// What the log file holds.
package struct WALInfo: Sendable {
    package let path: String
    package let exists: Bool
    package let fileSize: Int64
    /// The file holds at least the 40 header bytes.
    package let headerComplete: Bool
    package let magicValid: Bool
    package let version: UInt32
    package let pageSize: UInt32
    package let generation: UInt32
    package let salt1: UInt32
    package let salt2: UInt32
    package let databaseID: UInt64
    package let storedChecksum: UInt64
    package let checksumValid: Bool
    /// Whether the database ID equals the store's.
    package let databaseIDMatches: Bool
    /// The header is valid for this store: frames in it may count.
    package let headerValid: Bool
    /// Why the header is not valid, if it is not.
    package let headerProblem: String?
    /// Every whole frame in the file.
    package let frames: [WALFrameInfo]
    /// Bytes after the last whole frame (a torn append).
    package let trailingBytes: Int64
    /// Zero bytes a synced commit wrote ahead of the log's end, from the
    /// first frame whose header is all zeros to the end of the file (not
    /// frames: FORMAT.md, "Validity").
    package var aheadBytes: Int64 = 0
    /// Frames of the longest valid prefix.
    package let validFrames: Int
    /// Frames of the committed log (0 if none): the last commit frame's number.
    package let committedFrames: Int
    /// Commit field of the last committed frame (0 if none).
    package let committedPageCount: UInt32
    /// Transactions in the committed log.
    package let transactions: Int
    /// Why the valid prefix ends where it does (nil when every frame is valid).
    package let stopReason: String?
}

/// Where a page version came from.
package enum PageOrigin: Sendable, Equatable {
    /// The database file, at `(n - 1) * pageSize`.
    case file
    /// The committed log frame with this number.
    case frame(Int)
}

/// A store file and its log, read without the engine's pager. See the header comment.
///
/// Lifetime: holds the store's reader lock byte (shared) from `init` until
/// ``close()`` or deinit.
package final class RawStore {
    package let path: String
    let file: ReadOnlyFile
    var walFile: ReadOnlyFile?
    package let fileSize: Int64
    package let pageSize: Int
    package let databaseID: UInt64
    /// Header fields of the file's own copy of page 1.
    package let fileHeader: HeaderFields
    /// The log.
    package let wal: WALInfo
    /// Newest committed frame of each page.
    let frameIndex: [UInt32: Int]
    /// Page count of the snapshot: the last commit's, else page 1's.
    package let pageCount: UInt32
    /// The page count the header claims, when it was clamped because the file and
    /// the log could not hold that many pages.
    package let claimedPageCount: UInt32?
    /// Whether the reader lock byte is held (false if another connection kept it
    /// exclusively past the wait, which only a checkpoint does).
    package let lockHeld: Bool

    /// Opens `path` read-only and reads its log.
    ///
    /// - Throws: `.notFound` / `.io` if the file cannot be opened or read;
    ///   `.corrupt` (too short, bad page size), `.notADatabase`,
    ///   `.unsupportedVersion` if the fixed header fields are unusable;
    ///   `.busy` if a checkpoint held the reader lock for `busyTimeout` seconds.
    package init(path: String, busyTimeout: Double = 5) throws(KuraError) {
        self.path = path
        file = try ReadOnlyFile.open(path)
        var waited = 0.0
        var delay = 0.0001
        while !(try file.lock(.reader, .shared)) {
            if waited >= busyTimeout {
                throw KuraError(.busy, "another connection kept the store locked (checkpointing) for \(busyTimeout) s; retry", path: path)
            }
            usleep(UInt32(delay * 1e6))
            waited += delay
            delay = min(delay * 2, 0.01)
        }
        lockHeld = true
        fileSize = try file.size()
        var first = [UInt8](repeating: 0, count: FileHeader.endOffset)
        let f = file
        let n = try first.withMutableBytes { b throws(KuraError) in try f.readAvailable(into: b, at: 0) }
        let (_, ps) = try first.withBytes { b throws(KuraError) in
            try FileHeader.validate(UnsafeRawBufferPointer(rebasing: b[0..<n]), path: path)
        }
        pageSize = ps
        databaseID = first.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(fromByteOffset: FileHeader.databaseIDOffset, as: UInt64.self)) }
        let p1 = Page(number: 1, size: ps)
        _ = try f.readAvailable(into: p1.buffer, at: 0)
        fileHeader = HeaderFields(p1)

        let walPath = path + "-wal"
        let (info, log) = try RawStore.readLog(walPath, pageSize: ps, databaseID: databaseID)
        wal = info
        walFile = log
        var index: [UInt32: Int] = [:]
        for f in info.frames where f.committed { index[f.page] = f.number }
        frameIndex = index

        // Page count of the snapshot.
        var count: UInt32
        if info.committedFrames > 0 {
            count = info.committedPageCount
        } else {
            count = fileHeader.pageCount
        }
        if count == 0 { count = 1 }
        // A page count beyond what the file and log can hold is clamped, so that
        // loops over pages stay bounded by real bytes.
        // Pages past the end of the file exist only as log frames, or as free
        // leaf pages never written (allocated and freed in one transaction), so
        // the count is at most the file's pages plus the logged pages plus some
        // slack; anything larger comes from damaged (or hostile) bytes.
        let filePages = UInt64((fileSize + Int64(ps) - 1) / Int64(ps))
        let plausible = filePages + UInt64(index.count) + (1 << 20)
        if UInt64(count) > plausible {
            claimedPageCount = count
            count = UInt32(clamping: max(filePages + UInt64(index.count), 1))
        } else {
            claimedPageCount = nil
        }
        pageCount = count
    }

    deinit { close() }

    /// Releases the lock and closes the files.
    package func close() {
        file.unlock(.reader)
        file.close()
        walFile?.close()
        walFile = nil
    }

    /// Header fields of page 1 as the snapshot sees it (the log's copy wins),
    /// with the snapshot's change counter (`changeCounter(field:)`).
    package var header: HeaderFields {
        var h = HeaderFields(rawPage(1).page)
        h.changeCounter = changeCounter(field: h.changeCounter)
        return h
    }

    /// The snapshot's change counter, from the counter field of the page 1
    /// it sees (`FileHeader.changeCounter`, the pager's rule).
    package func changeCounter(field: UInt64) -> UInt64 {
        let commitFrames = wal.frames.filter { $0.committed && $0.commit != 0 }.map(\.number)
        return FileHeader.changeCounter(field: field, pageOneFrame: frameIndex[1]) { from in
            commitFrames.lazy.filter { $0 >= from }.count
        }
    }

    /// Which frame or file copy page `number` comes from.
    package func origin(of number: UInt32) -> PageOrigin {
        if let f = frameIndex[number] { return .frame(f) }
        return .file
    }

    /// A page read without checks: its bytes (zeros past the end of the file),
    /// where they came from, and whether all of them existed.
    package struct RawPage {
        let page: Page
        package let origin: PageOrigin
        /// False when the file (or log) ended before the page did, or reading it
        /// failed (then `readError` says why).
        package let complete: Bool
        /// The error of a read that failed (an I/O error, not a short file).
        package var readError: KuraError?
        /// Why the page is incomplete, for reports.
        package var incompleteReason: String {
            if let readError { return "reading it failed (\(readError.message))" }
            return "the \(origin == .file ? "file" : "log") ends inside it"
        }
        package var storedChecksum: UInt64 { page.u64(page.size - pageTrailerSize) }
        package var computedChecksum: UInt64 { page.computeChecksum() }
        package var checksumValid: Bool { complete && storedChecksum == computedChecksum }
        /// The page's bytes.
        package var bytes: [UInt8] { Array(UnsafeRawBufferPointer(page.buffer)) }
        package var kindByte: UInt8 { page.u8(0) }
    }

    /// Page `number` (1 ... pageCount is meaningful; any number is readable).
    package func rawPage(_ number: UInt32) -> RawPage {
        let p = Page(number: number, size: pageSize)
        let origin = self.origin(of: number)
        var got = 0
        var readError: KuraError?
        do throws(KuraError) {
            switch origin {
            case .frame(let f):
                let offset = Int64(WriteAheadLog.headerSize) + Int64(f - 1) * Int64(WriteAheadLog.frameHeaderSize + pageSize) + Int64(WriteAheadLog.frameHeaderSize)
                got = try walFile?.readAvailable(into: p.buffer, at: offset) ?? 0
            case .file:
                if number >= 1 {
                    got = try file.readAvailable(into: p.buffer, at: Int64(number - 1) * Int64(pageSize))
                }
            }
        } catch {
            readError = error
        }
        return RawPage(page: p, origin: origin, complete: got == pageSize && readError == nil, readError: readError)
    }

    // MARK: The log

    static func readLog(_ walPath: String, pageSize: Int, databaseID: UInt64) throws(KuraError) -> (WALInfo, ReadOnlyFile?) {
        let log: ReadOnlyFile
        do { log = try ReadOnlyFile.open(walPath) } catch {
            if error.code == .notFound {
                return (WALInfo(path: walPath, exists: false, fileSize: 0, headerComplete: false, magicValid: false, version: 0,
                                pageSize: 0, generation: 0, salt1: 0, salt2: 0, databaseID: 0, storedChecksum: 0,
                                checksumValid: false, databaseIDMatches: false, headerValid: false,
                                headerProblem: "the log file does not exist", frames: [], trailingBytes: 0, validFrames: 0,
                                committedFrames: 0, committedPageCount: 0, transactions: 0, stopReason: nil), nil)
            }
            throw error
        }
        let size = try log.size()
        var h = [UInt8](repeating: 0, count: WriteAheadLog.headerSize)
        let got = try h.withMutableBytes { b throws(KuraError) in try log.readAvailable(into: b, at: 0) }
        // The validity rules are the engine's (WAL/LogScanner.swift).
        let header = h.withUnsafeBytes { b in
            LogScanner.checkHeader(UnsafeRawBufferPointer(rebasing: b[0..<got]), fileSize: size, pageSize: pageSize, databaseID: databaseID)
        }
        let headerValid = header.isValid

        // Every whole frame, bounded by the file size.
        let frameSize = WriteAheadLog.frameHeaderSize + pageSize
        let whole = size > Int64(WriteAheadLog.headerSize) ? (size - Int64(WriteAheadLog.headerSize)) / Int64(frameSize) : 0
        let trailing = size > Int64(WriteAheadLog.headerSize) ? (size - Int64(WriteAheadLog.headerSize)) % Int64(frameSize) : 0
        var frames: [WALFrameInfo] = []
        frames.reserveCapacity(Int(min(whole, 1 << 20)))
        var buffer = [UInt8](repeating: 0, count: frameSize)
        var scanner = LogScanner(pageSize: pageSize, version: header.version, salt1: header.salt1, salt2: header.salt2, chain: header.storedChecksum)
        var previous = header.storedChecksum
        var ahead: Int64 = 0
        var frame = 1
        while Int64(frame) <= whole {
            let offset = Int64(WriteAheadLog.headerSize) + Int64(frame - 1) * Int64(frameSize)
            let n = try buffer.withMutableBytes { b throws(KuraError) in try log.readAvailable(into: b, at: offset) }
            if n < frameSize { break }
            // Zero bytes a synced commit wrote ahead of the log's end
            // (`WriteAheadLog.prepareAhead`; FORMAT.md, "Validity"): nothing
            // from here on is a frame, and the log ends here as it would at
            // the end of the file.
            let zeroHeader = buffer.withUnsafeBytes { b in b[0..<WriteAheadLog.frameHeaderSize].allSatisfy { $0 == 0 } }
            if zeroHeader {
                ahead = size - offset
                break
            }
            let info: WALFrameInfo = buffer.withUnsafeBytes { b in
                // `n == frameSize`, so the buffer is non-empty.
                let base = b.baseAddress!
                let check = scanner.next(base, previousStored: previous)
                // The scanner checked the image already in a version-2 log.
                let pageOK = check.imageValid ?? LogScanner.imageMatchesChecksum(base, pageSize: pageSize)
                previous = check.storedChain
                return WALFrameInfo(number: frame, offset: offset, page: check.page, commit: check.commit,
                                    saltsMatch: check.saltsMatch, chainValid: check.chainValid,
                                    pageChecksumValid: pageOK, committed: false)
            }
            frames.append(info)
            frame += 1
        }
        let validFrames = scanner.validFrames
        let committedFrames = scanner.committedFrames
        var stopReason = scanner.stopReason
        if headerValid {
            for i in 0..<committedFrames { frames[i].committed = true }
            if stopReason == nil && validFrames > committedFrames {
                stopReason = "frames \(committedFrames + 1)...\(validFrames) belong to a transaction without a commit frame"
            } else if stopReason != nil && validFrames > committedFrames {
                stopReason! += "; frames \(committedFrames + 1)...\(validFrames) before it have no commit frame"
            }
        } else if !frames.isEmpty {
            stopReason = "the log header is not valid, so no frame counts"
        } else {
            stopReason = nil
        }
        let info = WALInfo(path: walPath, exists: true, fileSize: size, headerComplete: header.complete, magicValid: header.magicValid,
                           version: header.version, pageSize: header.pageSize, generation: header.generation,
                           salt1: header.salt1, salt2: header.salt2,
                           databaseID: header.databaseID, storedChecksum: header.storedChecksum, checksumValid: header.checksumValid,
                           databaseIDMatches: header.databaseIDMatches, headerValid: headerValid, headerProblem: header.problem,
                           frames: frames, trailingBytes: ahead > 0 ? 0 : trailing, aheadBytes: ahead,
                           validFrames: headerValid ? validFrames : 0,
                           committedFrames: headerValid ? committedFrames : 0,
                           committedPageCount: headerValid ? scanner.committedPageCount : 0,
                           transactions: headerValid ? scanner.transactions : 0, stopReason: stopReason)
        return (info, log)
    }
}

extension RawStore: PageSource {
    /// Page `number` of the snapshot, checked as the engine checks it: in range,
    /// present, checksum, and tree-page structure.
    func page(_ number: UInt32) throws(KuraError) -> Page {
        guard number >= 1 && number <= pageCount else {
            throw KuraError(.corrupt, "reference to page \(number), outside 1...\(pageCount)", path: path, page: number)
        }
        let r = rawPage(number)
        let from: String
        switch r.origin {
        case .file: from = ""
        case .frame(let f): from = " (log frame \(f))"
        }
        if let e = r.readError { throw e }
        guard r.complete else {
            throw KuraError(.corrupt, "page is past the end of the \(r.origin == .file ? "file; the file is truncated" : "log")", path: path, page: number)
        }
        guard r.checksumValid else {
            throw KuraError(.corrupt, "checksum mismatch\(from): stored \(hex(r.storedChecksum)), computed \(hex(r.computedChecksum))", path: path, page: number)
        }
        try Node.validate(r.page)
        return r.page
    }
}
