// DerivedAttributes: attributes whose value a save computes from an expression
// (AttributeDescription.derivationExpression; Core Data's
// NSDerivedAttributeDescription). The value is stored in the attribute's
// column like any other, so fetches filter and sort by it.
//
// Expressions Kura evaluates (the forms Apple documents for derived attributes
// and Xcode writes into `derivationExpression`):
//
//     | expression                      | value                                 | attribute type  |
//     |---------------------------------|---------------------------------------|-----------------|
//     | `name`, `owner.name`            | an attribute of the object or of an   | the source's    |
//     |                                 | object reached through to-ones        | column type     |
//     | `items.@count`                  | number of objects of a to-many        | integer         |
//     | `items.@sum.price`              | sum of an attribute over a to-many    | integer, double |
//     | `now()`                         | the save's date                       | date            |
//     | `lowercase:(k)`, `uppercase:(k)`| a string key path's value recased     | string          |
//     | `canonical:(k)`                 | lowercased, diacritics removed (Core  | string          |
//     |                                 | Data's case/diacritic-insensitive form)|                |
//
// Anything else is a `ModelError` naming the entity, the attribute and the
// expression when the model is built (an Xcode model reports it through
// `unsupportedFeatures()` with its line). The model checks every key path and
// the result type against the attribute's type.
//
// When: at each save, after the will-save hooks, for every inserted or updated
// object (as Core Data: an object that does not change is not recomputed, even
// if what it derives from changed). A value the app set is overwritten. A
// nil anywhere on a key path gives nil; an empty to-many sums to 0.

import Foundation

/// A parsed derivation expression (see the header).
enum DerivedExpression: Equatable, Sendable {
    case keyPath([String])
    case count([String])
    case sum([String], String)
    case now
    case lowercase([String])
    case uppercase([String])
    case canonical([String])

    /// Parses `text`; nil when it is not one of the forms Kura evaluates.
    static func parse(_ text: String) -> DerivedExpression? {
        let s = text.trimmingCharacters(in: .whitespaces)
        if s == "now()" { return .now }
        for (prefix, make) in [("lowercase:(", DerivedExpression.lowercase), ("uppercase:(", DerivedExpression.uppercase),
                               ("canonical:(", DerivedExpression.canonical)] where s.hasPrefix(prefix) && s.hasSuffix(")") {
            let inner = String(s.dropFirst(prefix.count).dropLast())
            guard let path = keyPath(inner) else { return nil }
            return make(path)
        }
        let parts = s.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        if let at = parts.firstIndex(where: { $0.hasPrefix("@") }) {
            guard at > 0, let base = keyPath(parts[..<at].joined(separator: ".")) else { return nil }
            switch parts[at] {
            case "@count" where at == parts.count - 1: return .count(base)
            case "@sum" where at == parts.count - 2 && isName(parts[at + 1]): return .sum(base, parts[at + 1])
            default: return nil
            }
        }
        return keyPath(s).map(DerivedExpression.keyPath)
    }

    private static func isName(_ s: String) -> Bool {
        guard let f = s.first, f.isLetter || f == "_" else { return false }
        return s.allSatisfy { $0.isLetter || $0.isNumber || $0 == "_" }
    }

    private static func keyPath(_ s: String) -> [String]? {
        let parts = s.trimmingCharacters(in: .whitespaces).split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        return parts.allSatisfy(isName) ? parts : nil
    }
}

extension ManagedObjectModel {
    /// Checks the derived attributes of `e`: each expression parses, its key
    /// paths exist (to-ones, then an attribute; a to-many only before an
    /// aggregate) and its result fits the attribute's type.
    func validateDerivedAttributes(_ e: EntityDescription) throws(ModelError) {
        for a in e.declaredAttributes {
            guard let text = a.derivationExpression else { continue }
            func fail(_ why: String) -> ModelError {
                ModelError(message: "entity \"\(e.name)\": derived attribute \"\(a.name)\" has derivationExpression \"\(text)\": \(why)")
            }
            guard !a.isTransient else { throw fail("a derived attribute is stored; it cannot be transient") }
            guard let x = DerivedExpression.parse(text) else {
                throw fail("Kura evaluates key paths, <to-many>.@count, <to-many>.@sum.<attribute>, now(), lowercase:(), uppercase:() and canonical:()")
            }
            /// The entity reached through the to-ones of `path` (all of it).
            func through(_ path: [String]) throws(ModelError) -> EntityDescription {
                var current = e
                for k in path {
                    guard let r = current.relationshipsByName[k], !r.isToMany, let next = entitiesByName[r.destination] else {
                        throw fail("\"\(k)\" is not a to-one relationship of entity \"\(current.name)\"")
                    }
                    current = next
                }
                return current
            }
            func attribute(_ path: [String]) throws(ModelError) -> AttributeDescription {
                let owner = try through(Array(path.dropLast()))
                // `path` is never empty: DerivedExpression.parse makes none.
                guard let last = path.last, let source = owner.attributesByName[last], !source.isTransient, source.compositeElements == nil else {
                    throw fail("\"\(path.joined(separator: "."))\" does not name a stored attribute")
                }
                return source
            }
            func toMany(_ path: [String]) throws(ModelError) -> EntityDescription {
                let owner = try through(Array(path.dropLast()))
                guard let last = path.last, let r = owner.relationshipsByName[last], r.isToMany, let target = entitiesByName[r.destination] else {
                    throw fail("\"\(path.joined(separator: "."))\" does not name a to-many relationship")
                }
                return target
            }
            let integers: [AttributeType] = [.int16, .int32, .int64]
            switch x {
            case .keyPath(let path):
                let source = try attribute(path)
                guard source.type.columnType == a.type.columnType, source.type != .transformable else {
                    throw fail("it reads a \(source.type) attribute into a \(a.type) one")
                }
            case .count(let path):
                _ = try toMany(path)
                guard integers.contains(a.type) else { throw fail("@count needs an integer attribute, not \(a.type)") }
            case .sum(let path, let name):
                let target = try toMany(path)
                guard let source = target.attributesByName[name], !source.isTransient, source.compositeElements == nil, (integers + [.double, .float, .decimal]).contains(source.type) else {
                    throw fail("\"\(name)\" is not a stored numeric attribute of entity \"\(target.name)\"")
                }
                guard integers.contains(a.type) || [.double, .float].contains(a.type) else { throw fail("@sum needs a number attribute, not \(a.type)") }
            case .now:
                guard a.type == .date else { throw fail("now() needs a date attribute, not \(a.type)") }
            case .lowercase(let path), .uppercase(let path), .canonical(let path):
                guard try attribute(path).type == .string, a.type == .string else { throw fail("it needs string attributes") }
            }
        }
    }
}

