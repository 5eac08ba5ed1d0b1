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
        .library(name: "TagFixEmulators", targets: ["TagFixEmulators"]),
        .library(name: "TagFixNFC", targets: ["TagFixNFC"]),
        .library(name: "TagFixGPSD", targets: ["TagFixGPSD"]),
        .library(name: "TagFixStore", targets: ["TagFixStore"]),
        .library(name: "TagFixReport", targets: ["TagFixReport"]),
        .library(name: "TagFixCrypto", targets: ["TagFixCrypto"]),
        .executable(name: "tagfix", targets: ["tagfix"]),
    ],
    targets: [
        .target(name: "TagFixCore"),
        .target(name: "TagFixNDEF", dependencies: ["TagFixCore"]),
        // libc pieces Swift's Glibc does not import: ntp_adjtime (is the system clock
        // synchronised?) and posix_spawn with a clean signal mask.
        .target(name: "CSystemClock"),
        .target(name: "CProcess"),
        .target(name: "TagFixDevices", dependencies: ["TagFixCore", "CSystemClock", "CProcess"]),
        .target(name: "CPTY"),
        .systemLibrary(name: "CNFC", pkgConfig: "libnfc", providers: [.apt(["libnfc-dev"])]),
        .target(name: "TagFixNFC", dependencies: ["CNFC", "TagFixCore", "TagFixNDEF", "TagFixDevices", "TagFixCrypto"]),
        .systemLibrary(name: "CGPS", pkgConfig: "libgps", providers: [.apt(["libgps-dev"])]),
        .target(name: "TagFixGPSD", dependencies: ["CGPS", "TagFixCore", "TagFixDevices"]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .target(name: "TagFixStore", dependencies: ["CSQLite", "TagFixCore"]),
        .target(name: "TagFixReport", dependencies: ["TagFixCore"]),
        // OpenSSL 3's libcrypto (trust: originality signatures, SUN, signed locations).
        .systemLibrary(name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .target(name: "TagFixCrypto", dependencies: ["CCrypto", "TagFixCore"]),
        .target(name: "TagFixEmulators", dependencies: ["TagFixCore", "TagFixNDEF", "TagFixDevices", "TagFixCrypto", "CPTY"]),
        .target(name: "TagFixTesting", dependencies: ["TagFixCore", "TagFixDevices"]),
        .target(name: "TagFixCLI", dependencies: ["TagFixCore", "TagFixNDEF", "TagFixDevices", "TagFixTesting", "TagFixEmulators", "TagFixNFC", "TagFixGPSD", "TagFixStore", "TagFixReport", "TagFixCrypto"]),
        .executableTarget(name: "tagfix", dependencies: ["TagFixCLI"]),
        .executableTarget(
            name: "TagFixBench", dependencies: ["TagFixCore", "TagFixNDEF", "TagFixDevices", "TagFixTesting", "TagFixEmulators", "TagFixNFC", "TagFixGPSD", "TagFixStore", "TagFixCrypto"],
            path: "Benchmarks/TagFixBench"),
        // Test tooling: the parsers' fuzz targets (a library the corpus tests also run), and
        // tagfix-fuzz, which runs them under libFuzzer (Fuzz/run builds it with -DFUZZING) or
        // replays files through them (an ordinary build).
        .target(name: "TagFixFuzzTargets", dependencies: ["TagFixCore", "TagFixNDEF", "TagFixTesting", "TagFixEmulators"], path: "Fuzz/Targets"),
        .executableTarget(
            name: "tagfix-fuzz", dependencies: ["TagFixFuzzTargets"], path: "Fuzz/Entry", swiftSettings: [.unsafeFlags(["-parse-as-library"])]),

        .testTarget(name: "TagFixCoreTests", dependencies: ["TagFixCore", "TagFixTesting"]),
        .testTarget(name: "TagFixNDEFTests", dependencies: ["TagFixNDEF", "TagFixDevices", "TagFixTesting"]),
        .testTarget(name: "TagFixEmulatorsTests", dependencies: ["TagFixEmulators", "TagFixNDEF", "TagFixCore", "TagFixCrypto"]),
        .testTarget(name: "TagFixGPSDTests", dependencies: ["TagFixGPSD", "TagFixEmulators", "TagFixCore", "TagFixDevices", "TagFixTesting"]),
        .testTarget(name: "TagFixNFCTests", dependencies: ["TagFixNFC", "TagFixEmulators", "TagFixNDEF", "TagFixTesting"]),
        .testTarget(name: "TagFixDevicesTests", dependencies: ["TagFixDevices", "TagFixTesting"]),
        .testTarget(name: "TagFixTestingTests", dependencies: ["TagFixTesting"]),
        .testTarget(name: "TagFixStoreTests", dependencies: ["TagFixStore", "TagFixCore"]),
        .testTarget(name: "TagFixReportTests", dependencies: ["TagFixReport", "TagFixCore"]),
        .testTarget(
            name: "TagFixCryptoTests", dependencies: ["TagFixCrypto", "TagFixCore", "TagFixNDEF", "TagFixTesting"],
            exclude: ["nxp_originality.py", "ntag424_an12196.py"]),
        .testTarget(name: "TagFixFuzzTests", dependencies: ["TagFixFuzzTargets", "TagFixTesting", "TagFixCore"]),
        .testTarget(
            name: "TagFixCLITests", dependencies: ["TagFixCLI", "TagFixTesting", "TagFixEmulators", "TagFixNDEF", "TagFixNFC", "TagFixDevices", "TagFixGPSD", "TagFixStore", "TagFixReport",
                "TagFixCrypto",
            ]),
    ],
    swiftLanguageModes: [.v6]
)

for target in package.targets where target.type != .system && !target.name.hasPrefix("C") {
    target.swiftSettings = (target.swiftSettings ?? []) + swiftSettings
}
