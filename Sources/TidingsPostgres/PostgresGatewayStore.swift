import Foundation
import Synchronization
import Logging
import NIOCore
import NIOPosix
import PostgresNIO
import TidingsCore
import TidingsStorage

/// The gateway store in PostgreSQL (`tidings gateway --database postgres://…`): every gateway
/// node of a deployment on one database (docs/scaling.md).
///
/// - A group commit is ONE statement, `SELECT gw_commit(…)`: the batch's columns travel as
///   arrays and go in with one `INSERT … SELECT FROM unnest(…)`, the acknowledgements with one
///   `UPDATE … WHERE seq = ANY(…)`, in one transaction that returns when PostgreSQL made it
///   durable (`synchronous_commit` as the server sets it; on by default). The gateway answers
///   200 only after it returned.
/// - Sequences come from `gw_push_seq`, taken under a transaction-scoped advisory lock, so
///   the commits of several nodes are serialized and a smaller sequence is never committed
///   after a larger one: a device reading its pushes after a cursor never skips one.
/// - The push log is partitioned by sequence range (`partitionSize` pushes per partition,
///   created by the commit that reaches a new range); pruning drops a partition once every push
///   in it finished before the cutoff, and deletes rows only in partitions that still hold
///   something younger.
/// - Migrations run once per database, under an advisory lock, each in one statement.
public final class PostgresGatewayStore: GatewayStore {
    let pool: PostgresConnectionPool
    let logger: Logger
    public let url: PostgresStoreURL
    /// This store's gateway node: its leases and its wake-up channel (`gw_wake_<node>`).
    public let nodeID: String = UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
    /// Pushes per partition of the push log (fixed when the schema is created; a database
    /// keeps its own).
    public let partitionSize: Int64

    /// The advisory lock keys (first half: "tidi").
    static let lockSpace: Int32 = 0x7469_6469
    static let migrationLock: Int32 = 1
    static let commitLock: Int32 = 2
    /// The channel of registry changes (`GatewayRegistryChange`), for every node's caches.
    static let registryChannel = "gw_registry"

    /// The number of pushes per partition of a new database's push log.
    public static let defaultPartitionSize: Int64 = PostgresStoreLimits().partitionSize
    /// What bounds the store's connections, waits and partitions.
    public let limits: PostgresStoreLimits

    /// Connects (creating and migrating the schema). Fails when PostgreSQL cannot be reached:
    /// a gateway does not start without its database, but once started it rides out outages
    /// (each call fails while PostgreSQL is away, the next one after it returns works).
    public init(url: PostgresStoreURL, limits: PostgresStoreLimits,
                group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
                logger: Logger = Logger(label: "tidings.postgres")) throws(GatewayStoreError) {
        if let problem = limits.problem { throw .backend("PostgreSQL store: \(problem)") }
        self.url = url
        self.logger = logger
        self.limits = limits
        do {
            pool = try PostgresConnectionPool(url: url, limits: limits, group: group, logger: logger)
        } catch {
            throw .backend("cannot set up TLS for \(url): \(error)")
        }
        do {
            try Self.migrate(pool: pool, partitionSize: limits.partitionSize, logger: logger)
            self.partitionSize = try Self.storedPartitionSize(pool: pool, logger: logger)
        } catch {
            pool.close()
            throw .backend("cannot open \(url): \(error.message)")
        }
    }

    public convenience init(url: PostgresStoreURL, maximumConnections: Int = 8, partitionSize: Int64 = PostgresGatewayStore.defaultPartitionSize,
                            group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
                            logger: Logger = Logger(label: "tidings.postgres")) throws(GatewayStoreError) {
        var limits = PostgresStoreLimits()
        limits.maximumConnections = maximumConnections
        limits.partitionSize = partitionSize
        try self.init(url: url, limits: limits, group: group, logger: logger)
    }

    /// Parses `url` (`postgres://…`), then connects.
    public convenience init(url text: String, limits: PostgresStoreLimits) throws(GatewayStoreError) {
        let url: PostgresStoreURL
        switch PostgresStoreURL.parse(text) {
        case .success(let u): url = u
        case .failure(let error): throw .backend("--database: \(error)")
        }
        try self.init(url: url, limits: limits)
    }

    /// Parses `url` (`postgres://…`), then connects.
    public convenience init(url text: String, maximumConnections: Int = 8,
                            partitionSize: Int64 = PostgresGatewayStore.defaultPartitionSize) throws(GatewayStoreError) {
        var limits = PostgresStoreLimits()
        limits.maximumConnections = maximumConnections
        limits.partitionSize = partitionSize
        try self.init(url: text, limits: limits)
    }

    deinit {
        wakeListener.withLock { $0 }?.stop()
        pool.close()
    }

    /// A connection outside the pool (the LISTEN connection).
    func connectDirectly() throws -> PostgresConnection { try pool.connectOutside() }

