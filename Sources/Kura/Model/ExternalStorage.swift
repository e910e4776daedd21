// ExternalStorage: Core Data's "Allows External Storage" for binary attributes.
//
// An attribute with `allowsExternalBinaryDataStorage` (a `.data` or
// `.transformable` one) gets an engine column of type `external` instead of
// `blob`. The engine does the rest (KuraEngine/External/ExternalValues.swift,
// FORMAT.md "External values"): a value of at least the threshold goes to a
// file beside the store, written and synced before the commit that refers to
// it; the file of a replaced or deleted value is removed once no snapshot can
// read it; files of rolled-back or crashed saves are removed. Rows reach the
// object layer with the bytes already read, inside the transaction that read
// the row (`tx.values(in:rowID:)`, `valuesOf`), so an object never holds a
// reference to a file that might be gone: the context needs nothing else.
//
// Limits: such an attribute cannot be indexed (nor be part of a uniqueness
// constraint or fetch index: opening the store fails naming the column), and a
// predicate on it sees external values as their reference text: only
// `== nil` / `!= nil` are reliable (as in Core Data, where the column holds a
// file name).

import KuraEngine

extension AttributeDescription {
    /// The engine column type the attribute is stored in.
    var storedColumnType: ColumnType {
        allowsExternalBinaryDataStorage && (type == .data || type == .transformable) ? .external : type.columnType
    }
}
