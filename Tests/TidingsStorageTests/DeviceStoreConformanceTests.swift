import Foundation
import Synchronization
import Testing
import GRDB
import TidingsCore
@testable import TidingsSQLite
import TidingsStorage
import TidingsTesting

/// One suite for every `DeviceStore` backend.
enum DeviceBackend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case memory, sqlite

    var testDescription: String { rawValue }

    func make() throws -> any DeviceStore {
        switch self {
        case .memory: InMemoryDeviceStore()
        case .sqlite:
            try SQLiteDeviceStore(path: TemporaryDirectories.databasePath(prefix: "device-"))
        }
    }
}

private func request(_ id: String, title: String = "t", trigger: TriggerValue? = .timeInterval(seconds: 60, repeats: false)) -> NotificationRequestValue {
    var content = NotificationContentValue()
    content.title = title
    return NotificationRequestValue(identifier: id, content: content, trigger: trigger)
}

private let app = "com.example.store"
private let t0 = Date(timeIntervalSinceReferenceDate: 800_000_000.123456)

@Suite("DeviceStore conformance")
struct DeviceStoreConformanceTests {
    @Test(arguments: DeviceBackend.allCases)
    func appsSettingsCategoriesBadge(_ backend: DeviceBackend) async throws {
        let store = try backend.make()
        let record = AppRecord(bundleIdentifier: app, displayName: "Store", executable: "/bin/true", directory: "/tmp", installedAt: t0)
        try await store.upsertApp(record).value
        #expect(try await store.app(app).value == record)
        #expect(try await store.apps().value == [record])
        #expect(try await store.settings(app).value == nil)
        let settings = NotificationSettingsValue.granted([.alert, .badge], provisional: false)
        try await store.setSettings(settings, for: app).value
        #expect(try await store.settings(app).value == settings)
        let categories = [CategoryValue(identifier: "c", actions: [ActionValue(identifier: "a", title: "A")])]
        try await store.setCategories(categories, for: app).value
        #expect(try await store.categories(app).value == categories)
        try await store.setBadge(4, for: app).value
        #expect(try await store.badge(app).value == 4)
    }

    @Test(arguments: DeviceBackend.allCases)
    func pendingReplaceRemoveAndSchedule(_ backend: DeviceBackend) async throws {
        let store = try backend.make()
        let first = try await store.addPending(request("a", title: "old"), for: app, nextFire: t0, limit: nil).value
        #expect(first.replacedPending == nil)
        let second = try await store.addPending(request("a", title: "new"), for: app, nextFire: t0.addingTimeInterval(5), limit: nil).value
        #expect(second.key != first.key, "a replacement gets a new key")
        #expect(second.replacedPending?.content.title == "old")
        #expect(try await store.pendingRecord(key: first.key).value == nil)
        #expect(try await store.pendingRecord(key: second.key).value?.nextFire == t0.addingTimeInterval(5), "dates round-trip exactly")
        _ = try await store.addPending(request("b"), for: app, nextFire: t0, limit: nil).value
        let region = CircularRegionValue(identifier: "r", latitude: 1, longitude: 2, radius: 3)
        _ = try await store.addPending(request("loc", trigger: .location(region, repeats: false)), for: app, nextFire: nil, limit: nil).value
        #expect(try await store.pending(app).value.map(\.identifier) == ["a", "b", "loc"])
        #expect(try await store.pendingRequest("a", for: app).value?.content.title == "new")
        #expect(try await store.pendingRequest("zzz", for: app).value == nil)
        #expect(Set(try await store.schedule().value.map(\.nextFire)) == [t0, t0.addingTimeInterval(5)])
        #expect(try await store.locationPending().value.map(\.request.identifier) == ["loc"])
        #expect(try await store.removePending(["b", "zzz"], for: app).value.map(\.identifier) == ["b"])
        #expect(try await store.removeAllPending(app).value.count == 2)
        #expect(try await store.pending(app).value.isEmpty)
    }

    @Test(arguments: DeviceBackend.allCases)
    func limitKeepsMostRecentlyAdded(_ backend: DeviceBackend) async throws {
        let store = try backend.make()
        for i in 0..<5 { _ = try await store.addPending(request("n\(i)"), for: app, nextFire: t0, limit: 3).value }
        #expect(try await store.pending(app).value.map(\.identifier) == ["n2", "n3", "n4"])
        let result = try await store.addPending(request("n5"), for: app, nextFire: t0, limit: 3).value
        #expect(result.evicted.map(\.identifier) == ["n2"])
    }

