// Seed 001: the OneLiner memo list, sorted by title (what NSFetchedResultsController
// fed to a table view), stored in memo.kura.
// Run: swift run oneliner-memos
import Foundation
import Kura

final class Memo: ManagedObject {
    @Managed("title") var title: String
    @Managed("created") var created: Date
    override func awakeFromInsert() { created = Date() }
}

let model = try ManagedObjectModel {
    EntityDescription("Memo", class: Memo.self) {
        AttributeDescription("title", .string, optional: false, indexed: true)
        AttributeDescription("created", .date)
    }
}
let url = FileManager.default.temporaryDirectory.appendingPathComponent("memo-\(getpid()).kura")
defer { try? FileManager.default.removeItem(at: url); try? FileManager.default.removeItem(atPath: url.path + "-wal") }
let context = try PersistentContainer(url: url, model: model).newContext()
for title in ["buy milk", "call Ann", "Backup photos", "write report"] {
    Memo(context: context).title = title
}
try context.save()
let request = FetchRequest<Memo>(entityName: "Memo", sortDescriptors: [SortKey("title", caseInsensitive: true)])
for (row, memo) in try context.fetch(request).enumerated() { print("row \(row): \(memo.title)") }   // one query for the list
