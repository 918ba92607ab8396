import Foundation
import GRDB
import Testing
import TidingsCore
import TidingsSQLite
import TidingsStorage

/// The gateway database's schema changes: a database written by an older schema opens with
/// every push it held, and the v3 push log's watermark keeps what the pending read needs.
@Suite("Gateway store migration")
struct GatewayStoreMigrationTests {
    /// The schema as the `gateway-v1` and `gateway-v2-append-only` migrations left it.
    static let v2Schema = """
        CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
        INSERT INTO grdb_migrations VALUES ('gateway-v1'), ('gateway-v2-append-only');
        CREATE TABLE gw_keys (key_id TEXT PRIMARY KEY NOT NULL, team_id TEXT NOT NULL, public_key BLOB NOT NULL,
                              environment TEXT, created_at INTEGER NOT NULL);
        CREATE TABLE gw_apps (bundle_id TEXT PRIMARY KEY NOT NULL, team_id TEXT NOT NULL, storage_policy TEXT NOT NULL,
                              created_at INTEGER NOT NULL);
        CREATE TABLE gw_devices (device_id TEXT PRIMARY KEY NOT NULL, public_key BLOB NOT NULL, created_at INTEGER NOT NULL);
        CREATE TABLE gw_tokens (token TEXT PRIMARY KEY NOT NULL, device_id TEXT NOT NULL, bundle_id TEXT NOT NULL,
                                environment TEXT NOT NULL, created_at INTEGER NOT NULL, unregistered_at INTEGER);
        CREATE INDEX gw_tokens_device ON gw_tokens(device_id, bundle_id);
        CREATE TABLE gw_pushes (seq INTEGER PRIMARY KEY AUTOINCREMENT, apns_id TEXT NOT NULL, token TEXT NOT NULL,
                                device_id TEXT NOT NULL, bundle_id TEXT NOT NULL, topic TEXT NOT NULL, push_type TEXT NOT NULL,
                                priority INTEGER NOT NULL, collapse_id TEXT, expires_at INTEGER NOT NULL, payload BLOB NOT NULL,
                                accepted_at INTEGER NOT NULL, stored_at INTEGER NOT NULL, delivered_at INTEGER,
                                presented_at INTEGER, answered_at INTEGER, discarded_at INTEGER, discard_reason TEXT);
        CREATE INDEX gw_pushes_open ON gw_pushes(device_id, seq) WHERE delivered_at IS NULL AND discarded_at IS NULL;
        CREATE INDEX gw_pushes_device ON gw_pushes(device_id, seq);
        """

    static let d1 = String(repeating: "d1", count: 32)
    static let d2 = String(repeating: "d2", count: 32)
    static let tok1 = String(repeating: "a1", count: 32)
    static let tok2 = String(repeating: "b2", count: 32)
    static let tok3 = String(repeating: "c3", count: 32)

