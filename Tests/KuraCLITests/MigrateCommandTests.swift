// `kura migrate STORE --model MODEL [--dry-run]`: prints the plan from Xcode
// models, writes nothing on a dry run or a refused plan, performs the
// migration; `kura schema` and `kura info` show the recorded version hashes.

import Foundation
import XCTest
import KuraEngine

final class MigrateCommandTests: XCTestCase {
    var dir: TemporaryDirectory!

    override func setUpWithError() throws { dir = try TemporaryDirectory() }
    override func tearDown() { dir = nil }

    func kura(_ args: [String]) throws -> KuraTool.Result { try KuraTool.run(args, cwd: dir.path) }

    func model(_ attributes: String) -> String {
        """
        <?xml version="1.0" encoding="UTF-8" standalone="yes"?>
        <model type="com.apple.IDECoreDataModeler.DataModel" documentVersion="1.0">
            <entity name="Book" representedClassName="Book" syncable="YES">
                \(attributes)
            </entity>
        </model>
        """
    }

    func testMigratePrintsThePlanDryRunWritesNothingAndTheMigrationConverts() throws {
        try dir.write("v1.contents", model("""
            <attribute name="title" optional="YES" attributeType="String"/>
            <attribute name="pages" optional="YES" attributeType="Integer 32" usesScalarValueType="YES"/>
            """))
        try dir.write("v2.contents", model("""
            <attribute name="title" optional="YES" attributeType="String"/>
            <attribute name="length" optional="YES" attributeType="String" elementID="pages"/>
            <attribute name="isbn" optional="YES" attributeType="String"/>
            """))
        try dir.write("v3.contents", model("""
            <attribute name="title" optional="YES" attributeType="Date"/>
            """))
        try Database(path: dir.file("s.kura")).close()
        var r = try kura(["migrate", "s.kura", "--model", "v1.contents"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.contains("records no model"), r.stdout)
        let db = try Database(path: dir.file("s.kura"))
        try db.write { tx in
            let t = try tx.table("Book")
            for i in 0..<3 { try tx.insert(["title": .text("T\(i)"), "pages": .integer(Int64(100 + i))], into: t) }
        }
        db.close()

        let before = try XCTUnwrap(dir.bytes("s.kura"))
        r = try kura(["migrate", "s.kura", "--model", "v2.contents", "--dry-run"])
        XCTAssertEqual(r.status, 0, r.stderr)
        for line in ["  renamed   Book.length: renamed from \"pages\"", "  converted Book.length: int32 → string (values converted, rows rewritten)",
                     "  added     Book.isbn: in the model, not in the store", "dry run: nothing written"] {
            XCTAssertTrue(r.stdout.contains(line), "\(line) not in:\n\(r.stdout)")
        }
        XCTAssertEqual(dir.bytes("s.kura"), before, "a dry run changed the store")
        r = try kura(["migrate", "s.kura", "--model", "v3.contents"])
        XCTAssertEqual(r.status, 1, r.stdout + r.stderr)
        XCTAssertTrue(r.stdout.contains("  refused   Book.title: the store has string"), r.stdout)
        XCTAssertEqual(dir.bytes("s.kura"), before, "a refused plan changed the store")

        r = try kura(["migrate", "s.kura", "--model", "v2.contents"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.contains("migrated: the store records model version hash"), r.stdout)
        // Progress goes to stderr: rows read of rows in the table, per step.
        XCTAssertTrue(r.stderr.contains("  3/3 rows: Book.length: int32 → string"), r.stderr)
        let dump = try kura(["dump", "s.kura", "Book"]).stdout
        XCTAssertTrue(dump.contains("\"length\":\"101\""), dump)
        r = try kura(["migrate", "s.kura", "--model", "v2.contents"])
        XCTAssertTrue(r.stdout.contains("nothing to migrate"), r.stdout)
        let schema = try kura(["schema", "s.kura"]).stdout
        XCTAssertTrue(schema.contains("model version hash "), schema)
        XCTAssertTrue(schema.contains("  entity Book "), schema)
        XCTAssertTrue(schema.contains("    length "), schema)
        let info = try kura(["info", "s.kura"]).stdout
        XCTAssertTrue(info.contains("model:"), info)
        XCTAssertEqual(try kura(["check", "s.kura"]).status, 0)
    }
}