    @Test(arguments: DeviceBackend.allCases)
    func fireDeliversAndReplacesInPlace(_ backend: DeviceBackend) async throws {
        let store = try backend.make()
        let once = try await store.addPending(request("x", title: "one"), for: app, nextFire: t0, limit: nil).value
        let outcome = try #require(try await store.fireApplied(key: once.key, at: t0, nextFire: nil, keepPending: false, deliver: true).durable.value)
        #expect(outcome.replacedDelivered == nil)
        #expect(try await store.pending(app).value.isEmpty)
        _ = try await store.deliver(DeliveredNotificationValue(request: request("y"), date: t0), for: app, push: "apns-1#7").value
        #expect(try await store.deliveredPush("y", for: app).value == "apns-1#7")
        #expect(try await store.deliveredPush("x", for: app).value == nil, "a fired request came from no push")
        let again = try await store.addPending(request("x", title: "two"), for: app, nextFire: t0, limit: nil).value
        let replaced = try await store.fireApplied(key: again.key, at: t0.addingTimeInterval(1), nextFire: nil, keepPending: false, deliver: true).durable.value
        #expect(replaced?.replacedDelivered?.request.content.title == "one")
        let delivered = try await store.delivered(app).value
        #expect(delivered.map(\.request.identifier) == ["x", "y"], "the replacement keeps its place")
        #expect(delivered.first?.request.content.title == "two")
        #expect(try await store.fireApplied(key: again.key, at: t0, nextFire: nil, keepPending: false, deliver: true).durable.value == nil, "a gone key fires nothing")

        let repeating = try await store.addPending(request("r", trigger: .timeInterval(seconds: 60, repeats: true)), for: app, nextFire: t0, limit: nil).value
        _ = try await store.fireApplied(key: repeating.key, at: t0, nextFire: t0.addingTimeInterval(60), keepPending: true, deliver: false).durable.value
        #expect(try await store.pendingRecord(key: repeating.key).value?.nextFire == t0.addingTimeInterval(60))
        #expect(try await store.deliveredNotification("r", for: app).value == nil, "not kept when not listed")
        #expect(try await store.removeDelivered(["x"], for: app).value.count == 1)
        #expect(try await store.removeAllDelivered(app).value.map(\.request.identifier) == ["y"])
    }

    @Test(arguments: DeviceBackend.allCases)
    func fireDueReadsAndFiresInOneOperation(_ backend: DeviceBackend) async throws {
        let store = try backend.make()
        let added = try await store.addPending(request("d", title: "due"), for: app, nextFire: t0, limit: nil).value
        let never: @Sendable (PendingRecord) -> FireWrite? = { _ in Issue.record("decide must not run"); return nil }
        #expect(try await store.fireDue(key: added.key, due: t0.addingTimeInterval(5), at: t0, decide: never).applied.value == nil,
                "an entry for another date no longer stands")
        #expect(try await store.fireDue(key: added.key + 1000, due: t0, at: t0, decide: never).applied.value == nil, "a gone key")

        // Left to the caller: the record, nothing changed.
        let left = try #require(try await store.fireDue(key: added.key, due: t0, at: t0, decide: { _ in nil }).durable.value)
        #expect(left.record.request.content.title == "due" && left.write == nil && left.outcome == nil)
        #expect(try await store.pending(app).value.map(\.identifier) == ["d"])
        #expect(try await store.delivered(app).value.isEmpty)

        // Fired there and then, with what decide saw.
        let seen = Mutex<String?>(nil)
        let tickets = store.fireDue(key: added.key, due: t0, at: t0.addingTimeInterval(1), decide: { record in
            seen.withLock { $0 = record.request.identifier }
            return FireWrite(nextFire: nil, keepPending: false, deliver: true)
        })
        let fired = try #require(try await tickets.applied.value)
        #expect(seen.withLock { $0 } == "d")
        #expect(fired.outcome?.notification.date == t0.addingTimeInterval(1))
        #expect(try await tickets.durable.value == fired)
        #expect(try await store.pending(app).value.isEmpty)
        #expect(try await store.delivered(app).value.map(\.request.identifier) == ["d"])

