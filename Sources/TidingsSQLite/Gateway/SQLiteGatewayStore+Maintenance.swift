import Foundation
import GRDB
import TidingsCore
import TidingsStorage

/// Housekeeping (`Gateway.runMaintenance`): expired pushes discarded, finished ones pruned,
/// each in bounded transactions.
extension SQLiteGatewayStore {
    public func expirePushes(now: EpochMilliseconds, limit: Int) throws(GatewayStoreError) -> Int {
        // The walk off the writer: each device's watermark moved past its finished pushes, then
        // up to `limit` expired open pushes from there. The write re-checks each.
        let (watermarks, candidates): ([(Int64, Int64)], [Int64]) = try read { db in
            var moved: [(Int64, Int64)] = []
            var candidates: [Int64] = []
            let open = try db.cachedStatement(sql: """
                SELECT seq FROM gw_pushes INDEXED BY gw_pushes_device
                WHERE device_no = ? AND seq >= ? AND delivered_at IS NULL AND discarded_at IS NULL AND expires_at <= ? LIMIT ?
                """)
            for row in try Row.fetchAll(db, sql: "SELECT device_no, open_from FROM gw_devices") {
                let device: Int64 = row[0], watermark: Int64 = row[1]
                let start = try Self.openStart(deviceNo: device, from: watermark, db: db)
                if start > watermark { moved.append((device, start)) }
                if candidates.count < limit {
                    candidates += try Int64.fetchAll(open, arguments: [device, start, now, limit - candidates.count])
                }
            }
            return (moved, candidates)
        }
        return try write { db in
            for (device, start) in watermarks { try Self.moveWatermark(deviceNo: device, to: start, db: db) }
            let expire = try db.cachedStatement(sql: """
                UPDATE gw_pushes SET discarded_at = ?, discard_reason = 'expired'
                WHERE seq = ? AND delivered_at IS NULL AND discarded_at IS NULL
                """)
            var count = 0
            for seq in candidates {
                try expire.execute(arguments: [now, seq])
                count += db.changesCount
            }
            return count
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
