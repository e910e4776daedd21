// Transaction+ObjectAccess: one row's record handed to the object layer where
// it lies, for a fault's load (Kura's ManagedObjectContext.load).
//
// `Database.values(inTable:rowID:)` decodes a row into a `[Value]` padded with
// the schema's defaults, which the object layer then copies slot by slot into
// the object: an array made, filled and freed per fault. Here the record's
// bytes are borrowed from their page (the same descent as `values`) and the
// caller decodes each column straight into its own storage with a
// `RecordColumns`, reading the defaults of the columns the record does not
// store (a record written before a column was added) from its own copy of the
// schema's defaults.
//
// Invariants: the bytes are valid only inside the body (a snapshot page, or an
// overflow record assembled for the call); a `RecordColumns` must not escape
// it. A table with external columns is not read here (`.external`): their
// values live in files, which `values(inTable:rowID:)` reads.
//
// A query's rows go the same way for a fetch of objects (Kura's
// `materializeStoreRows`): `Row.withColumns` hands the record a cursor
// returned, where it lies, to a `RecordColumns`.
//
// Hostile bytes: every column is located and decoded with the checks of
// `RecordCodec.decode` (RecordHeader, `decodeBody`): a malformed record throws
// `.corrupt`, never traps.

/// What `Database.withRecord(inTable:rowID:_:)` found.
package enum BorrowedRecordLookup: Equatable, Sendable {
    /// The body read the row's record.
    case read
    /// There is no such row; the body did not run.
    case missing
    /// The table has external columns (values kept in files): the body did
    /// not run; read the row with `values(inTable:rowID:)`.
    case external
}

/// The columns of one borrowed record, decoded one at a time, in order.
///
/// Lifetime: the body of `Database.withRecord(inTable:rowID:_:)` only.
package struct RecordColumns {
    private var header: RecordHeader
    /// The position of the column the next call of `next()` decodes (the
    /// number of columns decoded so far).
    package private(set) var column = 0

    init(_ buf: UnsafeRawBufferPointer) throws(KuraError) {
        header = try RecordHeader(buf)
    }

    /// The value of the next column the record stores (nil after its last
    /// one: a column at or past this position reads as its default).
    ///
    /// - Throws: `.corrupt` for a malformed header, a body past the record,
    ///   or text that is not valid UTF-8.
    @inline(__always)
    package mutating func next() throws(KuraError) -> Value? {
        guard let (t, at) = try header.next() else { return nil }
        defer { column += 1 }
        return try RecordCodec.decodeBody(t, header.base + at, column: column)
    }
}

extension Row {
    /// Runs `body` on this row's record as a `RecordColumns`, borrowed where
    /// it lies (its snapshot page, or the row's own copy): the columns
    /// `values()` gives, decoded one at a time without an array.
    ///
    /// Lifetime: the columns are valid only inside `body`. Failure modes:
    /// `.corrupt` for a malformed record, and whatever `body` throws.
    ///
    /// Not generic: a caller in another module would run a generic one
    /// unspecialized, instantiating its result's metadata on every row.
    package func withColumns(_ body: (inout RecordColumns) throws(KuraError) -> Void) throws(KuraError) {
        try withRecord { b throws(KuraError) in
            var columns = try RecordColumns(b)
            try body(&columns)
        }
    }
}

extension Database {
    /// Runs `body` on the record of row `rowID` of table `name`, borrowed
    /// from its page, in a read transaction of its own on the newest
    /// committed state (as `values(inTable:rowID:)`, which gives the same
    /// values decoded into an array with the schema's defaults filled in).
    ///
    /// Thread rules: any thread, like `read`. Failure modes: as `read`
    /// (`.notFound` for an unknown table, `.corrupt` naming the page), and
    /// whatever `body` throws. Returns `.missing` without calling `body` if
    /// there is no such row, `.external` if the table has external columns.
    package func withRecord(inTable name: String, rowID: Int64,
                            _ body: (inout RecordColumns) throws(KuraError) -> Void) throws(KuraError) -> BorrowedRecordLookup {
        try readTyped { tx throws(KuraError) in try tx.withRecord(inTableNamed: name, rowID: rowID, body) }
    }
}

extension ReadTransaction {
    /// `Database.withRecord(inTable:rowID:_:)` in this read transaction,
    /// through the table's read handle.
    ///
    /// - Throws: as `table(_:)`, `.corrupt` for a damaged tree, and what
    ///   `body` throws.
    func withRecord(inTableNamed name: String, rowID: Int64,
                    _ body: (inout RecordColumns) throws(KuraError) -> Void) throws(KuraError) -> BorrowedRecordLookup {
        try checkActive()
        let h = try readHandle(name)
        if h.hasExternal { return .external }
        // A read transaction (readHandle's precondition) has its pages.
        let s = snapshotPages.unsafelyUnwrapped
        let found: Void? = try RowIDKey.withEncoded(rowID) { k throws(KuraError) in
            try h.tree.withValue(k, s) { b throws(KuraError) in
                var columns = try RecordColumns(b)
                try body(&columns)
            }
        }
        return found == nil ? .missing : .read
    }
}
