// Writes the seed corpora of the fuzz targets (Fuzz/build.sh runs it):
//   corpus/store/       small valid stores, each with control byte 0 and 1
//   corpus/log/         logs holding the second half of the base workload
//   corpus/predicate/   predicate formats from ../shared/corpus/predicates*.tsv
//
// Usage: kura-fuzz-corpus OUTPUT-DIR [PREDICATE-CORPUS-DIR]

import Foundation

let args = CommandLine.arguments
guard args.count >= 2 else { print("usage: kura-fuzz-corpus OUTPUT-DIR [PREDICATE-CORPUS-DIR]"); exit(2) }
let out = args[1]
let fm = FileManager.default
for d in ["store", "log", "predicate"] { try! fm.createDirectory(atPath: out + "/" + d, withIntermediateDirectories: true) }

func write(_ dir: String, _ name: String, _ bytes: [UInt8]) {
    _ = fm.createFile(atPath: "\(out)/\(dir)/\(name)", contents: Data(bytes))
}

// Stores at several sizes, checkpointed into the store file.
for (i, last) in [0, 2, 6, 12, 20].enumerated() {
    let fs = MemoryFileSystem()
    let db = try! FuzzSupport.buildStore(fs, transactions: 0...last)
    db.close()
    let bytes = fs.contents(of: FuzzSupport.path)!
    write("store", "store-\(i)-raw", [0] + bytes)
    write("store", "store-\(i)-resealed", [1] + bytes)
}

// Logs over the log target's base store: the base is transactions 0...10; each
// seed holds some of the transactions after it.
for (i, last) in [11, 13, 16, 20].enumerated() {
    let fs = MemoryFileSystem()
    let base = FuzzSupport.logBaseStore()
    fs.setContents(of: FuzzSupport.path, to: base.store)
    let db = try! FuzzSupport.buildStore(fs, transactions: 11...last)
    let log = fs.contents(of: FuzzSupport.path + "-wal")!
    _ = db
    write("log", "log-\(i)", [3] + log)
    write("log", "log-\(i)-raw", [2] + log)
}

// Predicates: the format column of the shared corpus.
let corpusDir = args.count >= 3 ? args[2] : "../shared/corpus"
var n = 0
for file in ["predicates.tsv", "predicates-invalid.tsv"] {
    guard let text = try? String(contentsOfFile: corpusDir + "/" + file, encoding: .utf8) else {
        print("warning: \(corpusDir)/\(file) not found; no predicate seeds from it")
        continue
    }
    for line in text.split(separator: "\n").dropFirst() {
        guard let format = line.split(separator: "\t", omittingEmptySubsequences: false).first, !format.isEmpty else { continue }
        write("predicate", String(format: "p%03d", n), Array(format.utf8))
        n += 1
    }
}
print("corpus written to \(out): \(try! fm.contentsOfDirectory(atPath: out + "/store").count) stores, \(try! fm.contentsOfDirectory(atPath: out + "/log").count) logs, \(n) predicates")
