// kura codegen: Swift ManagedObject subclasses for a model (mogenerator's
// job), written by SwiftClassGenerator.swift.
//
// Input: an Xcode model (`.xcdatamodeld` bundle, `.xcdatamodel` directory or a
// `contents` XML file, read with XcodeModelDocument) or a Kura store file
// (read-only through the engine). A store does not record the model, only its
// tables: codegen then gives every table's columns as attributes (column type
// → Swift type, nullable → optional) and names what it cannot know in
// comments (a to-one's destination, many-to-many join tables, the subentities
// of a hierarchy table). Output: `--output DIR` (default: the current
// directory) or `--stdout` (generated files only, each after a `// ====` line).

import Foundation
import Kura

enum CodegenCommand {
    static let spec = CommandSpec(name: "codegen", help: """
        usage: kura codegen MODEL [--output DIR | --stdout] [--name NAME]

        Writes Swift ManagedObject subclasses with typed properties (@Managed,
        @ToOne, @ToMany) for MODEL: an Xcode model (.xcdatamodeld, .xcdatamodel
        or its contents file) or a Kura store file (its tables and columns; a
        store does not record relationships' destinations, which are left as
        comments). Per entity, as mogenerator does:
          X+Generated.swift  class _X with the entity's own properties;
                             overwritten by every run: do not edit
          X.swift            class X: _X, for your code; created only if
                             missing, never changed afterwards
        A subentity's _X derives from its parent's class. NAME+Classes.swift
        (NAME from --name, default the model's file name) lists the classes by
        entity name for ManagedObjectModel.load(xcodeModel:classes:).
        Output is deterministic (name order, no dates): regenerate freely.

          --output DIR   write into DIR (created if missing; default .)
          --stdout       print the generated files instead (not X.swift)
          --name NAME    the registry's name (NAMEClasses in NAME+Classes.swift)

        exit codes: 0 ok, 2 usage error or a model that cannot be read,
        3 cannot read the file
        """, valueOptions: ["output", "name"], flags: ["stdout"], positional: 1...1)

