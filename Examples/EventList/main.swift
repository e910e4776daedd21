// Seed 000: CoreDataManager's Event list, sorted by timeStamp descending.
// CoreDataManager's select/new/delete/deleteFrom/save are context methods in Kura.
// Run: swift run event-list
import Foundation
import Kura

let model = try ManagedObjectModel {
    EntityDescription("Event") { AttributeDescription("timeStamp", .date, optional: false, indexed: true) }
}
let container = try PersistentContainer.inMemory(model: model)   // "getInstance:@\"CoreDataTest\""
let context = container.newContext()
let newestFirst = [SortKey("timeStamp", ascending: false)]

for minutes in [0.0, 5, 2, 9] {                                   // the "+" button, four times
    let event = try context.new("Event")
    event["timeStamp"] = Date(timeIntervalSinceReferenceDate: 700_000_000 + minutes * 60)
}
try context.save()
for e in try context.select("Event", sortedBy: newestFirst) { print("event at", e["timeStamp"]!) }
try context.deleteFrom("Event", at: 0, sortedBy: newestFirst)     // swipe to delete the top row
try context.save()
let recent = try context.select("Event", where: "timeStamp > %@", .date(secondsSinceReferenceDate: 700_000_000 + 60), sortedBy: newestFirst, limit: 10)
print("after deleting the newest: \(recent.count) events after the first minute")
