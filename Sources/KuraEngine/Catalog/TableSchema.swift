import Foundation

// TableSchema: typed, nullable columns with defaults, stored in the catalog entry's
// definition (FORMAT.md, "Schemas").
//
// The definition of a table with a schema is a record:
//
//     0  integer 1                       schema format version
//     1  integer n                       number of columns
//     then per column, four values:
//        name text, type text (integer|double|text|blob|bool|date|external),
//        nullable bool, default value (null for none)
//
// Rows store values in column order. Adding a column appends it to the schema
// and rewrites no row: a record shorter than the schema reads the missing
// columns as their default (or null). Text is stored in Unicode NFC. A `date` is stored as a double: seconds
// since 2001-01-01 00:00:00 UTC (Foundation's reference date).

/// The type of a column.
///
/// `external` is a blob column whose large values live in files beside the
/// store (FORMAT.md, "External values"): callers write and read `.blob`
/// values; the record holds a reference for a value of at least
/// `Database.Options.externalThreshold` bytes. Such a column cannot be indexed.
public enum ColumnType: String, Sendable, CaseIterable, Hashable {
    case integer, double, text, blob, bool, date, external

    /// Whether `value` may be stored in a column of this type (null aside).
    /// Integers are accepted into double and date columns and stored as doubles.
    func accepts(_ value: Value) -> Bool {
        switch (self, value) {
        case (_, .null): return true
        case (.integer, .integer), (.double, .double), (.double, .integer), (.text, .text),
             (.blob, .blob), (.external, .blob), (.bool, .bool), (.date, .double), (.date, .integer):
            return true
        default: return false
        }
    }

    /// The stored form of an accepted value: integers in double and date columns
    /// become doubles; text is stored in Unicode NFC, so that byte equality (what
    /// an index compares) agrees with canonical equivalence (what `==` means).
    func normalize(_ value: Value) -> Value {
        normalized(value) ?? value
    }

    /// `value` normalized, or nil when it is already in normal form (most
    /// values: then a row's array need not be copied).
    func normalized(_ value: Value) -> Value? {
        guard !isNormal(value) else { return nil }
        switch value {
        case .integer(let i): return .double(Double(i))
        case .text(let s): return .text(s.precomposedStringWithCanonicalMapping)
        default: return nil
        }
    }

    /// Whether `value` is in the form a column of this type stores it (what
    /// `normalized` leaves alone): not an integer in a double or date column,
    /// not text outside ASCII (which may need its NFC form).
    @inline(__always)
    func isNormal(_ value: Value) -> Bool {
        switch value {
        case .integer: return self != .double && self != .date
        case .text(let s): return TableSchema.isASCII(s)
        default: return true
        }
    }
}

/// One column of a table.
public struct ColumnDefinition: Sendable, Hashable {
    public var name: String
    public var type: ColumnType
    public var isNullable: Bool
    /// The value a row gets when none is given, and what rows written before the
    /// column was added read as.
    public var defaultValue: Value

    public init(_ name: String, _ type: ColumnType, nullable: Bool = true, default defaultValue: Value = .null) {
        self.name = name
        self.type = type
        self.isNullable = nullable
        self.defaultValue = defaultValue
    }
}

/// The columns of a table.
public struct TableSchema: Sendable, Hashable {
    public private(set) var columns: [ColumnDefinition]
    private var positions: [String: Int]
    /// Whether any column is `external` (kept by `append`, the only way a
    /// column comes in; every insert asks).
    private(set) var hasExternal = false
    /// Each column's type and nullability, in order (kept by `append`):
    /// `validate` reads these per row instead of copying each column's
    /// definition (its name and default) out of `columns`.
    private var columnTypes: [ColumnType] = []
    private var columnNullable: [Bool] = []

    /// - Throws: `.invalidArgument` for duplicate or empty names, or a default
    ///   that does not fit its column.
    public init(_ columns: [ColumnDefinition]) throws(KuraError) {
        self.columns = []
        positions = [:]
        for c in columns { try append(c) }
    }

