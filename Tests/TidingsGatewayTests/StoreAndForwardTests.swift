import Crypto
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Testing
import TidingsCore
import TidingsDevice
import TidingsGateway
import TidingsStorage
import TidingsTesting

@Suite("Store and forward", .serialized)
struct StoreAndForwardTests {
    @Test func connectedDeviceGetsPushesInOrderAndAcks() async throws {
        let h = try await GatewayHarness.start(store: .sqlite)
        let device = try await h.device()
        let token = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development)
        #expect(try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development) == token, "the same token until the app is removed")
        let collector = await PushCollector.start(device)
        let c = try await h.connect()
        let auth = try h.bearer()
        var ids: [String] = []
        for i in 0..<20 {
            let r = try await c.send(h.request(token: token.hex, authorization: auth, extra: [("apns-collapse-id", "c\(i)")],
                                               body: #"{"aps":{"alert":"n\#(i)"},"i":\#(i)}"#))
            #expect(r.status == 200)
            ids.append(try #require(r.apnsID))
        }
        let got = await collector.wait(for: 20)
        #expect(got.map(\.apnsID) == ids)
        #expect(got.map(\.sequence) == got.map(\.sequence).sorted())
        let first = try #require(got.first)
        #expect(first.token == token.hex)
        #expect(first.topic == GatewayHarness.bundleID)
        #expect(first.collapseID == "c0")
        #expect(try first.parsedPayload().notificationContent().body == "n0")
        // The acknowledgement is durable: the status says delivered.
        var status: [PushStatus] = []
        for _ in 0..<200 {
            status = try await h.gateway.status(apnsID: ids[0])
            if status.first?.deliveredAt != nil { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(status.first?.stage == "delivered")
        // The daemon reports later stages.
        device.report(.presented, apnsID: ids[0])
        #expect(try await h.gateway.recordDeliveryEvent(.answered, apnsID: ids[0], deviceID: device.deviceID))
        for _ in 0..<200 {
            status = try await h.gateway.status(apnsID: ids[0])
            if status.first?.presentedAt != nil { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(status.first?.presentedAt != nil)
        #expect(status.first?.stage == "answered")
        await c.close()
        await device.close()
        await h.stop()
    }

    @Test func maintenanceExpiresAndPrunesFinishedPushesAfterTheRetention() async throws {
        let h = try await GatewayHarness.start(store: .sqlite) { $0.pushRetention = .seconds(3600) }
        let key = P256.Signing.PrivateKey()
        let device = try await h.device(key: key)
        let token = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development)
        await device.close()
        let c = try await h.connect()
        let auth = try h.bearer()
        let expiring = try #require(try await c.send(h.request(token: token.hex, authorization: auth,
                                                               extra: [("apns-expiration", "\(h.nowSeconds + 60)")])).apnsID)
        let delivered = try #require(try await c.send(h.request(token: token.hex, authorization: auth)).apnsID)
        await c.close()
        // Two minutes later the first has expired; the second is delivered and acknowledged.
        h.clock.advance(by: 120)
        let report10 = try await h.gateway.runMaintenance()
        #expect(report10.expired == 1 && report10.pruned == 0)
        let again = try await h.device(key: key)
        let collector = await PushCollector.start(again)
        #expect(await collector.wait(for: 1).map(\.apnsID) == [delivered])
        var status: [PushStatus] = []
        for _ in 0..<200 {
            status = try await h.gateway.status(apnsID: delivered)
            if status.first?.deliveredAt != nil { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(status.first?.stage == "delivered")
        #expect(try await h.gateway.status(apnsID: expiring).first?.discardReason == .expired)
        // Within the retention both stay visible; after it both are gone.
        h.clock.advance(by: 1800)
        let report00 = try await h.gateway.runMaintenance()
        #expect(report00.expired == 0 && report00.pruned == 0)
        h.clock.advance(by: 3600)
        let report02 = try await h.gateway.runMaintenance()
        #expect(report02.expired == 0 && report02.pruned == 2)
        #expect(try await h.gateway.status(apnsID: delivered).isEmpty)
        #expect(try await h.gateway.status(apnsID: expiring).isEmpty)
        await again.close()
        await h.stop()
    }

    @Test func offlineDeviceGetsStoredPushesOnReconnectWithPolicies() async throws {
        let h = try await GatewayHarness.start(store: .sqlite)
        let (key, allToken, latestToken) = try await h.offlineDeviceWithBothPolicies()

        let c = try await h.connect()
        let auth = try h.bearer()
        func push(_ token: String, _ topic: String, _ body: String, _ extra: [(String, String)] = []) async throws -> String {
            let r = try await c.send(h.request(token: token, topic: topic, authorization: auth, extra: extra, body: body))
            #expect(r.status == 200)
            return r.apnsID!
        }
        let a1 = try await push(allToken, GatewayHarness.bundleID, #"{"n":1}"#, [("apns-collapse-id", "score")])
        let a2 = try await push(allToken, GatewayHarness.bundleID, #"{"n":2}"#)
        let a3 = try await push(allToken, GatewayHarness.bundleID, #"{"n":3}"#, [("apns-collapse-id", "score")])
        let once = try await push(allToken, GatewayHarness.bundleID, #"{"n":4}"#, [("apns-expiration", "0")])
        let short = try await push(allToken, GatewayHarness.bundleID, #"{"n":5}"#, [("apns-expiration", String(h.nowSeconds + 60))])
        let l1 = try await push(latestToken, "com.example.latest", #"{"n":6}"#)
        let l2 = try await push(latestToken, "com.example.latest", #"{"n":7}"#)
        h.clock.advance(by: 120)

        let device = try await h.device(key: key)
        let collector = await PushCollector.start(device)
        let got = await collector.wait(for: 3)
        // all: a1 coalesced into a3 by collapse id; expiration 0 never stored; the 60 s push expired.
        // apns: only the latest per app and device.
        #expect(got.map(\.apnsID) == [a2, a3, l2])
        #expect(try await h.gateway.status(apnsID: a1).first?.discardReason == .coalesced)
        #expect(try await h.gateway.status(apnsID: once).first?.discardReason == .expired)
        #expect(try await h.gateway.status(apnsID: short).first?.discardReason == .expired)
        #expect(try await h.gateway.status(apnsID: l1).first?.discardReason == .coalesced)
        await c.close()
        await device.close()
        await h.stop()
    }

    @Test func unacknowledgedPushesComeAgainAndSurviveRestart() async throws {
        let dir = TemporaryDirectories.make(prefix: "tidings-gw-")
        let teamKey = P256.Signing.PrivateKey()
        let key = P256.Signing.PrivateKey()
        var h = try await GatewayHarness.start(store: .sqlite, directory: dir, teamKey: teamKey)
        var device = try await h.device(key: key)
        let token = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development).hex
        var collector = await PushCollector.start(device, acknowledge: false)
        let c = try await h.connect()
        let r = try await c.send(h.request(token: token, authorization: try h.bearer()))
        #expect(r.status == 200)
        #expect(await collector.wait(for: 1).map(\.apnsID) == [r.apnsID!])
        await c.close()
        await device.close()
        await h.stop()

        // Same data directory, same certificate, the push is still owed.
        h = try await GatewayHarness.start(store: .sqlite, directory: dir, teamKey: teamKey)
        device = try await h.device(key: key)
        collector = await PushCollector.start(device)
        let again = await collector.wait(for: 1)
        #expect(again.map(\.apnsID) == [r.apnsID!])
        await device.close()
        // Acknowledged now: not sent a third time.
        for _ in 0..<200 {
            if try await h.gateway.status(apnsID: r.apnsID!).first?.deliveredAt != nil { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        device = try await h.device(key: key)
        collector = await PushCollector.start(device)
        #expect(await collector.wait(for: 1, timeout: .milliseconds(500)).isEmpty)
        await device.close()
        await h.stop()
    }

    @Test func deviceMustProveItsKey() async throws {
        let h = try await GatewayHarness.start()
        // A second connection with the same key replaces the first.
        let key = P256.Signing.PrivateKey()
        let first = try await h.device(key: key)
        let second = try await h.device(key: key)
        #expect(first.deviceID == second.deviceID)
        await first.waitUntilClosed()
        #expect(h.gateway.connectedDeviceCount == 1)
        await second.close()
        await h.stop()
    }

    @Test func adminEndpointServesStatusAndMetrics() async throws {
        let h = try await GatewayHarness.start()
        let device = try await h.device()
        let token = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development).hex
        let c = try await h.connect()
        let r = try await c.send(h.request(token: token, authorization: try h.bearer()))
        let port = try #require(h.addresses.admin?.port)
        let (statusCode, statusBody) = try await httpGet(port: port, path: "/status/\(r.apnsID!)")
        #expect(statusCode == 200)
        #expect(statusBody.contains(r.apnsID!))
        #expect(statusBody.contains("\"storedAt\""))
        #expect(!statusBody.contains(token), "the device token is redacted")
        let (metricsCode, metrics) = try await httpGet(port: port, path: "/metrics")
        #expect(metricsCode == 200)
        #expect(metrics.contains("tidings_gateway_pushes_accepted_total 1"))
        #expect(!metrics.contains("tidings_gateway_delivery_events_total{event=\"presented\"} 1"))
        // A presented event, once recorded, is counted (the benchmarks wait on this count).
        #expect(try await device.record(.presented, apnsID: r.apnsID!))
        let after = try await httpGet(port: port, path: "/metrics").1
        #expect(after.contains("tidings_gateway_delivery_events_total{event=\"presented\"} 1"), "\(after)")
        #expect(after.contains("tidings_gateway_delivery_events_total{event=\"answered\"} 0"), "\(after)")
        #expect(after.contains("tidings_gateway_delivery_event_lag_seconds_count 0"), "an event without its time has no lag: \(after)")
        #expect(try await httpGet(port: port, path: "/status/nope").0 == 404)
        await c.close()
        await device.close()
        await h.stop()
    }

    /// An event that says when it happened is recorded at that time, and how long it took to be
    /// durable at the gateway is in `tidings_gateway_delivery_event_lag_seconds`: here shown
    /// 500 ms after acceptance and reported 1.5 s later (over 1 s, within 5 s).
    @Test func anEventsTimeIsRecordedAndItsLagMeasured() async throws {
        let h = try await GatewayHarness.start()
        let device = try await h.device()
        let token = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development).hex
        let c = try await h.connect()
        let r = try await c.send(h.request(token: token, authorization: try h.bearer()))
        let accepted = try #require(try await h.gateway.status(apnsID: r.apnsID!).first?.acceptedAt)
        h.clock.advance(by: 2)
        #expect(try await device.record(.presented, apnsID: r.apnsID!, occurredAt: accepted + 500))
        #expect(try await h.gateway.status(apnsID: r.apnsID!).first?.presentedAt == accepted + 500)
        let metrics = try await httpGet(port: try #require(h.addresses.admin?.port), path: "/metrics").1
        #expect(metrics.contains("tidings_gateway_delivery_event_lag_seconds_count 1"), "\(metrics)")
        #expect(metrics.contains(#"tidings_gateway_delivery_event_lag_seconds_bucket{le="1.0"} 0"#), "\(metrics)")
        #expect(metrics.contains(#"tidings_gateway_delivery_event_lag_seconds_bucket{le="5.0"} 1"#), "\(metrics)")
        await c.close()
        await device.close()
        await h.stop()
    }
}

/// A tiny HTTP/1.1 GET over loopback (curl-free).
func httpGet(port: Int, path: String) async throws -> (Int, String) {
    let socket = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .connect(host: "127.0.0.1", port: port) { channel in
            channel.eventLoop.makeCompletedFuture { try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel) }
        }
    return try await socket.executeThenClose { inbound, outbound in
        try await outbound.write(ByteBuffer(string: "GET \(path) HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n"))
        var text = ""
        for try await chunk in inbound { text += String(buffer: chunk) }
        let status = Int(text.split(separator: " ").dropFirst().first ?? "") ?? 0
        let body = text.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n")
        return (status, body)
    }
}
