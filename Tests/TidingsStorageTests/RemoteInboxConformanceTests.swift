import Foundation
import GRDB
import Testing
import TidingsCore
import TidingsSQLite
import TidingsStorage
import TidingsTesting

/// One suite for every `RemoteInboxStore` backend.
enum RemoteInboxBackend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case memory, sqlite

    var testDescription: String { rawValue }

    func make(maximumPendingEvents: Int = RemoteInboxDefaults.maximumPendingEvents) throws -> any RemoteInboxStore {
        switch self {
        case .memory: InMemoryRemoteInbox(maximumPendingEvents: maximumPendingEvents)
        case .sqlite:
            try SQLiteRemoteInbox(path: TemporaryDirectories.databasePath(prefix: "remote-"),
                                  maximumPendingEvents: maximumPendingEvents)
        }
    }
}

private let t0 = Date(timeIntervalSince1970: 1_795_348_800.25)
private let app = "com.example.inbox"

/// A push of every kind of field: a VoIP one (topic with its suffix), a collapse id, priority
/// 5, and a payload whose bytes must come back exactly.
/// The `push` table as `inbox-v2-by-sequence` made it and `inbox-v3-events-by-sequence` left it
/// (a `processed` column and its index): the old layouts' tests build it by this SQL, not by
/// the code under test.
private let pushTableByKey = """
    CREATE TABLE push (
        sequence INTEGER NOT NULL, apns_id TEXT NOT NULL, bundle TEXT NOT NULL,
        push_type TEXT NOT NULL, priority INTEGER NOT NULL, collapse_id TEXT,
        expires_at INTEGER NOT NULL, accepted_at INTEGER NOT NULL, payload BLOB NOT NULL,
        received_at INTEGER NOT NULL, processed INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (sequence, apns_id)) WITHOUT ROWID;
    CREATE INDEX push_unprocessed ON push(processed, received_at);
    """

/// A row of `pushTableByKey`.
private func insertKeyedPush(_ p: RemotePush, receivedAt: Int64, processed: Bool, _ db: Database) throws {
    try db.execute(sql: """
        INSERT INTO push (sequence, apns_id, bundle, push_type, priority, collapse_id, expires_at, accepted_at, payload, received_at, processed)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        """, arguments: [p.sequence, p.apnsID, p.bundleIdentifier, p.pushType.rawValue, p.priority.rawValue, p.collapseID?.rawValue,
                         p.expiresAt, p.acceptedAt, Data(p.payload), receivedAt, processed])
}

