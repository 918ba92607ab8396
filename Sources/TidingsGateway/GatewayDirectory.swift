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
    let store: any GatewayStore
    /// How long a miss is trusted before the store is asked again.
    let negativeCacheMilliseconds: EpochMilliseconds = 1000

    init(store: any GatewayStore) { self.store = store }

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

    /// Blocking: call from a thread pool.
    func loadKey(_ id: String, now: EpochMilliseconds) throws(GatewayStoreError) -> ProviderKey? {
        let key = try store.key(id: id).flatMap(Self.providerKey)
        state.withLock { s in
            if let key { s.keys[id] = key } else {
                if s.missedKeys.count > 10_000 { s.missedKeys.removeAll() }
                s.missedKeys[id] = now
            }
        }
        return key
    }

    /// Blocking: call from a thread pool.
    func loadApp(_ bundleID: String, now: EpochMilliseconds) throws(GatewayStoreError) -> GatewayAppRecord? {
        let app = try store.app(bundleID: bundleID)
        state.withLock { s in
            if let app { s.apps[bundleID] = app } else {
                if s.missedApps.count > 10_000 { s.missedApps.removeAll() }
                s.missedApps[bundleID] = now
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
                if s.missedTokens.count > 100_000 { s.missedTokens.removeAll() }
                s.missedTokens[token] = now
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

    /// Another node changed this entry: the next lookup asks the store.
    func forget(_ change: GatewayRegistryChange) {
        state.withLock { s in
            switch change {
            case .key(let id): s.keys[id] = nil; s.missedKeys[id] = nil
            case .app(let id): s.apps[id] = nil; s.missedApps[id] = nil
            case .token(let token): s.tokens[token] = nil; s.missedTokens[token] = nil
            }
        }
    }

    /// Changes may have been missed (the notification channel dropped): every lookup asks the
    /// store again.
    func forgetAll() {
        state.withLock { s in s = State() }
    }
}
