// QueryPlanner: chooses how to read a table for a `TableQuery`.
//
// Choice: by estimated cost (QueryCost units: one row scanned), from the table's
// row count and the number of index entries inside each candidate's key ranges,
// which BTree.position estimates from the index tree itself (nothing is stored).
// A scan reads every row once; an index path pays per entry plus a row lookup per
// candidate, so at high selectivity (most rows match) the scan wins, and at low
// selectivity the index does. An index that yields the sort order is walked and
// stops at the limit; otherwise the matches are sorted after reading.
//
// Access paths:
//   - table scan in row-ID order;
//   - index scan over key ranges: an equality prefix on the leading index columns
//     (`==`), then on the next column one of `IN`, a range (`<`, `<=`, `>`, `>=`,
//     `BETWEEN`), `BEGINSWITH` or a `LIKE` with a literal prefix;
//   - index walk in index order, when no index narrows the rows but one gives the
//     requested sort and there is a limit (stop as soon as the limit is reached).
//
// Correctness rule: an index only chooses *candidates*. Every candidate row is
// checked against the whole predicate by the same evaluator a table scan uses,
// so the answer is identical on every path; the key ranges only need to be a
// superset of the matches. That is why bounds are inclusive, why an integer
// column compared with 2.5 scans from 2, and why a folded index serves `==`,
// `BEGINSWITH` and `LIKE` with or without `[c]`/`[d]` (folding both sides keeps
// every match). An index whose column is not folded serves text comparisons
// only without `[c]`/`[d]`. Ranges never use a folded index (folded order is not
// the column's order). Only conjuncts at the top level of the predicate (joined
// by AND) are used.
//
// Exact plans: when every top-level conjunct is an integer comparison the key
// ranges express exactly — `==` an integer, `BETWEEN` two integers, `IN` a list
// of integers, `<`, `<=`, `>`, `>=` an integer — on a plain (not folded) integer
// index column, every entry in the ranges satisfies the whole predicate (integer
// keys compare as the numbers do, and a null or non-integer value has another
// key tag), so the plan is marked `exact` and the cursor does not test the rows
// again. For that, an integer range on an integer column is made a closed range
// of integers (`integerBounds`): a missing side is Int64.min or Int64.max (so
// nulls, tag 00, stay out), a strict side moves one step in (`a < n` ends at
// n - 1), and a range no integer satisfies (`a < Int64.min`, `a > Int64.max`,
// `BETWEEN {5, 3}`) has no key range at all. Only integer columns: a double or
// date column compared with an integer keeps the inclusive, unadjusted bound
// (`a < 5` must keep 4.5) and is re-tested. Anything else (text, whose `==` is
// canonical equivalence, not byte equality; a fraction on an integer column;
// two conjuncts on one column, of which one makes the range) is re-tested.

import Foundation

/// An inclusive key range: keys k with lower <= k and (k <= upper or k starts
/// with upper). `upper` works as a prefix bound.
struct KeyRange: Hashable {
    var lower: [UInt8]
    var upper: [UInt8]

    /// The smallest byte string greater than every string starting with `p`;
    /// false if there is none (p is empty or all 0xFF).
    static func incrementPrefix(_ p: inout [UInt8]) -> Bool {
        while let last = p.last {
            if last < 0xFF { p[p.count - 1] = last + 1; return true }
            p.removeLast()
        }
        return false
    }
}

struct QueryPlan {
    enum Access {
        case tableScan
        /// Boxed: a plan is copied several times per query (planner, cursor,
        /// candidate source), and an inline index definition made each copy
        /// retain its every string and array; the box is one retain.
        indirect case index(IndexDefinition, ranges: [KeyRange], reverse: Bool)
        /// Rows read by row ID, in this order (a join's candidates: SemiJoin.swift).
        case rowIDs([Int64])
    }
    var access: Access
    /// True when rows come out of `access` already in the query's sort order.
    var ordered: Bool
    /// Index columns (from the first) whose values decide the order; ties inside a
    /// run of equal values are put back in row-ID order by the executor.
    var orderColumns: Int = 0
    /// Lines for `explain`.
    var notes: [String] = []
    /// The planner's estimate, in `QueryCost` units.
    var estimatedCost = 0.0
    /// The planner's estimate of the rows matching the predicate.
    var estimatedRows = 0.0
    /// True when every row the access path yields satisfies the whole predicate,
    /// so the rows need no test (see "Exact plans" in the header).
    var exact = false
    /// How many of the predicate's conjuncts the key ranges express exactly.
    var exactConjuncts = 0
}

