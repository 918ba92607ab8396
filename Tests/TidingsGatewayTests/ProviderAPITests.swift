import Crypto
import Foundation
import Synchronization
import Testing
import TidingsCore
import TidingsDevice
import TidingsGateway
import TidingsStorage

/// Every reason the provider API can produce, over a real HTTP/2 + TLS connection, with the
/// response framing of the reference's §3.7.
@Suite("Provider API", .serialized)
struct ProviderAPITests {
    func expectError(_ response: APNsResponse, _ reason: APNsReason, _ comment: Comment? = nil,
                     sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(response.status == reason.status, comment, sourceLocation: sourceLocation)
        #expect(response.reason == reason.rawValue, comment, sourceLocation: sourceLocation)
        #expect(response.framing == ["H", "D*"], "error = HEADERS then one DATA with END_STREAM", sourceLocation: sourceLocation)
        #expect(response.headers["content-type"] == "application/json", sourceLocation: sourceLocation)
        #expect(response.apnsID != nil, sourceLocation: sourceLocation)
    }

    @Test func successFramingAndApnsIDEcho() async throws {
        let h = try await GatewayHarness.start()
        let device = try await h.device()
        let token = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development)
        let c = try await h.connect()
        let auth = try h.bearer()

        let upper = "EABEAE54-14A8-11E5-B60B-1697F925EC7B"
        let r1 = try await c.send(h.request(token: token.hex, authorization: auth, extra: [("apns-id", upper)]))
        #expect(r1.status == 200)
        #expect(r1.framing == ["H*"], "success = one HEADERS frame with END_STREAM")
        #expect(r1.apnsID == upper, "apns-id echoed byte for byte")
        #expect(r1.body.isEmpty)

        let r2 = try await c.send(h.request(token: token.hex.uppercased(), authorization: auth))
        #expect(r2.status == 200)
        let generated = try #require(r2.apnsID)
        #expect(generated == generated.lowercased())
        #expect((try? APNsID(header: generated)) != nil)

