import Foundation
import Synchronization
import Testing
import TidingsCore
@testable import TidingsPostgres
import TidingsStorage
import TidingsTestSupport

/// What the PostgreSQL store does beyond the conformance suite: partitions, restarts of
/// PostgreSQL, several stores (nodes) on one database, its URLs.
@Suite("PostgreSQL gateway store")
struct PostgresGatewayStoreTests {
    func push(_ id: String, device: String = "d1", expiresAt: EpochMilliseconds = 10_000) -> NewPush {
        NewPush(apnsID: id, token: "aa", deviceID: device, bundleID: "com.a", topic: Topic(rawValue: "com.a")!, pushType: .alert, priority: .immediate,
                collapseID: nil, expiresAt: expiresAt, payload: Array(#"{"aps":{}}"#.utf8), acceptedAt: 100)
    }

    func makeStore(partitionSize: Int64 = 4, url: String? = nil) async throws -> PostgresGatewayStore? {
        guard let cluster = try await PostgresCluster.shared() else { return nil }
        return try PostgresGatewayStore(url: url ?? cluster.createDatabase(prefix: "pgstore"), maximumConnections: 2,
                                        partitionSize: partitionSize)
    }

    /// Pruning drops a partition whose every push finished before the cutoff (all of its
    /// rows at once), keeps one that holds an open push or one finished since, and never
    /// drops the partition still being filled.
    @Test func pruningDropsFinishedPartitions() async throws {
        guard let store = try await makeStore() else { return }
        _ = try store.registerApp(GatewayAppRecord(bundleID: "com.a", teamID: "T", storagePolicy: .all, createdAt: 0))
        // Sequences 1…10: partitions [0,4) [4,8) [8,12).
        let stored = try store.commit(pushes: (1...10).map { push("p\($0)", device: $0 == 5 ? "d2" : "d1") }, acknowledged: [], at: 100)
        #expect(stored.map(\.sequence) == Array(1...10))
        #expect(try store.partitions().map(\.name) == ["gw_pushes_p0", "gw_pushes_p1", "gw_pushes_p2"])
        // Everything but p5 (open) delivered at 200; p9 and p10 (the partition being filled) too.
        let acked = stored.filter { $0.push.apnsID != "p5" }.map(\.sequence)
        _ = try store.commit(pushes: [], acknowledged: acked, at: 200)
        // Cutoff 300: p0 goes whole (3 rows); p1 holds open p5, so only its finished rows go,
        // one by one; p2 [8,12) is not all issued (11 is not), so its rows go one by one too.
        #expect(try store.prunePushes(finishedBefore: 300, limit: 100) == 9)
        #expect(try store.partitions().map(\.name) == ["gw_pushes_p1", "gw_pushes_p2"])
        #expect(try store.status(apnsID: "p1").isEmpty)
        #expect(try store.status(apnsID: "p5").count == 1)
        #expect(try store.pendingPushes(deviceID: "d2", after: 0, limit: 10).map(\.push.apnsID) == ["p5"])
        // New pushes go on in the same partition, then into a new one; sequences never repeat.
        let more = try store.commit(pushes: (11...14).map { push("p\($0)") }, acknowledged: [], at: 400)
        #expect(more.map(\.sequence) == [11, 12, 13, 14])
        #expect(try store.partitions().map(\.name) == ["gw_pushes_p1", "gw_pushes_p2", "gw_pushes_p3"])
        // p5 delivered: its partition is now empty of anything to keep, and goes (it has 1 row).
        _ = try store.commit(pushes: [], acknowledged: [5], at: 500)
        #expect(try store.prunePushes(finishedBefore: 600, limit: 100) == 1)
        #expect(try store.partitions().map(\.name) == ["gw_pushes_p2", "gw_pushes_p3"])
    }

    /// Two stores on one database (two gateway nodes): one schema, migrated once, sequences
    /// from one counter, and each sees what the other committed.
    @Test func twoStoresShareOneDatabase() async throws {
        guard let cluster = try await PostgresCluster.shared() else { return }
        let url = try cluster.createDatabase(prefix: "twonodes")
        // Opened at the same time: the migration runs once, under its lock.
        async let a = Task.detached { try PostgresGatewayStore(url: url, maximumConnections: 2, partitionSize: 100) }.value
        async let b = Task.detached { try PostgresGatewayStore(url: url, maximumConnections: 2, partitionSize: 100) }.value
        let (nodeA, nodeB) = try await (a, b)
        try nodeA.addKey(ProviderKeyRecord(keyID: "K1", teamID: "T", publicKey: Data([4]), environment: nil, createdAt: 1))
        #expect(try nodeB.key(id: "K1")?.teamID == "T")
        #expect(throws: GatewayStoreError.self) {
            try nodeB.addKey(ProviderKeyRecord(keyID: "K1", teamID: "T", publicKey: Data([4]), environment: nil, createdAt: 1))
        }
        // Commits from both, interleaved on two threads: every sequence once, and each node's
        // batches in order.
        let batches = 20
        async let fromA = Task.detached {
            try (0..<batches).flatMap { i in try nodeA.commit(pushes: [push("a\(i)-1"), push("a\(i)-2")], acknowledged: [], at: 100).map(\.sequence) }
        }.value
        async let fromB = Task.detached {
            try (0..<batches).flatMap { i in try nodeB.commit(pushes: [push("b\(i)")], acknowledged: [], at: 100).map(\.sequence) }
        }.value
        let (seqA, seqB) = try await (fromA, fromB)
        #expect(Set(seqA + seqB).count == 3 * batches)
        #expect(seqA == seqA.sorted() && seqB == seqB.sorted())
        // The device's backlog, read through B, has every push in sequence order.
        let backlog = try nodeB.pendingPushes(deviceID: "d1", after: 0, limit: 1000)
        #expect(backlog.map(\.sequence) == (seqA + seqB).sorted())
        // Acknowledged through A, gone for B.
        _ = try nodeA.commit(pushes: [], acknowledged: seqB, at: 200)
        #expect(try nodeB.pendingPushes(deviceID: "d1", after: 0, limit: 1000).map(\.sequence) == seqA)
        #expect(try nodeB.status(apnsID: "b0").first?.deliveredAt == 200)
    }

    /// A key revoked through one store (a node, or `tidings keys revoke`) is announced to every
    /// other store listening on the database (`key:<id>` on the registry channel), once; a
    /// revocation refused (unknown key id) announces nothing.
    @Test func aRevokedKeyIsAnnouncedToTheOtherNodes() async throws {
        guard let cluster = try await PostgresCluster.shared() else { return }
        let url = try cluster.createDatabase(prefix: "revoke")
        let revoking = try PostgresGatewayStore(url: url, maximumConnections: 1, partitionSize: 100)
        let listening = try PostgresGatewayStore(url: url, maximumConnections: 1, partitionSize: 100)
        let changes = Mutex<[GatewayRegistryChange]>([])
        listening.startListening(wake: { _ in }, leaseTaken: { _ in }, registryChanged: { change in changes.withLock { $0.append(change) } },
                                 reconnected: {})
        defer { listening.stopListening() }
        // Listening once an announcement arrives (the LISTEN is set up on its own thread).
        for attempt in 0..<100 where !changes.withLock({ $0.contains(.key("READY")) }) {
            if attempt % 10 == 0 {
                _ = try? revoking.revokeKey(id: "READY")
                try revoking.addKey(ProviderKeyRecord(keyID: "READY", teamID: "T", publicKey: Data([4]), environment: nil, createdAt: 1))
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        try revoking.addKey(ProviderKeyRecord(keyID: "K1", teamID: "T", publicKey: Data([4]), environment: nil, createdAt: 1))
        #expect(throws: GatewayStoreError.self) { try revoking.revokeKey(id: "NOSUCHKEY") }
        try revoking.revokeKey(id: "K1")
        try revoking.addKey(ProviderKeyRecord(keyID: "DONE", teamID: "T", publicKey: Data([4]), environment: nil, createdAt: 1))
        var seen: [GatewayRegistryChange] = []
        for _ in 0..<500 {
            seen = changes.withLock { $0 }
            if seen.last == .key("DONE") { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        let afterReady = seen.drop { $0 != .key("READY") }.filter { $0 != .key("READY") }
        #expect(afterReady == [.key("K1"), .key("K1"), .key("DONE")], "K1 added, K1 revoked; nothing for the unknown key")
        #expect(try listening.key(id: "K1") == nil)
    }

    func limited(_ change: (inout PostgresStoreLimits) -> Void) async throws -> PostgresGatewayStore? {
        guard let cluster = try await PostgresCluster.shared() else { return nil }
        var limits = PostgresStoreLimits()
        limits.partitionSize = 100
        change(&limits)
        return try PostgresGatewayStore(url: cluster.createDatabase(prefix: "limits"), limits: limits)
    }

    /// `statementTimeout` (here 200 ms) is PostgreSQL's `statement_timeout` on the store's
    /// connections: a statement within it completes, one past it is cancelled by the server (a
    /// store error), and the store goes on.
    @Test func aStatementPastTheStatementTimeoutIsCancelled() async throws {
        guard let store = try await limited({ $0.statementTimeout = .milliseconds(200); $0.maximumConnections = 1 }) else { return }
        #expect(try store.execute("SHOW statement_timeout").rows.first?.decode(String.self) == "200ms")
        _ = try store.execute("SELECT pg_sleep(0.05)")
        #expect { try store.execute("SELECT pg_sleep(3)") } throws: { "\($0)".contains("57014") }
        #expect(try store.keys().isEmpty, "the store goes on")
    }

    /// `maximumConnections` bounds the pool and `acquireTimeout` (here 100 ms) the wait for a
    /// free connection: with one connection, a call made while it is taken (maintenance holds
    /// its lock session) fails after the wait ("busy"); with two, the same call runs.
    @Test func aCallWaitsAtMostTheAcquireTimeoutForAConnection() async throws {
        guard let one = try await limited({ $0.maximumConnections = 1; $0.acquireTimeout = .milliseconds(100) }) else { return }
        let started = ContinuousClock.now
        #expect { try one.exclusively { try one.keys() } } throws: { "\($0)".contains("stayed busy") }
        #expect(ContinuousClock.now - started < .seconds(5))
        #expect(try one.keys().isEmpty, "the pool goes on")
        guard let two = try await limited({ $0.maximumConnections = 2; $0.acquireTimeout = .milliseconds(100) }) else { return }
        #expect(try two.exclusively { try two.keys() } == [])
    }

    /// PostgreSQL stopped: every call fails with a store error (never a result that was not
    /// committed); started again: the same store works on, with no call to reconnect, and
    /// sequences go on above every one issued before.
    @Test func ridesOutAPostgreSQLRestart() async throws {
        guard let cluster = try await PostgresCluster.own(name: "restart") else { return }
        defer { cluster.stop() }
        let store = try PostgresGatewayStore(url: cluster.createDatabase(prefix: "restart"), maximumConnections: 2, partitionSize: 100)
        let before = try store.commit(pushes: [push("before")], acknowledged: [], at: 100)
        #expect(await offThePool { cluster.stopServer() }.status == 0)
        #expect(throws: GatewayStoreError.self) { try store.commit(pushes: [push("during")], acknowledged: [], at: 200) }
        #expect(throws: GatewayStoreError.self) { try store.pendingPushes(deviceID: "d1", after: 0, limit: 10) }
        #expect(await offThePool { cluster.startServer() }.status == 0)
        let after = try store.commit(pushes: [push("after")], acknowledged: [], at: 300)
        #expect(after[0].sequence > before[0].sequence)
        #expect(try store.pendingPushes(deviceID: "d1", after: 0, limit: 10).map(\.push.apnsID) == ["before", "after"])
        #expect(try store.status(apnsID: "during").isEmpty, "the failed commit left nothing")
    }

    /// A store opened again on the same database (a node restarted) keeps everything, and its
    /// sequences go on above the old ones, also when the newest pushes were pruned.
    @Test func reopenedStoreContinuesTheSequence() async throws {
        guard let cluster = try await PostgresCluster.shared() else { return }
        let url = try cluster.createDatabase(prefix: "reopen")
        var store: PostgresGatewayStore? = try PostgresGatewayStore(url: url, maximumConnections: 1, partitionSize: 2)
        let first = try #require(store).commit(pushes: [push("one"), push("two"), push("three")], acknowledged: [], at: 100)
        _ = try #require(store).commit(pushes: [], acknowledged: first.map(\.sequence), at: 150)
        #expect(try #require(store).prunePushes(finishedBefore: 200, limit: 100) == 3)
        store = nil
        // Another partition size asked for: the database keeps its own.
        let reopened = try PostgresGatewayStore(url: url, maximumConnections: 1, partitionSize: 1_000)
        #expect(reopened.partitionSize == 2)
        let next = try reopened.commit(pushes: [push("four")], acknowledged: [], at: 300)
        #expect(next[0].sequence == 4)
    }

    /// Maintenance runs on one node at a time: while one store holds the maintenance lock,
    /// another's `exclusively` skips (nil); afterwards it runs.
    @Test func maintenanceRunsOnOneNodeAtATime() async throws {
        guard let cluster = try await PostgresCluster.shared() else { return }
        let url = try cluster.createDatabase(prefix: "maintenance")
        let a = try PostgresGatewayStore(url: url, maximumConnections: 2, partitionSize: 100)
        let b = try PostgresGatewayStore(url: url, maximumConnections: 2, partitionSize: 100)
        let inner: Int?? = try a.exclusively { try b.exclusively { 1 } }
        #expect(inner == .some(nil), "b skipped while a held the lock")
        #expect(try b.exclusively { 2 } == 2)
        // Leases: b takes a's device; a's renewal reports it lost.
        try a.takeLeases(deviceIDs: ["d1", "d2"], until: 1_000)
        try b.takeLeases(deviceIDs: ["d2"], until: 1_000)
        #expect(try a.renewLeases(deviceIDs: ["d1", "d2"], until: 2_000) == ["d2"])
        try b.releaseLeases(deviceIDs: ["d2"])
        #expect(try a.renewLeases(deviceIDs: ["d1", "d2"], until: 3_000).isEmpty, "a lease nobody holds is taken again")
    }

    @Test func databaseURLs() throws {
        let url = try PostgresStoreURL.parse("postgres://gw:secret@db.example:6543/tidings?sslmode=require").get()
        #expect(url.host == "db.example")
        #expect(url.port == 6543)
        #expect(url.username == "gw")
        #expect(url.password == "secret")
        #expect(url.database == "tidings")
        #expect(url.tls == .require)
        #expect(url.description == "postgres://gw@db.example:6543/tidings", "no password in logs")
        let plain = try PostgresStoreURL.parse("postgresql://127.0.0.1/gw").get()
        #expect(plain.port == 5432 && plain.username == "postgres" && plain.tls == .disable)
        for bad in ["mysql://h/db", "postgres://h", "postgres:///db", "postgres://h/db?sslmode=maybe", "postgres://h/db?x=1",
                    "postgres://h:0/db", "not a url", ""] {
            #expect(throws: GatewayDatabaseURLError.self, "\(bad)") { try PostgresStoreURL.parse(bad).get() }
        }
        // A store that cannot connect fails to open, with the address (and no password).
        #expect {
            try PostgresGatewayStore(url: "postgres://gw:secret@127.0.0.1:1/none")
        } throws: { error in
            "\(error)".contains("postgres://gw@127.0.0.1:1/none") && !"\(error)".contains("secret")
        }
    }
}