/// A comparison of one column with constants, taken from the predicate.
struct ColumnConstraint {
    enum Kind {
        case equal(Value)
        case oneOf([Value])
        case range(lower: Value?, upper: Value?)
        case prefix(String)
    }
    let column: String
    let kind: Kind
    let options: KuraComparisonOptions
    let text: String
    /// True when the constraint's key range holds exactly the values that satisfy
    /// it, given an integer index column: `==` an integer, `BETWEEN` two integers,
    /// `IN` integers, `<`, `<=`, `>`, `>=` an integer (through `integerBounds`).
    var exactForIntegers = false
    /// For `.range`: whether a bound is excluded (`>` for lower, `<` for upper).
    /// Only exact integer ranges use it; other ranges keep the bound inclusive.
    var strictLower = false
    var strictUpper = false
}

/// The planner's cost units: one unit is reading one row during a table scan.
enum QueryCost {
    /// Reading the next entry of an index walk.
    static let indexEntry = 0.2
    /// Reading a row by row ID (a descent of the table tree).
    static let rowLookup = 3.0
    /// Sorting, per candidate and per level of the sort (n log n).
    static let sortStep = 0.05
    /// Share of rows assumed to pass a conjunct the planner cannot estimate.
    static let unknownSelectivity = 0.25
}

enum QueryPlanner {
    /// The longest `IN` list whose values become key ranges (one small
    /// range per value, built and sought per query).
    static let maxInListRanges = 100_000

