// swift-tools-version: 6.2
// libFuzzer targets for the gateway's parsers. A separate package so the main build never
// compiles them: `Fuzz/run.sh SECONDS` builds with --sanitize=fuzzer and runs each.
import PackageDescription

let package = Package(
    name: "TidingsFuzz",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "tidings", path: "..")],
    targets: [
        .executableTarget(name: "FuzzPayload", dependencies: [.product(name: "TidingsCore", package: "tidings")]),
        .executableTarget(name: "FuzzProviderToken", dependencies: [.product(name: "TidingsCore", package: "tidings")]),
        .executableTarget(name: "FuzzRequestHeaders", dependencies: [.product(name: "TidingsCore", package: "tidings")]),
        .executableTarget(name: "FuzzDeviceMessage", dependencies: [.product(name: "TidingsCore", package: "tidings")]),
        .executableTarget(name: "FuzzTrigger", dependencies: [.product(name: "TidingsCore", package: "tidings"), .product(name: "TidingsEngine", package: "tidings")]),
        .executableTarget(name: "FuzzAppFrame", dependencies: [.product(name: "TidingsCore", package: "tidings")]),
        .executableTarget(name: "FuzzDBusMessage", dependencies: [.product(name: "TidingsDBus", package: "tidings")]),
    ]
)
