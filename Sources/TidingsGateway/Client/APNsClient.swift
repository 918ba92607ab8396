import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import Synchronization
import TidingsCore

/// Where an APNs provider client connects: a Tidings gateway or Apple's hosts.
public struct APNsClientConfiguration: Sendable {
    public var host: String
    public var port: Int
    /// TLS (`https`) or HTTP/2 with prior knowledge (`http`, Tidings' cleartext option).
    public var useTLS: Bool = true
    /// Offer ALPN `h2` (most clients do; aioapns and Pushy do not).
    public var offerALPN: Bool = true
    /// PEM certificates to trust; empty: the system's roots.
    public var trustRootPaths: [String] = []
    /// A client certificate (PEM) for certificate-based authentication (mutual TLS), and its
    /// key (PEM; `nil`: the same file, as `tidings certs create` writes both in one).
    public var clientCertificatePath: String?
    public var clientKeyPath: String?
    /// The `host` / `:authority` value and the certificate name; `nil` uses `host`.
    public var authority: String?
    public var connectTimeout: TimeAmount = .seconds(10)
    /// Check outgoing header blocks against HTTP/2's rules before sending (NIOHTTP2's
    /// header-block and content-length validation). Tests turn it off to send malformed
    /// requests on purpose.
    public var validatesHeaderBlocks: Bool = true

    public init(host: String, port: Int, useTLS: Bool = true, trustRootPaths: [String] = []) {
        self.host = host
        self.port = port
        self.useTLS = useTLS
        self.trustRootPaths = trustRootPaths
    }

    /// Apple's development server.
    public static let appleDevelopment = APNsClientConfiguration(host: "api.sandbox.push.apple.com", port: 443)
    /// Apple's production server.
    public static let appleProduction = APNsClientConfiguration(host: "api.push.apple.com", port: 443)
}

/// One request to `/3/device/<token>`.
public struct APNsRequest: Sendable {
    public var method: String = "POST"
    /// Overrides the path (tests use it for bad paths); normally `/3/device/<deviceToken>`.
    public var path: String
    /// Header fields in order (`authorization`, `apns-topic`, `apns-push-type`, …).
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]
    /// False: the body is never sent and the stream never ended (tests of a stalled client).
    public var endsStream = true

    public init(deviceToken: String, headers: [(name: String, value: String)], body: [UInt8]) {
        self.path = "/3/device/" + deviceToken
        self.headers = headers
        self.body = body
    }

    public init(method: String = "POST", path: String, headers: [(name: String, value: String)], body: [UInt8]) {
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
    }
}

/// A response and the frames it came in.
public struct APNsResponse: Sendable, Hashable {
    public var status: Int
    public var headers: [String: String]
    public var body: [UInt8]
    /// How the response was framed: `H` for a HEADERS frame, `D` for DATA, `*` marking END_STREAM.
    public var framing: [String]

    public var apnsID: String? { headers["apns-id"] }
    /// The error body's `reason`.
    public var reason: String? { (try? JSONValue(parsing: body))?["reason"]?.stringValue }
    /// The error body's integer `timestamp` (410 only).
    public var timestamp: Int64? { if case .integer(let t)? = (try? JSONValue(parsing: body))?["timestamp"] { t } else { nil } }
}

/// A client error: the connection failed or closed before the answer.
public struct APNsClientError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    /// The GOAWAY's JSON `reason`, if the server sent one.
    public var goAwayReason: String?
    public init(_ message: String, goAwayReason: String? = nil) {
        self.message = message
        self.goAwayReason = goAwayReason
    }
    public var description: String { goAwayReason.map { "\(message) (GOAWAY \($0))" } ?? message }
}

/// An HTTP/2 connection to an APNs-compatible server, handling frames on the connection
/// channel. Respects the server's `MAX_CONCURRENT_STREAMS` (one stream until the first
/// authenticated request, on APNs and Tidings) by queueing.
public final class APNsConnection: Sendable {
    private let channel: any Channel
    private let handler: NIOLoopBound<APNsClientHandler>
    public let configuration: APNsClientConfiguration