    /// `body` on a pool connection of its own (the maintenance lock's session).
    func runOnOwnConnection<T>(_ body: (PostgresConnection) throws -> T) throws(GatewayStoreError) -> T { try run(body) }

    /// The LISTEN connection, while listening.
    let wakeListener = Mutex<WakeListener?>(nil)
    /// How long the LISTEN connection waits before connecting again after it dropped.
    public var listenRetryDelay: DispatchTimeInterval { .milliseconds(Int(limits.reconnectDelay.wholeMilliseconds)) }

    /// Connections opened so far (a PostgreSQL restart shows as new ones).
    public var connectionsOpened: Int { pool.opened.load(ordering: .relaxed) }

    // MARK: Running statements

    /// A message for a failure, with PostgreSQL's own words where it answered (PSQLError's
    /// `description` hides them on purpose).
    static func describe(_ error: any Error) -> String {
        if let e = error as? PSQLError {
            if let message = e.serverInfo?[.message] {
                return "PostgreSQL: \(message) (\(e.serverInfo?[.sqlState] ?? "?"))"
            }
            if let underlying = e.underlying { return "PostgreSQL \(e.code): \(underlying)" }
            return "PostgreSQL \(e.code)"
        }
        return "\(error)"
    }

    static func sqlState(_ error: any Error) -> String? { (error as? PSQLError)?.serverInfo?[.sqlState] }

    private static func run<T>(_ pool: PostgresConnectionPool, _ body: (PostgresConnection) throws -> T) throws(GatewayStoreError) -> T {
        do {
            return try pool.withConnection(body)
        } catch let error as GatewayStoreError {
            throw error
        } catch {
            throw .backend(describe(error))
        }
    }

    func run<T>(_ body: (PostgresConnection) throws -> T) throws(GatewayStoreError) -> T {
        try Self.run(pool, body)
    }

    /// One statement (in its own transaction), all rows collected.
    func execute(_ query: PostgresQuery) throws(GatewayStoreError) -> PostgresQueryResult {
        let logger = self.logger
        return try run { c in try c.query(query, logger: logger).wait() }
    }

    /// `body`'s statements in one transaction on one connection: committed if it returns,
    /// rolled back if it throws.
    private func transaction<T>(_ body: (PostgresConnection) throws -> T) throws(GatewayStoreError) -> T {
        let logger = self.logger
        return try run { c in
            _ = try c.query("BEGIN", logger: logger).wait()
            do {
                let value = try body(c)
                _ = try c.query("COMMIT", logger: logger).wait()
                return value
            } catch {
                _ = try? c.query("ROLLBACK", logger: logger).wait()
                throw error
            }
        }
    }

    // MARK: Schema

