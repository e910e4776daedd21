// XcodeModelDocument+Parse: XML text → XcodeModelDocument.
//
// Two passes. Foundation's XMLParser (libxml2's SAX parser; FoundationXML on
// Linux) builds a small element tree with the line of every start tag; then a
// typed pass walks the tree, reads each element's attributes through an
// `XcodeAttributeReader` that remembers which attributes it consumed, and throws for
// any attribute or child element it does not know (the grammar is in
// XcodeModelDocument.swift). Errors are `KuraError(.syntax)` whose message starts
// with "<file> line <n>:" and names the element and attribute.

import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif

extension XcodeModelDocument {
    /// Parses the text of a `contents` file.
    ///
    /// - Parameters:
    ///   - xml: the file's bytes (UTF-8 or whatever the XML declaration names).
    ///   - path: the file name used in error messages and kept in ``path``.
    /// - Throws: `KuraError.syntax` for XML that does not parse, an unknown
    ///   element or attribute, a missing required attribute or a malformed value;
    ///   the message names the file, line, element and attribute.
    public init(xml: Data, path: String = "<memory>") throws(KuraError) {
        let root = try XcodeXMLTree.parse(xml, path: path)
        self = try XcodeDocumentReader(path: path).document(root)
    }
}

/// One element of the parsed XML.
struct XcodeXMLElement {
    var name: String
    var attributes: [String: String]
    var line: Int
    var children: [XcodeXMLElement] = []
}

/// Builds the element tree with XMLParser.
enum XcodeXMLTree {
    /// Deepest nesting accepted (Xcode writes at most 5: model, entity,
    /// compoundIndexes, compoundIndex, index). Bounds the tree, whose values
    /// are freed recursively.
    static let maxDepth = 16

    static func parse(_ data: Data, path: String) throws(KuraError) -> XcodeXMLElement {
        let parser = XMLParser(data: data)
        let builder = TreeBuilder(path: path)
        parser.delegate = builder
        parser.shouldProcessNamespaces = false
        parser.shouldResolveExternalEntities = false
        let ok = parser.parse()
        if let error = builder.error { throw error }
        guard ok, parser.parserError == nil, builder.stack.isEmpty else {
            let reason = parser.parserError.map { ($0 as NSError).localizedDescription } ?? "unknown XML error"
            throw KuraError(.syntax, "\(path) line \(parser.lineNumber), column \(parser.columnNumber): malformed XML: \(reason)", path: path)
        }
        guard let root = builder.root else {
            throw KuraError(.syntax, "\(path) line \(parser.lineNumber): the file has no root element (an Xcode model's root is <model>)", path: path)
        }
        return root
    }

    /// XMLParser's delegate. Used on one thread, inside `parse` only.
    private final class TreeBuilder: NSObject, XMLParserDelegate {
        let path: String
        var stack: [XcodeXMLElement] = []
        var root: XcodeXMLElement?
        var error: KuraError?

        init(path: String) { self.path = path }

        func parser(_ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName: String?, attributes: [String: String] = [:]) {
            guard error == nil else { return }
            guard stack.count < XcodeXMLTree.maxDepth else {
                error = KuraError(.syntax, "\(path) line \(parser.lineNumber): <\(elementName)> is nested more than \(XcodeXMLTree.maxDepth) elements deep (an Xcode model nests at most 5)", path: path)
                parser.abortParsing()
                return
            }
            stack.append(XcodeXMLElement(name: elementName, attributes: attributes, line: parser.lineNumber))
        }

        func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName: String?) {
            guard error == nil else { return }
            guard stack.last?.name == elementName, let done = stack.popLast() else {
                error = KuraError(.syntax, "\(path) line \(parser.lineNumber): malformed XML: </\(elementName)> does not close \(stack.last.map { "<\($0.name)> (line \($0.line))" } ?? "an open element")", path: path)
                parser.abortParsing()
                return
            }
            if stack.isEmpty { root = done } else { stack[stack.count - 1].children.append(done) }
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) {
            guard error == nil, !string.allSatisfy(\.isWhitespace) else { return }
            let element = stack.last.map { "<\($0.name)>" } ?? "the document"
            error = KuraError(.syntax, "\(path) line \(parser.lineNumber): unexpected text \"\(string.prefix(40))\" in \(element) (Xcode model elements hold no text)", path: path)
            parser.abortParsing()
        }

