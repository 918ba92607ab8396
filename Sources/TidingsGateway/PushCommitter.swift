import Dispatch
import Foundation
import Logging
import NIOCore
import NIOHTTP2
import Synchronization
import TidingsCore
import TidingsStorage

/// Group commit: every push accepted while the writer is busy is committed in the next
/// transaction, together with the acknowledgements that came in meanwhile and, with a store
/// that can (`GroupCommitsEvents`), the devices' delivery events. The 200 (the request's
/// completion) and an event's confirmation run only after that transaction is durable.
///
/// The hand-off costs one lock and, only when the writer is idle, one semaphore signal per
/// batch; outcomes go back to each connection's event loop in one task per connection per
/// batch (no closure per request).
final class PushCommitter: Sendable {
    struct Request: Sendable {
        var push: NewPush
        /// The provider connection waiting for the outcome.
        var sink: any PushCommitSink
        var streamID: HTTP2StreamID
    }

    /// One device connection's delivery events and the promise its confirmation waits on.
    struct Events: Sendable {
        var batch: DeviceEventBatch
        var recorded: EventLoopPromise<Void>
    }

    private struct State {
        var requests: [Request] = []
        var acks: [Int64] = []
        var events: [Events] = []
        var writerIdle = true
        var stopping = false
        var stopped = false
    }

    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    private let store: any GatewayStore
    /// The store, when its group commit takes delivery events.
    private let eventStore: (any GroupCommitsEvents)?
    private let clock: any WallClock
    private let logger: Logger
    private let metrics: GatewayMetrics
    /// Called on the writer thread after each commit with the stored pushes, in order.
    private let onCommitted: @Sendable ([StoredPush]) -> Void
    /// Requests waiting for the next transaction, at most.
    private let maximumQueued: Int
    /// Pushes and acknowledgements in one transaction, at most (the rest go in the next one);
    /// delivery events count against the acknowledgements' number (each is one row's update
    /// too), whole batches at a time, at least one.
    private let maximumBatch: (pushes: Int, acknowledgements: Int)

    init(store: any GatewayStore, clock: any WallClock, logger: Logger, metrics: GatewayMetrics, maximumQueued: Int = .max,
         maximumBatch: (pushes: Int, acknowledgements: Int) = (.max, .max),
         onCommitted: @escaping @Sendable ([StoredPush]) -> Void) {
        self.maximumQueued = max(1, maximumQueued)
        self.maximumBatch = (max(1, maximumBatch.pushes), max(1, maximumBatch.acknowledgements))
        self.store = store
        self.eventStore = store as? any GroupCommitsEvents
        self.clock = clock
        self.logger = logger
        self.metrics = metrics
        self.onCommitted = onCommitted
    }

    func start() {
        let thread = Thread { [self] in self.run() }
        thread.name = "tidings-gateway-commit"
        thread.start()
    }

    enum Submission {
        case queued
        /// The committer is stopping (`503 Shutdown`).
        case stopping
        /// `maximumQueued` requests already wait for the next transaction (`503 ServiceUnavailable`).
        case full
    }

    /// Queues a push for the next transaction.
    func submit(_ request: Request) -> Submission {
        let (submission, signal): (Submission, Bool) = state.withLock { s in
            if s.stopping { return (.stopping, false) }
            if s.requests.count >= maximumQueued { return (.full, false) }
            s.requests.append(request)
            if s.writerIdle { s.writerIdle = false; return (.queued, true) }
            return (.queued, false)
        }
        if signal { wake.signal() }
        return submission
    }

    /// Queues acknowledgements for the next transaction.
    func acknowledge(_ sequences: [Int64]) {
        guard !sequences.isEmpty else { return }
        let signal = state.withLock { s in
            if s.stopped { return false }
            s.acks.append(contentsOf: sequences)
            if s.writerIdle { s.writerIdle = false; return true }
            return false
        }
        if signal { wake.signal() }
    }

    /// Whether `record(_:)` takes delivery events (else they go to the registry queue).
    var recordsEvents: Bool { eventStore != nil }

    /// Queues one connection's delivery events for the next transaction; `events.recorded`
    /// completes once it is durable (fails if it failed, or with `Stopping` when the committer
    /// has stopped). Only when `recordsEvents`. How much waits is bounded by the callers: one
    /// batch per device connection at a time, of at most `deviceMaximumPendingEvents`.
    func record(_ events: Events) {
        let (accepted, signal) = state.withLock { s -> (Bool, Bool) in
            if s.stopped { return (false, false) }
            s.events.append(events)
            if s.writerIdle { s.writerIdle = false; return (true, true) }
            return (true, false)
        }
        if !accepted { events.recorded.fail(Stopping()) }
        if signal { wake.signal() }
    }

