// swift-tools-version:6.0
// Kura benchmarks: Kura against SQLite (C API) and GRDB, same workloads, same run.
//
// This is its own package so that the competitors (the system SQLite library and
// GRDB) never enter the graph of the Kura library, which keeps zero dependencies
// (DESIGN.md, decision 1). Run it with
//
//     swift run -c release --package-path Benchmarks kura-bench
import PackageDescription

let package = Package(
    name: "KuraBenchmarks",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "kura-bench", targets: ["KuraBench"]),
    ],
    dependencies: [
        .package(name: "Kura", path: ".."),
        .package(url: "https://github.com/groue/GRDB.swift", exact: "7.10.0"),
    ],
    targets: [
        // The system SQLite library (libsqlite3-dev on Linux, the SDK on macOS),
        // used through its C API.
        .systemLibrary(
            name: "CSQLite",
            path: "Sources/CSQLite",
            providers: [.apt(["libsqlite3-dev"]), .brew(["sqlite"])]
        ),
        .executableTarget(
            name: "KuraBench",
            dependencies: [
                "CSQLite",
                .product(name: "KuraEngine", package: "Kura"),
                // The object layer, for the "Kura objects" rows.
                .product(name: "Kura", package: "Kura"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            path: "Sources/KuraBench",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
    ]
)
