import Crypto
import Logging
import NIOCore
import TidingsCore

final class DeviceClientHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let shared: DeviceConnectionShared
    private let key: P256.Signing.PrivateKey
    private let logger: Logger
    private var failure: (any Error)?
    /// Pushes decoded in this read burst: handed to the consumer together at
    /// `channelReadComplete` (one lock and at most one wake-up per burst, not per push).
    private var received: [DevicePush] = []
    private let pingInterval: TimeAmount?
    private var keepAlive: RepeatedTask?
    /// Something arrived since the last ping went out; `pinged`: a ping is out.
    private var heard = false
    private var pinged = false
    private var nextPingID: Int64 = 1
    /// A read held back because the push buffer is full; made when the consumer takes.
    private var readHeld = false

    init(shared: DeviceConnectionShared, key: P256.Signing.PrivateKey, logger: Logger, pingInterval: TimeAmount?) {
        self.shared = shared
        self.key = key
        self.logger = logger
        self.pingInterval = pingInterval
    }

    /// After the welcome (the gateway accepts nothing but `hello` before): a ping every
    /// interval; one unanswered, with nothing else heard, by the next closes the connection.
    private func startKeepAlive(context: ChannelHandlerContext) {
        guard let interval = pingInterval, interval.nanoseconds > 0, keepAlive == nil else { return }
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        keepAlive = context.eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in
            handler.value.keepAliveTick(context: bound.value)
        }
    }

    private func keepAliveTick(context: ChannelHandlerContext) {
        // While reads are held back (the consumer is behind), an unread pong is not the gateway's silence.
        if pinged, !heard, !readHeld {
            failure = DeviceClientError(reason: "Timeout", message: "the gateway did not answer a ping")
            logger.warning("the gateway did not answer a ping; closing the device channel")
            context.close(promise: nil)
            return
        }
        heard = false
        pinged = true
        write(.ping(nextPingID), context: context)
        nextPingID &+= 1
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        heard = true
        let buffer = unwrapInboundIn(data)
        let message: DeviceMessage
        do { message = try DeviceMessage(decoding: buffer.readableBytesView) } catch {
            failure = DeviceClientError(reason: "ProtocolError", message: error.message)
            context.close(promise: nil)
            return
        }
        switch message {
        case .challenge(let nonce):
            do {
                let signature = try DeviceChallenge.sign(nonce: nonce, with: key)
                let hello = DeviceMessage.hello(publicKey: Array(key.publicKey.x963Representation), signature: signature)
                write(hello, context: context)
            } catch {
                failure = error
                context.close(promise: nil)
            }
        case .welcome(let deviceID, let batchedAcks, let recordsEvents, let batchedEvents):
            shared.welcome(deviceID, batchedAcks: batchedAcks, recordsEvents: recordsEvents, batchedEvents: batchedEvents)
            startKeepAlive(context: context)
        case .push(let push):
            received.append(push)
        case .token(let id, _), .appRemoved(let id), .eventRecorded(let id):
            shared.answer(id, with: .success(message))
        case .error(let id?, let reason, let text):
            shared.answer(id, with: .failure(DeviceClientError(reason: reason, message: text)))
        case .error(nil, let reason, let text):
            failure = DeviceClientError(reason: reason, message: text)
            logger.warning("gateway closed the device channel", metadata: ["reason": "\(reason)", "message": "\(text)"])
        case .ping(let n):
            write(.pong(n), context: context)
        default:
            break
        }
    }

    /// One framed message (the pipeline has no length prepender).
    private func write(_ message: DeviceMessage, context: ChannelHandlerContext) {
        var frame: [UInt8] = []
        message.appendFrame(to: &frame)
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: frame)), promise: nil)
    }

    /// Reads only while the push buffer has room; a full buffer holds the read until the
    /// consumer takes (backpressure: the socket is not read, TCP's window closes).
    func read(context: ChannelHandlerContext) {
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let eventLoop = context.eventLoop
        let mayRead = shared.pushBuffer.mayRead {
            eventLoop.execute { handler.value.resumeReading(context: bound.value) }
        }
        if mayRead { context.read() } else { readHeld = true }
    }

    private func resumeReading(context: ChannelHandlerContext) {
        guard readHeld else { return }
        readHeld = false
        read(context: context)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        deliverReceived()
        context.fireChannelReadComplete()
    }

    private func deliverReceived() {
        guard !received.isEmpty else { return }
        // The burst is handed over, not shared: the consumer owns its array alone (reversing
        // it in place copies no push), and the next burst gets a buffer of its own.
        var burst: [DevicePush] = []
        burst.reserveCapacity(received.count)
        swap(&burst, &received)
        shared.pushBuffer.append(burst)
    }

    func channelInactive(context: ChannelHandlerContext) {
        // Pushes decoded before the connection ended still reach the consumer, then the end.
        keepAlive?.cancel()
        keepAlive = nil
        deliverReceived()
        shared.closed(failure)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if failure == nil { failure = error }
        context.close(promise: nil)
    }
}
