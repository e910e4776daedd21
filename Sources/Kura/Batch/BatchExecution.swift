// BatchExecution: runs the batch requests of BatchRequests.swift.
//
// Each request is one write transaction. Objects are selected inside it by a
// scratch context whose reads go through the transaction (its
// `enclosingTransaction`), so a predicate means exactly what it means in a
// fetch (relationship key paths, `entity.name`, aggregates) and is decided on
// the state the transaction changes, never on an older read. Everything is
// computed and checked first; rows are written only when nothing was
// refused, and a refusal or a failed write rolls the whole transaction back.
// After the commit the changes go to the persistent history (when tracked),
// the store watcher (so this process does not take its own commit for
// another's) and the container's save observers, as a save's do.

import Foundation

extension PersistentContainer {
    /// Inserts the request's objects in one transaction.
    ///
    /// Thread rules: any thread; the handler (if any) runs on the calling
    /// thread inside the write transaction. Contexts do not see the new
    /// objects until they fetch, or merge ``BatchResult/changes``.
    ///
    /// - Throws: `.notFound` for an unknown entity or key; `.invalidArgument`
    ///   for an abstract entity, a relationship key, or an entity with a
    ///   required relationship; `.typeMismatch` for a value of the wrong type;
    ///   `.validation` for a missing required value or a broken validation
    ///   rule; `.constraintViolation` for a repeated uniqueness-constrained
    ///   value under `.fail`; every message names the object's position in
    ///   the batch. Engine errors (`.busy`, `.diskFull`, `.io`). On any error
    ///   nothing is written.
    @discardableResult
    public func execute(_ request: BatchInsertRequest, author: String? = nil, contextName: String? = nil) throws(KuraError) -> BatchResult {
        let e = try model.entity(request.entityName)
        try model.checkInsertable(e)
        try Self.refuseDerived(e, "batch insert into")
        if let c = e.attributes.first(where: { $0.compositeElements != nil }) {
            throw KuraError(.invalidArgument, "batch insert into \"\(e.name)\": composite attribute \"\(c.name)\" cannot be set by a batch insert; insert these objects through a context")
        }
        if let r = e.relationships.first(where: { !$0.isTransient && (!$0.isOptional || ($0.minCount ?? 0) > 0) }) {
            throw KuraError(.invalidArgument, "batch insert into \"\(e.name)\": relationship \"\(r.name)\" is required, and a batch insert cannot set relationships; insert these objects through a context")
        }
        return try runBatch(resultType: request.resultType, author: author, contextName: contextName) { tx, scratch throws(KuraError) in
            var batch = BatchInsertRun(container: self, entity: e, tx: tx, scratch: scratch, rule: request.onUniquenessConflict)
            switch request.source {
            case .objects(let list):
                for d in list { try batch.add(d) }
            case .handler(let make):
                while true {
                    var d: [String: Any] = [:]
                    let stop: Bool
                    do { stop = try make(&d) } catch let x as KuraError { throw x } catch {
                        throw KuraError(.invalidArgument, "batch insert into \"\(e.name)\": the dictionary handler threw at object \(batch.position): \(error); nothing was written")
                    }
                    if stop { break }
                    try batch.add(d)
                }
            }
            return (batch.affected, batch.changes)
        }
    }

