// Typed-throws wrappers over the standard library's `withUnsafeBytes`, which
// rethrows as `any Error`: these keep `throws(KuraError)` intact.

extension Array where Element == UInt8 {
    @inline(__always)
    func withBytes<T>(_ body: (UnsafeRawBufferPointer) throws(KuraError) -> T) throws(KuraError) -> T {
        try withUnsafeBytes { b in Result { () throws(KuraError) in try body(b) } }.get()
    }

    @inline(__always)
    mutating func withMutableBytes<T>(_ body: (UnsafeMutableRawBufferPointer) throws(KuraError) -> T) throws(KuraError) -> T {
        try withUnsafeMutableBytes { b in Result { () throws(KuraError) in try body(b) } }.get()
    }
}
