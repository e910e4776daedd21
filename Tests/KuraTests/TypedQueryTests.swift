// Typed queries: Foundation `#Predicate`s translated to Kura predicates
// (FoundationPredicate.swift) select the same objects as the equivalent format
// string on the same store; key paths become sort keys; an unsupported construct
// and a key path outside the model are errors that name them; an indexed typed
// query is planned on the index.
//
// Each #Predicate stays small: the macro's expansion type-checks slowly when
// several literals and operators share one closure.

import Foundation
import XCTest
import Kura
import KuraEngine

final class TQStudent: ManagedObject {
    @Managed("name") var name: String
    @Managed("age") var age: Int16
    @Managed("nickname") var nickname: String?
    @Managed("active") var active: Bool
    @Managed("score") var score: Double
    @ToOne("record") var record: TQRecord?
    @ToMany("courses") var courses: [TQCourse]
    /// Not in the model: a typed query must refuse it.
    var scratch = ""
}

final class TQRecord: ManagedObject {
    @Managed("grade") var grade: Int32
    @ToOne("student") var student: TQStudent?
}

final class TQCourse: ManagedObject {
    @Managed("title") var title: String
    @ToMany("students") var students: [TQStudent]
}

class TQRegion: ManagedObject {
    @Managed("code") var code: Int16
}

final class TQCountry: TQRegion {
    @Managed("capital") var capital: String?
}