        // A repeating request stays with its next date, and is not listed when not delivered.
        let repeating = try await store.addPending(request("r", trigger: .timeInterval(seconds: 60, repeats: true)), for: app, nextFire: t0, limit: nil).value
        _ = try await store.fireDue(key: repeating.key, due: t0, at: t0, decide: { _ in FireWrite(nextFire: t0.addingTimeInterval(60), keepPending: true, deliver: false) }).durable.value
        #expect(try await store.pendingRecord(key: repeating.key).value?.nextFire == t0.addingTimeInterval(60))
        #expect(try await store.deliveredNotification("r", for: app).value == nil)
    }

    @Test(arguments: DeviceBackend.allCases)
    func heldResponsesAndRemoveApp(_ backend: DeviceBackend) async throws {
        let store = try backend.make()
        let notification = DeliveredNotificationValue(request: request("h"), date: t0)
        let id1 = try await store.holdResponse(ResponseValue(notification: notification, actionIdentifier: "a"), for: app).value
        let id2 = try await store.holdResponse(ResponseValue(notification: notification, actionIdentifier: "b", userText: "hi"), for: app).value
        #expect(try await store.heldResponses(app).value.map(\.id) == [id1, id2])
        try await store.releaseResponse(id: id1).value
        #expect(try await store.heldResponses(app).value.map(\.response.userText) == ["hi"])

        var content = NotificationContentValue()
        content.attachments = [AttachmentValue(identifier: "i", path: "/store/i.png", type: "public.png")]
        _ = try await store.addPending(NotificationRequestValue(identifier: "att", content: content, trigger: nil), for: app, nextFire: t0, limit: nil).value
        try await store.upsertApp(AppRecord(bundleIdentifier: app, displayName: "S", executable: "/bin/true", directory: "/tmp", installedAt: t0)).value
        #expect(try await store.removeApp(app).value.map(\.path) == ["/store/i.png"])
        #expect(try await store.app(app).value == nil)
        #expect(try await store.pending(app).value.isEmpty)
        #expect(try await store.heldResponses(app).value.isEmpty)
    }

    @Test("operations submitted without waiting apply in order", arguments: DeviceBackend.allCases)
    func ordering(_ backend: DeviceBackend) async throws {
        let store = try backend.make()
        var tickets: [StoreTicket<PendingReplacement>] = []
        for i in 0..<200 { tickets.append(store.addPending(request("o\(i % 10)", title: "\(i)"), for: app, nextFire: t0, limit: nil)) }
        let removal = store.removePending(["o0"], for: app)
        let listing = store.pending(app)
        for ticket in tickets { _ = try await ticket.value }
        #expect(try await removal.value.first?.content.title == "190")
        #expect(try await listing.value.map(\.content.title).sorted() == ["191", "192", "193", "194", "195", "196", "197", "198", "199"])
    }
}

extension DeviceStoreConformanceTests {
    @Test("pending records carry their next fire dates; the bytes an app sent are stored as received", arguments: DeviceBackend.allCases)
    func pendingRecordsAndEncodedRequests(_ backend: DeviceBackend) async throws {
        let store = try backend.make()
        let sent = request("sent", title: "as sent")
        let bytes = Data(try BinaryRequestCodec.encode(sent))
        let added = try await store.addPending(sent, encoded: bytes, for: app, nextFire: t0.addingTimeInterval(30), limit: nil).value
        _ = try await store.addPending(request("where", trigger: nil), for: app, nextFire: nil, limit: nil).value
        let records = try await store.pendingRecords(app).value
        #expect(records.map(\.request) == [sent, request("where", trigger: nil)])
        #expect(records.map(\.nextFire) == [t0.addingTimeInterval(30), nil])
        #expect(try await store.pendingRecords("com.example.other").value.isEmpty)

        // Fired with the two-stage tickets: both report the same outcome; the delivered
        // copy is the request as sent.
        let tickets = store.fireApplied(key: added.key, at: t0, nextFire: nil, keepPending: false, deliver: true)
        let applied = try await tickets.applied.value
        #expect(applied?.notification.request == sent)
        #expect(try await tickets.durable.value == applied)
        #expect(try await store.delivered(app).value.map(\.request) == [sent])
        #expect(try await store.pendingRecords(app).value.map(\.request.identifier) == ["where"])
    }

