// ModelVersionHash: the identity of a model's storage, per entity and per
// property (Core Data's `versionHash`, `entityVersionHashesByName`).
//
// A hash covers what decides how a property or entity is stored, and nothing
// else, so two models with equal hashes read and write the same store:
//   - attribute: name, attribute type, optional, transient, version hash modifier;
//   - relationship: name, destination, to-one / to-many / ordered to-many,
//     optional, inverse name (it decides between a foreign key read from the
//     other side and a join table), version hash modifier;
//   - entity: name, parent entity, abstract, version hash modifier and the
//     hashes of all its properties (declared and inherited), sorted by name;
//   - model: the entity hashes, sorted by entity name.
// Not covered: user info, renaming identifiers, defaults, validation rules,
// delete rules, indexes and uniqueness constraints (the catalog records
// those itself: the migration plan compares them there).
//
// A hash is the XXH64 (seed 0) of a canonical text: the fields above in that
// order, each followed by U+001F, printed as 16 lowercase hex digits. The
// text format is part of the store format (FORMAT.md, "Model identity"):
// changing it makes every store look migrated, so it does not change.

import Foundation
import KuraEngine

enum VersionHash {
    static func of(_ fields: [String]) -> String {
        var text = ""
        for f in fields { text += f; text += "\u{1F}" }
        let h = Checksum.xxh64(Array(text.utf8))
        let hex = String(h, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}

extension AttributeDescription {
    /// The hash of what decides this attribute's storage (see the file
    /// header): equal hashes, same stored values. 16 hex digits.
    public var versionHash: String {
        VersionHash.of(["attribute", name, type.rawValue, isOptional ? "optional" : "required",
                        isTransient ? "transient" : "stored", versionHashModifier ?? ""])
    }
}

extension RelationshipDescription {
    /// What kind of relationship this is, as the stored model records it:
    /// `to-one`, `to-many` or `ordered to-many`.
    var cardinalityName: String { isToMany ? (isOrdered ? "ordered to-many" : "to-many") : "to-one" }

    /// The hash of what decides this relationship's storage (see the file
    /// header). 16 hex digits.
    public var versionHash: String {
        VersionHash.of(["relationship", name, destination, cardinalityName, isOptional ? "optional" : "required",
                        inverse ?? "", versionHashModifier ?? ""])
    }
}

extension EntityDescription {
    /// The hash of this entity's storage: its name, parent, abstractness,
    /// modifier and every property's hash (see the file header).
    public var versionHash: String {
        let properties = (attributes.map { ($0.name, $0.versionHash) } + relationships.map { ($0.name, $0.versionHash) })
            .sorted { $0.0 < $1.0 }.map(\.1)
        return VersionHash.of(["entity", name, superentityName ?? "", isAbstract ? "abstract" : "concrete",
                               versionHashModifier ?? ""] + properties)
    }
}

extension ManagedObjectModel {
    /// Each entity's ``EntityDescription/versionHash``, by entity name (Core
    /// Data's `entityVersionHashesByName`).
    public var entityVersionHashes: [String: String] {
        Dictionary(entities.map { ($0.name, $0.versionHash) }, uniquingKeysWith: { a, _ in a })
    }

    /// The hash of the whole model's storage: equal for two models that read
    /// and write the same store. 16 hex digits.
    public var versionHash: String {
        VersionHash.of(["model"] + entities.map { ($0.name, $0.versionHash) }.sorted { $0.0 < $1.0 }.map { "\($0.0)=\($0.1)" })
    }
}