    /// Updates the matching stored objects in one transaction.
    ///
    /// - Throws: `.notFound` for an unknown entity or attribute;
    ///   `.invalidArgument` for a relationship or transient key;
    ///   `.typeMismatch` for a value (or an expression's result on an object,
    ///   named) of the wrong type; `.validation` for nil in a required
    ///   attribute or a broken validation rule, naming the object;
    ///   `.constraintViolation` when the new values repeat a
    ///   uniqueness-constrained value; predicate and expression errors; engine
    ///   errors. On any error nothing is written.
    @discardableResult
    public func execute(_ request: BatchUpdateRequest, author: String? = nil, contextName: String? = nil) throws(KuraError) -> BatchResult {
        let e = try model.entity(request.entityName)
        var constants: [(AttributeDescription, Value)] = []
        var expressions: [(AttributeDescription, KuraExpression)] = []
        for key in request.propertiesToUpdate.keys.sorted() {
            let a = try Self.batchAttribute(e, key, "batch update of")
            let given = request.propertiesToUpdate[key] ?? nil
            if let x = given as? KuraExpression {
                expressions.append((a, x))
            } else {
                constants.append((a, try a.storedValue(Self.unwrapped(given), entity: e.name)))
            }
        }
        return try runBatch(resultType: request.resultType, author: author, contextName: contextName) { tx, scratch throws(KuraError) in
            var fetch = FetchRequest<ManagedObject>(entityName: e.name, predicate: request.predicate)
            fetch.includesSubentities = request.includesSubentities
            // Every object's new values are computed before any row changes.
            var planned: [(ManagedObjectID, [(AttributeDescription, Value)])] = []
            if expressions.isEmpty {
                for id in try scratch.fetchObjectIDs(fetch) { planned.append((id, constants)) }
            } else {
                for o in try scratch.fetch(fetch) {
                    var values = constants
                    for (a, x) in expressions {
                        let result = try x.evaluate(with: .object(ObjectView(object: o, context: scratch)))
                        values.append((a, try Self.expressionValue(result, for: a, of: o.objectID, entity: e.name)))
                    }
                    planned.append((o.objectID, values))
                }
            }
            var changes: [PersistentHistoryChange] = []
            for (id, values) in planned {
                try Self.checkValues(values, of: id)
                let x = try self.model.entity(id.entityName)
                guard let layout = self.layouts[x.name] else { throw Self.missingLayout(x) }
                let t = try tx.table(x.hierarchy.table)
                guard var row = try tx.values(in: t, rowID: id.rowID) else { continue }
                for (a, v) in values { try layout.set(a, v, in: &row, entity: x) }
                layout.bumpVersion(&row)
                do { _ = try tx.update(row, in: t, rowID: id.rowID) } catch { throw Self.located(error, "batch update of \"\(e.name)\": \(id)") }
                changes.append(PersistentHistoryChange(kind: .update, objectID: id, updatedProperties: values.map(\.0.name).sorted()))
            }
            return (planned.map(\.0), changes)
        }
    }

    /// Deletes the request's objects in one transaction, applying delete rules.
    ///
    /// - Throws: `.notFound` for an unknown entity; `.invalidArgument` for a
    ///   temporary ID; `.validation` when a deny rule holds or a required
    ///   to-one of a remaining object would be cleared, naming both objects
    ///   and the relationship; predicate and engine errors. On any error
    ///   nothing is deleted.
    @discardableResult
    public func execute(_ request: BatchDeleteRequest, author: String? = nil, contextName: String? = nil) throws(KuraError) -> BatchResult {
        if case .objectIDs(let ids) = request.target, let t = ids.first(where: \.isTemporary) {
            throw KuraError(.invalidArgument, "batch delete: \(t) is a temporary ID (an unsaved object is not in the store)")
        }
        return try runBatch(resultType: request.resultType, author: author, contextName: contextName) { tx, scratch throws(KuraError) in
            var roots: [ManagedObjectID] = []
            switch request.target {
            case .matching(let name, let predicate, let sub):
                var fetch = FetchRequest<ManagedObject>(entityName: name, predicate: predicate)
                fetch.includesSubentities = sub
                roots = try scratch.fetchObjectIDs(fetch)
            case .objectIDs(let ids):
                for id in ids {
                    let c = try scratch.canonicalID(id)
                    let x = try self.model.entity(c.entityName)
                    if try tx.values(in: try tx.table(x.hierarchy.table), rowID: c.rowID) != nil { roots.append(c) }
                }
            }
            var plan = BatchDeletePlan(container: self, tx: tx, scratch: scratch)
            try plan.close(over: roots)
            let changes = try plan.apply()
            return (plan.rootsDeleted, changes)
        }
    }

