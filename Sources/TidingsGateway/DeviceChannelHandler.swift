import Crypto
import Logging
import NIOCore
import TidingsCore
import TidingsStorage

/// The gateway's side of one device connection (docs/device-protocol.md). It reads and writes
/// the length-prefixed frames itself, right behind TLS: no frame decoder or prepender handlers.
final class DeviceChannelHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private enum State {
        case idle
        case awaitingHello(nonce: [UInt8])
        case verifying
        case ready(DeviceSession)
        case closed
    }

    private let core: GatewayCore
    private var state: State = .idle
    /// The first hex digits of the device id, once known (logs never show more).
    private var deviceTag: Substring?
    /// Built when something is logged: a logger with metadata stored per connection would
    /// cost an idle connection a dictionary.
    private var logger: Logger {
        var logger = core.logger
        logger[metadataKey: "channel"] = "device"
        if let deviceTag { logger[metadataKey: "device"] = "\(deviceTag)…" }
        return logger
    }
    private var handshakeTimeout: Scheduled<Void>?
    /// Acknowledgements read in this read burst: handed to the committer together at
    /// `channelReadComplete` (one lock and at most one wake-up per burst, not per ack).
    private var pendingAcks: [Int64] = []
    /// The start of a frame whose rest has not arrived, in a buffer of our own. A copy, so
    /// that TLS's 32 KiB plaintext buffer is never held after `channelRead` (NIOSSL would copy
    /// it on its next read); nil whenever a read ended on a frame boundary (idle connections).
    private var partialFrame: ByteBuffer?
    /// Longer frames close the connection (device messages are a few hundred bytes; an `acks`
    /// of 1,024 sequences ≈ 20 kB).
    static let maximumFrameLength = 1 << 20

    init(core: GatewayCore) {
        self.core = core
    }

    func channelActive(context: ChannelHandlerContext) {
        var generator = SystemRandomNumberGenerator()
        let nonce = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        state = .awaitingHello(nonce: nonce)
        send(.challenge(nonce: nonce), context: context)
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        handshakeTimeout = context.eventLoop.scheduleTask(in: core.configuration.deviceHandshakeTimeout) {
            handler.value.handshakeTimedOut(context: bound.value)
        }
        context.fireChannelActive()
    }

    private func handshakeTimedOut(context: ChannelHandlerContext) {
        switch state {
        case .awaitingHello, .verifying: fail("handshake timeout", context: context)
        default: break
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        partialFrame = nil
        flushAcknowledgements()
        handshakeTimeout?.cancel()
        if case .ready(let session) = state {
            session.closed()
            core.hub.detach(session)
            logger.debug("device disconnected")
        }
        state = .closed
        context.fireChannelInactive()
    }

    /// Writes one framed message (the pipeline has no length prepender: frames are built here
    /// and by `DeviceSession`, which puts a whole commit batch in one buffer).
    private func send(_ message: DeviceMessage, context: ChannelHandlerContext) {
        var frame: [UInt8] = []
        message.appendFrame(to: &frame)
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: frame)), promise: nil)
    }

    private func fail(_ message: String, reason: String = "ProtocolError", context: ChannelHandlerContext) {
        logger.info("closing device connection", metadata: ["error": "\(message)"])
        send(.error(requestID: nil, reason: reason, message: message), context: context)
        if case .ready(let session) = state {
            // channelInactive sees `.closed`: detach here, and stop the session's backlog reads.
            session.closed()
            core.hub.detach(session)
        }
        state = .closed
        context.close(promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        let plaintext = buffer
        defer {
            // NIOSSL hands us its plaintext buffer after resetting its own view of it: once its
            // frames are handled and any unfinished one copied, nothing needs its bytes, and the
            // pages they touched (in a `LazyPageAllocator` slot) go back to the system. An idle
            // connection then holds none of its 32 KiB; the next read faults in what it uses.
            plaintext.withVeryUnsafeBytes { storage in
                _ = LazyPageAllocator.releasePages(under: UnsafeRawBufferPointer(rebasing: storage.prefix(plaintext.writerIndex)))
            }
        }
        if var pending = partialFrame {
            partialFrame = nil
            pending.writeBuffer(&buffer)
            readFrames(&pending, context: context)
            if pending.readableBytes > 0, !isClosed {
                pending.discardReadBytes()
                partialFrame = pending
            }
        } else {
            readFrames(&buffer, context: context)
            if buffer.readableBytes > 0, !isClosed {
                var copy = context.channel.allocator.buffer(capacity: buffer.readableBytes)
                copy.writeBuffer(&buffer)
                partialFrame = copy
            }
        }
    }

    private var isClosed: Bool { if case .closed = state { true } else { false } }

    /// Handles every complete frame in `buffer`, leaving an incomplete one unread.
    private func readFrames(_ buffer: inout ByteBuffer, context: ChannelHandlerContext) {
        while !isClosed, let length = buffer.getInteger(at: buffer.readerIndex, as: UInt32.self) {
            guard length <= Self.maximumFrameLength else {
                fail("a frame of \(length) bytes is longer than \(Self.maximumFrameLength)", context: context)
                return
            }
            guard buffer.readableBytes >= 4 + Int(length) else { return }
            buffer.moveReaderIndex(forwardBy: 4)
            let frame = buffer.readSlice(length: Int(length))!
            handleFrame(frame, context: context)
        }
    }

    private func handleFrame(_ buffer: ByteBuffer, context: ChannelHandlerContext) {
        let message: DeviceMessage
        do { message = try DeviceMessage(decoding: buffer.readableBytesView) } catch {
            fail(error.message, context: context)
            return
        }
        switch (state, message) {
        case (.awaitingHello(let nonce), .hello(let publicKey, let signature)):
            guard let key = DeviceChallenge.verify(publicKey: publicKey, signature: signature, nonce: nonce) else {
                fail("the challenge signature does not verify", reason: "BadDeviceKey", context: context)
                return
            }
            state = .verifying
            accept(key: key, context: context)
        case (.ready(let session), _):
            handle(message, session: session, context: context)
        case (.closed, _):
            break
        default:
            fail("unexpected \(message) before the handshake", context: context)
        }
    }

    private func accept(key: P256.Signing.PublicKey, context: ChannelHandlerContext) {
        let deviceID = DeviceChallenge.deviceID(publicKey: key)
        deviceTag = deviceID.prefix(8)
        let record = GatewayDeviceRecord(deviceID: deviceID, publicKey: key.x963Representation, createdAt: core.clock.nowMilliseconds())
        let store = core.store
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        core.blocking(on: context.eventLoop) { try store.registerDevice(record) }.whenComplete { result in
            handler.value.registered(result, deviceID: deviceID, context: bound.value)
        }
    }

    private func registered(_ result: Result<Void, any Error>, deviceID: String, context: ChannelHandlerContext) {
        guard case .verifying = state else { return }
        if case .failure(let error) = result {
            fail("cannot register the device: \(error)", reason: "InternalServerError", context: context)
            return
        }
        handshakeTimeout?.cancel()
        handshakeTimeout = nil
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        let session = DeviceSession(deviceID: deviceID, channel: context.channel, core: core) { message in
            handler.value.fail(message, reason: APNsReason.internalServerError.rawValue, context: bound.value)
        }
        state = .ready(session)
        if let old = core.hub.attach(session) { old.channel.close(promise: nil) }
        send(.welcome(deviceID: deviceID, batchedAcks: true), context: context)
        logger.debug("device connected")
        // Attached first, then the backlog is paged: a push committed from now on reaches the
        // session, and the state machine keeps it after the backlog, once.
        session.start()
    }

    private func acknowledged(_ sequence: Int64, session: DeviceSession) {
        if session.acknowledged(sequence) {
            pendingAcks.append(sequence)
        } else {
            logger.debug("ignored an acknowledgement for a push not in flight", metadata: ["sequence": "\(sequence)"])
        }
    }

    private func handle(_ message: DeviceMessage, session: DeviceSession, context: ChannelHandlerContext) {
        // Acknowledgements first, with nothing else set up: they are most of what devices send.
        switch message {
        case .ack(let sequence):
            acknowledged(sequence, session: session)
            return
        case .acks(let sequences):
            for sequence in sequences { acknowledged(sequence, session: session) }
            return
        default:
            break
        }
        let store = core.store
        let directory = core.directory
        let deviceID = session.deviceID
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        switch message {
        case .requestToken(let requestID, let topic, let environment):
            guard let bundle = Topic(rawValue: topic) else {
                send(.error(requestID: requestID, reason: APNsReason.badTopic.rawValue, message: "not a valid topic"), context: context)
                return
            }
            let now = core.clock.nowMilliseconds()
            core.blocking(on: context.eventLoop) { () throws -> DeviceTokenRecord in
                if let existing = try store.activeToken(deviceID: deviceID, bundleID: bundle.rawValue, environment: environment) {
                    return existing
                }
                let record = DeviceTokenRecord(token: DeviceToken.random().hex, deviceID: deviceID, bundleID: bundle.rawValue,
                                               environment: environment, createdAt: now)
                try store.addToken(record)
                return record
            }.whenComplete { result in
                switch result {
                case .success(let record):
                    directory.remember(token: record)
                    handler.value.send(.token(requestID: requestID, token: record.token), context: bound.value)
                case .failure(let error):
                    handler.value.send(.error(requestID: requestID, reason: APNsReason.internalServerError.rawValue, message: "\(error)"), context: bound.value)
                }
            }
        case .removeApp(let requestID, let topic):
            let now = core.clock.nowMilliseconds()
            core.blocking(on: context.eventLoop) { try store.unregisterTokens(deviceID: deviceID, bundleID: topic, at: now) }
                .whenComplete { result in
                    switch result {
                    case .success(let killed):
                        for record in killed { directory.remember(token: record) }
                        handler.value.send(.appRemoved(requestID: requestID), context: bound.value)
                    case .failure(let error):
                        handler.value.send(.error(requestID: requestID, reason: APNsReason.internalServerError.rawValue, message: "\(error)"), context: bound.value)
                    }
                }
        case .event(let apnsID, let event):
            let now = core.clock.nowMilliseconds()
            core.blocking(on: context.eventLoop) {
                try store.recordEvent(DeliveryEvent(rawValue: event), apnsID: apnsID, deviceID: deviceID, at: now)
            }.whenFailure { error in
                handler.value.logger.warning("cannot record a delivery event", metadata: ["error": "\(error)"])
            }
        case .ping(let n):
            send(.pong(n), context: context)
        case .pong:
            break
        default:
            fail("unexpected \(message)", context: context)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        flushAcknowledgements()
        context.fireChannelReadComplete()
    }

    private func flushAcknowledgements() {
        guard !pendingAcks.isEmpty else { return }
        core.committer.acknowledge(pendingAcks)
        pendingAcks = []
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("device channel error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }
}
