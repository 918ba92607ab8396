import Foundation
import Logging
import NIOCore
import NIOExtras
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL
import ServiceLifecycle
import Synchronization
import TidingsCore
import TidingsPostgres
import TidingsSQLite
import TidingsStorage

/// Where a running gateway listens (ports resolved when the configuration said 0).
public struct GatewayAddresses: Sendable, Hashable {
    public var provider: SocketAddress
    public var device: SocketAddress
    public var admin: SocketAddress?
    /// The PEM certificate clients should trust, when the gateway made a self-signed one.
    public var certificatePath: String?
    /// The file holding the admin endpoint's bearer token, when the endpoint requires one.
    public var adminTokenPath: String? = nil
}

/// Builds the gateway: one `Service` that serves the provider API, the device channel and
/// the admin endpoint until graceful shutdown. Opens (and migrates) the store now, so that
/// configuration errors surface before the service group starts.
public func buildGateway(_ configuration: GatewayConfiguration) throws -> Gateway {
    try Gateway(configuration: configuration)
}

/// What one maintenance run did.
public struct GatewayMaintenanceReport: Sendable, Hashable {
    /// Undelivered pushes newly marked expired.
    public var expired: Int
    /// Finished pushes deleted.
    public var pruned: Int
}

/// The APNs-compatible push gateway.
public final class Gateway: Service, Sendable {
    public let configuration: GatewayConfiguration
    let core: GatewayCore
    private let group: MultiThreadedEventLoopGroup
    private let threadPool: NIOThreadPool

    private struct RunState {
        var servers: [any Channel] = []
        var providerConnections: [ObjectIdentifier: any Channel] = [:]
        var deviceConnections: [ObjectIdentifier: any Channel] = [:]
        var addresses: GatewayAddresses?
        var waiters: [CheckedContinuation<GatewayAddresses, any Error>] = []
        var failure: (any Error)?
    }

    private let runState = Mutex(RunState())
    /// Whether the store is the gateway's to close (SQLite, PostgreSQL), not a `.custom` one.
    private let ownsStore: Bool

    /// The provider connections' `SETTINGS_MAX_FRAME_SIZE` (HTTP/2's default).
    static let providerMaximumFrameSize = 16384

    init(configuration: GatewayConfiguration) throws {
        self.configuration = configuration
        if let problem = configuration.problem { throw GatewayConfigurationError(description: problem) }
        try FileManager.default.createDirectory(at: configuration.dataDirectory, withIntermediateDirectories: true)
        let store: any GatewayStore
        switch configuration.storage {
        case .sqlite: store = try SQLiteGatewayStore(path: configuration.databasePath, limits: configuration.sqlite)
        case .postgres(let url): store = try PostgresGatewayStore(url: url, limits: configuration.postgres)
        case .custom(let custom): store = custom
        }
        ownsStore = if case .custom = configuration.storage { false } else { true }
        let threads = configuration.eventLoopThreads > 0 ? configuration.eventLoopThreads : System.coreCount
        self.group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        self.threadPool = NIOThreadPool(numberOfThreads: 2)
        self.core = GatewayCore(configuration: configuration, store: store, metrics: GatewayMetrics(), threadPool: threadPool)
        try core.directory.preload()
    }

    /// The store the gateway uses.
    public var store: any GatewayStore { core.store }

    /// Waits until the listeners are bound; returns their addresses.
    public func waitUntilReady() async throws -> GatewayAddresses {
        try await withCheckedThrowingContinuation { continuation in
            let immediate: Result<GatewayAddresses, any Error>? = runState.withLock { s in
                if let a = s.addresses { return .success(a) }
                if let f = s.failure { return .failure(f) }
                s.waiters.append(continuation)
                return nil
            }
            if let immediate { continuation.resume(with: immediate) }
        }
    }

    /// The delivery path of every push with this apns-id.
    public func status(apnsID: String) async throws -> [PushStatus] {
        let store = core.store
        return try await threadPool.runIfActive { try store.status(apnsID: apnsID) }
    }

    /// Records a later stage (presented, answered) of a push, as a device's `event` message
    /// does. Devices — the daemon of `tidings serve` among them, which connects to the device
    /// channel like any other — report theirs through that channel. Nothing in Tidings calls
    /// this; it is for code that embeds the gateway (and for tests).
    @discardableResult
    public func recordDeliveryEvent(_ event: DeliveryEvent, apnsID: String, deviceID: String) async throws -> Bool {
        let store = core.store
        let now = core.clock.nowMilliseconds()
        return try await threadPool.runIfActive { try store.recordEvent(event, apnsID: apnsID, deviceID: deviceID, at: now) }
    }

