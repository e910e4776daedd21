import XCTest
import Foundation
@testable import KuraEngine

/// The pager's `state` lock (SpinReadWriteLock): writers exclude everyone,
/// readers exclude writers and share with each other, a waiting writer is not
/// starved by a stream of readers.
final class SpinReadWriteLockTests: XCTestCase {
    /// Two fields a writer changes together, which a reader must never see
    /// apart; with the lock broken (a reader entering beside a writer, or two
    /// writers together), readers see torn pairs and increments are lost.
    final class Guarded: @unchecked Sendable {
        // @unchecked Sendable: `a` and `b` are guarded by `lock`.
        let lock = SpinReadWriteLock()
        var a = 0
        var b = 0
    }

    func testWritersExcludeEveryoneAndNoIncrementIsLost() {
        let g = Guarded()
        let writers = 3, readers = 3, rounds = 20_000
        let torn = AtomicWord()
        let group = DispatchGroup()
        for _ in 0..<writers {
            group.enter()
            Thread {
                for _ in 0..<rounds {
                    g.lock.withLock {
                        let a = g.a
                        g.a = a + 1
                        // A window where the pair is apart.
                        for _ in 0..<8 { g.b = g.b &+ 0 }
                        g.b = a + 1
                    }
                }
                group.leave()
            }.start()
        }
        for _ in 0..<readers {
            group.enter()
            Thread {
                for _ in 0..<rounds {
                    g.lock.withShared {
                        if g.a != g.b { torn.add(1) }
                    }
                }
                group.leave()
            }.start()
        }
        group.wait()
        XCTAssertEqual(torn.load(), 0, "a reader saw a writer's change half made")
        XCTAssertEqual(g.a, writers * rounds, "increments under the exclusive lock were lost")
        XCTAssertEqual(g.b, writers * rounds)
        XCTAssertEqual(g.lock.withShared { g.a }, writers * rounds)
    }

    /// Readers that hold the lock by turns, never all out at once, would keep
    /// a writer out forever if new readers could enter while it waits.
    func testAWaitingWriterGetsInAheadOfOverlappingReaders() {
        let g = Guarded()
        let stop = AtomicWord()
        let group = DispatchGroup()
        for _ in 0..<2 {
            group.enter()
            Thread {
                while stop.load() == 0 {
                    g.lock.withShared { _ = usleep(200) }
                }
                group.leave()
            }.start()
        }
        // Let the readers overlap, then ask for the lock exclusively (on a
        // thread of its own: a starved writer fails the test, not hangs it).
        usleep(20_000)
        let writerDone = DispatchSemaphore(value: 0)
        Thread {
            for _ in 0..<20 {
                g.lock.withLock { g.a += 1 }
            }
            writerDone.signal()
        }.start()
        let finished = writerDone.wait(timeout: .now() + 30) == .success
        stop.add(1)
        XCTAssertTrue(finished, "the writer did not get the lock in 30 s while readers overlapped")
        guard finished else { return }
        group.wait()
        XCTAssertEqual(g.lock.withShared { g.a }, 20)
    }

    /// A shared hold and an exclusive one, in turn, on one thread.
    func testModesAlternateOnOneThread() {
        let g = Guarded()
        for i in 0..<1_000 {
            if i % 3 == 0 {
                g.lock.withLock { g.a += 1 }
            } else {
                XCTAssertEqual(g.lock.withShared { g.a }, (i + 2) / 3)
            }
        }
    }
}