    /// Chooses the cheapest access path: a table scan, an index search over key
    /// ranges, or an index walk in sort order that stops at the limit. Costs come
    /// from `rowCount` and `estimate` (entries of an index inside key ranges, read
    /// from the index tree). `explaining` also fills `notes` with every candidate
    /// and its estimate.
    static func plan(_ q: TableQuery, schema: TableSchema?, indexes: [IndexDefinition], rowCount: Int, explaining: Bool = false,
                     estimate: (IndexDefinition, [KeyRange]) throws(KuraError) -> Double) throws(KuraError) -> QueryPlan {
        let allConjuncts = q.predicate.map(conjuncts) ?? []
        // Each conjunct's constraint, made once (selectivity and candidates both use them).
        let conjunctConstraints = allConjuncts.map { constraint($0, explaining: explaining) }
        let constraints = conjunctConstraints.compactMap { $0 }
        let n = Double(max(rowCount, 1))
        let keep = q.limit.map { Double(q.offset + $0) }
        // Key ranges found for the selectivity (at most one index's: the loop
        // stops at the first), when the predicate has one constraint: the
        // candidates loop asks `indexRanges` the same question for that index
        // (same index, same single constraint) and takes them from here.
        var rangesFound: (index: Int, ranges: IndexRanges)?
        let reuseRanges = constraints.count == 1 && schema != nil
        // Share of rows the whole predicate keeps: per top-level conjunct, from an
        // index whose first column it constrains, else a fixed guess.
        var selectivity = 1.0
        for (c, constrained) in zip(allConjuncts, conjunctConstraints) {
            var s = QueryCost.unknownSelectivity
            if case .truePredicate = c { s = 1 }
            if let schema, let cc = constrained {
                for i in indexes.indices where indexes[i].columns.first?.name == cc.column {
                    if let found = indexRanges(indexes[i], constraints.count == 1 ? constraints : [cc], schema: schema) {
                        if reuseRanges { rangesFound = (i, found) }
                        s = min(1, try estimate(indexes[i], found.ranges) / n)
                        break
                    }
                }
            }
            selectivity *= s
        }
        let matches = max(1, n * selectivity)
        func sortCost(_ m: Double) -> Double {
            let kept = min(m, keep ?? m)
            return m * log2(max(kept, 2)) * QueryCost.sortStep + kept * QueryCost.rowLookup
        }
        func fmt(_ x: Double) -> String { estimateText(x) }

        // The cheapest candidate so far, kept as it is found (no list of plans
        // to copy out of); `explain` lists every candidate's cost and note.
        var bestCost = n + (q.sort.isEmpty ? 0 : sortCost(matches))
        var chosen = QueryPlan(access: .tableScan, ordered: q.sort.isEmpty)
        var bestIndex = 0
        var candidateNotes: [(cost: Double, note: String)] = []
        if explaining {
            chosen.notes = ["scan table \"\(q.table)\" in row-ID order"]
            // Notes are text for `explain` only: building them cost every query a
            // few string interpolations.
            candidateNotes.append((bestCost, "table scan: \(fmt(n)) rows, about \(fmt(matches)) matching"))
        }
        var candidateCount = 1
        func consider(_ cost: Double, _ plan: QueryPlan, _ note: @autoclosure () -> String) {
            if cost < bestCost {
                bestCost = cost
                chosen = plan
                bestIndex = candidateCount
            }
            if explaining { candidateNotes.append((cost, note())) }
            candidateCount += 1
        }

        for (i, index) in indexes.enumerated() {
            guard let schema else { continue }
            let maybeFound = reuseRanges && rangesFound?.index == i ? rangesFound?.ranges : indexRanges(index, constraints, schema: schema)
            guard let searched = maybeFound, var plan = indexPlan(index, searched, schema: schema, sort: q.sort, explaining: explaining)?.plan else { continue }
            let ranges = searched.ranges
            if !allConjuncts.isEmpty && plan.exactConjuncts == allConjuncts.count {
                plan.exact = true
                if explaining { plan.notes.append("the key ranges are exactly the predicate: rows are not tested again") }
            }
            let entries = max(1, try estimate(index, ranges))
            let found = min(entries, matches)
            var cost: Double
            if plan.ordered {
                // Rows come in the order asked for: a limit stops the walk early.
                let visited = keep.map { min(entries, $0 * entries / found) } ?? entries
                cost = visited * (QueryCost.indexEntry + QueryCost.rowLookup)
            } else if q.sort.isEmpty {
                // Row IDs from the index, sorted, then each row read once.
                cost = entries * (QueryCost.indexEntry + QueryCost.rowLookup) + entries * log2(max(entries, 2)) * QueryCost.sortStep
            } else {
                cost = entries * (QueryCost.indexEntry + QueryCost.rowLookup) + sortCost(found)
            }
            consider(cost, plan, "index \"\(index.name)\": about \(fmt(entries)) entries in \(ranges.count) key range\(ranges.count == 1 ? "" : "s")")
        }
        // An index that gives the sort, walked until the limit is reached.
        if let keep, !q.sort.isEmpty {
            for index in indexes {
                guard let (reverse, k) = sortMatch(index, from: 0, q.sort, schema: schema) else { continue }
                let visited = min(n, keep / max(selectivity, 1 / n))
                var plan = QueryPlan(access: .index(index, ranges: [KeyRange(lower: [], upper: [])], reverse: reverse), ordered: true, orderColumns: k)
                if explaining { plan.notes = ["walk index \"\(index.name)\" \(reverse ? "backward" : "forward") in sort order, stopping at the limit"] }
                consider(visited * (QueryCost.indexEntry + QueryCost.rowLookup), plan, "walk of index \"\(index.name)\" in sort order: about \(fmt(visited)) entries until the limit")
            }
        }
        chosen.estimatedCost = bestCost
        chosen.estimatedRows = matches
        if explaining {
            chosen.notes.append("estimated costs (1 = one row scanned):")
            for (i, c) in candidateNotes.enumerated() {
                chosen.notes.append("  \(i == bestIndex ? "*" : " ") \(c.note): cost \(fmt(c.cost))")
            }
        }
        return chosen
    }

