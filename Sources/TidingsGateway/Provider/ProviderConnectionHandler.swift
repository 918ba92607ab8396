import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOSSL
import NIOTLS
import TidingsCore
import TidingsStorage

/// The provider API on one HTTP/2 connection: frames are handled here, on the connection
/// channel, without a child channel per stream (http2-baseline.md: about a third faster).
///
/// Per request: header validation (`ProviderRequestValidator`) → provider token
/// (`ProviderAuthenticationStateMachine`, cached per connection) → topic registered to the
/// team → body (empty, size, JSON) → device token (unknown, environment, unregistered, topic)
/// → per-device rate limit → group commit → `200` once durable. Responses follow §3.7 of the
/// reference: success is one HEADERS frame with END_STREAM; an error is HEADERS then one
/// DATA frame with the JSON body and END_STREAM.
final class ProviderConnectionHandler: ChannelInboundHandler, ProviderStreamRegistry {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    /// Without child channels nobody else returns flow-control credit: the handler sends
    /// WINDOW_UPDATE for the connection (and for a stream whose body goes on) once half a
    /// window has been consumed.
    private static let windowUpdateThreshold = 32_768
    private var connectionUnacknowledged = 0

    private let core: GatewayCore
    private var auth: ProviderAuthenticationStateMachine
    /// The streams' life (receiving, processing, cancelled), authentication, shutdown and
    /// liveness: this handler executes what it decides.
    private var machine: ProviderConnectionStateMachine
    private var needsFlush = false
    /// Set while this handler writes a response: an error NIOHTTP2 raises for that write (the
    /// stream was closed under it, e.g. by NIOHTTP2's own stream error) concerns that stream only.
    private var writingResponse = false
    private var context: ChannelHandlerContext?
    private var logger: Logger
    /// The logger's level read once (reading `logLevel` copies the log handler per request).
    private let logsTrace: Bool
    private let logsDebug: Bool
    /// Whether `apns-id` is a name in this connection's HPACK dynamic table: the first
    /// response indexes its field once, later ones refer to the name by index instead of
    /// Huffman-encoding it again (their unique values stay unindexed).
    private var apnsIDNameIndexed = false

    /// The handler in front of NIOHTTP2 that hands a repeated provider token over as plain
    /// text once it has learned it from a decoded request (none in unit tests).
    private let repeatedAuthorization: RepeatedAuthorizationHandler?

    init(core: GatewayCore, repeatedAuthorization: RepeatedAuthorizationHandler? = nil,
         certificateVerifier: ProviderCertificateVerifier? = nil) {
        self.core = core
        self.repeatedAuthorization = repeatedAuthorization
        self.certificateVerifier = certificateVerifier
        self.auth = ProviderAuthenticationStateMachine(configuration: .init(environment: core.configuration.environment))
        self.machine = ProviderConnectionStateMachine(configuration: .init(core.configuration), now: core.clock.nowMilliseconds())
        self.logger = core.logger
        logger[metadataKey: "channel"] = "provider"
        logsTrace = logger.logLevel <= .trace
        logsDebug = logger.logLevel <= .debug
    }

    private var sink: ProviderCommitSink?

    // MARK: Certificate-based authentication (mutual TLS)

    /// Checks client certificates against the gateway's provider CA (`nil`: tokens only).
    private let certificateVerifier: ProviderCertificateVerifier?
    private var clientCertificateRead = false
    private var clientCertificateValue: ProviderClientCertificate?

    /// The connection's client certificate, read from NIOSSL and verified once the handshake
    /// completed (or at the first request); `nil` when it has none: the provider token applies.
    private func clientCertificate() -> ProviderClientCertificate? {
        if !clientCertificateRead, let context {
            clientCertificateRead = true
            clientCertificateValue = ProviderClientCertificate.read(from: context.pipeline.syncOperations, verifier: certificateVerifier)
        }
        return clientCertificateValue
    }

