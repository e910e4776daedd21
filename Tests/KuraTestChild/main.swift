// kura-test-child: the process the crash tests kill.
//
// Usage: KuraTestChild STORE DURABILITY CHECKPOINT-THRESHOLD
//
// Commits forever. Each transaction inserts row k into table "log" (with a
// payload that is sometimes larger than a page) and sets row 1 of table
// "counter" to k, then prints "k" on its own line once the commit returned.
// The parent kills it with SIGKILL at a random moment and checks the store.
//
// Usage: KuraTestChild writer STORE WRITER-ID COUNT CHECKPOINT-THRESHOLD
//
// One of several processes writing the same store at once
// (ReliabilityConcurrencyTests): COUNT transactions with durability `full`,
// each inserting the row [WRITER-ID, i, payload] into table "writes" and
// adding 1 to row 1 of table "counter" (a read-modify-write that a lost update
// would show), and reading everything it wrote back; prints "i" once commit i
// returned. Creates the store and tables if no other process has yet.
//
// Usage: KuraTestChild objects STORE POLICY COUNT
//
// Read-increment-save cycles through the object layer (ObjectWriter.swift).
//
// Usage: KuraTestChild live STORE history|plain
//
// Saves what the parent asks on stdin (LiveWriter.swift; cross-process merging).
//
// Usage: KuraTestChild hold STORE
//
// Opens STORE (a plain connection), prints "open", keeps it open until a line
// arrives on stdin, closes it and exits 0 (StoreDestroyTests).
//
// Usage: KuraTestChild reading STORE
//
// Opens STORE, starts a read transaction, prints "reading" and stays inside it
// until a line arrives on stdin; then ends it, prints "ended", and closes the
// store when a second line arrives (ReaderMarksTests; the parent may kill it
// while it reads).

import Foundation
import Kura
import KuraEngine

let args = CommandLine.arguments
if args.count == 5 && args[1] == "objects", let policy = MergePolicy(rawValue: args[3]), let count = Int(args[4]) {
    runObjectWriter(path: args[2], policy: policy, count: count)
}
if args.count == 4 && args[1] == "seed" {
    // StoreSeedTests: open STORE seeded from SEED (racing other children),
    // add one Account owned by this process, save, exit 0.
    do {
        let container = try PersistentContainer(url: URL(fileURLWithPath: args[2]), model: accountModel(), seed: URL(fileURLWithPath: args[3]))
        try container.save { c in try c.insert("Account").setValue("child \(getpid())", forKey: "owner") }
        container.close()
        exit(0)
    } catch {
        print("seed child: \(error)")
        exit(1)
    }
}
if args.count == 3 && args[1] == "hold" {
    do {
        let db = try Database(path: args[2])
        FileHandle.standardOutput.write("open\n".data(using: .utf8)!)  // unbuffered write(2)
        _ = readLine()
        db.close()
        exit(0)
    } catch {
        print("hold child: \(error)")
        exit(1)
    }
}
if args.count == 3 && args[1] == "reading" {
    do {
        let db = try Database(path: args[2])
        try db.read { tx in
            _ = try tx.tableNames()
            FileHandle.standardOutput.write("reading\n".data(using: .utf8)!)  // unbuffered write(2)
            _ = readLine()
        }
        FileHandle.standardOutput.write("ended\n".data(using: .utf8)!)
        _ = readLine()
        db.close()
        exit(0)
    } catch {
        print("reading child: \(error)")
        exit(1)
    }
}
if args.count == 4 && args[1] == "live" && (args[3] == "history" || args[3] == "plain") {
    runLiveWriter(path: args[2], history: args[3] == "history")
}
if args.count == 6 && args[1] == "writer" {
    runWriter(path: args[2], id: Int64(args[3])!, count: Int(args[4])!, threshold: Int(args[5])!)
}
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

func runWriter(path: String, id: Int64, count: Int, threshold: Int) -> Never {
    var options = Database.Options()
    options.durability = .full
    options.checkpointThreshold = threshold
    options.busyTimeout = 60
    do {
        let db = try Database(path: path, options: options)
        var rng = SystemRandomNumberGenerator()
        for i in 1...count {
            try db.write { tx in
                if !(try tx.tableExists("writes")) {
                    try tx.createTable("writes")
                    try tx.insert([.integer(0)], into: try tx.createTable("counter"), rowID: 1)
                }
                let size = rng.next() % 8 == 0 ? Int(rng.next() % 3000) : Int(rng.next() % 100)
                try tx.insert([.integer(id), .integer(Int64(i)), .blob([UInt8](repeating: UInt8(truncatingIfNeeded: i), count: size))],
                              into: try tx.table("writes"))
                let counter = try tx.table("counter")
                let n = try tx.values(in: counter, rowID: 1)![0].integerValue!
                try tx.update([.integer(n + 1)], in: counter, rowID: 1)
            }
            FileHandle.standardOutput.write("\(i)\n".data(using: .utf8)!)
            if i % 10 == 0 {
                // Another process's commits and checkpoints must leave our rows readable.
                let mine = try db.read { tx in
                    let c = try tx.rows(in: try tx.table("writes"))
                    var n = 0
                    while let r = try c.next() { if try r.value(at: 0) == .integer(id) { n += 1 } }
                    return n
                }
                if mine < i { throw KuraError(.corrupt, "writer \(id) sees \(mine) of its \(i) rows") }
            }
        }
        db.close()
        exit(0)
    } catch {
        FileHandle.standardError.write("child writer \(id): \(error)\n".data(using: .utf8)!)
        exit(1)
    }
}
