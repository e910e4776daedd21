// XcodeModelDocument+Load: XcodeModelDocument → ManagedObjectModel.
//
// Three steps, each of which reports all it finds or names the line:
//   1. `unsupportedFeatures()` lists every part of the file Kura's model cannot
//      represent yet (table below); if any, `makeModel` throws one
//      `KuraError.unsupported` listing them all, each with file, line, entity and
//      property.
//   2. Consistency checks with lines (unknown destination or inverse, an inverse
//      that does not point back, constraints and indexes naming no attribute,
//      duplicate names): `KuraError.invalidArgument`.
//   3. Translation (defaults parsed per type: `.syntax` naming the line when a
//      default does not parse), then `ManagedObjectModel`'s own validation
//      (a `ModelError` becomes `.invalidArgument` naming the file).
//
// How each part of the file lands in the model:
//
//     | Xcode                                | Kura                                         |
//     |--------------------------------------|----------------------------------------------|
//     | entity                               | EntityDescription (userInfo, elementID as    |
//     |                                      | renamingIdentifier, versionHashModifier,     |
//     |                                      | representedClassName kept)                   |
//     | parentEntity, isAbstract             | parent, abstract (EntityHierarchy.swift);    |
//     |                                      | constraints and indexes may name inherited   |
//     |                                      | attributes                                   |
//     | representedClassName / entity name   | class from the caller's registry, else       |
//     |                                      | ManagedObject (see makeModel)                |
//     | Integer 16/32/64, Double, Float,     | int16/int32/int64, double, float, decimal,   |
//     | Decimal, String, Boolean, Date,      | string, bool, date, data, uuid, url          |
//     | Binary, UUID, URI                    | (Decimal stored exactly: DecimalStorage)     |
//     | transient attribute                  | isTransient (no column; in memory only)      |
//     | Undefined transient attribute (no    | transient transformable (property-list       |
//     | attributeType)                       | values, in memory only)                      |
//     | transient relationship               | isTransient (in memory, both sides in step)  |
//     | derived, derivationExpression        | derivationExpression (DerivedAttributes.swift|
//     |                                      | computes it at save)                         |
//     | Composite + <compositeAttribute>     | compositeElements (CompositeAttributes.swift)|
//     | preserveAfterDeletion                | preservesValueInHistoryOnDeletion (history   |
//     |                                      | tombstone of a delete)                       |
//     | allowsExternalBinaryDataStorage      | allowsExternalBinaryDataStorage (carried)    |
//     | spotlightIndexingEnabled             | isIndexedBySpotlight (kept, no effect)       |
//     | minValueString, maxValueString,      | validation (AttributeValidation, checked at  |
//     | min/maxDateTimeInterval, regular-    | save); a bound that is not a number is       |
//     | ExpressionString                     | `.syntax` with the line                      |
//     | Transformable, valueTransformerName, | transformable, valueTransformerName (looked  |
//     | customClassName                      | up in AttributeTransformers when used),      |
//     |                                      | customClassName (kept)                       |
//     | optional, defaultValueString,        | isOptional, defaultValue (parsed per type)   |
//     | defaultDateTimeInterval              |                                              |
//     | indexed="YES", single-element        | isIndexed                                    |
//     | fetchIndex or compoundIndex          |                                              |
//     | fetchIndex with several elements     | FetchIndexDescription (name, element orders) |
//     | compoundIndex with several indexes   | FetchIndexDescription "compoundIndex<N>"     |
//     | uniquenessConstraint                 | uniquenessConstraints                        |
//     | relationship                         | RelationshipDescription (inverse, toMany,    |
//     |                                      | ordered, deletionRule, optional, counts,     |
//     |                                      | userInfo, elementID, versionHashModifier);   |
//     |                                      | ordered many-to-many and ordered without     |
//     |                                      | inverse use join-table positions; an inverse |
//     |                                      | that names another one back is kept from its |
//     |                                      | own side (ManagedObjectModel "Inverses")     |
//     | configuration                        | ManagedObjectModel.configurations            |
//     | fetchedProperty                      | FetchedPropertyDescription (its request as a |
//     |                                      | FetchTemplate; $FETCH_SOURCE substituted)    |
//     | fetchRequest (top level)             | FetchTemplate (predicate with $VARIABLEs,    |
//     |                                      | limit, batch size, subentities, pending      |
//     |                                      | changes, result type 0/1/2/4)                |
//
// Read and deliberately not used (they carry nothing Kura needs):
//
//     | Xcode                                | why                                          |
//     |--------------------------------------|----------------------------------------------|
//     | syncable                             | Xcode ≤ 9 wrote YES on everything for the    |
//     |                                      | retired Sync Services; Core Data ignores it  |
//     | usesScalarValueType,                 | code generation only (property types of      |
//     | codeGenerationType                   | generated classes)                           |
//     | storedInTruthFile                    | Spotlight external-record storage hint       |
//     | valueTransformerName/customClassName | left behind by Xcode when a Transformable    |
//     | on a non-Transformable attribute     | changed type; Core Data ignores them         |
//     | allowsCloudEncryption                | CloudKit mirroring only                      |
//     | single-element fetchIndex name,      | Kura names its indexes; a B-tree index       |
//     | element order                        | serves both orders                           |
//     | relationship indexed                 | to-one foreign keys are always indexed; on   |
//     |                                      | a to-many Core Data ignores it               |
//     | minCount/maxCount of a to-one,       | Core Data ignores them on a to-one           |
//     | maxCount 0 / minCount 0 of a to-many | (`optional` decides); 0 means "no limit"     |
//     | fetchRequest includePropertyValues,  | fetch hints; Kura's fetches choose for       |
//     | returnObjectsAsFaults                | themselves                                   |
//     | model attributes (type, versions,    | file metadata; kept in XcodeModelDocument    |
//     | tools, language)                     |                                              |
//
// Not representable yet (each is an `UnsupportedFeature.Kind`): ObjectID
// attributes, stored Undefined attributes (Core Data refuses them too), a
// Composite naming no composite type or holding elements that are not plain
// one-column attributes (nested composites, decimals, transformables), derived
// attributes whose expression Kura does not evaluate (DerivedAttributes.swift
// lists what it does), defaults Kura cannot parse for a type (Binary,
// Transformable, a Date given as a string), expression / R-Tree indexes,
// indexes on to-many relationships.

