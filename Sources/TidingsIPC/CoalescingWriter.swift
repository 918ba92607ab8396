import NIOCore
import Synchronization

/// Writes frames from any thread in call order and flushes once per event-loop turn
/// instead of once per frame: under load, one `write` system call carries many frames.
final class CoalescingWriter: Sendable {
    private struct State {
        var pending: [ByteBuffer] = []
        var scheduled = false
    }

    private let channel: any Channel
    private let state = Mutex(State())

    init(channel: any Channel) {
        self.channel = channel
    }

    func write(_ buffer: ByteBuffer) {
        let schedule = state.withLock { state -> Bool in
            state.pending.append(buffer)
            guard !state.scheduled else { return false }
            state.scheduled = true
            return true
        }
        if schedule {
            channel.eventLoop.execute { self.drain() }
        }
    }

    private func drain() {
        let buffers = state.withLock { state -> [ByteBuffer] in
            state.scheduled = false
            defer { state.pending.removeAll(keepingCapacity: true) }
            return state.pending
        }
        for buffer in buffers { channel.write(buffer, promise: nil) }
        channel.flush()
    }
}
