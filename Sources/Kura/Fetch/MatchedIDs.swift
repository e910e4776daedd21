// MatchedIDs: the object IDs a fetch matched, in order, kept as row IDs
// plus the kind of each (its entity name and whether the ID is temporary),
// each kind stored once.
//
// Why: a fetch that does not materialize its objects (a batched fetch,
// `fetchResults`, `fetchObjectIDs`, `count`) lists every matching ID, and a
// batched fetch keeps the list while it is iterated. As `[ManagedObjectID]`
// that is 32 bytes a row (a String, a row ID and a flag, padded), and the
// array grows by doubling, so a million rows held 32 MB and passed through
// 48 MB while growing. Here a row costs its 8-byte row ID, plus 4 bytes of
// kind only once the list holds more than one kind (an entity hierarchy
// sharing one table, or pending objects among stored ones).
//
// Invariants: `kinds` is empty while every row is of `table[0]` (or there is
// no row), else it has one entry per row, an index into `table`. `table`
// holds no kind twice.

struct MatchedIDs: RandomAccessCollection {
    /// An entity name and whether the IDs of it are temporary.
    private struct Kind: Equatable {
        let entity: String
        let temporary: Bool
    }

    /// The row IDs, in order.
    private(set) var rowIDs: [Int64] = []
    private var table: [Kind] = []
    private var kinds: [UInt32] = []
    /// The kind the last appended ID had (an index into `table`).
    private var lastKind = 0

    init() {}

    /// The IDs of `ids`, in order.
    init<S: Sequence>(_ ids: S) where S.Element == ManagedObjectID {
        rowIDs.reserveCapacity(ids.underestimatedCount)
        for id in ids { append(id) }
    }

    var startIndex: Int { 0 }
    var endIndex: Int { rowIDs.count }

    /// The ID at `i` (made from its row ID and kind).
    subscript(i: Int) -> ManagedObjectID {
        let k = table[kinds.isEmpty ? 0 : Int(kinds[i])]
        return ManagedObjectID(entity: k.entity, rowID: rowIDs[i], temporary: k.temporary)
    }

    /// Appends an ID of entity `entity` with row ID `rowID` (a permanent ID
    /// unless `temporary`).
    @inline(__always)
    mutating func append(entity: String, rowID: Int64, temporary: Bool = false) {
        let kind: Int
        if lastKind < table.count, table[lastKind].entity == entity, table[lastKind].temporary == temporary {
            kind = lastKind
        } else {
            kind = self.kind(entity, temporary)
        }
        if kind != 0 && kinds.isEmpty {
            // The first row of a second kind: every row so far is of the first.
            kinds = [UInt32](repeating: 0, count: rowIDs.count)
        }
        // Cannot trap: a kind is an entity of the model (twice at most:
        // stored and temporary), and a model of 2^31 entities could not be
        // built in memory (each is an object of over a hundred bytes).
        if !kinds.isEmpty { kinds.append(UInt32(kind)) }
        rowIDs.append(rowID)
        lastKind = kind
    }

    /// Appends `id`.
    mutating func append(_ id: ManagedObjectID) {
        append(entity: id.entityName, rowID: id.rowID, temporary: id.isTemporary)
    }

    /// The index of a kind in `table`, added if new.
    private mutating func kind(_ entity: String, _ temporary: Bool) -> Int {
        let k = Kind(entity: entity, temporary: temporary)
        if let i = table.firstIndex(of: k) { return i }
        table.append(k)
        return table.count - 1
    }
}
