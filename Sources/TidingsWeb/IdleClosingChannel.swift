import HummingbirdCore
import Logging
import NIOCore

/// Closes a connection that sends nothing for `timeout`, from its first byte on. The
/// WebSocket-upgrading HTTP/1 channel starts Hummingbird's idle timer only once a request
/// head has arrived, so a peer that connects and stays silent would hold one of the
/// center's connections for ever. A page's WebSocket answers the server's pings, so it
/// stays open.
struct IdleClosingChannel<Base: ServerChildChannel>: ServerChildChannel {
    typealias Value = Base.Value
    let base: Base
    let timeout: TimeAmount

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandlers([IdleStateHandler(readTimeout: timeout), CloseOnIdle()])
        }.flatMap { base.setup(channel: channel, logger: logger) }
    }

    func handle(value: Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}

final class CloseOnIdle: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let idle = event as? IdleStateHandler.IdleStateEvent, idle == .read {
            context.close(promise: nil)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }
}
