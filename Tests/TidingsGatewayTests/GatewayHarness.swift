import Crypto
import Foundation
import Logging
import NIOCore
import ServiceLifecycle
import Testing
import TidingsTestSupport
import TidingsCore
import TidingsDevice
import TidingsGateway
import TidingsStorage
import TidingsTesting

/// A gateway on 127.0.0.1 port 0 with a team, a key and an app registered, stopped by the test.
final class GatewayHarness: Sendable {
    static let teamID = "TEAM123456"
    static let keyID = "KEY1234567"
    static let bundleID = "com.example.app"

    let directory: URL
    let gateway: Gateway
    let addresses: GatewayAddresses
    let clock: TestWallClock
    let teamKey: P256.Signing.PrivateKey
    private let group: ServiceGroup
    private let task: Task<Void, any Error>

    enum StoreKind { case memory, sqlite, postgres(url: String) }

    static func start(store: StoreKind = .memory, directory: URL? = nil, clock: TestWallClock = TestWallClock(now: Date()),
                      teamKey: P256.Signing.PrivateKey = P256.Signing.PrivateKey(), registerKey: Bool = true,
                      configure: (inout GatewayConfiguration) -> Void = { _ in }) async throws -> GatewayHarness {
        let dir = directory ?? TemporaryDirectories.make(prefix: "tidings-gw-")
        var configuration = GatewayConfiguration(dataDirectory: dir)
        configuration.providerPort = 0
        configuration.devicePort = 0
        configuration.adminPort = 0
        configuration.eventLoopThreads = 1
        configuration.clock = clock
        configuration.drainTimeout = .seconds(5)
        var logger = Logger(label: "test.gateway")
        logger.logLevel = ProcessInfo.processInfo.environment["TIDINGS_TEST_LOG"] != nil ? .trace : .critical
        configuration.logger = logger
        switch store {
        case .memory: configuration.storage = .custom(InMemoryGatewayStore())
        case .sqlite: configuration.storage = .sqlite
        case .postgres(let url): configuration.storage = .postgres(url: url)
        }
        configure(&configuration)
        let gateway = try buildGateway(configuration)
        if registerKey {
            let now = EpochMilliseconds(clock.now.timeIntervalSince1970 * 1000)
            if (try? gateway.store.key(id: keyID)) == nil {
                try gateway.store.addKey(ProviderKeyRecord(keyID: keyID, teamID: teamID, publicKey: teamKey.publicKey.x963Representation,
                                                           environment: nil, createdAt: now))
            }
            try gateway.store.registerApp(GatewayAppRecord(bundleID: bundleID, teamID: teamID, storagePolicy: .all, createdAt: now))
        }
        let group = ServiceGroup(configuration: .init(services: [gateway], logger: logger))
        let task = Task { try await group.run() }
        let addresses = try await gateway.waitUntilReady()
        return GatewayHarness(directory: dir, gateway: gateway, addresses: addresses, clock: clock, teamKey: teamKey, group: group, task: task)
    }

    private init(directory: URL, gateway: Gateway, addresses: GatewayAddresses, clock: TestWallClock,
                 teamKey: P256.Signing.PrivateKey, group: ServiceGroup, task: Task<Void, any Error>) {
        self.directory = directory
        self.gateway = gateway
        self.addresses = addresses
        self.clock = clock
        self.teamKey = teamKey
        self.group = group
        self.task = task
    }

    /// Graceful shutdown, waited for.
    func stop() async {
        await group.triggerGracefulShutdown()
        _ = try? await task.value
    }

    var providerPort: Int { addresses.provider.port! }
    var devicePort: Int { addresses.device.port! }
    var certificatePath: String { addresses.certificatePath! }

    var nowSeconds: Int64 { Int64(clock.now.timeIntervalSince1970) }

    func bearer(issuedAt: Int64? = nil, keyID: String = GatewayHarness.keyID, teamID: String = GatewayHarness.teamID,
                key: P256.Signing.PrivateKey? = nil, der: Bool = false) throws -> String {
        "bearer " + (try ProviderToken.sign(keyID: keyID, teamID: teamID, issuedAt: issuedAt ?? nowSeconds, key: key ?? teamKey, derSignature: der))
    }