    /// One batch: a write transaction with a scratch context reading through
    /// it, then history, watcher and notification as a save does.
    func runBatch(resultType: BatchResultType, author: String?, contextName: String?,
                  _ body: (WriteTransaction, ManagedObjectContext) throws(KuraError) -> ([ManagedObjectID], [PersistentHistoryChange])) throws(KuraError) -> BatchResult {
        var affected: [ManagedObjectID] = []
        var record: [PersistentHistoryChange] = []
        var historyToken: HistoryToken?
        var ownCommit: UInt64?
        do {
            try database.write { tx in
                let scratch = ManagedObjectContext(container: self)
                scratch.enclosingTransaction = tx
                defer { scratch.enclosingTransaction = nil }
                (affected, record) = try body(tx, scratch)
                if persistentHistoryTracking && !record.isEmpty {
                    historyToken = try PersistentHistoryStore.append(tx, author: author, contextName: contextName, changes: record)
                }
                if !record.isEmpty {
                    let counter = try tx.changeCounter &+ 1
                    ownCommit = counter
                    storeWatcher.willCommit(counter: counter, token: historyToken)
                }
            }
        } catch let e as KuraError {
            if let ownCommit { storeWatcher.didNotCommit(counter: ownCommit, token: historyToken) }
            throw e
        } catch {
            if let ownCommit { storeWatcher.didNotCommit(counter: ownCommit, token: historyToken) }
            throw KuraError(.io, "\(error)")
        }
        var note = ContextDidSave(inserted: [], updated: [:], deleted: [], contextName: contextName, author: author, historyToken: historyToken)
        for c in record {
            switch c.kind {
            case .insert: note.inserted.append(c.objectID)
            case .update: note.updated[c.objectID, default: []].formUnion(c.updatedProperties)
            case .delete: note.deleted.append(c.objectID)
            }
        }
        if !note.isEmpty { saveBroadcaster.post(note) }
        return BatchResult(count: affected.count, objectIDs: resultType == .objectIDs ? affected : nil, changes: note)
    }

    // MARK: Values

    /// A stored, non-transient attribute of `e` a batch may set.
    static func batchAttribute(_ e: EntityDescription, _ key: String, _ what: String) throws(KuraError) -> AttributeDescription {
        if e.relationshipsByName[key] != nil {
            throw KuraError(.invalidArgument, "\(what) \"\(e.name)\": \"\(key)\" is a relationship; a batch request sets attributes only")
        }
        guard let a = e.attributesByName[key] else {
            throw KuraError(.notFound, "\(what) \"\(e.name)\": the entity has no attribute \"\(key)\"")
        }
        if a.isTransient { throw KuraError(.invalidArgument, "\(what) \"\(e.name)\": attribute \"\(key)\" is transient (not stored)") }
        if a.compositeElements != nil {
            throw KuraError(.invalidArgument, "\(what) \"\(e.name)\": attribute \"\(key)\" is composite; set it through a context")
        }
        try refuseDerived(e, what)
        return a
    }

    /// Derived attributes are computed at a context's save; a batch cannot
    /// keep them right, so it refuses their entity (DerivedAttributes.swift).
    static func refuseDerived(_ e: EntityDescription, _ what: String) throws(KuraError) {
        if let d = e.attributes.first(where: { $0.derivationExpression != nil }) {
            throw KuraError(.invalidArgument, "\(what) \"\(e.name)\": derived attribute \"\(d.name)\" is computed when a context saves; a batch request cannot keep it right: use a context")
        }
    }

    /// `v` with any Optional wrapping removed, NSNull as nil (a `String?` nil put in an
    /// `[String: Any]` is a non-nil `Any` holding `Optional.none`).
    static func unwrapped(_ v: Any?) -> Any? {
        guard let v, !(v is NSNull) else { return nil }
        let m = Mirror(reflecting: v)
        guard m.displayStyle == .optional else { return v }
        return unwrapped(m.children.first?.value)
    }

    /// The stored value for an expression's result on one object.
    static func expressionValue(_ r: EvaluatedValue, for a: AttributeDescription, of id: ManagedObjectID, entity: String) throws(KuraError) -> Value {
        guard case .scalar(let v) = r else {
            throw KuraError(.typeMismatch, "batch update of \"\(entity)\": the expression for \"\(a.name)\" gave a collection or an object on \(id), not a value")
        }
        let swift: Any?
        switch v {
        case .null: swift = nil
        case .integer(let i): swift = i
        case .double(let d):
            if [.int16, .int32, .int64].contains(a.type), d.rounded() == d, abs(d) < 9.2e18 { swift = Int64(d) }
            else if a.type == .date { swift = Date(timeIntervalSinceReferenceDate: d) }
            else { swift = d }
        case .text(let s):
            switch a.type {
            case .uuid: swift = UUID(uuidString: s) ?? s as Any
            case .url: swift = URL(string: s) ?? s as Any
            default: swift = s
            }
        case .bool(let b): swift = b
        case .blob(let b): swift = Data(b)
        }
        do { return try a.storedValue(swift, entity: entity) } catch {
            throw KuraError(error.code, "\(id): \(error.message)")
        }
    }

