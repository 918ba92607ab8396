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

    // Stored properties in this order on purpose: an idle connection keeps this object, and
    // Swift lays a class out in declaration order, so the small fields fill the padding after
    // `state` (docs/benchmarks.md "Idle device connections").
    private let core: GatewayCore
    private var state: State = .idle
    /// Whether a whole message arrived since the loop's `DeviceIdleSweeper` last visited: set
    /// per message, no clock read; a visit (every `deviceIdleTimeout`) closes the connection
    /// when nothing came since the previous one.
    private var heardSinceCheck = false
    /// Delivery events read and not yet handed to the registry queue (`pendingEvents`);
    /// `recordingEvents` while a batch is being recorded (one at a time per connection).
    private var recordingEvents = false
    /// `requestToken` and `removeApp` of this connection in the registry queue: past
    /// `deviceMaximumRequestsInFlight` another is refused (`TooManyRequests`) until one is
    /// answered. The rate is per device (`core.deviceRequests`): reconnecting does not refill it.
    private var requestsInFlight: Int32 = 0
    /// This connection's place in its loop's `DeviceIdleSweeper` (−1: not there).
    var sweepIndex: Int32 = -1
    /// The first hex digits of the device id, once known (logs never show more): a small
    /// string, stored inline (a `Substring` of the id was twice the size).
    private var deviceTag: String?
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
    /// Before the handshake only a `hello` (about 250 bytes) is accepted: longer frames close
    /// the connection. After it, `GatewayConfiguration.deviceMaximumFrameLength`.
    static let maximumHandshakeFrameLength = 4096
    private var pendingEvents: [(report: DeviceEventReport, requestID: Int64?)] = []

    init(core: GatewayCore) {
        self.core = core
    }

    private var maximumFrameLength: Int {
        if case .ready = state { core.configuration.deviceMaximumFrameLength } else { Self.maximumHandshakeFrameLength }
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
        leaveSweeper(context: context)
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
        leaveSweeper(context: context)
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
        while !isClosed, let prefix = buffer.getInteger(at: buffer.readerIndex, as: UInt32.self) {
            // Refused as soon as the prefix is read: what one connection buffers is at most one
            // maximal frame (and one read).
            let limit = maximumFrameLength
            guard let length = Int(exactly: prefix), length <= limit else {
                fail("a frame of \(prefix) bytes is longer than \(limit)", context: context)
                return
            }
            guard buffer.readableBytes - 4 >= length else { return }
            buffer.moveReaderIndex(forwardBy: 4)
            let frame = buffer.readSlice(length: length)!
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
            heardSinceCheck = true
            handle(message, session: session, context: context)
        case (.closed, _):
            break
        default:
            fail("unexpected \(message) before the handshake", context: context)
        }
    }

    private func accept(key: P256.Signing.PublicKey, context: ChannelHandlerContext) {
        let deviceID = DeviceChallenge.deviceID(publicKey: key)
        deviceTag = String(deviceID.prefix(8))
        let now = core.clock.nowMilliseconds()
        let record = GatewayDeviceRecord(deviceID: deviceID, publicKey: key.x963Representation, createdAt: now)
        let directory = core.directory
        let (perSource, overall) = (core.newDevicesPerSource, core.newDevices)
        let source = context.channel.remoteAddress?.ipAddress ?? "unknown"
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        // A known device is a read; a new identity is recorded only within the new-device limits
        // (a token from both, or from neither when either refuses).
        core.blocking(on: context.eventLoop) {
            try directory.admit(record) { perSource.allow(key: source, now: now, and: overall, key: "") }
        }.whenComplete { result in
            handler.value.registered(result, deviceID: deviceID, context: bound.value)
        }
    }

    private func registered(_ result: Result<GatewayDirectory.DeviceAdmission, any Error>, deviceID: String, context: ChannelHandlerContext) {
        guard case .verifying = state else { return }
        switch result {
        case .failure(let error):
            fail("cannot register the device: \(error)", reason: "InternalServerError", context: context)
            return
        case .success(.refused):
            fail("too many new devices; try again later", reason: Self.tooManyNewDevices, context: context)
            return
        case .success(.known), .success(.registered):
            break
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
        send(.welcome(deviceID: deviceID, batchedAcks: true, recordsEvents: true, batchedEvents: true), context: context)
        logger.debug("device connected")
        if core.configuration.deviceIdleTimeout.nanoseconds > 0 {
            heardSinceCheck = true  // the handshake: the first visit only clears it
            core.deviceIdleSweeper(for: context.eventLoop).add(self, context: context)
        }
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
            // Bounded work per message (the frame's length bounds its parsing).
            guard sequences.count <= core.configuration.deviceMaximumAcksPerMessage else {
                fail("an acks message of \(sequences.count) sequences; at most \(core.configuration.deviceMaximumAcksPerMessage)",
                     context: context)
                return
            }
            for sequence in sequences { acknowledged(sequence, session: session) }
            return
        case .event(let apnsID, let event, let requestID, let sequence, let occurredAt):
            queueEvents(CollectionOfOne(DeviceEventItem(apnsID: apnsID, event: event, sequence: sequence, occurredAt: occurredAt)),
                        requestID: requestID, context: context)
            return
        case .events(let requestID, let items):
            queueEvents(items, requestID: requestID, context: context)
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
            guard allowRequest(requestID, deviceID: deviceID, context: context) else { return }
            let now = core.clock.nowMilliseconds()
            let maximum = core.configuration.deviceMaximumTokens
            core.registry(for: context.channel) {
                try directory.issueToken(deviceID: deviceID, bundleID: bundle.rawValue, environment: environment, now: now, maximum: maximum)
            }.whenComplete { result in
                handler.value.requestsInFlight -= 1
                switch result {
                case .success(let record?):
                    handler.value.send(.token(requestID: requestID, token: record.token), context: bound.value)
                case .success(nil):
                    handler.value.send(.error(requestID: requestID, reason: Self.tooManyDeviceTokens,
                                              message: "this device holds \(maximum) tokens, the most allowed"), context: bound.value)
                case .failure(let error):
                    handler.value.requestFailed(requestID, error: error, context: bound.value)
                }
            }
        case .removeApp(let requestID, let topic):
            guard allowRequest(requestID, deviceID: deviceID, context: context) else { return }
            let now = core.clock.nowMilliseconds()
            core.registry(for: context.channel) { try store.unregisterTokens(deviceID: deviceID, bundleID: topic, at: now) }
                .whenComplete { result in
                    handler.value.requestsInFlight -= 1
                    switch result {
                    case .success(let killed):
                        for record in killed { directory.remember(token: record) }
                        handler.value.send(.appRemoved(requestID: requestID), context: bound.value)
                    case .failure(let error):
                        handler.value.requestFailed(requestID, error: error, context: bound.value)
                    }
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
        recordEvents(context: context)
        context.fireChannelReadComplete()
    }

    static let tooManyRequests = APNsReason.tooManyRequests.rawValue
    static let tooManyDeviceTokens = "TooManyDeviceTokens"
    static let tooManyNewDevices = "TooManyNewDevices"
    static let idleTimeout = "IdleTimeout"

    /// A request may go to the registry when fewer than `deviceMaximumRequestsInFlight` of
    /// this connection are there and the device's bucket has a token; else it is answered
    /// `TooManyRequests`.
    private func allowRequest(_ requestID: Int64, deviceID: String, context: ChannelHandlerContext) -> Bool {
        guard Int(requestsInFlight) < core.configuration.deviceMaximumRequestsInFlight else {
            send(.error(requestID: requestID, reason: Self.tooManyRequests, message: "too many requests waiting; wait for their answers"),
                 context: context)
            return false
        }
        guard core.deviceRequests.allow(key: deviceID, now: core.clock.nowMilliseconds()) else {
            send(.error(requestID: requestID, reason: Self.tooManyRequests, message: "too many requests from this device; slow down"),
                 context: context)
            return false
        }
        requestsInFlight += 1
        return true
    }

    /// A registry request failed: `TooManyRequests` when the registry queue was full, else
    /// `InternalServerError`.
    private func requestFailed(_ requestID: Int64, error: any Error, context: ChannelHandlerContext) {
        guard !isClosed else { return }
        if error is GatewayCore.RegistryBusy {
            send(.error(requestID: requestID, reason: Self.tooManyRequests, message: "the gateway is busy; try again later"), context: context)
        } else {
            send(.error(requestID: requestID, reason: APNsReason.internalServerError.rawValue, message: "\(error)"), context: context)
        }
    }

    /// Queues the events of one `event` or `events` message for the store, all or nothing. What
    /// is queued is small and known: every apns-id must be a UUID (else `BadMessageId`), and the
    /// recordable ones (`presented`, `answered`) must fit beside those waiting, at most
    /// `deviceMaximumPendingEvents` (else `TooManyRequests`); stages the gateway does not record
    /// (a newer device's) are confirmed, not kept. They are queued together, so they land in
    /// one batch, and the message's one `eventRecorded` goes with the last of them. Without a
    /// `requestID` (devices before confirmations) nothing is answered.
    private func queueEvents(_ items: some Collection<DeviceEventItem>, requestID: Int64?, context: ChannelHandlerContext) {
        var reports: [DeviceEventReport] = []
        reports.reserveCapacity(items.count)
        for item in items {
            guard (try? APNsID(header: item.apnsID)) != nil else {
                if let requestID {
                    send(.error(requestID: requestID, reason: APNsReason.badMessageId.rawValue, message: "an apnsID is not a UUID"), context: context)
                }
                return
            }
            let known = DeliveryEvent(rawValue: item.event)
            if known == .presented || known == .answered {
                reports.append(DeviceEventReport(known, apnsID: item.apnsID, sequence: item.sequence, occurredAt: item.occurredAt))
            }
        }
        guard let last = reports.popLast() else {
            if let requestID { send(.eventRecorded(requestID: requestID), context: context) }
            return
        }
        guard pendingEvents.count + reports.count < core.configuration.deviceMaximumPendingEvents else {
            if let requestID {
                send(.error(requestID: requestID, reason: Self.tooManyRequests,
                            message: "too many delivery events waiting (at most \(core.configuration.deviceMaximumPendingEvents))"), context: context)
            }
            return
        }
        for report in reports { pendingEvents.append((report, nil)) }
        pendingEvents.append((last, requestID))
    }

    /// Hands the events read so far in one batch to the committer (in the next group commit,
    /// with pushes and acknowledgements: `GroupCommitsEvents`) or else to the registry queue
    /// (one transaction), if no batch of this connection is being recorded; once durable, each
    /// event that carried a request id is answered `eventRecorded` (a failure: an `error` with
    /// it, and the device sends the event again later).
    private func recordEvents(context: ChannelHandlerContext) {
        guard !recordingEvents, !pendingEvents.isEmpty, case .ready(let session) = state else { return }
        recordingEvents = true
        var batch: [(report: DeviceEventReport, requestID: Int64?)] = []
        swap(&batch, &pendingEvents)
        let deviceID = session.deviceID
        let events = batch.map(\.report)
        let ids = batch.compactMap(\.requestID)
        let presented = events.count { $0.event == .presented }
        let metrics = core.metrics, clock = core.clock
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let recorded: EventLoopFuture<Void>
        if core.committer.recordsEvents {
            let promise = context.eventLoop.makePromise(of: Void.self)
            core.committer.record(PushCommitter.Events(batch: DeviceEventBatch(deviceID: deviceID, events: events), recorded: promise))
            recorded = promise.futureResult
        } else {
            let store = core.store, now = core.clock.nowMilliseconds()
            recorded = core.registry(for: context.channel) { try store.recordEvents(events, deviceID: deviceID, at: now) }
        }
        recorded.whenComplete { result in
            let handler = handler.value
            var frames: [UInt8] = []
            switch result {
            case .success:
                metrics.recordEvents(presented: presented, answered: events.count - presented)
                metrics.recordEventLag(events, durableAt: clock.nowMilliseconds())
                for id in ids { DeviceMessage.eventRecorded(requestID: id).appendFrame(to: &frames) }
            case .failure(is GatewayCore.RegistryBusy), .failure(is PushCommitter.Stopping):
                for id in ids {
                    DeviceMessage.error(requestID: id, reason: Self.tooManyRequests, message: "the gateway is busy; not recorded")
                        .appendFrame(to: &frames)
                }
            case .failure(let error):
                handler.logger.warning("cannot record delivery events", metadata: ["error": "\(error)"])
                for id in ids {
                    DeviceMessage.error(requestID: id, reason: APNsReason.internalServerError.rawValue, message: "not recorded")
                        .appendFrame(to: &frames)
                }
            }
            handler.recordingEvents = false
            guard !handler.isClosed else { return }
            let context = bound.value
            if !frames.isEmpty { context.writeAndFlush(handler.wrapOutboundOut(context.channel.allocator.buffer(bytes: frames)), promise: nil) }
            handler.recordEvents(context: context)
        }
    }

    /// The sweeper's visit: closes a connection that sent no whole message since the previous
    /// visit (so for `deviceIdleTimeout` to twice it).
    func idleVisit(context: ChannelHandlerContext) {
        guard case .ready = state else { return }
        if heardSinceCheck {
            heardSinceCheck = false
        } else {
            fail("no message for \(core.configuration.deviceIdleTimeout)", reason: Self.idleTimeout, context: context)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        leaveSweeper(context: context)
    }

    private func leaveSweeper(context: ChannelHandlerContext) {
        if sweepIndex >= 0 { core.deviceIdleSweeper(for: context.eventLoop).remove(self) }
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