    private init(channel: any Channel, handler: NIOLoopBound<APNsClientHandler>, configuration: APNsClientConfiguration) {
        self.channel = channel
        self.handler = handler
        self.configuration = configuration
    }

    public static func connect(_ configuration: APNsClientConfiguration,
                               eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) async throws -> APNsConnection {
        let sslContext: NIOSSLContext?
        if configuration.useTLS {
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.minimumTLSVersion = .tlsv12
            if configuration.offerALPN { tls.applicationProtocols = ["h2"] }
            if !configuration.trustRootPaths.isEmpty {
                tls.trustRoots = .certificates(try configuration.trustRootPaths.flatMap { try NIOSSLCertificate.fromPEMFile($0) })
            }
            if let certificate = configuration.clientCertificatePath {
                tls.certificateChain = try NIOSSLCertificate.fromPEMFile(certificate).map { .certificate($0) }
                tls.privateKey = .privateKey(try NIOSSLPrivateKey(file: configuration.clientKeyPath ?? certificate, format: .pem))
            }
            sslContext = try NIOSSLContext(configuration: tls)
        } else {
            sslContext = nil
        }
        let authority = configuration.authority ?? configuration.host
        let isIP = authority.first.map { $0.isNumber } == true || authority.contains(":")
        let channel = try await ClientBootstrap(group: eventLoopGroup)
            .connectTimeout(configuration.connectTimeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    if let sslContext {
                        try sync.addHandler(try NIOSSLClientHandler(context: sslContext, serverHostname: isIP ? nil : authority))
                    }
                    try sync.addHandler(NIOHTTP2Handler(mode: .client, initialSettings: nioDefaultSettings,
                                                        headerBlockValidation: configuration.validatesHeaderBlocks ? .enabled : .disabled,
                                                        contentLengthValidation: configuration.validatesHeaderBlocks ? .enabled : .disabled))
                    try sync.addHandler(APNsClientHandler(authority: authority, scheme: configuration.useTLS ? "https" : "http"))
                }
            }
            .connect(host: configuration.host, port: configuration.port).get()
        let handler = try await channel.eventLoop.submit {
            NIOLoopBound(try channel.pipeline.syncOperations.handler(type: APNsClientHandler.self), eventLoop: channel.eventLoop)
        }.get()
        return APNsConnection(channel: channel, handler: handler, configuration: configuration)
    }

    /// Sends one request and waits for its whole response.
    public func send(_ request: APNsRequest) async throws -> APNsResponse {
        let promise = channel.eventLoop.makePromise(of: APNsResponse.self)
        let handler = self.handler
        channel.eventLoop.execute { handler.value.enqueue(request, promise: promise) }
        return try await promise.futureResult.get()
    }

    /// The GOAWAY reason, once the server sent one.
    public func goAwayReason() async -> String? {
        let handler = self.handler
        return try? await channel.eventLoop.submit { handler.value.goAwayReason }.get()
    }

    /// The server's `SETTINGS_MAX_CONCURRENT_STREAMS` as last received (1 before any).
    public func maximumConcurrentStreams() async -> Int {
        let handler = self.handler
        return (try? await channel.eventLoop.submit { handler.value.maxConcurrentStreams }.get()) ?? 1
    }

    public func close() async {
        try? await channel.close()
    }

    public func waitUntilClosed() async {
        try? await channel.closeFuture.get()
    }
}

