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
