// Seed 000: CoreDataManager's Event list, sorted by timeStamp descending, fed to a
// table view by an NSFetchedResultsController (fetchBatchSize 20, no sections).
// CoreDataManager's select/new/delete/deleteFrom/save are context methods in Kura;
// the controller is FetchedResultsController, its delegate the onChange closure.
// Run: swift run event-list
import Foundation
import Kura

let model = try ManagedObjectModel {
    EntityDescription("Event") { AttributeDescription("timeStamp", .date, optional: false, indexed: true) }
}
let container = try PersistentContainer.inMemory(model: model)   // "getInstance:@\"CoreDataTest\""
let context = container.newContext()
let newestFirst = [SortKey("timeStamp", ascending: false)]
func at(_ minutes: Double) -> Date { Date(timeIntervalSinceReferenceDate: 700_000_000 + minutes * 60) }

for minutes in [0.0, 5, 2, 9] {                                   // the "+" button, four times
    let event = try context.new("Event")
    event["timeStamp"] = at(minutes)
}
try context.save()
for e in try context.select("Event", sortedBy: newestFirst) { print("event at", e["timeStamp"]!) }
try context.deleteFrom("Event", at: 0, sortedBy: newestFirst)     // swipe to delete the top row
try context.save()
let recent = try context.select("Event", where: "timeStamp > %@", .date(secondsSinceReferenceDate: 700_000_000 + 60), sortedBy: newestFirst, limit: 10)
print("after deleting the newest: \(recent.count) events after the first minute")

// The table view: "fetchedResultsController:entity:@\"Event\" sort:@\"timeStamp\"".
var request = FetchRequest<ManagedObject>(entityName: "Event", sortDescriptors: newestFirst)
request.fetchBatchSize = 20
let controller = FetchedResultsController(fetchRequest: request, context: context)
@MainActor func minute(_ id: ManagedObjectID) -> String {
    do {
        guard let date = try context.existingObject(with: id).value(forKey: "timeStamp") as? Date else { return "(no time stamp)" }
        return "minute \(Int((date.timeIntervalSinceReferenceDate - 700_000_000) / 60))"
    } catch where error.code == .notFound {
        return "(gone)"
    } catch {
        return "(cannot read: \(error))"
    }
}
// controllerDidChangeContent: (a save reports its new rows once more, as
// reloads: their object IDs became permanent)
controller.onChange = { changes in
    for change in changes.changes {
        switch change {
        case .insert(let id, let p): print("  insertRows \(p)  \(minute(id))")
        case .delete(_, let p): print("  deleteRows \(p)")
        case .move(let id, let from, let to): print("  moveRow \(from) -> \(to)  \(minute(id))")
        case .update(let id, let p, _): print("  reloadRows \(p)  \(minute(id))")
        default: print("  \(change)")
        }
    }
}
try controller.performFetch()
@MainActor func show(_ title: String) {
    let rows = (controller.fetchedObjects ?? []).map { minute($0.objectID) }
    print("\(title): \(controller.sections?[0].numberOfObjects ?? 0) rows [\(rows.joined(separator: ", "))]")
}
show("table")

print("insert an event at minute 7:")
try context.new("Event")["timeStamp"] = at(7)
try context.save()
show("table")

print("edit the event at row 0 to minute 1 (it moves down):")
let top = try controller.object(at: ResultIndexPath(row: 0, section: 0))
top["timeStamp"] = at(1)
try context.save()
show("table")

print("delete row 1:")
try context.delete(try controller.object(at: ResultIndexPath(row: 1, section: 0)))
try context.save()
show("table")

print("a background context imports two events and deletes the oldest; its save is merged:")
context.automaticallyMergesChangesFromStore = true
let background = container.newContext()
for minutes in [3.0, 12] { try background.new("Event")["timeStamp"] = at(minutes) }
if let oldest = try background.select("Event", sortedBy: [SortKey("timeStamp")]).first { try background.delete(oldest) }
try background.save()
try context.mergePendingChanges()                                  // or the next fetch/save/processPendingChanges
show("table")
