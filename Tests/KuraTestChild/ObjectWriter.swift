// The object-layer writer of ConflictTests: read-increment-save through Kura's
// contexts, to show optimistic locking across processes.
//
// Usage: KuraTestChild objects STORE POLICY COUNT
//
// COUNT times: a fresh context with merge policy POLICY fetches the one
// Account, adds 1 to its balance and saves. With `error`, a save refused with
// `mergeConflict` is retried with a fresh context until it succeeds. A cycle
// counts as applied unless its save met a conflict on the balance (a
// store-trump or rollback policy resolves that by keeping the store's value,
// dropping the increment).
// Prints "applied CONFLICTS" (conflicts met) when done. The Account model is
// repeated in Tests/KuraTests/ConflictTests.swift.

import Foundation
import Kura

func accountModel() throws -> ManagedObjectModel {
    try ManagedObjectModel {
        EntityDescription("Account") {
            AttributeDescription("balance", .int64, default: 0)
            AttributeDescription("owner", .string)
            AttributeDescription("note", .string)
        }
    }
}

func runObjectWriter(path: String, policy: MergePolicy, count: Int) -> Never {
    var options = Database.Options()
    options.busyTimeout = 60
    options.durability = .normal
    do {
        let container = try PersistentContainer(url: URL(fileURLWithPath: path), model: try accountModel(), options: options)
        var applied = 0, conflicts = 0
        for _ in 0..<count {
            var outcome = try incrementOnce(container, policy)
            while !outcome.saved {
                conflicts += 1
                outcome = try incrementOnce(container, policy)
            }
            conflicts += outcome.conflicts
            if outcome.applied { applied += 1 }
        }
        FileHandle.standardOutput.write("\(applied) \(conflicts)\n".data(using: .utf8)!)
        exit(0)
    } catch {
        FileHandle.standardError.write("child object writer: \(error)\n".data(using: .utf8)!)
        exit(1)
    }
}

/// One read-increment-save cycle in a fresh context; `saved` is false when
/// the save was refused with `mergeConflict`.
func incrementOnce(_ container: PersistentContainer, _ policy: MergePolicy) throws(KuraError) -> (saved: Bool, applied: Bool, conflicts: Int) {
    let context = container.newContext()
    context.mergePolicy = policy
    guard let account = try context.fetch(FetchRequest<ManagedObject>(entityName: "Account")).first,
          let balance = try account.value(forKey: "balance") as? Int64 else {
        throw KuraError(.notFound, "no Account to increment")
    }
    try account.setValue(balance + 1, forKey: "balance")
    do {
        try context.save()
    } catch where error.code == .mergeConflict {
        return (false, false, 0)
    }
    // With store-trump or rollback, a conflict on the balance means the
    // store's value won (it may even equal ours by coincidence): the increment
    // was dropped.
    let dropped = context.lastMergeConflicts.contains { $0.properties.contains("balance") }
    return (true, !dropped, context.lastMergeConflicts.count)
}
