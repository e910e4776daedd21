// Row: one row as a cursor or query hands it out: its row ID and its encoded
// record. It holds no transaction and stays valid after its transaction ends.
//
// Storage: a copy of the record, or — for a query in a read transaction — the
// snapshot page the record lies in, with its offset and length. Pages a read
// transaction sees are immutable (a page is never changed once committed, and
// no page buffer is reused: Pager/Page.swift), so reading the record there
// later gives the same bytes; it saves a row the allocation and copy of its
// record. Holding such a row keeps its page (one page of memory) alive. A write
// transaction's pages change in place, so its rows are always copies.

/// One row read through a cursor: its row ID and encoded record.
public struct Row: Sendable {
    /// The row's ID.
    public let rowID: Int64
    private let storage: Storage

    private enum Storage: Sendable {
        case bytes([UInt8])
        /// `count` bytes at `offset` in an immutable snapshot page.
        case page(Page, offset: Int, count: Int)
    }

    init(rowID: Int64, record: [UInt8]) {
        self.rowID = rowID
        storage = .bytes(record)
    }

    /// A row whose record is `count` bytes at `offset` in `page`, a page of a
    /// read transaction's snapshot (never a write transaction's page).
    init(rowID: Int64, page: Page, offset: Int, count: Int) {
        // The caller found the record in a validated leaf (Node.validate keeps cells inside the page).
        assert(offset >= 0 && count >= 0 && offset + count <= page.size)
        self.rowID = rowID
        storage = .page(page, offset: offset, count: count)
    }

    /// The encoded record (see `RecordCodec`, `RecordView`).
    public var record: [UInt8] {
        switch storage {
        case .bytes(let b): return b
        case .page(let p, let offset, let count):
            return withExtendedLifetime(p) { [UInt8](UnsafeRawBufferPointer(start: p.bytes + offset, count: count)) }
        }
    }

    /// `body` applied to the record's bytes where they are (valid only inside `body`).
    @inline(__always)
    func withRecord<T>(_ body: (UnsafeRawBufferPointer) throws(KuraError) -> T) throws(KuraError) -> T {
        switch storage {
        case .bytes(let b):
            return try b.withBytes(body)
        case .page(let p, let offset, let count):
            defer { withExtendedLifetime(p) {} }
            return try body(UnsafeRawBufferPointer(start: p.bytes + offset, count: count))
        }
    }

    /// All values of the row.
    ///
    /// - Throws: `.corrupt` if the record does not decode.
    public func values() throws(KuraError) -> [Value] {
        try withRecord { b throws(KuraError) in try RecordCodec.decode(b) }
    }

    /// Value of column `i` (`.null` past the end of the record), decoded on
    /// its own: the record's header is walked up to column `i` and nothing
    /// else is decoded or allocated (a text or blob value allocates its own
    /// storage). Reading a few columns this way costs less than `values()`,
    /// which builds an array of every value.
    ///
    /// - Throws: `.corrupt` if the record's header or the value is malformed.
    public func value(at i: Int) throws(KuraError) -> Value {
        try withRecord { b throws(KuraError) in try RecordCodec.value(at: i, in: b) }
    }
}
