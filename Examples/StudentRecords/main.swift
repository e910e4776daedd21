// Seed 003: the Student/Record insert-delete-update-query program.
// Run: swift run student-records
import Foundation
import KuraExamples

let url = FileManager.default.temporaryDirectory.appendingPathComponent("student-records-\(getpid()).kura")
defer { try? FileManager.default.removeItem(at: url); try? FileManager.default.removeItem(atPath: url.path + "-wal") }
do { try StudentRecords.run(storeURL: url) } catch { print("error: \(error)"); exit(1) }