    /// The store's housekeeping, also run every `maintenanceInterval` while the gateway runs:
    /// marks undelivered pushes past their expiration as discarded, then deletes pushes that
    /// finished more than `pushRetention` ago, in transactions of at most `maintenanceBatchSize` rows so
    /// that the group commit never waits long behind it.
    @discardableResult
    public func runMaintenance() async throws -> GatewayMaintenanceReport {
        let core = self.core
        return try await threadPool.runIfActive { try core.maintain() }
    }

    /// Registers a provider key (the public half) with a running gateway's store and cache.
    public func register(key: ProviderKeyRecord) async throws {
        let store = core.store
        try await threadPool.runIfActive { try store.addKey(key) }
        core.directory.remember(key: key)
    }

    /// Revokes a provider key in a running gateway's store and cache: a token signed by it is
    /// refused (`403 InvalidProviderToken`) from the next request on, on connections already
    /// authorized with it too. Other nodes on the same database drop it when the store's
    /// notification arrives, at the latest at their next registry refresh. An unknown key id
    /// is `GatewayStoreError.notFound`.
    @discardableResult
    public func revoke(keyID: String) async throws -> ProviderKeyRecord {
        let store = core.store
        let removed = try await threadPool.runIfActive { try store.revokeKey(id: keyID) }
        core.directory.forget(.key(keyID))
        return removed
    }

    /// Compares the cached keys with the store now (also done every `registryRefreshInterval`
    /// while the gateway runs) and drops those that are gone; returns their ids.
    @discardableResult
    public func refreshRegistry() async throws -> [String] {
        let directory = core.directory
        return try await threadPool.runIfActive { try directory.refreshKeys() }
    }

    /// Gives a team a bundle ID in a running gateway's store and cache.
    public func register(app: GatewayAppRecord) async throws {
        let store = core.store
        try await threadPool.runIfActive { try store.registerApp(app) }
        core.directory.remember(app: app)
    }

    /// How many devices are connected now.
    public var connectedDeviceCount: Int { core.hub.count }

    // MARK: Service

    public func run() async throws {
        threadPool.start()
        core.committer.start()
        let core = self.core
        let threadPool = self.threadPool
        let maintenance = group.next().scheduleRepeatedTask(initialDelay: configuration.maintenanceInterval,
                                                            delay: configuration.maintenanceInterval) { _ in
            // Off the event loop; a run still going when the next is due is not doubled.
            guard core.maintenanceRunning.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged else { return }
            // A pool already shut down runs the work at once, on this event loop, as
            // `.cancelled`: the store's blocking calls must not run there (PostgreSQL's
            // `wait()` traps on an event loop). The tasks are cancelled only after the pool
            // stopped, so each checks.
            threadPool.submit { state in
                defer { core.maintenanceRunning.store(false, ordering: .releasing) }
                guard state == .active else { return }
                do { _ = try core.maintain() } catch { core.logger.error("maintenance failed", metadata: ["error": "\(error)"]) }
            }
        }
        // Revocations whose notification was lost (or that SQLite cannot announce) are found
        // within one interval.
        let directory = core.directory
        let logger = core.logger
        let refresh = group.next().scheduleRepeatedTask(initialDelay: configuration.registryRefreshInterval,
                                                        delay: configuration.registryRefreshInterval) { _ in
            threadPool.submit { state in
                guard state == .active else { return }  // see maintenance above
                do {
                    let dropped = try directory.refreshKeys()
                    if !dropped.isEmpty { logger.notice("provider keys revoked", metadata: ["keys": "\(dropped)"]) }
                } catch {
                    logger.warning("registry refresh failed", metadata: ["error": "\(error)"])
                }
            }
        }
        // Several nodes: wake-ups from the others, and lease renewal.
        let leases = core.hub.leases
        let hub = core.hub
        leases?.coordination.startListening(wake: { hub.wake($0) }, leaseTaken: { _ in leases?.renewSoon() },
                                            registryChanged: { directory.forget($0) },
                                            reconnected: { directory.forgetAll(); hub.wakeAll() })
        let renewal = leases.map { leases in
            group.next().scheduleRepeatedTask(initialDelay: configuration.leaseRenewInterval, delay: configuration.leaseRenewInterval) { _ in
                threadPool.submit { state in if state == .active { leases.renew() } }
            }
        }
        defer { leases?.coordination.stopListening() }
        // Cancelled while the event loops still run: cancelling a repeated task schedules on its
        // loop, and after the group's shutdown NIO refuses that ("Cannot schedule tasks on an
        // EventLoop that has already shut down", a crash in its strict mode).
        func cancelRepeatedTasks() {
            maintenance.cancel()
            refresh.cancel()
            renewal?.cancel()
        }
        do {
            try await start()
        } catch {
            cancelRepeatedTasks()
            fail(error)
            await stopEverything()
            throw error
        }
        try? await gracefulShutdown()
        cancelRepeatedTasks()
        await drainAndStop()
    }

