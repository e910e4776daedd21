// ExternalValues: large values of `external` columns, kept in files beside the
// store (Core Data's "allows external storage"). Format: FORMAT.md, "External
// values"; failure handling: RELIABILITY.md.
//
// Layout. The files live in the directory `PATH-external` (named like the log,
// `PATH-wal`), one file per value, named `<id>-<random>`: the 16 lowercase hex
// digits of the value's row ID in the registry table `_kura_external`, a dash,
// 16 hex digits of a fresh random number. A name is never reused and never
// derived from the content, so no two transactions ever share a file.
//
// In a record, an `external` column holds a blob (a value below the threshold,
// inline) or the text `kura-external:<name>:<length>:<xxh64>` (the reference;
// text cannot be a value of the column, so the two never meet). Callers only
// ever see blobs: `values(in:rowID:)`, `fetch` and `resolvedValues(of:in:)` read
// the files inside the transaction, whose snapshot keeps them alive.
//
// Store tables (ordinary tables with schemas, nothing new in the page format):
//   _kura_external        one row per live file: name, length, checksum
//   _kura_external_trash  one row per file no committed row needs any more:
//                         name, the change counter of the commit that dropped it
//
// Invariants, and the transitions that keep them:
//   1. A file is written, synced and its directory synced (unless durability is
//      `off`) before the commit whose rows reference it (`writeExternal`), by the
//      transaction holding the store's writer lock.
//   2. A committed reference names a file with a registry row: the registry row
//      is inserted in the transaction that writes the reference.
//   3. A file leaves the registry for the trash in the transaction that drops
//      its last reference (update replacing it, delete, drop table); it is
//      removed from disk by a later write transaction that finds no snapshot
//      older than its own in use: no other connection inside a transaction
//      (the reader lock byte, taken exclusively without waiting, as a checkpoint
//      does) and no other in-process snapshot (`Pager.isOnlySnapshot`). A
//      snapshot no older than the writer's sees the commit that dropped the file.
//      The trash row is deleted in the same transaction as the file; a crash
//      between the two leaves a trash row whose file is gone (harmless).
//   4. Files of a transaction that rolls back are removed before its writer
//      lock is released (`removeUncommittedExternalFiles`). Files of one that
//      crashed are orphans: in neither table. The first write transaction of
//      each connection removes them (`sweepOrphans`): under the writer lock no
//      other transaction can be writing files, and this one skips its own.
//
// Reading checks the file's length and XXH64 against the reference: a missing,
// short or damaged file throws `.corrupt` naming the table, column, row and file.

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A record's pointer to one external file.
struct ExternalReference: Hashable, Sendable {
    let name: String
    let length: Int
    let checksum: UInt64

    static let prefix = "kura-external:"
    static let registryTable = "_kura_external"
    static let trashTable = "_kura_external_trash"

    /// The directory holding the files of the store at `storePath`.
    static func directory(of storePath: String) -> String { storePath + "-external" }

    /// The row ID in `_kura_external` that `name` carries, or nil if `name` is
    /// not the name of an external file.
    static func id(ofName name: String) -> Int64? {
        let u = Array(name.utf8)
        guard u.count == 33, u[16] == UInt8(ascii: "-"),
              let id = UInt64(String(decoding: u[0..<16], as: UTF8.self), radix: 16),
              UInt64(String(decoding: u[17...], as: UTF8.self), radix: 16) != nil else { return nil }
        return Int64(bitPattern: id)
    }

    static func name(id: Int64) -> String {
        hex16(UInt64(bitPattern: id)) + "-" + hex16(UInt64.random(in: .min ... .max))
    }

    var id: Int64 {
        // `name` was checked by `parse` or made by `name(id:)`.
        Self.id(ofName: name) ?? 0
    }

    var text: String { Self.prefix + name + ":" + String(length) + ":" + hex16(checksum) }

    /// Parses a reference's text; nil if it is not one.
    static func parse(_ text: String) -> ExternalReference? {
        guard text.hasPrefix(prefix) else { return nil }
        let parts = text.dropFirst(prefix.count).split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 3, id(ofName: String(parts[0])) != nil,
              let length = Int(parts[1]), length >= 0, parts[2].utf8.count == 16,
              let sum = UInt64(parts[2], radix: 16) else { return nil }
        return ExternalReference(name: String(parts[0]), length: length, checksum: sum)
    }
}

func hex16(_ v: UInt64) -> String { String(v, radix: 16).leftPadded(16) }

/// Per-connection state of external values. `@unchecked Sendable`: `swept` is
/// guarded by `lock`.
final class ExternalState: @unchecked Sendable {
    private let lock = ThreadLock()
    private var sweptOnce = false
    var swept: Bool {
        get { lock.withLock { sweptOnce } }
        set { lock.withLock { sweptOnce = newValue } }
    }
}

