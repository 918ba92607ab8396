import ArgumentParser
import Foundation
import Logging
import NIOCore
import ServiceLifecycle
import TidingsCore
import TidingsGateway
import TidingsPostgres
import TidingsSQLite

/// `tidings gateway`: the APNs-compatible push gateway on its own.
struct GatewayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gateway",
        abstract: "Run the APNs-compatible push gateway (provider API, device channel, admin endpoint).")

    @OptionGroup var options: GatewayOptions

    func run() async throws {
        var logger = Logger(label: "tidings.gateway")
        logger.logLevel = options.logging.level(default: .notice)
        let configuration = try options.configuration(logger: logger)
        let gateway = try buildGateway(configuration)
        let group = ServiceGroup(configuration: .init(services: [gateway], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            tasks.addTask {
                Self.announce(try await gateway.waitUntilReady(), configuration)
            }
            try await tasks.waitForAll()
        }
    }

    static func describe(_ address: SocketAddress) -> String {
        "\(address.ipAddress ?? "?"):\(address.port ?? 0)"
    }

    /// Prints where the gateway listens, flushed: tests and supervisors read the ports from it.
    static func announce(_ addresses: GatewayAddresses, _ configuration: GatewayConfiguration) {
        say("tidings gateway: provider API on \(describe(addresses.provider)) (\(configuration.providerTransport == .tls ? "HTTP/2 over TLS" : "HTTP/2 cleartext, prior knowledge")), environment \(configuration.environment)")
        say("tidings gateway: device channel on \(describe(addresses.device))")
        if let admin = addresses.admin { say("tidings gateway: admin (metrics, status) on http://\(describe(admin))") }
        if let token = addresses.adminTokenPath { say("tidings gateway: admin endpoint token (send as 'authorization: bearer <token>'): \(token)") }
        if let cert = addresses.certificatePath { say("tidings gateway: self-signed certificate: \(cert)") }
    }
}

/// Where the gateway listens: shared by `tidings gateway` and `tidings serve`.
struct GatewayListenOptions: ParsableArguments {
    @Option(name: .customLong("listen"), help: "Provider API address.")
    var listen: String = "127.0.0.1:2197"

    @Option(name: .customLong("device-listen"), help: "Device channel address.")
    var deviceListen: String = "127.0.0.1:2196"

    @Option(name: .customLong("admin-listen"), help: "Admin endpoint (/metrics, /status/<apns-id>, /healthz) address, or 'off'. On an address other than loopback it requires the bearer token in <data dir>/admin-token (made on first start).")
    var adminListen: String = "127.0.0.1:2198"

    @Flag(name: .customLong("admin-token"), help: "Require the admin endpoint's bearer token on loopback too.")
    var adminToken = false

    @Option(name: .customLong("database"), help: "The gateway's store: a PostgreSQL URL (postgres://user:password@host:port/database[?sslmode=require]) that several gateway nodes can share (default: $TIDINGS_DATABASE_URL, else gateway.sqlite in the data directory).")
    var database: String?

    @Option(name: .customLong("max-provider-connections"), help: "Open provider connections, at most; past it a new one is closed at once.")
    var maxProviderConnections: Int = 4_096

    @Option(name: .customLong("max-provider-connections-per-address"), help: "Open provider connections from one IP address, at most.")
    var maxProviderConnectionsPerAddress: Int = 512

    @Option(name: .customLong("push-retention"), help: "Seconds a finished push stays in the store for `tidings status` before maintenance deletes it (default: 7 days; at most 10 years).")
    var pushRetention: Int = 7 * 24 * 3600

    // The limits below are shared by `gateway` and `serve` (load tests run either).
    @Option(name: .customLong("device-rate-limit"), help: "Pushes per second per device token before 429 TooManyRequests (0: no limit).")
    var deviceRateLimit: Double = 1000

    @Option(name: .customLong("device-rate-burst"), help: "Burst size of the per-device limit.")
    var deviceRateBurst: Double = 2000

    @Option(name: .customLong("new-device-rate-limit"), help: "New device identities per second, over all sources (per source: a tenth); 0: no limit (load tests).")
    var newDeviceRateLimit: Double = 100

    // The stores' limits (docs/security.md, "Store limits").
    @Option(name: .customLong("database-connections"), help: "PostgreSQL connections per node, at most (1–1000; the LISTEN connection is one more).")
    var databaseConnections: Int = PostgresStoreLimits().maximumConnections

