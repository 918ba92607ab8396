import Crypto
import Foundation
import Testing
import TidingsCore
import TidingsDevice
import TidingsGateway
import TidingsStorage

/// A reconnecting device's backlog goes out in pages (docs/gateway.md, "Backlog"): through the
/// real device channel, with pages far smaller than the backlog.
@Suite("Backlog paging", .serialized)
struct BacklogPagingTests {
    /// Pages of 4, at most 2 pages unacknowledged.
    static func start(store: GatewayHarness.StoreKind = .sqlite) async throws -> GatewayHarness {
        try await GatewayHarness.start(store: store) {
            $0.deviceBacklogPageSize = 4
            $0.deviceBacklogPagesInFlight = 2
        }
    }

    /// A registered device (its token for the harness app) that is offline again.
    static func offlineDevice(_ h: GatewayHarness, topic: String = GatewayHarness.bundleID) async throws -> (P256.Signing.PrivateKey, String) {
        let key = P256.Signing.PrivateKey()
        let device = try await h.device(key: key)
        let token = try await device.requestToken(topic: topic, environment: .development).hex
        await device.close()
        return (key, token)
    }

    /// A provider connection with its token (one per connection: a new one on every request
    /// would be `TooManyProviderTokenUpdates`).
    struct Provider {
        let h: GatewayHarness
        let c: APNsConnection
        let auth: String

        init(_ h: GatewayHarness) async throws {
            self.h = h
            c = try await h.connect()
            auth = try h.bearer()
        }

