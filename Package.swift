// swift-tools-version: 6.0
import PackageDescription

// Layers (see docs/architecture.md): nothing imports upward.
//
//   tagfix (executable) → TagFixCLI → TagFixDoctor, TagFixDemo (the doctor's checks, the demo)
//                                    → TagFixReaders (reader factory: address → TagReader / TagSession)
//                                    → TagFixScenarios (the scenario format, scripted devices)
//                                    → TagFixTags (backend-neutral tag read / write procedures)
//                                    → TagFixDevices (protocols, clocks, live verifier)
//                                    → TagFixSystem (descriptors, pipes, eventfd, sockets, Errno)
//                                    → TagFixCore (pure: geodesy, regions, verifier)
//
// The libnfc / libgps shims and their backends arrive as their own targets; a package that
// depends only on the `TagFixCore`, `TagFixScenarios` and `TagFixTesting` products never needs
// those C libraries. TagFixTesting (the manual clock, the reference data) is for tests only.

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
        .library(name: "TagFixSystem", targets: ["TagFixSystem"]),
        .library(name: "TagFixDevices", targets: ["TagFixDevices"]),
        .library(name: "TagFixScenarios", targets: ["TagFixScenarios"]),
        .library(name: "TagFixTesting", targets: ["TagFixTesting"]),
        .library(name: "TagFixEmulators", targets: ["TagFixEmulators"]),
        .library(name: "TagFixDaemons", targets: ["TagFixDaemons"]),
        .library(name: "TagFixTags", targets: ["TagFixTags"]),
        .library(name: "TagFixNFC", targets: ["TagFixNFC"]),
        .library(name: "TagFixPCSC", targets: ["TagFixPCSC"]),
        .library(name: "TagFixReaders", targets: ["TagFixReaders"]),
        .library(name: "TagFixGPSD", targets: ["TagFixGPSD"]),
        .library(name: "TagFixStore", targets: ["TagFixStore"]),
        .library(name: "TagFixReport", targets: ["TagFixReport"]),
        .library(name: "TagFixCrypto", targets: ["TagFixCrypto"]),
        .library(name: "TagFixDoctor", targets: ["TagFixDoctor"]),
        .library(name: "TagFixDemo", targets: ["TagFixDemo"]),
        .library(name: "TagFixMQTT", targets: ["TagFixMQTT"]),
        .library(name: "TagFixServe", targets: ["TagFixServe"]),
        .library(name: "TagFixPostgres", targets: ["TagFixPostgres"]),
        .library(name: "TagFixTLS", targets: ["TagFixTLS"]),
        .executable(name: "tagfix", targets: ["tagfix"]),
        // Test tooling, not the product: a slow disk for LD_PRELOAD (Tests/SlowFsync).
        .library(name: "TagFixSlowFsync", type: .dynamic, targets: ["SlowFsync"]),
    ],
    targets: [
        .target(name: "TagFixCore"),
        .target(name: "TagFixNDEF", dependencies: ["TagFixCore"]),
        // libc pieces Swift's Glibc does not import: ntp_adjtime (is the system clock
        // synchronised?) and posix_spawn with a clean signal mask.
        .target(name: "CSystemClock"),
        .target(name: "CProcess"),
        // The system layer: every POSIX call (descriptors, pipes, eventfd, sockets) and errno as
        // a named `Errno`, with swift-system's names; EINTR is retried in one place.
        .target(name: "CSystem"),
        .target(name: "TagFixSystem", dependencies: ["CSystem"]),
        .target(name: "TagFixDevices", dependencies: ["TagFixCore", "TagFixSystem", "CSystemClock", "CProcess"]),
        .target(name: "CPTY"),
        .systemLibrary(name: "CNFC", pkgConfig: "libnfc", providers: [.apt(["libnfc-dev"])]),
        // The tag procedures every reader backend shares (NDEF read and write, READ_SIG), over a
        // `TagTransport` the backend supplies: no backend's C library.
        .target(name: "TagFixTags", dependencies: ["TagFixCore", "TagFixNDEF", "TagFixCrypto"]),
        .target(name: "TagFixNFC", dependencies: ["CNFC", "TagFixCore", "TagFixNDEF", "TagFixDevices", "TagFixTags"]),
        // pcsc-lite's client library: PC/SC readers through pcscd (ACR1252U, Omnikey, uTrust…).
        // pcsc-lite (Debian libpcsclite-dev): a C target, not a system library: see Sources/CPCSC/include/pcsclite.h.
        .target(name: "CPCSC", linkerSettings: [.linkedLibrary("pcsclite")]),
        .target(name: "TagFixPCSC", dependencies: ["CPCSC", "TagFixCore", "TagFixNDEF", "TagFixDevices", "TagFixTags"]),
        .systemLibrary(name: "CGPS", pkgConfig: "libgps", providers: [.apt(["libgps-dev"])]),
        .target(name: "TagFixGPSD", dependencies: ["CGPS", "TagFixCore", "TagFixDevices", "TagFixSystem"]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .target(name: "TagFixStore", dependencies: ["CSQLite", "TagFixCore", "TagFixSystem"]),
        .target(name: "TagFixReport", dependencies: ["TagFixCore", "TagFixNDEF"]),
        // PostgreSQL's client library (libpq 15): the fleet store several collectors share.
        .systemLibrary(name: "CPostgres", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        .target(name: "TagFixPostgres", dependencies: ["CPostgres", "TagFixCore", "TagFixStore"]),
        // Fleets over MQTT (libmosquitto 2.0): the publisher (verify --publish) and the collector.
        .systemLibrary(name: "CMosquitto", pkgConfig: "libmosquitto", providers: [.apt(["libmosquitto-dev"])]),
        .target(name: "TagFixMQTT", dependencies: ["CMosquitto", "TagFixCore", "TagFixSystem", "TagFixDevices", "TagFixStore"]),
        // OpenSSL 3's libcrypto (trust: originality signatures, SUN, signed locations).
        .systemLibrary(name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .target(name: "TagFixCrypto", dependencies: ["CCrypto", "TagFixCore"]),
        // OpenSSL 3's libssl: TLS over memory buffers for serve --tls-cert (every libssl call in TLS.swift).
        .systemLibrary(name: "CSSL", pkgConfig: "libssl", providers: [.apt(["libssl-dev"])]),
        .target(name: "TagFixTLS", dependencies: ["CSSL", "TagFixSystem"]),
        .target(
            name: "TagFixEmulators", dependencies: ["TagFixCore", "TagFixNDEF", "TagFixSystem", "TagFixDevices", "TagFixCrypto", "CPTY"]),
        // The private daemons (gpsd, pcscd) on one generic `PrivateDaemon` with its watchdog,
        // each scoped (`with…{ }`); a new private daemon goes here.
        .target(name: "TagFixDaemons", dependencies: ["TagFixDevices", "TagFixSystem", "CPTY"]),
        // Test-only daemons (the private mosquitto broker), for the tests and the benchmarks:
        // not in the product.
        .target(name: "TagFixTestDaemons", dependencies: ["TagFixDaemons", "TagFixDevices"], path: "Tests/TagFixTestDaemons"),
        // fsync made slow off RAM file systems, loaded with LD_PRELOAD into a test's daemon:
        // libTagFixSlowFsync.so beside the test runner. Test tooling, not in the product.
        .target(name: "SlowFsync", path: "Tests/SlowFsync"),
        // The shipped scenario format and its scripted devices (`--scenario`, the demo's mock GPS);
        // TagFixTesting is for tests only (the manual clock, the reference data).
        .target(name: "TagFixScenarios", dependencies: ["TagFixCore", "TagFixDevices"]),
        .target(name: "TagFixTesting", dependencies: ["TagFixCore", "TagFixDevices", "TagFixSystem"]),
        // The doctor's checks and the demo's orchestration: libraries the thin CLI calls.
        .target(
            name: "TagFixDoctor", dependencies: ["TagFixCore", "TagFixDevices", "TagFixNFC", "TagFixPCSC", "TagFixGPSD", "TagFixSystem"]),
        .target(
            name: "TagFixDemo",
            dependencies: [
                "TagFixCore", "TagFixNDEF", "TagFixDevices", "TagFixScenarios", "TagFixEmulators", "TagFixDaemons", "TagFixNFC",
                "TagFixGPSD",
            ]),
        // tagfix serve: the event socket, the HTTP server and the live page, as a sink of the
        // session's fan-out.
        .target(name: "TagFixServe", dependencies: ["TagFixCore", "TagFixSystem", "TagFixDevices", "TagFixReport", "TagFixTLS"]),
        // The reader factory: a reader address (--reader) becomes a TagReader or a TagSession of
        // the backend that serves it; a new backend registers here.
        .target(name: "TagFixReaders", dependencies: ["TagFixCore", "TagFixDevices", "TagFixNFC", "TagFixPCSC", "TagFixScenarios"]),
        .target(
            name: "TagFixCLI",
            dependencies: [
                "TagFixCore", "TagFixNDEF", "TagFixDevices", "TagFixScenarios", "TagFixEmulators", "TagFixDaemons", "TagFixTags",
                "TagFixNFC", "TagFixPCSC", "TagFixReaders", "TagFixGPSD", "TagFixStore", "TagFixReport", "TagFixCrypto", "TagFixDoctor",
                "TagFixDemo", "TagFixMQTT", "TagFixServe", "TagFixPostgres", "TagFixTLS", "TagFixSystem",
            ]),
        .executableTarget(name: "tagfix", dependencies: ["TagFixCLI"]),
        .executableTarget(
            name: "TagFixBench",
            dependencies: [
                "TagFixCore", "TagFixNDEF", "TagFixDevices", "TagFixScenarios", "TagFixEmulators", "TagFixTags", "TagFixNFC", "TagFixGPSD",
                "TagFixStore", "TagFixCrypto", "TagFixMQTT", "TagFixServe", "TagFixPCSC", "TagFixDaemons", "TagFixTestDaemons",
                "TagFixPostgres", "CBenchSched",
            ],
            path: "Benchmarks/TagFixBench"),
        // sched_setaffinity for the benchmarks (the serve fan-out's threads harness).
        .target(name: "CBenchSched", path: "Benchmarks/CBenchSched"),
        // Test tooling: the parsers' fuzz targets (a library the corpus tests also run), and
        // tagfix-fuzz, which runs them under libFuzzer (Fuzz/run builds it with -DFUZZING) or
        // replays files through them (an ordinary build).
        .target(
            name: "TagFixFuzzTargets",
            dependencies: ["TagFixCore", "TagFixNDEF", "TagFixScenarios", "TagFixEmulators", "TagFixServe", "TagFixMQTT"],
            path: "Fuzz/Targets"),
        .executableTarget(
            name: "tagfix-fuzz", dependencies: ["TagFixFuzzTargets"], path: "Fuzz/Entry",
            swiftSettings: [.unsafeFlags(["-parse-as-library"])]),

        .testTarget(name: "TagFixCoreTests", dependencies: ["TagFixCore", "TagFixTesting"]),
        .testTarget(name: "TagFixNDEFTests", dependencies: ["TagFixNDEF", "TagFixDevices", "TagFixTesting"]),
        .testTarget(name: "TagFixEmulatorsTests", dependencies: ["TagFixEmulators", "TagFixNDEF", "TagFixCore", "TagFixCrypto"]),
        .testTarget(
            name: "TagFixGPSDTests",
            dependencies: ["TagFixGPSD", "TagFixEmulators", "TagFixDaemons", "TagFixCore", "TagFixDevices", "TagFixTesting"]),
        .testTarget(
            name: "TagFixTagsTests",
            dependencies: ["TagFixTags", "TagFixEmulators", "TagFixNDEF", "TagFixTesting", "TagFixDevices", "TagFixCore"]),
        .testTarget(name: "TagFixNFCTests", dependencies: ["TagFixNFC", "TagFixTags", "TagFixEmulators", "TagFixNDEF", "TagFixTesting"]),
        .testTarget(
            name: "TagFixPCSCTests",
            dependencies: ["TagFixPCSC", "TagFixEmulators", "TagFixNDEF", "TagFixTags", "TagFixCore", "TagFixTesting"]),
        .testTarget(
            name: "TagFixReadersTests", dependencies: ["TagFixReaders", "TagFixDevices", "TagFixCore", "TagFixScenarios", "TagFixTesting"]),
        .testTarget(name: "TagFixSystemTests", dependencies: ["TagFixSystem"]),
        .testTarget(name: "TagFixDevicesTests", dependencies: ["TagFixDevices", "TagFixScenarios", "TagFixTesting"]),
        .testTarget(name: "TagFixTestingTests", dependencies: ["TagFixScenarios", "TagFixTesting"]),
        .testTarget(name: "TagFixStoreTests", dependencies: ["TagFixStore", "TagFixCore", "TagFixTesting"]),
        .testTarget(
            name: "TagFixPostgresTests",
            dependencies: ["TagFixPostgres", "TagFixStore", "TagFixCore", "TagFixDevices", "TagFixTesting", "TagFixTestDaemons"]),
        .testTarget(name: "TagFixReportTests", dependencies: ["TagFixReport", "TagFixCore", "TagFixStore", "CSQLite"]),
        .testTarget(
            name: "TagFixMQTTTests",
            dependencies: [
                "TagFixMQTT", "TagFixEmulators", "TagFixDaemons", "TagFixTestDaemons", "TagFixStore", "TagFixDevices", "TagFixCore",
                "TagFixTesting", "TagFixReport", "TagFixScenarios", "TagFixPostgres",
            ]),
        .testTarget(
            name: "TagFixCryptoTests", dependencies: ["TagFixCrypto", "TagFixCore", "TagFixNDEF", "TagFixTesting", "TagFixDevices"],
            exclude: ["nxp_originality.py", "ntag424_an12196.py"]),
        .testTarget(
            name: "TagFixServeTests",
            dependencies: [
                "TagFixServe", "TagFixCore", "TagFixDevices", "TagFixScenarios", "TagFixTesting", "TagFixReport", "TagFixSystem", "TagFixTLS",
            ]),
        .testTarget(name: "TagFixTLSTests", dependencies: ["TagFixTLS", "TagFixTesting"]),
        .testTarget(name: "TagFixFuzzTests", dependencies: ["TagFixFuzzTargets", "TagFixTesting", "TagFixCore"]),
        .testTarget(
            name: "TagFixCLITests",
            dependencies: [
                "TagFixCLI", "TagFixTesting", "TagFixScenarios", "TagFixEmulators", "TagFixDaemons", "TagFixTestDaemons", "TagFixNDEF",
                "TagFixNFC", "TagFixDevices", "TagFixGPSD",
                "TagFixStore", "TagFixReport", "TagFixCrypto", "TagFixDoctor", "TagFixDemo", "TagFixTags", "TagFixReaders", "TagFixPCSC",
                "TagFixServe",
            ]),
    ],
    swiftLanguageModes: [.v6]
)

for target in package.targets where target.type != .system && !target.name.hasPrefix("C") {
    target.swiftSettings = (target.swiftSettings ?? []) + swiftSettings
}
