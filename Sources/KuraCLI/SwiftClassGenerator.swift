// SwiftClassGenerator: the Swift source `kura codegen` writes for a model.
//
// mogenerator's machine/human split: per entity, a machine class `_Mood` in
// `Mood+Generated.swift` (typed `@Managed`/`@ToOne`/`@ToMany` properties of
// the entity's own attributes and relationships; overwritten by every run) and
// a human class `Mood: _Mood` in `Mood.swift` (created once if missing, never
// touched again: overrides and hand-written code go there). Inheritance: the
// machine class of a subentity derives from its parent's human class
// (`_Country: Region`), so inherited properties come from the parent. A
// registry file `<Name>+Classes.swift` lists the human classes by entity name
// for `ManagedObjectModel.load(xcodeModel:classes:)`.
//
// Deterministic: entities, properties and files in name order; no dates,
// paths or versions in the output, so regenerating an unchanged model changes
// no byte.
//
// Properties without a typed wrapper are not dropped silently: a transformable
// attribute becomes an untyped `Any?` accessor (its Swift type is the
// transformer's); kinds Kura's model does not have yet (composite, ObjectID,
// undefined) and names that collide with ManagedObject members become a
// comment naming the property and what to do.

import Foundation

/// A model as codegen sees it (from an Xcode model or a store's schema).
struct CodegenModel {
    struct Property {
        enum Kind {
            /// A typed attribute: the Swift type, without `?`.
            case attribute(swiftType: String)
            /// Transformable: read and written untyped.
            case transformable(transformer: String?)
            case toOne(destination: String)
            case toMany(destination: String, ordered: Bool)
            /// Not generated: the comment says why and what to do.
            case skipped(reason: String)
        }
        var name: String
        var kind: Kind
        var isOptional: Bool
        var note: String?
    }
    struct Entity {
        var name: String
        var className: String
        var parent: String?
        var isAbstract: Bool
        var properties: [Property]
        var notes: [String] = []
    }
    /// Where the model came from (a file name, never a full path: output must
    /// not depend on where the model sits).
    var source: String
    var entities: [Entity]
}

enum SwiftClassGenerator {
    /// One generated file: its name and text.
    struct File: Equatable {
        var name: String
        var text: String
    }

    /// ManagedObject members a property may not shadow.
    static let reserved: Set<String> = ["entity", "objectID", "managedObjectContext", "isFault", "isDeleted", "isInserted",
                                        "isUpdated", "hasChanges", "readError", "description", "changedValues", "hash",
                                        "awakeFromInsert", "awakeFromFetch", "willSave", "didSave", "self", "Type"]

    static let keywords: Set<String> = ["associatedtype", "class", "deinit", "enum", "extension", "fileprivate", "func", "import",
                                        "init", "inout", "internal", "let", "open", "operator", "private", "protocol", "public",
                                        "rethrows", "static", "struct", "subscript", "typealias", "var", "break", "case", "continue",
                                        "default", "defer", "do", "else", "fallthrough", "for", "guard", "if", "in", "repeat",
                                        "return", "switch", "where", "while", "as", "catch", "false", "is", "nil", "super",
                                        "throw", "throws", "true", "try", "Any", "Self", "some", "any"]

    static func identifier(_ name: String) -> String { keywords.contains(name) ? "`\(name)`" : name }

