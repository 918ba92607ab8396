import Crypto
import Foundation
import Synchronization
import TidingsCore
import TidingsStorage

/// The gateway's in-memory view of the registry and the device tokens, in front of the
/// store: the provider API's hot path reads it without touching the database.
///
/// Keys and apps can be added by another process (`tidings keys create` on the same
/// database), so a miss is looked up in the store (off the event loop, by the caller) and
/// negative answers are remembered for a short time only.
final class GatewayDirectory: Sendable {
    struct TokenInfo: Sendable, Hashable {
        var deviceID: String
        var bundleID: String
        var environment: APNsEnvironment
        var unregisteredAt: EpochMilliseconds?
    }

    private struct State {
        var keys: [String: ProviderKey] = [:]
        var apps: [String: GatewayAppRecord] = [:]
        var tokens: [String: TokenInfo] = [:]
        var missedKeys: [String: EpochMilliseconds] = [:]
        var missedApps: [String: EpochMilliseconds] = [:]
        var missedTokens: [String: EpochMilliseconds] = [:]
    }

    private let state = Mutex(State())
    /// Bumped after a cached key is dropped (revoked on this or another node, changed, or every
    /// entry dropped): a provider connection whose token was verified under an older number
    /// looks its key up again before its next request is accepted (one atomic load per request
    /// otherwise; `ProviderAuthenticationStateMachine`).
    private let generation = Atomic<UInt64>(0)
    let store: any GatewayStore
    /// How long a miss is trusted before the store is asked again.
    let negativeCacheMilliseconds: EpochMilliseconds
    /// Misses remembered per kind, at most (tokens; keys and apps): past it that kind's are all
    /// forgotten, so memory stays bounded whatever providers send.
    let maximumMissedTokens: Int
    let maximumMissedNames: Int

    init(store: any GatewayStore, negativeCacheDuration: Duration = .seconds(1), maximumMissedTokens: Int = 100_000,
         maximumMissedNames: Int = 10_000) {
        self.store = store
        self.negativeCacheMilliseconds = negativeCacheDuration.milliseconds
        self.maximumMissedTokens = maximumMissedTokens
        self.maximumMissedNames = maximumMissedNames
    }

    /// Misses remembered now (tokens, keys, apps): what the limits bound.
    var missCounts: (tokens: Int, keys: Int, apps: Int) {
        state.withLock { ($0.missedTokens.count, $0.missedKeys.count, $0.missedApps.count) }
    }

    /// Loads every key and app.
    func preload() throws(GatewayStoreError) {
        let keys = try store.keys()
        let apps = try store.apps()
        state.withLock { s in
            for k in keys { if let key = Self.providerKey(k) { s.keys[k.keyID] = key } }
            for a in apps { s.apps[a.bundleID] = a }
        }
    }

    static func providerKey(_ record: ProviderKeyRecord) -> ProviderKey? {
        guard let publicKey = try? P256.Signing.PublicKey(x963Representation: record.publicKey) else { return nil }
        return ProviderKey(keyID: record.keyID, teamID: record.teamID, publicKey: publicKey, environment: record.environment)
    }

    enum Lookup<T> { case hit(T), miss, needsStore }

    func cachedKey(_ id: String, now: EpochMilliseconds) -> Lookup<ProviderKey> {
        state.withLock { s in
            if let k = s.keys[id] { return .hit(k) }
            if let missed = s.missedKeys[id], now - missed < negativeCacheMilliseconds { return .miss }
            return .needsStore
        }
    }

    func cachedApp(_ bundleID: String, now: EpochMilliseconds) -> Lookup<GatewayAppRecord> {
        state.withLock { s in
            if let a = s.apps[bundleID] { return .hit(a) }
            if let missed = s.missedApps[bundleID], now - missed < negativeCacheMilliseconds { return .miss }
            return .needsStore
        }
    }

    func cachedToken(_ token: String, now: EpochMilliseconds) -> Lookup<TokenInfo> {
        state.withLock { s in
            if let t = s.tokens[token] { return .hit(t) }
            if let missed = s.missedTokens[token], now - missed < negativeCacheMilliseconds { return .miss }
            return .needsStore
        }
    }

    /// A new miss past `maximum` forgets every remembered one first (0: nothing is remembered).
    private static func remember(miss key: String, at now: EpochMilliseconds, in misses: inout [String: EpochMilliseconds], maximum: Int) {
        if misses[key] == nil && misses.count >= maximum { misses.removeAll() }
        if maximum > 0 { misses[key] = now }
    }

    /// Blocking: call from a thread pool.
    func loadKey(_ id: String, now: EpochMilliseconds) throws(GatewayStoreError) -> ProviderKey? {
        let key = try store.key(id: id).flatMap(Self.providerKey)
        state.withLock { s in
            if let key { s.keys[id] = key } else {
                Self.remember(miss: id, at: now, in: &s.missedKeys, maximum: maximumMissedNames)
            }
        }
        return key
    }

