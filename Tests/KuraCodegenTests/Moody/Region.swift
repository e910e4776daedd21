// Region: hand-written code for entity Region. `kura codegen` created
// this file once and never changes it; the generated properties are in
// Region+Generated.swift (class _Region).

import Foundation
import Kura

class Region: _Region {
}
