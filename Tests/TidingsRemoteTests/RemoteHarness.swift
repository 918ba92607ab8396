import Crypto
import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import Testing
@_spi(Tidings) import TidingsApplication
import TidingsCore
import TidingsDaemon
import TidingsDevice
import TidingsEngine
import TidingsGateway
import TidingsStorage
import TidingsTestSupport
import TidingsTesting
@_spi(Tidings) import UserNotifications

/// One process with everything: a gateway on 127.0.0.1 (port 0), the device's engine on
/// SQLite with its gateway link (the daemon's `GatewayLink`), all on one test clock; apps
/// connect in-process through `UNUserNotificationCenter` and `UIApplication`.
final class RemoteHarness: Sendable {
    static let teamID = "TEAM123456"
    static let keyID = "KEY1234567"
    static let bundleID = "com.example.remote"

    let clock: TestWallClock
    let system: NotificationTestSystem
    let gateway: Gateway
    let addresses: GatewayAddresses
    let teamKey = P256.Signing.PrivateKey()
    let remoteConfiguration: RemoteConfiguration
    private let gatewayGroup: ServiceGroup
    private let gatewayTask: Task<Void, any Error>
    private let link = Mutex<(GatewayLink, Task<Void, Never>)?>(nil)

    private init(clock: TestWallClock, system: NotificationTestSystem, gateway: Gateway, addresses: GatewayAddresses,
                 remoteConfiguration: RemoteConfiguration, gatewayGroup: ServiceGroup, gatewayTask: Task<Void, any Error>) {
        self.clock = clock
        self.system = system
        self.gateway = gateway
        self.addresses = addresses
        self.remoteConfiguration = remoteConfiguration
        self.gatewayGroup = gatewayGroup
        self.gatewayTask = gatewayTask
    }

    static func start(storagePolicy: StoragePolicy = .all, backgroundBudget: Int = 3, connect: Bool = true,
                      serviceExtensions: (any ServiceExtensionRunning)? = nil,
                      deliveredLimit: Int? = EngineConfiguration.defaultDeliveredLimit,
                      gateway configureGateway: @Sendable (inout GatewayConfiguration) -> Void = { _ in },
                      wrapStore: @Sendable (any DeviceStore) -> any DeviceStore = { $0 }) async throws -> RemoteHarness {
        let clock = TestWallClock(now: Date())
        let system = try await NotificationTestSystem.start(storage: .sqlite, deliveredLimit: deliveredLimit, clock: clock,
                                                            serviceExtensions: serviceExtensions, wrapStore: wrapStore)
        var configuration = GatewayConfiguration.forTests(dataDirectory: system.directory.appendingPathComponent("gateway"), clock: clock)
        configuration.storage = .custom(InMemoryGatewayStore())
        configureGateway(&configuration)
        let gateway = try buildGateway(configuration)
        let group = ServiceGroup(configuration: .init(services: [gateway], logger: configuration.logger))
        let task = Task { try await group.run() }
        let addresses = try await gateway.waitUntilReady()
        var remote = RemoteConfiguration()
        remote.backgroundBudget = backgroundBudget
        remote.languages = ["en"]
        let harness = RemoteHarness(clock: clock, system: system, gateway: gateway, addresses: addresses, remoteConfiguration: remote,
                                    gatewayGroup: group, gatewayTask: task)
        let now = EpochMilliseconds(clock.now.timeIntervalSince1970 * 1000)
        try gateway.store.addKey(ProviderKeyRecord(keyID: keyID, teamID: teamID, publicKey: harness.teamKey.publicKey.x963Representation,
                                                   environment: nil, createdAt: now))
        try await gateway.register(app: GatewayAppRecord(bundleID: bundleID, teamID: teamID, storagePolicy: storagePolicy, createdAt: now))
        if connect { _ = try await harness.startLink() }
        return harness
    }

    /// A harness whose gateway stores in a `GatedGatewayStore` that lets token writes through:
    /// the test holds the gateway's event writes (`holdEvents`) or makes them fail. The test
    /// releases them before stopping the harness.
    static func startWithEventGate() async throws -> (RemoteHarness, GatedGatewayStore) {
        let store = GatedGatewayStore(holdingTokenWrites: false)
        return (try await start(gateway: { $0.storage = .custom(store) }), store)
    }

