// HookOverrides: which of ManagedObject's lifecycle hooks a class overrides,
// read from its class metadata, so that a save skips the calls that would
// run ManagedObject's own implementations, which do nothing, together with
// the work done only to make their arguments (`validateValue(_:forKey:)`
// gets each attribute's value boxed in an `Any?`, made and destroyed per
// attribute per saved object).
//
// How: a Swift class's metadata holds its vtable, one implementation
// pointer per overridable method, each inherited slot at the same place as
// in its superclass's metadata (a subclass's metadata begins with a copy of
// its superclass's, then adds its own). Probe subclasses defined here find
// each hook's slot: `PlainProbe` overrides nothing, and each other probe
// overrides one hook only. A hook's slot is the one word, within
// ManagedObject's metadata, where that hook's probe differs from
// `PlainProbe` while `PlainProbe` holds ManagedObject's own word (words
// that differ per class, such as the class's descriptor, differ from
// ManagedObject's in `PlainProbe` too, so they never qualify). A class
// overrides a hook iff its word at that slot is not ManagedObject's: a call
// through an equal word runs ManagedObject's implementation, so skipping it
// changes nothing.
//
// Safety: only words inside ManagedObject's metadata are read (its size is
// read from the metadata header and bounded; every subclass's metadata is
// at least that large, checked per class). If anything does not look as
// expected (a size out of bounds, not exactly one slot for a hook, two
// hooks on one slot: another runtime layout, or pointer authentication
// signing each copy of a pointer differently), that hook counts as
// overridden by every class, so it is called as before: a wrong answer
// only ever costs a call, never skips one.

/// The lifecycle hooks a class overrides (a set: a member means "may be
/// overridden, call it").
struct HookOverrides: OptionSet, Sendable {
    let rawValue: UInt8

    static let validateValue = HookOverrides(rawValue: 1 << 0)
    static let validateForInsert = HookOverrides(rawValue: 1 << 1)
    static let validateForUpdate = HookOverrides(rawValue: 1 << 2)
    static let validateForDelete = HookOverrides(rawValue: 1 << 3)
    static let willSave = HookOverrides(rawValue: 1 << 4)
    static let didSave = HookOverrides(rawValue: 1 << 5)
    /// Every hook: what a class is taken to override when its metadata
    /// cannot be read as expected.
    static let all: HookOverrides = [.validateValue, .validateForInsert, .validateForUpdate, .validateForDelete, .willSave, .didSave]

    /// The hooks `c` (ManagedObject or a subclass) overrides, directly or
    /// through a superclass; every hook whose slot is unknown counts.
    static func of(_ c: ManagedObject.Type) -> HookOverrides {
        let slots = HookSlots.shared
        guard !slots.slots.isEmpty else { return .all }
        let p = unsafeBitCast(c, to: UnsafeRawPointer.self)
        guard let size = HookSlots.metadataWords(p), size >= slots.words else { return .all }
        var out = slots.unknown
        for (hook, slot) in slots.slots where p.load(fromByteOffset: slot * wordSize, as: UInt.self) != slots.base[slot] {
            out.insert(hook)
        }
        return out
    }

    private static let wordSize = MemoryLayout<UInt>.size
}

/// Where each hook sits in a class's metadata (see the file comment),
/// found once per process.
private struct HookSlots: Sendable {
    /// The word index of each hook whose slot was found.
    var slots: [(HookOverrides, Int)] = []
    /// The hooks whose slot was not found (taken as overridden).
    var unknown: HookOverrides = .all
    /// ManagedObject's metadata words (from the address point).
    var base: [UInt] = []
    /// How many words `base` has.
    var words = 0

    static let shared = HookSlots.find()

    private static let wordSize = MemoryLayout<UInt>.size

    /// The number of words of the class metadata at `p` from its address
    /// point (nil if its header gives sizes out of bounds). The header's
    /// `classSize` and `classAddressPoint` (32-bit fields) follow the kind
    /// (or isa) and superclass words, the three words kept for the
    /// Objective-C runtime where it is present, and four 32-bit fields
    /// (flags, instance address point, instance size, alignment mask and
    /// a reserved half).
    static func metadataWords(_ p: UnsafeRawPointer) -> Int? {
        #if canImport(ObjectiveC)
        let header = 5 * wordSize + 16
        #else
        let header = 2 * wordSize + 16
        #endif
        let classSize = Int(p.load(fromByteOffset: header, as: UInt32.self))
        let addressPoint = Int(p.load(fromByteOffset: header + 4, as: UInt32.self))
        guard addressPoint % wordSize == 0, addressPoint <= 16 * wordSize,
              classSize > addressPoint + header + 8, classSize <= 1 << 14,
              (classSize - addressPoint) % wordSize == 0 else { return nil }
        return (classSize - addressPoint) / wordSize
    }

    /// Reads ManagedObject's metadata and the probes' (see the file comment).
    private static func find() -> HookSlots {
        var out = HookSlots()
        let baseP = unsafeBitCast(ManagedObject.self, to: UnsafeRawPointer.self)
        guard let n = metadataWords(baseP) else { return out }
        func words(_ c: ManagedObject.Type) -> [UInt]? {
            let p = unsafeBitCast(c, to: UnsafeRawPointer.self)
            guard let m = metadataWords(p), m >= n else { return nil }
            return (0..<n).map { p.load(fromByteOffset: $0 * wordSize, as: UInt.self) }
        }
        let base = (0..<n).map { baseP.load(fromByteOffset: $0 * wordSize, as: UInt.self) }
        guard let plain = words(PlainProbe.self) else { return out }
        let probes: [(HookOverrides, ManagedObject.Type)] = [
            (.validateValue, ValidateValueProbe.self), (.validateForInsert, ValidateForInsertProbe.self),
            (.validateForUpdate, ValidateForUpdateProbe.self), (.validateForDelete, ValidateForDeleteProbe.self),
            (.willSave, WillSaveProbe.self), (.didSave, DidSaveProbe.self),
        ]
        var taken = Set<Int>()
        for (hook, probe) in probes {
            guard let w = words(probe) else { continue }
            let found = (0..<n).filter { w[$0] != plain[$0] && plain[$0] == base[$0] }
            // Exactly one slot, not another hook's: anything else leaves the hook "overridden".
            guard found.count == 1, let slot = found.first, !taken.contains(slot) else { continue }
            taken.insert(slot)
            out.slots.append((hook, slot))
            out.unknown.remove(hook)
        }
        out.base = base
        out.words = n
        return out
    }
}

// The probes: never instantiated, only their metadata is read.
private final class PlainProbe: ManagedObject {}
private final class ValidateValueProbe: ManagedObject {
    override func validateValue(_ value: Any?, forKey key: String) throws(KuraError) {}
}
private final class ValidateForInsertProbe: ManagedObject {
    override func validateForInsert() throws(KuraError) {}
}
private final class ValidateForUpdateProbe: ManagedObject {
    override func validateForUpdate() throws(KuraError) {}
}
private final class ValidateForDeleteProbe: ManagedObject {
    override func validateForDelete() throws(KuraError) {}
}
private final class WillSaveProbe: ManagedObject {
    override func willSave() {}
}
private final class DidSaveProbe: ManagedObject {
    override func didSave() {}
}
