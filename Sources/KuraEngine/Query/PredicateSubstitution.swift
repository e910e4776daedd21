// PredicateSubstitution: replaces `$NAME` variables with values (NSPredicate's
// predicateWithSubstitutionVariables:).
//
// Variables bound by an enclosing SUBQUERY are never replaced inside it. Variables
// not in the dictionary stay; the evaluator then takes them from its `variables:`
// argument or throws.

extension KuraPredicate {
    /// A copy with `$NAME` variables replaced: values become constants, `.date` a
    /// date constant, `.list` an aggregate and `.keyPath` a key path.
    ///
    /// - Throws: ``KuraError`` `.invalidArgument` if a variable used as a key
    ///   (`$a.$b`) gets something other than a key path or text, or a key path has
    ///   an empty key.
    public func substituting(_ variables: [String: PredicateArgument]) throws(KuraError) -> KuraPredicate {
        try PredicateSubstitution(variables: variables, bound: []).apply(self)
    }
}

extension KuraExpression {
    /// A copy with `$NAME` variables replaced; see ``KuraPredicate/substituting(_:)``.
    public func substituting(_ variables: [String: PredicateArgument]) throws(KuraError) -> KuraExpression {
        try PredicateSubstitution(variables: variables, bound: []).apply(self)
    }
}

struct PredicateSubstitution {
    let variables: [String: PredicateArgument]
    /// Names bound by enclosing SUBQUERYs.
    let bound: Set<String>

    private func argument(_ name: String) -> PredicateArgument? {
        bound.contains(name) ? nil : variables[name]
    }

    func apply(_ p: KuraPredicate) throws(KuraError) -> KuraPredicate {
        switch p {
        case .truePredicate, .falsePredicate: return p
        case .comparison(var c):
            c.left = try apply(c.left)
            c.right = try apply(c.right)
            return .comparison(c)
        case .and(let ps):
            var out: [KuraPredicate] = []
            for q in ps { out.append(try apply(q)) }
            return .and(out)
        case .or(let ps):
            var out: [KuraPredicate] = []
            for q in ps { out.append(try apply(q)) }
            return .or(out)
        case .not(let q):
            return .not(try apply(q))
        }
    }

    func apply(_ e: KuraExpression) throws(KuraError) -> KuraExpression {
        switch e {
        case .keyPath, .constant, .date:
            return e
        case .variable(let name):
            guard let a = argument(name) else { return e }
            return try PredicateLexer.expression(for: a, placeholder: "$" + name, offset: nil)
        case .member(let base, let keys):
            return try apply(base).appending(keys)
        case .variableKeyPath(let base, let name):
            let newBase = try apply(base)
            guard let a = argument(name) else { return .variableKeyPath(newBase, variable: name) }
            return newBase.appending(try PredicateLexer.keys(for: a, placeholder: "$" + name, offset: nil))
        case .aggregate(let items):
            var out: [KuraExpression] = []
            for x in items { out.append(try apply(x)) }
            return .aggregate(out)
        case .index(let base, let index):
            if case .expression(let x) = index {
                return .index(try apply(base), .expression(try apply(x)))
            }
            return .index(try apply(base), index)
        case .function(let f, let args):
            var out: [KuraExpression] = []
            for x in args { out.append(try apply(x)) }
            return .function(f, out)
        case .binary(let op, let l, let r):
            return .binary(op, try apply(l), try apply(r))
        case .unary(let op, let x):
            return .unary(op, try apply(x))
        case .subquery(let collection, let variable, let predicate):
            let inner = PredicateSubstitution(variables: variables, bound: bound.union([variable]))
            return .subquery(collection: try apply(collection), variable: variable, predicate: try inner.apply(predicate))
        case .cast(let x, let type):
            return .cast(try apply(x), type)
        }
    }
}
