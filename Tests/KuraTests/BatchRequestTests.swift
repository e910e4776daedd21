import Foundation
import XCTest
import Kura

/// Batch insert, update and delete requests (issue 15): run in one store
/// transaction without managed objects, checked like a save, applying delete
/// rules, bumping versions and posting the changes contexts merge.
final class BatchRequestTests: XCTestCase {
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Person") {
                AttributeDescription("name", .string, optional: false)
                AttributeDescription("email", .string)
                AttributeDescription("age", .int64, default: Int64(18))
                AttributeDescription("score", .double)
                UniqueConstraint("email")
                RelationshipDescription("pets", to: "Pet", inverse: "owner", toMany: true, deleteRule: .cascade)
                RelationshipDescription("clubs", to: "Club", inverse: "members", toMany: true)
                RelationshipDescription("accounts", to: "Account", inverse: "holder", toMany: true, deleteRule: .deny)
            }
            EntityDescription("Pet") {
                AttributeDescription("name", .string)
                RelationshipDescription("owner", to: "Person", inverse: "pets")
                RelationshipDescription("toys", to: "Toy", inverse: "pet", toMany: true, deleteRule: .cascade)
            }
            EntityDescription("Toy") {
                AttributeDescription("name", .string)
                RelationshipDescription("pet", to: "Pet", inverse: "toys")
            }
            EntityDescription("Club") {
                AttributeDescription("title", .string)
                RelationshipDescription("members", to: "Person", inverse: "clubs", toMany: true)
            }
            EntityDescription("Account") {
                AttributeDescription("number", .int64)
                RelationshipDescription("holder", to: "Person", inverse: "accounts", optional: false)
            }
            EntityDescription("Note") {
                AttributeDescription("text", .string)
                RelationshipDescription("about", to: "Person")  // no inverse
            }
            EntityDescription("Badge") {
                RelationshipDescription("wearer", to: "Person", optional: false)  // required, no inverse
            }
        }
    }

    func people(_ c: ManagedObjectContext, _ format: String = "TRUEPREDICATE") throws -> [ManagedObject] {
        try c.fetch(FetchRequest<ManagedObject>(entityName: "Person", predicate: KuraPredicate(format: format), sortDescriptors: [SortKey("name")]))
    }

    func testBatchInsertWritesRowsWithDefaultsAndReportsIDs() throws {
        let container = try PersistentContainer.inMemory(model: Self.model(), persistentHistoryTracking: true)
        let heard = Locked<[ContextDidSave]>([])
        let observation = container.observeSaves { note in heard.mutate { $0.append(note) } }
        defer { observation.cancel() }
        var request = BatchInsertRequest(entityName: "Person", objects: [
            ["name": "ann", "email": "ann@x", "age": Int64(30)],
            ["name": "bob", "email": NSNull()],
            ["name": "cy", "score": 2.5],
        ])
        request.resultType = .objectIDs
        let result = try container.execute(request)
        XCTAssertEqual(result.count, 3)
        XCTAssertEqual(result.objectIDs?.count, 3)
        XCTAssertEqual(result.changes.inserted, result.objectIDs)
        let c = container.newContext()
        let all = try people(c)
        XCTAssertEqual(all.map { $0["name"] as? String }, ["ann", "bob", "cy"])
        XCTAssertEqual(all.map { $0["age"] as? Int64 }, [30, 18, 18], "the default fills a value not given")
        XCTAssertEqual(all.map { $0["email"] as? String }, ["ann@x", nil, nil])
        XCTAssertEqual(all[2]["score"] as? Double, 2.5)
        XCTAssertEqual(Set(all.map(\.objectID)), Set(result.objectIDs ?? []))
        XCTAssertEqual(heard.value, [result.changes], "posted to the container's save observers")
        let history = try container.history(after: nil)
        XCTAssertEqual(history.last?.changes.map(\.objectID), result.objectIDs, "recorded in the persistent history")

        // The handler form: stops when told, that call's dictionary not inserted.
        var n = 0
        let handled = try container.execute(BatchInsertRequest(entityName: "Pet") { d in
            n += 1
            if n > 4 { return true }
            d["name"] = "pet\(n)"
            return false
        })
        XCTAssertEqual(handled.count, 4)
        XCTAssertEqual(try c.count(for: FetchRequest<ManagedObject>(entityName: "Pet")), 4)
    }

    /// The README's "Batch requests" snippet, verbatim.
    func testReadmeSnippet() throws {
        let container = try PersistentContainer.inMemory(model: Self.model())
        var insert = BatchInsertRequest(entityName: "Person", objects: [["name": "Ann", "email": "ann@x"]])
        insert.onUniquenessConflict = .updateExisting          // upsert by uniqueness constraint
        let made = try container.execute(insert)                // made.count, made.changes
        try container.execute(BatchUpdateRequest(entityName: "Person", predicate: try KuraPredicate(format: "pets.@count > 0"),
                                                 propertiesToUpdate: ["score": try KuraExpression(format: "score + 1")]))
        try container.execute(BatchDeleteRequest(entityName: "Person", predicate: try KuraPredicate(format: "age > 90")))
        XCTAssertEqual(made.count, 1)
        XCTAssertEqual(try people(container.newContext()).map { $0["name"] as? String }, ["Ann"])
    }

    func testBatchInsertRefusesBadObjectsNamingThemAndWritesNothing() throws {
        let container = try PersistentContainer.inMemory(model: Self.model())
        func refused(_ objects: [[String: Any]], _ code: KuraError.Code, _ parts: [String], entity: String = "Person", line: UInt = #line) {
            XCTAssertThrowsError(try container.execute(BatchInsertRequest(entityName: entity, objects: objects)), line: line) { e in
                XCTAssertEqual((e as? KuraError)?.code, code, "\(e)", line: line)
                for p in parts { XCTAssertTrue("\(e)".contains(p), "\(e) lacks \(p)", line: line) }
            }
            XCTAssertEqual(try container.newContext().count(for: FetchRequest<ManagedObject>(entityName: entity)), 0, "nothing written", line: line)
        }
        refused([["name": "a"], ["email": "x"]], .validation, ["object 1", "\"name\" is required"])
        refused([["name": "a"], ["name": "b", "age": "old"]], .typeMismatch, ["object 1", "\"age\""])
        refused([["name": "a", "shoe": 3]], .notFound, ["object 0", "\"shoe\""])
        refused([["name": "a", "pets": []]], .invalidArgument, ["object 0", "\"pets\" is a relationship"])
        refused([["name": "a", "email": "same"], ["name": "b", "email": "same"]], .constraintViolation, ["object 1", "object 0 of this batch already has email = \"same\""])
        XCTAssertThrowsError(try container.execute(BatchInsertRequest(entityName: "Account", objects: [["number": Int64(1)]]))) { e in
            XCTAssertTrue("\(e)".contains("\"holder\" is required"), "\(e)")
        }
        XCTAssertThrowsError(try container.execute(BatchInsertRequest(entityName: "Nobody", objects: []))) { e in
            XCTAssertEqual((e as? KuraError)?.code, .notFound)
        }
    }

    func testBatchInsertCanUpdateExistingObjectsByUniquenessConstraint() throws {
        let container = try PersistentContainer.inMemory(model: Self.model())
        _ = try container.execute(BatchInsertRequest(entityName: "Person", objects: [["name": "ann", "email": "a@x", "age": Int64(20)]]))
        var upsert = BatchInsertRequest(entityName: "Person", objects: [
            ["name": "ann2", "email": "a@x"],
            ["name": "bob", "email": "b@x"],
        ])
        upsert.onUniquenessConflict = .updateExisting
        let r = try container.execute(upsert)
        XCTAssertEqual(r.changes.inserted.count, 1)
        XCTAssertEqual(r.changes.updated.values.first, ["email", "name"])
        let all = try people(container.newContext())
        XCTAssertEqual(all.map { $0["name"] as? String }, ["ann2", "bob"])
        XCTAssertEqual(all.map { $0["age"] as? Int64 }, [20, 18], "an upsert changes only the values given")
    }

    func seed(_ container: PersistentContainer) throws -> ManagedObjectContext {
        let c = container.newContext()
        for (i, name) in ["ann", "bob", "cy", "dee"].enumerated() {
            let p = try c.insert("Person")
            try p.setValue(name, forKey: "name")
            try p.setValue(Int64(20 + 10 * i), forKey: "age")
            for k in 0..<i {
                let pet = try c.insert("Pet")
                try pet.setValue("\(name)-pet\(k)", forKey: "name")
                try pet.setValue(p, forKey: "owner")
                let toy = try c.insert("Toy")
                try toy.setValue("\(name)-toy\(k)", forKey: "name")
                try toy.setValue(pet, forKey: "pet")
            }
        }
        try c.save()
        return c
    }

    func testBatchUpdateSetsValuesAndExpressionsOnMatchingObjectsAndBumpsVersions() throws {
        let container = try PersistentContainer.inMemory(model: Self.model())
        let setup = try seed(container)
        // A context holding a copy of bob before the batch.
        let stale = container.newContext()
        let bob = try XCTUnwrap(people(stale, "name == 'bob'").first)
        XCTAssertEqual(bob["age"] as? Int64, 30)

        var request = BatchUpdateRequest(entityName: "Person", predicate: try KuraPredicate(format: "pets.@count >= 1"),
                                         propertiesToUpdate: ["score": 1.5, "age": try KuraExpression(format: "age + 1")])
        request.resultType = .objectIDs
        let result = try setup.execute(request)
        XCTAssertEqual(result.count, 3, "bob, cy and dee have pets")
        XCTAssertEqual(Set(result.changes.updated.values), [["age", "score"]])
        let fresh = try people(container.newContext())
        XCTAssertEqual(fresh.map { $0["age"] as? Int64 }, [20, 31, 41, 51])
        XCTAssertEqual(fresh.map { $0["score"] as? Double }, [nil, 1.5, 1.5, 1.5])

        // The stale copy: a save of it meets a conflict instead of undoing the batch.
        try bob.setValue("robert", forKey: "name")
        XCTAssertThrowsError(try stale.save()) { e in XCTAssertEqual((e as? KuraError)?.code, .mergeConflict, "\(e)") }
        stale.rollback()
        try stale.mergeChanges(fromContextDidSave: result.changes)
        XCTAssertEqual(bob["age"] as? Int64, 31, "merging the batch's changes refreshes the object")

        // Refusals write nothing.
        XCTAssertThrowsError(try container.execute(BatchUpdateRequest(entityName: "Person", propertiesToUpdate: ["name": Value.null]))) { e in
            XCTAssertEqual((e as? KuraError)?.code, .validation)
            XCTAssertTrue("\(e)".contains("\"name\" is required"), "\(e)")
        }
        XCTAssertThrowsError(try container.execute(BatchUpdateRequest(entityName: "Person", propertiesToUpdate: ["age": "x"]))) { e in
            XCTAssertEqual((e as? KuraError)?.code, .typeMismatch)
        }
        XCTAssertThrowsError(try container.execute(BatchUpdateRequest(entityName: "Person", propertiesToUpdate: ["email": "same"]))) { e in
            XCTAssertEqual((e as? KuraError)?.code, .constraintViolation, "\(e)")
        }
        XCTAssertThrowsError(try container.execute(BatchUpdateRequest(entityName: "Person", propertiesToUpdate: ["pets": []]))) { e in
            XCTAssertTrue("\(e)".contains("relationship"), "\(e)")
        }
        XCTAssertEqual(try people(container.newContext()).map { $0["email"] as? String }, [nil, nil, nil, nil])
    }

    func testBatchDeleteAppliesDeleteRulesAndMergesIntoContexts() throws {
        let container = try PersistentContainer.inMemory(model: Self.model())
        let c = try seed(container)
        let club = try c.insert("Club")
        try club.setValue("chess", forKey: "title")
        let note = try c.insert("Note")
        try note.setValue("about cy", forKey: "text")
        let cy = try XCTUnwrap(people(c, "name == 'cy'").first)
        try note.setValue(cy, forKey: "about")
        for p in try people(c) { try club.add(p, to: "members") }
        try c.save()

        let watcher = container.newContext()
        let clubInWatcher = try watcher.existingObject(with: club.objectID)
        XCTAssertEqual((clubInWatcher["members"] as? ObjectList)?.count, 4)

        var request = BatchDeleteRequest(entityName: "Person", predicate: try KuraPredicate(format: "age >= 40"))
        request.resultType = .objectIDs
        let result = try container.execute(request)
        XCTAssertEqual(result.count, 2, "cy and dee")
        let fresh = container.newContext()
        XCTAssertEqual(try people(fresh).map { $0["name"] as? String }, ["ann", "bob"])
        XCTAssertEqual(try fresh.fetch(FetchRequest<ManagedObject>(entityName: "Pet", sortDescriptors: [SortKey("name")])).map { $0["name"] as? String },
                       ["bob-pet0"], "pets cascade")
        XCTAssertEqual(try fresh.fetch(FetchRequest<ManagedObject>(entityName: "Toy")).map { $0["name"] as? String }, ["bob-toy0"], "and their toys")
        XCTAssertEqual(result.changes.deleted.count, 2 + 5 + 5)
        let freshNote = try fresh.existingObject(with: note.objectID)
        XCTAssertNil(freshNote["about"] as? ManagedObject, "a reference without inverse is cleared")
        XCTAssertEqual(result.changes.updated[note.objectID], ["about"])
        XCTAssertEqual(result.changes.updated[club.objectID], ["members"])
        XCTAssertEqual((try fresh.existingObject(with: club.objectID)["members"] as? ObjectList)?.count, 2, "join rows removed")

        try watcher.mergeChanges(fromContextDidSave: result.changes)
        XCTAssertEqual((clubInWatcher["members"] as? ObjectList)?.count, 2, "a context merging the changes sees the deletions")
    }

    func testBatchDeleteRefusesWhatDeleteRulesForbidAndDeletesNothing() throws {
        let container = try PersistentContainer.inMemory(model: Self.model())
        let c = try seed(container)
        let ann = try XCTUnwrap(people(c, "name == 'ann'").first)
        let account = try c.insert("Account")
        try account.setValue(Int64(7), forKey: "number")
        try account.setValue(ann, forKey: "holder")
        try c.save()
        XCTAssertThrowsError(try container.execute(BatchDeleteRequest(entityName: "Person"))) { e in
            XCTAssertEqual((e as? KuraError)?.code, .validation)
            XCTAssertTrue("\(e)".contains("\(ann.objectID)") && "\(e)".contains("deny") && "\(e)".contains("\(account.objectID)"), "\(e)")
        }
        XCTAssertEqual(try people(container.newContext()).count, 4, "nothing deleted")
        // Deleting the account with its holder through IDs is allowed (cascade
        // not involved): the deny rule holds only for accounts that stay.
        let r = try container.execute(BatchDeleteRequest(objectIDs: [account.objectID, ann.objectID]))
        XCTAssertEqual(r.count, 2)
        XCTAssertEqual(try people(container.newContext()).count, 3)
        // The objects' IDs of a second run are gone: skipped, not counted.
        XCTAssertEqual(try container.execute(BatchDeleteRequest(objectIDs: [ann.objectID])).count, 0)
    }

    func testBatchDeleteRefusesClearingARequiredRelationship() throws {
        let container = try PersistentContainer.inMemory(model: Self.model())
        let c = try seed(container)
        let bob = try XCTUnwrap(people(c, "name == 'bob'").first)
        let badge = try c.insert("Badge")
        try badge.setValue(bob, forKey: "wearer")
        try c.save()
        // No rule of Person covers the badge (its relationship has no
        // inverse); clearing its required wearer would leave it invalid.
        XCTAssertThrowsError(try container.execute(BatchDeleteRequest(objectIDs: [bob.objectID]))) { e in
            XCTAssertEqual((e as? KuraError)?.code, .validation, "\(e)")
            XCTAssertTrue("\(e)".contains("\(badge.objectID)") && "\(e)".contains("\"wearer\" is required"), "\(e)")
        }
        XCTAssertEqual(try people(container.newContext()).count, 4)
        // Deleted together, nothing is left to clear.
        XCTAssertEqual(try container.execute(BatchDeleteRequest(objectIDs: [bob.objectID, badge.objectID])).count, 2)
        XCTAssertEqual(try people(container.newContext()).count, 3)
    }

    /// Batch delete and a context's delete of the same objects leave the same
    /// store: random graphs, random predicates (seeded: KURA_SEED replays).
    func testBatchDeleteLeavesWhatAContextDeleteLeaves() throws {
        let seed = ProcessInfo.processInfo.environment["KURA_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 0...UInt64(UInt32.max))
        print("BatchRequestTests seed \(seed) (replay with KURA_SEED=\(seed))")
        var rng = SplitMix64(state: seed)
        for round in 0..<12 {
            let roundSeed = rng.next()
            let predicate = ["age < 30", "age >= 50", "name BEGINSWITH 'p1'", "ANY pets.name == 'pet3'", "clubs.@count == 0", "age > 90"][Int(rng.next() % 6)]
            var states: [String] = []
            for useBatch in [true, false] {
                let container = try PersistentContainer.inMemory(model: Self.model())
                var r = SplitMix64(state: roundSeed)
                let c = container.newContext()
                var people: [ManagedObject] = [], pets: [ManagedObject] = []
                var clubs: [ManagedObject] = []
                for i in 0..<3 {
                    let club = try c.insert("Club")
                    try club.setValue("club\(i)", forKey: "title")
                    clubs.append(club)
                }
                for i in 0..<12 {
                    let p = try c.insert("Person")
                    try p.setValue("p\(i)", forKey: "name")
                    try p.setValue(Int64(r.next() % 100), forKey: "age")
                    for club in clubs where r.next() % 3 == 0 { try club.add(p, to: "members") }
                    people.append(p)
                }
                for i in 0..<15 {
                    let pet = try c.insert("Pet")
                    try pet.setValue("pet\(i % 5)", forKey: "name")
                    if r.next() % 4 != 0 { try pet.setValue(people[Int(r.next() % 12)], forKey: "owner") }
                    pets.append(pet)
                    if r.next() % 2 == 0 {
                        let toy = try c.insert("Toy")
                        try toy.setValue("toy\(i)", forKey: "name")
                        try toy.setValue(pet, forKey: "pet")
                    }
                }
                for i in 0..<6 {
                    let note = try c.insert("Note")
                    try note.setValue("note\(i)", forKey: "text")
                    try note.setValue(people[Int(r.next() % 12)], forKey: "about")
                }
                try c.save()
                if useBatch {
                    _ = try container.execute(BatchDeleteRequest(entityName: "Person", predicate: KuraPredicate(format: predicate)))
                } else {
                    let d = container.newContext()
                    for p in try d.fetch(FetchRequest<ManagedObject>(entityName: "Person", predicate: KuraPredicate(format: predicate))) { try d.delete(p) }
                    try d.save()
                }
                states.append(try describe(container.newContext()))
            }
            XCTAssertEqual(states[0], states[1], "round \(round), predicate \(predicate), seed \(seed)")
        }
    }

    /// Every stored object with its attributes and relationships, by name.
    func describe(_ c: ManagedObjectContext) throws -> String {
        var lines: [String] = []
        func names(_ v: Any?, _ key: String) -> String {
            if let list = v as? ObjectList { return list.map { ($0[key] as? String) ?? "?" }.sorted().joined(separator: ",") }
            if let o = v as? ManagedObject { return (o[key] as? String) ?? "?" }
            return "-"
        }
        for p in try c.fetch(FetchRequest<ManagedObject>(entityName: "Person")) {
            lines.append("person \(p["name"] ?? "") pets=\(names(p["pets"], "name")) clubs=\(names(p["clubs"], "title"))")
        }
        for x in try c.fetch(FetchRequest<ManagedObject>(entityName: "Pet")) {
            lines.append("pet \(x["name"] ?? "") owner=\(names(x["owner"], "name")) toys=\(names(x["toys"], "name"))")
        }
        for x in try c.fetch(FetchRequest<ManagedObject>(entityName: "Toy")) { lines.append("toy \(x["name"] ?? "") pet=\(names(x["pet"], "name"))") }
        for x in try c.fetch(FetchRequest<ManagedObject>(entityName: "Club")) { lines.append("club \(x["title"] ?? "") members=\(names(x["members"], "name"))") }
        for x in try c.fetch(FetchRequest<ManagedObject>(entityName: "Note")) { lines.append("note \(x["text"] ?? "") about=\(names(x["about"], "name"))") }
        XCTAssertNil(c.pendingError)
        return lines.sorted().joined(separator: "\n")
    }
}
