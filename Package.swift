// swift-tools-version: 6.2
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "tidings",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "tidings", targets: ["tidings"]),
        .library(name: "UserNotifications", targets: ["UserNotifications"]),
        .library(name: "UserNotificationsUI", targets: ["UserNotificationsUI"]),
        .library(name: "TidingsCore", targets: ["TidingsCore"]),
        .library(name: "TidingsEngine", targets: ["TidingsEngine"]),
        .library(name: "TidingsGateway", targets: ["TidingsGateway"]),
        .library(name: "TidingsDaemon", targets: ["TidingsDaemon"]),
        .library(name: "TidingsDevice", targets: ["TidingsDevice"]),
        .library(name: "TidingsTesting", targets: ["TidingsTesting"]),
        .library(name: "TidingsApplication", targets: ["TidingsApplication"]),
        .library(name: "TidingsDBus", targets: ["TidingsDBus"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-http2", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-crypto", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.6.0"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),

        // The web notification center (TidingsWeb): HTTP and WebSocket on loopback.
        .package(url: "https://github.com/hummingbird-project/hummingbird", exact: "2.28.1", traits: []),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket", exact: "2.8.1"),
    ],
    targets: [
        // Vocabulary with no I/O: APNs wire values, the notification value model, IPC messages.
        .target(
            name: "TidingsCore",
            dependencies: [.product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: swiftSettings
        ),
        // Length-prefixed JSON framing over a Unix domain socket, shared by apps and the daemon.
        .target(
            name: "TidingsIPC",
            dependencies: [
                "TidingsCore",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOExtras", package: "swift-nio-extras"),
            ],
            swiftSettings: swiftSettings
        ),
        // Apple's API, Apple's names: a thin façade over a connection to the engine.
        .target(
            name: "UserNotifications",
            dependencies: ["TidingsCore", "TidingsIPC"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "UserNotificationsUI",
            dependencies: ["UserNotifications", "TidingsCore"],
            swiftSettings: swiftSettings
        ),
        // Store protocols and the in-memory stores; one conformance suite covers every backend.
        .target(
            name: "TidingsStorage",
            dependencies: ["TidingsCore"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TidingsSQLite",
            dependencies: [
                "TidingsCore", "TidingsStorage",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ],
            swiftSettings: swiftSettings
        ),
        // The gateway store in PostgreSQL: several gateway nodes on one database (docs/scaling.md).
        .target(
            name: "TidingsPostgres",
            dependencies: [
                "TidingsCore", "TidingsStorage",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // The device's notification system: scheduler, delivery pipeline, authorization, attachments.
        .target(
            name: "TidingsEngine",
            dependencies: [
                "TidingsCore", "TidingsStorage",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "HeapModule", package: "swift-collections"),
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            swiftSettings: swiftSettings
        ),
        // Client of the gateway's device channel.
        .target(
            name: "TidingsDevice",
            dependencies: [
                "TidingsCore",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOExtras", package: "swift-nio-extras"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TidingsGateway",
            dependencies: [
                "TidingsCore", "TidingsStorage", "TidingsSQLite", "TidingsPostgres",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOExtras", package: "swift-nio-extras"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // A D-Bus client on the wire protocol (no libdbus): desktop notifications (docs/desktop.md).
        .target(
            name: "TidingsDBus",
            dependencies: [.product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio")],
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "TidingsDBusTests", dependencies: ["TidingsDBus", "TidingsTestSupport", "TidingsDaemon", "TidingsTesting", "UserNotifications"], swiftSettings: swiftSettings),
        .target(
            name: "TidingsDaemon",
            dependencies: [
                "TidingsCore", "TidingsIPC", "TidingsEngine", "TidingsStorage", "TidingsSQLite", "TidingsDevice", "TidingsDBus",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // The web notification center the daemon serves on loopback (docs/web-center.md).
        .target(
            name: "TidingsWeb",
            dependencies: [
                "TidingsCore", "TidingsEngine",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            resources: [.copy("Assets")],
            swiftSettings: swiftSettings
        ),
        // UIApplication's remote-notification registration and silent-push callback, for
        // apps on Linux (no UIKit): docs/remote-notifications.md.
        .target(
            name: "TidingsApplication",
            dependencies: ["TidingsCore", "TidingsIPC", "UserNotifications"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TidingsTesting",
            dependencies: [
                "TidingsCore", "TidingsEngine", "TidingsStorage", "TidingsSQLite", "TidingsIPC", "UserNotifications",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "tidings",
            dependencies: [
                "TidingsCore", "TidingsEngine", "TidingsDaemon", "TidingsGateway", "TidingsSQLite", "TidingsIPC", "TidingsPostgres", "TidingsWeb",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // The sample app of the quick start: the seeds' local notifications, end to end.
        .executableTarget(
            name: "SampleApp",
            dependencies: ["UserNotifications", "TidingsApplication"],
            path: "Examples/SampleApp/Sources"
        ),

        // `swift run -c release DaemonBenchmark`: see docs/benchmarks.md.
        .executableTarget(
            name: "DaemonBenchmark",
            dependencies: [
                "TidingsCore", "TidingsDaemon", "TidingsEngine", "TidingsIPC", "TidingsSQLite", "TidingsStorage",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/Daemon"
        ),
        // `swift run -c release RemoteBenchmark [N]`: provider → presented latency and rate (docs/remote-notifications.md).
        .executableTarget(
            name: "RemoteBenchmark",
            dependencies: [
                "TidingsCore", "TidingsDaemon", "TidingsEngine", "TidingsGateway", "TidingsSQLite", "TidingsStorage",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                "TidingsDevice",
            ],
            path: "Benchmarks/Remote"
        ),

        // Notification service extensions (docs/service-extensions.md): the two examples, a
        // test fixture that misbehaves on request, and the warm-extension benchmark.
        .executableTarget(
            name: "ImageServiceExtension",
            dependencies: ["UserNotifications", "ExampleServiceExtensions"],
            path: "Examples/ImageService/Sources",
            // The seeds' download code (URLSession callbacks capturing the content), as written
            // for iOS: Swift 5 language mode, as the seeds' test target.
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
        .executableTarget(
            name: "SecureMessageExtension",
            dependencies: ["UserNotifications", "ExampleServiceExtensions"],
            path: "Examples/SecureMessages/Sources",
            swiftSettings: swiftSettings
        ),
        // The example extension classes (image download, end-to-end decryption), shared by the
        // example extensions and the sample app's combined one. Swift 5 mode: the seeds' code.
        .target(
            name: "ExampleServiceExtensions",
            dependencies: ["UserNotifications", .product(name: "Crypto", package: "swift-crypto")],
            path: "Examples/ServiceExtensions/Sources",
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
        // The sample app's service extension: decrypts and downloads images (Examples/SampleService).
        .executableTarget(
            name: "SampleServiceExtension",
            dependencies: ["UserNotifications", "ExampleServiceExtensions"],
            path: "Examples/SampleService/Sources",
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
        .executableTarget(
            name: "TestServiceExtension",
            dependencies: ["UserNotifications"],
            path: "Tests/Fixtures/TestServiceExtension",
            swiftSettings: swiftSettings
        ),
        // Content extensions (docs/content-extensions.md): the seeds' example and a test
        // fixture that misbehaves on request.
        .executableTarget(
            name: "PresentItemsContentExtension",
            dependencies: ["UserNotificationsUI"],
            path: "Examples/ContentExtension/Sources",
            // The seeds' code as written for iOS: Swift 5 language mode, as the seeds' test target.
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
        // `.build/debug/ContentExtensionBenchmark`: see docs/benchmarks.md, "Content extensions".
        .executableTarget(
            name: "ContentExtensionBenchmark",
            dependencies: ["TidingsCore", "TidingsDaemon", "TidingsEngine", "TidingsTesting", .product(name: "Logging", package: "swift-log")],
            path: "Benchmarks/ContentExtensions",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "TestContentExtension",
            dependencies: ["UserNotificationsUI"],
            path: "Tests/Fixtures/TestContentExtension",
            swiftSettings: swiftSettings
        ),
        // `swift run -c release ExtensionBenchmark`: see docs/benchmarks.md.
        .executableTarget(
            name: "ExtensionBenchmark",
            dependencies: ["TidingsCore", "TidingsDaemon", "TidingsEngine", .product(name: "Logging", package: "swift-log")],
            path: "Benchmarks/Extensions",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TidingsExtensionTests",
            dependencies: ["TidingsTestSupport", 
                "TidingsCore", "TidingsDaemon", "TidingsEngine", "TidingsTesting",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),

        // What the process-level tests share: the built products, child processes, the CLI.
        .target(
            name: "TidingsTestSupport",
            dependencies: ["TidingsTesting"],
            path: "Tests/TidingsTestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "TidingsCoreTests", dependencies: ["TidingsCore", "TidingsTesting"], swiftSettings: swiftSettings),
        .testTarget(
            name: "UserNotificationsTests",
            dependencies: ["UserNotifications", "UserNotificationsUI", "TidingsTesting", "TidingsEngine"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SeedExamplesTests",
            dependencies: ["UserNotifications", "UserNotificationsUI", "TidingsTesting", "TidingsApplication",
                           .product(name: "Crypto", package: "swift-crypto")],
            // The seeds' examples are Swift 3-era code (URLSession callbacks capturing
            // non-Sendable closures); they compile in Swift 5 mode, as such code does. With
            // them: the delegate patterns of iOS code and an inventory of Apple's API.
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
        // UIApplication's pre-iOS 10 notification API (UILocalNotification…) on the engine.
        .testTarget(
            name: "LegacyNotificationTests",
            dependencies: ["TidingsApplication", "UserNotifications", "TidingsTesting", "TidingsCore", "TidingsEngine"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TidingsStorageTests",
            dependencies: ["TidingsStorage", "TidingsSQLite", "TidingsTesting", "TidingsPostgres", "TidingsTestSupport",
                           .product(name: "GRDB", package: "GRDB.swift")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TidingsEngineTests",
            dependencies: ["TidingsEngine", "TidingsTesting"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TidingsGatewayTests",
            dependencies: ["TidingsTestSupport", "TidingsGateway", "TidingsDevice", "TidingsTesting",
                           .product(name: "NIOEmbedded", package: "swift-nio"),
                           .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                           .product(name: "NIOHPACK", package: "swift-nio-http2")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TidingsDaemonTests",
            dependencies: ["TidingsTestSupport", "TidingsDaemon", "TidingsTesting", "UserNotifications"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TidingsWebTests",
            dependencies: ["TidingsTestSupport", "TidingsWeb", "TidingsEngine", "TidingsTesting",
                           .product(name: "HummingbirdTesting", package: "hummingbird")],
            swiftSettings: swiftSettings
        ),
        // A test app for the browser tests (Tests/Browser): posts what the page must show.
        .executableTarget(
            name: "WebCenterTestApp",
            dependencies: ["UserNotifications"],
            path: "Tests/Fixtures/WebCenterTestApp",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TidingsRemoteTests",
            dependencies: ["TidingsTestSupport", "TidingsDaemon", "TidingsGateway", "TidingsDevice", "TidingsTesting", "TidingsApplication", "UserNotifications", "TidingsIPC",
                           .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: swiftSettings
        ),
    ]
)
