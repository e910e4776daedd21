// ImportScan: the two passes of `kura import` over its input.
//
// Pass 1 (`ImportCommand.scan`) reads the whole input once, one chunk and one
// row at a time, and keeps only what planning needs: the columns, their
// declared types, the type evidence of untyped CSV columns (inference looks at
// every value, as it always did, so its answer cannot differ from before),
// the row count and the first error. Pass 2 (`ImportCommand.RowFeed`) reads the
// input again and hands the rows, converted into reused storage, to the
// inserting transactions. Memory is one chunk, one row and the write
// transaction's dirty pages, whatever the input's size.

import KuraEngine

extension ImportCommand {
    /// Pass 1: reads the whole input once and returns what it holds, with the
    /// first value that does not convert to its column's type as far as that
    /// type is known before planning (declared, the entity's, or a JSON
    /// column's first value; inferred CSV types fit every value by
    /// construction). Errors come in the order the importer always reported
    /// them: invalid UTF-8, then the first bad quoting or JSON line, then an
    /// empty CSV file, the header, a wrong field count; the caller then
    /// reports store and planning errors before the conversion error.
    static func scan(_ source: ImportSource, _ ctx: Context, existing: TableSchema?) throws -> (ImportData, ImportError?) {
        var data = ImportData()
        data.isCSV = ctx.isCSV
        var conversionError: ImportError?
        var parseError: ImportError?
        var empty = false
        var headerError: ImportError?
        var countError: ImportError?
        func existingType(_ name: String) -> ColumnType? {
            guard let existing, let p = existing.position(of: name) else { return nil }
            return existing.columns[p].type
        }
        do {
            if ctx.isCSV {
                var r = CSVRecordReader(source)
                if try r.next() {
                    switch ImportReader.csvHeader(r) {
                    case .failure(let e): headerError = e
                    case .success(let h):
                        data.columns = h.columns
                        data.declared = h.declared
                        data.guesses = Array(repeating: CSVTypeGuess(), count: h.columns.count)
                    }
                    let n = data.columns.count
                    // The type each column's values must convert to, where known now.
                    let checks: [ColumnType?] = data.columns.indices.map { c in
                        data.columns[c] == "_rowid" ? .integer : existingType(data.columns[c]) ?? data.declared[c]
                    }
                    let guess = checks.map { $0 == nil }
                    while try r.next() {
                        if headerError != nil || countError != nil { continue }
                        if ImportReader.isBlank(r, columns: n) { continue }
                        if let e = ImportReader.fieldCountError(r, columns: n) { countError = e; continue }
                        data.rowCount += 1
                        for c in 0..<n where !(r.isEmpty(c) && !r.isQuoted(c)) {
                            if guess[c] { r.withField(c) { data.guesses[c].add($0) } }
                            if conversionError == nil, let t = checks[c], t != .text {
                                do throws(ImportError) { _ = try ImportReader.csvValue(r, c, type: t, column: data.columns[c], line: r.recordLine) }
                                catch { conversionError = error }
                            }
                        }
                    }
                } else {
                    empty = true
                }
            } else {
                var l = JSONLineReader(source)
                var index: [String: Int] = [:]
                while try l.next() {
                    guard let row = try ImportReader.jsonRow(l, &data, index: &index, fixedColumns: false) else { continue }
                    data.rowCount += 1
                    guard conversionError == nil else { continue }
                    for (c, f) in row.fields.enumerated() where f != nil {
                        let name = data.columns[c]
                        let (type, typedHere): (ColumnType, Bool) = name == "_rowid" ? (.integer, false)
                            : existingType(name).map { ($0, false) } ?? (data.declared[c] ?? .text, true)
                        do throws(ImportError) {
                            _ = try ImportReader.value(f, type: type, column: name, line: row.line, decidedAt: typedHere ? data.decidedAt[c] : nil)
                        } catch {
                            conversionError = error
                            break
                        }
                    }
                }
            }
        } catch let e as ImportError {
            parseError = e
            try source.drain()
        }
        if source.invalidUTF8 { throw CLIError.problems("\(ctx.file) is not valid UTF-8 text") }
        if let e = parseError ?? (empty ? ImportError(line: 1, message: "the file is empty; a CSV file starts with a header line") : nil)
            ?? headerError ?? countError {
            throw ctx.problem(e)
        }
        return (data, conversionError)
    }

    /// Pass 2: the input's rows again, one at a time, converted into reused
    /// storage. A class: the inserting transaction's closure uses it once per
    /// row, and a struct captured there would be copied (every field retained)
    /// at each non-mutating call.
    final class RowFeed {
        let ctx: Context
        // Both read `source`; only the one of the input's format is used.
        var csv: CSVRecordReader
        var json: JSONLineReader
        var jsonRow = ImportRow(line: 0, fields: [])
        var index: [String: Int] = [:]
        var data: ImportData
        /// The line of the current row.
        private(set) var line = 0
        private var headerRead = false

