// swift-tools-version:6.0
// Kura: an embedded, pure-Swift database. This manifest must keep zero package
// dependencies (see ../shared/DESIGN.md, decision 1). Competitors for benchmarking
// live in Benchmarks/Package.swift only.
import PackageDescription

let package = Package(
    name: "Kura",
    platforms: [.macOS(.v13), .iOS(.v16)],
    products: [
        .library(name: "Kura", targets: ["Kura"]),
        .library(name: "KuraEngine", targets: ["KuraEngine"]),
        .executable(name: "kura", targets: ["KuraCLI"]),
    ],
    targets: [
        .target(
            name: "KuraEngine",
            // No unsafeFlags here: SwiftPM refuses a versioned dependency whose
            // product targets use them, and KuraEngine is a product.
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .target(
            name: "Kura",
            dependencies: ["KuraEngine"],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // Examples/: one runnable program per seed document (shared/seeds).
        .target(name: "KuraExamples", dependencies: ["Kura"], path: "Examples/Shared",
                swiftSettings: [.swiftLanguageMode(.v6)]),
        .executableTarget(name: "student-records", dependencies: ["KuraExamples"], path: "Examples/StudentRecords",
                          swiftSettings: [.swiftLanguageMode(.v6)]),
        .executableTarget(name: "event-list", dependencies: ["Kura"], path: "Examples/EventList",
                          swiftSettings: [.swiftLanguageMode(.v6)]),
        .executableTarget(name: "oneliner-memos", dependencies: ["Kura"], path: "Examples/OneLinerMemos",
                          swiftSettings: [.swiftLanguageMode(.v6)]),
        .executableTarget(name: "na-filter-create", dependencies: ["Kura"], path: "Examples/NaFilterCreate",
                          swiftSettings: [.swiftLanguageMode(.v6)]),
        .executableTarget(
            name: "KuraCLI",
            dependencies: ["Kura", "KuraEngine", "KuraExamples"],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // A child process for crash tests: commits in a loop, reports each
        // acknowledged commit on stdout, and is killed with SIGKILL by the test;
        // also the object-layer writer of the cross-process conflict tests.
        .executableTarget(
            name: "KuraTestChild",
            dependencies: ["KuraEngine", "Kura"],
            path: "Tests/KuraTestChild",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .testTarget(
            name: "KuraEngineTests",
            dependencies: ["KuraEngine", "KuraTestChild"],
            swiftSettings: [
                .swiftLanguageMode(.v6),
                // Optimized for the same reason as KuraEngine: the reference
                // models and naive evaluators run millions of steps.
                .unsafeFlags(["-O"], .when(configuration: .debug)),
            ]
        ),
        .testTarget(
            name: "KuraTests",
            dependencies: ["Kura", "KuraEngine", "KuraExamples", "KuraTestChild"],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .testTarget(
            name: "KuraCLITests",
            dependencies: ["KuraCLI", "KuraEngine"],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
    ]
)
