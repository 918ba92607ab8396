import Crypto
import Logging
import NIOCore
import TidingsCore
import TidingsStorage

/// The gateway's side of one device connection (docs/device-protocol.md).
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
        flushAcknowledgements()
        handshakeTimeout?.cancel()
        if case .ready(let session) = state {
            core.hub.detach(session)
            logger.debug("device disconnected")
        }
        state = .closed
        context.fireChannelInactive()
    }

    private func send(_ message: DeviceMessage, context: ChannelHandlerContext, flush: Bool = true) {
        let buffer = context.channel.allocator.buffer(bytes: message.encoded())
        if flush { context.writeAndFlush(wrapOutboundOut(buffer), promise: nil) } else { context.write(wrapOutboundOut(buffer), promise: nil) }
    }

    private func fail(_ message: String, reason: String = "ProtocolError", context: ChannelHandlerContext) {
        logger.info("closing device connection", metadata: ["error": "\(message)"])
        send(.error(requestID: nil, reason: reason, message: message), context: context)
        state = .closed
        context.close(promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
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
            let store = core.store
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
            guard case .verifying = state else { return }
            if case .failure(let error) = result {
                fail("cannot register the device: \(error)", reason: "InternalServerError", context: context)
                return
            }
            handshakeTimeout?.cancel()
            handshakeTimeout = nil
            let session = DeviceSession(deviceID: deviceID, channel: context.channel)
            state = .ready(session)
            if let old = core.hub.attach(session) { old.channel.close(promise: nil) }
            send(.welcome(deviceID: deviceID), context: context)
            logger.debug("device connected")
            let now = core.clock.nowMilliseconds()
            core.blocking(on: context.eventLoop) { try store.pendingPushes(deviceID: deviceID, now: now) }.whenComplete { result in
                switch result {
                case .success(let backlog): session.backlogLoaded(backlog)
                case .failure(let error):
                    handler.value.fail("cannot load stored pushes: \(error)", reason: "InternalServerError", context: bound.value)
                }
            }
    }

    private func handle(_ message: DeviceMessage, session: DeviceSession, context: ChannelHandlerContext) {
        let store = core.store
        let directory = core.directory
        let deviceID = session.deviceID
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        switch message {
        case .ack(let sequence):
            if session.acknowledged(sequence) {
                pendingAcks.append(sequence)
            } else {
                logger.debug("ignored an acknowledgement for a push not in flight", metadata: ["sequence": "\(sequence)"])
            }
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
