import Foundation
import Testing
import TidingsCore
import TidingsDevice
import TidingsGateway
import TidingsStorage

/// The provider connection under clients that misbehave, or behave as real ones do: over the
/// real gateway (h2c), with a client that writes frames as bytes (`RawHTTP2Client`).
@Suite("Provider connections", .serialized)
struct ProviderConnectionTests {
    struct Setup {
        let h: GatewayHarness
        let device: DeviceConnection
        let token: String
        let auth: String
        let client: RawHTTP2Client

        func stop() async {
            await client.close()
            await device.close()
            await h.stop()
        }
    }

    /// A cleartext gateway, a device with a token, and a raw client whose first push (stream 1)
    /// authenticated the connection and whose SETTINGS raising the stream limit arrived.
    static func setUp(configure: (inout GatewayConfiguration) -> Void = { _ in }) async throws -> Setup {
        let h = try await GatewayHarness.start { c in
            c.providerTransport = .cleartext
            c.deviceRateLimitPerSecond = 0
            configure(&c)
        }
        let device = try await h.device()
        let token = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development).hex
        let auth = try h.bearer()
        let client = try await RawHTTP2Client.connect(port: h.providerPort)
        try await client.send(client.push(1, token: token, authorization: auth))
        let r = await client.wait { r in
            r.statuses[1] != nil && r.frames.contains { $0.type == 0x4 && $0.flags & 0x1 == 0 && $0.payload.count == 6 && $0.payload[1] == 0x3 }
        }
        #expect(r.statuses[1] == "200")
        return Setup(h: h, device: device, token: token, auth: auth, client: client)
    }

    /// Issue 11 § 3: a client that resets streams whose pushes are being committed gets every
    /// other stream answered; the reset streams' answers are dropped (their pushes stay
    /// stored), and the connection goes on without GOAWAY.
    @Test(.timeLimit(.minutes(2))) func aCancelledStreamNeverClosesTheConnection() async throws {
        let s = try await Self.setUp()
        let streams = (1...1000).map { UInt32(1 + 2 * $0) }
        let cancelled: Set<UInt32> = [streams[10], streams[500], streams[998]]
        var bytes: [UInt8] = []
        for id in streams {
            bytes += s.client.push(id, token: s.token, authorization: s.auth)
            if cancelled.contains(id) { bytes += RawHTTP2Client.reset(id) }
        }
        try await s.client.send(bytes)
        let expected = streams.filter { !cancelled.contains($0) }
        let r = await s.client.wait { r in r.closed || expected.allSatisfy { r.statuses[$0] != nil } }
        #expect(!r.closed, "the connection stays open")
        #expect(r.goAways.isEmpty)
        let statuses = r.statuses
        #expect(expected.filter { statuses[$0] == "200" }.count == expected.count, "every stream not reset is answered 200")
        // The connection goes on.
        try await s.client.send(s.client.push(2003, token: s.token, authorization: s.auth))
        let after = await s.client.wait { $0.statuses[2003] != nil || $0.closed }
        #expect(after.statuses[2003] == "200")
        // Every push was committed, the cancelled ones too (their commit was under way).
        #expect(try s.h.gateway.store.pendingPushes(deviceID: s.device.deviceID, after: 0, limit: 5000).count == 1002)
        await s.stop()
    }

    /// A stream reset while its device token is looked up in the store (a token the gateway
    /// has not cached): the request is abandoned, nothing is answered on it, and the
    /// connection goes on.
    @Test(.timeLimit(.minutes(1))) func aStreamResetDuringItsLookupIsAbandoned() async throws {
        let s = try await Self.setUp()
        let unknown = String(repeating: "cd", count: 32)
        var bytes: [UInt8] = []
        for id in stride(from: UInt32(3), through: 41, by: 2) {
            bytes += s.client.push(id, token: unknown, authorization: s.auth) + RawHTTP2Client.reset(id)
        }
        bytes += s.client.push(43, token: s.token, authorization: s.auth)
        try await s.client.send(bytes)
        var r = await s.client.wait { $0.statuses[43] != nil || $0.closed }
        #expect(r.statuses[43] == "200")
        try await s.client.send(s.client.push(45, token: s.token, authorization: s.auth))
        r = await s.client.wait { $0.statuses[45] != nil || $0.closed }
        #expect(!r.closed && r.goAways.isEmpty)
        #expect(r.statuses[45] == "200")
        // Stream 3 went to the store and was reset meanwhile: no answer. (Later ones may have
        // been answered from the cache's memory of the miss before their reset arrived.)
        #expect(r.frames.filter { $0.streamID == 3 }.isEmpty, "no answer on a reset stream")
        #expect(r.frames.filter { $0.streamID > 3 && $0.streamID <= 41 }.allSatisfy { $0.type != 0x1 || $0.field(":status") == "400" })
        await s.stop()
    }

    /// Issue 12 § 1 (APNSwift through AsyncHTTPClient): RST_STREAM(CANCEL) after every finished
    /// stream, far past NIOHTTP2's 200 resets in 30 s: resets of closed streams are no attack
    /// (RFC 9113 § 5.1) and every push succeeds on the one connection.
    @Test(.timeLimit(.minutes(2))) func resetsOfClosedStreamsDoNotCount() async throws {
        let s = try await Self.setUp()
        var next: UInt32 = 3
        var previous: [UInt32] = [1]
        for _ in 0..<11 {
            var bytes: [UInt8] = []
            for id in previous { bytes += RawHTTP2Client.reset(id) }  // closed: answered 200 already
            let batch = (0..<100).map { next + 2 * UInt32($0) }
            next += 200
            for id in batch { bytes += s.client.push(id, token: s.token, authorization: s.auth) }
            try await s.client.send(bytes)
            let r = await s.client.wait { r in r.closed || batch.allSatisfy { r.statuses[$0] != nil } }
            #expect(!r.closed && r.goAways.isEmpty, "\(r.goAways.map { ($0.errorCode ?? 0, $0.lastStreamID ?? 0) })")
            guard !r.closed else { break }
            #expect(batch.allSatisfy { r.statuses[$0] == "200" })
            previous = batch
        }
        // 1,100 resets of closed streams later, still open.
        try await s.client.send(RawHTTP2Client.reset(next - 2) + s.client.push(next, token: s.token, authorization: s.auth))
        let r = await s.client.wait { $0.statuses[next] != nil || $0.closed }
        #expect(r.statuses[next] == "200")
        #expect(r.resets.isEmpty, "the gateway reset no stream")
        await s.stop()
    }

    /// CVE-2023-44487 stays closed: streams opened and reset in a loop are cut off after 200
    /// resets with GOAWAY ENHANCE_YOUR_CALM, whose last_stream_id is the highest stream the
    /// gateway took (NIOHTTP2 writes 0).
    @Test(.timeLimit(.minutes(1))) func rapidResetIsStillCutOff() async throws {
        let s = try await Self.setUp()
        var bytes: [UInt8] = []
        for i in 0..<300 {
            let id = UInt32(3 + 2 * i)
            bytes += s.client.headers(id, [(":method", "POST"), (":scheme", "http"), (":path", "/3/device/\(s.token)"),
                                           (":authority", "127.0.0.1"), ("authorization", s.auth),
                                           ("apns-topic", GatewayHarness.bundleID)])
            bytes += RawHTTP2Client.reset(id)
        }
        try? await s.client.send(bytes)
        let r = await s.client.wait { $0.closed }
        #expect(r.closed)
        let goAway = try #require(r.goAways.last)
        #expect(goAway.errorCode == 0xb, "ENHANCE_YOUR_CALM")
        // The 201st reset (stream 403) tripped the limit, after stream 403's headers were taken.
        #expect(goAway.lastStreamID == 403)
        await s.stop()
    }

    /// A connection error (a PING frame of 7 bytes: FRAME_SIZE_ERROR) after two answered
    /// streams: the GOAWAY names stream 3, not NIOHTTP2's 2^31−1.
    @Test(.timeLimit(.minutes(1))) func connectionErrorGoAwayCarriesTheLastStreamTaken() async throws {
        let s = try await Self.setUp()
        try await s.client.send(s.client.push(3, token: s.token, authorization: s.auth))
        _ = await s.client.wait { $0.statuses[3] != nil }
        try? await s.client.send(RawHTTP2Client.frame(type: 0x6, flags: 0, streamID: 0, payload: [1, 2, 3, 4, 5, 6, 7]))
        let r = await s.client.wait { $0.closed }
        let goAway = try #require(r.goAways.last)
        #expect(goAway.errorCode == 0x6, "FRAME_SIZE_ERROR")
        #expect(goAway.lastStreamID == 3)
        await s.stop()
    }

    /// Graceful shutdown's GOAWAY names the last stream taken too.
    @Test(.timeLimit(.minutes(1))) func shutdownGoAwayCarriesTheLastStreamTaken() async throws {
        let s = try await Self.setUp()
        try await s.client.send(s.client.push(3, token: s.token, authorization: s.auth))
        _ = await s.client.wait { $0.statuses[3] != nil }
        await s.h.stop()
        let r = await s.client.wait { $0.closed }
        let goAway = try #require(r.goAways.last)
        #expect(goAway.errorCode == 0)
        #expect(goAway.lastStreamID == 3)
        #expect(goAway.goAwayDebugData == #"{"reason":"Shutdown"}"#)
        await s.client.close()
        await s.device.close()
    }

    /// Issue 11 § 2: a client that never acknowledges SETTINGS still gets one stream before its
    /// first valid token; a second concurrent one is refused (REFUSED_STREAM, which clients retry).
    @Test(.timeLimit(.minutes(1))) func oneStreamBeforeAuthenticationWithoutSettingsAck() async throws {
        let h = try await GatewayHarness.start { c in c.providerTransport = .cleartext }
        let device = try await h.device()
        let token = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development).hex
        let client = try await RawHTTP2Client.connect(port: h.providerPort, acknowledgesSettings: false)
        let auth = try h.bearer()
        var bytes: [UInt8] = []
        // Stream 1's body has not come yet: it is open. Streams 3 to 99 are refused.
        let headersOnly = client.headers(1, [(":method", "POST"), (":scheme", "http"), (":path", "/3/device/\(token)"),
                                             (":authority", "127.0.0.1"), ("authorization", auth),
                                             ("apns-topic", GatewayHarness.bundleID), ("apns-push-type", "alert")])
        bytes += headersOnly
        for id in stride(from: UInt32(3), through: 99, by: 2) { bytes += client.push(id, token: token, authorization: auth) }
        try await client.send(bytes)
        let refused = Array(stride(from: UInt32(3), through: 99, by: 2))
        let r = await client.wait { r in r.closed || refused.allSatisfy { id in r.resets.contains { $0.streamID == id } } }
        for id in refused {
            #expect(r.resets.first { $0.streamID == id }?.errorCode == 0x7, "stream \(id): REFUSED_STREAM")
            #expect(r.statuses[id] == nil, "stream \(id) not answered")
        }
        // Stream 1 completes and authenticates; then many streams are fine.
        try await client.send(RawHTTP2Client.data(1, Array(#"{"aps":{"alert":"Hello"}}"#.utf8)))
        _ = await client.wait { $0.statuses[1] != nil }
        #expect(client.received.statuses[1] == "200")
        var more: [UInt8] = []
        for id in stride(from: UInt32(101), through: 119, by: 2) { more += client.push(id, token: token, authorization: auth) }
        try await client.send(more)
        let after = await client.wait { r in stride(from: UInt32(101), through: 119, by: 2).allSatisfy { r.statuses[$0] != nil } }
        #expect(stride(from: UInt32(101), through: 119, by: 2).allSatisfy { after.statuses[$0] == "200" })
        await client.close()
        await device.close()
        await h.stop()
    }

    /// Issue 12 § 1: a 200 in the development environment carries `apns-unique-id`, a
    /// lower-case UUID of its own (Apple's; APNSwift exposes it); production sends none.
    @Test func uniqueIDInDevelopmentOnly() async throws {
        let s = try await Self.setUp()
        try await s.client.send(s.client.push(3, token: s.token, authorization: s.auth, extra: [("apns-id", "EABEAE54-14A8-11E5-B60B-1697F925EC7B")]))
        let r = await s.client.wait { $0.statuses[3] != nil }
        let headers = try #require(r.frames.first { $0.type == 0x1 && $0.streamID == 3 })
        let uniqueIDs = [r.frames.first { $0.type == 0x1 && $0.streamID == 1 }?.field("apns-unique-id"), headers.field("apns-unique-id")]
        for id in uniqueIDs {
            let id = try #require(id)
            #expect(id == id.lowercased())
            #expect((try? APNsID(header: id)) != nil)
            #expect(id != "eabeae54-14a8-11e5-b60b-1697f925ec7b")
        }
        #expect(uniqueIDs[0] != uniqueIDs[1], "one per notification")
        #expect(headers.field("apns-id") == "EABEAE54-14A8-11E5-B60B-1697F925EC7B")
        await s.stop()

        let h = try await GatewayHarness.start { c in
            c.providerTransport = .cleartext
            c.environment = .production
        }
        let device = try await h.device()
        let token = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .production).hex
        let client = try await RawHTTP2Client.connect(port: h.providerPort)
        try await client.send(client.push(1, token: token, authorization: try h.bearer()))
        let p = await client.wait { $0.statuses[1] != nil }
        #expect(p.statuses[1] == "200")
        #expect(p.frames.first { $0.type == 0x1 && $0.streamID == 1 }?.field("apns-unique-id") == nil)
        await client.close()
        await device.close()
        await h.stop()
    }

    /// Every 200 carries an `apns-unique-id` of its own across connections too: each provider
    /// connection draws its values from its own generator (`UniqueIDGenerator`, seeded from the
    /// system's secure generator per connection), and two connections' answers share none.
    @Test func uniqueIDsDifferAcrossConnections() async throws {
        let s = try await Self.setUp()
        let second = try await RawHTTP2Client.connect(port: s.h.providerPort)
        try await second.send(second.push(1, token: s.token, authorization: s.auth))
        _ = await second.wait { $0.statuses[1] != nil }
        let streams = Array(stride(from: UInt32(3), through: 41, by: 2))
        var ids: [String?] = []
        for client in [s.client, second] {
            try await client.send(streams.flatMap { client.push($0, token: s.token, authorization: s.auth) })
            let r = await client.wait { r in streams.allSatisfy { r.statuses[$0] != nil } }
            #expect(streams.allSatisfy { r.statuses[$0] == "200" })
            ids += ([1] + streams).map { id in r.frames.first { $0.type == 0x1 && $0.streamID == id }?.field("apns-unique-id") }
        }
        #expect(ids.count == 42 && ids.allSatisfy { $0 != nil })
        #expect(Set(ids.compactMap { $0 }).count == 42, "one per notification, across connections")
        await second.close()
        await s.stop()
    }

    /// Issue 11 § 1: untrusted numbers at their extremes are answered, never trap.
    @Test(.timeLimit(.minutes(1))) func extremeNumbersAreAnswered() async throws {
        let s = try await Self.setUp()
        var id: UInt32 = 1
        func send(_ extra: [(String, String)]) async throws -> RawHTTP2Client.Frame? {
            id += 2
            let stream = id
            try await s.client.send(s.client.push(stream, token: s.token, authorization: s.auth, extra: extra))
            let r = await s.client.wait { $0.statuses[stream] != nil || $0.resets.contains { $0.streamID == stream } || $0.closed }
            #expect(!r.closed)
            return r.frames.first { ($0.type == 0x1 || $0.type == 0x3) && $0.streamID == stream }
        }
        for value in ["9223372036854775807", "-9223372036854775808", "9223372036854775", "-1"] {
            #expect(try await send([("apns-expiration", value)])?.field(":status") == "200", "apns-expiration \(value)")
        }
        for value in ["99999999999999999999", "-99999999999999999999", "1e30", ""] {
            #expect(try await send([("apns-expiration", value)])?.field(":status") == "400", "apns-expiration \(value)")
        }
        for value in ["9223372036854775807", "-9223372036854775808", "99999999999999999999", "10.0"] {
            #expect(try await send([("apns-priority", value)])?.field(":status") == "400", "apns-priority \(value)")
        }
        for value in ["9223372036854775807", "99999999999999999999", "-9223372036854775808", "18446744073709551616"] {
            #expect(try await send([("content-length", value)])?.errorCode == 0x1, "content-length \(value): PROTOCOL_ERROR")
        }
        // A stream ID at the top of the range, then a window update as large as allowed.
        let top: UInt32 = 0x7FFF_FFFF
        try await s.client.send(s.client.push(top, token: s.token, authorization: s.auth))
        var r = await s.client.wait { $0.statuses[top] != nil || $0.closed }
        #expect(r.statuses[top] == "200")
        try? await s.client.send(RawHTTP2Client.frame(type: 0x8, flags: 0, streamID: 0, payload: [0x7F, 0xFF, 0xFF, 0xFF]))
        r = await s.client.wait { $0.closed }
        // 2^31−1 on top of the open window overflows it: FLOW_CONTROL_ERROR, and the GOAWAY
        // names the last stream taken.
        #expect(r.goAways.last?.errorCode == 0x3)
        #expect(r.goAways.last?.lastStreamID == top)
        await s.stop()
    }
}
