// Reading a to-many relationship whose inverse holds the key (`shelf.books`):
// the members are read through the key's index without a query
// (`ReadTransaction.forEachRow`, `materializeKeyedRows`), then corrected by
// the context's pending changes. Checked, after random steps, against a
// plain model of what the reading context should see: the store's state as
// another context commits moves, renames, inserts and deletes; the reading
// context's own unsaved moves, renames, inserts and deletes; its saves and
// rollbacks. Members come saved first, by row ID, then unsaved in insertion
// order. The typed property (`@ToMany`) and `value(forKey:)` agree, and a
// read that cannot be done gives no members and records its error. The seed
// is printed; KURA_SEED replays it.

import Foundation
import XCTest
@testable import Kura

final class ToManyReadTests: XCTestCase {
    final class Shelf: ManagedObject {
        @Managed("name") var name: String
        @ToMany("books") var books: [Book]
    }

    final class Book: ManagedObject {
        @Managed("key") var key: Int64
        @Managed("title") var title: String
        @ToOne("shelf") var shelf: Shelf?
    }

    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Shelf", class: Shelf.self) {
                AttributeDescription("name", .string)
                RelationshipDescription("books", to: "Book", inverse: "shelf", toMany: true)
            }
            EntityDescription("Book", class: Book.self) {
                AttributeDescription("key", .int64)
                AttributeDescription("title", .string)
                RelationshipDescription("shelf", to: "Shelf", inverse: "books")
            }
        }
    }

    func testMembersMatchTheModel() throws {
        var rng = SplitMix64(state: testSeed("ToManyReadTests"))
        func rand(_ n: Int) -> Int { Int(rng.next() % UInt64(n)) }
        let container = try PersistentContainer.inMemory(model: Self.model())
        let shelfCount = 6
        // The committed state: book key -> (title, shelf index or nil).
        var committed: [Int64: (title: String, shelf: Int?)] = [:]
        var nextKey: Int64 = 0
        let seed = container.newContext()
        var seedShelves: [Shelf] = []
        for s in 0..<shelfCount {
            let shelf = try seed.insert(Shelf.self)
            shelf.name = "shelf\(s)"
            seedShelves.append(shelf)
        }
        try seed.save()
        let shelfIDs = seedShelves.map(\.objectID)
        for _ in 0..<60 {
            let b = try seed.insert(Book.self)
            b.key = nextKey
            b.title = "t\(nextKey)"
            let s = rand(shelfCount + 1)
            if s < shelfCount { b.shelf = try XCTUnwrap(seed.object(with: shelfIDs[s]) as? Shelf) }
            committed[nextKey] = (b.title, s < shelfCount ? s : nil)
            nextKey += 1
        }
        try seed.save()

        let main = container.newContext()
        // main's unsaved changes: book key -> new state (nil: deleted).
        var pending: [Int64: (title: String, shelf: Int?)?] = [:]
        // main's inserted books, in insertion order.
        var insertedKeys: [Int64] = []
        let shelves = try shelfIDs.map { id in try XCTUnwrap(main.object(with: id) as? Shelf) }

        func book(_ c: ManagedObjectContext, _ key: Int64) throws -> Book? {
            try c.fetch(FetchRequest<Book>(entityName: "Book", predicate: try KuraPredicate(format: "key == %@", arguments: [.integer(key)]))).first
        }
        func view() -> [Int64: (title: String, shelf: Int?)] {
            var v = committed
            for (k, p) in pending { v[k] = p }
            return v
        }

        for step in 0..<250 {
            switch rand(10) {
            case 0, 1:
                // Another context commits a change to a book main has no
                // unsaved change of.
                let other = container.newContext()
                let free = committed.keys.filter { pending[$0] == nil }.sorted()
                guard let k = free.isEmpty ? nil : free[rand(free.count)], let b = try book(other, k) else { continue }
                switch rand(4) {
                case 0:
                    try other.delete(b)
                    committed[k] = nil
                case 1:
                    b.title = "o\(step)"
                    committed[k]?.title = b.title
                default:
                    let s = rand(shelfCount + 1)
                    b.shelf = s < shelfCount ? try XCTUnwrap(other.object(with: shelfIDs[s]) as? Shelf) : nil
                    committed[k]?.shelf = s < shelfCount ? s : nil
                }
                if rand(4) == 0 {
                    let n = try other.insert(Book.self)
                    n.key = nextKey
                    n.title = "o\(nextKey)"
                    n.shelf = try XCTUnwrap(other.object(with: shelfIDs[rand(shelfCount)]) as? Shelf)
                    committed[nextKey] = (n.title, shelfIDs.firstIndex(of: n.shelf?.objectID ?? shelfIDs[0]))
                    nextKey += 1
                }
                try other.save()
            case 2, 3, 4:
                // An unsaved change in main.
                let current = view()
                let keys = current.keys.sorted()
                guard !keys.isEmpty else { continue }
                let k = keys[rand(keys.count)]
                guard let b = try book(main, k) else { return XCTFail("step \(step): book \(k) not found in main") }
                switch rand(4) {
                case 0:
                    try main.delete(b)
                    pending[k] = .some(nil)
                    insertedKeys.removeAll { $0 == k }
                case 1:
                    b.title = "m\(step)"
                    pending[k] = (b.title, current[k]?.shelf)
                default:
                    let s = rand(shelfCount + 1)
                    b.shelf = s < shelfCount ? shelves[s] : nil
                    pending[k] = (current[k]?.title ?? "", s < shelfCount ? s : nil)
                }
            case 5:
                let b = try main.insert(Book.self)
                b.key = nextKey
                b.title = "n\(nextKey)"
                let s = rand(shelfCount)
                b.shelf = shelves[s]
                pending[nextKey] = (b.title, s)
                insertedKeys.append(nextKey)
                nextKey += 1
            case 6:
                try main.save()
                committed = view()
                pending = [:]
                insertedKeys = []
            case 7:
                main.rollback()
                pending = [:]
                insertedKeys = []
            default:
                break
            }
            // Read one shelf's books both ways and check them.
            let s = rand(shelfCount)
            let typed = shelves[s].books
            XCTAssertNil(shelves[s].readError, "step \(step): \(String(describing: shelves[s].readError))")
            let byKey = try XCTUnwrap(try shelves[s].value(forKey: "books") as? ObjectList).objects
            XCTAssertTrue(typed.elementsEqual(byKey) { $0 === $1 }, "step \(step): the typed property and value(forKey:) disagree")
            let expected = view().filter { $0.value.shelf == s }
            XCTAssertEqual(Set(typed.map(\.key)), Set(expected.keys), "step \(step): shelf \(s)'s books")
            XCTAssertEqual(typed.count, expected.count, "step \(step): each of shelf \(s)'s books once")
            for b in typed { XCTAssertEqual(b.title, expected[b.key]?.title, "step \(step): book \(b.key)'s title") }
            // Saved members first, by row ID; then unsaved ones in insertion order.
            let saved = typed.prefix { !$0.objectID.isTemporary }
            XCTAssertEqual(saved.map(\.objectID.rowID), saved.map(\.objectID.rowID).sorted(), "step \(step): saved members by row ID")
            let unsaved = typed.dropFirst(saved.count)
            XCTAssertTrue(unsaved.allSatisfy(\.objectID.isTemporary), "step \(step): unsaved members last")
            XCTAssertEqual(unsaved.map(\.key), insertedKeys.filter { expected[$0] != nil && pending[$0] != nil }, "step \(step): unsaved members in insertion order")
        }
    }

    /// `relationshipKeyPathsForPrefetching` through the key's index: after a
    /// fetch that prefetches "books" and "books.shelf.books" (whose last
    /// level has each shelf as often as it has books), every shelf's books
    /// read, with no read transaction, what a context without prefetching
    /// reads, when both made the same unsaved moves (books filed under
    /// another shelf than the index says), renames, deletes and inserts
    /// before the fetch, and more after it. Random graphs, seeded.
    func testPrefetchedMembersReadAsWithout() throws {
        var rng = SplitMix64(state: testSeed("ToManyReadTests.prefetch"))
        func rand(_ n: Int) -> Int { Int(rng.next() % UInt64(n)) }
        let container = try PersistentContainer.inMemory(model: Self.model())
        let seed = container.newContext()
        let shelfCount = 8
        for s in 0..<shelfCount {
            let shelf = try seed.insert(Shelf.self)
            shelf.name = "shelf\(s)"
        }
        try seed.save()
        var nextKey: Int64 = 0
        for round in 0..<12 {
            // Committed changes: new books on random shelves (or none), some
            // moved, some deleted.
            let writer = container.newContext()
            let allShelves = try writer.fetch(FetchRequest<Shelf>(entityName: "Shelf", sortDescriptors: [SortKey("name")]))
            for _ in 0..<(10 + rand(30)) {
                let b = try writer.insert(Book.self)
                b.key = nextKey
                b.title = "t\(nextKey)"
                nextKey += 1
                let s = rand(shelfCount + 1)
                if s < shelfCount { b.shelf = allShelves[s] }
            }
            for b in try writer.fetch(FetchRequest<Book>(entityName: "Book")) where rand(8) == 0 {
                if rand(2) == 0 { try writer.delete(b) } else { b.shelf = allShelves[rand(shelfCount)] }
            }
            try writer.save()

            // The same unsaved changes in both contexts, by book key.
            let keys = try writer.fetch(FetchRequest<Book>(entityName: "Book", sortDescriptors: [SortKey("key")])).map(\.key)
            var edits: [(key: Int64, kind: Int, shelf: Int)] = []
            for _ in 0..<(1 + rand(12)) { edits.append((keys[rand(keys.count)], rand(4), rand(shelfCount + 1))) }
            let inserts = (0..<rand(3)).map { _ in rand(shelfCount) }
            func edit(_ c: ManagedObjectContext, _ edits: [(key: Int64, kind: Int, shelf: Int)], inserts: [Int], tag: String) throws {
                let shelves = try c.fetch(FetchRequest<Shelf>(entityName: "Shelf", sortDescriptors: [SortKey("name")]))
                for e in edits {
                    let found = try c.fetch(FetchRequest<Book>(entityName: "Book", predicate: try KuraPredicate(format: "key == %@", arguments: [.integer(e.key)])))
                    guard let b = found.first else { continue }
                    switch e.kind {
                    case 0: try c.delete(b)
                    case 1: b.title = "renamed\(e.key)"
                    default: b.shelf = e.shelf < shelfCount ? shelves[e.shelf] : nil
                    }
                }
                for (i, s) in inserts.enumerated() {
                    let b = try c.insert(Book.self)
                    b.key = -1
                    b.title = "\(tag)\(i)"
                    b.shelf = shelves[s]
                }
            }
            let plain = container.newContext(), pre = container.newContext()
            for c in [plain, pre] { try edit(c, edits, inserts: inserts, tag: "new\(round).") }

            var request = FetchRequest<Shelf>(entityName: "Shelf", sortDescriptors: [SortKey("name")])
            let want = try plain.fetch(request)
            request.relationshipKeyPathsForPrefetching = ["books", "books.shelf.books"]
            let got = try pre.fetch(request)
            func titles(_ shelves: [Shelf]) -> [String] {
                shelves.map { s in "\(s.name): " + s.books.map { "\($0.title)@\($0.shelf?.name ?? "-")" }.joined(separator: " ") }
            }
            let before = pre.readTransactionCount
            XCTAssertEqual(titles(got), titles(want), "round \(round)")
            XCTAssertEqual(pre.readTransactionCount, before, "round \(round): reading prefetched books opened read transactions")
            for s in got { XCTAssertNil(s.readError, "round \(round)") }

            // More changes after the fetch, the same in both.
            var later: [(key: Int64, kind: Int, shelf: Int)] = []
            for _ in 0..<(1 + rand(6)) { later.append((keys[rand(keys.count)], rand(4), rand(shelfCount + 1))) }
            let laterInsert = [rand(shelfCount)]
            for c in [plain, pre] { try edit(c, later, inserts: laterInsert, tag: "later\(round).") }
            XCTAssertEqual(titles(got), titles(want), "round \(round), after more changes")
        }
    }

    /// The model answers a relationship's storage from what it made once
    /// for each of its entities' relationships, but only for that
    /// relationship: another one of the same name (another model version's,
    /// without an inverse, or to-one) gets its own storage.
    func testStorageIsTheGivenRelationships() throws {
        let model = try Self.model()
        let shelf = try XCTUnwrap(model.entitiesByName["Shelf"])
        let books = try XCTUnwrap(shelf.relationshipsByName["books"])
        XCTAssertEqual(model.storage(of: books, in: shelf), .inverseForeignKey(entity: "Book", column: "shelf", orderColumn: nil))
        let noInverse = RelationshipDescription("books", to: "Book", toMany: true)
        XCTAssertEqual(model.storage(of: noInverse, in: shelf), .joinTable(name: "_Shelf_books", forward: true))
        let ordered = RelationshipDescription("books", to: "Book", inverse: "shelf", toMany: true, ordered: true)
        XCTAssertEqual(model.storage(of: ordered, in: shelf), .inverseForeignKey(entity: "Book", column: "shelf", orderColumn: "shelf_order"))
        let toOne = RelationshipDescription("books", to: "Book", inverse: "shelf")
        XCTAssertEqual(model.storage(of: toOne, in: shelf), .foreignKey(column: "books"))
        XCTAssertEqual(model.relationshipPlan(noInverse, in: shelf).storage, .joinTable(name: "_Shelf_books", forward: true))
    }

    /// A typed to-many read without a context gives no members and records
    /// the error (the failure channel), as the subscript does.
    func testReadWithoutContextRecordsError() throws {
        let container = try PersistentContainer.inMemory(model: Self.model())
        let c = container.newContext()
        let shelf = try c.insert(Shelf.self)
        shelf.name = "s"
        let b = try c.insert(Book.self)
        b.shelf = shelf
        try c.save()
        let id = shelf.objectID
        var loaded: Shelf?
        do {
            let reader = container.newContext()
            loaded = try XCTUnwrap(reader.object(with: id) as? Shelf)
            XCTAssertEqual(loaded?.books.count, 1)
        }
        let orphan = try XCTUnwrap(loaded)
        XCTAssertEqual(orphan.books.count, 0)
        XCTAssertEqual(orphan.readError?.code, .misuse, "\(String(describing: orphan.readError))")
    }
}
