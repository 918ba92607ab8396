import Dispatch
import Synchronization
import TidingsCore
import TidingsStorage

/// An in-memory store whose token writes can be held (until `release`) and whose event
/// writes can be held (`holdEvents`, as often as a test needs) or made to fail.
public final class GatedGatewayStore: GatewayStore {
    /// `holdingTokenWrites: false`: token writes go through from the start (as after
    /// `release()`), for tests that hold or fail only the event writes.
    public init(holdingTokenWrites: Bool = true) {
        tokenGate = BlockingGate(holding: holdingTokenWrites)
    }
    public let inner = InMemoryGatewayStore()
    private let tokenGate: BlockingGate
    private let entered = DispatchSemaphore(value: 0)
    public let failEvents = Atomic<Bool>(false)
    /// Event writes attempted (failed ones included).
    public let eventWrites = Atomic<Int>(0)
    private let eventGate = BlockingGate(holding: false)

    /// Holds every event write from now on (its thread waits) until `releaseEvents()`.
    public func holdEvents() { eventGate.hold() }

    /// Lets held event writes (and every later one) through.
    public func releaseEvents() { eventGate.release() }

    /// Lets held token writes (and every later one) through.
    public func release() { tokenGate.release() }

    /// Waits (at most 10 s of real time) until a token write is held.
    public func waitUntilATokenWriteIsStuck() async -> Bool {
        let entered = self.entered
        return await offThePool { entered.wait(timeout: .now() + 10) == .success }
    }

    public func addKey(_ key: ProviderKeyRecord) throws(GatewayStoreError) { try inner.addKey(key) }
    public func key(id: String) throws(GatewayStoreError) -> ProviderKeyRecord? { inner.key(id: id) }
    public func keys() throws(GatewayStoreError) -> [ProviderKeyRecord] { inner.keys() }
    public func revokeKey(id: String) throws(GatewayStoreError) -> ProviderKeyRecord { try inner.revokeKey(id: id) }
    public func registerApp(_ app: GatewayAppRecord) throws(GatewayStoreError) { try inner.registerApp(app) }
    public func app(bundleID: String) throws(GatewayStoreError) -> GatewayAppRecord? { inner.app(bundleID: bundleID) }
    public func apps() throws(GatewayStoreError) -> [GatewayAppRecord] { inner.apps() }
    public func registerDevice(_ device: GatewayDeviceRecord) throws(GatewayStoreError) { inner.registerDevice(device) }
    public func device(id: String) throws(GatewayStoreError) -> GatewayDeviceRecord? { inner.device(id: id) }
    public func addToken(_ token: DeviceTokenRecord) throws(GatewayStoreError) {
        tokenGate.pass(beforeWaiting: { _ = entered.signal() })
        try inner.addToken(token)
    }
    public func token(_ token: String) throws(GatewayStoreError) -> DeviceTokenRecord? { inner.token(token) }
    public func tokenCount(deviceID: String) throws(GatewayStoreError) -> Int { inner.tokenCount(deviceID: deviceID) }
    public func activeToken(deviceID: String, bundleID: String, environment: APNsEnvironment) throws(GatewayStoreError) -> DeviceTokenRecord? {
        inner.activeToken(deviceID: deviceID, bundleID: bundleID, environment: environment)
    }
    public func unregisterTokens(deviceID: String, bundleID: String, at: EpochMilliseconds) throws(GatewayStoreError) -> [DeviceTokenRecord] {
        inner.unregisterTokens(deviceID: deviceID, bundleID: bundleID, at: at)
    }
    public func commit(pushes: [NewPush], acknowledged: [Int64], at: EpochMilliseconds) throws(GatewayStoreError) -> [StoredPush] {
        try inner.commit(pushes: pushes, acknowledged: acknowledged, at: at)
    }
    public func prepareBacklog(deviceID: String, now: EpochMilliseconds) throws(GatewayStoreError) -> Int {
        inner.prepareBacklog(deviceID: deviceID, now: now)
    }
    public func pendingPushes(deviceID: String, after: Int64, limit: Int) throws(GatewayStoreError) -> [StoredPush] {
        inner.pendingPushes(deviceID: deviceID, after: after, limit: limit)
    }
    public func status(apnsID: String) throws(GatewayStoreError) -> [PushStatus] { inner.status(apnsID: apnsID) }
    public func recordEvent(_ event: DeliveryEvent, apnsID: String, deviceID: String, at: EpochMilliseconds) throws(GatewayStoreError) -> Bool {
        try eventWrite()
        return inner.recordEvent(event, apnsID: apnsID, deviceID: deviceID, at: at)
    }
    /// Each event as a write of its own (counted, gated, failing as `recordEvent`).
    public func recordEvents(_ events: [DeviceEventReport], deviceID: String, at: EpochMilliseconds) throws(GatewayStoreError) {
        for e in events {
            try eventWrite()
            inner.recordEvents([e], deviceID: deviceID, at: at)
        }
    }
    /// One event write: counted, then through the gate, then failing while `failEvents` is set.
    private func eventWrite() throws(GatewayStoreError) {
        eventWrites.add(1, ordering: .relaxed)
        eventGate.pass()
        if failEvents.load(ordering: .relaxed) { throw .backend("events fail") }
    }
    public func expirePushes(now: EpochMilliseconds, limit: Int) throws(GatewayStoreError) -> Int { inner.expirePushes(now: now, limit: limit) }
    public func prunePushes(finishedBefore cutoff: EpochMilliseconds, limit: Int) throws(GatewayStoreError) -> Int {
        inner.prunePushes(finishedBefore: cutoff, limit: limit)
    }
}

/// Where a store's writes wait while a test holds them (their threads block). A release lets
/// exactly the waiting writes through, and every later one until the next `hold()`: no permit
/// is left over for a later hold (the store's gates signalled 1,000 times per release, so a
/// test that held the event writes a second time held nothing, and passed only while its marks
/// outran the confirmations).
final class BlockingGate: Sendable {
    private let state: Mutex<(holding: Bool, waiting: Int)>
    private let semaphore = DispatchSemaphore(value: 0)

    init(holding: Bool) { state = Mutex((holding, 0)) }

    func hold() { state.withLock { $0.holding = true } }

    func release() {
        let waiting = state.withLock { gate in
            defer { gate = (false, 0) }
            return gate.waiting
        }
        for _ in 0..<waiting { semaphore.signal() }
    }

    /// Returns at once unless held; held, calls `beforeWaiting` and waits for the release.
    func pass(beforeWaiting: () -> Void = {}) {
        let held = state.withLock { gate in
            if gate.holding { gate.waiting += 1 }
            return gate.holding
        }
        guard held else { return }
        beforeWaiting()
        semaphore.wait()
    }
}
