import Foundation
import GRDB
import GRDBSQLite
import Synchronization
import TidingsCore
import TidingsStorage

/// The gateway store in SQLite (GRDB), WAL mode, `synchronous=FULL`: a commit that returned
/// survives `kill -9` and power loss. One file, `gateway.sqlite` in the data directory.
///
/// The writer's WAL writes are gathered into few `pwrite`s per commit (`WALWriteBuffer`).
/// WAL checkpoints run off the commit path: the writer connection has no auto-checkpoint; its
/// WAL hook wakes a `WALCheckpointer` (its own connection and thread, `PASSIVE`) once the WAL
/// holds `checkpointPages` frames. If the WAL still reaches `walPageLimit` frames (the
/// checkpointer fell behind or a reader pinned old frames), the writer checkpoints itself
/// after that commit, as SQLite's auto-checkpoint would: the WAL stays bounded.
public final class SQLiteGatewayStore: GroupCommitsEvents {
    private let pool: DatabasePool
    private let checkpointer: WALCheckpointer

    /// The page size a new database file gets (an existing file keeps its own: in WAL mode it
    /// cannot change). 8 KiB pages halve the WAL frames, and with them the `pwrite`s per commit
    /// and the checkpointer's reads and writes, against 4 KiB (docs/benchmarks.md, Gateway,
    /// "Commit thread").
    public static let newDatabasePageSize = 8_192

    /// Opens (creating and migrating) the database at `path`.
    public convenience init(path: String, checkpointPages: Int = 1_000, walPageLimit: Int = 10_000) throws(GatewayStoreError) {
        var limits = SQLiteStoreLimits()
        limits.checkpointPages = max(1, checkpointPages)
        limits.walPageLimit = max(limits.checkpointPages, walPageLimit)
        try self.init(path: path, limits: limits)
    }

