import Synchronization
import TidingsCore

/// The in-memory gateway store: tests, and a gateway that needs no durability.
public final class InMemoryGatewayStore: GatewayStore {
    private struct PushRow {
        var stored: StoredPush
        var deliveredAt: EpochMilliseconds?
        var presentedAt: EpochMilliseconds?
        var answeredAt: EpochMilliseconds?
        var discardedAt: EpochMilliseconds?
        var discardReason: DiscardReason?

        var isOpen: Bool { deliveredAt == nil && discardedAt == nil }

        var status: PushStatus {
            let p = stored.push
            return PushStatus(sequence: stored.sequence, apnsID: p.apnsID, bundleID: p.bundleID, topic: p.topic.rawValue,
                              pushType: p.pushType.rawValue, tokenPrefix: String(p.token.prefix(8)), acceptedAt: p.acceptedAt,
                              storedAt: stored.storedAt, expiresAt: p.expiresAt, deliveredAt: deliveredAt,
                              presentedAt: presentedAt, answeredAt: answeredAt, discardedAt: discardedAt, discardReason: discardReason)
        }
    }

    private struct State {
        var keys: [String: ProviderKeyRecord] = [:]
        var apps: [String: GatewayAppRecord] = [:]
        var devices: [String: GatewayDeviceRecord] = [:]
        var tokens: [String: DeviceTokenRecord] = [:]
        var pushes: [Int64: PushRow] = [:]
        var openByDevice: [String: Set<Int64>] = [:]
        var nextSequence: Int64 = 1
    }

    private let state = Mutex(State())

    public init() {}

    public func addKey(_ key: ProviderKeyRecord) throws(GatewayStoreError) {
        try state.withLock { (s: inout State) throws(GatewayStoreError) in
            if s.keys[key.keyID] != nil { throw .duplicate("key \(key.keyID)") }
            s.keys[key.keyID] = key
        }
    }

    public func key(id: String) -> ProviderKeyRecord? { state.withLock { $0.keys[id] } }

    public func keys() -> [ProviderKeyRecord] { state.withLock { $0.keys.values.sorted { $0.keyID < $1.keyID } } }

    @discardableResult
    public func revokeKey(id: String) throws(GatewayStoreError) -> ProviderKeyRecord {
        try state.withLock { (s: inout State) throws(GatewayStoreError) in
            guard let removed = s.keys.removeValue(forKey: id) else { throw .notFound("key \(id)") }
            return removed
        }
    }

    public func registerApp(_ app: GatewayAppRecord) throws(GatewayStoreError) {
        try state.withLock { (s: inout State) throws(GatewayStoreError) in
            if let existing = s.apps[app.bundleID], existing.teamID != app.teamID { throw .duplicate("app \(app.bundleID)") }
            var record = app
            if let existing = s.apps[app.bundleID] { record.createdAt = existing.createdAt }
            s.apps[app.bundleID] = record
        }
    }

    public func app(bundleID: String) -> GatewayAppRecord? { state.withLock { $0.apps[bundleID] } }

    public func apps() -> [GatewayAppRecord] { state.withLock { $0.apps.values.sorted { $0.bundleID < $1.bundleID } } }

    public func registerDevice(_ device: GatewayDeviceRecord) {
        state.withLock { s in if s.devices[device.deviceID] == nil { s.devices[device.deviceID] = device } }
    }

    public func device(id: String) -> GatewayDeviceRecord? { state.withLock { $0.devices[id] } }

    public func addToken(_ token: DeviceTokenRecord) throws(GatewayStoreError) {
        try state.withLock { (s: inout State) throws(GatewayStoreError) in
            if s.tokens[token.token] != nil { throw .duplicate("token") }
            s.tokens[token.token] = token
        }
    }

    public func token(_ token: String) -> DeviceTokenRecord? { state.withLock { $0.tokens[token] } }

    public func tokenCount(deviceID: String) -> Int {
        state.withLock { s in s.tokens.values.reduce(0) { $0 + ($1.deviceID == deviceID ? 1 : 0) } }
    }

    public func activeToken(deviceID: String, bundleID: String, environment: APNsEnvironment) -> DeviceTokenRecord? {
        state.withLock { s in
            s.tokens.values.first {
                $0.deviceID == deviceID && $0.bundleID == bundleID && $0.environment == environment && $0.unregisteredAt == nil
            }
        }
    }

    public func unregisterTokens(deviceID: String, bundleID: String, at: EpochMilliseconds) -> [DeviceTokenRecord] {
        state.withLock { s in
            var killed: [DeviceTokenRecord] = []
            for (key, record) in s.tokens where record.deviceID == deviceID && record.bundleID == bundleID && record.unregisteredAt == nil {
                s.tokens[key]!.unregisteredAt = at
                killed.append(s.tokens[key]!)
            }
            let dead = Set(killed.map(\.token))
            for seq in s.openByDevice[deviceID] ?? [] where dead.contains(s.pushes[seq]!.stored.push.token) {
                s.pushes[seq]!.discardedAt = at
                s.pushes[seq]!.discardReason = .unregistered
                s.openByDevice[deviceID]!.remove(seq)
            }
            return killed
        }
    }

    public func commit(pushes: [NewPush], acknowledged: [Int64], at: EpochMilliseconds) -> [StoredPush] {
        state.withLock { s in
            var stored: [StoredPush] = []
            stored.reserveCapacity(pushes.count)
            for push in pushes {
                let sp = StoredPush(sequence: s.nextSequence, push: push, storedAt: at)
                s.nextSequence += 1
                s.pushes[sp.sequence] = PushRow(stored: sp)
                s.openByDevice[push.deviceID, default: []].insert(sp.sequence)
                stored.append(sp)
            }
            for seq in acknowledged {
                guard let row = s.pushes[seq], row.deliveredAt == nil else { continue }
                s.pushes[seq]!.deliveredAt = at
                s.openByDevice[row.stored.push.deviceID]?.remove(seq)
            }
            return stored
        }
    }