    /// Writes a v2 database: pushes delivered, open and discarded, for a registered device and
    /// for a device id that only appears in pushes; the newest sequences (6–40) were pruned.
    static func writeV2Database(at path: String) throws {
        let queue = try DatabaseQueue(path: path)
        try queue.write { db in
            try db.execute(sql: v2Schema)
            try db.execute(sql: "INSERT INTO gw_apps VALUES ('com.a', 'T', 'all', 1), ('com.b', 'T', 'all', 1)")
            try db.execute(sql: "INSERT INTO gw_devices VALUES (?, ?, 2)", arguments: [d1, Data([4, 9, 9])])
            try db.execute(sql: "INSERT INTO gw_tokens VALUES (?, ?, 'com.a', 'development', 3, NULL), (?, ?, 'com.b', 'development', 3, NULL)",
                           arguments: [tok1, d1, tok2, d1])
            let insert = """
                INSERT INTO gw_pushes (seq, apns_id, token, device_id, bundle_id, topic, push_type, priority, collapse_id,
                                       expires_at, payload, accepted_at, stored_at, delivered_at, discarded_at, discard_reason)
                VALUES (?, ?, ?, ?, ?, ?, 'alert', ?, ?, 90000, ?, ?, ?, ?, ?, ?)
                """
            func row(_ seq: Int64, _ id: String, _ token: String, _ device: String, _ bundle: String, topic: String? = nil,
                     priority: Int = 10, collapse: String? = nil, delivered: Int64? = nil, discarded: Int64? = nil,
                     reason: String? = nil) throws {
                try db.execute(sql: insert, arguments: [seq, id, token, device, bundle, topic ?? bundle, priority, collapse,
                                                        Data(#"{"aps":{"alert":"\#(id)"}}"#.utf8), 100 + seq, 200 + seq,
                                                        delivered, discarded, reason])
            }
            try row(1, "p1", tok1, d1, "com.a", delivered: 150)
            try row(2, "p2", tok1, d1, "com.a", topic: "com.a.voip", priority: 5, collapse: "c")
            try row(3, "p3", tok3, d2, "com.a")
            try row(4, "p4", tok2, d1, "com.b")
            try row(5, "p5", tok1, d1, "com.a", discarded: 160, reason: "coalesced")
            try db.execute(sql: "UPDATE sqlite_sequence SET seq = 40 WHERE name = 'gw_pushes'")
        }
    }

    @Test func aV2DatabaseOpensWithItsPendingPushes() throws {
        let path = try GatewayStoreConformanceTests.freshDatabasePath()
        try Self.writeV2Database(at: path)
        let store = try SQLiteGatewayStore(path: path)

        let pending = try store.backlog(deviceID: Self.d1, now: 1_000)
        #expect(pending.map(\.push.apnsID) == ["p2", "p4"])
        let p2 = try #require(pending.first)
        #expect(p2 == StoredPush(sequence: 2, push: NewPush(
            apnsID: "p2", token: Self.tok1, deviceID: Self.d1, bundleID: "com.a", topic: Topic(rawValue: "com.a.voip")!, pushType: .alert,
            priority: .considerPower, collapseID: CollapseID(rawValue: "c"), expiresAt: 90_000, payload: Array(#"{"aps":{"alert":"p2"}}"#.utf8), acceptedAt: 102),
            storedAt: 202))
        #expect(try store.backlog(deviceID: Self.d2, now: 1_000).map(\.push.apnsID) == ["p3"])

        let delivered = try #require(try store.status(apnsID: "p1").first)
        #expect(delivered.deliveredAt == 150)
        #expect(delivered.tokenPrefix == String(Self.tok1.prefix(8)))
        #expect(try store.status(apnsID: "p5").first?.discardReason == .coalesced)

        // The registered device keeps its key; the one known only from a push has none.
        #expect(try store.device(id: Self.d1)?.publicKey == Data([4, 9, 9]))
        #expect(try store.device(id: Self.d2) == nil)
        try store.registerDevice(GatewayDeviceRecord(deviceID: Self.d2, publicKey: Data([4, 2]), createdAt: 7))
        #expect(try store.device(id: Self.d2) == GatewayDeviceRecord(deviceID: Self.d2, publicKey: Data([4, 2]), createdAt: 7))
        #expect(try store.backlog(deviceID: Self.d2, now: 1_000).map(\.push.apnsID) == ["p3"])

        // Sequences continue above every number issued before, pruned ones included.
        let next = try store.commit(pushes: [NewPush(apnsID: "p6", token: Self.tok1, deviceID: Self.d1, bundleID: "com.a",
                                                     topic: Topic(rawValue: "com.a")!, pushType: .alert, priority: .immediate, collapseID: nil,
                                                     expiresAt: 90_000, payload: Array("{}".utf8), acceptedAt: 900)],
                                    acknowledged: [2], at: 950)
        #expect(try #require(next.first).sequence > 40)
        #expect(try store.backlog(deviceID: Self.d1, now: 1_000).map(\.push.apnsID) == ["p4", "p6"])

        // Unregistering finds the token's open pushes through the device index.
        let killed = try store.unregisterTokens(deviceID: Self.d1, bundleID: "com.b", at: 1_100)
        #expect(killed.map(\.token) == [Self.tok2])
        #expect(try store.status(apnsID: "p4").first?.discardReason == .unregistered)
        #expect(try store.backlog(deviceID: Self.d1, now: 1_200).map(\.push.apnsID) == ["p6"])
        #expect(try store.recordEvent(.presented, apnsID: "p2", deviceID: Self.d1, at: 1_300))
        #expect(try store.status(apnsID: "p2").first?.presentedAt == 1_300)
    }

