// Value rules from the model (AttributeValidation): minimum/maximum values,
// string and data lengths, date bounds and whole-string regular expressions,
// checked at save with the other rules (one line per failure naming object,
// attribute and rule; nothing written), refused when malformed, and loaded
// from Xcode's minValueString/maxValueString/min/maxDateTimeInterval/
// regularExpressionString.

import Foundation
import XCTest
import Kura

final class AttributeValidationTests: XCTestCase {
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Person") {
                AttributeDescription("age", .int16, default: Int16(0), validation: AttributeValidation(minimum: 0, maximum: 150))
                AttributeDescription("score", .double, validation: AttributeValidation(minimum: -1.5))
                AttributeDescription("code", .string, validation: AttributeValidation(minimum: 2, maximum: 4, regularExpression: "[A-Z]+[0-9]*"))
                AttributeDescription("born", .date, validation: AttributeValidation(maximum: 86400))
                AttributeDescription("blob", .data, validation: AttributeValidation(maximum: 3))
                AttributeDescription("mood", .string, transient: true, validation: AttributeValidation(regularExpression: "ok|fine"))
            }
        }
    }

    private func saveProblems(_ context: ManagedObjectContext) -> String? {
        do { try context.save(); return nil } catch {
            XCTAssertEqual(error.code, .validation)
            return error.message
        }
    }

    func testRulesAreCheckedAtSaveNamingObjectAttributeAndRule() throws {
        let container = try PersistentContainer.inMemory(model: try Self.model())
        let context = container.newContext()
        let p = try context.insert("Person")
        try p.setValue(Int16(151), forKey: "age")
        try p.setValue(-2.0, forKey: "score")
        try p.setValue("AB12x", forKey: "code")
        try p.setValue(Date(timeIntervalSinceReferenceDate: 90000), forKey: "born")
        try p.setValue(Data([1, 2, 3, 4]), forKey: "blob")
        try p.setValue("bad", forKey: "mood")
        let message = try XCTUnwrap(saveProblems(context))
        let id = p.objectID.description
        for part in ["\(id): attribute \"age\" is 151 (rule: maximum value 150)",
                     "\(id): attribute \"score\" is -2.0 (rule: minimum value -1.5)",
                     "\(id): attribute \"code\" has length 5 (rule: maximum length 4)",
                     "\(id): attribute \"code\" is \"AB12x\", which does not match the regular expression \"[A-Z]+[0-9]*\"",
                     "\(id): attribute \"born\" is", "(rule: maximum value 2001-01-02",
                     "\(id): attribute \"blob\" has length 4 (rule: maximum length 3)",
                     "\(id): attribute \"mood\" is \"bad\""] {
            XCTAssertTrue(message.contains(part), "\(part) not in:\n\(message)")
        }
        XCTAssertEqual(message.split(separator: "\n").count, 8, message)   // the heading and 7 problems
        XCTAssertEqual(try container.newContext().count(for: FetchRequest<ManagedObject>(entityName: "Person")), 0)

        // A partial match is not a match; lengths count characters; bounds are inclusive.
        try p.setValue(Int16(150), forKey: "age")
        try p.setValue(-1.5, forKey: "score")
        try p.setValue("AB1", forKey: "code")
        try p.setValue(Date(timeIntervalSinceReferenceDate: 86400), forKey: "born")
        try p.setValue(Data([1, 2, 3]), forKey: "blob")
        try p.setValue("ok", forKey: "mood")
        XCTAssertNil(saveProblems(context))
        try p.setValue("A", forKey: "code")
        XCTAssertEqual(saveProblems(context)?.contains("has length 1 (rule: minimum length 2)"), true)
        try p.setValue("1A", forKey: "code")
        XCTAssertEqual(saveProblems(context)?.contains("does not match"), true)
        try p.setValue("ÉA", forKey: "code")
        XCTAssertEqual(saveProblems(context)?.contains("does not match"), true)
        try p.setValue(nil, forKey: "code")   // nil is for `optional` to judge
        XCTAssertNil(saveProblems(context))
    }

    func testMalformedRulesAreModelErrors() {
        func refused(_ a: AttributeDescription, _ part: String, line: UInt = #line) {
            XCTAssertThrowsError(try ManagedObjectModel { EntityDescription("A") { a } }, line: line) {
                XCTAssertTrue("\($0)".contains(part), "\($0)", line: line)
            }
        }
        refused(AttributeDescription("x", .int32, validation: AttributeValidation(minimum: 5, maximum: 1)), "minimum 5.0 above maximum 1.0")
        refused(AttributeDescription("x", .int32, validation: AttributeValidation(regularExpression: "a")), "applies to strings only")
        refused(AttributeDescription("x", .string, validation: AttributeValidation(regularExpression: "(")), "does not compile")
        refused(AttributeDescription("x", .bool, validation: AttributeValidation(minimum: 0)), "apply to numbers, dates, strings and data")
        refused(AttributeDescription("x", .double, validation: AttributeValidation(maximum: .infinity)), "not finite")
    }

    func testXcodeValidationAttributesLoad() throws {
        let xml = """
        <model>
            <entity name="P">
                <attribute name="age" attributeType="Integer 16" minValueString="0" maxValueString="120" defaultValueString="0"/>
                <attribute name="name" optional="YES" attributeType="String" minValueString="1" regularExpressionString="[a-z]+"/>
                <attribute name="when" optional="YES" attributeType="Date" minDateTimeInterval="-10" maxDateTimeInterval="10"/>
            </entity>
        </model>
        """
        let doc = try XcodeModelDocument(xml: Data(xml.utf8), path: "v.xml")
        XCTAssertEqual(doc.unsupportedFeatures(), [])
        let model = try doc.makeModel()
        let p = try XCTUnwrap(model["P"])
        XCTAssertEqual(p.attributesByName["age"]?.validation, AttributeValidation(minimum: 0, maximum: 120))
        XCTAssertEqual(p.attributesByName["name"]?.validation, AttributeValidation(minimum: 1, regularExpression: "[a-z]+"))
        XCTAssertEqual(p.attributesByName["when"]?.validation, AttributeValidation(minimum: -10, maximum: 10))
        let context = try PersistentContainer.inMemory(model: model).newContext()
        let o = try context.insert("P")
        try o.setValue(Int16(121), forKey: "age")
        try o.setValue("Ab", forKey: "name")
        XCTAssertThrowsError(try context.save()) { error in
            let m = "\(error)"
            XCTAssertTrue(m.contains("\"age\" is 121 (rule: maximum value 120)") && m.contains("\"name\" is \"Ab\""), m)
        }
        let bad = xml.replacingOccurrences(of: "maxValueString=\"120\"", with: "maxValueString=\"lots\"")
        XCTAssertThrowsError(try XcodeModelDocument(xml: Data(bad.utf8), path: "v.xml").makeModel()) { error in
            XCTAssertEqual((error as? KuraError)?.code, .syntax)
            XCTAssertTrue("\(error)".contains("v.xml line 3") && "\(error)".contains("maxValueString=\"lots\""), "\(error)")
        }
    }
}
