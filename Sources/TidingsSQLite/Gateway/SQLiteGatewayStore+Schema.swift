import GRDB

/// The gateway database's schema history: each migration as it ran, oldest first.
extension SQLiteGatewayStore {
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("gateway-v1") { db in
            try db.execute(sql: """
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
                CREATE INDEX gw_pushes_apns_id ON gw_pushes(apns_id);
                """)
        }
        // The hot transaction appends only: an index on apns_id (random UUIDs) dirtied a
        // different B-tree page per push, so each group commit wrote hundreds of KB
        // (docs/benchmarks.md, Gateway). Every index left grows at its right edge per device:
        // `status(apnsID:)` scans the push log (bounded by pruning), and delivery events find
        // their push through the device's own entries, newest first.
        migrator.registerMigration("gateway-v2-append-only") { db in
            try db.execute(sql: """
                DROP INDEX gw_pushes_apns_id;
                CREATE INDEX gw_pushes_device ON gw_pushes(device_id, seq);
                """)
        }
        migrator.registerMigration("gateway-v3-device-numbers") { db in try db.execute(sql: v3Migration) }
        migrator.registerMigration("gateway-v4-issued-sequences") { db in try db.execute(sql: v4Migration) }
        return migrator
    }

    /// The push log keyed by small integers (docs/gateway.md, "Storage and delivery").
    ///
    /// - `gw_devices` numbers every device (`device_no`, the rowid); a device that only
    ///   appears in a push (never registered) gets a row without a key, which `device(id:)`
    ///   does not report. `open_from` is the device's *watermark*: every push of the device
    ///   with a smaller sequence is finished (delivered or discarded).
    /// - `gw_targets` numbers each (token, device, bundle ID, topic) a push was sent to, so a
    ///   push row carries two small integers instead of the 64-character token and device id,
    ///   the bundle ID and the topic.
    /// - `gw_pushes` has ONE index, `(device_no, seq)`: every insert touches the table and this
    ///   index only, both at their right edge. It serves the pending read and the expiration
    ///   walk (from the device's watermark, so a reconnect does not walk the delivered
    ///   history: rows finished before the watermark are skipped by the index range, and
    ///   the watermark moves past the finished prefix on each read and maintenance run),
    ///   delivery events (newest first by device, then `apns_id`), and unregistering (by
    ///   device from its watermark, then target). The v2 partial index on open pushes did the
    ///   watermark's job but cost a second B-tree insert per push and a delete per ack; with
    ///   the watermark an ack changes only its row. What the watermark cannot skip: a push a
    ///   device never acknowledges pins it until that push expires or is coalesced, so until
    ///   then each read walks the device's later pushes once more.
    static let v3Migration = """
        CREATE TABLE gw_devices_v3 (device_no INTEGER PRIMARY KEY, device_id TEXT NOT NULL UNIQUE, public_key BLOB,
                                    created_at INTEGER, open_from INTEGER NOT NULL DEFAULT 0);
        INSERT INTO gw_devices_v3 (device_id, public_key, created_at) SELECT device_id, public_key, created_at FROM gw_devices ORDER BY rowid;
        INSERT OR IGNORE INTO gw_devices_v3 (device_id) SELECT DISTINCT device_id FROM gw_pushes;
        DROP TABLE gw_devices;
        ALTER TABLE gw_devices_v3 RENAME TO gw_devices;
        CREATE TABLE gw_targets (target_no INTEGER PRIMARY KEY, token TEXT NOT NULL, device_no INTEGER NOT NULL,
                                 bundle_id TEXT NOT NULL, topic TEXT NOT NULL, UNIQUE (token, device_no, bundle_id, topic));
        INSERT INTO gw_targets (token, device_no, bundle_id, topic)
            SELECT DISTINCT p.token, d.device_no, p.bundle_id, p.topic FROM gw_pushes p JOIN gw_devices d ON d.device_id = p.device_id;
        DROP INDEX gw_pushes_open;
        DROP INDEX gw_pushes_device;
        ALTER TABLE gw_pushes RENAME TO gw_pushes_v2;
        CREATE TABLE gw_pushes (seq INTEGER PRIMARY KEY AUTOINCREMENT, device_no INTEGER NOT NULL, target_no INTEGER NOT NULL,
                                apns_id TEXT NOT NULL, push_type TEXT NOT NULL, priority INTEGER NOT NULL, collapse_id TEXT,
                                expires_at INTEGER NOT NULL, accepted_at INTEGER NOT NULL, stored_at INTEGER NOT NULL,
                                delivered_at INTEGER, discarded_at INTEGER, discard_reason TEXT, presented_at INTEGER,
                                answered_at INTEGER, payload BLOB NOT NULL);
        INSERT INTO gw_pushes (seq, device_no, target_no, apns_id, push_type, priority, collapse_id, expires_at, accepted_at,
                               stored_at, delivered_at, discarded_at, discard_reason, presented_at, answered_at, payload)
            SELECT p.seq, d.device_no, t.target_no, p.apns_id, p.push_type, p.priority, p.collapse_id, p.expires_at, p.accepted_at,
                   p.stored_at, p.delivered_at, p.discarded_at, p.discard_reason, p.presented_at, p.answered_at, p.payload
            FROM gw_pushes_v2 p JOIN gw_devices d ON d.device_id = p.device_id
            JOIN gw_targets t ON t.token = p.token AND t.device_no = d.device_no AND t.bundle_id = p.bundle_id AND t.topic = p.topic
            ORDER BY p.seq;
        -- Sequences are never reused (devices dedupe by them): carry AUTOINCREMENT's high-water
        -- mark over, which is above every remaining row when the newest pushes were pruned.
        INSERT INTO sqlite_sequence (name, seq)
            SELECT 'gw_pushes', 0 WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'gw_pushes');
        UPDATE sqlite_sequence SET seq = MAX(seq, COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'gw_pushes_v2'), 0))
            WHERE name = 'gw_pushes';
        DROP TABLE gw_pushes_v2;
        CREATE INDEX gw_pushes_device ON gw_pushes(device_no, seq);
        """

    /// Sequences issued by the commit instead of `AUTOINCREMENT` (docs/gateway.md, "Storage
    /// and delivery"): `AUTOINCREMENT` read and rewrote `sqlite_sequence` in every `INSERT`.
    /// `gw_push_sequence.reserved_through` is at or above every sequence a committed push ever
    /// had; the commit that would go past it raises it by `sequenceReservation` in the same
    /// transaction, so a restart (also after `kill -9`, also when the newest pushes were
    /// pruned) continues above it and never issues a sequence twice. The log is copied once
    /// (a table cannot drop `AUTOINCREMENT` in place); every push keeps its sequence.
    static let v4Migration = """
        CREATE TABLE gw_push_sequence (id INTEGER PRIMARY KEY CHECK (id = 1), reserved_through INTEGER NOT NULL);
        INSERT INTO gw_push_sequence (id, reserved_through)
            SELECT 1, MAX(COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'gw_pushes'), 0),
                          COALESCE((SELECT MAX(seq) FROM gw_pushes), 0));
        DROP INDEX gw_pushes_device;
        ALTER TABLE gw_pushes RENAME TO gw_pushes_v3;
        CREATE TABLE gw_pushes (seq INTEGER PRIMARY KEY, device_no INTEGER NOT NULL, target_no INTEGER NOT NULL,
                                apns_id TEXT NOT NULL, push_type TEXT NOT NULL, priority INTEGER NOT NULL, collapse_id TEXT,
                                expires_at INTEGER NOT NULL, accepted_at INTEGER NOT NULL, stored_at INTEGER NOT NULL,
                                delivered_at INTEGER, discarded_at INTEGER, discard_reason TEXT, presented_at INTEGER,
                                answered_at INTEGER, payload BLOB NOT NULL);
        INSERT INTO gw_pushes (seq, device_no, target_no, apns_id, push_type, priority, collapse_id, expires_at, accepted_at,
                               stored_at, delivered_at, discarded_at, discard_reason, presented_at, answered_at, payload)
            SELECT seq, device_no, target_no, apns_id, push_type, priority, collapse_id, expires_at, accepted_at,
                   stored_at, delivered_at, discarded_at, discard_reason, presented_at, answered_at, payload
            FROM gw_pushes_v3 ORDER BY seq;
        DROP TABLE gw_pushes_v3;
        CREATE INDEX gw_pushes_device ON gw_pushes(device_no, seq);
        """
}