    /// The remote path's writes (`deliver`), interleaved across two apps: each app's list in
    /// its own order, a delivery with an identifier already listed replaces it in place (and
    /// hands back what it replaced, with the new push's key), one removed and delivered again
    /// goes to the end, and removing an app's list leaves the other's.
    @Test("delivered lists: per-app order, replacement in place, removal", arguments: DeviceBackend.allCases)
    func deliveredListsPerApp(_ backend: DeviceBackend) async throws {
        let store = try backend.make()
        let other = "com.example.other"
        func note(_ id: String, _ title: String, at seconds: Double = 0) -> DeliveredNotificationValue {
            DeliveredNotificationValue(request: request(id, title: title, trigger: .push), date: t0.addingTimeInterval(seconds))
        }
        var tickets: [StoreTicket<DeliveredNotificationValue?>] = []
        for i in 0..<6 {
            tickets.append(store.deliver(note("n\(i)", "a\(i)"), for: app, push: "p\(i)#\(i)"))
            tickets.append(store.deliver(note("n\(i)", "o\(i)"), for: other, push: "q\(i)#\(i)"))
        }
        for ticket in tickets { #expect(try await ticket.value == nil, "a new identifier replaces nothing") }
        let replaced = try await store.deliver(note("n2", "a2 again", at: 5), for: app, push: "p9#9").value
        #expect(replaced == note("n2", "a2"))
        #expect(try await store.deliveredPush("n2", for: app).value == "p9#9")
        #expect(try await store.deliveredPush("n2", for: other).value == "q2#2", "the other app's n2 is its own")
        #expect(try await store.deliveredNotification("n2", for: app).value == note("n2", "a2 again", at: 5))
        #expect(try await store.delivered(app).value.map(\.request.content.title) == ["a0", "a1", "a2 again", "a3", "a4", "a5"])
        #expect(try await store.removeDelivered(["n1", "absent"], for: app).value == [note("n1", "a1")])
        #expect(try await store.deliver(note("n1", "a1 back"), for: app, push: nil).value == nil)
        #expect(try await store.deliveredPush("n1", for: app).value == nil)
        #expect(try await store.delivered(app).value.map(\.request.identifier) == ["n0", "n2", "n3", "n4", "n5", "n1"])
        #expect(try await store.removeAllDelivered(other).value.map(\.request.content.title) == ["o0", "o1", "o2", "o3", "o4", "o5"])
        #expect(try await store.delivered(other).value.isEmpty)
        #expect(try await store.delivered(app).value.count == 6)
    }

    @Test("trimming a delivered list keeps the newest, in the list's order, and returns the rest oldest first", arguments: DeviceBackend.allCases)
    func trimKeepsTheNewest(_ backend: DeviceBackend) async throws {
        let store = try backend.make()
        let other = "com.example.other"
        func note(_ id: String, _ title: String = "t", files: Bool = false) -> DeliveredNotificationValue {
            var request = request(id, title: title, trigger: .push)
            if files { request.content.attachments = [AttachmentValue(identifier: "a", path: "\(id).png", type: "public.png")] }
            return DeliveredNotificationValue(request: request, date: t0)
        }
        for i in 0..<5 {
            _ = store.deliver(note("n\(i)", files: i == 1), for: app, push: nil)
            _ = store.deliver(note("n\(i)"), for: other, push: nil)
        }
        // A replacement keeps its place: n0 stays the oldest.
        _ = try await store.deliver(note("n0", "again"), for: app, push: nil).value
        #expect(try await store.trimDelivered(app, keeping: 5).value == DeliveredTrim(), "at the limit nothing goes")
        #expect(try await store.trimDelivered(app, keeping: 9).value == DeliveredTrim())
        let trimmed = try await store.trimDelivered(app, keeping: 3).value
        #expect(trimmed.identifiers == ["n0", "n1"])
        #expect(trimmed.withAttachments == [note("n1", files: true).request], "only the requests naming files come back whole")
        #expect(try await store.delivered(app).value.map(\.request.identifier) == ["n2", "n3", "n4"])
        #expect(try await store.deliveredNotification("n0", for: app).value == nil)
        #expect(try await store.delivered(other).value.count == 5, "another app's list is its own")
        #expect(try await store.deliver(note("n0"), for: app, push: nil).value == nil, "a trimmed identifier comes back as new")
        #expect(try await store.trimDelivered(app, keeping: 3).value.identifiers == ["n2"])
        #expect(try await store.trimDelivered(app, keeping: -1).value.identifiers == ["n3", "n4", "n0"])
        #expect(try await store.delivered(app).value.isEmpty)
        #expect(try await store.trimDelivered("com.example.none", keeping: 0).value == DeliveredTrim())
    }
}

@Suite("SQLite device store")
struct SQLiteDeviceStoreTests {
    /// The device database as the migrations `device-v1` to `device-v3-presenting` left it.
    static let v3Schema = """
        CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
        INSERT INTO grdb_migrations VALUES ('device-v1'), ('device-v2-delivered-push'), ('device-v3-presenting');
        CREATE TABLE app (bundle_id TEXT PRIMARY KEY NOT NULL, record BLOB NOT NULL);
        CREATE TABLE settings (bundle_id TEXT PRIMARY KEY NOT NULL, value BLOB NOT NULL);
        CREATE TABLE categories (bundle_id TEXT PRIMARY KEY NOT NULL, value BLOB NOT NULL);
        CREATE TABLE pending (key INTEGER PRIMARY KEY AUTOINCREMENT, bundle_id TEXT NOT NULL, identifier TEXT NOT NULL,
                              next_fire REAL, location INTEGER NOT NULL DEFAULT 0, request BLOB NOT NULL);
        CREATE UNIQUE INDEX pending_identity ON pending(bundle_id, identifier);
        CREATE INDEX pending_location ON pending(location) WHERE location = 1;
        CREATE TABLE delivered (bundle_id TEXT NOT NULL, identifier TEXT NOT NULL, seq INTEGER NOT NULL, date REAL NOT NULL,
                                request BLOB NOT NULL, push TEXT, PRIMARY KEY (bundle_id, identifier));
        CREATE INDEX delivered_order ON delivered(bundle_id, seq);
        CREATE TABLE badge (bundle_id TEXT PRIMARY KEY NOT NULL, count INTEGER NOT NULL);
        CREATE TABLE held_response (id INTEGER PRIMARY KEY AUTOINCREMENT, bundle_id TEXT NOT NULL, response BLOB NOT NULL);
        CREATE INDEX held_response_app ON held_response(bundle_id, id);
        CREATE TABLE presenting (id INTEGER PRIMARY KEY AUTOINCREMENT, bundle_id TEXT NOT NULL, identifier TEXT NOT NULL,
                                 date REAL NOT NULL, present INTEGER NOT NULL, request BLOB NOT NULL);
        CREATE INDEX presenting_identity ON presenting(bundle_id, identifier);
        """