import Foundation

extension XcodeModelDocument {
    /// A part of an Xcode model that Kura's model cannot represent yet.
    public struct UnsupportedFeature: Sendable, Equatable, CustomStringConvertible {
        public enum Kind: String, Sendable, CaseIterable {
            /// No longer reported: Transformable attributes load (kept for source compatibility).
            case transformableAttribute = "Transformable attribute"
            case objectIDAttribute = "ObjectID attribute"
            /// Reported for a stored Undefined attribute only (a transient one loads).
            case undefinedAttribute = "Undefined-type attribute"
            case compositeAttribute = "Composite attribute"
            case derivedAttribute = "derived attribute"
            /// No longer reported: transient relationships and attributes load (kept for source compatibility).
            case transientProperty = "transient property"
            /// No longer reported: value rules load as `AttributeValidation` (kept for source compatibility).
            case valueValidation = "value validation (minimum, maximum or regular expression)"
            /// No longer reported: Spotlight indexing hints load (kept, no effect) (kept for source compatibility).
            case spotlightIndexing = "Spotlight indexing"
            /// No longer reported: preserveAfterDeletion loads (history tombstones) (kept for source compatibility).
            case preserveAfterDeletion = "preserveAfterDeletion (history tombstone)"
            case defaultValue = "default value of this type"
            /// No longer reported: ordered many-to-many relationships load (kept for source compatibility).
            case orderedManyToMany = "ordered many-to-many relationship"
            /// No longer reported: ordered relationships without inverse load (kept for source compatibility).
            case orderedWithoutInverse = "ordered to-many relationship without a to-one inverse"
            /// No longer reported: non-reciprocal inverses load (kept from their own side) (kept for source compatibility).
            case nonReciprocalInverse = "inverse relationship that does not name this one back"
            /// No longer reported: fetched properties load (kept for source compatibility).
            case fetchedProperty = "fetched property"
            /// No longer reported: templates load as `FetchTemplate`s (kept for source compatibility).
            case fetchRequestTemplate = "fetch request template"
            /// No longer reported: compound indexes load as `FetchIndexDescription`s (kept for source compatibility).
            case compoundIndex = "compound index"
            case expressionIndex = "index on an expression"
            case rtreeIndex = "R-Tree index"
            case toManyIndex = "index on a to-many relationship"
            case compositeType = "composite attribute type"
        }
        public let kind: Kind
        /// The model file.
        public let file: String
        public let line: Int
        public let entity: String?
        public let property: String?
        /// What in the file shows the feature (e.g. `attributeType="Transformable"`).
        public let detail: String

