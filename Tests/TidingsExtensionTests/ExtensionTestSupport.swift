import Foundation
import Logging
import TidingsCore
import TidingsDaemon
import TidingsEngine
import TidingsTesting
import TidingsTestSupport

/// The extension executables these tests run.
enum Built {
    static var fixture: String { BuiltProducts.path("TestServiceExtension") }
    static var imageService: String { BuiltProducts.path("ImageServiceExtension") }
    static var secureMessages: String { BuiltProducts.path("SecureMessageExtension") }
}

/// A runner on a test clock, with an app directory and an attachment store in a fresh
/// temporary directory.
struct ExtensionHarness {
    let directory: URL
    let clock = TestWallClock()
    let attachments: AttachmentStore
    let runner: ServiceExtensionRunner
    let app: AppRecord
    let record: AppExtensionRecord

    init(executable: String = Built.fixture, deadline: TimeInterval = ServiceExtensionConfiguration.defaultDeadline,
         grace: TimeInterval = ServiceExtensionConfiguration.defaultGrace,
         memoryLimit: Int? = ServiceExtensionConfiguration.defaultMemoryLimit, reuse: Bool = true, behindSymlink: Bool = false,
         protectDataDirectory: Bool = false) throws {
        directory = URL(fileURLWithPath: "/tmp/tex-\(UUID().uuidString.prefix(8).lowercased())")
        if behindSymlink {
            // Everything is reached through a symbolic link to the real directory.
            let real = directory.path + "-real"
            try FileManager.default.createDirectory(atPath: real, withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(atPath: directory.path, withDestinationPath: real)
        }
        let appDirectory = directory.appendingPathComponent("app")
        try FileManager.default.createDirectory(at: appDirectory, withIntermediateDirectories: true)
        // As the daemon builds it (`protectDataDirectory`): nothing from the data directory,
        // the extensions' containers included, but what the runner allows per call.
        attachments = AttachmentStore(root: directory.appendingPathComponent("data/attachments"),
                                      protectedDirectories: protectDataDirectory ? [directory.appendingPathComponent("data").path] : [])
        record = AppExtensionRecord(bundleIdentifier: "com.example.tests.service", point: .service, executable: executable)
        app = AppRecord(bundleIdentifier: "com.example.tests", displayName: "Tests", executable: "/bin/true",
                        directory: appDirectory.path, extensions: [record], installedAt: Date(timeIntervalSince1970: 0))
        var logger = Logger(label: "tidings.extensions.tests")
        logger.logLevel = .warning
        runner = ServiceExtensionRunner(
            configuration: ServiceExtensionConfiguration(
                containerRoot: directory.appendingPathComponent("data/extensions").path,
                deadline: deadline, grace: grace, memoryLimit: memoryLimit, reuseProcesses: reuse,
                // Loopback only: never through a proxy from the environment.
                environment: ["no_proxy": "127.0.0.1,localhost", "NO_PROXY": "127.0.0.1,localhost", "http_proxy": "", "HTTP_PROXY": ""]),
            clock: clock, attachments: attachments, logger: logger)
    }

    var appDirectory: String { app.directory }
    var container: String { directory.appendingPathComponent("data/extensions/\(record.bundleIdentifier)").path }

    /// A push as the remote pipeline hands it over: an alert, `mutable-content`, the
    /// whole payload in `userInfo`.
    func request(_ mode: String, _ extra: [String: PropertyListValue] = [:], identifier: String = UUID().uuidString) -> NotificationRequestValue {
        var content = NotificationContentValue()
        content.title = "Hello"
        content.body = "original body"
        var userInfo: [String: PropertyListValue] = [
            "aps": .dictionary(["alert": .dictionary(["title": .string("Hello"), "body": .string("original body")]),
                                "mutable-content": .integer(1)]),
            "fixture": .string(mode),
        ]
        for (key, value) in extra { userInfo[key] = value }
        content.userInfo = userInfo
        return NotificationRequestValue(identifier: identifier, content: content, trigger: .push)
    }

    func modify(_ request: NotificationRequestValue) async -> ServiceExtensionOutcome {
        await runner.modify(request, app: app, extension: record)
    }

    /// Starts a request that will wait for the clock, and returns once the runner sleeps on
    /// its deadline.
    func start(_ request: NotificationRequestValue) async -> Task<ServiceExtensionOutcome, Never> {
        let task = Task { await modify(request) }
        _ = await eventually { clock.sleeperCount == 1 }
        return task
    }

    func close() async {
        await runner.shutdown()
        try? FileManager.default.removeItem(at: directory)
        try? FileManager.default.removeItem(atPath: directory.path + "-real")
    }
}

/// Whether a process with this PID still exists (and is not a zombie waiting to be reaped).
func processExists(_ pid: Int32) -> Bool {
    guard kill(pid, 0) == 0 else { return false }
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return false }
    return !status.contains("State:\tZ")
}
