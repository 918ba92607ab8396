import Foundation

/// Wall-clock time, injected. Triggers, deadlines and expirations read `now` and sleep
/// until a `Date`; tests pass a clock they advance by hand, so nothing waits for real time.
///
/// Swift's `Clock` measures durations on instants that are not dates; notification
/// triggers are dates (calendar components, time zones), hence this small protocol.
public protocol WallClock: Sendable {
    var now: Date { get }
    /// Returns at `deadline` or later; throws `CancellationError` when the task is cancelled.
    func sleep(until deadline: Date) async throws
}

extension WallClock {
    public func sleep(for seconds: TimeInterval) async throws {
        try await sleep(until: now.addingTimeInterval(seconds))
    }

    /// Now, in whole milliseconds since 1970 (rounded down): the unit of the device protocol's
    /// and the gateway's times.
    public func nowMilliseconds() -> Int64 { Int64((now.timeIntervalSince1970 * 1000).rounded(.down)) }
}

/// The system's clock.
///
/// A deadline is untrusted: a trigger may lie centuries ahead (or its stored date be
/// infinite), and `Task.sleep` takes a `Duration` of 64-bit nanoseconds (±292 years).
/// Sleeps longer than `maximumStep` are taken in steps, each re-reading the clock, so no
/// deadline can overflow the conversion and a change of the system time is noticed.
public struct SystemWallClock: WallClock {
    /// The longest single sleep: one day.
    public static let maximumStep: TimeInterval = 86_400

    public init() {}

    public var now: Date { Date() }

    public func sleep(until deadline: Date) async throws {
        while true {
            guard let step = Self.step(until: deadline, now: Date()) else {
                try Task.checkCancellation()
                return
            }
            try await Task.sleep(for: step, tolerance: .zero, clock: .continuous)
        }
    }

    /// How long to sleep next towards `deadline`: nil when it has come (or is no date at
    /// all, NaN), else at most `maximumStep`, in whole nanoseconds that never overflow.
    public static func step(until deadline: Date, now: Date) -> Duration? {
        let delay = deadline.timeIntervalSince(now)
        guard delay > 0 else { return nil }
        let seconds = min(delay, maximumStep)
        return .nanoseconds(Int64((seconds * 1_000_000_000).rounded(.up)))
    }
}
