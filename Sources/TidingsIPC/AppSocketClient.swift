import Foundation
import NIOCore
import NIOPosix
import Synchronization
import TidingsCore

/// An app's connection to the notification daemon: requests in order, replies matched by
/// id, daemon events handed to one stream.
public final class AppSocketClient: Sendable {
    private struct State {
        var nextID: UInt64 = 1
        var pending: [UInt64: @Sendable (Result<AppReply, any Error>) -> Void] = [:]
        var closed = false
        var closeHandlers: [@Sendable () -> Void] = []
    }

    private let channel: any Channel
    private let writer: CoalescingWriter
    private let state: Mutex<State>
    public let events: AsyncStream<DaemonEvent>
    private let eventSink: AsyncStream<DaemonEvent>.Continuation

    private init(channel: any Channel, events: AsyncStream<DaemonEvent>, eventSink: AsyncStream<DaemonEvent>.Continuation) {
        self.channel = channel
        self.writer = CoalescingWriter(channel: channel)
        self.state = Mutex(State())
        self.events = events
        self.eventSink = eventSink
    }

    /// Connects to the daemon's socket at `path`.
    public static func connect(path: String, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) async throws -> AppSocketClient {
        let (events, sink) = AsyncStream<DaemonEvent>.makeStream()
        let box = Mutex<AppSocketClient?>(nil)
        let channel = try await ClientBootstrap(group: group)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try IPCCodec.addFraming(to: channel.pipeline.syncOperations)
                    try channel.pipeline.syncOperations.addHandler(InboundHandler { envelope in
                        box.withLock { $0 }?.receive(envelope)
                    } onClose: {
                        box.withLock { $0 }?.closed()
                    })
                }
            }
            .connect(unixDomainSocketPath: path).get()
        let client = AppSocketClient(channel: channel, events: events, eventSink: sink)
        box.withLock { $0 = client }
        if !channel.isActive { client.closed() }
        return client
    }

    /// Sends a request and waits for its reply.
    public func call(_ request: AppRequest) async throws -> AppReply {
        try await withCheckedThrowingContinuation { continuation in
            start(request, continuation: continuation)
        }
    }

    /// Sends a request now (so requests keep the order of these calls) and resumes
    /// `continuation` with its reply.
    public func start(_ request: AppRequest, continuation: CheckedContinuation<AppReply, any Error>) {
        start(request) { continuation.resume(with: $0) }
    }

    /// Sends a request now (in the order of these calls) and calls `completion` with its reply.
    public func start(_ request: AppRequest, completion: @escaping @Sendable (Result<AppReply, any Error>) -> Void) {
        let failure: (any Error)? = state.withLock { state in
            guard !state.closed else { return IPCError.connectionClosed }
            let id = state.nextID
            state.nextID += 1
            do {
                let buffer = try IPCCodec.encodeRequest(AppEnvelope(id: id, request: request), allocator: channel.allocator)
                guard buffer.readableBytes <= IPCCodec.maximumFrameLength else {
                    // The daemon would refuse the frame and close the connection.
                    return NotificationError(.invalidRequest, "the request is \(buffer.readableBytes) bytes encoded, over the notification daemon's limit of \(IPCCodec.maximumFrameLength) bytes")
                }
                state.pending[id] = completion
                // Enqueued on the event loop in lock order, so requests keep their order.
                writer.write(buffer)
                return nil
            } catch {
                // Nothing was sent: a value the wire cannot carry (a NaN, an infinity) is the
                // app's bad input, not a lost daemon.
                return NotificationError(.invalidRequest, "the request cannot be sent to the notification daemon: \(error)")
            }
        }
        if let failure { completion(.failure(failure)) }
    }

    /// Called once when the connection closes.
    public func onClose(_ body: @escaping @Sendable () -> Void) {
        let already = state.withLock { state -> Bool in
            if state.closed { return true }
            state.closeHandlers.append(body)
            return false
        }
        if already { body() }
    }

    /// Sends a request whose reply nobody waits for.
    public func send(_ request: AppRequest) {
        state.withLock { state in
            guard !state.closed else { return }
            let id = state.nextID
            state.nextID += 1
            guard let buffer = try? IPCCodec.encodeRequest(AppEnvelope(id: id, request: request), allocator: channel.allocator),
                  buffer.readableBytes <= IPCCodec.maximumFrameLength else { return }
            writer.write(buffer)
        }
    }

    public func close() {
        channel.close(promise: nil)
    }

    private func receive(_ envelope: DaemonEnvelope) {
        switch envelope {
        case .reply(let id, let reply):
            let completion = state.withLock { $0.pending.removeValue(forKey: id) }
            completion?(.success(reply))
        case .event(let event):
            eventSink.yield(event)
        }
    }

    private func closed() {
        let (waiting, handlers) = state.withLock { state -> ([@Sendable (Result<AppReply, any Error>) -> Void], [@Sendable () -> Void]) in
            guard !state.closed else { return ([], []) }
            state.closed = true
            defer {
                state.pending.removeAll()
                state.closeHandlers.removeAll()
            }
            return (Array(state.pending.values), state.closeHandlers)
        }
        for completion in waiting { completion(.failure(IPCError.connectionClosed)) }
        eventSink.finish()
        for handler in handlers { handler() }
    }

    private final class InboundHandler: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        let onEnvelope: @Sendable (DaemonEnvelope) -> Void
        let onClose: @Sendable () -> Void

        init(onEnvelope: @escaping @Sendable (DaemonEnvelope) -> Void, onClose: @escaping @Sendable () -> Void) {
            self.onEnvelope = onEnvelope
            self.onClose = onClose
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let buffer = unwrapInboundIn(data)
            if let envelope = try? IPCCodec.decodeDaemonEnvelope(buffer) {
                onEnvelope(envelope)
            } else {
                context.close(promise: nil)
            }
        }

        func channelInactive(context: ChannelHandlerContext) {
            onClose()
            context.fireChannelInactive()
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            context.close(promise: nil)
        }
    }
}
