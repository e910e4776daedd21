import Foundation
import XCTest
@testable import Kura

// Guards the skipped hook calls (HookOverrides.swift): a save calls a
// lifecycle hook only on objects whose class overrides it, read from the
// class's metadata. Each test here has a hook that must still run (an
// override in the class, inherited from a superclass, in a generic class,
// calling super only for some keys) and fails if the detection missed it;
// `testDetectionFindsEachHook` fails if the detection found nothing (every
// hook would then be called, as before, and the skips would be lost).

/// Overrides nothing, with typed properties as app classes have.
final class HookPlain: ManagedObject {
    @Managed("name") var name: String
    @Managed("score") var score: Int64
}

/// Rejects an empty name; calls super for other keys.
class HookValidating: ManagedObject {
    @Managed("name") var name: String
    @Managed("score") var score: Int64
    override func validateValue(_ value: Any?, forKey key: String) throws(KuraError) {
        if key == "name", let s = value as? String, s.isEmpty { throw KuraError(.validation, "a name is needed") }
        try super.validateValue(value, forKey: key)
    }
}

/// Inherits `HookValidating`'s `validateValue`, overrides nothing itself.
final class HookInheriting: HookValidating {}

/// Counts its insert and update checks; refuses a negative score on update.
final class HookWholeObject: ManagedObject {
    @Managed("name") var name: String
    @Managed("score") var score: Int64
    nonisolated(unsafe) static var log: [String] = []
    override func validateForInsert() throws(KuraError) {
        Self.log.append("insert \(name)")
        if name == "refused" { throw KuraError(.validation, "refused on insert") }
    }
    override func validateForUpdate() throws(KuraError) {
        Self.log.append("update \(name)")
        if score < 0 { throw KuraError(.validation, "negative score") }
    }
}

/// A generic subclass (its metadata is made at run time) refusing deletes.
class HookGeneric<T>: ManagedObject {
    @Managed("name") var name: String
    override func validateForDelete() throws(KuraError) {
        if name == "kept" { throw KuraError(.validation, "kept objects stay") }
    }
}
final class HookGenericInt: HookGeneric<Int> {}

/// Its willSave stamps every pending HookPlain (which has no hook of its
/// own) and itself; its didSave is logged.
final class HookStamping: ManagedObject {
    @Managed("name") var name: String
    @Managed("score") var score: Int64
    nonisolated(unsafe) static var log: [String] = []
    override func willSave() {
        guard let c = managedObjectContext else { return }
        for case let p as HookPlain in c.insertedObjects where p.score == 0 { p.score = 7 }
        if score == 0 { score = 1 }
    }
    override func didSave() { Self.log.append("didSave \(name)") }
}

final class HookOverrideTests: XCTestCase {
    override func setUp() {
        HookWholeObject.log = []
        HookStamping.log = []
    }

