import Foundation
import GRDB
import GRDBSQLite
import TidingsCore
import TidingsStorage

/// The embedded default `DeviceStore`: one SQLite file in WAL mode, written with group
/// commit (`BatchWriter`). A ticket completes after its transaction committed with
/// `synchronous = FULL`, so what was acknowledged survives `kill -9` and power loss.
/// WAL checkpoints run on their own connection and thread (`WALCheckpointer`), not inside a
/// commit: a fire queued behind a commit no longer waits for the database file's copy and fsync.
public final class SQLiteDeviceStore: DeviceStore {
    public let writer: BatchWriter
    private let checkpointer: WALCheckpointer

    public init(path: String, checkpointPages: Int = 1_000, walPageLimit: Int = 10_000) throws {
        // Through the WAL write buffer's VFS where this SQLite can (URI file names), as the gateway's store.
        let database = try BatchWriter.open(path: WALWriteBuffer.uri(for: path) ?? path)
        try Self.migrator.migrate(database)
        // The writer commits all the time under a burst of pushes: it copies the last few
        // frames after a background checkpoint itself, so the WAL starts over (`WALCheckpointer`).
        let checkpointer = try WALCheckpointer(path: path, checkpointPages: max(1, checkpointPages), walPageLimit: max(checkpointPages, walPageLimit),
                                               catchUpPages: max(1, checkpointPages / 10))
        self.checkpointer = checkpointer
        try database.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA wal_autocheckpoint = 0")
            checkpointer.install(on: db)
        }
        // After synchronous=FULL (`BatchWriter.open`): every commit syncs, which writes out the buffer first.
        walWritesBuffered = try database.writeWithoutTransaction { db in try WALWriteBuffer.enable(on: db) }
        self.writer = BatchWriter(database: database)
    }

    /// Whether the writer's WAL writes go through `WALWriteBuffer`: a group commit's frames
    /// (a delivered list keyed by random identifiers dirties about one index page per new
    /// notification) in few `pwrite`s instead of two per page.
    public let walWritesBuffered: Bool

    deinit {
        try? writer.database.writeWithoutTransaction { db in checkpointer.uninstall(from: db) }
        checkpointer.stop()
    }

    /// How many WAL checkpoints ran on the background connection, and on the writer at the limit.
    public var checkpointCounts: (background: Int, writer: Int) { checkpointer.counts }

    /// How many times the writer copied the last few WAL frames after a background checkpoint.
    public var checkpointCatchUps: Int { checkpointer.catchUpCount }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("device-v1") { db in
            try db.execute(sql: """
                CREATE TABLE app (bundle_id TEXT PRIMARY KEY NOT NULL, record BLOB NOT NULL);
                CREATE TABLE settings (bundle_id TEXT PRIMARY KEY NOT NULL, value BLOB NOT NULL);
                CREATE TABLE categories (bundle_id TEXT PRIMARY KEY NOT NULL, value BLOB NOT NULL);
                CREATE TABLE pending (
                    key INTEGER PRIMARY KEY AUTOINCREMENT,
                    bundle_id TEXT NOT NULL,
                    identifier TEXT NOT NULL,
                    next_fire REAL,
                    location INTEGER NOT NULL DEFAULT 0,
                    request BLOB NOT NULL
                );
                CREATE UNIQUE INDEX pending_identity ON pending(bundle_id, identifier);
                CREATE INDEX pending_location ON pending(location) WHERE location = 1;
                CREATE TABLE delivered (
                    bundle_id TEXT NOT NULL,
                    identifier TEXT NOT NULL,
                    seq INTEGER NOT NULL,
                    date REAL NOT NULL,
                    request BLOB NOT NULL,
                    PRIMARY KEY (bundle_id, identifier)
                );
                CREATE INDEX delivered_order ON delivered(bundle_id, seq);
                CREATE TABLE badge (bundle_id TEXT PRIMARY KEY NOT NULL, count INTEGER NOT NULL);
                CREATE TABLE held_response (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    bundle_id TEXT NOT NULL,
                    response BLOB NOT NULL
                );
                CREATE INDEX held_response_app ON held_response(bundle_id, id);
                """)
        }
        // The push a delivered notification came from (apns-id and sequence), so that after a
        // crash the daemon knows it was shown even if a service extension changed it.
        migrator.registerMigration("device-v2-delivered-push") { db in
            try db.execute(sql: "ALTER TABLE delivered ADD COLUMN push TEXT")
        }
        // Fires record what the presenters are to show; the entry goes once they showed it,
        // and the engine presents what is left when it starts (docs/architecture.md, "Firing").
        migrator.registerMigration("device-v3-presenting") { db in
            try db.execute(sql: """
                CREATE TABLE presenting (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    bundle_id TEXT NOT NULL,
                    identifier TEXT NOT NULL,
                    date REAL NOT NULL,
                    present INTEGER NOT NULL,
                    request BLOB NOT NULL
                );
                CREATE INDEX presenting_identity ON presenting(bundle_id, identifier);
                """)
        }
        // The delivered list in two b-trees instead of three, its order the rowid: `seq` is one
        // sequence for every app (each app's list is in `seq` order, as its own sequence was),
        // so an insert appends to the table, finds a replaced identifier through the unique
        // index itself (`ON CONFLICT`), and needs neither `MAX(seq)` nor the `(bundle_id, seq)`
        // index (docs/benchmarks.md, "Delivered list"). Existing rows keep each app's order.
        migrator.registerMigration("device-v4-delivered-by-seq") { db in
            try db.execute(sql: """
                CREATE TABLE delivered_by_seq (
                    seq INTEGER PRIMARY KEY,
                    bundle_id TEXT NOT NULL,
                    identifier TEXT NOT NULL,
                    date REAL NOT NULL,
                    request BLOB NOT NULL,
                    push TEXT
                );
                INSERT INTO delivered_by_seq (seq, bundle_id, identifier, date, request, push)
                    SELECT ROW_NUMBER() OVER (ORDER BY bundle_id, seq), bundle_id, identifier, date, request, push FROM delivered;
                DROP TABLE delivered;
                ALTER TABLE delivered_by_seq RENAME TO delivered;
                CREATE UNIQUE INDEX delivered_identity ON delivered(bundle_id, identifier);
                """)
        }
        return migrator
    }

    // MARK: Coding

    private static func encode<T: Encodable>(_ value: T) throws -> Data {
        try JSONEncoder().encode(value)
    }

    private static func decode<T: Decodable>(_ type: T.Type, _ data: Data) throws -> T {
        try JSONDecoder().decode(type, from: data)
    }

    /// Requests are stored in `BinaryRequestCodec`'s form; rows written before it hold JSON.
    static func encodeRequest(_ request: NotificationRequestValue) throws -> Data {
        Data(try BinaryRequestCodec.encode(request))
    }

    static func decodeRequest(_ data: Data) throws -> NotificationRequestValue {
        BinaryRequestCodec.isBinary(data) ? try BinaryRequestCodec.decode(data) : try decode(NotificationRequestValue.self, data)
    }

    // MARK: Apps

    public func upsertApp(_ app: AppRecord) -> StoreTicket<Void> {
        writer.submit { db in
            try db.cachedStatement(sql: "INSERT OR REPLACE INTO app (bundle_id, record) VALUES (?, ?)").execute(
                           arguments: [app.bundleIdentifier, try Self.encode(app)])
        }
    }

    public func app(_ bundleIdentifier: String) -> StoreTicket<AppRecord?> {
        writer.submit { db in
            try Data.fetchOne(db.cachedStatement(sql: "SELECT record FROM app WHERE bundle_id = ?"), arguments: [bundleIdentifier])
                .map { try Self.decode(AppRecord.self, $0) }
        }
    }

    public func apps() -> StoreTicket<[AppRecord]> {
        writer.submit { db in
            try Data.fetchAll(db.cachedStatement(sql: "SELECT record FROM app ORDER BY bundle_id")).map { try Self.decode(AppRecord.self, $0) }
        }
    }

    public func removeApp(_ bundleIdentifier: String) -> StoreTicket<[AttachmentValue]> {
        writer.submit { db in
            var attachments: [AttachmentValue] = []
            for data in try Data.fetchAll(db.cachedStatement(sql: "SELECT request FROM pending WHERE bundle_id = ?"), arguments: [bundleIdentifier]) {
                attachments += try Self.decodeRequest(data).content.attachments
            }
            for data in try Data.fetchAll(db.cachedStatement(sql: "SELECT request FROM delivered WHERE bundle_id = ?"), arguments: [bundleIdentifier]) {
                attachments += try Self.decodeRequest(data).content.attachments
            }
            for table in ["app", "settings", "categories", "pending", "delivered", "badge", "held_response", "presenting"] {
                try db.cachedStatement(sql: "DELETE FROM \(table) WHERE bundle_id = ?").execute(arguments: [bundleIdentifier])
            }
            return attachments
        }
    }

    // MARK: Settings and categories

    public func settings(_ bundleIdentifier: String) -> StoreTicket<NotificationSettingsValue?> {
        writer.submit { db in
            try Data.fetchOne(db.cachedStatement(sql: "SELECT value FROM settings WHERE bundle_id = ?"), arguments: [bundleIdentifier])
                .map { try Self.decode(NotificationSettingsValue.self, $0) }
        }
    }

    public func setSettings(_ settings: NotificationSettingsValue, for bundleIdentifier: String) -> StoreTicket<Void> {
        writer.submit { db in
            try db.cachedStatement(sql: "INSERT OR REPLACE INTO settings (bundle_id, value) VALUES (?, ?)").execute(
                           arguments: [bundleIdentifier, try Self.encode(settings)])
        }
    }

    public func categories(_ bundleIdentifier: String) -> StoreTicket<[CategoryValue]> {
        writer.submit { db in
            try Data.fetchOne(db.cachedStatement(sql: "SELECT value FROM categories WHERE bundle_id = ?"), arguments: [bundleIdentifier])
                .map { try Self.decode([CategoryValue].self, $0) } ?? []
        }
    }

    public func setCategories(_ categories: [CategoryValue], for bundleIdentifier: String) -> StoreTicket<Void> {
        writer.submit { db in
            try db.cachedStatement(sql: "INSERT OR REPLACE INTO categories (bundle_id, value) VALUES (?, ?)").execute(
                           arguments: [bundleIdentifier, try Self.encode(categories)])
        }
    }

    // MARK: Pending

    public func addPending(_ request: NotificationRequestValue, encoded: Data?, for bundleIdentifier: String, nextFire: Date?, limit: Int?) -> StoreTicket<PendingReplacement> {
        // Encoded by the caller, not on the single writer thread; bytes an app sent are kept as they are.
        let body: Data
        do {
            body = try encoded ?? Self.encodeRequest(request)
        } catch {
            return .completed(.failure(error))
        }
        return writer.submit { db in
            let replaced = try Data.fetchOne(db.cachedStatement(sql: "SELECT request FROM pending WHERE bundle_id = ? AND identifier = ?"),
                                             arguments: [bundleIdentifier, request.identifier])
                .map { try Self.decodeRequest($0) }
            if replaced != nil {
                try db.cachedStatement(sql: "DELETE FROM pending WHERE bundle_id = ? AND identifier = ?").execute(arguments: [bundleIdentifier, request.identifier])
            }
            var isLocation = false
            if case .location? = request.trigger { isLocation = true }
            try db.cachedStatement(sql: "INSERT INTO pending (bundle_id, identifier, next_fire, location, request) VALUES (?, ?, ?, ?, ?)").execute(
                           arguments: [bundleIdentifier, request.identifier, nextFire?.timeIntervalSinceReferenceDate, isLocation ? 1 : 0, body])
            let key = db.lastInsertedRowID
            var evicted: [NotificationRequestValue] = []
            if let limit {
                let count = try Int.fetchOne(db.cachedStatement(sql: "SELECT COUNT(*) FROM pending WHERE bundle_id = ?"), arguments: [bundleIdentifier]) ?? 0
                if count > limit {
                    let rows = try Row.fetchAll(db.cachedStatement(sql: "SELECT key, request FROM pending WHERE bundle_id = ? ORDER BY key LIMIT ?"),
                                                arguments: [bundleIdentifier, count - limit])
                    for row in rows {
                        evicted.append(try Self.decodeRequest(row["request"]))
                        try db.cachedStatement(sql: "DELETE FROM pending WHERE key = ?").execute(arguments: [row["key"] as Int64])
                    }
                }
            }
            return PendingReplacement(key: key, replacedPending: replaced, evicted: evicted)
        }
    }

    public func pending(_ bundleIdentifier: String) -> StoreTicket<[NotificationRequestValue]> {
        writer.submit { db in
            try Data.fetchAll(db.cachedStatement(sql: "SELECT request FROM pending WHERE bundle_id = ? ORDER BY key"), arguments: [bundleIdentifier])
                .map { try Self.decodeRequest($0) }
        }
    }

    private static func record(_ row: Row) throws -> PendingRecord {
        let nextFire: Double? = row["next_fire"]
        return PendingRecord(key: row["key"], bundleIdentifier: row["bundle_id"],
                             request: try decodeRequest(row["request"]),
                             nextFire: nextFire.map { Date(timeIntervalSinceReferenceDate: $0) })
    }

    public func pendingRecords(_ bundleIdentifier: String) -> StoreTicket<[PendingRecord]> {
        writer.submit { db in
            try Row.fetchAll(db.cachedStatement(sql: "SELECT * FROM pending WHERE bundle_id = ? ORDER BY key"), arguments: [bundleIdentifier])
                .map(Self.record)
        }
    }

    /// Completes as soon as the read has run in its place in the order, without waiting for
    /// its batch's commit: the scheduler reads a record to fire it, and what it does next
    /// (`fireApplied`) is ordered after this read anyway.
    public func pendingRecord(key: Int64) -> StoreTicket<PendingRecord?> {
        writer.submitApplied { db in
            try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM pending WHERE key = ?"), arguments: [key]).map(Self.record)
        }.applied
    }

    public func pendingRequest(_ identifier: String, for bundleIdentifier: String) -> StoreTicket<NotificationRequestValue?> {
        writer.submit { db in
            try Data.fetchOne(db.cachedStatement(sql: "SELECT request FROM pending WHERE bundle_id = ? AND identifier = ?"),
                              arguments: [bundleIdentifier, identifier])
                .map { try Self.decodeRequest($0) }
        }
    }

    public func removePending(_ identifiers: [String], for bundleIdentifier: String) -> StoreTicket<[NotificationRequestValue]> {
        writer.submit { db in
            var removed: [NotificationRequestValue] = []
            for identifier in identifiers {
                if let data = try Data.fetchOne(db.cachedStatement(sql: "SELECT request FROM pending WHERE bundle_id = ? AND identifier = ?"), arguments: [bundleIdentifier, identifier]) {
                    removed.append(try Self.decodeRequest(data))
                    try db.cachedStatement(sql: "DELETE FROM pending WHERE bundle_id = ? AND identifier = ?").execute(arguments: [bundleIdentifier, identifier])
                }
            }
            return removed
        }
    }

    public func removeAllPending(_ bundleIdentifier: String) -> StoreTicket<[NotificationRequestValue]> {
        writer.submit { db in
            let removed = try Data.fetchAll(db.cachedStatement(sql: "SELECT request FROM pending WHERE bundle_id = ? ORDER BY key"), arguments: [bundleIdentifier])
                .map { try Self.decodeRequest($0) }
            try db.cachedStatement(sql: "DELETE FROM pending WHERE bundle_id = ?").execute(arguments: [bundleIdentifier])
            return removed
        }
    }

    public func schedule() -> StoreTicket<[ScheduleEntry]> {
        writer.submit { db in
            var entries: [ScheduleEntry] = []
            let cursor = try Row.fetchCursor(db.cachedStatement(sql: "SELECT key, next_fire FROM pending WHERE next_fire IS NOT NULL"))
            while let row = try cursor.next() {
                entries.append(ScheduleEntry(key: row[0], nextFire: Date(timeIntervalSinceReferenceDate: row[1])))
            }
            return entries
        }
    }

    public func locationPending() -> StoreTicket<[PendingRecord]> {
        writer.submit { db in
            try Row.fetchAll(db.cachedStatement(sql: "SELECT * FROM pending WHERE location = 1 ORDER BY key")).map(Self.record)
        }
    }

    public func fireApplied(key: Int64, at date: Date, nextFire: Date?, keepPending: Bool, deliver: Bool, present: UInt8) -> (applied: StoreTicket<FireOutcome?>, durable: StoreTicket<FireOutcome?>) {
        writer.submitApplied { db in
            guard let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM pending WHERE key = ?"), arguments: [key]) else { return nil }
            return try Self.fire(db, row: row, record: try Self.record(row), at: date, write: FireWrite(nextFire: nextFire, keepPending: keepPending, deliver: deliver, present: present))
        }
    }

    public func presented(_ ids: [Int64]) -> StoreTicket<Void> {
        writer.submit { db in
            for id in ids {
                try db.cachedStatement(sql: "DELETE FROM presenting WHERE id = ?").execute(arguments: [id])
            }
        }
    }

    public func unpresented() -> StoreTicket<[UnpresentedNotification]> {
        writer.submit { db in
            try Row.fetchAll(db.cachedStatement(sql: "SELECT id, bundle_id, date, present, request FROM presenting ORDER BY id")).map { row in
                UnpresentedNotification(id: row["id"], bundleIdentifier: row["bundle_id"],
                                        notification: DeliveredNotificationValue(request: try Self.decodeRequest(row["request"]), date: Date(timeIntervalSinceReferenceDate: row["date"])),
                                        present: UInt8(truncatingIfNeeded: row["present"] as Int64))
            }
        }
    }

    public func fireDue(key: Int64, due: Date, at date: Date, decide: @escaping @Sendable (PendingRecord) -> FireWrite?) -> (applied: StoreTicket<DueFire?>, durable: StoreTicket<DueFire?>) {
        writer.submitApplied { db in
            guard let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM pending WHERE key = ?"), arguments: [key]) else { return nil }
            let record = try Self.record(row)
            guard record.nextFire == due else { return nil }
            guard let write = decide(record) else { return DueFire(record: record) }
            return DueFire(record: record, write: write, outcome: try Self.fire(db, row: row, record: record, at: date, write: write))
        }
    }

    /// Fires the pending request in `row`: it stays with its next date or goes, and becomes
    /// delivered if `write` says so.
    private static func fire(_ db: Database, row: Row, record: PendingRecord, at date: Date, write: FireWrite) throws -> FireOutcome {
        if write.keepPending {
            try db.cachedStatement(sql: "UPDATE pending SET next_fire = ? WHERE key = ?").execute(arguments: [write.nextFire?.timeIntervalSinceReferenceDate, record.key])
        } else {
            try db.cachedStatement(sql: "DELETE FROM pending WHERE key = ?").execute(arguments: [record.key])
        }
        let notification = DeliveredNotificationValue(request: record.request, date: date)
        // The pending row's bytes are the request: copied, not encoded again.
        let replaced = write.deliver ? try insertDelivered(db, notification, encodedBody: row["request"], bundleIdentifier: record.bundleIdentifier) : nil
        var presentation: Int64?
        if write.present != 0 {
            try db.cachedStatement(sql: "INSERT INTO presenting (bundle_id, identifier, date, present, request) VALUES (?, ?, ?, ?, ?)").execute(
                           arguments: [record.bundleIdentifier, record.request.identifier, date.timeIntervalSinceReferenceDate, Int64(write.present), row["request"] as Data])
            presentation = db.lastInsertedRowID
        }
        return FireOutcome(notification: notification, replacedDelivered: replaced, presentation: presentation)
    }

    // MARK: Delivered

    /// Inserts a delivered notification; one with the same identifier is replaced in place
    /// (it keeps its position in the list). A new identifier — every remote push's — is one
    /// statement, bound by hand (GRDB's `StatementArguments` boxes every value): the unique
    /// index finds a replaced one, and only then is the old row read and updated.
    private static func insertDelivered(_ db: Database, _ notification: DeliveredNotificationValue, encodedBody: Data? = nil, bundleIdentifier: String, push: String? = nil) throws -> DeliveredNotificationValue? {
        let identifier = notification.request.identifier
        let body = try encodedBody ?? encodeRequest(notification.request)
        let date = notification.date.timeIntervalSinceReferenceDate
        let insert = try db.cachedStatement(sql: """
            INSERT INTO delivered (bundle_id, identifier, date, request, push) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT (bundle_id, identifier) DO NOTHING
            """)
        try bindAndStep(insert.sqliteStatement, db: db, bundleIdentifier: bundleIdentifier, identifier: identifier, date: date, body: body, push: push)
        if db.changesCount == 1 { return nil }
        guard let existing = try Row.fetchOne(db.cachedStatement(sql: "SELECT date, request FROM delivered WHERE bundle_id = ? AND identifier = ?"),
                                              arguments: [bundleIdentifier, identifier]) else {
            throw DatabaseError(message: "delivered row for \(identifier) neither inserted nor found")
        }
        try db.cachedStatement(sql: "UPDATE delivered SET date = ?, request = ?, push = ? WHERE bundle_id = ? AND identifier = ?").execute(
                       arguments: [date, body, push, bundleIdentifier, identifier])
        return DeliveredNotificationValue(request: try decodeRequest(existing["request"]),
                                          date: Date(timeIntervalSinceReferenceDate: existing["date"]))
    }

    /// Binds the insert's five values in place (`BoundTexts`: the texts copied once into one
    /// buffer, the body where it lies) and steps; the bindings are cleared before they go away.
    private static func bindAndStep(_ s: SQLiteStatement, db: Database, bundleIdentifier: String, identifier: String, date: Double, body: Data, push: String?) throws {
        var texts = BoundTexts()
        let bundle = texts.append(bundleIdentifier), id = texts.append(identifier), key = push.map { texts.append($0) }
        try texts.withBytes { text in
            try body.withUnsafeBytes { body in
                var code = text.bind(s, 1, bundle)
                if code == SQLITE_OK { code = text.bind(s, 2, id) }
                if code == SQLITE_OK { code = sqlite3_bind_double(s, 3, date) }
                if code == SQLITE_OK {
                    // An empty body is still a blob, never NULL (the column is NOT NULL).
                    code = sqlite3_bind_blob(s, 4, body.baseAddress ?? UnsafeRawPointer(bitPattern: 1), CInt(body.count), BoundTexts.staticBytes)
                }
                if code == SQLITE_OK { code = text.bind(s, 5, key) }  // nil: NULL
                try BoundTexts.stepAndReset(s, db: db, code)
            }
        }
    }

    private static func delivered(_ row: Row) throws -> DeliveredNotificationValue {
        DeliveredNotificationValue(request: try decodeRequest(row["request"]), date: Date(timeIntervalSinceReferenceDate: row["date"]))
    }

    public func deliver(_ notification: DeliveredNotificationValue, for bundleIdentifier: String, push: String?) -> StoreTicket<DeliveredNotificationValue?> {
        // Encoded by the caller, not on the single writer thread.
        let body: Data
        do {
            body = try Self.encodeRequest(notification.request)
        } catch {
            return .completed(.failure(error))
        }
        return writer.submit { db in try Self.insertDelivered(db, notification, encodedBody: body, bundleIdentifier: bundleIdentifier, push: push) }
    }

    public func deliveredPush(_ identifier: String, for bundleIdentifier: String) -> StoreTicket<String?> {
        writer.submit { db in
            try String.fetchOne(db.cachedStatement(sql: "SELECT push FROM delivered WHERE bundle_id = ? AND identifier = ?"), arguments: [bundleIdentifier, identifier])
        }
    }

    public func delivered(_ bundleIdentifier: String) -> StoreTicket<[DeliveredNotificationValue]> {
        writer.submit { db in
            try Row.fetchAll(db.cachedStatement(sql: "SELECT date, request FROM delivered WHERE bundle_id = ? ORDER BY seq"), arguments: [bundleIdentifier])
                .map(Self.delivered)
        }
    }

    public func deliveredNotification(_ identifier: String, for bundleIdentifier: String) -> StoreTicket<DeliveredNotificationValue?> {
        writer.submit { db in
            try Row.fetchOne(db.cachedStatement(sql: "SELECT date, request FROM delivered WHERE bundle_id = ? AND identifier = ?"), arguments: [bundleIdentifier, identifier])
                .map(Self.delivered)
        }
    }

    public func removeDelivered(_ identifiers: [String], for bundleIdentifier: String) -> StoreTicket<[DeliveredNotificationValue]> {
        writer.submit { db in
            var removed: [DeliveredNotificationValue] = []
            for identifier in identifiers {
                // Not shown yet (a crash came before the mark): not shown at the next start either.
                try db.cachedStatement(sql: "DELETE FROM presenting WHERE bundle_id = ? AND identifier = ?").execute(arguments: [bundleIdentifier, identifier])
                if let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT date, request FROM delivered WHERE bundle_id = ? AND identifier = ?"), arguments: [bundleIdentifier, identifier]) {
                    removed.append(try Self.delivered(row))
                    try db.cachedStatement(sql: "DELETE FROM delivered WHERE bundle_id = ? AND identifier = ?").execute(arguments: [bundleIdentifier, identifier])
                }
            }
            return removed
        }
    }

    public func removeAllDelivered(_ bundleIdentifier: String) -> StoreTicket<[DeliveredNotificationValue]> {
        writer.submit { db in
            let removed = try Row.fetchAll(db.cachedStatement(sql: "SELECT date, request FROM delivered WHERE bundle_id = ? ORDER BY seq"), arguments: [bundleIdentifier])
                .map(Self.delivered)
            try db.cachedStatement(sql: "DELETE FROM delivered WHERE bundle_id = ?").execute(arguments: [bundleIdentifier])
            try db.cachedStatement(sql: "DELETE FROM presenting WHERE bundle_id = ?").execute(arguments: [bundleIdentifier])
            return removed
        }
    }

    /// The app's oldest rows past `keeping`, read in one pass over the table in its own (seq)
    /// order — no sort of the app's list, whose identity index is not in seq order — then
    /// deleted by `seq`; a request is decoded only when it may name attachment files. Bound
    /// and read through SQLite's own calls: GRDB's rows and arguments cost more than the
    /// deletes (docs/benchmarks.md, "Remote, in processes (session 11)").
    public func trimDelivered(_ bundleIdentifier: String, keeping: Int) -> StoreTicket<DeliveredTrim> {
        writer.submit { db in
            // How many the app has: its range of the identity index, counted without reading the table.
            let count = try Int.fetchOne(db.cachedStatement(sql: "SELECT COUNT(*) FROM delivered WHERE bundle_id = ?"), arguments: [bundleIdentifier]) ?? 0
            let excess = count - max(0, keeping)
            guard excess > 0 else { return DeliveredTrim() }
            var trim = DeliveredTrim()
            var seqs: [Int64] = []
            seqs.reserveCapacity(excess)
            trim.identifiers.reserveCapacity(excess)
            var withFiles: [Data] = []
            var texts = BoundTexts()
            let bundle = texts.append(bundleIdentifier)
            let select = try db.cachedStatement(sql: "SELECT seq, identifier, request FROM delivered NOT INDEXED WHERE bundle_id = ? ORDER BY seq LIMIT ?").sqliteStatement
            try texts.withBytes { text in
                var code = text.bind(select, 1, bundle)
                if code == SQLITE_OK { code = sqlite3_bind_int64(select, 2, Int64(excess)) }
                while code == SQLITE_OK {
                    code = sqlite3_step(select)
                    guard code == SQLITE_ROW else { break }
                    seqs.append(sqlite3_column_int64(select, 0))
                    let identifier = UnsafeRawBufferPointer(start: sqlite3_column_text(select, 1), count: Int(sqlite3_column_bytes(select, 1)))
                    trim.identifiers.append(String(decoding: identifier, as: UTF8.self))
                    // The request's bytes where SQLite holds them; copied only when they name files.
                    let request = UnsafeRawBufferPointer(start: sqlite3_column_blob(select, 2), count: Int(sqlite3_column_bytes(select, 2)))
                    if BinaryRequestCodec.mayHaveAttachments(request) { withFiles.append(Data(request)) }
                    code = SQLITE_OK
                }
                let message = code == SQLITE_DONE ? nil : db.lastErrorMessage
                sqlite3_reset(select)
                sqlite3_clear_bindings(select)
                guard code == SQLITE_DONE else { throw DatabaseError(resultCode: ResultCode(rawValue: code), message: message) }
            }
            trim.withAttachments = try withFiles.map(Self.decodeRequest)
            let delete = try db.cachedStatement(sql: "DELETE FROM delivered WHERE seq = ?").sqliteStatement
            for seq in seqs { try BoundTexts.stepAndReset(delete, db: db, sqlite3_bind_int64(delete, 1, seq)) }
            // Not shown yet (a crash came before the mark): not shown at the next start either.
            if try Bool.fetchOne(db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM presenting WHERE bundle_id = ?)"), arguments: [bundleIdentifier]) == true {
                let gone = try db.cachedStatement(sql: "DELETE FROM presenting WHERE bundle_id = ? AND identifier = ?")
                for identifier in trim.identifiers { try gone.execute(arguments: [bundleIdentifier, identifier]) }
            }
            return trim
        }
    }

    // MARK: Badge

    public func badge(_ bundleIdentifier: String) -> StoreTicket<Int> {
        writer.submit { db in
            try Int.fetchOne(db.cachedStatement(sql: "SELECT count FROM badge WHERE bundle_id = ?"), arguments: [bundleIdentifier]) ?? 0
        }
    }

    public func setBadge(_ count: Int, for bundleIdentifier: String) -> StoreTicket<Void> {
        writer.submit { db in
            try db.cachedStatement(sql: "INSERT OR REPLACE INTO badge (bundle_id, count) VALUES (?, ?)").execute(arguments: [bundleIdentifier, count])
        }
    }

    // MARK: Held responses

    public func holdResponse(_ response: ResponseValue, for bundleIdentifier: String) -> StoreTicket<Int64> {
        writer.submit { db in
            try db.cachedStatement(sql: "INSERT INTO held_response (bundle_id, response) VALUES (?, ?)").execute(arguments: [bundleIdentifier, try Self.encode(response)])
            return db.lastInsertedRowID
        }
    }

    public func heldResponses(_ bundleIdentifier: String) -> StoreTicket<[HeldResponse]> {
        writer.submit { db in
            try Row.fetchAll(db.cachedStatement(sql: "SELECT id, response FROM held_response WHERE bundle_id = ? ORDER BY id"), arguments: [bundleIdentifier]).map { row in
                HeldResponse(id: row["id"], bundleIdentifier: bundleIdentifier, response: try Self.decode(ResponseValue.self, row["response"]))
            }
        }
    }

    public func releaseResponse(id: Int64) -> StoreTicket<Void> {
        writer.submit { db in
            try db.cachedStatement(sql: "DELETE FROM held_response WHERE id = ?").execute(arguments: [id])
        }
    }
}
