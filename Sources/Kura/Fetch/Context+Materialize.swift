// Context+Materialize: the objects of a fetch's store answer (the store path
// of Context+Fetch.swift), made from the rows the engine returns.
//
// Per row: an object registered before the fetch takes the row as
// `materialize` gives it (`takeFetchedRow`: a fault takes it, a clean object
// takes it keeping its transients, a changed or deleted object keeps its
// state); any other row becomes a new object of the row's entity. For a
// layout that needs no conversion (`RowLayout.fetchColumns`: attributes,
// plain to-one keys and the version, no shared table, no external values)
// the new object's slots are decoded from the record where it lies in its
// page (`Row.withColumns`), as a fault's borrowed load does
// (`ManagedObjectContext.loadBorrowed`), without the row array that
// `RowLayout.values(of:_:_:)` makes; the outcome is `apply`'s on that array
// (columns the record does not store read as their defaults, transient
// attributes as their insert values, a key column's integer as the to-one
// target). Rows the answer memo keeps (StoreAnswerMemo.swift: the first
// `maxRows` of an answer, and answers read back from it) are decoded into
// arrays, which the memo needs, and applied as before.
//
// Order: the new objects are registered together once every row is read
// (the registry sized once for all of them, `ObjectRegistry.reserveFetched`,
// instead of growing as they come), then get `awakeFromFetch`, in order: a
// hook that looks up another object of the same fetch finds it registered
// and loaded. A row returned twice (never by a table query) gives the
// object made first.

import KuraEngine

extension ManagedObjectContext {
    /// The objects of the rows `q`, a query of `e`'s table, returns in `tx`
    /// (from the answer memo when it holds the answer for the store as `tx`
    /// sees it), in order, uniqued (see the file header).
    ///
    /// - Throws: `.corrupt` for a record that does not decode or a bad
    ///   `_entity`; engine read errors.
    func materializeStoreRows(_ q: TableQuery, _ e: EntityDescription, in tx: ReadTransaction) throws(KuraError) -> [ManagedObject] {
        let layout = self.layout(of: e)
        var made = FetchedObjects()
        // As `eachStoreRow`: a batch request's reads see its uncommitted
        // writes, which do not move the counter; external values are read
        // per fetch.
        let memo = enclosingTransaction == nil && !layout.hasExternal ? storeAnswers : nil
        let db = ObjectIdentifier(database)
        var counter: UInt64 = 0
        if let memo {
            counter = try tx.changeCounter
            if let rows = memo.answer(q, database: db, counter: counter) {
                for r in rows { try take(r.rowID, r.values, of: e, into: &made) }
                return finish(&made)
            }
        }
        let cursor = try tx.select(q)
        let table = try tx.table(e.hierarchy.table)
        var keeping = memo != nil
        var kept: [(rowID: Int64, values: [Value])] = []
        // Resolved once for every row.
        let inPlace = layout.fetchColumns
        let name = e.name
        let objectClass = e.objectClass
        while let row = try cursor.next() {
            guard let columns = inPlace, !keeping else {
                let values = try layout.values(of: row, tx, table)
                if keeping {
                    if kept.count < StoreAnswerMemo.maxRows { kept.append((row.rowID, values)) } else { keeping = false; kept = [] }
                }
                try take(row.rowID, values, of: e, into: &made)
                continue
            }
            try take(row, e, name, objectClass, layout, columns, tx, into: &made)
        }
        if let memo, keeping { memo.keep(q, kept, database: db, counter: counter) }
        return finish(&made)
    }

