import Foundation
import NIOCore
import NIOHTTP1
import TidingsCore
import TidingsStorage

/// The admin endpoint (HTTP/1.1): `GET /metrics` (Prometheus text), `GET /status/<apns-id>`
/// (the delivery path of every push with that apns-id, JSON), `GET /healthz`. With a token,
/// every request must carry `authorization: bearer <token>`, else `401`.
final class AdminHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let core: GatewayCore
    private let token: AdminToken?
    private var request: HTTPRequestHead?

    init(core: GatewayCore, token: AdminToken?) {
        self.core = core
        self.token = token
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): request = head
        case .body: break
        case .end:
            guard let head = request else { return }
            request = nil
            // The request is complete: its deadline no longer runs while it is answered.
            context.triggerUserOutboundEvent(AdminConnectionGuard.Event.requestReceived, promise: nil)
            route(head, context: context)
        }
    }

    private func route(_ head: HTTPRequestHead, context: ChannelHandlerContext) {
        if let token, !token.accepts(authorization: head.headers["authorization"]) {
            return respond(context, head, status: .unauthorized, body: #"{"error":"missing or wrong bearer token"}"#,
                           extraHeaders: [("www-authenticate", #"Bearer realm="tidings-admin""#)])
        }
        let path = head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? head.uri
        guard head.method == .GET else { return respond(context, head, status: .methodNotAllowed, body: #"{"error":"GET only"}"#) }
        if path == "/metrics" {
            let text = String(decoding: core.metrics.exposition(), as: UTF8.self)
            return respond(context, head, status: .ok, body: text, contentType: "text/plain; version=0.0.4")
        }
        if path == "/healthz" { return respond(context, head, status: .ok, body: #"{"status":"ok"}"#) }
        if path.hasPrefix("/status/") {
            let apnsID = String(path.dropFirst("/status/".count)).removingPercentEncoding ?? ""
            let store = core.store
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
            core.blocking(on: context.eventLoop) { try store.status(apnsID: apnsID) }.whenComplete { result in
                switch result {
                case .success(let statuses) where statuses.isEmpty:
                    handler.value.respond(bound.value, head, status: .notFound, body: #"{"error":"no push with this apns-id"}"#)
                case .success(let statuses):
                    let encoder = JSONEncoder()
                    encoder.outputFormatting = [.sortedKeys]
                    let json = (try? encoder.encode(statuses)).map { String(decoding: $0, as: UTF8.self) } ?? "[]"
                    handler.value.respond(bound.value, head, status: .ok, body: json)
                case .failure(let error):
                    handler.value.respond(bound.value, head, status: .internalServerError, body: #"{"error":"\#(error)"}"#)
                }
            }
            return
        }
        respond(context, head, status: .notFound, body: #"{"error":"not found"}"#)
    }

    private func respond(_ context: ChannelHandlerContext, _ head: HTTPRequestHead, status: HTTPResponseStatus, body: String,
                         contentType: String = "application/json", extraHeaders: [(String, String)] = []) {
        guard context.channel.isActive else { return }
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: contentType)
        headers.add(name: "content-length", value: String(body.utf8.count))
        for (name, value) in extraHeaders { headers.add(name: name, value: value) }
        if !head.isKeepAlive { headers.add(name: "connection", value: "close") }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: body)))), promise: nil)
        let keepAlive = head.isKeepAlive
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
            let context = bound.value
            if keepAlive {
                context.triggerUserOutboundEvent(AdminConnectionGuard.Event.responseSent, promise: nil)
            } else {
                context.close(promise: nil)
            }
        }
    }
}

/// The admin endpoint's bearer token: 32 random bytes as 64 hex digits in a file of the data
/// directory (`GatewayConfiguration.adminTokenPath`, mode 0600), made once and reused.
struct AdminToken: Sendable {
    let value: String

    /// Reads the token file, making it first if there is none.
    static func ensure(path: String) throws -> (token: AdminToken, created: Bool) {
        if let text = try? String(contentsOfFile: path, encoding: .utf8) {
            let value = text.trimmingCharacters(in: .whitespacesAndNewlines)
            guard value.utf8.count >= 32 else { throw AdminTokenError(path: path, problem: "holds fewer than 32 characters") }
            return (AdminToken(value: value), false)
        }
        var generator = SystemRandomNumberGenerator()
        let value = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: .min ... .max, using: &generator)) }.joined()
        // O_EXCL: never over another process's token; 0600 from the start, never readable by others.
        do { try PrivateFile.create(path, contents: Array((value + "\n").utf8), replacing: false) } catch {
            throw AdminTokenError(path: path, problem: "cannot be created (\(String(cString: strerror(error.errno))))")
        }
        return (AdminToken(value: value), true)
    }

    /// Whether an `authorization` header carries this token (`Bearer`, any case); compared
    /// in constant time.
    func accepts(authorization: [String]) -> Bool {
        guard authorization.count == 1 else { return false }
        let field = authorization[0]
        guard field.count > 7, field.prefix(7).lowercased() == "bearer " else { return false }
        let given = Array(field.dropFirst(7).trimmingCharacters(in: .whitespaces).utf8)
        let expected = Array(value.utf8)
        guard given.count == expected.count else { return false }
        var difference: UInt8 = 0
        for i in 0..<expected.count { difference |= given[i] ^ expected[i] }
        return difference == 0
    }

    /// Whether an endpoint bound to `address` needs a token when the configuration leaves it
    /// open (`adminTokenRequired` nil): on any address that is not loopback.
    static func required(listeningOn address: SocketAddress) -> Bool {
        switch address {
        case .v4(let a):
            // 127.0.0.0/8, in network byte order.
            return UInt32(bigEndian: a.address.sin_addr.s_addr) >> 24 != 127
        case .v6(let a):
            var bytes = a.address.sin6_addr
            let octets = withUnsafeBytes(of: &bytes) { Array($0) }
            let loopback = octets.dropLast().allSatisfy { $0 == 0 } && octets.last == 1
            // ::ffff:127.x.y.z
            let mappedLoopback = octets[0..<10].allSatisfy { $0 == 0 } && octets[10] == 0xFF && octets[11] == 0xFF && octets[12] == 127
            return !(loopback || mappedLoopback)
        case .unixDomainSocket:
            return false
        }
    }
}

