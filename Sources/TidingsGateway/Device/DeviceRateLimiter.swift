import Synchronization
import TidingsStorage

/// A token bucket: `burst` pushes at once, refilled at `perSecond`. Pure; time is passed in.
struct TokenBucket: Sendable, Hashable {
    var tokens: Double
    var updatedAt: EpochMilliseconds

    /// Adds what `perSecond` earned since `updatedAt`, up to `burst`.
    mutating func refill(now: EpochMilliseconds, perSecond: Double, burst: Double) {
        if now > updatedAt {
            tokens = min(burst, tokens + Double(now - updatedAt) * perSecond / 1000)
            updatedAt = now
        }
    }

    /// Takes one token at `now` if there is one.
    mutating func take(now: EpochMilliseconds, perSecond: Double, burst: Double) -> Bool {
        refill(now: now, perSecond: perSecond, burst: burst)
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}

/// Token buckets by key: the per-device-token limit behind `429 TooManyRequests`, the device
/// channel's request limit per device id, and its limits on new device identities (per source
/// address, overall).
///
/// The table holds at most `maximumKeys` buckets: past it, every bucket is refilled to now and
/// the full ones (which carry no information) are dropped; if more than half the table is left
/// (many keys used within a refill time), all are dropped, so that pruning stays amortized O(1)
/// per event (those keys start again from a full burst).
final class DeviceRateLimiter: Sendable {
    private let perSecond: Double
    private let burst: Double
    private let maximumKeys: Int
    private let buckets = Mutex<[String: TokenBucket]>([:])

    init(perSecond: Double, burst: Double, maximumKeys: Int = GatewayConfiguration.defaultRateLimiterMaximumKeys) {
        self.perSecond = perSecond
        self.burst = max(burst, 1)
        self.maximumKeys = max(maximumKeys, 1)
    }

    var isEnabled: Bool { perSecond > 0 }

    /// Buckets held (tests).
    var keyCount: Int { buckets.withLock { $0.count } }

    func allow(token: String, now: EpochMilliseconds) -> Bool { allow(key: token, now: now) }

    /// One event for `key` (a device token, a device id, a source address, `""` for a global limit).
    func allow(key: String, now: EpochMilliseconds) -> Bool {
        allow(key: key, now: now) { true }
    }

    /// One event for `key` here and `otherKey` in `other`, taken from both or from neither: a
    /// refusal by either spends nothing. (Locks this limiter, then `other`: always call it in
    /// the same order for the same pair.)
    func allow(key: String, now: EpochMilliseconds, and other: DeviceRateLimiter, key otherKey: String) -> Bool {
        allow(key: key, now: now) { other.allow(key: otherKey, now: now) }
    }

    /// Takes a token for `key` if it has one and `also()` (run under the lock) agrees.
    private func allow(key: String, now: EpochMilliseconds, also: () -> Bool) -> Bool {
        guard isEnabled else { return also() }
        return buckets.withLock { b in
            if b[key] == nil, b.count >= maximumKeys { prune(&b, now: now) }
            var bucket = b[key] ?? TokenBucket(tokens: burst, updatedAt: now)
            bucket.refill(now: now, perSecond: perSecond, burst: burst)
            guard bucket.tokens >= 1, also() else {
                b[key] = bucket
                return false
            }
            bucket.tokens -= 1
            b[key] = bucket
            return true
        }
    }

    private func prune(_ b: inout [String: TokenBucket], now: EpochMilliseconds) {
        let (perSecond, burst) = (self.perSecond, self.burst)
        b = b.filter { _, bucket in
            var bucket = bucket
            bucket.refill(now: now, perSecond: perSecond, burst: burst)
            return bucket.tokens < burst
        }
        if b.count > maximumKeys / 2 { b.removeAll() }
    }
}