    public func prepareBacklog(deviceID: String, now: EpochMilliseconds) -> Int {
        state.withLock { s in
            var live: [StoredPush] = []
            var discarded = 0
            for seq in (s.openByDevice[deviceID] ?? []).sorted() {
                let row = s.pushes[seq]!
                if row.stored.push.expiresAt <= now {
                    s.pushes[seq]!.discardedAt = now
                    s.pushes[seq]!.discardReason = .expired
                    s.openByDevice[deviceID]!.remove(seq)
                    discarded += 1
                } else {
                    live.append(row.stored)
                }
            }
            let apps = s.apps
            let discard = Self.coalesced(live) { apps[$0]?.storagePolicy ?? .apns }
            for p in discard {
                s.pushes[p.sequence]!.discardedAt = now
                s.pushes[p.sequence]!.discardReason = .coalesced
                s.openByDevice[deviceID]!.remove(p.sequence)
            }
            return discarded + discard.count
        }
    }

    /// What the storage policy removes from a device's open, unexpired pushes (in sequence
    /// order): `apns` keeps the latest per token, `all` the latest per token and collapse id
    /// (pushes without one all stay). The SQLite store decides the same in SQL.
    private static func coalesced(_ pushes: [StoredPush], policy: (String) -> StoragePolicy) -> [StoredPush] {
        func key(_ p: StoredPush) -> String? {
            switch policy(p.push.bundleID) {
            case .all: p.push.collapseID.map { p.push.token + "\u{0}" + $0.rawValue }
            default: p.push.token
            }
        }
        var latest: [String: Int64] = [:]
        for p in pushes { if let k = key(p) { latest[k] = p.sequence } }
        return pushes.filter { p in key(p).map { latest[$0] != p.sequence } ?? false }
    }

    public func pendingPushes(deviceID: String, after: Int64, limit: Int) -> [StoredPush] {
        state.withLock { s in
            (s.openByDevice[deviceID] ?? []).filter { $0 > after }.sorted().prefix(max(0, limit)).map { s.pushes[$0]!.stored }
        }
    }

    public func status(apnsID: String) -> [PushStatus] {
        state.withLock { s in
            s.pushes.values.filter { $0.stored.push.apnsID == apnsID }.map(\.status).sorted { $0.sequence < $1.sequence }
        }
    }

    public func recordEvent(_ event: DeliveryEvent, apnsID: String, deviceID: String, at: EpochMilliseconds) -> Bool {
        state.withLock { s in
            guard let seq = Self.latest(apnsID: apnsID, deviceID: deviceID, in: s) else { return false }
            return Self.record(event, sequence: seq, deviceID: deviceID, at: at, &s)
        }
    }

    /// The device's latest push with this apns-id (an event without its push's sequence).
    private static func latest(apnsID: String, deviceID: String, in s: State) -> Int64? {
        s.pushes.values.filter { $0.stored.push.apnsID == apnsID && $0.stored.push.deviceID == deviceID }.map(\.stored.sequence).max()
    }

    public func recordEvents(_ events: [DeviceEventReport], deviceID: String, at: EpochMilliseconds) {
        for e in events {
            state.withLock { s in
                let found: Int64?
                if let sequence = e.sequence {
                    guard let push = s.pushes[sequence]?.stored.push, push.apnsID == e.apnsID, push.deviceID == deviceID else { return }
                    found = sequence
                } else {
                    found = Self.latest(apnsID: e.apnsID, deviceID: deviceID, in: s)
                }
                guard let found else { return }
                _ = Self.record(e.event, sequence: found, deviceID: deviceID, at: at, occurredAt: e.occurredAt, &s)
            }
        }
    }

    private static func record(_ event: DeliveryEvent, sequence seq: Int64, deviceID: String, at: EpochMilliseconds,
                               occurredAt: EpochMilliseconds? = nil, _ s: inout State) -> Bool {
        let time = DeviceEventReport.recordedTime(occurredAt: occurredAt, acceptedAt: s.pushes[seq]!.stored.push.acceptedAt, now: at)
        switch event {
        case .presented: if s.pushes[seq]!.presentedAt == nil { s.pushes[seq]!.presentedAt = time }
        case .answered: if s.pushes[seq]!.answeredAt == nil { s.pushes[seq]!.answeredAt = time }
        default: return false
        }
        if s.pushes[seq]!.deliveredAt == nil {
            s.pushes[seq]!.deliveredAt = at
            s.openByDevice[deviceID]?.remove(seq)
        }
        return true
    }

    public func expirePushes(now: EpochMilliseconds, limit: Int) -> Int {
        state.withLock { s in
            var count = 0
            for (device, seqs) in s.openByDevice {
                for seq in seqs.sorted() where count < limit && s.pushes[seq]!.stored.push.expiresAt <= now {
                    s.pushes[seq]!.discardedAt = now
                    s.pushes[seq]!.discardReason = .expired
                    s.openByDevice[device]!.remove(seq)
                    count += 1
                }
            }
            return count
        }
    }

    public func prunePushes(finishedBefore cutoff: EpochMilliseconds, limit: Int) -> Int {
        state.withLock { s in
            var count = 0
            for seq in s.pushes.keys.sorted() where count < limit {
                let row = s.pushes[seq]!
                guard let finished = row.deliveredAt ?? row.discardedAt, finished < cutoff else { continue }
                s.pushes[seq] = nil  // finished pushes have already left openByDevice
                count += 1
            }
            return count
        }
    }
}
