import Dispatch
import Logging
import NIOCore
import Synchronization
import NIOPosix
import TidingsCore
import TidingsStorage

/// What the provider and device handlers share.
final class GatewayCore: Sendable {
    let configuration: GatewayConfiguration
    let store: any GatewayStore
    let directory: GatewayDirectory
    let hub: DeviceHub
    let committer: PushCommitter
    let rateLimiter: DeviceRateLimiter
    /// New device identities per source address, and over all sources (`newDevices…`).
    let newDevicesPerSource: DeviceRateLimiter
    let newDevices: DeviceRateLimiter
    /// `requestToken` and `removeApp` per device id (`deviceRequestRateLimit…`): a device
    /// that reconnects keeps its bucket.
    let deviceRequests: DeviceRateLimiter
    /// Where the device channel's registry writes run (tokens issued, apps removed, delivery
    /// events), one at a time: never on `threadPool`, which handshakes, backlog pages and the
    /// admin endpoint wait on, so registry work never delays a handshake. It is shared by all
    /// devices: each connection has at most `deviceMaximumRequestsInFlight` requests and one
    /// event batch in it, the whole queue at most `deviceRegistryMaximumQueued` items (past it
    /// `TooManyRequests`), and a closed connection's waiting items are skipped.
    private let registryQueue = DispatchQueue(label: "tidings.gateway.registry")
    /// Items in `registryQueue`, running or waiting.
    private let registryQueued = Atomic<Int>(0)
    let metrics: GatewayMetrics
    let threadPool: NIOThreadPool
    let logger: Logger
    let maintenanceRunning = Atomic<Bool>(false)
    /// One device idle sweeper per event loop (`deviceIdleSweeper(for:)`).
    let deviceIdleSweepers = Mutex<[ObjectIdentifier: DeviceIdleSweeper]>([:])

    var clock: any WallClock { configuration.clock }

    init(configuration: GatewayConfiguration, store: any GatewayStore, metrics: GatewayMetrics, threadPool: NIOThreadPool) {
        self.configuration = configuration
        self.store = store
        self.metrics = metrics
        self.threadPool = threadPool
        self.logger = configuration.logger
        let directory = GatewayDirectory(store: store, negativeCacheDuration: configuration.registryNegativeCacheDuration,
                                         maximumMissedTokens: configuration.registryMaximumMissedTokens,
                                         maximumMissedNames: configuration.registryMaximumMissedNames)
        self.directory = directory
        // Several nodes on one store: leases and wake-ups (NodeLeases); one node: commits go
        // straight to the connected devices.
        let leases = (store as? any GatewayCoordination).map {
            NodeLeases(coordination: $0, clock: configuration.clock, leaseDuration: configuration.deviceLeaseDuration, logger: configuration.logger)
        }
        let hub = DeviceHub(metrics: metrics, leases: leases)
        self.hub = hub
        let keys = configuration.rateLimiterMaximumKeys
        self.rateLimiter = DeviceRateLimiter(perSecond: configuration.deviceRateLimitPerSecond, burst: configuration.deviceRateLimitBurst,
                                             maximumKeys: keys)
        self.newDevicesPerSource = DeviceRateLimiter(perSecond: configuration.newDevicesPerSourcePerSecond,
                                                     burst: configuration.newDevicesPerSourceBurst, maximumKeys: keys)
        self.newDevices = DeviceRateLimiter(perSecond: configuration.newDevicesPerSecond, burst: configuration.newDevicesBurst, maximumKeys: keys)
        self.deviceRequests = DeviceRateLimiter(perSecond: configuration.deviceRequestRateLimitPerSecond,
                                                burst: configuration.deviceRequestRateLimitBurst, maximumKeys: keys)
        self.committer = PushCommitter(store: store, clock: configuration.clock, logger: configuration.logger, metrics: metrics,
                                       maximumQueued: configuration.maximumQueuedPushes,
                                       maximumBatch: (pushes: configuration.maximumPushesPerCommit,
                                                      acknowledgements: configuration.maximumAcknowledgementsPerCommit)) { stored in
            if leases != nil { hub.wake(Set(stored.map(\.push.deviceID))) } else { hub.deliver(stored) }
        }
    }

