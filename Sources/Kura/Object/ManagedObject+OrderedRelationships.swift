// ManagedObject+OrderedRelationships: changing an ordered to-many relationship
// by position (Core Data's `insertObject:inXAtIndex:`, `removeObjectFromXAtIndex:`,
// and moving within an NSMutableOrderedSet). Each one computes the new list and
// replaces the relationship with it (Context+Relationships.swift keeps the
// inverse side and the stored positions in step), so an ordered one-to-many,
// an ordered many-to-many and an ordered to-many without inverse behave alike.

extension ManagedObject {
    /// Inserts `object` at `index` of ordered to-many relationship `key` (moving
    /// it there if it is already a member). `index` may equal the count.
    ///
    /// - Throws: `.notFound` for a key that is not a to-many relationship;
    ///   `.invalidArgument` for an unordered relationship, an index out of
    ///   range, or an object of the wrong entity or another context.
    public func insert(_ object: ManagedObject, at index: Int, into key: String) throws(KuraError) {
        var list = try orderedList(key)
        list.removeAll { $0 === object }
        guard index >= 0 && index <= list.count else {
            throw KuraError(.invalidArgument, "relationship \"\(key)\" of entity \"\(entity.name)\" holds \(list.count) other objects; cannot insert at \(index)")
        }
        list.insert(object, at: index)
        try setValue(list, forKey: key)
    }

    /// Removes the object at `index` of ordered to-many relationship `key`.
    ///
    /// - Throws: as ``insert(_:at:into:)``.
    public func removeObject(at index: Int, from key: String) throws(KuraError) {
        var list = try orderedList(key)
        guard list.indices.contains(index) else {
            throw KuraError(.invalidArgument, "relationship \"\(key)\" of entity \"\(entity.name)\" holds \(list.count) objects; no index \(index)")
        }
        list.remove(at: index)
        try setValue(list, forKey: key)
    }

    /// Moves the object at `source` of ordered to-many relationship `key` to
    /// `destination` (an index in the list after the removal).
    ///
    /// - Throws: as ``insert(_:at:into:)``.
    public func moveObject(at source: Int, to destination: Int, in key: String) throws(KuraError) {
        var list = try orderedList(key)
        guard list.indices.contains(source), list.indices.contains(destination) else {
            throw KuraError(.invalidArgument, "relationship \"\(key)\" of entity \"\(entity.name)\" holds \(list.count) objects; cannot move \(source) to \(destination)")
        }
        list.insert(list.remove(at: source), at: destination)
        try setValue(list, forKey: key)
    }

    private func orderedList(_ key: String) throws(KuraError) -> [ManagedObject] {
        let r = try toManyRelationship(key)
        guard r.isOrdered else {
            throw KuraError(.invalidArgument, "relationship \"\(key)\" of entity \"\(entity.name)\" is not ordered; use add(_:to:) and remove(_:from:)")
        }
        return try context().relatedObjects(self, r)
    }
}
