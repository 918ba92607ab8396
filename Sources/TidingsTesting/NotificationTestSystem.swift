import Foundation
import Logging
import Synchronization
import TidingsCore
import TidingsEngine
import TidingsSQLite
import TidingsStorage
@_spi(Tidings) import UserNotifications

/// A whole device notification system in one process, on a test clock: an engine with a
/// store (in memory or SQLite in a temporary directory), a recording presenter, a consent
/// policy, and apps whose `UNUserNotificationCenter`s talk to it in-process.
///
///     let system = try await NotificationTestSystem.start()
///     defer { Task { await system.shutdown() } }
///     let center = try await system.center(for: "com.example.app")
///     try await center.add(request)
///     await system.advance(by: 60)
///     #expect(system.presenter.presentedIdentifiers == ["id"])
public final class NotificationTestSystem: Sendable {
    public enum Storage: Sendable {
        case memory
        case sqlite
    }

    public let clock: TestWallClock
    public let engine: NotificationEngine
    public let presenter: RecordingPresenter
    public let launcher: RecordingLauncher
    public let directory: URL
    private let runner: Mutex<Task<Void, Never>?>

    private init(clock: TestWallClock, engine: NotificationEngine, presenter: RecordingPresenter, launcher: RecordingLauncher, directory: URL) {
        self.clock = clock
        self.engine = engine
        self.presenter = presenter
        self.launcher = launcher
        self.directory = directory
        self.runner = Mutex(nil)
    }

    /// Starts an engine and its scheduler.
    public static func start(
        storage: Storage = .memory,
        consent: any ConsentProvider = FixedConsent.autoGrant,
        pendingLimit: Int? = nil,
        deliveredLimit: Int? = EngineConfiguration.defaultDeliveredLimit,
        timeZone: TimeZone = TimeZone(identifier: "UTC")!,
        clock: TestWallClock = TestWallClock(),
        directory: URL? = nil,
        serviceExtensions: (any ServiceExtensionRunning)? = nil,
        presenters: [any Presenter] = [],
        wrapStore: @Sendable (any DeviceStore) -> any DeviceStore = { $0 }
    ) async throws -> NotificationTestSystem {
        let directory = directory ?? TemporaryDirectories.make(prefix: "tidings-test-")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let base: any DeviceStore = switch storage {
        case .memory: InMemoryDeviceStore()
        case .sqlite: try SQLiteDeviceStore(path: directory.appendingPathComponent("device.sqlite").path)
        }
        let store = wrapStore(base)
        let presenter = RecordingPresenter()
        let launcher = RecordingLauncher()
        var logger = Logger(label: "tidings.test")
        logger.logLevel = .warning
        let configuration = EngineConfiguration(
            clock: clock, store: store,
            attachments: AttachmentStore(root: directory.appendingPathComponent("attachments")),
            consent: consent, presenters: [presenter] + presenters, launcher: launcher,
            pendingLimit: pendingLimit, deliveredLimit: deliveredLimit, timeZone: timeZone, serviceExtensions: serviceExtensions, logger: logger)
        let engine = NotificationEngine(configuration: configuration)
        let system = NotificationTestSystem(clock: clock, engine: engine, presenter: presenter, launcher: launcher, directory: directory)
        try await engine.recover()
        system.runner.withLock { $0 = Task { try? await engine.run() } }
        return system
    }

    /// Stops the scheduler and deletes the temporary directory.
    public func shutdown(removeFiles: Bool = true) async {
        let task = runner.withLock { $0 }
        task?.cancel()
        await task?.value
        if removeFiles { try? FileManager.default.removeItem(at: directory) }
    }

    /// Installs an app (a manifest record with a directory of its own).
    @discardableResult
    public func install(_ bundleIdentifier: String, displayName: String? = nil) async throws -> AppRecord {
        let appDirectory = directory.appendingPathComponent("apps/\(bundleIdentifier)")
        try FileManager.default.createDirectory(at: appDirectory, withIntermediateDirectories: true)
        let record = AppRecord(bundleIdentifier: bundleIdentifier, displayName: displayName ?? bundleIdentifier,
                               executable: "/usr/bin/true", directory: appDirectory.path, installedAt: clock.now)
        try await engine.install(record)
        return record
    }

    /// A running app process's center (installs the app first if needed).
    public func center(for bundleIdentifier: String, state: AppState = .active) async throws -> UNUserNotificationCenter {
        let transport = try await connect(bundleIdentifier, state: state)
        return UNUserNotificationCenter(transport: transport)
    }

    /// A raw connection for an app, for tests below the `UN…` API.
    public func connect(_ bundleIdentifier: String, state: AppState = .active) async throws -> InProcessTransport {
        let installed = try await engine.app(bundleIdentifier)
        let app = if let installed { installed } else { try await install(bundleIdentifier) }
        return await InProcessTransport.connect(engine: engine, app: app, state: state)
    }

    /// Advances the clock and waits until everything that became due was delivered.
    public func advance(by seconds: TimeInterval) async {
        clock.advance(by: seconds)
        await engine.settled(through: clock.now)
    }

    /// Waits until the engine has delivered everything due now.
    public func settle() async {
        await engine.settled(through: clock.now)
    }
}

/// Records the apps the engine asked to launch.
public final class RecordingLauncher: AppLauncher {
    private let log = Mutex<[(String, AppState, LaunchReason)]>([])
    public init() {}

    public var launches: [(bundleIdentifier: String, state: AppState, reason: LaunchReason)] { log.withLock { $0.map { ($0.0, $0.1, $0.2) } } }

    public func launch(_ app: AppRecord, state: AppState, reason: LaunchReason) async throws {
        try await launch(app, state: state, reason: reason, activationToken: nil)
    }

    public func launch(_ app: AppRecord, state: AppState, reason: LaunchReason, activationToken: String?) async throws {
        log.withLock { $0.append((app.bundleIdentifier, state, reason)) }
        tokens.withLock { $0.append(activationToken) }
    }

    /// The activation token of each launch, in order (nil: none).
    public var activationTokens: [String?] { tokens.withLock { $0 } }
    private let tokens = Mutex<[String?]>([])
}

/// Waits for a condition that asynchronous work will make true; fails after a generous
/// real-time guard so a broken test cannot hang. Nothing is timed by it.
public func eventually(within seconds: Double = 20, _ condition: @Sendable () async -> Bool) async -> Bool {
    for _ in 0..<Int(seconds * 200) {
        if await condition() { return true }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return await condition()
}
