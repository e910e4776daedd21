// KuraError: the one error type of KuraEngine.
//
// Every failure the engine reports is a `KuraError`: a `code` a caller can match,
// a message that says what went wrong and how to fix it, and the context involved
// (file, page, table, column, index, predicate offset). Codes match with `~=`, so
//
//     do { try db.write { ... } }
//     catch KuraError.busy { retry later }
//     catch KuraError.corrupt { run `kura check` }
//
// works the way GRDB's `catch DatabaseError.SQLITE_BUSY` does.
//
// Programmer errors (a cursor used after its transaction ended, a negative limit)
// are `precondition`s; anything that came from disk or from a user is thrown.

/// An error thrown by Kura's storage and query engine.
///
/// Match on ``code`` (or use the static codes as catch patterns:
/// `catch KuraError.busy`). ``description`` is a full, human-readable sentence that
/// names the file, page, table, column or predicate offset involved.
public struct KuraError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of failure this is. Stable across releases: match on it.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// Lets `catch KuraError.busy` match a thrown `KuraError` by code.
        public static func ~= (pattern: Code, error: any Error) -> Bool {
            (error as? KuraError)?.code == pattern
        }

        /// Another connection (process) holds the write lock past the busy timeout.
        public static let busy = Code(rawValue: "busy")
        /// Bytes on disk are not what Kura wrote: bad checksum, bad structure,
        /// truncated file. The store needs `kura check`, then a backup or `kura compact`.
        public static let corrupt = Code(rawValue: "corrupt")
        /// The file is not a Kura store (wrong magic number).
        public static let notADatabase = Code(rawValue: "notADatabase")
        /// The file was written by a format version this build cannot read.
        public static let unsupportedVersion = Code(rawValue: "unsupportedVersion")
        /// An operating-system call failed (errno in the message): EIO, EACCES, ...
        public static let io = Code(rawValue: "io")
        /// The disk (or quota) is full. Nothing committed was lost; free space and retry.
        public static let diskFull = Code(rawValue: "diskFull")
        /// A table, column or index name that does not exist.
        public static let notFound = Code(rawValue: "notFound")
        /// A table, column or index name that already exists.
        public static let alreadyExists = Code(rawValue: "alreadyExists")
        /// A value or argument that the operation cannot accept.
        public static let invalidArgument = Code(rawValue: "invalidArgument")
        /// A value of the wrong type for its column or operator.
        public static let typeMismatch = Code(rawValue: "typeMismatch")
        /// A unique index already holds the value.
        public static let constraintViolation = Code(rawValue: "constraintViolation")
        /// A predicate string that does not parse; `offset` is the character offset.
        public static let syntax = Code(rawValue: "syntax")
        /// A construct Kura recognises but does not support (e.g. `FUNCTION` with an
        /// Objective-C selector).
        public static let unsupported = Code(rawValue: "unsupported")
        /// The database was closed, or a transaction used outside its closure.
        public static let misuse = Code(rawValue: "misuse")
        /// A limit was exceeded (key too large, too many columns, ...).
        public static let tooBig = Code(rawValue: "tooBig")
    }

    public var code: Code
    /// What went wrong and, where it helps, how to fix it.
    public var message: String
    /// The file involved, if any.
    public var path: String?
    /// The page involved (1-based), if any.
    public var page: UInt32?
    /// The character offset in a predicate string, if any.
    public var offset: Int?

    public init(_ code: Code, _ message: String, path: String? = nil, page: UInt32? = nil, offset: Int? = nil) {
        self.code = code
        self.message = message
        self.path = path
        self.page = page
        self.offset = offset
    }

    public var description: String {
        var s = "\(code): \(message)"
        if let page { s += " (page \(page)" + (path.map { " of \($0)" } ?? "") + ")" }
        else if let path { s += " (\(path))" }
        if let offset, page == nil { s += " [at offset \(offset)]" }
        return s
    }


    public static let busy = Code.busy
    public static let corrupt = Code.corrupt
    public static let notADatabase = Code.notADatabase
    public static let unsupportedVersion = Code.unsupportedVersion
    public static let io = Code.io
    public static let diskFull = Code.diskFull
    public static let notFound = Code.notFound
    public static let alreadyExists = Code.alreadyExists
    public static let invalidArgument = Code.invalidArgument
    public static let typeMismatch = Code.typeMismatch
    public static let constraintViolation = Code.constraintViolation
    public static let syntax = Code.syntax
    public static let unsupported = Code.unsupported
    public static let misuse = Code.misuse
    public static let tooBig = Code.tooBig

    // MARK: Constructors used throughout the engine

    static func corruption(_ reason: String, page: UInt32?, path: String?) -> KuraError {
        KuraError(.corrupt, "store is corrupt: \(reason); run `kura check` on it", path: path, page: page)
    }
}
