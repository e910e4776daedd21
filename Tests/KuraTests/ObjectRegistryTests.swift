import Foundation
import XCTest
@testable import Kura

/// The registry keeps a context's own inserted objects in an array by the
/// number in their temporary IDs (ObjectRegistry.swift): uniquing must not
/// change. Guards: an own ID found after its slot array was dropped (undo of
/// an insert, then redo after a save), IDs of other contexts, counts.
final class ObjectRegistryTests: XCTestCase {
    func testOwnIDsOtherIDsAndDroppedSlots() {
        var r = ObjectRegistry(identity: 5)
        let e = EntityDescription("E") {}
        let a = r.newTemporaryID("E"), b = r.newTemporaryID("E")
        XCTAssertTrue(a.isTemporary && b.isTemporary)
        XCTAssertNotEqual(a, b)
        let oa = ManagedObject(entity: e, objectID: a), ob = ManagedObject(entity: e, objectID: b)
        r[a] = .passUnretained(oa)
        r[b] = .passUnretained(ob)
        XCTAssertEqual(r.count, 2)
        XCTAssertTrue(r[a]?.takeUnretainedValue() === oa)
        XCTAssertTrue(r[b]?.takeUnretainedValue() === ob)

        // Another context's temporary ID with the same number is not ours.
        var other = ObjectRegistry(identity: 6)
        let foreign = other.newTemporaryID("E")
        XCTAssertNil(r[foreign])
        let of = ManagedObject(entity: e, objectID: foreign)
        r[foreign] = .passUnretained(of)
        XCTAssertTrue(r[foreign]?.takeUnretainedValue() === of)
        XCTAssertEqual(r.count, 3)

        // Dropping both own objects drops the array; putting one back (undo's
        // redo) still finds it.
        r[a] = nil
        r[b] = nil
        XCTAssertNil(r[a])
        XCTAssertEqual(r.count, 1)
        r[b] = .passUnretained(ob)
        XCTAssertTrue(r[b]?.takeUnretainedValue() === ob)
        XCTAssertEqual(r.count, 2)
        XCTAssertEqual(Set(r.values.map { ObjectIdentifier($0.takeUnretainedValue()) }), [ObjectIdentifier(ob), ObjectIdentifier(of)])

        // A leaving object drops only its own entry (in the array and in the dictionary).
        let stranger = ManagedObject(entity: e, objectID: b)
        r.remove(b, ifItIs: stranger)
        XCTAssertTrue(r[b]?.takeUnretainedValue() === ob, "another object's leaving does not drop the entry")
        r.remove(foreign, ifItIs: stranger)
        XCTAssertTrue(r[foreign]?.takeUnretainedValue() === of)
        r.remove(foreign, ifItIs: of)
        XCTAssertNil(r[foreign])
        r[foreign] = .passUnretained(of)
        withExtendedLifetime(stranger) {}

        // New numbers after the drop go to the array again.
        let c = r.newTemporaryID("E")
        let oc = ManagedObject(entity: e, objectID: c)
        r[c] = .passUnretained(oc)
        XCTAssertTrue(r[c]?.takeUnretainedValue() === oc)
        XCTAssertEqual(r.count, 3)
        r.removeAll()
        XCTAssertEqual(r.count, 0)
        XCTAssertNil(r[b])
        XCTAssertNil(r[c])

        // A context whose identity does not fit makes process-wide IDs.
        var big = ObjectRegistry(identity: 1 << 40)
        let p = big.newTemporaryID("E")
        XCTAssertTrue(p.isTemporary && p.rowID < 0)
        let op = ManagedObject(entity: e, objectID: p)
        big[p] = .passUnretained(op)
        XCTAssertTrue(big[p]?.takeUnretainedValue() === op)
        withExtendedLifetime((oa, ob, oc, of, op)) {}
    }

    func testUniquingByTemporaryAndPermanentIDsThroughSaves() throws {
        let container = try PersistentContainer.inMemory(model: companyModel())
        let context = container.newContext()
        var objects: [Company] = []
        for i in 0..<500 {
            let c = try context.insert(Company.self)
            c.name = "c\(i)"
            objects.append(c)
        }
        for c in objects.shuffled().prefix(50) {
            XCTAssertTrue(try context.object(with: c.objectID) === c)
        }
        XCTAssertEqual(context.registeredObjectCount, 500)
        let temporary = objects.map(\.objectID)
        try context.save()
        for (c, old) in zip(objects, temporary) {
            XCTAssertFalse(c.objectID.isTemporary)
            XCTAssertTrue(try context.object(with: c.objectID) === c)
            XCTAssertThrowsError(try context.object(with: old), "the temporary ID of a saved object names nothing in this context")
        }
        // Inserts after a save, a rollback, and inserts again.
        let later = try context.insert(Company.self)
        XCTAssertTrue(try context.object(with: later.objectID) === later)
        context.rollback()
        XCTAssertNil(later.managedObjectContext)
        let again = try context.insert(Company.self)
        again.name = "again"
        XCTAssertTrue(try context.object(with: again.objectID) === again)
        XCTAssertEqual(context.registeredObjectCount, 501)
        try context.save()
        XCTAssertEqual(try context.count(for: FetchRequest<Company>(entityName: "Company")), 501)
    }
}