        public var description: String {
            var s = "line \(line)"
            if let entity { s += ", entity \"\(entity)\"" }
            if let property { s += ", property \"\(property)\"" }
            return s + ": \(kind.rawValue) (\(detail))"
        }
    }

    /// Every part of the file that Kura's model cannot represent yet, in file order.
    public func unsupportedFeatures() -> [UnsupportedFeature] {
        var out: [UnsupportedFeature] = []
        func add(_ kind: UnsupportedFeature.Kind, _ line: Int, _ entity: String?, _ property: String?, _ detail: String) {
            out.append(UnsupportedFeature(kind: kind, file: path, line: line, entity: entity, property: property, detail: detail))
        }
        for e in entities {
            for a in e.attributes {
                func here(_ kind: UnsupportedFeature.Kind, _ detail: String) { add(kind, a.line, e.name, a.name, detail) }
                switch a.kind {
                case .objectID: here(.objectIDAttribute, "attributeType=\"ObjectID\"")
                case .undefined where !a.isTransient: here(.undefinedAttribute, "no attributeType on a stored attribute (Core Data allows Undefined only on transient ones)")
                case .composite:
                    if let problem = compositeProblem(a) { here(.compositeAttribute, "attributeType=\"Composite\"" + (a.composite.map { " composite=\"\($0)\"" } ?? "") + ": " + problem) }
                default: break
                }
                if a.isDerived, DerivedExpression.parse(a.derivationExpression ?? "") == nil {
                    here(.derivedAttribute, "derivationExpression=\"\(a.derivationExpression ?? "")\", which Kura does not evaluate")
                }
                if let d = a.defaultValueString, [.binary, .date, .transformable].contains(a.kind) {
                    here(.defaultValue, "\(a.kind.rawValue) attribute with defaultValueString=\"\(d)\"")
                }
            }
            for r in e.relationships {
                func here(_ kind: UnsupportedFeature.Kind, _ detail: String) { add(kind, r.line, e.name, r.name, detail) }
            }
            for ix in e.fetchIndexes {
                for el in ix.elements {
                    if let x = el.expression { add(.expressionIndex, el.line, e.name, nil, "fetchIndex \"\(ix.name)\" expression=\"\(x)\"") }
                    if el.type == "R-Tree" { add(.rtreeIndex, el.line, e.name, el.property, "fetchIndex \"\(ix.name)\" type=\"R-Tree\"") }
                    if let p = el.property, e.relationships.first(where: { $0.name == p })?.isToMany == true {
                        add(.toManyIndex, el.line, e.name, p, "fetchIndex \"\(ix.name)\"")
                    }
                }
            }
        }
        return out
    }

    /// Why composite attribute `a` cannot load (nil: it can): its composite
    /// type must exist and hold plain elements of one-column types.
    private func compositeProblem(_ a: Attribute) -> String? {
        guard let name = a.composite else { return "no composite type named" }
        guard let c = compositeAttributes.first(where: { $0.name == name }) else { return "the model has no compositeAttribute \"\(name)\"" }
        for el in c.attributes where [.composite, .objectID, .undefined, .transformable, .decimal].contains(el.kind) || el.isTransient || el.isDerived {
            return "element \"\(el.name)\" (line \(el.line)) is \(el.isTransient ? "transient" : el.isDerived ? "derived" : el.kind.rawValue); Kura composites hold plain one-column elements"
        }
        return nil
    }

