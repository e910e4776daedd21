// RowLayout: where an entity's values sit in its table's rows (the mapping is
// in ManagedObjectModel.swift): attributes first, in model order, then each
// to-one key (and its order column), and the version column last. Computed
// once per container from the model, so reading a row needs no lookups that
// could fail.

/// Column positions of one entity's table.
struct RowLayout: Sendable {
    struct Slot: Sendable {
        let name: String
        let destination: String
        let column: Int
        let orderColumn: Int?
    }
    /// The to-one relationships' key (and order) columns.
    let relationships: [Slot]
    /// The version column (the last one).
    let version: Int
    /// Column names in order (attributes, to-one keys, order columns, version).
    let columns: [String]

    /// The layouts of every entity of `model`, by entity name.
    static func all(_ model: ManagedObjectModel) throws(KuraError) -> [String: RowLayout] {
        var out: [String: RowLayout] = [:]
        for e in model.entities {
            let schema = try model.schema(of: e)
            var slots: [Slot] = []
            for r in e.relationships where !r.isToMany {
                guard let column = schema.position(of: r.name) else {
                    throw KuraError(.invalidArgument, "entity \"\(e.name)\": the table schema lacks column \"\(r.name)\" (a Kura bug)")
                }
                slots.append(Slot(name: r.name, destination: r.destination, column: column, orderColumn: schema.position(of: r.name + "_order")))
            }
            guard let version = schema.position(of: ManagedObjectModel.versionColumn) else {
                throw KuraError(.invalidArgument, "entity \"\(e.name)\": the table schema lacks the version column (a Kura bug)")
            }
            out[e.name] = RowLayout(relationships: slots, version: version, columns: schema.columns.map(\.name))
        }
        return out
    }
}

/// The object IDs of one batch of a batched fetch (`fetchBatchSize`): when one
/// of its faults fires, the context loads all of them in one read.
final class BatchGroup {
    let ids: [ManagedObjectID]
    init(_ ids: [ManagedObjectID]) { self.ids = ids }
}
