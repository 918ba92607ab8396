import Crypto
import Foundation
import Testing
import TidingsCore
import TidingsGateway
import TidingsStorage
import TidingsTestSupport

/// A revoked provider key, in one gateway: refused with `403 InvalidProviderToken` on the
/// connections already authorized with it and on new ones; another key keeps working; a
/// revocation the gateway was not told about (another process on the SQLite file, a lost
/// notification) is found by the registry refresh.
@Suite("Provider key revocation")
struct KeyRevocationTests {
    static let secondKeyID = "SECONDKEY1"

    /// The harness's key and a second key of the same team, each on an open connection with 200,
    /// with the provider token each was authorized with (a connection keeps its token: another
    /// one within 20 minutes would be `TooManyProviderTokenUpdates`).
    func twoAuthorizedConnections(_ h: GatewayHarness) async throws -> (first: APNsConnection, second: APNsConnection,
                                                                        auth: String, secondAuth: String, token: String) {
        let secondKey = P256.Signing.PrivateKey()
        try await h.gateway.register(key: ProviderKeyRecord(keyID: Self.secondKeyID, teamID: GatewayHarness.teamID,
                                                            publicKey: secondKey.publicKey.x963Representation, environment: nil, createdAt: 0))
        let device = try await h.device()
        let token = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development).hex
        await device.close()
        let first = try await h.connect()
        let second = try await h.connect()
        let auth = try h.bearer(), secondAuth = try h.bearer(keyID: Self.secondKeyID, key: secondKey)
        #expect(try await first.send(h.request(token: token, authorization: auth)).status == 200)
        #expect(try await second.send(h.request(token: token, authorization: secondAuth)).status == 200)
        return (first, second, auth, secondAuth, token)
    }

    @Test func aRevokedKeyIsRefusedOnOpenAndNewConnections() async throws {
        let h = try await GatewayHarness.start()
        let (first, second, auth, secondAuth, token) = try await twoAuthorizedConnections(h)
        let revoked = try await h.gateway.revoke(keyID: GatewayHarness.keyID)
        #expect(revoked.keyID == GatewayHarness.keyID)

        let onOpen = try await first.send(h.request(token: token, authorization: auth))
        #expect(onOpen.status == 403)
        #expect(onOpen.reason == "InvalidProviderToken")
        let fresh = try await h.connect()
        let onNew = try await fresh.send(h.request(token: token, authorization: try h.bearer()))
        #expect(onNew.status == 403)
        #expect(onNew.reason == "InvalidProviderToken")
        // The other key of the same team goes on, on its open connection and on a new one.
        #expect(try await second.send(h.request(token: token, authorization: secondAuth)).status == 200)
        let another = try await h.connect()
        #expect(try await another.send(h.request(token: token, authorization: secondAuth)).status == 200)

        // An unknown key id: an error, nothing changed.
        await #expect { try await h.gateway.revoke(keyID: "NOSUCHKEY1") } throws: { ($0 as? GatewayStoreError)?.isNotFound == true }
        #expect(try h.gateway.store.keys().map(\.keyID) == [Self.secondKeyID])
        for c in [first, second, fresh, another] { await c.close() }
        await h.stop()
    }

    /// Revoked in the SQLite file by another process (as `tidings keys revoke --data-dir` does):
    /// no notification reaches the gateway, so its open connection keeps the cached key until
    /// the registry refresh, which drops it; from then on 403, on that connection too.
    @Test func aRevocationTheGatewayWasNotToldOfIsFoundByTheRefresh() async throws {
        let h = try await GatewayHarness.start(store: .sqlite) { $0.registryRefreshInterval = .hours(1) }
        let (first, second, auth, secondAuth, token) = try await twoAuthorizedConnections(h)
        let cli = try GatewayRegistry(dataDirectory: h.directory)
        try cli.revokeKey(id: GatewayHarness.keyID)
        #expect(try await first.send(h.request(token: token, authorization: auth)).status == 200, "not told: the cache still has it")

        #expect(try await h.gateway.refreshRegistry() == [GatewayHarness.keyID])
        let refused = try await first.send(h.request(token: token, authorization: auth))
        #expect(refused.status == 403)
        #expect(refused.reason == "InvalidProviderToken")
        #expect(try await second.send(h.request(token: token, authorization: secondAuth)).status == 200)
        #expect(try await h.gateway.refreshRegistry().isEmpty, "nothing more to drop")
        await first.close()
        await second.close()
        await h.stop()
    }

    /// The refresh runs by itself every `registryRefreshInterval` (here 50 ms).
    @Test func theRegistryRefreshRunsEveryInterval() async throws {
        let h = try await GatewayHarness.start(store: .sqlite) { $0.registryRefreshInterval = .milliseconds(50) }
        let (first, second, auth, _, token) = try await twoAuthorizedConnections(h)
        try GatewayRegistry(dataDirectory: h.directory).revokeKey(id: GatewayHarness.keyID)
        var status = 0
        for _ in 0..<500 {
            status = try await first.send(h.request(token: token, authorization: auth)).status
            if status == 403 { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(status == 403)
        await first.close()
        await second.close()
        await h.stop()
    }
}
