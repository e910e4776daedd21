// RowContext: a table row seen by the predicate evaluator.
//
// It borrows the row's encoded record and decodes a column only when the
// predicate asks for it (by name, through the table's schema), so evaluating a
// predicate costs no dictionary and no object per row: the context is a struct
// of three words, which fits an existential's inline storage.

/// A row as an evaluation context. Lifetime: the bytes it borrows.
struct RowContext: PredicateEvaluationContext {
    let record: UnsafeRawBufferPointer
    let columns: ColumnMap

    func value(forKey key: String) throws(KuraError) -> EvaluatedValue {
        guard let c = columns.positions[key] else {
            throw KuraError(.notFound, "table \"\(columns.table)\" has no column \"\(key)\"")
        }
        let v = c.position < columns.storedCount(record) ? try RecordCodec.value(at: c.position, in: record) : c.defaultValue
        if c.isDate, case .double(let d) = v { return .date(d) }
        return .scalar(v)
    }
}

/// Column names to positions for one table (shared by every row of a scan).
final class ColumnMap: Sendable {
    struct Column: Sendable {
        let position: Int
        let isDate: Bool
        let defaultValue: Value
    }
    let table: String
    let positions: [String: Column]

    init(table: String, schema: TableSchema?) {
        self.table = table
        var p: [String: Column] = [:]
        for (i, c) in (schema?.columns ?? []).enumerated() {
            p[c.name] = Column(position: i, isDate: c.type == .date, defaultValue: c.defaultValue)
        }
        positions = p
    }

    /// How many values the record stores (columns past it read their default).
    @inline(__always)
    func storedCount(_ record: UnsafeRawBufferPointer) -> Int {
        (try? RecordCodec.count(in: record)) ?? 0
    }
}
