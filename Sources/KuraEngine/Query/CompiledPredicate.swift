// CompiledPredicate: a predicate turned into a program over one table's record
// bytes, made once per query execution and run for every candidate row.
//
// Compilation resolves every `column <op> constant` comparison (either side; the
// operator is mirrored when the column is on the right) to a `CompiledFieldTest`:
// the column becomes an ordinal, the constant side is evaluated once (variables
// bound, arithmetic and dates folded), LIKE and MATCHES patterns are compiled
// once. A row is then tested by one walk over its record header (`RecordFields`,
// up to the highest ordinal used) and byte-level tests, without a dictionary
// lookup, an existential call or a copy of the row.
//
// Everything else — key paths with collection operators, arithmetic on columns,
// functions of columns, SUBQUERY, ANY/ALL/NONE, comparisons of two columns, a
// constant side that throws or is not deterministic (`now()`, `random()`) — stays
// a `.interpreted` node that the interpreter (PredicateEvaluator, through
// RowContext) evaluates on the same bytes. So the compiled path never decides a
// question the interpreter would answer differently: that interpreter is the
// oracle the differential tests (CompiledPredicateDifferentialTests) check the
// compiled path against, on random predicates over random rows.
//
// Errors: a record that does not decode throws `.corrupt` naming the table (the
// cursor adds the row ID and page), as RowContext does; a constant side that
// throws is left to the interpreter, so it throws when (and only when) a row is
// tested, as before.
//
// Thread rules: one instance per cursor; `matches` mutates its scratch fields.
//
// Storage: the tests and the scratch `RecordFields` sit in memory the instance
// allocates once and frees in `deinit`, reached through pointers. `matches` runs
// for every row a scan visits; through pointers a test is used in place (an
// array element or a class's stored property would be copied, or checked for
// exclusive access, once per row).

/// A predicate compiled against one table's columns.
final class CompiledPredicate {
    /// Only `not` is boxed: a root that is one test (or a constant) is read
    /// for every row without retaining anything.
    enum Node {
        case constant(Bool)
        case and([Node])
        case or([Node])
        indirect case not(Node)
        /// `tests[i]` (kept out of the node so running it copies nothing).
        case test(Int)
        case interpreted(KuraPredicate)
    }

    let root: Node
    /// The compiled comparisons (`Node.test(i)` is `tests[i]`); owned, freed in deinit.
    private let tests: UnsafeMutableBufferPointer<CompiledFieldTest>
    let columns: ColumnMap
    let variables: [String: EvaluatedValue]
    /// Scratch for the row being tested; owned, freed in deinit.
    private let fields: UnsafeMutablePointer<RecordFields>
    /// How many leading columns a row's header walk locates (0: none is read).
    private let wanted: Int
    /// The test `root` is, when it is a single `.test`; else -1.
    private let singleTest: Int
    /// Whether any node needs the interpreter (then the raw record is passed on).
    let usesInterpreter: Bool

    /// Compiles `predicate` for rows of the table `columns` describes.
    /// `variables` are the values of `$NAME` variables left in the predicate.
    init(_ predicate: KuraPredicate, columns: ColumnMap, variables: [String: EvaluatedValue] = [:]) {
        self.columns = columns
        self.variables = variables
        var maxOrdinal = -1
        var interpreted = false
        var tests: [CompiledFieldTest] = []
        root = Self.compile(predicate, columns, variables, &maxOrdinal, &interpreted, &tests)
        self.tests = UnsafeMutableBufferPointer.allocate(capacity: tests.count)
        _ = self.tests.initialize(from: tests)
        usesInterpreter = interpreted
        if case .test(let i) = root { singleTest = i } else { singleTest = -1 }
        wanted = maxOrdinal + 1
        fields = UnsafeMutablePointer.allocate(capacity: 1)
        fields.initialize(to: RecordFields(columns: maxOrdinal + 1))
    }

    deinit {
        for t in tests { t.releaseStorage() }
        tests.baseAddress?.deinitialize(count: tests.count)
        tests.deallocate()
        fields.deinitialize(count: 1)
        fields.deallocate()
    }

    /// Whether the record satisfies the predicate.
    ///
    /// - Throws: `.corrupt` for a record that does not decode; evaluation errors
    ///   exactly as the interpreter throws them.
    func matches(_ record: UnsafeRawBufferPointer) throws(KuraError) -> Bool {
        if wanted > 0 {
            do {
                try fields.pointee.load(record)
            } catch {
                throw KuraError(.corrupt, "a row of table \"\(columns.table)\" has a malformed record: \(error.message)", page: error.page)
            }
        }
        // A predicate that is one comparison (the common case) runs it
        // directly, without walking `root`.
        if singleTest >= 0 { return try test(singleTest) }
        return try run(root, record)
    }