    /// The schema as the `gateway-v3-device-numbers` migration left it (`AUTOINCREMENT` sequences).
    static let v3Schema = """
        CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
        INSERT INTO grdb_migrations VALUES ('gateway-v1'), ('gateway-v2-append-only'), ('gateway-v3-device-numbers');
        CREATE TABLE gw_keys (key_id TEXT PRIMARY KEY NOT NULL, team_id TEXT NOT NULL, public_key BLOB NOT NULL,
                              environment TEXT, created_at INTEGER NOT NULL);
        CREATE TABLE gw_apps (bundle_id TEXT PRIMARY KEY NOT NULL, team_id TEXT NOT NULL, storage_policy TEXT NOT NULL,
                              created_at INTEGER NOT NULL);
        CREATE TABLE gw_tokens (token TEXT PRIMARY KEY NOT NULL, device_id TEXT NOT NULL, bundle_id TEXT NOT NULL,
                                environment TEXT NOT NULL, created_at INTEGER NOT NULL, unregistered_at INTEGER);
        CREATE INDEX gw_tokens_device ON gw_tokens(device_id, bundle_id);
        CREATE TABLE gw_devices (device_no INTEGER PRIMARY KEY, device_id TEXT NOT NULL UNIQUE, public_key BLOB,
                                 created_at INTEGER, open_from INTEGER NOT NULL DEFAULT 0);
        CREATE TABLE gw_targets (target_no INTEGER PRIMARY KEY, token TEXT NOT NULL, device_no INTEGER NOT NULL,
                                 bundle_id TEXT NOT NULL, topic TEXT NOT NULL, UNIQUE (token, device_no, bundle_id, topic));
        CREATE TABLE gw_pushes (seq INTEGER PRIMARY KEY AUTOINCREMENT, device_no INTEGER NOT NULL, target_no INTEGER NOT NULL,
                                apns_id TEXT NOT NULL, push_type TEXT NOT NULL, priority INTEGER NOT NULL, collapse_id TEXT,
                                expires_at INTEGER NOT NULL, accepted_at INTEGER NOT NULL, stored_at INTEGER NOT NULL,
                                delivered_at INTEGER, discarded_at INTEGER, discard_reason TEXT, presented_at INTEGER,
                                answered_at INTEGER, payload BLOB NOT NULL);
        CREATE INDEX gw_pushes_device ON gw_pushes(device_no, seq);
        """

    /// A v3 database (sequences by `AUTOINCREMENT`, the newest ones, 7–50, pruned) opens with
    /// every push, each under its sequence and with every column, and later pushes continue
    /// above 50; the push log no longer uses `AUTOINCREMENT`.
    @Test func aV3DatabaseKeepsEveryPushAndNeverReusesASequence() throws {
        let path = try GatewayStoreConformanceTests.freshDatabasePath()
        try DatabaseQueue(path: path).write { db in
            try db.execute(sql: Self.v3Schema)
            try db.execute(sql: "INSERT INTO gw_apps VALUES ('com.a', 'T', 'all', 1)")
            try db.execute(sql: "INSERT INTO gw_devices (device_no, device_id, public_key, created_at) VALUES (1, ?, ?, 2), (2, ?, NULL, NULL)",
                           arguments: [Self.d1, Data([4, 9, 9]), Self.d2])
            try db.execute(sql: "INSERT INTO gw_tokens VALUES (?, ?, 'com.a', 'development', 3, NULL)", arguments: [Self.tok1, Self.d1])
            try db.execute(sql: """
                INSERT INTO gw_targets VALUES (1, ?, 1, 'com.a', 'com.a'), (2, ?, 1, 'com.a', 'com.a.voip'), (3, ?, 2, 'com.a', 'com.a')
                """, arguments: [Self.tok1, Self.tok1, Self.tok3])
            let insert = """
                INSERT INTO gw_pushes (seq, device_no, target_no, apns_id, push_type, priority, collapse_id, expires_at,
                                       accepted_at, stored_at, delivered_at, discarded_at, discard_reason, presented_at,
                                       answered_at, payload)
                VALUES (?, ?, ?, ?, 'alert', ?, ?, 90000, ?, ?, ?, ?, ?, ?, ?, ?)
                """
            func row(_ seq: Int64, device: Int64, target: Int64, priority: Int = 10, collapse: String? = nil,
                     delivered: Int64? = nil, discarded: Int64? = nil, reason: String? = nil, presented: Int64? = nil,
                     answered: Int64? = nil) throws {
                try db.execute(sql: insert, arguments: [seq, device, target, "p\(seq)", priority, collapse, 100 + seq, 200 + seq,
                                                        delivered, discarded, reason, presented, answered,
                                                        Data(#"{"aps":{"alert":"p\#(seq)"}}"#.utf8)])
            }
            try row(1, device: 1, target: 1, delivered: 150, presented: 151, answered: 152)
            try row(2, device: 1, target: 2, priority: 5, collapse: "c")
            try row(3, device: 2, target: 3)
            try row(5, device: 1, target: 1, discarded: 160, reason: "expired")
            try row(6, device: 1, target: 1)
            try db.execute(sql: "UPDATE sqlite_sequence SET seq = 50 WHERE name = 'gw_pushes'")
        }
        let store = try SQLiteGatewayStore(path: path)

        let p1 = try #require(try store.status(apnsID: "p1").first)
        #expect(p1 == PushStatus(sequence: 1, apnsID: "p1", bundleID: "com.a", topic: "com.a", pushType: "alert",
                                 tokenPrefix: String(Self.tok1.prefix(8)), acceptedAt: 101, storedAt: 201, expiresAt: 90_000,
                                 deliveredAt: 150, presentedAt: 151, answeredAt: 152, discardedAt: nil, discardReason: nil))
        #expect(try store.status(apnsID: "p5").first?.discardReason == .expired)
        #expect(try store.status(apnsID: "p5").first?.sequence == 5)
        let pending = try store.backlog(deviceID: Self.d1, now: 1_000)
        #expect(pending.map(\.sequence) == [2, 6])
        #expect(pending.first == StoredPush(sequence: 2, push: NewPush(
            apnsID: "p2", token: Self.tok1, deviceID: Self.d1, bundleID: "com.a", topic: Topic(rawValue: "com.a.voip")!, pushType: .alert,
            priority: .considerPower, collapseID: CollapseID(rawValue: "c"), expiresAt: 90_000, payload: Array(#"{"aps":{"alert":"p2"}}"#.utf8), acceptedAt: 102),
            storedAt: 202))
        #expect(try store.backlog(deviceID: Self.d2, now: 1_000).map(\.push.apnsID) == ["p3"])

        let next = try store.commit(pushes: [SQLiteGatewayStoreTests.push("p7", device: Self.d1, token: Self.tok1)], acknowledged: [2], at: 950)
        #expect(try #require(next.first).sequence > 50)
        #expect(try store.backlog(deviceID: Self.d1, now: 1_000).map(\.push.apnsID) == ["p6", "p7"])
        let schema = try DatabaseQueue(path: path).read { db in
            try String.fetchOne(db, sql: "SELECT sql FROM sqlite_master WHERE name = 'gw_pushes'")
        }
        #expect(schema?.contains("AUTOINCREMENT") == false)
    }

