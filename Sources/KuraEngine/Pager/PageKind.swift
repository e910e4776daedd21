// PageKind: what a page holds, from its first byte (FORMAT.md, "Pages", "Tree
// pages", "Overflow pages", "Freelist"). The pager's layer owns it: the freelist
// (PageSource.swift) writes and checks trunk kinds, and the tree layer above
// lays out the four node kinds (BTree/Node.swift).
//
//     1 table interior   2 table leaf   3 index interior   4 index leaf
//     5 overflow         6 freelist trunk
//
// Any other byte is no kind: such a page is only ever reported, never read as
// one of these.

enum PageKind: UInt8 {
    case tableInterior = 1
    case tableLeaf = 2
    case indexInterior = 3
    case indexLeaf = 4
    case overflow = 5
    case freelistTrunk = 6

    var isLeaf: Bool { self == .tableLeaf || self == .indexLeaf }
    var isNode: Bool { rawValue >= 1 && rawValue <= 4 }
    var isTable: Bool { self == .tableLeaf || self == .tableInterior }
}
