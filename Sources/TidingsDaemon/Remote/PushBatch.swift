import Synchronization
import TidingsCore

/// Group commit for the device channel: a reader appends pushes as they arrive; the writer
/// takes everything that arrived meanwhile — the pushes of one read burst, plus those that
/// came while the previous commit was being synced — and commits them in one transaction
/// before acknowledging them all. A push alone is committed at once, as before.
final class PushBatch: Sendable {
    private struct State {
        var pushes: [DevicePush] = []
        var finished = false
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let state = Mutex(State())

    func append(_ push: DevicePush) {
        let waiter = state.withLock { state in
            state.pushes.append(push)
            return state.waiter.take()
        }
        waiter?.resume()
    }

    /// No more pushes: `next()` returns what is left, then nil.
    func finish() {
        let waiter = state.withLock { state in
            state.finished = true
            return state.waiter.take()
        }
        waiter?.resume()
    }

    /// Waits for pushes and takes all of them, in order; nil once finished and drained.
    /// One caller at a time.
    func next() async -> [DevicePush]? {
        while true {
            let (taken, finished) = state.withLock { state -> ([DevicePush], Bool) in
                defer { state.pushes.removeAll(keepingCapacity: true) }
                return (state.pushes, state.finished)
            }
            if !taken.isEmpty { return taken }
            if finished { return nil }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let ready = state.withLock { state in
                    if state.pushes.isEmpty, !state.finished {
                        state.waiter = continuation
                        return false
                    }
                    return true
                }
                if ready { continuation.resume() }
            }
        }
    }
}