final class APNsClientHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private struct Open {
        var promise: EventLoopPromise<APNsResponse>
        var status = 0
        var headers: [String: String] = [:]
        var body: [UInt8] = []
        var framing: [String] = []
    }

    private let authority: String
    private let scheme: String
    private var context: ChannelHandlerContext?
    private var nextStreamID = HTTP2StreamID(1)
    private var open: [HTTP2StreamID: Open] = [:]
    private var queue: [(APNsRequest, EventLoopPromise<APNsResponse>)] = []
    /// Until the server's SETTINGS say otherwise, one stream (APNs' rule before authentication).
    private(set) var maxConcurrentStreams = 1
    private var sawSettings = false
    private(set) var goAwayReason: String?
    private var closed: APNsClientError?

    init(authority: String, scheme: String) {
        self.authority = authority
        self.scheme = scheme
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func enqueue(_ request: APNsRequest, promise: EventLoopPromise<APNsResponse>) {
        if let closed { promise.fail(closed); return }
        queue.append((request, promise))
        pump()
    }

    private func pump() {
        guard let context, sawSettings else { return }
        var wrote = false
        while !queue.isEmpty, open.count < maxConcurrentStreams {
            let (request, promise) = queue.removeFirst()
            let id = nextStreamID
            nextStreamID = HTTP2StreamID(Int(id) + 2)
            var headers: HPACKHeaders = [":method": request.method, ":scheme": scheme, ":path": request.path, ":authority": authority]
            for (name, value) in request.headers {
                // The provider token is sensitive (RFC 7541 § 7.1.3): never put in the HPACK
                // dynamic table, as nghttp2 (curl) and Python's h2 (httpx, aioapns) send it.
                headers.add(name: name, value: value, indexing: name == "authorization" ? .neverIndexed : .indexable)
            }
            open[id] = Open(promise: promise)
            let endStream = request.body.isEmpty && request.endsStream
            context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .headers(.init(headers: headers, endStream: endStream)))), promise: nil)
            if !endStream && request.endsStream {
                let data = context.channel.allocator.buffer(bytes: request.body)
                context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .data(.init(data: .byteBuffer(data), endStream: true)))), promise: nil)
            }
            wrote = true
        }
        if wrote { context.flush() }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.payload {
        case .settings(.settings(let settings)):
            for s in settings where s.parameter == .maxConcurrentStreams { maxConcurrentStreams = max(1, s.value) }
            sawSettings = true
            pump()
        case .headers(let h):
            guard var o = open[frame.streamID] else { return }
            for (name, value, _) in h.headers {
                if name == ":status" { o.status = Int(value) ?? 0 } else { o.headers[name] = value }
            }
            o.framing.append(h.endStream ? "H*" : "H")
            open[frame.streamID] = o
            if h.endStream { complete(frame.streamID) }
        case .data(let d):
            guard var o = open[frame.streamID] else { return }
            if case .byteBuffer(let b) = d.data { o.body.append(contentsOf: b.readableBytesView) }
            o.framing.append(d.endStream ? "D*" : "D")
            open[frame.streamID] = o
            if d.endStream { complete(frame.streamID) }
        case .rstStream(let code):
            if let o = open.removeValue(forKey: frame.streamID) {
                o.promise.fail(APNsClientError("stream reset by the server: \(code)"))
            }
            pump()
        case .goAway(let last, _, let opaque):
            if let opaque, let reason = (try? JSONValue(parsing: opaque.readableBytesView))?["reason"]?.stringValue {
                goAwayReason = reason
            }
            let error = APNsClientError("the server sent GOAWAY", goAwayReason: goAwayReason)
            closed = error
            for (id, o) in open where id > last { o.promise.fail(error); open[id] = nil }
            for (_, promise) in queue { promise.fail(error) }
            queue.removeAll()
        default:
            break
        }
    }

    private func complete(_ id: HTTP2StreamID) {
        guard let o = open.removeValue(forKey: id) else { return }
        o.promise.succeed(APNsResponse(status: o.status, headers: o.headers, body: o.body, framing: o.framing))
        pump()
    }

    func channelInactive(context: ChannelHandlerContext) {
        let error = closed ?? APNsClientError("the connection closed", goAwayReason: goAwayReason)
        closed = error
        for (_, o) in open { o.promise.fail(error) }
        open.removeAll()
        for (_, promise) in queue { promise.fail(error) }
        queue.removeAll()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if error is NIOHTTP2Errors.StreamError { return }
        closed = APNsClientError("connection error: \(error)")
        context.close(promise: nil)
    }
}
