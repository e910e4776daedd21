// StoreWalker: the engine's integrity check (IntegrityCheck.swift) run over a
// `RawStore` — the store file's pages with the committed log frames applied,
// read without the engine's pager — for the `kura` tool's `check`, `pages`,
// `stats`, `schema` and `info`, so that they work on stores the engine refuses
// to open and report what `ReadTransaction.checkIntegrity` reports on the same
// snapshot.
//
// What the raw store adds to the shared check (`RawStore: IntegritySource`):
// page 1 is read without trusting its checksum, then its checksum, fixed fields
// (magic, version, page size, database ID) and page count (against the file and
// the log's last commit) are judged; a leaked page's note names its kind byte or
// why it cannot be read.

/// Walks a `RawStore`. See the header comment.
package final class StoreWalker {
    let checker: IntegrityChecker<RawStore>

    /// - Parameters:
    ///   - limit: how many problems to keep (all are counted).
    ///   - collectUsage: record what every page is used for (for `kura pages`).
    ///   - catalogOnly: read the header, freelist and catalog only (for `kura
    ///     info` and `kura schema`): no table or index is walked.
    package init(_ store: RawStore, limit: Int = 100, collectUsage: Bool = false, catalogOnly: Bool = false) {
        checker = IntegrityChecker(store, limit: limit, collectUsage: collectUsage, catalogOnly: catalogOnly)
    }

    /// Runs the whole walk.
    package func run() -> Inspection { checker.run() }
}

extension RawStore: IntegritySource {
    func checkHeader(report: (UInt32, String) -> Void) -> HeaderFields? {
        let r = rawPage(1)
        var h = HeaderFields(r.page)
        h.changeCounter = changeCounter(field: h.changeCounter)
        guard r.complete else {
            report(1, "header page is incomplete: \(r.incompleteReason)")
            return h
        }
        if !h.checksumValid {
            let from: String
            switch r.origin {
            case .file: from = "in the store file"
            case .frame(let f): from = "in log frame \(f)"
            }
            report(1, "header page checksum mismatch \(from): stored \(hex(h.storedChecksum ?? 0)), computed \(hex(h.computedChecksum ?? 0))")
        }
        if !h.magicValid || !FileHeader.readableVersions.contains(h.version) || Int(h.pageSize) != pageSize || h.databaseID != databaseID {
            report(1, "header page's fixed fields (magic, version, page size, database ID) differ from the store file's")
        }
        if let claimedCount = claimedPageCount {
            report(1, "header claims \(claimedCount) pages, but the file (\(fileSize) bytes) and the log hold at most \(pageCount); checking \(pageCount)")
        } else if wal.committedFrames > 0 && h.pageCount != wal.committedPageCount {
            report(1, "header page count \(h.pageCount) differs from the log's last commit (\(wal.committedPageCount))")
        }
        if h.freeCount > pageCount {
            report(1, "header counts \(h.freeCount) free pages, more than the \(pageCount) pages of the store")
        }
        return h
    }

    func leakedPageNote(_ page: UInt32) -> String {
        let r = rawPage(page)
        return r.complete ? "kind byte \(r.kindByte)" : r.readError.map { "unreadable: \($0.message)" } ?? "missing from the file"
    }
}