    /// Opens (creating and migrating) the database at `path`.
    public init(path: String, limits: SQLiteStoreLimits) throws(GatewayStoreError) {
        if let problem = limits.problem { throw .backend("SQLite store: \(problem)") }
        let checkpointPages = limits.checkpointPages, walPageLimit = limits.walPageLimit
        var configuration = Configuration()
        configuration.journalMode = .wal
        let busy = limits.busyTimeout.components
        configuration.busyMode = .timeout(Double(busy.seconds) + Double(busy.attoseconds) / 1e18)
        // Before GRDB turns on WAL: only a database without pages yet takes it.
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA page_size = \(Self.newDatabasePageSize)") }
        do {
            // Through the WAL write buffer's VFS where this SQLite can (URI file names).
            let pool = try DatabasePool(path: WALWriteBuffer.uri(for: path) ?? path, configuration: configuration)
            self.pool = pool
            // GRDB sets synchronous=NORMAL for WAL after prepareDatabase; set FULL afterwards on
            // the writer connection and read it back (http2-baseline.md's pitfall).
            try pool.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA synchronous = FULL")
                let value = try Int.fetchOne(db, sql: "PRAGMA synchronous")
                guard value == 2 else { throw GatewayStoreError.backend("PRAGMA synchronous is \(value ?? -1), not FULL") }
            }
            try Self.migrator.migrate(pool)
            let issued = try pool.read { db in
                // Above every sequence ever issued: the newest pushes may have been pruned.
                let reserved = try Int64.fetchOne(db, sql: "SELECT reserved_through FROM gw_push_sequence WHERE id = 1") ?? 0
                let newest = try Int64.fetchOne(db, sql: "SELECT MAX(seq) FROM gw_pushes") ?? 0
                return Sequences(next: max(reserved, newest) + 1, reserved: reserved)
            }
            sequences = Mutex(issued)
            let checkpointer = try WALCheckpointer(path: path, checkpointPages: max(1, checkpointPages),
                                                   walPageLimit: max(checkpointPages, walPageLimit))
            self.checkpointer = checkpointer
            try pool.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA wal_autocheckpoint = 0")
                checkpointer.install(on: db)
            }
            // After synchronous=FULL: every commit syncs, which writes out the buffer first.
            walWritesBuffered = try pool.writeWithoutTransaction { db in try WALWriteBuffer.enable(on: db) }
        } catch let error as GatewayStoreError {
            throw error
        } catch {
            throw .backend("cannot open \(path): \(error)")
        }
    }

    deinit {
        close()
    }

    private let closed = Mutex(false)

    /// Stops the checkpointer (its thread and connection) and closes the database's
    /// connections. The gateway calls it when it stops; afterwards every call fails. Calling it
    /// again does nothing.
    public func close() {
        let first = closed.withLock { c in defer { c = true }; return !c }
        guard first else { return }
        try? pool.writeWithoutTransaction { db in checkpointer.uninstall(from: db) }
        checkpointer.stop()
        try? pool.close()
    }

    /// Whether the WAL checkpointer's thread still runs (until `close()`).
    public var checkpointerIsRunning: Bool { checkpointer.isRunning }

    /// Whether the writer's WAL writes go through `WALWriteBuffer` (few `pwrite`s per commit).
    public let walWritesBuffered: Bool

    /// How many WAL checkpoints ran on the background connection, and on the writer at the limit.
    public var checkpointCounts: (background: Int, writer: Int) { checkpointer.counts }

    /// How far past the last issued sequence a commit reserves: the reservation is written
    /// about once per this many pushes, and a restart skips at most this many numbers.
    static let sequenceReservation: Int64 = 4_096

    private struct Sequences {
        /// The next sequence to issue. Taken inside the write: a transaction that fails burns
        /// its numbers, which is harmless (never issued twice is what counts).
        var next: Int64
        /// `gw_push_sequence.reserved_through` as last committed (never above the database's).
        var reserved: Int64
    }

    private let sequences: Mutex<Sequences>

    func write<T>(_ body: (Database) throws -> T) throws(GatewayStoreError) -> T {
        do { return try pool.write(body) } catch let error as GatewayStoreError { throw error } catch { throw .backend("\(error)") }
    }

    func read<T>(_ body: (Database) throws -> T) throws(GatewayStoreError) -> T {
        do { return try pool.read(body) } catch let error as GatewayStoreError { throw error } catch { throw .backend("\(error)") }
    }

    // MARK: Push log

    /// What a push row refers to by number (`gw_targets`), with the device's number.
    private struct TargetKey: Hashable {
        var token: String
        var deviceID: String
        var bundleID: String
        var topic: String
    }

    private struct Numbers {
        var target: Int64
        var device: Int64
    }

    /// The numbers of targets already in the database. Rows in `gw_devices` and `gw_targets`
    /// are never deleted or renumbered, so an entry stays true; entries learned in a
    /// transaction are added only after it committed.
    private let numbers = Mutex<[TargetKey: Numbers]>([:])

    /// The numbers of a push's target and device, creating their rows if new (in `db`'s transaction).
    private static func resolve(_ key: TargetKey, db: Database) throws -> Numbers {
        try db.cachedStatement(sql: "INSERT INTO gw_devices (device_id) VALUES (?) ON CONFLICT (device_id) DO NOTHING")
            .execute(arguments: [key.deviceID])
        guard let device = try Int64.fetchOne(db.cachedStatement(sql: "SELECT device_no FROM gw_devices WHERE device_id = ?"),
                                              arguments: [key.deviceID]) else {
            throw GatewayStoreError.backend("device \(key.deviceID) has no number")
        }
        try db.cachedStatement(sql: """
            INSERT INTO gw_targets (token, device_no, bundle_id, topic) VALUES (?, ?, ?, ?)
            ON CONFLICT (token, device_no, bundle_id, topic) DO NOTHING
            """).execute(arguments: [key.token, device, key.bundleID, key.topic])
        guard let target = try Int64.fetchOne(db.cachedStatement(sql: """
            SELECT target_no FROM gw_targets WHERE token = ? AND device_no = ? AND bundle_id = ? AND topic = ?
            """), arguments: [key.token, device, key.bundleID, key.topic]) else {
            throw GatewayStoreError.backend("target has no number")
        }
        return Numbers(target: target, device: device)
    }

    public func commit(pushes: [NewPush], acknowledged: [Int64], at: EpochMilliseconds) throws(GatewayStoreError) -> [StoredPush] {
        try commit(pushes: pushes, acknowledged: acknowledged, events: [], at: at)
    }

    /// Pushes, acknowledgements and delivery events in one transaction: one commit, one sync.
    public func commit(pushes: [NewPush], acknowledged: [Int64], events: [DeviceEventBatch], at: EpochMilliseconds) throws(GatewayStoreError) -> [StoredPush] {
        var known = numbers.withLock { $0 }
        var learned: [(TargetKey, Numbers)] = []
        var reservedNow: Int64?
        let stored: [StoredPush] = try write { db in
            var stored: [StoredPush] = []
            stored.reserveCapacity(pushes.count)
            if !pushes.isEmpty {
                let count = Int64(pushes.count)
                let (first, reserved) = sequences.withLock { s in
                    defer { s.next += count }
                    return (s.next, s.reserved)
                }
                let last = first + count - 1
                if last > reserved {
                    let through = last + Self.sequenceReservation
                    try db.cachedStatement(sql: """
                        UPDATE gw_push_sequence SET reserved_through = MAX(reserved_through, ?) WHERE id = 1
                        """).execute(arguments: [through])
                    guard db.changesCount == 1 else { throw GatewayStoreError.backend("gw_push_sequence has no row") }
                    reservedNow = through
                }
                let insert = try db.cachedStatement(sql: """
                    INSERT INTO gw_pushes (seq, device_no, target_no, apns_id, push_type, priority, collapse_id,
                                           expires_at, accepted_at, stored_at, payload)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """)
                // Bound by hand on the cached statement: GRDB's `StatementArguments` boxes every
                // value of every row, the largest per-row cost of the commit.
                let handle = insert.sqliteStatement
                var scratch: [UInt8] = []
                scratch.reserveCapacity(256)
                var sequence = first
                for p in pushes {
                    let key = TargetKey(token: p.token, deviceID: p.deviceID, bundleID: p.bundleID, topic: p.topic.rawValue)
                    let n: Numbers
                    if let found = known[key] {
                        n = found
                    } else {
                        n = try Self.resolve(key, db: db)
                        known[key] = n
                        learned.append((key, n))
                    }
                    try Self.bindAndStep(handle, db: db, sequence: sequence, push: p, numbers: n, storedAt: at, scratch: &scratch)
                    stored.append(StoredPush(sequence: sequence, push: p, storedAt: at))
                    sequence += 1
                }
            }
            if !acknowledged.isEmpty { try Self.markDelivered(acknowledged, at: at, db: db) }
            for batch in events { try Self.record(batch.events, deviceID: batch.deviceID, at: at, db) }
            return stored
        }
        // Committed: only now may later commits rely on the reservation.
        if let reservedNow { sequences.withLock { $0.reserved = max($0.reserved, reservedNow) } }
        if !learned.isEmpty {
            numbers.withLock { cache in for (key, n) in learned { cache[key] = n } }
        }
        return stored
    }

    /// Marks acknowledged pushes delivered: one `UPDATE` per run of consecutive sequences
    /// (`seq BETWEEN first AND last`, a rowid range), bound by hand. A device acknowledges in
    /// delivery order and the committer gets each connection's acknowledgements in order, so
    /// with few devices most of a batch is one or a few runs; every sequence of a run was
    /// acknowledged, so nothing unacknowledged is marked. (Rows still change one by one:
    /// what a run saves is the statement and its bindings per acknowledgement.)
    private static func markDelivered(_ acknowledged: [Int64], at: EpochMilliseconds, db: Database) throws {
        let statement = try db.cachedStatement(sql: """
            UPDATE gw_pushes SET delivered_at = ? WHERE seq BETWEEN ? AND ? AND delivered_at IS NULL
            """)
        let s = statement.sqliteStatement
        var sorted = acknowledged
        if zip(sorted, sorted.dropFirst()).contains(where: { $0 > $1 }) { sorted.sort() }
        var i = 0
        while i < sorted.count {
            let first = sorted[i]
            var last = first
            i += 1
            while i < sorted.count && sorted[i] <= last + 1 {
                last = max(last, sorted[i])
                i += 1
            }
            var code = sqlite3_bind_int64(s, 1, at)
            if code == SQLITE_OK { code = sqlite3_bind_int64(s, 2, first) }
            if code == SQLITE_OK { code = sqlite3_bind_int64(s, 3, last) }
            if code == SQLITE_OK {
                code = sqlite3_step(s)
                if code == SQLITE_DONE { code = SQLITE_OK }
            }
            let message = code == SQLITE_OK ? nil : db.lastErrorMessage
            sqlite3_reset(s)
            if code != SQLITE_OK { throw DatabaseError(resultCode: ResultCode(rawValue: code), message: message) }
        }
    }

    /// `SQLITE_STATIC`: SQLite reads the bound bytes in place during the step; they outlive it.
    private static let staticBytes: sqlite3_destructor_type? = nil

    /// Binds one push and steps. The text columns are copied into one scratch buffer (reused
    /// across rows) and bound in place with `SQLITE_STATIC`, the payload likewise from its
    /// array: SQLite's `SQLITE_TRANSIENT` copy meant a `malloc`, a copy and a `free` per column
    /// per row. The bindings are cleared before the buffers go away.
    private static func bindAndStep(_ s: SQLiteStatement, db: Database, sequence: Int64, push p: NewPush, numbers n: Numbers,
                                    storedAt: EpochMilliseconds, scratch: inout [UInt8]) throws {
        scratch.removeAll(keepingCapacity: true)
        func append(_ text: String) -> Range<Int> {
            let start = scratch.count
            scratch.append(contentsOf: text.utf8)
            return start..<scratch.count
        }
        let apnsID = append(p.apnsID), pushType = append(p.pushType.rawValue)
        let collapseID = p.collapseID.map { append($0.rawValue) }
        let (code, message): (CInt, String?) = scratch.withUnsafeBytes { text in
            p.payload.withUnsafeBytes { payload in
                func bindText(_ index: CInt, _ range: Range<Int>?) -> CInt {
                    guard let range else { return sqlite3_bind_null(s, index) }
                    // A zero-length text still needs a non-null pointer (NULL would bind NULL).
                    let start = (text.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!) + range.lowerBound
                    return sqlite3_bind_text(s, index, start.assumingMemoryBound(to: CChar.self), CInt(range.count), staticBytes)
                }
                var code = sqlite3_bind_int64(s, 1, sequence)
                if code == SQLITE_OK { code = sqlite3_bind_int64(s, 2, n.device) }
                if code == SQLITE_OK { code = sqlite3_bind_int64(s, 3, n.target) }
                if code == SQLITE_OK { code = bindText(4, apnsID) }
                if code == SQLITE_OK { code = bindText(5, pushType) }
                if code == SQLITE_OK { code = sqlite3_bind_int64(s, 6, Int64(p.priority.rawValue)) }
                if code == SQLITE_OK { code = bindText(7, collapseID) }
                if code == SQLITE_OK { code = sqlite3_bind_int64(s, 8, Int64(p.expiresAt)) }
                if code == SQLITE_OK { code = sqlite3_bind_int64(s, 9, Int64(p.acceptedAt)) }
                if code == SQLITE_OK { code = sqlite3_bind_int64(s, 10, Int64(storedAt)) }
                if code == SQLITE_OK {
                    // An empty payload is still a blob, never NULL (the column is NOT NULL).
                    code = sqlite3_bind_blob(s, 11, payload.baseAddress ?? UnsafeRawPointer(bitPattern: 1), CInt(payload.count), staticBytes)
                }
                return stepAndResetStatement(s, db: db, afterBinding: code)
            }
        }
        if code != SQLITE_OK { throw DatabaseError(resultCode: ResultCode(rawValue: code), message: message) }
    }

    /// A device's number and where its open pushes start: the watermark moved past the
    /// pushes finished since it was last moved. Read-only (off the writer): the walk covers
    /// each finished push about once, and a stale answer is still true, because a finished
    /// push stays finished and pushes committed later get larger sequences.
    static func openStart(deviceNo: Int64, from watermark: Int64, db: Database) throws -> Int64 {
        if let first = try Int64.fetchOne(db.cachedStatement(sql: """
            SELECT seq FROM gw_pushes INDEXED BY gw_pushes_device
            WHERE device_no = ? AND seq >= ? AND delivered_at IS NULL AND discarded_at IS NULL ORDER BY seq LIMIT 1
            """), arguments: [deviceNo, watermark]) {
            return first
        }
        let last = try Int64.fetchOne(db.cachedStatement(sql: "SELECT MAX(seq) FROM gw_pushes WHERE device_no = ?"),
                                      arguments: [deviceNo])
        return max(watermark, (last ?? watermark - 1) + 1)
    }

    static func moveWatermark(deviceNo: Int64, to start: Int64, db: Database) throws {
        try db.cachedStatement(sql: "UPDATE gw_devices SET open_from = ? WHERE device_no = ? AND open_from < ?")
            .execute(arguments: [start, deviceNo, start])
    }

    /// The device's number and where its open pushes start (nil: the device never had a push).
    private func openRange(deviceID: String) throws(GatewayStoreError) -> (device: Int64, start: Int64)? {
        try read { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT device_no, open_from FROM gw_devices WHERE device_id = ?",
                                             arguments: [deviceID]) else { return nil }
            let device: Int64 = row[0]
            return (device, try Self.openStart(deviceNo: device, from: row[1], db: db))
        }
    }

    public func prepareBacklog(deviceID: String, now: EpochMilliseconds) throws(GatewayStoreError) -> Int {
        guard let (device, start) = try openRange(deviceID: deviceID) else { return 0 }
        return try write { db in
            try Self.moveWatermark(deviceNo: device, to: start, db: db)
            try db.execute(sql: """
                UPDATE gw_pushes INDEXED BY gw_pushes_device SET discarded_at = ?, discard_reason = 'expired'
                WHERE device_no = ? AND seq >= ? AND delivered_at IS NULL AND discarded_at IS NULL AND expires_at <= ?
                """, arguments: [now, device, start, now])
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
                               ROW_NUMBER() OVER (PARTITION BY t.token, CASE WHEN a.storage_policy = 'all' THEN p.collapse_id END
                                                  ORDER BY p.seq DESC) AS newest
                        FROM gw_pushes p INDEXED BY gw_pushes_device CROSS JOIN gw_targets t ON t.target_no = p.target_no
                        LEFT JOIN gw_apps a ON a.bundle_id = t.bundle_id
                        WHERE p.device_no = ? AND p.seq >= ? AND p.delivered_at IS NULL AND p.discarded_at IS NULL
                          AND (a.storage_policy IS NOT 'all' OR p.collapse_id IS NOT NULL))
                    WHERE newest > 1)
                """, arguments: [now, device, start])
            return expired + db.changesCount
        }
    }

    /// Columns by index, in this order (`storedPush(from:)`): no by-name lookup per row. From
    /// the device's watermark through `(device_no, seq)`: the delivered history is not walked.
    private static let pageSQL = """
        SELECT p.seq, p.apns_id, t.token, t.bundle_id, t.topic, p.push_type, p.priority, p.collapse_id, p.expires_at, p.payload,
               p.accepted_at, p.stored_at
        FROM gw_pushes p INDEXED BY gw_pushes_device CROSS JOIN gw_targets t ON t.target_no = p.target_no
        WHERE p.device_no = ? AND p.seq > ? AND p.delivered_at IS NULL AND p.discarded_at IS NULL
        ORDER BY p.seq LIMIT ?
        """

    public func pendingPushes(deviceID: String, after: Int64, limit: Int) throws(GatewayStoreError) -> [StoredPush] {
        guard limit > 0 else { return [] }
        return try read { db in
            guard let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT device_no, open_from FROM gw_devices WHERE device_id = ?"),
                                             arguments: [deviceID]) else { return [] }
            let device: Int64 = row[0], openFrom: Int64 = row[1]
            let statement = try db.cachedStatement(sql: Self.pageSQL)
            let s = statement.sqliteStatement
            var page: [StoredPush] = []
            page.reserveCapacity(min(limit, 4_096))
            var code = sqlite3_bind_int64(s, 1, device)
            if code == SQLITE_OK { code = sqlite3_bind_int64(s, 2, max(after, openFrom - 1)) }
            if code == SQLITE_OK { code = sqlite3_bind_int64(s, 3, Int64(limit)) }
            while code == SQLITE_OK {
                let step = sqlite3_step(s)
                if step == SQLITE_ROW {
                    page.append(try Self.storedPush(from: s, deviceID: deviceID))
                } else {
                    code = step == SQLITE_DONE ? SQLITE_OK : step
                    break
                }
            }
            let message = code == SQLITE_OK ? nil : db.lastErrorMessage
            sqlite3_reset(s)
            if code != SQLITE_OK { throw DatabaseError(resultCode: ResultCode(rawValue: code), message: message) }
            return page
        }
    }

    /// The current row of `pageSQL`, typed as it was when accepted; a row whose values no
    /// longer type (never written so) is an error, not a push sent with a guessed type.
    private static func storedPush(from s: SQLiteStatement, deviceID: String) throws -> StoredPush {
        func text(_ i: CInt) -> String {
            guard let bytes = sqlite3_column_text(s, i) else { return "" }
            return String(decoding: UnsafeBufferPointer(start: bytes, count: Int(sqlite3_column_bytes(s, i))), as: UTF8.self)
        }
        let payload: [UInt8]
        if let blob = sqlite3_column_blob(s, 9) {
            payload = Array(UnsafeRawBufferPointer(start: blob, count: Int(sqlite3_column_bytes(s, 9))))
        } else {
            payload = []
        }
        let collapse = sqlite3_column_type(s, 7) == SQLITE_NULL ? nil : text(7)
        guard let topic = Topic(rawValue: text(4)), let pushType = PushType(rawValue: text(5)),
              let priority = Priority(rawValue: Int(sqlite3_column_int64(s, 6))), collapse == nil || CollapseID(rawValue: collapse!) != nil else {
            throw DatabaseError(resultCode: .SQLITE_CORRUPT, message: "push \(sqlite3_column_int64(s, 0)) does not type: \(text(4)) \(text(5))")
        }
        let push = NewPush(apnsID: text(1), token: text(2), deviceID: deviceID, bundleID: text(3), topic: topic, pushType: pushType,
                           priority: priority, collapseID: collapse.flatMap(CollapseID.init(rawValue:)),
                           expiresAt: EpochMilliseconds(sqlite3_column_int64(s, 8)), payload: payload,
                           acceptedAt: EpochMilliseconds(sqlite3_column_int64(s, 10)))
        return StoredPush(sequence: sqlite3_column_int64(s, 0), push: push, storedAt: EpochMilliseconds(sqlite3_column_int64(s, 11)))
    }

    public func status(apnsID: String) throws(GatewayStoreError) -> [PushStatus] {
        try read { db in
            // The log is the outer loop (CROSS JOIN fixes the order): a scan, no apns_id index.
            try Row.fetchAll(db, sql: """
                SELECT p.seq, p.apns_id, t.bundle_id, t.topic, p.push_type, t.token, p.accepted_at, p.stored_at, p.expires_at,
                       p.delivered_at, p.presented_at, p.answered_at, p.discarded_at, p.discard_reason
                FROM gw_pushes p CROSS JOIN gw_targets t ON t.target_no = p.target_no
                WHERE p.apns_id = ? ORDER BY p.seq
                """, arguments: [apnsID]).map { row in
                let token: String = row[5]
                return PushStatus(sequence: row[0], apnsID: row[1], bundleID: row[2], topic: row[3],
                                  pushType: row[4], tokenPrefix: String(token.prefix(8)), acceptedAt: row[6],
                                  storedAt: row[7], expiresAt: row[8], deliveredAt: row[9],
                                  presentedAt: row[10], answeredAt: row[11], discardedAt: row[12],
                                  discardReason: (row[13] as String?).map(DiscardReason.init(rawValue:)))
            }
        }
    }

    public func recordEvent(_ event: DeliveryEvent, apnsID: String, deviceID: String, at: EpochMilliseconds) throws(GatewayStoreError) -> Bool {
        guard Self.eventUpdate(event) != nil else { return false }
        return try write { db in
            guard let device = try Self.deviceNo(deviceID, db) else { return false }
            return try Self.record(event, apnsID: apnsID, deviceNo: device, at: at, db)
        }
    }

    /// Every event in one transaction (one commit, one sync): what a device reported in a
    /// burst. The device's row is looked up once per batch.
    public func recordEvents(_ events: [DeviceEventReport], deviceID: String, at: EpochMilliseconds) throws(GatewayStoreError) {
        guard !events.isEmpty else { return }
        try write { db in try Self.record(events, deviceID: deviceID, at: at, db) }
    }

    /// One device's events, in `db`'s transaction.
    private static func record(_ events: [DeviceEventReport], deviceID: String, at: EpochMilliseconds, _ db: Database) throws {
        guard !events.isEmpty, let device = try deviceNo(deviceID, db) else { return }
        for e in events {
            if let sequence = e.sequence {
                _ = try record(e.event, apnsID: e.apnsID, sequence: sequence, deviceNo: device, at: at, occurredAt: e.occurredAt, db)
            } else {
                _ = try record(e.event, apnsID: e.apnsID, deviceNo: device, at: at, occurredAt: e.occurredAt, db)
            }
        }
    }

    private static func deviceNo(_ deviceID: String, _ db: Database) throws -> Int64? {
        try Int64.fetchOne(db.cachedStatement(sql: "SELECT device_no FROM gw_devices WHERE device_id = ?"), arguments: [deviceID])
    }

    /// The statement that records `event` on one push (nil for a stage not kept), its SQL
    /// fixed per stage so that the statement cache finds it without building the text.
    private static func eventUpdate(_ event: DeliveryEvent) -> String? {
        switch event {
        case .presented: presentedUpdate
        case .answered: answeredUpdate
        default: nil
        }
    }

    private static let presentedUpdate = eventUpdate(column: "presented_at")
    private static let answeredUpdate = eventUpdate(column: "answered_at")
    /// ?1 the gateway's time, ?5 the device's `occurredAt` (or NULL): the time recorded is
    /// `DeviceEventReport.recordedTime` (the device's, within accepted_at...?1).
    private static func eventUpdate(column: String) -> String {
        """
        UPDATE gw_pushes SET \(column) = COALESCE(\(column), MIN(MAX(COALESCE(?5, ?1), accepted_at), ?1)),
                             delivered_at = COALESCE(delivered_at, ?1)
        WHERE seq = ?2 AND device_no = ?3 AND apns_id = ?4
        """
    }

    /// The first time of a stage is kept (`COALESCE`): recording an event again changes nothing.
    /// Without the push's sequence (devices before it sent one): the device's pushes are walked
    /// from the newest back to the apns-id — the push log has no apns-id index (it is append-only:
    /// docs/benchmarks.md, Gateway step 1), so an event for an old push of a device with many
    /// newer ones walks all of those.
    private static func record(_ event: DeliveryEvent, apnsID: String, deviceNo device: Int64, at: EpochMilliseconds,
                               occurredAt: EpochMilliseconds? = nil, _ db: Database) throws -> Bool {
        guard eventUpdate(event) != nil,
              let seq = try Int64.fetchOne(db.cachedStatement(sql: """
                SELECT seq FROM gw_pushes INDEXED BY gw_pushes_device WHERE device_no = ? AND apns_id = ? ORDER BY seq DESC LIMIT 1
                """), arguments: [device, apnsID]) else { return false }
        return try record(event, apnsID: apnsID, sequence: seq, deviceNo: device, at: at, occurredAt: occurredAt, db)
    }

    /// The push with this sequence, if it is the device's and has this apns-id: one lookup by
    /// the primary key. A sequence that names another push (or none) records nothing.
    /// Bound by hand: a device reports every push it shows, so this runs once per push.
    private static func record(_ event: DeliveryEvent, apnsID: String, sequence: Int64, deviceNo device: Int64, at: EpochMilliseconds,
                               occurredAt: EpochMilliseconds?, _ db: Database) throws -> Bool {
        guard let sql = eventUpdate(event) else { return false }
        let s = try db.cachedStatement(sql: sql).sqliteStatement
        var texts = BoundTexts()
        let id = texts.append(apnsID)
        try texts.withBytes { text in
            var code = sqlite3_bind_int64(s, 1, at)
            if code == SQLITE_OK { code = sqlite3_bind_int64(s, 2, sequence) }
            if code == SQLITE_OK { code = sqlite3_bind_int64(s, 3, device) }
            if code == SQLITE_OK { code = text.bind(s, 4, id) }
            if code == SQLITE_OK { code = occurredAt.map { sqlite3_bind_int64(s, 5, $0) } ?? sqlite3_bind_null(s, 5) }
            try BoundTexts.stepAndReset(s, db: db, code)
        }
        return db.changesCount > 0
    }
}
