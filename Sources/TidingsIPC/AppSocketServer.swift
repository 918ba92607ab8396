import Foundation
import NIOCore
import NIOPosix
import Synchronization
import TidingsCore

/// One app's connection, as the daemon sees it.
public final class AppServerConnection: Sendable {
    public let credentials: PeerCredentials?
    /// The app's requests, in the order they were sent.
    public let requests: AsyncStream<ReceivedRequest>
    private let channel: any Channel
    private let writer: CoalescingWriter

    init(channel: any Channel, credentials: PeerCredentials?, requests: AsyncStream<ReceivedRequest>) {
        self.channel = channel
        self.writer = CoalescingWriter(channel: channel)
        self.credentials = credentials
        self.requests = requests
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
/// runs `handler` once per connection, in a child task.
public final class AppSocketServer: Sendable {
    public let path: String
    private let channel: any Channel
    private let connections: AsyncStream<AppServerConnection>

    private init(path: String, channel: any Channel, connections: AsyncStream<AppServerConnection>) {
        self.path = path
        self.channel = channel
        self.connections = connections
    }

    /// Binds `path` (replacing a stale socket file) with permissions 0600 unless `mode` says otherwise.
    public static func bind(path: String, mode: mode_t = 0o600, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) async throws -> AppSocketServer {
        let (connections, sink) = AsyncStream<AppServerConnection>.makeStream()
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .childChannelInitializer { child in
                let (requests, requestSink) = AsyncStream<ReceivedRequest>.makeStream()
                return PeerCredentialsFuture.read(child).flatMapThrowing { credentials in
                    try IPCCodec.addFraming(to: child.pipeline.syncOperations)
                    try child.pipeline.syncOperations.addHandler(ServerInboundHandler(sink: requestSink))
                    sink.yield(AppServerConnection(channel: child, credentials: credentials, requests: requests))
                }
            }
            .bind(unixDomainSocketPath: path, cleanupExistingSocketFile: true).get()
        chmod(path, mode)
        return AppSocketServer(path: path, channel: channel, connections: connections)
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

private enum PeerCredentialsFuture {
    static func read(_ channel: any Channel) -> EventLoopFuture<PeerCredentials?> {
        #if os(Linux)
        guard let provider = channel as? any SocketOptionProvider else {
            return channel.eventLoop.makeSucceededFuture(nil)
        }
        let future: EventLoopFuture<KernelPeerCredentials> = provider.unsafeGetSocketOption(
            level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(17 /* SO_PEERCRED */))
        return future.map { Optional(PeerCredentials(pid: $0.pid, uid: $0.uid, gid: $0.gid)) }
            .recover { _ in nil }
        #else
        return channel.eventLoop.makeSucceededFuture(nil)
        #endif
    }
}

private final class ServerInboundHandler: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    let sink: AsyncStream<ReceivedRequest>.Continuation

    init(sink: AsyncStream<ReceivedRequest>.Continuation) {
        self.sink = sink
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        guard let envelope = try? IPCCodec.decodeRequest(buffer) else {
            // Garbage on the socket: the protocol is broken beyond repair; drop the peer.
            context.close(promise: nil)
            return
        }
        sink.yield(envelope)
    }

    func channelInactive(context: ChannelHandlerContext) {
        sink.finish()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