    /// Builds the Kura model the file describes.
    ///
    /// - Parameter classes: the classes objects are made as, keyed by entity
    ///   name or by class name. An entity takes the class registered under its
    ///   `representedClassName`, else under that name without its module prefix
    ///   (`MoodyModel.Mood` and `.Mood` → `Mood`), else under the entity name;
    ///   otherwise it stays a generic `ManagedObject`.
    /// - Returns: a validated model; the store it opens holds every entity.
    /// - Throws: `KuraError.unsupported` listing every feature Kura cannot
    ///   represent yet (``unsupportedFeatures()``), with file, line, entity and
    ///   property; `.invalidArgument` for an inconsistent model (with the line) or
    ///   a key of `classes` that matches no entity; `.syntax` for a default
    ///   value that does not parse as its type.
    public func makeModel(classes: [String: ManagedObject.Type] = [:]) throws(KuraError) -> ManagedObjectModel {
        let unsupported = unsupportedFeatures()
        guard unsupported.isEmpty else {
            throw KuraError(.unsupported, "\(path): \(unsupported.count) part\(unsupported.count == 1 ? "" : "s") of this Xcode model cannot be represented by Kura yet:\n  "
                            + unsupported.map(\.description).joined(separator: "\n  "), path: path)
        }
        try checkConsistency()
        var usedKeys = Set<String>()
        // Single-property indexes, on the entity that declares the attribute
        // (a subentity may index an inherited one: the hierarchy shares a table).
        var indexedBy: [String: Set<String>] = [:]
        let byName = Dictionary(entities.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        for e in entities {
            var names = Set(e.attributes.filter(\.isIndexed).map(\.name))
            for ix in e.fetchIndexes where ix.elements.count == 1 { if let p = ix.elements[0].property { names.insert(p) } }
            for ci in e.compoundIndexes where ci.properties.count == 1 { names.insert(ci.properties[0]) }
            let lineage = try ancestry(e, byName)
            for n in names {
                let owner = lineage.first { $0.attributes.contains { $0.name == n } }?.name ?? e.name
                indexedBy[owner, default: []].insert(n)
            }
        }
        var built: [EntityDescription] = []
        for e in entities {
            var candidates: [String] = []
            if let cls = e.representedClassName, !cls.isEmpty {
                candidates.append(cls)
                if let dot = cls.lastIndex(of: ".") { candidates.append(String(cls[cls.index(after: dot)...])) }
            }
            candidates.append(e.name)
            var objectClass: ManagedObject.Type = ManagedObject.self
            if let key = candidates.first(where: { classes[$0] != nil }), let cls = classes[key] {
                objectClass = cls
                usedKeys.insert(key)
            }
            let indexed = indexedBy[e.name] ?? []
            var attrs: [AttributeDescription] = []
            for a in e.attributes {
                if a.kind == .composite {
                    attrs.append(try compositeAttribute(a, in: e))
                    continue
                }
                attrs.append(AttributeDescription(a.name, try kuraType(a, in: e), optional: a.isOptional, default: try defaultValue(a, in: e),
                                                  indexed: indexed.contains(a.name), userInfo: a.userInfo,
                                                  renamingIdentifier: a.elementID, versionHashModifier: a.versionHashModifier,
                                                  transient: a.isTransient,
                                                  valueTransformerName: a.kind == .transformable ? a.valueTransformerName : nil,
                                                  customClassName: a.kind == .transformable ? a.customClassName : nil, validation: try validation(a, in: e),
                                                  allowsExternalBinaryDataStorage: a.allowsExternalBinaryDataStorage,
                                                  preservesValueInHistoryOnDeletion: a.preserveAfterDeletion,
                                                  indexedBySpotlight: a.spotlightIndexingEnabled,
                                                  derivationExpression: a.isDerived ? a.derivationExpression : nil))
            }
            let rels = e.relationships.map { r in
                RelationshipDescription(r.name, to: r.destinationEntity, inverse: r.inverseName, toMany: r.isToMany, ordered: r.isOrdered,
                                        deleteRule: Self.deleteRule(r.deletionRule), optional: r.isOptional,
                                        minCount: r.isToMany ? r.minCount.flatMap { $0 == 0 ? nil : $0 } : nil,
                                        maxCount: r.isToMany ? r.maxCount.flatMap { $0 == 0 ? nil : $0 } : nil,
                                        userInfo: r.userInfo, renamingIdentifier: r.elementID, versionHashModifier: r.versionHashModifier,
                                        transient: r.isTransient, indexedBySpotlight: r.spotlightIndexingEnabled)
            }
            built.append(EntityDescription(e.name, parent: e.parentEntity, abstract: e.isAbstract, class: objectClass, attributes: attrs, relationships: rels,
                                           uniquenessConstraints: e.uniquenessConstraints.map(\.properties),
                                           fetchIndexes: try compoundIndexes(e),
                                           fetchedProperties: try e.fetchedProperties.map { f throws(KuraError) in
                                               FetchedPropertyDescription(f.name, fetchRequest: try template(f.fetchRequest), userInfo: f.userInfo) },
                                           userInfo: e.userInfo,
                                           renamingIdentifier: e.elementID, versionHashModifier: e.versionHashModifier,
                                           representedClassName: e.representedClassName))
        }
        let unused = Set(classes.keys).subtracting(usedKeys).sorted()
        guard unused.isEmpty else {
            throw KuraError(.invalidArgument, "\(path): the class registry has \(unused.map { "\"\($0)\"" }.joined(separator: ", ")), which name\(unused.count == 1 ? "s" : "") no entity and no represented class of this model (entities: \(entities.map(\.name).joined(separator: ", ")))", path: path)
        }
        var configs: [String: [String]] = [:]
        for c in configurations { configs[c.name] = c.memberEntities }
        var templates: [Kura.FetchTemplate] = []
        for f in fetchRequests { templates.append(try template(f)) }
        do {
            return try ManagedObjectModel(built, configurations: configs, fetchTemplates: templates)
        } catch {
            throw KuraError(.invalidArgument, "\(path): \(error.description)", path: path)
        }
    }

