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
        guard let cluster = try PostgresCluster.own(name: "gateway") else { return }
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

        #expect(cluster.stopServer().status == 0)
        let refused = try await push(during)
        #expect(refused.status == 500)
        #expect(refused.reason == "InternalServerError")

        #expect(cluster.startServer().status == 0)
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
        guard let cluster = try PostgresCluster.shared() else { return }
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
