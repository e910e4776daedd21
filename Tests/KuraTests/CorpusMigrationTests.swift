// The corpus's multi-version model (CoreDataPlus SampleModel 1, 2, 3; see
// ../shared/corpus/xcdatamodel/SOURCES.md): a store written by each version
// (each loads), filled with generated objects, migrated to the last version
// (staged, lightweight between neighbours), keeping every object and every
// value of a property both versions share. The corpus's
// `.xccurrentversion` names SampleModel (version 1) as current; CoreDataPlus's
// own migration tests go 1 → 2 → 3, as this test does.

import Foundation
import XCTest
import Kura
import KuraEngine

final class CorpusMigrationTests: XCTestCase {
    func corpus() throws -> URL {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let url = root.appendingPathComponent("../shared/corpus/xcdatamodel").standardized
        guard FileManager.default.fileExists(atPath: url.path) else { throw XCTSkip("corpus \(url.path) not found") }
        return url
    }

    /// A generated value of `a` for object `i` of `entity` (unique per object).
    static func value(_ a: AttributeDescription, _ i: Int, _ entity: String) -> (any Sendable)? {
        switch a.type {
        case .int16: Int16(i)
        case .int32: Int32(i)
        case .int64: Int64(i)
        case .double: Double(i) + 0.5
        case .float: Float(i) + 0.5
        case .decimal: Decimal(i)
        case .string: "\(entity) \(a.name) \(i)"
        case .bool: i % 2 == 0
        case .date: Date(timeIntervalSince1970: Double(1_700_000_000 + i))
        case .data: Data([UInt8(i & 0xFF), 1, 2])
        case .uuid: UUID(uuidString: String(format: "00000000-0000-0000-0000-%012d", i))
        case .url: URL(string: "https://example.com/\(i)")
        case .transformable: nil
        }
    }

    func testSampleModelVersionsMigrateToTheLastWithTheirData() throws {
        let dir = try corpus()
        var models: [(String, ManagedObjectModel)] = []
        for name in ["alemar11__CoreDataPlus__SampleModel", "alemar11__CoreDataPlus__SampleModel2", "alemar11__CoreDataPlus__SampleModel3"] {
            // Every version loads (all corpus models do): v1 → v3 and v2 → v3 are both migrated.
            models.append((name, try ManagedObjectModel.load(xcodeModel: dir.appendingPathComponent(name + ".contents"))))
        }
        let last = models[models.count - 1].1
        let tmp = try TempDir()
        for (k, (name, model)) in models.enumerated().dropLast() {
            let url = tmp.url.appendingPathComponent("v\(k).kura")
            let c = try PersistentContainer(url: url, model: model)
            var expected: [String: [[String: String]]] = [:]  // entity → objects' shared values, as text
            try c.save { ctx in
                for e in model.entities where !e.isAbstract {
                    for i in 0..<5 {
                        let o = try ctx.insert(e.name)
                        var shared: [String: String] = [:]
                        for a in e.attributes where !a.isTransient {
                            guard let v = Self.value(a, i, e.name) else { continue }
                            try o.setValue(v, forKey: a.name)
                            if last[e.name]?.attributesByName[a.name]?.type == a.type { shared[a.name] = "\(v)" }
                        }
                        expected[e.name, default: []].append(shared)
                    }
                }
            }
            c.close()
            let staged = StagedMigration(models: models.map(\.1))
            let migrated = try PersistentContainer(url: url, model: last, migration: .staged(staged))
            let ctx = migrated.newContext()
            for (entity, objects) in expected where last[entity] != nil {
                var r = FetchRequest<ManagedObject>(entityName: entity)
                r.includesSubentities = false
                let got = try ctx.fetch(r)
                XCTAssertEqual(got.count, objects.count, "\(name) → last: \(entity)")
                let texts = Set(try got.map { o in
                    try Dictionary(uniqueKeysWithValues: objects[0].keys.map { key in (key, "\(try o.value(forKey: key) ?? "nil")") })
                })
                for shared in objects {
                    XCTAssertTrue(texts.contains(shared), "\(name) → last: \(entity) lost \(shared)")
                }
            }
            let problems = try migrated.database.read { tx in try tx.checkIntegrity() }
            XCTAssertTrue(problems.isEmpty, "\(problems)")
            migrated.close()
            XCTAssertFalse(try PersistentContainer.isMigrationRequired(at: url, for: last))
        }
    }
}
