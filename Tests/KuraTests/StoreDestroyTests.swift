import Foundation
import XCTest
import Kura
import KuraEngine

/// Destroying a store (issue 17, seed 004's destroyAndSetup): refused while
/// any other connection has it open, in this process or another.
final class StoreDestroyTests: XCTestCase {
    private func exists(_ url: URL) -> (Bool, Bool) {
        (FileManager.default.fileExists(atPath: url.path), FileManager.default.fileExists(atPath: url.path + "-wal"))
    }

    func testRefusedWhileOpenInThisProcessAndDoneWhenClosed() throws {
        let dir = try TempDir()
        let url = dir.url.appendingPathComponent("Store.kura")
        let model = try ConflictTests.accountModel()
        let a = try PersistentContainer(url: url, model: model)
        try a.save { c in try c.insert("Account").setValue("a", forKey: "owner") }
        XCTAssertThrowsError(try PersistentContainer.destroyStore(at: url)) { e in
            XCTAssertEqual((e as? KuraError)?.code, .busy)
            XCTAssertTrue("\(e)".contains("has it open"), "\(e)")
        }
        // A second container on the same file: destroying through the first is refused too.
        let b = try PersistentContainer(url: url, model: model)
        XCTAssertThrowsError(try a.destroyAndRecreate()) { XCTAssertEqual(($0 as? KuraError)?.code, .busy) }
        XCTAssertEqual(try a.newContext().count(for: FetchRequest<ManagedObject>(entityName: "Account")), 1, "a refused destroy leaves the store usable")
        b.close()

        // Now the only connection: destroy and start over.
        let fresh = try a.destroyAndRecreate()
        XCTAssertEqual(try fresh.newContext().count(for: FetchRequest<ManagedObject>(entityName: "Account")), 0)
        XCTAssertThrowsError(try a.newContext().count(for: FetchRequest<ManagedObject>(entityName: "Account"))) {
            XCTAssertEqual(($0 as? KuraError)?.code, .misuse)
        }
        try fresh.save { c in try c.insert("Account").setValue("new", forKey: "owner") }
        fresh.close()
        try PersistentContainer.destroyStore(at: url)
        XCTAssertTrue(exists(url) == (false, false))
        try PersistentContainer.destroyStore(at: url)  // nothing there: not an error
    }

    func testRefusedWhileAnotherProcessHasTheStoreOpen() throws {
        guard let childURL = ConflictTests.childURL else { throw XCTSkip("KuraTestChild binary not found beside the test bundle") }
        let dir = try TempDir()
        let url = dir.url.appendingPathComponent("Shared.kura")
        let maker = try PersistentContainer(url: url, model: try ConflictTests.accountModel())
        try maker.save { c in try c.insert("Account").setValue("kept", forKey: "owner") }
        maker.close()

        let child = Process()
        child.executableURL = childURL
        child.arguments = ["hold", url.path]
        let toChild = Pipe(), fromChild = Pipe()
        child.standardInput = toChild
        child.standardOutput = fromChild
        try child.run()
        let line = String(decoding: fromChild.fileHandleForReading.readData(ofLength: 5), as: UTF8.self)
        XCTAssertEqual(line, "open\n")

        XCTAssertThrowsError(try PersistentContainer.destroyStore(at: url)) { XCTAssertEqual(($0 as? KuraError)?.code, .busy) }
        XCTAssertTrue(exists(url).0, "nothing was removed")
        let reopened = try PersistentContainer(url: url, model: try ConflictTests.accountModel())
        XCTAssertEqual(try reopened.newContext().count(for: FetchRequest<ManagedObject>(entityName: "Account")), 1)
        XCTAssertThrowsError(try reopened.destroyAndRecreate()) { XCTAssertEqual(($0 as? KuraError)?.code, .busy) }
        reopened.close()

        toChild.fileHandleForWriting.write("done\n".data(using: .utf8)!)
        child.waitUntilExit()
        XCTAssertEqual(child.terminationStatus, 0)
        try PersistentContainer.destroyStore(at: url)
        XCTAssertTrue(exists(url) == (false, false))
    }
}