    /// The committer stopped before the events were queued.
    struct Stopping: Error {}

    /// Commits what is queued, then stops the writer thread; blocks until it has exited.
    func stop() {
        let signal = state.withLock { s in
            s.stopping = true
            if s.writerIdle { s.writerIdle = false; return true }
            return false
        }
        if signal { wake.signal() }
        finished.wait()
    }

    /// At most `limit` elements from the front of `queue`, removed from it (all of them
    /// without copying when they fit; the queue keeps its capacity).
    private static func take<Element>(upTo limit: Int, from queue: inout [Element]) -> [Element] {
        guard queue.count > limit else {
            defer { queue.removeAll(keepingCapacity: true) }
            return queue
        }
        defer { queue.removeFirst(limit) }
        return Array(queue.prefix(limit))
    }

    /// Whole event batches from the front of `queue` while their events fit in `limit` (the
    /// first one always).
    private static func takeEvents(upTo limit: Int, from queue: inout [Events]) -> [Events] {
        var count = 0, taken = 0
        for e in queue {
            if taken > 0 && count + e.batch.events.count > limit { break }
            count += e.batch.events.count
            taken += 1
        }
        return take(upTo: taken, from: &queue)
    }

    private func run() {
        while true {
            let limit = maximumBatch
            let (requests, acks, events, exit): ([Request], [Int64], [Events], Bool) = state.withLock { s in
                let r = Self.take(upTo: limit.pushes, from: &s.requests)
                let a = Self.take(upTo: limit.acknowledgements, from: &s.acks)
                let e = Self.takeEvents(upTo: limit.acknowledgements, from: &s.events)
                if r.isEmpty && a.isEmpty && e.isEmpty {
                    if s.stopping { s.stopped = true; return ([], [], [], true) }
                    s.writerIdle = true
                }
                return (r, a, e, false)
            }
            if exit { break }
            if requests.isEmpty && acks.isEmpty && events.isEmpty {
                wake.wait()
                continue
            }
            commit(requests, acks, events)
        }
        finished.signal()
    }

    private func commit(_ requests: [Request], _ acks: [Int64], _ events: [Events]) {
        let started = ContinuousClock.now
        let result: Result<[StoredPush], GatewayStoreError>
        do {
            let pushes = requests.map(\.push), now = clock.nowMilliseconds()
            if let eventStore, !events.isEmpty {
                result = .success(try eventStore.commit(pushes: pushes, acknowledged: acks, events: events.map(\.batch), at: now))
            } else {
                result = .success(try store.commit(pushes: pushes, acknowledged: acks, at: now))
            }
        } catch {
            logger.error("commit failed", metadata: ["error": "\(error)", "batch": "\(requests.count)"])
            result = .failure(error)
        }
        let stored = try? result.get()
        metrics.recordCommit(pushes: requests.count, acks: acks.count, duration: ContinuousClock.now - started,
                             accepted: stored?.count ?? 0)
        for e in events {
            switch result {
            case .success: e.recorded.succeed()
            case .failure(let error): e.recorded.fail(error)
            }
        }
        // One task per connection, with its outcomes in request order (a batch holds a few
        // connections, so a linear search over the groups is enough).
        var groups: [(sink: any PushCommitSink, outcomes: [PushCommitOutcome])] = []
        let ok = stored != nil
        for request in requests {
            let outcome = PushCommitOutcome(streamID: request.streamID, apnsID: request.push.apnsID, committed: ok)
            if let i = groups.lastIndex(where: { $0.sink === request.sink }) {
                groups[i].outcomes.append(outcome)
            } else {
                groups.append((request.sink, [outcome]))
            }
        }
        for group in groups {
            let sink = group.sink, outcomes = group.outcomes
            sink.eventLoop.execute { sink.committed(outcomes) }
        }
        if let stored, !stored.isEmpty { onCommitted(stored) }
    }
}

/// One push's outcome for its provider connection.
struct PushCommitOutcome: Sendable {
    var streamID: HTTP2StreamID
    var apnsID: String
    /// false: the transaction failed (`500 InternalServerError`).
    var committed: Bool
}

/// Where a provider connection receives its commit outcomes.
protocol PushCommitSink: AnyObject, Sendable {
    var eventLoop: any EventLoop { get }
    /// On `eventLoop`: the outcomes of one commit for this connection, in request order.
    func committed(_ outcomes: [PushCommitOutcome])
}
