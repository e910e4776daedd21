// PersistentHistory: the store's optional log of committed object changes (Core
// Data's persistent history tracking).
//
// Format (FORMAT.md, "Object stores", "Persistent history"): a table named
// `_kura_history`, one row per saved transaction, its row ID the transaction's
// token (row IDs increase and are never reused, so tokens order the
// transactions and stay valid after a purge). Columns:
//
//     0 timestamp   double  seconds since 1970 (the saving process's clock)
//     1 author      text    the context's `transactionAuthor`, or null
//     2 context     text    the context's `name`, or null
//     3 changes     blob    the changes, encoded as below
//
// `changes`: u32 count, then per change: u8 kind (1 insert, 2 update, 3 delete,
// 4 delete with tombstone), a string (entity name), i64 row ID, u32 count of
// changed property names, then those strings; a kind-4 change then has a u32
// byte length and that many bytes: a record (RecordCodec, FORMAT.md "Records")
// of alternating attribute name (text) and stored value, names ascending: the
// values of the attributes marked `preservesValueInHistoryOnDeletion`, as their
// columns held them. A string is a u32 byte length and UTF-8 bytes; integers are
// little-endian. Decoding checks every length against the bytes left and names
// the row on failure.
//
// The row is written inside the save's own write transaction, so a transaction's
// history is committed exactly when its changes are, in any process.

import Foundation
import KuraEngine

/// A position in the persistent history: the transactions after it are those
/// saved later. Tokens only grow, and stay meaningful after a purge.
public struct HistoryToken: Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    /// The history row ID of the transaction.
    public let value: Int64

    public init(_ value: Int64) { self.value = value }

    public static func < (a: HistoryToken, b: HistoryToken) -> Bool { a.value < b.value }

    public var description: String { "history token \(value)" }
}

/// One object change in a saved transaction.
public struct PersistentHistoryChange: Hashable, Sendable {
    /// What happened to the object.
    public enum Kind: UInt8, Sendable {
        case insert = 1
        case update = 2
        case delete = 3
    }

    public var kind: Kind
    /// The object (always a permanent ID).
    public var objectID: ManagedObjectID
    /// For updates, the names of the properties the save changed (sorted);
    /// empty for inserts and deletes.
    public var updatedProperties: [String]
    /// For deletes (Core Data's `tombstone`): the last saved values of the
    /// deleted object's attributes marked
    /// ``AttributeDescription/preservesValueInHistoryOnDeletion``, by name, as
    /// their columns held them (a UUID as its uppercase string, a date as
    /// seconds since 2001, a decimal as its double: see FORMAT.md "Object
    /// stores"); a nil value is `.null`. Empty for inserts, updates and
    /// entities without such attributes.
    public var tombstone: [String: Value]

    public init(kind: Kind, objectID: ManagedObjectID, updatedProperties: [String] = [], tombstone: [String: Value] = [:]) {
        self.kind = kind
        self.objectID = objectID
        self.updatedProperties = updatedProperties
        self.tombstone = tombstone
    }
}

/// One saved transaction in the persistent history.
public struct PersistentHistoryTransaction: Sendable {
    /// Its position; pass it to `history(after:)` to read what came later.
    public var token: HistoryToken
    /// When it was saved (the saving process's clock).
    public var timestamp: Date
    /// The saving context's `transactionAuthor`, if set.
    public var author: String?
    /// The saving context's `name`, if set.
    public var contextName: String?
    /// The object changes, inserts first, then updates, then deletes.
    public var changes: [PersistentHistoryChange]
}

/// Reading and writing the history table. See the header comment.
enum PersistentHistoryStore {
    static let tableName = "_kura_history"

    static let schema: TableSchema = {
        // Cannot fail: four distinct, non-empty column names (TableSchema's only checks).
        try! TableSchema([
            ColumnDefinition("timestamp", .double, nullable: false),
            ColumnDefinition("author", .text),
            ColumnDefinition("context", .text),
            ColumnDefinition("changes", .blob, nullable: false),
        ])
    }()

    /// Creates the table if missing (inside the caller's transaction).
    static func ensureTable(_ tx: WriteTransaction) throws(KuraError) {
        if try tx.tableExists(tableName) { return }
        _ = try tx.createTable(tableName, schema: schema)
    }

    /// Appends one transaction's record; returns its token.
    @discardableResult
    static func append(_ tx: WriteTransaction, author: String?, contextName: String?, changes: [PersistentHistoryChange],
                       at date: Date = Date()) throws(KuraError) -> HistoryToken {
        try ensureTable(tx)
        let t = try tx.table(tableName)
        let id = try tx.insert([.double(date.timeIntervalSince1970), author.map { .text($0) } ?? .null,
                                contextName.map { .text($0) } ?? .null, .blob(encode(changes))], into: t)
        return HistoryToken(id)
    }