        /// `count` pushes to `token`, each answered 200; their apns-ids.
        func send(token: String, count: Int, tag: String, topic: String = GatewayHarness.bundleID,
                  extra: (Int) -> [(String, String)] = { _ in [] }) async throws -> [String] {
            var ids: [String] = []
            for i in 0..<count {
                let r = try await c.send(h.request(token: token, topic: topic, authorization: auth, extra: extra(i),
                                                   body: #"{"aps":{"alert":"\#(tag)\#(i)"}}"#))
                #expect(r.status == 200)
                ids.append(try #require(r.apnsID))
            }
            return ids
        }

        /// After everything arrived, one more push: if it is the next to arrive, nothing else
        /// was queued behind the backlog (no duplicate after the last expected push).
        func expectNothingMoreThen(token: String, collector: PushCollector, already: Int) async throws {
            let marker = try await send(token: token, count: 1, tag: "marker")
            let got = await collector.wait(for: already + 1, timeout: .seconds(10))
            #expect(got.count == already + 1)
            #expect(got.last?.apnsID == marker.first)
        }

        /// Closes the provider connection, the device and the gateway.
        func finish(_ device: DeviceConnection) async {
            await c.close()
            await device.close()
            await h.stop()
        }
    }

    /// Every push once, in strictly increasing sequence order.
    static func expectOnceInOrder(_ got: [DevicePush], sourceLocation: SourceLocation = #_sourceLocation) {
        let sequences = got.map(\.sequence)
        #expect(zip(sequences, sequences.dropFirst()).allSatisfy { $0 < $1 }, "in order, none twice: \(sequences)", sourceLocation: sourceLocation)
        #expect(Set(got.map(\.apnsID)).count == got.count, "no apns-id twice", sourceLocation: sourceLocation)
    }

    @Test(arguments: [GatewayHarness.StoreKind.sqlite, .memory])
    func offlineDeviceReceivesABacklogOfManyPagesInOrderOnce(store: GatewayHarness.StoreKind) async throws {
        let h = try await Self.start(store: store)
        let (key, token) = try await Self.offlineDevice(h)
        let p = try await Provider(h)
        let sent = try await p.send(token: token, count: 30, tag: "n")  // 7½ pages
        let device = try await h.device(key: key)
        let collector = await PushCollector.start(device)
        let got = await collector.wait(for: 30)
        #expect(got.map(\.apnsID) == sent)
        Self.expectOnceInOrder(got)
        try await p.expectNothingMoreThen(token: token, collector: collector, already: 30)
        await p.finish(device)
    }

    /// The device acknowledges nothing at first: the gateway stops at two pages. Pushes accepted
    /// meanwhile come after the whole backlog, once, in order.
    @Test func livePushesDuringTheBacklogFollowItOnceInOrder() async throws {
        let h = try await Self.start()
        let (key, token) = try await Self.offlineDevice(h)
        let p = try await Provider(h)
        let backlog = try await p.send(token: token, count: 20, tag: "b")
        let device = try await h.device(key: key)
        let collector = await PushCollector.start(device, acknowledge: false)
        let firstPages = await collector.wait(for: 8)
        #expect(firstPages.map(\.apnsID) == Array(backlog.prefix(8)))
        // Accepted (durable) while the device holds two unacknowledged pages.
        let live = try await p.send(token: token, count: 5, tag: "live")
        // Nothing beyond the two pages while none is acknowledged (a short real-time window:
        // a gateway without the bound would have sent the rest by now).
        #expect(await collector.wait(for: 9, timeout: .milliseconds(300)).count == 8)
        await collector.startAcknowledging()
        // More live pushes while the rest of the backlog pages in.
        let live2 = try await p.send(token: token, count: 5, tag: "more")
        let got = await collector.wait(for: 30)
        #expect(got.map(\.apnsID) == backlog + live + live2)
        Self.expectOnceInOrder(got)
        try await p.expectNothingMoreThen(token: token, collector: collector, already: 30)
        await p.finish(device)
    }

    /// Live pushes race the page reads (the device acknowledges at once, pages of 4 read back to
    /// back): whichever side of a read they land on, each arrives once, after the backlog.
    @Test func livePushesRacingThePageReadsArriveOnce() async throws {
        let h = try await Self.start()
        let (key, token) = try await Self.offlineDevice(h)
        let p = try await Provider(h)
        let backlog = try await p.send(token: token, count: 120, tag: "b")
        let device = try await h.device(key: key)
        let collector = await PushCollector.start(device)
        let live = try await p.send(token: token, count: 40, tag: "live")
        let got = await collector.wait(for: 160)
        #expect(got.map(\.apnsID) == backlog + live)
        Self.expectOnceInOrder(got)
        try await p.expectNothingMoreThen(token: token, collector: collector, already: 160)
        await p.finish(device)
    }

    /// The storage policy decides over the whole backlog: the latest push for a token (apns) or
    /// collapse id (all) lies in the last page; the earlier ones are not sent.
    @Test func storagePolicyAcrossPages() async throws {
        let h = try await GatewayHarness.start(store: .sqlite) { $0.deviceBacklogPageSize = 2 }
        let (key, allToken, latestToken) = try await h.offlineDeviceWithBothPolicies()
        let p = try await Provider(h)
        var latest: [String] = [], scores: [String] = [], plain: [String] = []
        for i in 0..<5 {
            latest += try await p.send(token: latestToken, count: 1, tag: "l\(i)", topic: "com.example.latest")
            scores += try await p.send(token: allToken, count: 1, tag: "s\(i)") { _ in [("apns-collapse-id", "score")] }
            plain += try await p.send(token: allToken, count: 1, tag: "p\(i)")
        }
        let device = try await h.device(key: key)
        let collector = await PushCollector.start(device)
        let got = await collector.wait(for: 7)
        // In sequence order: p0…p3, then l4, s4, p4 (the last round).
        #expect(got.map(\.apnsID) == Array(plain.prefix(4)) + [latest[4], scores[4], plain[4]])
        Self.expectOnceInOrder(got)
        for id in latest.prefix(4) + scores.prefix(4) {
            #expect(try await h.gateway.status(apnsID: id).first?.discardReason == .coalesced)
        }
        try await p.expectNothingMoreThen(token: allToken, collector: collector, already: 7)
        await p.finish(device)
    }

    /// The same device connects again mid-backlog: the old connection closes, the new one gets
    /// the whole backlog (the unacknowledged pushes of the old one again), in order, once.
    @Test func reconnectMidBacklogReplacesTheOldSession() async throws {
        let h = try await Self.start()
        let (key, token) = try await Self.offlineDevice(h)
        let p = try await Provider(h)
        let backlog = try await p.send(token: token, count: 20, tag: "b")
        let first = try await h.device(key: key)
        let firstCollector = await PushCollector.start(first, acknowledge: false)
        #expect(await firstCollector.wait(for: 8).count == 8)
        let second = try await h.device(key: key)
        await first.waitUntilClosed()
        let collector = await PushCollector.start(second)
        let got = await collector.wait(for: 20)
        #expect(got.map(\.apnsID) == backlog)
        Self.expectOnceInOrder(got)
        try await p.expectNothingMoreThen(token: token, collector: collector, already: 20)
        await p.finish(second)
    }

    /// A page read that fails closes the connection with an error, as before paging.
    @Test func aFailingPageReadClosesWithAnError() async throws {
        let store = FaultyGatewayStore(failing: .backlogPages)
        let h = try await GatewayHarness.start { $0.storage = .custom(store) }
        let device = try await h.device()
        var failure: (any Error)?
        do { for try await _ in device.pushes {} } catch { failure = error }
        #expect((failure as? DeviceClientError)?.reason == "InternalServerError")
        #expect((failure as? DeviceClientError)?.message.contains("cannot load stored pushes") == true)
        await device.close()
        await h.stop()
    }
}