    /// The objects of `e`'s rows whose to-one key column `column` holds one
    /// of `keys` (row IDs of the key's destination), read through the
    /// column's index without a query (`ReadTransaction.forEachRow`), in the
    /// order it gives them (by key, then row ID), each row taken as
    /// `materializeStoreRows` takes it. Nil, having read nothing, when this
    /// way does not apply: `e`'s layout needs conversions or shares its
    /// table (`RowLayout.fetchColumns` is nil), or no index has the column
    /// first; the caller then runs a query.
    ///
    /// Not memoized (StoreAnswerMemo.swift): the rows of one owner are few,
    /// and read again only when the owner's relationship is read again.
    ///
    /// - Throws: `.corrupt` for a record that does not decode or an index
    ///   entry without its row; engine read errors.
    func materializeKeyedRows(_ e: EntityDescription, column: String, keys: [Int64], in tx: ReadTransaction) throws(KuraError) -> [ManagedObject]? {
        let layout = self.layout(of: e)
        guard let columns = layout.fetchColumns else { return nil }
        var made = FetchedObjects()
        let name = e.name
        let objectClass = e.objectClass
        let found = try tx.forEachRow(in: e.hierarchy.table, whereInteger: column, isOneOf: keys) { row throws(KuraError) in
            try take(row, e, name, objectClass, layout, columns, tx, into: &made)
        }
        return found ? finish(&made) : nil
    }

    /// The object for `row`, a row of `e`'s table (`name` and `objectClass`
    /// its entity's, `columns` its layout's `fetchColumns`): the registered
    /// one (taking the row as `takeFetchedRow` does, unless it holds it
    /// already), or a new one filled from the record in place, which
    /// `finish` registers.
    @inline(__always)
    private func take(_ row: Row, _ e: EntityDescription, _ name: String, _ objectClass: ManagedObject.Type, _ layout: RowLayout,
                      _ columns: [Int], _ tx: ReadTransaction, into made: inout FetchedObjects) throws(KuraError) {
        let id = ManagedObjectID(entity: name, rowID: row.rowID)
        if registry.count > 0, let o = registered(id) {
            // A loaded object that holds this row already needs nothing
            // from it (see `holdsRow`): no decode of the row.
            if try !holdsRow(o, row, layout) {
                takeFetchedRow(try layout.values(of: row, tx, try tx.table(e.hierarchy.table)), into: o)
            }
            made.objects.append(o)
            return
        }
        let o = objectClass.init(entity: e, objectID: id)
        o.contextLink = link
        try fill(o, from: row, layout, columns)
        made.addNew(o)
    }

    /// Whether `o`, registered and loaded, would take nothing from `row`, its
    /// row as the store holds it now (`takeFetchedRow` would leave it as it
    /// is): a changed or deleted object keeps its state whatever the row
    /// says; a clean one whose version is the row's holds that row's values
    /// already (every write of a row through the object layer, a context's
    /// save or a batch request, moves its version, and a clean object's
    /// values are those of the version it last read, saved or reloaded). Its
    /// read error, if any, is cleared, as taking the row would. False for a
    /// fault (it takes the row).
    ///
    /// - Throws: `.corrupt` if the record's version column does not decode.
    @inline(__always)
    private func holdsRow(_ o: ManagedObject, _ row: Row, _ layout: RowLayout) throws(KuraError) -> Bool {
        if o.isFault { return false }
        if o.hasChangedValues || o.isDeleted { return true }
        // `apply` reads a version past the record's end as 0 (its default).
        guard (try row.value(at: layout.version)).integerValue ?? 0 == o.version else { return false }
        o.clearReadError()
        return true
    }

    /// The object for row `rowID` with `values`, a row of `e`'s table: the
    /// registered one (taking the row as `materialize` does) or a new one
    /// of the row's entity, which `finish` registers.
    private func take(_ rowID: Int64, _ values: [Value], of e: EntityDescription, into made: inout FetchedObjects) throws(KuraError) {
        let x = try rowEntity(values, rowID: rowID, in: e)
        let id = ManagedObjectID(entity: x.name, rowID: rowID)
        if registry.count > 0, let o = registered(id) {
            takeFetchedRow(values, into: o)
            made.objects.append(o)
            return
        }
        let o = x.objectClass.init(entity: x, objectID: id)
        o.contextLink = link
        apply(values, to: o)
        made.addNew(o)
    }

    /// Sets `o`, a new object of `layout`'s entity, from `row`'s record
    /// decoded in place, column by column into its slots (`columns`: the
    /// layout's `fetchColumns`): `apply` on the row's array, without the array.
    ///
    /// - Throws: `.corrupt` for a record that does not decode.
    private func fill(_ o: ManagedObject, from row: Row, _ layout: RowLayout, _ columns: [Int]) throws(KuraError) {
        let decoded = try decodeRecord(layout, columns) { (d, p) throws(KuraError) -> Bool in
            try row.withColumns { r throws(KuraError) in try d.decode(&r, into: p, columns, layout) }
            return true
        }
        // Cannot be nil: the reader above always has a record.
        guard let (slots, keys) = decoded else { return }
        install(slots, count: layout.attributeColumns.count, keys, in: o)
    }

