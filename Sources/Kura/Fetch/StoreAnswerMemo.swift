// StoreAnswerMemo: the rows a fetch's store query returned, kept by the
// context while the store is unchanged, so that the same query asked again
// (a find-or-create importer fetching "the parent with this code" once per
// child, a screen re-running its fetch) skips the engine's planning,
// compiling and index walk and only re-reads the store's change counter.
//
// Validity: an answer belongs to one store connection and one change counter
// (`ReadTransaction.changeCounter`, which every commit that changes
// something moves forward, by any connection of any process: FORMAT.md, "The
// header page"). Each use compares the counter of the read transaction the
// fetch opens anyway with the memo's; any difference drops every answer. So
// another context's save, another process's commit, this context's own save,
// a batch request and a migration all invalidate it by moving the counter;
// `reset()` drops it too. Reads inside an enclosing write transaction (a
// batch request's scratch context), whose uncommitted changes do not move
// the counter, never use it.
//
// What is kept is exactly what the engine returned (row IDs and decoded
// values, in order), never objects: the fetch then materializes the rows as
// it would fresh ones, so pending changes (inserts, updates, deletes, which
// the object layer applies after the store's answer) are handled as before,
// whatever the memo holds.
//
// Bounds: answers of at most `maxRows` rows, at most `maxEntries` of them
// (all dropped when full), rows of tables without external values only (those
// are read from files per fetch).

import KuraEngine

/// One context's memo of store answers (see the file header).
final class StoreAnswerMemo {
    /// Largest answer kept, in rows: the memo serves lookups, not lists.
    static let maxRows = 16
    /// Answers kept before the memo starts over.
    static let maxEntries = 1024

    /// The connection and change counter the answers were read at.
    private var database: ObjectIdentifier?
    private var counter: UInt64 = 0
    private var answers: [Key: [(rowID: Int64, values: [Value])]] = [:]

    /// A query as a dictionary key, hashed by what tells repeated queries
    /// apart cheaply (the table and the constants of the predicate's first
    /// comparisons) instead of the whole tree; equality is the query's own.
    struct Key: Hashable {
        let query: TableQuery

        static func == (a: Key, b: Key) -> Bool { a.query == b.query }

        func hash(into h: inout Hasher) {
            h.combine(query.table)
            if let p = query.predicate {
                var budget = 4
                Self.combineConstants(p, &h, &budget)
            }
        }

        /// Hashes the constants of up to `budget` comparisons, depth first.
        private static func combineConstants(_ p: KuraPredicate, _ h: inout Hasher, _ budget: inout Int) {
            guard budget > 0 else { return }
            switch p {
            case .comparison(let c):
                budget -= 1
                if case .constant(let v) = c.right { h.combine(v) }
                if case .constant(let v) = c.left { h.combine(v) }
            case .and(let xs), .or(let xs):
                for x in xs where budget > 0 { combineConstants(x, &h, &budget) }
            case .not(let x):
                combineConstants(x, &h, &budget)
            case .truePredicate, .falsePredicate:
                return
            }
        }
    }

    /// The answer to `q` read at `counter` on `database`, if kept; a counter
    /// or connection other than the memo's drops every answer first.
    func answer(_ q: TableQuery, database db: ObjectIdentifier, counter c: UInt64) -> [(rowID: Int64, values: [Value])]? {
        guard database == db, counter == c else {
            if !answers.isEmpty { answers = [:] }
            database = db
            counter = c
            return nil
        }
        return answers[Key(query: q)]
    }

    /// Keeps `rows` as the answer to `q` read at `counter` on `database`
    /// (nothing if the memo moved on to another counter meanwhile: a fetch
    /// inside `awakeFromFetch` read a newer store).
    func keep(_ q: TableQuery, _ rows: [(rowID: Int64, values: [Value])], database db: ObjectIdentifier, counter c: UInt64) {
        guard database == db, counter == c else { return }
        if answers.count >= Self.maxEntries { answers = [:] }
        answers[Key(query: q)] = rows
    }

    /// Drops every answer.
    func clear() {
        answers = [:]
        database = nil
    }

    /// Number of answers kept (tests).
    var count: Int { answers.count }
}

extension ManagedObjectContext {
    /// Calls `body` with each row (ID and values, external values resolved)
    /// that `q`, a query of `e`'s table, returns in `tx`, from the memo when
    /// it holds the answer for the store as `tx` sees it.
    func eachStoreRow(_ q: TableQuery, _ e: EntityDescription, in tx: ReadTransaction,
                      _ body: (Int64, [Value]) throws(KuraError) -> Void) throws(KuraError) {
        let layout = self.layout(of: e)
        // A batch request's reads see its uncommitted writes, which do not
        // move the counter; external values are read per fetch.
        let memo = enclosingTransaction == nil && !layout.hasExternal ? storeAnswers : nil
        let db = ObjectIdentifier(database)
        var counter: UInt64 = 0
        if let memo {
            counter = try tx.changeCounter
            if let rows = memo.answer(q, database: db, counter: counter) {
                for r in rows { try body(r.rowID, r.values) }
                return
            }
        }
        let cursor = try tx.select(q)
        // The table and its layout, resolved once for every row.
        let table = try tx.table(e.hierarchy.table)
        var keeping = memo != nil
        var kept: [(rowID: Int64, values: [Value])] = []
        while let row = try cursor.next() {
            let values = try layout.values(of: row, tx, table)
            if keeping {
                if kept.count < StoreAnswerMemo.maxRows { kept.append((row.rowID, values)) } else { keeping = false; kept = [] }
            }
            try body(row.rowID, values)
        }
        if let memo, keeping { memo.keep(q, kept, database: db, counter: counter) }
    }
}
