import Foundation
import GRDB
import TidingsCore

/// The daemon's durable record of pushes (`remote.sqlite` in the data directory, WAL, `synchronous=FULL`): a push is
/// written here — and only then acknowledged to the gateway — so a `kill -9` between
/// receipt and acknowledgement loses nothing; a redelivered push finds its row and is not
/// shown twice. Also keeps app removals that the gateway has not heard of yet.
final class RemoteInbox: Sendable {
    private let queue: DatabaseQueue

    init(path: String) throws {
        var configuration = Configuration()
        configuration.journalMode = .wal
        configuration.busyMode = .timeout(10)
        queue = try DatabaseQueue(path: path, configuration: configuration)
        // GRDB sets synchronous=NORMAL for WAL; a received push must survive power loss
        // before it is acknowledged: FULL, read back.
        try queue.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
            guard try Int.fetchOne(db, sql: "PRAGMA synchronous") == 2 else {
                throw NotificationError(.daemonUnavailable, "cannot make \(path) synchronous=FULL")
            }
        }
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
        }
    }

    /// Makes a push durable; false when it was already here (a redelivery).
    func receive(_ push: RemotePush, at now: Date) throws -> Bool {
        try receive([push], at: now)[0]
    }

    /// Makes the pushes durable in one transaction (one commit, one fsync); for each, false
    /// when it was already here (a redelivery). Nothing is durable if it throws.
    func receive(_ pushes: [RemotePush], at now: Date) throws -> [Bool] {
        let receivedAt = Int64(now.timeIntervalSince1970 * 1000)
        return try queue.writeWithoutTransaction { db in
            // FULL for this commit whatever a failed `markProcessed` left (outside the transaction).
            try db.execute(sql: "PRAGMA synchronous = FULL")
            var inserted: [Bool] = []
            try db.inTransaction {
                inserted = try Self.insert(pushes, receivedAt: receivedAt, db)
                return .commit
            }
            return inserted
        }
    }

    private static func insert(_ pushes: [RemotePush], receivedAt: Int64, _ db: Database) throws -> [Bool] {
        let insert = try db.cachedStatement(sql: """
            INSERT OR IGNORE INTO push (apns_id, sequence, bundle, identifier, push_type, priority, collapse_id,
                                        expires_at, accepted_at, payload, received_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """)
        return try pushes.map { push in
            try insert.execute(arguments: [push.apnsID, push.sequence, push.bundleIdentifier, push.requestIdentifier, push.pushType,
                                           push.priority, push.collapseID, push.expiresAt, push.acceptedAt, push.payload, receivedAt])
            return db.changesCount > 0
        }
    }

    /// Pushes received and not yet handed to the engine, in order of receipt.
    func unprocessed() throws -> [RemotePush] {
        try queue.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM push WHERE processed = 0 ORDER BY received_at, sequence").map { row in
                RemotePush(apnsID: row["apns_id"], sequence: row["sequence"], bundleIdentifier: row["bundle"], pushType: row["push_type"],
                           priority: row["priority"], collapseID: row["collapse_id"], expiresAt: row["expires_at"],
                           acceptedAt: row["accepted_at"], payload: row["payload"])
            }
        }
    }

    /// Marks a push handed to the engine. Committed with `synchronous=NORMAL` (no fsync; it
    /// survives `kill -9`, and the next FULL commit makes it durable): losing it to a power
    /// failure only means the push is recovered, and a push already in the delivered list is
    /// not shown again. The connection is back at FULL before this returns, or it throws.
    func markProcessed(_ push: RemotePush) throws {
        try queue.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            let updated = Result {
                try db.cachedStatement(sql: "UPDATE push SET processed = 1 WHERE apns_id = ? AND sequence = ?")
                    .execute(arguments: [push.apnsID, push.sequence])
            }
            try db.execute(sql: "PRAGMA synchronous = FULL")
            try updated.get()
        }
    }

    /// The apns-id of the latest push that became this request identifier.
    func apnsID(bundle: String, identifier: String) throws -> String? {
        try queue.read { db in
            try String.fetchOne(db, sql: "SELECT apns_id FROM push WHERE bundle = ? AND identifier = ? ORDER BY received_at DESC, sequence DESC LIMIT 1",
                                arguments: [bundle, identifier])
        }
    }

    /// Forgets processed pushes received before `date` (they can no longer come again).
    func prune(before date: Date) throws {
        try queue.write { db in
            try db.execute(sql: "DELETE FROM push WHERE processed = 1 AND received_at < ?", arguments: [Int64(date.timeIntervalSince1970 * 1000)])
        }
    }

    /// At most this many delivery events wait for the gateway; past it the oldest are dropped
    /// (delivery inspection only; a gateway away that long has pushes expire too).
    static let maximumPendingEvents = 10_000

    /// Keeps a delivery event until the gateway confirms it (`clearEvents`). Committed with
    /// `synchronous=NORMAL` like `markProcessed`: it survives a `kill -9` of the daemon, not
    /// necessarily a power failure (then that event is not reported).
    func addPendingEvent(_ event: String, apnsID: String) throws {
        try withoutSync { db in
            try db.inTransaction {
                try db.execute(sql: "INSERT OR IGNORE INTO pending_event (apns_id, event) VALUES (?, ?)", arguments: [apnsID, event])
                try db.execute(sql: "DELETE FROM pending_event WHERE rowid <= (SELECT MAX(rowid) FROM pending_event) - ?",
                               arguments: [Self.maximumPendingEvents])
                return .commit
            }
        }
    }

    /// The oldest delivery events not yet confirmed by the gateway, at most `limit`.
    func pendingEvents(limit: Int) throws -> [(event: String, apnsID: String)] {
        try queue.read { db in
            try Row.fetchAll(db, sql: "SELECT event, apns_id FROM pending_event ORDER BY rowid LIMIT ?", arguments: [limit]).map {
                (event: $0[0], apnsID: $0[1])
            }
        }
    }

    /// Forgets delivery events the gateway confirmed.
    func clearEvents(_ events: [(event: String, apnsID: String)]) throws {
        guard !events.isEmpty else { return }
        try withoutSync { db in
            try db.inTransaction {
                for e in events {
                    try db.execute(sql: "DELETE FROM pending_event WHERE apns_id = ? AND event = ?", arguments: [e.apnsID, e.event])
                }
                return .commit
            }
        }
    }

    /// `body` with `synchronous=NORMAL` (no fsync), the connection back at FULL before this
    /// returns, or it throws.
    private func withoutSync(_ body: (Database) throws -> Void) throws {
        try queue.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            let result = Result { try body(db) }
            try db.execute(sql: "PRAGMA synchronous = FULL")
            try result.get()
        }
    }

    func count() throws -> Int {
        try queue.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM push") ?? 0 }
    }

    func addRemoval(_ bundle: String) throws {
        try queue.write { db in try db.execute(sql: "INSERT OR IGNORE INTO pending_removal (bundle) VALUES (?)", arguments: [bundle]) }
    }

    func removals() throws -> [String] {
        try queue.read { db in try String.fetchAll(db, sql: "SELECT bundle FROM pending_removal ORDER BY bundle") }
    }

    func clearRemoval(_ bundle: String) throws {
        try queue.write { db in try db.execute(sql: "DELETE FROM pending_removal WHERE bundle = ?", arguments: [bundle]) }
    }
}
