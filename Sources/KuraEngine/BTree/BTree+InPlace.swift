// BTree+InPlace: changing some bytes of a table row's value where they lie in
// their leaf, without copying the value out and inserting it back.
//
// An update that keeps every value's serial type (a double set on a row, an
// integer of the same width: RecordPatch) changes bytes inside the record and
// nothing else: the cell keeps its size and place. One that makes the value
// shorter (format 9: a double that becomes integral and takes 1 or 4 body
// bytes instead of 8) writes the new value at the old one's place and its new
// length over the old length, when that takes as many varint bytes: the cell
// keeps its place, and the bytes after its new end are counted as fragmented
// (as `Page.replaceCell` does for a shorter cell). The caller reads the value
// in its leaf (no copy) and, when it decides to change it, writes into the same
// byte range of the leaf made writable (`PageWriter.writable`, which copies the
// page on the transaction's first change of it: the value lies at the same
// offset in the copy, and a spilled page comes back as its newest version,
// the one just read). No cell moves and no page is allocated or freed, so the
// tree's shape, the writer's remembered leaf and its append hints stay valid.
//
// Invariants: only a value held whole in its leaf (no overflow chain) is
// offered; `write` gets exactly the bytes `read` saw (same offset, same
// length), in the page the writer keeps as the leaf's current version, and
// writes the new value (the length `read` returned, at most theirs) from
// their start. No
// page is held across calls: the next call finds its leaf by number again.

extension BTree {
    /// What `changeInPlace` did.
    enum InPlaceOutcome {
        /// The tree has no such row.
        case absent
        /// The value was not changed: `read` declined, or the value has an
        /// overflow chain (it is not offered). The caller changes it its own way.
        case declined
        /// `write` changed the value in its leaf.
        case written
    }

    /// Finds row `rowID` of this table tree (`writerSlot`: through the leaf the
    /// writer remembers for the tree, else by a descent, whose leaf is then
    /// remembered: rows changed in row-ID order mostly share it) and calls
    /// `read` with its value where it lies. When `read` returns a length
    /// (the new value's, at most the old one's), makes the leaf writable and
    /// calls `write` with the same bytes there, which writes the new value
    /// from their start; a shorter value's length is set in the cell and the
    /// bytes after it are counted as fragmented. A shorter length whose
    /// varint takes another number of bytes than the old one's is declined
    /// (`write` is not called).
    ///
    /// - Throws: `.corrupt` for damaged pages, and what `read` throws (nothing
    ///   is changed then; a `.corrupt` one gets the row ID and the leaf's page).
    func changeInPlace(rowID: Int64, _ w: PageWriter,
                       read: (UnsafeRawBufferPointer) throws(KuraError) -> Int?,
                       write: (UnsafeMutableRawBufferPointer) -> Void) throws(KuraError) -> InPlaceOutcome {
        precondition(kind == .table, "changeInPlace on an index tree")
        return try RowIDKey.withEncoded(rowID) { key throws(KuraError) -> InPlaceOutcome in
            guard let (leaf, index) = try writerSlot(of: key, w) else { return .absent }
            let v = leaf.leafValue(index)
            guard v.overflow == 0 else { return .declined }
            let wanted: Int?
            do throws(KuraError) {
                defer { withExtendedLifetime(leaf) {} }
                wanted = try read(UnsafeRawBufferPointer(start: leaf.bytes + v.offset, count: v.length))
            } catch {
                // A damaged record names its row and leaf.
                guard error.code == .corrupt else { throw error }
                var e = error
                e.message += " (row \(rowID))"
                if e.page == nil { e.page = leaf.number }
                throw e
            }
            guard let length = wanted, length <= v.length else { return .declined }
            // The value length varint ends where the value starts.
            let lengthBytes = Varint.size(UInt64(v.length))
            guard length == v.length || Varint.size(UInt64(length)) == lengthBytes else { return .declined }
            let page = try w.writable(leaf.number)
            write(UnsafeMutableRawBufferPointer(start: page.bytes + v.offset, count: v.length))
            if length < v.length {
                _ = Varint.write(UInt64(length), to: page.bytes + (v.offset - lengthBytes))
                page.fragmented += v.length - length
            }
            withExtendedLifetime(page) {}
            return .written
        }
    }
}
