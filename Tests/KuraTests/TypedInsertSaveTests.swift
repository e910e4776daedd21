import Foundation
import XCTest
@testable import Kura

/// A class whose typed properties take the setters' fast path for new
/// objects (non-optional scalar types) and the general path (optionals).
final class InsertSample: ManagedObject {
    @Managed("text") var text: String
    @Managed("optionalText") var optionalText: String?
    @Managed("big") var big: Int64
    @Managed("optionalBig") var optionalBig: Int64?
    @Managed("medium") var medium: Int32
    @Managed("small") var small: Int16
    @Managed("real") var real: Double
    @Managed("optionalReal") var optionalReal: Double?
    @Managed("flag") var flag: Bool
    @Managed("when") var when: Date
}

/// Inserting objects through typed properties and saving them: the setters
/// write an inserted object's slot in place while nothing watches it
/// (ManagedObject.setDirectStored), validation skips the model's rules for
/// an entity without any (Context+Save.swift), and saving leaves objects
/// clean. What is saved, what observers hear, undo and pending indexes must
/// be as through the general path.
final class TypedInsertSaveTests: XCTestCase {
    /// InsertSample's entity, with `Strict` (a required attribute) beside it if `strict`.
    private func model(strict: Bool = false) throws -> ManagedObjectModel {
        let sample = EntityDescription("InsertSample", class: InsertSample.self) {
            AttributeDescription("text", .string)
            AttributeDescription("optionalText", .string)
            AttributeDescription("big", .int64)
            AttributeDescription("optionalBig", .int64)
            AttributeDescription("medium", .int32)
            AttributeDescription("small", .int16)
            AttributeDescription("real", .double)
            AttributeDescription("optionalReal", .double)
            AttributeDescription("flag", .bool)
            AttributeDescription("when", .date)
        }
        let strictEntity = EntityDescription("Strict") {
            AttributeDescription("name", .string, optional: false)
        }
        return try ManagedObjectModel(strict ? [strictEntity, sample] : [sample])
    }

    private struct Expected: Equatable {
        var text = "", optionalText: String?, big: Int64 = 0, optionalBig: Int64?, medium: Int32 = 0, small: Int16 = 0
        var real = 0.0, optionalReal: Double?, flag = false, when = Date(timeIntervalSinceReferenceDate: 0)
    }

    /// Random values (and random nils for the optional properties), some
    /// set twice, saved in one insert-only save (or several), then read in
    /// a new context.
    func testTypedInsertsOfEveryTypeReadBackInANewContext() throws {
        let seed = testSeed("testTypedInsertsOfEveryTypeReadBackInANewContext")
        var g = SplitMix64(state: seed)
        let container = try PersistentContainer.inMemory(model: model())
        let context = container.newContext()
        var objects: [(InsertSample, Expected)] = []
        let saves = Int.random(in: 1...3, using: &g)
        for _ in 0..<saves {
            for _ in 0..<Int.random(in: 1...300, using: &g) {
                let o = InsertSample(context: context)
                var e = Expected()
                for _ in 0..<Int.random(in: 1...2, using: &g) {
                    e.text = "t\(g.next() % 10_000)" + (Bool.random(using: &g) ? String(repeating: "x", count: 30) : "")
                    o.text = e.text
                    e.optionalText = Bool.random(using: &g) ? nil : "o\(g.next() % 100)"
                    o.optionalText = e.optionalText
                    e.big = Int64(bitPattern: g.next())
                    o.big = e.big
                    e.optionalBig = Bool.random(using: &g) ? nil : Int64(bitPattern: g.next())
                    o.optionalBig = e.optionalBig
                    e.medium = Int32(truncatingIfNeeded: g.next())
                    o.medium = e.medium
                    e.small = Int16(truncatingIfNeeded: g.next())
                    o.small = e.small
                    e.real = Double(Int64(bitPattern: g.next() >> 12)) / 7
                    o.real = e.real
                    e.optionalReal = Bool.random(using: &g) ? nil : Double(g.next() % 1000) / 8
                    o.optionalReal = e.optionalReal
                    e.flag = Bool.random(using: &g)
                    o.flag = e.flag
                    e.when = Date(timeIntervalSinceReferenceDate: Double(g.next() % 1_000_000))
                    o.when = e.when
                }
                XCTAssertEqual(Self.read(o), e, "the object reads what was set")
                objects.append((o, e))
            }
            try context.save()
            XCTAssertFalse(context.hasChanges)
            for (o, e) in objects {
                XCTAssertFalse(o.hasChanges, "saved objects are clean")
                XCTAssertEqual(Self.read(o), e)
            }
        }
        let fresh = container.newContext()
        for (o, e) in objects {
            guard let f = try fresh.existingObject(with: o.objectID) as? InsertSample else { return XCTFail("\(o.objectID) is not an InsertSample") }
            XCTAssertEqual(Self.read(f), e, "\(o.objectID) reads back what was set (seed \(seed))")
            // A nil optional was saved as null, not as the zero value.
            XCTAssertEqual(try f.value(forKey: "optionalBig") as? Int64, e.optionalBig)
        }
    }

