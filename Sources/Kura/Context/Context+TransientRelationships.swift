// Context+TransientRelationships: relationships that are never stored
// (RelationshipDescription.isTransient, Core Data's transient relationships).
//
// Each object holds its targets in `ManagedObject.transientRelated` (by
// relationship name, in order; strong references, as Core Data's relationships
// retain their targets). Invariants:
//   - a transient relationship's reciprocal inverse is transient too (the model
//     checks it), and the two sides agree after every change made here: setting
//     one side adds or removes the object on the other, and a one-to-one pair
//     unhooks the previous partners;
//   - reading skips targets that are deleted or no longer in this context (a
//     delete needs no bookkeeping; undoing or rolling back the delete brings
//     the link back);
//   - the list of an object empties when its values load from the store as a
//     fault fires (`apply`), and on `reset()`; saves, merges and
//     `refresh(_:mergeChanges: true)` of an object with pending changes keep it;
//   - undo and redo restore lists (ContextUndoManager records each list it
//     replaces); `rollback()` keeps them (transients have no saved state);
//   - lists are per context: a child context starts without links to the
//     objects it reads from its parent, and its push carries none
//     (Context+Parent.swift).
// Nothing here reaches the store: no column, no join table, no history entry.

extension ManagedObjectContext {
    /// The live targets of transient relationship `r` of `o`, in order.
    func transientTargets(_ o: ManagedObject, _ r: RelationshipDescription) throws(KuraError) -> [ManagedObject] {
        try o.loadIfFault()
        return (o.transientRelated[r.name] ?? []).filter { !$0.isDeleted && $0.managedObjectContext === self }
    }

    /// Sets transient relationship `r` of `o` (loaded) to `list` (checked
    /// targets; at most one for a to-one) and keeps the inverse side in step.
    func setTransientTargets(_ o: ManagedObject, _ r: RelationshipDescription, _ list: [ManagedObject]) throws(KuraError) {
        precondition(r.isToMany || list.count <= 1, "a to-one holds one object (a Kura bug)")
        let old = try transientTargets(o, r)
        willChange(o, key: r.name)
        o.transientRelated[r.name] = list
        guard let inv = inverse(of: r) else { return }
        let keep = Set(list.map(ObjectIdentifier.init)), had = Set(old.map(ObjectIdentifier.init))
        for x in old where !keep.contains(ObjectIdentifier(x)) {
            willChange(x, key: inv.name)
            x.transientRelated[inv.name]?.removeAll { $0 === o }
        }
        for x in list where !had.contains(ObjectIdentifier(x)) {
            // A fault that fires later would drop the link: load it first.
            try x.loadIfFault()
            willChange(x, key: inv.name)
            if inv.isToMany {
                if !(x.transientRelated[inv.name] ?? []).contains(where: { $0 === o }) { x.transientRelated[inv.name, default: []].append(o) }
            } else {
                // One-to-one or to-one inverse: x leaves its previous partner.
                for p in x.transientRelated[inv.name] ?? [] where p !== o {
                    willChange(p, key: r.name)
                    p.transientRelated[r.name]?.removeAll { $0 === x }
                }
                x.transientRelated[inv.name] = [o]
            }
        }
    }
}
