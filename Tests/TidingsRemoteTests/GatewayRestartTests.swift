import Crypto
import Foundation
import Logging
import ServiceLifecycle
import Testing
import TidingsCore
import TidingsDaemon
import TidingsEngine
import TidingsGateway
import TidingsStorage
import TidingsTestSupport
import TidingsTesting

/// The daemon's link survives its gateway going away: it reconnects (with backoff) when the
/// gateway comes back on the same address, and gets what was pushed meanwhile.
@Suite("Remote gateway restart", .serialized)
struct GatewayRestartTests {
    struct RunningGateway {
        let gateway: Gateway
        let group: ServiceGroup
        let task: Task<Void, any Error>
        let addresses: GatewayAddresses

        static func start(directory: URL, devicePort: Int, clock: TestWallClock) async throws -> RunningGateway {
            let configuration = GatewayConfiguration.forTests(dataDirectory: directory, devicePort: devicePort, clock: clock)
            let gateway = try buildGateway(configuration)
            let group = ServiceGroup(configuration: .init(services: [gateway], logger: configuration.logger))
            let task = Task { try await group.run() }
            return RunningGateway(gateway: gateway, group: group, task: task, addresses: try await gateway.waitUntilReady())
        }

        func stop() async {
            await group.triggerGracefulShutdown()
            _ = try? await task.value
        }

        func push(token: [UInt8], body: String, key: P256.Signing.PrivateKey, clock: TestWallClock) async throws -> Int {
            var configuration = APNsClientConfiguration(host: "127.0.0.1", port: addresses.provider.port!, trustRootPaths: [addresses.certificatePath!])
            configuration.authority = "127.0.0.1"
            let connection = try await APNsConnection.connect(configuration)
            defer { Task { await connection.close() } }
            let bearer = "bearer " + (try ProviderToken.sign(keyID: "KEY1234567", teamID: "TEAM123456", issuedAt: Int64(clock.now.timeIntervalSince1970), key: key))
            let response = try await connection.send(APNsRequest(deviceToken: DeviceToken(bytes: token).hex,
                                                                 headers: [("authorization", bearer), ("apns-topic", "com.example.restart")],
                                                                 body: Array(body.utf8)))
            return response.status
        }
    }

    @Test func linkResumesAfterTheGatewayRestarts() async throws {
        let clock = TestWallClock(now: Date())
        let system = try await NotificationTestSystem.start(storage: .sqlite, clock: clock)
        defer { Task { await system.shutdown() } }
        let gatewayDir = system.directory.appendingPathComponent("gateway")
        let teamKey = P256.Signing.PrivateKey()
        var gateway = try await RunningGateway.start(directory: gatewayDir, devicePort: RestartPorts.take(), clock: clock)
        let devicePort = gateway.addresses.device.port!
        let now = EpochMilliseconds(clock.now.timeIntervalSince1970 * 1000)
        try gateway.gateway.store.addKey(ProviderKeyRecord(keyID: "KEY1234567", teamID: "TEAM123456", publicKey: teamKey.publicKey.x963Representation,
                                                           environment: nil, createdAt: now))
        try await gateway.gateway.register(app: GatewayAppRecord(bundleID: "com.example.restart", teamID: "TEAM123456", storagePolicy: .all, createdAt: now))
        try await system.install("com.example.restart")
        let center = try await system.center(for: "com.example.restart")
        _ = try await center.requestAuthorization(options: [.alert])

        var configuration = GatewayLinkConfiguration(host: "127.0.0.1", port: devicePort, trustRootPaths: [gateway.addresses.certificatePath!])
        configuration.initialBackoff = .milliseconds(20)
        configuration.maximumBackoff = .milliseconds(100)
        let link = try GatewayLink(configuration: configuration, dataDirectory: system.directory.path, engine: system.engine, clock: clock)
        await system.engine.setRemote(link: link)
        let linkTask = Task { await link.run() }
        defer { linkTask.cancel() }
        #expect(await eventually { await link.isConnected })
        let token = try await link.deviceToken(for: "com.example.restart")

        #expect(try await gateway.push(token: token, body: #"{"aps":{"alert":"before"}}"#, key: teamKey, clock: clock) == 200)
        #expect(await eventually { system.presenter.presented.map(\.notification.request.content.body) == ["before"] })

        // The gateway goes away; the link notices and keeps trying.
        await gateway.stop()
        #expect(await eventually { await !link.isConnected })
        do {
            _ = try await link.deviceToken(for: "com.example.restart")
            Issue.record("a token without a gateway")
        } catch {
            #expect(error.message.contains("gateway"))
        }

        // Back on the same device port (same data directory): the link reconnects by itself.
        gateway = try await RunningGateway.start(directory: gatewayDir, devicePort: devicePort, clock: clock)
        #expect(await eventually { await link.isConnected })
        #expect(try await gateway.push(token: token, body: #"{"aps":{"alert":"after"}}"#, key: teamKey, clock: clock) == 200)
        #expect(await eventually { system.presenter.presented.map(\.notification.request.content.body) == ["before", "after"] })
        #expect(try await link.deviceToken(for: "com.example.restart") == token, "the token survives the gateway restart")
        linkTask.cancel()
        await linkTask.value
        await gateway.stop()
    }
}
