import TidingsCore

/// Everything the gateway keeps: the key and app registry, devices and their tokens, and
/// the push log. Synchronous on purpose: the gateway calls it from its own writer thread
/// (group commit) and from a thread pool, never from an event loop.
///
/// Every backend passes the same conformance suite (`Tests/TidingsStorageTests/Gateway*`).
public protocol GatewayStore: Sendable {
    // MARK: Registry
    /// Registers a key; a key id that exists is `duplicate`.
    func addKey(_ key: ProviderKeyRecord) throws(GatewayStoreError)
    func key(id: String) throws(GatewayStoreError) -> ProviderKeyRecord?
    func keys() throws(GatewayStoreError) -> [ProviderKeyRecord]
    /// Removes a key (revoked): tokens signed by it are refused from now on, on every node
    /// (a store shared by several nodes tells them, as it does for additions). Returns the
    /// removed record; an unknown key id is `notFound` and changes nothing. The key id may be
    /// registered again afterwards (with a new key).
    @discardableResult
    func revokeKey(id: String) throws(GatewayStoreError) -> ProviderKeyRecord
    /// Gives a team a bundle ID; registering it again for the same team updates the policy,
    /// for another team is `duplicate`.
    func registerApp(_ app: GatewayAppRecord) throws(GatewayStoreError)
    func app(bundleID: String) throws(GatewayStoreError) -> GatewayAppRecord?
    func apps() throws(GatewayStoreError) -> [GatewayAppRecord]

    // MARK: Devices
    /// Records a device key; registering the same device again is a no-op.
    func registerDevice(_ device: GatewayDeviceRecord) throws(GatewayStoreError)
    func device(id: String) throws(GatewayStoreError) -> GatewayDeviceRecord?
    /// Stores a newly issued token.
    func addToken(_ token: DeviceTokenRecord) throws(GatewayStoreError)
    func token(_ token: String) throws(GatewayStoreError) -> DeviceTokenRecord?
    /// The live (not unregistered) token of a device for an app and environment.
    func activeToken(deviceID: String, bundleID: String, environment: APNsEnvironment) throws(GatewayStoreError) -> DeviceTokenRecord?
    /// How many tokens the device was ever issued (live or unregistered): what
    /// `deviceMaximumTokens` caps.
    func tokenCount(deviceID: String) throws(GatewayStoreError) -> Int
    /// Kills every token of the device for the app (the app was removed) and discards its
    /// undelivered pushes. Returns the tokens that were killed.
    @discardableResult
    func unregisterTokens(deviceID: String, bundleID: String, at: EpochMilliseconds) throws(GatewayStoreError) -> [DeviceTokenRecord]

    // MARK: Push log
    /// Makes a batch of pushes durable and records a batch of acknowledgements in one
    /// transaction (group commit). Returns the stored pushes in input order.
    func commit(pushes: [NewPush], acknowledged: [Int64], at: EpochMilliseconds) throws(GatewayStoreError) -> [StoredPush]
    /// When a device connects, before its backlog is paged: discards what expiration and each
    /// app's storage policy remove from the device's WHOLE undelivered set, in one transaction
    /// (expired at `now` → `expired`; `apns`: all but the latest per token, `all`: all but the
    /// latest per token and collapse id, pushes without one all kept → `coalesced`). Pages read
    /// afterwards therefore never contain a push superseded by one in a later page. Returns how
    /// many pushes were discarded.
    @discardableResult
    func prepareBacklog(deviceID: String, now: EpochMilliseconds) throws(GatewayStoreError) -> Int
    /// One page of a device's undelivered pushes: sequence greater than `after`, in sequence
    /// order, at most `limit` (fewer: there are no more). Reads only; `prepareBacklog` applied
    /// expiration and the policy when the device connected (a push that expires during the
    /// drain is still sent unless maintenance discarded it first, as a connected device gets
    /// an `apns-expiration: 0` push). A push committed before the read started is in it (or in
    /// a later page) until acknowledged or discarded.
    func pendingPushes(deviceID: String, after: Int64, limit: Int) throws(GatewayStoreError) -> [StoredPush]
    /// Every push with this apns-id (providers may reuse one), oldest first.
    func status(apnsID: String) throws(GatewayStoreError) -> [PushStatus]
    /// Records a later stage reported by the device (presented, answered) for a push
    /// delivered to `deviceID`. Returns whether a push matched.
    @discardableResult
    func recordEvent(_ event: DeliveryEvent, apnsID: String, deviceID: String, at: EpochMilliseconds) throws(GatewayStoreError) -> Bool
    /// Records several events of one device durably (in one transaction where the backend can:
    /// the device channel records a read burst's events together). Recording an event again
    /// changes nothing (the first time of each stage is kept). An event with a `sequence` (the
    /// push's, as the device received it) is recorded on that push only if its apns-id and
    /// device match — one lookup by key, never a search; one without (older devices) on the
    /// device's latest push with that apns-id.
    func recordEvents(_ events: [DeviceEventReport], deviceID: String, at: EpochMilliseconds) throws(GatewayStoreError)
    /// Marks up to `limit` undelivered pushes whose expiration passed as discarded; returns
    /// how many (callers repeat while it returns `limit`, so no transaction grows unbounded).
    @discardableResult
    func expirePushes(now: EpochMilliseconds, limit: Int) throws(GatewayStoreError) -> Int
    /// Deletes up to `limit` pushes that finished (delivered, or discarded: coalesced, expired,
    /// unregistered) before `cutoff`, oldest first; returns how many. Undelivered pushes are
    /// never pruned: they leave only by delivery or expiration.
    @discardableResult
    func prunePushes(finishedBefore cutoff: EpochMilliseconds, limit: Int) throws(GatewayStoreError) -> Int

