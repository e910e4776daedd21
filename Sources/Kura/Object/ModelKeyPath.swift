// ModelKeyPath: Swift key paths of ManagedObject subclasses (`\Student.name`,
// `\Student.record?.grade`) to the model's key paths (`name`, `record.grade`),
// for typed queries and sort keys.
//
// No reflection on the key path itself (its layout is not public): the key
// path is applied once to a probe, an instance of its root class made with
// `init(entity:objectID:)` outside any context and marked with a
// `KeyPathProbe`. The `@Managed`, `@ToOne` and `@ToMany` getters of a marked
// object record their key instead of reading a value (PropertyWrappers.swift);
// a `@ToOne` getter returns a probe of its target class that records into the
// same probe, so a key path through a to-one gives every key in order. A key
// path that reads no wrapper (a plain stored or computed property) records
// nothing and is refused, naming it.
//
// Invariants: a probe is never registered in a context and never escapes this
// file (probes are made and dropped inside `keys(of:)`). Results are cached per
// key path (key paths are Hashable) in a process-wide table behind `lock`.

import Foundation

/// Records the keys that property-wrapper getters read on a probe object.
/// Used on one thread at a time: the thread running `ModelKeyPath.keys(of:)`.
final class KeyPathProbe {
    var keys: [String] = []

    /// A probe of `c` that records into this probe (the value a `@ToOne`
    /// getter returns on a probe).
    func object<C: ManagedObject>(_ c: C.Type) -> C {
        let e = EntityDescription(String(describing: c), class: c) {}
        let o = c.init(entity: e, objectID: ManagedObjectID(entity: e.name, rowID: 0, temporary: true))
        o.keyPathProbe = self
        return o
    }
}

/// The model key path of a Swift key path whose root is a ManagedObject subclass.
enum ModelKeyPath {
    /// Keys by Swift key path, filled on first use.
    private static let cache = KeyCache()

    /// The keys `keyPath` reads, in order (`["record", "grade"]`).
    ///
    /// - Throws: `.invalidArgument` naming the key path when it reads no
    ///   `@Managed`/`@ToOne`/`@ToMany` property, or more than one property
    ///   that is not a to-one chain (a computed property of several keys).
    static func keys<Root: ManagedObject>(of keyPath: PartialKeyPath<Root>) throws(KuraError) -> [String] {
        try keys(of: keyPath, root: Root.self)
    }

    /// `keys(of:)` for a key path known only as `AnyKeyPath` with root class `root`.
    static func keys(of keyPath: AnyKeyPath, root: ManagedObject.Type) throws(KuraError) -> [String] {
        if let k = cache.get(keyPath) { return k }
        let probe = KeyPathProbe()
        let object = probe.object(root)
        _ = object[keyPath: keyPath]
        let keys = probe.keys
        guard !keys.isEmpty else {
            throw KuraError(.invalidArgument, "key path \(keyPath) (a \(type(of: keyPath))) does not read a modelled property: a typed query or sort can use only properties declared with @Managed, @ToOne or @ToMany (a plain stored or computed property is not in the store)")
        }
        cache.set(keyPath, keys)
        return keys
    }

    /// Checks that `keys` name properties of `entity` (attributes, or
    /// relationships followed to their destination) in `model`.
    ///
    /// - Throws: `.notFound` naming the key path, the entity and the key.
    static func validate(_ keys: [String], from entity: EntityDescription, in model: ManagedObjectModel, keyPath: AnyKeyPath) throws(KuraError) {
        var e = entity
        for (i, key) in keys.enumerated() {
            if let r = e.relationshipsByName[key] {
                guard let d = model.entitiesByName[r.destination] else {
                    throw KuraError(.notFound, "key path \(keyPath): relationship \"\(key)\" of entity \"\(e.name)\" leads to unknown entity \"\(r.destination)\"")
                }
                if r.isToMany && i < keys.count - 1 {
                    throw KuraError(.invalidArgument, "key path \(keyPath) goes through to-many relationship \"\(key)\" of entity \"\(e.name)\"; use contains(where:) or allSatisfy on it")
                }
                e = d
            } else if e.attributesByName[key] != nil, i == keys.count - 1 {
                continue
            } else {
                throw KuraError(.notFound, "key path \(keyPath) reads \"\(keys[...i].joined(separator: "."))\", but entity \"\(e.name)\" has no \(i == keys.count - 1 ? "attribute or relationship" : "to-one relationship") \"\(key)\"")
            }
        }
    }
}

/// The cache of `ModelKeyPath.keys(of:)`.
private final class KeyCache: @unchecked Sendable {
    // @unchecked Sendable: `keys` is read and written only while holding `lock`.
    private let lock = NSLock()
    private var keys: [AnyKeyPath: [String]] = [:]

    func get(_ k: AnyKeyPath) -> [String]? { lock.withLock { keys[k] } }
    func set(_ k: AnyKeyPath, _ v: [String]) { lock.withLock { keys[k] = v } }
}
