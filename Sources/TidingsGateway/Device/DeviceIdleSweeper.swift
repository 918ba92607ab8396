import NIOCore
import Synchronization

/// The device channel's idle check (`deviceIdleTimeout`): one repeated task per event loop
/// visits every ready connection on that loop once per timeout and closes those that sent no
/// whole message since the previous visit, instead of a scheduled task per connection. A
/// task per connection cost every idle connection its task, promise and closures in the
/// loop's heap (≈ 0.4 kB, docs/benchmarks.md "Idle device connections"), and cancelling one
/// searched that heap, which held every connection's.
///
/// A connection counts as heard when it joins, so the first visit only clears its flag: one
/// that stays silent is closed after one to two timeouts, as with a task per connection.
final class DeviceIdleSweeper: @unchecked Sendable {
    // @unchecked: `connections` and `task` are touched on `eventLoop` only.
    let eventLoop: any EventLoop
    let interval: TimeAmount
    /// The connections' `DeviceChannelHandler` contexts (the handler is `context.handler`):
    /// one reference per connection; each handler keeps its index (`sweepIndex`).
    private var connections: [ChannelHandlerContext] = []
    private var task: RepeatedTask?

    init(eventLoop: any EventLoop, interval: TimeAmount) {
        self.eventLoop = eventLoop
        self.interval = interval
    }

    /// Connections visited now (tests).
    var count: Int {
        eventLoop.preconditionInEventLoop()
        return connections.count
    }

    /// A connection that completed its handshake; the loop's task starts with the first.
    func add(_ handler: DeviceChannelHandler, context: ChannelHandlerContext) {
        eventLoop.preconditionInEventLoop()
        guard handler.sweepIndex < 0, context.handler === handler else { return }
        handler.sweepIndex = Int32(connections.count)
        connections.append(context)
        if task == nil {
            task = eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { [self] _ in sweep() }
        }
    }

    /// A connection that closed (or was closed by a visit); the task stops with the last.
    func remove(_ handler: DeviceChannelHandler) {
        eventLoop.preconditionInEventLoop()
        let index = Int(handler.sweepIndex)
        guard index >= 0, index < connections.count, connections[index].handler === handler else { return }
        handler.sweepIndex = -1
        let last = connections.removeLast()
        if index < connections.count {
            connections[index] = last
            (last.handler as? DeviceChannelHandler)?.sweepIndex = Int32(index)
        }
        if connections.isEmpty {
            task?.cancel()
            task = nil
        }
    }

    private func sweep() {
        // A copy: a visit may close its connection, which removes it from `connections`.
        let visiting = connections
        for context in visiting { (context.handler as? DeviceChannelHandler)?.idleVisit(context: context) }
    }
}

extension GatewayCore {
    /// The idle sweeper of `eventLoop` (made on first use; one per loop and gateway).
    func deviceIdleSweeper(for eventLoop: any EventLoop) -> DeviceIdleSweeper {
        let key = ObjectIdentifier(eventLoop)
        return deviceIdleSweepers.withLock { sweepers in
            if let sweeper = sweepers[key] { return sweeper }
            let sweeper = DeviceIdleSweeper(eventLoop: eventLoop, interval: configuration.deviceIdleTimeout)
            sweepers[key] = sweeper
            return sweeper
        }
    }
}
