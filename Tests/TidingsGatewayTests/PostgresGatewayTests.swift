import Crypto
import Foundation
import Synchronization
import Testing
import TidingsCore
import TidingsDevice
import TidingsGateway
import TidingsStorage
import TidingsTestSupport
import TidingsTesting

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
        let directory: URL
        /// The admin endpoint's port, when started with `admin: true`.
        let adminPort: Int?

        init(databaseURL: String, admin: Bool = false, extraArguments: [String] = [], name: String = "node-a") async throws {
            let dir = TemporaryDirectories.make(prefix: "tidings-node-")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            directory = dir
            child = try ChildProcess(BuiltProducts.tidings, ["gateway", "--data-dir", dir.path, "--listen", "127.0.0.1:0",
                                                             "--device-listen", "127.0.0.1:0", "--admin-listen", admin ? "127.0.0.1:0" : "off",
                                                             "--database", databaseURL, "--log-level", "error", "--threads", "1"]
                                                            + extraArguments,
                                     directory: dir, name: name)
            guard await child.waitForOutput("self-signed certificate: "),
                  let provider = child.port(after: "provider API on "), let device = child.port(after: "device channel on "),
                  let certificate = child.value(after: "self-signed certificate: ") else {
                await child.stop()
                throw APNsClientError("\(name) did not start: \(child.output)")
            }
            providerPort = provider
            devicePort = device
            certificatePath = certificate
            adminPort = admin ? child.port(after: "admin (metrics, status) on http://") : nil
            if admin && adminPort == nil {
                await child.stop()
                throw APNsClientError("node A did not announce its admin endpoint: \(child.output)")
            }
        }

        func device(key: P256.Signing.PrivateKey = P256.Signing.PrivateKey()) async throws -> DeviceConnection {
            try await DeviceConnection.connect(DeviceClientConfiguration(host: "127.0.0.1", port: devicePort, deviceKey: key,
                                                                         trustRootPaths: [certificatePath]))
        }

        /// A provider connection to this node.
        func connect() async throws -> APNsConnection {
            var configuration = APNsClientConfiguration(host: "127.0.0.1", port: providerPort, useTLS: true, trustRootPaths: [certificatePath])
            configuration.authority = "127.0.0.1"
            return try await APNsConnection.connect(configuration)
        }
    }

    /// `tidings keys revoke K` against the database two `tidings gateway` processes share:
    /// both answer `403 InvalidProviderToken` for K on the provider connections that were
    /// already authorized with it and on new ones, within a bounded time (the notification;
    /// the registry refresh is set to an hour so that it cannot be what did it); another key
    /// of the same team keeps working on both; `tidings keys list` shows what is left.
    @Test func aKeyRevokedWithTheCLIIsRefusedOnEveryNode() async throws {
        guard let cluster = try await PostgresCluster.shared() else { return }
        let url = try cluster.createDatabase(prefix: "revoke")
        let work = TemporaryDirectories.make(prefix: "tidings-revoke-")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        let team = "REVOKETEAM"
        var signing: [String: ProviderSigningKey] = [:]
        for id in ["REVOKED001", "KEPT000001"] {
            let p8 = work.appendingPathComponent("\(id).p8").path
            let created = try await runTidings(["keys", "create", "--database", url, "--team", team, "--key-id", id, "-o", p8,
                                          "--app", GatewayHarness.bundleID])
            #expect(created.status == 0, "\(created.output)")
            signing[id] = try ProviderSigningKey(p8File: p8)
        }
        let slowRefresh = ["--registry-refresh", "3600"]
        let nodeA = try await ChildNode(databaseURL: url, extraArguments: slowRefresh, name: "node-a")
        defer { nodeA.child.stopAtEnd() }
        let nodeB = try await ChildNode(databaseURL: url, extraArguments: slowRefresh, name: "node-b")
        defer { nodeB.child.stopAtEnd() }

        let device = try await DeviceConnection.connect(DeviceClientConfiguration(
            host: "127.0.0.1", port: nodeA.devicePort, deviceKey: .init(), trustRootPaths: [nodeA.certificatePath]))
        let deviceToken = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development).hex
        func request(_ keyID: String) throws -> APNsRequest {
            let jwt = try #require(signing[keyID]).token(keyID: keyID, teamID: team)
            return APNsRequest(deviceToken: deviceToken, headers: [(name: "authorization", value: "bearer " + jwt),
                                                                   (name: "apns-topic", value: GatewayHarness.bundleID),
                                                                   (name: "apns-push-type", value: "alert")],
                               body: Array(#"{"aps":{"alert":"hi"}}"#.utf8))
        }
        let revoked = try request("REVOKED001"), kept = try request("KEPT000001")
        var open: [(node: String, revoked: APNsConnection, kept: APNsConnection)] = []
        for (name, node) in [("A", nodeA), ("B", nodeB)] {
            let r = try await node.connect(), k = try await node.connect()
            #expect(try await r.send(revoked).status == 200, "node \(name), before")
            #expect(try await k.send(kept).status == 200, "node \(name), before")
            open.append((name, r, k))
        }

        let revoking = try await runTidings(["keys", "revoke", "REVOKED001", "--database", url])
        #expect(revoking.status == 0, "\(revoking.output)")
        #expect(revoking.output.contains("revoked key REVOKED001"))
        let since = ContinuousClock.now
        for connection in open {
            var answer = try await connection.revoked.send(revoked)
            // Any bound far below the hour of registry refresh shows the notification did it;
            // 5 s was passed once under a loaded full run (5.36 s).
            while answer.status == 200 && ContinuousClock.now - since < .seconds(60) {
                try await Task.sleep(for: .milliseconds(20))
                answer = try await connection.revoked.send(revoked)
            }
            #expect(answer.status == 403, "node \(connection.node), open connection")
            #expect(answer.reason == "InvalidProviderToken")
            #expect(try await connection.kept.send(kept).status == 200, "node \(connection.node): the other key")
        }
        #expect(ContinuousClock.now - since < .seconds(60))
        for (name, node) in [("A", nodeA), ("B", nodeB)] {
            let fresh = try await node.connect()
            let answer = try await fresh.send(revoked)
            #expect(answer.status == 403, "node \(name), new connection")
            #expect(answer.reason == "InvalidProviderToken")
            let other = try await node.connect()
            #expect(try await other.send(kept).status == 200, "node \(name), new connection, the other key")
            await fresh.close()
            await other.close()
        }
        let listed = try await runTidings(["keys", "list", "--database", url])
        #expect(listed.output.contains("KEPT000001  team \(team)"))
        #expect(!listed.output.contains("REVOKED001"))
        let again = try await runTidings(["keys", "revoke", "REVOKED001", "--database", url])
        #expect(again.status == 1)
        #expect(again.output.contains("no key REVOKED001"))
        for connection in open {
            await connection.revoked.close()
            await connection.kept.close()
        }
        await device.close()
    }

    /// `tidings status <apns-id> --json` with `arguments` (`--admin HOST:PORT` or `--database URL`), decoded.
    static func statusFromCLI(_ apnsID: String, _ arguments: [String]) async throws -> [PushStatus] {
        let r = try await runTool(BuiltProducts.tidings, ["status", apnsID, "--json"] + arguments)
        guard r.status == 0 else { throw APNsClientError("tidings status \(arguments): \(r.output)") }
        return try JSONDecoder().decode([PushStatus].self, from: Data(r.output.utf8))
    }

    /// A push's status as every node answers it: node B in process, node B's and node A's admin
    /// endpoints (`tidings status --admin`), and the shared database (`tidings status --database`).
    static func statusEverywhere(_ apnsID: String, nodeA: ChildNode, nodeB: GatewayHarness, url: String) async throws -> [String: [PushStatus]] {
        [
            "node B (in process)": try await nodeB.gateway.status(apnsID: apnsID),
            "node B admin endpoint": try await statusFromCLI(apnsID, ["--admin", "127.0.0.1:\(try #require(nodeB.addresses.admin?.port))",
                                                                 "--data-dir", nodeB.directory.path]),
            "node A admin endpoint": try await statusFromCLI(apnsID, ["--admin", "127.0.0.1:\(try #require(nodeA.adminPort))",
                                                                 "--data-dir", nodeA.directory.path]),
            "tidings status --database": try await statusFromCLI(apnsID, ["--database", url]),
        ]
    }

    /// A push accepted by one node reaches a device connected to the other, in both
    /// directions, in order, and its acknowledgement is recorded in the shared log.
    @Test func aPushAcceptedByOneNodeReachesADeviceOnTheOther() async throws {
        guard let cluster = try await PostgresCluster.shared() else { return }
        let url = try cluster.createDatabase(prefix: "nodes")
        let nodeB = try await GatewayHarness.start(store: .postgres(url: url))
        let nodeA = try await ChildNode(databaseURL: url)
        defer { nodeA.child.stopAtEnd() }

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

    /// A node that loses a device's lease stops sending to it at once, not at its next
    /// renewal: the node that took the lease notifies it (`gw_lease_<node>`), it checks its
    /// leases and closes its connection to the device. Renewal is an hour here, so only the
    /// notification can close it; a push accepted by the old node afterwards reaches the
    /// device on the new node only.
    @Test func aNodeThatLosesALeaseStopsSendingAtOnce() async throws {
        guard let cluster = try await PostgresCluster.shared() else { return }
        let url = try cluster.createDatabase(prefix: "leaselost")
        let slow: (inout GatewayConfiguration) -> Void = { $0.leaseRenewInterval = .hours(1) }
        let nodeA = try await GatewayHarness.start(store: .postgres(url: url), configure: slow)
        let nodeB = try await GatewayHarness.start(store: .postgres(url: url), teamKey: nodeA.teamKey, registerKey: false, configure: slow)
        let key = P256.Signing.PrivateKey()
        let first = try await nodeA.device(key: key)
        let token = try await first.requestToken(topic: GatewayHarness.bundleID, environment: .development)
        let stale = await PushCollector.start(first)
        let viaA = try await nodeA.connect()
        let auth = try nodeA.bearer()
        let before = try await viaA.send(nodeA.request(token: token.hex, authorization: auth))
        #expect(before.status == 200)
        #expect(await stale.wait(for: 1).map(\.apnsID) == [before.apnsID])
        // The same device on node B (its connection to A still open, as a half-open one would be).
        let second = try await nodeB.device(key: key)
        let moved = await PushCollector.start(second)
        _ = await stale.wait(for: 1_000, timeout: .seconds(10))
        #expect(await stale.finished, "node A closed its connection to the device when node B took the lease")
        let after = try await viaA.send(nodeA.request(token: token.hex, authorization: auth))
        #expect(after.status == 200)
        #expect(await moved.wait(for: 1).map(\.apnsID) == [after.apnsID], "the push accepted by node A reaches the device on node B")
        #expect(await stale.pushes.map(\.apnsID) == [before.apnsID])
        await viaA.close()
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

    /// The storage policies and collapse ids across nodes: a device offline, pushes for an
    /// `all` app (two with one apns-collapse-id) and an `apns` app (Apple's: only the latest
    /// kept) accepted by node B; the device comes back on node A and gets exactly what the
    /// policies keep, in order; the replaced pushes are `discarded (coalesced)` whichever node
    /// is asked.
    @Test func storagePoliciesAndCollapseIDsHoldAcrossNodes() async throws {
        guard let cluster = try await PostgresCluster.shared() else { return }
        let url = try cluster.createDatabase(prefix: "policies")
        let nodeB = try await GatewayHarness.start(store: .postgres(url: url))
        let nodeA = try await ChildNode(databaseURL: url, admin: true)
        defer { nodeA.child.stopAtEnd() }
        let now = EpochMilliseconds(nodeB.clock.now.timeIntervalSince1970 * 1000)
        try await nodeB.gateway.register(app: GatewayAppRecord(bundleID: "com.example.latest", teamID: GatewayHarness.teamID,
                                                               storagePolicy: .apns, createdAt: now))
        // The device gets its tokens on node A, then goes offline.
        let key = P256.Signing.PrivateKey()
        let first = try await nodeA.device(key: key)
        let allToken = try await first.requestToken(topic: GatewayHarness.bundleID, environment: .development).hex
        let latestToken = try await first.requestToken(topic: "com.example.latest", environment: .development).hex
        await first.close()

        let viaB = try await nodeB.connect()
        let auth = try nodeB.bearer()
        func push(_ token: String, _ topic: String, _ n: Int, collapse: String? = nil) async throws -> String {
            let extra = collapse.map { [("apns-collapse-id", $0)] } ?? []
            let r = try await viaB.send(nodeB.request(token: token, topic: topic, authorization: auth, extra: extra, body: #"{"n":\#(n)}"#))
            #expect(r.status == 200)
            return try #require(r.apnsID)
        }
        let a1 = try await push(allToken, GatewayHarness.bundleID, 1, collapse: "score")
        let a2 = try await push(allToken, GatewayHarness.bundleID, 2)
        let l1 = try await push(latestToken, "com.example.latest", 3)
        let a3 = try await push(allToken, GatewayHarness.bundleID, 4, collapse: "score")
        let l2 = try await push(latestToken, "com.example.latest", 5, collapse: "other")
        let a4 = try await push(allToken, GatewayHarness.bundleID, 6, collapse: "elsewhere")
        await viaB.close()

        let device = try await nodeA.device(key: key)
        let collector = await PushCollector.start(device)
        #expect(await collector.wait(for: 4).map(\.apnsID) == [a2, a3, l2, a4])
        // Nothing more comes: the replaced pushes are not in the backlog node A reads.
        #expect(await collector.wait(for: 5, timeout: .milliseconds(300)).count == 4)

        for replaced in [a1, l1] {
            let answers = try await Self.statusEverywhere(replaced, nodeA: nodeA, nodeB: nodeB, url: url)
            for (node, status) in answers {
                #expect(status.count == 1 && status.first?.discardReason == .coalesced && status.first?.deliveredAt == nil,
                        "\(node): \(status)")
                #expect(status.first?.stage == "discarded (coalesced)", "\(node)")
            }
            #expect(Set(answers.values).count == 1, "every node answers the same: \(answers)")
        }
        await device.close()
        await nodeB.stop()
    }

    /// Delivery inspection from any node: a push accepted by node B, delivered and shown
    /// through node A; node B (in process and its admin endpoint), node A's admin endpoint and
    /// `tidings status --database` all answer the same: `stored` while the device has it
    /// unacknowledged, then delivered (acknowledged) and presented, with the same times.
    @Test func deliveryStatusIsTheSameOnEveryNode() async throws {
        guard let cluster = try await PostgresCluster.shared() else { return }
        let url = try cluster.createDatabase(prefix: "inspect")
        let nodeB = try await GatewayHarness.start(store: .postgres(url: url))
        let nodeA = try await ChildNode(databaseURL: url, admin: true)
        defer { nodeA.child.stopAtEnd() }
        let device = try await nodeA.device()
        let token = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development)
        let collector = await PushCollector.start(device, acknowledge: false)
        let viaB = try await nodeB.connect()
        let response = try await viaB.send(nodeB.request(token: token.hex, authorization: try nodeB.bearer()))
        #expect(response.status == 200)
        let apnsID = try #require(response.apnsID)
        // Sent to the device but not acknowledged yet: every node says `stored`.
        #expect(await collector.wait(for: 1).map(\.apnsID) == [apnsID])
        let waiting = try await Self.statusEverywhere(apnsID, nodeA: nodeA, nodeB: nodeB, url: url)
        for (node, status) in waiting {
            #expect(status.count == 1 && status.first?.stage == "stored" && status.first?.deliveredAt == nil, "\(node): \(status)")
        }
        #expect(Set(waiting.values).count == 1, "\(waiting)")

        await collector.startAcknowledging()
        #expect(try await device.record(.presented, apnsID: apnsID), "node A made the presentation durable")
        // The acknowledgement is committed by node A's commit thread, after it was sent.
        let recorded = await eventually(within: 10) {
            let s = try? await nodeB.gateway.status(apnsID: apnsID).first
            return s?.deliveredAt != nil && s?.presentedAt != nil
        }
        #expect(recorded)
        let answers = try await Self.statusEverywhere(apnsID, nodeA: nodeA, nodeB: nodeB, url: url)
        for (node, status) in answers {
            let s = try #require(status.first, "\(node)")
            #expect(status.count == 1, "\(node)")
            #expect(s.stage == "presented" && s.deliveredAt != nil && s.presentedAt != nil && s.discardReason == nil, "\(node): \(s)")
            // (Not `deliveredAt <= presentedAt`: the acknowledgement's batch may commit, stamped
            // with its commit time, a millisecond after the event was stamped on arrival.)
            #expect(s.acceptedAt <= s.storedAt && s.storedAt <= s.deliveredAt!, "\(node): \(s)")
        }
        #expect(Set(answers.values).count == 1, "every node answers the same: \(answers)")
        await viaB.close()
        await device.close()
        await nodeB.stop()
    }

    /// One provider's pushes and their answers, in the order sent.
    final class PushLoad: Sendable {
        struct Sent: Sendable {
            let apnsID: String
            let status: Int  // 0: the provider connection failed
        }
        let sent = Mutex<[Sent]>([])
        var accepted: [String] { sent.withLock { $0.filter { $0.status == 200 }.map(\.apnsID) } }
        var refused: [String] { sent.withLock { $0.filter { $0.status != 200 }.map(\.apnsID) } }
        var count: Int { sent.withLock { $0.count } }

        /// Pushes to `token` through `connection` one at a time, about 100 a second, until cancelled.
        func run(_ connection: APNsConnection, harness: GatewayHarness, token: String, auth: String) -> Task<Void, Never> {
            Task {
                var n = 0
                while !Task.isCancelled {
                    let id = UUID().uuidString.lowercased()
                    n += 1
                    let status = (try? await connection.send(harness.request(token: token, authorization: auth, extra: [("apns-id", id)],
                                                                               body: #"{"aps":{"alert":"load \#(n)"}}"#)))?.status ?? 0
                    sent.withLock { $0.append(Sent(apnsID: id, status: status)) }
                    if status == 0 { return }
                    try? await Task.sleep(for: .milliseconds(10))
                }
            }
        }
    }

    /// PostgreSQL stopped and started under load from providers on both nodes, a device on
    /// each: while it is down every push is refused with Apple's `500`/`503` (never a 200),
    /// both devices stay connected (node B renews its leases every 50 ms here, so its renewals
    /// fail during the outage), and once it is back pushes accepted by either node reach the
    /// device on the other, with nothing restarted or reconnected; every 200 is delivered, in
    /// the order it was accepted.
    @Test func postgreSQLStoppedAndStartedUnderLoadAcrossNodes() async throws {
        guard let cluster = try await PostgresCluster.own(name: "nodes") else { return }
        defer { cluster.stop() }
        let url = try cluster.createDatabase(prefix: "outage")
        let nodeB = try await GatewayHarness.start(store: .postgres(url: url)) { $0.leaseRenewInterval = .milliseconds(50) }
        let nodeA = try await ChildNode(databaseURL: url)
        defer { nodeA.child.stopAtEnd() }
        let onA = try await nodeA.device()
        let tokenOnA = try await onA.requestToken(topic: GatewayHarness.bundleID, environment: .development)
        let collectorA = await PushCollector.start(onA)
        let onB = try await nodeB.device()
        let tokenOnB = try await onB.requestToken(topic: GatewayHarness.bundleID, environment: .development)
        let collectorB = await PushCollector.start(onB)
        let auth = try nodeB.bearer()
        let viaB = try await nodeB.connect(), viaA = try await nodeA.connect()
        let toA = PushLoad(), toB = PushLoad()
        let loads = [toA.run(viaB, harness: nodeB, token: tokenOnA.hex, auth: auth), toB.run(viaA, harness: nodeB, token: tokenOnB.hex, auth: auth)]

        #expect(await eventually(within: 30) { toA.accepted.count >= 10 && toB.accepted.count >= 10 }, "pushes accepted before the outage")
        #expect(cluster.stopServer().status == 0)
        let sentBeforeRestart = await eventually(within: 30) { toA.refused.count >= 5 && toB.refused.count >= 5 }
        #expect(sentBeforeRestart, "both nodes refused pushes while PostgreSQL was down")
        let (acceptedDuringA, acceptedDuringB) = (toA.accepted.count, toB.accepted.count)
        let (endedA, endedB) = (await collectorA.finished, await collectorB.finished)
        #expect(!endedA && !endedB, "the devices stay connected while PostgreSQL is down")
        #expect(cluster.startServer().status == 0)
        #expect(await eventually(within: 30) { toA.accepted.count >= acceptedDuringA + 10 && toB.accepted.count >= acceptedDuringB + 10 },
                "pushes accepted again on both nodes once PostgreSQL is back")
        for load in loads { load.cancel() }
        for load in loads { await load.value }

        for (load, name) in [(toA, "node B → device on A"), (toB, "node A → device on B")] {
            let statuses = Set(load.sent.withLock { $0.map(\.status) })
            #expect(statuses.isSubset(of: [200, 500, 503]), "\(name): answers \(statuses.sorted())")
        }
        for (load, collector, name) in [(toA, collectorA, "device on A"), (toB, collectorB, "device on B")] {
            let accepted = load.accepted, refused = Set(load.refused)
            let got = await collector.wait(for: accepted.count, timeout: .seconds(30)).map(\.apnsID)
            #expect(got.filter { !refused.contains($0) } == accepted, "\(name): every 200 delivered once, in order (\(got.count) of \(accepted.count))")
            #expect(Set(got).count == got.count, "\(name): nothing delivered twice")
            print("PostgreSQL outage, \(name): \(accepted.count) accepted, \(refused.count) refused, \(got.count) delivered, \(got.filter(refused.contains).count) refused but delivered")
        }
        let (finishedA, finishedB) = (await collectorA.finished, await collectorB.finished)
        #expect(!finishedA && !finishedB, "the same device connections received everything")
        await viaA.close()
        await viaB.close()
        await onA.close()
        await onB.close()
        await nodeB.stop()
    }
}
