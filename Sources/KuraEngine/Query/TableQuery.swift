// TableQuery: what to read from one table — a predicate, a sort, an offset and a
// limit — and how rows are ordered.
//
// Ordering rules (the same on every path, indexed or not):
//   - with no sort keys, rows come in row-ID order;
//   - null sorts before every value ascending (after every value descending),
//     as in SQLite;
//   - numbers compare numerically, text by Unicode scalar order (by folded text
//     when `caseInsensitive`), blobs bytewise; ties keep row-ID order.

/// One sort key: a column, a direction, and optionally case-insensitive text
/// comparison. (Kura's counterpart of a sort descriptor.)
public struct SortKey: Sendable, Hashable, CustomStringConvertible {
    public var column: String
    public var ascending: Bool
    public var caseInsensitive: Bool

    public init(_ column: String, ascending: Bool = true, caseInsensitive: Bool = false) {
        self.column = column
        self.ascending = ascending
        self.caseInsensitive = caseInsensitive
    }

    public var description: String {
        column + (ascending ? " ascending" : " descending") + (caseInsensitive ? " (case-insensitive)" : "")
    }
}

/// A read of one table: rows matching `predicate`, ordered by `sort`, skipping
/// `offset` and returning at most `limit`.
public struct TableQuery: Sendable, Hashable {
    public var table: String
    public var predicate: KuraPredicate?
    public var sort: [SortKey]
    public var offset: Int
    public var limit: Int?

    public init(_ table: String, where predicate: KuraPredicate? = nil, sort: [SortKey] = [], offset: Int = 0, limit: Int? = nil) {
        self.table = table
        self.predicate = predicate
        self.sort = sort
        self.offset = offset
        self.limit = limit
    }

    /// A query with the predicate parsed from an NSPredicate format string.
    ///
    /// - Throws: `.syntax` with the character offset, `.invalidArgument`.
    public init(_ table: String, where format: String, _ arguments: PredicateArgument..., sort: [SortKey] = [], offset: Int = 0, limit: Int? = nil) throws(KuraError) {
        self.init(table, where: try KuraPredicate(format: format, arguments: arguments), sort: sort, offset: offset, limit: limit)
    }
}