    private static func read(_ o: InsertSample) -> Expected {
        Expected(text: o.text, optionalText: o.optionalText, big: o.big, optionalBig: o.optionalBig, medium: o.medium, small: o.small,
                 real: o.real, optionalReal: o.optionalReal, flag: o.flag, when: o.when)
    }

    /// Observers hear exactly the inserted objects as inserted (no update)
    /// for sets in the batch of their insert, and a set after that batch
    /// was posted as an update with its key; the did-save lists them all.
    func testNotificationsOfTypedInsertsAreExact() throws {
        let container = try PersistentContainer.inMemory(model: model())
        let context = container.newContext()
        var batches: [ContextObjectsDidChange] = []
        let token = context.observeObjectsDidChange { batches.append($0) }
        var saved: [ContextDidSave] = []
        let saveToken = context.observeDidSave { saved.append($0) }
        defer { token.cancel(); saveToken.cancel() }
        var objects: [InsertSample] = []
        for i in 0..<50 {
            let o = InsertSample(context: context)
            o.text = "n\(i)"
            o.big = Int64(i)
            o.real = Double(i)
            objects.append(o)
        }
        context.processPendingChanges()
        XCTAssertEqual(batches.count, 1)
        XCTAssertEqual(batches.first.map { Set($0.inserted.map(ObjectIdentifier.init)) }, Set(objects.map(ObjectIdentifier.init)))
        XCTAssertEqual(batches.first?.inserted.count, 50)
        XCTAssertEqual(batches.first?.updated.count, 0)
        // The batch was posted: a set now is an update of that key.
        objects[3].big = 300
        context.processPendingChanges()
        XCTAssertEqual(batches.count, 2)
        XCTAssertEqual(batches.last?.inserted.count, 0)
        XCTAssertEqual(batches.last?.updated.map(ObjectIdentifier.init), [ObjectIdentifier(objects[3])])
        XCTAssertEqual(batches.last?.changedKeys(of: objects[3]), ["big"])
        try context.save()
        XCTAssertEqual(saved.count, 1)
        XCTAssertEqual(saved.first?.inserted, objects.map(\.objectID))
        XCTAssertEqual(saved.first?.updated.count, 0)
        let fresh = container.newContext()
        XCTAssertEqual((try fresh.existingObject(with: objects[3].objectID) as? InsertSample)?.big, 300)
    }

    /// With undo recording, typed sets of inserted objects are recorded:
    /// undoing the group of the sets made after the insert's group gives the
    /// values back; undoing the insert removes the object. Without undo,
    /// the same sets are saved as set.
    func testInsertOnlySaveWithUndoOnAndOff() throws {
        for undoOn in [false, true] {
            let container = try PersistentContainer.inMemory(model: model())
            let context = container.newContext()
            let undo = ContextUndoManager()
            if undoOn { context.undoManager = undo }
            let a = InsertSample(context: context)
            a.text = "first"
            a.big = 1
            context.processPendingChanges()
            let b = InsertSample(context: context)
            b.text = "b"
            a.text = "second"
            a.big = 2
            context.processPendingChanges()
            XCTAssertEqual(a.text, "second")
            if undoOn {
                XCTAssertTrue(undo.canUndo)
                context.undoLastChange()
                XCTAssertEqual(a.text, "first", "undo gives the value set in the insert's group back")
                XCTAssertEqual(a.big, 1)
                XCTAssertNil(b.managedObjectContext, "the undone insert left the context")
                context.redoLastChange()
                XCTAssertEqual(a.text, "second")
                XCTAssertTrue(b.managedObjectContext === context)
            }
            try context.save()
            let fresh = container.newContext()
            let fa = try fresh.existingObject(with: a.objectID) as? InsertSample
            XCTAssertEqual(fa?.text, "second", "undo \(undoOn)")
            XCTAssertEqual(fa?.big, 2)
            XCTAssertEqual((try fresh.existingObject(with: b.objectID) as? InsertSample)?.text, "b")
        }
    }

