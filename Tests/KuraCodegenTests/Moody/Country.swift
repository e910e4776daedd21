// Country: hand-written code for entity Country. `kura codegen` created
// this file once and never changes it; the generated properties are in
// Country+Generated.swift (class _Country).

import Foundation
import Kura

class Country: _Country {
}
