import Crypto
import Foundation
import Logging
import ServiceLifecycle
import Testing
import TidingsCore
@testable import TidingsDaemon
import TidingsEngine
import TidingsGateway
import TidingsStorage
import TidingsTestSupport
import TidingsTesting

/// The daemon's link with several gateway addresses (`tidings daemon --gateway a,b`): which
/// address it tries next and how long it waits (`GatewayFailover`), and a move from one
/// gateway node to another on one PostgreSQL database, its backoff on an injected clock.
@Suite("Gateway failover", .serialized)
struct GatewayFailoverTests {
    static let a = GatewayAddress(host: "10.0.0.1", port: 2196)
    static let b = GatewayAddress(host: "10.0.0.2", port: 2196)
    static let c = GatewayAddress(host: "::1", port: 2196)

    /// The addresses in turn, starting with the first; the wait doubles with each attempt up
    /// to the maximum and starts again at the initial one after a welcome. One address: the
    /// same address every time, with the same waits as before several were possible.
    @Test func addressesInTurnWithBoundedBackoff() {
        var failover = GatewayFailover(addresses: [Self.a, Self.b, Self.c], initialBackoff: .milliseconds(100), maximumBackoff: .milliseconds(500))
        #expect(failover.current == Self.a)
        var steps: [(GatewayAddress, Duration)] = []
        for _ in 0..<7 {
            let delay = failover.failed()
            steps.append((failover.current, delay))
        }
        #expect(steps.map(\.0) == [Self.b, Self.c, Self.a, Self.b, Self.c, Self.a, Self.b])
        #expect(steps.map(\.1) == [100, 200, 400, 500, 500, 500, 500].map { Duration.milliseconds($0) })
        failover.connected()
        #expect(failover.failed() == .milliseconds(100))
        #expect(failover.current == Self.c)

        var single = GatewayFailover(addresses: [Self.a], initialBackoff: .milliseconds(100), maximumBackoff: .seconds(30))
        var delays: [Duration] = []
        for _ in 0..<12 {
            delays.append(single.failed())
            #expect(single.current == Self.a)
        }
        #expect(delays.first == .milliseconds(100))
        #expect(delays.last == .seconds(30))
    }

