// XcodeModelDocument: the typed, complete in-memory form of one Xcode data-model
// `contents` file (the XML inside a `.xcdatamodel` directory). It keeps every
// element and attribute Xcode writes (from Xcode 4 to current), each with the
// line it was read from, so that the loader (XcodeModelDocument+Load.swift) can
// name the file and line of anything Kura cannot represent.
//
// The format (no published schema; gathered from the 14 models in
// ../shared/corpus/xcdatamodel and Xcode's documented property kinds):
//
//     <model type documentVersion lastSavedToolsVersion systemVersion
//            minimumToolsVersion sourceLanguage userDefinedModelVersionIdentifier
//            name macOSVersion iOSVersion>             (every attribute optional)
//       <entity name representedClassName codeGenerationType parentEntity
//               isAbstract syncable elementID versionHashModifier>
//         <attribute name attributeType optional transient indexed syncable
//                    defaultValueString defaultDateTimeInterval minValueString
//                    maxValueString minDateTimeInterval maxDateTimeInterval
//                    regularExpressionString usesScalarValueType
//                    valueTransformerName customClassName
//                    allowsExternalBinaryDataStorage allowsCloudEncryption
//                    preserveAfterDeletion derived derivationExpression composite
//                    spotlightIndexingEnabled storedInTruthFile
//                    elementID versionHashModifier>  [<userInfo>]
//         <relationship name destinationEntity inverseName inverseEntity toMany
//                       ordered optional minCount maxCount deletionRule transient
//                       indexed syncable spotlightIndexingEnabled storedInTruthFile
//                       elementID versionHashModifier>  [<userInfo>]
//         <fetchedProperty name optional syncable elementID versionHashModifier>
//           <fetchRequest .../> [<userInfo>]
//         <fetchIndex name> <fetchIndexElement property|expression expressionType
//                                              type order/>... </fetchIndex>
//         <compoundIndexes> <compoundIndex> <index value/>... </compoundIndex>... </compoundIndexes>
//         <uniquenessConstraints> <uniquenessConstraint> <constraint value/>...
//         <userInfo> <entry key value/>... </userInfo>
//       </entity>
//       <fetchRequest name entity predicateString fetchLimit fetchBatchSize
//                     resultType includeSubentities includePropertyValues
//                     includePendingChanges returnObjectsAsFaults
//                     returnDistinctResults/>
//       <configuration name> <memberEntity name/>... </configuration>
//       <compositeAttribute name> <attribute .../>... </compositeAttribute>
//       <elements> <element name positionX positionY width height/>... </elements>
//     </model>
//
// Booleans are "YES"/"NO"; an absent `optional` means required, an absent
// `toMany` means to-one, an attribute without `attributeType` is Undefined (Xcode
// writes none for an Undefined transient attribute). Any element or attribute not
// listed above is an error naming it and its line: a new Xcode feature must be
// read on purpose, never dropped.
//
// What the parser reads but does not keep (it carries nothing for Kura):
//
//     | element / attribute              | why it is dropped                              |
//     |----------------------------------|------------------------------------------------|
//     | <elements>, <element ...>        | the model editor's diagram layout (positions,  |
//     |                                  | sizes); no effect on the model                 |
//     | XML comments, whitespace text    | not part of the model                          |
//
// Everything else is kept in the types below; the loader decides what Kura can
// use (see the table in XcodeModelDocument+Load.swift).

import Foundation

/// One Xcode data-model file (`.xcdatamodel/contents`), parsed but not interpreted:
/// what the file says, typed, with the line of every part.
///
/// Make one with ``XcodeModelDocument/init(contentsOf:)`` (a `.xcdatamodeld`
/// bundle, a `.xcdatamodel` directory or a `contents` file) or
/// ``XcodeModelDocument/init(xml:path:)``; turn it into a model with
/// ``XcodeModelDocument/makeModel(classes:)``.
///
/// A value type; `Sendable`. Failure modes: see the initializers.
public struct XcodeModelDocument: Sendable {
    /// The `contents` file this was read from (as given; "<memory>" for XML text).
    public var path: String

