import Foundation
import GRDB
import Synchronization
import GRDBSQLite
import TidingsCore
import TidingsStorage

/// The daemon's inbox in SQLite (`remote.sqlite` in the data directory, WAL, `synchronous=FULL`
/// for receipt). Every access goes through GRDB's async API, which runs it on the database's
/// own serial queue: the disk is never waited for on Swift's cooperative pool.
///
/// Layout (docs/benchmarks.md, "Inbox layout"): `push` is one b-tree keyed by the gateway's
/// `(sequence, apns_id)` (`WITHOUT ROWID`), so receipt appends at its right edge, plus one
/// index `push_received` — also appended — for pruning the oldest. The pushes not yet
/// processed are listed apart, in `unprocessed_push` (the same key and the time received):
/// marking deletes from there and leaves the push row alone. `pending_event` is keyed by
/// `(sequence, apns_id, event)` (`WITHOUT ROWID`): an event is appended near its right edge
/// and deleted from there once confirmed. Nothing is keyed by a random apns-id.
public final class SQLiteRemoteInbox: RemoteInboxStore {
    private let queue: DatabaseQueue
    public let maximumPendingEvents: Int
    /// How many events `pending_event` holds, kept by the writes (on the database's queue) so
    /// that trimming to `maximumPendingEvents` needs no `COUNT(*)` per write; counted again
    /// whenever it passes the limit.
    private let eventCount: Mutex<Int>

    /// The stored sequence of an event without one (kept before events had their push's
    /// sequence): first in the order, read back as nil. The gateway's sequences are positive.
    static let noSequence = Int64.min