    // MARK: Lifetime
    /// Releases what the store holds (connections, threads); every call afterwards may fail.
    /// A gateway closes the store it opened when it stops (not a `.custom` one: its owner does).
    func close()
}

/// A delivery event as a device reported it (`recordEvents`): the stage, the push's apns-id and,
/// from devices that send them, the push's sequence number and when the stage happened.
public struct DeviceEventReport: Sendable, Hashable {
    public var event: DeliveryEvent
    public var apnsID: String
    public var sequence: Int64?
    /// When the stage happened on the device (milliseconds since 1970, its clock). Recorded
    /// within what is possible: not before the push was accepted, not after the gateway
    /// records it (a device whose clock is off gets one of those bounds); nil: when recorded.
    public var occurredAt: EpochMilliseconds?

    public init(_ event: DeliveryEvent, apnsID: String, sequence: Int64? = nil, occurredAt: EpochMilliseconds? = nil) {
        self.event = event
        self.apnsID = apnsID
        self.sequence = sequence
        self.occurredAt = occurredAt
    }

    /// The time to record for this stage of a push accepted at `acceptedAt`, recorded at `now`:
    /// `occurredAt` (else `now`) within `acceptedAt...now` (`now` if even that is empty). The
    /// stores compute the same in SQL.
    public static func recordedTime(occurredAt: EpochMilliseconds?, acceptedAt: EpochMilliseconds, now: EpochMilliseconds) -> EpochMilliseconds {
        min(max(occurredAt ?? now, acceptedAt), now)
    }
}

/// The delivery events one device reported together, as `recordEvents` takes them.
public struct DeviceEventBatch: Sendable {
    public var deviceID: String
    public var events: [DeviceEventReport]

    public init(deviceID: String, events: [DeviceEventReport]) {
        self.deviceID = deviceID
        self.events = events
    }
}

/// A store whose group commit also records delivery events: the gateway's writer puts the
/// events devices reported meanwhile in the transaction of the next pushes and
/// acknowledgements — one commit and one sync for all — instead of a transaction of their
/// own on the registry queue beside it. (SQLite: the one writer; a backend without it records
/// events with `recordEvents`.)
public protocol GroupCommitsEvents: GatewayStore {
    /// `commit(pushes:acknowledged:at:)` and, in the same transaction, each batch as
    /// `recordEvents(_:deviceID:at:)` would record it: all of it durable, or none of it.
    func commit(pushes: [NewPush], acknowledged: [Int64], events: [DeviceEventBatch], at: EpochMilliseconds) throws(GatewayStoreError) -> [StoredPush]
}

extension GatewayStore {
    /// Nothing to release (an in-memory store).
    public func close() {}

}
