// EntityPredicate: `entity.name` in fetch predicates, and the `_entity`
// filter of a fetch from a table shared by an entity hierarchy
// (EntityHierarchy.swift).
//
// A predicate names an object's own entity as `entity.name` (Core Data's
// spelling, `entity.name == "Country"`), unless the entity has a property
// named `entity`, which then wins. The object path evaluates it through
// `ObjectView`; the store path rewrites the key path to the `_entity` column,
// so it runs in the engine (and may use the `_entity` index). On a table of one
// entity there is no `_entity` column and the object path answers it.

enum EntityPredicate {
    /// Whether key path `k` is `entity.name` for objects of `e`.
    static func isEntityName(_ k: [String], _ e: EntityDescription) -> Bool {
        k.count == 2 && k[0] == EntityNameView.key && k[1] == "name"
            && e.attributesByName[EntityNameView.key] == nil && e.relationshipsByName[EntityNameView.key] == nil
    }

    /// What the engine runs for a fetch of `e`: the predicate with
    /// `entity.name` read from `_entity`, and the entity filter `kinds`.
    static func stored(_ p: KuraPredicate?, _ kinds: KuraPredicate?, _ e: EntityDescription) -> KuraPredicate? {
        let q = p.map { rewrite($0, e) }
        switch (q, kinds) {
        case (nil, nil): return nil
        case (let x?, nil): return x
        case (nil, let k?): return k
        case (let x?, let k?): return .and([k, x])
        }
    }

    static func rewrite(_ p: KuraPredicate, _ e: EntityDescription) -> KuraPredicate {
        switch p {
        case .truePredicate, .falsePredicate: return p
        case .not(let x): return .not(rewrite(x, e))
        case .and(let xs): return .and(xs.map { rewrite($0, e) })
        case .or(let xs): return .or(xs.map { rewrite($0, e) })
        case .comparison(var c):
            c.left = rewrite(c.left, e)
            c.right = rewrite(c.right, e)
            return .comparison(c)
        }
    }

    /// Rewrites the expression shapes the store path accepts
    /// (`ManagedObjectContext.onlyAttributes`); others stay as they are.
    static func rewrite(_ x: KuraExpression, _ e: EntityDescription) -> KuraExpression {
        switch x {
        case .keyPath(let k):
            // A composite's element is its own column (CompositeAttributes.swift).
            if let column = e.compositeColumn(k) { return .keyPath([column]) }
            return e.hierarchy.isShared && isEntityName(k, e) ? .keyPath([ManagedObjectModel.entityColumn]) : x
        case .aggregate(let xs): return .aggregate(xs.map { rewrite($0, e) })
        case .function(let f, let xs): return .function(f, xs.map { rewrite($0, e) })
        case .binary(let op, let a, let b): return .binary(op, rewrite(a, e), rewrite(b, e))
        case .unary(let op, let a): return .unary(op, rewrite(a, e))
        case .cast(let a, let t): return .cast(rewrite(a, e), t)
        default: return x
        }
    }
}

// Relationship key paths in the engine (issue 15). A fetch whose predicate or
// sort goes through relationships is translated into engine joins
// (KuraEngine's SemiJoin.swift) when every part has a translation, so it runs
// in the engine with indexes on both sides; otherwise it takes the object path
// (Context+Fetch.swift), never a different answer. Translations, for a
// predicate on entity E (each one the in-memory evaluator's meaning, which
// stays the oracle and serves pending changes):
//   - a conjunct naming only E's attributes stays a predicate on E's table;
//     AND combines; NOT of one join negates it, NOT of anything else is a
//     negated same-row join (the rows of E's table matching it); OR is
//     NOT (NOT a AND NOT b ...) in that form;
//   - `r == nil` / `r != nil` for a stored to-one `r`: no / some destination
//     row (of the destination's kinds) has the row ID the key holds;
//   - a comparison whose key paths all start with the same stored to-one `r`
//     (`record.grade == 99`, any quantifier, any depth: the rest is translated
//     on the destination): rows whose key names a destination row matching
//     the comparison with `r.` removed. A nil or dangling `r` makes every key
//     path read from nil; when the comparison holds then (`record.grade == nil`,
//     `record.name != "x"`), the join becomes "no destination row where the
//     comparison fails", which such rows pass;
//   - `ANY`/`NONE`/`ALL r.k op constant` for a stored to-many `r` (through
//     the inverse's key or a join table), with `k` a key path the destination
//     can translate directly (attributes, to-one hops, or one more to-many,
//     whose elements the evaluator flattens: ANY of ANY, ALL of ALL): ANY is a semi-join on
//     the destination rows matching `k op constant`, NONE its negation, ALL
//     the negation of a semi-join on the rows where it fails (true for an
//     empty set, as in memory, where elements are tested one by one);
//   - `r.@count op x` and `SUBQUERY(r, $v, P).@count op x` (constants only
//     besides): a semi-join counting linked destination rows (matching P with
//     `$v.k` read as `k`), `having` the comparison with `$count` for the count;
//     `r.@sum.a op x` (`@avg`, `@min`, `@max`) the same with `$values.@sum`
//     over the linked rows' values of attribute `a`.
// Destination rows of a to-many are narrowed to the destination and its
// subentities (`_entity`), as `relatedObjects` reads them. Sort keys through
// to-one relationships (`record.grade`) become `ColumnLookup`s.
extension EntityPredicate {
    /// A fetch's predicate as the engine runs it: a predicate on the table's
    /// own columns (`entity.name` and composites rewritten) and joins.
    struct Joined {
        var predicate: KuraPredicate?
        var joins: [SemiJoin] = []

