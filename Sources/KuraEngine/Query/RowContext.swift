// RowContext: a table row seen by the predicate evaluator.
//
// It borrows the row's encoded record and decodes a column only when the
// predicate asks for it (by name, through the table's schema), so evaluating a
// predicate costs no dictionary and no object per row: the context is a struct
// of three words, which fits an existential's inline storage.
//
// A record that does not decode is corruption, never a row of defaults: the
// error (`.corrupt`) names the table here, and the cursor adds the row ID and page.

/// A row as an evaluation context. Lifetime: the bytes it borrows.
struct RowContext: PredicateEvaluationContext {
    let record: UnsafeRawBufferPointer
    let columns: ColumnMap

    func value(forKey key: String) throws(KuraError) -> EvaluatedValue {
        guard let c = columns.positions[key] else {
            throw KuraError(.notFound, "table \"\(columns.table)\" has no column \"\(key)\"")
        }
        let v: Value
        do {
            v = c.position < (try RecordCodec.count(in: record)) ? try RecordCodec.value(at: c.position, in: record) : c.defaultValue
        } catch {
            throw KuraError(.corrupt, "a row of table \"\(columns.table)\" has a malformed record (reading column \"\(key)\"): \(error.message)", page: error.page)
        }
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
}
