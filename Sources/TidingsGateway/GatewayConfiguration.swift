import Foundation
import Logging
import NIOCore
import TidingsCore
import TidingsPostgres
import TidingsSQLite
import TidingsStorage

/// Everything `buildGateway` needs. The defaults are the single-machine set-up of
/// `tidings gateway`: TLS on 127.0.0.1:2197, the device channel on 127.0.0.1:2196, the
/// admin endpoint on 127.0.0.1:2198, SQLite in the data directory.
public struct GatewayConfiguration: Sendable {
    /// How the provider API is served.
    public struct ProviderTransport: Sendable, Hashable {
        enum Kind: Hashable { case tls, cleartext }
        let kind: Kind
        /// HTTP/2 over TLS: ALPN `h2`, and HTTP/2 too when the client offers no ALPN
        /// (aioapns, Pushy). Never HTTP/1.1.
        public static let tls = ProviderTransport(kind: .tls)
        /// HTTP/2 with prior knowledge, no TLS (h2c): for tests and benchmarks behind a proxy.
        public static let cleartext = ProviderTransport(kind: .cleartext)
    }

    /// Where the certificate comes from.
    public enum TLSIdentity: Sendable, Hashable {
        /// A self-signed P-256 certificate for `localhost` and 127.0.0.1, made in the data
        /// directory on first start (`tls/gateway-cert.pem`, `tls/gateway-key.pem`) and reused.
        case selfSigned
        /// PEM files.
        case files(certificateChain: String, privateKey: String)
    }

    /// The storage backend.
    public enum Storage: Sendable {
        /// `gateway.sqlite` in the data directory.
        case sqlite
        /// A PostgreSQL database (`postgres://user:password@host:port/database`) that several
        /// gateway nodes can share (`TidingsPostgres`, docs/scaling.md).
        case postgres(url: String)
        /// Another store, e.g. `InMemoryGatewayStore` in tests.
        case custom(any GatewayStore)
    }