        func parser(_ parser: XMLParser, parseErrorOccurred parseError: Error) {
            guard error == nil else { return }
            error = KuraError(.syntax, "\(path) line \(parser.lineNumber), column \(parser.columnNumber): malformed XML: \((parseError as NSError).localizedDescription)", path: path)
        }

        func parser(_ parser: XMLParser, foundCDATA CDATABlock: Data) {
            guard error == nil else { return }
            error = KuraError(.syntax, "\(path) line \(parser.lineNumber): unexpected CDATA section (Xcode model elements hold no text)", path: path)
            parser.abortParsing()
        }
    }
}

/// The attributes of one element, read once each; `finish()` rejects the rest.
struct XcodeAttributeReader {
    let element: XcodeXMLElement
    let path: String
    private var used: Set<String> = []

    init(_ element: XcodeXMLElement, path: String) {
        self.element = element
        self.path = path
    }

    func fail(_ message: String) -> KuraError {
        KuraError(.syntax, "\(path) line \(element.line): <\(element.name)> \(message)", path: path)
    }

    mutating func string(_ key: String) -> String? {
        used.insert(key)
        return element.attributes[key]
    }

    mutating func required(_ key: String) throws(KuraError) -> String {
        guard let v = string(key) else { throw fail("lacks the required attribute \"\(key)\"") }
        return v
    }

    /// "YES"/"NO" (nil when absent).
    mutating func bool(_ key: String) throws(KuraError) -> Bool? {
        guard let v = string(key) else { return nil }
        switch v {
        case "YES": return true
        case "NO": return false
        default: throw fail("attribute \"\(key)\" is \"\(v)\"; expected YES or NO")
        }
    }

    mutating func flag(_ key: String) throws(KuraError) -> Bool { try bool(key) ?? false }

    mutating func int(_ key: String) throws(KuraError) -> Int? {
        guard let v = string(key) else { return nil }
        guard let i = Int(v) else { throw fail("attribute \"\(key)\" is \"\(v)\"; expected an integer") }
        return i
    }

    /// Throws for an attribute nobody read.
    func finish() throws(KuraError) {
        let unknown = element.attributes.keys.filter { !used.contains($0) }.sorted()
        guard unknown.isEmpty else {
            throw fail("has unknown attribute\(unknown.count == 1 ? "" : "s") \(unknown.map { "\"\($0)\"" }.joined(separator: ", ")) (not part of the Xcode model format Kura reads)")
        }
    }
}

/// The typed pass over the element tree.
struct XcodeDocumentReader {
    let path: String

    func unknownChild(_ child: XcodeXMLElement, in parent: XcodeXMLElement) -> KuraError {
        KuraError(.syntax, "\(path) line \(child.line): unknown element <\(child.name)> in <\(parent.name)> (line \(parent.line)); not part of the Xcode model format Kura reads", path: path)
    }

    func noChildren(_ e: XcodeXMLElement) throws(KuraError) {
        if let c = e.children.first { throw unknownChild(c, in: e) }
    }

    func document(_ root: XcodeXMLElement) throws(KuraError) -> XcodeModelDocument {
        guard root.name == "model" else {
            throw KuraError(.syntax, "\(path) line \(root.line): the root element is <\(root.name)>; an Xcode model's root is <model>", path: path)
        }
        var doc = XcodeModelDocument(path: path)
        var a = XcodeAttributeReader(root, path: path)
        doc.type = a.string("type")
        doc.documentVersion = a.string("documentVersion")
        doc.lastSavedToolsVersion = a.string("lastSavedToolsVersion")
        doc.systemVersion = a.string("systemVersion")
        doc.minimumToolsVersion = a.string("minimumToolsVersion")
        doc.sourceLanguage = a.string("sourceLanguage")
        doc.userDefinedModelVersionIdentifier = a.string("userDefinedModelVersionIdentifier")
        doc.name = a.string("name")
        doc.macOSVersion = a.string("macOSVersion")
        doc.iOSVersion = a.string("iOSVersion")
        try a.finish()
        if let t = doc.type, t != "com.apple.IDECoreDataModeler.DataModel" {
            throw a.fail("attribute \"type\" is \"\(t)\"; an Xcode data model has com.apple.IDECoreDataModeler.DataModel")
        }
        for child in root.children {
            switch child.name {
            case "entity": doc.entities.append(try entity(child))
            case "fetchRequest": doc.fetchRequests.append(try fetchRequest(child))
            case "configuration": doc.configurations.append(try configuration(child))
            case "compositeAttribute": doc.compositeAttributes.append(try compositeAttribute(child))
            case "elements": try layout(child)
            default: throw unknownChild(child, in: root)
            }
        }
        return doc
    }

