// Mood: hand-written code for entity Mood. `kura codegen` created
// this file once and never changes it; the generated properties are in
// Mood+Generated.swift (class _Mood).

import Foundation
import Kura

class Mood: _Mood {
    /// Hand-written (this file is kept by `kura codegen`): whether the mood
    /// has a position.
    var hasLocation: Bool { latitude != nil && longitude != nil }

    override func awakeFromInsert() {
        date = Date(timeIntervalSinceReferenceDate: 0)
    }
}