    /// The machine files (`X+Generated.swift`) and the registry, in name order.
    static func generatedFiles(_ m: CodegenModel, registryName: String) -> [File] {
        let byName = Dictionary(m.entities.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        var files = m.entities.sorted { $0.className < $1.className }.map { e in
            File(name: "\(e.className)+Generated.swift", text: machineFile(e, byName: byName, source: m.source))
        }
        files.append(File(name: "\(registryName)+Classes.swift", text: registryFile(m, registryName: registryName)))
        return files
    }

    /// The human files (`X.swift`), written only where missing.
    static func humanFiles(_ m: CodegenModel) -> [File] {
        m.entities.sorted { $0.className < $1.className }.map { e in
            File(name: "\(e.className).swift", text: """
                // \(e.className): hand-written code for entity \(e.name). `kura codegen` created
                // this file once and never changes it; the generated properties are in
                // \(e.className)+Generated.swift (class _\(e.className)).

                import Foundation
                import Kura

                class \(e.className): _\(e.className) {
                }

                """)
        }
    }

    static func machineFile(_ e: CodegenModel.Entity, byName: [String: CodegenModel.Entity], source: String) -> String {
        let superclass = e.parent.flatMap { byName[$0]?.className } ?? "ManagedObject"
        var lines: [String] = [
            "// Generated by `kura codegen` from \(source): do not edit, every run overwrites it.",
            "// Entity \(e.name)\(e.isAbstract ? " (abstract)" : "")\(e.parent.map { ", subentity of \($0)" } ?? "").",
            "// Hand-written code goes in \(e.className).swift (class \(e.className): _\(e.className)).",
            "",
            "import Foundation",
            "import Kura",
            "",
        ]
        for n in e.notes { lines.append("// " + n) }
        lines.append("class _\(e.className): \(superclass) {")
        for p in e.properties.sorted(by: { $0.name < $1.name }) {
            if let note = p.note { lines.append("    // \(note)") }
            let name = identifier(p.name)
            if reserved.contains(p.name) {
                lines.append("    // \"\(p.name)\" is not generated: it would shadow ManagedObject.\(p.name); use self[\"\(p.name)\"] or value(forKey: \"\(p.name)\").")
                continue
            }
            switch p.kind {
            case .attribute(let t):
                lines.append("    @Managed(\"\(p.name)\") var \(name): \(t)\(p.isOptional ? "?" : "")")
            case .transformable(let transformer):
                lines.append("    /// Transformable\(transformer.map { " (transformer \"\($0)\")" } ?? ""): the value is the transformer's Swift type;")
                lines.append("    /// a typed property can be declared in \(e.className).swift with @Managed and that type.")
                lines.append("    var \(name): Any? {")
                lines.append("        get { self[\"\(p.name)\"] }")
                lines.append("        set { self[\"\(p.name)\"] = newValue }")
                lines.append("    }")
            case .toOne(let d):
                lines.append("    @ToOne(\"\(p.name)\") var \(name): \(byName[d]?.className ?? d)?")
            case .toMany(let d, let ordered):
                if ordered { lines.append("    /// Ordered: the array is in the relationship's order.") }
                lines.append("    @ToMany(\"\(p.name)\") var \(name): [\(byName[d]?.className ?? d)]")
            case .skipped(let reason):
                lines.append("    // \"\(p.name)\" is not generated: \(reason)")
            }
        }
        lines.append("}")
        return lines.joined(separator: "\n") + "\n"
    }

    static func registryFile(_ m: CodegenModel, registryName: String) -> String {
        let entries = m.entities.sorted { $0.name < $1.name }.map { "            \"\($0.name)\": \($0.className).self," }
        return """
            // Generated by `kura codegen` from \(m.source): do not edit, every run overwrites it.

            import Foundation
            import Kura

            /// The classes generated for the \(registryName) model, by entity name.
            enum \(registryName)Classes {
                /// Each entity's class: pass to `XcodeModelDocument.makeModel(classes:)`
                /// or `ManagedObjectModel.load(xcodeModel:classes:)`.
                static var byEntityName: [String: ManagedObject.Type] {
                    [
            \(entries.joined(separator: "\n"))
                    ]
                }

                /// The model at `url` (an Xcode model) with these classes bound.
                ///
                /// - Throws: as `ManagedObjectModel.load(xcodeModel:classes:)`.
                static func model(contentsOf url: URL) throws(KuraError) -> ManagedObjectModel {
                    try ManagedObjectModel.load(xcodeModel: url, classes: byEntityName)
                }
            }

            """
    }
}