    func entity(_ e: XcodeXMLElement) throws(KuraError) -> XcodeModelDocument.Entity {
        var a = XcodeAttributeReader(e, path: path)
        var out = XcodeModelDocument.Entity(name: try a.required("name"), line: e.line)
        out.representedClassName = a.string("representedClassName")
        out.codeGenerationType = a.string("codeGenerationType")
        out.parentEntity = a.string("parentEntity")
        out.isAbstract = try a.flag("isAbstract")
        out.syncable = try a.bool("syncable")
        out.elementID = a.string("elementID")
        out.versionHashModifier = a.string("versionHashModifier")
        try a.finish()
        var sawUserInfo = false
        for child in e.children {
            switch child.name {
            case "attribute": out.attributes.append(try attribute(child))
            case "relationship": out.relationships.append(try relationship(child))
            case "fetchedProperty": out.fetchedProperties.append(try fetchedProperty(child))
            case "fetchIndex": out.fetchIndexes.append(try fetchIndex(child))
            case "compoundIndexes":
                try XcodeAttributeReader(child, path: path).finish()
                for ci in child.children {
                    guard ci.name == "compoundIndex" else { throw unknownChild(ci, in: child) }
                    out.compoundIndexes.append(.init(line: ci.line, properties: try valueList(ci, item: "index")))
                }
            case "uniquenessConstraints":
                try XcodeAttributeReader(child, path: path).finish()
                for uc in child.children {
                    guard uc.name == "uniquenessConstraint" else { throw unknownChild(uc, in: child) }
                    out.uniquenessConstraints.append(.init(line: uc.line, properties: try valueList(uc, item: "constraint")))
                }
            case "userInfo":
                guard !sawUserInfo else { throw unknownChild(child, in: e) }
                sawUserInfo = true
                out.userInfo = try userInfo(child)
            default: throw unknownChild(child, in: e)
            }
        }
        return out
    }

    /// Children of an element that may hold only `<userInfo>` (at most once).
    func userInfoChild(of e: XcodeXMLElement) throws(KuraError) -> [String: String] {
        var info: [String: String]?
        for child in e.children {
            guard child.name == "userInfo", info == nil else { throw unknownChild(child, in: e) }
            info = try userInfo(child)
        }
        return info ?? [:]
    }

    func attribute(_ e: XcodeXMLElement) throws(KuraError) -> XcodeModelDocument.Attribute {
        var a = XcodeAttributeReader(e, path: path)
        let name = try a.required("name")
        let kind: XcodeModelDocument.AttributeKind
        if let t = a.string("attributeType") {
            guard let k = XcodeModelDocument.AttributeKind(rawValue: t) else {
                throw a.fail("\"\(name)\" has unknown attributeType \"\(t)\" (known: \(XcodeModelDocument.AttributeKind.allCases.map(\.rawValue).joined(separator: ", ")))")
            }
            kind = k
        } else {
            kind = .undefined
        }
        var out = XcodeModelDocument.Attribute(name: name, line: e.line, kind: kind)
        out.isOptional = try a.flag("optional")
        out.isTransient = try a.flag("transient")
        out.isIndexed = try a.flag("indexed")
        out.syncable = try a.bool("syncable")
        out.defaultValueString = a.string("defaultValueString")
        out.defaultDateTimeInterval = a.string("defaultDateTimeInterval")
        out.minValueString = a.string("minValueString")
        out.maxValueString = a.string("maxValueString")
        out.minDateTimeInterval = a.string("minDateTimeInterval")
        out.maxDateTimeInterval = a.string("maxDateTimeInterval")
        out.regularExpressionString = a.string("regularExpressionString")
        out.usesScalarValueType = try a.bool("usesScalarValueType")
        out.valueTransformerName = a.string("valueTransformerName")
        out.customClassName = a.string("customClassName")
        out.allowsExternalBinaryDataStorage = try a.flag("allowsExternalBinaryDataStorage")
        out.allowsCloudEncryption = try a.flag("allowsCloudEncryption")
        out.preserveAfterDeletion = try a.flag("preserveAfterDeletion")
        out.isDerived = try a.flag("derived")
        out.derivationExpression = a.string("derivationExpression")
        out.composite = a.string("composite")
        out.spotlightIndexingEnabled = try a.flag("spotlightIndexingEnabled")
        out.storedInTruthFile = try a.flag("storedInTruthFile")
        out.elementID = a.string("elementID")
        out.versionHashModifier = a.string("versionHashModifier")
        try a.finish()
        out.userInfo = try userInfoChild(of: e)
        return out
    }

