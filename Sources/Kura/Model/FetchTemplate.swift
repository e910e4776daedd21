// FetchTemplate: a fetch request stored in the model (Core Data's fetch request
// templates; Xcode's top-level `<fetchRequest>`), made into a `FetchRequest`
// with `$VARIABLE` substitution by `ManagedObjectModel.fetchRequest(template:
// substitutionVariables:)` (Core Data's `fetchRequestFromTemplate(withName:
// substitutionVariables:)`).
//
// Invariants (ModelError at model init): names are unique and non-empty; the
// entity exists; a limit or batch size is not negative.
// At use: an unknown template name is `.notFound` listing the templates; a
// variable of the predicate left without a value is `.invalidArgument` naming
// the template and the variable (Core Data raises for it too).

/// A named fetch request kept in the model. Immutable.
public struct FetchTemplate: Sendable {
    public let name: String
    public let entityName: String
    /// The predicate, `$VARIABLE`s included; nil matches every object.
    public let predicate: KuraPredicate?
    public let sortDescriptors: [SortKey]
    public let fetchLimit: Int?
    public let fetchBatchSize: Int
    public let includesSubentities: Bool
    public let includesPendingChanges: Bool
    public let resultType: FetchResultType

    public init(_ name: String, entity: String, predicate: KuraPredicate? = nil, sortDescriptors: [SortKey] = [], fetchLimit: Int? = nil,
                fetchBatchSize: Int = 0, includesSubentities: Bool = true, includesPendingChanges: Bool = true,
                resultType: FetchResultType = .managedObjects) {
        self.name = name
        self.entityName = entity
        self.predicate = predicate
        self.sortDescriptors = sortDescriptors
        self.fetchLimit = fetchLimit
        self.fetchBatchSize = fetchBatchSize
        self.includesSubentities = includesSubentities
        self.includesPendingChanges = includesPendingChanges
        self.resultType = resultType
    }
}

extension ManagedObjectModel {
    /// Checks the templates against the entities (see the header).
    static func validateTemplates(_ templates: [FetchTemplate], entities: [String: EntityDescription]) throws(ModelError) -> [String: FetchTemplate] {
        var out: [String: FetchTemplate] = [:]
        for t in templates {
            guard !t.name.isEmpty else { throw ModelError(message: "a fetch request template has no name") }
            guard out[t.name] == nil else { throw ModelError(message: "two fetch request templates are named \"\(t.name)\"") }
            guard entities[t.entityName] != nil else {
                throw ModelError(message: "fetch request template \"\(t.name)\" fetches entity \"\(t.entityName)\", which the model does not have")
            }
            guard (t.fetchLimit ?? 0) >= 0, t.fetchBatchSize >= 0 else {
                throw ModelError(message: "fetch request template \"\(t.name)\" has a negative limit or batch size")
            }
            out[t.name] = t
        }
        return out
    }

    /// A fetch request made from the template named `name`, its predicate's
    /// `$VARIABLE`s replaced by `substitutionVariables` (keys without `$`).
    ///
    /// - Throws: `.notFound` for an unknown template (listing the model's);
    ///   `.invalidArgument` naming the template and variable for a variable
    ///   without a value, or a value that cannot stand where the variable is.
    public func fetchRequest(template name: String, substitutionVariables: [String: PredicateArgument] = [:]) throws(KuraError) -> FetchRequest<ManagedObject> {
        guard let t = fetchTemplates[name] else {
            throw KuraError(.notFound, "the model has no fetch request template \"\(name)\" (templates: \(fetchTemplates.keys.sorted().joined(separator: ", ")))")
        }
        var predicate = t.predicate
        if let p = predicate {
            let substituted: KuraPredicate
            do { substituted = try p.substituting(substitutionVariables) } catch {
                throw KuraError(.invalidArgument, "fetch request template \"\(name)\": \(error.message)")
            }
            if let missing = Self.freeVariables(substituted).first {
                throw KuraError(.invalidArgument, "fetch request template \"\(name)\" needs a value for $\(missing) (substitution variables given: \(substitutionVariables.keys.sorted().joined(separator: ", ")))")
            }
            predicate = substituted
        }
        var r = FetchRequest<ManagedObject>(entityName: t.entityName, predicate: predicate, sortDescriptors: t.sortDescriptors)
        r.fetchLimit = t.fetchLimit
        r.fetchBatchSize = t.fetchBatchSize
        r.includesSubentities = t.includesSubentities
        r.includesPendingChanges = t.includesPendingChanges
        r.resultType = t.resultType
        return r
    }

    /// Variables outside any SUBQUERY (those inside may be its own).
    static func freeVariables(_ p: KuraPredicate) -> [String] {
        switch p {
        case .truePredicate, .falsePredicate: return []
        case .not(let x): return freeVariables(x)
        case .and(let xs), .or(let xs): return xs.flatMap { freeVariables($0) }
        case .comparison(let c): return freeVariables(c.left) + freeVariables(c.right)
        }
    }

    static func freeVariables(_ x: KuraExpression) -> [String] {
        switch x {
        case .variable(let v): return [v]
        case .variableKeyPath(let base, let v): return [v] + freeVariables(base)
        case .keyPath, .constant, .date: return []
        case .member(let base, _), .index(let base, _), .unary(_, let base), .cast(let base, _): return freeVariables(base)
        case .aggregate(let xs), .function(_, let xs): return xs.flatMap { freeVariables($0) }
        case .binary(_, let a, let b): return freeVariables(a) + freeVariables(b)
        case .subquery(let collection, _, _): return freeVariables(collection)
        }
    }
}