    /// A delivered list written by the v3 schema (each app's own `seq`, rows stored out of that
    /// order, requests as JSON and in the binary form) opens with each app's list in its order,
    /// its push keys, and replacement and new deliveries working; the table is then the two
    /// b-trees of `device-v4-delivered-by-seq` (rowid = seq, one unique identity index).
    @Test("a v3 delivered list keeps each app's order through the migration")
    func deliveredMigratesFromV3() async throws {
        let path = TemporaryDirectories.databasePath(prefix: "device-")
        let other = "com.example.other"
        do {
            let queue = try DatabaseQueue(path: path)
            try await queue.write { db in
                try db.execute(sql: Self.v3Schema)
                // (app, identifier, the app's seq, JSON or binary, push key), in rowid order.
                let rows: [(String, String, Int64, Bool, String?)] = [
                    (app, "c", 3, false, "pc#3"), (other, "y", 2, true, nil), (app, "a", 1, true, "pa#1"),
                    (other, "x", 1, false, "px#1"), (app, "b", 2, false, nil),
                ]
                for (bundle, id, seq, json, push) in rows {
                    let r = request(id, title: "\(bundle) \(id)", trigger: .push)
                    let body = json ? try JSONEncoder().encode(r) : Data(try BinaryRequestCodec.encode(r))
                    try db.execute(sql: "INSERT INTO delivered (bundle_id, identifier, seq, date, request, push) VALUES (?, ?, ?, ?, ?, ?)",
                                   arguments: [bundle, id, seq, t0.timeIntervalSinceReferenceDate + Double(seq), body, push])
                }
            }
        }
        let store = try SQLiteDeviceStore(path: path)
        #expect(try await store.delivered(app).value.map(\.request.identifier) == ["a", "b", "c"])
        #expect(try await store.delivered(other).value.map(\.request.identifier) == ["x", "y"])
        #expect(try await store.delivered(app).value.map(\.date) == [1, 2, 3].map { t0.addingTimeInterval($0) })
        #expect(try await store.deliveredPush("c", for: app).value == "pc#3")
        #expect(try await store.deliveredNotification("a", for: app).value?.request == request("a", title: "\(app) a", trigger: .push))
        let replaced = try await store.deliver(DeliveredNotificationValue(request: request("b", title: "new b", trigger: .push), date: t0), for: app, push: "pb#9").value
        #expect(replaced?.request.content.title == "\(app) b")
        #expect(try await store.deliver(DeliveredNotificationValue(request: request("d", trigger: .push), date: t0), for: app, push: nil).value == nil)
        #expect(try await store.delivered(app).value.map(\.request.content.title) == ["\(app) a", "new b", "\(app) c", "t"])
        #expect(try await store.delivered(other).value.map(\.request.identifier) == ["x", "y"])

        let schema = try await store.writer.submit { (db: Database) throws -> [String] in
            try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE tbl_name = 'delivered' ORDER BY name")
        }.value
        #expect(schema == ["delivered", "delivered_identity"], "the table and its identity index, no order index")
    }

