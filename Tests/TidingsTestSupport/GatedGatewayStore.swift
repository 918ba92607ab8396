import Dispatch
import Synchronization
import TidingsCore
import TidingsStorage

/// An in-memory store whose token writes can be held (until `release`) and whose event
/// writes can be made to fail.
public final class GatedGatewayStore: GatewayStore {
    /// `holdingTokenWrites: false`: token writes go through from the start (as after
    /// `release()`), for tests that hold or fail only the event writes.
    public init(holdingTokenWrites: Bool = true) {
        if !holdingTokenWrites { open.store(true, ordering: .releasing) }
    }
    public let inner = InMemoryGatewayStore()
    private let gate = DispatchSemaphore(value: 0)
    private let entered = DispatchSemaphore(value: 0)
    private let open = Atomic<Bool>(false)
    public let failEvents = Atomic<Bool>(false)
    /// Event writes attempted (failed ones included).
    public let eventWrites = Atomic<Int>(0)
    private let eventGate = DispatchSemaphore(value: 0)
    /// Whether event writes are held, and how many wait. A release signals exactly the writes
    /// that wait: a permit left over would let a write through a later `holdEvents()` (with
    /// 1,000 signals per release, a test that held events a second time held nothing, and
    /// passed only while its marks outran the confirmations).
    private let eventHold = Mutex((holding: false, waiting: 0))

    /// Holds every event write from now on (its thread waits) until `releaseEvents()`.
    public func holdEvents() { eventHold.withLock { $0.holding = true } }

    /// Lets held event writes (and every later one) through.
    public func releaseEvents() {
        let waiting = eventHold.withLock { hold in
            defer { hold = (false, 0) }
            return hold.waiting
        }
        for _ in 0..<waiting { eventGate.signal() }
    }

    /// Lets held token writes (and every later one) through.
    public func release() {
        open.store(true, ordering: .releasing)
        for _ in 0..<1000 { gate.signal() }
    }

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
        if !open.load(ordering: .acquiring) {
            entered.signal()
            gate.wait()
        }
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
        eventWrites.add(1, ordering: .relaxed)
        let held = eventHold.withLock { hold in
            if hold.holding { hold.waiting += 1 }
            return hold.holding
        }
        if held { eventGate.wait() }
        if failEvents.load(ordering: .relaxed) { throw .backend("events fail") }
        return inner.recordEvent(event, apnsID: apnsID, deviceID: deviceID, at: at)
    }
    public func expirePushes(now: EpochMilliseconds, limit: Int) throws(GatewayStoreError) -> Int { inner.expirePushes(now: now, limit: limit) }
    public func prunePushes(finishedBefore cutoff: EpochMilliseconds, limit: Int) throws(GatewayStoreError) -> Int {
        inner.prunePushes(finishedBefore: cutoff, limit: limit)
    }
}