    /// Top-level AND operands.
    static func conjuncts(_ p: KuraPredicate) -> [KuraPredicate] {
        if case .and(let xs) = p { return xs.flatMap(conjuncts) }
        return [p]
    }

    static func constant(_ e: KuraExpression) -> Value? {
        switch e {
        case .constant(let v): return v
        case .date(let s): return .double(s)
        default: return nil
        }
    }

    static func column(_ e: KuraExpression) -> String? {
        if case .keyPath(let k) = e, k.count == 1, !k[0].hasPrefix("@") { return k[0] }
        return nil
    }

    /// A usable `column op constant` (or `constant op column`) comparison.
    static func constraint(_ p: KuraPredicate, explaining: Bool) -> ColumnConstraint? {
        guard case .comparison(let c) = p, c.quantifier == .direct else { return nil }
        var op = c.operator
        var col = column(c.left)
        var other = c.right
        if col == nil, let r = column(c.right) {
            col = r
            other = c.left
            guard let m = op.mirrored else { return nil }
            op = m
        }
        guard let name = col else { return nil }
        let text = explaining ? KuraPredicate.comparison(c).predicateFormat : ""
        switch op {
        case .equalTo:
            guard let v = constant(other) else { return nil }
            var cc = ColumnConstraint(column: name, kind: .equal(v), options: c.options, text: text)
            if case .integer = v { cc.exactForIntegers = true }
            return cc
        case .in:
            // A list of any length the planner can hold gives key ranges: a
            // list too long for ranges would be tested against every row of a
            // table scan, one value after another (1,000 was the bound once:
            // 1,010 owners' prefetch scanned 200,000 rows, 0.5 s a query).
            guard case .aggregate(let xs) = other, xs.count <= Self.maxInListRanges else { return nil }
            var vs: [Value] = []
            for x in xs { guard let v = constant(x) else { return nil }; vs.append(v) }
            var cc = ColumnConstraint(column: name, kind: .oneOf(vs), options: c.options, text: text)
            cc.exactForIntegers = !vs.isEmpty && vs.allSatisfy { if case .integer = $0 { return true } else { return false } }
            return cc
        case .lessThan, .lessThanOrEqualTo:
            guard let v = constant(other), !v.isNull else { return nil }
            var cc = ColumnConstraint(column: name, kind: .range(lower: nil, upper: v), options: c.options, text: text)
            if case .integer = v { cc.exactForIntegers = true }
            cc.strictUpper = op == .lessThan
            return cc
        case .greaterThan, .greaterThanOrEqualTo:
            guard let v = constant(other), !v.isNull else { return nil }
            var cc = ColumnConstraint(column: name, kind: .range(lower: v, upper: nil), options: c.options, text: text)
            if case .integer = v { cc.exactForIntegers = true }
            cc.strictLower = op == .greaterThan
            return cc
        case .between:
            guard case .aggregate(let xs) = other, xs.count == 2, let lo = constant(xs[0]), let hi = constant(xs[1]),
                  !lo.isNull, !hi.isNull else { return nil }
            var cc = ColumnConstraint(column: name, kind: .range(lower: lo, upper: hi), options: c.options, text: text)
            if case .integer = lo, case .integer = hi { cc.exactForIntegers = true }
            return cc
        case .beginsWith:
            guard case .text(let s)? = constant(other), !s.isEmpty else { return nil }
            return ColumnConstraint(column: name, kind: .prefix(s), options: c.options, text: text)
        case .like:
            guard case .text(let s)? = constant(other) else { return nil }
            let prefix = LikePattern(s).literalPrefix
            guard !prefix.isEmpty, !prefix.contains("\\") else { return nil }
            return ColumnConstraint(column: name, kind: .prefix(prefix), options: c.options, text: text)
        default:
            return nil
        }
    }

