import Synchronization
import TidingsCore

/// Between the channel handler (appends a burst) and the consumer (takes all there is, or a
/// prefix within its own room). Bounded: once `maximumPushes` or `maximumPayloadBytes` are
/// pending, the handler stops reading the connection (`mayRead`) until the consumer takes, so
/// a consumer that cannot keep up makes TCP push back on the gateway instead of this buffer
/// growing. What one read brought is appended whole, so the bound can be passed by one read.
final class DevicePushBuffer: Sendable {
    private struct State {
        var pending: [DevicePush] = []
        /// The payload bytes of `pending`.
        var pendingBytes = 0
        /// Set while the handler holds a read because the buffer was full: called (once) when
        /// the consumer takes.
        var resumeReading: (@Sendable () -> Void)?
        var waiter: CheckedContinuation<[DevicePush], any Error>?
        /// The connection ended: nil when it was clean (or the failure was already thrown).
        var finished = false
        var failure: (any Error)?
        var cancelled = false
    }

    private let state = Mutex(State())
    let maximumPushes: Int
    let maximumPayloadBytes: Int

    init(maximumPushes: Int = DeviceClientConfiguration.defaultMaximumBufferedPushes,
         maximumPayloadBytes: Int = DeviceClientConfiguration.defaultMaximumBufferedPayloadBytes) {
        self.maximumPushes = max(1, maximumPushes)
        self.maximumPayloadBytes = max(1, maximumPayloadBytes)
    }

    func append(_ pushes: consuming [DevicePush]) {
        // Moved, never copied: the consumer's array is then its alone.
        var pushes = pushes
        let waiter = state.withLock { s -> CheckedContinuation<[DevicePush], any Error>? in
            if s.finished || s.cancelled { return nil }
            if let waiter = s.waiter {
                s.waiter = nil
                return waiter
            }
            s.pendingBytes += pushes.reduce(0) { $0 + $1.payload.count }
            if s.pending.isEmpty { swap(&s.pending, &pushes) } else { s.pending.append(contentsOf: pushes) }
            return nil
        }
        waiter?.resume(returning: pushes)
    }

    /// Whether the handler may read more now. False when the buffer is full: then `resume` is
    /// called once the consumer has taken (from whichever thread takes), and not before.
    func mayRead(resume: @escaping @Sendable () -> Void) -> Bool {
        state.withLock { s in
            if s.finished || s.cancelled || (s.pending.count < maximumPushes && s.pendingBytes < maximumPayloadBytes) { return true }
            s.resumeReading = resume
            return false
        }
    }

    /// Whether a consumer waits (tests).
    var waiting: Bool { state.withLock { $0.waiter != nil } }

    /// How many pushes and payload bytes are pending (tests).
    var pendingCount: (pushes: Int, payloadBytes: Int) { state.withLock { ($0.pending.count, $0.pendingBytes) } }

    /// No more pushes; what is pending is still taken first, then `error` is thrown once.
    func finish(_ error: (any Error)?) {
        let waiter = state.withLock { s -> CheckedContinuation<[DevicePush], any Error>? in
            if s.finished { return nil }
            s.finished = true
            // A waiter means nothing is pending: it gets the end now, else `take` does later.
            guard let waiter = s.waiter else {
                s.failure = error
                return nil
            }
            s.waiter = nil
            return waiter
        }
        guard let waiter else { return }
        if let error { waiter.resume(throwing: error) } else { waiter.resume(returning: []) }
    }

    /// Everything pending; empty when the sequence has ended. Waits while there is nothing.
    func take() async throws -> [DevicePush] {
        try await take(Room(pushes: .max, payloadBytes: .max, atLeastOne: true)) ?? []
    }

    /// What a consumer has room for: at most `pushes` pushes of at most `payloadBytes` payload
    /// bytes together; `atLeastOne`: the first push even if its payload alone is larger.
    struct Room: Sendable {
        var pushes: Int
        var payloadBytes: Int
        var atLeastOne: Bool
    }

    /// The oldest pending pushes that fit in `room`, in order: empty when the first does not
    /// fit (and `atLeastOne` is false); nil when the sequence has ended (or the consumer was
    /// cancelled). Waits while nothing is pending.
    func take(_ room: Room) async throws -> [DevicePush]? {
        if let ready = state.withLock({ Self.ready(&$0, room) }) { return try ready.get() }
        return try await withTaskCancellationHandler {
            let taken = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[DevicePush], any Error>) in
                let ready = state.withLock { s -> Result<[DevicePush]?, any Error>? in
                    if let ready = Self.ready(&s, room) { return ready }
                    s.waiter = continuation
                    return nil
                }
                if let ready { continuation.resume(with: ready.map { $0 ?? [] }) }
            }
            // Empty: the end. Else handed over by `append` directly: what does not fit goes back, in front.
            if taken.isEmpty { return nil }
            let fit = Self.fitting(taken, room)
            if fit < taken.count { putBack(taken[fit...]) }
            return Array(taken[..<fit])
        } onCancel: {
            let waiter = state.withLock { s in
                s.cancelled = true
                defer { s.waiter = nil }
                return s.waiter
            }
            waiter?.resume(returning: [])
        }
    }

    /// How many of `pushes`, from the first, fit in `room`.
    private static func fitting(_ pushes: some Collection<DevicePush>, _ room: Room) -> Int {
        var count = 0, bytes = 0
        for push in pushes {
            guard count < room.pushes else { break }
            bytes += push.payload.count
            if bytes > room.payloadBytes, !(count == 0 && room.atLeastOne) { break }
            count += 1
        }
        return count
    }

    /// Pushes handed to a waiting consumer that did not fit its room: pending again, first.
    private func putBack(_ pushes: ArraySlice<DevicePush>) {
        state.withLock { s in
            if s.cancelled { return }
            s.pending.insert(contentsOf: pushes, at: 0)
            s.pendingBytes += pushes.reduce(0) { $0 + $1.payload.count }
        }
    }

    /// What `take` returns without waiting, if anything. Taking makes room: a held read resumes.
    private static func ready(_ s: inout State, _ room: Room) -> Result<[DevicePush]?, any Error>? {
        if s.cancelled { return .success(nil) }
        if !s.pending.isEmpty {
            let fit = fitting(s.pending, room)
            var taken: [DevicePush] = []
            if fit == s.pending.count {
                swap(&taken, &s.pending)
                s.pendingBytes = 0
            } else {
                taken = Array(s.pending[..<fit])
                s.pending.removeFirst(fit)
                s.pendingBytes -= taken.reduce(0) { $0 + $1.payload.count }
            }
            if fit > 0, let resume = s.resumeReading {
                s.resumeReading = nil
                resume()
            }
            return .success(taken)
        }
        if s.finished {
            if let failure = s.failure {
                s.failure = nil
                return .failure(failure)
            }
            return .success(nil)
        }
        return nil
    }
}
