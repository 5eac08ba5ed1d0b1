// swift-tools-version: 6.0
import PackageDescription

// Layers (see docs/architecture.md): nothing imports upward.
//
//   tagfix (executable) → TagFixCLI → TagFixTesting (mocks, scenarios)
//                                    → TagFixDevices (protocols, clocks, live verifier)
//                                    → TagFixCore (pure: geodesy, regions, verifier)
//
// The libnfc / libgps shims and their backends arrive as their own targets; a package that
// depends only on the `TagFixCore` and `TagFixTesting` products never needs those C libraries.

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "TagFix",
    products: [
        .library(name: "TagFixCore", targets: ["TagFixCore"]),
        .library(name: "TagFixNDEF", targets: ["TagFixNDEF"]),
        .library(name: "TagFixDevices", targets: ["TagFixDevices"]),
        .library(name: "TagFixTesting", targets: ["TagFixTesting"]),
        .executable(name: "tagfix", targets: ["tagfix"]),
    ],
    targets: [
        .target(name: "TagFixCore"),
        .target(name: "TagFixNDEF", dependencies: ["TagFixCore"]),
        .target(name: "TagFixDevices", dependencies: ["TagFixCore"]),
        .target(name: "TagFixTesting", dependencies: ["TagFixCore", "TagFixDevices"]),
        .target(name: "TagFixCLI", dependencies: ["TagFixCore", "TagFixNDEF", "TagFixDevices", "TagFixTesting"]),
        .executableTarget(name: "tagfix", dependencies: ["TagFixCLI"]),

        .testTarget(name: "TagFixCoreTests", dependencies: ["TagFixCore", "TagFixTesting"]),
        .testTarget(name: "TagFixNDEFTests", dependencies: ["TagFixNDEF", "TagFixDevices", "TagFixTesting"]),
        .testTarget(name: "TagFixDevicesTests", dependencies: ["TagFixDevices", "TagFixTesting"]),
        .testTarget(name: "TagFixTestingTests", dependencies: ["TagFixTesting"]),
        .testTarget(name: "TagFixCLITests", dependencies: ["TagFixCLI", "TagFixTesting"]),
    ],
    swiftLanguageModes: [.v6]
)

for target in package.targets {
    target.swiftSettings = (target.swiftSettings ?? []) + swiftSettings
}
