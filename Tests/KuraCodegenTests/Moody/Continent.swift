// Continent: hand-written code for entity Continent. `kura codegen` created
// this file once and never changes it; the generated properties are in
// Continent+Generated.swift (class _Continent).

import Foundation
import Kura

class Continent: _Continent {
}