    /// Blocking: call from a thread pool.
    func loadApp(_ bundleID: String, now: EpochMilliseconds) throws(GatewayStoreError) -> GatewayAppRecord? {
        let app = try store.app(bundleID: bundleID)
        state.withLock { s in
            if let app { s.apps[bundleID] = app } else {
                Self.remember(miss: bundleID, at: now, in: &s.missedApps, maximum: maximumMissedNames)
            }
        }
        return app
    }

    /// Blocking: call from a thread pool.
    func loadToken(_ token: String, now: EpochMilliseconds) throws(GatewayStoreError) -> TokenInfo? {
        let record = try store.token(token)
        let info = record.map { TokenInfo(deviceID: $0.deviceID, bundleID: $0.bundleID, environment: $0.environment, unregisteredAt: $0.unregisteredAt) }
        state.withLock { s in
            if let info { s.tokens[token] = info } else {
                Self.remember(miss: token, at: now, in: &s.missedTokens, maximum: maximumMissedTokens)
            }
        }
        return info
    }

    /// What a handshake found: a device seen before, one recorded now, or a new identity
    /// refused by the new-device rate limits (nothing stored).
    enum DeviceAdmission: Sendable { case known, registered, refused }

    /// Blocking: call from a thread pool. A device already recorded gets in with a read only;
    /// a new one is recorded if `allowNew()` (the new-identity limits) says so.
    func admit(_ device: GatewayDeviceRecord, allowNew: () -> Bool) throws(GatewayStoreError) -> DeviceAdmission {
        if try store.device(id: device.deviceID) != nil { return .known }
        guard allowNew() else { return .refused }
        try store.registerDevice(device)
        return .registered
    }

    /// Blocking: call from the registry queue (one at a time, so the count cannot race). The
    /// device's live token for the app and environment; else a new one while the device holds
    /// fewer than `maximum` tokens; nil past it, with nothing stored.
    func issueToken(deviceID: String, bundleID: String, environment: APNsEnvironment, now: EpochMilliseconds,
                    maximum: Int) throws(GatewayStoreError) -> DeviceTokenRecord? {
        if let existing = try store.activeToken(deviceID: deviceID, bundleID: bundleID, environment: environment) {
            remember(token: existing)
            return existing
        }
        guard try store.tokenCount(deviceID: deviceID) < maximum else { return nil }
        let record = DeviceTokenRecord(token: DeviceToken.random().hex, deviceID: deviceID, bundleID: bundleID,
                                       environment: environment, createdAt: now)
        try store.addToken(record)
        remember(token: record)
        return record
    }

    func remember(token: DeviceTokenRecord) {
        state.withLock { s in
            s.tokens[token.token] = TokenInfo(deviceID: token.deviceID, bundleID: token.bundleID, environment: token.environment,
                                              unregisteredAt: token.unregisteredAt)
            s.missedTokens[token.token] = nil
        }
    }

    func remember(app: GatewayAppRecord) {
        state.withLock { s in
            s.apps[app.bundleID] = app
            s.missedApps[app.bundleID] = nil
        }
    }

    func remember(key: ProviderKeyRecord) {
        guard let k = Self.providerKey(key) else { return }
        state.withLock { s in
            s.keys[key.keyID] = k
            s.missedKeys[key.keyID] = nil
        }
    }

    var keyGeneration: UInt64 { generation.load(ordering: .acquiring) }

    /// Another node changed this entry: the next lookup asks the store. A key's connections
    /// re-check it (the generation moves after the entry is gone, so a connection that sees
    /// the new number finds the store's answer).
    func forget(_ change: GatewayRegistryChange) {
        state.withLock { s in
            switch change {
            case .key(let id): s.keys[id] = nil; s.missedKeys[id] = nil
            case .app(let id): s.apps[id] = nil; s.missedApps[id] = nil
            case .token(let token): s.tokens[token] = nil; s.missedTokens[token] = nil
            }
        }
        if case .key = change { generation.add(1, ordering: .releasing) }
    }

    /// Changes may have been missed (the notification channel dropped): every lookup asks the
    /// store again.
    func forgetAll() {
        state.withLock { s in s = State() }
        generation.add(1, ordering: .releasing)
    }

    /// Blocking: call from a thread pool. Compares the cached keys with the store's and drops
    /// every one that is gone or changed (a revocation whose notification was lost, or made on
    /// a store that has none: SQLite). Run every `registryRefreshInterval`. Returns the key ids
    /// dropped.
    @discardableResult
    func refreshKeys() throws(GatewayStoreError) -> [String] {
        var stored: [String: ProviderKey] = [:]
        for record in try store.keys() { stored[record.keyID] = Self.providerKey(record) }
        let dropped: [String] = state.withLock { s in
            let gone = s.keys.filter { id, key in stored[id] != key }.map(\.key)
            for id in gone { s.keys[id] = nil }
            return gone.sorted()
        }
        if !dropped.isEmpty { generation.add(1, ordering: .releasing) }
        return dropped
    }
}