    public var dataDirectory: URL
    public var providerHost: String = "127.0.0.1"
    public var providerPort: Int = 2197
    public var providerTransport: ProviderTransport = .tls
    public var deviceHost: String = "127.0.0.1"
    public var devicePort: Int = 2196
    /// `nil`: no admin endpoint.
    public var adminHost: String? = "127.0.0.1"
    public var adminPort: Int = 2198
    public var tlsIdentity: TLSIdentity = .selfSigned
    /// Certificate-based provider authentication (mutual TLS) beside provider tokens: the
    /// provider listener asks for a client certificate issued by the provider CA in
    /// `DATA/provider-ca/` (made on first start; `tidings certs create`).
    public var acceptsClientCertificates: Bool = true
    public var storage: Storage = .sqlite
    /// The environment the provider API serves (a device token works in one environment).
    public var environment: APNsEnvironment = .development
    /// Streams allowed on a provider connection before its first valid token (Apple: 1).
    public var unauthenticatedStreamLimit: Int = 1
    /// Streams allowed once a token was verified (Apple: about 1000).
    public var authenticatedStreamLimit: Int = 1000
    /// How long an undeliverable push is kept when the request has no `apns-expiration`,
    /// and the longest any push is kept: Apple's 30 days.
    public var maximumStorageDuration: Duration = .seconds(30 * 24 * 3600)
    /// Per device token: a token bucket of `deviceRateLimitBurst` pushes refilled at
    /// `deviceRateLimitPerSecond`; beyond it, `429 TooManyRequests`. 0 disables the limit.
    public var deviceRateLimitPerSecond: Double = 1000
    public var deviceRateLimitBurst: Double = 2000
    /// How long a finished push (delivered, or discarded: coalesced, expired, unregistered)
    /// stays in the store for `tidings status` before maintenance deletes it.
    public var pushRetention: Duration = .seconds(7 * 24 * 3600)
    /// Several gateway nodes on PostgreSQL: how long a device's lease lasts unless renewed, and
    /// how often each node renews its leases (a node whose device connected to another node
    /// disconnects it within this interval).
    public var deviceLeaseDuration: Duration = .seconds(30)
    public var leaseRenewInterval: TimeAmount = .seconds(5)
    /// The PostgreSQL store's connection pool, timeouts and partitions (`.postgres` storage;
    /// docs/security.md, "Store limits").
    public var postgres = PostgresStoreLimits()
    /// The SQLite store's lock wait and write-ahead-log bound (`.sqlite` storage).
    public var sqlite = SQLiteStoreLimits()
    /// Pushes in one group commit (one transaction; with PostgreSQL one statement whose arrays
    /// carry them), at most: what waits beyond it goes in the next transaction, right after.
    /// Bounds a commit's statement size (≈ 4 KiB of payload per push) and its time under the
    /// commit lock.
    public var maximumPushesPerCommit: Int = 4_096
    /// Device acknowledgements in one group commit, at most (the rest in the next one).
    public var maximumAcknowledgementsPerCommit: Int = 16_384
    /// Rows expired or deleted per maintenance transaction (each its own short transaction, so
    /// that commits interleave).
    public var maintenanceBatchSize: Int = 5_000
    /// How long a key, app or device token the store did not have is answered from memory
    /// (`403`/`400` without a store read) before the store is asked again.
    public var registryNegativeCacheDuration: Duration = .seconds(1)
    /// Unknown device tokens remembered that way, at most; past it they are all forgotten.
    public var registryMaximumMissedTokens: Int = 100_000
    /// Unknown key ids and bundle ids remembered that way, at most (each).
    public var registryMaximumMissedNames: Int = 10_000
    /// How often each node compares its cached provider keys with the store and drops the ones
    /// that are gone: the bound on how long a revoked key keeps working on a node whose
    /// notification was lost, or on a SQLite gateway whose key was revoked by `tidings keys
    /// revoke` from another process (SQLite has no notifications). One `SELECT` of the keys.
    public var registryRefreshInterval: TimeAmount = .seconds(5)
    /// How often maintenance runs (expire undelivered pushes, prune finished ones).
    public var maintenanceInterval: TimeAmount = .seconds(60)
    /// How long a device has to answer the connection challenge.
    public var deviceHandshakeTimeout: TimeAmount = .seconds(10)
    /// A request whose stream has not ended this long after its headers (the body never came)
    /// is answered `400 IdleTimeout` and its stream reset, so a stalled client cannot hold a
    /// stream, its memory and its place under the stream limit forever.
    public var providerRequestTimeout: Duration = .seconds(10)
    /// How often each provider connection looks for such requests.
    public var providerIdleCheckInterval: TimeAmount = .seconds(1)
    /// Pushes waiting for the next commit, at most: beyond it a request is answered `503
    /// ServiceUnavailable` (the store cannot keep up; clients retry later) instead of the
    /// queue, and the gateway's memory, growing without bound.
    public var maximumQueuedPushes: Int = 100_000
    /// How long graceful shutdown waits for in-flight streams after GOAWAY.
    public var drainTimeout: Duration = .seconds(10)
    /// A reconnecting device's backlog is read and sent in pages of this many pushes, in
    /// sequence order (memory stays bounded however large the backlog).
    public var deviceBacklogPageSize: Int = 1_000
    /// The next backlog page is read once at most this many pages' worth of sent pushes are
    /// unacknowledged (with the default 2: one page on the wire while the next is read).
    public var deviceBacklogPagesInFlight: Int = 2
    /// Event-loop threads (0: one per core).
    public var eventLoopThreads: Int = 0
    public var clock: any WallClock = SystemWallClock()
    public var logger: Logger = Logger(label: "tidings.gateway")
    /// The longest message a device may send (its length prefix); a longer one is refused at
    /// once with an `error` (`ProtocolError`) and the connection closes. It is also the most one
    /// connection buffers of an unfinished message. Device messages are a few hundred bytes;
    /// an `acks` of 1,024 sequences is at most about 20 kB. (Before the handshake: 4 KiB.)
    public var deviceMaximumFrameLength: Int = 64 * 1024
    /// A device connection that sent no whole message between two checks this far apart (so
    /// for this long to twice it) after its handshake is closed (`IdleTimeout`). `TidingsDevice` pings every `DeviceClientConfiguration.pingInterval`
    /// (60 s by default): three pings fit in it. 0 disables it.
    public var deviceIdleTimeout: TimeAmount = .seconds(180)
    /// Sequences in one `acks` message, at most; more closes the connection (`ProtocolError`).
    public var deviceMaximumAcksPerMessage: Int = 1_024
    /// Device tokens one device may hold (live or unregistered, over its lifetime, as each is
    /// a row of the registry); a request for a new one past it is refused (`TooManyDeviceTokens`),
    /// nothing stored. Asking again for a token the device holds keeps working.
    public var deviceMaximumTokens: Int = 1_000
    /// Per device (its id, so a reconnect does not refill it): `requestToken` and `removeApp`
    /// messages, a token bucket of this burst refilled at this rate; past it a request is
    /// refused (`TooManyRequests`). 0 disables the rate.
    public var deviceRequestRateLimitPerSecond: Double = 10
    public var deviceRequestRateLimitBurst: Double = 100
    /// Per connection: `requestToken` and `removeApp` messages sent and not yet answered, at
    /// most; past it a request is refused (`TooManyRequests`), not queued.
    public var deviceMaximumRequestsInFlight: Int = 8
    /// Device identities seen for the first time (a handshake with a key the gateway has never
    /// recorded), per source address and over all sources: token buckets; past either the
    /// handshake is refused (`TooManyNewDevices`), nothing stored. Known devices always get in.
    /// 0 disables a limit (load tests that make 100,000 devices).
    public var newDevicesPerSourcePerSecond: Double = 10
    public var newDevicesPerSourceBurst: Double = 100
    public var newDevicesPerSecond: Double = 100
    public var newDevicesBurst: Double = 1_000
    /// Keys (device tokens, device ids, source addresses) one rate limiter tracks, at most; past
    /// it full buckets are dropped, and if more than half remain, all (`DeviceRateLimiter`).
    public var rateLimiterMaximumKeys: Int = GatewayConfiguration.defaultRateLimiterMaximumKeys
    public static let defaultRateLimiterMaximumKeys = 200_000
    /// Registry writes of all device connections (token requests, app removals, delivery event
    /// batches) queued or running, at most; past it a request or event is refused
    /// (`TooManyRequests`; the device asks again later), not queued. Each connection has at
    /// most `deviceMaximumRequestsInFlight` requests and one event batch queued.
    public var deviceRegistryMaximumQueued: Int = 4_096
    /// Delivery events of one connection waiting to be recorded, at most; past it an event is
    /// refused (`TooManyRequests`; the device sends it again later), not queued.
    public var deviceMaximumPendingEvents: Int = 1_024
    /// A provider connection that has not authenticated a request (no valid provider token)
    /// this long after it was accepted gets GOAWAY `{"reason":"IdleTimeout"}` and is closed.
    public var providerAuthenticationTimeout: Duration = .seconds(60)
    /// An authenticated provider connection stays open while idle (providers keep them for
    /// hours, as at Apple); after this long without a frame from the client the gateway sends
    /// a PING.
    public var providerPingInterval: Duration = .seconds(300)
    /// A PING not acknowledged this long after it was sent: GOAWAY `{"reason":"IdleTimeout"}`
    /// and the connection is closed (the peer is gone).
    public var providerPingTimeout: Duration = .seconds(30)
    /// A provider or device connection whose TLS handshake is not complete this long after
    /// accept is closed.
    public var tlsHandshakeTimeout: TimeAmount = .seconds(10)
    /// A provider connection whose HTTP/2 connection preface and first SETTINGS frame have not
    /// arrived this long after accept is closed (TLS and cleartext h2c alike).
    public var providerPrefaceTimeout: TimeAmount = .seconds(10)
    /// Open provider connections, at most (a provider keeps a few to a few hundred); a
    /// connection accepted past it is closed at once.
    public var maximumProviderConnections: Int = 4_096
    /// Open provider connections from one source IP address, at most; past it a new one from
    /// that address is closed at once (other addresses are still served).
    public var maximumProviderConnectionsPerAddress: Int = 512
    /// A refused or timed-out connection is logged at most once per this interval (with the
    /// number refused since); each is counted in the metrics.
    public var connectionRefusalLogInterval: TimeAmount = .seconds(10)
    /// Admin connections open at once, at most; past it a new one is closed at once.
    public var maximumAdminConnections: Int = 32
    /// An admin request (head and end) must be complete this long after the connection opens
    /// or after the previous response, else the connection is closed (slow clients and idle
    /// keep-alive connections).
    public var adminRequestTimeout: TimeAmount = .seconds(10)
    /// Bytes of one admin request (or of the requests pipelined before a response), at most;
    /// past it the connection is closed.
    public var adminMaximumRequestBytes: Int = 8_192
    /// Whether the admin endpoint requires `authorization: bearer <token>`, the token in
    /// `adminTokenPath` (made on first need, mode 0600). `nil`: only when it listens on an
    /// address that is not loopback.
    public var adminTokenRequired: Bool? = nil