    /// Each migration is one statement (a `DO` block), applied in order, once, under an
    /// advisory lock: several nodes starting together migrate once.
    static let migrations: [(name: String, sql: String)] = [
        ("gateway-v1", """
            CREATE TABLE gw_keys (key_id text PRIMARY KEY, team_id text NOT NULL, public_key bytea NOT NULL,
                                  environment text, created_at bigint NOT NULL);
            CREATE TABLE gw_apps (bundle_id text PRIMARY KEY, team_id text NOT NULL, storage_policy text NOT NULL,
                                  created_at bigint NOT NULL);
            CREATE TABLE gw_devices (device_id text PRIMARY KEY, public_key bytea NOT NULL, created_at bigint NOT NULL);
            CREATE TABLE gw_tokens (token text PRIMARY KEY, device_id text NOT NULL, bundle_id text NOT NULL,
                                    environment text NOT NULL, created_at bigint NOT NULL, unregistered_at bigint);
            CREATE INDEX gw_tokens_device ON gw_tokens (device_id, bundle_id);
            CREATE SEQUENCE gw_push_seq;
            -- partition_size pushes per partition; partitions cover [0, partitions_through).
            CREATE TABLE gw_log_settings (id int PRIMARY KEY CHECK (id = 1), partition_size bigint NOT NULL CHECK (partition_size > 0),
                                          partitions_through bigint NOT NULL);
            INSERT INTO gw_log_settings VALUES (1, {partition_size}, 0);
            CREATE TABLE gw_pushes (seq bigint NOT NULL, apns_id text NOT NULL, token text NOT NULL, device_id text NOT NULL,
                                    bundle_id text NOT NULL, topic text NOT NULL, push_type text NOT NULL, priority int NOT NULL,
                                    collapse_id text, expires_at bigint NOT NULL, payload bytea NOT NULL, accepted_at bigint NOT NULL,
                                    stored_at bigint NOT NULL, delivered_at bigint, presented_at bigint, answered_at bigint,
                                    discarded_at bigint, discard_reason text, PRIMARY KEY (seq))
                PARTITION BY RANGE (seq);
            -- A device's undelivered pushes in order (pages, the policy, expiration, unregistering).
            CREATE INDEX gw_pushes_open ON gw_pushes (device_id, seq) WHERE delivered_at IS NULL AND discarded_at IS NULL;
            -- status from any node, and delivery events.
            CREATE INDEX gw_pushes_apns_id ON gw_pushes (apns_id);
            -- Which gateway node holds each connected device (docs/scaling.md): the node a commit wakes.
            CREATE TABLE gw_leases (device_id text PRIMARY KEY, node text NOT NULL, expires_at bigint NOT NULL);
            CREATE FUNCTION gw_commit(apns_ids text[], tokens text[], devices text[], bundles text[], topics text[],
                                      push_types text[], priorities bigint[], collapse_ids text[], has_collapse boolean[],
                                      expires bigint[], payloads bytea[], accepted bigint[], stored bigint, acks bigint[],
                                      from_node text)
                RETURNS bigint LANGUAGE plpgsql AS $f$
            DECLARE
                n bigint := coalesce(cardinality(apns_ids), 0);
                first_seq bigint := 0;
                last_seq bigint;
                size bigint;
                through bigint;
            BEGIN
                IF n > 0 THEN
                    -- Held until the commit: every node's commits in sequence order.
                    PERFORM pg_advisory_xact_lock({lock_space}, {commit_lock});
                    first_seq := nextval('gw_push_seq');
                    last_seq := first_seq + n - 1;
                    IF n > 1 THEN PERFORM setval('gw_push_seq', last_seq); END IF;
                    SELECT partition_size, partitions_through INTO size, through FROM gw_log_settings WHERE id = 1;
                    WHILE last_seq >= through LOOP
                        EXECUTE format('CREATE TABLE %I PARTITION OF gw_pushes FOR VALUES FROM (%s) TO (%s)',
                                       'gw_pushes_p' || (through / size), through, through + size);
                        through := through + size;
                        UPDATE gw_log_settings SET partitions_through = through WHERE id = 1;
                    END LOOP;
                    INSERT INTO gw_pushes (seq, apns_id, token, device_id, bundle_id, topic, push_type, priority, collapse_id,
                                           expires_at, payload, accepted_at, stored_at)
                        SELECT first_seq + u.i - 1, u.a, u.t, u.d, u.b, u.tp, u.pt, u.pr::int, CASE WHEN u.hc THEN u.c END,
                               u.e, u.pl, u.ac, stored
                        FROM unnest(apns_ids, tokens, devices, bundles, topics, push_types, priorities, collapse_ids,
                                    has_collapse, expires, payloads, accepted)
                             WITH ORDINALITY AS u(a, t, d, b, tp, pt, pr, c, hc, e, pl, ac, i);
                    -- Wakes the other nodes that hold a device of the batch (sent at the commit;
                    -- the committing node wakes its own devices itself).
                    PERFORM pg_notify('gw_wake_' || l.node, l.device_id)
                    FROM (SELECT DISTINCT x AS device_id FROM unnest(devices) AS x) d JOIN gw_leases l ON l.device_id = d.device_id
                    WHERE l.node <> from_node;
                END IF;
                IF coalesce(cardinality(acks), 0) > 0 THEN
                    UPDATE gw_pushes SET delivered_at = stored WHERE seq = ANY(acks) AND delivered_at IS NULL;
                END IF;
                RETURN first_seq;
            END $f$;
            """),
    ]

    private static func migrate(pool: PostgresConnectionPool, partitionSize: Int64, logger: Logger) throws(GatewayStoreError) {
        try run(pool) { c in
            // Under the migration lock too: two nodes creating the table at once without it can
            // both pass IF NOT EXISTS and one fails on PostgreSQL's catalog ("duplicate key value
            // violates unique constraint pg_type_typname_nsp_index"; seen once in
            // PostgresGatewayStoreTests.twoStoresShareOneDatabase).
            _ = try c.query(PostgresQuery(unsafeSQL: """
                DO $create$ BEGIN
                    PERFORM pg_advisory_xact_lock(\(lockSpace), \(migrationLock));
                    CREATE TABLE IF NOT EXISTS gw_schema_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now());
                END $create$
                """), logger: logger).wait()
            for migration in migrations {
                let body = migration.sql
                    .replacingOccurrences(of: "{partition_size}", with: "\(partitionSize)")
                    .replacingOccurrences(of: "{lock_space}", with: "\(lockSpace)")
                    .replacingOccurrences(of: "{commit_lock}", with: "\(commitLock)")
                // The name is ours (a constant), never input.
                let sql = """
                    DO $migration$ BEGIN
                        PERFORM pg_advisory_xact_lock(\(lockSpace), \(migrationLock));
                        IF NOT EXISTS (SELECT 1 FROM gw_schema_migrations WHERE name = '\(migration.name)') THEN
                            EXECUTE $body$\(body)$body$;
                            INSERT INTO gw_schema_migrations (name) VALUES ('\(migration.name)');
                        END IF;
                    END $migration$
                    """
                _ = try c.query(PostgresQuery(unsafeSQL: sql), logger: logger).wait()
            }
        }
    }