    /// The transactions after `token` (all if nil), oldest first, at most `limit`.
    static func read(_ tx: ReadTransaction, after token: HistoryToken?, limit: Int?) throws(KuraError) -> [PersistentHistoryTransaction] {
        guard try tx.tableExists(tableName) else { return [] }
        let t = try tx.table(tableName)
        let start = token.map { $0.value == Int64.max ? Int64.max : $0.value + 1 }
        let rows = try tx.rows(in: t, from: start)
        var out: [PersistentHistoryTransaction] = []
        while let row = try rows.next() {
            if let limit, out.count >= limit { break }
            if let token, row.rowID <= token.value { continue }
            let values = try row.values()
            guard values.count >= 4, case .double(let ts) = values[0], case .blob(let bytes) = values[3] else {
                throw KuraError(.corrupt, "history row \(row.rowID) is malformed (expected timestamp, author, context, changes)")
            }
            func text(_ v: Value, _ what: String) throws(KuraError) -> String? {
                switch v {
                case .null: return nil
                case .text(let s): return s
                default: throw KuraError(.corrupt, "history row \(row.rowID): \(what) is not text")
                }
            }
            out.append(PersistentHistoryTransaction(token: HistoryToken(row.rowID), timestamp: Date(timeIntervalSince1970: ts),
                                                    author: try text(values[1], "author"), contextName: try text(values[2], "context"),
                                                    changes: try decode(bytes, row: row.rowID)))
        }
        return out
    }

    /// Deletes the transactions up to and including `token`; returns how many.
    static func purge(_ tx: WriteTransaction, through token: HistoryToken) throws(KuraError) -> Int {
        guard try tx.tableExists(tableName) else { return 0 }
        let t = try tx.table(tableName)
        var ids: [Int64] = []
        let rows = try tx.rows(in: t)
        while let row = try rows.next(), row.rowID <= token.value { ids.append(row.rowID) }
        for id in ids { _ = try tx.delete(from: t, rowID: id) }
        return ids.count
    }

    // MARK: Encoding

    static func encode(_ changes: [PersistentHistoryChange]) -> [UInt8] {
        var out: [UInt8] = []
        func u32(_ v: Int) { withUnsafeBytes(of: UInt32(truncatingIfNeeded: v).littleEndian) { out.append(contentsOf: $0) } }
        func string(_ s: String) {
            u32(s.utf8.count)
            out.append(contentsOf: s.utf8)
        }
        u32(changes.count)
        for c in changes {
            let withTombstone = c.kind == .delete && !c.tombstone.isEmpty
            out.append(withTombstone ? tombstoneKind : c.kind.rawValue)
            string(c.objectID.entityName)
            withUnsafeBytes(of: c.objectID.rowID.littleEndian) { out.append(contentsOf: $0) }
            u32(c.updatedProperties.count)
            for p in c.updatedProperties { string(p) }
            if withTombstone {
                let record = RecordCodec.encode(c.tombstone.sorted { $0.key < $1.key }.flatMap { [Value.text($0.key), $0.value] })
                u32(record.count)
                out.append(contentsOf: record)
            }
        }
        return out
    }

    /// The change kind byte of a delete followed by its tombstone.
    static let tombstoneKind: UInt8 = 4

    static func decode(_ bytes: [UInt8], row: Int64) throws(KuraError) -> [PersistentHistoryChange] {
        var at = 0
        func fail(_ what: String) -> KuraError {
            KuraError(.corrupt, "history row \(row): its changes are malformed at byte \(at) (\(what))")
        }
        func u32() throws(KuraError) -> Int {
            guard bytes.count - at >= 4 else { throw fail("a length runs past the end") }
            var v: UInt32 = 0
            for i in 0..<4 { v |= UInt32(bytes[at + i]) << (8 * UInt32(i)) }
            at += 4
            return Int(v)
        }
        func string() throws(KuraError) -> String {
            let n = try u32()
            guard bytes.count - at >= n else { throw fail("a string runs past the end") }
            guard let s = String(validating: bytes[at..<at + n], as: UTF8.self) else { throw fail("a string is not UTF-8") }
            at += n
            return s
        }
        let count = try u32()
        // Each change takes at least 17 bytes: bounds the loop by the blob's size.
        guard count <= bytes.count / 17 else { throw fail("it claims \(count) changes") }
        var out: [PersistentHistoryChange] = []
        out.reserveCapacity(count)
        for _ in 0..<count {
            guard at < bytes.count, let kind = bytes[at] == tombstoneKind ? .delete : PersistentHistoryChange.Kind(rawValue: bytes[at]) else {
                throw fail("unknown change kind")
            }
            let hasTombstone = bytes[at] == tombstoneKind
            at += 1
            let entity = try string()
            guard bytes.count - at >= 8 else { throw fail("a row ID runs past the end") }
            var id: UInt64 = 0
            for i in 0..<8 { id |= UInt64(bytes[at + i]) << (8 * UInt64(i)) }
            at += 8
            let n = try u32()
            guard n <= (bytes.count - at) / 4 else { throw fail("it claims \(n) property names") }
            var names: [String] = []
            for _ in 0..<n { names.append(try string()) }
            var tombstone: [String: Value] = [:]
            if hasTombstone {
                let length = try u32()
                guard bytes.count - at >= length else { throw fail("a tombstone runs past the end") }
                let values: [Value]
                do { values = try RecordCodec.decode(Array(bytes[at..<at + length])) } catch { throw fail("its tombstone record: \(error.message)") }
                guard values.count % 2 == 0 else { throw fail("a tombstone has a name without a value") }
                for i in stride(from: 0, to: values.count, by: 2) {
                    guard case .text(let name) = values[i], tombstone.updateValue(values[i + 1], forKey: name) == nil else {
                        throw fail("a tombstone name is not text or appears twice")
                    }
                }
                at += length
            }
            out.append(PersistentHistoryChange(kind: kind, objectID: ManagedObjectID(entity: entity, rowID: Int64(bitPattern: id)), updatedProperties: names,
                                               tombstone: tombstone))
        }
        guard at == bytes.count else { throw fail("\(bytes.count - at) bytes left over") }
        return out
    }
}
