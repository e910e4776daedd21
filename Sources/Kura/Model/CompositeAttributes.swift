// CompositeAttributes: Core Data's composite attributes (iOS 17,
// NSCompositeAttributeDescription; Xcode's `attributeType="Composite"` naming a
// model-level `<compositeAttribute>`): a named group of element attributes
// (AttributeDescription.compositeElements).
//
// Storage (FORMAT.md "Object stores"): no column of its own; each element is
// a column `<attribute>.<element>` of the element's type, at the attribute's
// place among the entity's columns. In memory the attribute's value is one
// engine value: null when every element is null, else a blob holding a record
// (RecordCodec) of the element values in element order, so change tracking,
// undo and conflicts treat the group as one value. The app reads and writes it
// as a `[String: Any]` keyed by element name (absent key = nil element).
// Predicates name an element as `attribute.element` (`home.city == "Oslo"`);
// the fetch runs it in the engine on the element's column.
//
// Invariants (checked by the model): elements are non-empty, uniquely named,
// plain stored attributes of types with one column (not decimal, transformable
// or composite: no nesting); a composite attribute is not transient, indexed,
// derived, or named by a uniqueness constraint or fetch index (index its
// elements' columns instead: not supported yet). Element optionality and
// defaults are kept in the model but not enforced: an element may be nil.

import Foundation

extension AttributeDescription {
    /// The column of element `element` of composite attribute `attribute`.
    static func compositeColumn(_ attribute: String, _ element: String) -> String { attribute + "." + element }

    /// The in-memory value of a composite attribute for a `[String: Any]`
    /// (see the header).
    ///
    /// - Throws: `.typeMismatch` naming the entity, attribute and the key or
    ///   value at fault.
    func compositeStoredValue(_ v: Any, _ elements: [AttributeDescription], entity: String) throws(KuraError) -> Value {
        if let raw = v as? Value, raw.isNull { return .null }
        guard let dict = v as? [String: Any] else {
            throw KuraError(.typeMismatch, "composite attribute \"\(name)\" of entity \"\(entity)\" takes a [String: Any] keyed by its elements (\(elements.map(\.name).joined(separator: ", "))), not \(Swift.type(of: v))")
        }
        for k in dict.keys.sorted() where !elements.contains(where: { $0.name == k }) {
            throw KuraError(.typeMismatch, "composite attribute \"\(name)\" of entity \"\(entity)\" has no element \"\(k)\" (elements: \(elements.map(\.name).joined(separator: ", ")))")
        }
        var values: [Value] = []
        for el in elements {
            do {
                values.append(try el.storedValue(dict[el.name], entity: entity))
            } catch {
                throw KuraError(error.code, "composite attribute \"\(name)\", element \"\(el.name)\": \(error.message)")
            }
        }
        return values.allSatisfy(\.isNull) ? .null : .blob(RecordCodec.encode(values))
    }

    /// The element values of a composite's in-memory value, in element order.
    ///
    /// - Throws: `.corrupt` naming the object and attribute when the value is
    ///   not such a record.
    func compositeElementValues(_ v: Value, _ elements: [AttributeDescription], of object: ManagedObjectID) throws(KuraError) -> [Value] {
        if v.isNull { return [Value](repeating: .null, count: elements.count) }
        func bad(_ why: String) -> KuraError {
            KuraError(.corrupt, "composite attribute \"\(name)\" of \(object) holds \(why), not a record of its \(elements.count) elements")
        }
        guard case .blob(let bytes) = v else { throw bad(v.typeName) }
        let values: [Value]
        do { values = try RecordCodec.decode(bytes) } catch { throw bad("undecodable bytes (\(error.message))") }
        guard values.count == elements.count else { throw bad("\(values.count) values") }
        return values
    }

    /// The Swift value of a composite: a `[String: Any]` of its non-nil elements (nil when all are nil).
    func compositeSwiftValue(_ v: Value, _ elements: [AttributeDescription], of object: ManagedObjectID) throws(KuraError) -> Any? {
        if v.isNull { return nil }
        var out: [String: Any] = [:]
        for (el, x) in zip(elements, try compositeElementValues(v, elements, of: object)) {
            if let s = try el.swiftValue(x, of: object) { out[el.name] = s }
        }
        return out
    }

    /// How the predicate evaluator sees a composite: an object whose keys are its elements.
    func compositeEvaluated(_ v: Value, _ elements: [AttributeDescription], of object: ManagedObjectID) throws(KuraError) -> EvaluatedValue {
        let values = try compositeElementValues(v, elements, of: object)
        return .object(CompositeView(attribute: name, elements: elements, values: values))
    }

    /// Why this composite attribute is malformed in entity `entity`, or nil.
    func compositeModelProblem(entity: String) -> String? {
        guard let elements = compositeElements else { return nil }
        let what = "entity \"\(entity)\": composite attribute \"\(name)\""
        if elements.isEmpty { return "\(what) has no elements" }
        if isTransient || isIndexed || derivationExpression != nil || preservesValueInHistoryOnDeletion {
            return "\(what) cannot be transient, indexed, derived or preserved in the history (its elements are columns)"
        }
        var seen = Set<String>()
        for el in elements {
            guard !el.name.isEmpty, !el.name.hasPrefix("_"), !el.name.contains("."), seen.insert(el.name).inserted else {
                return "\(what) has an element named \"\(el.name)\" (element names are unique, non-empty, without \".\" or a leading \"_\")"
            }
            if el.compositeElements != nil || [.decimal, .transformable].contains(el.type) || el.isTransient || el.derivationExpression != nil {
                return "\(what): element \"\(el.name)\" must be a plain stored attribute, not \(el.compositeElements != nil ? "a composite" : el.isTransient ? "transient" : el.derivationExpression != nil ? "derived" : el.type.rawValue)"
            }
            if let d = el.defaultValue, !el.type.accepts(d) { return "\(what): default of element \"\(el.name)\" is not a \(el.type)" }
        }
        return nil
    }
}

/// A composite attribute's value as the predicate evaluator sees it (`home.city`).
struct CompositeView: PredicateEvaluationContext {
    let attribute: String
    let elements: [AttributeDescription]
    let values: [Value]

    func value(forKey key: String) throws(KuraError) -> EvaluatedValue {
        guard let i = elements.firstIndex(where: { $0.name == key }) else {
            throw KuraError(.notFound, "composite attribute \"\(attribute)\" has no element \"\(key)\" (elements: \(elements.map(\.name).joined(separator: ", ")))")
        }
        return elements[i].type.evaluated(values[i])
    }

    var predicateIdentity: Value? { nil }
}

extension EntityDescription {
    /// The column of key path `k` when it names an element of a composite
    /// attribute of this entity (`["home", "city"]` → `home.city`), else nil.
    func compositeColumn(_ k: [String]) -> String? {
        guard k.count == 2, let elements = attributesByName[k[0]]?.compositeElements, elements.contains(where: { $0.name == k[1] }) else { return nil }
        return AttributeDescription.compositeColumn(k[0], k[1])
    }
}