    private static func storedPartitionSize(pool: PostgresConnectionPool, logger: Logger) throws(GatewayStoreError) -> Int64 {
        try run(pool) { c in
            let rows = try c.query("SELECT partition_size FROM gw_log_settings WHERE id = 1", logger: logger).wait()
            guard let row = rows.rows.first else { throw GatewayStoreError.backend("gw_log_settings has no row") }
            return try row.decode(Int64.self)
        }
    }

    // MARK: Registry

    public func addKey(_ key: ProviderKeyRecord) throws(GatewayStoreError) {
        let result = try execute("""
            WITH added AS (
                INSERT INTO gw_keys VALUES (\(key.keyID), \(key.teamID), \(ByteBuffer(bytes: key.publicKey)), \(key.environment?.rawValue), \(key.createdAt))
                ON CONFLICT (key_id) DO NOTHING RETURNING key_id)
            SELECT pg_notify(\(Self.registryChannel), 'key:' || key_id) FROM added
            """)
        if result.rows.isEmpty { throw .duplicate("key \(key.keyID)") }
    }

    private static let keyColumns = "key_id, team_id, public_key, environment, created_at"

    private static func keyRecord(_ row: PostgresRow) throws -> ProviderKeyRecord {
        let (id, team, key, environment, created) = try row.decode((String, String, ByteBuffer, String?, Int64).self)
        return ProviderKeyRecord(keyID: id, teamID: team, publicKey: Data(key.readableBytesView),
                                 environment: environment.map(APNsEnvironment.init(rawValue:)), createdAt: created)
    }

    public func key(id: String) throws(GatewayStoreError) -> ProviderKeyRecord? {
        try decode(execute("SELECT \(unescaped: Self.keyColumns) FROM gw_keys WHERE key_id = \(id)"), Self.keyRecord).first
    }

    public func keys() throws(GatewayStoreError) -> [ProviderKeyRecord] {
        try decode(execute("SELECT \(unescaped: Self.keyColumns) FROM gw_keys ORDER BY key_id"), Self.keyRecord)
    }

    /// Deletes the key and tells every node (`key:<id>` on the registry channel, sent at the
    /// commit): each drops it from its cache and re-checks the connections authorized with it.
    @discardableResult
    public func revokeKey(id: String) throws(GatewayStoreError) -> ProviderKeyRecord {
        let logger = self.logger
        // Not found is an answer, not a failure: the transaction commits (nothing deleted, nothing
        // sent) and the pool keeps its connection.
        let removed: ProviderKeyRecord? = try transaction { c in
            let removed = try c.query("DELETE FROM gw_keys WHERE key_id = \(id) RETURNING \(unescaped: Self.keyColumns)",
                                      logger: logger).wait().rows.map(Self.keyRecord).first
            if removed != nil { _ = try c.query("SELECT pg_notify(\(Self.registryChannel), \("key:" + id))", logger: logger).wait() }
            return removed
        }
        guard let removed else { throw .notFound("key \(id)") }
        return removed
    }

    private func decode<T>(_ result: PostgresQueryResult, _ row: (PostgresRow) throws -> T) throws(GatewayStoreError) -> [T] {
        do { return try result.rows.map(row) } catch { throw .backend(Self.describe(error)) }
    }

    private static let appColumns = "bundle_id, team_id, storage_policy, created_at"

    private static func appRecord(_ row: PostgresRow) throws -> GatewayAppRecord {
        let (bundle, team, policy, created) = try row.decode((String, String, String, Int64).self)
        return GatewayAppRecord(bundleID: bundle, teamID: team, storagePolicy: StoragePolicy(rawValue: policy) ?? .apns, createdAt: created)
    }

    public func registerApp(_ app: GatewayAppRecord) throws(GatewayStoreError) {
        // Another team's bundle ID: the update's condition fails, no row changes.
        let result = try execute("""
            WITH registered AS (
                INSERT INTO gw_apps VALUES (\(app.bundleID), \(app.teamID), \(app.storagePolicy.rawValue), \(app.createdAt))
                ON CONFLICT (bundle_id) DO UPDATE SET storage_policy = excluded.storage_policy WHERE gw_apps.team_id = excluded.team_id
                RETURNING bundle_id)
            SELECT pg_notify(\(Self.registryChannel), 'app:' || bundle_id) FROM registered
            """)
        if result.rows.isEmpty { throw .duplicate("app \(app.bundleID)") }
    }

    public func app(bundleID: String) throws(GatewayStoreError) -> GatewayAppRecord? {
        try decode(execute("SELECT \(unescaped: Self.appColumns) FROM gw_apps WHERE bundle_id = \(bundleID)"), Self.appRecord).first
    }