    static func run(_ args: [String]) -> Int32 {
        runCommand("codegen") {
            guard let a = try parseArguments(args, spec) else { return ExitCode.ok }
            if a.has("stdout") && a.has("output") { throw CLIError.usage("--stdout and --output exclude each other") }
            let path = a.positional[0]
            let model = try load(path)
            let name = try registryName(a.value("name") ?? defaultName(path))
            let generated = SwiftClassGenerator.generatedFiles(model, registryName: name)
            if a.has("stdout") {
                for f in generated {
                    out.line("// ==== \(f.name) ====")
                    out.write(f.text)
                }
                return ExitCode.ok
            }
            let dir = URL(fileURLWithPath: a.value("output") ?? FileManager.default.currentDirectoryPath)
            do { try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true) } catch {
                throw CLIError.cannotRead("cannot create output directory \(dir.path): \(error.localizedDescription)")
            }
            for f in generated {
                try write(f, in: dir)
                out.line("wrote \(f.name)")
            }
            for f in SwiftClassGenerator.humanFiles(model) {
                if FileManager.default.fileExists(atPath: dir.appendingPathComponent(f.name).path) {
                    out.line("kept \(f.name)")
                } else {
                    try write(f, in: dir)
                    out.line("created \(f.name)")
                }
            }
            return ExitCode.ok
        }
    }

    static func write(_ f: SwiftClassGenerator.File, in dir: URL) throws {
        let url = dir.appendingPathComponent(f.name)
        do { try Data(f.text.utf8).write(to: url, options: .atomic) } catch {
            throw CLIError.cannotRead("cannot write \(url.path): \(error.localizedDescription)")
        }
    }

    /// The model's file name without extensions, as an identifier.
    static func defaultName(_ path: String) -> String {
        var base = URL(fileURLWithPath: path).lastPathComponent
        if base == "contents" { base = URL(fileURLWithPath: path).deletingLastPathComponent().lastPathComponent }
        for ext in [".contents", ".xcdatamodeld", ".xcdatamodel", ".kura", ".store", ".sqlite"] where base.hasSuffix(ext) {
            base = String(base.dropLast(ext.count))
        }
        let cleaned = String(base.map { $0.isLetter || $0.isNumber || $0 == "_" ? $0 : "_" })
        return cleaned.isEmpty ? "Model" : cleaned
    }

    static func registryName(_ s: String) throws -> String {
        guard let first = s.first, first.isLetter || first == "_", s.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" }) else {
            throw CLIError.usage("--name \(s): not a Swift identifier")
        }
        return s
    }

    /// The model at `path`: Xcode (a directory, `.contents`/`contents`, or XML) or a store.
    static func load(_ path: String) throws -> CodegenModel {
        var isDir: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDir) else {
            throw CLIError.cannotRead("cannot open \(path): no such file")
        }
        let head = isDir.boolValue ? Data() : (FileHandle(forReadingAtPath: path)?.readData(ofLength: 64) ?? Data())
        let looksXML = String(decoding: head, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines).hasPrefix("<")
        if isDir.boolValue || looksXML {
            do throws(KuraError) {
                return try fromXcode(XcodeModelDocument(contentsOf: URL(fileURLWithPath: path)), source: URL(fileURLWithPath: path).lastPathComponent)
            } catch {
                throw CLIError(code: exitCode(for: error), message: "cannot read Xcode model \(path): \(describe(error))")
            }
        }
        return try fromStore(path)
    }

    /// The Swift type of an Xcode attribute kind, or why it is not generated.
    static func fromXcode(_ doc: XcodeModelDocument, source: String) -> CodegenModel {
        var entities: [CodegenModel.Entity] = []
        for e in doc.entities {
            var className = e.name
            if let c = e.representedClassName, !c.isEmpty, c != "NSManagedObject" {
                className = String(c.split(separator: ".").last ?? Substring(c))
            }
            var props: [CodegenModel.Property] = []
            for a in e.attributes {
                let kind: CodegenModel.Property.Kind
                switch a.kind {
                case .integer16: kind = .attribute(swiftType: "Int16")
                case .integer32: kind = .attribute(swiftType: "Int32")
                case .integer64: kind = .attribute(swiftType: "Int64")
                case .decimal: kind = .attribute(swiftType: "Decimal")
                case .double: kind = .attribute(swiftType: "Double")
                case .float: kind = .attribute(swiftType: "Float")
                case .string: kind = .attribute(swiftType: "String")
                case .boolean: kind = .attribute(swiftType: "Bool")
                case .date: kind = .attribute(swiftType: "Date")
                case .binary: kind = .attribute(swiftType: "Data")
                case .uuid: kind = .attribute(swiftType: "UUID")
                case .uri: kind = .attribute(swiftType: "URL")
                case .transformable: kind = .transformable(transformer: a.valueTransformerName)
                case .composite:
                    // Composite attributes: the model has no kind for them yet.
                    kind = .skipped(reason: "composite attribute\(a.composite.map { " (\($0))" } ?? ""); Kura's model has no composite attributes yet")
                case .objectID: kind = .skipped(reason: "ObjectID attributes have no Kura equivalent")
                case .undefined: kind = .skipped(reason: "attribute type Undefined (transient, untyped): use self[\"\(a.name)\"]")
                }
                var notes: [String] = []
                if a.isTransient { notes.append("transient: not stored") }
                if a.isDerived { notes.append("derived\(a.derivationExpression.map { " from \($0)" } ?? ""): computed by Core Data, do not set") }
                props.append(.init(name: a.name, kind: kind, isOptional: a.isOptional, note: notes.isEmpty ? nil : notes.joined(separator: "; ")))
            }
            for r in e.relationships {
                props.append(.init(name: r.name, kind: r.isToMany ? .toMany(destination: r.destinationEntity, ordered: r.isOrdered)
                                                              : .toOne(destination: r.destinationEntity),
                                   isOptional: true, note: nil))
            }
            for f in e.fetchedProperties {
                props.append(.init(name: f.name, kind: .skipped(reason: "fetched property: read it with value(forKey: \"\(f.name)\")"),
                                   isOptional: true, note: nil))
            }
            entities.append(.init(name: e.name, className: className, parent: e.parentEntity, isAbstract: e.isAbstract, properties: props))
        }
        return CodegenModel(source: source, entities: entities)
    }

    /// Entities from a store's tables (see the header for what a store cannot tell).
    static func fromStore(_ path: String) throws -> CodegenModel {
        let db = try openReadOnly(path)
        var entities: [CodegenModel.Entity] = []
        try db.read { tx in
            let names = try tx.tableNames()
            let joinTables = names.filter { $0.hasPrefix("_") }
            for name in names.sorted() where !name.hasPrefix("_") {
                guard let schema = try tx.schema(of: try tx.table(name)) else {
                    throw CLIError.usage("table \(name) of \(path) has no schema: codegen needs named columns")
                }
                let foreignKeys = Set(try tx.indexes(of: name).compactMap { ix -> String? in
                    guard ix.name.hasSuffix("_fk"), ix.columns.count == 1 else { return nil }
                    return ix.columns[0].name
                })
                var e = CodegenModel.Entity(name: name, className: name, parent: nil, isAbstract: false, properties: [])
                for c in schema.columns {
                    if c.name == "_version" || c.name.hasPrefix("_exact_") { continue }
                    if c.name == "_entity" {
                        e.notes.append("Table \(name) holds an entity hierarchy (column _entity): the store does not record its subentities; generate from the Xcode model for them.")
                        continue
                    }
                    if c.name.hasSuffix("_order"), foreignKeys.contains(String(c.name.dropLast("_order".count))) { continue }
                    if foreignKeys.contains(c.name) {
                        e.properties.append(.init(name: c.name, kind: .skipped(reason: "a to-one relationship (column \(c.name) holds row IDs); the store does not record its destination entity: declare it in \(name).swift with @ToOne(\"\(c.name)\")"),
                                                  isOptional: true, note: nil))
                        continue
                    }
                    let swiftType: String
                    switch c.type {
                    case .integer: swiftType = "Int64"
                    case .double: swiftType = "Double"
                    case .text: swiftType = "String"
                    case .bool: swiftType = "Bool"
                    case .date: swiftType = "Date"
                    case .blob, .external: swiftType = "Data"
                    }
                    e.properties.append(.init(name: c.name, kind: .attribute(swiftType: swiftType), isOptional: c.isNullable, note: nil))
                }
                for j in joinTables where j.hasPrefix("_\(name)_") {
                    let rel = String(j.dropFirst(name.count + 2))
                    e.notes.append("Join table \(j): to-many relationship \"\(rel)\" (and maybe its inverse on the other entity); the store does not record the destination: declare it in \(name).swift with @ToMany(\"\(rel)\").")
                }
                entities.append(e)
            }
        }
        return CodegenModel(source: URL(fileURLWithPath: path).lastPathComponent, entities: entities)
    }
}
