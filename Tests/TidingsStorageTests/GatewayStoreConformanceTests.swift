import Foundation
import Testing
import TidingsCore
import TidingsPostgres
import TidingsSQLite
import TidingsStorage
import TidingsTestSupport
import TidingsTesting

/// One suite, every gateway store backend.
@Suite("Gateway store conformance")
struct GatewayStoreConformanceTests {
    enum Backend: String, CaseIterable, CustomTestStringConvertible {
        case memory, sqlite, postgres
        var testDescription: String { rawValue }

        /// PostgreSQL where it is installed, and always under CI (where its absence fails).
        static var allCases: [Backend] {
            PostgresCluster.binaryDirectory != nil || ProcessInfo.processInfo.environment["CI"] != nil
                ? [.memory, .sqlite, .postgres] : [.memory, .sqlite]
        }

        func make() async throws -> any GatewayStore {
            switch self {
            case .memory: return InMemoryGatewayStore()
            case .sqlite:
                let dir = TemporaryDirectories.make(prefix: "gwstore-")
                try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
                return try SQLiteGatewayStore(path: dir.appendingPathComponent("gateway.sqlite").path)
            case .postgres:
                // A database per test on the process's cluster; 4 pushes per partition, so
                // every test crosses partitions.
                guard let cluster = try await PostgresCluster.shared() else { throw PostgresUnavailable() }
                return try PostgresGatewayStore(url: cluster.createDatabase(prefix: "conformance"), maximumConnections: 2, partitionSize: 4)
            }
        }
    }

    struct PostgresUnavailable: Error {}

