// Seed 004: na_ios/coredata's filter / create / get_or_create, synchronous and
// asynchronous (work off the caller's thread, results in the caller's context), and
// performBlockOutOfOwnThread:afterSaveOnMainThread: (a background context's save
// merged into the main context before the completion runs).
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
    let mainContext = container.viewContext                       // the main-actor context

    try synchronousFlow(mainContext)

    let made = try await TestObject.create(["name": "test2"], in: mainContext)          // saved in the background
    print("created in the background, seen here:", made.name, made.objectID)
    let existing = try await TestObject.getOrCreate(["name": "test"], in: mainContext)  // returns the existing one
    print("get_or_create found the existing object:", existing.objectID)
    let all = try await TestObject.filter(["name": "test2"], in: mainContext)
    print("async filter:", all.map(\.name), "objects of the main context:", all.allSatisfy { $0.managedObjectContext === mainContext })

    try await workOutOfOwnThread(container)
}

/// na_ios's `performBlockOutOfOwnThread:afterSaveOnMainThread:`: the work runs
/// on a background context; its save is merged into the main context before
/// the completion runs, so the UI (here: printed) already shows it.
@MainActor
func workOutOfOwnThread(_ container: PersistentContainer) async throws {
    let mainContext = container.viewContext
    mainContext.automaticallyMergesChangesFromStore = true
    let shown = try TestObject.findAll(sortedBy: "name", in: mainContext)      // what the table view shows
    let ui = mainContext.observeObjectsDidChange { change in                    // the UI's observer, on the main actor
        print("UI update: inserted", change.inserted.compactMap { ($0 as? TestObject)?.name },
              "refreshed", change.refreshed.compactMap { ($0 as? TestObject)?.name })
    }
    let firstID = shown[0].objectID
    try await container.newBackgroundContext().perform { context in           // the block, off the main actor
        _ = try TestObject.create(["name": "made in the background"], in: context)
        try context.existingObject(with: firstID).setValue("renamed in the background", forKey: "name")
        try context.save()
    }
    // The completion, on the main actor: the merge has happened and the UI has heard of it.
    print("completion: the objects shown now read", shown.map(\.name))
    ui.cancel()
}

try await main()