    public func apps() throws(GatewayStoreError) -> [GatewayAppRecord] {
        try decode(execute("SELECT \(unescaped: Self.appColumns) FROM gw_apps ORDER BY bundle_id"), Self.appRecord)
    }

    // MARK: Devices

    public func registerDevice(_ device: GatewayDeviceRecord) throws(GatewayStoreError) {
        _ = try execute("""
            INSERT INTO gw_devices VALUES (\(device.deviceID), \(ByteBuffer(bytes: device.publicKey)), \(device.createdAt))
            ON CONFLICT (device_id) DO NOTHING
            """)
    }

    public func device(id: String) throws(GatewayStoreError) -> GatewayDeviceRecord? {
        try decode(execute("SELECT public_key, created_at FROM gw_devices WHERE device_id = \(id)")) { row in
            let (key, created) = try row.decode((ByteBuffer, Int64).self)
            return GatewayDeviceRecord(deviceID: id, publicKey: Data(key.readableBytesView), createdAt: created)
        }.first
    }

    private static let tokenColumns = "token, device_id, bundle_id, environment, created_at, unregistered_at"

    private static func tokenRecord(_ row: PostgresRow) throws -> DeviceTokenRecord {
        let (token, device, bundle, environment, created, unregistered) = try row.decode((String, String, String, String, Int64, Int64?).self)
        return DeviceTokenRecord(token: token, deviceID: device, bundleID: bundle, environment: APNsEnvironment(rawValue: environment),
                                 createdAt: created, unregisteredAt: unregistered)
    }

    public func addToken(_ token: DeviceTokenRecord) throws(GatewayStoreError) {
        let result = try execute("""
            WITH added AS (
                INSERT INTO gw_tokens VALUES (\(token.token), \(token.deviceID), \(token.bundleID), \(token.environment.rawValue),
                                              \(token.createdAt), \(token.unregisteredAt))
                ON CONFLICT (token) DO NOTHING RETURNING token)
            SELECT pg_notify(\(Self.registryChannel), 'token:' || token) FROM added
            """)
        if result.rows.isEmpty { throw .duplicate("token") }
    }

    public func token(_ token: String) throws(GatewayStoreError) -> DeviceTokenRecord? {
        try decode(execute("SELECT \(unescaped: Self.tokenColumns) FROM gw_tokens WHERE token = \(token)"), Self.tokenRecord).first
    }

    public func activeToken(deviceID: String, bundleID: String, environment: APNsEnvironment) throws(GatewayStoreError) -> DeviceTokenRecord? {
        try decode(execute("""
            SELECT \(unescaped: Self.tokenColumns) FROM gw_tokens
            WHERE device_id = \(deviceID) AND bundle_id = \(bundleID) AND environment = \(environment.rawValue) AND unregistered_at IS NULL
            """), Self.tokenRecord).first
    }

    public func tokenCount(deviceID: String) throws(GatewayStoreError) -> Int {
        let counts = try decode(execute("SELECT count(*) FROM gw_tokens WHERE device_id = \(deviceID)")) { try $0.decode(Int64.self) }
        return Int(counts.first ?? 0)
    }

    public func unregisterTokens(deviceID: String, bundleID: String, at: EpochMilliseconds) throws(GatewayStoreError) -> [DeviceTokenRecord] {
        let logger = self.logger
        return try transaction { c in
            let live = try c.query("""
                UPDATE gw_tokens SET unregistered_at = \(at)
                WHERE device_id = \(deviceID) AND bundle_id = \(bundleID) AND unregistered_at IS NULL
                RETURNING \(unescaped: Self.tokenColumns)
                """, logger: logger).wait().rows.map(Self.tokenRecord)
            if !live.isEmpty {
                // Every node drops the tokens from its cache (sent at the commit).
                _ = try c.query("""
                    SELECT pg_notify(\(Self.registryChannel), 'token:' || t) FROM unnest(\(live.map(\.token))) AS t
                    """, logger: logger).wait()
                _ = try c.query("""
                    UPDATE gw_pushes SET discarded_at = \(at), discard_reason = 'unregistered'
                    WHERE device_id = \(deviceID) AND token = ANY(\(live.map(\.token)))
                      AND delivered_at IS NULL AND discarded_at IS NULL
                    """, logger: logger).wait()
            }
            return live.sorted { $0.token < $1.token }
        }
    }

    // MARK: Push log