    /// Blocking: expires, then prunes in bounded transactions (`Gateway.runMaintenance`). With
    /// several nodes, on one node at a time (the store's maintenance lock; a node that finds it
    /// taken skips this run).
    func maintain() throws -> GatewayMaintenanceReport {
        if let coordination = hub.leases?.coordination {
            return try coordination.exclusively { try maintainHere() } ?? GatewayMaintenanceReport(expired: 0, pruned: 0)
        }
        return try maintainHere()
    }

    private func maintainHere() throws -> GatewayMaintenanceReport {
        let now = clock.nowMilliseconds()
        // In batches, each its own short transaction, so commits of new pushes interleave.
        func batches(_ step: () throws -> Int) rethrows -> Int {
            var total = 0
            while true {
                let n = try step()
                total += n
                if n < configuration.maintenanceBatchSize { return total }
            }
        }
        let expired = try batches { try store.expirePushes(now: now, limit: configuration.maintenanceBatchSize) }
        let before = now.saturatingSubtract(configuration.pushRetention.milliseconds)
        let pruned = try batches { try store.prunePushes(finishedBefore: before, limit: configuration.maintenanceBatchSize) }
        if expired > 0 || pruned > 0 {
            logger.info("maintenance", metadata: ["expired": "\(expired)", "pruned": "\(pruned)"])
        }
        return GatewayMaintenanceReport(expired: expired, pruned: pruned)
    }

    /// Runs blocking store work off the event loop.
    func blocking<T: Sendable>(on loop: any EventLoop, _ body: @escaping @Sendable () throws -> T) -> EventLoopFuture<T> {
        threadPool.runIfActive(eventLoop: loop, body)
    }

    /// Runs a device-channel registry write of `channel`'s connection on the registry queue
    /// (see `registryQueue`). Fails at once with `RegistryBusy` when the queue holds
    /// `deviceRegistryMaximumQueued` items; a write whose connection closed while it waited is
    /// skipped (`RegistryBusy` too: nobody is left to answer).
    func registry<T: Sendable>(for channel: any Channel, _ body: @escaping @Sendable () throws -> T) -> EventLoopFuture<T> {
        let loop = channel.eventLoop
        guard registryQueued.add(1, ordering: .relaxed).newValue <= configuration.deviceRegistryMaximumQueued else {
            registryQueued.subtract(1, ordering: .relaxed)
            return loop.makeFailedFuture(RegistryBusy())
        }
        let promise = loop.makePromise(of: T.self)
        registryQueue.async {
            defer { self.registryQueued.subtract(1, ordering: .relaxed) }
            guard channel.isActive else { return promise.fail(RegistryBusy()) }
            promise.completeWith(Result { try body() })
        }
        return promise.futureResult
    }

    /// The registry queue is full (or the connection closed before its turn).
    struct RegistryBusy: Error {}

    /// Blocks until every registry write queued so far has run and completed its promise. The
    /// gateway calls it at shutdown, after closing the connections and before stopping the
    /// event loops: a write still queued then completed its promise on a loop already shut down
    /// ("Cannot schedule tasks on an EventLoop that has already shut down": a crash under
    /// SWIFTNIO_STRICT, seen once in a test run). Never on an event loop.
    func drainRegistry() {
        registryQueue.sync {}
    }

    /// The stored expiry of a push accepted at `now`.
    func expiresAt(_ expiration: Expiration?, now: EpochMilliseconds) -> EpochMilliseconds {
        TidingsGateway.expiresAt(expiration, now: now,
                                 limit: configuration.maximumStorageDuration.milliseconds)
    }
}

/// When a push accepted at `now` stops being deliverable: the header's time, at most `limit`
/// after `now`; `0` or a past time means now (deliver once, never store); no header means `limit`.
func expiresAt(_ expiration: Expiration?, now: EpochMilliseconds, limit: EpochMilliseconds) -> EpochMilliseconds {
    let latest = now + limit
    guard let expiration else { return latest }
    if expiration.isImmediate { return now }
    let (ms, overflow) = expiration.epochSeconds.multipliedReportingOverflow(by: 1000)
    if overflow { return expiration.epochSeconds > 0 ? latest : now }
    return max(now, min(ms, latest))
}

extension Duration {
    /// Whole milliseconds, for the store's `EpochMilliseconds` arithmetic.
    /// Saturating: a duration past `Int64.max` milliseconds (about 292 million years) is that.
    var milliseconds: EpochMilliseconds { saturatingCount(perSecond: 1000) }
}
