// TableQuery: what to read from one table — a predicate, a sort, an offset and a
// limit — and how rows are ordered.
//
// Ordering rules (the same on every path, indexed or not):
//   - with no sort keys, rows come in row-ID order;
//   - null sorts before every value ascending (after every value descending),
//     as in SQLite;
//   - numbers compare numerically, text by the key's `TextCollation` (binary:
//     Unicode scalar order), blobs bytewise; ties keep row-ID order.
//   - an index walk gives a sort on a text column only when the index column's
//     order is the collation's: a plain column for `.binary`, a folded column for
//     `.caseDiacriticInsensitive`; other collations sort after reading.

/// One sort key: a column, a direction, and how text compares (Kura's counterpart
/// of a sort descriptor, whose comparison selector is the ``collation``).
public struct SortKey: Sendable, Hashable, CustomStringConvertible {
    public var column: String
    public var ascending: Bool
    /// How text values compare; see ``TextCollation``.
    public var collation: TextCollation

    public init(_ column: String, ascending: Bool = true, caseInsensitive: Bool = false) {
        self.column = column
        self.ascending = ascending
        self.collation = caseInsensitive ? .caseInsensitive : .binary
    }

    public init(_ column: String, ascending: Bool = true, collation: TextCollation) {
        self.column = column
        self.ascending = ascending
        self.collation = collation
    }

    /// True for any collation but `.binary`; setting it chooses `.caseInsensitive`
    /// or `.binary`.
    public var caseInsensitive: Bool {
        get { collation != .binary }
        set { collation = newValue ? .caseInsensitive : .binary }
    }

    /// Compares two values of this key in ascending order (the direction is not
    /// applied): text by ``collation``, the rest by ``ValueOrdering``. The object
    /// layer's in-memory sort and the engine's sort both use it.
    public func compareValues(_ a: Value, _ b: Value) -> Int {
        collation.compare(a, b)
    }

    public var description: String {
        column + (ascending ? " ascending" : " descending") + (collation == .binary ? "" : " (\(collation.rawValue))")
    }
}

/// A read of one table: rows matching `predicate` (and `joins`), ordered by
/// `sort`, skipping `offset` and returning at most `limit`.
public struct TableQuery: Sendable, Hashable {
    public var table: String
    public var predicate: KuraPredicate?
    public var sort: [SortKey]
    public var offset: Int
    public var limit: Int?
    /// Conditions on linked rows of other tables, ANDed with `predicate`
    /// (SemiJoin.swift).
    public var joins: [SemiJoin]
    /// Columns read through foreign keys, which sort keys may name (SemiJoin.swift).
    public var lookups: [ColumnLookup]

    public init(_ table: String, where predicate: KuraPredicate? = nil, sort: [SortKey] = [], offset: Int = 0, limit: Int? = nil,
                joins: [SemiJoin] = [], lookups: [ColumnLookup] = []) {
        self.table = table
        self.predicate = predicate
        self.sort = sort
        self.offset = offset
        self.limit = limit
        self.joins = joins
        self.lookups = lookups
    }

    /// A query with the predicate parsed from an NSPredicate format string.
    ///
    /// - Throws: `.syntax` with the character offset, `.invalidArgument`.
    public init(_ table: String, where format: String, _ arguments: PredicateArgument..., sort: [SortKey] = [], offset: Int = 0, limit: Int? = nil) throws(KuraError) {
        self.init(table, where: try KuraPredicate(format: format, arguments: arguments), sort: sort, offset: offset, limit: limit)
    }
}