    /// The value as stored in a column of `type`, for a key bound; nil if the
    /// constant cannot be compared with that column through the index.
    /// `roundDown` picks the bound side when an integer column meets a fraction.
    static func bound(_ v: Value, _ type: ColumnType, roundDown: Bool) -> Value? {
        switch (type, v) {
        case (.integer, .integer): return v
        case (.integer, .double(let d)):
            guard d.isFinite else { return nil }
            let r = roundDown ? d.rounded(.down) : d.rounded(.up)
            guard r >= -9.2e18 && r <= 9.2e18 else { return nil }
            return .integer(Int64(r))
        case (.double, .double), (.date, .double): return v
        case (.double, .integer(let i)), (.date, .integer(let i)):
            let d = Double(i)
            // `magnitude`, not `abs`: abs(Int64.min) overflows (a user's constant).
            return i.magnitude < (1 << 53) ? .double(d) : .double(roundDown ? d.nextDown : d.nextUp)
        case (.text, .text), (.blob, .blob), (.bool, .bool): return v
        default: return nil
        }
    }

    /// `prefix + segment`, sharing `segment`'s storage when there is no prefix.
    @inline(__always)
    static func joined(_ prefix: [UInt8], _ segment: [UInt8]) -> [UInt8] {
        prefix.isEmpty ? segment : prefix + segment
    }

    static func segment(_ v: Value, _ c: IndexColumn) -> [UInt8] {
        var out: [UInt8] = []
        // A number's segment is 9 bytes: one allocation instead of growing.
        out.reserveCapacity(16)
        IndexKey.append(v, descending: c.descending, folded: c.folded, to: &out)
        return out
    }

    /// Whether a text constraint with `options` may use index column `c`.
    static func textUsable(_ c: IndexColumn, _ options: KuraComparisonOptions) -> Bool {
        c.folded || options.intersection([.caseInsensitive, .diacriticInsensitive]).isEmpty
    }

    /// The key ranges of `index` that `constraints` select, and what made
    /// them (`indexRanges`); the sort does not change them.
    struct IndexRanges {
        var ranges: [KeyRange]
        /// Texts of the constraints used (for `explain`; empty when the
        /// constraints were made without text).
        var used: [String]
        var usedCount: Int
        var exactUsed: Int
        var equalities: Int
        var terminalColumn: Int
    }

    static func indexPlan(_ index: IndexDefinition, _ constraints: [ColumnConstraint], schema: TableSchema, sort: [SortKey], explaining: Bool) -> (score: Int, plan: QueryPlan)? {
        guard let found = indexRanges(index, constraints, schema: schema) else { return nil }
        return indexPlan(index, found, schema: schema, sort: sort, explaining: explaining)
    }

