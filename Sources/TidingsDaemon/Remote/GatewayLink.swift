import Crypto
import DequeModule
import Foundation
import Logging
import TidingsCore
import TidingsDevice
import TidingsEngine

/// Where the daemon's push gateway is (its device channel) and how to trust it.
public struct GatewayLinkConfiguration: Sendable {
    public var host: String
    public var port: Int
    /// PEM certificates to trust; `tidings serve` passes the gateway's self-signed one.
    public var trustRootPaths: [String]
    /// The environment the daemon's apps get tokens for (`aps-environment`).
    public var environment: APNsEnvironment = .development
    /// Reconnection backoff: doubled after each failed attempt, up to the maximum.
    public var initialBackoff: Duration = .milliseconds(100)
    public var maximumBackoff: Duration = .seconds(30)
    /// Delivery events the gateway answered with an error (not recorded, `TooManyRequests`)
    /// are sent again this long after, on the same connection (docs/device-protocol.md).
    public var eventRetryInterval: Duration = .seconds(5)

    public init(host: String, port: Int, trustRootPaths: [String]) {
        self.host = host
        self.port = port
        self.trustRootPaths = trustRootPaths
    }

    /// `HOST:PORT` (`[::1]:2196` for IPv6).
    public init?(address: String, trustRootPaths: [String]) {
        guard let colon = address.lastIndex(of: ":"), let port = Int(address[address.index(after: colon)...]), (0...65535).contains(port) else { return nil }
        var host = String(address[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { return nil }
        self.init(host: host, port: port, trustRootPaths: trustRootPaths)
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
    private let inbox: RemoteInbox
    private let deviceKey: P256.Signing.PrivateKey
    private let clock: any WallClock
    private let logger: Logger
    private var phase: Phase = .idle
    private var lastError: String = "not connected yet"
    private var connectWaiters: [CheckedContinuation<DeviceConnection?, Never>] = []
    /// Delivery events are kept in the inbox until the gateway confirms them durable, and sent
    /// again on every connection until then. One sender at a time (`sendingEvents`).
    private var sendingEvents = false
    /// Events sent at once before waiting for their confirmations (under the gateway's
    /// `deviceMaximumPendingEvents`).
    static let eventWindow = 256
    private let work: AsyncStream<Void>.Continuation
    private let workStream: AsyncStream<Void>
    private var nextPrune = Date.distantPast
    /// Pushes handed to an app's worker and not yet marked processed.
    private var queued: Set<PushKey> = []
    /// Per app, the pushes its worker has still to process, in the order received.
    private var appQueues: [String: Deque<(RemotePush, recovering: Bool)>] = [:]

    private struct PushKey: Hashable {
        let apnsID: String
        let sequence: Int64
        init(_ push: RemotePush) { (apnsID, sequence) = (push.apnsID, push.sequence) }
    }

    /// Opens (creating) the inbox `remote.sqlite` and the device key `device-key.pem` in
    /// `dataDirectory`.
    public init(configuration: GatewayLinkConfiguration, dataDirectory: String, engine: NotificationEngine,
                clock: any WallClock = SystemWallClock(), logger: Logger = Logger(label: "tidings.remote")) throws {
        self.configuration = configuration
        self.engine = engine
        self.inbox = try RemoteInbox(path: dataDirectory + "/remote.sqlite")
        self.deviceKey = try DeviceKeyFile.loadOrCreate(path: dataDirectory + "/device-key.pem")
        self.clock = clock
        self.logger = logger
        (workStream, work) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    /// The gateway's id for this device.
    public nonisolated var deviceID: String { DeviceChallenge.deviceID(publicKey: deviceKey.publicKey) }

    /// Runs until cancelled: hands the engine what was received but not processed before a
    /// crash and everything that arrives, while it connects and reconnects.
    public func run() async {
        await withDiscardingTaskGroup { group in
            group.addTask { await self.processLoop() }
            group.addTask { await self.connectLoop() }
        }
        if case .connected(let connection) = phase { await connection.close() }
    }

    private func connectLoop() async {
        var backoff = configuration.initialBackoff
        let deviceConfiguration = DeviceClientConfiguration(host: configuration.host, port: configuration.port, deviceKey: deviceKey,
                                                            trustRootPaths: configuration.trustRootPaths)
        while !Task.isCancelled {
            phase = .connecting
            do {
                let connection = try await DeviceConnection.connect(deviceConfiguration, logger: logger)
                backoff = configuration.initialBackoff
                await connected(connection)
                await withTaskCancellationHandler {
                    await consume(connection)
                } onCancel: {
                    Task { await connection.close() }
                }
                lastError = "the connection to the gateway at \(configuration.host):\(configuration.port) closed"
            } catch {
                lastError = "cannot reach the push gateway at \(configuration.host):\(configuration.port): \(error)"
                logger.debug("gateway connection failed", metadata: ["error": "\(error)"])
            }
            phase = .idle
            for waiter in connectWaiters { waiter.resume(returning: nil) }
            connectWaiters.removeAll()
            if Task.isCancelled { break }
            // Real time: the network's, not a clock under test.
            try? await Task.sleep(for: backoff)
            backoff = min(backoff * 2, configuration.maximumBackoff)
        }
    }

    private func connected(_ connection: DeviceConnection) async {
        logger.info("connected to the push gateway", metadata: ["device": "\(connection.deviceID)"])
        // Removals first: a reinstalled app's new registration must come after them.
        for bundle in (try? inbox.removals()) ?? [] {
            do {
                try await connection.removeApp(topic: bundle)
                try inbox.clearRemoval(bundle)
            } catch {
                logger.warning("could not tell the gateway an app was removed", metadata: ["app": "\(bundle)", "error": "\(error)"])
            }
        }
        phase = .connected(connection)
        sendPendingEvents()
        for waiter in connectWaiters { waiter.resume(returning: connection) }
        connectWaiters.removeAll()
    }

    /// Receipt: durable first, then the acknowledgement; redeliveries are acknowledged again
    /// and not processed twice. Pushes that arrive together (or while the previous commit
    /// is being synced) are made durable in one transaction, then all acknowledged.
    private func consume(_ connection: DeviceConnection) async {
        let batch = PushBatch()
        let (inbox, clock, logger, work) = (self.inbox, self.clock, self.logger, self.work)
        await withDiscardingTaskGroup { group in
            group.addTask {
                do {
                    for try await push in connection.pushes { batch.append(push) }
                } catch {
                    logger.debug("device channel ended", metadata: ["error": "\(error)"])
                }
                batch.finish()
            }
            group.addTask {
                while let pushes = await batch.next() {
                    guard Self.store(pushes, connection: connection, inbox: inbox, clock: clock, logger: logger, work: work) else {
                        // Not durable: not acknowledged; the gateway sends them again on the next connection.
                        await connection.close()
                        while await batch.next() != nil {}
                        return
                    }
                }
            }
        }
    }

    /// Commits `pushes` in one transaction, then acknowledges each; false if the commit failed.
    private static func store(_ pushes: [DevicePush], connection: DeviceConnection, inbox: RemoteInbox, clock: any WallClock,
                              logger: Logger, work: AsyncStream<Void>.Continuation) -> Bool {
        var remotes: [RemotePush] = []
        remotes.reserveCapacity(pushes.count)
        for push in pushes {
            if let remote = RemotePush(push) {
                remotes.append(remote)
            } else {
                logger.warning("dropped a push whose topic does not fit its push type", metadata: ["apns-id": "\(push.apnsID)"])
            }
        }
        let inserted: [Bool]
        do {
            inserted = remotes.isEmpty ? [] : try inbox.receive(remotes, at: clock.now)
        } catch {
            logger.error("could not store pushes; reconnecting", metadata: ["error": "\(error)", "pushes": "\(remotes.count)"])
            return false
        }
        for push in pushes { connection.acknowledge(push) }
        if inserted.contains(true) { work.yield() }
        return true
    }

    /// Deletes processed pushes older than 31 days (the gateway keeps a push at most 30, so
    /// it never sends one again after that), at start and then at most once an hour.
    private func pruneIfDue() {
        let now = clock.now
        guard now >= nextPrune else { return }
        nextPrune = now.addingTimeInterval(3600)
        do { try inbox.prune(before: now.addingTimeInterval(-31 * 24 * 3600)) } catch {
            logger.warning("could not prune the push inbox", metadata: ["error": "\(error)"])
        }
    }

    /// Hands every unprocessed push to the engine: each app's in the order received, apps
    /// side by side, so one app's slow service extension holds up only that app's pushes.
    /// First what was received but not processed before a crash (`recovering`: a push whose
    /// notification is already in the delivered list is not shown again), then what arrives.
    private func processLoop() async {
        await withDiscardingTaskGroup { group in
            var wakes = workStream.makeAsyncIterator()
            var recovering = true
            repeat {
                pruneIfDue()
                for bundle in queueUnprocessed(recovering: recovering) {
                    group.addTask { await self.processApp(bundle) }
                }
                recovering = false
            } while await wakes.next() != nil
        }
    }

    /// Puts the unprocessed pushes not yet queued behind their apps' earlier ones; returns
    /// the apps that need a worker.
    private func queueUnprocessed(recovering: Bool) -> [String] {
        guard let pushes = try? inbox.unprocessed() else { return [] }
        var started: [String] = []
        for push in pushes where queued.insert(PushKey(push)).inserted {
            if appQueues[push.bundleIdentifier] == nil {
                appQueues[push.bundleIdentifier] = []
                started.append(push.bundleIdentifier)
            }
            appQueues[push.bundleIdentifier]!.append((push, recovering))
        }
        return started
    }

    /// Processes one app's queued pushes in order until none is left.
    private func processApp(_ bundle: String) async {
        while let (push, recovering) = appQueues[bundle]?.popFirst() {
            let key = PushKey(push)
            if recovering, await engine.hasDeliveredRemote(push) {
                // Shown (in the list) before the crash: report it, do not show it again.
                report(.presented, apnsID: push.apnsID)
            } else {
                let outcome = await engine.receiveRemote(push)
                logger.debug("remote notification", metadata: ["apns-id": "\(push.apnsID)", "outcome": "\(outcome)"])
            }
            do {
                try inbox.markProcessed(push)
                queued.remove(key)
            } catch {
                // Stays queued, so this run does not show it again; after a restart the
                // delivered-list check keeps it from showing twice.
                logger.error("could not mark a push processed", metadata: ["error": "\(error)"])
            }
        }
        appQueues[bundle] = nil
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
        do { try inbox.addRemoval(bundleIdentifier) } catch {
            throw NotificationError(.invalidRequest, "could not record the unregistration: \(error)")
        }
        await sendRemoval(bundleIdentifier)
    }

    public func appRemoved(_ bundleIdentifier: String) async {
        do { try inbox.addRemoval(bundleIdentifier) } catch {
            logger.error("could not record an app removal for the gateway", metadata: ["app": "\(bundleIdentifier)", "error": "\(error)"])
        }
        await sendRemoval(bundleIdentifier)
    }

    private func sendRemoval(_ bundle: String) async {
        guard case .connected(let connection) = phase else { return } // sent on the next connection
        do {
            try await connection.removeApp(topic: bundle)
            try inbox.clearRemoval(bundle)
        } catch {
            logger.warning("the gateway did not confirm an app removal; retrying on the next connection", metadata: ["app": "\(bundle)", "error": "\(error)"])
        }
    }

    public func presented(_ push: RemotePush) async {
        report(.presented, apnsID: push.apnsID)
    }

    public func answered(bundleIdentifier: String, requestIdentifier: String) async {
        guard let apnsID = try? inbox.apnsID(bundle: bundleIdentifier, identifier: requestIdentifier) else { return }
        report(.answered, apnsID: apnsID)
    }

    /// Durable first (the inbox keeps it across reconnects and daemon restarts), then sent;
    /// forgotten once the gateway confirms it. At least once: recording an event twice at the
    /// gateway changes nothing.
    private func report(_ event: DeviceDeliveryEvent, apnsID: String) {
        do { try inbox.addPendingEvent(event.rawValue, apnsID: apnsID) } catch {
            logger.warning("could not keep a delivery event", metadata: ["apns-id": "\(apnsID)", "error": "\(error)"])
            if case .connected(let connection) = phase { connection.report(event, apnsID: apnsID) }
            return
        }
        sendPendingEvents()
    }

    /// Starts sending the inbox's pending events on the current connection, unless a sender runs.
    private func sendPendingEvents() {
        guard case .connected(let connection) = phase, !sendingEvents else { return }
        sendingEvents = true
        Task { await self.sendEvents(on: connection) }
    }

    /// Sends pending events in windows of `eventWindow`, each forgotten once confirmed (or,
    /// to a gateway that does not confirm events, once sent), until none is left or the
    /// connection fails; what is left goes on the next connection. Events the gateway refused
    /// on a connection that stays up are sent again after `eventRetryInterval`.
    private func sendEvents(on connection: DeviceConnection) async {
        defer { sendingEvents = false }
        while case .connected(let current) = phase, current === connection {
            guard let window = try? inbox.pendingEvents(limit: Self.eventWindow), !window.isEmpty else { return }
            let done = await withTaskGroup(of: (event: String, apnsID: String)?.self) { group in
                for e in window {
                    group.addTask {
                        do {
                            _ = try await connection.record(DeviceDeliveryEvent(rawValue: e.event), apnsID: e.apnsID)
                            return e
                        } catch { return nil }
                    }
                }
                var done: [(event: String, apnsID: String)] = []
                for await e in group { if let e { done.append(e) } }
                return done
            }
            do { try inbox.clearEvents(done) } catch {
                logger.warning("could not forget confirmed delivery events", metadata: ["error": "\(error)"])
                return
            }
            if done.count < window.count {
                // Refused (an error reply) or the connection failed: again after the interval
                // if still connected (a new connection sends them at once, `connected`).
                let interval = configuration.eventRetryInterval
                Task {
                    try? await Task.sleep(for: interval)
                    await self.sendPendingEvents()
                }
                return
            }
        }
    }

    /// Whether the link is connected now.
    /// How many pushes the inbox holds, processed or not (for tests).
    var inboxCount: Int { (try? inbox.count()) ?? -1 }

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