        // An error echoes the request's apns-id too, even an invalid one.
        let bad = try await c.send(h.request(token: token.hex, authorization: auth, extra: [("apns-id", "not-a-uuid")]))
        expectError(bad, .badMessageId)
        #expect(bad.apnsID == "not-a-uuid")
        await c.close()
        await device.close()
        await h.stop()
    }

    @Test func headerAndPathReasons() async throws {
        let h = try await GatewayHarness.start()
        let device = try await h.device()
        let token = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development).hex
        let c = try await h.connect()
        let auth = try h.bearer()
        // Authenticate once so the connection is bound and has its full stream limit.
        #expect(try await c.send(h.request(token: token, authorization: auth)).status == 200)

        func send(_ r: APNsRequest) async throws -> APNsResponse { try await c.send(r) }
        expectError(try await send(h.request(token: token, authorization: auth, extra: [("apns-topic", "com.example.app")])), .duplicateHeaders)
        expectError(try await send(APNsRequest(method: "GET", path: "/3/device/\(token)", headers: [(name: "authorization", value: auth), (name: "apns-topic", value: GatewayHarness.bundleID)], body: [])), .methodNotAllowed)
        expectError(try await send(h.request(token: token, topic: nil, authorization: auth)), .missingTopic)
        expectError(try await send(h.request(token: token, topic: "com.example app", authorization: auth)), .badTopic)
        expectError(try await send(h.request(token: token, authorization: auth, extra: [("apns-collapse-id", String(repeating: "c", count: 65))])), .badCollapseId)
        expectError(try await send(h.request(token: token, authorization: auth, extra: [("apns-priority", "7")])), .badPriority)
        expectError(try await send(h.request(token: token, pushType: "background", authorization: auth, extra: [("apns-priority", "10")])), .badPriority)
        expectError(try await send(h.request(token: token, pushType: "notification", authorization: auth)), .invalidPushType)
        expectError(try await send(h.request(token: "", authorization: auth)), .missingDeviceToken)
        expectError(try await send(h.request(token: "zz-not-hex", authorization: auth)), .badDeviceToken)
        expectError(try await send(APNsRequest(path: "/3/devices/\(token)", headers: [(name: "authorization", value: auth), (name: "apns-topic", value: GatewayHarness.bundleID)], body: Array("{}".utf8))), .badPath)
        expectError(try await send(h.request(token: token, authorization: auth, extra: [("apns-expiration", "tomorrow")])), .badExpirationDate)
        expectError(try await send(h.request(token: token, pushType: "voip", authorization: auth)), .topicDisallowed, "voip needs the .voip suffix")
        await c.close()
        await device.close()
        await h.stop()
    }

    /// HTTP/2's header-block rules (checked by the gateway's own pass, NIOHTTP2's validation
    /// being off): a malformed block resets its stream with PROTOCOL_ERROR and nothing is
    /// stored; the connection goes on.
    @Test func malformedHeaderBlocksResetTheStream() async throws {
        let h = try await GatewayHarness.start()
        let device = try await h.device()
        let token = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development).hex
        var configuration = APNsClientConfiguration(host: "127.0.0.1", port: h.providerPort, useTLS: true, trustRootPaths: [h.certificatePath])
        configuration.authority = "127.0.0.1"
        configuration.validatesHeaderBlocks = false
        let c = try await APNsConnection.connect(configuration)
        let auth = try h.bearer()
        #expect(try await c.send(h.request(token: token, authorization: auth)).status == 200)
        let malformed: [[(String, String)]] = [
            [("Apns-Priority", "10")],                  // upper case in a name
            [("apns priority", "10")],                  // not a token
            [("x-note", "a\r\nb")],                    // CR LF in a value
            [("connection", "keep-alive")],             // connection-specific
            [("transfer-encoding", "chunked")],
            [("te", "gzip")],                           // te other than trailers
            [(":path", "/3/device/\(token)")],          // a pseudo-header after regular fields, and twice
            [(":protocol", "websocket")],               // no extended CONNECT
            // content-length against the 25-byte body (RFC 9113 § 8.1.1)
            [("content-length", "3")],                  // the body is longer
            [("content-length", "26")],                 // the body is shorter
            [("content-length", "abc")],                // not a number
            [("content-length", "-1")],
            [("content-length", "25"), ("content-length", "24")],  // two that disagree
        ]
        for extra in malformed {
            await #expect(throws: APNsClientError.self, "\(extra)") {
                _ = try await c.send(h.request(token: token, authorization: auth, extra: extra))
            }
        }
        // te: trailers is allowed; the connection still works.
        #expect(try await c.send(h.request(token: token, authorization: auth, extra: [("te", "trailers")])).status == 200)
        // So is a content-length that matches the body, also repeated.
        #expect(try await c.send(h.request(token: token, authorization: auth, extra: [("content-length", "25")])).status == 200)
        #expect(try await c.send(h.request(token: token, authorization: auth,
                                           extra: [("content-length", "25"), ("content-length", "25")])).status == 200)
        #expect(try await h.gateway.store.pendingPushes(deviceID: device.deviceID, after: 0, limit: 10).count == 4)
        await c.close()
        await h.stop()
    }

    @Test func bodyAndTokenReasons() async throws {
        let h = try await GatewayHarness.start()
        let now = EpochMilliseconds(h.clock.now.timeIntervalSince1970 * 1000)
        try await h.gateway.register(app: GatewayAppRecord(bundleID: "com.example.other", teamID: GatewayHarness.teamID, createdAt: now))
        try await h.gateway.register(app: GatewayAppRecord(bundleID: "com.othertea.app", teamID: "OTHERTEAM1", createdAt: now))
        let device = try await h.device()
        let token = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development).hex
        let production = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .production).hex
        let c = try await h.connect()
        let auth = try h.bearer()
        func send(_ r: APNsRequest) async throws -> APNsResponse { try await c.send(r) }

        expectError(try await send(h.request(token: token, authorization: auth, body: "")), .payloadEmpty)
        let big = "{\"a\":\"" + String(repeating: "x", count: 4100) + "\"}"
        expectError(try await send(h.request(token: token, authorization: auth, body: big)), .payloadTooLarge)
        expectError(try await send(h.request(token: token, authorization: auth, body: "this is not json")), .badRequestPayload)
        expectError(try await send(h.request(token: token, authorization: auth, body: "[1,2,3]")), .badRequestPayload)
        // A 5000-byte VoIP push is fine; the same size as an alert is not.
        let voipToken = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development).hex
        let fiveK = "{\"a\":\"" + String(repeating: "x", count: 4990) + "\"}"
        let voip = try await send(h.request(token: voipToken, topic: GatewayHarness.bundleID + ".voip", pushType: "voip", authorization: auth, body: fiveK))
        #expect(voip.status == 200)
        expectError(try await send(h.request(token: String(repeating: "ab", count: 32), authorization: auth)), .badDeviceToken, "unknown token")
        expectError(try await send(h.request(token: production, authorization: auth)), .badDeviceToken, "token of the other environment")
        expectError(try await send(h.request(token: token, topic: "com.example.other", authorization: auth)), .deviceTokenNotForTopic)
        expectError(try await send(h.request(token: token, topic: "com.othertea.app", authorization: auth)), .topicDisallowed, "another team's app")
        expectError(try await send(h.request(token: token, topic: "com.unregistered.app", authorization: auth)), .topicDisallowed, "no such app")

        // The app is removed from the device: 410 with the millisecond timestamp.
        try await device.removeApp(topic: GatewayHarness.bundleID)
        let gone = try await send(h.request(token: token, authorization: auth))
        expectError(gone, .unregistered)
        #expect(gone.timestamp == now)
        #expect(String(decoding: gone.body, as: UTF8.self) == #"{"reason":"Unregistered","timestamp":\#(now)}"#)
        await c.close()
        await device.close()
        await h.stop()
    }

    @Test func providerTokenReasons() async throws {
        let h = try await GatewayHarness.start()
        let otherKey = P256.Signing.PrivateKey()
        let now = EpochMilliseconds(h.clock.now.timeIntervalSince1970 * 1000)
        try await h.gateway.register(key: ProviderKeyRecord(keyID: "SECONDKEY1", teamID: GatewayHarness.teamID, publicKey: otherKey.publicKey.x963Representation, environment: nil, createdAt: now))
        try await h.gateway.register(key: ProviderKeyRecord(keyID: "PRODKEY123", teamID: GatewayHarness.teamID, publicKey: otherKey.publicKey.x963Representation, environment: .production, createdAt: now))
        let device = try await h.device()
        let token = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development).hex

        let c1 = try await h.connect()
        expectError(try await c1.send(h.request(token: token, authorization: nil)), .missingProviderToken)
        expectError(try await c1.send(h.request(token: token, authorization: "bearer not.a.jwt")), .invalidProviderToken)
        expectError(try await c1.send(h.request(token: token, authorization: try h.bearer(keyID: "NOSUCHKEY1"))), .invalidProviderToken, "unknown key id")
        expectError(try await c1.send(h.request(token: token, authorization: try h.bearer(key: otherKey))), .invalidProviderToken, "bad signature")
        expectError(try await c1.send(h.request(token: token, authorization: try h.bearer(issuedAt: h.nowSeconds - 3601))), .expiredProviderToken)
        expectError(try await c1.send(h.request(token: token, authorization: try h.bearer(keyID: "PRODKEY123", key: otherKey))), .badEnvironmentKeyIdInToken)
        // A DER signature (Pushy, Apple's openssl recipe) works as well as raw R‖S.
        let first = try h.bearer(der: true)
        #expect(try await c1.send(h.request(token: token, authorization: first)).status == 200)
        expectError(try await c1.send(h.request(token: token, authorization: try h.bearer(keyID: "SECONDKEY1", key: otherKey))), .unrelatedKeyIdInToken)
        // A new token of the same key ten minutes later: too soon.
        h.clock.advance(by: 600)
        expectError(try await c1.send(h.request(token: token, authorization: try h.bearer())), .tooManyProviderTokenUpdates)
        // The first token is still good, until it is an hour old.
        #expect(try await c1.send(h.request(token: token, authorization: first)).status == 200)
        h.clock.advance(by: 3001)
        expectError(try await c1.send(h.request(token: token, authorization: first)), .expiredProviderToken)
        // Twenty minutes after the first, a fresh token is accepted.
        #expect(try await c1.send(h.request(token: token, authorization: try h.bearer())).status == 200)
        await c1.close()
        await device.close()
        await h.stop()
    }

    @Test func perDeviceRateLimit() async throws {
        let h = try await GatewayHarness.start { c in
            c.deviceRateLimitPerSecond = 1
            c.deviceRateLimitBurst = 3
        }
        let device = try await h.device()
        let token = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development).hex
        let c = try await h.connect()
        let auth = try h.bearer()
        for _ in 0..<3 { #expect(try await c.send(h.request(token: token, authorization: auth)).status == 200) }
        expectError(try await c.send(h.request(token: token, authorization: auth)), .tooManyRequests)
        h.clock.advance(by: 1)
        #expect(try await c.send(h.request(token: token, authorization: auth)).status == 200)
        await c.close()
        await device.close()
        await h.stop()
    }

    @Test func storeFailureIsInternalServerError() async throws {
        let h = try await GatewayHarness.start { c in c.storage = .custom(FaultyGatewayStore(failing: .commit)) }
        let device = try await h.device()
        let token = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development).hex
        let c = try await h.connect()
        expectError(try await c.send(h.request(token: token, authorization: try h.bearer())), .internalServerError)
        await c.close()
        await device.close()
        await h.stop()
    }

    @Test(.timeLimit(.minutes(1))) func aStalledRequestIsAnsweredIdleTimeout() async throws {
        let h = try await GatewayHarness.start { c in
            c.providerRequestTimeout = .seconds(10)
            c.providerIdleCheckInterval = .milliseconds(5)
        }
        let device = try await h.device()
        let token = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development).hex
        let c = try await h.connect()
        let auth = try h.bearer()
        // A first request authenticates the connection, which lifts its stream limit from 1:
        // otherwise the request after the stalled one would wait for its stream.
        #expect(try await c.send(h.request(token: token, authorization: auth)).status == 200)
        // Headers, and then nothing: the body never comes, the stream never ends.
        var stalled = h.request(token: token, authorization: auth, extra: [("apns-id", "8E1C2D4A-0B3F-4C5D-9E6F-7A8B9C0D1E2F")])
        stalled.endsStream = false
        let answer = Task { try await c.send(stalled) }
        // The connection goes on meanwhile.
        #expect(try await c.send(h.request(token: token, authorization: auth)).status == 200)
        // Time passes on the test clock until the stalled request is answered: whenever its
        // headers reached the gateway, a later step puts them past the 10 s.
        let ticker = Task {
            while !Task.isCancelled {
                h.clock.advance(by: 11)
                try? await Task.sleep(for: .milliseconds(10))
            }
        }
        let response = try await answer.value
        ticker.cancel()
        expectError(response, .idleTimeout)
        #expect(response.apnsID == "8E1C2D4A-0B3F-4C5D-9E6F-7A8B9C0D1E2F")
        // The connection goes on; only the completed request was stored.
        #expect(try await c.send(h.request(token: token, authorization: auth)).status == 200)
        #expect(try h.gateway.store.pendingPushes(deviceID: device.deviceID, after: 0, limit: 10).count == 3)
        await c.close()
        await device.close()
        await h.stop()
    }

    @Test(.timeLimit(.minutes(1))) func aFullCommitQueueIsServiceUnavailable() async throws {
        let store = FaultyGatewayStore(holdingCommits: true)
        let h = try await GatewayHarness.start { c in
            c.storage = .custom(store)
            c.maximumQueuedPushes = 2
        }
        let device = try await h.device()
        let token = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development).hex
        let c = try await h.connect()
        let auth = try h.bearer()
        // The first push is in a commit that cannot finish; two more wait for the next one.
        async let first = c.send(h.request(token: token, authorization: auth))
        #expect(await store.waitForCommit())
        // Three more: whichever arrives third finds the queue full and is refused at once (the
        // other two cannot complete while the commit is held, so it is the first answer).
        let (refused, later) = try await withThrowingTaskGroup(of: APNsResponse.self) { group in
            for _ in 0..<3 { group.addTask { try await c.send(h.request(token: token, authorization: auth)) } }
            let refused = try await group.next()!
            store.releaseCommits()
            var later: [APNsResponse] = []
            for try await response in group { later.append(response) }
            return (refused, later)
        }
        expectError(refused, .serviceUnavailable)
        #expect(later.map(\.status) == [200, 200])
        #expect(try await first.status == 200)
        #expect(try store.pendingPushes(deviceID: device.deviceID, after: 0, limit: 10).count == 3)
        await c.close()
        await device.close()
        await h.stop()
    }

    @Test func gracefulShutdownSendsGoAwayShutdown() async throws {
        let h = try await GatewayHarness.start()
        let device = try await h.device()
        let token = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development).hex
        let c = try await h.connect()
        #expect(try await c.send(h.request(token: token, authorization: try h.bearer())).status == 200)
        await h.stop()
        await c.waitUntilClosed()
        #expect(await c.goAwayReason() == "Shutdown")
        await device.close()
    }

    @Test func flowControlCreditIsReturned() async throws {
        // More body bytes than one connection window (65,535) on one connection, and one body
        // larger than a stream window: both must complete.
        let h = try await GatewayHarness.start { c in c.deviceRateLimitPerSecond = 0 }
        let device = try await h.device()
        let token = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development).hex
        let c = try await h.connect()
        let auth = try h.bearer()
        let body = "{\"aps\":{\"alert\":\"" + String(repeating: "x", count: 1000) + "\"}}"
        try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<150 { group.addTask { try await c.send(h.request(token: token, authorization: auth, body: body)).status } }
            for try await status in group { #expect(status == 200) }
        }
        let huge = "{\"a\":\"" + String(repeating: "y", count: 100_000) + "\"}"
        expectError(try await c.send(h.request(token: token, authorization: auth, body: huge)), .payloadTooLarge)
        await c.close()
        await device.close()
        await h.stop()
    }

    @Test func cleartextPriorKnowledge() async throws {
        let h = try await GatewayHarness.start { c in c.providerTransport = .cleartext }
        let device = try await h.device()
        let token = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development).hex
        let c = try await h.connect(tls: false)
        #expect(try await c.send(h.request(token: token, authorization: try h.bearer())).status == 200)
        await c.close()
        await device.close()
        await h.stop()
    }

    @Test func noALPNStillSpeaksHTTP2() async throws {
        let h = try await GatewayHarness.start()
        let device = try await h.device()
        let token = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development).hex
        var configuration = APNsClientConfiguration(host: "127.0.0.1", port: h.providerPort, trustRootPaths: [h.certificatePath])
        configuration.offerALPN = false
        let c = try await APNsConnection.connect(configuration)
        #expect(try await c.send(h.request(token: token, authorization: try h.bearer())).status == 200)
        await c.close()
        await device.close()
        await h.stop()
    }
}