    // Attributes of <model>, as written (nil when absent).
    public var type: String?
    public var documentVersion: String?
    public var lastSavedToolsVersion: String?
    public var systemVersion: String?
    public var minimumToolsVersion: String?
    public var sourceLanguage: String?
    public var userDefinedModelVersionIdentifier: String?
    /// Xcode 4's `name` attribute (usually empty).
    public var name: String?
    /// Xcode 4–6 deployment hints ("Automatic").
    public var macOSVersion: String?
    public var iOSVersion: String?

    public var entities: [Entity] = []
    /// Model-level fetch request templates.
    public var fetchRequests: [FetchRequestTemplate] = []
    public var configurations: [Configuration] = []
    /// Composite attribute types defined at model level.
    public var compositeAttributes: [CompositeAttribute] = []

    public init(path: String) { self.path = path }

    /// The entity named `name`.
    public func entity(named name: String) -> Entity? { entities.first { $0.name == name } }

    /// The kinds of attribute Xcode writes (`attributeType`).
    public enum AttributeKind: String, Sendable, CaseIterable {
        case integer16 = "Integer 16"
        case integer32 = "Integer 32"
        case integer64 = "Integer 64"
        case decimal = "Decimal"
        case double = "Double"
        case float = "Float"
        case string = "String"
        case boolean = "Boolean"
        case date = "Date"
        case binary = "Binary"
        case uuid = "UUID"
        case uri = "URI"
        case transformable = "Transformable"
        case objectID = "ObjectID"
        case composite = "Composite"
        /// Written as `Undefined`, or no `attributeType` at all.
        case undefined = "Undefined"
    }

    /// Core Data's delete rules as Xcode spells them.
    public enum DeletionRule: String, Sendable, CaseIterable {
        case nullify = "Nullify"
        case cascade = "Cascade"
        case deny = "Deny"
        case noAction = "No Action"
    }

    /// `<entity>`.
    public struct Entity: Sendable {
        public var name: String
        /// Line of the `<entity>` tag (1-based).
        public var line: Int
        public var representedClassName: String?
        /// "class", "category" or nil (manual): Xcode code generation only.
        public var codeGenerationType: String?
        public var parentEntity: String?
        public var isAbstract = false
        public var syncable: Bool?
        /// The renaming identifier.
        public var elementID: String?
        public var versionHashModifier: String?
        public var userInfo: [String: String] = [:]
        public var attributes: [Attribute] = []
        public var relationships: [Relationship] = []
        public var fetchedProperties: [FetchedProperty] = []
        /// `<fetchIndex>` elements (Xcode 9 and later).
        public var fetchIndexes: [FetchIndex] = []
        /// `<compoundIndexes>` (Xcode 4–8): each one a list of property names.
        public var compoundIndexes: [CompoundIndex] = []
        public var uniquenessConstraints: [UniquenessConstraint] = []

        public init(name: String, line: Int) {
            self.name = name
            self.line = line
        }
    }

    /// `<attribute>`.
    public struct Attribute: Sendable {
        public var name: String
        public var line: Int
        public var kind: AttributeKind
        public var isOptional = false
        public var isTransient = false
        /// Old-style (pre-fetch-index) single-attribute index.
        public var isIndexed = false
        public var syncable: Bool?
        public var defaultValueString: String?
        /// Date default, seconds since 2001-01-01 (Xcode writes it instead of a string).
        public var defaultDateTimeInterval: String?
        public var minValueString: String?
        public var maxValueString: String?
        public var minDateTimeInterval: String?
        public var maxDateTimeInterval: String?
        public var regularExpressionString: String?
        public var usesScalarValueType: Bool?
        public var valueTransformerName: String?
        public var customClassName: String?
        public var allowsExternalBinaryDataStorage = false
        public var allowsCloudEncryption = false
        public var preserveAfterDeletion = false
        public var isDerived = false
        public var derivationExpression: String?
        /// For a Composite attribute: the model-level composite it uses.
        public var composite: String?
        public var spotlightIndexingEnabled = false
        public var storedInTruthFile = false
        public var elementID: String?
        public var versionHashModifier: String?
        public var userInfo: [String: String] = [:]