    /// The key ranges `constraints` select in `index`: an equality prefix,
    /// then one IN, range or prefix constraint; nil when no constraint applies.
    static func indexRanges(_ index: IndexDefinition, _ constraints: [ColumnConstraint], schema: TableSchema) -> IndexRanges? {
        var prefixes: [[UInt8]] = [[]]
        var ranges: [KeyRange]?
        var used: [String] = []
        var usedCount = 0
        var exactUsed = 0
        var equalities = 0
        var terminalColumn = index.columns.count
        columns: for (k, col) in index.columns.enumerated() {
            let type = schema.columns[col.position].type
            // Equality first.
            for c in constraints where c.column == col.name {
                guard case .equal(let v) = c.kind else { continue }
                if v.isNull {
                    prefixes = prefixes.map { joined($0, segment(.null, col)) }
                } else {
                    guard let b = bound(v, type, roundDown: true), b == v || type != .integer else { continue }
                    if type == .text && !textUsable(col, c.options) { continue }
                    if type != .text && !c.options.isEmpty { continue }
                    prefixes = prefixes.map { joined($0, segment(b, col)) }
                }
                usedCount += 1
                if !c.text.isEmpty { used.append(c.text) }
                if Self.exact(c, type, col) { exactUsed += 1 }
                equalities += 1
                continue columns
            }
            terminalColumn = k
            for c in constraints where c.column == col.name {
                switch c.kind {
                case .oneOf(let vs):
                    if type == .text && !textUsable(col, c.options) { continue }
                    if type != .text && !c.options.isEmpty { continue }
                    var segs = Set<[UInt8]>()
                    for v in vs {
                        if v.isNull { segs.insert(segment(.null, col)); continue }
                        guard let b = bound(v, type, roundDown: true) else { continue }
                        if case .integer = b, case .double(let d) = v, d.rounded() != d { continue }  // can never be equal
                        segs.insert(segment(b, col))
                    }
                    let sorted = segs.sorted { bytesPrecede($0, $1) }
                    ranges = prefixes.flatMap { p in sorted.map { KeyRange(lower: p + $0, upper: p + $0) } }
                case .range(let lo, let hi):
                    if col.folded || (type == .text && !c.options.isEmpty) || (type != .text && !c.options.isEmpty) { continue }
                    var lower: [UInt8]? = nil
                    var upper: [UInt8]? = nil
                    if Self.exact(c, type, col) {
                        // A closed range of integers, or none (see "Exact plans").
                        switch Self.integerBounds(c) {
                        case .closed(let l, let h):
                            lower = segment(.integer(l), col)
                            upper = segment(.integer(h), col)
                        case .empty:
                            ranges = []
                        case nil:
                            continue
                        }
                    } else {
                        if let lo { guard let b = bound(lo, type, roundDown: true) else { continue }; lower = segment(b, col) }
                        if let hi { guard let b = bound(hi, type, roundDown: false) else { continue }; upper = segment(b, col) }
                    }
                    if col.descending { swap(&lower, &upper) }
                    if ranges == nil {
                        ranges = prefixes.map { p in KeyRange(lower: joined(p, lower ?? []), upper: joined(p, upper ?? [])) }
                    }
                case .prefix(let s):
                    guard type == .text, textUsable(col, c.options) else { continue }
                    var seg: [UInt8] = [IndexKey.textTag]
                    let folded = col.folded ? TextFolding.fold(s, caseInsensitive: true, diacriticInsensitive: true) : s
                    for b in folded.utf8 { seg.append(b); if b == 0 { seg.append(0xFF) } }
                    if col.descending { seg = seg.map { ~$0 } }
                    ranges = prefixes.map { p in KeyRange(lower: joined(p, seg), upper: joined(p, seg)) }
                case .equal:
                    continue
                }
                usedCount += 1
                if !c.text.isEmpty { used.append(c.text) }
                if Self.exact(c, type, col) { exactUsed += 1 }
                break columns
            }
            break
        }
        if ranges == nil {
            guard equalities > 0 else { return nil }
            ranges = prefixes.map { KeyRange(lower: $0, upper: $0) }
        }
        return IndexRanges(ranges: ranges!, used: used, usedCount: usedCount, exactUsed: exactUsed, equalities: equalities, terminalColumn: terminalColumn)
    }

    /// The plan searching `index` over `found`'s key ranges, in `sort` order
    /// when the index gives it.
    static func indexPlan(_ index: IndexDefinition, _ found: IndexRanges, schema: TableSchema, sort: [SortKey], explaining: Bool) -> (score: Int, plan: QueryPlan)? {
        let ranges: [KeyRange]? = found.ranges
        let (used, equalities, terminalColumn, exactUsed) = (found.used, found.equalities, found.terminalColumn, found.exactUsed)
        let terminal = found.usedCount > equalities
        var score = equalities * 4 + (terminal ? 2 : 0)
        if index.isUnique && equalities == index.columns.count { score += 100 }
        // Order: after the equality prefix, the index orders by the next columns.
        // With no sort, rows must come in row-ID order: an index gives that only
        // when every column is fixed by one equality (keys then differ by row ID).
        var ordered = sort.isEmpty && equalities == index.columns.count && ranges!.count == 1
        var reverse = false
        var orderColumns = 0
        let orderFrom = terminal && ranges!.count > 1 ? terminalColumn : equalities
        if !sort.isEmpty, let (r, n) = sortMatch(index, from: orderFrom, sort, schema: schema) {
            ordered = true
            reverse = r
            orderColumns = orderFrom + n
            score += 1
        }
        var plan = QueryPlan(access: .index(index, ranges: ranges!, reverse: reverse), ordered: ordered, orderColumns: orderColumns)
        plan.exactConjuncts = exactUsed
        if !explaining { return (score, plan) }
        plan.notes = ["search index \"\(index.name)\" (\(index.columns.map { $0.name + ($0.descending ? " desc" : "") + ($0.folded ? " folded" : "") }.joined(separator: ", "))) using " + used.joined(separator: " AND "),
                      "key ranges: \(ranges!.count)" + (ranges!.count <= 4 ? " " + ranges!.map { "[\(hexBytes($0.lower)) ... \(hexBytes($0.upper))*]" }.joined(separator: ", ") : ""),
                      ordered && !sort.isEmpty ? "rows come out in sort order (\(reverse ? "backward" : "forward") index walk)" : ""].filter { !$0.isEmpty }
        return (score, plan)
    }

