// MatchedIDs (Fetch/MatchedIDs.swift): a fetch's IDs kept as row IDs plus a
// kind (entity, temporary) per row, stored once per kind. It must give back
// exactly the IDs appended, in order, whatever the mix of kinds; and the
// public calls built on it (fetchObjectIDs, fetchResults' ids and
// objectID(at:)) must name stored and unsaved objects of every entity of a
// hierarchy as the objects themselves do.

import Foundation
import XCTest
@testable import Kura

final class MatchedIDsTests: XCTestCase {
    /// Random runs of IDs of up to four kinds (two entities, permanent and
    /// temporary, one name longer than a small string), appended one by one
    /// and all at once: both read back as the array (seeded: KURA_SEED replays).
    func testGivesBackTheIDsAppended() {
        let seed = ProcessInfo.processInfo.environment["KURA_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 0...UInt64(UInt32.max))
        print("MatchedIDsTests seed \(seed) (replay with KURA_SEED=\(seed))")
        var g = SplitMix64(state: seed)
        let names = ["Item", "AVeryLongEntityNameIndeed"]
        for round in 0..<200 {
            var ids: [ManagedObjectID] = []
            // Most rounds start with one kind for a while, so the switch to
            // per-row kinds happens after rows of the first kind.
            let kindsInRound = Int.random(in: 1...4, using: &g)
            for _ in 0..<Int.random(in: 0...60, using: &g) {
                let k = Int.random(in: 0..<kindsInRound, using: &g)
                let rowID = Int64.random(in: -1_000...Int64.max, using: &g)
                ids.append(ManagedObjectID(entity: names[k % 2], rowID: rowID, temporary: k >= 2))
            }
            var one = MatchedIDs()
            for id in ids { one.append(id) }
            let all = MatchedIDs(ids)
            XCTAssertEqual(Array(one), ids, "round \(round), seed \(seed)")
            XCTAssertEqual(Array(all), ids, "round \(round), seed \(seed)")
            XCTAssertEqual(one.count, ids.count)
            XCTAssertEqual(Array(one[one.startIndex..<one.endIndex].map(\.isTemporary)), ids.map(\.isTemporary), "round \(round), seed \(seed)")
        }
    }

    /// Stored and unsaved objects of a hierarchy: the IDs a fetch lists are
    /// the objects' own, temporary ones included, through every public call.
    func testFetchedIDsNameStoredAndUnsavedObjectsOfEveryEntity() throws {
        let container = try PersistentContainer.inMemory(model: RelationshipQueryTests.model())
        let c = container.newContext()
        for i in 0..<9 {
            let p = try c.insert(i % 3 == 0 ? "Dog" : "Pet")
            try p.setValue(Int64(i), forKey: "age")
        }
        try c.save()
        // Unsaved: a pet and a dog, each ID temporary.
        for (i, kind) in ["Pet", "Dog"].enumerated() {
            let p = try c.insert(kind)
            try p.setValue(Int64(100 + i), forKey: "age")
        }
        let request = FetchRequest<ManagedObject>(entityName: "Pet", sortDescriptors: [SortKey("age")])
        let objects = try c.fetch(request)
        XCTAssertEqual(objects.count, 11)
        XCTAssertEqual(objects.filter(\.objectID.isTemporary).count, 2)
        let want = objects.map(\.objectID)
        XCTAssertEqual(try c.fetchObjectIDs(request), want)
        XCTAssertEqual(try c.count(for: request), 11)

        // Saved only, in a fresh context: the store path, batched.
        try c.save()
        let fresh = container.newContext()
        var batched = request
        batched.fetchBatchSize = 4
        let results = try fresh.fetchResults(batched)
        let stored = try fresh.fetch(request)
        XCTAssertEqual(results.ids, stored.map(\.objectID))
        XCTAssertEqual((0..<results.count).map { results.objectID(at: $0) }, stored.map(\.objectID))
        XCTAssertEqual(results.map(\.objectID), stored.map(\.objectID))
        XCTAssertEqual(results.map(\.entity.name), stored.map(\.entity.name))
        XCTAssertEqual(Set(stored.map(\.entity.name)), ["Pet", "Dog"])
    }
}