        public init(name: String, line: Int, kind: AttributeKind) {
            self.name = name
            self.line = line
            self.kind = kind
        }
    }

    /// `<relationship>`.
    public struct Relationship: Sendable {
        public var name: String
        public var line: Int
        public var destinationEntity: String
        public var inverseName: String?
        public var inverseEntity: String?
        public var isToMany = false
        public var isOrdered = false
        public var isOptional = false
        public var minCount: Int?
        public var maxCount: Int?
        public var deletionRule: DeletionRule = .nullify
        /// Whether `deletionRule` was written (Xcode always writes it).
        public var deletionRuleWritten = false
        public var isTransient = false
        /// Xcode 4–8 wrote `indexed` on relationships too.
        public var isIndexed = false
        public var syncable: Bool?
        public var spotlightIndexingEnabled = false
        public var storedInTruthFile = false
        public var elementID: String?
        public var versionHashModifier: String?
        public var userInfo: [String: String] = [:]

        public init(name: String, line: Int, destinationEntity: String) {
            self.name = name
            self.line = line
            self.destinationEntity = destinationEntity
        }
    }

    /// `<fetchedProperty>`: a property whose value is a fetch.
    public struct FetchedProperty: Sendable {
        public var name: String
        public var line: Int
        public var isOptional = false
        public var syncable: Bool?
        public var elementID: String?
        public var versionHashModifier: String?
        public var fetchRequest: FetchRequestTemplate
        public var userInfo: [String: String] = [:]

        public init(name: String, line: Int, fetchRequest: FetchRequestTemplate) {
            self.name = name
            self.line = line
            self.fetchRequest = fetchRequest
        }
    }

    /// `<fetchRequest>`: a stored fetch request (a model template, or the request
    /// of a fetched property).
    public struct FetchRequestTemplate: Sendable {
        public var name: String
        public var line: Int
        public var entity: String
        /// NSPredicate format, `$variables` included; nil fetches everything.
        public var predicateString: String?
        public var fetchLimit: Int?
        public var fetchBatchSize: Int?
        /// As written (Xcode writes a number, e.g. "2" for dictionaries).
        public var resultType: String?
        public var includeSubentities: Bool?
        public var includePropertyValues: Bool?
        public var includePendingChanges: Bool?
        public var returnObjectsAsFaults: Bool?
        public var returnDistinctResults: Bool?

        public init(name: String, line: Int, entity: String) {
            self.name = name
            self.line = line
            self.entity = entity
        }
    }

    /// `<fetchIndex>`.
    public struct FetchIndex: Sendable {
        public var name: String
        public var line: Int
        public var elements: [FetchIndexElement] = []

        public init(name: String, line: Int) {
            self.name = name
            self.line = line
        }
    }

    /// `<fetchIndexElement>`: a property or an expression, indexed as `type`
    /// ("Binary" or "R-Tree") in `order` ("ascending" or "descending").
    public struct FetchIndexElement: Sendable {
        public var line: Int
        public var property: String?
        public var expression: String?
        public var expressionType: String?
        public var type: String
        public var order: String

        public init(line: Int, property: String?, expression: String?, expressionType: String?, type: String, order: String) {
            self.line = line
            self.property = property
            self.expression = expression
            self.expressionType = expressionType
            self.type = type
            self.order = order
        }
    }

    /// `<compoundIndex>` (older files): the property names, in order.
    public struct CompoundIndex: Sendable {
        public var line: Int
        public var properties: [String]
    }

    /// `<uniquenessConstraint>`: property names whose values together are unique.
    public struct UniquenessConstraint: Sendable {
        public var line: Int
        public var properties: [String]
    }

    /// `<configuration>`.
    public struct Configuration: Sendable {
        public var name: String
        public var line: Int
        public var memberEntities: [String]
    }

    /// `<compositeAttribute>`: a composite type (Xcode 15), with its element attributes.
    public struct CompositeAttribute: Sendable {
        public var name: String
        public var line: Int
        public var attributes: [Attribute]
    }
}
