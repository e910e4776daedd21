import Foundation
import XCTest
@testable import Kura

/// A context keeps the store's answers to repeated fetch queries while the
/// store is unchanged (StoreAnswerMemo.swift). A kept answer must never
/// outlive the store state it was read from: saves of other contexts, of
/// other connections, of this context, batch requests and `reset()` all make
/// the next fetch ask the store again; pending inserts, updates and deletes
/// still change the answer of a fetch served from the memo.
final class StoreAnswerMemoTests: XCTestCase {
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Country") {
                AttributeDescription("code", .string, indexed: true)
                AttributeDescription("rank", .int64)
            }
        }
    }

    func codes(_ c: ManagedObjectContext, _ code: String) throws -> [String] {
        try c.fetch(FetchRequest<ManagedObject>(entityName: "Country", predicate: KuraPredicate(format: "code == %@", .text(code))))
            .map { ($0["code"] as? String) ?? "nil" }
    }

    func ranks(_ c: ManagedObjectContext, _ code: String) throws -> [Int64] {
        try c.fetch(FetchRequest<ManagedObject>(entityName: "Country", predicate: KuraPredicate(format: "code == %@", .text(code)),
                                                sortDescriptors: [SortKey("rank")]))
            .map { ($0["rank"] as? Int64) ?? -1 }
    }

    /// Another context's saves (an insert, then a change of the key) change
    /// the answer of a query the context asked before, with and without
    /// pending objects of its own (the object path and the store path).
    func testOtherContextsSavesReachRepeatedFetches() throws {
        let dir = try TempDir()
        let container = try PersistentContainer(url: dir.url.appendingPathComponent("m.kura"), model: Self.model())
        let c = container.newContext()
        let plain = container.newContext()
        // A pending object of the entity: c's fetches take the object path.
        try c.insert("Country").setValue("zz", forKey: "code")
        XCTAssertEqual(try codes(c, "fr"), [])
        XCTAssertEqual(try codes(plain, "fr"), [])
        XCTAssertEqual(c.storeAnswers.count, 1, "the store's answer is kept")
        XCTAssertEqual(plain.storeAnswers.count, 1, "the store's answer is kept")
        XCTAssertEqual(try codes(c, "fr"), [])
        XCTAssertEqual(try codes(plain, "fr"), [])

        let b = container.newContext()
        let fr = try b.insert("Country")
        try fr.setValue("fr", forKey: "code")
        try fr.setValue(Int64(1), forKey: "rank")
        try b.save()
        XCTAssertEqual(try codes(c, "fr"), ["fr"], "another context's insert")
        XCTAssertEqual(try codes(plain, "fr"), ["fr"], "another context's insert")
        XCTAssertEqual(try ranks(plain, "fr"), [1])

        try fr.setValue("de", forKey: "code")
        try b.save()
        XCTAssertEqual(try codes(c, "fr"), [], "another context's change of the key")
        XCTAssertEqual(try codes(plain, "fr"), [], "another context's change of the key")
        XCTAssertEqual(try codes(c, "de"), ["de"])
        XCTAssertEqual(try codes(plain, "de"), ["de"])

        try fr.setValue(Int64(7), forKey: "rank")
        try b.save()
        XCTAssertEqual(try ranks(plain, "de"), [7], "another context's change of another attribute")

        try b.delete(fr)
        try b.save()
        XCTAssertEqual(try codes(c, "de"), [], "another context's delete")
        XCTAssertEqual(try codes(plain, "de"), [], "another context's delete")
    }

    /// A save through another connection to the same store (as another
    /// process's) changes the answer too.
    func testOtherConnectionsSavesReachRepeatedFetches() throws {
        let dir = try TempDir()
        let url = dir.url.appendingPathComponent("m.kura")
        let container = try PersistentContainer(url: url, model: Self.model())
        let c = container.newContext()
        XCTAssertEqual(try codes(c, "fr"), [])
        XCTAssertEqual(c.storeAnswers.count, 1)
        let other = try PersistentContainer(url: url, model: Self.model())
        try other.save { o in try o.insert("Country").setValue("fr", forKey: "code") }
        XCTAssertEqual(try codes(c, "fr"), ["fr"])
        try other.save { o in
            for x in try o.fetch(FetchRequest<ManagedObject>(entityName: "Country")) { try x.setValue("it", forKey: "code") }
        }
        XCTAssertEqual(try codes(c, "fr"), [])
        XCTAssertEqual(try codes(c, "it"), ["it"])
        other.database.close()
    }

    /// Each bound value has its own answer; pending inserts, updates and
    /// deletes change what a fetch served from the memo returns; rollback
    /// brings the stored answer back; the context's own save and `reset()`
    /// make it ask the store again.
    func testBoundValuesPendingChangesOwnSaveAndReset() throws {
        let container = try PersistentContainer.inMemory(model: Self.model())
        try container.save { s in
            for (code, rank) in [("fr", 1), ("de", 2), ("fr", 3)] {
                let o = try s.insert("Country")
                try o.setValue(code, forKey: "code")
                try o.setValue(Int64(rank), forKey: "rank")
            }
        }
        let c = container.newContext()
        for _ in 0..<2 {
            XCTAssertEqual(try ranks(c, "fr"), [1, 3])
            XCTAssertEqual(try ranks(c, "de"), [2])
            XCTAssertEqual(try ranks(c, "it"), [])
        }
        XCTAssertEqual(c.storeAnswers.count, 3)

        // Pending changes, answered from the kept store answers.
        let one = try XCTUnwrap(c.fetch(FetchRequest<ManagedObject>(entityName: "Country", predicate: KuraPredicate(format: "rank == 1"))).first)
        try one.setValue("de", forKey: "code")
        XCTAssertEqual(try ranks(c, "fr"), [3], "a pending update moves the object out")
        XCTAssertEqual(try ranks(c, "de"), [1, 2], "and in")
        let added = try c.insert("Country")
        try added.setValue("fr", forKey: "code")
        try added.setValue(Int64(0), forKey: "rank")
        XCTAssertEqual(try ranks(c, "fr"), [0, 3], "a pending insert")
        let two = try XCTUnwrap(c.fetch(FetchRequest<ManagedObject>(entityName: "Country", predicate: KuraPredicate(format: "rank == 2"))).first)
        try c.delete(two)
        XCTAssertEqual(try ranks(c, "de"), [1], "a pending delete")
        c.rollback()
        XCTAssertEqual(try ranks(c, "fr"), [1, 3], "rollback")
        XCTAssertEqual(try ranks(c, "de"), [2], "rollback")

        // The context's own save.
        try one.setValue("it", forKey: "code")
        try c.save()
        XCTAssertEqual(try ranks(c, "fr"), [3], "own save")
        XCTAssertEqual(try ranks(c, "it"), [1], "own save")

        // Reset drops the answers; fetched objects are new instances.
        let before = try XCTUnwrap(c.fetch(FetchRequest<ManagedObject>(entityName: "Country", predicate: KuraPredicate(format: "code == 'it'"))).first)
        c.reset()
        XCTAssertEqual(c.storeAnswers.count, 0)
        let after = try XCTUnwrap(c.fetch(FetchRequest<ManagedObject>(entityName: "Country", predicate: KuraPredicate(format: "code == 'it'"))).first)
        XCTAssertFalse(before === after)
        XCTAssertEqual(after["rank"] as? Int64, 1)
    }

    /// Queries that differ only where the memo's hash does not look (the
    /// operator, the key path, sort, limit, offset) keep answers of their own.
    func testQueriesAlikeButForTheirShapeKeepTheirOwnAnswers() throws {
        let container = try PersistentContainer.inMemory(model: Self.model())
        try container.save { s in
            for (code, rank) in [("fr", 1), ("de", 2), ("fr", 3), ("frx", 4)] {
                let o = try s.insert("Country")
                try o.setValue(code, forKey: "code")
                try o.setValue(Int64(rank), forKey: "rank")
            }
        }
        let c = container.newContext()
        func ranks(_ format: String, sort: [SortKey] = [SortKey("rank")], limit: Int? = nil, offset: Int = 0) throws -> [Int64] {
            var r = FetchRequest<ManagedObject>(entityName: "Country", predicate: try KuraPredicate(format: format), sortDescriptors: sort)
            r.fetchLimit = limit
            r.fetchOffset = offset
            return try c.fetch(r).map { ($0["rank"] as? Int64) ?? -1 }
        }
        for _ in 0..<2 {
            XCTAssertEqual(try ranks("code == 'fr'"), [1, 3])
            XCTAssertEqual(try ranks("code != 'fr'"), [2, 4])
            XCTAssertEqual(try ranks("code BEGINSWITH 'fr'"), [1, 3, 4])
            XCTAssertEqual(try ranks("rank == 2"), [2])
            XCTAssertEqual(try ranks("rank >= 2"), [2, 3, 4])
            XCTAssertEqual(try ranks("rank >= 2", sort: [SortKey("rank", ascending: false)]), [4, 3, 2])
            XCTAssertEqual(try ranks("rank >= 2", limit: 1), [2])
            XCTAssertEqual(try ranks("rank >= 2", offset: 1), [3, 4])
        }
    }

    /// A batch update (its own write transaction) changes the answer; large
    /// answers are not kept.
    func testBatchRequestsAndLargeAnswers() throws {
        let container = try PersistentContainer.inMemory(model: Self.model())
        try container.save { s in
            for i in 0..<(StoreAnswerMemo.maxRows + 4) {
                let o = try s.insert("Country")
                try o.setValue(i == 0 ? "fr" : "big", forKey: "code")
                try o.setValue(Int64(i), forKey: "rank")
            }
        }
        let c = container.newContext()
        XCTAssertEqual(try codes(c, "fr"), ["fr"])
        XCTAssertEqual(c.storeAnswers.count, 1)
        try container.execute(BatchUpdateRequest(entityName: "Country", predicate: KuraPredicate(format: "code == 'fr'"), propertiesToUpdate: ["code": "es"]))
        XCTAssertEqual(try codes(c, "fr"), [], "a batch update")
        XCTAssertEqual(try codes(c, "es"), ["es"])
        try container.execute(BatchDeleteRequest(entityName: "Country", predicate: KuraPredicate(format: "code == 'es'")))
        XCTAssertEqual(try codes(c, "es"), [], "a batch delete")
        let kept = c.storeAnswers.count
        XCTAssertEqual(try codes(c, "big").count, StoreAnswerMemo.maxRows + 3)
        XCTAssertEqual(c.storeAnswers.count, kept, "an answer larger than maxRows is not kept")
        XCTAssertEqual(try codes(c, "big").count, StoreAnswerMemo.maxRows + 3)
    }
}
