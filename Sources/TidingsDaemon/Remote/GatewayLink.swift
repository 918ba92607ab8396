import Crypto
import DequeModule
import Foundation
import Logging
import TidingsCore
import TidingsDevice
import TidingsEngine
import TidingsSQLite
import TidingsStorage

/// Where the daemon's push gateway is (its device channel) and how to trust it.
public struct GatewayLinkConfiguration: Sendable {
    /// The gateway's device-channel addresses: one, or one per gateway node when several
    /// share a database (docs/scaling.md, "Failover"). The link connects to the first and, when
    /// a connection ends or cannot be made, moves to the next (`GatewayFailover`).
    public var addresses: [GatewayAddress]
    /// The first address's host and port.
    public var host: String {
        get { addresses[0].host }
        set { addresses[0].host = newValue }
    }
    public var port: Int {
        get { addresses[0].port }
        set { addresses[0].port = newValue }
    }
    /// PEM certificates to trust, for every address (each checked against its own host);
    /// `tidings serve` passes the gateway's self-signed one.
    public var trustRootPaths: [String]
    /// The environment the daemon's apps get tokens for (`aps-environment`).
    public var environment: APNsEnvironment = .development
    /// Reconnection backoff: doubled after each attempt, up to the maximum; back to the initial
    /// one once a gateway welcomed the device.
    public var initialBackoff: Duration = .milliseconds(100)
    public var maximumBackoff: Duration = .seconds(30)
    /// The clock the reconnection backoff sleeps on: the system's (the network's time, not the
    /// engine's clock); tests inject one.
    public var reconnectClock: any WallClock = SystemWallClock()
    /// Delivery events the gateway answered with an error (not recorded, `TooManyRequests`)
    /// are sent again this long after, on the same connection (docs/device-protocol.md).
    public var eventRetryInterval: Duration = .seconds(5)
    /// At most this many of one app's received pushes go to the engine in one hand-off (one
    /// group commit of their delivered-list writes, one processed mark); more wait for the next.
    public var maximumHandOff: Int = 1024
    /// Pushes received (durable in the inbox, acknowledged) and not yet through their hand-off
    /// to the engine, at most, over all apps, and their payload bytes. At either the link takes
    /// no more from the connection, which then stops reading (TCP pushes back on the gateway,
    /// which sends at most its window unacknowledged), until hand-offs make room. A single push
    /// larger than the byte bound is taken alone, when nothing else is queued.
    public var maximumQueuedPushes: Int = 10_000
    public var maximumQueuedPayloadBytes: Int = 16 << 20
    /// Delivery events the gateway has still to confirm, plus pushes queued for a hand-off (each
    /// becomes a `presented` event), at most: past it receipt takes nothing more until the
    /// gateway has confirmed events. The inbox keeps at most
    /// `RemoteInboxDefaults.maximumPendingEvents` (10,000) and drops the oldest past it, so
    /// without this a device that presents faster than its events reach the gateway (a
    /// backlog of 100,000 after a reconnect) lost presented events — 44 % of them, measured.
    /// The rest of that bound is room for `answered` events.
    public var maximumUnconfirmedEvents: Int = 8_000

    public init(host: String, port: Int, trustRootPaths: [String]) {
        self.init(addresses: [GatewayAddress(host: host, port: port)], trustRootPaths: trustRootPaths)
    }

    /// Several addresses (at least one), tried in this order.
    public init(addresses: [GatewayAddress], trustRootPaths: [String]) {
        precondition(!addresses.isEmpty, "a gateway link needs an address")
        self.addresses = addresses
        self.trustRootPaths = trustRootPaths
    }

    /// `HOST:PORT` (`[::1]:2196` for IPv6), or several separated by commas (`a:2196,b:2196`).
    public init?(address: String, trustRootPaths: [String]) {
        guard let addresses = GatewayAddress.list(address) else { return nil }
        self.init(addresses: addresses, trustRootPaths: trustRootPaths)
    }
}

