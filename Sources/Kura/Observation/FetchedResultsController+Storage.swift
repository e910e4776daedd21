// FetchedResultsController+Storage: how a controller keeps its results so that
// one change costs in proportion to the change, not to the result size.
//
// Layout. The results are a list of sections (`FRCSection`); each section is a
// list of chunks (`FRCChunk`) of at most `maxChunk` rows; a row (`FRCRow`)
// holds the object and the sort values it had when it was placed (its key
// cache). `location` maps every member object to its chunk (and the related
// objects its key paths went through).
//
// Order. Rows compare by their cached sort values (each sort key's collation
// and direction, `SortKey.compareValues`), ties by object ID (saved objects by
// row ID, then unsaved ones: the order of `ManagedObjectContext.sortObjects`,
// which fetches use). Sections compare by their first row, so they appear in
// fetch order (when the section key orders like the first sort key, this is
// Core Data's order; otherwise each section still holds all objects of its
// section value and sits where its first object falls).
//
// Invariants (checked by `checkInvariants()` in tests):
//   - rows of a chunk are in order; the last row of a chunk is before the first
//     row of the next; no chunk is empty; a chunk has at most `maxChunk` rows;
//   - `section.count` is the sum of its chunks' rows; sections are in order
//     of their first rows; only the single section of a controller without a
//     section key path may be empty;
//   - `location[o]` is the chunk holding `o`, for exactly the member objects.
//
// Why the cached sort values stay right: an object's values change only
// through the context, which reports every change in its next objects-did-
// change batch; the controller removes each reported object (found through
// `location`, then by binary search on its cached values) before re-placing it
// with its current values. An object's ID changes only when a save makes it
// permanent, and a save gives its new objects row IDs above every saved row,
// in insertion order, which is the order unsaved objects already had: the
// order of the rows is unchanged.
//
// Costs for one object: locating its row is a dictionary lookup, a scan of the
// section's chunk list (about n / maxChunk references) and a binary search in
// one chunk; placing it is a binary search over the chunks' last rows and in
// one chunk; inserting or removing shifts at most `maxChunk` rows.

import Foundation
import KuraEngine

/// One row: an object and the sort values it was placed by.
struct FRCRow {
    let object: ManagedObject
    var keys: [Value]
}

/// A run of rows of one section.
final class FRCChunk {
    var rows: [FRCRow]
    /// The section that holds this chunk (sections hold their chunks, and a
    /// section is dropped only when it has none).
    unowned let section: FRCSection

    init(_ rows: [FRCRow], _ section: FRCSection) {
        self.rows = rows
        self.section = section
    }
}

/// One section: its section value, name and chunks.
final class FRCSection {
    let value: Value
    let name: String
    var chunks: [FRCChunk] = []
    var count = 0

    init(value: Value, name: String) {
        self.value = value
        self.name = name
    }

    var head: FRCRow? { chunks.first?.rows.first }
}

/// Where a member object is.
struct FRCLocation {
    var chunk: FRCChunk
    /// The sort values its row was placed by (the same as in the row).
    let keys: [Value]
    /// Objects its sort or section key paths went through (`category` for
    /// `category.name`), held so their changes can be traced back to it.
    let through: [ManagedObject]
}

/// The ordered results of a controller and the operations on them.
struct FRCStore {
    static let maxChunk = 512

    let sortKeys: [SortKey]
    var sections: [FRCSection] = []
    var sectionsByValue: [Value: FRCSection] = [:]
    var location: [ObjectIdentifier: FRCLocation] = [:]
    var stats = FetchedResultsChangeStatistics()

    init(sortKeys: [SortKey]) { self.sortKeys = sortKeys }

    var count: Int { location.count }

    // MARK: Order

    /// < 0, 0, > 0 as `a` comes before, is, or comes after `b`.
    mutating func compare(_ a: FRCRow, _ b: FRCRow) -> Int {
        stats.comparisons += 1
        for (i, k) in sortKeys.enumerated() {
            var c = k.compareValues(a.keys[i], b.keys[i])
            if !k.ascending { c = -c }
            if c != 0 { return c }
        }
        if a.object === b.object { return 0 }
        return ManagedObjectContext.idOrder(a.object.objectID, b.object.objectID) ? -1 : 1
    }

