// PersistentContainer+History: reading and purging the persistent history
// (PersistentHistory.swift has the format and the types).

import KuraEngine

extension PersistentContainer {
    /// The saved transactions after `token` (from the oldest kept one if nil),
    /// oldest first, at most `limit` of them. Each lists the objects its save
    /// inserted, updated (with the changed properties) and deleted.
    ///
    /// Reads one snapshot; safe from any thread. Empty if history tracking was
    /// never on for this store.
    ///
    /// - Throws: `.corrupt` naming the history row if a record is malformed;
    ///   engine errors of the read transaction.
    public func history(after token: HistoryToken? = nil, limit: Int? = nil) throws(KuraError) -> [PersistentHistoryTransaction] {
        try typed { try database.read { tx in try PersistentHistoryStore.read(tx, after: token, limit: limit) } }
    }

    /// The token of the newest saved transaction in the history, nil if none.
    public func lastHistoryToken() throws(KuraError) -> HistoryToken? {
        try typed {
            try database.read { tx -> HistoryToken? in
                guard try tx.tableExists(PersistentHistoryStore.tableName) else { return nil }
                let rows = try tx.rows(in: try tx.table(PersistentHistoryStore.tableName), reverse: true)
                return try rows.next().map { HistoryToken($0.rowID) }
            }
        }
    }

    /// Deletes the history up to and including `token` (Core Data's
    /// `deleteHistory(before:)`, inclusive here): the transactions every reader
    /// has processed. Later tokens stay valid. Returns how many were deleted.
    @discardableResult
    public func purgeHistory(through token: HistoryToken) throws(KuraError) -> Int {
        try refuseWritesIfReadOnly("purge the persistent history")
        return try typed { try database.write { tx in try PersistentHistoryStore.purge(tx, through: token) } }
    }

    private func typed<T>(_ body: () throws -> T) throws(KuraError) -> T {
        do { return try body() } catch let e as KuraError { throw e } catch {
            throw KuraError(.io, "\(error)", path: database.path)
        }
    }
}