        mutating func add(_ other: Joined) {
            if let p = other.predicate {
                predicate = predicate.map { q -> KuraPredicate in
                    if case .and(let xs) = q { return .and(xs + [p]) }
                    return .and([q, p])
                } ?? p
            }
            joins += other.joins
        }
    }

    /// The translation of `p` for `e` (see above), or nil if some part has none.
    static func joined(_ p: KuraPredicate, _ e: EntityDescription, _ model: ManagedObjectModel) -> Joined? {
        if ManagedObjectContext.onlyAttributes(p, e) { return Joined(predicate: rewrite(p, e)) }
        switch p {
        case .and(let xs):
            var out = Joined()
            for x in xs {
                guard let t = joined(x, e, model) else { return nil }
                out.add(t)
            }
            return out
        case .not(let x):
            guard var t = joined(x, e, model) else { return nil }
            if t.predicate == nil, t.joins.count == 1 {
                t.joins[0].negated.toggle()
                return t
            }
            return Joined(joins: [sameRow(t, e, negated: true)])
        case .or(let xs):
            // NOT (NOT x1 AND NOT x2 ...), each part one same-row join.
            var parts: [SemiJoin] = []
            for x in xs {
                guard let t = joined(x, e, model) else { return nil }
                parts.append(sameRow(t, e, negated: true))
            }
            return Joined(joins: [SemiJoin(.sameRow, TableQuery(e.hierarchy.table, joins: parts), negated: true)])
        case .comparison(let c):
            return joined(c, e, model)
        default:
            return nil
        }
    }

    /// `t` as one join: the rows of `e`'s table matching it (or, negated, not).
    private static func sameRow(_ t: Joined, _ e: EntityDescription, negated: Bool) -> SemiJoin {
        SemiJoin(.sameRow, TableQuery(e.hierarchy.table, where: t.predicate, joins: t.joins), negated: negated)
    }

    private static func joined(_ c: KuraComparison, _ e: EntityDescription, _ model: ManagedObjectModel) -> Joined? {
        if let t = countJoin(c, e, model) { return t }
        if let t = nilTest(c, e, model) { return t }
        guard let paths = keyPaths(c.left).flatMap({ l in keyPaths(c.right).map { l + $0 } }), let first = paths.first,
              first.count >= 2, let r = e.relationshipsByName[first[0]], e.attributesByName[first[0]] == nil,
              paths.allSatisfy({ $0.count >= 2 && $0[0] == first[0] && !$0[1].hasPrefix("@") }),
              let dest = model.entitiesByName[r.destination] else { return nil }
        if !r.isToMany {
            guard case .foreignKey(let column) = model.storage(of: r, in: e) else { return nil }
            var inner = c
            inner.left = strip(c.left, first[0])
            inner.right = strip(c.right, first[0])
            // What the comparison says when `r` is nil: every key path read
            // from nil, as the evaluator does (`r.items.@count` is then 0).
            let holdsForNil: Bool
            do { holdsForNil = try KuraPredicate.comparison(c).evaluate(with: .null) } catch { return nil }
            let innerPredicate: KuraPredicate = holdsForNil ? .not(.comparison(inner)) : .comparison(inner)
            guard let t = joined(innerPredicate, dest, model) else { return nil }
            return Joined(joins: [SemiJoin(.foreignKey(column: column), TableQuery(dest.hierarchy.table, where: t.predicate, joins: t.joins), negated: holdsForNil)])
        }
        // A to-many: quantified, the collection on the left, constants on the right.
        guard c.quantifier != .direct, case .keyPath(let k) = c.left, paths.count == 1, let link = link(r, e, model) else { return nil }
        var inner = c
        inner.quantifier = .direct
        inner.left = .keyPath(Array(k.dropFirst()))
        // A second to-many (`ANY courses.students.age`): the evaluator flattens
        // its elements into one collection, so ANY is ANY of ANY, and ALL is
        // ALL of ALL (NONE: no element of any). One such level.
        if k.count >= 3, dest.attributesByName[k[1]] == nil, let r2 = dest.relationshipsByName[k[1]], r2.isToMany {
            guard let dest2 = model.entitiesByName[r2.destination], !reachesToMany(Array(k.dropFirst(2)), dest2, model) else { return nil }
            inner.quantifier = c.quantifier == .all ? .all : .any
        }
        let innerPredicate: KuraPredicate = c.quantifier == .all ? .not(.comparison(inner)) : .comparison(inner)
        guard let t = joined(innerPredicate, dest, model) else { return nil }
        return Joined(joins: [SemiJoin(link, innerQuery(dest, t, model), negated: c.quantifier != .any)])
    }