/// An in-memory store with one operation that fails: the error paths (a commit: `500`; a
/// backlog page read: the device connection closes with an error). With `holdingCommits`, each
/// commit of pushes signals `commitEntered` and waits until `releaseCommits()` (a store that
/// cannot keep up). Its group commit takes delivery events, as SQLite's.
final class FaultyGatewayStore: GroupCommitsEvents {
    enum Operation: Sendable { case commit, backlogPages }
    let inner = InMemoryGatewayStore()
    let failing: Operation?
    private let commitGate: DispatchSemaphore?
    let commitEntered = DispatchSemaphore(value: 0)

    init(failing: Operation? = nil, holdingCommits: Bool = false) {
        self.failing = failing
        self.commitGate = holdingCommits ? DispatchSemaphore(value: 0) : nil
    }

    /// Lets held commits (and every later one) through.
    func releaseCommits() { commitGate?.signal() }

    /// Waits (off the caller's thread, at most 10 s of real time) until a commit has begun.
    func waitForCommit() async -> Bool {
        let entered = commitEntered
        return await Task.detached { entered.wait(timeout: .now() + 10) == .success }.value
    }

    func addKey(_ key: ProviderKeyRecord) throws(GatewayStoreError) { try inner.addKey(key) }
    func key(id: String) throws(GatewayStoreError) -> ProviderKeyRecord? { inner.key(id: id) }
    func keys() throws(GatewayStoreError) -> [ProviderKeyRecord] { inner.keys() }
    func revokeKey(id: String) throws(GatewayStoreError) -> ProviderKeyRecord { try inner.revokeKey(id: id) }
    func registerApp(_ app: GatewayAppRecord) throws(GatewayStoreError) { try inner.registerApp(app) }
    func app(bundleID: String) throws(GatewayStoreError) -> GatewayAppRecord? { inner.app(bundleID: bundleID) }
    func apps() throws(GatewayStoreError) -> [GatewayAppRecord] { inner.apps() }
    func registerDevice(_ device: GatewayDeviceRecord) throws(GatewayStoreError) { inner.registerDevice(device) }
    func device(id: String) throws(GatewayStoreError) -> GatewayDeviceRecord? { inner.device(id: id) }
    func addToken(_ token: DeviceTokenRecord) throws(GatewayStoreError) { try inner.addToken(token) }
    func token(_ token: String) throws(GatewayStoreError) -> DeviceTokenRecord? { inner.token(token) }
    func tokenCount(deviceID: String) throws(GatewayStoreError) -> Int { inner.tokenCount(deviceID: deviceID) }
    func activeToken(deviceID: String, bundleID: String, environment: APNsEnvironment) throws(GatewayStoreError) -> DeviceTokenRecord? {
        inner.activeToken(deviceID: deviceID, bundleID: bundleID, environment: environment)
    }
    func unregisterTokens(deviceID: String, bundleID: String, at: EpochMilliseconds) throws(GatewayStoreError) -> [DeviceTokenRecord] {
        inner.unregisterTokens(deviceID: deviceID, bundleID: bundleID, at: at)
    }
    /// Pushes and acknowledgements of each commit, in order, and its delivery events when it had any.
    let commitSizes = Mutex<[[Int]]>([])

