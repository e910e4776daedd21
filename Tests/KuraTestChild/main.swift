// kura-test-child: the process the crash tests kill.
//
// Usage: KuraTestChild STORE DURABILITY CHECKPOINT-THRESHOLD
//
// Commits forever. Each transaction inserts row k into table "log" (with a
// payload that is sometimes larger than a page) and sets row 1 of table
// "counter" to k, then prints "k" on its own line once the commit returned.
// The parent kills it with SIGKILL at a random moment and checks the store.

import Foundation
import KuraEngine

let args = CommandLine.arguments
guard args.count == 4, let durability = Durability(rawValue: args[2]), let threshold = Int(args[3]) else {
    FileHandle.standardError.write("usage: KuraTestChild STORE full|normal|off THRESHOLD\n".data(using: .utf8)!)
    exit(2)
}
var options = Database.Options()
options.durability = durability
options.checkpointThreshold = threshold
do {
    let db = try Database(path: args[1], options: options)
    var k: Int64 = try db.write { tx in
        if !(try tx.tableExists("log")) {
            try tx.createTable("log")
            try tx.insert([.integer(0)], into: try tx.createTable("counter"))
        }
        return try tx.values(in: try tx.table("counter"), rowID: 1)![0].integerValue!
    }
    var rng = SystemRandomNumberGenerator()
    while true {
        k += 1
        let size = rng.next() % 10 == 0 ? Int(rng.next() % 20_000) : Int(rng.next() % 200)
        try db.write { tx in
            try tx.insert([.integer(k), .blob([UInt8](repeating: UInt8(truncatingIfNeeded: k), count: size))],
                          into: try tx.table("log"), rowID: k)
            try tx.update([.integer(k)], in: try tx.table("counter"), rowID: 1)
        }
        FileHandle.standardOutput.write("\(k)\n".data(using: .utf8)!)  // unbuffered write(2)
    }
} catch {
    FileHandle.standardError.write("child: \(error)\n".data(using: .utf8)!)
    exit(1)
}
