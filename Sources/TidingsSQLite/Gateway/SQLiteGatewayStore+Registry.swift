import Foundation
import GRDB
import TidingsCore
import TidingsStorage

/// The registry: provider keys, apps, devices and their tokens.
extension SQLiteGatewayStore {
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

    /// A gateway running on this file sees it at its next registry refresh
    /// (`GatewayConfiguration.registryRefreshInterval`): SQLite has no notifications.
    @discardableResult
    public func revokeKey(id: String) throws(GatewayStoreError) -> ProviderKeyRecord {
        try write { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM gw_keys WHERE key_id = ?", arguments: [id]) else {
                throw GatewayStoreError.notFound("key \(id)")
            }
            try db.execute(sql: "DELETE FROM gw_keys WHERE key_id = ?", arguments: [id])
            return Self.keyRecord(row)
        }
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
            // A device first seen in a push (numbered by the commit) gets its key here.
            try db.execute(sql: """
                INSERT INTO gw_devices (device_id, public_key, created_at) VALUES (?, ?, ?)
                ON CONFLICT (device_id) DO UPDATE SET public_key = excluded.public_key, created_at = excluded.created_at
                WHERE gw_devices.public_key IS NULL
                """, arguments: [device.deviceID, device.publicKey, device.createdAt])
        }
    }

    public func device(id: String) throws(GatewayStoreError) -> GatewayDeviceRecord? {
        try read { db in
            try Row.fetchOne(db, sql: "SELECT public_key, created_at FROM gw_devices WHERE device_id = ? AND public_key IS NOT NULL",
                             arguments: [id]).map {
                GatewayDeviceRecord(deviceID: id, publicKey: $0[0], createdAt: $0[1])
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

    public func tokenCount(deviceID: String) throws(GatewayStoreError) -> Int {
        try read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM gw_tokens WHERE device_id = ?", arguments: [deviceID]) ?? 0 }
    }

    public func unregisterTokens(deviceID: String, bundleID: String, at: EpochMilliseconds) throws(GatewayStoreError) -> [DeviceTokenRecord] {
        try write { db in
            let live = try Row.fetchAll(db, sql: "SELECT * FROM gw_tokens WHERE device_id = ? AND bundle_id = ? AND unregistered_at IS NULL",
                                        arguments: [deviceID, bundleID]).map(Self.tokenRecord)
            for record in live {
                try db.execute(sql: "UPDATE gw_tokens SET unregistered_at = ? WHERE token = ?", arguments: [at, record.token])
                // Through (device_no, seq) from each target's device watermark: the device's
                // open pushes only, never a scan of the log by token.
                try db.execute(sql: """
                    UPDATE gw_pushes SET discarded_at = ?, discard_reason = 'unregistered'
                    WHERE seq IN (
                        SELECT p.seq FROM gw_targets t CROSS JOIN gw_devices d ON d.device_no = t.device_no
                        CROSS JOIN gw_pushes p INDEXED BY gw_pushes_device ON p.device_no = t.device_no AND p.seq >= d.open_from
                        WHERE t.token = ? AND p.target_no = t.target_no AND p.delivered_at IS NULL AND p.discarded_at IS NULL)
                    """, arguments: [at, record.token])
            }
            return live.map { var r = $0; r.unregisteredAt = at; return r }
        }
    }
}