    private func fail(_ error: any Error) {
        let waiters = runState.withLock { s in
            s.failure = error
            defer { s.waiters.removeAll() }
            return s.waiters
        }
        for w in waiters { w.resume(throwing: error) }
    }

    private func start() async throws {
        let logger = core.logger
        var certificatePath: String?
        let certificateChain: [NIOSSLCertificate]
        let privateKey: NIOSSLPrivateKey
        switch configuration.tlsIdentity {
        case .selfSigned:
            let files = try SelfSignedCertificate.ensure(in: configuration.dataDirectory)
            if files.created {
                logger.notice("made a self-signed certificate; clients should trust it", metadata: ["path": "\(files.certificatePath)"])
            }
            certificatePath = files.certificatePath
            certificateChain = try NIOSSLCertificate.fromPEMFile(files.certificatePath)
            privateKey = try NIOSSLPrivateKey(file: files.privateKeyPath, format: .pem)
        case .files(let chain, let key):
            certificateChain = try NIOSSLCertificate.fromPEMFile(chain)
            privateKey = try NIOSSLPrivateKey(file: key, format: .pem)
        }
        var providerTLS = TLSConfiguration.makeServerConfiguration(
            certificateChain: certificateChain.map { .certificate($0) }, privateKey: .privateKey(privateKey))
        providerTLS.applicationProtocols = ["h2"]
        providerTLS.minimumTLSVersion = .tlsv12
        // Certificate-based provider authentication (mutual TLS): a client certificate is asked
        // for, not required (token clients send none). NIOSSL lets every presented certificate
        // through the handshake (a custom callback; TLS still checks that the client holds its
        // key); ProviderConnectionHandler verifies it against the provider CA once per
        // connection, so that a bad one gets Apple's 403 reasons instead of a TLS alert.
        var certificateVerifier: ProviderCertificateVerifier?
        if configuration.acceptsClientCertificates && configuration.providerTransport == .tls {
            let (authority, created) = try ProviderCertificateAuthority.ensure(in: configuration.dataDirectory)
            if created {
                logger.notice("made the provider certificate authority", metadata: ["path": "\(authority.certificatePath)"])
            }
            providerTLS.certificateVerification = .optionalVerification
            providerTLS.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(authority.certificatePath))
            providerTLS.sendCANameList = true
            certificateVerifier = ProviderCertificateVerifier(authority: authority, environment: configuration.environment, clock: core.clock)
        }
        let providerContext = try NIOSSLContext(configuration: providerTLS)
        var deviceTLS = TLSConfiguration.makeServerConfiguration(
            certificateChain: certificateChain.map { .certificate($0) }, privateKey: .privateKey(privateKey))
        deviceTLS.minimumTLSVersion = .tlsv12
        let deviceContext = try NIOSSLContext(configuration: deviceTLS)

        let core = self.core
        let useTLS = configuration.providerTransport == .tls
        let initialSettings: HTTP2Settings = [
            HTTP2Setting(parameter: .headerTableSize, value: 4096),
            HTTP2Setting(parameter: .maxConcurrentStreams, value: configuration.unauthenticatedStreamLimit),
            HTTP2Setting(parameter: .initialWindowSize, value: 65535),
            HTTP2Setting(parameter: .maxFrameSize, value: Self.providerMaximumFrameSize),
            HTTP2Setting(parameter: .maxHeaderListSize, value: 8000),
        ]