    @Option(name: .customLong("database-connect-timeout"), help: "Seconds connecting to PostgreSQL may take (0.001–3600).")
    var databaseConnectTimeout: Double = 5

    @Option(name: .customLong("database-acquire-timeout"), help: "Seconds a call waits for a free PostgreSQL connection before it fails (0.001–3600).")
    var databaseAcquireTimeout: Double = 10

    @Option(name: .customLong("database-statement-timeout"), help: "PostgreSQL's statement_timeout in seconds: a statement still running is cancelled (0.001–3600).")
    var databaseStatementTimeout: Double = 30

    @Option(name: .customLong("database-partition-size"), help: "Pushes per partition of a new PostgreSQL database's push log (an existing database keeps its own).")
    var databasePartitionSize: Int64 = PostgresStoreLimits().partitionSize

    @Option(name: .customLong("sqlite-busy-timeout"), help: "Seconds a SQLite statement waits for another connection's lock (0.001–3600).")
    var sqliteBusyTimeout: Double = 10

    @Option(name: .customLong("sqlite-wal-limit"), help: "WAL pages at which the SQLite writer checkpoints itself: the WAL's bound (at least 1000, the background checkpoint threshold).")
    var sqliteWALLimit: Int = SQLiteStoreLimits().walPageLimit

    @Option(name: .customLong("commit-batch"), help: "Pushes in one group commit (one transaction), at most (1–1000000); the rest go in the next.")
    var commitBatch: Int = 4_096

    @Option(name: .customLong("registry-refresh"), help: "Seconds between checks of the cached provider keys against the store: how long a revoked key may keep working on a node that missed the notification, or on SQLite (0.001–86400).")
    var registryRefresh: Double = 5

    /// Seconds from an option, in its range (a clear message otherwise).
    static func seconds(_ value: Double, _ option: String, in range: ClosedRange<Double> = 0.001...3_600) throws -> Duration {
        guard value.isFinite, range.contains(value) else {
            throw ValidationError("\(option) is a number of seconds from \(range.lowerBound) to \(range.upperBound); got \(value)")
        }
        return .milliseconds(Int64((value * 1000).rounded()))
    }

    func applyStoreLimits(to c: inout GatewayConfiguration) throws {
        guard PostgresStoreLimits.connectionRange.contains(databaseConnections) else {
            throw ValidationError("--database-connections is 1 to \(PostgresStoreLimits.connectionRange.upperBound); got \(databaseConnections)")
        }
        c.postgres.maximumConnections = databaseConnections
        c.postgres.connectTimeout = try Self.seconds(databaseConnectTimeout, "--database-connect-timeout")
        c.postgres.acquireTimeout = try Self.seconds(databaseAcquireTimeout, "--database-acquire-timeout")
        c.postgres.statementTimeout = try Self.seconds(databaseStatementTimeout, "--database-statement-timeout")
        guard PostgresStoreLimits.partitionSizeRange.contains(databasePartitionSize) else {
            throw ValidationError("--database-partition-size is 1 to \(PostgresStoreLimits.partitionSizeRange.upperBound); got \(databasePartitionSize)")
        }
        c.postgres.partitionSize = databasePartitionSize
        c.sqlite.busyTimeout = try Self.seconds(sqliteBusyTimeout, "--sqlite-busy-timeout")
        guard (c.sqlite.checkpointPages...SQLiteStoreLimits.pageRange.upperBound).contains(sqliteWALLimit) else {
            throw ValidationError("--sqlite-wal-limit is \(c.sqlite.checkpointPages) to \(SQLiteStoreLimits.pageRange.upperBound) pages; got \(sqliteWALLimit)")
        }
        c.sqlite.walPageLimit = sqliteWALLimit
        guard GatewayConfiguration.commitBatchRange.contains(commitBatch) else {
            throw ValidationError("--commit-batch is 1 to \(GatewayConfiguration.commitBatchRange.upperBound); got \(commitBatch)")
        }
        c.maximumPushesPerCommit = commitBatch
        let refresh = try Self.seconds(registryRefresh, "--registry-refresh", in: 0.001...86_400)
        c.registryRefreshInterval = .milliseconds(refresh.components.seconds * 1000 + refresh.components.attoseconds / 1_000_000_000_000_000)
        if let problem = c.problem { throw ValidationError(problem) }
    }

