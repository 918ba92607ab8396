import Foundation
import NIOCore
import NIOExtras
import NIOPosix
import Synchronization
import TidingsCore

/// A connection's requests, in the order they were sent. Taking one makes room for the
/// next (`AppSocketLimits.maximumQueuedRequests`, `maximumQueuedBytes`): while the queue is
/// full the daemon does not read the connection.
public struct AppRequests: AsyncSequence, Sendable {
    public typealias Element = ReceivedRequest
    let stream: AsyncStream<(ReceivedRequest, Int)>
    let gate: RequestGate
    let resume: @Sendable () -> Void

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncStream<(ReceivedRequest, Int)>.AsyncIterator
        let gate: RequestGate
        let resume: @Sendable () -> Void

        public mutating func next() async -> ReceivedRequest? {
            guard let (request, bytes) = await base.next() else { return nil }
            if gate.took(bytes) { resume() }
            return request
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: stream.makeAsyncIterator(), gate: gate, resume: resume)
    }
}

/// One app's connection, as the daemon sees it.
public final class AppServerConnection: Sendable {
    public let credentials: PeerCredentials?
    /// The app's requests, in the order they were sent.
    public let requests: AppRequests
    private let channel: any Channel
    private let writer: CoalescingWriter

    init(channel: any Channel, credentials: PeerCredentials?, requests: AppRequests) {
        self.channel = channel
        self.writer = CoalescingWriter(channel: channel)
        self.credentials = credentials
        self.requests = requests
    }

    /// Requests decoded and not yet taken, and whether the daemon stopped reading the
    /// connection because of them (for inspection and tests).
    public var queuedRequests: (count: Int, bytes: Int, readingStopped: Bool) {
        let queued = requests.gate.queued
        return (queued.count, queued.bytes, queued.stalled)
    }

    /// Sends a reply. `compact` lets a plain `ok` travel as a binary frame: set it when
    /// the request came as one (docs/app-ipc.md, "Binary frames").
    public func reply(_ id: UInt64, _ reply: AppReply, compact: Bool = false) {
        write(.reply(id: id, reply), compact: compact)
    }

    public func send(_ event: DaemonEvent) {
        write(.event(event))
    }

    public func close() {
        channel.close(promise: nil)
    }

    private func write(_ envelope: DaemonEnvelope, compact: Bool = false) {
        guard let buffer = try? IPCCodec.encodeDaemonEnvelope(envelope, compact: compact, allocator: channel.allocator) else { return }
        writer.write(buffer)
    }
}

/// The daemon's listening socket. `run(handler:)` accepts connections until cancelled and
/// runs `handler` once per connection, in a child task. `limits` bounds what one peer, and
/// all of them together, can make the daemon hold.
public final class AppSocketServer: Sendable {
    public let path: String
    public let limits: AppSocketLimits
    private let channel: any Channel
    private let connections: AsyncStream<AppServerConnection>
    private let live: ConnectionCount

    private init(path: String, limits: AppSocketLimits, channel: any Channel, connections: AsyncStream<AppServerConnection>, live: ConnectionCount) {
        self.path = path
        self.limits = limits
        self.channel = channel
        self.connections = connections
        self.live = live
    }

    /// Connections open now (accepted and not yet closed).
    public var connectionCount: Int { live.value.withLock { $0 } }

    /// Binds `path` (replacing a stale socket file) with permissions 0600 unless `mode` says otherwise.
    public static func bind(path: String, mode: mode_t = 0o600, limits: AppSocketLimits = AppSocketLimits(), group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) async throws -> AppSocketServer {
        let (connections, sink) = AsyncStream<AppServerConnection>.makeStream()
        let live = ConnectionCount()
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .childChannelInitializer { child in
                let admitted = live.value.withLock { count -> Bool in
                    guard count < limits.maximumConnections else { return false }
                    count += 1
                    return true
                }
                guard admitted else {
                    return refuse(child, .tooManyConnections(limits.maximumConnections))
                }
                child.closeFuture.whenComplete { _ in live.value.withLock { $0 -= 1 } }
                let (stream, requestSink) = AsyncStream<(ReceivedRequest, Int)>.makeStream()
                // Who the peer is, read now, at accept: what it runs when it says hello
                // later must be what it ran when it connected.
                return PeerCredentialsFuture.read(child).flatMapThrowing { credentials in
                    let sync = child.pipeline.syncOperations
                    // A peer whose requests wait (the daemon takes them one at a time) stops
                    // being read from: at most `maximumQueuedRequests` wait. Nearest the
                    // socket, so that every read passes it, the back-pressure handler's too.
                    let gate = RequestGate(maximumCount: max(limits.maximumQueuedRequests, 1), maximumBytes: limits.maximumQueuedBytes)
                    let decoder = AppFrameDecoder(limit: limits.maximumFrameLength, firstFrameTimeout: limits.helloTimeAmount, gate: gate)
                    try sync.addHandler(decoder)
                    // A peer that does not read its replies stops being read from too: the
                    // daemon's outbound buffer stays within the channel's write watermarks.
                    try sync.addHandler(BackPressureHandler())
                    try sync.addHandler(LengthFieldPrepender(lengthFieldBitLength: .fourBytes))
                    try sync.addHandler(ServerInboundHandler(sink: requestSink))
                    let bound = NIOLoopBound(decoder, eventLoop: child.eventLoop)
                    let eventLoop = child.eventLoop
                    let requests = AppRequests(stream: stream, gate: gate, resume: { eventLoop.execute { bound.value.resume() } })
                    sink.yield(AppServerConnection(channel: child, credentials: credentials, requests: requests))
                }
            }
            .bind(unixDomainSocketPath: path, cleanupExistingSocketFile: true).get()
        chmod(path, mode)
        return AppSocketServer(path: path, limits: limits, channel: channel, connections: connections, live: live)
    }