    func commit(pushes: [NewPush], acknowledged: [Int64], at: EpochMilliseconds) throws(GatewayStoreError) -> [StoredPush] {
        try commit(pushes: pushes, acknowledged: acknowledged, events: [], at: at)
    }

    func commit(pushes: [NewPush], acknowledged: [Int64], events: [DeviceEventBatch], at: EpochMilliseconds) throws(GatewayStoreError) -> [StoredPush] {
        let eventCount = events.reduce(0) { $0 + $1.events.count }
        commitSizes.withLock { $0.append(events.isEmpty ? [pushes.count, acknowledged.count] : [pushes.count, acknowledged.count, eventCount]) }
        if failing == .commit { throw .backend("disk full") }
        if let commitGate, !pushes.isEmpty {
            commitEntered.signal()
            commitGate.wait()
            commitGate.signal()
        }
        let stored = inner.commit(pushes: pushes, acknowledged: acknowledged, at: at)
        for batch in events { try inner.recordEvents(batch.events, deviceID: batch.deviceID, at: at) }
        return stored
    }
    func prepareBacklog(deviceID: String, now: EpochMilliseconds) throws(GatewayStoreError) -> Int { inner.prepareBacklog(deviceID: deviceID, now: now) }
    func pendingPushes(deviceID: String, after: Int64, limit: Int) throws(GatewayStoreError) -> [StoredPush] {
        if failing == .backlogPages { throw .backend("disk unreadable") }
        return inner.pendingPushes(deviceID: deviceID, after: after, limit: limit)
    }
    func status(apnsID: String) throws(GatewayStoreError) -> [PushStatus] { inner.status(apnsID: apnsID) }
    func recordEvent(_ event: DeliveryEvent, apnsID: String, deviceID: String, at: EpochMilliseconds) throws(GatewayStoreError) -> Bool {
        inner.recordEvent(event, apnsID: apnsID, deviceID: deviceID, at: at)
    }
    func recordEvents(_ events: [DeviceEventReport], deviceID: String, at: EpochMilliseconds) throws(GatewayStoreError) {
        inner.recordEvents(events, deviceID: deviceID, at: at)
    }
    func expirePushes(now: EpochMilliseconds, limit: Int) throws(GatewayStoreError) -> Int { inner.expirePushes(now: now, limit: limit) }
    func prunePushes(finishedBefore cutoff: EpochMilliseconds, limit: Int) throws(GatewayStoreError) -> Int {
        inner.prunePushes(finishedBefore: cutoff, limit: limit)
    }
}