    /// The entity's indexes over several properties: each multi-element
    /// `<fetchIndex>` under its name, elements in order with their `order`; each
    /// multi-property `<compoundIndex>` named `compoundIndex<N>` (N from 1, file
    /// order), all ascending. Single-property ones are `isIndexed` (see makeModel).
    ///
    /// - Throws: `.invalidArgument` with the line for an element order other
    ///   than ascending/descending, or a compound index name used twice.
    private func compoundIndexes(_ e: Entity) throws(KuraError) -> [FetchIndexDescription] {
        var out: [FetchIndexDescription] = []
        for ix in e.fetchIndexes where ix.elements.count > 1 {
            var elements: [FetchIndexDescription.Element] = []
            for el in ix.elements {
                // Expression elements are refused by unsupportedFeatures() first.
                guard let p = el.property else { throw invalid(el.line, "fetch index \"\(ix.name)\" of entity \"\(e.name)\" has an element without a property") }
                switch el.order {
                case "ascending", "": elements.append(.ascending(p))
                case "descending": elements.append(.descending(p))
                default: throw invalid(el.line, "fetch index \"\(ix.name)\" of entity \"\(e.name)\" has order=\"\(el.order)\"; expected ascending or descending")
                }
            }
            guard !out.contains(where: { $0.name == ix.name }) else { throw invalid(ix.line, "entity \"\(e.name)\" has a second fetch index named \"\(ix.name)\"") }
            out.append(FetchIndexDescription(ix.name, elements))
        }
        var n = 0
        for ci in e.compoundIndexes where ci.properties.count > 1 {
            n += 1
            let name = "compoundIndex\(n)"
            guard !out.contains(where: { $0.name == name }) else { throw invalid(ci.line, "entity \"\(e.name)\" has a fetch index named \"\(name)\", the name Kura gives its compound index here") }
            out.append(FetchIndexDescription(name, ci.properties.map { .ascending($0) }))
        }
        return out
    }

    /// A `<fetchRequest>` as a model template: predicate parsed (`$VARIABLE`s
    /// kept), limit, batch size, subentities, pending changes and result type
    /// (0 objects, 1 object IDs, 2 dictionaries of every attribute, distinct if
    /// returnDistinctResults, 4 count).
    ///
    /// - Throws: `.syntax` naming the line for a predicate that does not parse;
    ///   `.unsupported` naming it for another result type.
    private func template(_ f: FetchRequestTemplate) throws(KuraError) -> Kura.FetchTemplate {
        var predicate: KuraPredicate?
        if let s = f.predicateString {
            do { predicate = try KuraPredicate(format: s) } catch {
                throw KuraError(.syntax, "\(path) line \(f.line): fetch request \"\(f.name)\" has predicateString \"\(s)\", which does not parse: \(error.message)", path: path)
            }
        }
        let result: FetchResultType
        switch f.resultType ?? "0" {
        case "0": result = .managedObjects
        case "1": result = .managedObjectIDs
        case "2":
            let names = entity(named: f.entity).map { e in e.attributes.filter { !$0.isTransient }.map(\.name) } ?? []
            result = .dictionaries(properties: names, distinct: f.returnDistinctResults ?? false)
        case "4": result = .count
        case let other:
            throw KuraError(.unsupported, "\(path) line \(f.line): fetch request \"\(f.name)\" has resultType=\"\(other)\"; Kura knows 0 (objects), 1 (object IDs), 2 (dictionaries) and 4 (count)", path: path)
        }
        return Kura.FetchTemplate(f.name, entity: f.entity, predicate: predicate, fetchLimit: f.fetchLimit.flatMap { $0 == 0 ? nil : $0 },
                                  fetchBatchSize: f.fetchBatchSize ?? 0, includesSubentities: f.includeSubentities ?? true,
                                  includesPendingChanges: f.includePendingChanges ?? true, resultType: result)
    }