    /// Answers a connection the daemon will not serve with a failure (id 0) and closes it.
    private static func refuse(_ child: any Channel, _ refusal: AppSocketRefusal) -> EventLoopFuture<Void> {
        if let body = try? IPCCodec.encode(DaemonEnvelope.reply(id: 0, .failure(refusal.failure)), allocator: child.allocator),
           let length = UInt32(exactly: body.readableBytes) {
            var frame = child.allocator.buffer(capacity: body.readableBytes + 4)
            frame.writeInteger(length)
            frame.writeImmutableBuffer(body)
            child.writeAndFlush(frame).whenComplete { _ in child.close(promise: nil) }
        } else {
            child.close(promise: nil)
        }
        return child.eventLoop.makeSucceededVoidFuture()
    }

    public func run(handler: @escaping @Sendable (AppServerConnection) async -> Void) async {
        await withDiscardingTaskGroup { group in
            group.addTask { [channel] in
                // Closing the listener ends the connection stream when the run is cancelled.
                await withTaskCancellationHandler {
                    try? await channel.closeFuture.get()
                } onCancel: {
                    channel.close(promise: nil)
                }
            }
            for await connection in connections {
                group.addTask {
                    await withTaskCancellationHandler {
                        await handler(connection)
                    } onCancel: {
                        connection.close()
                    }
                    connection.close()
                }
            }
        }
    }

    public func close() async {
        try? await channel.close()
        unlink(path)
    }
}

private final class ConnectionCount: Sendable {
    let value = Mutex(0)
}

private enum PeerCredentialsFuture {
    static func read(_ channel: any Channel) -> EventLoopFuture<PeerCredentials?> {
        #if os(Linux)
        guard let provider = channel as? any SocketOptionProvider else {
            return channel.eventLoop.makeSucceededFuture(nil)
        }
        let future: EventLoopFuture<KernelPeerCredentials> = provider.unsafeGetSocketOption(
            level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(17 /* SO_PEERCRED */))
        return future.map { Optional(PeerCredentials.capturing(pid: $0.pid, uid: $0.uid, gid: $0.gid)) }
            .recover { _ in nil }
        #else
        return channel.eventLoop.makeSucceededFuture(nil)
        #endif
    }
}

private final class ServerInboundHandler: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    let sink: AsyncStream<(ReceivedRequest, Int)>.Continuation

    init(sink: AsyncStream<(ReceivedRequest, Int)>.Continuation) {
        self.sink = sink
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        guard let envelope = try? IPCCodec.decodeRequest(buffer) else {
            // Garbage on the socket: the protocol is broken beyond repair; drop the peer.
            context.close(promise: nil)
            return
        }
        // With its frame's length: the gate counts it out when the daemon takes it.
        sink.yield((envelope, buffer.readableBytes))
    }

    func channelInactive(context: ChannelHandlerContext) {
        sink.finish()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A refusal the peer can read (a frame too long, no hello in time): a failure with
        // id 0, then the connection closes.
        guard let refusal = error as? AppSocketRefusal,
              let buffer = try? IPCCodec.encodeDaemonEnvelope(.reply(id: 0, .failure(refusal.failure)), compact: false, allocator: context.channel.allocator) else {
            context.close(promise: nil)
            return
        }
        let channel = context.channel
        context.writeAndFlush(NIOAny(buffer)).whenComplete { _ in channel.close(promise: nil) }
    }
}
