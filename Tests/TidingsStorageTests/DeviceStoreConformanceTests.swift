import Foundation
import Synchronization
import Testing
import GRDB
import TidingsCore
import TidingsSQLite
import TidingsStorage

/// One suite for every `DeviceStore` backend.
enum DeviceBackend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case memory, sqlite

    var testDescription: String { rawValue }

    func make() throws -> any DeviceStore {
        switch self {
        case .memory: InMemoryDeviceStore()
        case .sqlite:
            try SQLiteDeviceStore(path: FileManager.default.temporaryDirectory.appendingPathComponent("device-\(UUID().uuidString).sqlite").path)
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
}

@Suite("SQLite device store")
struct SQLiteDeviceStoreTests {
    @Test("rows written as JSON before the binary form are still read")
    func legacyJSONRows() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("device-\(UUID().uuidString).sqlite").path
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
        let store = try SQLiteDeviceStore(path: FileManager.default.temporaryDirectory.appendingPathComponent("device-\(UUID().uuidString).sqlite").path)
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
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("device-\(UUID().uuidString).sqlite").path
        do {
            let store = try SQLiteDeviceStore(path: path)
            _ = try await store.addPending(request("keep"), for: app, nextFire: t0, limit: nil).value
            try await store.setBadge(2, for: app).value
        }
        let reopened = try SQLiteDeviceStore(path: path)
        #expect(try await reopened.pending(app).value.map(\.identifier) == ["keep"])
        #expect(try await reopened.badge(app).value == 2)
    }

    /// The device store's commits leave WAL checkpoints to the background connection.
    @Test func sqliteCheckpointsInTheBackground() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("device-\(UUID().uuidString).sqlite").path
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