        init(_ source: ImportSource, _ ctx: Context) {
            self.ctx = ctx
            data = ctx.data
            csv = CSVRecordReader(source)
            json = JSONLineReader(source)
            for (c, name) in data.columns.enumerated() { index[name] = c }
        }

        /// Moves to the next row; false at the end.
        func next() throws -> Bool {
            do {
                if ctx.isCSV {
                    if !headerRead {
                        // The header, checked by pass 1.
                        guard try csv.next() else { throw ctx.changed() }
                        headerRead = true
                    }
                    while try csv.next() {
                        if ImportReader.isBlank(csv, columns: data.columns.count) { continue }
                        if ImportReader.fieldCountError(csv, columns: data.columns.count) != nil { throw ctx.changed() }
                        line = csv.recordLine
                        return true
                    }
                    return false
                }
                while try json.next() {
                    guard let row = try ImportReader.jsonRow(json, &data, index: &index, fixedColumns: true) else { continue }
                    jsonRow = row
                    line = row.line
                    return true
                }
                return false
            } catch let e as ImportError {
                throw ctx.problem(e)
            }
        }

        /// Reads the next `count` rows, converts them to `plan`'s columns and
        /// inserts them into `t`.
        /// - Throws: `CLIError.problems` naming the line of a row that does not
        ///   convert or insert, or saying the input changed since pass 1 (fewer
        ///   rows, a different field count).
        func insert(_ count: Int, plan: Plan, into t: TableInfo, _ tx: WriteTransaction) throws {
            let defaults = plan.columns.map(\.defaultValue)
            var values = defaults
            guard ctx.isCSV else {
                for _ in 0..<count {
                    guard try next() else { throw ctx.changed() }
                    for i in values.indices { values[i] = defaults[i] }
                    let rowID = try convert(plan, into: &values)
                    try insert(values, rowID: rowID, into: t, tx)
                }
                return
            }
            // The reader moves into a local for the batch and back at the end:
            // passed from this class's stored property, it would be copied
            // (its source and three arrays retained and released) at each call
            // that reads it, several per row.
            var r = csv
            csv = CSVRecordReader(r.source)
            defer { csv = r }
            let columns = data.columns, n = columns.count
            do {
                if !headerRead {
                    // The header, checked by pass 1.
                    guard try r.next() else { throw ctx.changed() }
                    headerRead = true
                }
                for _ in 0..<count {
                    var found = false
                    while try r.next() {
                        if ImportReader.isBlank(r, columns: n) { continue }
                        if r.count != n { throw ctx.changed() }
                        found = true
                        break
                    }
                    guard found else { throw ctx.changed() }
                    line = r.recordLine
                    for i in values.indices { values[i] = defaults[i] }
                    var rowID: Int64?
                    for c in 0..<n {
                        if c == plan.rowIDColumn {
                            rowID = try ImportReader.csvValue(r, c, type: .integer, column: "_rowid", line: line).integerValue
                            continue
                        }
                        guard let target = plan.target[c] else { continue }
                        values[target.position] = try ImportReader.csvValue(r, c, type: target.type, column: columns[c], line: line)
                    }
                    try insert(values, rowID: rowID, into: t, tx)
                }
            } catch let e as ImportError {
                throw ctx.problem(e)
            }
        }

        /// Inserts one converted row; an engine error names the current line.
        private func insert(_ values: [Value], rowID: Int64?, into t: TableInfo, _ tx: WriteTransaction) throws {
            do throws(KuraError) {
                if let rowID { try tx.insert(values, into: t, rowID: rowID) }
                else { try tx.insert(values, into: t) }
            } catch {
                throw CLIError.problems("\(ctx.file), line \(line): \(describe(error))")
            }
        }

        /// Converts the current JSON lines row into `values` (which hold the
        /// defaults of `plan.columns`); returns its explicit row ID. (CSV rows
        /// are converted in `insert`, with the reader in a local.)
        func convert(_ plan: Plan, into values: inout [Value]) throws -> Int64? {
            var rowID: Int64?
            do throws(ImportError) {
                for (c, f) in jsonRow.fields.enumerated() {
                    if c == plan.rowIDColumn {
                        rowID = try ImportReader.value(f, type: .integer, column: "_rowid", line: line, decidedAt: nil).integerValue
                        continue
                    }
                    guard let t = plan.target[c] else { continue }
                    values[t.position] = try ImportReader.value(f, type: t.type, column: data.columns[c], line: line,
                                                                decidedAt: t.typedHere ? data.decidedAt[c] : nil)
                }
            } catch {
                throw ctx.problem(error)
            }
            return rowID
        }
    }
}