    /// New slots for `layout`'s attributes (`columns`: its `fetchColumns`)
    /// and the keys and version, decoded from the record `read` finds:
    /// `read` passes the slots' address and the `DecodedRow` to
    /// `DecodedRow.decode` for its record and returns true, or returns
    /// false (no record: nil is returned). Every slot is set on return.
    @inline(__always)
    private func decodeRecord(_ layout: RowLayout, _ columns: [Int],
                              _ read: (inout DecodedRow, UnsafeMutablePointer<Value?>) throws(KuraError) -> Bool) throws(KuraError) -> (ValueSlots, DecodedRow)? {
        let n = layout.attributeColumns.count
        let slots = ValueSlots.make(count: n, from: nil)
        var decoded = DecodedRow()
        let found = try withExtendedLifetime(slots) { () throws(KuraError) -> Bool in
            // The slots' address is stable while `slots` lives (a ManagedBuffer's
            // elements are stored in it), which `withExtendedLifetime` ensures.
            let p = slots.withUnsafeMutablePointerToElements { $0 }
            guard try read(&decoded, p) else { return false }
            decoded.finish(p, count: n, columns, layout)
            return true
        }
        return found ? (slots, decoded) : nil
    }

    /// `install` for a new object (no positions, no read error, not a
    /// fault): `slots` (`count` of them, every one set) become its values
    /// and saved values, with the keys and version `decoded` read.
    @inline(__always)
    private func install(_ slots: ValueSlots, count n: Int, _ decoded: DecodedRow, in o: ManagedObject) {
        let values = AttributeValues(slots: slots, count: n)
        o.values = values
        o.savedValues = values
        if !decoded.toOne.isEmpty {
            o.toOne = decoded.toOne
            o.savedToOne = decoded.toOne
        }
        o.version = decoded.version
    }

    /// Loads fault `o` from `row`, its row, decoded in place (`fill`): what
    /// `apply` does for a fault with that row's array. `columns` is the
    /// layout's `fetchColumns` (no conversion, no shared table, no order
    /// column: nothing else to set).
    ///
    /// - Throws: `.corrupt` for a record that does not decode.
    func fillFault(_ o: ManagedObject, from row: Row, _ layout: RowLayout, _ columns: [Int]) throws(KuraError) {
        clearForLoad(o)
        try fill(o, from: row, layout, columns)
        markLoaded(o)
    }

    /// Loads fault `o` (its layout's `fetchColumns` is `columns`) from its
    /// record where it lies, in a read of its own without a transaction
    /// object (`Database.withRecord`), as `fillFault` loads it from a lent
    /// row. Returns what the lookup found: `.missing` (the row is gone) and
    /// `.external` (read the row as an array instead) load nothing.
    ///
    /// - Throws: `.corrupt` for a record that does not decode; engine read errors.
    func loadFault(_ o: ManagedObject, _ layout: RowLayout, _ columns: [Int]) throws(KuraError) -> BorrowedRecordLookup {
        var lookup = BorrowedRecordLookup.missing
        let decoded = try decodeRecord(layout, columns) { (d, p) throws(KuraError) -> Bool in
            lookup = try database.withRecord(inTable: layout.table, rowID: o.objectID.rowID) { r throws(KuraError) in
                try d.decode(&r, into: p, columns, layout)
            }
            if case .read = lookup { return true }
            return false
        }
        guard let (slots, keys) = decoded else { return lookup }
        clearForLoad(o)
        install(slots, count: layout.attributeColumns.count, keys, in: o)
        markLoaded(o)
        return lookup
    }

    /// What a fault's load clears before its row is installed: transient
    /// relationships start over (as `apply`), and keys of an earlier state
    /// go (`install` sets the row's keys only when it has some).
    @inline(__always)
    private func clearForLoad(_ o: ManagedObject) {
        if modelHasTransientRelationships { o.transientRelated = .init() }
        if !o.toOne.isEmpty { o.toOne = ToOneKeys() }
        if !o.savedToOne.isEmpty { o.savedToOne = ToOneKeys() }
    }

