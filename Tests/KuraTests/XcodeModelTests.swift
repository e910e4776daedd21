// Xcode data-model loading (XcodeModelDocument, ManagedObjectModel.load): every
// model of ../shared/corpus/xcdatamodel parses with the entity and property
// counts the XML holds (counted here by regular expressions over the text, not by
// the parser under test); each either loads and opens a store (one object per
// concrete entity saved and read back after reopening, fetch counts including
// subentities) or is refused with exactly the
// unsupported features its XML uses; `.xccurrentversion` picks the current
// version of a bundle; malformed files give errors naming the line.
// The corpus is read at test time (see SOURCES.md there); tests skip without it.

import Foundation
import XCTest
import Kura

final class XcodeModelTests: XCTestCase {
    static let corpusModels = [
        "3lvis__Sync__Model",
        "JohnEstropia__CoreStore__ColorsDemo",
        "JohnEstropia__CoreStore__Model",
        "alemar11__CoreDataPlus__SampleModel",
        "alemar11__CoreDataPlus__SampleModel2",
        "alemar11__CoreDataPlus__SampleModel3",
        "artsy__energy-legacy__ArtsyPartner_v1",
        "duckduckgo__BrowserServicesKit__BookmarksModel_6",
        "magicalpanda__MagicalRecord__TestModel",
        "mastodon__mastodon-ios__CoreData_9",
        "objcio__core-data__Moody",
        "olvid-io__olvid-ios__ObvEngine-v60",
        "rentzsch__mogenerator__test",
        "wireapp__wire-ios-data-model__zmessaging-1.25-legacy",
    ]

    /// ../shared/corpus/xcdatamodel: the repository root is three levels above this file.
    private func corpusDirectory() throws -> URL {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let url = root.appendingPathComponent("../shared/corpus/xcdatamodel").standardized
        guard FileManager.default.fileExists(atPath: url.appendingPathComponent("SOURCES.md").path) else {
            throw XCTSkip("Xcode model corpus \(url.path) not found; it lives in ../shared/corpus next to the repository")
        }
        return url
    }

    // MARK: Independent counts from the XML text

    /// One XML start tag found by regular expression: its name, attributes and line.
    struct Tag {
        var name: String
        var attributes: [String: String]
        var line: Int
        var selfClosing: Bool
    }