/// The daemon on the gateway (docs/remote-notifications.md): keeps a device-channel
/// connection open (device key in the data directory, reconnecting with backoff), makes
/// every push durable in the inbox before acknowledging it, hands pushes to the engine in
/// order, asks for device tokens, and reports presented/answered back to the gateway.
public actor GatewayLink: RemoteNotificationLink {
    private enum Phase {
        case idle
        case connecting
        case connected(DeviceConnection)
    }

    public let configuration: GatewayLinkConfiguration
    private let engine: NotificationEngine
    private let inbox: any RemoteInboxStore
    private let deviceKey: P256.Signing.PrivateKey
    private let clock: any WallClock
    private let logger: Logger
    private var phase: Phase = .idle
    private var lastError: String = "not connected yet"
    private var connectWaiters: [CheckedContinuation<DeviceConnection?, Never>] = []
    /// Delivery events are kept in the inbox until the gateway confirms them durable, and sent
    /// again on every connection until then. Whether a connection's first read of the inbox
    /// (`loadEvents`) runs: nothing is sent on it before.
    private var loadingEvents = false
    /// Events still to be sent on this connection, oldest first: what the inbox holds when a
    /// connection is made (`loadEvents`), then each event as it is kept — the sender does not
    /// read back from the inbox what it has in memory — and each `presented` event of a hand-off
    /// under way as it is shown (kept later by the hand-off's mark: `unkept`).
    private var outbox: Deque<PendingDeliveryEvent> = []
    /// Events sent on this connection and not answered yet, and those refused that wait for
    /// `eventRetryInterval`.
    private var eventsInFlight = 0
    /// `events` messages sent on the current connection and not yet answered.
    private(set) var messagesInFlight = 0
    private var eventsToRetry: [PendingDeliveryEvent] = []
    /// Events the gateway confirmed that the inbox still holds: forgotten with the next
    /// hand-off's write (`markProcessed(_:keeping:clearing:)`), or in a write of their own
    /// when no hand-off is under way (`clearConfirmed`).
    private var confirmedEvents: [PendingDeliveryEvent] = []
    private var clearingEvents = false
    /// Counts connections: what a connection gone left in flight or waiting for a retry is not
    /// counted or sent again by its sender (the next connection loads it from the inbox).
    private var connectionNumber = 0
    /// The connection whose sender has loaded the outbox from the inbox (`loadEvents`).
    private var loadedConnection = -1
    /// Events kept and not confirmed: bounds receipt with `maximumUnconfirmedEvents`, what a
    /// previous run left in the inbox included (read when the link starts).
    private var unconfirmedEvents: Int { outbox.count + eventsInFlight + eventsToRetry.count + eventsAwaitingReload }
    /// What the last connection had in flight or refused when a new one came: in the inbox,
    /// and counted here until `loadEvents` has read them back into the outbox.
    private var eventsAwaitingReload = 0
    /// Events sent and not confirmed at most: the gateway's default
    /// `deviceMaximumPendingEvents`, so none is refused for that. A message goes as soon as
    /// there is room (a sliding window, not a window sent whole and awaited whole): with 256 a
    /// whole window at a time, a 100,000 backlog presented at 4,000 pushes/s, paced by its
    /// events; with 1,024, 7,800/s (docs/benchmarks.md, "Remote, in processes").
    static let eventWindow = 1_024
    /// Apps that got pushes while they had no worker: `processLoop` starts one for each.
    private let workers: AsyncStream<String>.Continuation
    private let workerStream: AsyncStream<String>
    /// Per app, the pushes received (durable in the inbox) that its worker has still to hand
    /// to the engine, in the order received; `recovering`: left unprocessed by a previous run.
    private var appQueues: [String: Deque<(push: RemotePush, recovering: Bool)>] = [:]
    /// What `appQueues` and the hand-offs under way hold: bounded by `maximumQueuedPushes`
    /// and `maximumQueuedPayloadBytes`.
    private var queued = (pushes: 0, payloadBytes: 0)
    /// The largest `queued` seen, and whether receipt waits for room now (tests).
    private(set) var mostQueued = (pushes: 0, payloadBytes: 0)
    private(set) var isWaitingForRoom = false
    /// What a previous run left unprocessed is queued; new pushes are taken only after it.
    private var recovered = false
    /// Tasks waiting for room in the queue or the end of recovery (`waitForChange`).
    private var changeWaiters: [CheckedContinuation<Void, Never>] = []
    /// Counts `wakeWaiters` calls: whether something changed while receipt was away from the actor.
    private var changes = 0
    /// Per app whose hand-off runs, the `presented` events the engine reported during it: sent
    /// at once, and kept in the inbox with the hand-off's processed mark, in one write, unless
    /// the gateway confirmed them before (`processApp`).
    private var handOffEvents: [String: [PendingDeliveryEvent]] = [:]
    /// Events of pushes whose hand-off is under way, sent and not yet kept in the inbox (in the
    /// outbox, in flight or waiting for a retry on the current connection), each with the
    /// order it was shown in. Their pushes are not marked processed yet: a crash leaves them
    /// unprocessed, recovery finds them in the delivered list and reports them again.
    private var unkept: [PendingDeliveryEvent: Int] = [:]
    private var shownOrder = 0
    /// Events the gateway confirmed before their hand-off's mark: the mark does not keep them
    /// (no inbox row to write, then to delete).
    private var confirmedUnkept: Set<PendingDeliveryEvent> = []

    /// Opens (creating) the inbox `remote.sqlite` (unless `inbox` is given) and the device key
    /// `device-key.pem` in `dataDirectory`.
    public init(configuration: GatewayLinkConfiguration, dataDirectory: String, engine: NotificationEngine,
                inbox: (any RemoteInboxStore)? = nil,
                clock: any WallClock = SystemWallClock(), logger: Logger = Logger(label: "tidings.remote")) throws {
        self.configuration = configuration
        self.engine = engine
        self.inbox = try inbox ?? SQLiteRemoteInbox(path: dataDirectory + "/remote.sqlite")
        self.deviceKey = try DeviceKeyFile.loadOrCreate(path: dataDirectory + "/device-key.pem")
        self.clock = clock
        self.logger = logger
        (workerStream, workers) = AsyncStream.makeStream()
    }

    /// The gateway's id for this device.
    public nonisolated var deviceID: String { DeviceChallenge.deviceID(publicKey: deviceKey.publicKey) }

    /// Runs until cancelled: hands the engine what was received but not processed before a
    /// crash, then everything that arrives, while it connects and reconnects.
    public func run() async {
        // What a previous run left for the gateway counts against `maximumUnconfirmedEvents`
        // before anything is received (each connection reads the inbox's events again).
        await loadEvents()
        await withDiscardingTaskGroup { group in
            group.addTask { await self.processLoop() }
            group.addTask { await self.recover() }
            group.addTask { await self.connectLoop() }
            group.addTask { await self.pruneLoop() }
        }
        if case .connected(let connection) = phase { await connection.close() }
    }

    /// Queues what a previous run received and did not process (read back from the inbox at
    /// start, a page at a time as the queue has room; a push whose notification is already in
    /// the delivered list is not shown again), before anything new is taken behind it.
    private func recover() async {
        defer {
            recovered = true
            wakeWaiters()
        }
        var after: RemoteInboxPosition?
        do {
            while await waitForRoom() {
                let limit = min(configuration.maximumQueuedPushes - queued.pushes, configuration.maximumHandOff)
                let page = try await inbox.unprocessed(after: after, limit: limit)
                if page.isEmpty { return }
                var taken: [RemotePush] = []
                var bytes = 0
                for entry in page {
                    bytes += entry.push.payload.count
                    if queued.payloadBytes + bytes > configuration.maximumQueuedPayloadBytes, !(taken.isEmpty && queued.pushes == 0) { break }
                    taken.append(entry.push)
                    after = entry.position
                }
                if taken.isEmpty {
                    // The next push does not fit beside what is queued: after the next hand-off.
                    await waitForChange()
                    continue
                }
                enqueue(taken, recovering: true)
            }
        } catch {
            logger.error("could not read the pushes left unprocessed", metadata: ["error": "\(error)"])
        }
    }

    /// Waits until the queue has room (true) or the task is cancelled (false).
    private func waitForRoom() async -> Bool {
        while queued.pushes >= configuration.maximumQueuedPushes || queued.payloadBytes >= configuration.maximumQueuedPayloadBytes
                || eventRoom <= 0 {
            if Task.isCancelled { return false }
            if eventRoom <= 0 { sendPendingEvents() }
            await waitForChange()
        }
        return !Task.isCancelled
    }

    /// Pushes receipt may still take before their `presented` events, with those unconfirmed
    /// and those of the queued pushes, pass `maximumUnconfirmedEvents` (an event sent before
    /// its push's mark counts once: it is among the unconfirmed and its push among the queued).
    private var eventRoom: Int { configuration.maximumUnconfirmedEvents - (unconfirmedEvents - unkept.count) - queued.pushes }

    /// Returns when a hand-off has finished or recovery has ended (or the task is cancelled).
    private func waitForChange() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { changeWaiters.append($0) }
        } onCancel: {
            Task { await self.wakeWaiters() }
        }
    }

    private func wakeWaiters() {
        changes &+= 1
        let waiters = changeWaiters
        changeWaiters = []
        for waiter in waiters { waiter.resume() }
    }

    /// Connects to one address after another (`GatewayFailover`): the gateway node it reaches
    /// takes over the device's lease and sends what was not acknowledged.
    private func connectLoop() async {
        var failover = GatewayFailover(addresses: configuration.addresses, initialBackoff: configuration.initialBackoff,
                                       maximumBackoff: configuration.maximumBackoff)
        while !Task.isCancelled {
            phase = .connecting
            let address = failover.current
            let deviceConfiguration = DeviceClientConfiguration(host: address.host, port: address.port, deviceKey: deviceKey,
                                                                trustRootPaths: configuration.trustRootPaths)
            do {
                let connection = try await DeviceConnection.connect(deviceConfiguration, logger: logger)
                failover.connected()
                await connected(connection, to: address)
                await withTaskCancellationHandler {
                    await consume(connection)
                } onCancel: {
                    Task { await connection.close() }
                }
                lastError = "the connection to the gateway at \(address) closed"
            } catch {
                lastError = "cannot reach the push gateway at \(address): \(error)"
                logger.debug("gateway connection failed", metadata: ["gateway": "\(address)", "error": "\(error)"])
            }
            phase = .idle
            for waiter in connectWaiters { waiter.resume(returning: nil) }
            connectWaiters.removeAll()
            if Task.isCancelled { break }
            let delay = failover.failed()
            let clock = configuration.reconnectClock
            try? await clock.sleep(until: clock.now.addingTimeInterval(Double(delay.saturatingCount(perSecond: 1_000_000)) / 1e6))
        }
    }

    private func connected(_ connection: DeviceConnection, to address: GatewayAddress) async {
        logger.info("connected to the push gateway", metadata: ["device": "\(connection.deviceID)", "gateway": "\(address)"])
        connectedAddress = address
        // Removals first: a reinstalled app's new registration must come after them.
        for bundle in (try? await inbox.removals()) ?? [] {
            do {
                try await connection.removeApp(topic: bundle)
                try await inbox.clearRemoval(bundle)
            } catch {
                logger.warning("could not tell the gateway an app was removed", metadata: ["app": "\(bundle)", "error": "\(error)"])
            }
        }
        connectionNumber &+= 1
        // Events sent before their mark that the last connection had in flight or refused are in
        // no inbox to load them from: back in the outbox, in the order they were shown.
        let waiting = Set(outbox)
        let resend = unkept.filter { !waiting.contains($0.key) }.sorted { $0.value < $1.value }.map(\.key)
        eventsAwaitingReload += max(0, eventsInFlight + eventsToRetry.count - resend.count)
        outbox.append(contentsOf: resend)
        eventsInFlight = 0
        messagesInFlight = 0
        eventsToRetry = []
        phase = .connected(connection)
        sendPendingEvents()
        for waiter in connectWaiters { waiter.resume(returning: connection) }
        connectWaiters.removeAll()
    }

    /// Receipt, a burst at a time: everything the device channel read together (and what
    /// arrived while the previous burst was being committed) is made durable in one inbox
    /// transaction, then acknowledged together, then queued for the engine as it is — the
    /// inbox is not read back. Redeliveries are acknowledged again and not queued twice.
    /// A burst is taken only as far as the queue has room (`maximumQueuedPushes`,
    /// `maximumQueuedPayloadBytes`); the rest waits in the connection, which stops reading.
    private func consume(_ connection: DeviceConnection) async {
        do {
            while !recovered {
                if Task.isCancelled { return }
                await waitForChange()
            }
            while true {
                isWaitingForRoom = true
                let room = await waitForRoom()
                isWaitingForRoom = false
                guard room else { break }
                let changesBefore = changes
                guard let burst = try await connection.pushes.take(
                    maximumPushes: min(configuration.maximumQueuedPushes - queued.pushes, eventRoom),
                    maximumPayloadBytes: configuration.maximumQueuedPayloadBytes - queued.payloadBytes,
                    firstAlways: queued.pushes == 0) else { break }
                if burst.isEmpty {
                    // The next push does not fit beside what is queued: after the next hand-off —
                    // unless one finished while `take` ran with the room measured before it (its
                    // wake-up came before this wait; waiting now would wait for another).
                    if changes == changesBefore {
                        isWaitingForRoom = true
                        await waitForChange()
                        isWaitingForRoom = false
                    }
                    continue
                }
                var pushes: [RemotePush] = []
                pushes.reserveCapacity(burst.count)
                for push in burst {
                    if let typed = RemotePush(push) {
                        pushes.append(typed)
                    } else {
                        logger.warning("dropped a push whose topic does not fit its push type", metadata: ["apns-id": "\(push.apnsID)"])
                    }
                }
                let inserted: [Bool]
                do {
                    inserted = try await inbox.receive(pushes, at: clock.now)
                } catch {
                    // Not durable: not acknowledged; the gateway sends them again on the next connection.
                    logger.error("could not store pushes; reconnecting", metadata: ["error": "\(error)", "pushes": "\(pushes.count)"])
                    await connection.close()
                    return
                }
                connection.acknowledge(burst)
                enqueue(zip(pushes, inserted).compactMap { $1 ? $0 : nil }, recovering: false)
            }
        } catch {
            logger.debug("device channel ended", metadata: ["error": "\(error)"])
        }
    }

    /// Puts pushes behind their apps' earlier ones, starting a worker for an app that has none.
    private func enqueue(_ pushes: [RemotePush], recovering: Bool) {
        queued.pushes += pushes.count
        queued.payloadBytes += pushes.reduce(0) { $0 + $1.payload.count }
        mostQueued = (max(mostQueued.pushes, queued.pushes), max(mostQueued.payloadBytes, queued.payloadBytes))
        for push in pushes {
            let bundle = push.bundleIdentifier
            if appQueues[bundle] == nil {
                appQueues[bundle] = []
                workers.yield(bundle)
            }
            appQueues[bundle]!.append((push, recovering))
        }
    }

    /// Processed pushes deleted per inbox write when pruning: receipt's writes wait for at
    /// most one such batch, never for a month of deletions.
    static let pruneBatch = 1_000

    /// Deletes processed pushes older than 31 days (the gateway keeps a push at most 30, so
    /// it never sends one again after that), at start and then once an hour of the link's
    /// clock, in batches of `pruneBatch` — in a task of its own, beside receipt.
    private func pruneLoop() async {
        while !Task.isCancelled {
            let now = clock.now
            let cutoff = now.addingTimeInterval(-RemoteInboxDefaults.processedRetention)
            do {
                while try await inbox.prune(before: cutoff, limit: Self.pruneBatch) == Self.pruneBatch, !Task.isCancelled {}
            } catch {
                logger.warning("could not prune the push inbox", metadata: ["error": "\(error)"])
            }
            do { try await clock.sleep(until: now.addingTimeInterval(3600)) } catch { return }
        }
    }

    /// Runs one worker per app with pushes queued: apps side by side, so one app's slow
    /// service extension holds up only that app's pushes.
    private func processLoop() async {
        await withDiscardingTaskGroup { group in
            for await bundle in workerStream {
                group.addTask { await self.processApp(bundle) }
            }
        }
    }

    /// Hands one app's queued pushes to the engine, in order, as many at a time as have
    /// arrived (up to `maximumHandOff`): the engine records them in one group commit and shows
    /// each once durable; then they are marked processed together, with the `presented`
    /// events reported meanwhile, in one inbox write — both or neither: a push left unmarked
    /// by a crash is recovered, found in the delivered list and reported then.
    ///
    /// Hand-offs overlap (at most `handOffsUnderWay`): the next goes to the engine once this
    /// one's writes are queued and its turn to be shown is taken (`receiveRemote`'s
    /// `whenRecorded`), so it is recorded while this one waits for its commit, and shown after
    /// it; a hand-off's mark is written while the next is with the engine. Marks go one at a
    /// time, in order (each waits for the one before), so events are kept and sent in the
    /// order the pushes were shown. A push counts against the queue's bounds, and stays in the
    /// delivered list through trims (`holdListed`), until its mark is done. Recovered pushes
    /// (received before a crash, checked against the delivered list) go one hand-off at a time.
    private func processApp(_ bundle: String) async {
        handOffEvents[bundle] = []
        await withTaskGroup(of: Void.self) { handOffs in
            var underWay = 0
            var last: HandOffProgress?
            while true {
                let first = appQueues[bundle]?.first
                if first == nil, underWay == 0 {
                    appQueues[bundle] = nil
                    // Each mark took what was reported before it; one reported after the last
                    // (sent already) is kept now, unless confirmed meanwhile.
                    let left = unconfirmedSent(handOffEvents.removeValue(forKey: bundle) ?? [])
                    if !left.isEmpty { Task { await self.keepSent(left) } }
                    return
                }
                // Nothing queued (one under way frees room, and receipt may queue more meanwhile),
                // as many under way as may be, or a recovered push behind one: look again after one.
                guard let first, underWay < Self.handOffsUnderWay, !(first.recovering && underWay > 0) else {
                    await handOffs.next()
                    underWay -= 1
                    continue
                }
                var batch: [RemotePush] = []
                // Taken from the queue in place (a copy of it would be copied again on the first removal).
                while let next = appQueues[bundle]?.first, next.recovering == first.recovering, batch.count < configuration.maximumHandOff {
                    batch.append(appQueues[bundle]!.removeFirst().push)
                }
                let progress = HandOffProgress(), previous = last
                last = progress
                handOffs.addTask { await self.handOff(batch, of: bundle, recovering: first.recovering, progress: progress, after: previous) }
                underWay += 1
                // The next may go to the engine once this one is recorded (a recovered one: once it is done).
                if first.recovering { await progress.wait(for: .marked) } else { await progress.wait(for: .recorded) }
            }
        }
    }

    /// `events` messages that may be in flight while one that is not full goes: with one, the
    /// events kept during a round trip waited for its answer (≈ 4 ms p50 under load); with two,
    /// they go while the first is answered.
    static let partFullMessagesInFlight = 2

    /// Hand-offs of one app under way at once: one waiting for its commit or being marked,
    /// one being recorded.
    static let handOffsUnderWay = 2

    /// One hand-off: to the engine, then its mark after the previous hand-off's.
    private func handOff(_ batch: [RemotePush], of bundle: String, recovering: Bool, progress: HandOffProgress, after previous: HandOffProgress?) async {
        await engine.holdListed(bundle, count: batch.count)
        var fresh = batch
        if recovering {
            // Received before a crash: one already in the delivered list was shown; report it, do not show it again.
            fresh = []
            var shown: [(push: RemotePush, at: Int64)] = []
            for push in batch {
                if let date = await engine.deliveredRemoteDate(push) {
                    shown.append((push, DeviceEventItem.occurredAt(date)))
                } else {
                    fresh.append(push)
                }
            }
            // Dated when they were delivered before the crash, not now.
            await presented(shown.map(\.push), occurredAt: shown.map(\.at))
        }
        if !fresh.isEmpty {
            let outcomes = await engine.receiveRemote(fresh, whenRecorded: { progress.reached(.recorded) })
            if logger.logLevel <= .debug {
                for (push, outcome) in zip(fresh, outcomes) {
                    logger.debug("remote notification", metadata: ["apns-id": "\(push.apnsID)", "outcome": "\(outcome)"])
                }
            }
        }
        progress.reached(.recorded)
        await previous?.wait(for: .marked)
        // This hand-off's events, and any of the next one's shown meanwhile (kept early: still
        // reported again if a crash leaves the next one unmarked); all sent already, those the
        // gateway has confirmed are not kept.
        let events = unconfirmedSent(handOffEvents[bundle] ?? [])
        handOffEvents[bundle] = []
        let confirmed = confirmedEvents
        confirmedEvents = []
        await mark(batch, keeping: events, clearing: confirmed)
        await engine.releaseListed(bundle, count: batch.count)
        progress.reached(.marked)
    }

    /// A hand-off's processed mark: its pushes, the `presented` events reported during it that
    /// the gateway has not confirmed yet (sent already: kept, so that they are sent again on
    /// another connection or after a restart) and the events the gateway confirmed since the
    /// last write (forgotten), in one inbox write; then its pushes leave the queue's count.
    private func mark(_ batch: [RemotePush], keeping events: [PendingDeliveryEvent], clearing confirmed: [PendingDeliveryEvent]) async {
        do {
            try await inbox.markProcessed(batch, keeping: events, clearing: confirmed)
            settle(events, kept: true)
        } catch {
            settle(events, kept: false)
            confirmedEvents = confirmed + confirmedEvents
            // Not shown again in this run (nothing reads the inbox back while it runs);
            // after a restart the delivered-list check keeps them from showing twice, and
            // reports them presented — the normal case at a stop (the write is cancelled),
            // so not an error then. Their events were sent on the current connection.
            logger.log(level: error is CancellationError ? .debug : .error, "could not mark pushes processed",
                       metadata: ["error": "\(error)", "pushes": "\(batch.count)"])
        }
        queued.pushes -= batch.count
        queued.payloadBytes -= batch.reduce(0) { $0 + $1.payload.count }
        wakeWaiters()
        if queued.pushes == 0 { await clearConfirmed() }  // no hand-off left to take them
    }

    // MARK: RemoteNotificationLink

    private func connection() async throws(NotificationError) -> DeviceConnection {
        switch phase {
        case .connected(let connection): return connection
        case .connecting:
            let connection = await withCheckedContinuation { connectWaiters.append($0) }
            if let connection { return connection }
        case .idle: break
        }
        throw NotificationError(.daemonUnavailable, "remote notifications are unavailable: \(lastError)")
    }

    public func deviceToken(for bundleIdentifier: String) async throws(NotificationError) -> [UInt8] {
        let connection = try await connection()
        do {
            return try await connection.requestToken(topic: bundleIdentifier, environment: configuration.environment).bytes
        } catch {
            throw NotificationError(.daemonUnavailable, "the push gateway gave no device token for \(bundleIdentifier): \(error)")
        }
    }

    public func unregister(_ bundleIdentifier: String) async throws(NotificationError) {
        do { try await inbox.addRemoval(bundleIdentifier) } catch {
            throw NotificationError(.invalidRequest, "could not record the unregistration: \(error)")
        }
        await sendRemoval(bundleIdentifier)
    }

    public func appRemoved(_ bundleIdentifier: String) async {
        do { try await inbox.addRemoval(bundleIdentifier) } catch {
            logger.error("could not record an app removal for the gateway", metadata: ["app": "\(bundleIdentifier)", "error": "\(error)"])
        }
        await sendRemoval(bundleIdentifier)
    }

    private func sendRemoval(_ bundle: String) async {
        guard case .connected(let connection) = phase else { return } // sent on the next connection
        do {
            try await connection.removeApp(topic: bundle)
            try await inbox.clearRemoval(bundle)
        } catch {
            logger.warning("the gateway did not confirm an app removal; retrying on the next connection", metadata: ["app": "\(bundle)", "error": "\(error)"])
        }
    }

    public func presented(_ push: RemotePush) async {
        await presented([push])
    }

    /// While their app's hand-offs are under way the events are sent at once and kept by the
    /// next processed mark (one inbox write) unless the gateway confirmed them by then: the
    /// push is not marked processed before, so a crash in between reports it again after the
    /// restart (recovery finds it in the delivered list). Others are kept, then sent.
    /// Each event carries when it happened (this clock), which the gateway records.
    public func presented(_ pushes: [RemotePush]) async {
        await presented(pushes, occurredAt: [Int64](repeating: DeviceEventItem.occurredAt(clock.now), count: pushes.count))
    }

    /// `presented(_:)` with each push's time (milliseconds since 1970).
    private func presented(_ pushes: [RemotePush], occurredAt times: [Int64]) async {
        var now: [PendingDeliveryEvent] = []
        var sent = 0
        for (push, at) in zip(pushes, times) {
            let event = PendingDeliveryEvent(event: DeviceDeliveryEvent.presented.rawValue, apnsID: push.apnsID, sequence: push.sequence, occurredAt: at)
            if handOffEvents[push.bundleIdentifier] != nil {
                guard unkept[event] == nil, !confirmedUnkept.contains(event) else { continue }  // out already
                handOffEvents[push.bundleIdentifier]!.append(event)
                unkept[event] = shownOrder
                shownOrder &+= 1
                outbox.append(event)
                sent += 1
            } else {
                now.append(event)
            }
        }
        if sent > 0 { sendPendingEvents() }
        await report(now)
    }

    /// Of events sent before their mark, those the mark is to keep in the inbox: not confirmed
    /// yet (the confirmed ones are forgotten here). They stay sent-and-unkept while written (a
    /// connection that ends meanwhile puts them back in the outbox); `settle` ends that.
    private func unconfirmedSent(_ events: [PendingDeliveryEvent]) -> [PendingDeliveryEvent] {
        events.filter { event in confirmedUnkept.remove(event) == nil && unkept[event] != nil }
    }

    /// After the write that kept `unconfirmedSent` events (or failed to): they are like any other
    /// event from here — one the gateway confirmed during the write is forgotten with a later
    /// write; one the write did not keep was sent on the current connection, and its push,
    /// left unprocessed, is reported again after a restart.
    private func settle(_ events: [PendingDeliveryEvent], kept: Bool) {
        for event in events where unkept.removeValue(forKey: event) == nil {
            if confirmedUnkept.remove(event) != nil, kept { confirmedEvents.append(event) }
        }
    }

    /// Keeps events that were sent already (`unconfirmedSent`), in a write of their own.
    private func keepSent(_ events: [PendingDeliveryEvent]) async {
        do {
            try await inbox.addPendingEvents(events)
            settle(events, kept: true)
        } catch {
            settle(events, kept: false)
            logger.warning("could not keep delivery events", metadata: ["events": "\(events.count)", "error": "\(error)"])
        }
    }

    public func answered(apnsID: String, sequence: Int64) async {
        await report([PendingDeliveryEvent(event: DeviceDeliveryEvent.answered.rawValue, apnsID: apnsID, sequence: sequence,
                                           occurredAt: DeviceEventItem.occurredAt(clock.now))])
    }

    /// Durable first (the inbox keeps them across reconnects and daemon restarts, one write
    /// for all), then sent; forgotten once the gateway confirms them. At least once:
    /// recording an event twice at the gateway changes nothing.
    private func report(_ events: [PendingDeliveryEvent]) async {
        guard !events.isEmpty else { return }
        do {
            try await inbox.addPendingEvents(events)
        } catch {
            logger.warning("could not keep delivery events", metadata: ["events": "\(events.count)", "error": "\(error)"])
            sendUnkept(events)
            return
        }
        kept(events)
    }

    /// Events now in the inbox: counted against `maximumUnconfirmedEvents` and sent.
    private func kept(_ events: [PendingDeliveryEvent]) {
        guard !events.isEmpty else { return }
        outbox.append(contentsOf: events)
        sendPendingEvents()
    }

    /// Events the inbox could not keep: sent once on the current connection, if any.
    private func sendUnkept(_ events: [PendingDeliveryEvent]) {
        guard !events.isEmpty, case .connected(let connection) = phase else { return }
        for e in events { connection.report(DeviceDeliveryEvent(rawValue: e.event), apnsID: e.apnsID, sequence: e.sequence, occurredAt: e.occurredAt) }
    }

    /// On a new connection, before its sender sends: the outbox becomes what the inbox holds —
    /// events of a previous run or connection, confirmed ones forgotten first — followed by
    /// those kept while it was read. What the last connection had in flight or waiting is in
    /// there too.
    ///
    /// While the inbox is read, the outbox keeps what it holds (all of it is in the inbox too:
    /// an event goes in the outbox once kept) and nothing is sent from it, so what waits keeps
    /// counting against `maximumUnconfirmedEvents`; events kept meanwhile are appended behind.
    /// (It used to be emptied first: receipt saw no events waiting for as long as the read
    /// took, and once took a whole bound of pushes in that window.)
    private func loadEvents() async {
        await clearConfirmed()
        let before = outbox.count
        // Sent before their mark: in no inbox yet (or kept by a write the read may not see).
        let sentUnkept = Set(outbox.filter { unkept[$0] != nil })
        let reloading = eventsAwaitingReload
        do {
            let stored = try await inbox.pendingEvents(limit: RemoteInboxDefaults.maximumPendingEvents)
            let storedSet = Set(stored)
            // Behind them: what was kept meanwhile, and events sent before their mark (in no inbox yet).
            let keptMeanwhile = outbox.enumerated().filter { index, event in
                (index >= before || sentUnkept.contains(event)) && !storedSet.contains(event)
            }.map(\.element)
            outbox = Deque(stored)
            outbox.append(contentsOf: keptMeanwhile)
        } catch {
            logger.warning("could not read the delivery events kept for the gateway", metadata: ["error": "\(error)"])
        }
        // Read back, or (the read failed) left in the inbox for the next connection's read, as
        // before: not counted for ever, which could stop receipt on this connection.
        eventsAwaitingReload -= reloading
        wakeWaiters()
    }

    /// Sends from the outbox on the current connection while fewer than `eventWindow` events
    /// wait for their confirmation, in `events` messages of at most `maximumEventsPerMessage`
    /// (to an older gateway `record` sends one `event` per event itself), each answered on its
    /// own (`recorded`), a message that is not full only when none is in flight. On a new
    /// connection the outbox is loaded from the inbox first.
    private func sendPendingEvents() {
        guard case .connected(let connection) = phase, !loadingEvents else { return }
        let number = connectionNumber
        guard loadedConnection == number else {
            loadingEvents = true
            Task {
                await self.loadEvents()
                await self.loaded(number)
            }
            return
        }
        // A part-full message only while fewer than `partFullMessagesInFlight` are in flight
        // (at once when idle; under load the events kept during a round trip go together).
        let perMessage = DeviceConnection.maximumEventsPerMessage
        while eventsInFlight < Self.eventWindow, !outbox.isEmpty,
              messagesInFlight < Self.partFullMessagesInFlight || outbox.count >= perMessage {
            let count = min(perMessage, Self.eventWindow - eventsInFlight, outbox.count)
            let part = Array(outbox.prefix(count))
            outbox.removeFirst(count)
            eventsInFlight += count
            messagesInFlight += 1
            Task {
                let confirmed: Bool
                do {
                    _ = try await connection.record(part.map(\.item))
                    confirmed = true
                } catch { confirmed = false }
                await self.recorded(part, confirmed: confirmed, on: number)
            }
        }
    }

    private func loaded(_ number: Int) {
        loadingEvents = false
        if number == connectionNumber { loadedConnection = number }
        sendPendingEvents()  // or load again for the connection made meanwhile
    }

    /// A message's answer. Confirmed events are forgotten with the next hand-off's write, or
    /// now if none is under way; refused ones (an error reply, or the connection failed) are
    /// sent again after `eventRetryInterval` if this connection is still up — a new one loads
    /// them from the inbox at once. Answers of a connection gone change nothing.
    private func recorded(_ part: [PendingDeliveryEvent], confirmed: Bool, on number: Int) async {
        guard number == connectionNumber else { return }
        eventsInFlight -= part.count
        messagesInFlight -= 1
        if confirmed {
            for event in part {
                // Sent before its mark: nothing in the inbox to forget, and nothing for the mark to keep.
                if unkept.removeValue(forKey: event) != nil { confirmedUnkept.insert(event) } else { confirmedEvents.append(event) }
            }
            wakeWaiters()
        } else {
            // One timer for all refused events: started by the first of them.
            let timerRuns = !eventsToRetry.isEmpty
            eventsToRetry += part
            if !timerRuns {
                let interval = configuration.eventRetryInterval
                Task {
                    try? await Task.sleep(for: interval)
                    await self.retryEvents(after: number)
                }
            }
        }
        sendPendingEvents()
        if confirmed, queued.pushes == 0 { await clearConfirmed() }  // else the next hand-off's write forgets them
    }

    /// Puts refused events back at the front of the outbox, if their connection is still the current one.
    private func retryEvents(after number: Int) {
        guard number == connectionNumber, !eventsToRetry.isEmpty else { return }
        outbox.insert(contentsOf: eventsToRetry, at: 0)
        eventsToRetry = []
        sendPendingEvents()
    }

    /// Forgets confirmed events in a write of their own, until none is left (one clearing at a
    /// time; on a failure they wait for the next write).
    private func clearConfirmed() async {
        guard !clearingEvents else { return }
        clearingEvents = true
        defer { clearingEvents = false }
        while !confirmedEvents.isEmpty {
            let events = confirmedEvents
            confirmedEvents = []
            do { try await inbox.clearEvents(events) } catch {
                confirmedEvents = events + confirmedEvents
                logger.warning("could not forget confirmed delivery events", metadata: ["error": "\(error)"])
                return
            }
        }
    }

    /// Events the gateway confirmed that the inbox still holds (for tests).
    var confirmedEventsNotForgotten: Int { confirmedEvents.count }

    /// Pushes received and not yet marked processed (for tests).
    var pushesNotMarked: Int { queued.pushes }

    /// Events the gateway confirmed before their hand-off's mark, not yet taken by it (for tests).
    var eventsConfirmedBeforeTheirMark: Int { confirmedUnkept.count }

    /// How many pushes the inbox holds, processed or not (for tests).
    var inboxCount: Int {
        get async { (try? await inbox.count()) ?? -1 }
    }

    /// The gateway address of the current connection, or of the last one.
    public private(set) var connectedAddress: GatewayAddress?

    /// Whether the link is connected now.
    public var isConnected: Bool {
        if case .connected = phase { return true }
        return false
    }
}