    public init(dataDirectory: URL) {
        self.dataDirectory = dataDirectory
    }

    /// What is wrong with the store and registry limits, or nil (`buildGateway` refuses such a
    /// configuration with `GatewayConfigurationError`).
    public var problem: String? {
        switch storage {
        case .postgres: if let p = postgres.problem { return p }
        case .sqlite: if let p = sqlite.problem { return p }
        case .custom: break
        }
        let counts: [(String, Int, ClosedRange<Int>)] = [
            ("maximumPushesPerCommit", maximumPushesPerCommit, Self.commitBatchRange),
            ("maximumAcknowledgementsPerCommit", maximumAcknowledgementsPerCommit, Self.commitBatchRange),
            ("maintenanceBatchSize", maintenanceBatchSize, 1...1_000_000),
            ("registryMaximumMissedTokens", registryMaximumMissedTokens, 0...10_000_000),
            ("registryMaximumMissedNames", registryMaximumMissedNames, 0...10_000_000),
        ]
        for (name, value, range) in counts where !range.contains(value) {
            return "\(name) is \(value); it must be \(range.lowerBound) to \(range.upperBound)"
        }
        if !(Duration.zero ... .seconds(3_600)).contains(registryNegativeCacheDuration) {
            return "registryNegativeCacheDuration is \(registryNegativeCacheDuration); it must be 0 to 1 hour"
        }
        if !(TimeAmount.milliseconds(1) ... .hours(24)).contains(registryRefreshInterval) {
            return "registryRefreshInterval is \(registryRefreshInterval); it must be 1 ms to 24 hours"
        }
        return nil
    }

    /// `maximumPushesPerCommit` and `maximumAcknowledgementsPerCommit`: 1 to a million.
    public static let commitBatchRange = 1...1_000_000

    /// `$TIDINGS_DATA_DIR`, `$XDG_DATA_HOME/tidings` or `~/.local/share/tidings`.
    public static var defaultDataDirectory: URL { URL(fileURLWithPath: TidingsPaths.defaultDataDirectory()) }

    /// `gateway.sqlite` under the data directory.
    public var databasePath: String { dataDirectory.appendingPathComponent("gateway.sqlite").path }

    /// `admin-token` under the data directory: the admin endpoint's bearer token.
    public var adminTokenPath: String { dataDirectory.appendingPathComponent("admin-token").path }
}

/// A gateway configuration with a value out of its range.
public struct GatewayConfigurationError: Error, Sendable, CustomStringConvertible {
    public let description: String
}

