// FetchedResultsController+ChangeSet: what a fetched-results controller
// reports, in two forms.
//
// 1. A change set (`FetchedResultsChangeSet`), ordered for a table view's batch
//    update (UITableView `performBatchUpdates` semantics):
//      deleteSection   descending old section index
//      delete          descending old index path
//      moveSection     by ascending new index
//      insertSection   ascending new section index
//      insert          ascending new index path
//      move            by ascending new index path
//      update          by ascending new index path
//    Deletes and the sources of moves refer to the results before the change;
//    inserts and the destinations of moves to the results after it; updates
//    give both. Applying it to a copy of the old results:
//      a. remove the rows of `delete` and the sources of `move`, by old index
//         path, last first;
//      b. remove the `deleteSection` sections and take out the `moveSection`
//         sections (with their remaining rows), by old index, last first;
//      c. insert the `insertSection` sections (empty) and the taken-out
//         sections at their new indexes, first first;
//      d. insert the rows of `insert` and the destinations of `move` at their
//         new index paths, first first;
//      e. an `update` row keeps its place (its new index path) and takes the
//         given object ID (a save makes temporary IDs permanent).
//    The result is exactly a fresh fetch, section by section.
//
//    As Core Data does, the rows of a deleted section are also reported as
//    deleted and the rows of an inserted section as inserted. An object that
//    leaves a deleted or moved section, or enters an inserted or moved one, is
//    reported as delete plus insert, not as a move (table views refuse moves
//    out of sections being deleted). An object whose sort or section values
//    changed is a move unless it keeps its place among the unchanged rows,
//    then it is an update.
//
// 2. A snapshot (`FetchedResultsSnapshot`): the section names and the object
//    IDs of each section, in order: the diffable form.

import Foundation
import KuraEngine

/// A row's position in a fetched-results controller: section, then row
/// within the section (the role of Foundation's `IndexPath` with UIKit's
/// `section`/`row`, without depending on UIKit).
public struct ResultIndexPath: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var section: Int
    public var row: Int

    public init(row: Int, section: Int) {
        self.section = section
        self.row = row
    }

    public static func < (a: ResultIndexPath, b: ResultIndexPath) -> Bool {
        a.section != b.section ? a.section < b.section : a.row < b.row
    }

    public var description: String { "[\(section), \(row)]" }
}

/// One change of a fetched-results controller's results. Object IDs are the
/// objects' IDs when the change was reported (temporary for unsaved objects).
public enum FetchedResultsChange: Sendable, Hashable, CustomStringConvertible {
    /// A section appeared, at `index` of the new results.
    case insertSection(index: Int, name: String)
    /// A section disappeared from `index` of the old results.
    case deleteSection(index: Int, name: String)
    /// A section moved (only when the section key does not order like the
    /// first sort key, so that a section's first object can change its order
    /// against other sections).
    case moveSection(from: Int, to: Int, name: String)
    /// An object appeared at `at` (new results).
    case insert(ManagedObjectID, at: ResultIndexPath)
    /// An object disappeared from `at` (old results).
    case delete(ManagedObjectID, at: ResultIndexPath)
    /// An object moved (its sort or section values changed).
    case move(ManagedObjectID, from: ResultIndexPath, to: ResultIndexPath)
    /// An object changed in place: `at` in the old results, `newIndexPath` in
    /// the new (different only by the inserts and deletes around it).
    case update(ManagedObjectID, at: ResultIndexPath, newIndexPath: ResultIndexPath)

    public var description: String {
        switch self {
        case .insertSection(let i, let n): return "insert section \(i) \"\(n)\""
        case .deleteSection(let i, let n): return "delete section \(i) \"\(n)\""
        case .moveSection(let f, let t, let n): return "move section \"\(n)\" \(f) -> \(t)"
        case .insert(let id, let p): return "insert \(p) \(id.uriRepresentation)"
        case .delete(let id, let p): return "delete \(p) \(id.uriRepresentation)"
        case .move(let id, let f, let t): return "move \(f) -> \(t) \(id.uriRepresentation)"
        case .update(let id, let p, let n): return p == n ? "update \(p) \(id.uriRepresentation)" : "update \(p) (now \(n)) \(id.uriRepresentation)"
        }
    }
}

