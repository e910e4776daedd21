// Helpers shared by the object-layer tests (KuraEngineTests has its own
// copies in its TestSupport.swift: test targets cannot import each other).

import Foundation
import Kura

/// SplitMix64, so randomized tests replay from a printed seed.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// The seed of a randomized test: `KURA_SEED` if set, else a random one;
/// printed so that a failure can be replayed.
func testSeed(_ name: String) -> UInt64 {
    let seed = ProcessInfo.processInfo.environment["KURA_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1...UInt64(UInt32.max))
    print("\(name) seed \(seed) (replay with KURA_SEED=\(seed))")
    return seed
}

/// A value shared with another thread in a test, behind a lock.
final class Locked<T>: @unchecked Sendable {
    // @unchecked Sendable: `stored` is read and written only with `lock` held.
    private let lock = NSLock()
    private var stored: T
    init(_ value: T) { stored = value }
    var value: T {
        lock.lock()
        defer { lock.unlock() }
        return stored
    }
    func mutate(_ body: (inout T) -> Void) {
        lock.lock()
        body(&stored)
        lock.unlock()
    }
}

/// One attribute of every stored attribute type but decimal (named i16, i32,
/// i64, d, f, s, b, dt, data, u, url, tags), for tests that read every type
/// back (FaultLoadTests, BorrowedFaultLoadTests).
func attributesOfEveryType() -> [AttributeDescription] {
    [
        AttributeDescription("i16", .int16),
        AttributeDescription("i32", .int32),
        AttributeDescription("i64", .int64),
        AttributeDescription("d", .double),
        AttributeDescription("f", .float),
        AttributeDescription("s", .string),
        AttributeDescription("b", .bool),
        AttributeDescription("dt", .date),
        AttributeDescription("data", .data),
        AttributeDescription("u", .uuid),
        AttributeDescription("url", .url),
        AttributeDescription("tags", .transformable),
    ]
}

/// `attributesOfEveryType()` as a later model version has them: in another
/// order, after a transient attribute, with an added attribute that has a
/// default (`late`): what a migration that reorders columns and adds a
/// defaulted one leaves.
func attributesOfEveryTypeReordered() -> [AttributeDescription] {
    [
        AttributeDescription("t", .string, default: "start", transient: true),
        AttributeDescription("tags", .transformable),
        AttributeDescription("url", .url),
        AttributeDescription("s", .string),
        AttributeDescription("late", .int64, default: 99),
        AttributeDescription("u", .uuid),
        AttributeDescription("data", .data),
        AttributeDescription("dt", .date),
        AttributeDescription("b", .bool),
        AttributeDescription("f", .float),
        AttributeDescription("d", .double),
        AttributeDescription("i64", .int64),
        AttributeDescription("i32", .int32),
        AttributeDescription("i16", .int16),
    ]
}