    func connect(tls: Bool = true) async throws -> APNsConnection {
        var configuration = APNsClientConfiguration(host: "127.0.0.1", port: providerPort, useTLS: tls, trustRootPaths: [certificatePath])
        configuration.authority = "127.0.0.1"
        return try await APNsConnection.connect(configuration)
    }

    func device(key: P256.Signing.PrivateKey = P256.Signing.PrivateKey()) async throws -> DeviceConnection {
        try await DeviceConnection.connect(DeviceClientConfiguration(host: "127.0.0.1", port: devicePort, deviceKey: key,
                                                                     trustRootPaths: [certificatePath]))
    }

    /// A device with a token for the harness's app (`all`) and one for `com.example.latest`
    /// (registered here with `apns`), then offline: storage-policy tests.
    func offlineDeviceWithBothPolicies() async throws -> (key: P256.Signing.PrivateKey, allToken: String, latestToken: String) {
        let now = EpochMilliseconds(clock.now.timeIntervalSince1970 * 1000)
        try await gateway.register(app: GatewayAppRecord(bundleID: "com.example.latest", teamID: GatewayHarness.teamID,
                                                         storagePolicy: .apns, createdAt: now))
        let key = P256.Signing.PrivateKey()
        let device = try await device(key: key)
        let allToken = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development).hex
        let latestToken = try await device.requestToken(topic: "com.example.latest", environment: .development).hex
        await device.close()
        return (key, allToken, latestToken)
    }

    func request(token: String, topic: String? = GatewayHarness.bundleID, pushType: String? = "alert",
                 authorization: String?, extra: [(String, String)] = [], body: String = #"{"aps":{"alert":"Hello"}}"#) -> APNsRequest {
        var headers: [(name: String, value: String)] = []
        if let authorization { headers.append((name: "authorization", value: authorization)) }
        if let topic { headers.append((name: "apns-topic", value: topic)) }
        if let pushType { headers.append((name: "apns-push-type", value: pushType)) }
        for (n, v) in extra { headers.append((name: n, value: v)) }
        return APNsRequest(deviceToken: token, headers: headers, body: Array(body.utf8))
    }
}

/// Collects the pushes a device connection receives, optionally acknowledging each.
actor PushCollector {
    private(set) var pushes: [DevicePush] = []
    private(set) var finished = false
    private var waiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    private var task: Task<Void, Never>?
    private let connection: DeviceConnection
    private var acknowledging: Bool

    private init(_ connection: DeviceConnection, acknowledging: Bool) {
        self.connection = connection
        self.acknowledging = acknowledging
    }

    /// Starts reading `connection.pushes`, acknowledging each push as it arrives unless
    /// `acknowledge` is false (then until `startAcknowledging()`).
    static func start(_ connection: DeviceConnection, acknowledge: Bool = true) async -> PushCollector {
        let collector = PushCollector(connection, acknowledging: acknowledge)
        await collector.run()
        return collector
    }

    private func run() {
        task = Task {
            do {
                for try await push in connection.pushes { self.append(push) }
            } catch {}
            self.finish()
        }
    }

    /// Acknowledges the pushes received so far and every later one.
    func startAcknowledging() {
        guard !acknowledging else { return }
        acknowledging = true
        for p in pushes { connection.acknowledge(p) }
    }

    private func append(_ push: DevicePush) {
        pushes.append(push)
        if acknowledging { connection.acknowledge(push) }
        resumeReady()
    }

    private func finish() {
        finished = true
        for w in waiters { w.continuation.resume() }
        waiters.removeAll()
    }

    private func resumeReady() {
        let ready = waiters.filter { $0.count <= pushes.count }
        waiters.removeAll { $0.count <= pushes.count }
        for w in ready { w.continuation.resume() }
    }

    private func timeOut() {
        for w in waiters { w.continuation.resume() }
        waiters.removeAll()
    }

    /// Waits until `count` pushes arrived (or the connection ended, or `timeout` of real
    /// time passed: the network, not a clock under test); returns what arrived.
    func wait(for count: Int, timeout: Duration = .seconds(10)) async -> [DevicePush] {
        if pushes.count >= count || finished { return pushes }
        let timer = Task { [weak self] in
            try? await Task.sleep(for: timeout)
            await self?.timeOut()
        }
        await withCheckedContinuation { continuation in waiters.append((count, continuation)) }
        timer.cancel()
        return pushes
    }
}