    public func commit(pushes: [NewPush], acknowledged: [Int64], at: EpochMilliseconds) throws(GatewayStoreError) -> [StoredPush] {
        if pushes.isEmpty && acknowledged.isEmpty { return [] }
        var apnsIDs: [String] = [], tokens: [String] = [], devices: [String] = [], bundles: [String] = [], topics: [String] = []
        var pushTypes: [String] = [], priorities: [Int64] = [], collapseIDs: [String] = [], hasCollapse: [Bool] = []
        var expires: [Int64] = [], payloads: [ByteBuffer] = [], accepted: [Int64] = []
        let n = pushes.count
        apnsIDs.reserveCapacity(n); tokens.reserveCapacity(n); devices.reserveCapacity(n); bundles.reserveCapacity(n)
        topics.reserveCapacity(n); pushTypes.reserveCapacity(n); priorities.reserveCapacity(n); collapseIDs.reserveCapacity(n)
        hasCollapse.reserveCapacity(n); expires.reserveCapacity(n); payloads.reserveCapacity(n); accepted.reserveCapacity(n)
        let allocator = ByteBufferAllocator()
        for p in pushes {
            apnsIDs.append(p.apnsID); tokens.append(p.token); devices.append(p.deviceID); bundles.append(p.bundleID)
            topics.append(p.topic.rawValue); pushTypes.append(p.pushType.rawValue); priorities.append(Int64(p.priority.rawValue))
            collapseIDs.append(p.collapseID?.rawValue ?? ""); hasCollapse.append(p.collapseID != nil)
            expires.append(p.expiresAt)
            var payload = allocator.buffer(capacity: p.payload.count)
            payload.writeBytes(p.payload)
            payloads.append(payload)
            accepted.append(p.acceptedAt)
        }
        let statement: PostgresQuery = """
            SELECT gw_commit(\(apnsIDs), \(tokens), \(devices), \(bundles), \(topics), \(pushTypes), \(priorities),
                             \(collapseIDs), \(hasCollapse), \(expires), \(payloads), \(accepted), \(at), \(acknowledged), \(nodeID))
            """
        var attempt = 0
        while true {
            attempt += 1
            do {
                let first = try decode(execute(statement)) { try $0.decode(Int64.self) }.first ?? 0
                return pushes.enumerated().map { i, p in StoredPush(sequence: first + Int64(i), push: p, storedAt: at) }
            } catch {
                // A deadlock with a concurrent discard (PostgreSQL aborted this side): once more.
                guard attempt < 3, error.message.contains("(40P01)") else { throw error }
            }
        }
    }

    public func prepareBacklog(deviceID: String, now: EpochMilliseconds) throws(GatewayStoreError) -> Int {
        // One statement: expiration, and the policy over what is not expired (the statement's
        // parts see one snapshot, so they are kept disjoint). Each open push is ranked newest
        // first within its token (`apns`, and apps not registered) or its token and collapse id
        // (`all`); all but rank 1 go. `all` pushes without a collapse id always stay.
        let result = try execute("""
            WITH expired AS (
                UPDATE gw_pushes SET discarded_at = \(now), discard_reason = 'expired'
                WHERE device_id = \(deviceID) AND delivered_at IS NULL AND discarded_at IS NULL AND expires_at <= \(now)
                RETURNING 1),
            superseded AS (
                SELECT seq FROM (
                    SELECT p.seq,
                           row_number() OVER (PARTITION BY p.token, CASE WHEN a.storage_policy = 'all' THEN p.collapse_id END
                                              ORDER BY p.seq DESC) AS newest
                    FROM gw_pushes p LEFT JOIN gw_apps a ON a.bundle_id = p.bundle_id
                    WHERE p.device_id = \(deviceID) AND p.delivered_at IS NULL AND p.discarded_at IS NULL AND p.expires_at > \(now)
                      AND (a.storage_policy IS DISTINCT FROM 'all' OR p.collapse_id IS NOT NULL)) ranked
                WHERE newest > 1),
            coalesced AS (
                UPDATE gw_pushes SET discarded_at = \(now), discard_reason = 'coalesced'
                WHERE device_id = \(deviceID) AND seq IN (SELECT seq FROM superseded) AND delivered_at IS NULL AND discarded_at IS NULL
                RETURNING 1)
            SELECT (SELECT count(*) FROM expired) + (SELECT count(*) FROM coalesced)
            """)
        return Int(try decode(result) { try $0.decode(Int64.self) }.first ?? 0)
    }

    private static let pageColumns = """
        seq, apns_id, token, bundle_id, topic, push_type, priority, collapse_id, expires_at, payload, accepted_at, stored_at
        """

