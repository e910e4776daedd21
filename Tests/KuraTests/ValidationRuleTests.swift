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

    /// Guards the order of a validation error's lines now that each object's
    /// hooks are called in the same visit as its model rules are checked
    /// (Context+Save.swift, `validate`): the model's rules of every object
    /// first, then uniqueness, then the hooks' problems, each group in the
    /// objects' order; and the hooks are called once per object.
    func testValidationProblemsAreListedRulesThenUniquenessThenHooks() throws {
        let model = try ManagedObjectModel {
            EntityDescription("Ticket", class: PickyTicket.self) {
                AttributeDescription("code", .string)
                AttributeDescription("holder", .string, optional: false)
                UniqueConstraint("code")
            }
        }
        let container = try PersistentContainer.inMemory(model: model)
        let context = container.newContext()
        PickyTicket.calls = []
        var tickets: [PickyTicket] = []
        for (code, holder) in [("A", nil), ("A", "ann"), ("B", nil)] as [(String, String?)] {
            let t = try context.insert(PickyTicket.self)
            t.code = code
            if let holder { t.holder = holder }
            tickets.append(t)
        }
        XCTAssertThrowsError(try context.save()) { err in
            let lines = "\(err)".split(separator: "\n").map(String.init)
            func line(_ needle: String) -> Int? { lines.firstIndex { $0.contains(needle) } }
            let t = tickets.map(\.objectID.description)
            let order = [line("\(t[0]): attribute \"holder\" is required"), line("\(t[2]): attribute \"holder\" is required"),
                         line("\(t[1]): uniqueness constraint (code) violated"),
                         line("\(t[0]): attribute \"code\": code A is taken"), line("\(t[0]): ticket refused"),
                         line("\(t[1]): attribute \"code\": code A is taken"), line("\(t[1]): ticket refused"),
                         line("\(t[2]): ticket refused")]
            XCTAssertFalse(order.contains(nil), "\(lines)")
            XCTAssertEqual(order.compactMap { $0 }, order.compactMap { $0 }.sorted(), "\(lines)")
        }
        XCTAssertEqual(PickyTicket.calls.filter { $0.hasPrefix("insert") }.count, 3, "\(PickyTicket.calls)")
        XCTAssertEqual(try container.newContext().count(for: FetchRequest<PickyTicket>(entityName: "Ticket")), 0)
    }
}

final class PickyTicket: ManagedObject {
    @Managed("code") var code: String
    @Managed("holder") var holder: String
    nonisolated(unsafe) static var calls: [String] = []

    override func validateValue(_ value: Any?, forKey key: String) throws(KuraError) {
        Self.calls.append("value \(key)")
        if key == "code", let s = value as? String, s == "A" { throw KuraError(.validation, "code A is taken") }
    }

    override func validateForInsert() throws(KuraError) {
        Self.calls.append("insert \(code)")
        throw KuraError(.validation, "ticket refused")
    }
}
