import Foundation
import Kura

// A company model that exercises every feature: ordered to-many with cascade,
// one-to-one with cascade, many-to-many, deny, uniqueness, defaults, every type.

final class Company: ManagedObject {
    @Managed("name") var name: String
    @ToMany("departments") var departments: [Department]
}

final class Department: ManagedObject {
    @Managed("name") var name: String
    @ToOne("company") var company: Company?
    @ToMany("employees") var employees: [Employee]
}

final class Employee: ManagedObject {
    @Managed("name") var name: String
    @Managed("salary") var salary: Double
    @Managed("level") var level: Int16
    @Managed("hired") var hired: Date?
    @Managed("identifier") var identifier: UUID?
    @Managed("email") var email: String?
    @Managed("homepage") var homepage: URL?
    @Managed("photo") var photo: Data?
    @Managed("active") var active: Bool
    @Managed("bonus") var bonus: Decimal?
    @Managed("ratio") var ratio: Float
    @Managed("badgeCount") var badgeCount: Int32
    @Managed("serial") var serial: Int64
    @ToOne("department") var department: Department?
    @ToOne("badge") var badge: Badge?
    @ToMany("projects") var projects: [Project]

    override func awakeFromInsert() {
        identifier = UUID()
    }
}

final class Badge: ManagedObject {
    @Managed("code") var code: String
    @ToOne("owner") var owner: Employee?
}

final class Project: ManagedObject {
    @Managed("title") var title: String
    @ToMany("members") var members: [Employee]
    @ToMany("notes") var notes: [Note]
}

final class Note: ManagedObject {
    @Managed("text") var text: String
}

func companyModel() throws -> ManagedObjectModel {
    try ManagedObjectModel {
        EntityDescription("Company", class: Company.self) {
            AttributeDescription("name", .string, optional: false)
            RelationshipDescription("departments", to: "Department", inverse: "company", toMany: true, deleteRule: .cascade)
        }
        EntityDescription("Department", class: Department.self) {
            AttributeDescription("name", .string, optional: false, indexed: true)
            RelationshipDescription("company", to: "Company", inverse: "departments")
            RelationshipDescription("employees", to: "Employee", inverse: "department", toMany: true, ordered: true, deleteRule: .cascade)
        }
        EntityDescription("Employee", class: Employee.self) {
            AttributeDescription("name", .string, optional: false, indexed: true)
            AttributeDescription("salary", .double, default: 0.0)
            AttributeDescription("level", .int16, default: 1)
            AttributeDescription("hired", .date)
            AttributeDescription("identifier", .uuid)
            AttributeDescription("email", .string)
            AttributeDescription("homepage", .url)
            AttributeDescription("photo", .data)
            AttributeDescription("active", .bool, default: true)
            AttributeDescription("bonus", .decimal)
            AttributeDescription("ratio", .float, default: 0.5)
            AttributeDescription("badgeCount", .int32, default: 0)
            AttributeDescription("serial", .int64, default: 0)
            UniqueConstraint("email")
            RelationshipDescription("department", to: "Department", inverse: "employees")
            RelationshipDescription("badge", to: "Badge", inverse: "owner", deleteRule: .cascade)
            RelationshipDescription("projects", to: "Project", inverse: "members", toMany: true)
        }
        EntityDescription("Badge", class: Badge.self) {
            AttributeDescription("code", .string)
            RelationshipDescription("owner", to: "Employee", inverse: "badge")
        }
        EntityDescription("Project", class: Project.self) {
            AttributeDescription("title", .string)
            RelationshipDescription("members", to: "Employee", inverse: "projects", toMany: true, maxCount: 5)
            RelationshipDescription("notes", to: "Note", toMany: true, deleteRule: .deny)
        }
        EntityDescription("Note", class: Note.self) {
            AttributeDescription("text", .string)
        }
    }
}

/// A fresh temporary directory, removed on deinit.
final class TempDir {
    let url: URL
    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("kura-objects-" + UUID().uuidString)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(at: url) }
}
