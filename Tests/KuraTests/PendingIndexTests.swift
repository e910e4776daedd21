import Foundation
import XCTest
import Kura

/// Fetches in a context with many unsaved objects narrow the pending objects
/// through equality indexes (PendingIndex.swift, issue 15's quadratic
/// find-or-create). The index must never change an answer: random edits of
/// pending objects (inserts, changes, deletes, undo, rollback, save) with
/// fetches by `attr == value` and `attr IN {values}` compared with the same
/// question asked in a form the index cannot use (`NOT (attr != value)`,
/// `NOT (NOT (attr IN {values}))`).
/// Prints its seed; KURA_SEED=<n> replays one.
final class PendingIndexTests: XCTestCase {
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Country") {
                AttributeDescription("code", .string, indexed: true)
                AttributeDescription("rank", .int64)
                AttributeDescription("area", .double)
                AttributeDescription("flag", .bool)
            }
        }
    }

    func testIndexedPendingFetchesMatchUnindexedOnes() throws {
        let seed = ProcessInfo.processInfo.environment["KURA_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 0...UInt64(UInt32.max))
        print("PendingIndexTests seed \(seed) (replay with KURA_SEED=\(seed))")
        var rng = SplitMix64(state: seed)
        func rand(_ n: Int) -> Int { Int(rng.next() % UInt64(n)) }
        let container = try PersistentContainer.inMemory(model: Self.model())
        let c = container.newContext()
        c.undoManager = ContextUndoManager()
        let codes = ["fr", "de", "FR", "it", "es"]
        var objects: [ManagedObject] = []
        for step in 0..<600 {
            switch rand(20) {
            case 0..<6:
                let o = try c.insert("Country")
                try o.setValue(codes[rand(codes.count)], forKey: "code")
                try o.setValue(Int64(rand(4)), forKey: "rank")
                try o.setValue(Double(rand(3)) / 2, forKey: "area")
                try o.setValue(rand(2) == 0, forKey: "flag")
                objects.append(o)
            case 6..<11:
                guard let o = objects.randomElement(using: &rng), o.managedObjectContext === c, !o.isDeleted else { break }
                switch rand(4) {
                case 0: try o.setValue(rand(5) == 0 ? nil : codes[rand(codes.count)], forKey: "code")
                case 1: try o.setValue(Int64(rand(4)), forKey: "rank")
                case 2: try o.setValue(Double(rand(3)) / 2, forKey: "area")
                default: try o.setValue(rand(2) == 0, forKey: "flag")
                }
            case 11:
                if let o = objects.randomElement(using: &rng), o.managedObjectContext === c, !o.isDeleted { try c.delete(o) }
            case 12:
                c.undoLastChange()
            case 13:
                if rand(3) == 0 { try c.save() } else { c.rollback() }
                objects = objects.filter { $0.managedObjectContext === c && !$0.isDeleted }
            default:
                let (key, value): (String, PredicateArgument) = [
                    ("code", .text(codes[rand(codes.count)])), ("rank", .integer(rand(4))),
                    ("area", .double(Double(rand(3)) / 2)), ("rank", .double(Double(rand(4)))), ("area", .integer(rand(2))),
                    ("flag", .value(.bool(rand(2) == 0))),
                ][rand(6)]
                let indexed = try c.fetchObjectIDs(FetchRequest<ManagedObject>(entityName: "Country", predicate: KuraPredicate(format: "%K == %@", .keyPath(key), value)))
                let plain = try c.fetchObjectIDs(FetchRequest<ManagedObject>(entityName: "Country", predicate: KuraPredicate(format: "NOT (%K != %@)", .keyPath(key), value)))
                XCTAssertEqual(indexed, plain, "step \(step): \(key) == \(value) (seed \(seed))")
                if indexed != plain { return }
                // `key IN {members}` (the union of the members' buckets)
                // against the same list behind two NOTs (not indexed);
                // members of other kinds or null keep the index out.
                let inKey = ["code", "rank", "area", "flag"][rand(4)]
                let members: [PredicateArgument] = (0..<rand(6)).map { _ in
                    if rand(12) == 0 { return nil }
                    switch inKey {
                    case "code": return .text(codes[rand(codes.count)])
                    case "rank": return rand(6) == 0 ? .double(Double(rand(4))) : .integer(rand(4))
                    case "area": return rand(4) == 0 ? .integer(rand(2)) : .double(Double(rand(3)) / 2)
                    default: return .value(.bool(rand(2) == 0))
                    }
                }
                let inIndexed = try c.fetchObjectIDs(FetchRequest<ManagedObject>(entityName: "Country", predicate: KuraPredicate(format: "%K IN %@", .keyPath(inKey), .list(members))))
                let inPlain = try c.fetchObjectIDs(FetchRequest<ManagedObject>(entityName: "Country", predicate: KuraPredicate(format: "NOT (NOT (%K IN %@))", .keyPath(inKey), .list(members))))
                XCTAssertEqual(inIndexed, inPlain, "step \(step): \(inKey) IN \(members) (seed \(seed))")
                if inIndexed != inPlain { return }
                // A case-insensitive equality is not indexed, and still right.
                let folded = try c.count(for: FetchRequest<ManagedObject>(entityName: "Country", predicate: KuraPredicate(format: "code ==[c] 'fr'")))
                let byHand = try c.fetch(FetchRequest<ManagedObject>(entityName: "Country")).filter { ($0["code"] as? String)?.lowercased() == "fr" }.count
                XCTAssertEqual(folded, byHand, "step \(step) (seed \(seed))")
            }
        }
    }
}
