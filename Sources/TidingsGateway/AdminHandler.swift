import Foundation
import NIOCore
import NIOHTTP1
import TidingsStorage

/// The admin endpoint (HTTP/1.1): `GET /metrics` (Prometheus text), `GET /status/<apns-id>`
/// (the delivery path of every push with that apns-id, JSON), `GET /healthz`.
final class AdminHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let core: GatewayCore
    private var request: HTTPRequestHead?

    init(core: GatewayCore) { self.core = core }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): request = head
        case .body: break
        case .end:
            guard let head = request else { return }
            request = nil
            route(head, context: context)
        }
    }

    private func route(_ head: HTTPRequestHead, context: ChannelHandlerContext) {
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
                         contentType: String = "application/json") {
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: contentType)
        headers.add(name: "content-length", value: String(body.utf8.count))
        if !head.isKeepAlive { headers.add(name: "connection", value: "close") }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: body)))), promise: nil)
        let keepAlive = head.isKeepAlive
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
            if !keepAlive { bound.value.close(promise: nil) }
        }
    }
}
