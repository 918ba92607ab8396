import Foundation
import GRDB
import GRDBSQLite
import TidingsCore
import TidingsStorage

/// The gateway store in SQLite (GRDB), WAL mode, `synchronous=FULL`: a commit that returned
/// survives `kill -9` and power loss. One file, `gateway.sqlite` in the data directory.
///
/// WAL checkpoints run off the commit path: the writer connection has no auto-checkpoint; its
/// WAL hook wakes a `WALCheckpointer` (its own connection and thread, `PASSIVE`) once the WAL
/// holds `checkpointPages` frames. If the WAL still reaches `walPageLimit` frames (the
/// checkpointer fell behind or a reader pinned old frames), the writer checkpoints itself
/// after that commit, as SQLite's auto-checkpoint would: the WAL stays bounded.
public final class SQLiteGatewayStore: GatewayStore {
    private let pool: DatabasePool
    private let checkpointer: WALCheckpointer

    /// Opens (creating and migrating) the database at `path`.
    public init(path: String, checkpointPages: Int = 1_000, walPageLimit: Int = 10_000) throws(GatewayStoreError) {
        var configuration = Configuration()
        configuration.journalMode = .wal
        configuration.busyMode = .timeout(10)
        do {
            pool = try DatabasePool(path: path, configuration: configuration)
            // GRDB sets synchronous=NORMAL for WAL after prepareDatabase; set FULL afterwards on
            // the writer connection and read it back (http2-baseline.md's pitfall).
            try pool.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA synchronous = FULL")
                let value = try Int.fetchOne(db, sql: "PRAGMA synchronous")
                guard value == 2 else { throw GatewayStoreError.backend("PRAGMA synchronous is \(value ?? -1), not FULL") }
            }
            try Self.migrator.migrate(pool)
            checkpointer = try WALCheckpointer(path: path, checkpointPages: max(1, checkpointPages),
                                               walPageLimit: max(checkpointPages, walPageLimit))
            try pool.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA wal_autocheckpoint = 0")
                checkpointer.install(on: db)
            }
        } catch let error as GatewayStoreError {
            throw error
        } catch {
            throw .backend("cannot open \(path): \(error)")
        }
    }

    deinit {
        try? pool.writeWithoutTransaction { db in checkpointer.uninstall(from: db) }
        checkpointer.stop()
    }

    /// How many WAL checkpoints ran on the background connection, and on the writer at the limit.
    public var checkpointCounts: (background: Int, writer: Int) { checkpointer.counts }

    private static var migrator: DatabaseMigrator {
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
        return migrator
    }

    private func write<T>(_ body: (Database) throws -> T) throws(GatewayStoreError) -> T {
        do { return try pool.write(body) } catch let error as GatewayStoreError { throw error } catch { throw .backend("\(error)") }
    }

    private func read<T>(_ body: (Database) throws -> T) throws(GatewayStoreError) -> T {
        do { return try pool.read(body) } catch let error as GatewayStoreError { throw error } catch { throw .backend("\(error)") }
    }

    // MARK: Registry

    public func addKey(_ key: ProviderKeyRecord) throws(GatewayStoreError) {
        try write { db in
            if try Bool.fetchOne(db, sql: "SELECT 1 FROM gw_keys WHERE key_id = ?", arguments: [key.keyID]) != nil {
                throw GatewayStoreError.duplicate("key \(key.keyID)")
            }
            try db.execute(sql: "INSERT INTO gw_keys VALUES (?, ?, ?, ?, ?)",
                           arguments: [key.keyID, key.teamID, key.publicKey, key.environment?.rawValue, key.createdAt])
        }
    }

    private static func keyRecord(_ row: Row) -> ProviderKeyRecord {
        ProviderKeyRecord(keyID: row["key_id"], teamID: row["team_id"], publicKey: row["public_key"],
                          environment: (row["environment"] as String?).map(APNsEnvironment.init(rawValue:)), createdAt: row["created_at"])
    }

    public func key(id: String) throws(GatewayStoreError) -> ProviderKeyRecord? {
        try read { db in try Row.fetchOne(db, sql: "SELECT * FROM gw_keys WHERE key_id = ?", arguments: [id]).map(Self.keyRecord) }
    }

    public func keys() throws(GatewayStoreError) -> [ProviderKeyRecord] {
        try read { db in try Row.fetchAll(db, sql: "SELECT * FROM gw_keys ORDER BY key_id").map(Self.keyRecord) }
    }

    private static func appRecord(_ row: Row) -> GatewayAppRecord {
        GatewayAppRecord(bundleID: row["bundle_id"], teamID: row["team_id"],
                  storagePolicy: StoragePolicy(rawValue: row["storage_policy"]) ?? .apns, createdAt: row["created_at"])
    }

    public func registerApp(_ app: GatewayAppRecord) throws(GatewayStoreError) {
        try write { db in
            if let existing = try Row.fetchOne(db, sql: "SELECT * FROM gw_apps WHERE bundle_id = ?", arguments: [app.bundleID]).map(Self.appRecord) {
                guard existing.teamID == app.teamID else { throw GatewayStoreError.duplicate("app \(app.bundleID)") }
                try db.execute(sql: "UPDATE gw_apps SET storage_policy = ? WHERE bundle_id = ?", arguments: [app.storagePolicy.rawValue, app.bundleID])
            } else {
                try db.execute(sql: "INSERT INTO gw_apps VALUES (?, ?, ?, ?)",
                               arguments: [app.bundleID, app.teamID, app.storagePolicy.rawValue, app.createdAt])
            }
        }
    }

    public func app(bundleID: String) throws(GatewayStoreError) -> GatewayAppRecord? {
        try read { db in try Row.fetchOne(db, sql: "SELECT * FROM gw_apps WHERE bundle_id = ?", arguments: [bundleID]).map(Self.appRecord) }
    }

    public func apps() throws(GatewayStoreError) -> [GatewayAppRecord] {
        try read { db in try Row.fetchAll(db, sql: "SELECT * FROM gw_apps ORDER BY bundle_id").map(Self.appRecord) }
    }

    // MARK: Devices

    public func registerDevice(_ device: GatewayDeviceRecord) throws(GatewayStoreError) {
        try write { db in
            try db.execute(sql: "INSERT OR IGNORE INTO gw_devices VALUES (?, ?, ?)",
                           arguments: [device.deviceID, device.publicKey, device.createdAt])
        }
    }

    public func device(id: String) throws(GatewayStoreError) -> GatewayDeviceRecord? {
        try read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM gw_devices WHERE device_id = ?", arguments: [id]).map {
                GatewayDeviceRecord(deviceID: $0["device_id"], publicKey: $0["public_key"], createdAt: $0["created_at"])
            }
        }
    }

    private static func tokenRecord(_ row: Row) -> DeviceTokenRecord {
        DeviceTokenRecord(token: row["token"], deviceID: row["device_id"], bundleID: row["bundle_id"],
                          environment: APNsEnvironment(rawValue: row["environment"]), createdAt: row["created_at"],
                          unregisteredAt: row["unregistered_at"])
    }

    public func addToken(_ token: DeviceTokenRecord) throws(GatewayStoreError) {
        try write { db in
            if try Bool.fetchOne(db, sql: "SELECT 1 FROM gw_tokens WHERE token = ?", arguments: [token.token]) != nil {
                throw GatewayStoreError.duplicate("token")
            }
            try db.execute(sql: "INSERT INTO gw_tokens VALUES (?, ?, ?, ?, ?, ?)",
                           arguments: [token.token, token.deviceID, token.bundleID, token.environment.rawValue, token.createdAt, token.unregisteredAt])
        }
    }

    public func token(_ token: String) throws(GatewayStoreError) -> DeviceTokenRecord? {
        try read { db in try Row.fetchOne(db, sql: "SELECT * FROM gw_tokens WHERE token = ?", arguments: [token]).map(Self.tokenRecord) }
    }

    public func activeToken(deviceID: String, bundleID: String, environment: APNsEnvironment) throws(GatewayStoreError) -> DeviceTokenRecord? {
        try read { db in
            try Row.fetchOne(db, sql: """
                SELECT * FROM gw_tokens WHERE device_id = ? AND bundle_id = ? AND environment = ? AND unregistered_at IS NULL
                """, arguments: [deviceID, bundleID, environment.rawValue]).map(Self.tokenRecord)
        }
    }

    public func unregisterTokens(deviceID: String, bundleID: String, at: EpochMilliseconds) throws(GatewayStoreError) -> [DeviceTokenRecord] {
        try write { db in
            let live = try Row.fetchAll(db, sql: "SELECT * FROM gw_tokens WHERE device_id = ? AND bundle_id = ? AND unregistered_at IS NULL",
                                        arguments: [deviceID, bundleID]).map(Self.tokenRecord)
            for var record in live {
                try db.execute(sql: "UPDATE gw_tokens SET unregistered_at = ? WHERE token = ?", arguments: [at, record.token])
                try db.execute(sql: """
                    UPDATE gw_pushes SET discarded_at = ?, discard_reason = 'unregistered'
                    WHERE token = ? AND delivered_at IS NULL AND discarded_at IS NULL
                    """, arguments: [at, record.token])
                record.unregisteredAt = at
                _ = record
            }
            return live.map { var r = $0; r.unregisteredAt = at; return r }
        }
    }

    // MARK: Push log

    public func commit(pushes: [NewPush], acknowledged: [Int64], at: EpochMilliseconds) throws(GatewayStoreError) -> [StoredPush] {
        try write { db in
            var stored: [StoredPush] = []
            stored.reserveCapacity(pushes.count)
            if !pushes.isEmpty {
                let insert = try db.cachedStatement(sql: """
                    INSERT INTO gw_pushes (apns_id, token, device_id, bundle_id, topic, push_type, priority, collapse_id,
                                           expires_at, payload, accepted_at, stored_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """)
                // Bound by hand on the cached statement: GRDB's `StatementArguments` boxes every
                // value of every row (twelve per push), the largest per-row cost of the commit.
                let handle = insert.sqliteStatement
                var scratch: [UInt8] = []
                scratch.reserveCapacity(512)
                for p in pushes {
                    try Self.bindAndStep(handle, db: db, push: p, storedAt: at, scratch: &scratch)
                    stored.append(StoredPush(sequence: db.lastInsertedRowID, push: p, storedAt: at))
                }
            }
            if !acknowledged.isEmpty {
                let ack = try db.cachedStatement(sql: "UPDATE gw_pushes SET delivered_at = ? WHERE seq = ? AND delivered_at IS NULL")
                for seq in acknowledged { try ack.execute(arguments: [at, seq]) }
            }
            return stored
        }
    }

    /// `SQLITE_STATIC`: SQLite reads the bound bytes in place during the step; they outlive it.
    private static let staticBytes: sqlite3_destructor_type? = nil

    /// Binds one push and steps. The text columns are copied into one scratch buffer (reused
    /// across rows) and bound in place with `SQLITE_STATIC`, the payload likewise from its
    /// array: SQLite's `SQLITE_TRANSIENT` copy meant a `malloc`, a copy and a `free` per column
    /// per row. The bindings are cleared before the buffers go away.
    private static func bindAndStep(_ s: SQLiteStatement, db: Database, push p: NewPush, storedAt: EpochMilliseconds,
                                    scratch: inout [UInt8]) throws {
        scratch.removeAll(keepingCapacity: true)
        func append(_ text: String) -> Range<Int> {
            let start = scratch.count
            scratch.append(contentsOf: text.utf8)
            return start..<scratch.count
        }
        let apnsID = append(p.apnsID), token = append(p.token), deviceID = append(p.deviceID)
        let bundleID = append(p.bundleID), topic = append(p.topic), pushType = append(p.pushType)
        let collapseID = p.collapseID.map(append)
        let (code, message): (CInt, String?) = scratch.withUnsafeBytes { text in
            p.payload.withUnsafeBytes { payload in
                func bindText(_ index: CInt, _ range: Range<Int>?) -> CInt {
                    guard let range else { return sqlite3_bind_null(s, index) }
                    // A zero-length text still needs a non-null pointer (NULL would bind NULL).
                    let start = (text.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!) + range.lowerBound
                    return sqlite3_bind_text(s, index, start.assumingMemoryBound(to: CChar.self), CInt(range.count), staticBytes)
                }
                var code = bindText(1, apnsID)
                if code == SQLITE_OK { code = bindText(2, token) }
                if code == SQLITE_OK { code = bindText(3, deviceID) }
                if code == SQLITE_OK { code = bindText(4, bundleID) }
                if code == SQLITE_OK { code = bindText(5, topic) }
                if code == SQLITE_OK { code = bindText(6, pushType) }
                if code == SQLITE_OK { code = sqlite3_bind_int64(s, 7, Int64(p.priority)) }
                if code == SQLITE_OK { code = bindText(8, collapseID) }
                if code == SQLITE_OK { code = sqlite3_bind_int64(s, 9, Int64(p.expiresAt)) }
                if code == SQLITE_OK {
                    // An empty payload is still a blob, never NULL (the column is NOT NULL).
                    code = sqlite3_bind_blob(s, 10, payload.baseAddress ?? UnsafeRawPointer(bitPattern: 1), CInt(payload.count), staticBytes)
                }
                if code == SQLITE_OK { code = sqlite3_bind_int64(s, 11, Int64(p.acceptedAt)) }
                if code == SQLITE_OK { code = sqlite3_bind_int64(s, 12, Int64(storedAt)) }
                if code == SQLITE_OK {
                    code = sqlite3_step(s)
                    if code == SQLITE_DONE { code = SQLITE_OK }
                }
                let message = code == SQLITE_OK ? nil : db.lastErrorMessage
                sqlite3_reset(s)
                sqlite3_clear_bindings(s)
                return (code, message)
            }
        }
        if code != SQLITE_OK { throw DatabaseError(resultCode: ResultCode(rawValue: code), message: message) }
    }

    public func prepareBacklog(deviceID: String, now: EpochMilliseconds) throws(GatewayStoreError) -> Int {
        try write { db in
            try db.execute(sql: """
                UPDATE gw_pushes SET discarded_at = ?, discard_reason = 'expired'
                WHERE device_id = ? AND delivered_at IS NULL AND discarded_at IS NULL AND expires_at <= ?
                """, arguments: [now, deviceID, now])
            let expired = db.changesCount
            // The storage policy over the device's whole open set, in one statement: each open
            // push is ranked newest first within its token (`apns`, and apps not registered) or
            // its token and collapse id (`all`); all but rank 1 go. Pushes of `all` apps without
            // a collapse id always stay, so they are left out before the ranking's sort (a large
            // `all` backlog without collapse ids costs one index walk, no sort).
            try db.execute(sql: """
                UPDATE gw_pushes SET discarded_at = ?, discard_reason = 'coalesced'
                WHERE seq IN (
                    SELECT seq FROM (
                        SELECT p.seq AS seq,
                               ROW_NUMBER() OVER (PARTITION BY p.token, CASE WHEN a.storage_policy = 'all' THEN p.collapse_id END
                                                  ORDER BY p.seq DESC) AS newest
                        FROM gw_pushes p LEFT JOIN gw_apps a ON a.bundle_id = p.bundle_id
                        WHERE p.device_id = ? AND p.delivered_at IS NULL AND p.discarded_at IS NULL
                          AND (a.storage_policy IS NOT 'all' OR p.collapse_id IS NOT NULL))
                    WHERE newest > 1)
                """, arguments: [now, deviceID])
            return expired + db.changesCount
        }
    }

    /// Columns by index, in this order (`storedPush(from:)`): no by-name lookup per row.
    private static let pageSQL = """
        SELECT seq, apns_id, token, device_id, bundle_id, topic, push_type, priority, collapse_id, expires_at, payload,
               accepted_at, stored_at
        FROM gw_pushes
        WHERE device_id = ? AND delivered_at IS NULL AND discarded_at IS NULL AND seq > ?
        ORDER BY seq LIMIT ?
        """

    public func pendingPushes(deviceID: String, after: Int64, limit: Int) throws(GatewayStoreError) -> [StoredPush] {
        guard limit > 0 else { return [] }
        return try read { db in
            let statement = try db.cachedStatement(sql: Self.pageSQL)
            let s = statement.sqliteStatement
            var page: [StoredPush] = []
            page.reserveCapacity(min(limit, 4_096))
            // The device id is bound in place (`SQLITE_STATIC`) for the steps below; the
            // bindings are cleared before its bytes go away.
            let (code, message): (CInt, String?) = deviceID.utf8CString.withUnsafeBufferPointer { id in
                var code = sqlite3_bind_text(s, 1, id.baseAddress, CInt(id.count - 1), Self.staticBytes)
                if code == SQLITE_OK { code = sqlite3_bind_int64(s, 2, after) }
                if code == SQLITE_OK { code = sqlite3_bind_int64(s, 3, Int64(limit)) }
                while code == SQLITE_OK {
                    let step = sqlite3_step(s)
                    if step == SQLITE_ROW {
                        page.append(Self.storedPush(from: s))
                    } else {
                        code = step == SQLITE_DONE ? SQLITE_OK : step
                        break
                    }
                }
                let message = code == SQLITE_OK ? nil : db.lastErrorMessage
                sqlite3_reset(s)
                sqlite3_clear_bindings(s)
                return (code, message)
            }
            if code != SQLITE_OK { throw DatabaseError(resultCode: ResultCode(rawValue: code), message: message) }
            return page
        }
    }

    /// The current row of `pageSQL`.
    private static func storedPush(from s: SQLiteStatement) -> StoredPush {
        func text(_ i: CInt) -> String {
            guard let bytes = sqlite3_column_text(s, i) else { return "" }
            return String(decoding: UnsafeBufferPointer(start: bytes, count: Int(sqlite3_column_bytes(s, i))), as: UTF8.self)
        }
        let payload: [UInt8]
        if let blob = sqlite3_column_blob(s, 10) {
            payload = Array(UnsafeRawBufferPointer(start: blob, count: Int(sqlite3_column_bytes(s, 10))))
        } else {
            payload = []
        }
        let push = NewPush(apnsID: text(1), token: text(2), deviceID: text(3), bundleID: text(4), topic: text(5), pushType: text(6),
                           priority: Int(sqlite3_column_int64(s, 7)),
                           collapseID: sqlite3_column_type(s, 8) == SQLITE_NULL ? nil : text(8),
                           expiresAt: EpochMilliseconds(sqlite3_column_int64(s, 9)), payload: payload,
                           acceptedAt: EpochMilliseconds(sqlite3_column_int64(s, 11)))
        return StoredPush(sequence: sqlite3_column_int64(s, 0), push: push, storedAt: EpochMilliseconds(sqlite3_column_int64(s, 12)))
    }

    public func status(apnsID: String) throws(GatewayStoreError) -> [PushStatus] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM gw_pushes WHERE apns_id = ? ORDER BY seq", arguments: [apnsID]).map { row in
                let token: String = row["token"]
                return PushStatus(sequence: row["seq"], apnsID: row["apns_id"], bundleID: row["bundle_id"], topic: row["topic"],
                                  pushType: row["push_type"], tokenPrefix: String(token.prefix(8)), acceptedAt: row["accepted_at"],
                                  storedAt: row["stored_at"], expiresAt: row["expires_at"], deliveredAt: row["delivered_at"],
                                  presentedAt: row["presented_at"], answeredAt: row["answered_at"], discardedAt: row["discarded_at"],
                                  discardReason: (row["discard_reason"] as String?).map(DiscardReason.init(rawValue:)))
            }
        }
    }

    public func recordEvent(_ event: DeliveryEvent, apnsID: String, deviceID: String, at: EpochMilliseconds) throws(GatewayStoreError) -> Bool {
        let column: String
        switch event {
        case .presented: column = "presented_at"
        case .answered: column = "answered_at"
        default: return false
        }
        return try write { db in
            guard let seq = try Int64.fetchOne(db, sql: """
                SELECT seq FROM gw_pushes INDEXED BY gw_pushes_device WHERE device_id = ? AND apns_id = ? ORDER BY seq DESC LIMIT 1
                """, arguments: [deviceID, apnsID]) else { return false }
            try db.execute(sql: "UPDATE gw_pushes SET \(column) = COALESCE(\(column), ?), delivered_at = COALESCE(delivered_at, ?) WHERE seq = ?",
                           arguments: [at, at, seq])
            return true
        }
    }

    public func expirePushes(now: EpochMilliseconds, limit: Int) throws(GatewayStoreError) -> Int {
        try write { db in
            try db.execute(sql: """
                UPDATE gw_pushes SET discarded_at = ?, discard_reason = 'expired'
                WHERE seq IN (SELECT seq FROM gw_pushes
                              WHERE delivered_at IS NULL AND discarded_at IS NULL AND expires_at <= ? LIMIT ?)
                """, arguments: [now, now, limit])
            return db.changesCount
        }
    }

    public func prunePushes(finishedBefore cutoff: EpochMilliseconds, limit: Int) throws(GatewayStoreError) -> Int {
        try write { db in
            // Oldest first through the rowid: the push log is deleted from its start. A push
            // finished before the cutoff was accepted before it, so the scan stops at the
            // first push accepted since (a rowid walk over old rows only): the writer never
            // reads the retained log, which is most of the table.
            try db.execute(sql: """
                DELETE FROM gw_pushes WHERE seq IN (
                    SELECT seq FROM gw_pushes
                    WHERE seq < COALESCE((SELECT seq FROM gw_pushes WHERE accepted_at >= ? ORDER BY seq LIMIT 1), 9223372036854775807)
                      AND ((delivered_at IS NOT NULL AND delivered_at < ?) OR (discarded_at IS NOT NULL AND discarded_at < ?))
                    ORDER BY seq LIMIT ?)
                """, arguments: [cutoff, cutoff, cutoff, limit])
            return db.changesCount
        }
    }
}
