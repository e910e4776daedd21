// FetchedPropertyDescription: a fetched property (Core Data's
// NSFetchedPropertyDescription; Xcode's `<fetchedProperty>`): a read-only
// property whose value is the result of a fetch request, evaluated against the
// object it is read from. In the request's predicate `$FETCH_SOURCE` is that
// object and `$FETCHED_PROPERTY` the property's name (Core Data's variables);
// `$FETCH_SOURCE.key.path` (attributes, through to-one relationships) is
// replaced by the value the object has there before the fetch runs.
//
// Reading one (`value(forKey:)`, the subscript) runs the fetch in the object's
// context each time and returns `[ManagedObject]` (Core Data caches the array
// until the object is refreshed; Kura's answer is always current, pending
// changes included as the template says). Setting one is `.invalidArgument`.
// It has no column. Subentities inherit fetched properties.
//
// Invariants (ModelError at model init): the name is a valid property name not
// used by an attribute or relationship of the entity; the fetch's entity exists.

/// A read-only property whose value is a fetch's result. Immutable.
public struct FetchedPropertyDescription: Sendable {
    public let name: String
    /// The fetch (its `name` is the request's own name in the model file).
    public let fetchRequest: FetchTemplate
    /// Application data (Core Data's `userInfo`).
    public let userInfo: [String: String]

    public init(_ name: String, fetchRequest: FetchTemplate, userInfo: [String: String] = [:]) {
        self.name = name
        self.fetchRequest = fetchRequest
        self.userInfo = userInfo
    }
}

extension ManagedObject {
    /// The value of a fetched property: the objects its request finds with
    /// `$FETCH_SOURCE` = this object.
    ///
    /// - Throws: the fetch's errors; `.misuse` outside a context.
    func fetchedValue(_ f: FetchedPropertyDescription) throws(KuraError) -> [ManagedObject] {
        let ctx = try context()
        let t = f.fetchRequest
        var request = FetchRequest<ManagedObject>(entityName: t.entityName, sortDescriptors: t.sortDescriptors)
        if let p = t.predicate {
            do {
                request.predicate = try resolvingSource(p).substituting(["FETCH_SOURCE": .object(self), "FETCHED_PROPERTY": .value(.text(f.name))])
            } catch {
                throw KuraError(.invalidArgument, "fetched property \"\(f.name)\" of entity \"\(entity.name)\": \(error.message)")
            }
        }
        request.fetchLimit = t.fetchLimit
        request.includesSubentities = t.includesSubentities
        request.includesPendingChanges = t.includesPendingChanges
        return try ctx.fetch(request)
    }

    /// `p` with every `$FETCH_SOURCE.path` replaced by this object's value there.
    private func resolvingSource(_ p: KuraPredicate) throws(KuraError) -> KuraPredicate {
        switch p {
        case .truePredicate, .falsePredicate: return p
        case .not(let x): return .not(try resolvingSource(x))
        case .and(let xs): return .and(try xs.map { x throws(KuraError) in try resolvingSource(x) })
        case .or(let xs): return .or(try xs.map { x throws(KuraError) in try resolvingSource(x) })
        case .comparison(var c):
            c.left = try resolvingSource(c.left)
            c.right = try resolvingSource(c.right)
            return .comparison(c)
        }
    }

    private func resolvingSource(_ x: KuraExpression) throws(KuraError) -> KuraExpression {
        func all(_ xs: [KuraExpression]) throws(KuraError) -> [KuraExpression] { try xs.map { y throws(KuraError) in try resolvingSource(y) } }
        switch x {
        case .member(.variable("FETCH_SOURCE"), let path): return try sourceValue(path)
        case .member(let base, let path): return .member(try resolvingSource(base), path)
        case .aggregate(let xs): return .aggregate(try all(xs))
        case .function(let f, let xs): return .function(f, try all(xs))
        case .binary(let op, let a, let b): return .binary(op, try resolvingSource(a), try resolvingSource(b))
        case .unary(let op, let a): return .unary(op, try resolvingSource(a))
        case .cast(let a, let t): return .cast(try resolvingSource(a), t)
        case .index(let a, let i): return .index(try resolvingSource(a), i)
        case .subquery(let c, let v, let q): return .subquery(collection: try resolvingSource(c), variable: v, predicate: try resolvingSource(q))
        default: return x
        }
    }

    /// The constant for `$FETCH_SOURCE.path`: an attribute's value (a date as a
    /// date), or a to-one target's object ID text (null when none).
    ///
    /// - Throws: `.notFound` naming the path for a key that is not an
    ///   attribute or to-one relationship.
    private func sourceValue(_ path: [String]) throws(KuraError) -> KuraExpression {
        var object: ManagedObject? = self
        for (i, k) in path.enumerated() {
            guard let o = object else { return .constant(.null) }
            let last = i == path.count - 1
            if last, let a = o.entity.attributesByName[k] {
                try o.loadIfFault()
                let v = a.type.engineValue(o.storedValue(named: k) ?? .null)
                if a.type == .date, case .double(let d) = v { return .date(secondsSinceReferenceDate: d) }
                return .constant(v)
            }
            guard let r = o.entity.relationshipsByName[k], !r.isToMany else {
                throw KuraError(.notFound, "$FETCH_SOURCE.\(path.joined(separator: ".")): entity \"\(o.entity.name)\" has no attribute or to-one relationship \"\(k)\"")
            }
            object = try o.context().relatedObject(o, r)
            if last { return .constant(object.map { .text($0.objectID.uriRepresentation) } ?? .null) }
        }
        return .constant(.null)
    }
}