private func push(_ n: Int64, apnsID: String? = nil, pushType: PushType = .alert, collapse: String? = nil, bundle: String = app) -> RemotePush {
    RemotePush(apnsID: apnsID ?? String(format: "00000000-0000-4000-8000-%012d", n), sequence: n, bundleIdentifier: bundle,
               pushType: pushType, priority: n % 2 == 0 ? .considerPower : .immediate,
               collapseID: collapse.flatMap(CollapseID.init(rawValue:)), expiresAt: 1_795_400_000_000 + n, acceptedAt: 1_795_348_000_000 + n,
               payload: Array(#"{"aps":{"alert":"n\#(n) \"quoted\" é ✓"},"k":[1,2]}"#.utf8))!
}

@Suite("RemoteInboxStore conformance")
struct RemoteInboxConformanceTests {
    @Test(arguments: RemoteInboxBackend.allCases)
    func receiptIsTypedDedupedAndInOrder(_ backend: RemoteInboxBackend) async throws {
        let inbox = try backend.make()
        let voip = push(2, pushType: .voip, collapse: "chat")
        #expect(voip.topic.rawValue == app + ".voip")
        #expect(try await inbox.receive([push(1)], at: t0) == [true])
        #expect(try await inbox.receive([push(1), voip, push(3), push(4)], at: t0.addingTimeInterval(1)) == [false, true, true, true],
                "a redelivery (same apns-id and sequence) is known")
        #expect(try await inbox.receive([], at: t0) == [])
        let back = try await inbox.unprocessed()
        #expect(back == [push(1), voip, push(3), push(4)], "every field back as received, in the order received")
        #expect(back[1].pushType == .voip && back[1].topic == voip.topic && back[1].collapseID?.rawValue == "chat" && back[1].priority == .considerPower)
        #expect(try await inbox.count() == 4)
        // The same apns-id with another sequence is another push (the gateway's key is both).
        #expect(try await inbox.receive([push(5, apnsID: push(1).apnsID)], at: t0.addingTimeInterval(2)) == [true])
    }

    @Test(arguments: RemoteInboxBackend.allCases)
    func processedPushesLeaveTheUnprocessedSet(_ backend: RemoteInboxBackend) async throws {
        let inbox = try backend.make()
        _ = try await inbox.receive((1...4).map { push($0) }, at: t0)
        try await inbox.markProcessed([push(1), push(3), push(99)])
        #expect(try await inbox.unprocessed().map(\.sequence) == [2, 4], "a push not in the inbox is ignored")
        try await inbox.markProcessed([])
        #expect(try await inbox.receive([push(3)], at: t0) == [false], "a processed push is still known: a redelivery is not new")
        #expect(try await inbox.count() == 4)
    }

    /// Read back in pages (a restart's recovery within the link's bound): each page starts
    /// after the position of the last one's last push, in the order received; processed pushes
    /// are skipped; an empty page is the end.
    @Test(arguments: RemoteInboxBackend.allCases)
    func unprocessedPushesAreReadInPages(_ backend: RemoteInboxBackend) async throws {
        let inbox = try backend.make()
        _ = try await inbox.receive([push(7), push(3)], at: t0)
        _ = try await inbox.receive([push(1), push(2), push(9)], at: t0.addingTimeInterval(1))
        try await inbox.markProcessed([push(2)])
        let first = try await inbox.unprocessed(after: nil, limit: 2)
        #expect(first.map(\.push.sequence) == [3, 7], "received first, then by sequence")
        let second = try await inbox.unprocessed(after: first.last?.position, limit: 2)
        #expect(second.map(\.push.sequence) == [1, 9], "a processed push is skipped")
        #expect(second.first!.position > first.last!.position)
        #expect(try await inbox.unprocessed(after: second.last?.position, limit: 2).isEmpty)
        #expect(try await inbox.unprocessed(after: nil, limit: 0).isEmpty)
        #expect(try await inbox.unprocessed().map(\.sequence) == [3, 7, 1, 9])
    }

    @Test(arguments: RemoteInboxBackend.allCases)
    func pruningForgetsOnlyOldProcessedPushes(_ backend: RemoteInboxBackend) async throws {
        let inbox = try backend.make()
        _ = try await inbox.receive([push(1), push(2)], at: t0)
        _ = try await inbox.receive([push(3)], at: t0.addingTimeInterval(100))
        try await inbox.markProcessed([push(1), push(3)])
        #expect(try await inbox.prune(before: t0.addingTimeInterval(50), limit: 10) == 1)
        #expect(try await inbox.count() == 2, "the old processed one goes; the old unprocessed and the recent processed stay")
        #expect(try await inbox.unprocessed().map(\.sequence) == [2])
        #expect(try await inbox.receive([push(1)], at: t0.addingTimeInterval(200)) == [true], "forgotten: it would be new again")
    }

    /// Pruning deletes at most `limit` per call, oldest received first, and says how many: the
    /// link repeats it in batches so receipt never waits behind a month of deletions.
    @Test(arguments: RemoteInboxBackend.allCases)
    func pruningTakesAtMostTheLimitOldestFirst(_ backend: RemoteInboxBackend) async throws {
        let inbox = try backend.make()
        for n in Int64(1)...5 { _ = try await inbox.receive([push(n)], at: t0.addingTimeInterval(Double(n))) }
        try await inbox.markProcessed((1...5).map { push($0) })
        let cutoff = t0.addingTimeInterval(100)
        #expect(try await inbox.prune(before: cutoff, limit: 2) == 2)
        #expect(try await inbox.count() == 3)
        #expect(try await inbox.receive([push(1), push(2), push(3)], at: cutoff) == [true, true, false], "the two oldest went")
        #expect(try await inbox.prune(before: cutoff, limit: 2) == 2)
        #expect(try await inbox.prune(before: cutoff, limit: 2) == 1)
        #expect(try await inbox.prune(before: cutoff, limit: 2) == 0, "the rest is unprocessed (received again)")
        #expect(try await inbox.count() == 2)
        #expect(try await inbox.prune(before: cutoff, limit: 0) == 0)
    }

    /// A hand-off's processed mark keeps its events in the same write, as `addPendingEvents`
    /// would: marked pushes leave the unprocessed set, events are kept once, in order.
    @Test(arguments: RemoteInboxBackend.allCases)
    func aProcessedMarkKeepsTheHandOffsEvents(_ backend: RemoteInboxBackend) async throws {
        let inbox = try backend.make()
        _ = try await inbox.receive((1...3).map { push($0) }, at: t0)
        let events = [push(2), push(1)].map { PendingDeliveryEvent(event: "presented", apnsID: $0.apnsID, sequence: $0.sequence) }
        try await inbox.markProcessed([push(1), push(2)], keeping: events)
        #expect(try await inbox.unprocessed() == [push(3)])
        #expect(try await inbox.pendingEvents(limit: 10) == events.reversed(), "oldest push first")
        try await inbox.markProcessed([], keeping: [events[0]])
        try await inbox.markProcessed([push(3)], keeping: [])
        #expect(try await inbox.unprocessed().isEmpty)
        #expect(try await inbox.pendingEvents(limit: 10) == events.reversed(), "kept once")
    }

    /// An event keeps when it happened (sent with it for the gateway to record), kept by a mark
    /// or on its own; kept again with another time it is still one event, with its first time.
    /// One without a time reads back without.
    @Test(arguments: RemoteInboxBackend.allCases)
    func eventsKeepWhenTheyHappened(_ backend: RemoteInboxBackend) async throws {
        let inbox = try backend.make()
        _ = try await inbox.receive((1...2).map { push($0) }, at: t0)
        func event(_ n: Int64, _ stage: String = "presented", at time: Int64?) -> PendingDeliveryEvent {
            PendingDeliveryEvent(event: stage, apnsID: push(n).apnsID, sequence: push(n).sequence, occurredAt: time)
        }
        try await inbox.markProcessed([push(1)], keeping: [event(1, at: 1_795_348_800_250)])
        try await inbox.addPendingEvents([event(2, at: 1_795_348_800_300), event(2, "answered", at: nil)])
        try await inbox.addPendingEvents([event(1, at: 1), event(2, at: 2)])
        try await inbox.markProcessed([push(2)], keeping: [event(2, at: 3)])
        let kept = try await inbox.pendingEvents(limit: 10)
        #expect(kept == [event(1, at: nil), event(2, "answered", at: nil), event(2, at: nil)])
        #expect(kept.map(\.occurredAt) == [1_795_348_800_250, nil, 1_795_348_800_300])
    }

    /// A processed mark also forgets the events confirmed since the last write (the event
    /// sender's, riding with the next hand-off): those confirmed go, others stay; an event
    /// confirmed and kept again in the same write is kept (forgotten first, then kept); one
    /// without a sequence is forgotten too; events not in the inbox are ignored.
    @Test(arguments: RemoteInboxBackend.allCases)
    func aProcessedMarkForgetsTheConfirmedEvents(_ backend: RemoteInboxBackend) async throws {
        let inbox = try backend.make()
        _ = try await inbox.receive((1...4).map { push($0) }, at: t0)
        let presented = (1...4).map { PendingDeliveryEvent(event: "presented", apnsID: push($0).apnsID, sequence: $0) }
        let legacy = PendingDeliveryEvent(event: "answered", apnsID: "legacy")
        try await inbox.addPendingEvents([legacy])
        try await inbox.markProcessed([push(1), push(2)], keeping: Array(presented[0...1]))
        try await inbox.markProcessed([push(3)], keeping: [presented[2]], clearing: [presented[0], legacy, PendingDeliveryEvent(event: "presented", apnsID: "never")])
        #expect(try await inbox.unprocessed() == [push(4)])
        #expect(try await inbox.pendingEvents(limit: 10) == [presented[1], presented[2]], "the confirmed ones gone, the rest kept")
        try await inbox.markProcessed([push(4)], keeping: [presented[1], presented[3]], clearing: [presented[1], presented[2]])
        #expect(try await inbox.unprocessed().isEmpty)
        #expect(try await inbox.pendingEvents(limit: 10) == [presented[1], presented[3]], "confirmed and kept again in one write: kept")
        try await inbox.markProcessed([], keeping: [], clearing: [presented[1], presented[3]])
        #expect(try await inbox.pendingEvents(limit: 10).isEmpty, "a write of clearing alone")
    }

    /// Kept once per push (sequence and apns-id) and stage, oldest push first — one kept before
    /// events had a sequence before all — and past the limit the oldest go.
    @Test(arguments: RemoteInboxBackend.allCases)
    func deliveryEventsWaitOnceEachOldestFirstWithinTheLimit(_ backend: RemoteInboxBackend) async throws {
        let inbox = try backend.make(maximumPendingEvents: 3)
        let a = PendingDeliveryEvent(event: "presented", apnsID: "a", sequence: 41)
        let legacy = PendingDeliveryEvent(event: "presented", apnsID: "b")
        let aAnswered = PendingDeliveryEvent(event: "answered", apnsID: "a", sequence: 41)
        try await inbox.addPendingEvents([a, legacy])
        try await inbox.addPendingEvents([a, legacy])
        #expect(try await inbox.pendingEvents(limit: 10) == [legacy, a], "an event kept once per push and stage, with its sequence")
        try await inbox.addPendingEvents([aAnswered])
        #expect(try await inbox.pendingEvents(limit: 2) == [legacy, aAnswered])
        #expect(try await inbox.pendingEvents(limit: 0) == [])
        // At the limit (3) nothing is dropped; past it the oldest go.
        #expect(try await inbox.pendingEvents(limit: 10) == [legacy, aAnswered, a])
        let c = PendingDeliveryEvent(event: "presented", apnsID: "c", sequence: 50)
        let d = PendingDeliveryEvent(event: "presented", apnsID: "d", sequence: 51)
        try await inbox.addPendingEvents([d, c])
        #expect(try await inbox.pendingEvents(limit: 10) == [a, c, d])
        try await inbox.clearEvents([c, PendingDeliveryEvent(event: "presented", apnsID: "unknown", sequence: 50),
                                     PendingDeliveryEvent(event: "presented", apnsID: "d", sequence: 52)])
        #expect(try await inbox.pendingEvents(limit: 10) == [a, d], "cleared by push and stage: another sequence is another push")
    }

    /// The limit counts the events kept, not those ever added: with one refused (still kept)
    /// behind confirmed ones, nothing is dropped until more than the limit wait. The same
    /// apns-id with another sequence is another push (the gateway's key is both): its event
    /// is kept beside the first one's.
    @Test(arguments: RemoteInboxBackend.allCases)
    func eventsAreDroppedOnlyPastTheLimitOfThoseKept(_ backend: RemoteInboxBackend) async throws {
        let inbox = try backend.make(maximumPendingEvents: 3)
        let e = (1...6).map { PendingDeliveryEvent(event: "presented", apnsID: "e\($0)", sequence: Int64($0)) }
        try await inbox.addPendingEvents([e[0], e[1], e[2]])
        try await inbox.clearEvents([e[1]])
        try await inbox.addPendingEvents([e[3]])
        #expect(try await inbox.pendingEvents(limit: 10) == [e[0], e[2], e[3]], "three kept: at the limit, none dropped")
        try await inbox.clearEvents([e[0], e[2], e[3]])
        let again = PendingDeliveryEvent(event: "presented", apnsID: "e5", sequence: 9)
        try await inbox.addPendingEvents([e[4], again])
        #expect(try await inbox.pendingEvents(limit: 10) == [e[4], again], "the same apns-id, another sequence: another push")
        try await inbox.addPendingEvents([e[5], e[0]])
        #expect(try await inbox.pendingEvents(limit: 10) == [e[4], e[5], again], "past the limit the oldest went")
    }

    @Test(arguments: RemoteInboxBackend.allCases)
    func removalsWaitUntilCleared(_ backend: RemoteInboxBackend) async throws {
        let inbox = try backend.make()
        try await inbox.addRemoval("com.example.b")
        try await inbox.addRemoval("com.example.a")
        try await inbox.addRemoval("com.example.b")
        #expect(try await inbox.removals() == ["com.example.a", "com.example.b"])
        try await inbox.clearRemoval("com.example.b")
        #expect(try await inbox.removals() == ["com.example.a"])
    }
}

/// The SQLite inbox: what a reopened file holds, and the rows written before payloads were
/// kept as bytes.
@Suite("SQLite remote inbox")
struct SQLiteRemoteInboxTests {
    @Test func aReopenedInboxHasWhatWasReceivedAndMarked() async throws {
        let path = TemporaryDirectories.databasePath(prefix: "remote-")
        let inbox = try SQLiteRemoteInbox(path: path)
        _ = try await inbox.receive([push(1), push(2, pushType: .voip), push(3)], at: t0)
        try await inbox.markProcessed([push(1)])
        try await inbox.addPendingEvents([PendingDeliveryEvent(event: "presented", apnsID: "x")])
        let reopened = try SQLiteRemoteInbox(path: path)
        #expect(try await reopened.unprocessed() == [push(2, pushType: .voip), push(3)])
        #expect(try await reopened.pendingEvents(limit: 5).map(\.apnsID) == ["x"])
    }

    /// The inbox's WAL writes go through the buffer (`WALWriteBuffer`), and a commit is in the
    /// file when it returns whether it syncs (receipt, `synchronous=FULL`) or not (the processed
    /// marks and their events, `NORMAL`): a connection of its own (default VFS, its own file
    /// handle) reads each at once — a receipt several buffers (128 KiB) long among them. Were a
    /// commit that does not sync left in the buffer, that connection would find frames in the
    /// WAL index that are not in the file (and a `kill -9` would lose the mark: the push shown
    /// twice).
    @Test func bufferedWALWritesAreInTheFileWhenACommitReturnsWithOrWithoutASync() async throws {
        let path = TemporaryDirectories.databasePath(prefix: "remote-")
        let inbox = try SQLiteRemoteInbox(path: path)
        #expect(inbox.walWritesBuffered)
        let other = try DatabaseQueue(path: path)
        func counts() throws -> (pushes: Int, unprocessed: Int, events: Int) {
            try other.read { db in
                (try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM push") ?? -1,
                 try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM unprocessed_push") ?? -1,
                 try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM pending_event") ?? -1)
            }
        }
        let big = Array(#"{"aps":{"alert":"\#(String(repeating: "b", count: 2_000))"}}"#.utf8)
        var received = 0
        for round in Int64(0)..<3 {
            let pushes = (1...200).map { i -> RemotePush in
                let n = round * 1_000 + Int64(i)
                return RemotePush(apnsID: String(format: "00000000-0000-4000-8000-%012d", n), sequence: n, bundleIdentifier: app,
                                  pushType: .alert, priority: .immediate, collapseID: nil, expiresAt: 1_795_400_000_000,
                                  acceptedAt: 1_795_348_000_000, payload: big)!
            }
            _ = try await inbox.receive(pushes, at: t0)
            received += 200
            #expect(try counts() == (received, 200, Int(round) * 150))
            // Processed and their `presented` events kept: a commit without a sync.
            try await inbox.markProcessed(Array(pushes.prefix(150)),
                                          keeping: pushes.prefix(150).map { PendingDeliveryEvent(event: "presented", apnsID: $0.apnsID, sequence: $0.sequence) })
            #expect(try counts() == (received, 50, Int(round + 1) * 150))
            try await inbox.markProcessed(Array(pushes.suffix(50)))
            #expect(try counts() == (received, 0, Int(round + 1) * 150))
        }
    }

    /// The inbox's and the device store's connections keep at most `BatchWriter.pageCacheKiB`
    /// of pages (a negative `cache_size` is KiB), not SQLite's 2,000 KiB default.
    @Test func theDaemonsDatabasesHaveTheirPageCacheBound() async throws {
        let dir = TemporaryDirectories.make(prefix: "cache-")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let inbox = try SQLiteRemoteInbox(path: dir.appendingPathComponent("remote.sqlite").path)
        #expect(try await inbox.pageCacheSize() == -BatchWriter.pageCacheKiB)
        let device = try BatchWriter.open(path: dir.appendingPathComponent("device.sqlite").path)
        #expect(try await device.read { try Int.fetchOne($0, sql: "PRAGMA cache_size") } == -BatchWriter.pageCacheKiB)
        #expect(BatchWriter.pageCacheKiB == 16_384)
    }

    /// An inbox made before events kept their push's sequence: the column is added, the events
    /// waiting in it are kept (without a sequence), new ones get theirs.
    @Test func pendingEventsOfAnOlderInboxKeepWaiting() async throws {
        let path = TemporaryDirectories.databasePath(prefix: "remote-")
        let queue = try DatabaseQueue(path: path)
        try await queue.write { db in
            try db.execute(sql: """
                CREATE TABLE pending_event (apns_id TEXT NOT NULL, event TEXT NOT NULL, UNIQUE (apns_id, event));
                INSERT INTO pending_event (apns_id, event) VALUES ('old', 'presented');
                """)
        }
        try queue.close()
        let inbox = try SQLiteRemoteInbox(path: path)
        try await inbox.addPendingEvents([PendingDeliveryEvent(event: "answered", apnsID: "new", sequence: 5, occurredAt: 7)])
        let kept = try await inbox.pendingEvents(limit: 5)
        #expect(kept == [PendingDeliveryEvent(event: "presented", apnsID: "old"), PendingDeliveryEvent(event: "answered", apnsID: "new", sequence: 5)])
        #expect(kept.map(\.occurredAt) == [nil, 7], "kept before events had a time: none")
        _ = try SQLiteRemoteInbox(path: path)  // opening again: the column is there, nothing added twice
    }

    /// An inbox in the first layout (made by its SQL, as a daemon before the migrator left it:
    /// a rowid table keyed by `(apns_id, sequence)`, a `(bundle, identifier)` index) opened by
    /// this one: rebuilt keyed by `(sequence, apns_id)` without a rowid, every push kept —
    /// processed or not, payloads as TEXT and as BLOB — and every pending event and removal;
    /// redeliveries still known, marks and pruning working on the moved rows.
    @Test func anInboxInTheFirstLayoutIsMigratedWithWhatItHolds() async throws {
        let path = TemporaryDirectories.databasePath(prefix: "remote-")
        let queue = try DatabaseQueue(path: path)
        try await queue.write { db in
            try db.execute(sql: """
                CREATE TABLE IF NOT EXISTS push (
                    apns_id TEXT NOT NULL, sequence INTEGER NOT NULL, bundle TEXT NOT NULL, identifier TEXT NOT NULL,
                    push_type TEXT NOT NULL, priority INTEGER NOT NULL, collapse_id TEXT,
                    expires_at INTEGER NOT NULL, accepted_at INTEGER NOT NULL, payload TEXT NOT NULL,
                    received_at INTEGER NOT NULL, processed INTEGER NOT NULL DEFAULT 0,
                    PRIMARY KEY (apns_id, sequence));
                CREATE INDEX IF NOT EXISTS push_unprocessed ON push(processed, received_at);
                CREATE INDEX IF NOT EXISTS push_identifier ON push(bundle, identifier);
                CREATE TABLE IF NOT EXISTS pending_removal (bundle TEXT PRIMARY KEY NOT NULL);
                CREATE TABLE IF NOT EXISTS pending_event (apns_id TEXT NOT NULL, event TEXT NOT NULL, UNIQUE (apns_id, event));
                ALTER TABLE pending_event ADD COLUMN sequence INTEGER;
                INSERT INTO pending_event (apns_id, event, sequence) VALUES ('e1', 'presented', 11), ('e2', 'answered', NULL);
                INSERT INTO pending_removal (bundle) VALUES ('com.example.gone');
                """)
            let insert = try db.cachedStatement(sql: """
                INSERT OR IGNORE INTO push (apns_id, sequence, bundle, identifier, push_type, priority, collapse_id,
                                            expires_at, accepted_at, payload, received_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
            // Received in this order: 9 and 8 first (8 as TEXT), then 1–3; 2 is processed. 4 is processed and old.
            let rows: [(RemotePush, Int64, Bool)] = [(push(4), 1_795_000_000_000, false), (push(9, collapse: "score"), 1_795_348_800_000, false),
                                                     (push(8, pushType: .voip), 1_795_348_800_000, true), (push(1), 1_795_348_801_000, false),
                                                     (push(2), 1_795_348_801_000, false), (push(3), 1_795_348_801_000, false)]
            for (p, receivedAt, asText) in rows {
                try insert.execute(arguments: [p.apnsID, p.sequence, p.bundleIdentifier, p.requestIdentifier, p.pushType.rawValue,
                                               p.priority.rawValue, p.collapseID?.rawValue, p.expiresAt, p.acceptedAt,
                                               asText ? String(decoding: p.payload, as: UTF8.self).databaseValue : Data(p.payload).databaseValue,
                                               receivedAt])
            }
            try db.execute(sql: "UPDATE push SET processed = 1 WHERE sequence IN (2, 4)")
        }
        try queue.close()

        let inbox = try SQLiteRemoteInbox(path: path)
        #expect(try await inbox.unprocessed() == [push(8, pushType: .voip), push(9, collapse: "score"), push(1), push(3)],
                "the unprocessed pushes, every field, in the order received")
        #expect(try await inbox.count() == 6)
        #expect(try await inbox.pendingEvents(limit: 10) == [PendingDeliveryEvent(event: "answered", apnsID: "e2"),
                                                             PendingDeliveryEvent(event: "presented", apnsID: "e1", sequence: 11)])
        #expect(try await inbox.removals() == ["com.example.gone"])
        #expect(try await inbox.receive([push(2), push(9, collapse: "score"), push(10)], at: t0.addingTimeInterval(5)) == [false, false, true],
                "processed and unprocessed pushes moved over are still known")
        try await inbox.markProcessed([push(8, pushType: .voip), push(9)])
        #expect(try await inbox.unprocessed().map(\.sequence) == [1, 3, 10])
        #expect(try await inbox.prune(before: Date(timeIntervalSince1970: 1_795_348_800.5), limit: 10) == 3,
                "the processed pushes received before the cutoff: 4, then 9 and 8")
        #expect(try await inbox.count() == 4)

        let check = try DatabaseQueue(path: path)
        try await check.read { db in
            let table = try String.fetchOne(db, sql: "SELECT sql FROM sqlite_master WHERE name = 'push'") ?? ""
            #expect(table.contains("PRIMARY KEY (sequence, apns_id)") && table.contains("WITHOUT ROWID"), "\(table)")
            #expect(try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'push' AND sql IS NOT NULL") == ["push_received"])
        }
        try check.close()
        let reopened = try SQLiteRemoteInbox(path: path)  // migrated once: opening again changes nothing
        #expect(try await reopened.unprocessed().map(\.sequence) == [1, 3, 10])
        #expect(try await reopened.count() == 4)
    }

    /// An inbox in the second layout (made by its SQL, as the daemon before events were keyed
    /// by sequence left it: `pending_event` a rowid table with `UNIQUE (apns_id, event)`) opened
    /// by this one: `pending_event` rebuilt keyed by `(sequence, apns_id, event)` without a
    /// rowid, every event kept — one without a sequence too, read back without one — in the
    /// order of their pushes; the limit counts what was moved over; pushes and removals as they were.
    @Test func anInboxInTheSecondLayoutIsMigratedWithItsEvents() async throws {
        let path = TemporaryDirectories.databasePath(prefix: "remote-")
        let queue = try DatabaseQueue(path: path)
        try await queue.write { db in
            try db.execute(sql: """
                CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
                INSERT INTO grdb_migrations (identifier) VALUES ('inbox-v1'), ('inbox-v2-by-sequence');
                \(pushTableByKey)
                CREATE TABLE pending_removal (bundle TEXT PRIMARY KEY NOT NULL);
                CREATE TABLE pending_event (apns_id TEXT NOT NULL, event TEXT NOT NULL, UNIQUE (apns_id, event));
                ALTER TABLE pending_event ADD COLUMN sequence INTEGER;
                INSERT INTO pending_event (apns_id, event, sequence) VALUES
                    ('e9', 'presented', 90), ('e1', 'presented', 10), ('old', 'answered', NULL), ('e1', 'answered', 10);
                INSERT INTO pending_removal (bundle) VALUES ('com.example.gone');
                """)
            for (p, processed) in [(push(3), true), (push(5), false)] {
                try insertKeyedPush(p, receivedAt: 1_795_348_800_000, processed: processed, db)
            }
        }
        try queue.close()

        let old = PendingDeliveryEvent(event: "answered", apnsID: "old")
        let e1 = PendingDeliveryEvent(event: "presented", apnsID: "e1", sequence: 10)
        let e1Answered = PendingDeliveryEvent(event: "answered", apnsID: "e1", sequence: 10)
        let e9 = PendingDeliveryEvent(event: "presented", apnsID: "e9", sequence: 90)
        let inbox = try SQLiteRemoteInbox(path: path, maximumPendingEvents: 4)
        #expect(try await inbox.pendingEvents(limit: 10) == [old, e1Answered, e1, e9], "every event, in the order of their pushes")
        #expect(try await inbox.unprocessed() == [push(5)])
        #expect(try await inbox.receive([push(3), push(5)], at: t0) == [false, false])
        #expect(try await inbox.removals() == ["com.example.gone"])
        try await inbox.addPendingEvents([e1, e9])
        #expect(try await inbox.pendingEvents(limit: 10) == [old, e1Answered, e1, e9], "moved over, still known: kept once")
        let e20 = PendingDeliveryEvent(event: "presented", apnsID: "e20", sequence: 20)
        try await inbox.addPendingEvents([e20])
        #expect(try await inbox.pendingEvents(limit: 10) == [e1Answered, e1, e20, e9], "the four moved over counted: past the limit the oldest went")
        try await inbox.clearEvents([e1Answered])
        #expect(try await inbox.pendingEvents(limit: 10) == [e1, e20, e9])

        let check = try DatabaseQueue(path: path)
        try await check.read { db in
            let table = try String.fetchOne(db, sql: "SELECT sql FROM sqlite_master WHERE name = 'pending_event'") ?? ""
            #expect(table.contains("PRIMARY KEY (sequence, apns_id, event)") && table.contains("WITHOUT ROWID"), "\(table)")
            #expect(try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'pending_event'") == [],
                    "no index beside the table's key")
        }
        try check.close()
        let reopened = try SQLiteRemoteInbox(path: path, maximumPendingEvents: 4)  // migrated once
        #expect(try await reopened.pendingEvents(limit: 10) == [e1, e20, e9])
        try await reopened.addPendingEvents([old, e1Answered])
        #expect(try await reopened.pendingEvents(limit: 10) == [e1Answered, e1, e20, e9], "counted at opening: past the limit the oldest went")
    }

    /// An inbox in the third layout (made by its SQL, as the daemon before unprocessed pushes
    /// were listed apart left it: a `processed` column and a `(processed, received_at)` index)
    /// opened by this one: the unprocessed listed apart — in the order received — the column
    /// and its index gone, `push_received` made; marks, redeliveries and pruning work on the
    /// rows moved over, and events and removals are as they were.
    @Test func anInboxInTheThirdLayoutListsItsUnprocessedApart() async throws {
        let path = TemporaryDirectories.databasePath(prefix: "remote-")
        let queue = try DatabaseQueue(path: path)
        try await queue.write { db in
            try db.execute(sql: """
                CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
                INSERT INTO grdb_migrations (identifier) VALUES ('inbox-v1'), ('inbox-v2-by-sequence'), ('inbox-v3-events-by-sequence');
                \(pushTableByKey)
                CREATE TABLE pending_removal (bundle TEXT PRIMARY KEY NOT NULL);
                CREATE TABLE pending_event (
                    sequence INTEGER NOT NULL, apns_id TEXT NOT NULL, event TEXT NOT NULL,
                    PRIMARY KEY (sequence, apns_id, event)) WITHOUT ROWID;
                INSERT INTO pending_event (sequence, apns_id, event) VALUES (10, 'e1', 'presented');
                INSERT INTO pending_removal (bundle) VALUES ('com.example.gone');
                """)
            // Received in this order: 6 (processed, old), then 9 and 8, then 1–3 (2 processed).
            let rows: [(RemotePush, Int64, Bool)] = [(push(6), 1_795_000_000_000, true), (push(9, collapse: "score"), 1_795_348_800_000, false),
                                                     (push(8, pushType: .voip), 1_795_348_800_000, false), (push(1), 1_795_348_801_000, false),
                                                     (push(2), 1_795_348_801_000, true), (push(3), 1_795_348_801_000, false)]
            for (p, receivedAt, processed) in rows {
                try insertKeyedPush(p, receivedAt: receivedAt, processed: processed, db)
            }
        }
        try queue.close()

        let inbox = try SQLiteRemoteInbox(path: path)
        #expect(try await inbox.unprocessed() == [push(8, pushType: .voip), push(9, collapse: "score"), push(1), push(3)],
                "the unprocessed pushes, every field, in the order received")
        #expect(try await inbox.count() == 6)
        #expect(try await inbox.pendingEvents(limit: 10) == [PendingDeliveryEvent(event: "presented", apnsID: "e1", sequence: 10)])
        #expect(try await inbox.removals() == ["com.example.gone"])
        #expect(try await inbox.receive([push(2), push(3), push(10)], at: t0.addingTimeInterval(5)) == [false, false, true],
                "processed and unprocessed pushes moved over are still known")
        try await inbox.markProcessed([push(8, pushType: .voip), push(1)])
        #expect(try await inbox.unprocessed().map(\.sequence) == [9, 3, 10])
        #expect(try await inbox.prune(before: Date(timeIntervalSince1970: 1_795_348_801.5), limit: 10) == 4,
                "the processed pushes received before the cutoff — 6, 8, 1 and 2 — not the unprocessed 9 and 3")
        #expect(try await inbox.unprocessed().map(\.sequence) == [9, 3, 10])
        #expect(try await inbox.count() == 3)

        let check = try DatabaseQueue(path: path)
        try await check.read { db in
            #expect(try !db.columns(in: "push").contains { $0.name == "processed" }, "the column is gone")
            #expect(try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'push' AND sql IS NOT NULL") == ["push_received"])
            let table = try String.fetchOne(db, sql: "SELECT sql FROM sqlite_master WHERE name = 'unprocessed_push'") ?? ""
            #expect(table.contains("PRIMARY KEY (sequence, apns_id)") && table.contains("WITHOUT ROWID"), "\(table)")
        }
        try check.close()
        let reopened = try SQLiteRemoteInbox(path: path)  // migrated once: opening again changes nothing
        #expect(try await reopened.unprocessed().map(\.sequence) == [9, 3, 10])
    }

    @Test func aPayloadStoredAsTextBeforeIsReadAsItsBytes() async throws {
        let path = TemporaryDirectories.databasePath(prefix: "remote-")
        _ = try SQLiteRemoteInbox(path: path)
        let old = push(7, collapse: "c")
        let queue = try DatabaseQueue(path: path)
        try await queue.write { db in
            try db.execute(sql: """
                INSERT INTO push (apns_id, sequence, bundle, push_type, priority, collapse_id, expires_at, accepted_at, payload, received_at)
                VALUES (?, ?, ?, 'alert', ?, 'c', ?, ?, ?, ?)
                """, arguments: [old.apnsID, old.sequence, app, old.priority.rawValue, old.expiresAt, old.acceptedAt,
                                 String(decoding: old.payload, as: UTF8.self), 1_795_348_800_000])
            try db.execute(sql: "INSERT INTO unprocessed_push (sequence, apns_id, received_at) VALUES (?, ?, ?)",
                           arguments: [old.sequence, old.apnsID, 1_795_348_800_000])
        }
        try queue.close()
        #expect(try await SQLiteRemoteInbox(path: path).unprocessed() == [old])
    }
}
