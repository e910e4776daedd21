import Foundation
import XCTest
@testable import Kura

/// ToOneKeys (an object's to-one targets by name, a short list instead of a
/// dictionary) must behave as the dictionary it replaced: lookups, replacing,
/// removing, equality regardless of order, iteration.
final class ToOneKeysTests: XCTestCase {
    /// Long random runs against a Dictionary (seeded: KURA_SEED replays):
    /// sets, replacements and removals over a few names (some longer than a
    /// small string's 15 bytes), then equality between lists built in other
    /// orders, and with one value or one name changed.
    func testAgainstADictionary() {
        var g = SplitMix64(state: testSeed("ToOneKeysTests"))
        let names = ["a", "record", "owner", "a_rather_long_relationship_name", "b", "courses"]
        for _ in 0..<200 {
            var keys = ToOneKeys()
            var model: [String: ManagedObjectID] = [:]
            for _ in 0..<40 {
                let name = names[Int.random(in: 0..<names.count, using: &g)]
                let id = ManagedObjectID(entity: Bool.random(using: &g) ? "E" : "F", rowID: Int64.random(in: 1...4, using: &g))
                if Int.random(in: 0..<4, using: &g) == 0 {
                    keys[name] = nil
                    model[name] = nil
                } else {
                    keys[name] = id
                    model[name] = id
                }
                for n in names { XCTAssertEqual(keys[n], model[n], n) }
                XCTAssertEqual(keys.count, model.count)
                XCTAssertEqual(keys.isEmpty, model.isEmpty)
            }
            // Iteration yields each entry once.
            var seen: [String: ManagedObjectID] = [:]
            for (k, v) in keys {
                XCTAssertNil(seen[k], "\(k) twice")
                seen[k] = v
            }
            XCTAssertEqual(seen, model)
            // The same entries set in another order are equal; one changed value or name is not.
            var other = ToOneKeys()
            for (k, v) in model.shuffled(using: &g) { other[k] = v }
            XCTAssertEqual(keys, other)
            if let (k, v) = model.first {
                var changed = other
                changed[k] = ManagedObjectID(entity: v.entityName, rowID: v.rowID + 10)
                XCTAssertNotEqual(keys, changed)
                var renamed = other
                renamed[k] = nil
                renamed[k + "x"] = v
                XCTAssertNotEqual(keys, renamed)
                var shorter = other
                shorter[k] = nil
                XCTAssertNotEqual(keys, shorter)
                XCTAssertNotEqual(shorter, keys)
            }
        }
    }

    /// The one-entry initializer a loaded row uses equals the same entry set by name.
    func testOneEntryInitializer() {
        let id = ManagedObjectID(entity: "Record", rowID: 7)
        var set = ToOneKeys()
        set["record"] = id
        XCTAssertEqual(ToOneKeys("record", id), set)
        XCTAssertEqual(ToOneKeys("record", id)["record"], id)
        XCTAssertNil(ToOneKeys("record", id)["student"])
        XCTAssertNotEqual(ToOneKeys("record", id), ToOneKeys())
    }
}