    /// `r == nil` and `r != nil` for a stored to-one `r`: whether the key
    /// names a row of the destination (or a subentity), as `relatedObject`
    /// reads it (a null, dangling or foreign key is nil).
    private static func nilTest(_ c: KuraComparison, _ e: EntityDescription, _ model: ManagedObjectModel) -> Joined? {
        guard c.quantifier == .direct, c.operator == .equalTo || c.operator == .notEqualTo else { return nil }
        let key: [String]
        switch (c.left, c.right) {
        case (.keyPath(let k), .constant(.null)), (.constant(.null), .keyPath(let k)): key = k
        default: return nil
        }
        guard key.count == 1, e.attributesByName[key[0]] == nil, let r = e.relationshipsByName[key[0]], !r.isToMany,
              case .foreignKey(let column) = model.storage(of: r, in: e), let dest = model.entitiesByName[r.destination] else { return nil }
        return Joined(joins: [SemiJoin(.foreignKey(column: column), innerQuery(dest, Joined(), model), negated: c.operator == .equalTo)])
    }

    /// Whether key path `k` from `e` crosses a to-many relationship.
    private static func reachesToMany(_ k: [String], _ e: EntityDescription, _ model: ManagedObjectModel) -> Bool {
        var current = e
        for key in k {
            guard current.attributesByName[key] == nil, let r = current.relationshipsByName[key] else { return false }
            if r.isToMany { return true }
            guard let next = model.entitiesByName[r.destination] else { return false }
            current = next
        }
        return false
    }

    /// `r.@count op x` and `SUBQUERY(r, $v, P).@count op x`.
    private static func countJoin(_ c: KuraComparison, _ e: EntityDescription, _ model: ManagedObjectModel) -> Joined? {
        guard c.quantifier == .direct else { return nil }
        func counted(_ x: KuraExpression) -> (String, KuraPredicate?)? {
            switch x {
            case .keyPath(let k) where k.count == 2 && k[1] == "@count": return (k[0], nil)
            case .keyPath(let k) where k.count == 3 && ["@sum", "@avg", "@min", "@max"].contains(k[1]): return (k[0], nil)
            case .member(.subquery(.keyPath(let k), let v, let p), let keys) where k.count == 1 && keys == ["@count"]:
                guard let q = boundToElement(p, v) else { return nil }
                return (k[0], q)
            default: return nil
            }
        }
        // `$count`, or the aggregate of `$values` (the attribute's values).
        func counter(_ x: KuraExpression) -> (KuraExpression, String?) {
            guard case .keyPath(let k) = x, k.count == 3 else { return (.variable(SemiJoin.countVariable), nil) }
            return (.member(.variable(SemiJoin.valuesVariable), [k[1]]), k[2])
        }
        let found: (String, KuraPredicate?)
        var having = c
        var valueColumn: String?
        if let x = counted(c.left), keyPaths(c.right) == [] {
            found = x
            (having.left, valueColumn) = counter(c.left)
        } else if let x = counted(c.right), keyPaths(c.left) == [] {
            found = x
            (having.right, valueColumn) = counter(c.right)
        } else {
            return nil
        }
        guard let r = e.relationshipsByName[found.0], r.isToMany, e.attributesByName[found.0] == nil,
              let dest = model.entitiesByName[r.destination], let link = link(r, e, model) else { return nil }
        if let v = valueColumn {
            guard let a = dest.attributesByName[v], a.compositeElements == nil, !a.isTransient else { return nil }
        }
        var inner = Joined()
        if let p = found.1 {
            guard let t = joined(p, dest, model) else { return nil }
            inner = t
        }
        return Joined(joins: [SemiJoin(link, innerQuery(dest, inner, model), having: .comparison(having), valueColumn: valueColumn)])
    }