    /// The first time the connection is authenticated (a valid provider token, or a client
    /// certificate the CA accepts): no authentication deadline from now on, and the stream
    /// limit is raised to `authenticatedStreamLimit` (a SETTINGS frame; flushed by the caller).
    private func connectionAuthenticated(context: ChannelHandlerContext) {
        guard machine.authenticated(),
              core.configuration.authenticatedStreamLimit != core.configuration.unauthenticatedStreamLimit else { return }
        let settings = HTTP2Frame(streamID: .rootStream, payload: .settings(.settings([
            HTTP2Setting(parameter: .maxConcurrentStreams, value: core.configuration.authenticatedStreamLimit),
        ])))
        context.write(wrapOutboundOut(settings), promise: nil)
        needsFlush = true
    }

    /// As at Apple, a connection whose client certificate the CA accepts is authenticated by
    /// the TLS handshake: it may stay idle before its first push and gets the full stream limit
    /// at once. (A refused certificate leaves it unauthenticated: its requests are answered
    /// with the certificate's reason, and it is closed after `providerAuthenticationTimeout`.)
    /// Called by `ProviderHandshakeObserver` below NIOHTTP2: this handler does not override
    /// `userInboundEventTriggered`, through which NIOHTTP2 sends two events per stream.
    func tlsHandshakeCompleted() {
        guard let context, case .success? = clientCertificate()?.verdict else { return }
        connectionAuthenticated(context: context)
        flushIfNeeded()
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        sink = ProviderCommitSink(handler: NIOLoopBound(self, eventLoop: context.eventLoop), eventLoop: context.eventLoop)
        // The handlers below NIOHTTP2 ask about streams: which are closed (resets of those do
        // not count as an attack), and the last one taken (every GOAWAY's last_stream_id).
        repeatedAuthorization?.streams = self
        (try? context.pipeline.syncOperations.handler(type: OutboundCoalescingHandler.self))?.streams = self
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let interval = core.configuration.providerIdleCheckInterval
        idleCheck = context.eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in
            handler.value.tick()
        }
    }
    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        sink = nil  // the sink holds the handler: break the cycle
        idleCheck?.cancel()
        idleCheck = nil
    }

    private var idleCheck: RepeatedTask?

    // MARK: ProviderStreamRegistry

    var lastProcessedStreamID: HTTP2StreamID { machine.highestStreamID }
    func isClosedStream(_ streamID: HTTP2StreamID) -> Bool { machine.isClosedStream(streamID) }

    // MARK: Time

    /// Every `providerIdleCheckInterval`: requests whose stream did not end within
    /// `providerRequestTimeout` of their headers (the body never came) are answered `400
    /// IdleTimeout`, then `RST_STREAM(NO_ERROR)` so that the client stops sending it (RFC 9113
    /// § 8.1) and the stream no longer counts against the limit; then the connection's
    /// liveness (authentication deadline, PING).
    private func tick() {
        guard let context else { return }
        let actions = machine.tick(now: core.clock.nowMilliseconds())
        for (streamID, apnsID) in actions.stalled {
            // The reset follows the response's DATA frame once that was written: NIOHTTP2 holds
            // DATA for flow control and would drop it, sent before, at the reset.
            let written = context.eventLoop.makePromise(of: Void.self)
            respond(streamID, apnsID: apnsID, error: APNsError(.idleTimeout), written: written)
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
            written.futureResult.whenSuccess {
                bound.value.writeAndFlush(handler.value.wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .rstStream(.noError))),
                                          promise: nil)
            }
        }
        switch actions.liveness {
        case .fine:
            break
        case .ping(let payload):
            context.write(wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .ping(HTTP2PingData(withInteger: payload), ack: false))),
                          promise: nil)
            needsFlush = true
        case .authenticationTimedOut(let lastStreamID):
            logger.debug("provider connection not authenticated in time")
            writeGoAway(lastStreamID: lastStreamID, reason: .idleTimeout, context: context)
        case .pingTimedOut(let lastStreamID):
            logger.debug("provider connection did not answer PING")
            writeGoAway(lastStreamID: lastStreamID, reason: .idleTimeout, context: context)
            context.close(promise: nil)
            return
        }
        flushIfNeeded()
        closeIfDrained()
    }

    /// The outcomes of one commit for this connection (`PushCommitter`).
    fileprivate func committed(_ outcomes: [PushCommitOutcome]) {
        for outcome in outcomes {
            guard machine.answer(outcome.streamID) == .send else { continue }  // the client reset it
            if outcome.committed {
                respondOK(outcome.streamID, apnsID: outcome.apnsID)
            } else {
                core.metrics.recordRejected(APNsReason.internalServerError.rawValue)
                respond(outcome.streamID, apnsID: outcome.apnsID, error: APNsError(.internalServerError))
            }
        }
        flushIfNeeded()
        closeIfDrained()
    }

    func channelActive(context: ChannelHandlerContext) {
        core.metrics.providerConnections.increment()
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        core.metrics.providerConnections.decrement()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.payload {
        case .headers(let headers):
            if machine.isReceiving(frame.streamID) {
                // Trailers: the request ends here.
                var rules = HTTP2HeaderBlockRules(.trailers)
                for field in headers.headers { rules.add(name: field.name, value: field.value) }
                guard rules.finish() else { return resetMalformed(frame.streamID, context: context) }
                if headers.endStream { requestEnded(frame.streamID, context: context) }
                return
            }
            // One pass over the fields: HTTP/2's rules (NIOHTTP2's own validation is off on
            // provider connections) and the ones the provider API reads.
            var rules = HTTP2HeaderBlockRules(.request)
            var fields = ProviderRequestFields()
            for field in headers.headers {
                rules.add(name: field.name, value: field.value)
                fields.add(name: field.name, value: field.value)
            }
            guard rules.finish() else { return resetMalformed(frame.streamID, context: context) }
            repeatedAuthorization?.learn(from: headers.headers, streamID: frame.streamID)
            let stream = ProviderRequestStream(head: clientCertificate()?.validate(fields) ?? fields.validate(), contentLength: rules.contentLength,
                                               openedAt: core.clock.nowMilliseconds())
            switch machine.streamOpened(frame.streamID, stream) {
            case .opened:
                if headers.endStream { requestEnded(frame.streamID, context: context) }
            case .refused:
                // A second stream before the first valid token (the one-stream rule holds
                // whether or not the client applied our SETTINGS).
                context.write(wrapOutboundOut(HTTP2Frame(streamID: frame.streamID, payload: .rstStream(.refusedStream))), promise: nil)
                needsFlush = true
            }
        case .data(let payload):
            let flowControlled = payload.data.readableBytes + (payload.paddingBytes.map { $0 + 1 } ?? 0)
            connectionUnacknowledged += flowControlled
            if connectionUnacknowledged >= Self.windowUpdateThreshold {
                context.write(wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: connectionUnacknowledged))), promise: nil)
                connectionUnacknowledged = 0
                needsFlush = true
            }
            switch machine.receivedData(frame.streamID, payload, flowControlled: flowControlled,
                                        windowUpdateThreshold: Self.windowUpdateThreshold) {
            case .unknownStream:
                return
            case .malformed:
                return resetMalformed(frame.streamID, context: context)
            case .received(let windowUpdate):
                if windowUpdate > 0 {
                    context.write(wrapOutboundOut(HTTP2Frame(streamID: frame.streamID, payload: .windowUpdate(windowSizeIncrement: windowUpdate))), promise: nil)
                    needsFlush = true
                }
                if payload.endStream { requestEnded(frame.streamID, context: context) }
            }
        case .rstStream:
            machine.streamReset(frame.streamID)
            closeIfDrained()
        case .ping(let data, ack: true):
            machine.receivedPingAck(data.integer)
        default:
            // SETTINGS, PING, WINDOW_UPDATE, PRIORITY (ignored, as APNs does), GOAWAY: NIOHTTP2Handler
            // has done what they require.
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        machine.receivedBytes()
        flushIfNeeded()
        context.fireChannelReadComplete()
    }

    /// A malformed header block (RFC 9113 § 8.1.1): the stream is reset with `PROTOCOL_ERROR`,
    /// as NIOHTTP2 does when its own validation is on.
    private func resetMalformed(_ streamID: HTTP2StreamID, context: ChannelHandlerContext) {
        machine.streamMalformed(streamID)
        context.write(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .rstStream(.protocolError))), promise: nil)
        needsFlush = true
        closeIfDrained()
    }

    private func flushIfNeeded() {
        guard needsFlush, let context else { return }
        needsFlush = false
        context.flush()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("provider connection error", metadata: ["error": "\(error)"])
        if error is NIOHTTP2Errors.StreamError { return }
        // A response to a stream NIOHTTP2 has already closed (its own stream error, a reset
        // this handler had not seen): that answer is lost, the connection and its other
        // streams are not. NIOHTTP2 wrote nothing for it.
        if writingResponse, error is NIOHTTP2Errors.NoSuchStream { return }
        context.close(promise: nil)
    }

    // MARK: Shutdown

    /// Graceful shutdown (`Gateway` calls this on the connection's loop). Not a user event
    /// through the pipeline: NIOHTTP2 fires two user events per stream (created, closed), and
    /// each was type-checked here on its way past, ≈ 1 % of the gateway's CPU.
    func beginShutdown() {
        guard let context, let lastStreamID = machine.beginShutdown() else { return }
        writeGoAway(lastStreamID: lastStreamID, reason: .shutdown, context: context)
        closeIfDrained()
    }

    /// GOAWAY(NO_ERROR) with `{"reason":…}` as Apple sends it.
    private func writeGoAway(lastStreamID: HTTP2StreamID, reason: APNsReason, context: ChannelHandlerContext) {
        var body = context.channel.allocator.buffer(capacity: 32)
        body.writeString(APNsError(reason).jsonBody)
        let goAway = HTTP2Frame(streamID: .rootStream, payload: .goAway(lastStreamID: lastStreamID, errorCode: .noError, opaqueData: body))
        context.writeAndFlush(wrapOutboundOut(goAway), promise: nil)
    }

    private func closeIfDrained() {
        guard let context, machine.closeIfDrained() else { return }
        context.close(promise: nil)
    }

    // MARK: Requests

    private func requestEnded(_ streamID: HTTP2StreamID, context: ChannelHandlerContext) {
        switch machine.requestEnded(streamID) {
        case .none:
            return
        case .malformed:
            context.write(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .rstStream(.protocolError))), promise: nil)
            needsFlush = true
            closeIfDrained()
        case .reject(let failure):
            respond(streamID, apnsID: failure.apnsIDEcho, error: failure.error)
        case .process(let head, let body, let bodyBytes):
            process(streamID, head: head, body: body, bodyBytes: bodyBytes)
        }
    }

    /// Runs the request checks; a cache miss goes to the store off the loop and comes back here.
    private func process(_ streamID: HTTP2StreamID, head: ProviderRequestHead, body: ByteBuffer?, bodyBytes: Int) {
        guard let context else { return }
        let now = core.clock.nowMilliseconds()
        let directory = core.directory

        // Authentication: the client certificate when the connection has one, else the
        // provider token; then the topic's team.
        var missingKey: String?
        let authResult = clientCertificate()?.authenticate(head, now: now)
            ?? auth.authenticate(authorization: head.authorization, now: now / 1000, keyGeneration: directory.keyGeneration) { kid in
            switch directory.cachedKey(kid, now: now) {
            case .hit(let key): return key
            case .miss: return nil
            case .needsStore: missingKey = kid; return nil
            }
        }
        let provider: AuthenticatedProvider
        switch authResult {
        case .success(let p): provider = p
        case .failure(let error):
            if let missingKey {
                retryAfter(streamID, head: head, body: body, bodyBytes: bodyBytes, context: context) { try directory.loadKey(missingKey, now: now) }
                return
            }
            return fail(streamID, head: head, error: error)
        }
        connectionAuthenticated(context: context)

        // The topic's team.
        let app: GatewayAppRecord
        switch directory.cachedApp(head.bundleID, now: now) {
        case .hit(let a): app = a
        case .miss: return fail(streamID, head: head, error: APNsError(.topicDisallowed))
        case .needsStore:
            retryAfter(streamID, head: head, body: body, bodyBytes: bodyBytes, context: context) { try directory.loadApp(head.bundleID, now: now) }
            return
        }
        guard app.teamID == provider.teamID else { return fail(streamID, head: head, error: APNsError(.topicDisallowed)) }

        // The body.
        let payload: [UInt8]
        if bodyBytes == 0 { return fail(streamID, head: head, error: APNsError(.payloadEmpty)) }
        if bodyBytes > head.maximumPayloadSize { return fail(streamID, head: head, error: APNsError(.payloadTooLarge)) }
        payload = body.map { Array($0.readableBytesView) } ?? []
        if let error = ProviderRequestValidator.check(body: payload, for: head) {
            return fail(streamID, head: head, error: error)
        }

        // The device token.
        let token: GatewayDirectory.TokenInfo
        switch directory.cachedToken(head.deviceToken.hex, now: now) {
        case .hit(let t): token = t
        case .miss: return fail(streamID, head: head, error: APNsError(.badDeviceToken))
        case .needsStore:
            retryAfter(streamID, head: head, body: body, bodyBytes: bodyBytes, context: context) { try directory.loadToken(head.deviceToken.hex, now: now) }
            return
        }
        guard token.environment == core.configuration.environment else { return fail(streamID, head: head, error: APNsError(.badDeviceToken)) }
        if let gone = token.unregisteredAt { return fail(streamID, head: head, error: APNsError(.unregistered, timestamp: gone)) }
        guard token.bundleID == head.bundleID else { return fail(streamID, head: head, error: APNsError(.deviceTokenNotForTopic)) }
        guard core.rateLimiter.allow(token: head.deviceToken.hex, now: now) else {
            return fail(streamID, head: head, error: APNsError(.tooManyRequests))
        }

        let push = NewPush(apnsID: head.apnsID.rawValue, token: head.deviceToken.hex, deviceID: token.deviceID, bundleID: head.bundleID,
                           topic: head.topic, pushType: head.pushType, priority: head.priority,
                           collapseID: head.collapseID, expiresAt: core.expiresAt(head.expiration, now: now),
                           payload: payload, acceptedAt: now)
        switch sink.map({ core.committer.submit(PushCommitter.Request(push: push, sink: $0, streamID: streamID)) }) ?? .stopping {
        case .queued:
            if logsTrace {
                logger.trace("push accepted", metadata: ["push.apns_id": "\(head.apnsID)", "push.topic": "\(head.topic)",
                                                         "push.token": "\(head.deviceToken.redacted)"])
            }
        case .stopping:
            fail(streamID, head: head, error: APNsError(.shutdown))
            closeIfDrained()
        case .full:
            fail(streamID, head: head, error: APNsError(.serviceUnavailable))
        }
    }

    /// A cache miss: the store is asked off the loop, then the request is processed again,
    /// unless the client reset its stream meanwhile (then nothing was committed, and nothing is).
    private func retryAfter(_ streamID: HTTP2StreamID, head: ProviderRequestHead, body: ByteBuffer?, bodyBytes: Int,
                            context: ChannelHandlerContext, load: @escaping @Sendable () throws -> some Sendable) {
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        let body = body.map { NIOLoopBound($0, eventLoop: context.eventLoop) }
        core.blocking(on: context.eventLoop) { _ = try load() }.whenComplete { result in
            let handler = bound.value
            if handler.machine.lookupCompleted(streamID) {
                switch result {
                case .success:
                    handler.process(streamID, head: head, body: body?.value, bodyBytes: bodyBytes)
                case .failure(let error):
                    handler.logger.error("store lookup failed", metadata: ["error": "\(error)"])
                    handler.fail(streamID, head: head, error: APNsError(.internalServerError))
                }
            }
            handler.flushIfNeeded()
            handler.closeIfDrained()
        }
    }

    private func fail(_ streamID: HTTP2StreamID, head: ProviderRequestHead, error: APNsError) {
        guard machine.answer(streamID) == .send else { return }  // the client reset it
        respond(streamID, apnsID: head.apnsID.rawValue, error: error)
        if logsDebug {
            logger.debug("push rejected", metadata: ["push.apns_id": "\(head.apnsID)", "push.topic": "\(head.topic)",
                                                     "push.token": "\(head.deviceToken.redacted)", "reason": "\(error.reason)"])
        }
    }

    /// The apns-id is unique per response: not worth a place in either side's HPACK dynamic
    /// table (inserting every one evicted an older one on every response), except once, so
    /// that its name is there.
    private static func indexing(_ nameIndexed: inout Bool) -> HPACKIndexing {
        if nameIndexed { return .nonIndexable }
        nameIndexed = true
        return .indexable
    }

    private func respondOK(_ streamID: HTTP2StreamID, apnsID: String) {
        guard let context else { return }
        var headers = HPACKHeaders()
        headers.reserveCapacity(2)
        headers.add(name: ":status", value: "200")
        headers.add(name: "apns-id", value: apnsID, indexing: Self.indexing(&apnsIDNameIndexed))
        // In development `OutboundCoalescingHandler` appends `apns-unique-id` to this frame's
        // header block below NIOHTTP2 (NIOHPACK would Huffman-code every value).
        writingResponse = true
        context.write(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers, endStream: true)))), promise: nil)
        writingResponse = false
        needsFlush = true
    }

    private func respond(_ streamID: HTTP2StreamID, apnsID: String, error: APNsError, written: EventLoopPromise<Void>? = nil) {
        guard let context else { return }
        if error.reason != .internalServerError { core.metrics.recordRejected(error.reason.rawValue) }
        var headers: HPACKHeaders = [":status": String(error.status), "content-type": "application/json"]
        headers.add(name: "apns-id", value: apnsID, indexing: Self.indexing(&apnsIDNameIndexed))
        writingResponse = true
        context.write(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers, endStream: false)))), promise: nil)
        var body = context.channel.allocator.buffer(capacity: 64)
        body.writeString(error.jsonBody)
        context.write(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .data(.init(data: .byteBuffer(body), endStream: true)))), promise: written)
        writingResponse = false
        needsFlush = true
    }
}

