// Transformable attributes (AttributeType.transformable): values go through a
// transformer (given, registered by name, or the built-in property-list one)
// into a blob and come back after save and reopen; an unregistered name and
// bytes that do not decode are errors naming the attribute (and object), never nil.

import Foundation
import XCTest
import Kura
import KuraEngine

final class TransformableAttributeTests: XCTestCase {
    struct Palette: Codable, Equatable, Sendable {
        var name: String
        var colors: [Int]
        var weights: [String: Double]
    }

    static func model(transformerName: String) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Mood") {
                AttributeDescription("palette", .transformable, transformer: CodableAttributeTransformer<Palette>())
                AttributeDescription("tags", .transformable)   // built-in property list
                AttributeDescription("named", .transformable, valueTransformerName: transformerName, customClassName: "[String]")
            }
        }
    }

    private func assertKura<T>(_ body: @autoclosure () throws -> T, _ code: KuraError.Code, _ parts: [String], line: UInt = #line) {
        XCTAssertThrowsError(try body(), line: line) { error in
            guard let e = error as? KuraError else { return XCTFail("\(error)", line: line) }
            XCTAssertEqual(e.code, code, e.description, line: line)
            for p in parts { XCTAssertTrue(e.message.contains(p), "\"\(p)\" not in: \(e.message)", line: line) }
        }
    }

    func testValuesRoundTripThroughSaveAndReopen() throws {
        let name = "TransformableTests.Strings.\(UUID().uuidString)"
        AttributeTransformers.register(CodableAttributeTransformer<[String]>(), named: name)
        defer { AttributeTransformers.unregister(named: name) }
        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("t.kura")
        let palette = Palette(name: "dusk", colors: [0xff0000, 0x00ff00], weights: ["b": 0.25, "a": 1.5])
        let id: ManagedObjectID
        do {
            let container = try PersistentContainer(url: url, model: try Self.model(transformerName: name))
            let context = container.newContext()
            let m = try context.insert("Mood")
            try m.setValue(palette, forKey: "palette")
            try m.setValue(["happy", "calm"], forKey: "tags")
            try m.setValue(["x", "y"], forKey: "named")
            try context.save()
            id = m.objectID
            // The JSON is deterministic (sorted keys): equal values, equal bytes, so predicates can compare them.
            var r = FetchRequest<ManagedObject>(entityName: "Mood")
            r.predicate = .comparison(KuraComparison(.keyPath(["palette"]), .equalTo,
                                                     .constant(.blob([UInt8](try CodableAttributeTransformer<Palette>().encode(palette))))))
            XCTAssertEqual(try container.newContext().fetch(r).count, 1)
        }
        let context = try PersistentContainer(url: url, model: try Self.model(transformerName: name)).newContext()
        let m = try context.existingObject(with: id)
        XCTAssertEqual(try m.value(forKey: "palette") as? Palette, palette)
        XCTAssertEqual(try m.value(forKey: "tags") as? [String], ["happy", "calm"])
        XCTAssertEqual(try m.value(forKey: "named") as? [String], ["x", "y"])
        XCTAssertEqual(m.entity.attributesByName["named"]?.customClassName, "[String]")
        // nil stays nil.
        try m.setValue(nil, forKey: "palette")
        try context.save()
        XCTAssertNil(try context.existingObject(with: id).value(forKey: "palette"))
        // A value the transformer cannot encode names the attribute.
        assertKura(try m.setValue(42, forKey: "palette"), .typeMismatch, ["\"palette\"", "\"Mood\"", "Int"])
        assertKura(try m.setValue(NSObject(), forKey: "tags"), .typeMismatch, ["\"tags\"", "property-list"])
    }

    func testUnknownTransformerNamesTheAttribute() throws {
        let missing = "NoSuchTransformer.\(UUID().uuidString)"
        let container = try PersistentContainer.inMemory(model: try Self.model(transformerName: missing))
        let context = container.newContext()
        let m = try context.insert("Mood")
        assertKura(try m.setValue(["a"], forKey: "named"), .notFound, ["attribute \"named\" of entity \"Mood\"", "\"\(missing)\"", "not registered"])
        try m.setValue(["ok"], forKey: "tags")
    }

    func testBytesThatDoNotDecodeAreCorruptNamingObjectAndAttribute() throws {
        let name = "TransformableTests.Strings2.\(UUID().uuidString)"
        AttributeTransformers.register(CodableAttributeTransformer<[String]>(), named: name)
        defer { AttributeTransformers.unregister(named: name) }
        let container = try PersistentContainer.inMemory(model: try Self.model(transformerName: name))
        let context = container.newContext()
        let m = try context.insert("Mood")
        try m.setValue(Palette(name: "a", colors: [], weights: [:]), forKey: "palette")
        try context.save()
        let id = m.objectID
        // Damage the stored bytes behind the object layer.
        try container.database.write { tx in
            let t = try tx.table("Mood")
            var row = try XCTUnwrap(try tx.values(in: t, rowID: id.rowID))
            row[0] = .blob(Array("{\"name\": 3}".utf8))
            _ = try tx.update(row, in: t, rowID: id.rowID)
        }
        let fresh = container.newContext()
        let o = try fresh.existingObject(with: id)
        assertKura(try o.value(forKey: "palette"), .corrupt, ["attribute \"palette\" of \(id)", "cannot decode"])
        // The non-throwing subscript gives nil but records the error.
        XCTAssertNil(o["palette"])
        XCTAssertEqual(o.readError?.code, .corrupt)
    }

    func testModelRefusesMisplacedTransformerSettings() {
        XCTAssertThrowsError(try ManagedObjectModel {
            EntityDescription("A") { AttributeDescription("x", .string, valueTransformerName: "T") }
        }) { XCTAssertTrue("\($0)".contains("not transformable"), "\($0)") }
        XCTAssertThrowsError(try ManagedObjectModel {
            EntityDescription("A") { AttributeDescription("x", .transformable, default: "d") }
        }) { XCTAssertTrue("\($0)".contains("cannot have a default"), "\($0)") }
    }

    func testXcodeTransformableAttributesLoadWithTheirNames() throws {
        let xml = """
        <model>
            <entity name="Mood" representedClassName="Mood">
                <attribute name="colors" attributeType="Transformable" valueTransformerName="ColorsTransformer" customClassName="[UIColor]"/>
                <attribute name="extra" optional="YES" attributeType="Transformable"/>
            </entity>
        </model>
        """
        let doc = try XcodeModelDocument(xml: Data(xml.utf8), path: "t.xml")
        XCTAssertEqual(doc.unsupportedFeatures(), [])
        let mood = try XCTUnwrap(try doc.makeModel()["Mood"])
        XCTAssertEqual(mood.attributesByName["colors"]?.type, .transformable)
        XCTAssertEqual(mood.attributesByName["colors"]?.valueTransformerName, "ColorsTransformer")
        XCTAssertEqual(mood.attributesByName["colors"]?.customClassName, "[UIColor]")
        XCTAssertNil(mood.attributesByName["extra"]?.valueTransformerName)
    }
}
