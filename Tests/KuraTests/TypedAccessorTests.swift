import Foundation
import XCTest
import Kura

/// A class whose typed properties cover every type the object layer reads and
/// writes without going through `Any` (ManagedObject.directAttribute), beside
/// types that take the general path (UUID, Decimal, Float).
final class TypedSample: ManagedObject {
    @Managed("text") var text: String
    @Managed("optionalText") var optionalText: String?
    @Managed("big") var big: Int64
    @Managed("bigAsInt") var bigAsInt: Int
    @Managed("medium") var medium: Int32
    @Managed("small") var small: Int16
    @Managed("smallAsInt") var smallAsInt: Int
    @Managed("real") var real: Double
    @Managed("optionalReal") var optionalReal: Double?
    @Managed("flag") var flag: Bool
    @Managed("when") var when: Date
    @Managed("identifier") var identifier: UUID?
    @Managed("amount") var amount: Decimal
    @Managed("ratio") var ratio: Float
}

/// Typed properties read and write the attribute values by ordinal, without
/// boxing for the common types: they must agree with access by name
/// (`value(forKey:)`), survive a save and a reload in another context, and
/// keep change tracking and undo working.
final class TypedAccessorTests: XCTestCase {
    func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("TypedSample", class: TypedSample.self) {
                AttributeDescription("text", .string)
                AttributeDescription("optionalText", .string, optional: true)
                AttributeDescription("big", .int64)
                AttributeDescription("bigAsInt", .int64)
                AttributeDescription("medium", .int32)
                AttributeDescription("small", .int16)
                AttributeDescription("smallAsInt", .int16)
                AttributeDescription("real", .double)
                AttributeDescription("optionalReal", .double, optional: true)
                AttributeDescription("flag", .bool)
                AttributeDescription("when", .date)
                AttributeDescription("identifier", .uuid, optional: true)
                AttributeDescription("amount", .decimal)
                AttributeDescription("ratio", .float)
            }
        }
    }

    func fill(_ s: TypedSample, _ n: Int) {
        s.text = "text \(n)"
        s.optionalText = n % 2 == 0 ? "optional \(n)" : nil
        s.big = Int64(n) * 1_000_000_007
        s.bigAsInt = -n
        s.medium = Int32(n * 3)
        s.small = Int16(n % 300)
        s.smallAsInt = n % 200
        s.real = Double(n) / 7
        s.optionalReal = n % 3 == 0 ? nil : Double(n)
        s.flag = n % 2 == 1
        s.when = Date(timeIntervalSinceReferenceDate: Double(n) * 86_400)
        s.identifier = UUID(uuid: (UInt8(n % 256), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15))
        s.amount = Decimal(n) / 4
        s.ratio = Float(n) / 2
    }

    /// The typed values of `s` as access by name gives them.
    func check(_ s: TypedSample, _ n: Int, file: StaticString = #filePath, line: UInt = #line) throws {
        XCTAssertEqual(s.text, "text \(n)", file: file, line: line)
        XCTAssertEqual(try s.value(forKey: "text") as? String, s.text, file: file, line: line)
        XCTAssertEqual(s.optionalText, n % 2 == 0 ? "optional \(n)" : nil, file: file, line: line)
        XCTAssertEqual(try s.value(forKey: "optionalText") as? String, s.optionalText, file: file, line: line)
        XCTAssertEqual(s.big, Int64(n) * 1_000_000_007, file: file, line: line)
        XCTAssertEqual(try s.value(forKey: "big") as? Int64, s.big, file: file, line: line)
        XCTAssertEqual(s.bigAsInt, -n, file: file, line: line)
        XCTAssertEqual(s.medium, Int32(n * 3), file: file, line: line)
        XCTAssertEqual(try s.value(forKey: "medium") as? Int32, s.medium, file: file, line: line)
        XCTAssertEqual(s.small, Int16(n % 300), file: file, line: line)
        XCTAssertEqual(try s.value(forKey: "small") as? Int16, s.small, file: file, line: line)
        XCTAssertEqual(s.smallAsInt, n % 200, file: file, line: line)
        XCTAssertEqual(s.real, Double(n) / 7, file: file, line: line)
        XCTAssertEqual(try s.value(forKey: "real") as? Double, s.real, file: file, line: line)
        XCTAssertEqual(s.optionalReal, n % 3 == 0 ? nil : Double(n), file: file, line: line)
        XCTAssertEqual(s.flag, n % 2 == 1, file: file, line: line)
        XCTAssertEqual(try s.value(forKey: "flag") as? Bool, s.flag, file: file, line: line)
        XCTAssertEqual(s.when, Date(timeIntervalSinceReferenceDate: Double(n) * 86_400), file: file, line: line)
        XCTAssertEqual(try s.value(forKey: "when") as? Date, s.when, file: file, line: line)
        XCTAssertEqual(s.identifier?.uuid.0, UInt8(n % 256), file: file, line: line)
        XCTAssertEqual(s.amount, Decimal(n) / 4, file: file, line: line)
        XCTAssertEqual(s.ratio, Float(n) / 2, file: file, line: line)
    }

    func testTypedPropertiesAgreeWithAccessByNameAcrossSaveAndReload() throws {
        let container = try PersistentContainer.inMemory(model: model())
        let context = container.newContext()
        var ids: [ManagedObjectID] = []
        for n in 0..<12 {
            let s = TypedSample(context: context)
            fill(s, n)
            try check(s, n)
            ids.append(s.objectID)
        }
        try context.save()
        ids = try context.fetch(FetchRequest<TypedSample>(entityName: "TypedSample")).map(\.objectID)
        XCTAssertEqual(ids.count, 12)
        let other = container.newContext()
        for id in ids {
            let s = try XCTUnwrap(try other.existingObject(with: id) as? TypedSample)
            let n = Int(s.text.dropFirst("text ".count)) ?? -1
            try check(s, n)
            XCTAssertFalse(s.hasChanges)
        }
        // A typed write to a loaded object is a change like a write by name.
        let s = try XCTUnwrap(try other.existingObject(with: ids[3]) as? TypedSample)
        s.big = 42
        s.text = "changed"
        XCTAssertTrue(s.isUpdated)
        XCTAssertEqual(Set(s.changedValues().keys), ["big", "text"])
        try other.save()
        let third = container.newContext()
        let again = try XCTUnwrap(try third.existingObject(with: ids[3]) as? TypedSample)
        XCTAssertEqual(again.big, 42)
        XCTAssertEqual(again.text, "changed")
    }

    func testTypedWritesOfAFaultLoadItFirstAndUndo() throws {
        let container = try PersistentContainer.inMemory(model: model())
        let context = container.newContext()
        let s = TypedSample(context: context)
        fill(s, 5)
        try context.save()
        let other = container.newContext()
        other.undoManager = ContextUndoManager()
        let fault = try XCTUnwrap(try other.object(with: s.objectID) as? TypedSample)
        XCTAssertTrue(fault.isFault)
        fault.real = 2.5  // loads the fault, then writes
        XCTAssertFalse(fault.isFault)
        XCTAssertEqual(fault.real, 2.5)
        XCTAssertEqual(fault.text, "text 5")
        other.processPendingChanges()
        other.undoLastChange()
        XCTAssertEqual(fault.real, 5.0 / 7)
        XCTAssertFalse(fault.hasChanges)
    }
}