    func relationship(_ e: XcodeXMLElement) throws(KuraError) -> XcodeModelDocument.Relationship {
        var a = XcodeAttributeReader(e, path: path)
        let name = try a.required("name")
        var out = XcodeModelDocument.Relationship(name: name, line: e.line, destinationEntity: try a.required("destinationEntity"))
        out.inverseName = a.string("inverseName")
        out.inverseEntity = a.string("inverseEntity")
        out.isToMany = try a.flag("toMany")
        out.isOrdered = try a.flag("ordered")
        out.isOptional = try a.flag("optional")
        out.minCount = try a.int("minCount")
        out.maxCount = try a.int("maxCount")
        if let rule = a.string("deletionRule") {
            guard let r = XcodeModelDocument.DeletionRule(rawValue: rule) else {
                throw a.fail("\"\(name)\" has unknown deletionRule \"\(rule)\" (known: Nullify, Cascade, Deny, No Action)")
            }
            out.deletionRule = r
            out.deletionRuleWritten = true
        }
        out.isTransient = try a.flag("transient")
        out.isIndexed = try a.flag("indexed")
        out.syncable = try a.bool("syncable")
        out.spotlightIndexingEnabled = try a.flag("spotlightIndexingEnabled")
        out.storedInTruthFile = try a.flag("storedInTruthFile")
        out.elementID = a.string("elementID")
        out.versionHashModifier = a.string("versionHashModifier")
        try a.finish()
        for (key, v) in [("minCount", out.minCount), ("maxCount", out.maxCount)] {
            if let v, v < 0 { throw a.fail("\"\(name)\" has negative \(key) \(v)") }
        }
        if (out.inverseName == nil) != (out.inverseEntity == nil) {
            throw a.fail("\"\(name)\" has only one of inverseName and inverseEntity")
        }
        out.userInfo = try userInfoChild(of: e)
        return out
    }

    func fetchedProperty(_ e: XcodeXMLElement) throws(KuraError) -> XcodeModelDocument.FetchedProperty {
        var a = XcodeAttributeReader(e, path: path)
        let name = try a.required("name")
        let optional = try a.flag("optional")
        let syncable = try a.bool("syncable")
        let elementID = a.string("elementID")
        let modifier = a.string("versionHashModifier")
        try a.finish()
        var request: XcodeModelDocument.FetchRequestTemplate?
        var info: [String: String]?
        for child in e.children {
            switch child.name {
            case "fetchRequest" where request == nil: request = try fetchRequest(child)
            case "userInfo" where info == nil: info = try userInfo(child)
            default: throw unknownChild(child, in: e)
            }
        }
        guard let request else { throw a.fail("\"\(name)\" has no <fetchRequest>") }
        var out = XcodeModelDocument.FetchedProperty(name: name, line: e.line, fetchRequest: request)
        out.isOptional = optional
        out.syncable = syncable
        out.elementID = elementID
        out.versionHashModifier = modifier
        out.userInfo = info ?? [:]
        return out
    }

    func fetchRequest(_ e: XcodeXMLElement) throws(KuraError) -> XcodeModelDocument.FetchRequestTemplate {
        var a = XcodeAttributeReader(e, path: path)
        var out = XcodeModelDocument.FetchRequestTemplate(name: try a.required("name"), line: e.line, entity: try a.required("entity"))
        out.predicateString = a.string("predicateString")
        out.fetchLimit = try a.int("fetchLimit")
        out.fetchBatchSize = try a.int("fetchBatchSize")
        out.resultType = a.string("resultType")
        out.includeSubentities = try a.bool("includeSubentities")
        out.includePropertyValues = try a.bool("includePropertyValues")
        out.includePendingChanges = try a.bool("includePendingChanges")
        out.returnObjectsAsFaults = try a.bool("returnObjectsAsFaults")
        out.returnDistinctResults = try a.bool("returnDistinctResults")
        try a.finish()
        try noChildren(e)
        return out
    }