    /// Its WAL checkpoints are SQLite's own (every 1,000 pages, inside the commit that crossed
    /// them): a `WALCheckpointer` as the device store's measured no gain here
    /// (docs/benchmarks.md, "Inbox hand-off (session 11)").
    public init(path: String, maximumPendingEvents: Int = RemoteInboxDefaults.maximumPendingEvents) throws {
        self.maximumPendingEvents = maximumPendingEvents
        // A received push must survive power loss before it is acknowledged: FULL, read back.
        // Through the WAL write buffer's VFS where this SQLite can (URI file names): each
        // commit's frames in one `pwrite` (also the marks' commits without a sync).
        queue = try BatchWriter.open(path: WALWriteBuffer.uri(for: path) ?? path, busyTimeout: 10)
        try Self.migrator.migrate(queue)
        eventCount = Mutex(try queue.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM pending_event") ?? 0 })
        walWritesBuffered = try queue.writeWithoutTransaction { db in try WALWriteBuffer.enable(on: db) }
    }

    /// Whether the inbox's WAL writes go through `WALWriteBuffer`.
    public let walWritesBuffered: Bool

    /// The inbox's schema history. Inboxes made before the migrator have its first step's
    /// tables already (`IF NOT EXISTS`) and no record of it: they run every step.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        // The first layout: a rowid table with its `(apns_id, sequence)` key and a
        // `(bundle, identifier)` index (both keyed by random apns-ids).
        migrator.registerMigration("inbox-v1") { db in
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
                """)
            // The push's sequence, sent with the event (inboxes made before it lack the column; their events have none).
            if try !db.columns(in: "pending_event").contains(where: { $0.name == "sequence" }) {
                try db.execute(sql: "ALTER TABLE pending_event ADD COLUMN sequence INTEGER")
            }
        }
        // Keyed by what receipt appends: the gateway's sequence first. The `(bundle,
        // identifier)` index goes — an `answered` event names the push its delivered
        // notification recorded (`RemotePush.deliveryKey`), not the inbox's latest with that
        // identifier — and with it the `identifier` column. Every row is kept as it was,
        // processed or not (a payload written as TEXT stays TEXT: both are read).
        migrator.registerMigration("inbox-v2-by-sequence") { db in
            try db.execute(sql: """
                CREATE TABLE push_by_sequence (
                    sequence INTEGER NOT NULL, apns_id TEXT NOT NULL, bundle TEXT NOT NULL,
                    push_type TEXT NOT NULL, priority INTEGER NOT NULL, collapse_id TEXT,
                    expires_at INTEGER NOT NULL, accepted_at INTEGER NOT NULL, payload BLOB NOT NULL,
                    received_at INTEGER NOT NULL, processed INTEGER NOT NULL DEFAULT 0,
                    PRIMARY KEY (sequence, apns_id)) WITHOUT ROWID;
                INSERT INTO push_by_sequence (sequence, apns_id, bundle, push_type, priority, collapse_id, expires_at, accepted_at,
                                              payload, received_at, processed)
                    SELECT sequence, apns_id, bundle, push_type, priority, collapse_id, expires_at, accepted_at,
                           payload, received_at, processed FROM push;
                DROP TABLE push;
                ALTER TABLE push_by_sequence RENAME TO push;
                CREATE INDEX push_unprocessed ON push(processed, received_at);
                """)
        }
        // Events keyed by what is appended, the push's sequence first (`WITHOUT ROWID`), not by
        // a rowid plus a `UNIQUE (apns_id, event)` index keyed by random apns-ids. Every event
        // is kept; one kept before events had a sequence gets `noSequence` (read back as nil).
        migrator.registerMigration("inbox-v3-events-by-sequence") { db in
            try db.execute(sql: """
                CREATE TABLE pending_event_by_sequence (
                    sequence INTEGER NOT NULL, apns_id TEXT NOT NULL, event TEXT NOT NULL,
                    PRIMARY KEY (sequence, apns_id, event)) WITHOUT ROWID
                """)
            try db.execute(sql: """
                INSERT OR IGNORE INTO pending_event_by_sequence (sequence, apns_id, event)
                    SELECT COALESCE(sequence, ?), apns_id, event FROM pending_event
                """, arguments: [Self.noSequence])
            try db.execute(sql: """
                DROP TABLE pending_event;
                ALTER TABLE pending_event_by_sequence RENAME TO pending_event;
                """)
        }
        // Unprocessed pushes apart from the pushes (`unprocessed_push`, keyed like `push`):
        // marking a push processed deletes a short row from a small table instead of
        // rewriting the push row — payload and all — and moving it in a
        // `(processed, received_at)` index, so a hand-off's marks dirty a few pages, not one
        // page per few pushes (docs/benchmarks.md, "Inbox marks apart, events from memory (session 12)"). Pruning
        // finds the oldest through `push_received`. Every row is kept, processed or not.
        migrator.registerMigration("inbox-v4-unprocessed-apart") { db in
            try db.execute(sql: """
                CREATE TABLE unprocessed_push (
                    sequence INTEGER NOT NULL, apns_id TEXT NOT NULL, received_at INTEGER NOT NULL,
                    PRIMARY KEY (sequence, apns_id)) WITHOUT ROWID;
                INSERT INTO unprocessed_push (sequence, apns_id, received_at)
                    SELECT sequence, apns_id, received_at FROM push WHERE processed = 0;
                DROP INDEX push_unprocessed;
                ALTER TABLE push DROP COLUMN processed;
                CREATE INDEX push_received ON push(received_at);
                """)
        }
        // When each event happened (the daemon's clock), sent with it for the gateway to record;
        // events kept before have none (the gateway records when it learns of them).
        migrator.registerMigration("inbox-v5-event-time") { db in
            try db.execute(sql: "ALTER TABLE pending_event ADD COLUMN occurred_at INTEGER")
        }
        return migrator
    }

    static func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded(.down)) }

    public func receive(_ pushes: [RemotePush], at date: Date) async throws -> [Bool] {
        guard !pushes.isEmpty else { return [] }
        let receivedAt = Self.milliseconds(date)
        return try await queue.writeWithoutTransaction { db in
            // FULL for this commit whatever a failed `markProcessed` left (outside the transaction).
            try db.execute(sql: "PRAGMA synchronous = FULL")
            var inserted: [Bool] = []
            try db.inTransaction {
                let insert = try db.cachedStatement(sql: """
                    INSERT OR IGNORE INTO push (sequence, apns_id, bundle, push_type, priority, collapse_id,
                                                expires_at, accepted_at, payload, received_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """).sqliteStatement
                let unprocessed = try db.cachedStatement(sql: """
                    INSERT INTO unprocessed_push (sequence, apns_id, received_at) VALUES (?, ?, ?)
                    """).sqliteStatement
                inserted.reserveCapacity(pushes.count)
                var texts = BoundTexts()
                for push in pushes {
                    inserted.append(try Self.insert(push, receivedAt: receivedAt, into: (insert, unprocessed), db: db, texts: &texts))
                }
                return .commit
            }
            return inserted
        }
    }

    /// Binds one push by hand on the cached inserts and steps: into `push`, and — if it is new
    /// there (not a redelivery) — into `unprocessed_push`. Returns whether it was new. GRDB's
    /// `StatementArguments` box every value of every row (`SQLiteGatewayStore`'s insert binds
    /// by hand too).
    private static func insert(_ push: RemotePush, receivedAt: Int64, into s: (push: SQLiteStatement, unprocessed: SQLiteStatement),
                               db: Database, texts: inout BoundTexts) throws -> Bool {
        texts.reset()
        let apnsID = texts.append(push.apnsID), bundle = texts.append(push.bundleIdentifier)
        let pushType = texts.append(push.pushType.rawValue), collapseID = push.collapseID.map { texts.append($0.rawValue) }
        return try texts.withBytes { text in
            try push.payload.withUnsafeBytes { payload in
                let p = s.push
                var code = sqlite3_bind_int64(p, 1, push.sequence)
                if code == SQLITE_OK { code = text.bind(p, 2, apnsID) }
                if code == SQLITE_OK { code = text.bind(p, 3, bundle) }
                if code == SQLITE_OK { code = text.bind(p, 4, pushType) }
                if code == SQLITE_OK { code = sqlite3_bind_int64(p, 5, Int64(push.priority.rawValue)) }
                if code == SQLITE_OK { code = text.bind(p, 6, collapseID) }
                if code == SQLITE_OK { code = sqlite3_bind_int64(p, 7, push.expiresAt) }
                if code == SQLITE_OK { code = sqlite3_bind_int64(p, 8, push.acceptedAt) }
                if code == SQLITE_OK {
                    // An empty payload is still a blob, never NULL (the column is NOT NULL).
                    code = sqlite3_bind_blob(p, 9, payload.baseAddress ?? UnsafeRawPointer(bitPattern: 1), CInt(payload.count), BoundTexts.staticBytes)
                }
                if code == SQLITE_OK { code = sqlite3_bind_int64(p, 10, receivedAt) }
                try BoundTexts.stepAndReset(p, db: db, code)
                guard db.changesCount > 0 else { return false }
                let u = s.unprocessed
                code = sqlite3_bind_int64(u, 1, push.sequence)
                if code == SQLITE_OK { code = text.bind(u, 2, apnsID) }
                if code == SQLITE_OK { code = sqlite3_bind_int64(u, 3, receivedAt) }
                try BoundTexts.stepAndReset(u, db: db, code)
                return true
            }
        }
    }

    public func unprocessed(after position: RemoteInboxPosition?, limit: Int) async throws -> [(position: RemoteInboxPosition, push: RemotePush)] {
        let after = position ?? RemoteInboxPosition(receivedAt: .min, sequence: .min, apnsID: "")
        return try await queue.read { db in
            // Sorted here: the unprocessed are at most what receipt queued before a stop
            // (`GatewayLinkConfiguration.maximumQueuedPushes` and one hand-off), read once at start.
            try Row.fetchAll(db, sql: """
                SELECT p.* FROM unprocessed_push u JOIN push p ON p.sequence = u.sequence AND p.apns_id = u.apns_id
                WHERE (u.received_at, u.sequence, u.apns_id) > (?, ?, ?)
                ORDER BY u.received_at, u.sequence, u.apns_id LIMIT ?
                """, arguments: [after.receivedAt, after.sequence, after.apnsID, max(0, limit)]).compactMap { row in
                Self.push(row).map { (RemoteInboxPosition(receivedAt: row["received_at"], sequence: $0.sequence, apnsID: $0.apnsID), $0) }
            }
        }
    }

    /// A row as the push it was received as; nil for one that no longer types (never written so).
    private static func push(_ row: Row) -> RemotePush? {
        let payload: [UInt8]
        switch (row["payload"] as DatabaseValue).storage {
        case .blob(let data): payload = Array(data)
        case .string(let text): payload = Array(text.utf8)
        default: return nil
        }
        guard let pushType = PushType(rawValue: row["push_type"]), let priority = Priority(rawValue: row["priority"]) else { return nil }
        let collapse: String? = row["collapse_id"]
        return RemotePush(apnsID: row["apns_id"], sequence: row["sequence"], bundleIdentifier: row["bundle"], pushType: pushType,
                          priority: priority, collapseID: collapse.flatMap(CollapseID.init(rawValue:)),
                          expiresAt: row["expires_at"], acceptedAt: row["accepted_at"], payload: payload)
    }

    /// Committed with `synchronous=NORMAL` (no fsync; it survives `kill -9`, and the next FULL
    /// commit makes it durable), the marks, the clearing and the events in one transaction. The connection is
    /// back at FULL before this returns, or it throws. Each push is found by the table's key,
    /// bound by hand.
    public func markProcessed(_ pushes: [RemotePush], keeping events: [PendingDeliveryEvent], clearing confirmed: [PendingDeliveryEvent]) async throws {
        guard !pushes.isEmpty || !events.isEmpty || !confirmed.isEmpty else { return }
        let keys = pushes.map { ($0.sequence, $0.apnsID) }
        try await withoutSync { db in
            try db.inTransaction {
                if !confirmed.isEmpty { try self.deleteEvents(confirmed, db: db) }
                if !events.isEmpty { try self.insertEvents(events, db: db) }
                let s = try db.cachedStatement(sql: "DELETE FROM unprocessed_push WHERE sequence = ? AND apns_id = ?").sqliteStatement
                var texts = BoundTexts()
                for (sequence, apnsID) in keys {
                    texts.reset()
                    let id = texts.append(apnsID)
                    try texts.withBytes { text in
                        var code = sqlite3_bind_int64(s, 1, sequence)
                        if code == SQLITE_OK { code = text.bind(s, 2, id) }
                        try BoundTexts.stepAndReset(s, db: db, code)
                    }
                }
                return .commit
            }
        }
    }

    public func prune(before date: Date, limit: Int) async throws -> Int {
        let cutoff = Self.milliseconds(date)
        return try await queue.write { db in
            // Oldest first through `push_received`, passing over the few still unprocessed.
            try db.execute(sql: """
                DELETE FROM push WHERE (sequence, apns_id) IN (
                    SELECT sequence, apns_id FROM push p WHERE received_at < ? AND NOT EXISTS (
                        SELECT 1 FROM unprocessed_push u WHERE u.sequence = p.sequence AND u.apns_id = p.apns_id)
                    ORDER BY received_at LIMIT ?)
                """, arguments: [cutoff, max(0, limit)])
            return db.changesCount
        }
    }

    /// SQLite's `cache_size` of the inbox's connection (negative: KiB), for tests.
    public func pageCacheSize() async throws -> Int {
        try await queue.read { db in try Int.fetchOne(db, sql: "PRAGMA cache_size") ?? 0 }
    }

    public func count() async throws -> Int {
        try await queue.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM push") ?? 0 }
    }

    /// Committed with `synchronous=NORMAL` like `markProcessed`: it survives a `kill -9` of the
    /// daemon, not necessarily a power failure (then that event is not reported).
    public func addPendingEvents(_ events: [PendingDeliveryEvent]) async throws {
        guard !events.isEmpty else { return }
        try await withoutSync { db in
            try db.inTransaction {
                try self.insertEvents(events, db: db)
                return .commit
            }
        }
    }

    /// Inserts events (one kept already is ignored) and, past `maximumPendingEvents`, deletes
    /// the oldest: inside the caller's transaction, `eventCount` kept by what it changed.
    private func insertEvents(_ events: [PendingDeliveryEvent], db: Database) throws {
        let added = try Self.step(db.cachedStatement(sql: "INSERT OR IGNORE INTO pending_event (sequence, apns_id, event, occurred_at) VALUES (?, ?, ?, ?)"),
                                  db: db, forEach: events, withTime: true)
        var count = eventCount.withLock { $0 } + added
        if count > maximumPendingEvents {
            count = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM pending_event") ?? 0
            if count > maximumPendingEvents {
                try db.execute(sql: """
                    DELETE FROM pending_event WHERE (sequence, apns_id, event) IN (
                        SELECT sequence, apns_id, event FROM pending_event ORDER BY sequence, apns_id, event LIMIT ?)
                    """, arguments: [count - maximumPendingEvents])
                count -= db.changesCount
            }
        }
        // For the transaction under way; a write that fails counts again (`withoutSync`).
        eventCount.withLock { $0 = count }
    }

    /// Steps `statement` once per event, bound by hand (its sequence, or `noSequence`, its
    /// apns-id and stage as parameters 1–3, and `withTime` its `occurredAt` or NULL as 4);
    /// returns how many rows it changed.
    private static func step(_ statement: Statement, db: Database, forEach events: [PendingDeliveryEvent], withTime: Bool = false) throws -> Int {
        let s = statement.sqliteStatement
        var texts = BoundTexts()
        var changed = 0
        for e in events {
            texts.reset()
            let apnsID = texts.append(e.apnsID), event = texts.append(e.event)
            try texts.withBytes { text in
                var code = sqlite3_bind_int64(s, 1, e.sequence ?? noSequence)
                if code == SQLITE_OK { code = text.bind(s, 2, apnsID) }
                if code == SQLITE_OK { code = text.bind(s, 3, event) }
                if code == SQLITE_OK, withTime { code = e.occurredAt.map { sqlite3_bind_int64(s, 4, $0) } ?? sqlite3_bind_null(s, 4) }
                try BoundTexts.stepAndReset(s, db: db, code)
            }
            changed += db.changesCount
        }
        return changed
    }

    /// Oldest first: by the push's sequence (events kept without one first), then apns-id and stage.
    public func pendingEvents(limit: Int) async throws -> [PendingDeliveryEvent] {
        try await queue.read { db in
            try Row.fetchAll(db, sql: "SELECT event, apns_id, sequence, occurred_at FROM pending_event ORDER BY sequence, apns_id, event LIMIT ?",
                             arguments: [max(0, limit)]).map {
                let sequence: Int64 = $0[2]
                return PendingDeliveryEvent(event: $0[0], apnsID: $0[1], sequence: sequence == Self.noSequence ? nil : sequence, occurredAt: $0[3])
            }
        }
    }

    public func clearEvents(_ events: [PendingDeliveryEvent]) async throws {
        guard !events.isEmpty else { return }
        try await withoutSync { db in
            try db.inTransaction {
                try self.deleteEvents(events, db: db)
                return .commit
            }
        }
    }

    private func deleteEvents(_ events: [PendingDeliveryEvent], db: Database) throws {
        let removed = try Self.step(db.cachedStatement(sql: "DELETE FROM pending_event WHERE sequence = ? AND apns_id = ? AND event = ?"),
                                    db: db, forEach: events)
        eventCount.withLock { $0 = max(0, $0 - removed) }
    }

    public func addRemoval(_ bundle: String) async throws {
        try await queue.write { db in try db.execute(sql: "INSERT OR IGNORE INTO pending_removal (bundle) VALUES (?)", arguments: [bundle]) }
    }

    public func removals() async throws -> [String] {
        try await queue.read { db in try String.fetchAll(db, sql: "SELECT bundle FROM pending_removal ORDER BY bundle") }
    }

    public func clearRemoval(_ bundle: String) async throws {
        try await queue.write { db in try db.execute(sql: "DELETE FROM pending_removal WHERE bundle = ?", arguments: [bundle]) }
    }

    /// `body` with `synchronous=NORMAL` (no fsync), the connection back at FULL before this
    /// returns, or it throws. When `body` throws (its transaction rolled back), the events
    /// are counted again.
    private func withoutSync(_ body: @escaping @Sendable (Database) throws -> Void) async throws {
        try await queue.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            let result = Result { try body(db) }
            if case .failure = result, let count = try? Int.fetchOne(db, sql: "SELECT COUNT(*) FROM pending_event") {
                self.eventCount.withLock { $0 = count }
            }
            try db.execute(sql: "PRAGMA synchronous = FULL")
            try result.get()
        }
    }
}