    static func watermark(_ path: String, device: String) throws -> Int64? {
        try DatabaseQueue(path: path).read { db in
            try Int64.fetchOne(db, sql: "SELECT open_from FROM gw_devices WHERE device_id = ?", arguments: [device])
        }
    }

    /// The pending read starts at the device's watermark, which moves past delivered pushes
    /// but never past an open one, and never past pushes committed later.
    @Test func theWatermarkSkipsOnlyFinishedPushes() throws {
        let path = try GatewayStoreConformanceTests.freshDatabasePath()
        let store = try SQLiteGatewayStore(path: path)
        try store.registerApp(GatewayAppRecord(bundleID: "com.a", teamID: "T", storagePolicy: .all, createdAt: 0))
        func push(_ id: String, device: String = "d1") -> NewPush {
            NewPush(apnsID: id, token: "t-" + device, deviceID: device, bundleID: "com.a", topic: Topic(rawValue: "com.a")!, pushType: .alert,
                    priority: .immediate, collapseID: nil, expiresAt: 10_000, payload: Array("{}".utf8), acceptedAt: 100)
        }
        // Two devices interleaved in the log.
        let stored = try store.commit(pushes: (0..<100).map { push("p\($0)", device: $0 % 2 == 0 ? "d1" : "d2") },
                                      acknowledged: [], at: 200)
        let d1 = stored.filter { $0.push.deviceID == "d1" }
        _ = try store.commit(pushes: [], acknowledged: d1.prefix(30).map(\.sequence) + [d1[31].sequence], at: 300)
        #expect(try store.backlog(deviceID: "d1", now: 400).map(\.sequence) == [d1[30].sequence] + d1[32...].map(\.sequence))
        #expect(try Self.watermark(path, device: "d1") == d1[30].sequence)
        _ = try store.commit(pushes: [], acknowledged: d1.map(\.sequence), at: 500)
        #expect(try store.backlog(deviceID: "d1", now: 600).isEmpty)
        #expect(try Self.watermark(path, device: "d1") == d1.last!.sequence + 1)
        #expect(try store.backlog(deviceID: "d2", now: 600).count == 50)
        let later = try store.commit(pushes: [push("late")], acknowledged: [], at: 700)
        #expect(try store.backlog(deviceID: "d1", now: 800).map(\.push.apnsID) == ["late"])
        #expect(try Self.watermark(path, device: "d1") == later[0].sequence)
        // Maintenance moves the watermark too, and expires from it.
        _ = try store.commit(pushes: [], acknowledged: later.map(\.sequence), at: 900)
        #expect(try store.expirePushes(now: 20_000, limit: 100) == 50)
        #expect(try Self.watermark(path, device: "d1") == later[0].sequence + 1)
        #expect(try store.backlog(deviceID: "d2", now: 20_000).isEmpty)
    }
}