    @Test("rows written as JSON before the binary form are still read")
    func legacyJSONRows() async throws {
        let path = TemporaryDirectories.databasePath(prefix: "device-")
        let store = try SQLiteDeviceStore(path: path)
        let old = request("old", title: "from JSON days")
        let json = try JSONEncoder().encode(old)
        try await store.writer.submit { (db: Database) throws -> Void in
            try db.execute(sql: "INSERT INTO pending (bundle_id, identifier, next_fire, location, request) VALUES (?, ?, ?, 0, ?)",
                           arguments: [app, "old", t0.timeIntervalSinceReferenceDate, json])
            try db.execute(sql: "INSERT INTO delivered (bundle_id, identifier, seq, date, request) VALUES (?, ?, 1, ?, ?)",
                           arguments: [app, "gone", t0.timeIntervalSinceReferenceDate, try JSONEncoder().encode(request("gone"))])
        }.value
        _ = try await store.addPending(request("new"), for: app, nextFire: t0, limit: nil).value
        #expect(try await store.pending(app).value == [old, request("new")])
        #expect(try await store.delivered(app).value.map(\.request) == [request("gone")])
        let key = try #require(try await store.pendingRecords(app).value.first?.key)
        #expect(try await store.fireApplied(key: key, at: t0, nextFire: nil, keepPending: false, deliver: true).durable.value?.notification.request == old)
        #expect(try await store.deliveredNotification("old", for: app).value?.request == old)
    }

    @Test("an operation's applied ticket completes, and later operations see its effect")
    func appliedBeforeDurable() async throws {
        let store = try SQLiteDeviceStore(path: TemporaryDirectories.databasePath(prefix: "device-"))
        let tickets = store.writer.submitApplied { (db: Database) throws -> Int in
            try db.execute(sql: "INSERT INTO badge (bundle_id, count) VALUES (?, 7)", arguments: [app])
            return 7
        }
        let after = store.badge(app)
        #expect(try await tickets.applied.value == 7)
        #expect(try await tickets.durable.value == 7)
        #expect(try await after.value == 7)
        let failing = store.writer.submitApplied { db -> Int in
            try db.execute(sql: "INSERT INTO no_such_table VALUES (1)")
            return 1
        }
        await #expect(throws: (any Error).self) { try await failing.applied.value }
        await #expect(throws: (any Error).self) { try await failing.durable.value }
    }