    static func deleteRule(_ r: DeletionRule) -> DeleteRule {
        switch r {
        case .nullify: return .nullify
        case .cascade: return .cascade
        case .deny: return .deny
        case .noAction: return .noAction
        }
    }

    private func invalid(_ line: Int, _ message: String) -> KuraError {
        KuraError(.invalidArgument, "\(path) line \(line): \(message)", path: path)
    }

    /// Names the model's parts refer to exist and agree (step 2 above).
    func checkConsistency() throws(KuraError) {
        var byName: [String: Entity] = [:]
        for e in entities {
            guard byName[e.name] == nil else { throw invalid(e.line, "a second entity is named \"\(e.name)\"") }
            byName[e.name] = e
        }
        for e in entities {
            var names = Set<String>()
            let props = e.attributes.map { ($0.name, $0.line) } + e.relationships.map { ($0.name, $0.line) } + e.fetchedProperties.map { ($0.name, $0.line) }
            for (n, line) in props where !names.insert(n).inserted {
                throw invalid(line, "entity \"\(e.name)\" has a second property named \"\(n)\"")
            }
            // Constraints and indexes may name inherited properties.
            let lineage = try ancestry(e, byName)
            let attributeNames = Set(lineage.flatMap { $0.attributes.map(\.name) })
            let toOneNames = Set(lineage.flatMap { $0.relationships.filter { !$0.isToMany }.map(\.name) })
            let relationshipNames = Set(lineage.flatMap { $0.relationships.map(\.name) })
            for r in e.relationships {
                guard let target = byName[r.destinationEntity] else {
                    throw invalid(r.line, "relationship \"\(e.name).\(r.name)\" points to entity \"\(r.destinationEntity)\", which the model does not have")
                }
                if let ie = r.inverseEntity, ie != r.destinationEntity {
                    throw invalid(r.line, "relationship \"\(e.name).\(r.name)\" has destinationEntity \"\(r.destinationEntity)\" but inverseEntity \"\(ie)\"")
                }
                if let inv = r.inverseName {
                    guard let back = target.relationships.first(where: { $0.name == inv }) else {
                        throw invalid(r.line, "relationship \"\(e.name).\(r.name)\" names inverse \"\(inv)\", which entity \"\(target.name)\" does not have")
                    }
                    // A non-reciprocal inverse loads (kept from its own side).
                    guard back.destinationEntity == e.name else {
                        throw invalid(r.line, "relationship \"\(e.name).\(r.name)\" names inverse \"\(target.name).\(inv)\" (line \(back.line)), which points to \"\(back.destinationEntity)\", not back to \"\(e.name)\"")
                    }
                }
            }
            for uc in e.uniquenessConstraints {
                for p in uc.properties where !attributeNames.contains(p) {
                    throw invalid(uc.line, "a uniqueness constraint of entity \"\(e.name)\" names \"\(p)\", which is not one of its attributes")
                }
            }
            for ix in e.fetchIndexes {
                for el in ix.elements {
                    if let p = el.property, !attributeNames.contains(p), !relationshipNames.contains(p) {
                        throw invalid(el.line, "fetch index \"\(ix.name)\" of entity \"\(e.name)\" names \"\(p)\", which is not one of its properties")
                    }
                }
            }
            for ci in e.compoundIndexes {
                for p in ci.properties where !attributeNames.contains(p) && !toOneNames.contains(p) {
                    throw invalid(ci.line, "a compound index of entity \"\(e.name)\" names \"\(p)\", which is not one of its attributes or to-one relationships")
                }
            }
        }
        for c in configurations {
            for m in c.memberEntities where byName[m] == nil {
                throw invalid(c.line, "configuration \"\(c.name)\" names entity \"\(m)\", which the model does not have")
            }
        }
    }

