// kura codegen: the checked-in Moody classes (Tests/KuraCodegenTests/Moody,
// compiled and used by KuraCodegenTests) equal fresh output, so they cannot
// drift from the generator; output is deterministic; human files are created
// once and kept; golden output for a small model with inheritance, ordered
// to-many, transformable, keyword and reserved names; a store's schema; errors.

import Foundation
import XCTest
import KuraEngine

final class CodegenTests: XCTestCase {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func moody() throws -> String {
        let url = root.appendingPathComponent("../shared/corpus/xcdatamodel/objcio__core-data__Moody.contents").standardized
        guard FileManager.default.fileExists(atPath: url.path) else {
            throw XCTSkip("Xcode model corpus \(url.path) not found; it lives in ../shared/corpus next to the repository")
        }
        return url.path
    }

    /// `--stdout` output split into (file name, text).
    static func files(_ stdout: String) -> [String: String] {
        var out: [String: String] = [:]
        var current: String?
        for line in stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if line.hasPrefix("// ==== "), line.hasSuffix(" ====") {
                current = String(line.dropFirst("// ==== ".count).dropLast(" ====".count))
                out[current!] = ""
            } else if let c = current {
                out[c, default: ""] += line + "\n"
            }
        }
        // The split adds one "\n" after the last line of the output.
        if let c = current, let t = out[c], t.hasSuffix("\n\n") { out[c] = String(t.dropLast()) }
        return out
    }

    func testCheckedInMoodyClassesEqualFreshOutput() throws {
        // Regenerate with: kura codegen ../shared/corpus/xcdatamodel/objcio__core-data__Moody.contents
        //                  --name Moody --output Tests/KuraCodegenTests/Moody
        let r = try KuraTool.run(["codegen", try Self.moody(), "--name", "Moody", "--stdout"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let fresh = Self.files(r.stdout)
        XCTAssertEqual(fresh.keys.sorted(), ["Continent+Generated.swift", "Country+Generated.swift", "Mood+Generated.swift",
                                             "Moody+Classes.swift", "Region+Generated.swift"])
        let dir = Self.root.appendingPathComponent("Tests/KuraCodegenTests/Moody")
        let checkedIn = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix("+Generated.swift") || $0.hasSuffix("+Classes.swift") }
        XCTAssertEqual(checkedIn.sorted(), fresh.keys.sorted())
        for (name, text) in fresh {
            let stored = try String(contentsOf: dir.appendingPathComponent(name), encoding: .utf8)
            XCTAssertEqual(stored, text, "\(name) differs from `kura codegen` output: regenerate it (see this test)")
        }
        // Deterministic: a second run prints the same bytes.
        XCTAssertEqual(try KuraTool.run(["codegen", try Self.moody(), "--name", "Moody", "--stdout"]).stdout, r.stdout)
    }

    func testHumanFilesAreCreatedOnceAndKept() throws {
        let dir = try TemporaryDirectory()
        let first = try KuraTool.run(["codegen", try Self.moody(), "--output", "out"], cwd: dir.path)
        XCTAssertEqual(first.status, 0, first.stderr)
        XCTAssertEqual(first.stdout, """
            wrote Continent+Generated.swift
            wrote Country+Generated.swift
            wrote Mood+Generated.swift
            wrote Region+Generated.swift
            wrote objcio__core_data__Moody+Classes.swift
            created Continent.swift
            created Country.swift
            created Mood.swift
            created Region.swift

            """)
        XCTAssertTrue(try String(contentsOfFile: dir.file("out/Mood.swift"), encoding: .utf8).contains("class Mood: _Mood {"))
        let generated = try String(contentsOfFile: dir.file("out/Mood+Generated.swift"), encoding: .utf8)
        try dir.write("out/Mood.swift", "// mine\n")
        try dir.write("out/Mood+Generated.swift", "// stale\n")
        let second = try KuraTool.run(["codegen", try Self.moody(), "--output", "out"], cwd: dir.path)
        XCTAssertEqual(second.status, 0, second.stderr)
        XCTAssertTrue(second.stdout.contains("kept Mood.swift\n"), second.stdout)
        XCTAssertFalse(second.stdout.contains("created"), second.stdout)
        XCTAssertEqual(try String(contentsOfFile: dir.file("out/Mood.swift"), encoding: .utf8), "// mine\n")
        XCTAssertEqual(try String(contentsOfFile: dir.file("out/Mood+Generated.swift"), encoding: .utf8), generated)
    }

    func testGoldenSmallModel() throws {
        let dir = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: dir.file("Shop.xcdatamodel"), withIntermediateDirectories: true)
        try dir.write("Shop.xcdatamodel/contents", """
            <?xml version="1.0" encoding="UTF-8" standalone="yes"?>
            <model type="com.apple.IDECoreDataModeler.DataModel" documentVersion="1.0">
                <entity name="Item" representedClassName="ShopItem" isAbstract="YES">
                    <attribute name="title" attributeType="String" defaultValueString=""/>
                    <attribute name="price" optional="YES" attributeType="Decimal"/>
                    <attribute name="default" optional="YES" attributeType="Boolean"/>
                    <attribute name="entity" optional="YES" attributeType="String"/>
                </entity>
                <entity name="Book" parentEntity="Item">
                    <attribute name="pages" attributeType="Integer 32" defaultValueString="0"/>
                    <attribute name="tags" optional="YES" attributeType="Transformable"/>
                    <relationship name="shelves" optional="YES" toMany="YES" ordered="YES" deletionRule="Nullify" destinationEntity="Shelf" inverseName="books" inverseEntity="Shelf"/>
                </entity>
                <entity name="Shelf">
                    <attribute name="id" attributeType="UUID"/>
                    <attribute name="link" optional="YES" attributeType="URI"/>
                    <relationship name="books" optional="YES" toMany="YES" deletionRule="Nullify" destinationEntity="Book" inverseName="shelves" inverseEntity="Book"/>
                </entity>
            </model>
            """)
        let r = try KuraTool.run(["codegen", "Shop.xcdatamodel", "--stdout"], cwd: dir.path)
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stdout, """
            // ==== Book+Generated.swift ====
            // Generated by `kura codegen` from Shop.xcdatamodel: do not edit, every run overwrites it.
            // Entity Book, subentity of Item.
            // Hand-written code goes in Book.swift (class Book: _Book).

            import Foundation
            import Kura

            class _Book: ShopItem {
                @Managed("pages") var pages: Int32
                /// Ordered: the array is in the relationship's order.
                @ToMany("shelves") var shelves: [Shelf]
                /// Transformable: the value is the transformer's Swift type;
                /// a typed property can be declared in Book.swift with @Managed and that type.
                var tags: Any? {
                    get { self["tags"] }
                    set { self["tags"] = newValue }
                }
            }
            // ==== Shelf+Generated.swift ====
            // Generated by `kura codegen` from Shop.xcdatamodel: do not edit, every run overwrites it.
            // Entity Shelf.
            // Hand-written code goes in Shelf.swift (class Shelf: _Shelf).

            import Foundation
            import Kura

            class _Shelf: ManagedObject {
                @ToMany("books") var books: [Book]
                @Managed("id") var id: UUID
                @Managed("link") var link: URL?
            }
            // ==== ShopItem+Generated.swift ====
            // Generated by `kura codegen` from Shop.xcdatamodel: do not edit, every run overwrites it.
            // Entity Item (abstract).
            // Hand-written code goes in ShopItem.swift (class ShopItem: _ShopItem).

            import Foundation
            import Kura

            class _ShopItem: ManagedObject {
                @Managed("default") var `default`: Bool?
                // "entity" is not generated: it would shadow ManagedObject.entity; use self["entity"] or value(forKey: "entity").
                @Managed("price") var price: Decimal?
                @Managed("title") var title: String
            }
            // ==== Shop+Classes.swift ====
            // Generated by `kura codegen` from Shop.xcdatamodel: do not edit, every run overwrites it.

            import Foundation
            import Kura

            /// The classes generated for the Shop model, by entity name.
            enum ShopClasses {
                /// Each entity's class: pass to `XcodeModelDocument.makeModel(classes:)`
                /// or `ManagedObjectModel.load(xcodeModel:classes:)`.
                static var byEntityName: [String: ManagedObject.Type] {
                    [
                        "Book": Book.self,
                        "Item": ShopItem.self,
                        "Shelf": Shelf.self,
                    ]
                }

                /// The model at `url` (an Xcode model) with these classes bound.
                ///
                /// - Throws: as `ManagedObjectModel.load(xcodeModel:classes:)`.
                static func model(contentsOf url: URL) throws(KuraError) -> ManagedObjectModel {
                    try ManagedObjectModel.load(xcodeModel: url, classes: byEntityName)
                }
            }

            """)
    }

    func testStoreSchema() throws {
        let dir = try TemporaryDirectory()
        let db = try Database(path: dir.file("s.kura"))
        try db.write { tx in
            let people = try tx.createTable("Person", schema: TableSchema([
                ColumnDefinition("name", .text, nullable: false, default: .text("")),
                ColumnDefinition("born", .date),
                ColumnDefinition("team", .integer),
                ColumnDefinition("_version", .integer, nullable: false, default: .integer(0)),
            ]))
            _ = try tx.createIndex("Person_team_fk", on: people, columns: [IndexColumn("team")])
            _ = try tx.createTable("_Person_friends", schema: TableSchema([
                ColumnDefinition("source", .integer), ColumnDefinition("target", .integer), ColumnDefinition("position", .double),
            ]))
        }
        db.close()
        let r = try KuraTool.run(["codegen", "s.kura", "--stdout", "--name", "People"], cwd: dir.path)
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(Self.files(r.stdout)["Person+Generated.swift"], """
            // Generated by `kura codegen` from s.kura: do not edit, every run overwrites it.
            // Entity Person.
            // Hand-written code goes in Person.swift (class Person: _Person).

            import Foundation
            import Kura

            // Join table _Person_friends: to-many relationship "friends" (and maybe its inverse on the other entity); the store does not record the destination: declare it in Person.swift with @ToMany("friends").
            class _Person: ManagedObject {
                @Managed("born") var born: Date?
                @Managed("name") var name: String
                // "team" is not generated: a to-one relationship (column team holds row IDs); the store does not record its destination entity: declare it in Person.swift with @ToOne("team")
            }

            """)
    }

    func testErrors() throws {
        let dir = try TemporaryDirectory()
        let missing = try KuraTool.run(["codegen", "nope.xcdatamodel"], cwd: dir.path)
        XCTAssertEqual(missing.status, 3, missing.stdout)
        XCTAssertTrue(missing.stderr.contains("nope.xcdatamodel"), missing.stderr)
        try dir.write("bad.contents", "<model><entity name=\"A\"><attribute name=\"x\" attributeType=\"Strnig\"/></entity></model>")
        let bad = try KuraTool.run(["codegen", "bad.contents", "--stdout"], cwd: dir.path)
        XCTAssertEqual(bad.status, 2, bad.stdout)
        XCTAssertTrue(bad.stderr.contains("bad.contents"), bad.stderr)
        XCTAssertEqual(try KuraTool.run(["codegen", try Self.moody(), "--stdout", "--output", "x"], cwd: dir.path).status, 2)
        XCTAssertEqual(try KuraTool.run(["codegen", try Self.moody(), "--stdout", "--name", "9x"], cwd: dir.path).status, 2)
        XCTAssertFalse(dir.exists("x"))
    }
}
