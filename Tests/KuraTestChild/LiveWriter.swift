// The other process of CrossProcessMergeTests: saves what the parent asks,
// through Kura's contexts, so the parent can watch the saves arrive.
//
// Usage: KuraTestChild live STORE history|plain
//
// Reads commands from stdin, one a line, and answers each on stdout once its
// save committed:
//   insert TITLE        inserts an Item (stamp = now), answers its object ID
//                       (URI representation)
//   update ID TITLE     sets the Item's title and stamp (= now, seconds since
//                       1970, taken just before the save), answers "ok"
//   delete ID           deletes the Item, answers "ok"
// Exits 0 at end of input. With `history`, its container tracks persistent
// history. The Item model is repeated in Tests/KuraTests/CrossProcessMergeTests.swift.

import Foundation
import Kura

func itemModel() throws -> ManagedObjectModel {
    try ManagedObjectModel {
        EntityDescription("Item") {
            AttributeDescription("title", .string)
            AttributeDescription("stamp", .double, default: 0.0)
        }
    }
}

func runLiveWriter(path: String, history: Bool) -> Never {
    var options = Database.Options()
    options.busyTimeout = 60
    options.durability = .normal
    do {
        let container = try PersistentContainer(url: URL(fileURLWithPath: path), model: try itemModel(), options: options,
                                                persistentHistoryTracking: history)
        while let line = readLine() {
            let parts = line.split(separator: " ", maxSplits: 2).map(String.init)
            let context = container.newContext()
            context.transactionAuthor = "child"
            var answer = "ok"
            switch (parts.first, parts.count) {
            case ("insert", 2):
                let o = try context.insert("Item")
                try o.setValue(parts[1], forKey: "title")
                try o.setValue(Date().timeIntervalSince1970, forKey: "stamp")
                try context.save()
                answer = o.objectID.uriRepresentation
            case ("update", 3):
                let o = try context.existingObject(with: try ManagedObjectID(uriRepresentation: parts[1]))
                try o.setValue(parts[2], forKey: "title")
                try o.setValue(Date().timeIntervalSince1970, forKey: "stamp")
                try context.save()
            case ("delete", 2):
                try context.delete(try context.existingObject(with: try ManagedObjectID(uriRepresentation: parts[1])))
                try context.save()
            default:
                throw KuraError(.invalidArgument, "unknown command \(line)")
            }
            FileHandle.standardOutput.write("\(answer)\n".data(using: .utf8)!)  // unbuffered write(2)
        }
        exit(0)
    } catch {
        FileHandle.standardError.write("child live writer: \(error)\n".data(using: .utf8)!)
        exit(1)
    }
}