    /// Whether `c`, used on index column `col` of type `type`, keeps exactly the
    /// entries whose rows satisfy it (see "Exact plans" in the header).
    static func exact(_ c: ColumnConstraint, _ type: ColumnType, _ col: IndexColumn) -> Bool {
        c.exactForIntegers && type == .integer && !col.folded && c.options.isEmpty
    }

    /// The integers a range of integers keeps.
    enum IntegerRange: Equatable {
        /// Every integer from the first to the second, both included.
        case closed(Int64, Int64)
        /// No integer.
        case empty
    }

    /// The integers an integer range constraint keeps (a missing side is
    /// Int64.min or Int64.max; a strict side moves one step in, never past the
    /// extremes: `a < Int64.min`, `a > Int64.max` and `BETWEEN {5, 3}` are
    /// empty); nil when a bound is not an integer (no exact range).
    static func integerBounds(_ c: ColumnConstraint) -> IntegerRange? {
        guard case .range(let lo, let hi) = c.kind else { return nil }
        var l = Int64.min
        var h = Int64.max
        switch lo {
        case nil: break
        case .integer(let n)?:
            if c.strictLower {
                guard n < Int64.max else { return .empty }
                l = n + 1
            } else {
                l = n
            }
        default: return nil
        }
        switch hi {
        case nil: break
        case .integer(let n)?:
            if c.strictUpper {
                guard n > Int64.min else { return .empty }
                h = n - 1
            } else {
                h = n
            }
        default: return nil
        }
        return l <= h ? .closed(l, h) : .empty
    }

    /// Whether `sort` is the order of the index's columns from `from` on (all in
    /// the index's directions, or all reversed). Returns (reverse, columns used).
    /// A text column's order is binary, or the [cd]-folded order when the index
    /// column is folded; other columns ignore folding and collations.
    static func sortMatch(_ index: IndexDefinition, from: Int, _ sort: [SortKey], schema: TableSchema?) -> (Bool, Int)? {
        guard from + sort.count <= index.columns.count else { return nil }
        var reverse: Bool?
        for (i, s) in sort.enumerated() {
            let c = index.columns[from + i]
            guard c.name == s.column else { return nil }
            let isText = schema.map { c.position >= 0 && c.position < $0.columns.count && $0.columns[c.position].type == .text } ?? true
            if isText {
                guard s.collation == (c.folded ? .caseDiacriticInsensitive : .binary) else { return nil }
            }
            let r = s.ascending == c.descending
            if let rev = reverse, rev != r { return nil }
            reverse = r
        }
        return (reverse ?? false, sort.count)
    }
}

func hexBytes(_ b: [UInt8]) -> String {
    b.isEmpty ? "start" : b.map { String($0, radix: 16).leftPadded(2) }.joined()
}

/// An estimate (rows, entries, cost) as text for plans and `explain`: with
/// `decimal`, one decimal under 10; otherwise whole numbers. Estimates come
/// from counters read from disk, so this never traps: past 1e18 (a damaged
/// row count of Int64.max is 2^63, which `Int` cannot hold) it prints the
/// Double, and "?" for a non-finite one.
func estimateText(_ x: Double, decimal: Bool = true) -> String {
    guard x.isFinite else { return "?" }
    if decimal && x < 10 { return String((x * 10).rounded() / 10) }
    if x <= -1e18 { return String(x) }
    if x >= 1e18 { return String(x) }
    return String(Int(x.rounded()))
}