    public func pendingPushes(deviceID: String, after: Int64, limit: Int) throws(GatewayStoreError) -> [StoredPush] {
        guard limit > 0 else { return [] }
        let result = try execute("""
            SELECT \(unescaped: Self.pageColumns) FROM gw_pushes
            WHERE device_id = \(deviceID) AND seq > \(after) AND delivered_at IS NULL AND discarded_at IS NULL
            ORDER BY seq LIMIT \(Int64(limit))
            """)
        return try decode(result) { row in
            let r = row.makeRandomAccess()
            let payload = try r[9].decode(ByteBuffer.self)
            let collapse = try r[7].decode(String?.self)
            // Typed as when accepted; a row that no longer types is an error, not a guessed push.
            guard let topic = Topic(rawValue: try r[4].decode(String.self)), let pushType = PushType(rawValue: try r[5].decode(String.self)),
                  let priority = Priority(rawValue: Int(try r[6].decode(Int32.self))), collapse == nil || CollapseID(rawValue: collapse!) != nil else {
                throw GatewayStoreError.backend("push \(try r[0].decode(Int64.self)) does not type")
            }
            let push = NewPush(apnsID: try r[1].decode(String.self), token: try r[2].decode(String.self), deviceID: deviceID,
                               bundleID: try r[3].decode(String.self), topic: topic, pushType: pushType, priority: priority,
                               collapseID: collapse.flatMap(CollapseID.init(rawValue:)), expiresAt: try r[8].decode(Int64.self),
                               payload: Array(payload.readableBytesView), acceptedAt: try r[10].decode(Int64.self))
            return StoredPush(sequence: try r[0].decode(Int64.self), push: push, storedAt: try r[11].decode(Int64.self))
        }
    }

    public func status(apnsID: String) throws(GatewayStoreError) -> [PushStatus] {
        let result = try execute("""
            SELECT seq, apns_id, bundle_id, topic, push_type, token, accepted_at, stored_at, expires_at,
                   delivered_at, presented_at, answered_at, discarded_at, discard_reason
            FROM gw_pushes WHERE apns_id = \(apnsID) ORDER BY seq
            """)
        return try decode(result) { row in
            let r = row.makeRandomAccess()
            return PushStatus(sequence: try r[0].decode(Int64.self), apnsID: try r[1].decode(String.self),
                              bundleID: try r[2].decode(String.self), topic: try r[3].decode(String.self),
                              pushType: try r[4].decode(String.self), tokenPrefix: String(try r[5].decode(String.self).prefix(8)),
                              acceptedAt: try r[6].decode(Int64.self), storedAt: try r[7].decode(Int64.self),
                              expiresAt: try r[8].decode(Int64.self), deliveredAt: try r[9].decode(Int64?.self),
                              presentedAt: try r[10].decode(Int64?.self), answeredAt: try r[11].decode(Int64?.self),
                              discardedAt: try r[12].decode(Int64?.self),
                              discardReason: try r[13].decode(String?.self).map(DiscardReason.init(rawValue:)))
        }
    }

    private static func eventColumn(_ event: DeliveryEvent) -> String? {
        switch event {
        case .presented: "presented_at"
        case .answered: "answered_at"
        default: nil
        }
    }

    /// The first time of a stage is kept (`coalesce`): recording an event again changes nothing.
    /// The time is `DeviceEventReport.recordedTime`: the device's `occurredAt` (else `at`) within
    /// accepted_at...at.
    private static func recordQuery(_ column: String, apnsID: String, deviceID: String, at: EpochMilliseconds,
                                    occurredAt: EpochMilliseconds? = nil) -> PostgresQuery {
        """
        UPDATE gw_pushes SET \(unescaped: column) = coalesce(\(unescaped: column), least(greatest(coalesce(\(occurredAt)::bigint, \(at)), accepted_at), \(at))),
                             delivered_at = coalesce(delivered_at, \(at))
        WHERE seq = (SELECT seq FROM gw_pushes WHERE apns_id = \(apnsID) AND device_id = \(deviceID) ORDER BY seq DESC LIMIT 1)
        """
    }

    /// The push with this sequence, if it is the device's and has this apns-id (the device sent
    /// the push's sequence): found by the partition key, not the apns-id index.
    private static func recordQuery(_ column: String, apnsID: String, sequence: Int64, deviceID: String, at: EpochMilliseconds,
                                    occurredAt: EpochMilliseconds?) -> PostgresQuery {
        """
        UPDATE gw_pushes SET \(unescaped: column) = coalesce(\(unescaped: column), least(greatest(coalesce(\(occurredAt)::bigint, \(at)), accepted_at), \(at))),
                             delivered_at = coalesce(delivered_at, \(at))
        WHERE seq = \(sequence) AND apns_id = \(apnsID) AND device_id = \(deviceID)
        """
    }

    public func recordEvent(_ event: DeliveryEvent, apnsID: String, deviceID: String, at: EpochMilliseconds) throws(GatewayStoreError) -> Bool {
        guard let column = Self.eventColumn(event) else { return false }
        return try execute(Self.recordQuery(column, apnsID: apnsID, deviceID: deviceID, at: at)).metadata.rows ?? 0 > 0
    }