    /// `e` and its ancestors (nearest first).
    ///
    /// - Throws: `.invalidArgument` with the line for an unknown parent or a cycle.
    private func ancestry(_ e: Entity, _ byName: [String: Entity]) throws(KuraError) -> [Entity] {
        var out = [e]
        var parent = e.parentEntity
        while let p = parent {
            guard let x = byName[p] else {
                throw invalid(e.line, "entity \"\(e.name)\" names parentEntity \"\(p)\", which the model does not have")
            }
            if out.contains(where: { $0.name == x.name }) {
                throw invalid(e.line, "entity \"\(e.name)\": its parentEntity chain \((out.map(\.name) + [x.name]).joined(separator: " → ")) is a cycle")
            }
            out.append(x)
            parent = x.parentEntity
        }
        return out
    }

    private func kuraType(_ a: Attribute, in e: Entity) throws(KuraError) -> AttributeType {
        switch a.kind {
        case .integer16: return .int16
        case .integer32: return .int32
        case .integer64: return .int64
        case .decimal: return .decimal
        case .double: return .double
        case .float: return .float
        case .string: return .string
        case .boolean: return .bool
        case .date: return .date
        case .binary: return .data
        case .uuid: return .uuid
        case .uri: return .url
        case .transformable: return .transformable
        case .undefined where a.isTransient:
            // Core Data's Undefined transient holds any object; Kura holds any
            // value its transformer (property-list, or one registered under the
            // attribute's valueTransformerName) can encode, in memory only.
            return .transformable
        case .objectID, .composite, .undefined:
            // unsupportedFeatures() reports these before makeModel gets here.
            throw KuraError(.unsupported, "\(path) line \(a.line): attribute \"\(e.name).\(a.name)\" is \(a.kind.rawValue)", path: path)
        }
    }

    /// A Composite attribute with the elements of its model-level
    /// `<compositeAttribute>` (unsupportedFeatures() refused any other shape).
    private func compositeAttribute(_ a: Attribute, in e: Entity) throws(KuraError) -> AttributeDescription {
        guard let c = compositeAttributes.first(where: { $0.name == a.composite }) else {
            throw KuraError(.unsupported, "\(path) line \(a.line): composite attribute \"\(e.name).\(a.name)\" names no composite type of the model", path: path)
        }
        var elements: [AttributeDescription] = []
        for el in c.attributes {
            elements.append(AttributeDescription(el.name, try kuraType(el, in: e), optional: el.isOptional, default: try defaultValue(el, in: e),
                                                 userInfo: el.userInfo, renamingIdentifier: el.elementID, versionHashModifier: el.versionHashModifier,
                                                 validation: try validation(el, in: e)))
        }
        return AttributeDescription(a.name, .data, optional: a.isOptional, userInfo: a.userInfo, renamingIdentifier: a.elementID,
                                    versionHashModifier: a.versionHashModifier, indexedBySpotlight: a.spotlightIndexingEnabled,
                                    compositeElements: elements)
    }

    /// The value rules of an attribute (nil when it has none): min/max from
    /// `minValueString`/`maxValueString` (numbers, string and data lengths) or
    /// `minDateTimeInterval`/`maxDateTimeInterval` (dates), and
    /// `regularExpressionString`.
    ///
    /// - Throws: `.syntax` naming the line for a bound that is not a number.
    private func validation(_ a: Attribute, in e: Entity) throws(KuraError) -> AttributeValidation? {
        func number(_ s: String?, _ key: String) throws(KuraError) -> Double? {
            guard let s else { return nil }
            guard let d = Double(s.trimmingCharacters(in: .whitespaces)), d.isFinite else {
                throw KuraError(.syntax, "\(path) line \(a.line): attribute \"\(e.name).\(a.name)\" has \(key)=\"\(s)\", which is not a number", path: path)
            }
            return d
        }
        let isDate = a.kind == .date
        let v = AttributeValidation(minimum: try number(isDate ? a.minDateTimeInterval : a.minValueString, isDate ? "minDateTimeInterval" : "minValueString"),
                                    maximum: try number(isDate ? a.maxDateTimeInterval : a.maxValueString, isDate ? "maxDateTimeInterval" : "maxValueString"),
                                    regularExpression: a.regularExpressionString)
        if !isDate, let s = a.minDateTimeInterval ?? a.maxDateTimeInterval {
            throw KuraError(.syntax, "\(path) line \(a.line): attribute \"\(e.name).\(a.name)\" is \(a.kind.rawValue) but has a min/maxDateTimeInterval (\"\(s)\")", path: path)
        }
        return v.isEmpty ? nil : v
    }