    func push(_ id: String, token: String = "aa", device: String = "d1", bundle: String = "com.a", collapse: String? = nil,
              expiresAt: EpochMilliseconds = 10_000, acceptedAt: EpochMilliseconds = 100) -> NewPush {
        NewPush(apnsID: id, token: token, deviceID: device, bundleID: bundle, topic: Topic(rawValue: bundle)!, pushType: .alert, priority: .immediate,
                collapseID: collapse.flatMap(CollapseID.init(rawValue:)), expiresAt: expiresAt, payload: Array(#"{"aps":{"alert":"\#(id)"}}"#.utf8), acceptedAt: acceptedAt)
    }

    @Test(arguments: Backend.allCases)
    func pagesFollowTheSequenceAfterACursor(backend: Backend) async throws {
        let store = try await backend.make()
        try store.registerApp(GatewayAppRecord(bundleID: "com.a", teamID: "T", storagePolicy: .all, createdAt: 0))
        let stored = try store.commit(pushes: (1...7).flatMap { [push("a\($0)"), push("b\($0)", device: "d2")] }, acknowledged: [], at: 200)
        #expect(try store.prepareBacklog(deviceID: "d1", now: 300) == 0)
        let first = try store.pendingPushes(deviceID: "d1", after: 0, limit: 3)
        #expect(first.map(\.push.apnsID) == ["a1", "a2", "a3"])
        #expect(first.map(\.storedAt) == [200, 200, 200])
        #expect(first[0].push == push("a1"), "every column read back")
        // Acknowledged meanwhile (a4), committed meanwhile (a8): the next page skips a4, and a
        // push committed before a read began is in it.
        let a4 = try #require(stored.first { $0.push.apnsID == "a4" })
        _ = try store.commit(pushes: [push("a8", collapse: "c")], acknowledged: [a4.sequence], at: 250)
        let second = try store.pendingPushes(deviceID: "d1", after: first[2].sequence, limit: 3)
        #expect(second.map(\.push.apnsID) == ["a5", "a6", "a7"])
        let third = try store.pendingPushes(deviceID: "d1", after: second[2].sequence, limit: 3)
        #expect(third.map(\.push.apnsID) == ["a8"], "a short page: the end")
        #expect(third.first?.push.collapseID?.rawValue == "c")
        #expect(try store.pendingPushes(deviceID: "d1", after: third[0].sequence, limit: 3).isEmpty)
        #expect(try store.pendingPushes(deviceID: "d1", after: 0, limit: 0).isEmpty)
        #expect(try store.pendingPushes(deviceID: "nobody", after: 0, limit: 3).isEmpty)
        #expect(try store.pendingPushes(deviceID: "d2", after: 0, limit: 100).count == 7)
        // Reading does not deliver: the same page again.
        #expect(try store.pendingPushes(deviceID: "d1", after: 0, limit: 3) == first)
    }

    /// The policy decides over the whole backlog before any page is read: a push superseded by
    /// one that lies in a later page is never in an earlier page.
    @Test(arguments: Backend.allCases)
    func policyAppliesToTheWholeBacklogAcrossPages(backend: Backend) async throws {
        let store = try await backend.make()
        try store.registerApp(GatewayAppRecord(bundleID: "com.a", teamID: "T", storagePolicy: .apns, createdAt: 0))
        try store.registerApp(GatewayAppRecord(bundleID: "com.b", teamID: "T", storagePolicy: .all, createdAt: 0))
        var pushes: [NewPush] = []
        for i in 1...6 {
            pushes.append(push("a\(i)"))                                             // apns: only a6 stays
            pushes.append(push("b\(i)", token: "bb", bundle: "com.b", collapse: i % 2 == 0 ? "score" : nil))
            pushes.append(push("c\(i)", token: "cc", bundle: "com.b", collapse: "score"))  // same id, other token
        }
        pushes.append(push("gone", token: "bb", bundle: "com.b", expiresAt: 250))
        pushes.append(push("elsewhere", device: "d2"))
        pushes.append(push("elsewhere2", device: "d2"))
        _ = try store.commit(pushes: pushes, acknowledged: [], at: 200)
        // a1–a5, b2 and b4 (b6 has the same collapse id), c1–c5; and one expired.
        #expect(try store.prepareBacklog(deviceID: "d1", now: 300) == 5 + 2 + 5 + 1)
        var received: [String] = []
        var after: Int64 = 0
        while true {
            let page = try store.pendingPushes(deviceID: "d1", after: after, limit: 2)
            received += page.map(\.push.apnsID)
            guard page.count == 2 else { break }
            after = page[1].sequence
        }
        #expect(received == ["b1", "b3", "b5", "a6", "b6", "c6"])
        #expect(try store.status(apnsID: "a1").first?.discardReason == .coalesced)
        #expect(try store.status(apnsID: "b2").first?.discardReason == .coalesced)
        #expect(try store.status(apnsID: "c5").first?.discardReason == .coalesced)
        #expect(try store.status(apnsID: "gone").first?.discardReason == .expired)
        #expect(try store.status(apnsID: "b1").first?.stage == "stored")
        // Another device's backlog is untouched; preparing again changes nothing.
        #expect(try store.status(apnsID: "elsewhere").first?.discardReason == nil)
        #expect(try store.prepareBacklog(deviceID: "d1", now: 300) == 0)
        #expect(try store.backlog(deviceID: "d2", now: 300).map(\.push.apnsID) == ["elsewhere2"], "com.a: apns")
    }

    @Test(arguments: Backend.allCases)
    func registry(backend: Backend) async throws {
        let store = try await backend.make()
        let key = ProviderKeyRecord(keyID: "K1", teamID: "T1", publicKey: Data([4, 1, 2]), environment: .development, createdAt: 1)
        try store.addKey(key)
        #expect(try store.key(id: "K1") == key)
        #expect(throws: GatewayStoreError.self) { try store.addKey(key) }
        try store.addKey(ProviderKeyRecord(keyID: "K0", teamID: "T1", publicKey: Data([4]), environment: nil, createdAt: 2))
        #expect(try store.keys().map(\.keyID) == ["K0", "K1"])
        try store.registerApp(GatewayAppRecord(bundleID: "com.a", teamID: "T1", storagePolicy: .apns, createdAt: 3))
        try store.registerApp(GatewayAppRecord(bundleID: "com.a", teamID: "T1", storagePolicy: .all, createdAt: 4))
        #expect(try store.app(bundleID: "com.a")?.storagePolicy == .all)
        #expect(try store.app(bundleID: "com.a")?.createdAt == 3)
        #expect(throws: GatewayStoreError.self) { try store.registerApp(GatewayAppRecord(bundleID: "com.a", teamID: "T2", createdAt: 5)) }
        #expect(try store.apps().count == 1)
        #expect(try store.app(bundleID: "com.b") == nil)
    }

    /// A revoked key is gone from `key(id:)` and `keys()`; the others stay; an unknown (or
    /// already revoked) key id is `notFound` and changes nothing; the id can be registered again.
    @Test(arguments: Backend.allCases)
    func revokingAKeyRemovesOnlyThatKey(backend: Backend) async throws {
        let store = try await backend.make()
        let k1 = ProviderKeyRecord(keyID: "K1", teamID: "T1", publicKey: Data([4, 1, 2]), environment: .development, createdAt: 1)
        let k2 = ProviderKeyRecord(keyID: "K2", teamID: "T1", publicKey: Data([4, 3]), environment: nil, createdAt: 2)
        try store.addKey(k1)
        try store.addKey(k2)
        #expect(try store.revokeKey(id: "K1") == k1, "the removed record comes back")
        #expect(try store.key(id: "K1") == nil)
        #expect(try store.keys() == [k2])
        for unknown in ["K1", "NOSUCHKEY", ""] {
            #expect { try store.revokeKey(id: unknown) } throws: { ($0 as? GatewayStoreError)?.isNotFound == true }
        }
        #expect(try store.keys() == [k2], "a refused revocation changed nothing")
        let again = ProviderKeyRecord(keyID: "K1", teamID: "T1", publicKey: Data([4, 9]), environment: nil, createdAt: 3)
        try store.addKey(again)
        #expect(try store.key(id: "K1") == again)
    }

    @Test(arguments: Backend.allCases)
    func devicesAndTokens(backend: Backend) async throws {
        let store = try await backend.make()
        try store.registerDevice(GatewayDeviceRecord(deviceID: "d1", publicKey: Data([1]), createdAt: 1))
        try store.registerDevice(GatewayDeviceRecord(deviceID: "d1", publicKey: Data([1]), createdAt: 2))
        #expect(try store.device(id: "d1")?.createdAt == 1)
        let t = DeviceTokenRecord(token: "aa", deviceID: "d1", bundleID: "com.a", environment: .development, createdAt: 5)
        try store.addToken(t)
        #expect(throws: GatewayStoreError.self) { try store.addToken(t) }
        #expect(try store.token("aa") == t)
        #expect(try store.activeToken(deviceID: "d1", bundleID: "com.a", environment: .development) == t)
        #expect(try store.activeToken(deviceID: "d1", bundleID: "com.a", environment: .production) == nil)
        _ = try store.commit(pushes: [push("p1")], acknowledged: [], at: 6)
        let killed = try store.unregisterTokens(deviceID: "d1", bundleID: "com.a", at: 7)
        #expect(killed.map(\.unregisteredAt) == [7])
        #expect(try store.token("aa")?.unregisteredAt == 7)
        #expect(try store.activeToken(deviceID: "d1", bundleID: "com.a", environment: .development) == nil)
        #expect(try store.backlog(deviceID: "d1", now: 8).isEmpty)
        #expect(try store.status(apnsID: "p1").first?.discardReason == .unregistered)
    }

    @Test(arguments: Backend.allCases)
    func commitAckAndStatus(backend: Backend) async throws {
        let store = try await backend.make()
        try store.registerApp(GatewayAppRecord(bundleID: "com.a", teamID: "T", storagePolicy: .all, createdAt: 0))
        let stored = try store.commit(pushes: [push("p1"), push("p2"), push("p3", device: "d2")], acknowledged: [], at: 200)
        #expect(stored.map(\.push.apnsID) == ["p1", "p2", "p3"])
        #expect(stored[0].sequence < stored[1].sequence)
        #expect(try store.backlog(deviceID: "d1", now: 300).map(\.push.apnsID) == ["p1", "p2"])
        _ = try store.commit(pushes: [], acknowledged: [stored[0].sequence], at: 400)
        #expect(try store.backlog(deviceID: "d1", now: 500).map(\.push.apnsID) == ["p2"])
        let status = try #require(try store.status(apnsID: "p1").first)
        #expect(status.acceptedAt == 100)
        #expect(status.storedAt == 200)
        #expect(status.deliveredAt == 400)
        #expect(status.stage == "delivered")
        #expect(status.tokenPrefix == "aa")
        #expect(try store.recordEvent(.presented, apnsID: "p1", deviceID: "d1", at: 600))
        #expect(try store.recordEvent(.answered, apnsID: "p1", deviceID: "d1", at: 700))
        #expect(try !store.recordEvent(.presented, apnsID: "p1", deviceID: "other", at: 700))
        let later = try #require(try store.status(apnsID: "p1").first)
        #expect(later.presentedAt == 600)
        #expect(later.answeredAt == 700)
        #expect(later.stage == "answered")
        // Re-acking is harmless.
        _ = try store.commit(pushes: [], acknowledged: [stored[0].sequence], at: 900)
        #expect(try store.status(apnsID: "p1").first?.deliveredAt == 400)
    }

    /// Acknowledgements arrive per connection in order, interleaved across connections, with
    /// repeats and gaps: exactly the acknowledged pushes are delivered (the SQLite store
    /// applies them as runs of consecutive sequences).
    @Test(arguments: Backend.allCases)
    func acknowledgementsMarkExactlyTheirPushes(backend: Backend) async throws {
        let store = try await backend.make()
        try store.registerApp(GatewayAppRecord(bundleID: "com.a", teamID: "T", storagePolicy: .all, createdAt: 0))
        let stored = try store.commit(pushes: (0..<40).map { push("p\($0)", device: $0 % 4 == 3 ? "d2" : "d1") },
                                      acknowledged: [], at: 100)
        let seq = stored.map(\.sequence)
        // d1's acknowledgements then d2's, each in order; 5 and 17–19 are never acknowledged.
        let d1 = [0, 1, 2, 4, 6, 8, 9, 10, 12, 13, 14, 16, 20, 21, 22].map { seq[$0] }
        let d2 = [3, 7, 11, 15, 23].map { seq[$0] }
        _ = try store.commit(pushes: [push("new")], acknowledged: d1 + d2 + [seq[0], seq[39] + 1_000], at: 200)
        let acked = Set(d1 + d2)
        for (i, s) in seq.enumerated() {
            #expect(try store.status(apnsID: "p\(i)").first?.deliveredAt == (acked.contains(s) ? 200 : nil))
        }
        #expect(try store.backlog(deviceID: "d1", now: 300).map(\.push.apnsID)
                == ["p5", "p17", "p18"] + (24..<40).filter { $0 % 4 != 3 }.map { "p\($0)" } + ["new"])
        // Out of order within one batch, too.
        _ = try store.commit(pushes: [], acknowledged: [seq[18], seq[5], seq[17]], at: 400)
        #expect(try store.status(apnsID: "p17").first?.deliveredAt == 400)
        #expect(try store.status(apnsID: "p19").first?.deliveredAt == nil)
        #expect(try store.backlog(deviceID: "d2", now: 500).map(\.push.apnsID) == ["p19"] + (24..<40).filter { $0 % 4 == 3 }.map { "p\($0)" })
    }

    @Test(arguments: Backend.allCases)
    func apnsPolicyKeepsOnlyTheLatestPerToken(backend: Backend) async throws {
        let store = try await backend.make()
        try store.registerApp(GatewayAppRecord(bundleID: "com.a", teamID: "T", storagePolicy: .apns, createdAt: 0))
        _ = try store.commit(pushes: [push("p1"), push("p2"), push("p3"), push("q1", token: "bb", bundle: "com.b")], acknowledged: [], at: 200)
        // com.b is not registered: the default policy is apns too.
        #expect(try store.backlog(deviceID: "d1", now: 300).map(\.push.apnsID) == ["p3", "q1"])
        #expect(try store.status(apnsID: "p1").first?.discardReason == .coalesced)
        #expect(try store.backlog(deviceID: "d1", now: 300).map(\.push.apnsID) == ["p3", "q1"])
    }

    @Test(arguments: Backend.allCases)
    func allPolicyCoalescesByCollapseID(backend: Backend) async throws {
        let store = try await backend.make()
        try store.registerApp(GatewayAppRecord(bundleID: "com.a", teamID: "T", storagePolicy: .all, createdAt: 0))
        _ = try store.commit(pushes: [push("p1", collapse: "score"), push("p2"), push("p3", collapse: "score"), push("p4", collapse: "other")],
                             acknowledged: [], at: 200)
        #expect(try store.backlog(deviceID: "d1", now: 300).map(\.push.apnsID) == ["p2", "p3", "p4"])
        #expect(try store.status(apnsID: "p1").first?.stage == "discarded (coalesced)")
    }

    @Test(arguments: Backend.allCases)
    func expiration(backend: Backend) async throws {
        let store = try await backend.make()
        try store.registerApp(GatewayAppRecord(bundleID: "com.a", teamID: "T", storagePolicy: .all, createdAt: 0))
        _ = try store.commit(pushes: [push("now", expiresAt: 100), push("soon", expiresAt: 1000), push("later", expiresAt: 5000)],
                             acknowledged: [], at: 100)
        #expect(try store.backlog(deviceID: "d1", now: 500).map(\.push.apnsID) == ["soon", "later"])
        #expect(try store.status(apnsID: "now").first?.discardReason == .expired)
        #expect(try store.expirePushes(now: 2000, limit: 10) == 1)
        #expect(try store.backlog(deviceID: "d1", now: 2000).map(\.push.apnsID) == ["later"])
        // In batches of `limit`.
        _ = try store.commit(pushes: (1...3).map { push("batch\($0)", expiresAt: 6000) }, acknowledged: [], at: 3000)
        #expect(try store.expirePushes(now: 7000, limit: 2) == 2)
        #expect(try store.expirePushes(now: 7000, limit: 2) == 2)
        #expect(try store.expirePushes(now: 7000, limit: 2) == 0)
        #expect(try store.status(apnsID: "batch3").first?.discardReason == .expired)
    }

    @Test(arguments: Backend.allCases)
    func pruningDeletesOnlyFinishedPushesOlderThanTheCutoff(backend: Backend) async throws {
        let store = try await backend.make()
        try store.registerApp(GatewayAppRecord(bundleID: "com.a", teamID: "T", storagePolicy: .all, createdAt: 0))
        let stored = try store.commit(pushes: [push("delivered-early"), push("expired", expiresAt: 150), push("open"),
                                               push("delivered-late"), push("other-open", device: "d2")], acknowledged: [], at: 100)
        _ = try store.commit(pushes: [], acknowledged: [stored[0].sequence], at: 200)
        #expect(try store.expirePushes(now: 300, limit: 10) == 1)
        _ = try store.commit(pushes: [], acknowledged: [stored[3].sequence], at: 900)
        // Finished before 500: the early delivery (200) and the expiration (300).
        #expect(try store.prunePushes(finishedBefore: 500, limit: 1) == 1)
        #expect(try store.status(apnsID: "delivered-early").isEmpty)
        #expect(try store.status(apnsID: "expired").count == 1)
        #expect(try store.prunePushes(finishedBefore: 500, limit: 100) == 1)
        #expect(try store.status(apnsID: "expired").isEmpty)
        #expect(try store.prunePushes(finishedBefore: 500, limit: 100) == 0)
        // Undelivered pushes are never pruned, however old; the later delivery stays until its time.
        #expect(try store.status(apnsID: "delivered-late").first?.deliveredAt == 900)
        #expect(try store.backlog(deviceID: "d1", now: 1000).map(\.push.apnsID) == ["open"])
        // With pushes accepted since the cutoff in the log (the scan stops at the first one),
        // the older finished push still goes.
        _ = try store.commit(pushes: [push("newer")], acknowledged: [], at: 1000)
        #expect(try store.prunePushes(finishedBefore: 950, limit: 100) == 1)
        #expect(try store.status(apnsID: "delivered-late").isEmpty)
        #expect(try store.backlog(deviceID: "d1", now: 1000).map(\.push.apnsID) == ["open", "newer"])
        #expect(try store.backlog(deviceID: "d2", now: 1000).map(\.push.apnsID) == ["other-open"])
    }

    /// An event that carries its push's sequence is recorded on that push — also on an older
    /// push whose apns-id a newer one reuses — and only when the apns-id and the device match;
    /// one without (older devices) lands on the latest push with that apns-id, as before.
    @Test(arguments: Backend.allCases)
    func anEventWithItsPushesSequenceRecordsExactlyThatPush(backend: Backend) async throws {
        let store = try await backend.make()
        let stored = try store.commit(pushes: [push("r"), push("x"), push("r"), push("y", device: "d2")], acknowledged: [], at: 100)
        _ = try store.commit(pushes: [], acknowledged: stored.map(\.sequence), at: 150)
        try store.recordEvents([.init(.presented, apnsID: "r", sequence: stored[0].sequence)], deviceID: "d1", at: 300)
        #expect(try store.status(apnsID: "r").map(\.presentedAt) == [300, nil], "the older push, by its sequence")
        try store.recordEvents([.init(.presented, apnsID: "x", sequence: stored[0].sequence),   // another push's sequence
                                .init(.answered, apnsID: "y", sequence: stored[3].sequence),    // another device's push
                                .init(.presented, apnsID: "r", sequence: stored[3].sequence + 1_000)], deviceID: "d1", at: 400)
        #expect(try store.status(apnsID: "x").map(\.presentedAt) == [nil])
        #expect(try store.status(apnsID: "y").map(\.answeredAt) == [nil])
        #expect(try store.status(apnsID: "r").map(\.presentedAt) == [300, nil])
        try store.recordEvents([.init(.answered, apnsID: "r")], deviceID: "d1", at: 500)
        #expect(try store.status(apnsID: "r").map(\.answeredAt) == [nil, 500], "without a sequence: the latest")
    }

    /// A stage is recorded at the time the device says it happened (`occurredAt`), within what
    /// is possible: not before the push was accepted, not after the gateway records it; without
    /// one, when the gateway records it. The first time of a stage is kept, whatever the next
    /// report says. With and without the push's sequence alike.
    @Test(arguments: Backend.allCases)
    func eventsAreRecordedAtTheDevicesTimeWithinTheirPushesLife(backend: Backend) async throws {
        let store = try await backend.make()
        let ids = ["inside", "early", "late", "none", "edge-low", "edge-high", "by-id"]
        let stored = try store.commit(pushes: ids.map { push($0, acceptedAt: 1_000) }, acknowledged: [], at: 1_010)
        func report(_ i: Int, _ event: DeliveryEvent = .presented, at time: EpochMilliseconds?) -> DeviceEventReport {
            DeviceEventReport(event, apnsID: ids[i], sequence: stored[i].sequence, occurredAt: time)
        }
        try store.recordEvents([report(0, at: 1_234), report(1, at: 999), report(2, at: 2_001), report(3, at: nil),
                                report(4, at: 1_000), report(5, at: 2_000),
                                DeviceEventReport(.presented, apnsID: "by-id", occurredAt: 1_500)], deviceID: "d1", at: 2_000)
        var presented: [EpochMilliseconds?] = []
        for id in ids { presented.append(try store.status(apnsID: id).first?.presentedAt) }
        #expect(presented == [1_234, 1_000, 2_000, 2_000, 1_000, 2_000, 1_500])
        // Reported again, later and with another time: the first time stays; another stage has its own.
        try store.recordEvents([report(0, at: 1_100), report(0, .answered, at: 1_900)], deviceID: "d1", at: 3_000)
        let status = try #require(try store.status(apnsID: "inside").first)
        #expect(status.presentedAt == 1_234 && status.answeredAt == 1_900)
        #expect(status.deliveredAt == 2_000, "delivered when the gateway first learned of it")
    }

    @Test(arguments: Backend.allCases)
    func statusAndEventsFindPushesByApnsIDAmongMany(backend: Backend) async throws {
        let store = try await backend.make()
        var batch: [NewPush] = []
        for i in 0..<500 { batch.append(push("id-\(i % 250)", device: i % 2 == 0 ? "d1" : "d2")) }
        let stored = try store.commit(pushes: batch, acknowledged: [], at: 100)
        _ = try store.commit(pushes: [], acknowledged: stored.map(\.sequence), at: 150)
        // id-7 was used at i = 7 (d2) and i = 257 (d2); id-8 at 8 (d1) and 258 (d1).
        #expect(try store.status(apnsID: "id-7").map(\.sequence) == [stored[7].sequence, stored[257].sequence])
        #expect(try store.recordEvent(.presented, apnsID: "id-8", deviceID: "d1", at: 300))
        #expect(try store.status(apnsID: "id-8").map(\.presentedAt) == [nil, 300])
        #expect(try !store.recordEvent(.presented, apnsID: "id-8", deviceID: "d2", at: 300))
        #expect(try store.status(apnsID: "nope").isEmpty)
    }

    @Test func sqliteSurvivesReopen() throws {
        let path = try Self.freshDatabasePath()
        do {
            let store = try SQLiteGatewayStore(path: path)
            _ = try store.commit(pushes: [push("p1")], acknowledged: [], at: 200)
        }
        let reopened = try SQLiteGatewayStore(path: path)
        #expect(try reopened.backlog(deviceID: "d1", now: 300).map(\.push.payload) == [Array(#"{"aps":{"alert":"p1"}}"#.utf8)])
    }

    /// A gateway database file in a new temporary directory (its WAL is read by the tests).
    static func freshDatabasePath() throws -> String {
        let dir = TemporaryDirectories.make(prefix: "gwstore-")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir.appendingPathComponent("gateway.sqlite").path
    }

    /// WAL checkpoints run off the commit path, yet the WAL stays bounded: at `walPageLimit`
    /// the writer checkpoints itself (here the only checkpoints: the background threshold is
    /// the limit), and the next transaction starts the WAL over.
    @Test func sqliteWALStaysBoundedByTheWriterLimit() throws {
        let path = try Self.freshDatabasePath()
        let store = try SQLiteGatewayStore(path: path, checkpointPages: 16, walPageLimit: 16)
        try store.registerApp(GatewayAppRecord(bundleID: "com.a", teamID: "T1", storagePolicy: .all, createdAt: 1))
        let big = Array(repeating: UInt8(ascii: "x"), count: 1_000)
        for batch in 0..<200 {
            let pushes = (0..<10).map { i -> NewPush in
                var p = push("b\(batch)-\(i)")
                p.payload = big
                return p
            }
            _ = try store.commit(pushes: pushes, acknowledged: [], at: 200)
        }
        // 200 commits of ≈ 10 KB (≥ 2 frames of 8 KiB each): unbounded, the WAL would exceed 400
        // frames (3.2 MB). Bounded: the limit plus what the commits around a checkpoint add.
        let walBytes = try #require(try FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int)
        #expect(walBytes <= 32 + 64 * (24 + SQLiteGatewayStore.newDatabasePageSize))
        #expect(store.checkpointCounts.writer >= 10)
        #expect(store.checkpointCounts.background == 0)
        #expect(try store.backlog(deviceID: "d1", now: 300, pageSize: 500).count == 2_000)
        #expect(try store.status(apnsID: "b199-9").first?.topic == "com.a")
    }

    /// Below the limit, checkpoints run on the background connection.
    @Test func sqliteCheckpointsInTheBackground() throws {
        let path = try Self.freshDatabasePath()
        let store = try SQLiteGatewayStore(path: path, checkpointPages: 4, walPageLimit: 1_000_000)
        try store.registerApp(GatewayAppRecord(bundleID: "com.a", teamID: "T1", storagePolicy: .all, createdAt: 1))
        let big = Array(repeating: UInt8(ascii: "y"), count: 1_000)
        var batch = 0
        // Commits keep waking the checkpointer; stop once it has run (an event, not a duration).
        while store.checkpointCounts.background == 0 && batch < 100_000 {
            var p = push("c\(batch)")
            p.payload = big
            _ = try store.commit(pushes: Array(repeating: p, count: 8), acknowledged: [], at: 200)
            batch += 1
        }
        #expect(store.checkpointCounts.background > 0)
        #expect(store.checkpointCounts.writer == 0)
        #expect(try store.backlog(deviceID: "d1", now: 300, pageSize: 500).count == batch * 8)
    }
}

extension GatewayStore {
    /// What a connecting device receives, the gateway's way: `prepareBacklog`, then pages (of
    /// 2 by default, so that every test above reads several).
    func backlog(deviceID: String, now: EpochMilliseconds, pageSize: Int = 2) throws -> [StoredPush] {
        try prepareBacklog(deviceID: deviceID, now: now)
        var all: [StoredPush] = []
        while true {
            let page = try pendingPushes(deviceID: deviceID, after: all.last?.sequence ?? 0, limit: pageSize)
            all += page
            if page.count < pageSize { return all }
        }
    }
}
