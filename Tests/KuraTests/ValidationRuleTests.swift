import Foundation
import XCTest
import Kura

final class ValidationRuleTests: XCTestCase {
    func testRelationshipCountRulesAreCheckedAtSave() throws {
        let container = try PersistentContainer.inMemory(model: companyModel())
        let context = container.newContext()
        let p = Project(context: context)
        p.title = "Big"
        p.members = (0..<6).map { i in
            let e = Employee(context: context)
            e.name = "E\(i)"
            return e
        }
        XCTAssertThrowsError(try context.save()) { err in
            XCTAssertTrue("\(err)".contains("relationship \"members\" holds 6 objects (rule: at most 5)"), "\(err)")
        }
        XCTAssertEqual(try container.newContext().count(for: FetchRequest<Employee>(entityName: "Employee")), 0)
        try p.remove(p.members[0], from: "members")
        try context.save()
    }

    func testCompoundUniquenessAndRequiredToOne() throws {
        let model = try ManagedObjectModel {
            EntityDescription("Seat") {
                AttributeDescription("row", .int16)
                AttributeDescription("number", .int16)
                UniqueConstraint("row", "number")
                RelationshipDescription("hall", to: "Hall", inverse: "seats", optional: false)
            }
            EntityDescription("Hall") {
                AttributeDescription("name", .string)
                RelationshipDescription("seats", to: "Seat", inverse: "hall", toMany: true, minCount: 1)
            }
        }
        let container = try PersistentContainer.inMemory(model: model)
        let context = container.newContext()
        let hall = try context.insert("Hall")
        XCTAssertThrowsError(try context.save()) { err in
            XCTAssertTrue("\(err)".contains("relationship \"seats\" holds 0 objects (rule: at least 1)"), "\(err)")
        }
        let a = try context.insert("Seat")
        a["row"] = 1
        a["number"] = 1
        XCTAssertThrowsError(try context.save()) { err in
            XCTAssertTrue("\(err)".contains("relationship \"hall\" is required"), "\(err)")
        }
        a["hall"] = hall
        try context.save()
        let b = try context.insert("Seat")
        b["row"] = 1
        b["number"] = 2
        b["hall"] = hall
        try context.save()  // (1, 2) differs from (1, 1)
        let c = try context.insert("Seat")
        c["row"] = 1
        c["number"] = 1
        c["hall"] = hall
        XCTAssertThrowsError(try context.save()) { err in
            XCTAssertTrue("\(err)".contains("uniqueness constraint (row, number)"), "\(err)")
        }
    }
}