    /// The default of an attribute, parsed as its type (nil when none is written).
    private func defaultValue(_ a: Attribute, in e: Entity) throws(KuraError) -> (any Sendable)? {
        func bad(_ s: String, _ expected: String) -> KuraError {
            KuraError(.syntax, "\(path) line \(a.line): attribute \"\(e.name).\(a.name)\" (\(a.kind.rawValue)) has default \"\(s)\", which is not \(expected)", path: path)
        }
        if a.kind == .date {
            guard let t = a.defaultDateTimeInterval else { return nil }
            guard let seconds = Double(t), seconds.isFinite else { throw bad(t, "a number of seconds since 2001-01-01") }
            return Date(timeIntervalSinceReferenceDate: seconds)
        }
        if let t = a.defaultDateTimeInterval {
            throw KuraError(.syntax, "\(path) line \(a.line): attribute \"\(e.name).\(a.name)\" is \(a.kind.rawValue) but has defaultDateTimeInterval=\"\(t)\"", path: path)
        }
        guard let s = a.defaultValueString else { return nil }
        func integer<T: FixedWidthInteger & Sendable>(_: T.Type) throws(KuraError) -> T {
            guard let v = T(s.trimmingCharacters(in: .whitespaces)) else { throw bad(s, "an integer in \(T.min)...\(T.max)") }
            return v
        }
        switch a.kind {
        case .integer16: return try integer(Int16.self)
        case .integer32: return try integer(Int32.self)
        case .integer64: return try integer(Int64.self)
        case .double:
            guard let d = Double(s.trimmingCharacters(in: .whitespaces)) else { throw bad(s, "a number") }
            return d
        case .float:
            guard let f = Float(s.trimmingCharacters(in: .whitespaces)) else { throw bad(s, "a number") }
            return f
        case .decimal:
            let t = s.trimmingCharacters(in: .whitespaces)
            // Decimal(string:) accepts a numeric prefix ("1x" → 1); Double checks the whole string.
            guard Double(t) != nil, let d = Decimal(string: t, locale: Locale(identifier: "en_US_POSIX")) else { throw bad(s, "a decimal number") }
            return d
        case .string: return s
        case .boolean:
            switch s {
            case "YES", "true", "1": return true
            case "NO", "false", "0": return false
            default: throw bad(s, "YES or NO")
            }
        case .uuid:
            guard let u = UUID(uuidString: s) else { throw bad(s, "a UUID") }
            return u
        case .uri:
            guard let u = URL(string: s) else { throw bad(s, "a URL") }
            return u
        case .date, .binary, .transformable, .objectID, .composite, .undefined:
            // Date is handled above; the rest are reported by unsupportedFeatures().
            throw KuraError(.unsupported, "\(path) line \(a.line): attribute \"\(e.name).\(a.name)\" (\(a.kind.rawValue)) cannot have a default", path: path)
        }
    }
}

extension ManagedObjectModel {
    /// Loads an Xcode data model: a `.xcdatamodeld` bundle (its current
    /// version), a `.xcdatamodel` directory or its `contents` file (Core Data's
    /// `NSManagedObjectModel(contentsOf:)`, but reading the source model, not
    /// the compiled `.momd`).
    ///
    /// - Parameter classes: see ``XcodeModelDocument/makeModel(classes:)``.
    /// - Throws: see ``XcodeModelDocument/init(contentsOf:)`` and
    ///   ``XcodeModelDocument/makeModel(classes:)``.
    public static func load(xcodeModel url: URL, classes: [String: ManagedObject.Type] = [:]) throws(KuraError) -> ManagedObjectModel {
        try XcodeModelDocument(contentsOf: url).makeModel(classes: classes)
    }
}