extension ReadTransaction {
    var externalDirectory: String { ExternalReference.directory(of: database.path) }

    /// The values of `row` of `table`, with external values read from their
    /// files (the raw `Row.values()` gives their references as text).
    ///
    /// - Throws: `.corrupt` naming the table, column, row and file when an
    ///   external file is missing or damaged; as `values(in:rowID:)` otherwise.
    public func resolvedValues(of row: Row, in table: TableInfo) throws(KuraError) -> [Value] {
        try decodeRow(row.record, table, rowID: row.rowID)
    }

    /// Replaces references in the external columns of `values` by the bytes of
    /// their files.
    func resolveExternal(_ values: inout [Value], _ schema: TableSchema, table: String, rowID: Int64?) throws(KuraError) {
        for i in schema.externalColumns where i < values.count {
            guard case .text(let t) = values[i] else { continue }
            let column = schema.columns[i].name
            guard let ref = ExternalReference.parse(t) else {
                throw KuraError(.corrupt, "column \"\(column)\" of table \"\(table)\"\(rowID.map { ", row \($0)," } ?? "") holds text that is not an external reference", path: database.path)
            }
            values[i] = .blob(try readExternal(ref, table: table, column: column, rowID: rowID))
        }
    }

    /// The bytes of an external file, checked against its reference.
    func readExternal(_ ref: ExternalReference, table: String, column: String, rowID: Int64?) throws(KuraError) -> [UInt8] {
        let path = externalDirectory + "/" + ref.name
        let what = "external value of column \"\(column)\" of table \"\(table)\"" + (rowID.map { ", row \($0)" } ?? "")
        let file: StorageFile
        do throws(KuraError) { file = try database.options.fileSystem.open(path, create: false) } catch {
            if error.code == .notFound { throw KuraError(.corrupt, "\(what): file \(ref.name) is missing", path: path) }
            throw error
        }
        defer { file.close() }
        let size = try file.size()
        guard size == Int64(ref.length) else {
            throw KuraError(.corrupt, "\(what): file \(ref.name) holds \(size) bytes, the reference says \(ref.length)", path: path)
        }
        var bytes = [UInt8](repeating: 0, count: ref.length)
        let whole = try bytes.withMutableBytes { b throws(KuraError) in try file.readFully(into: b, at: 0) }
        guard whole, Checksum.xxh64(bytes) == ref.checksum else {
            throw KuraError(.corrupt, "\(what): file \(ref.name) is damaged (checksum mismatch)", path: path)
        }
        return bytes
    }

    /// Problems with external files as this snapshot sees them: references to
    /// missing, short or damaged files or without a registry row, registry rows
    /// no row references, and files in the directory the store does not know
    /// (orphans of a crashed transaction, removed by the next write; a writer
    /// running now may also be writing one). Used by `kura check`.
    package func checkExternalValues(limit: Int = 100) throws(KuraError) -> [IntegrityProblem] {
        var problems: [IntegrityProblem] = []
        func note(_ m: String) { if problems.count < limit { problems.append(IntegrityProblem(page: 0, message: m)) } }
        var registry: [Int64: String] = [:]
        var known: Set<String> = []
        if try tableExists(ExternalReference.registryTable) {
            let c = try rows(in: try table(ExternalReference.registryTable))
            while let r = try c.next() {
                if case .text(let n) = try r.value(at: 0) { registry[r.rowID] = n; known.insert(n) }
            }
        }
        if try tableExists(ExternalReference.trashTable) {
            let c = try rows(in: try table(ExternalReference.trashTable))
            while let r = try c.next() { if case .text(let n) = try r.value(at: 0) { known.insert(n) } }
        }
        var referenced: Set<Int64> = []
        for name in try tableNames() {
            let info = try table(name)
            guard let schema = try schema(of: info), schema.hasExternal else { continue }
            let c = try rows(in: info)
            while let r = try c.next() {
                let values = try r.values()
                for i in schema.externalColumns where i < values.count {
                    guard case .text(let t) = values[i] else { continue }
                    let column = schema.columns[i].name
                    guard let ref = ExternalReference.parse(t) else {
                        note("table \"\(name)\", row \(r.rowID), column \"\(column)\": not an external reference")
                        continue
                    }
                    referenced.insert(ref.id)
                    if registry[ref.id] != ref.name { note("table \"\(name)\", row \(r.rowID), column \"\(column)\": file \(ref.name) has no registry row") }
                    do throws(KuraError) { _ = try readExternal(ref, table: name, column: column, rowID: r.rowID) } catch { note(error.message) }
                }
            }
        }
        for (id, n) in registry.sorted(by: { $0.key < $1.key }) where !referenced.contains(id) {
            note("external file \(n) is registered but no row references it")
        }
        let fs = database.options.fileSystem
        if fs.exists(externalDirectory) {
            for n in try fs.directoryContents(externalDirectory).sorted() where !known.contains(n) {
                note("external file \(n) is an orphan (no row references it; the next write transaction removes it)")
            }
        }
        return problems
    }
}

