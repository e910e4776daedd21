import Foundation
import XCTest
import Kura

/// A `@ToOne` write goes straight to the relationship (no `Any?` box,
/// PropertyWrappers.swift) with the outcome of `object["key"] = target`:
/// the inverse kept in step, observers told, a rejected target not applied
/// and reported by the next save.
final class TypedToOneSetterTests: XCTestCase {
    func testTypedToOneWritesMatchSubscriptWrites() throws {
        let container = try PersistentContainer.inMemory(model: companyModel())
        let c = container.newContext()
        let d1 = Department(context: c), d2 = Department(context: c)
        d1.name = "one"
        d2.name = "two"
        let e = Employee(context: c)
        e.name = "ann"
        e.department = d1
        XCTAssertTrue(e.department === d1)
        XCTAssertEqual(d1.employees.map(\.name), ["ann"], "the inverse (ordered to-many) follows")
        e.department = d2
        XCTAssertEqual(d1.employees.count, 0)
        XCTAssertEqual(d2.employees.map(\.name), ["ann"])
        try c.save()
        c.processPendingChanges()

        // Observers hear both sides of a typed write, as for a subscript write.
        var updated: [String: Set<String>] = [:]
        let observation = c.observeObjectsDidChange { note in
            for o in note.updated { updated[(o["name"] as? String) ?? "?", default: []].formUnion(note.changedKeys(of: o)) }
        }
        e.department = d1
        c.processPendingChanges()
        XCTAssertEqual(updated["ann"], ["department"])
        XCTAssertEqual(updated["one"], ["employees"])
        XCTAssertEqual(updated["two"], ["employees"])
        _ = observation

        // One-to-one: the old partner is unhooked.
        let b = Badge(context: c)
        b.code = "b1"
        e.badge = b
        XCTAssertTrue(b.owner === e)
        let f = Employee(context: c)
        f.name = "bob"
        f.badge = b
        XCTAssertNil(e.badge)
        XCTAssertTrue(b.owner === f)
        f.badge = nil
        XCTAssertNil(b.owner)

        // A target of another context is not applied; the next save throws.
        let other = container.newContext()
        let foreign = Department(context: other)
        foreign.name = "elsewhere"
        e.department = foreign
        XCTAssertTrue(e.department === d1, "the rejected write changed nothing")
        XCTAssertThrowsError(try c.save()) { error in
            // As for a rejected subscript write: save's validation reports it.
            XCTAssertEqual((error as? KuraError)?.code, .validation, "\(error)")
            XCTAssertTrue("\(error)".contains("another context"), "\(error)")
        }
    }
}