/// What the handlers below NIOHTTP2 on a provider connection ask `ProviderConnectionHandler`.
protocol ProviderStreamRegistry: AnyObject {
    /// The highest stream the gateway took: every GOAWAY's `last_stream_id`.
    var lastProcessedStreamID: HTTP2StreamID { get }
    /// Whether a `RST_STREAM` for this stream would close nothing (it was answered, refused or
    /// reset already).
    func isClosedStream(_ streamID: HTTP2StreamID) -> Bool
}

/// A provider connection as the committer sees it.
private final class ProviderCommitSink: PushCommitSink {
    let handler: NIOLoopBound<ProviderConnectionHandler>
    let eventLoop: any EventLoop

    init(handler: NIOLoopBound<ProviderConnectionHandler>, eventLoop: any EventLoop) {
        self.handler = handler
        self.eventLoop = eventLoop
    }

    func committed(_ outcomes: [PushCommitOutcome]) { handler.value.committed(outcomes) }
}

/// Between TLS and NIOHTTP2 on provider connections that accept client certificates: tells
/// `ProviderConnectionHandler` that the handshake completed (a certificate the CA accepts
/// authenticates the connection then), and removes itself. Below NIOHTTP2 it sees only TLS's
/// events, not NIOHTTP2's two per stream, each of which cost the provider handler a dynamic
/// cast when it looked at user events itself.
final class ProviderHandshakeObserver: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        context.fireUserInboundEventTriggered(event)
        guard let event = event as? TLSUserEvent, case .handshakeCompleted = event else { return }
        (try? context.pipeline.syncOperations.handler(type: ProviderConnectionHandler.self))?.tlsHandshakeCompleted()
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }
}