    /// `--gateway`: one address or several separated by commas; anything else is refused.
    @Test func addressLists() {
        #expect(GatewayLinkConfiguration(address: "127.0.0.1:2196", trustRootPaths: [])?.addresses == [GatewayAddress(host: "127.0.0.1", port: 2196)])
        #expect(GatewayLinkConfiguration(address: "a.example:1,[::1]:2, b.example:3", trustRootPaths: [])?.addresses
                == [GatewayAddress(host: "a.example", port: 1), GatewayAddress(host: "::1", port: 2), GatewayAddress(host: "b.example", port: 3)])
        for bad in ["", ",", "a:1,", ",a:1", "a:1,,b:2", "a:1,b:99999", "a:1,b", "a:1,:2"] {
            #expect(GatewayLinkConfiguration(address: bad, trustRootPaths: []) == nil, "\(bad)")
        }
        #expect(GatewayAddress(host: "::1", port: 2196).description == "[::1]:2196")
    }

    /// Two gateway nodes (in this process) on one PostgreSQL database, the link given both
    /// addresses and each node's certificate: it connects to the first; when that node goes
    /// away it waits its backoff on its own clock (nothing happens until the test advances
    /// it), then connects to the second, which takes the device's lease and sends what was
    /// accepted meanwhile. Every push is shown once.
    @Test func linkMovesToTheOtherNodeAfterItsBackoff() async throws {
        guard let cluster = try await PostgresCluster.shared() else { return }
        let url = try cluster.createDatabase(prefix: "failover")
        let clock = TestWallClock(now: Date())
        let system = try await NotificationTestSystem.start(storage: .sqlite, clock: clock)
        let bundle = "com.example.failover"
        let teamKey = P256.Signing.PrivateKey()
        func node(_ name: String) async throws -> (Gateway, ServiceGroup, Task<Void, any Error>, GatewayAddresses) {
            var configuration = GatewayConfiguration.forTests(dataDirectory: system.directory.appendingPathComponent(name), clock: clock)
            configuration.storage = .postgres(url: url)
            let gateway = try buildGateway(configuration)
            let group = ServiceGroup(configuration: .init(services: [gateway], logger: configuration.logger))
            let task = Task { try await group.run() }
            return (gateway, group, task, try await gateway.waitUntilReady())
        }
        let (gatewayA, groupA, taskA, addressesA) = try await node("node-a")
        let now = EpochMilliseconds(clock.now.timeIntervalSince1970 * 1000)
        try await gatewayA.register(key: ProviderKeyRecord(keyID: "KEY1234567", teamID: "TEAM123456", publicKey: teamKey.publicKey.x963Representation,
                                                           environment: nil, createdAt: now))
        try await gatewayA.register(app: GatewayAppRecord(bundleID: bundle, teamID: "TEAM123456", storagePolicy: .all, createdAt: now))
        let (_, groupB, taskB, addressesB) = try await node("node-b")
        try await system.install(bundle)
        _ = try await system.center(for: bundle).requestAuthorization(options: [.alert])

        let backoff = TestWallClock(now: Date())
        var configuration = GatewayLinkConfiguration(
            addresses: [GatewayAddress(host: "127.0.0.1", port: addressesA.device.port!), GatewayAddress(host: "127.0.0.1", port: addressesB.device.port!)],
            trustRootPaths: [addressesA.certificatePath!, addressesB.certificatePath!])
        configuration.reconnectClock = backoff
        let link = try GatewayLink(configuration: configuration, dataDirectory: system.directory.path, engine: system.engine, clock: clock)
        await system.engine.setRemote(link: link)
        let linkTask = Task { await link.run() }
        #expect(await eventually { await link.isConnected })
        #expect(await link.connectedAddress?.port == addressesA.device.port)
        let token = try await link.deviceToken(for: bundle)

        func push(_ body: String) async throws -> Int {
            var client = APNsClientConfiguration(host: "127.0.0.1", port: addressesB.provider.port!, trustRootPaths: [addressesB.certificatePath!])
            client.authority = "127.0.0.1"
            let connection = try await APNsConnection.connect(client)
            defer { Task { await connection.close() } }
            let bearer = "bearer " + (try ProviderToken.sign(keyID: "KEY1234567", teamID: "TEAM123456", issuedAt: Int64(clock.now.timeIntervalSince1970), key: teamKey))
            return try await connection.send(APNsRequest(deviceToken: DeviceToken(bytes: token).hex,
                                                         headers: [("authorization", bearer), ("apns-topic", bundle)],
                                                         body: Array(#"{"aps":{"alert":"\#(body)"}}"#.utf8))).status
        }
        @Sendable func shown() -> [String] { system.presenter.presented.map(\.notification.request.content.body) }

        // Through node B to the device on node A.
        #expect(try await push("one") == 200)
        #expect(await eventually { shown() == ["one"] })

        // Node A goes away: the link waits its backoff on its clock, connected nowhere.
        await groupA.triggerGracefulShutdown()
        _ = try? await taskA.value
        #expect(await eventually { await !link.isConnected && backoff.sleeperCount == 1 })
        #expect(try await push("two") == 200)
        #expect(await !link.isConnected, "no attempt before the backoff passed")
        #expect(shown() == ["one"])

        // The backoff passes: node B, which sends what it accepted meanwhile, then new pushes.
        backoff.advance(by: 0.1)
        #expect(await eventually { await link.isConnected })
        #expect(await link.connectedAddress?.port == addressesB.device.port)
        #expect(await eventually { shown() == ["one", "two"] })
        #expect(try await push("three") == 200)
        #expect(await eventually { shown() == ["one", "two", "three"] })

        linkTask.cancel()
        await linkTask.value
        await groupB.triggerGracefulShutdown()
        _ = try? await taskB.value
        await system.shutdown()
    }
}
