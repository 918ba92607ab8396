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
}

/// The system's clock.
public struct SystemWallClock: WallClock {
    public init() {}

    public var now: Date { Date() }

    public func sleep(until deadline: Date) async throws {
        let delay = deadline.timeIntervalSinceNow
        guard delay > 0 else {
            try Task.checkCancellation()
            return
        }
        try await Task.sleep(for: .nanoseconds(Int64(delay * 1_000_000_000)), tolerance: .zero, clock: .continuous)
    }
}
