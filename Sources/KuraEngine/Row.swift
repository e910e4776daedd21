// Row: one row as a cursor or query hands it out: its row ID and its encoded
// record, copied out of the page (it holds no page and no transaction).

/// One row read through a cursor: its row ID and encoded record.
public struct Row: Sendable {
    /// The row's ID.
    public let rowID: Int64
    /// The encoded record (see `RecordCodec`, `RecordView`).
    public let record: [UInt8]

    /// All values of the row.
    ///
    /// - Throws: `.corrupt` if the record does not decode.
    public func values() throws(KuraError) -> [Value] { try RecordCodec.decode(record) }

    /// Value of column `i` (`.null` past the end of the record).
    public func value(at i: Int) throws(KuraError) -> Value {
        try record.withBytes { b throws(KuraError) in try RecordView(b).value(at: i) }
    }
}