        let configuration = self.configuration
        let providerListener = ListenerGuard(
            listener: "provider", maximumConnections: configuration.maximumProviderConnections,
            maximumConnectionsPerAddress: configuration.maximumProviderConnectionsPerAddress,
            logInterval: configuration.connectionRefusalLogInterval, metrics: core.metrics, logger: logger)
        let deviceListener = ListenerGuard(listener: "device", logInterval: configuration.connectionRefusalLogInterval,
                                           metrics: core.metrics, logger: logger)

        let provider = try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 1024)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { [self] channel in
                // Past a connection cap the connection is closed at once (the bootstrap closes it).
                if let refusal = providerListener.admit(channel) { return channel.eventLoop.makeFailedFuture(refusal) }
                self.track(provider: channel)
                return channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    if useTLS {
                        try sync.addHandler(certificateVerifier == nil ? NIOSSLServerHandler(context: providerContext)
                            : NIOSSLServerHandler(context: providerContext) { _, verdict in verdict.succeed(.certificateVerified) })
                        // A certificate the CA accepts authenticates the connection at the handshake.
                        if certificateVerifier != nil { try sync.addHandler(ProviderHandshakeObserver()) }
                    }
                    try sync.addHandler(ConnectionStartDeadlineHandler(
                        listener: providerListener, tlsHandshakeTimeout: useTLS ? configuration.tlsHandshakeTimeout : nil,
                        prefaceTimeout: configuration.providerPrefaceTimeout))
                    // The frames of one flush (a commit batch's responses) as one buffer: one TLS record.
                    // (and, in development, every 200 gets its `apns-unique-id` there)
                    try sync.addHandler(OutboundCoalescingHandler(addsUniqueID: configuration.environment == .development))
                    // A provider token sent again reaches NIOHPACK as plain text, not Huffman-coded.
                    let repeatedAuthorization = RepeatedAuthorizationHandler(maximumFrameSize: Self.providerMaximumFrameSize)
                    try sync.addHandler(repeatedAuthorization)
                    // Header blocks and content lengths are validated by ProviderConnectionHandler
                    // in its own pass (HTTP2HeaderBlockRules, the same rules and the same RST_STREAM).
                    try sync.addHandler(NIOHTTP2Handler(mode: .server, initialSettings: initialSettings,
                                                        headerBlockValidation: .disabled, contentLengthValidation: .disabled))
                    try sync.addHandler(ProviderConnectionHandler(core: core, repeatedAuthorization: repeatedAuthorization,
                                                                  certificateVerifier: certificateVerifier))
                }
            }
            .bind(host: configuration.providerHost, port: configuration.providerPort).get()
        runState.withLock { $0.servers.append(provider) }

        let device = try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 4096)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelOption(.socketOption(.so_keepalive), value: 1)
            // Idle connections: NIOSSL's large per-connection buffers on lazily touched pages,
            // and a small first read buffer (device messages are short; it grows under load).
            .childChannelOption(.allocator, value: LazyPageAllocator.allocator)
            .childChannelOption(.recvAllocator, value: AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 512, maximum: 65536))
            .childChannelInitializer { [self] channel in
                self.track(device: channel)
                return channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(ReleaseWrittenPagesHandler())  // below TLS: its ciphertext pages
                    try sync.addHandler(NIOSSLServerHandler(context: deviceContext))
                    try sync.addHandler(ConnectionStartDeadlineHandler(
                        listener: deviceListener, tlsHandshakeTimeout: configuration.tlsHandshakeTimeout, prefaceTimeout: nil))
                    try sync.addHandler(DeviceChannelHandler(core: core))  // reads and writes the frames itself
                }
            }
            .bind(host: configuration.deviceHost, port: configuration.devicePort).get()
        runState.withLock { $0.servers.append(device) }

        var adminAddress: SocketAddress?
        var adminTokenPath: String?
        if let adminHost = configuration.adminHost {
            let adminListener = ListenerGuard(
                listener: "admin", maximumConnections: configuration.maximumAdminConnections,
                logInterval: configuration.connectionRefusalLogInterval, metrics: core.metrics, logger: logger)
            // Decided before binding, so that no connection is ever served without a token that it needs.
            let address = try SocketAddress.makeAddressResolvingHost(adminHost, port: configuration.adminPort)
            var adminToken: AdminToken?
            if configuration.adminTokenRequired ?? AdminToken.required(listeningOn: address) {
                let (token, created) = try AdminToken.ensure(path: configuration.adminTokenPath)
                if created { logger.notice("made the admin endpoint's bearer token", metadata: ["path": "\(configuration.adminTokenPath)"]) }
                adminToken = token
                adminTokenPath = configuration.adminTokenPath
            }
            let token = adminToken
            let admin = try await ServerBootstrap(group: group)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelInitializer { channel in
                    if let refusal = adminListener.admit(channel) { return channel.eventLoop.makeFailedFuture(refusal) }
                    return channel.eventLoop.makeCompletedFuture {
                        let sync = channel.pipeline.syncOperations
                        try sync.addHandler(AdminConnectionGuard(listener: adminListener, timeout: configuration.adminRequestTimeout,
                                                                 maximumBytes: configuration.adminMaximumRequestBytes))
                        try sync.configureHTTPServerPipeline()
                        try sync.addHandler(AdminHandler(core: core, token: token))
                    }
                }
                .bind(to: address).get()
            runState.withLock { $0.servers.append(admin) }
            adminAddress = admin.localAddress
        }

        let addresses = GatewayAddresses(provider: provider.localAddress!, device: device.localAddress!, admin: adminAddress,
                                         certificatePath: certificatePath, adminTokenPath: adminTokenPath)
        logger.notice("gateway listening", metadata: [
            "provider": "\(addresses.provider)", "device": "\(addresses.device)",
            "admin": "\(addresses.admin.map { "\($0)" } ?? "off")", "environment": "\(configuration.environment)",
            "transport": "\(useTLS ? "h2 over TLS" : "h2c prior knowledge")",
        ])
        let waiters = runState.withLock { s in
            s.addresses = addresses
            defer { s.waiters.removeAll() }
            return s.waiters
        }
        for w in waiters { w.resume(returning: addresses) }
    }

    private func track(provider channel: any Channel) {
        let id = ObjectIdentifier(channel)
        runState.withLock { $0.providerConnections[id] = channel }
        channel.closeFuture.whenComplete { [self] _ in _ = runState.withLock { $0.providerConnections.removeValue(forKey: id) } }
    }

    private func track(device channel: any Channel) {
        let id = ObjectIdentifier(channel)
        runState.withLock { $0.deviceConnections[id] = channel }
        channel.closeFuture.whenComplete { [self] _ in _ = runState.withLock { $0.deviceConnections.removeValue(forKey: id) } }
    }

    /// Graceful shutdown: stop accepting, GOAWAY `{"reason":"Shutdown"}` on every provider
    /// connection, wait for in-flight pushes to commit and be answered (up to `drainTimeout`),
    /// then close devices, stop the writer and the threads.
    private func drainAndStop() async {
        core.logger.notice("gateway shutting down")
        let servers = runState.withLock { $0.servers }
        for server in servers { try? await server.close() }
        let connections = runState.withLock { Array($0.providerConnections.values) }
        for connection in connections {
            connection.eventLoop.execute {
                (try? connection.pipeline.syncOperations.handler(type: ProviderConnectionHandler.self))?.beginShutdown()
            }
        }
        let deadline = ContinuousClock.now + configuration.drainTimeout
        while ContinuousClock.now < deadline {
            let open = runState.withLock { $0.providerConnections.count }
            if open == 0 { break }
            try? await Task.sleep(for: .milliseconds(10))
        }
        await stopEverything()
    }

    private func stopEverything() async {
        let (providers, devices) = runState.withLock { (Array($0.providerConnections.values), Array($0.deviceConnections.values)) }
        for c in providers + devices { try? await c.close() }
        let servers = runState.withLock { $0.servers }
        for server in servers { try? await server.close() }
        let committer = core.committer
        let core = self.core
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            Thread {
                committer.stop()
                // The connections are closed: nothing queues registry writes any more; those
                // queued complete on the loops while they still run.
                core.drainRegistry()
                continuation.resume()
            }.start()
        }
        try? await threadPool.shutdownGracefully()
        try? await group.shutdownGracefully()
        // The store it opened (SQLite: the checkpointer's thread and the connections), once
        // nothing uses it: left to deinit, it stayed open as long as anything held the gateway.
        if ownsStore {
            let store = core.store
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                Thread {
                    store.close()
                    continuation.resume()
                }.start()
            }
        }
    }
}