extension WriteTransaction {
    /// Encodes `values` for `info` (whose schema has external columns), writing
    /// large values to files, runs `body` with the record, then moves the
    /// references of `old` that the new record no longer holds to the trash. If
    /// `body` throws, the files this call wrote go to the trash instead (they
    /// are registered, and no row references them).
    ///
    /// A value of `old` may be given back as its reference text (an update by
    /// predicate copies unchanged columns from the stored record); a value equal
    /// to the old one (same length, checksum and bytes) keeps the old file.
    func withExternal<T>(_ values: [Value], _ info: TableInfo, _ schema: TableSchema, old: [UInt8]?,
                         _ body: ([UInt8]) throws(KuraError) -> T) throws(KuraError) -> T {
        let oldValues = try old.map { (r: [UInt8]) throws(KuraError) -> [Value] in try RecordCodec.decode(r) } ?? []
        func oldRef(_ i: Int) -> ExternalReference? {
            guard i < oldValues.count, case .text(let t) = oldValues[i] else { return nil }
            return ExternalReference.parse(t)
        }
        var v = values
        var keptText: [Int: String] = [:]
        for i in schema.externalColumns where i < v.count {
            if case .text(let t) = v[i], let r = oldRef(i), r.text == t {
                keptText[i] = t
                v[i] = .null
            }
        }
        v = try schema.validate(v, table: info.name)
        var written: [ExternalReference] = []
        var kept: Set<String> = []
        let threshold = max(database.options.externalThreshold, 0)
        do throws(KuraError) {
            for i in schema.externalColumns {
                if let t = keptText[i] {
                    v[i] = .text(t)
                    if let r = oldRef(i) { kept.insert(r.name) }
                    continue
                }
                guard case .blob(let bytes) = v[i], bytes.count >= threshold else { continue }
                let sum = Checksum.xxh64(bytes)
                if let r = oldRef(i), r.length == bytes.count, r.checksum == sum, try sameBytes(r, bytes, info.name, schema.columns[i].name) {
                    v[i] = .text(r.text)
                    kept.insert(r.name)
                    continue
                }
                let r = try writeExternal(bytes, checksum: sum)
                written.append(r)
                v[i] = .text(r.text)
            }
            let result = try body(RecordCodec.encode(v, compactDoubles: compactDoubles))
            var dropped: [ExternalReference] = []
            for i in schema.externalColumns { if let r = oldRef(i), !kept.contains(r.name) { dropped.append(r) } }
            try releaseExternal(dropped)
            return result
        } catch {
            try releaseExternal(written)
            throw error
        }
    }

    /// Whether the old file holds `bytes` (false if it cannot be read: the
    /// update then writes a new file, which repairs a damaged one).
    private func sameBytes(_ r: ExternalReference, _ bytes: [UInt8], _ table: String, _ column: String) throws(KuraError) -> Bool {
        do throws(KuraError) { return try readExternal(r, table: table, column: column, rowID: nil) == bytes } catch {
            if error.code == .corrupt { return false }
            throw error
        }
    }

    /// Moves the external files of a record being deleted to the trash.
    func releaseExternal(ofRecord record: [UInt8], _ schema: TableSchema) throws(KuraError) {
        let values = try RecordCodec.decode(record)
        var refs: [ExternalReference] = []
        for i in schema.externalColumns where i < values.count {
            if case .text(let t) = values[i], let r = ExternalReference.parse(t) { refs.append(r) }
        }
        try releaseExternal(refs)
    }

    /// Moves files from the registry to the trash (invariant 3).
    func releaseExternal(_ refs: [ExternalReference]) throws(KuraError) {
        guard !refs.isEmpty else { return }
        let registry = try table(ExternalReference.registryTable)
        let trash = try table(ExternalReference.trashTable)
        let counter = Int64(bitPattern: try changeCounter &+ 1)
        for r in refs {
            _ = try delete(from: registry, rowID: r.id)
            try insert([.text(r.name), .integer(counter)], into: trash)
        }
    }

