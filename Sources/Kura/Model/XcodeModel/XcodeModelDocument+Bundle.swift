// XcodeModelDocument+Bundle: finding the `contents` file of a model on disk.
//
// Xcode stores a model as one of:
//   - `Name.xcdatamodeld/`: a versioned bundle holding one `V.xcdatamodel/`
//     directory per version and a `.xccurrentversion` property list whose key
//     `_XCCurrentVersionName` names the current version ("V.xcdatamodel");
//     without that file, a bundle with exactly one version uses it;
//   - `Name.xcdatamodel/`: one version, its XML in `contents` (Xcode 4 and later);
//   - the `contents` file itself.
// A directory is told apart by its contents, not by its extension: one holding
// `contents` is a version, one holding `.xccurrentversion` or `*.xcdatamodel`
// directories is a bundle.

import Foundation

extension XcodeModelDocument {
    /// Reads the model at `url`: a `.xcdatamodeld` bundle (its current version),
    /// a `.xcdatamodel` directory, or a `contents` file.
    ///
    /// - Throws: `KuraError.notFound` when the file, the current version or its
    ///   `contents` is missing; `.io` when a file cannot be read; `.syntax` for a
    ///   malformed `.xccurrentversion` or model file (the message names the file
    ///   and line); see ``init(xml:path:)``.
    public init(contentsOf url: URL) throws(KuraError) {
        let contents = try Self.contentsFile(for: url)
        let data: Data
        do { data = try Data(contentsOf: contents) } catch {
            throw KuraError(.io, "cannot read Xcode model file \(contents.path): \(error.localizedDescription)", path: contents.path)
        }
        try self.init(xml: data, path: contents.path)
    }

    /// The `contents` file a model URL stands for (see the header comment).
    static func contentsFile(for url: URL) throws(KuraError) -> URL {
        let fm = FileManager.default
        var isDir: ObjCBool = false
        guard fm.fileExists(atPath: url.path, isDirectory: &isDir) else {
            throw KuraError(.notFound, "no Xcode model at \(url.path)", path: url.path)
        }
        guard isDir.boolValue else { return url }
        let contents = url.appendingPathComponent("contents")
        if fm.fileExists(atPath: contents.path) { return contents }
        let marker = url.appendingPathComponent(".xccurrentversion")
        let version: String
        if fm.fileExists(atPath: marker.path) {
            version = try currentVersionName(marker)
        } else {
            let versions: [String]
            do { versions = try fm.contentsOfDirectory(atPath: url.path).filter { $0.hasSuffix(".xcdatamodel") }.sorted() } catch {
                throw KuraError(.io, "cannot list the Xcode model bundle \(url.path): \(error.localizedDescription)", path: url.path)
            }
            guard versions.count == 1, let only = versions.first else {
                throw KuraError(.notFound, "\(url.path) has no contents file and no .xccurrentversion, and \(versions.isEmpty ? "no .xcdatamodel version" : "\(versions.count) versions (\(versions.joined(separator: ", "))): which one is current is not recorded")", path: url.path)
            }
            version = only
        }
        guard !version.contains("/"), version != "..", version != "." else {
            throw KuraError(.syntax, "\(marker.path): the current version \"\(version)\" is not a name inside the bundle", path: marker.path)
        }
        let file = url.appendingPathComponent(version).appendingPathComponent("contents")
        guard fm.fileExists(atPath: file.path) else {
            throw KuraError(.notFound, "\(url.path): the current version \"\(version)\" has no contents file (\(file.path))", path: file.path)
        }
        return file
    }

    /// `_XCCurrentVersionName` of a `.xccurrentversion` property list.
    static func currentVersionName(_ marker: URL) throws(KuraError) -> String {
        let data: Data
        do { data = try Data(contentsOf: marker) } catch {
            throw KuraError(.io, "cannot read \(marker.path): \(error.localizedDescription)", path: marker.path)
        }
        let plist: Any
        do { plist = try PropertyListSerialization.propertyList(from: data, options: [], format: nil) } catch {
            throw KuraError(.syntax, "\(marker.path) is not a property list: \(error.localizedDescription)", path: marker.path)
        }
        guard let dict = plist as? [String: Any] else {
            throw KuraError(.syntax, "\(marker.path): the property list is not a dictionary", path: marker.path)
        }
        guard let name = dict["_XCCurrentVersionName"] as? String, !name.isEmpty else {
            throw KuraError(.syntax, "\(marker.path): no string _XCCurrentVersionName (keys: \(dict.keys.sorted().joined(separator: ", ")))", path: marker.path)
        }
        return name
    }
}