    /// Starts the daemon's gateway link (again) on the same data directory; waits until it is connected.
    @discardableResult
    func startLink(inbox: (any RemoteInboxStore)? = nil, maximumHandOff: Int? = nil,
                   configure: @Sendable (inout GatewayLinkConfiguration) -> Void = { _ in }) async throws -> GatewayLink {
        var configuration = GatewayLinkConfiguration(host: "127.0.0.1", port: addresses.device.port!, trustRootPaths: [addresses.certificatePath!])
        if let maximumHandOff { configuration.maximumHandOff = maximumHandOff }
        configure(&configuration)
        configuration.initialBackoff = .milliseconds(20)
        configuration.maximumBackoff = .milliseconds(200)
        var logger = Logger(label: "test.remote")
        logger.logLevel = ProcessInfo.processInfo.environment["TIDINGS_TEST_LOG"] != nil ? .trace : .critical
        let link = try GatewayLink(configuration: configuration, dataDirectory: system.directory.path, engine: system.engine, inbox: inbox,
                               clock: clock, logger: logger)
        await system.engine.setRemote(link: link, configuration: remoteConfiguration)
        let task = Task { await link.run() }
        self.link.withLock { $0 = (link, task) }
        let connected = await eventually { await link.isConnected }
        #expect(connected, "the gateway link connected")
        return link
    }

    /// Stops the link as a daemon that goes away would.
    func stopLink() async {
        guard let entry = link.withLock({ $0 }) else { return }
        entry.1.cancel()
        await entry.1.value
        link.withLock { $0 = nil }
    }

    var currentLink: GatewayLink? { link.withLock { $0?.0 } }

    func stop() async {
        await stopLink()
        await gatewayGroup.triggerGracefulShutdown()
        _ = try? await gatewayTask.value
        await system.shutdown()
    }

    /// Installs the app with its manifest's localized strings and extensions.
    func install(_ bundle: String = RemoteHarness.bundleID, localizedStrings: [String: [String: String]] = [:],
                 extensions: [AppExtensionRecord] = []) async throws -> AppRecord {
        let dir = system.directory.appendingPathComponent("apps/\(bundle)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let record = AppRecord(bundleIdentifier: bundle, displayName: "Remote", executable: "/usr/bin/true", directory: dir.path,
                               extensions: extensions, localizedStrings: localizedStrings, installedAt: clock.now)
        try await system.engine.install(record)
        return record
    }

    /// A running app process: its notification center (authorized, with a delegate) and its `UIApplication`.
    @MainActor
    func launchApp(_ bundle: String = RemoteHarness.bundleID, state: AppState = .background,
                   notificationDelegate: RecordingNotificationDelegate, appDelegate: RecordingAppDelegate?) async throws -> RunningApp {
        let centerTransport = try await system.connect(bundle, state: state)
        let center = UNUserNotificationCenter(transport: centerTransport)
        center.delegate = notificationDelegate
        _ = try await center.requestAuthorization(options: [.alert, .sound, .badge])
        let appTransport = try await system.connect(bundle, state: state)
        let application = UIApplication(transport: appTransport)
        if let appDelegate {
            application.delegate = appDelegate
            // A round trip: the daemon has seen the delegate (requests are handled in order).
            _ = try await appTransport.call(.getSettings)
        }
        return RunningApp(center: center, application: application, transports: [centerTransport, appTransport])
    }

    /// The app installed and launched with its device token, then the device offline (its link
    /// stopped): what a test of stored pushes starts from.
    @MainActor
    func offlineApp() async throws -> (app: RunningApp, token: Data) {
        _ = try await install()
        let app = try await launchApp(notificationDelegate: RecordingNotificationDelegate(), appDelegate: nil)
        let token = try await app.application.deviceTokenForRemoteNotifications()
        await stopLink()
        return (app, token)
    }