    /// What a fault's load sets after its row is installed: no positions,
    /// loaded, no read error.
    @inline(__always)
    private func markLoaded(_ o: ManagedObject) {
        o.clearOrders()
        o.isFault = false
        o.clearReadError()
    }

    /// Registers the new objects of `made` (the registry sized once for
    /// them), then calls their `awakeFromFetch` in order; returns the
    /// objects.
    private func finish(_ made: inout FetchedObjects) -> [ManagedObject] {
        guard !made.new.isEmpty else { return made.objects }
        registry.reserveFetched(made.new.count)
        for j in made.new.indices {
            let i = made.new[j]
            let o = made.objects[i]
            if let first = registry.addFetched(o.objectID, .passUnretained(o)) {
                // The same row twice: the object made first.
                made.objects[i] = first.takeUnretainedValue()
                made.new[j] = -1
            }
        }
        for i in made.new where i >= 0 { made.objects[i].awakeFromFetch() }
        return made.objects
    }
}

/// What `fill` decodes from a record besides the attributes' slots: the
/// version, the to-one keys, and how many columns the record stores.
private struct DecodedRow {
    var version: Int64 = 0
    var toOne = ToOneKeys()
    var stored = 0

    /// Decodes every column `r` stores: an attribute's into its slot at
    /// `p`, the version and to-one keys into this (`columns`: the layout's
    /// `fetchColumns`; columns past them are skipped).
    ///
    /// - Throws: `.corrupt` for a malformed record.
    @inline(__always)
    mutating func decode(_ r: inout RecordColumns, into p: UnsafeMutablePointer<Value?>, _ columns: [Int], _ layout: RowLayout) throws(KuraError) {
        while let v = try r.next() {
            let c = r.column - 1
            guard c < columns.count else { continue }
            place(v, columns[c], p, layout)
        }
        stored = r.column
    }

    /// Gives the columns the record does not store their defaults (as
    /// `RowLayout.values` pads a row), and transient attributes (no
    /// column) their insert values: every slot at `p` is set after this.
    @inline(__always)
    mutating func finish(_ p: UnsafeMutablePointer<Value?>, count n: Int, _ columns: [Int], _ layout: RowLayout) {
        let defaults = layout.defaults
        if stored < columns.count {
            for c in stored..<columns.count {
                place(c < defaults.count ? defaults[c] : .null, columns[c], p, layout)
            }
        }
        for k in 0..<n {
            guard case .none = p[k] else { continue }
            p[k] = layout.insertValues[k]
        }
    }

    /// Puts `v`, the value of a column that holds `k` (a `fetchColumns`
    /// entry), where it belongs: attribute `k`'s slot at `p`, the version,
    /// or a to-one key; a column the entity does not read is dropped.
    @inline(__always)
    private mutating func place(_ v: Value, _ k: Int, _ p: UnsafeMutablePointer<Value?>, _ layout: RowLayout) {
        if k >= 0 {
            p[k] = v
        } else if k == RowLayout.versionColumn {
            version = v.integerValue ?? 0
        } else if k <= RowLayout.toOneKeyColumn {
            key(k, v, layout)
        }
    }

    /// The key of to-one `column` (`RowLayout.toOneKeyColumn - j`: the
    /// layout's relationship j) holding `v`: an integer names the target's row.
    @inline(__always)
    private mutating func key(_ column: Int, _ v: Value, _ layout: RowLayout) {
        guard case .integer(let rid) = v else { return }
        let slot = layout.relationships[RowLayout.toOneKeyColumn - column]
        let id = ManagedObjectID(entity: slot.destination, rowID: rid)
        if toOne.isEmpty { toOne = ToOneKeys(slot.name, id) } else { toOne[slot.name] = id }
    }
}

/// The objects of a fetch being made: all of them in order, and the
/// positions of the new ones (not registered yet).
private struct FetchedObjects {
    var objects: [ManagedObject] = []
    var new: [Int] = []

    mutating func addNew(_ o: ManagedObject) {
        new.append(objects.count)
        objects.append(o)
    }
}
