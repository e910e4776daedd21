// ToOneKeys: an object's to-one targets by relationship name (its
// `toOne` and `savedToOne`), as a short list of (name, ID) pairs.
//
// Why not a Dictionary: every object loaded from the store gets one of these
// per row, and a Dictionary keyed by String paid for a hash table per object
// (its storage allocated through the runtime's generic path, the name hashed
// with SipHash on every insert and lookup) and freed it again with the
// object: about a tenth of a fetch of objects with one to-one key. An entity
// has few to-one relationships, so a scan comparing names (equal names of
// up to 15 bytes compare as two words) costs less than one hash.
//
// Semantics are a dictionary's: one entry per name (setting a name that is
// there replaces its ID, setting nil removes it), equality ignores order,
// iteration yields `(key, value)` pairs in no promised order.
//
// Invariant: no two entries have the same key.
//
// The entries are a struct (`Entry`), not the `(key, value)` tuple the
// iteration yields: an array of tuples is copied and destroyed through the
// runtime's generic tuple witnesses (walking the tuple's metadata per
// element), which cost a few hundred instructions per object made or freed;
// a struct's are compiled code.

struct ToOneKeys: Equatable, Sequence {
    typealias Element = (key: String, value: ManagedObjectID)

    fileprivate struct Entry {
        let key: String
        var value: ManagedObjectID
    }

    private var entries: [Entry]

    /// No targets.
    init() { entries = [] }

    /// One target (a row's to-one key, as a context loads it).
    init(_ key: String, _ value: ManagedObjectID) { entries = [Entry(key: key, value: value)] }

    /// The target of relationship `key` (nil: none); setting nil removes it.
    subscript(key: String) -> ManagedObjectID? {
        get {
            for e in entries where e.key == key { return e.value }
            return nil
        }
        set {
            if let i = entries.firstIndex(where: { $0.key == key }) {
                if let newValue { entries[i].value = newValue } else { entries.remove(at: i) }
            } else if let newValue {
                // The first target (an inserted object's first to-one set)
                // makes a list of one directly, not through append's
                // growth path (which sizes and moves a buffer).
                if entries.isEmpty { entries = [Entry(key: key, value: newValue)] } else { entries.append(Entry(key: key, value: newValue)) }
            }
        }
    }

    /// Whether some target is named by a temporary ID (an object not saved yet).
    var holdsTemporaryID: Bool {
        for e in entries where e.value.isTemporary { return true }
        return false
    }

    /// Replaces each target ID `map` gives a new one for (a save's inserted
    /// objects taking their permanent IDs); the others stay.
    mutating func rename(_ map: (ManagedObjectID) -> ManagedObjectID?) {
        for i in entries.indices {
            if let n = map(entries[i].value) { entries[i].value = n }
        }
    }

    var isEmpty: Bool { entries.isEmpty }
    var count: Int { entries.count }

    struct Iterator: IteratorProtocol {
        fileprivate var base: IndexingIterator<[Entry]>
        mutating func next() -> Element? { base.next().map { ($0.key, $0.value) } }
    }

    func makeIterator() -> Iterator { Iterator(base: entries.makeIterator()) }

    /// Equal when both hold the same names with the same IDs, in any order.
    static func == (a: ToOneKeys, b: ToOneKeys) -> Bool {
        guard a.entries.count == b.entries.count else { return false }
        for e in a.entries where b[e.key] != e.value { return false }
        return true
    }
}