    /// `offlineApp()` with an alert push stored at the gateway for each of `apnsIDs`, in order
    /// (each accepted), for the link started after it to receive as a backlog.
    func offlineApp(storing apnsIDs: [String]) async throws -> (app: RunningApp, token: Data) {
        let (app, token) = try await offlineApp()
        for id in apnsIDs { #expect(try await push(token: token, body: #"{"aps":{"alert":"hi"}}"#, apnsID: id).status == 200) }
        return (app, token)
    }

    /// The person allows the app's notifications (as its first launch would ask).
    func authorize(_ bundle: String = RemoteHarness.bundleID) async throws {
        let transport = try await system.connect(bundle)
        let center = UNUserNotificationCenter(transport: transport)
        _ = try await center.requestAuthorization(options: [.alert, .sound, .badge])
        await transport.disconnect()
    }

    func bearer() throws -> String {
        "bearer " + (try ProviderToken.sign(keyID: Self.keyID, teamID: Self.teamID, issuedAt: Int64(clock.now.timeIntervalSince1970), key: teamKey))
    }

    /// Sends one push through the provider API, as a provider would.
    func push(token: Data, body: String, apnsID: String = UUID().uuidString.lowercased(), topic: String = RemoteHarness.bundleID,
              pushType: String = "alert", priority: Int? = nil, headers extra: [(String, String)] = []) async throws -> APNsResponse {
        var configuration = APNsClientConfiguration(host: "127.0.0.1", port: addresses.provider.port!, trustRootPaths: [addresses.certificatePath!])
        configuration.authority = "127.0.0.1"
        let connection = try await APNsConnection.connect(configuration)
        defer { Task { await connection.close() } }
        var headers: [(name: String, value: String)] = [("authorization", try bearer()), ("apns-topic", topic), ("apns-push-type", pushType), ("apns-id", apnsID)]
        if let priority { headers.append(("apns-priority", String(priority))) }
        for (n, v) in extra { headers.append((n, v)) }
        return try await connection.send(APNsRequest(deviceToken: token.map { String(format: "%02x", $0) }.joined(), headers: headers, body: Array(body.utf8)))
    }

    /// The gateway's record of a push (accepted → … → presented → answered).
    func status(_ apnsID: String) async throws -> [PushStatus] { try await gateway.status(apnsID: apnsID) }

    /// `count` apns-ids `base + 1 …`, as UUIDs whose order is the numbers' (tests that check order).
    static func apnsIDs(_ base: Int, _ count: Int) -> [String] {
        (1...count).map { String(format: "00000000-0000-4000-8000-%012d", base + $0) }
    }
}

extension GatewayConfiguration {
    /// A gateway for tests: loopback ports chosen by the system (or `devicePort`), no admin
    /// listener, one event loop, the test clock, quiet logs.
    static func forTests(dataDirectory: URL, devicePort: Int = 0, clock: TestWallClock) -> GatewayConfiguration {
        var configuration = GatewayConfiguration(dataDirectory: dataDirectory)
        configuration.providerPort = 0
        configuration.devicePort = devicePort
        configuration.adminHost = nil
        configuration.eventLoopThreads = 1
        configuration.clock = clock
        configuration.drainTimeout = .seconds(5)
        var logger = Logger(label: "test.gateway")
        logger.logLevel = .critical
        configuration.logger = logger
        return configuration
    }
}

/// An app process in the test: its center, its application object, its connections.
struct RunningApp {
    let center: UNUserNotificationCenter
    let application: UIApplication
    let transports: [InProcessTransport]

    /// The process exits.
    func exit() async {
        for transport in transports { await transport.disconnect() }
    }
}

/// `UNUserNotificationCenterDelegate` that records what reaches it.
@MainActor
final class RecordingNotificationDelegate: NSObject, @MainActor UNUserNotificationCenterDelegate {
    var presented: [UNNotification] = []
    var responses: [UNNotificationResponse] = []

    func userNotificationCenter(_ center: UNUserNotificationCenter, willPresent notification: UNNotification,
                                withCompletionHandler completionHandler: @escaping @Sendable (UNNotificationPresentationOptions) -> Void) {
        presented.append(notification)
        completionHandler([.banner, .list, .sound, .badge])
    }

    func userNotificationCenter(_ center: UNUserNotificationCenter, didReceive response: UNNotificationResponse,
                                withCompletionHandler completionHandler: @escaping @Sendable () -> Void) {
        responses.append(response)
        completionHandler()
    }
}

/// `UIApplicationDelegate` that records tokens, failures and silent pushes.
@MainActor
final class RecordingAppDelegate: UIApplicationDelegate {
    var tokens: [Data] = []
    var failures: [String] = []
    var silentPushes: [[AnyHashable: Any]] = []
    var result: UIBackgroundFetchResult = .newData

    func application(_ application: UIApplication, didRegisterForRemoteNotificationsWithDeviceToken deviceToken: Data) {
        tokens.append(deviceToken)
    }

    func application(_ application: UIApplication, didFailToRegisterForRemoteNotificationsWithError error: any Error) {
        failures.append("\(error)")
    }

    func application(_ application: UIApplication, didReceiveRemoteNotification userInfo: [AnyHashable: Any],
                     fetchCompletionHandler completionHandler: @escaping @Sendable (UIBackgroundFetchResult) -> Void) {
        silentPushes.append(userInfo)
        completionHandler(result)
    }
}