    /// Required values and validation rules of the values a batch writes.
    static func checkValues(_ values: [(AttributeDescription, Value)], of id: ManagedObjectID) throws(KuraError) {
        var problems: [String] = []
        for (a, v) in values {
            if !a.isOptional && v.isNull { problems.append("\(id): attribute \"\(a.name)\" is required (rule: not optional) but is nil") }
            problems += a.validationProblems(v, of: id)
        }
        if !problems.isEmpty {
            throw KuraError(.validation, "batch refused, nothing was written:\n  " + problems.joined(separator: "\n  "))
        }
    }

    static func missingLayout(_ e: EntityDescription) -> KuraError {
        KuraError(.invalidArgument, "entity \"\(e.name)\" has no row layout (a Kura bug)")
    }

    /// An engine error with where it happened prefixed.
    static func located(_ error: any Error, _ place: String) -> KuraError {
        guard let e = error as? KuraError else { return KuraError(.io, "\(place): \(error)") }
        return KuraError(e.code, "\(place): \(e.message); nothing was written", path: e.path, page: e.page, offset: e.offset)
    }
}

extension RowLayout {
    /// Writes attribute `a`'s stored value into a row of entity `e`.
    func set(_ a: AttributeDescription, _ v: Value, in row: inout [Value], entity e: EntityDescription) throws(KuraError) {
        guard let i = e.attributes.firstIndex(where: { $0.name == a.name }), let c = attributeColumns[i] else {
            throw KuraError(.notFound, "entity \"\(e.name)\" has no stored attribute \"\(a.name)\"")
        }
        pad(&row)
        row[c] = a.type.engineValue(v)
        if let x = exactColumns[i] { row[x] = { if case .text = v { return v } else { return .null } }() }
    }

    /// Extends a stored row written before its table's last columns were
    /// added with those columns' defaults (records may be shorter than the table).
    func pad(_ row: inout [Value]) {
        while row.count < columns.count { row.append(defaults[row.count]) }
    }

    /// Advances a stored row's version (a context holding the old version
    /// meets a conflict when it saves).
    func bumpVersion(_ row: inout [Value]) {
        pad(&row)
        if case .integer(let n) = row[version] { row[version] = .integer(n &+ 1) } else { row[version] = .integer(1) }
    }
}

extension ManagedObjectContext {
    /// Runs a batch insert on this context's store, recorded with this
    /// context's `transactionAuthor` and `name` (Core Data's
    /// `execute(_:)`). As in Core Data, this context's objects are not
    /// changed: fetch again, or merge ``BatchResult/changes`` (a context that
    /// merges automatically already has them). Errors: see
    /// ``PersistentContainer/execute(_:author:contextName:)-(BatchInsertRequest,_,_)``.
    @discardableResult
    public func execute(_ request: BatchInsertRequest) throws(KuraError) -> BatchResult {
        try container.execute(request, author: transactionAuthor, contextName: name)
    }

    /// Runs a batch update on this context's store; this context's objects
    /// are not changed (merge ``BatchResult/changes`` to refresh them). A
    /// pending change of this context to an updated object meets a merge
    /// conflict at its save, as any change saved elsewhere does.
    @discardableResult
    public func execute(_ request: BatchUpdateRequest) throws(KuraError) -> BatchResult {
        try container.execute(request, author: transactionAuthor, contextName: name)
    }

    /// Runs a batch delete on this context's store; this context's objects
    /// are not changed (merge ``BatchResult/changes`` to drop them).
    @discardableResult
    public func execute(_ request: BatchDeleteRequest) throws(KuraError) -> BatchResult {
        try container.execute(request, author: transactionAuthor, contextName: name)
    }
}
