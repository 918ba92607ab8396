import Crypto
import Foundation
import Testing
import TidingsCore
import TidingsDevice
import TidingsGateway
import TidingsStorage
import TidingsTestSupport

/// The gateway on the PostgreSQL store (`--database postgres://…`), through the real path: a
/// provider connection, the device channel, PostgreSQL on a private cluster.
@Suite("PostgreSQL gateway", .serialized)
struct PostgresGatewayTests {
    /// PostgreSQL stopped under a running gateway: a push is refused with Apple's
    /// `500 InternalServerError` (never a 200 that was not committed), the device and provider
    /// connections stay up, and once PostgreSQL is back the next push is accepted and delivered
    /// with nothing to restart.
    @Test func pushesAreRefusedWhilePostgreSQLIsDownAndAcceptedWhenItReturns() async throws {
        guard let cluster = try await PostgresCluster.own(name: "gateway") else { return }
        defer { cluster.stop() }
        let h = try await GatewayHarness.start(store: .postgres(url: try cluster.createDatabase(prefix: "gateway")))
        let device = try await h.device()
        let token = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development)
        let collector = await PushCollector.start(device)
        let c = try await h.connect()
        let auth = try h.bearer()
        func push(_ id: String) async throws -> APNsResponse {
            try await c.send(h.request(token: token.hex, authorization: auth, extra: [("apns-id", id)],
                                       body: #"{"aps":{"alert":"\#(id)"}}"#))
        }
        let before = UUID().uuidString, during = UUID().uuidString, after = UUID().uuidString
        #expect(try await push(before).status == 200)
        #expect(await collector.wait(for: 1).map(\.apnsID) == [before])

        #expect(await offThePool { cluster.stopServer() }.status == 0)
        let refused = try await push(during)
        #expect(refused.status == 500)
        #expect(refused.reason == "InternalServerError")

        #expect(await offThePool { cluster.startServer() }.status == 0)
        let accepted = try await push(after)
        #expect(accepted.status == 200)
        // The same device connection receives it: the device channel kept going.
        #expect(await collector.wait(for: 2).map(\.apnsID) == [before, after])
        #expect(try await h.gateway.status(apnsID: after).count == 1)
        #expect(try await h.gateway.status(apnsID: during).isEmpty, "the refused push was never stored")
        await c.close()
        await device.close()
        await h.stop()
    }

    /// A device offline while pushes arrive gets its backlog from PostgreSQL when it comes
    /// back, under the app's storage policy (`all`: coalesced by collapse id).
    @Test func offlineDeviceGetsItsBacklogFromPostgreSQL() async throws {
        guard let cluster = try await PostgresCluster.shared() else { return }
        let h = try await GatewayHarness.start(store: .postgres(url: try cluster.createDatabase(prefix: "backlog")))
        let (key, allToken, latestToken) = try await h.offlineDeviceWithBothPolicies()
        let c = try await h.connect()
        let auth = try h.bearer()
        var sent: [String: String] = [:]
        for (name, token, topic, collapse) in [("a1", allToken, GatewayHarness.bundleID, "score"), ("a2", allToken, GatewayHarness.bundleID, nil),
                                               ("a3", allToken, GatewayHarness.bundleID, "score"),
                                               ("l1", latestToken, "com.example.latest", nil), ("l2", latestToken, "com.example.latest", nil)] {
            let extra = collapse.map { [("apns-collapse-id", $0)] } ?? []
            let r = try await c.send(h.request(token: token, topic: topic, authorization: auth, extra: extra))
            #expect(r.status == 200)
            sent[name] = r.apnsID
        }
        await c.close()
        let device = try await h.device(key: key)
        let collector = await PushCollector.start(device)
        let got = await collector.wait(for: 3)
        #expect(Set(got.map(\.apnsID)) == Set(["a2", "a3", "l2"].compactMap { sent[$0] }))
        #expect(try await h.gateway.status(apnsID: try #require(sent["a1"])).first?.discardReason == .coalesced)
        await device.close()
        await h.stop()
    }
}

/// Two gateway processes on one PostgreSQL database: this test's gateway (node B, in process)
/// and a `tidings gateway --database …` child process (node A).
@Suite("Gateway nodes sharing PostgreSQL", .serialized)
struct GatewayNodesTests {
    final class ChildNode: Sendable {
        let child: ChildProcess
        let providerPort: Int
        let devicePort: Int
        let certificatePath: String

        init(databaseURL: String) async throws {
            let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tidings-node-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            child = try ChildProcess(BuiltProducts.tidings, ["gateway", "--data-dir", dir.path, "--listen", "127.0.0.1:0",
                                                             "--device-listen", "127.0.0.1:0", "--admin-listen", "off",
                                                             "--database", databaseURL, "--log-level", "error", "--threads", "1"],
                                     directory: dir, name: "node-a")
            guard await child.waitForOutput("self-signed certificate: "),
                  let provider = child.port(after: "provider API on "), let device = child.port(after: "device channel on "),
                  let certificate = child.value(after: "self-signed certificate: ") else {
                child.stop()
                throw APNsClientError("node A did not start: \(child.output)")
            }
            providerPort = provider
            devicePort = device
            certificatePath = certificate
        }
    }