    @Test("data survives reopening the file")
    func reopen() async throws {
        let path = TemporaryDirectories.databasePath(prefix: "device-")
        do {
            let store = try SQLiteDeviceStore(path: path)
            _ = try await store.addPending(request("keep"), for: app, nextFire: t0, limit: nil).value
            try await store.setBadge(2, for: app).value
        }
        let reopened = try SQLiteDeviceStore(path: path)
        #expect(try await reopened.pending(app).value.map(\.identifier) == ["keep"])
        #expect(try await reopened.badge(app).value == 2)
    }

    /// The writer's WAL writes go through the buffer (`WALWriteBuffer`), and what a group commit
    /// wrote is in the file once its ticket completes: a connection of its own (default VFS)
    /// reads every delivered notification of a commit larger than one buffer (128 KiB).
    @Test func bufferedWALWritesAreInTheFileWhenACommitCompletes() async throws {
        let path = TemporaryDirectories.databasePath(prefix: "device-")
        let store = try SQLiteDeviceStore(path: path)
        #expect(store.walWritesBuffered)
        let other = try DatabaseQueue(path: path)
        let big = String(repeating: "b", count: 3_000)
        var tickets: [StoreTicket<DeliveredNotificationValue?>] = []
        for i in 0..<200 {
            tickets.append(store.deliver(DeliveredNotificationValue(request: request("w\(i)", title: big, trigger: .push), date: t0), for: app, push: "p#\(i)"))
        }
        for ticket in tickets { _ = try await ticket.value }
        let read = try await other.read { db in
            try Row.fetchOne(db, sql: "SELECT COUNT(*) FROM delivered WHERE bundle_id = ?", arguments: [app])
        }
        #expect(read?[0] as Int? == 200)
        #expect(try await store.delivered(app).value.count == 200)
    }

    /// A writer that commits all the time (the device store under a burst of pushes): while
    /// a background checkpoint runs, commits do not queue another; after it, the few frames
    /// the writer added meanwhile are copied by the writer itself, so that its next
    /// transaction starts the WAL over. (Before, each commit past the threshold woke another
    /// background checkpoint for the new frames — more checkpoints than commits — and the WAL
    /// grew to its limit.)
    @Test func checkpointsUnderAWriterThatNeverPauses() {
        var s = WALCheckpointer.State()
        func after(_ pages: CInt) -> WALCheckpointer.State.Step { s.afterCommit(pages: pages, checkpointPages: 100, catchUpPages: 10) }
        func starts() -> Bool { s.backgroundStarts() }
        #expect(after(50) == .none)
        #expect(after(100) == .wake)
        #expect(after(110) == .none, "woken already")
        #expect(starts())
        #expect(after(130) == .none, "one is running")
        s.backgroundFinished(succeeded: true, copied: 110)
        #expect(after(140) == .wake, "30 frames left: more than the writer copies")
        #expect(starts())
        s.backgroundFinished(succeeded: true, copied: 140)
        #expect(after(146) == .catchUp)
        #expect(s.catchUps == 1 && s.background == 2)
        #expect(after(150) == .wake, "the catch-up's count is spent; the WAL did not start over")
        #expect(starts())
        s.backgroundFinished(succeeded: true, copied: 150)
        // The writer's next transaction started the WAL over: its count is below what was copied.
        #expect(after(6) == .none)
        #expect(after(100) == .wake, "a new WAL: no catch-up with the old WAL's count")
        #expect(starts())
        s.backgroundFinished(succeeded: false, copied: 0)
        #expect(after(105) == .wake, "a busy checkpoint copied nothing")
    }

    /// The device store's commits leave WAL checkpoints to the background connection.
    @Test func sqliteCheckpointsInTheBackground() async throws {
        let path = TemporaryDirectories.databasePath(prefix: "device-")
        let store = try SQLiteDeviceStore(path: path, checkpointPages: 4, walPageLimit: 1_000_000)
        var added = 0
        // Commits keep waking the checkpointer; stop once it has run (an event, not a duration).
        while store.checkpointCounts.background == 0 && added < 100_000 {
            _ = try await store.addPending(request("c\(added)", title: String(repeating: "x", count: 2_000)), for: app, nextFire: t0, limit: nil).value
            added += 1
        }
        #expect(store.checkpointCounts.background > 0)
        #expect(store.checkpointCounts.writer == 0)
        #expect(try await store.pending(app).value.count == added)
    }
}