struct AdminTokenError: Error, CustomStringConvertible {
    var path: String
    var problem: String
    var description: String { "the admin token file \(path) \(problem)" }
}

/// The first handler of an admin connection, below HTTP: closes it when a request is not
/// complete within `adminRequestTimeout` of the connection's start or of the previous
/// response (slow clients, and keep-alive connections left idle), or when more than
/// `adminMaximumRequestBytes` arrive before the next response.
final class AdminConnectionGuard: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// Sent by `AdminHandler` as outbound user events.
    enum Event: Sendable {
        /// A request is complete: its deadline stops while it is answered.
        case requestReceived
        /// Its response is written: the next request's deadline and byte count start.
        case responseSent
    }

    private let listener: ListenerGuard
    private let timeout: TimeAmount
    private let maximumBytes: Int
    private var bytes = 0
    private var deadline: Scheduled<Void>?

    init(listener: ListenerGuard, timeout: TimeAmount, maximumBytes: Int) {
        self.listener = listener
        self.timeout = timeout
        self.maximumBytes = maximumBytes
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { arm(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        if deadline == nil { arm(context: context) }
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
        context.fireChannelInactive()
    }

    private func arm(context: ChannelHandlerContext) {
        deadline?.cancel()
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        let listener = self.listener
        deadline = context.eventLoop.scheduleTask(in: timeout) {
            let context = bound.value
            guard context.channel.isActive else { return }
            listener.closedEarly("request_timeout", context.channel)
            context.close(promise: nil)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        bytes += unwrapInboundIn(data).readableBytes
        guard bytes <= maximumBytes else {
            listener.closedEarly("request_too_large", context.channel)
            deadline?.cancel()
            context.close(promise: nil)
            return
        }
        context.fireChannelRead(data)
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        guard let event = event as? Event else { return context.triggerUserOutboundEvent(event, promise: promise) }
        switch event {
        case .requestReceived:
            deadline?.cancel()
            deadline = nil
        case .responseSent:
            bytes = 0
            if context.channel.isActive { arm(context: context) }
        }
        promise?.succeed(())
    }
}
