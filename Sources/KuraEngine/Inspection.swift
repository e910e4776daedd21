// Inspection: what one integrity check found (IntegrityCheck.swift): the
// problems, and for the `kura` tool's `pages`, `stats`, `schema` and `info`,
// what every page is used for, each tree's size and the decoded catalog.

/// What one page is used for, as found by a walk.
package struct PageUsage: Sendable, Equatable {
    /// `header`, `table-interior`, `table-leaf`, `index-interior`, `index-leaf`,
    /// `overflow`, `freelist-trunk`, `free`, `unreadable`, `leaked`.
    package var kind: String
    /// `catalog`, `table NAME`, `index NAME`, `freelist`, or `-`.
    package var owner: String
    /// Cells of a tree page, entries of a trunk, value bytes of an overflow page.
    package var items: Int = 0
    /// Fill of a tree page (bytes of cells and pointers over the space for them).
    package var fill: Double?
    /// Overflow pages hanging off this leaf's cells.
    package var overflowPages: Int = 0
    /// Why the page is unreadable, or its raw kind byte when leaked.
    package var note: String?
}

/// Space used by one tree.
package struct ObjectSpace: Sendable, Equatable {
    package var name: String
    /// `catalog`, `table` or `index`.
    package var kind: String
    /// For an index, its table.
    package var table: String?
    package var rootPage: UInt32
    /// Row count the catalog records (tables).
    package var catalogRowCount: Int64?
    /// The tree's pages, entries and fill, as `ReadTransaction.statistics(of:)` reports them.
    package var tree = TreeStatistics()
    /// Bytes of keys and values stored (overflow parts included).
    package var payloadBytes = 0
    /// Whether every page of the tree could be read.
    package var complete = true

    package var totalPages: Int { tree.totalPages }
    package var leafFill: Double { tree.leafFill }
}

/// One catalog entry with its decoded definition.
package struct CatalogObject: Sendable {
    package let info: TableInfo
    /// The table's schema (nil for a raw table or an index, or if it does not decode).
    package let schema: TableSchema?
    /// The index definition (indexes whose definition decodes).
    package let index: IndexDefinition?
    /// Why the definition does not decode.
    package let definitionError: String?
}

/// The result of a walk.
package struct Inspection: Sendable {
    /// The first `limit` problems found.
    package var problems: [IntegrityProblem] = []
    /// All problems found (may exceed `problems.count`).
    package var problemCount = 0
    /// Usage of pages 1 ... pageCount (index 0 is page 1); empty unless asked for.
    package var usage: [PageUsage] = []
    /// Trees: the catalog, then tables and indexes in catalog-ID order.
    package var objects: [ObjectSpace] = []
    /// Catalog entries in catalog-ID order.
    package var catalog: [CatalogObject] = []
    /// Pages found on the freelist (trunks and leaves).
    package var freePages = 0
    /// Header fields of the snapshot's page 1.
    package var header: HeaderFields?
}