    /// The first position in `rows` whose row is not before `row`.
    mutating func lowerBound(_ rows: [FRCRow], _ row: FRCRow) -> Int {
        var lo = 0, hi = rows.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if compare(rows[mid], row) < 0 { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    /// The index of `section` in `sections` (by its first row), or nil.
    mutating func index(of section: FRCSection) -> Int? {
        if sections.count == 1 { return sections[0] === section ? 0 : nil }
        guard let head = section.head else { return sections.firstIndex { $0 === section } }
        var lo = 0, hi = sections.count
        while lo < hi {
            let mid = (lo + hi) / 2
            // Sections in `sections` are never empty when there are several.
            guard let h = sections[mid].head else { return sections.firstIndex { $0 === section } }
            if compare(h, head) < 0 { lo = mid + 1 } else { hi = mid }
        }
        return lo < sections.count && sections[lo] === section ? lo : sections.firstIndex { $0 === section }
    }

    /// Puts `section` (not in `sections`, not empty) at its place by first row.
    mutating func place(_ section: FRCSection) {
        guard let head = section.head else {
            sections.append(section)
            return
        }
        var lo = 0, hi = sections.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if let h = sections[mid].head, compare(h, head) < 0 { lo = mid + 1 } else { hi = mid }
        }
        sections.insert(section, at: lo)
    }

    // MARK: Rows

    /// The section and row number of a member object.
    mutating func position(of object: ManagedObject) -> (FRCSection, Int)? {
        guard let loc = location[ObjectIdentifier(object)] else { return nil }
        let section = loc.chunk.section
        var row = 0
        for c in section.chunks {
            stats.chunksScanned += 1
            if c === loc.chunk { break }
            row += c.rows.count
        }
        guard let i = rowIndex(of: object, in: loc.chunk) else { return nil }
        return (section, row + i)
    }

    /// The position of `object` within its chunk: a binary search by the
    /// sort values it was placed by.
    mutating func rowIndex(of object: ManagedObject, in chunk: FRCChunk) -> Int? {
        guard let loc = location[ObjectIdentifier(object)] else { return nil }
        let i = lowerBound(chunk.rows, FRCRow(object: object, keys: loc.keys))
        if i < chunk.rows.count && chunk.rows[i].object === object { return i }
        return nil
    }

    /// Adds a row to `section` at its place.
    mutating func insert(_ row: FRCRow, into section: FRCSection, through: [ManagedObject]) {
        let key = ObjectIdentifier(row.object)
        precondition(location[key] == nil, "an object is in a fetched-results controller twice (a Kura bug)")
        section.count += 1
        guard !section.chunks.isEmpty else {
            let c = FRCChunk([row], section)
            section.chunks.append(c)
            location[key] = FRCLocation(chunk: c, keys: row.keys, through: through)
            return
        }
        // The first chunk whose last row comes after the new row, or the last chunk.
        var lo = 0, hi = section.chunks.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if let last = section.chunks[mid].rows.last, compare(last, row) < 0 { lo = mid + 1 } else { hi = mid }
        }
        let ci = Swift.min(lo, section.chunks.count - 1)
        let chunk = section.chunks[ci]
        let i = lowerBound(chunk.rows, row)
        stats.rowsShifted += chunk.rows.count - i
        chunk.rows.insert(row, at: i)
        location[key] = FRCLocation(chunk: chunk, keys: row.keys, through: through)
        if chunk.rows.count > Self.maxChunk {
            let half = chunk.rows.count / 2
            let upper = FRCChunk(Array(chunk.rows[half...]), section)
            chunk.rows.removeSubrange(half...)
            stats.rowsShifted += upper.rows.count
            for r in upper.rows {
                let k = ObjectIdentifier(r.object)
                location[k]?.chunk = upper
            }
            section.chunks.insert(upper, at: ci + 1)
        }
    }

    /// Removes a member object's row; returns where it was (its location).
    @discardableResult
    mutating func remove(_ object: ManagedObject) -> FRCLocation? {
        let key = ObjectIdentifier(object)
        guard let loc = location[key] else { return nil }
        let chunk = loc.chunk
        let section = chunk.section
        guard let i = rowIndex(of: object, in: chunk) else {
            preconditionFailure("a fetched-results controller lost a row (a Kura bug)")
        }
        stats.rowsShifted += chunk.rows.count - i - 1
        chunk.rows.remove(at: i)
        location[key] = nil
        section.count -= 1
        guard let ci = section.chunks.firstIndex(where: { $0 === chunk }) else { return loc }
        if chunk.rows.isEmpty {
            section.chunks.remove(at: ci)
        } else if chunk.rows.count < Self.maxChunk / 8 && ci + 1 < section.chunks.count
                    && chunk.rows.count + section.chunks[ci + 1].rows.count <= Self.maxChunk {
            // Keep chunks from thinning out: merge a small one into its successor.
            let next = section.chunks[ci + 1]
            next.rows.insert(contentsOf: chunk.rows, at: 0)
            stats.rowsShifted += next.rows.count
            for r in chunk.rows {
                let k = ObjectIdentifier(r.object)
                location[k]?.chunk = next
            }
            section.chunks.remove(at: ci)
        }
        return loc
    }

    /// The rows of a section, in order.
    func rows(of section: FRCSection) -> [FRCRow] {
        section.chunks.flatMap(\.rows)
    }

    /// The row at `index` of `section`.
    mutating func row(at index: Int, of section: FRCSection) -> FRCRow? {
        var i = index
        for c in section.chunks {
            stats.chunksScanned += 1
            if i < c.rows.count { return c.rows[i] }
            i -= c.rows.count
        }
        return nil
    }

    /// Verifies the invariants in the header (tests call it through the controller).
    mutating func checkInvariants(singleSection: Bool) -> String? {
        var seen = 0
        var previousHead: FRCRow?
        for s in sections {
            if s.chunks.isEmpty && !(singleSection && sections.count == 1) { return "empty section \(s.name)" }
            var n = 0
            var previous: FRCRow?
            for c in s.chunks {
                if c.rows.isEmpty { return "empty chunk in section \(s.name)" }
                if c.rows.count > Self.maxChunk { return "oversized chunk in section \(s.name)" }
                if c.section !== s { return "chunk of section \(s.name) names another section" }
                for r in c.rows {
                    if let p = previous, compare(p, r) >= 0 { return "rows out of order in section \(s.name)" }
                    if location[ObjectIdentifier(r.object)]?.chunk !== c { return "location of \(r.object.objectID) is wrong" }
                    if location[ObjectIdentifier(r.object)]?.keys != r.keys { return "cached keys of \(r.object.objectID) differ" }
                    previous = r
                    n += 1
                }
            }
            if n != s.count { return "section \(s.name) counts \(s.count) rows but holds \(n)" }
            if let h = s.head {
                if let p = previousHead, compare(p, h) >= 0 { return "sections out of order at \(s.name)" }
                previousHead = h
            }
            if sectionsByValue[s.value] !== s && !singleSection { return "section \(s.name) is not indexed by its value" }
            seen += n
        }
        if seen != location.count { return "\(location.count) locations for \(seen) rows" }
        return nil
    }
}
