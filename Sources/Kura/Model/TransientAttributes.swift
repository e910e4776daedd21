// TransientAttributes: what a fetch request may not do with transient
// attributes (AttributeDescription.isTransient). Core Data cannot fetch by a
// transient property either (the SQL store has no column for it); Kura refuses
// such a request with an error instead of evaluating it in memory against only
// the objects already registered, which would silently miss stored objects.
// The check walks every key path of the predicate (through to-one and to-many
// relationships, so `owner.isDriving` is caught too) and every sort key; a key
// path through a transient relationship is refused the same way.

extension ManagedObject {
    /// Runs `body` (which reloads the object's values from a row it just wrote,
    /// merged or fetched again) and puts the transient values back, as current
    /// and saved values: a save, a merge or a fetch meeting a clean object does
    /// not reset transients, only a (re)load does (a fault firing, `refresh`
    /// without merging, `rollback` to the last load or save).
    func keepingTransients(_ body: () -> Void) {
        let ordinals = entity.transientOrdinals
        if ordinals.isEmpty { return body() }
        let kept = ordinals.map { ($0, values[ordinal: $0] ?? .null) }
        body()
        for (i, v) in kept {
            values[ordinal: i] = v
            savedValues?[ordinal: i] = v
        }
    }
}

extension EntityDescription {
    /// The error for a fetch of this entity whose predicate or sort keys read a
    /// transient attribute, or nil.
    func transientUse(predicate: KuraPredicate?, sort: [SortKey], model: ManagedObjectModel) -> KuraError? {
        func check(_ path: [String]) -> KuraError? {
            var entity: EntityDescription? = self
            for k in path {
                guard let e = entity else { return nil }
                if let a = e.attributesByName[k] {
                    guard a.isTransient else { return nil }
                    return KuraError(.invalidArgument, "fetch of entity \"\(name)\": \"\(path.joined(separator: "."))\" reads transient attribute \"\(k)\" of entity \"\(e.name)\", which is not stored; fetch requests cannot filter or sort by it (as in Core Data): filter or sort the fetched objects in memory")
                }
                if let r = e.relationshipsByName[k], r.isTransient {
                    return KuraError(.invalidArgument, "fetch of entity \"\(name)\": \"\(path.joined(separator: "."))\" goes through transient relationship \"\(k)\" of entity \"\(e.name)\", which is not stored; fetch requests cannot filter or sort by it (as in Core Data)")
                }
                entity = e.relationshipsByName[k].flatMap { model.entitiesByName[$0.destination] }
            }
            return nil
        }
        func walk(_ p: KuraPredicate) -> KuraError? {
            switch p {
            case .truePredicate, .falsePredicate: return nil
            case .not(let x): return walk(x)
            case .and(let xs), .or(let xs):
                for x in xs { if let e = walk(x) { return e } }
                return nil
            case .comparison(let c): return walk(c.left) ?? walk(c.right)
            }
        }
        func walk(_ x: KuraExpression) -> KuraError? {
            switch x {
            case .keyPath(let k): return check(k)
            case .constant, .date, .variable, .variableKeyPath: return nil
            case .member(let base, let path):
                if case .keyPath(let k) = base { return check(k + path) }
                return walk(base)
            case .aggregate(let xs), .function(_, let xs):
                for y in xs { if let e = walk(y) { return e } }
                return nil
            case .index(let a, _), .unary(_, let a), .cast(let a, _): return walk(a)
            case .binary(_, let a, let b): return walk(a) ?? walk(b)
            case .subquery(let collection, _, _): return walk(collection)
            }
        }
        for s in sort { if let e = check(s.column.split(separator: ".").map(String.init)) { return e } }
        return predicate.flatMap { walk($0) }
    }
}
