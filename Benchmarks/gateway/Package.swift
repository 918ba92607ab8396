// swift-tools-version: 6.2
// The gateway benchmark's device side (a connected, acknowledging device; many idle devices).
// A separate package so the main build never compiles it. Run through Benchmarks/gateway/*.sh.
import PackageDescription

let package = Package(
    name: "GatewayBench",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "tidings", path: "../..")],
    targets: [
        .executableTarget(name: "gateway-bench", dependencies: [
            .product(name: "TidingsDevice", package: "tidings"),
            .product(name: "TidingsCore", package: "tidings"),
            .product(name: "TidingsDaemon", package: "tidings"),
            .product(name: "UserNotifications", package: "tidings"),
        ]),
    ]
)
