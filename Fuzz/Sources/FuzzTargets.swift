// libFuzzer entry point for Kura's fuzz targets. One binary holds all three;
// KURA_FUZZ_TARGET (store, log or predicate) picks one (scripts/fuzz.sh sets it).
//
//   store      input = control byte + a store file (no log): open, scan, query,
//              check, write, checkpoint
//   log        input = control byte + a log file over a fixed base store
//              (FuzzSupport.logBaseStore): recovery, then the same as `store`
//   predicate  input = a predicate format string (UTF-8): parse with and without
//              arguments, format, re-parse, evaluate
//
// Build with Fuzz/build.sh; run with scripts/fuzz.sh TARGET SECONDS.

import Foundation

enum FuzzTarget: String { case store, log, predicate }

let selectedTarget: FuzzTarget = {
    let name = ProcessInfo.processInfo.environment["KURA_FUZZ_TARGET"] ?? "store"
    guard let t = FuzzTarget(rawValue: name) else { fatalError("KURA_FUZZ_TARGET must be store, log or predicate, not \(name)") }
    return t
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func kuraFuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    switch selectedTarget {
    case .predicate:
        FuzzSupport.exercisePredicate(String(decoding: input, as: UTF8.self))
    case .store:
        guard let control = input.first else { return 0 }
        var bytes = Array(input.dropFirst())
        if control & 1 != 0 { FuzzSupport.resealStore(&bytes) }
        let fs = MemoryFileSystem(maxFileSize: 64 << 20)
        fs.setContents(of: FuzzSupport.path, to: bytes)
        FuzzSupport.exercise(fs)
    case .log:
        guard let control = input.first else { return 0 }
        let base = FuzzSupport.logBaseStore()
        var bytes = Array(input.dropFirst())
        if control & 2 != 0 && bytes.count >= 32 {
            withUnsafeBytes(of: base.databaseID.littleEndian) { bytes.replaceSubrange(24..<32, with: $0) }
        }
        if control & 1 != 0 { FuzzSupport.resealLog(&bytes) }
        let fs = MemoryFileSystem(maxFileSize: 64 << 20)
        fs.setContents(of: FuzzSupport.path, to: base.store)
        fs.setContents(of: FuzzSupport.path + "-wal", to: bytes)
        FuzzSupport.exercise(fs)
    }
    return 0
}
