// Relationships without a reciprocal inverse (ManagedObjectModel, "Inverses"):
// a relationship whose inverse names another one back (as in artsy's
// ArtsyPartner model: Image.artist names Artist.thumbnail, whose inverse is
// Image.thumbnail) and one without any inverse are kept from their own side
// only; the reciprocal pair stays consistent; deleting a target leaves nothing
// dangling to read; all survive reopen.

import Foundation
import XCTest
import Kura
import KuraEngine

final class InverseRelationshipTests: XCTestCase {
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            EntityDescription("Artist") {
                AttributeDescription("name", .string)
                RelationshipDescription("thumbnail", to: "Image", inverse: "thumbnail")
            }
            EntityDescription("Image") {
                AttributeDescription("url", .string)
                RelationshipDescription("thumbnail", to: "Artist", inverse: "thumbnail")
                // Non-reciprocal: names Artist.thumbnail, which names Image.thumbnail back.
                RelationshipDescription("artist", to: "Artist", inverse: "thumbnail")
                // Non-reciprocal to-many: a join table of its own.
                RelationshipDescription("fans", to: "Artist", inverse: "thumbnail", toMany: true)
                // No inverse at all.
                RelationshipDescription("related", to: "Image", toMany: true)
            }
        }
    }

    func testNonReciprocalAndMissingInversesAreKeptFromTheirOwnSide() throws {
        let model = try Self.model()
        let tmp = try TempDir()
        let url = tmp.url.appendingPathComponent("i.kura")
        do {
            let container = try PersistentContainer(url: url, model: model)
            let c = container.newContext()
            let artist = try c.insert("Artist"), other = try c.insert("Artist")
            try artist.setValue("x", forKey: "name")
            try other.setValue("y", forKey: "name")
            let image = try c.insert("Image"), second = try c.insert("Image")
            try image.setValue("i", forKey: "url")
            try second.setValue("j", forKey: "url")
            try image.setValue(artist, forKey: "artist")
            // The non-reciprocal side changed nothing on the artist.
            XCTAssertNil(try artist.value(forKey: "thumbnail"))
            // The reciprocal pair works both ways.
            try artist.setValue(second, forKey: "thumbnail")
            XCTAssertTrue(try second.value(forKey: "thumbnail") as? ManagedObject === artist)
            XCTAssertTrue(try image.value(forKey: "artist") as? ManagedObject === artist)
            try image.setValue([other, artist], forKey: "fans")
            try image.setValue([second], forKey: "related")
            XCTAssertNil(try other.value(forKey: "thumbnail"))
            try c.save()
        }
        let container = try PersistentContainer(url: url, model: model)
        let c = container.newContext()
        let images = try c.fetch(FetchRequest<ManagedObject>(entityName: "Image", sortDescriptors: [SortKey("url")]))
        let image = images[0], second = images[1]
        let artist = try XCTUnwrap(image.value(forKey: "artist") as? ManagedObject)
        XCTAssertEqual(artist["name"] as? String, "x")
        XCTAssertTrue(try artist.value(forKey: "thumbnail") as? ManagedObject === second)
        XCTAssertEqual(Set(try XCTUnwrap(image.value(forKey: "fans") as? ObjectList).map { $0["name"] as? String }), ["x", "y"])
        XCTAssertEqual(try XCTUnwrap(image.value(forKey: "related") as? ObjectList).map { $0["url"] as? String }, ["j"])
        // Deleting targets: the one-sided relationships read nothing dangling.
        try c.delete(artist)
        try c.delete(second)
        XCTAssertNil(try image.value(forKey: "artist"))
        XCTAssertEqual(try XCTUnwrap(image.value(forKey: "related") as? ObjectList).count, 0)
        try c.save()
        let again = try PersistentContainer(url: url, model: model).newContext()
        let reread = try XCTUnwrap(again.fetch(FetchRequest<ManagedObject>(entityName: "Image")).first)
        XCTAssertNil(try reread.value(forKey: "artist"))
        XCTAssertEqual(try XCTUnwrap(reread.value(forKey: "fans") as? ObjectList).map { $0["name"] as? String }, ["y"])
        XCTAssertEqual(try XCTUnwrap(reread.value(forKey: "related") as? ObjectList).count, 0)
    }
}
