// Seed 001: the OneLiner memo list, sorted by title, fed to a table view by an
// NSFetchedResultsController (numberOfRowsInSection from the section info,
// cellForRowAtIndexPath from objectAtIndexPath), stored in memo.kura. Here the
// memos are also grouped in sections by their first letter, with an index.
// Run: swift run oneliner-memos
import Foundation
import Kura

final class Memo: ManagedObject {
    @Managed("title") var title: String
    @Managed("initial") var initial: String
    @Managed("created") var created: Date
    override func awakeFromInsert() { created = Date() }
}

let model = try ManagedObjectModel {
    EntityDescription("Memo", class: Memo.self) {
        AttributeDescription("title", .string, optional: false, indexed: true)
        AttributeDescription("initial", .string, optional: false)   // the section key
        AttributeDescription("created", .date)
    }
}
let url = FileManager.default.temporaryDirectory.appendingPathComponent("memo-\(getpid()).kura")
defer { try? FileManager.default.removeItem(at: url); try? FileManager.default.removeItem(atPath: url.path + "-wal") }
let container = try PersistentContainer(url: url, model: model)
let context = container.newContext()
func write(_ memo: Memo, _ title: String) {
    memo.title = title
    memo.initial = title.first.map { String($0).uppercased() } ?? ""
}
for title in ["buy milk", "call Ann", "Backup photos", "write report"] { write(Memo(context: context), title) }
try context.save()
let request = FetchRequest<Memo>(entityName: "Memo", sortDescriptors: [SortKey("title", caseInsensitive: true)])
for (row, memo) in try context.fetch(request).enumerated() { print("row \(row): \(memo.title)") }   // one query for the list

// The table view, through a controller: sections by initial (which orders like
// the first sort key, title case-insensitively), an index of initials.
let controller = FetchedResultsController(fetchRequest: request, context: context, sectionNameKeyPath: "initial")
controller.onChange = { changes in for c in changes.changes { print("  \(c)") } }
try controller.performFetch()
@MainActor func showTable() {
    for (i, section) in (controller.sections ?? []).enumerated() {          // numberOfSectionsInTableView
        let titles = section.objects.map(\.title)                          // numberOfRowsInSection, cellForRow
        print("  section \(i) \"\(section.name)\" (\(section.numberOfObjects)): \(titles.joined(separator: " | "))")
    }
    print("  index: \(controller.sectionIndexTitles.joined(separator: " "))")
}
showTable()

print("add \"clean desk\" and \"Ask Bob\":")
write(Memo(context: context), "clean desk")
write(Memo(context: context), "Ask Bob")
try context.save()
showTable()

print("edit \"write report\" to \"review report\" (same section? no: W to R):")
let report = try controller.object(at: ResultIndexPath(row: 0, section: (controller.sections?.count ?? 1) - 1))
write(report, "review report")
try context.save()
showTable()

print("delete the memo at [0, 0]:")
try context.delete(try controller.object(at: ResultIndexPath(row: 0, section: 0)))
try context.save()
showTable()

print("another context (a widget, an import) adds \"zip files\" and renames \"buy milk\"; merged here:")
let other = container.newContext()
var note: ContextDidSave?
let token = other.observeDidSave { note = $0 }
write(Memo(context: other), "zip files")
if let milk = try other.fetch(FetchRequest<Memo>(entityName: "Memo", predicate: try KuraPredicate(format: "title == 'buy milk'"))).first {
    write(milk, "buy oat milk")
}
try other.save()
token.cancel()
if let note { try context.mergeChanges(fromContextDidSave: note) }
showTable()
if let s = controller.snapshot.sections.last { print("snapshot, last section \"\(s.name)\": \(s.objectIDs.map(\.uriRepresentation))") }