/// The device key: `device-key.pem` (PKCS#8 PEM, mode 0600), made on first start. Losing it
/// makes the daemon a new device to the gateway (its apps need new tokens).
enum DeviceKeyFile {
    static func loadOrCreate(path: String) throws -> P256.Signing.PrivateKey {
        if let pem = try? String(contentsOfFile: path, encoding: .utf8) {
            return try P256.Signing.PrivateKey(pemRepresentation: pem)
        }
        let key = P256.Signing.PrivateKey()
        let temporary = path + ".tmp"
        do {
            try PrivateFile.create(temporary, contents: Array(key.pemRepresentation.utf8), replacing: true)
        } catch {
            throw NotificationError(.daemonUnavailable, "cannot write the device key: \(error)")
        }
        guard rename(temporary, path) == 0 else { throw NotificationError(.daemonUnavailable, "cannot create the device key \(path)") }
        return key
    }
}

/// How far a hand-off has come, for the one after it and for `processApp`: its pushes are
/// recorded (their writes queued and their turn to be shown taken, or it is past the engine),
/// then marked processed. Each stage is a one-shot `StoreTicket` (completed once; later calls
/// change nothing; a wait for a stage reached returns at once). Marked comes after recorded.
struct HandOffProgress: Sendable {
    enum Stage { case recorded, marked }
    private let recorded: (ticket: StoreTicket<Void>, complete: @Sendable (Result<Void, any Error>) -> Void)
    private let marked: (ticket: StoreTicket<Void>, complete: @Sendable (Result<Void, any Error>) -> Void)

    init() {
        recorded = StoreTicket<Void>.make()
        marked = StoreTicket<Void>.make()
    }

    func reached(_ stage: Stage) {
        switch stage {
        case .recorded: recorded.complete(.success(()))
        case .marked: marked.complete(.success(()))
        }
    }

    func wait(for stage: Stage) async {
        // Completed only with success: `try?` never hides a failure.
        switch stage {
        case .recorded: _ = try? await recorded.ticket.value
        case .marked: _ = try? await marked.ticket.value
        }
    }
}