    /// A subquery's predicate with `$v.k` read as `k` on the element; nil if
    /// it reads anything else (`SELF`, plain key paths: the collection).
    private static func boundToElement(_ p: KuraPredicate, _ v: String) -> KuraPredicate? {
        func expr(_ x: KuraExpression) -> KuraExpression? {
            switch x {
            case .member(.variable(let name), let keys) where name == v: return .keyPath(keys)
            case .constant, .date: return x
            case .aggregate(let xs):
                var out: [KuraExpression] = []
                for y in xs { guard let z = expr(y) else { return nil }; out.append(z) }
                return .aggregate(out)
            default: return nil
            }
        }
        switch p {
        case .truePredicate, .falsePredicate: return p
        case .not(let x): return boundToElement(x, v).map { .not($0) }
        case .and(let xs), .or(let xs):
            var out: [KuraPredicate] = []
            for x in xs { guard let y = boundToElement(x, v) else { return nil }; out.append(y) }
            if case .and = p { return .and(out) }
            return .or(out)
        case .comparison(var c):
            guard let l = expr(c.left), let r = expr(c.right) else { return nil }
            c.left = l
            c.right = r
            return .comparison(c)
        }
    }

    /// How a stored to-many `r` of `e` links to its destination's rows.
    private static func link(_ r: RelationshipDescription, _ e: EntityDescription, _ model: ManagedObjectModel) -> SemiJoin.Link? {
        switch model.storage(of: r, in: e) {
        case .inverseForeignKey(_, let column, _): return .inverseForeignKey(column: column)
        case .joinTable(let table, let forward):
            return .joinTable(table: table, outerColumn: forward ? "source" : "target", innerColumn: forward ? "target" : "source")
        default: return nil
        }
    }

    /// The destination rows of a to-many: its kinds (with subentities) and `t`.
    private static func innerQuery(_ dest: EntityDescription, _ t: Joined, _ model: ManagedObjectModel) -> TableQuery {
        var t = t
        if let kinds = model.entityFilter(dest, includingSubentities: true) {
            var k = Joined(predicate: kinds)
            k.add(Joined(predicate: t.predicate))
            t.predicate = k.predicate
        }
        return TableQuery(dest.hierarchy.table, where: t.predicate, joins: t.joins)
    }

    /// The key paths an expression reads; nil if it reads anything else
    /// (variables, subqueries, indexes, nondeterministic functions).
    static func keyPaths(_ x: KuraExpression) -> [[String]]? {
        switch x {
        case .keyPath(let k): return [k]
        case .constant, .date: return []
        case .aggregate(let xs):
            var out: [[String]] = []
            for y in xs { guard let z = keyPaths(y) else { return nil }; out += z }
            return out
        case .function(let f, let xs):
            guard !f.isNondeterministic else { return nil }
            var out: [[String]] = []
            for y in xs { guard let z = keyPaths(y) else { return nil }; out += z }
            return out
        case .binary(_, let a, let b):
            guard let l = keyPaths(a), let r = keyPaths(b) else { return nil }
            return l + r
        case .unary(_, let a), .cast(let a, _): return keyPaths(a)
        default: return nil
        }
    }

    /// `x` with the first key `r` removed from its key paths.
    private static func strip(_ x: KuraExpression, _ r: String) -> KuraExpression {
        map(x) { k in .keyPath(k.first == r ? Array(k.dropFirst()) : k) }
    }

    private static func map(_ x: KuraExpression, _ f: ([String]) -> KuraExpression) -> KuraExpression {
        switch x {
        case .keyPath(let k): return f(k)
        case .aggregate(let xs): return .aggregate(xs.map { map($0, f) })
        case .function(let fn, let xs): return .function(fn, xs.map { map($0, f) })
        case .binary(let op, let a, let b): return .binary(op, map(a, f), map(b, f))
        case .unary(let op, let a): return .unary(op, map(a, f))
        case .cast(let a, let t): return .cast(map(a, f), t)
        default: return x
        }
    }

    /// A sort key through stored to-one relationships to an attribute
    /// (`record.school.name`), as an engine lookup; nil otherwise.
    static func lookup(_ keyPath: String, _ e: EntityDescription, _ model: ManagedObjectModel) -> ColumnLookup? {
        let keys = keyPath.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard keys.count >= 2 else { return nil }
        var current = e
        var hops: [ColumnLookup.Hop] = []
        for k in keys.dropLast() {
            guard current.attributesByName[k] == nil, let r = current.relationshipsByName[k], !r.isToMany,
                  case .foreignKey(let column) = model.storage(of: r, in: current),
                  let dest = model.entitiesByName[r.destination] else { return nil }
            hops.append(.init(column: column, table: dest.hierarchy.table))
            current = dest
        }
        guard let a = current.attributesByName[keys[keys.count - 1]], a.compositeElements == nil, !a.isTransient else { return nil }
        return ColumnLookup(name: keyPath, hops: hops, column: a.name)
    }
}
