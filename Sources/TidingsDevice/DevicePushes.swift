import TidingsCore

/// The pushes of a connection, in order (`DeviceConnection.pushes`): an `AsyncSequence` like
/// `AsyncThrowingStream`, ending when the connection closes (throwing if it failed) or the
/// consuming task is cancelled. The consumer takes everything buffered at once: a read burst
/// of pushes costs one lock and at most one wake-up, not a stream's lock and generic
/// bookkeeping per push. One consumer.
public struct DevicePushes: AsyncSequence, Sendable {
    public typealias Element = DevicePush
    let buffer: DevicePushBuffer

    public func makeAsyncIterator() -> Iterator { Iterator(buffer: buffer) }

    /// The oldest pushes received and not yet taken, in order, as many as fit: at most
    /// `maximumPushes`, with at most `maximumPayloadBytes` of payload together — the first one
    /// whatever its size when `firstAlways`, else none (an empty array) when it alone does not
    /// fit. Nil when the connection has ended. Waits while nothing is pending. For a consumer
    /// with bounded room of its own; what it leaves stays buffered, and a full buffer stops
    /// the connection reading (`DeviceClientConfiguration.maximumBufferedPushes`).
    public func take(maximumPushes: Int, maximumPayloadBytes: Int, firstAlways: Bool) async throws -> [DevicePush]? {
        try await buffer.take(DevicePushBuffer.Room(pushes: maximumPushes, payloadBytes: maximumPayloadBytes, atLeastOne: firstAlways))
    }

    /// The same pushes as the bursts they came in: each element is everything received since
    /// the consumer last took (one read, or several while it was busy, e.g. committing the
    /// previous burst), in order, never empty. Use either this or the pushes one by one.
    public var bursts: DevicePushBursts { DevicePushBursts(buffer: buffer) }

    public struct Iterator: AsyncIteratorProtocol {
        let buffer: DevicePushBuffer
        /// Taken from the buffer, not yet returned (in reverse: `popLast` is the next).
        private var taken: [DevicePush] = []

        init(buffer: DevicePushBuffer) { self.buffer = buffer }

        public mutating func next() async throws -> DevicePush? {
            if let push = taken.popLast() { return push }
            taken = try await buffer.take()
            taken.reverse()
            return taken.popLast()
        }
    }
}

/// `DevicePushes.bursts`: the connection's pushes, a burst at a time.
public struct DevicePushBursts: AsyncSequence, Sendable {
    public typealias Element = [DevicePush]
    let buffer: DevicePushBuffer

    public func makeAsyncIterator() -> Iterator { Iterator(buffer: buffer) }

    public struct Iterator: AsyncIteratorProtocol {
        let buffer: DevicePushBuffer

        public mutating func next() async throws -> [DevicePush]? {
            let burst = try await buffer.take()
            return burst.isEmpty ? nil : burst
        }
    }
}
