import NIOCore
import Synchronization
import TidingsCore

/// State shared between the connection object and its channel handler.
final class DeviceConnectionShared: Sendable {
    private struct State {
        var welcome: CheckedContinuation<String, any Error>?
        var channel: (any Channel)?
        var pending: [Int64: CheckedContinuation<DeviceMessage, any Error>] = [:]
        var nextID: Int64 = 1
        var closed = false
        /// Messages waiting for the event loop, in order; `flushScheduled` while a task to
        /// write them is queued.
        var outbound: [DeviceMessage] = []
        var flushScheduled = false
        /// The gateway accepts `acks` (its `welcome` said so).
        var batchedAcks = false
        /// The gateway answers events that carry a request id (`eventRecorded`).
        var recordsEvents = false
        /// The gateway accepts `events` (several in one message).
        var batchedEvents = false
    }

    /// At most this many sequences in one `acks` message.
    static let maximumAcksPerMessage = 1024

    private let state = Mutex(State())
    let pushBuffer: DevicePushBuffer

    init(pushes: DevicePushBuffer) { self.pushBuffer = pushes }

    var channel: (any Channel)? { state.withLock { $0.channel } }

    func setWelcome(_ c: CheckedContinuation<String, any Error>) { state.withLock { $0.welcome = c } }
    func setChannel(_ channel: any Channel) { state.withLock { $0.channel = channel } }

    var recordsEvents: Bool { state.withLock { $0.recordsEvents } }
    var batchedEvents: Bool { state.withLock { $0.batchedEvents } }

    func welcome(_ deviceID: String, batchedAcks: Bool, recordsEvents: Bool, batchedEvents: Bool) {
        state.withLock { s in
            s.batchedAcks = batchedAcks
            s.recordsEvents = recordsEvents
            s.batchedEvents = batchedEvents && recordsEvents
            defer { s.welcome = nil }
            return s.welcome
        }?.resume(returning: deviceID)
    }

    func enqueue(_ message: DeviceMessage, on channel: any Channel) {
        enqueue(contentsOf: CollectionOfOne(message), on: channel)
    }

    func enqueue(contentsOf messages: some Collection<DeviceMessage>, on channel: any Channel) {
        guard !messages.isEmpty else { return }
        let schedule = state.withLock { s in
            s.outbound.append(contentsOf: messages)
            if s.flushScheduled { return false }
            s.flushScheduled = true
            return true
        }
        if schedule { channel.eventLoop.execute { self.writeQueued(to: channel) } }
    }

    /// On the event loop: everything queued, in order, as one buffer and one flush; runs of
    /// acknowledgements become `acks` messages when the gateway accepts them.
    private func writeQueued(to channel: any Channel) {
        let (messages, batchedAcks) = state.withLock { s in
            s.flushScheduled = false
            var taken: [DeviceMessage] = []
            swap(&taken, &s.outbound)
            return (taken, s.batchedAcks)
        }
        var frames: [UInt8] = []
        var acks: [Int64] = []
        func appendAcks() {
            if acks.count == 1 { DeviceMessage.ack(sequence: acks[0]).appendFrame(to: &frames) }
            if acks.count > 1 { DeviceMessage.acks(sequences: acks).appendFrame(to: &frames) }
            acks.removeAll(keepingCapacity: true)
        }
        for message in messages {
            if batchedAcks, case .ack(let sequence) = message {
                acks.append(sequence)
                if acks.count == Self.maximumAcksPerMessage { appendAcks() }
                continue
            }
            appendAcks()
            message.appendFrame(to: &frames)
        }
        appendAcks()
        guard !frames.isEmpty else { return }
        channel.writeAndFlush(channel.allocator.buffer(bytes: frames), promise: nil)
    }

    /// Fails the pending connect; true when it was still pending.
    func failWelcome(_ error: any Error) -> Bool {
        guard let c = state.withLock({ s in defer { s.welcome = nil }; return s.welcome }) else { return false }
        c.resume(throwing: error)
        return true
    }

    func nextRequestID() -> Int64 { state.withLock { s in defer { s.nextID += 1 }; return s.nextID } }

    func addPending(_ id: Int64, _ c: CheckedContinuation<DeviceMessage, any Error>) -> Bool {
        state.withLock { s in
            if s.closed { return false }
            s.pending[id] = c
            return true
        }
    }

    func answer(_ id: Int64, with result: Result<DeviceMessage, any Error>) {
        state.withLock { $0.pending.removeValue(forKey: id) }?.resume(with: result)
    }

    func closed(_ error: (any Error)?) {
        let (welcome, pending) = state.withLock { s in
            s.closed = true
            defer { s.welcome = nil; s.pending.removeAll() }
            return (s.welcome, Array(s.pending.values))
        }
        welcome?.resume(throwing: error ?? DeviceClientError.closed)
        for p in pending { p.resume(throwing: error ?? DeviceClientError.closed) }
        pushBuffer.finish(error)
    }
}
