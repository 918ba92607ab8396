import Foundation
import GRDB
import TidingsCore
import TidingsStorage

/// The daemon's inbox in SQLite (`remote.sqlite` in the data directory, WAL, `synchronous=FULL`
/// for receipt). Every access goes through GRDB's async API, which runs it on the database's
/// own serial queue: the disk is never waited for on Swift's cooperative pool.
public final class SQLiteRemoteInbox: RemoteInboxStore {
    private let queue: DatabaseQueue
    public let maximumPendingEvents: Int

    public init(path: String, maximumPendingEvents: Int = RemoteInboxDefaults.maximumPendingEvents) throws {
        self.maximumPendingEvents = maximumPendingEvents
        var configuration = Configuration()
        configuration.journalMode = .wal
        configuration.busyMode = .timeout(10)
        queue = try DatabaseQueue(path: path, configuration: configuration)
        // GRDB sets synchronous=NORMAL for WAL; a received push must survive power loss
        // before it is acknowledged: FULL, read back.
        try queue.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
            try db.execute(sql: "PRAGMA cache_size = -\(BatchWriter.pageCacheKiB)")
            guard try Int.fetchOne(db, sql: "PRAGMA synchronous") == 2 else {
                throw NotificationError(.daemonUnavailable, "cannot make \(path) synchronous=FULL")
            }
        }
        // `payload` holds the provider's bytes as a BLOB (rows written before were TEXT; both are read).
        try queue.write { db in
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
                    INSERT OR IGNORE INTO push (apns_id, sequence, bundle, identifier, push_type, priority, collapse_id,
                                                expires_at, accepted_at, payload, received_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """)
                inserted.reserveCapacity(pushes.count)
                for push in pushes {
                    try insert.execute(arguments: [push.apnsID, push.sequence, push.bundleIdentifier, push.requestIdentifier,
                                                   push.pushType.rawValue, push.priority.rawValue, push.collapseID?.rawValue,
                                                   push.expiresAt, push.acceptedAt, Data(push.payload), receivedAt])
                    inserted.append(db.changesCount > 0)
                }
                return .commit
            }
            return inserted
        }
    }

    public func unprocessed(after position: RemoteInboxPosition?, limit: Int) async throws -> [(position: RemoteInboxPosition, push: RemotePush)] {
        let after = position ?? RemoteInboxPosition(receivedAt: .min, sequence: .min, apnsID: "")
        return try await queue.read { db in
            try Row.fetchAll(db, sql: """
                SELECT * FROM push WHERE processed = 0 AND (received_at, sequence, apns_id) > (?, ?, ?)
                ORDER BY received_at, sequence, apns_id LIMIT ?
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
    /// commit makes it durable). The connection is back at FULL before this returns, or it throws.
    public func markProcessed(_ pushes: [RemotePush]) async throws {
        guard !pushes.isEmpty else { return }
        let keys = pushes.map { ($0.apnsID, $0.sequence) }
        try await withoutSync { db in
            try db.inTransaction {
                let update = try db.cachedStatement(sql: "UPDATE push SET processed = 1 WHERE apns_id = ? AND sequence = ?")
                for (apnsID, sequence) in keys { try update.execute(arguments: [apnsID, sequence]) }
                return .commit
            }
        }
    }

    public func latestPush(bundle: String, identifier: String) async throws -> (apnsID: String, sequence: Int64)? {
        try await queue.read { db in
            try Row.fetchOne(db, sql: "SELECT apns_id, sequence FROM push WHERE bundle = ? AND identifier = ? ORDER BY received_at DESC, sequence DESC LIMIT 1",
                             arguments: [bundle, identifier]).map { ($0[0], $0[1]) }
        }
    }

    public func prune(before date: Date, limit: Int) async throws -> Int {
        let cutoff = Self.milliseconds(date)
        return try await queue.write { db in
            // Oldest first through the (processed, received_at) index.
            try db.execute(sql: """
                DELETE FROM push WHERE rowid IN (
                    SELECT rowid FROM push WHERE processed = 1 AND received_at < ? ORDER BY received_at LIMIT ?)
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
        let limit = maximumPendingEvents
        try await withoutSync { db in
            try db.inTransaction {
                let insert = try db.cachedStatement(sql: "INSERT OR IGNORE INTO pending_event (apns_id, event, sequence) VALUES (?, ?, ?)")
                for e in events { try insert.execute(arguments: [e.apnsID, e.event, e.sequence]) }
                try db.execute(sql: "DELETE FROM pending_event WHERE rowid <= (SELECT MAX(rowid) FROM pending_event) - ?", arguments: [limit])
                return .commit
            }
        }
    }

    public func pendingEvents(limit: Int) async throws -> [PendingDeliveryEvent] {
        try await queue.read { db in
            try Row.fetchAll(db, sql: "SELECT event, apns_id, sequence FROM pending_event ORDER BY rowid LIMIT ?", arguments: [max(0, limit)]).map {
                PendingDeliveryEvent(event: $0[0], apnsID: $0[1], sequence: $0[2])
            }
        }
    }

    public func clearEvents(_ events: [PendingDeliveryEvent]) async throws {
        guard !events.isEmpty else { return }
        try await withoutSync { db in
            try db.inTransaction {
                let delete = try db.cachedStatement(sql: "DELETE FROM pending_event WHERE apns_id = ? AND event = ?")
                for e in events { try delete.execute(arguments: [e.apnsID, e.event]) }
                return .commit
            }
        }
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
    /// returns, or it throws.
    private func withoutSync(_ body: @escaping @Sendable (Database) throws -> Void) async throws {
        try await queue.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            let result = Result { try body(db) }
            try db.execute(sql: "PRAGMA synchronous = FULL")
            try result.get()
        }
    }
}
