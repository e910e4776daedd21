// Seed 004: na_ios/coredata's filter / create / get_or_create, synchronous and
// asynchronous (work off the caller's thread, results in the caller's context).
// Run: swift run na-filter-create
import Foundation
import Kura

final class TestObject: ManagedObject {
    @Managed("name") var name: String
}

/// The synchronous calls (from synchronous code, Swift picks these overloads).
func synchronousFlow(_ context: ManagedObjectContext) throws {
    _ = try TestObject.create(["name": "test"], in: context)
    try context.save()
    print("filter name == test:", try TestObject.filter(["name": "test"], in: context).map(\.name))
    let again = try TestObject.getOrCreate(["name": "test"], in: context)
    print("get_or_create returned the existing object:", again.objectID, "count:", try TestObject.countOfEntities(in: context))
}

@MainActor
func main() async throws {
    let model = try ManagedObjectModel {
        EntityDescription("TestObject", class: TestObject.self) { AttributeDescription("name", .string, indexed: true) }
    }
    let container = try PersistentContainer.inMemory(model: model)
    let mainContext = container.newContext()                      // the "main thread" context

    try synchronousFlow(mainContext)

    let made = try await TestObject.create(["name": "test2"], in: mainContext)          // saved in the background
    print("created in the background, seen here:", made.name, made.objectID)
    let existing = try await TestObject.getOrCreate(["name": "test"], in: mainContext)  // returns the existing one
    print("get_or_create found the existing object:", existing.objectID)
    let all = try await TestObject.filter(["name": "test2"], in: mainContext)
    print("async filter:", all.map(\.name), "objects of the main context:", all.allSatisfy { $0.managedObjectContext === mainContext })
}

try await main()
