import Foundation
import Logging
import NIOCore
import PostgresNIO
import Synchronization
import TidingsStorage

/// Leases, wake-ups (LISTEN/NOTIFY) and the maintenance lock: several gateway nodes on one
/// database (docs/scaling.md).
extension PostgresGatewayStore: GatewayCoordination {
    static let maintenanceLock: Int32 = 3

    public func takeLeases(deviceIDs: [String], until: EpochMilliseconds) throws(GatewayStoreError) {
        guard !deviceIDs.isEmpty else { return }
        // The node that held a lease hears it was taken (`gw_lease_<node>`, at the commit) and
        // closes its connection to the device at once, not only at its next renewal.
        _ = try execute("""
            WITH previous AS (SELECT device_id, node FROM gw_leases WHERE device_id = ANY(\(deviceIDs)) AND node <> \(nodeID)),
            taken AS (
                INSERT INTO gw_leases (device_id, node, expires_at) SELECT d, \(nodeID), \(until) FROM unnest(\(deviceIDs)) AS d
                ON CONFLICT (device_id) DO UPDATE SET node = excluded.node, expires_at = excluded.expires_at
                RETURNING device_id)
            SELECT pg_notify('gw_lease_' || node, device_id) FROM previous
            """)
    }

    public func renewLeases(deviceIDs: [String], until: EpochMilliseconds) throws(GatewayStoreError) -> [String] {
        guard !deviceIDs.isEmpty else { return [] }
        // A lease no one holds is taken again; one another node took is not (the device is
        // connected there now).
        let result = try execute("""
            WITH mine AS (
                INSERT INTO gw_leases (device_id, node, expires_at) SELECT d, \(nodeID), \(until) FROM unnest(\(deviceIDs)) AS d
                ON CONFLICT (device_id) DO UPDATE SET expires_at = excluded.expires_at WHERE gw_leases.node = excluded.node
                RETURNING device_id)
            SELECT d FROM unnest(\(deviceIDs)) AS d WHERE d NOT IN (SELECT device_id FROM mine)
            """)
        do { return try result.rows.map { try $0.decode(String.self) } } catch { throw .backend(Self.describe(error)) }
    }

    public func releaseLeases(deviceIDs: [String]) throws(GatewayStoreError) {
        guard !deviceIDs.isEmpty else { return }
        _ = try execute("DELETE FROM gw_leases WHERE device_id = ANY(\(deviceIDs)) AND node = \(nodeID)")
    }

    /// Deletes leases that nobody renewed (their node died) — maintenance.
    @discardableResult
    public func expireLeases(now: EpochMilliseconds) throws(GatewayStoreError) -> Int {
        try execute("DELETE FROM gw_leases WHERE expires_at < \(now)").metadata.rows ?? 0
    }

    public func startListening(wake: @escaping @Sendable ([String]) -> Void, leaseTaken: @escaping @Sendable ([String]) -> Void,
                               registryChanged: @escaping @Sendable (GatewayRegistryChange) -> Void, reconnected: @escaping @Sendable () -> Void) {
        let listener = WakeListener(store: self, wake: wake, leaseTaken: leaseTaken, registryChanged: registryChanged, reconnected: reconnected)
        let old = wakeListener.withLock { l in defer { l = listener }; return l }
        old?.stop()
        listener.start()
    }

    public func stopListening() {
        let old = wakeListener.withLock { l in defer { l = nil }; return l }
        old?.stop()
    }

    public func exclusively<T>(_ body: () throws -> T) throws(GatewayStoreError) -> T? {
        let logger = self.logger
        return try runOnOwnConnection { c in
            let locked = try c.query("SELECT pg_try_advisory_lock(\(Self.lockSpace), \(Self.maintenanceLock))", logger: logger)
                .wait().rows.first?.decode(Bool.self) ?? false
            guard locked else { return nil }
            defer { _ = try? c.query("SELECT pg_advisory_unlock(\(Self.lockSpace), \(Self.maintenanceLock))", logger: logger).wait() }
            return try body()
        }
    }
}

/// The LISTEN connection of one node: its own connection (never the pool's), re-established
/// after it drops (PostgreSQL restarted), each time followed by `reconnected`.
final class WakeListener: Sendable {
    private let store: PostgresGatewayStore
    private let wake: @Sendable ([String]) -> Void
    private let leaseTaken: @Sendable ([String]) -> Void
    private let registryChanged: @Sendable (GatewayRegistryChange) -> Void
    private let reconnected: @Sendable () -> Void
    private struct State {
        var stopped = false
        var connection: PostgresConnection?
    }
    private let state = Mutex(State())
    private let stoppedSignal = DispatchSemaphore(value: 0)

    init(store: PostgresGatewayStore, wake: @escaping @Sendable ([String]) -> Void, leaseTaken: @escaping @Sendable ([String]) -> Void,
         registryChanged: @escaping @Sendable (GatewayRegistryChange) -> Void, reconnected: @escaping @Sendable () -> Void) {
        self.store = store
        self.wake = wake
        self.leaseTaken = leaseTaken
        self.registryChanged = registryChanged
        self.reconnected = reconnected
    }

    func start() {
        let thread = Thread { [self] in run() }
        thread.name = "tidings-postgres-listen"
        thread.start()
    }

    func stop() {
        let connection = state.withLock { s in
            s.stopped = true
            return s.connection
        }
        stoppedSignal.signal()
        if let connection { let closing: EventLoopFuture<Void> = connection.close(); try? closing.wait() }
    }

    private var stopped: Bool { state.withLock { $0.stopped } }

    private func run() {
        var first = true
        while !stopped {
            do {
                let connection = try store.connectDirectly()
                let keep = state.withLock { s in
                    if s.stopped { return false }
                    s.connection = connection
                    return true
                }
                guard keep else {
                    let closing: EventLoopFuture<Void> = connection.close()
                    try? closing.wait()
                    return
                }
                let wake = self.wake
                connection.addListener(channel: "gw_wake_\(store.nodeID)") { _, notification in
                    wake([notification.payload])
                }
                let leaseTaken = self.leaseTaken
                connection.addListener(channel: "gw_lease_\(store.nodeID)") { _, notification in
                    leaseTaken([notification.payload])
                }
                let registryChanged = self.registryChanged
                connection.addListener(channel: PostgresGatewayStore.registryChannel) { _, notification in
                    if let change = GatewayRegistryChange(notification: notification.payload) { registryChanged(change) }
                }
                _ = try connection.query(PostgresQuery(unsafeSQL: "LISTEN gw_wake_\(store.nodeID)"), logger: store.logger).wait()
                _ = try connection.query(PostgresQuery(unsafeSQL: "LISTEN gw_lease_\(store.nodeID)"), logger: store.logger).wait()
                _ = try connection.query(PostgresQuery(unsafeSQL: "LISTEN \(PostgresGatewayStore.registryChannel)"), logger: store.logger).wait()
                // Listening: whatever was committed while not listening is caught up from the log.
                if !first { reconnected() }
                first = false
                try? connection.closeFuture.wait()
            } catch {
                store.logger.warning("wake-up channel down", metadata: ["error": "\(PostgresGatewayStore.describe(error))"])
            }
            state.withLock { $0.connection = nil }
            // Not first any more: a drop means notifications may have been lost.
            first = false
            _ = stoppedSignal.wait(timeout: .now() + store.listenRetryDelay)
        }
    }
}