    mutating func append(_ c: ColumnDefinition) throws(KuraError) {
        guard !c.name.isEmpty else { throw KuraError(.invalidArgument, "a column needs a name") }
        guard positions[c.name] == nil else {
            throw KuraError(.invalidArgument, "column \"\(c.name)\" is defined twice")
        }
        guard c.type.accepts(c.defaultValue) else {
            throw KuraError(.typeMismatch, "default \(c.defaultValue) of column \"\(c.name)\" is not a \(c.type.rawValue)")
        }
        var c = c
        c.defaultValue = c.type.normalize(c.defaultValue)
        positions[c.name] = columns.count
        columns.append(c)
        columnTypes.append(c.type)
        columnNullable.append(c.isNullable)
        if c.type == .external { hasExternal = true }
    }

    /// Renames column `old` to `new` (same position, type and default).
    mutating func rename(_ old: String, to new: String) throws(KuraError) {
        guard let p = positions[old] else { throw KuraError(.notFound, "no column \"\(old)\"") }
        guard !new.isEmpty, positions[new] == nil else {
            throw KuraError(.invalidArgument, "cannot rename column \"\(old)\" to \"\(new)\": that name is empty or taken")
        }
        columns[p].name = new
        positions[old] = nil
        positions[new] = p
    }

    /// Positions of the `external` columns (ExternalValues.swift).
    var externalColumns: [Int] { columns.indices.filter { columns[$0].type == .external } }

    /// Position of the column named `name`, or nil.
    public func position(of name: String) -> Int? { positions[name] }

    /// The column named `name`.
    ///
    /// - Throws: `.notFound` naming the column and the table.
    public func column(_ name: String, table: String) throws(KuraError) -> (position: Int, definition: ColumnDefinition) {
        guard let p = positions[name] else {
            throw KuraError(.notFound, "table \"\(table)\" has no column \"\(name)\" (columns: \(columns.map(\.name).joined(separator: ", ")))")
        }
        return (p, columns[p])
    }

    /// Checks and normalizes a full row of values for `table`.
    ///
    /// - Throws: `.typeMismatch` or `.constraintViolation` (null in a non-null
    ///   column), naming the table and column; `.invalidArgument` for a wrong count.
    func validate(_ values: [Value], table: String) throws(KuraError) -> [Value] {
        guard values.count <= columns.count else {
            throw KuraError(.invalidArgument, "table \"\(table)\" has \(columns.count) columns, got \(values.count) values")
        }
        // The common case, a full row already valid and in normal form, is
        // checked in place: the values are borrowed (not copied out one by
        // one, which retains and releases each text and blob) and the row
        // is returned as it came. Anything else takes the general way below.
        if values.count == columns.count, inNormalForm(values) { return values }
        // `out` shares `values`' storage until a value changes (a short row
        // padded with defaults, a value normalized): a valid full row is not copied.
        var out = values
        appendDefaults(to: &out)
        for i in 0..<columnTypes.count {
            let type = columnTypes[i]
            let n: Value?
            switch out[i] {
            case .null:
                if !columnNullable[i] {
                    throw KuraError(.constraintViolation, "column \"\(columns[i].name)\" of table \"\(table)\" may not be null")
                }
                continue
            case let v:
                guard type.accepts(v) else {
                    throw KuraError(.typeMismatch, "column \"\(columns[i].name)\" of table \"\(table)\" holds \(type.rawValue) values, not \(v.typeName) (\(v))")
                }
                n = type.normalized(v)
            }
            if let n { out[i] = n }
        }
        return out
    }

    /// Whether `values`, one per column, are all accepted by their columns
    /// (nulls only in nullable ones) and already in normal form: what
    /// `validate` would return unchanged. False sends the row the general
    /// way, which finds and reports the problem, or normalizes.
    private func inNormalForm(_ values: [Value]) -> Bool {
        values.withUnsafeBufferPointer { vs in
            columnTypes.withUnsafeBufferPointer { types in
                columnNullable.withUnsafeBufferPointer { nullable in
                    for i in 0..<vs.count {
                        if case .null = vs[i] {
                            if !nullable[i] { return false }
                        } else if !types[i].accepts(vs[i]) || !types[i].isNormal(vs[i]) {
                            return false
                        }
                    }
                    return true
                }
            }
        }
    }

