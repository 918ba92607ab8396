import Logging
import NIOCore
import Synchronization
import TidingsCore
import TidingsStorage

/// The connected devices, by device id: where committed pushes go.
final class DeviceHub: Sendable {
    private let sessions = Mutex<[String: DeviceSession]>([:])
    private let metrics: GatewayMetrics
    /// Several gateway nodes: this node's device leases (nil: one node).
    let leases: NodeLeases?

    init(metrics: GatewayMetrics, leases: NodeLeases? = nil) {
        self.metrics = metrics
        self.leases = leases
    }

    /// Attaches a session, returning the one it replaces (the same device connected again).
    func attach(_ session: DeviceSession) -> DeviceSession? {
        let (old, count) = sessions.withLock { s in
            let old = s.updateValue(session, forKey: session.deviceID)
            return (old, s.count)
        }
        metrics.connectedDevices.record(count)
        leases?.attached(session)
        return old
    }

    func detach(_ session: DeviceSession) {
        let (count, gone) = sessions.withLock { s in
            let gone = s[session.deviceID] === session
            if gone { s[session.deviceID] = nil }
            return (s.count, gone)
        }
        metrics.connectedDevices.record(count)
        if gone { leases?.detached(session) }
    }

    /// Several nodes: the sessions of these devices read what was committed for them.
    func wake(_ deviceIDs: some Sequence<String>) {
        let targets = sessions.withLock { s in deviceIDs.compactMap { s[$0] } }
        for session in targets { session.wake() }
    }

    /// Several nodes: every session reads what was committed for it (wake-ups may have been lost).
    func wakeAll() {
        for session in all { session.wake() }
    }

    func session(deviceID: String) -> DeviceSession? { sessions.withLock { $0[deviceID] } }

    var count: Int { sessions.withLock { $0.count } }

    var all: [DeviceSession] { sessions.withLock { Array($0.values) } }

    /// Hands committed pushes to the sessions of their devices, in commit order.
    func deliver(_ pushes: [StoredPush]) {
        var byDevice: [String: [StoredPush]] = [:]
        for p in pushes { byDevice[p.push.deviceID, default: []].append(p) }
        let targets: [(DeviceSession, [StoredPush])] = sessions.withLock { s in
            byDevice.compactMap { device, pushes in s[device].map { ($0, pushes) } }
        }
        for (session, pushes) in targets { session.committed(pushes) }
    }
}

/// One connected device: its channel and its delivery state (owned by the channel's event
/// loop). It pages the device's backlog from the store (`DeviceDeliveryStateMachine` decides
/// when), then sends pushes as they commit.
final class DeviceSession: Sendable {
    let deviceID: String
    let channel: any Channel
    private let core: GatewayCore
    private let state: NIOLoopBoundBox<DeviceDeliveryStateMachine>
    /// On the event loop: closes the connection with an `InternalServerError` message (the
    /// channel handler's own path, which logs, sends the error and detaches the session).
    private let fail: @Sendable (String) -> Void

    init(deviceID: String, channel: any Channel, core: GatewayCore, fail: @escaping @Sendable (String) -> Void) {
        self.deviceID = deviceID
        self.channel = channel
        self.core = core
        self.fail = fail
        let machine = DeviceDeliveryStateMachine(pageSize: core.configuration.deviceBacklogPageSize,
                                                 pagesInFlight: core.configuration.deviceBacklogPagesInFlight)
        self.state = NIOLoopBoundBox(machine, eventLoop: channel.eventLoop)
    }

    /// On the event loop, once attached to the hub: starts reading the backlog.
    func start() {
        if let request = state.value.start() { read(request) }
    }

    func committed(_ pushes: [StoredPush]) {
        channel.eventLoop.execute { [self] in
            send(state.value.committed(pushes))
        }
    }

    /// On the event loop: whether the sequence was in flight on this connection (an
    /// acknowledgement may make room for the next backlog page).
    func acknowledged(_ sequence: Int64) -> Bool {
        let (accepted, next) = state.value.acknowledged(sequence)
        if let next { read(next) }
        return accepted
    }

    /// Several nodes: reads what was committed for the device after what this connection sent.
    func wake() {
        channel.eventLoop.execute { [self] in
            if let request = state.value.woken() { read(request) }
        }
    }

    /// On the event loop: the connection ended (a page read still running is ignored).
    func closed() { state.value.closed() }

    /// Reads one backlog page off the event loop; the first also applies expiration and the
    /// storage policy to the whole backlog. A failure closes the connection with an error.
    private func read(_ request: DeviceDeliveryStateMachine.PageRequest) {
        let store = core.store
        let deviceID = deviceID
        let now = core.clock.nowMilliseconds()
        core.blocking(on: channel.eventLoop) { () throws -> [StoredPush] in
            if request.prepare { try store.prepareBacklog(deviceID: deviceID, now: now) }
            return try store.pendingPushes(deviceID: deviceID, after: request.after, limit: request.limit)
        }.whenComplete { [self] result in
            switch result {
            case .success(let page):
                let actions = request.catchUp ? state.value.caughtUp(page) : state.value.pageLoaded(page)
                send(actions.send)
                if let next = actions.read { read(next) }
            case .failure(let error):
                if request.catchUp {
                    state.value.catchUpFailed()
                } else if state.value.pageFailed() {
                    fail("cannot load stored pushes: \(error)")
                }
            }
        }
    }

    /// One buffer of length-prefixed frames and one flush for the whole batch: TLS seals it
    /// into as few records as fit (one write per push cost a record, a buffered action and an
    /// `SSL_write` each).
    private func send(_ pushes: [StoredPush]) {
        guard !pushes.isEmpty else { return }
        var frames: [UInt8] = []
        frames.reserveCapacity(pushes.count * 512)
        for p in pushes {
            // As stored: the push type and priority were typed (and checked) once, at the provider edge.
            DeviceMessage.appendPushFrame(sequence: p.sequence, apnsID: p.push.apnsID, token: p.push.token, topic: p.push.topic,
                                          pushType: p.push.pushType, priority: p.push.priority, collapseID: p.push.collapseID,
                                          expiresAt: p.push.expiresAt, acceptedAt: p.push.acceptedAt, payload: p.push.payload, to: &frames)
        }
        channel.writeAndFlush(channel.allocator.buffer(bytes: frames), promise: nil)
    }
}