    /// Test `i` on the loaded fields; a malformed record names the table.
    @inline(__always)
    private func test(_ i: Int) throws(KuraError) -> Bool {
        do {
            // `tests` is not empty: `compile` made `.test(i)` for its element i.
            return try CompiledFieldTest.holds(tests.baseAddress! + i, fields.pointee)
        } catch where error.code == .corrupt {
            throw KuraError(.corrupt, "a row of table \"\(columns.table)\" has a malformed record: \(error.message)", page: error.page)
        }
    }

    private func run(_ node: Node, _ record: UnsafeRawBufferPointer) throws(KuraError) -> Bool {
        switch node {
        case .constant(let b): return b
        case .test(let i):
            return try test(i)
        case .and(let xs):
            for x in xs where !(try run(x, record)) { return false }
            return true
        case .or(let xs):
            for x in xs where try run(x, record) { return true }
            return false
        case .not(let x):
            return !(try run(x, record))
        case .interpreted(let p):
            return try PredicateEvaluator(object: .object(RowContext(record: record, columns: columns)), variables: variables).evaluate(p)
        }
    }

    // MARK: Compilation

    private static func compile(_ p: KuraPredicate, _ columns: ColumnMap, _ variables: [String: EvaluatedValue],
                                _ maxOrdinal: inout Int, _ interpreted: inout Bool, _ tests: inout [CompiledFieldTest]) -> Node {
        switch p {
        case .truePredicate: return .constant(true)
        case .falsePredicate: return .constant(false)
        case .not(let x): return .not(compile(x, columns, variables, &maxOrdinal, &interpreted, &tests))
        case .and(let xs): return .and(xs.map { compile($0, columns, variables, &maxOrdinal, &interpreted, &tests) })
        case .or(let xs): return .or(xs.map { compile($0, columns, variables, &maxOrdinal, &interpreted, &tests) })
        case .comparison(let c):
            if let t = fieldTest(c, columns, variables) {
                maxOrdinal = max(maxOrdinal, t.ordinal)
                tests.append(t)
                return .test(tests.count - 1)
            }
            interpreted = true
            return .interpreted(p)
        }
    }

    /// The single column a plain key path names, if the table has it.
    static func column(_ e: KuraExpression, _ columns: ColumnMap) -> (String, ColumnMap.Column)? {
        guard case .keyPath(let keys) = e, keys.count == 1, !keys[0].hasPrefix("@"),
              let c = columns.positions[keys[0]] else { return nil }
        return (keys[0], c)
    }

    private static func fieldTest(_ c: KuraComparison, _ columns: ColumnMap, _ variables: [String: EvaluatedValue]) -> CompiledFieldTest? {
        guard c.quantifier == .direct else { return nil }
        var op = c.operator
        var other = c.right
        var found = column(c.left, columns)
        if found == nil, let r = column(c.right, columns) {
            // `constant <op> column`: mirror the operator (only those with a mirror).
            guard let m = op.mirrored else { return nil }
            op = m
            found = r
            other = c.left
        }
        guard let (_, col) = found, isConstant(other) else { return nil }
        let right: EvaluatedValue
        do {
            right = try PredicateEvaluator(object: .null, variables: variables).value(other)
        } catch {
            // Left to the interpreter, which throws this for the first row tested.
            return nil
        }
        return CompiledFieldTest.make(ordinal: col.position, isDate: col.isDate, defaultValue: col.defaultValue,
                                      op: op, right: right, options: c.options)
    }

    /// Whether `e` has the same value for every row: no key path, no SELF, no
    /// SUBQUERY and no function whose value changes between calls.
    static func isConstant(_ e: KuraExpression) -> Bool {
        switch e {
        case .constant, .date, .variable: return true
        case .keyPath, .variableKeyPath, .subquery: return false
        case .member(let b, _), .unary(_, let b), .cast(let b, _): return isConstant(b)
        case .index(let b, let i):
            if case .expression(let x) = i, !isConstant(x) { return false }
            return isConstant(b)
        case .aggregate(let xs): return xs.allSatisfy(isConstant)
        case .function(let f, let xs):
            if f == .now || f == .random || f == .randomElement { return false }
            return xs.allSatisfy(isConstant)
        case .binary(_, let a, let b): return isConstant(a) && isConstant(b)
        }
    }
}