    /// A push accepted by one node reaches a device connected to the other, in both
    /// directions, in order, and its acknowledgement is recorded in the shared log.
    @Test func aPushAcceptedByOneNodeReachesADeviceOnTheOther() async throws {
        guard let cluster = try await PostgresCluster.shared() else { return }
        let url = try cluster.createDatabase(prefix: "nodes")
        let nodeB = try await GatewayHarness.start(store: .postgres(url: url))
        let nodeA = try await ChildNode(databaseURL: url)
        defer { nodeA.child.stop() }

        // A device on node A; pushes through node B.
        let onA = try await DeviceConnection.connect(DeviceClientConfiguration(
            host: "127.0.0.1", port: nodeA.devicePort, deviceKey: .init(), trustRootPaths: [nodeA.certificatePath]))
        let tokenOnA = try await onA.requestToken(topic: GatewayHarness.bundleID, environment: .development)
        let collectorA = await PushCollector.start(onA)
        let viaB = try await nodeB.connect()
        let auth = try nodeB.bearer()
        var sentViaB: [String] = []
        for i in 0..<5 {
            let r = try await viaB.send(nodeB.request(token: tokenOnA.hex, authorization: auth, body: #"{"aps":{"alert":"b\#(i)"}}"#))
            #expect(r.status == 200)
            sentViaB.append(try #require(r.apnsID))
        }
        #expect(await collectorA.wait(for: 5).map(\.apnsID) == sentViaB)

        // A device on node B; pushes through node A.
        let onB = try await nodeB.device()
        let tokenOnB = try await onB.requestToken(topic: GatewayHarness.bundleID, environment: .development)
        let collectorB = await PushCollector.start(onB)
        var configuration = APNsClientConfiguration(host: "127.0.0.1", port: nodeA.providerPort, useTLS: true,
                                                    trustRootPaths: [nodeA.certificatePath])
        configuration.authority = "127.0.0.1"
        let viaA = try await APNsConnection.connect(configuration)
        var sentViaA: [String] = []
        for i in 0..<5 {
            let r = try await viaA.send(nodeB.request(token: tokenOnB.hex, authorization: auth, body: #"{"aps":{"alert":"a\#(i)"}}"#))
            #expect(r.status == 200)
            sentViaA.append(try #require(r.apnsID))
        }
        #expect(await collectorB.wait(for: 5).map(\.apnsID) == sentViaA)

        // The acknowledgement made on node A is in the log node B reads.
        var delivered = false
        for _ in 0..<200 where !delivered {
            delivered = try await nodeB.gateway.status(apnsID: sentViaB[4]).first?.deliveredAt != nil
            if !delivered { try await Task.sleep(for: .milliseconds(10)) }
        }
        #expect(delivered)
        await viaA.close()
        await viaB.close()
        await onA.close()
        await onB.close()
        await nodeB.stop()
    }

    /// A device that moves to another node (reconnects there) takes its lease; the node it
    /// left, at its next renewal, disconnects its stale connection, and pushes from either
    /// node reach the device where it is now.
    @Test func aDeviceThatMovesTakesItsLeaseAndTheOldNodeLetsGo() async throws {
        guard let cluster = try await PostgresCluster.shared() else { return }
        let url = try cluster.createDatabase(prefix: "lease")
        let fast: (inout GatewayConfiguration) -> Void = { $0.leaseRenewInterval = .milliseconds(50) }
        let nodeA = try await GatewayHarness.start(store: .postgres(url: url), configure: fast)
        let nodeB = try await GatewayHarness.start(store: .postgres(url: url), directory: nil, teamKey: nodeA.teamKey, registerKey: false,
                                                   configure: fast)
        let key = P256.Signing.PrivateKey()
        let first = try await nodeA.device(key: key)
        let token = try await first.requestToken(topic: GatewayHarness.bundleID, environment: .development)
        let stale = await PushCollector.start(first)
        let second = try await nodeB.device(key: key)
        let collector = await PushCollector.start(second)
        // Node A lets go of the device: its connection ends.
        _ = await stale.wait(for: 1_000, timeout: .seconds(10))
        #expect(await stale.finished)
        let c = try await nodeA.connect()
        let r = try await c.send(nodeA.request(token: token.hex, authorization: try nodeA.bearer()))
        #expect(r.status == 200)
        #expect(await collector.wait(for: 1).map(\.apnsID) == [r.apnsID])
        await c.close()
        await second.close()
        await nodeA.stop()
        await nodeB.stop()
    }

    /// The registry is shared and every node's cache follows it: an app removed from a device
    /// through node A makes node B, which had the token cached, answer `410 Unregistered`.
    @Test func aTokenUnregisteredOnOneNodeIsRefusedOnTheOther() async throws {
        guard let cluster = try await PostgresCluster.shared() else { return }
        let url = try cluster.createDatabase(prefix: "registry")
        let nodeA = try await GatewayHarness.start(store: .postgres(url: url))
        let nodeB = try await GatewayHarness.start(store: .postgres(url: url), teamKey: nodeA.teamKey, registerKey: false)
        let device = try await nodeA.device()
        let token = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development)
        let viaB = try await nodeB.connect()
        let auth = try nodeB.bearer()
        #expect(try await viaB.send(nodeB.request(token: token.hex, authorization: auth)).status == 200, "node B caches the token")
        try await device.removeApp(topic: GatewayHarness.bundleID)
        var status = 0
        for _ in 0..<300 {
            status = try await viaB.send(nodeB.request(token: token.hex, authorization: auth)).status
            if status == 410 { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(status == 410)
        await viaB.close()
        await device.close()
        await nodeA.stop()
        await nodeB.stop()
    }
}
