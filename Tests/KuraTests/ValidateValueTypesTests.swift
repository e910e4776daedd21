import XCTest
@testable import Kura

// Guards save's per-key validation (ManagedObject+Lifecycle.swift,
// `hookProblems`), which passes the common plain types to
// `validateValue(_:forKey:)` without converting through `Any?`: each
// attribute type must still arrive as the Swift value its typed property
// reads (Int16 for int16, Date for date...), every non-nil attribute of an
// inserted object and only the changed ones of an updated object.

final class Typed: ManagedObject {
    nonisolated(unsafe) static var seen: [String: String] = [:]

    override func validateValue(_ value: Any?, forKey key: String) throws(KuraError) {
        guard let value else { Self.seen[key] = "nil"; return }
        Self.seen[key] = "\(type(of: value)) \(value)"
    }
}

final class ValidateValueTypesTests: XCTestCase {
    func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Typed", class: Typed.self) {
                AttributeDescription("s", .string)
                AttributeDescription("i16", .int16)
                AttributeDescription("i32", .int32)
                AttributeDescription("i64", .int64)
                AttributeDescription("d", .double)
                AttributeDescription("f", .float)
                AttributeDescription("b", .bool)
                AttributeDescription("dt", .date)
                AttributeDescription("u", .uuid)
                AttributeDescription("unset", .string)
            }
        }
    }

    func testEachTypeArrivesAsItsSwiftValue() throws {
        let container = try PersistentContainer.inMemory(model: model())
        let context = container.newContext()
        let o = try context.insert("Typed")
        let when = Date(timeIntervalSinceReferenceDate: 1234.5)
        let id = UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")
        try o.setValue("x", forKey: "s")
        try o.setValue(Int16(-7), forKey: "i16")
        try o.setValue(Int32(70000), forKey: "i32")
        try o.setValue(Int64(1) << 40, forKey: "i64")
        try o.setValue(2.5, forKey: "d")
        try o.setValue(Float(1.5), forKey: "f")
        try o.setValue(true, forKey: "b")
        try o.setValue(when, forKey: "dt")
        try o.setValue(id, forKey: "u")
        Typed.seen = [:]
        try context.save()
        XCTAssertEqual(Typed.seen, [
            "s": "String x", "i16": "Int16 -7", "i32": "Int32 70000", "i64": "Int64 1099511627776",
            "d": "Double 2.5", "f": "Float 1.5", "b": "Bool true", "dt": "Date \(when)",
            "u": "UUID E621E1F8-C36C-495A-93FC-0C247A3E6E5F",
        ], "every non-nil attribute of an inserted object, as its Swift type")

        // An update: only the changed attributes, a value set to nil as nil.
        try o.setValue(Int16(8), forKey: "i16")
        try o.setValue(nil, forKey: "s")
        Typed.seen = [:]
        try context.save()
        XCTAssertEqual(Typed.seen, ["i16": "Int16 8", "s": "nil"])
    }
}