    /// Whether every byte of `s`'s UTF-8 is below 0x80 (eight bytes at a time
    /// where the string's storage is contiguous, as native strings' is).
    @inline(__always)
    static func isASCII(_ s: String) -> Bool {
        let fast = s.utf8.withContiguousStorageIfAvailable { b -> Bool in
            guard let base = b.baseAddress else { return true }
            let p = UnsafeRawPointer(base)
            let n = b.count
            var i = 0
            var bits: UInt64 = 0
            while i + 8 <= n {
                bits |= p.loadUnaligned(fromByteOffset: i, as: UInt64.self)
                i += 8
            }
            while i < n {
                bits |= UInt64(p.load(fromByteOffset: i, as: UInt8.self))
                i += 1
            }
            return bits & 0x8080_8080_8080_8080 == 0
        }
        return fast ?? s.utf8.allSatisfy { $0 < 0x80 }
    }

    /// Pads a row that stores fewer values than the table has columns (they
    /// were added after it was written) with the missing columns' defaults.
    func appendDefaults(to values: inout [Value]) {
        guard values.count < columns.count else { return }
        values.reserveCapacity(columns.count)
        for c in columns[values.count...] { values.append(c.defaultValue) }
    }

    /// `value` checked and normalized for column `position`, as `validate`
    /// does for each value of a full row.
    ///
    /// - Throws: `.typeMismatch` or `.constraintViolation`, naming the table and column.
    func validatedChange(_ value: Value, at position: Int, table: String) throws(KuraError) -> Value {
        let c = columns[position]
        if value.isNull {
            guard c.isNullable else {
                throw KuraError(.constraintViolation, "column \"\(c.name)\" of table \"\(table)\" may not be null")
            }
            return value
        }
        guard c.type.accepts(value) else {
            throw KuraError(.typeMismatch, "column \"\(c.name)\" of table \"\(table)\" holds \(c.type.rawValue) values, not \(value.typeName) (\(value))")
        }
        return c.type.normalize(value)
    }

    /// Builds a full row from named values, filling defaults.
    func row(from named: [String: Value], table: String) throws(KuraError) -> [Value] {
        for name in named.keys where positions[name] == nil {
            throw KuraError(.notFound, "table \"\(table)\" has no column \"\(name)\"")
        }
        return try validate(columns.map { named[$0.name] ?? $0.defaultValue }, table: table)
    }

    // MARK: Encoding (the catalog definition)

    package var encoded: [UInt8] {
        var v: [Value] = [.integer(1), .integer(Int64(columns.count))]
        for c in columns {
            v += [.text(c.name), .text(c.type.rawValue), .bool(c.isNullable), c.defaultValue]
        }
        return RecordCodec.encode(v)
    }

    /// Decodes a definition; nil for an empty one (a raw table).
    static func decode(_ bytes: [UInt8], table: String) throws(KuraError) -> TableSchema? {
        guard !bytes.isEmpty else { return nil }
        let v = try RecordCodec.decode(bytes)
        func bad() -> KuraError { KuraError(.corrupt, "schema of table \"\(table)\" in the catalog is malformed") }
        guard v.count >= 2, v[0] == .integer(1), case .integer(let n) = v[1], n >= 0, v.count == 2 + 4 * Int(n) else { throw bad() }
        var cols: [ColumnDefinition] = []
        for i in 0..<Int(n) {
            let b = 2 + 4 * i
            guard case .text(let name) = v[b], case .text(let t) = v[b + 1], let type = ColumnType(rawValue: t),
                  case .bool(let nullable) = v[b + 2] else { throw bad() }
            cols.append(ColumnDefinition(name, type, nullable: nullable, default: v[b + 3]))
        }
        do { return try TableSchema(cols) } catch { throw bad() }
    }

    /// Value of column `i` in a record (the default if the record is shorter).
    @inline(__always)
    func value(_ view: RecordView, _ i: Int) throws(KuraError) -> Value {
        i < view.count ? try view.value(at: i) : columns[i].defaultValue
    }
}
