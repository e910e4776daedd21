import XCTest
@testable import KuraEngine

/// `Row.value(at:)` decodes one column on its own (no array of the row's
/// values) and `RecordCodec.decode` walks the header once: both give exactly
/// what decoding the whole record column by column gives, text is checked as
/// UTF-8 on every path, and malformed records throw.
final class RowColumnReadTests: XCTestCase {
    static func randomValue(_ g: inout SplitMix64) -> Value {
        switch Int.random(in: 0..<8, using: &g) {
        case 0: return .null
        case 1: return .integer(Int64.random(in: Int64.min...Int64.max, using: &g) >> Int64.random(in: 0...63, using: &g))
        case 2: return .double(Double.random(in: -1e9...1e9, using: &g))
        case 3: return .bool(Bool.random(using: &g))
        case 4: return .blob((0..<Int.random(in: 0...70, using: &g)).map { _ in UInt8.random(in: 0...255, using: &g) })
        case 5:
            // ASCII of every length around the small-string limit (15 bytes) and the one-byte serial type limit.
            return .text(String((0..<Int.random(in: 0...70, using: &g)).map { _ in Character(Unicode.Scalar(UInt8.random(in: 32...126, using: &g))) }))
        case 6: return .text(String(repeating: "é€😀", count: Int.random(in: 0...9, using: &g)) + "a")
        default: return .integer(Int64.random(in: -200...200, using: &g))
        }
    }

    func testColumnReadsAgreeWithWholeRecordDecode() throws {
        let seed = testSeed("testColumnReadsAgreeWithWholeRecordDecode")
        var g = SplitMix64(seed: seed)
        for round in 0..<2000 {
            let values = (0..<Int.random(in: 0...12, using: &g)).map { _ in Self.randomValue(&g) }
            let record = RecordCodec.encode(values)
            let row = Row(rowID: Int64(round), record: record)
            let all = try row.values()
            XCTAssertEqual(all, values, "round \(round), seed \(seed)")
            for i in -2..<(values.count + 3) {
                let expected = i >= 0 && i < values.count ? values[i] : Value.null
                XCTAssertEqual(try row.value(at: i), expected, "column \(i), round \(round), seed \(seed)")
            }
        }
    }

    /// Text that is not UTF-8 throws `.corrupt` from every decode, whether
    /// the bad byte is in a short or a long value.
    func testInvalidTextThrowsOnEveryPath() throws {
        for length in [1, 5, 15, 16, 40] {
            // The text is the record's last value: its bytes end the record.
            var record = RecordCodec.encode([.integer(1), .text(String(repeating: "a", count: length))])
            record[record.count - length + length / 2] = 0xFF
            let row = Row(rowID: 1, record: record)
            XCTAssertEqual(try row.value(at: 0), .integer(1))
            for read in [{ _ = try row.values() }, { _ = try row.value(at: 1) }] {
                XCTAssertThrowsError(try read(), "length \(length)") { error in
                    XCTAssertEqual((error as? KuraError)?.code, .corrupt)
                }
            }
        }
    }
}
