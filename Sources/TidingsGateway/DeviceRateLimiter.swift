import Synchronization
import TidingsStorage

/// A token bucket: `burst` pushes at once, refilled at `perSecond`. Pure; time is passed in.
struct TokenBucket: Sendable, Hashable {
    var tokens: Double
    var updatedAt: EpochMilliseconds

    /// Takes one token at `now` if there is one.
    mutating func take(now: EpochMilliseconds, perSecond: Double, burst: Double) -> Bool {
        if now > updatedAt {
            tokens = min(burst, tokens + Double(now - updatedAt) * perSecond / 1000)
            updatedAt = now
        }
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}

/// Token buckets by key: the per-device-token limit behind `429 TooManyRequests`, and the
/// device channel's limits on new device identities (per source address, overall).
final class DeviceRateLimiter: Sendable {
    private let perSecond: Double
    private let burst: Double
    private let buckets = Mutex<[String: TokenBucket]>([:])

    init(perSecond: Double, burst: Double) {
        self.perSecond = perSecond
        self.burst = max(burst, 1)
    }

    var isEnabled: Bool { perSecond > 0 }

    func allow(token: String, now: EpochMilliseconds) -> Bool { allow(key: token, now: now) }

    /// One event for `key` (a device token, a source address, `""` for a global limit).
    func allow(key token: String, now: EpochMilliseconds) -> Bool {
        guard isEnabled else { return true }
        return buckets.withLock { b in
            if b.count > 200_000 {
                // Full buckets carry no information: forget them.
                b = b.filter { $0.value.tokens < burst - 1 }
            }
            var bucket = b[token] ?? TokenBucket(tokens: burst, updatedAt: now)
            let allowed = bucket.take(now: now, perSecond: perSecond, burst: burst)
            b[token] = bucket
            return allowed
        }
    }
}
