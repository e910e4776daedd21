import Foundation
import XCTest
import Kura

/// Random edits by two contexts to the same objects, the second saving with
/// a random merge policy, checked against the policies' documented rules
/// (issue 10: lost updates). Prints its seed; KURA_SEED=<n> replays one.
final class MergePolicyRandomTests: XCTestCase {
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Item") {
                AttributeDescription("a", .int64)
                AttributeDescription("b", .int64)
                AttributeDescription("tag", .string)
                RelationshipDescription("owner", to: "Person", inverse: "items")
            }
            EntityDescription("Person") {
                AttributeDescription("name", .string)
                RelationshipDescription("items", to: "Item", inverse: "owner", toMany: true)
            }
        }
    }

    /// An item's properties: a, b, tag, and the owner's index (-1 for none).
    typealias State = [Int]

    func testRandomEditsResolveAsThePoliciesSay() throws {
        let seed = ProcessInfo.processInfo.environment["KURA_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 0...UInt64(UInt32.max))
        print("MergePolicyRandomTests seed \(seed) (replay with KURA_SEED=\(seed))")
        var rng = SplitMix64(state: seed)
        let container = try PersistentContainer.inMemory(model: Self.model())
        for round in 0..<60 {
            let policy = MergePolicy.allCases[Int(rng.next() % 5)]
            let setup = container.newContext()
            let people = try (0..<3).map { i -> ManagedObject in
                let p = try setup.insert("Person")
                try p.setValue("p\(i)", forKey: "name")
                return p
            }
            let count = 1 + Int(rng.next() % 3)
            var original: [State] = []
            var made: [ManagedObject] = []
            for _ in 0..<count {
                let s = [Int(rng.next() % 3), Int(rng.next() % 3), Int(rng.next() % 3), Int(rng.next() % 4) - 1]
                let item = try setup.insert("Item")
                try write(s, to: item, people: people)
                original.append(s)
                made.append(item)
            }
            try setup.save()
            let ids = made.map(\.objectID)
            let personIDs = people.map(\.objectID)

            // Context A edits and saves first; context B edits, then saves with `policy`.
            let a = container.newContext(), b = container.newContext()
            b.mergePolicy = policy
            let itemsA = try ids.map { try a.existingObject(with: $0) }
            let itemsB = try ids.map { try b.existingObject(with: $0) }
            var stateA = original, stateB = original
            for i in 0..<count {
                stateA[i] = edit(original[i], &rng)
                stateB[i] = edit(original[i], &rng)
                try write(stateA[i], to: itemsA[i], people: try personIDs.map { try a.existingObject(with: $0) }, only: original[i])
                try write(stateB[i], to: itemsB[i], people: try personIDs.map { try b.existingObject(with: $0) }, only: original[i])
            }
            try a.save()

            var expected = stateA
            var refused = false
            for i in 0..<count {
                let changedA = stateA[i] != original[i], changedB = stateB[i] != original[i]
                guard changedB else { continue }  // B writes nothing for it
                guard changedA else { expected[i] = stateB[i]; continue }  // no conflict
                switch policy {
                case .error: refused = true
                case .rollback: break
                case .overwrite: expected[i] = stateB[i]
                case .mergeByPropertyStoreTrump:
                    expected[i] = (0..<4).map { p in stateA[i][p] != original[i][p] ? stateA[i][p] : stateB[i][p] }
                case .mergeByPropertyObjectTrump:
                    expected[i] = (0..<4).map { p in stateB[i][p] != original[i][p] ? stateB[i][p] : stateA[i][p] }
                }
            }
            let context = "seed \(seed) round \(round) policy \(policy): original \(original), A \(stateA), B \(stateB)"
            if refused {
                XCTAssertThrowsError(try b.save(), context) { err in XCTAssertEqual((err as? KuraError)?.code, .mergeConflict, context) }
                expected = stateA
            } else {
                XCTAssertNoThrow(try b.save(), context)
                for i in 0..<count where stateB[i] != original[i] {
                    XCTAssertEqual(try read(itemsB[i], personIDs), expected[i], "the context shows what was saved, item \(i): " + context)
                }
            }
            let check = container.newContext()
            XCTAssertEqual(try ids.map { try read(try check.existingObject(with: $0), personIDs) }, expected, "the store: " + context)
            if testRun?.failureCount ?? 0 > 0 { return }
        }
    }

    /// A random edit: each property kept or set to a random value (maybe the same).
    func edit(_ s: State, _ rng: inout SplitMix64) -> State {
        var out = s
        for p in 0..<4 where rng.next() % 2 == 0 {
            out[p] = p == 3 ? Int(rng.next() % 4) - 1 : Int(rng.next() % 3)
        }
        return out
    }

    /// Sets an item's properties (those that differ from `only`, if given).
    func write(_ s: State, to item: ManagedObject, people: [ManagedObject], only: State? = nil) throws {
        for p in 0..<4 where only == nil || only?[p] != s[p] {
            switch p {
            case 0: try item.setValue(Int64(s[0]), forKey: "a")
            case 1: try item.setValue(Int64(s[1]), forKey: "b")
            case 2: try item.setValue("t\(s[2])", forKey: "tag")
            default: try item.setValue(s[3] < 0 ? nil : people[s[3]], forKey: "owner")
            }
        }
    }

    func read(_ item: ManagedObject, _ people: [ManagedObjectID]) throws -> State {
        let a = try item.value(forKey: "a") as? Int64, b = try item.value(forKey: "b") as? Int64
        let tag = try item.value(forKey: "tag") as? String
        let owner = try item.value(forKey: "owner") as? ManagedObject
        return [Int(a ?? -9), Int(b ?? -9), Int(tag?.dropFirst() ?? "") ?? -9, owner.flatMap { o in people.firstIndex(of: o.objectID) } ?? -1]
    }
}