/// The changes of one batch, in the order described in
/// FetchedResultsController+ChangeSet.swift (table-view batch-update order).
public struct FetchedResultsChangeSet: Sendable, Equatable {
    /// The changes in batch-update order.
    public var changes: [FetchedResultsChange] = []

    public init(changes: [FetchedResultsChange] = []) { self.changes = changes }

    public var isEmpty: Bool { changes.isEmpty }

    /// Old indexes of deleted sections.
    public var deletedSections: [Int] { changes.compactMap { if case .deleteSection(let i, _) = $0 { return i } else { return nil } } }
    /// New indexes of inserted sections.
    public var insertedSections: [Int] { changes.compactMap { if case .insertSection(let i, _) = $0 { return i } else { return nil } } }
    /// Old index paths of deleted rows.
    public var deletedRows: [ResultIndexPath] { changes.compactMap { if case .delete(_, let p) = $0 { return p } else { return nil } } }
    /// New index paths of inserted rows.
    public var insertedRows: [ResultIndexPath] { changes.compactMap { if case .insert(_, let p) = $0 { return p } else { return nil } } }
    /// Moved rows, old to new index path.
    public var movedRows: [(from: ResultIndexPath, to: ResultIndexPath)] {
        changes.compactMap { if case .move(_, let f, let t) = $0 { return (f, t) } else { return nil } }
    }
    /// Old index paths of rows updated in place (what `reloadRows` takes in a batch update).
    public var updatedRows: [ResultIndexPath] { changes.compactMap { if case .update(_, let p, _) = $0 { return p } else { return nil } } }
}

/// The results as section names and object IDs: the diffable form (what a
/// diffable data source takes).
public struct FetchedResultsSnapshot: Sendable, Equatable {
    /// One section: its name and its objects' IDs in order.
    public struct Section: Sendable, Equatable {
        public var name: String
        public var objectIDs: [ManagedObjectID]

        public init(name: String, objectIDs: [ManagedObjectID]) {
            self.name = name
            self.objectIDs = objectIDs
        }
    }

    public var sections: [Section]

    public init(sections: [Section]) { self.sections = sections }

    /// The section names in order (the section identifiers).
    public var sectionIdentifiers: [String] { sections.map(\.name) }
    /// Every object ID, section after section.
    public var itemIdentifiers: [ManagedObjectID] { sections.flatMap(\.objectIDs) }
    public var numberOfItems: Int { sections.reduce(0) { $0 + $1.objectIDs.count } }
}

/// What the last change a controller processed cost: how much of the results
/// it touched (what "cost proportional to the change" is measured by).
public struct FetchedResultsChangeStatistics: Sendable, Equatable {
    /// Objects whose membership and sort values were (re)evaluated.
    public var objectsEvaluated = 0
    /// Comparisons of sort values (binary searches).
    public var comparisons = 0
    /// Rows moved in memory (shifted within a chunk, split or merged).
    public var rowsShifted = 0
    /// Chunk references walked to turn a row's place into a row number.
    public var chunksScanned = 0
    /// Whether the change re-ran the fetch (only after `reset()`).
    public var refetched = false

    public init() {}
}

/// One section of a fetched-results controller (Core Data's
/// `NSFetchedResultsSectionInfo`), as it was when ``FetchedResultsController/sections``
/// was read: read `sections` again after a change.
public struct FetchedResultsSection<T: ManagedObject> {
    /// The section's name: its section key value as text ("" for nil, and for
    /// the single section of a controller without a section key path).
    public let name: String
    /// The title for a section index (``FetchedResultsController/sectionIndexTitle(forSectionName:)``).
    public let indexTitle: String?
    /// How many objects the section holds.
    public let numberOfObjects: Int
    let store: FRCSection

    /// The section's objects, in order (their current state: valid until the
    /// controller's next change).
    public var objects: [T] {
        store.chunks.flatMap(\.rows).map { FetchedResultsController<T>.cast($0.object) }
    }
}