    func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Plain", class: HookPlain.self) {
                AttributeDescription("name", .string)
                AttributeDescription("score", .int64, default: 0)
            }
            EntityDescription("Validating", class: HookValidating.self) {
                AttributeDescription("name", .string)
                AttributeDescription("score", .int64, default: 0)
            }
            EntityDescription("Inheriting", class: HookInheriting.self) {
                AttributeDescription("name", .string)
                AttributeDescription("score", .int64, default: 0)
            }
            EntityDescription("Whole", class: HookWholeObject.self) {
                AttributeDescription("name", .string)
                AttributeDescription("score", .int64, default: 0)
            }
            EntityDescription("Generic", class: HookGenericInt.self) {
                AttributeDescription("name", .string)
            }
            EntityDescription("Stamping", class: HookStamping.self) {
                AttributeDescription("name", .string)
                AttributeDescription("score", .int64, default: 0)
            }
        }
    }

    func testDetectionFindsEachHook() {
        XCTAssertEqual(HookOverrides.of(ManagedObject.self), [])
        XCTAssertEqual(HookOverrides.of(HookPlain.self), [])
        XCTAssertEqual(HookOverrides.of(HookValidating.self), [.validateValue])
        XCTAssertEqual(HookOverrides.of(HookInheriting.self), [.validateValue])
        XCTAssertEqual(HookOverrides.of(HookWholeObject.self), [.validateForInsert, .validateForUpdate])
        XCTAssertEqual(HookOverrides.of(HookGenericInt.self), [.validateForDelete])
        XCTAssertEqual(HookOverrides.of(HookGeneric<String>.self), [.validateForDelete])
        XCTAssertEqual(HookOverrides.of(HookStamping.self), [.willSave, .didSave])
    }

    func testValidateValueRunsWhenOverriddenOrInherited() throws {
        let container = try PersistentContainer.inMemory(model: model())
        let context = container.newContext()
        let plain = HookPlain(context: context)
        plain.name = ""
        let own = HookValidating(context: context)
        own.name = ""
        let inherited = HookInheriting(context: context)
        inherited.name = ""
        do {
            try context.save()
            XCTFail("an empty name was saved")
        } catch {
            XCTAssertEqual(error.code, .validation)
            let e = error
            XCTAssertTrue(e.message.contains("\(own.objectID): attribute \"name\": a name is needed"), e.message)
            XCTAssertTrue(e.message.contains("\(inherited.objectID): attribute \"name\": a name is needed"), e.message)
            XCTAssertFalse(e.message.contains("\(plain.objectID)"), e.message)
        }
        own.name = "a"
        inherited.name = "b"
        try context.save()
        // An update: only the changed key is checked, through the override.
        inherited.name = ""
        XCTAssertThrowsError(try context.save()) { e in
            XCTAssertTrue((e as? KuraError)?.message.contains("a name is needed") == true, "\(e)")
        }
    }

    func testWholeObjectChecksRunForInsertAndUpdate() throws {
        let container = try PersistentContainer.inMemory(model: model())
        let context = container.newContext()
        let o = HookWholeObject(context: context)
        o.name = "refused"
        XCTAssertThrowsError(try context.save()) { e in
            XCTAssertTrue((e as? KuraError)?.message.contains("refused on insert") == true, "\(e)")
        }
        o.name = "w"
        try context.save()
        XCTAssertEqual(HookWholeObject.log, ["insert refused", "insert w"])
        o.score = -1
        XCTAssertThrowsError(try context.save()) { e in
            XCTAssertTrue((e as? KuraError)?.message.contains("negative score") == true, "\(e)")
        }
        XCTAssertEqual(HookWholeObject.log, ["insert refused", "insert w", "update w"])
    }

    func testDeleteCheckOfAGenericClassRuns() throws {
        let container = try PersistentContainer.inMemory(model: model())
        let context = container.newContext()
        let o = HookGenericInt(context: context)
        o.name = "kept"
        try context.save()
        try context.delete(o)
        XCTAssertThrowsError(try context.save()) { e in
            XCTAssertTrue((e as? KuraError)?.message.contains("kept objects stay") == true, "\(e)")
        }
    }

    /// One class's willSave changes objects of a class without hooks in the
    /// same save: the changes are saved, and didSave runs.
    func testWillSaveOfOneClassChangesObjectsWithoutHooks() throws {
        let container = try PersistentContainer.inMemory(model: model())
        let context = container.newContext()
        let plains = (0..<3).map { i -> HookPlain in
            let p = HookPlain(context: context)
            p.name = "p\(i)"
            return p
        }
        let s = HookStamping(context: context)
        s.name = "s"
        try context.save()
        XCTAssertEqual(plains.map(\.score), [7, 7, 7])
        XCTAssertEqual(s.score, 1)
        XCTAssertEqual(HookStamping.log, ["didSave s"])
        let fresh = container.newContext()
        let stored = try fresh.fetch(FetchRequest<HookPlain>(entityName: "Plain")).map(\.score)
        XCTAssertEqual(stored, [7, 7, 7], "the hook's changes were written")
        XCTAssertFalse(context.hasChanges)
    }

    /// Without a validateValue of its own, an attribute whose value cannot
    /// become its Swift value (a transformable whose transformer is gone)
    /// still fails the save, as when the value was converted for the call.
    func testUnconvertibleValueFailsTheSaveWithoutAnOverride() throws {
        let name = "HookOverrideTests.\(UUID().uuidString)"
        AttributeTransformers.register(CodableAttributeTransformer<[String]>(), named: name)
        defer { AttributeTransformers.unregister(named: name) }
        let model = try ManagedObjectModel {
            EntityDescription("T", class: HookPlain.self) {
                AttributeDescription("name", .string)
                AttributeDescription("score", .int64, default: 0)
                AttributeDescription("tags", .transformable, valueTransformerName: name, customClassName: "[String]")
            }
        }
        let container = try PersistentContainer.inMemory(model: model)
        let context = container.newContext()
        let o = HookPlain(context: context)
        try o.setValue(["a"], forKey: "tags")
        AttributeTransformers.unregister(named: name)
        do {
            try context.save()
            XCTFail("a value that does not convert was saved")
        } catch {
            XCTAssertEqual(error.code, .validation)
            XCTAssertTrue(error.message.contains("\(o.objectID): attribute \"tags\""), error.message)
        }
    }
}