    func fetchIndex(_ e: XcodeXMLElement) throws(KuraError) -> XcodeModelDocument.FetchIndex {
        var a = XcodeAttributeReader(e, path: path)
        var out = XcodeModelDocument.FetchIndex(name: try a.required("name"), line: e.line)
        try a.finish()
        for child in e.children {
            guard child.name == "fetchIndexElement" else { throw unknownChild(child, in: e) }
            var c = XcodeAttributeReader(child, path: path)
            let property = c.string("property")
            let expression = c.string("expression")
            let expressionType = c.string("expressionType")
            let type = try c.required("type")
            let order = try c.required("order")
            try c.finish()
            try noChildren(child)
            guard (property == nil) != (expression == nil) else { throw c.fail("needs exactly one of \"property\" and \"expression\"") }
            guard ["Binary", "R-Tree"].contains(type) else { throw c.fail("attribute \"type\" is \"\(type)\"; expected Binary or R-Tree") }
            guard ["ascending", "descending"].contains(order) else { throw c.fail("attribute \"order\" is \"\(order)\"; expected ascending or descending") }
            out.elements.append(.init(line: child.line, property: property, expression: expression, expressionType: expressionType, type: type, order: order))
        }
        guard !out.elements.isEmpty else { throw a.fail("\"\(out.name)\" has no <fetchIndexElement>") }
        return out
    }

    /// `<parent><item value="..."/>...</parent>` → the values.
    func valueList(_ e: XcodeXMLElement, item: String) throws(KuraError) -> [String] {
        try XcodeAttributeReader(e, path: path).finish()
        var out: [String] = []
        for child in e.children {
            guard child.name == item else { throw unknownChild(child, in: e) }
            var c = XcodeAttributeReader(child, path: path)
            out.append(try c.required("value"))
            try c.finish()
            try noChildren(child)
        }
        guard !out.isEmpty else { throw XcodeAttributeReader(e, path: path).fail("is empty") }
        return out
    }

    func userInfo(_ e: XcodeXMLElement) throws(KuraError) -> [String: String] {
        try XcodeAttributeReader(e, path: path).finish()
        var out: [String: String] = [:]
        for child in e.children {
            guard child.name == "entry" else { throw unknownChild(child, in: e) }
            var c = XcodeAttributeReader(child, path: path)
            let key = try c.required("key")
            let value = try c.required("value")
            try c.finish()
            try noChildren(child)
            guard out[key] == nil else { throw c.fail("repeats the user-info key \"\(key)\"") }
            out[key] = value
        }
        return out
    }

    func configuration(_ e: XcodeXMLElement) throws(KuraError) -> XcodeModelDocument.Configuration {
        var a = XcodeAttributeReader(e, path: path)
        let name = try a.required("name")
        try a.finish()
        var members: [String] = []
        for child in e.children {
            guard child.name == "memberEntity" else { throw unknownChild(child, in: e) }
            var c = XcodeAttributeReader(child, path: path)
            members.append(try c.required("name"))
            try c.finish()
            try noChildren(child)
        }
        return .init(name: name, line: e.line, memberEntities: members)
    }

    func compositeAttribute(_ e: XcodeXMLElement) throws(KuraError) -> XcodeModelDocument.CompositeAttribute {
        var a = XcodeAttributeReader(e, path: path)
        let name = try a.required("name")
        try a.finish()
        var attrs: [XcodeModelDocument.Attribute] = []
        for child in e.children {
            guard child.name == "attribute" else { throw unknownChild(child, in: e) }
            attrs.append(try attribute(child))
        }
        return .init(name: name, line: e.line, attributes: attrs)
    }

    /// `<elements>`: diagram layout, checked for shape and dropped.
    func layout(_ e: XcodeXMLElement) throws(KuraError) {
        try XcodeAttributeReader(e, path: path).finish()
        for child in e.children {
            guard child.name == "element" else { throw unknownChild(child, in: e) }
            var c = XcodeAttributeReader(child, path: path)
            for key in ["name", "positionX", "positionY", "width", "height"] { _ = c.string(key) }
            try c.finish()
            try noChildren(child)
        }
    }
}