    /// An inserted object filed in a pending index (made by a fetch with an
    /// equality) is re-filed when a typed property changes it: the next
    /// fetch finds it under its new value, not its old one.
    func testTypedSetOfAnIndexedInsertedObjectIsSeenByTheNextFetch() throws {
        let container = try PersistentContainer.inMemory(model: model())
        let context = container.newContext()
        var objects: [InsertSample] = []
        for i in 0..<40 {
            let o = InsertSample(context: context)
            o.big = Int64(i % 4)
            objects.append(o)
        }
        func matching(_ n: Int64) throws -> Set<ObjectIdentifier> {
            let request = FetchRequest<InsertSample>(entityName: "InsertSample", predicate: try KuraPredicate(format: "big == %@", .value(.integer(n))))
            return Set(try context.fetch(request).map(ObjectIdentifier.init))
        }
        XCTAssertEqual(try matching(7), [])
        XCTAssertEqual(try matching(1).count, 10)
        objects[1].big = 7
        objects[2].big = 7
        XCTAssertEqual(try matching(7), [ObjectIdentifier(objects[1]), ObjectIdentifier(objects[2])])
        XCTAssertEqual(try matching(1).count, 9)
        try context.save()
        XCTAssertEqual(try matching(7), [ObjectIdentifier(objects[1]), ObjectIdentifier(objects[2])])
    }

    /// The same for objects still noted as inserted in the pending batch:
    /// an observer inserts and fetches while its batch is being posted (its
    /// fetch posts nothing), so the objects it inserted are filed in the
    /// index while the batch they are noted in is still the pending one.
    func testTypedSetOfAnIndexedObjectInsertedInThePendingBatchIsSeenByTheNextFetch() throws {
        let container = try PersistentContainer.inMemory(model: model())
        let context = container.newContext()
        func matching(_ n: Int64) throws -> [InsertSample] {
            try context.fetch(FetchRequest<InsertSample>(entityName: "InsertSample", predicate: try KuraPredicate(format: "big == %@", .value(.integer(n)))))
        }
        var inHandler: [InsertSample] = []
        var found: (before: [InsertSample], after: [InsertSample], old: [InsertSample])?
        var failure: Error?
        let token = context.observeObjectsDidChange { _ in
            guard inHandler.isEmpty else { return }
            do {
                for i in 0..<6 {
                    let o = InsertSample(context: context)
                    o.big = Int64(i % 2)
                    inHandler.append(o)
                }
                let before = try matching(1)
                inHandler[1].big = 7
                inHandler[2].big = 7
                found = (before, try matching(7), try matching(1))
            } catch {
                failure = error
            }
        }
        defer { token.cancel() }
        let first = InsertSample(context: context)
        first.big = 100
        context.processPendingChanges()
        if let failure { throw failure }
        guard let found else { return XCTFail("the observer did not run") }
        XCTAssertEqual(found.before.count, 3)
        XCTAssertEqual(Set(found.after.map(ObjectIdentifier.init)), [ObjectIdentifier(inHandler[1]), ObjectIdentifier(inHandler[2])])
        XCTAssertEqual(Set(found.old.map(ObjectIdentifier.init)), [ObjectIdentifier(inHandler[3]), ObjectIdentifier(inHandler[5])])
    }

    /// An entity without model rules skips their checks, but the errors a
    /// rejected write left for the save still refuse it, and an entity with
    /// a required attribute next to it is still checked.
    func testSaveStillReportsDeferredErrorsAndRulesOfAnotherEntity() throws {
        let container = try PersistentContainer.inMemory(model: model(strict: true))
        let context = container.newContext()
        let o = InsertSample(context: context)
        o.text = "ok"
        o["big"] = "not a number"
        XCTAssertThrowsError(try context.save()) { error in
            XCTAssertEqual((error as? KuraError)?.code, .validation)
        }
        context.rollback()
        let ok = InsertSample(context: context)
        ok.text = "ok"
        let s = try context.insert("Strict")
        XCTAssertThrowsError(try context.save()) { error in
            XCTAssertTrue((error as? KuraError)?.message.contains("\"name\" is required") == true, "\(error)")
        }
        try s.setValue("set", forKey: "name")
        try context.save()
        XCTAssertEqual(try container.newContext().count(for: FetchRequest<ManagedObject>(entityName: "InsertSample")), 1)
    }
}
