// ManagedObjectID: a stable identity for an object, usable across contexts.

import Foundation

/// The identity of a managed object: its entity and its row ID.
///
/// An object inserted into a context has a *temporary* ID until the context
/// saves it; from then on its ID is permanent: stable across saves and reopens,
/// usable in any context of the same store (`context.object(with:)`), and
/// convertible to and from a string (`uriRepresentation`).
public struct ManagedObjectID: Hashable, Sendable, CustomStringConvertible {
    /// The entity's name.
    public let entityName: String
    /// The row ID in the entity's table (for a temporary ID, a number unique
    /// in the process: ObjectRegistry.swift).
    public let rowID: Int64
    /// Whether this is a temporary ID of an unsaved object.
    public let isTemporary: Bool

    init(entity: String, rowID: Int64, temporary: Bool = false) {
        entityName = entity
        self.rowID = rowID
        isTemporary = temporary
    }

    /// Hashes the row ID, the temporary flag and the entity name's length: as
    /// good as hashing the name for real models (IDs of one entity differ by row
    /// ID) and much cheaper, since contexts hash IDs on every registry access.
    public func hash(into hasher: inout Hasher) {
        // One word to hash: the row ID, the kind in the top bit and the
        // name's length XORed into the bits below it.
        let mixed = UInt64(bitPattern: rowID) ^ (isTemporary ? 1 << 63 : 0) ^ (UInt64(truncatingIfNeeded: entityName.utf8.count) << 55)
        hasher.combine(mixed)
    }

    /// Equal when entity, row ID and kind are: the row ID is compared first,
    /// so IDs of different rows differ without comparing names.
    public static func == (a: ManagedObjectID, b: ManagedObjectID) -> Bool {
        a.rowID == b.rowID && a.isTemporary == b.isTemporary && a.entityName == b.entityName
    }

    /// `kura:///Student/p12` (permanent) or `kura:///Student/t3` (temporary).
    public var uriRepresentation: String {
        "kura:///\(entityName)/\(isTemporary ? "t" : "p")\(rowID)"
    }

    public var description: String { uriRepresentation }

    /// Parses a `uriRepresentation`.
    ///
    /// - Throws: `.invalidArgument` naming the string.
    public init(uriRepresentation s: String) throws(KuraError) {
        let prefix = "kura:///"
        guard s.hasPrefix(prefix) else { throw KuraError(.invalidArgument, "\"\(s)\" is not a Kura object ID (kura:///Entity/p123)") }
        let parts = s.dropFirst(prefix.count).split(separator: "/")
        guard parts.count == 2, let kind = parts[1].first, kind == "p" || kind == "t", let n = Int64(parts[1].dropFirst()) else {
            throw KuraError(.invalidArgument, "\"\(s)\" is not a Kura object ID (kura:///Entity/p123)")
        }
        self.init(entity: String(parts[0]), rowID: n, temporary: kind == "t")
    }

    private static let counter = ProcessCounter()
    /// A process-wide temporary ID (a negative row ID: contexts make their
    /// own, positive ones, ObjectRegistry.swift).
    static func temporary(_ entity: String) -> ManagedObjectID {
        ManagedObjectID(entity: entity, rowID: -counter.next(), temporary: true)
    }
}

/// A process-wide counter from 1 (temporary object IDs, context identities).
final class ProcessCounter: @unchecked Sendable {
    // @unchecked Sendable: `value` is guarded by `lock`.
    private let lock = NSLock()
    private var value: Int64 = 0
    func next() -> Int64 {
        lock.lock()
        defer { lock.unlock() }
        value += 1
        return value
    }
}

extension PredicateArgument {
    /// An object as a predicate argument: `SELF == %@`, `student == %@`.
    public static func object(_ o: ManagedObject) -> PredicateArgument { .value(.text(o.objectID.uriRepresentation)) }
    /// An object ID as a predicate argument.
    public static func objectID(_ id: ManagedObjectID) -> PredicateArgument { .value(.text(id.uriRepresentation)) }
    /// A UUID argument (UUID attributes are stored as their uppercase string).
    public static func uuid(_ u: UUID) -> PredicateArgument { .value(.text(u.uuidString)) }
    /// A URL argument (URL attributes are stored as their absolute string).
    public static func url(_ u: URL) -> PredicateArgument { .value(.text(u.absoluteString)) }
}