    /// Every event in one transaction.
    public func recordEvents(_ events: [DeviceEventReport], deviceID: String, at: EpochMilliseconds) throws(GatewayStoreError) {
        let known = events.compactMap { e in
            Self.eventColumn(e.event).map { column in
                e.sequence.map { Self.recordQuery(column, apnsID: e.apnsID, sequence: $0, deviceID: deviceID, at: at, occurredAt: e.occurredAt) }
                    ?? Self.recordQuery(column, apnsID: e.apnsID, deviceID: deviceID, at: at, occurredAt: e.occurredAt)
            }
        }
        guard !known.isEmpty else { return }
        let logger = self.logger
        try transaction { c in
            for query in known {
                _ = try c.query(query, logger: logger).wait()
            }
        }
    }

    public func expirePushes(now: EpochMilliseconds, limit: Int) throws(GatewayStoreError) -> Int {
        guard limit > 0 else { return 0 }
        let result = try execute("""
            UPDATE gw_pushes SET discarded_at = \(now), discard_reason = 'expired'
            WHERE seq IN (SELECT seq FROM gw_pushes
                          WHERE delivered_at IS NULL AND discarded_at IS NULL AND expires_at <= \(now) ORDER BY seq LIMIT \(Int64(limit)))
              AND delivered_at IS NULL AND discarded_at IS NULL
            """)
        return result.metadata.rows ?? 0
    }

    /// The push log's partitions, oldest first: name and sequence range `from..<to`.
    public func partitions() throws(GatewayStoreError) -> [(name: String, from: Int64, to: Int64)] {
        let logger = self.logger
        return try run { c in try Self.partitions(on: c, logger: logger) }
    }

    private static func partitions(on c: PostgresConnection, logger: Logger) throws -> [(name: String, from: Int64, to: Int64)] {
        let rows = try c.query("""
            SELECT c.relname, s.partition_size FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
            CROSS JOIN gw_log_settings s
            WHERE i.inhparent = 'gw_pushes'::regclass AND c.relname LIKE 'gw_pushes_p%'
            """, logger: logger).wait().rows
        return try rows.map { row -> (name: String, from: Int64, to: Int64) in
            let (name, size) = try row.decode((String, Int64).self)
            let k = Int64(name.dropFirst("gw_pushes_p".count)) ?? -1
            return (name, k * size, (k + 1) * size)
        }.sorted { $0.from < $1.from }
    }

    public func prunePushes(finishedBefore cutoff: EpochMilliseconds, limit: Int) throws(GatewayStoreError) -> Int {
        // Whole partitions first: one whose range was all issued (below the sequence's value)
        // and whose every push finished before the cutoff is dropped, whatever its size (a
        // DROP costs the same for one row or a million). Under the commit lock, so no commit
        // is creating partitions meanwhile.
        let logger = self.logger
        let dropped: Int = try transaction { c in
            _ = try c.query("SELECT pg_advisory_xact_lock(\(Self.lockSpace), \(Self.commitLock))", logger: logger).wait()
            let issued = try c.query("SELECT last_value FROM gw_push_seq", logger: logger).wait().rows.first?.decode(Int64.self) ?? 0
            var total = 0
            for (name, _, to) in try Self.partitions(on: c, logger: logger) where to <= issued + 1 {
                // The name is ours (gw_pushes_pN), quoted anyway.
                let table = "\"\(name)\""
                // Stops at the first push that must stay (an open one, or one finished since).
                let droppable = try c.query(PostgresQuery(unsafeSQL: """
                    SELECT NOT EXISTS (SELECT 1 FROM \(table) WHERE NOT ((delivered_at IS NOT NULL AND delivered_at < $1)
                                                                      OR (discarded_at IS NOT NULL AND discarded_at < $1)))
                    """, binds: Self.binds(cutoff)), logger: logger).wait().rows.first?.decode(Bool.self) ?? false
                guard droppable else { continue }
                let count = try c.query(PostgresQuery(unsafeSQL: "SELECT count(*) FROM \(table)"), logger: logger)
                    .wait().rows.first?.decode(Int64.self) ?? 0
                _ = try c.query(PostgresQuery(unsafeSQL: "DROP TABLE \(table)"), logger: logger).wait()
                total += Int(count)
            }
            return total
        }
        guard limit > 0 else { return dropped }
        // Then rows, oldest first, up to `limit`: the walk stops at the first push accepted
        // since the cutoff (a push finished before it was accepted before it).
        let result = try execute("""
            DELETE FROM gw_pushes WHERE seq IN (
                SELECT seq FROM gw_pushes
                WHERE seq < coalesce((SELECT seq FROM gw_pushes WHERE accepted_at >= \(cutoff) ORDER BY seq LIMIT 1), 9223372036854775807)
                  AND ((delivered_at IS NOT NULL AND delivered_at < \(cutoff)) OR (discarded_at IS NOT NULL AND discarded_at < \(cutoff)))
                ORDER BY seq LIMIT \(Int64(limit)))
            """)
        return dropped + (result.metadata.rows ?? 0)
    }

    private static func binds(_ values: Int64...) -> PostgresBindings {
        var b = PostgresBindings(capacity: values.count)
        for v in values { b.append(v) }
        return b
    }
}
