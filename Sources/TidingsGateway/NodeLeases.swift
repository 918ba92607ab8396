import Dispatch
import Logging
import NIOCore
import Synchronization
import TidingsCore
import TidingsStorage

/// One gateway node among several on a shared store (docs/scaling.md): the leases of the
/// devices connected here, and the wake-ups that bring them pushes committed on other nodes.
///
/// - A device that connects takes its lease (from whichever node held it), then its session
///   catches up from the log: a push committed before the lease was written is in that read,
///   one committed after it wakes this node.
/// - Every `leaseRenewInterval` the node renews its leases; a device whose lease another node
///   took (it connected there since) is disconnected here: one node sends to a device.
/// - Wake-ups arrive on the store's LISTEN connection; when it comes back after a drop, every
///   device catches up (nothing depends on a notification arriving).
final class NodeLeases: Sendable {
    let coordination: any GatewayCoordination
    private let clock: any WallClock
    private let leaseDuration: Duration
    private let logger: Logger
    private let queue = DispatchQueue(label: "tidings.gateway.leases")
    /// Sessions whose lease was taken (by session), so renewal never reports the lease of a
    /// device that is still taking it as lost.
    private let leased = Mutex<[ObjectIdentifier: DeviceSession]>([:])
    private let pending = Mutex<[ObjectIdentifier: DeviceSession]>([:])

    init(coordination: any GatewayCoordination, clock: any WallClock, leaseDuration: Duration, logger: Logger) {
        self.coordination = coordination
        self.clock = clock
        self.leaseDuration = leaseDuration
        self.logger = logger
    }

    private var until: EpochMilliseconds { clock.nowMilliseconds().saturatingAdd(leaseDuration.milliseconds) }

    func attached(_ session: DeviceSession) {
        pending.withLock { $0[ObjectIdentifier(session)] = session }
        queue.async { [self] in take([session]) }
    }

    func detached(_ session: DeviceSession) {
        let id = ObjectIdentifier(session)
        pending.withLock { _ = $0.removeValue(forKey: id) }
        let wasLeased = leased.withLock { $0.removeValue(forKey: id) != nil }
        guard wasLeased else { return }
        let device = session.deviceID
        queue.async { [self] in
            do { try coordination.releaseLeases(deviceIDs: [device]) } catch {
                logger.warning("cannot release a device lease", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Takes the leases of sessions not yet leased, then wakes them (on `queue`).
    private func take(_ sessions: [DeviceSession]) {
        let live = pending.withLock { p in sessions.filter { p[ObjectIdentifier($0)] != nil } }
        guard !live.isEmpty else { return }
        do {
            try coordination.takeLeases(deviceIDs: live.map(\.deviceID), until: until)
        } catch {
            logger.warning("cannot take device leases; retrying at the next renewal", metadata: ["error": "\(error)"])
            return
        }
        let moved = pending.withLock { p in live.filter { p.removeValue(forKey: ObjectIdentifier($0)) != nil } }
        leased.withLock { l in for s in moved { l[ObjectIdentifier(s)] = s } }
        for s in moved { s.wake() }
    }

    /// Whether a renewal asked for by `renewSoon` is queued and has not started.
    private let renewalQueued = Atomic<Bool>(false)

    /// Another node took a lease of this node (`gw_lease_<node>`): renews now, which closes
    /// the connections whose lease is gone. Checking the store rather than trusting the
    /// notification: the device may have come back here since. Calls made while one waits
    /// are one renewal.
    func renewSoon() {
        guard renewalQueued.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return }
        queue.async { [self] in
            renewalQueued.store(false, ordering: .releasing)
            renewHere()
        }
    }

    /// Renews this node's leases, disconnects the devices whose lease another node took, and
    /// takes the leases that could not be taken before. Blocking (the renewal timer's thread).
    func renew() {
        queue.sync { renewHere() }
    }

    /// On `queue`.
    private func renewHere() {
        take(pending.withLock { Array($0.values) })
        let sessions = leased.withLock { Array($0.values) }
        guard !sessions.isEmpty else { return }
        do {
            let lost = Set(try coordination.renewLeases(deviceIDs: sessions.map(\.deviceID), until: until))
            for s in sessions where lost.contains(s.deviceID) {
                logger.info("device lease taken by another node; disconnecting", metadata: ["device": "\(s.deviceID.prefix(8))"])
                leased.withLock { _ = $0.removeValue(forKey: ObjectIdentifier(s)) }
                s.channel.close(promise: nil)
            }
        } catch {
            logger.warning("cannot renew device leases", metadata: ["error": "\(error)"])
        }
    }
}
