// FetchIndexDescription: a compound index declared in the model (Core Data's
// NSFetchIndexDescription; Xcode's `<fetchIndex>` with several
// `<fetchIndexElement>`s, or the older `<compoundIndex>`).
//
// Storage: one engine index per declared fetch index, on the table of the
// entity's hierarchy (EntityHierarchy.swift), named `<Entity>_fetchIndex_<name>`,
// over the elements' columns in order, each ascending or descending. An element
// names an attribute (its column) or a to-one relationship (its foreign-key
// column). Indexes are created with the table: a store created before an index
// was added to the model opens without it (fetches are right, only slower), as
// for `indexed: true`.
//
// Invariants (checked by `ManagedObjectModel.init`, thrown as `ModelError`):
// the name is non-empty and unique among the entity's fetch indexes (inherited
// ones included); there is at least one element; every element names a stored
// attribute or a to-one relationship of the entity (inherited ones included).

/// A non-unique index over one or more properties of an entity, for fetches
/// that filter or sort by them together. Immutable.
///
/// ```swift
/// EntityDescription("Mood") {
///     AttributeDescription("date", .date)
///     AttributeDescription("country", .string)
///     FetchIndexDescription("byCountryAndDate", [.ascending("country"), .descending("date")])
/// }
/// ```
public struct FetchIndexDescription: Sendable, Equatable {
    /// One property of the index and its order.
    public struct Element: Sendable, Equatable {
        /// An attribute or to-one relationship of the entity.
        public let property: String
        public let isAscending: Bool

        public init(_ property: String, ascending: Bool = true) {
            self.property = property
            self.isAscending = ascending
        }
        public static func ascending(_ property: String) -> Element { Element(property, ascending: true) }
        public static func descending(_ property: String) -> Element { Element(property, ascending: false) }
    }

    /// The index's name, unique among the entity's fetch indexes.
    public let name: String
    /// The indexed properties, most significant first.
    public let elements: [Element]

    public init(_ name: String, _ elements: [Element]) {
        self.name = name
        self.elements = elements
    }

    /// An index over `properties`, all ascending.
    public init(_ name: String, on properties: String...) {
        self.init(name, properties.map { Element($0) })
    }
}
