import XCTest
@testable import KuraEngine

/// The page cache's table (open addressing, backward-shift removal) against a
/// Dictionary: a lookup finds the page last put under its key or nothing
/// (evicted), never another key's page; the count stays within the capacity.
final class PageCacheTests: XCTestCase {
    func testRandomOperationsAgreeWithADictionary() {
        randomOperations(seed: testSeed("PageCacheTests.random"))
    }

    /// Regression (CI, seed 2325286899): a key removed and put again was
    /// evicted by the put itself, when the clock reached the ring slot its
    /// earlier entry had left; a put now evicts before it inserts.
    func testAPageJustPutIsNeverTheOneEvicted() {
        randomOperations(seed: 2325286899)
    }

    func randomOperations(seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        for round in 0..<20 {
            let capacity = 8 + Int(rng.next() % 200)
            var cache = PageCache(capacity: capacity)
            var model: [UInt64: Page] = [:]
            // Few distinct keys collide often in a small table; frame keys
            // exercise removeFrames.
            let keySpace = UInt64(capacity * (1 + round % 4))
            func randomKey() -> UInt64 {
                let k = 1 + rng.next() % keySpace
                return rng.next() % 3 == 0 ? PageCache.frameKey(generation: UInt32(k % 3), frame: Int(k)) : k
            }
            for step in 0..<4000 {
                switch rng.next() % 16 {
                case 0..<8:
                    let k = randomKey()
                    let p = Page(number: UInt32(truncatingIfNeeded: k), size: 512)
                    cache.put(k, p)
                    model[k] = p
                    XCTAssertTrue(cache.peek(k) === p, "a page just put is found (round \(round), step \(step))")
                case 8..<12:
                    let k = randomKey()
                    if let p = cache.peek(k) {
                        XCTAssertTrue(model[k] === p, "key \(k) found another key's page (round \(round), step \(step))")
                    }
                    if let p = cache.get(k) { XCTAssertTrue(p.referenced) }
                case 12..<15:
                    let k = randomKey()
                    cache.remove(k)
                    model[k] = nil
                    XCTAssertNil(cache.peek(k))
                default:
                    if rng.next() % 4 == 0 {
                        cache.removeAll()
                        model.removeAll()
                    } else {
                        if rng.next() % 2 == 0 {
                            cache.removeFrames()
                        } else {
                            // A hint that names some of the frames (one
                            // generation, up to some frame): the others go too.
                            cache.removeFrames(generation: UInt32(rng.next() % 3), lastFrame: Int(rng.next() % (keySpace + 1)))
                        }
                        XCTAssertEqual(cache.frameCount, 0, "round \(round), step \(step)")
                        model = model.filter { $0.key & PageCache.frameKeyFlag == 0 }
                    }
                }
                XCTAssertLessThanOrEqual(cache.count, capacity + 1)
                // Entries are evicted, never invented: every cached key is in the model.
                if step % 500 == 0 {
                    var found = 0
                    for (k, p) in model where cache.peek(k) != nil {
                        XCTAssertTrue(cache.peek(k) === p)
                        found += 1
                    }
                    XCTAssertEqual(found, cache.count, "the cache holds keys the model does not (round \(round), step \(step))")
                }
            }
        }
    }

    /// `removeFrames` with the reset log's generation and last frame removes
    /// those frames by key and keeps every page of the file, as the full pass does.
    func testRemoveFramesByKeyKeepsFilePages() {
        var cache = PageCache(capacity: 64)
        var filePages: [UInt64: Page] = [:]
        for n in 1...20 {
            let p = Page(number: UInt32(n), size: 512)
            cache.put(UInt64(n), p)
            filePages[UInt64(n)] = p
            cache.put(PageCache.frameKey(generation: 7, frame: n), Page(number: UInt32(n), size: 512))
        }
        cache.remove(PageCache.frameKey(generation: 7, frame: 3))
        XCTAssertEqual(cache.frameCount, 19)
        cache.removeFrames(generation: 7, lastFrame: 20)
        XCTAssertEqual(cache.frameCount, 0)
        XCTAssertEqual(cache.count, 20)
        for n in 1...20 {
            XCTAssertNil(cache.peek(PageCache.frameKey(generation: 7, frame: n)))
            XCTAssertTrue(cache.peek(UInt64(n)) === filePages[UInt64(n)])
        }
    }

    /// Key 0 (no page has it) is never cached.
    func testKeyZeroIsNeverCached() {
        var cache = PageCache(capacity: 8)
        cache.put(0, Page(number: 1, size: 512))
        XCTAssertNil(cache.peek(0))
        XCTAssertEqual(cache.count, 0)
    }
}