    /// `--push-retention`'s largest value: 10 years.
    static let maximumPushRetention = 10 * 365 * 24 * 3600

    func apply(to c: inout GatewayConfiguration) throws {
        guard [deviceRateLimit, deviceRateBurst, newDeviceRateLimit].allSatisfy({ $0.isFinite && $0 >= 0 }) else {
            throw ValidationError("--device-rate-limit, --device-rate-burst and --new-device-rate-limit are numbers, 0 or more")
        }
        c.deviceRateLimitPerSecond = deviceRateLimit
        c.deviceRateLimitBurst = deviceRateBurst
        c.newDevicesPerSecond = newDeviceRateLimit
        c.newDevicesBurst = newDeviceRateLimit * 10
        c.newDevicesPerSourcePerSecond = newDeviceRateLimit / 10
        c.newDevicesPerSourceBurst = newDeviceRateLimit
        guard (0...Self.maximumPushRetention).contains(pushRetention) else {
            throw ValidationError("--push-retention is a number of seconds from 0 to \(Self.maximumPushRetention) (10 years)")
        }
        c.pushRetention = .seconds(pushRetention)
        (c.providerHost, c.providerPort) = try GatewayOptions.address(listen, "--listen")
        (c.deviceHost, c.devicePort) = try GatewayOptions.address(deviceListen, "--device-listen")
        if adminListen == "off" { c.adminHost = nil } else { (c.adminHost, c.adminPort) = try GatewayOptions.address(adminListen, "--admin-listen") }
        if adminToken { c.adminTokenRequired = true }
        guard maxProviderConnections >= 1, maxProviderConnectionsPerAddress >= 1 else {
            throw ValidationError("--max-provider-connections and --max-provider-connections-per-address are at least 1")
        }
        c.maximumProviderConnections = maxProviderConnections
        c.maximumProviderConnectionsPerAddress = maxProviderConnectionsPerAddress
        if let url = try gatewayDatabaseURL(database) { c.storage = .postgres(url: url) }
        try applyStoreLimits(to: &c)
    }
}

/// The options of `tidings gateway`.
struct GatewayOptions: ParsableArguments {
    @OptionGroup var data: DataDirectoryOption

    @OptionGroup var addresses: GatewayListenOptions

    @Flag(help: "Serve the provider API as cleartext HTTP/2 with prior knowledge (h2c) instead of TLS.")
    var cleartext = false

    @Option(help: "TLS certificate chain (PEM). Default: a self-signed certificate made in the data directory.")
    var certificate: String?

    @Option(name: .customLong("private-key"), help: "TLS private key (PEM), with --certificate.")
    var privateKey: String?

    @Option(help: "The environment the provider API serves: development or production.")
    var environment: String = "development"

    @Option(name: .customLong("unauthenticated-stream-limit"), help: "Streams allowed before a connection's first valid token (APNs: 1).")
    var unauthenticatedStreamLimit: Int = 1

    @Option(help: "Event-loop threads (0: one per core).")
    var threads: Int = 0

    @OptionGroup var logging: LogLevelOption

    func configuration(logger: Logger) throws -> GatewayConfiguration {
        var c = GatewayConfiguration(dataDirectory: URL(fileURLWithPath: data.resolved))
        try addresses.apply(to: &c)
        c.providerTransport = cleartext ? .cleartext : .tls
        switch (certificate, privateKey) {
        case (let cert?, let key?): c.tlsIdentity = .files(certificateChain: cert, privateKey: key)
        case (nil, nil): c.tlsIdentity = .selfSigned
        default: throw ValidationError("--certificate and --private-key go together")
        }
        guard let env = APNsEnvironment(name: environment) else { throw ValidationError("--environment is development or production") }
        c.environment = env
        c.unauthenticatedStreamLimit = max(1, unauthenticatedStreamLimit)
        c.eventLoopThreads = threads
        c.logger = logger
        return c
    }

    static func address(_ text: String, _ option: String) throws -> (String, Int) {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]), (0...65535).contains(port) else {
            throw ValidationError("\(option) takes HOST:PORT, like 127.0.0.1:2197")
        }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return (host, port)
    }
}