    /// Writes one file and registers it (invariants 1 and 2).
    ///
    /// - Throws: `.diskFull` or `.io` naming the file; the transaction's
    ///   rollback removes what was written.
    func writeExternal(_ bytes: [UInt8], checksum: UInt64) throws(KuraError) -> ExternalReference {
        let fs = database.options.fileSystem
        let dir = externalDirectory
        if try !tableExists(ExternalReference.registryTable) {
            try createTable(ExternalReference.registryTable, definition: TableSchema([
                ColumnDefinition("name", .text, nullable: false), ColumnDefinition("length", .integer, nullable: false),
                ColumnDefinition("checksum", .integer, nullable: false)]).encoded)
            try createTable(ExternalReference.trashTable, definition: TableSchema([
                ColumnDefinition("name", .text, nullable: false), ColumnDefinition("dropped", .integer, nullable: false)]).encoded)
        }
        let sync = database.options.durability != .off
        if !fs.exists(dir) {
            try fs.createDirectory(dir)
            if sync { try fs.syncDirectory(Self.parentDirectory(of: dir)) }
        }
        let registry = try table(ExternalReference.registryTable)
        let id = registry.nextRowID
        let ref = ExternalReference(name: ExternalReference.name(id: id), length: bytes.count, checksum: checksum)
        let path = dir + "/" + ref.name
        externalWritten.append(ref.name)
        do throws(KuraError) {
            let file = try fs.open(path, create: true, permissionsOf: writer!.pager.file)
            defer { file.close() }
            try bytes.withBytes { b throws(KuraError) in try file.write(b, at: 0) }
            if sync {
                try file.sync(full: true)
                try fs.syncDirectory(dir)
            }
            try insert([.text(ref.name), .integer(Int64(bytes.count)), .integer(Int64(bitPattern: checksum))], into: registry, rowID: id)
        } catch {
            // Not registered: remove it now (or leave an orphan the sweep removes).
            externalWritten.removeLast()
            do { try fs.remove(path) } catch {}
            throw error
        }
        return ref
    }

    static func parentDirectory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// Removes the files this transaction wrote; called when it rolls back,
    /// before the writer lock is released (invariant 4). A file that cannot be
    /// removed is an orphan the next connection's first write removes.
    func removeUncommittedExternalFiles() {
        let fs = database.options.fileSystem
        for n in externalWritten {
            do { try fs.remove(externalDirectory + "/" + n) } catch {
                // Left as an orphan: see above.
            }
        }
        externalWritten = []
    }

    /// At commit: removes orphans (first write of the connection) and the
    /// trashed files no snapshot can need any more (invariants 3 and 4).
    func collectExternalGarbage() throws(KuraError) {
        let state = database.externalState
        let fs = database.options.fileSystem
        if !state.swept {
            if fs.exists(externalDirectory) { try sweepOrphans() }
            state.swept = true
        }
        // Without flushing the hot table (`peekCatalog`): a commit with no
        // trash table keeps it for the next write transaction.
        guard try peekCatalog().entries[ExternalReference.trashTable]?.kind == "table" else { return }
        let trash = try table(ExternalReference.trashTable)
        guard trash.rowCount > 0, try writer!.pager.isOnlySnapshot(writer!.snapshot) else { return }
        var entries: [(Int64, String)] = []
        let c = try rows(in: trash)
        while let r = try c.next() {
            guard case .text(let n) = try r.value(at: 0), ExternalReference.id(ofName: n) != nil else {
                throw KuraError(.corrupt, "row \(r.rowID) of table \"\(trash.name)\" does not name an external file", path: database.path)
            }
            entries.append((r.rowID, n))
        }
        for (rowID, n) in entries {
            do { try fs.remove(externalDirectory + "/" + n) } catch {
                continue  // Kept in the trash: a later transaction tries again.
            }
            _ = try delete(from: trash, rowID: rowID)
        }
    }

    /// Removes files in the directory that neither table names and this
    /// transaction did not write. Runs under the writer lock.
    func sweepOrphans() throws(KuraError) {
        let fs = database.options.fileSystem
        var trashNames: Set<String> = []
        if try tableExists(ExternalReference.trashTable) {
            let c = try rows(in: try table(ExternalReference.trashTable))
            while let r = try c.next() { if case .text(let n) = try r.value(at: 0) { trashNames.insert(n) } }
        }
        let registry = try tableExists(ExternalReference.registryTable) ? try table(ExternalReference.registryTable) : nil
        let own = Set(externalWritten)
        for n in try fs.directoryContents(externalDirectory) {
            guard let id = ExternalReference.id(ofName: n), !own.contains(n), !trashNames.contains(n) else { continue }
            if let registry, let row = try values(in: registry, rowID: id), row.first == .text(n) { continue }
            try fs.remove(externalDirectory + "/" + n)
        }
    }
}
