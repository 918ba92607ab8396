import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOSSL
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
final class ProviderConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private struct StreamState {
        var head: Result<ProviderRequestHead, ProviderRequestError>
        /// The largest body kept (the push type's limit; 0 after a header error).
        let bodyLimit: Int
        /// The `content-length` announced, which the body must match (`HTTP2HeaderBlockRules`).
        let contentLength: Int?
        var body: ByteBuffer?
        var bodyBytes = 0
        /// Flow-controlled bytes received on the stream and not yet given back.
        var unacknowledged = 0
        /// When the headers came (the gateway's clock): `IdleTimeout` counts from here.
        let openedAt: EpochMilliseconds

        init(head: Result<ProviderRequestHead, ProviderRequestError>, contentLength: Int?, openedAt: EpochMilliseconds) {
            self.head = head
            self.contentLength = contentLength
            self.openedAt = openedAt
            if case .success(let h) = head { bodyLimit = h.maximumPayloadSize } else { bodyLimit = 0 }
        }

        /// One DATA frame: the body grows (up to the push type's limit; beyond it only the
        /// count, for `PayloadTooLarge`); `windowUpdate` is set when the stream's credit is due.
        /// Returns false when the body has outgrown its `content-length` (a value either way, so
        /// that optional chaining on the dictionary tells a known stream).
        mutating func received(_ payload: HTTP2Frame.FramePayload.Data, flowControlled: Int, windowUpdateThreshold: Int,
                               windowUpdate: inout Int) -> Bool {
            if !payload.endStream {
                unacknowledged += flowControlled
                if unacknowledged >= windowUpdateThreshold {
                    windowUpdate = unacknowledged
                    unacknowledged = 0
                }
            }
            if case .byteBuffer(var chunk) = payload.data, chunk.readableBytes > 0 {
                bodyBytes += chunk.readableBytes
                if bodyBytes <= bodyLimit {
                    if body == nil { body = chunk } else { body!.writeBuffer(&chunk) }
                }
            }
            if let contentLength, bodyBytes > contentLength { return false }
            return true
        }
    }

    /// Without child channels nobody else returns flow-control credit: the handler sends
    /// WINDOW_UPDATE for the connection (and for a stream whose body goes on) once half a
    /// window has been consumed.
    private static let windowUpdateThreshold = 32_768
    private var connectionUnacknowledged = 0

    private let core: GatewayCore
    private var auth: ProviderAuthenticationStateMachine
    private var streams: [HTTP2StreamID: StreamState] = [:]
    private var inFlight = 0
    private var needsFlush = false
    private var raisedStreamLimit = false
    private var shuttingDown = false
    private var highestStreamID: HTTP2StreamID = .rootStream
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

    /// The connection's client certificate, read from NIOSSL and verified at its first request
    /// (the handshake is over by then); `nil` when it has none: the provider token applies.
    private func clientCertificate() -> ProviderClientCertificate? {
        if !clientCertificateRead, let context {
            clientCertificateRead = true
            clientCertificateValue = ProviderClientCertificate.read(from: context.pipeline.syncOperations, verifier: certificateVerifier)
        }
        return clientCertificateValue
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        sink = ProviderCommitSink(handler: NIOLoopBound(self, eventLoop: context.eventLoop), eventLoop: context.eventLoop)
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let interval = core.configuration.providerIdleCheckInterval
        idleCheck = context.eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in
            handler.value.timeOutStalledRequests()
        }
    }
    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        sink = nil  // the sink holds the handler: break the cycle
        idleCheck?.cancel()
        idleCheck = nil
    }

    private var idleCheck: RepeatedTask?

    /// Requests whose stream did not end within `providerRequestTimeout` of their headers (the
    /// body never came): `400 IdleTimeout`, then `RST_STREAM(NO_ERROR)` so that the client stops
    /// sending it (RFC 9113 § 8.1) and the stream no longer counts against the limit.
    private func timeOutStalledRequests() {
        guard !streams.isEmpty, let context else { return }
        let cutoff = core.clock.nowMilliseconds() - core.configuration.providerRequestTimeout.milliseconds
        let stalled = streams.filter { $0.value.openedAt <= cutoff }
        guard !stalled.isEmpty else { return }
        for (streamID, stream) in stalled.sorted(by: { $0.key < $1.key }) {
            streams[streamID] = nil
            let apnsID: String
            switch stream.head {
            case .success(let head): apnsID = head.apnsID.rawValue
            case .failure(let failure): apnsID = failure.apnsIDEcho
            }
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
        flushIfNeeded()
        closeIfDrained()
    }

    /// The outcomes of one commit for this connection (`PushCommitter`).
    fileprivate func committed(_ outcomes: [PushCommitOutcome]) {
        inFlight -= outcomes.count
        for outcome in outcomes {
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
            if streams[frame.streamID] != nil {
                // Trailers: the request ends here.
                var rules = HTTP2HeaderBlockRules(.trailers)
                for field in headers.headers { rules.add(name: field.name, value: field.value) }
                guard rules.finish() else { return resetMalformed(frame.streamID, context: context) }
                if headers.endStream { finish(frame.streamID, context: context) }
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
            if frame.streamID > highestStreamID { highestStreamID = frame.streamID }
            streams[frame.streamID] = StreamState(head: clientCertificate()?.validate(fields) ?? fields.validate(),
                                                  contentLength: rules.contentLength,
                                                  openedAt: core.clock.nowMilliseconds())
            if headers.endStream { finish(frame.streamID, context: context) }
        case .data(let payload):
            let flowControlled = payload.data.readableBytes + (payload.paddingBytes.map { $0 + 1 } ?? 0)
            connectionUnacknowledged += flowControlled
            if connectionUnacknowledged >= Self.windowUpdateThreshold {
                context.write(wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: connectionUnacknowledged))), promise: nil)
                connectionUnacknowledged = 0
                needsFlush = true
            }
            // The stream's state is changed in place (a copy out of the dictionary and back
            // retained and released every string of the request's head per DATA frame).
            var windowUpdate = 0
            let withinLength: Bool? = streams[frame.streamID]?.received(payload, flowControlled: flowControlled,
                                                                        windowUpdateThreshold: Self.windowUpdateThreshold,
                                                                        windowUpdate: &windowUpdate)
            guard let withinLength else { return }
            guard withinLength else { return resetMalformed(frame.streamID, context: context) }
            if windowUpdate > 0 {
                context.write(wrapOutboundOut(HTTP2Frame(streamID: frame.streamID, payload: .windowUpdate(windowSizeIncrement: windowUpdate))), promise: nil)
                needsFlush = true
            }
            if payload.endStream { finish(frame.streamID, context: context) }
        case .rstStream:
            streams[frame.streamID] = nil
        default:
            // SETTINGS, PING, WINDOW_UPDATE, PRIORITY (ignored, as APNs does), GOAWAY: NIOHTTP2Handler
            // has done what they require.
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        flushIfNeeded()
        context.fireChannelReadComplete()
    }

    /// A malformed header block (RFC 9113 § 8.1.1): the stream is reset with `PROTOCOL_ERROR`,
    /// as NIOHTTP2 does when its own validation is on.
    private func resetMalformed(_ streamID: HTTP2StreamID, context: ChannelHandlerContext) {
        streams[streamID] = nil
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
        context.close(promise: nil)
    }

    // MARK: Shutdown

    /// Graceful shutdown (`Gateway` calls this on the connection's loop). Not a user event
    /// through the pipeline: NIOHTTP2 fires two user events per stream (created, closed), and
    /// each was type-checked here on its way past, ≈ 1 % of the gateway's CPU.
    func beginShutdown() {
        guard !shuttingDown, let context else { return }
        shuttingDown = true
        var body = context.channel.allocator.buffer(capacity: 32)
        body.writeString(APNsError(.shutdown).jsonBody)
        let goAway = HTTP2Frame(streamID: .rootStream, payload: .goAway(lastStreamID: highestStreamID, errorCode: .noError, opaqueData: body))
        context.writeAndFlush(wrapOutboundOut(goAway), promise: nil)
        closeIfDrained()
    }

    private func closeIfDrained() {
        guard shuttingDown, inFlight == 0, streams.isEmpty, let context else { return }
        context.close(promise: nil)
    }

    // MARK: Requests

    private func finish(_ streamID: HTTP2StreamID, context: ChannelHandlerContext) {
        guard let stream = streams.removeValue(forKey: streamID) else { return }
        if let contentLength = stream.contentLength, stream.bodyBytes != contentLength {
            return resetMalformed(streamID, context: context)
        }
        switch stream.head {
        case .failure(let failure):
            respond(streamID, apnsID: failure.apnsIDEcho, error: failure.error)
        case .success(let head):
            inFlight += 1
            process(streamID, head: head, body: stream.body, bodyBytes: stream.bodyBytes)
        }
    }

    /// Runs the request checks; a cache miss goes to the store off the loop and comes back here.
    private func process(_ streamID: HTTP2StreamID, head: ProviderRequestHead, body: ByteBuffer?, bodyBytes: Int) {
        guard let context else { inFlight -= 1; return }
        let now = core.clock.nowMilliseconds()
        let directory = core.directory

        // Authentication: the client certificate when the connection has one, else the
        // provider token; then the topic's team.
        var missingKey: String?
        let authResult = clientCertificate()?.authenticate(head, now: now)
            ?? auth.authenticate(authorization: head.authorization, now: now / 1000) { kid in
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
        if !raisedStreamLimit {
            raisedStreamLimit = true
            if core.configuration.authenticatedStreamLimit != core.configuration.unauthenticatedStreamLimit {
                let settings = HTTP2Frame(streamID: .rootStream, payload: .settings(.settings([
                    HTTP2Setting(parameter: .maxConcurrentStreams, value: core.configuration.authenticatedStreamLimit),
                ])))
                context.write(wrapOutboundOut(settings), promise: nil)
                needsFlush = true
            }
        }
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
                           topic: head.topic.rawValue, pushType: head.pushType.rawValue, priority: head.priority.rawValue,
                           collapseID: head.collapseID?.rawValue, expiresAt: core.expiresAt(head.expiration, now: now),
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

    private func retryAfter(_ streamID: HTTP2StreamID, head: ProviderRequestHead, body: ByteBuffer?, bodyBytes: Int,
                            context: ChannelHandlerContext, load: @escaping @Sendable () throws -> some Sendable) {
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        let body = body.map { NIOLoopBound($0, eventLoop: context.eventLoop) }
        core.blocking(on: context.eventLoop) { _ = try load() }.whenComplete { result in
            let handler = bound.value
            switch result {
            case .success:
                handler.process(streamID, head: head, body: body?.value, bodyBytes: bodyBytes)
            case .failure(let error):
                handler.logger.error("store lookup failed", metadata: ["error": "\(error)"])
                handler.fail(streamID, head: head, error: APNsError(.internalServerError))
            }
            handler.flushIfNeeded()
            handler.closeIfDrained()
        }
    }

    private func fail(_ streamID: HTTP2StreamID, head: ProviderRequestHead, error: APNsError) {
        inFlight -= 1
        respond(streamID, apnsID: head.apnsID.rawValue, error: error)
        if logsDebug {
            logger.debug("push rejected", metadata: ["push.apns_id": "\(head.apnsID)", "push.topic": "\(head.topic)",
                                                     "push.token": "\(head.deviceToken.redacted)", "reason": "\(error.reason)"])
        }
    }

    /// The apns-id is unique per response: not worth a place in either side's HPACK dynamic
    /// table (inserting every one evicted an older one on every response), except once, so
    /// that its name is there.
    private func apnsIDIndexing() -> HPACKIndexing {
        if apnsIDNameIndexed { return .nonIndexable }
        apnsIDNameIndexed = true
        return .indexable
    }

    private func respondOK(_ streamID: HTTP2StreamID, apnsID: String) {
        guard let context else { return }
        var headers = HPACKHeaders()
        headers.reserveCapacity(2)
        headers.add(name: ":status", value: "200")
        headers.add(name: "apns-id", value: apnsID, indexing: apnsIDIndexing())
        context.write(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers, endStream: true)))), promise: nil)
        needsFlush = true
    }

    private func respond(_ streamID: HTTP2StreamID, apnsID: String, error: APNsError, written: EventLoopPromise<Void>? = nil) {
        guard let context else { return }
        if error.reason != .internalServerError { core.metrics.recordRejected(error.reason.rawValue) }
        var headers: HPACKHeaders = [":status": String(error.status), "content-type": "application/json"]
        headers.add(name: "apns-id", value: apnsID, indexing: apnsIDIndexing())
        context.write(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers, endStream: false)))), promise: nil)
        var body = context.channel.allocator.buffer(capacity: 64)
        body.writeString(error.jsonBody)
        context.write(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .data(.init(data: .byteBuffer(body), endStream: true)))), promise: written)
        needsFlush = true
    }
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