final class TQContinent: TQRegion {}

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
final class TypedQueryTests: XCTestCase {
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("TQStudent", class: TQStudent.self) {
                AttributeDescription("name", .string, default: "")
                AttributeDescription("age", .int16, default: 0, indexed: true)
                AttributeDescription("nickname", .string)
                AttributeDescription("active", .bool, default: false)
                AttributeDescription("score", .double, default: 0.0)
                RelationshipDescription("record", to: "TQRecord", inverse: "student")
                RelationshipDescription("courses", to: "TQCourse", inverse: "students", toMany: true)
            }
            EntityDescription("TQRecord", class: TQRecord.self) {
                AttributeDescription("grade", .int32, default: 0)
                RelationshipDescription("student", to: "TQStudent", inverse: "record")
            }
            EntityDescription("TQCourse", class: TQCourse.self) {
                AttributeDescription("title", .string, default: "")
                RelationshipDescription("students", to: "TQStudent", inverse: "courses", toMany: true)
            }
        }
    }

    var model: ManagedObjectModel!
    var container: PersistentContainer!
    var context: ManagedObjectContext!

    override func setUpWithError() throws {
        model = try Self.model()
        container = try PersistentContainer.inMemory(model: model)
        context = container.newContext()
        let names = ["Ann", "Bob", "Cara", "Dan", "Eve", "Fay", "Gus", "Hana", "Ian", "Jo", "Kai", "Lena"]
        let titles = ["Math", "Music", "Art", "Biology"]
        let courses = try titles.map { title throws -> TQCourse in
            let c = try context.insert(TQCourse.self)
            c.title = title
            return c
        }
        for (i, name) in names.enumerated() {
            let s = try context.insert(TQStudent.self)
            s.name = name
            s.age = Int16(17 + i % 5)
            s.nickname = i % 3 == 0 ? nil : name.lowercased() + "y"
            s.active = i % 2 == 0
            s.score = Double(i * 10) + 0.5
            if i % 4 != 3 {
                let r = try context.insert(TQRecord.self)
                r.grade = Int32(40 + (i * 7) % 60)
                s.record = r
            }
            s.courses = courses.enumerated().filter { (j, _) in (i + j) % 3 == 0 }.map(\.element)
        }
        try context.save()
    }

    /// Asserts that `typed` and `format` select the same objects, and that the
    /// answer is neither empty nor everything unless `trivialOK`.
    func check(_ typed: Predicate<TQStudent>, _ format: String, trivialOK: Bool = false,
               file: StaticString = #filePath, line: UInt = #line) throws {
        let request = try FetchRequest(TQStudent.self, in: model, where: typed)
        let got = try context.fetchObjectIDs(request).map(\.uriRepresentation).sorted()
        let expected = try context.fetchObjectIDs(FetchRequest<TQStudent>(entityName: "TQStudent", predicate: KuraPredicate(format: format)))
            .map(\.uriRepresentation).sorted()
        XCTAssertEqual(got, expected, "typed \(request.predicate?.predicateFormat ?? "nil") vs \(format)", file: file, line: line)
        if !trivialOK {
            XCTAssertFalse(got.isEmpty, "\(format) selects nothing: the comparison proves little", file: file, line: line)
            XCTAssertNotEqual(got.count, 12, "\(format) selects everything: the comparison proves little", file: file, line: line)
        }
    }

    func testComparisonsAndLogic() throws {
        try check(#Predicate<TQStudent> { $0.age > 18 && $0.name.contains("a") }, "age > 18 AND name CONTAINS 'a'")
        try check(#Predicate<TQStudent> { $0.age == 17 || $0.age >= 21 }, "age == 17 OR age >= 21")
        try check(#Predicate<TQStudent> { $0.age != 19 }, "age != 19")
        try check(#Predicate<TQStudent> { !($0.age <= 19) }, "NOT age <= 19")
        try check(#Predicate<TQStudent> { $0.age < 18 }, "age < 18")
        try check(#Predicate<TQStudent> { $0.score >= 55.5 }, "score >= 55.5")
        try check(#Predicate<TQStudent> { $0.active }, "active == YES")
        try check(#Predicate<TQStudent> { $0.active ? $0.age > 19 : $0.age < 19 }, "(active == YES AND age > 19) OR (active == NO AND age < 19)")
        try check(#Predicate<TQStudent> { _ in true }, "TRUEPREDICATE", trivialOK: true)
    }

    func testStringsAndConstants() throws {
        try check(#Predicate<TQStudent> { $0.name.starts(with: "J") }, "name BEGINSWITH 'J'")
        try check(#Predicate<TQStudent> { $0.name.localizedLowercase.contains("an") }, "name CONTAINS[c] 'an'")
        let wanted = "Eve"
        try check(#Predicate<TQStudent> { $0.name == wanted }, "name == 'Eve'")
        let ages: [Int16] = [18, 20]
        try check(#Predicate<TQStudent> { ages.contains($0.age) }, "age IN {18, 20}")
    }

    func testOptionals() throws {
        try check(#Predicate<TQStudent> { $0.nickname == nil }, "nickname == nil")
        try check(#Predicate<TQStudent> { $0.record == nil }, "record == nil")
        try check(#Predicate<TQStudent> { $0.record?.grade == 54 }, "record.grade == 54")
        try check(#Predicate<TQStudent> { ($0.record?.grade ?? 0) > 60 }, "record.grade > 60")
        try check(#Predicate<TQStudent> { ($0.record?.grade ?? 100) > 60 }, "record.grade > 60 OR record == nil")
        try check(#Predicate<TQStudent> { $0.record!.grade < 60 }, "record.grade < 60")
        try check(#Predicate<TQStudent> { $0.record?.grade != 54 }, "record.grade != 54")
        try check(#Predicate<TQStudent> { ($0.nickname ?? "") == "" }, "nickname == nil OR nickname == ''")
    }

    func testToManyAndArithmetic() throws {
        try check(#Predicate<TQStudent> { $0.courses.contains { $0.title == "Math" } }, "ANY courses.title == 'Math'")
        try check(#Predicate<TQStudent> { $0.courses.contains { $0.title.starts(with: "M") && $0.title != "Music" } },
                  "SUBQUERY(courses, $c, $c.title BEGINSWITH 'M' AND $c.title != 'Music').@count > 0")
        try check(#Predicate<TQStudent> { $0.courses.allSatisfy { $0.title != "Art" } }, "NONE courses.title == 'Art'")
        try check(#Predicate<TQStudent> { $0.courses.count > 1 }, "courses.@count > 1")
        try check(#Predicate<TQStudent> { $0.courses.isEmpty }, "courses.@count == 0", trivialOK: true)
        try check(#Predicate<TQStudent> { $0.age % 2 == 0 }, "modulus:by:(age, 2) == 0")
        try check(#Predicate<TQStudent> { $0.score * 2 > 100 }, "score * 2 > 100")
        try check(#Predicate<TQStudent> { -$0.age < -19 }, "-age < -19")
        try check(#Predicate<TQStudent> { (18...20).contains($0.age) }, "age BETWEEN {18, 20}")
        try check(#Predicate<TQStudent> { (18..<20).contains($0.age) }, "age >= 18 AND age < 20")
    }

    func testTranslationShapes() throws {
        // The simple forms translate to the format language's own shapes.
        XCTAssertEqual(try KuraPredicate(#Predicate<TQStudent> { $0.age > 18 && $0.name.contains("a") }, model: model),
                       try KuraPredicate(format: "age > 18 AND name CONTAINS 'a'"))
        XCTAssertEqual(try KuraPredicate(#Predicate<TQStudent> { $0.courses.contains { $0.title == "Art" } }, model: model),
                       try KuraPredicate(format: "ANY courses.title == 'Art'"))
        XCTAssertEqual(try KuraPredicate(#Predicate<TQStudent> { $0.record?.grade == 5 }, model: model),
                       try KuraPredicate(format: "record.grade == 5"))
    }

    func testUnsupportedConstructsAndUnmodelledKeyPathsAreNamed() throws {
        func error(_ p: Predicate<TQStudent>) -> KuraError? {
            do { _ = try KuraPredicate(p, model: model); return nil } catch { return error }
        }
        let filter = error(#Predicate<TQStudent> { $0.courses.filter { $0.title == "Art" }.count > 0 })
        XCTAssertEqual(filter?.code, .unsupported)
        XCTAssertTrue(filter?.message.contains("PredicateExpressions.Filter") ?? false, filter?.message ?? "no error")

        let length = error(#Predicate<TQStudent> { $0.name.count > 3 })
        XCTAssertEqual(length?.code, .unsupported)
        XCTAssertTrue(length?.message.contains("KeyPath<String, Int>") ?? false, length?.message ?? "no error")

        let scratch = error(#Predicate<TQStudent> { $0.scratch == "x" })
        XCTAssertEqual(scratch?.code, .invalidArgument)
        XCTAssertTrue(scratch?.message.contains("TQStudent.scratch") ?? false, scratch?.message ?? "no error")
        XCTAssertThrowsError(try SortKey(\TQStudent.scratch))
    }

    func testKeyPathSortKeys() throws {
        XCTAssertEqual(try SortKey(\TQStudent.name).column, "name")
        XCTAssertEqual(try SortKey(\TQStudent.record?.grade, ascending: false).column, "record.grade")
        let typed = try FetchRequest(TQStudent.self, in: model, where: #Predicate<TQStudent> { $0.age > 17 },
                                     sortedBy: [SortKey(\TQStudent.age, ascending: false), SortKey(\TQStudent.name)])
        let byString = FetchRequest<TQStudent>(entityName: "TQStudent", predicate: try KuraPredicate(format: "age > 17"),
                                               sortDescriptors: [SortKey("age", ascending: false), SortKey("name")])
        let got = try context.fetch(typed)
        XCTAssertEqual(got.map(\.objectID), try context.fetch(byString).map(\.objectID))
        XCTAssertEqual(got.map(\.age), got.map(\.age).sorted(by: >))
        XCTAssertGreaterThan(got.count, 2)
        // Through a to-one.
        let byGrade = try context.fetch(FetchRequest(TQStudent.self, in: model, where: #Predicate<TQStudent> { $0.record != nil },
                                                     sortedBy: [SortKey(\TQStudent.record?.grade)]))
        XCTAssertEqual(byGrade.compactMap { $0.record?.grade }, byGrade.compactMap { $0.record?.grade }.sorted())
        XCTAssertEqual(byGrade.count, 9)
    }

    func testIndexedTypedQueryUsesTheIndex() throws {
        let p = try KuraPredicate(#Predicate<TQStudent> { $0.age == 19 }, model: model)
        let plan = try container.database.read { tx in try tx.explain(TableQuery("TQStudent", where: p)) }
        XCTAssertTrue(plan.contains("search index"), plan)
        XCTAssertFalse(plan.contains("scan table"), plan)
        let formatPlan = try container.database.read { tx in try tx.explain(TableQuery("TQStudent", where: KuraPredicate(format: "age == 19"))) }
        XCTAssertEqual(plan, formatPlan)
        let typed = try context.fetch(FetchRequest(TQStudent.self, in: model, where: #Predicate<TQStudent> { $0.age == 19 }))
        XCTAssertEqual(Set(typed.map(\.age)), [19])
    }

    func testTypeChecksAndCastsOverAnEntityHierarchy() throws {
        let model = try ManagedObjectModel {
            EntityDescription("TQRegion", abstract: true, class: TQRegion.self) {
                AttributeDescription("code", .int16, default: 0)
            }
            EntityDescription("TQCountry", parent: "TQRegion", class: TQCountry.self) {
                AttributeDescription("capital", .string)
            }
            EntityDescription("TQContinent", parent: "TQRegion", class: TQContinent.self) {}
        }
        let container = try PersistentContainer.inMemory(model: model)
        let context = container.newContext()
        for i in 0..<6 {
            if i % 2 == 0 {
                let c = try context.insert(TQCountry.self)
                c.code = Int16(i)
                c.capital = i == 0 ? nil : "City\(i)"
            } else {
                try context.insert(TQContinent.self).code = Int16(i)
            }
        }
        try context.save()
        func ids(_ p: KuraPredicate) throws -> [String] {
            try context.fetchObjectIDs(FetchRequest<TQRegion>(entityName: "TQRegion", predicate: p)).map(\.uriRepresentation).sorted()
        }
        let isCountry = try ids(KuraPredicate(#Predicate<TQRegion> { $0 is TQCountry }, model: model))
        XCTAssertEqual(isCountry, try ids(KuraPredicate(format: "entity.name == 'TQCountry'")))
        XCTAssertEqual(isCountry.count, 3)
        let capital = try ids(KuraPredicate(#Predicate<TQRegion> { ($0 as? TQCountry)?.capital == "City2" }, model: model))
        XCTAssertEqual(capital, try ids(KuraPredicate(format: "entity.name == 'TQCountry' AND capital == 'City2'")))
        XCTAssertEqual(capital.count, 1)
        let noCapital = try ids(KuraPredicate(#Predicate<TQRegion> { ($0 as? TQCountry)?.capital == nil }, model: model))
        XCTAssertEqual(noCapital, try ids(KuraPredicate(format: "entity.name == 'TQContinent' OR capital == nil")))
        XCTAssertEqual(noCapital.count, 4)
    }
}