    /// Start tags in file order (attribute values unescaped for &quot; &lt; &gt; &amp;).
    static func tags(_ text: String) throws -> [Tag] {
        let tagRegex = try NSRegularExpression(pattern: #"<([A-Za-z]+)((?:\s+[A-Za-z]+="[^"]*")*)\s*(/?)>"#)
        let attrRegex = try NSRegularExpression(pattern: #"([A-Za-z]+)="([^"]*)""#)
        let ns = text as NSString
        // UTF-16 offsets of line starts, to turn a match location into a line number.
        var lineStarts = [0]
        for (i, u) in text.utf16.enumerated() where u == 10 { lineStarts.append(i + 1) }
        func lineOf(_ offset: Int) -> Int {
            var lo = 0, hi = lineStarts.count - 1
            while lo < hi {
                let mid = (lo + hi + 1) / 2
                if lineStarts[mid] <= offset { lo = mid } else { hi = mid - 1 }
            }
            return lo + 1
        }
        var out: [Tag] = []
        for m in tagRegex.matches(in: text, range: NSRange(location: 0, length: ns.length)) {
            let body = ns.substring(with: m.range(at: 2))
            var attrs: [String: String] = [:]
            for a in attrRegex.matches(in: body, range: NSRange(location: 0, length: (body as NSString).length)) {
                let v = (body as NSString).substring(with: a.range(at: 2))
                attrs[(body as NSString).substring(with: a.range(at: 1))] = v
                    .replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&lt;", with: "<")
                    .replacingOccurrences(of: "&gt;", with: ">").replacingOccurrences(of: "&amp;", with: "&")
            }
            let line = lineOf(m.range.location)
            out.append(Tag(name: ns.substring(with: m.range(at: 1)), attributes: attrs, line: line, selfClosing: ns.substring(with: m.range(at: 3)) == "/"))
        }
        return out
    }

    /// What one `<entity>` block holds, counted from tags.
    struct EntityCounts: Equatable {
        var attributes = 0, relationships = 0, fetchedProperties = 0, fetchIndexes = 0, uniquenessConstraints = 0, userInfoEntries = 0
    }

    /// Per-entity counts: tags between an `<entity ...>` and the next `<entity`,
    /// `<fetchRequest` outside a fetched property, `<configuration`, `<elements` or end.
    static func entityCounts(_ tags: [Tag]) -> [String: EntityCounts] {
        var out: [String: EntityCounts] = [:]
        var current: String?
        for t in tags {
            switch t.name {
            case "entity":
                current = t.attributes["name"]
                out[current ?? "?"] = EntityCounts()
            case "configuration", "elements", "model", "compositeAttribute": current = nil
            case "attribute": if let c = current { out[c]?.attributes += 1 }
            case "relationship": if let c = current { out[c]?.relationships += 1 }
            case "fetchedProperty": if let c = current { out[c]?.fetchedProperties += 1 }
            case "fetchIndex": if let c = current { out[c]?.fetchIndexes += 1 }
            case "uniquenessConstraint": if let c = current { out[c]?.uniquenessConstraints += 1 }
            case "entry": if let c = current { out[c]?.userInfoEntries += 1 }
            default: break
            }
        }
        return out
    }

    /// The unsupported features a file uses, derived from its tags: kind → count.
    static func expectedUnsupported(_ tags: [Tag]) -> [XcodeModelDocument.UnsupportedFeature.Kind: Int] {
        var out: [XcodeModelDocument.UnsupportedFeature.Kind: Int] = [:]
        func add(_ k: XcodeModelDocument.UnsupportedFeature.Kind) { out[k, default: 0] += 1 }
        for t in tags {
            let a = t.attributes
            switch t.name {
            case "attribute":
                switch a["attributeType"] {
                case "ObjectID": add(.objectIDAttribute)
                case nil, "Undefined": if a["transient"] != "YES" { add(.undefinedAttribute) }
                default: break
                }
                if a["derived"] == "YES" { add(.derivedAttribute) }
                if a["defaultValueString"] != nil, ["Binary", "Date", "Transformable"].contains(a["attributeType"] ?? "") { add(.defaultValue) }
            case "fetchIndexElement":
                if a["expression"] != nil { add(.expressionIndex) }
                if a["type"] == "R-Tree" { add(.rtreeIndex) }
            default: break
            }
        }
        return out.filter { $0.value > 0 }
    }

    // MARK: Corpus

    func testEveryCorpusModelParsesWithTheCountsOfItsXML() throws {
        let dir = try corpusDirectory()
        for name in Self.corpusModels {
            let url = dir.appendingPathComponent(name + ".contents")
            let text = try String(contentsOf: url, encoding: .utf8)
            let tags = try Self.tags(text)
            let doc = try XcodeModelDocument(contentsOf: url)
            XCTAssertEqual(doc.path, url.path)

            let expected = Self.entityCounts(tags)
            XCTAssertEqual(Set(doc.entities.map(\.name)), Set(expected.keys), name)
            XCTAssertEqual(doc.entities.count, tags.filter { $0.name == "entity" }.count, name)
            for e in doc.entities {
                let got = EntityCounts(attributes: e.attributes.count, relationships: e.relationships.count,
                                       fetchedProperties: e.fetchedProperties.count, fetchIndexes: e.fetchIndexes.count,
                                       uniquenessConstraints: e.uniquenessConstraints.count,
                                       userInfoEntries: e.userInfo.count + e.attributes.map(\.userInfo.count).reduce(0, +)
                                           + e.relationships.map(\.userInfo.count).reduce(0, +) + e.fetchedProperties.map(\.userInfo.count).reduce(0, +))
                XCTAssertEqual(got, expected[e.name], "\(name): entity \(e.name)")
                // Lines: the entity's tag is on the line the parser reports.
                XCTAssertTrue(tags.contains { $0.name == "entity" && $0.attributes["name"] == e.name && $0.line == e.line }, "\(name): line of \(e.name)")
            }
            // Attribute kinds, per attributeType value.
            let attributeTags = tags.filter { $0.name == "attribute" }
            for kind in XcodeModelDocument.AttributeKind.allCases {
                let want = attributeTags.filter { ($0.attributes["attributeType"] ?? "Undefined") == kind.rawValue }.count
                let got = doc.entities.flatMap(\.attributes).filter { $0.kind == kind }.count
                XCTAssertEqual(got, want, "\(name): \(kind.rawValue) attributes")
            }
            XCTAssertEqual(doc.entities.flatMap(\.relationships).filter(\.isToMany).count,
                           tags.filter { $0.name == "relationship" && $0.attributes["toMany"] == "YES" }.count, "\(name): to-many")
            XCTAssertEqual(doc.entities.flatMap(\.relationships).filter(\.isOrdered).count,
                           tags.filter { $0.name == "relationship" && $0.attributes["ordered"] == "YES" }.count, "\(name): ordered")
            XCTAssertEqual(doc.entities.flatMap(\.attributes).filter { $0.defaultValueString != nil }.count,
                           attributeTags.filter { $0.attributes["defaultValueString"] != nil }.count, "\(name): defaults")
            let fetched = tags.filter { $0.name == "fetchedProperty" }.count
            XCTAssertEqual(doc.fetchRequests.count, tags.filter { $0.name == "fetchRequest" }.count - fetched, "\(name): fetch requests")
            XCTAssertEqual(doc.configurations.count, tags.filter { $0.name == "configuration" }.count, "\(name): configurations")
            XCTAssertEqual(doc.configurations.flatMap(\.memberEntities).count, tags.filter { $0.name == "memberEntity" }.count, "\(name): members")
            XCTAssertEqual(doc.entities.flatMap(\.fetchIndexes).flatMap(\.elements).count,
                           tags.filter { $0.name == "fetchIndexElement" }.count, "\(name): fetch index elements")
            XCTAssertEqual(doc.entities.flatMap(\.compoundIndexes).count, tags.filter { $0.name == "compoundIndex" }.count, "\(name): compound indexes")
            let model = tags.first { $0.name == "model" }?.attributes ?? [:]
            XCTAssertEqual(doc.userDefinedModelVersionIdentifier, model["userDefinedModelVersionIdentifier"], name)
            XCTAssertEqual(doc.lastSavedToolsVersion, model["lastSavedToolsVersion"], name)
            XCTAssertEqual(doc.minimumToolsVersion, model["minimumToolsVersion"], name)
            XCTAssertEqual(doc.sourceLanguage, model["sourceLanguage"], name)
        }
    }

    func testEveryCorpusModelLoadsAndOpensAStoreOrNamesExactlyItsUnsupportedFeatures() throws {
        let dir = try corpusDirectory()
        var loaded: [String] = []
        for name in Self.corpusModels {
            let url = dir.appendingPathComponent(name + ".contents")
            let tags = try Self.tags(try String(contentsOf: url, encoding: .utf8))
            let doc = try XcodeModelDocument(contentsOf: url)
            let expected = Self.expectedUnsupported(tags)
            let features = doc.unsupportedFeatures()
            XCTAssertEqual(Dictionary(features.map { ($0.kind, 1) }, uniquingKeysWith: +), expected, name)
            for f in features {
                XCTAssertEqual(f.file, url.path)
                XCTAssertTrue(tags.contains { $0.line == f.line }, "\(name): \(f) is not on a tag's line")
            }
            if expected.isEmpty {
                try openStore(doc, name: name)
                loaded.append(name)
            } else {
                XCTAssertThrowsError(try doc.makeModel(), name) { error in
                    guard let e = error as? KuraError else { return XCTFail("\(name): \(error)") }
                    XCTAssertEqual(e.code, .unsupported, name)
                    XCTAssertEqual(e.path, url.path)
                    for f in features { XCTAssertTrue(e.message.contains(f.description), "\(name): message lacks \(f)") }
                    XCTAssertEqual(e.message.split(separator: "\n").count, features.count + 1, "\(name): one line per feature")
                }
            }
        }
        // Not a hard-coded answer: the set follows from the features above; it
        // guards against the loader refusing everything.
        XCTAssertFalse(loaded.isEmpty, "no corpus model loads")
        print("corpus models that load and open a store: \(loaded.joined(separator: ", "))")
    }

    /// Loads `doc`, saves at least one object per concrete entity (required
    /// values filled, uniqueness-constrained values distinct, every to-one set
    /// to an object of its destination or a subentity, required to-manys at
    /// their minimum; more objects where one-to-one pairs need their own
    /// targets) into a file store, reopens it
    /// with a freshly loaded model and reads the objects, the per-entity counts
    /// (subentities included) and their to-one targets back.
    private func openStore(_ doc: XcodeModelDocument, name: String) throws {
        let model = try doc.makeModel()
        // The app registers its transformers; here a String one stands in for each.
        for a in model.entities.flatMap(\.attributes) where a.type == .transformable {
            if let n = a.valueTransformerName, AttributeTransformers.transformer(named: n) == nil {
                AttributeTransformers.register(CodableAttributeTransformer<String>(), named: n)
            }
        }
        XCTAssertEqual(model.entities.count, doc.entities.count, name)
        for e in doc.entities {
            let m = try XCTUnwrap(model[e.name], name)
            XCTAssertEqual(m.declaredAttributes.count, e.attributes.count, "\(name): \(e.name)")
            XCTAssertEqual(m.declaredRelationships.count, e.relationships.count, "\(name): \(e.name)")
            XCTAssertEqual(m.declaredUniquenessConstraints.count, e.uniquenessConstraints.count, "\(name): \(e.name)")
            XCTAssertEqual(m.declaredFetchedProperties.map(\.name), e.fetchedProperties.map(\.name), "\(name): \(e.name)")
            XCTAssertEqual(m.superentityName, e.parentEntity, "\(name): \(e.name)")
            XCTAssertEqual(m.isAbstract, e.isAbstract, "\(name): \(e.name)")
            XCTAssertEqual(m.representedClassName, e.representedClassName)
            for a in e.attributes {
                let ma = try XCTUnwrap(m.attributesByName[a.name])
                XCTAssertEqual(ma.isOptional, a.isOptional, "\(name): \(e.name).\(a.name)")
                XCTAssertEqual(ma.defaultValue != nil, a.defaultValueString != nil || a.defaultDateTimeInterval != nil, "\(name): \(e.name).\(a.name)")
                XCTAssertEqual(ma.userInfo, a.userInfo)
            }
        }
        XCTAssertEqual(model.configurations.count, doc.configurations.count)
        XCTAssertEqual(model.fetchTemplates.keys.sorted(), doc.fetchRequests.map(\.name).sorted(), name)
        /// `e`'s name and its descendants' (from the XML's parentEntity, not the model).
        func kinds(_ n: String) -> [String] {
            [n] + doc.entities.filter { $0.parentEntity == n }.flatMap { kinds($0.name) }
        }
        let concrete = Set(doc.entities.filter { !$0.isAbstract }.map(\.name))
        let tmp = try TempDir()
        let storeURL = tmp.url.appendingPathComponent("s.kura")
        var ids: [String: ManagedObjectID] = [:]
        var targets: [String: ManagedObjectID?] = [:]
        var members: [String: [ManagedObjectID]] = [:]
        var created: [String: Int] = [:]
        var firstOf: [String: ManagedObject] = [:]
        do {
            let container = try PersistentContainer(url: storeURL, model: model)
            let context = container.newContext()
            // Every object is valid at save: each to-one is set, each required
            // to-many holds its minimum; a target whose inverse is to-one is a
            // free one (or a new object), so no one-to-one pair steals it back.
            var all: [ManagedObject] = []
            func make(_ entity: String) throws -> ManagedObject {
                let e = try XCTUnwrap(model[entity])
                let o = try context.insert(e.name)
                let constrained = Set(e.uniquenessConstraints.joined())
                for a in e.attributes where constrained.contains(a.name) || (!a.isOptional && a.defaultValue == nil) {
                    try o.setValue(constrained.contains(a.name) ? Self.sample(a.type, distinct: all.count) : Self.sample(a.type), forKey: a.name)
                }
                all.append(o)
                created[e.name, default: 0] += 1
                if firstOf[e.name] == nil { firstOf[e.name] = o }
                return o
            }
            func target(_ r: RelationshipDescription, excluding: [ManagedObject]) throws -> ManagedObject {
                let dest = kinds(r.destination)
                // Only a reciprocal inverse moves a target (a non-reciprocal one is kept from one side).
                let inverse = r.inverse.flatMap { model[r.destination]?.relationshipsByName[$0] }.flatMap { $0.inverse == nil || $0.inverse == r.name ? $0 : nil }
                for c in all where dest.contains(c.entity.name) && !excluding.contains(where: { $0 === c }) {
                    if let inverse, !inverse.isToMany, try c.value(forKey: inverse.name) != nil { continue }
                    return c
                }
                return try make(try XCTUnwrap(dest.first(where: concrete.contains), "\(name): no concrete kind of \(r.destination)"))
            }
            for e in model.entities where concrete.contains(e.name) { _ = try make(e.name) }
            var next = 0
            while next < all.count {
                guard all.count < 2000 else { return XCTFail("\(name): filling the store does not converge") }
                let o = all[next]
                next += 1
                for r in o.entity.relationships {
                    if !r.isToMany {
                        if try o.value(forKey: r.name) == nil { try o.setValue(try target(r, excluding: []), forKey: r.name) }
                    } else if !r.isOptional || (r.minCount ?? 0) > 0 {
                        var held = try XCTUnwrap(o.value(forKey: r.name) as? ObjectList).objects
                        while held.count < max(1, r.minCount ?? 0) {
                            let t = try target(r, excluding: held)
                            try o.add(t, to: r.name)
                            held.append(t)
                        }
                    }
                }
            }
            try context.save()
            for (n, o) in firstOf {
                ids[n] = o.objectID
                // One-to-one pairs may have moved a target: expect what the context holds.
                for r in o.entity.relationships where !r.isToMany && !r.isTransient { targets[n + "." + r.name] = (try o.value(forKey: r.name) as? ManagedObject)?.objectID }
                // To-manys too, in order (ordered ones must come back in it).
                for r in o.entity.relationships where r.isToMany && !r.isTransient {
                    members[n + "." + r.name] = try XCTUnwrap(o.value(forKey: r.name) as? ObjectList).map(\.objectID)
                }
            }
        }
        let reopened = try PersistentContainer(url: storeURL, model: try XcodeModelDocument(contentsOf: URL(fileURLWithPath: doc.path)).makeModel())
        let context = reopened.newContext()
        for e in reopened.model.entities {
            XCTAssertEqual(try context.count(for: FetchRequest<ManagedObject>(entityName: e.name)), kinds(e.name).map { created[$0] ?? 0 }.reduce(0, +), "\(name): \(e.name)")
            guard concrete.contains(e.name) else { continue }
            let o = try context.object(with: try XCTUnwrap(ids[e.name]))
            XCTAssertEqual(o.entity.name, e.name)
            for a in e.attributes { XCTAssertNoThrow(try o.value(forKey: a.name), "\(name): \(e.name).\(a.name)") }
            for f in e.fetchedProperties { XCTAssertNoThrow(try o.value(forKey: f.name), "\(name): \(e.name).\(f.name)") }
            for r in e.relationships where r.isToMany && !r.isTransient {
                let got = try XCTUnwrap(o.value(forKey: r.name) as? ObjectList).map(\.objectID)
                let want = members[e.name + "." + r.name] ?? []
                if r.isOrdered { XCTAssertEqual(got, want, "\(name): \(e.name).\(r.name)") } else { XCTAssertEqual(Set(got), Set(want), "\(name): \(e.name).\(r.name)") }
            }
            for r in e.relationships where !r.isToMany && !r.isTransient {
                let target = try o.value(forKey: r.name) as? ManagedObject
                XCTAssertEqual(target?.objectID, targets[e.name + "." + r.name] ?? nil, "\(name): \(e.name).\(r.name)")
            }
        }
    }

    /// A value of `type` that differs for each `i` (for uniqueness-constrained attributes).
    static func sample(_ type: AttributeType, distinct i: Int) -> Any {
        switch type {
        case .int16: return Int16(i)
        case .int32: return Int32(i)
        case .int64: return Int64(i)
        case .double, .float, .decimal: return Double(i)
        case .string: return "value \(i)"
        case .bool: return i % 2 == 0
        case .date: return Date(timeIntervalSinceReferenceDate: Double(i))
        case .data: return Data([UInt8(truncatingIfNeeded: i)])
        case .uuid: return UUID(uuidString: String(format: "00000000-0000-0000-0000-%012ld", i)) ?? UUID()
        case .url: return URL(string: "https://example.com/\(i)") ?? URL(fileURLWithPath: "/")
        case .transformable: return "value \(i)"
        }
    }

    static func sample(_ type: AttributeType) -> Any {
        switch type {
        case .int16: return Int16(7)
        case .int32: return Int32(7)
        case .int64: return Int64(7)
        case .double: return 1.5
        case .float: return Float(1.5)
        case .decimal: return Decimal(string: "1.25", locale: Locale(identifier: "en_US_POSIX")) ?? Decimal(1)
        case .string: return "s"
        case .bool: return true
        case .date: return Date(timeIntervalSinceReferenceDate: 1000)
        case .data: return Data([1, 2])
        case .uuid: return UUID()
        case .url: return URL(fileURLWithPath: "/x")
        case .transformable: return "s"
        }
    }

    // MARK: Bundles and .xccurrentversion

    /// The corpus's multi-version models: the .xccurrentversion file, and
    /// (corpus contents file, version directory name) pairs.
    static let bundles: [(marker: String, bundle: String, versions: [(file: String, dir: String)])] = [
        ("alemar11__CoreDataPlus__SampleModel", "SampleModel", [
            ("alemar11__CoreDataPlus__SampleModel", "SampleModel.xcdatamodel"),
            ("alemar11__CoreDataPlus__SampleModel2", "SampleModel2.xcdatamodel"),
            ("alemar11__CoreDataPlus__SampleModel3", "SampleModel3.xcdatamodel"),
        ]),
        ("duckduckgo__BrowserServicesKit__BookmarksModel", "BookmarksModel", [
            ("duckduckgo__BrowserServicesKit__BookmarksModel_6", "BookmarksModel 6.xcdatamodel"),
        ]),
        ("mastodon__mastodon-ios__CoreData", "CoreData", [
            ("mastodon__mastodon-ios__CoreData_9", "CoreData 9.xcdatamodel"),
        ]),
        ("olvid-io__olvid-ios__ObvEngine", "ObvEngine", [
            ("olvid-io__olvid-ios__ObvEngine-v60", "ObvEngine-v60.xcdatamodel"),
        ]),
    ]

    func testXCCurrentVersionPicksTheCurrentVersionOfEachMultiVersionModel() throws {
        let dir = try corpusDirectory()
        let tmp = try TempDir()
        let fm = FileManager.default
        for b in Self.bundles {
            let bundle = tmp.url.appendingPathComponent(b.bundle + ".xcdatamodeld")
            try fm.createDirectory(at: bundle, withIntermediateDirectories: true)
            let marker = try Data(contentsOf: dir.appendingPathComponent(b.marker + ".xccurrentversion"))
            try marker.write(to: bundle.appendingPathComponent(".xccurrentversion"))
            for v in b.versions {
                let vdir = bundle.appendingPathComponent(v.dir)
                try fm.createDirectory(at: vdir, withIntermediateDirectories: true)
                try Data(contentsOf: dir.appendingPathComponent(v.file + ".contents")).write(to: vdir.appendingPathComponent("contents"))
            }
            // A decoy version that must not be chosen.
            let decoy = bundle.appendingPathComponent("Decoy.xcdatamodel")
            try fm.createDirectory(at: decoy, withIntermediateDirectories: true)
            try Data(contentsOf: dir.appendingPathComponent("objcio__core-data__Moody.contents")).write(to: decoy.appendingPathComponent("contents"))

            // The current version, read independently from the plist text.
            let markerText = try XCTUnwrap(String(data: marker, encoding: .utf8))
            let current = try XCTUnwrap(b.versions.first { markerText.contains("<string>\($0.dir)</string>") }, b.marker)
            let doc = try XcodeModelDocument(contentsOf: bundle)
            XCTAssertEqual(doc.path, bundle.appendingPathComponent(current.dir).appendingPathComponent("contents").path)
            let direct = try XcodeModelDocument(contentsOf: dir.appendingPathComponent(current.file + ".contents"))
            XCTAssertEqual(doc.entities.map(\.name), direct.entities.map(\.name), b.marker)
            XCTAssertEqual(doc.userDefinedModelVersionIdentifier, direct.userDefinedModelVersionIdentifier, b.marker)
            // The version directory itself works too.
            XCTAssertEqual(try XcodeModelDocument(contentsOf: bundle.appendingPathComponent(current.dir)).entities.count, direct.entities.count)
        }
    }

    func testBundleErrorsNameTheFile() throws {
        let tmp = try TempDir()
        let fm = FileManager.default
        let bundle = tmp.url.appendingPathComponent("M.xcdatamodeld")
        try fm.createDirectory(at: bundle.appendingPathComponent("A.xcdatamodel"), withIntermediateDirectories: true)
        try fm.createDirectory(at: bundle.appendingPathComponent("B.xcdatamodel"), withIntermediateDirectories: true)
        let minimal = Data(#"<?xml version="1.0"?><model><entity name="E"/></model>"#.utf8)
        try minimal.write(to: bundle.appendingPathComponent("A.xcdatamodel/contents"))
        try minimal.write(to: bundle.appendingPathComponent("B.xcdatamodel/contents"))
        // Two versions, no .xccurrentversion: which is current is unknown.
        assertError(try XcodeModelDocument(contentsOf: bundle), .notFound, contains: ["A.xcdatamodel, B.xcdatamodel"])
        // A marker naming a missing version.
        let marker = bundle.appendingPathComponent(".xccurrentversion")
        try plist(["_XCCurrentVersionName": "C.xcdatamodel"]).write(to: marker)
        assertError(try XcodeModelDocument(contentsOf: bundle), .notFound, contains: ["C.xcdatamodel"])
        // A marker that is not a property list, or lacks the key.
        try Data("not a plist <<<".utf8).write(to: marker)
        assertError(try XcodeModelDocument(contentsOf: bundle), .syntax, contains: [marker.path])
        try plist(["Other": "A.xcdatamodel"]).write(to: marker)
        assertError(try XcodeModelDocument(contentsOf: bundle), .syntax, contains: [marker.path, "_XCCurrentVersionName"])
        try plist(["_XCCurrentVersionName": "../A.xcdatamodel"]).write(to: marker)
        assertError(try XcodeModelDocument(contentsOf: bundle), .syntax, contains: [marker.path])
        try plist(["_XCCurrentVersionName": "B.xcdatamodel"]).write(to: marker)
        XCTAssertEqual(try XcodeModelDocument(contentsOf: bundle).path, bundle.appendingPathComponent("B.xcdatamodel/contents").path)
        assertError(try XcodeModelDocument(contentsOf: tmp.url.appendingPathComponent("missing.xcdatamodel")), .notFound, contains: ["missing.xcdatamodel"])
    }

    private func plist(_ dict: [String: String]) throws -> Data {
        try PropertyListSerialization.data(fromPropertyList: dict, format: .xml, options: 0)
    }

    // MARK: Malformed files

    private func assertError<T>(_ body: @autoclosure () throws -> T, _ code: KuraError.Code, contains parts: [String],
                                file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try body(), file: file, line: line) { error in
            guard let e = error as? KuraError else { return XCTFail("\(error)", file: file, line: line) }
            XCTAssertEqual(e.code, code, e.description, file: file, line: line)
            for p in parts { XCTAssertTrue(e.message.contains(p), "\"\(p)\" not in: \(e.message)", file: file, line: line) }
        }
    }

    private func parse(_ xml: String) throws -> XcodeModelDocument {
        try XcodeModelDocument(xml: Data(xml.utf8), path: "test.xml")
    }

    func testMalformedXMLUnknownTypesElementsAndAttributesNameTheLine() {
        assertError(try parse("<model>\n<entity name=\"A\">\n<attribute name=\"x\" attributeType=\"String\">\n</entity>\n</model>"),
                    .syntax, contains: ["test.xml line 4", "malformed XML"])
        assertError(try parse("<model>\n<entity name=\"A\">\n<attribute name=\"x\" attributeType=\"Integer 128\"/>\n</entity>\n</model>"),
                    .syntax, contains: ["test.xml line 3", "<attribute>", "\"x\"", "Integer 128"])
        assertError(try parse("<model>\n<entity name=\"A\">\n\n<gadget name=\"g\"/>\n</entity>\n</model>"),
                    .syntax, contains: ["test.xml line 4", "<gadget>", "<entity> (line 2)"])
        assertError(try parse("<model>\n<entity name=\"A\" colour=\"red\"/>\n</model>"),
                    .syntax, contains: ["test.xml line 2", "<entity>", "\"colour\""])
        assertError(try parse("<model>\n<entity name=\"A\">\n<attribute name=\"x\" attributeType=\"String\" optional=\"maybe\"/>\n</entity>\n</model>"),
                    .syntax, contains: ["line 3", "\"optional\"", "maybe"])
        assertError(try parse("<model>\n<entity>\n</entity>\n</model>"), .syntax, contains: ["line 2", "\"name\""])
        assertError(try parse("<model>\n<entity name=\"A\">\n<relationship name=\"r\" destinationEntity=\"A\" deletionRule=\"Explode\"/>\n</entity>\n</model>"),
                    .syntax, contains: ["line 3", "Explode"])
        assertError(try parse("<plist/>"), .syntax, contains: ["<plist>", "<model>"])
        assertError(try parse("<model>\n  text\n</model>"), .syntax, contains: ["unexpected text"])
        assertError(try parse(""), .syntax, contains: ["test.xml"])
        // Hostile nesting is refused before it builds a deep tree.
        assertError(try parse("<model>" + String(repeating: "<a>", count: 100_000) + String(repeating: "</a>", count: 100_000) + "</model>"),
                    .syntax, contains: ["line 1", "nested more than"])
    }

    func testInconsistentModelsAndBadDefaultsNameTheLine() throws {
        assertError(try parse("<model>\n<entity name=\"A\">\n<relationship name=\"r\" maxCount=\"1\" destinationEntity=\"B\"/>\n</entity>\n</model>").makeModel(),
                    .invalidArgument, contains: ["test.xml line 3", "\"A.r\"", "\"B\""])
        assertError(try parse("<model>\n<entity name=\"A\">\n<relationship name=\"r\" maxCount=\"1\" destinationEntity=\"A\" inverseName=\"s\" inverseEntity=\"A\"/>\n</entity>\n</model>").makeModel(),
                    .invalidArgument, contains: ["line 3", "inverse \"s\""])
        assertError(try parse("<model>\n<entity name=\"A\">\n<attribute name=\"n\" attributeType=\"Integer 16\" defaultValueString=\"70000\"/>\n</entity>\n</model>").makeModel(),
                    .syntax, contains: ["line 3", "\"A.n\"", "70000"])
        assertError(try parse("<model>\n<entity name=\"A\">\n<attribute name=\"n\" attributeType=\"String\"/>\n<uniquenessConstraints><uniquenessConstraint><constraint value=\"m\"/></uniquenessConstraint></uniquenessConstraints>\n</entity>\n</model>").makeModel(),
                    .invalidArgument, contains: ["line 4", "\"m\""])
    }

    // MARK: Translation details

    final class Item: ManagedObject {}

    func testDefaultsIndexesOrderingAndClassBinding() throws {
        let doc = try parse("""
        <?xml version="1.0" encoding="UTF-8" standalone="yes"?>
        <model type="com.apple.IDECoreDataModeler.DataModel" documentVersion="1.0" minimumToolsVersion="Automatic" sourceLanguage="Swift" userDefinedModelVersionIdentifier="7">
            <entity name="List" representedClassName="App.TodoList" elementID="OldList" syncable="YES">
                <attribute name="title" attributeType="String" defaultValueString="Untitled" versionHashModifier="2"/>
                <relationship name="items" optional="YES" toMany="YES" maxCount="5" deletionRule="Cascade" ordered="YES" destinationEntity="Item" inverseName="list" inverseEntity="Item"/>
                <userInfo><entry key="k" value="v &quot;q&quot;"/></userInfo>
            </entity>
            <entity name="Item" representedClassName="Item">
                <attribute name="done" attributeType="Boolean" defaultValueString="NO" usesScalarValueType="YES"/>
                <attribute name="due" optional="YES" attributeType="Date" defaultDateTimeInterval="86400"/>
                <attribute name="id" attributeType="UUID" usesScalarValueType="NO"/>
                <attribute name="rank" attributeType="Integer 32" defaultValueString="-3"/>
                <attribute name="price" optional="YES" attributeType="Decimal" defaultValueString="1.5"/>
                <attribute name="link" optional="YES" attributeType="URI"/>
                <attribute name="blob" optional="YES" attributeType="Binary" allowsExternalBinaryDataStorage="YES"/>
                <relationship name="list" optional="YES" maxCount="1" deletionRule="Nullify" destinationEntity="List" inverseName="items" inverseEntity="List"/>
                <fetchIndex name="byRank"><fetchIndexElement property="rank" type="Binary" order="descending"/></fetchIndex>
                <uniquenessConstraints><uniquenessConstraint><constraint value="id"/></uniquenessConstraint></uniquenessConstraints>
            </entity>
            <configuration name="Local"><memberEntity name="Item"/></configuration>
            <elements><element name="Item" positionX="0" positionY="0" width="128" height="44"/></elements>
        </model>
        """)
        let model = try doc.makeModel(classes: ["Item": Item.self])
        let list = try XCTUnwrap(model["List"]), item = try XCTUnwrap(model["Item"])
        XCTAssertTrue(item.objectClass == Item.self)
        XCTAssertTrue(list.objectClass == ManagedObject.self)
        XCTAssertEqual(list.renamingIdentifier, "OldList")
        XCTAssertEqual(list.userInfo, ["k": "v \"q\""])
        XCTAssertEqual(list.attributesByName["title"]?.defaultValue as? String, "Untitled")
        XCTAssertEqual(list.attributesByName["title"]?.versionHashModifier, "2")
        XCTAssertEqual(list.attributesByName["title"]?.isOptional, false)
        let items = try XCTUnwrap(list.relationshipsByName["items"])
        XCTAssertTrue(items.isToMany && items.isOrdered)
        XCTAssertEqual(items.deleteRule, .cascade)
        XCTAssertEqual(items.maxCount, 5)
        XCTAssertEqual(item.attributesByName["done"]?.defaultValue as? Bool, false)
        XCTAssertEqual(item.attributesByName["due"]?.defaultValue as? Date, Date(timeIntervalSinceReferenceDate: 86400))
        XCTAssertEqual(item.attributesByName["rank"]?.defaultValue as? Int32, -3)
        XCTAssertEqual(item.attributesByName["price"]?.defaultValue as? Decimal, Decimal(string: "1.5", locale: Locale(identifier: "en_US_POSIX")))
        XCTAssertEqual(item.attributesByName["rank"]?.isIndexed, true)
        XCTAssertEqual(item.attributesByName["id"]?.type, .uuid)
        XCTAssertEqual(item.uniquenessConstraints, [["id"]])
        XCTAssertEqual(model.configurations, ["Local": ["Item"]])

        // The class registry also matches a represented class name without its module.
        let byClass = try doc.makeModel(classes: ["TodoList": Item.self])
        XCTAssertTrue(byClass["List"]?.objectClass == Item.self)
        assertError(try doc.makeModel(classes: ["Nope": Item.self]), .invalidArgument, contains: ["\"Nope\""])

        // The model works: ordered items, a required UUID, defaults on insert.
        let container = try PersistentContainer.inMemory(model: model)
        let context = container.newContext()
        let l = try context.insert("List")
        for i in 0..<3 {
            let it = try context.insert(Item.self)
            try it.setValue(UUID(), forKey: "id")
            try it.setValue(Int32(i), forKey: "rank")
            try l.add(it, to: "items")
        }
        try context.save()
        let fresh = container.newContext()
        let lists = try fresh.fetch(FetchRequest<ManagedObject>(entityName: "List"))
        XCTAssertEqual(lists.first?["title"] as? String, "Untitled")
        let ranks = try (lists.first?.value(forKey: "items") as? ObjectList)?.map { $0["rank"] as? Int32 }
        XCTAssertEqual(ranks, [0, 1, 2])
    }

    func testUnsupportedFeaturesAreAllListedWithTheirLines() throws {
        let doc = try parse("""
        <model>
        <entity name="Base" isAbstract="YES">
        <attribute name="blob" optional="YES" attributeType="Binary" defaultValueString="00"/>
        </entity>
        <entity name="Sub" parentEntity="Base">
        <attribute name="n" attributeType="Integer 16" derived="YES" derivationExpression="sum:(x)"/>
        <fetchedProperty name="f"><fetchRequest name="r" entity="Sub" predicateString="n > 1"/></fetchedProperty>
        </entity>
        <fetchRequest name="all" entity="Sub"/>
        </model>
        """)
        let f = doc.unsupportedFeatures()
        // Inheritance (parentEntity, isAbstract) is supported: not listed.
        XCTAssertEqual(f.map(\.kind), [.defaultValue, .derivedAttribute])
        XCTAssertEqual(f.map(\.line), [3, 6])
        assertError(try doc.makeModel(), .unsupported, contains: ["2 parts", "line 3, entity \"Base\", property \"blob\": default value of this type"])
    }

    func testEveryOtherUnsupportedKindIsDetected() throws {
        let doc = try parse("""
        <model>
        <entity name="E">
        <attribute name="oid" optional="YES" attributeType="ObjectID"/>
        <attribute name="home" optional="YES" attributeType="Composite" composite="Missing"/>
        <attribute name="full" optional="YES" attributeType="String" derived="YES" derivationExpression="a.@avg.b"/>
        <attribute name="text" optional="YES" attributeType="String" spotlightIndexingEnabled="YES"/>
        <attribute name="blob" optional="YES" attributeType="Binary" defaultValueString="00"/>
        <attribute name="when" optional="YES" attributeType="Date" defaultValueString="now"/>
        <relationship name="others" optional="YES" toMany="YES" ordered="YES" deletionRule="Nullify" destinationEntity="E"/>
        <fetchIndex name="x"><fetchIndexElement expression="text" expressionType="String" type="Binary" order="ascending"/></fetchIndex>
        <fetchIndex name="y"><fetchIndexElement property="text" type="R-Tree" order="ascending"/></fetchIndex>
        <fetchIndex name="z"><fetchIndexElement property="others" type="Binary" order="ascending"/></fetchIndex>
        </entity>
        <compositeAttribute name="Address"><attribute name="city" optional="YES" attributeType="String"/></compositeAttribute>
        </model>
        """)
        let f = doc.unsupportedFeatures()
        // Spotlight hints (line 6), ordered relationships without inverse (line 9)
        // and composite types (line 14) load; a composite naming no type does not.
        XCTAssertEqual(f.map(\.kind), [.objectIDAttribute, .compositeAttribute, .derivedAttribute, .defaultValue, .defaultValue,
                                       .expressionIndex, .rtreeIndex, .toManyIndex])
        XCTAssertEqual(f.map(\.line), [3, 4, 5, 7, 8, 10, 11, 12])
        XCTAssertEqual(doc.compositeAttributes.first?.attributes.map(\.name), ["city"])
        XCTAssertEqual(doc.entities.first?.attributes[1].composite, "Missing")
    }
}