extension ManagedObjectContext {
    /// Computes the derived attributes of every inserted or updated object
    /// (see the header); called by `save` before validation.
    func computeDerivedAttributes() throws(KuraError) {
        // Most models derive nothing: then no object needs looking at.
        guard model.entities.contains(where: { e in e.attributes.contains { $0.derivationExpression != nil } }) else { return }
        let objects = Self.joined(liveInserted, updatedObjects)
        guard objects.contains(where: { o in o.entity.attributes.contains { $0.derivationExpression != nil } }) else { return }
        let now = Date()
        for o in objects {
            for a in o.entity.attributes {
                guard let text = a.derivationExpression else { continue }
                guard let x = DerivedExpression.parse(text) else {
                    // The model's validation parsed every expression.
                    throw KuraError(.invalidArgument, "entity \"\(o.entity.name)\": derived attribute \"\(a.name)\" has derivationExpression \"\(text)\", which Kura cannot evaluate (a Kura bug: the model was checked)")
                }
                o.setStoredValue(try derivedValue(x, of: o, into: a, now: now), named: a.name)
            }
        }
    }

    private func derivedValue(_ x: DerivedExpression, of o: ManagedObject, into a: AttributeDescription, now: Date) throws(KuraError) -> Value {
        /// The object at the end of the to-ones of `path` (nil on a nil).
        func follow(_ path: ArraySlice<String>) throws(KuraError) -> ManagedObject? {
            var current = o
            for k in path {
                guard let r = current.entity.relationshipsByName[k], let next = try relatedObject(current, r) else { return nil }
                current = next
            }
            return current
        }
        func value(_ path: [String]) throws(KuraError) -> Value {
            guard let owner = try follow(path.dropLast()), let last = path.last else { return .null }
            try owner.loadIfFault()
            return owner.storedValue(named: last) ?? .null
        }
        func members(_ path: [String]) throws(KuraError) -> [ManagedObject] {
            guard let owner = try follow(path.dropLast()), let last = path.last, let r = owner.entity.relationshipsByName[last] else { return [] }
            return try relatedObjects(owner, r).filter { !$0.isDeleted }
        }
        func text(_ path: [String], _ f: (String) -> String) throws(KuraError) -> Value {
            if case .text(let s) = try value(path) { return .text(f(s)) }
            return .null
        }
        switch x {
        case .keyPath(let path): return try value(path)
        case .count(let path): return .integer(Int64(try members(path).count))
        case .sum(let path, let name):
            var ints: Int64 = 0, doubles = 0.0, overflow = false, allIntegers = true
            for m in try members(path) {
                try m.loadIfFault()
                // The column value (a decimal's double, not its exact text).
                let v = m.entity.attributesByName[name].map { $0.type.engineValue(m.storedValue(named: name) ?? .null) } ?? .null
                switch v {
                case .integer(let i):
                    let (sum, o) = ints.addingReportingOverflow(i)
                    ints = sum
                    overflow = overflow || o
                    doubles += Double(i)
                case .double(let d):
                    allIntegers = false
                    doubles += d
                default: break
                }
            }
            guard [.int16, .int32, .int64].contains(a.type) else { return .double(doubles) }
            if allIntegers && !overflow { return .integer(ints) }
            // A double or decimal sum into an integer attribute: truncated toward zero.
            guard !overflow || !allIntegers, let i = Int64(exactly: doubles.rounded(.towardZero)) else {
                throw KuraError(.validation, "\(o.objectID): derived attribute \"\(a.name)\" (\(a.derivationExpression ?? "")) overflows Int64")
            }
            return .integer(i)
        case .now: return .double(now.timeIntervalSinceReferenceDate)
        case .lowercase(let path): return try text(path) { $0.lowercased() }
        case .uppercase(let path): return try text(path) { $0.uppercased() }
        case .canonical(let path):
            return try text(path) { $0.folding(options: [.caseInsensitive, .diacriticInsensitive], locale: Locale(identifier: "en_US_POSIX")) }
        }
    }
}
