import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization
import TidingsCore
import TidingsEngine

/// Bounds on what the web center accepts (docs/security.md, "Web notification center").
public struct WebCenterLimits: Sendable {
    /// Open TCP connections (pages, their WebSockets, attachment downloads); more wait in the backlog.
    public var maximumConnections = 64
    /// A request body (JSON of a response, a settings change…); past it: 413.
    public var maximumRequestBody = 64 * 1024
    /// A WebSocket frame the page may send (it sends none but pings); past it the socket closes.
    public var maximumWebSocketFrame = 64 * 1024
    /// An HTTP connection with no request for this long is closed.
    public var idleTimeout: Duration = .seconds(60)
    /// Identifiers in one `dismiss` request; past it: 413.
    public var maximumIdentifiersPerRequest = 1_000
    /// A text reply, in bytes; past it: 413.
    public var maximumReplyText = 16 * 1024
    public var hub = WebHub.Limits()
    public init() {}
}

public struct WebCenterConfiguration: Sendable {
    /// The address to listen on: loopback unless the person says otherwise.
    public var host: String
    /// 0: any free port.
    public var port: Int
    /// When `port` is taken, listen on any free port instead of failing (the default port).
    public var anyPortIfTaken: Bool
    public var dataDirectory: String
    public var limits: WebCenterLimits
    public var logger: Logger

    public static let defaultPort = 8730

    public init(dataDirectory: String, host: String = "127.0.0.1", port: Int = WebCenterConfiguration.defaultPort, anyPortIfTaken: Bool = false, limits: WebCenterLimits = WebCenterLimits(), logger: Logger = Logger(label: "tidings.web")) {
        self.host = host
        self.port = port
        self.anyPortIfTaken = anyPortIfTaken
        self.dataDirectory = dataDirectory
        self.limits = limits
        self.logger = logger
    }

    /// Where `tidings open` finds the running center's address (no secret in it).
    public static func addressPath(dataDirectory: String) -> String { dataDirectory + "/web-address" }
}

/// The person's side of the daemon in a browser: banners, the notification center, consent
/// prompts and Settings ▸ Notifications, served on loopback. Every answer goes through the
/// engine's admin requests, as `tidings notifications respond` does (docs/web-center.md).
public final class WebCenter: Service {
    public typealias Admin = @Sendable (AdminRequest) async -> AdminReply

    public let configuration: WebCenterConfiguration
    public let hub: WebHub
    public let secret: WebSecret
    let admin: Admin
    /// Runs content extensions for the expanded view's slot; nil: the slot stays empty.
    let contentExtensions: (any WebContentExtensions)?
    let frames = ExtensionFrames()
    /// The page, rendered once: it embeds only the CSRF token, which is fixed by the secret
    /// (no nonce or other per-request value). Nil when the package's `index.html` is missing.
    let pageHTML: ByteBuffer?
    private let ready = Mutex<(access: WebAccess?, waiting: [CheckedContinuation<URL, Never>])>((nil, []))

    public init(configuration: WebCenterConfiguration, hub: WebHub, admin: @escaping Admin, contentExtensions: (any WebContentExtensions)? = nil) throws {
        self.contentExtensions = contentExtensions
        self.configuration = configuration
        self.hub = hub
        self.admin = admin
        let secret = try WebSecret.loadOrCreate(dataDirectory: configuration.dataDirectory)
        self.secret = secret
        pageHTML = WebAssets.files["index.html"].map { html in
            ByteBuffer(string: String(decoding: html, as: UTF8.self).replacingOccurrences(of: "{{csrf}}", with: secret.csrfToken))
        }
    }

    /// The address with the secret: what the person opens once. Never logged.
    public func url() async -> URL {
        await withCheckedContinuation { continuation in
            let access: WebAccess? = ready.withLock { state in
                if state.access == nil { state.waiting.append(continuation) }
                return state.access
            }
            if let access { continuation.resume(returning: Self.url(access: access, host: configuration.host)) }
        }
    }

    /// The address without the secret.
    public func baseURL() async -> URL {
        let full = await url()
        var components = URLComponents(url: full, resolvingAgainstBaseURL: false)!
        components.query = nil
        return components.url!
    }

    static func url(access: WebAccess, host: String, secret: Bool = true) -> URL {
        let port = access.authorities.first { $0.hasPrefix("127.0.0.1:") }.map { $0.dropFirst(10) } ?? "0"
        let name = host == "0.0.0.0" || host == "::" ? "127.0.0.1" : host.contains(":") ? "[\(host)]" : host
        return URL(string: "http://\(name):\(port)/" + (secret ? "?key=\(access.secret.value)" : ""))!
    }

    var access: WebAccess? { ready.withLock { $0.access } }

    /// Listens on the configured port; with `anyPortIfTaken`, on any free one when binding it
    /// fails because it is taken — decided by the bind itself, not by a check before it (two
    /// daemons started together both found the default port free, and the second's bind then
    /// failed: that daemon stopped, its socket gone, right after it had started).
    public func run() async throws {
        let port = configuration.port
        do {
            try await run(on: port)
        } catch let error as IOError where port != 0 && error.errnoCode == EADDRINUSE {
            guard configuration.anyPortIfTaken else { throw PortTaken(host: configuration.host, port: port) }
            configuration.logger.notice("the web center's port is taken; listening on another", metadata: ["port": "\(port)"])
            try await run(on: 0)
        }
    }

    /// The port asked for is taken (and any other would not do): one clear sentence for the
    /// person, instead of the socket call's error.
    public struct PortTaken: Error, CustomStringConvertible {
        public let host: String
        public let port: Int

        public var description: String {
            "the web center cannot listen on \(host):\(port): the port is taken (another program, or another daemon's web center); "
                + "choose another port (--web-port N, 0 for any free one) or turn the web center off (--no-web)"
        }
    }

    private func run(on listenPort: Int) async throws {
        let router = Router(context: BasicWebSocketRequestContext.self)
        router.add(middleware: WebAccessMiddleware(center: self))
        addRoutes(to: router)
        addExtensionRoutes(to: router)
        let limits = configuration.limits
        let idle = TimeAmount.nanoseconds(limits.idleTimeout.components.seconds.saturatingMultiply(1_000_000_000).saturatingAdd(limits.idleTimeout.components.attoseconds / 1_000_000_000))
        let webSocketResponder = router.buildResponder()
        let wsConfiguration = HTTP1WebSocketUpgradeChannel.Configuration(
            http1: .init(idleTimeout: idle),
            ws: .init(maxFrameSize: limits.maximumWebSocketFrame, autoPing: .enabled(timePeriod: .seconds(30))))
        let app = Application(
            router: router,
            server: HTTPServerBuilder { responder in
                IdleClosingChannel(base: HTTP1WebSocketUpgradeChannel(responder: responder, webSocketResponder: webSocketResponder, configuration: wsConfiguration),
                                   timeout: idle)
            },
            configuration: ApplicationConfiguration(address: .hostname(configuration.host, port: listenPort), serverName: nil,
                                                    availableConnectionsDelegate: MaximumAvailableConnections(limits.maximumConnections)),
            onServerRunning: { [self] channel in
                let access = WebAccess(secret: secret, boundHost: configuration.host, port: channel.localAddress?.port ?? listenPort)
                let waiting = ready.withLock { state in
                    state.access = access
                    defer { state.waiting = [] }
                    return state.waiting
                }
                let address = Self.url(access: access, host: configuration.host, secret: false).absoluteString
                try? PrivateFile.create(WebCenterConfiguration.addressPath(dataDirectory: configuration.dataDirectory),
                                        contents: Array((address + "\n").utf8), mode: 0o600, replacing: true)
                configuration.logger.info("web center listening", metadata: ["address": "\(address)"])
                for continuation in waiting { continuation.resume(returning: Self.url(access: access, host: configuration.host)) }
            },
            logger: configuration.logger)
        // `run()`, not `runService()`: the latter installs its own SIGTERM/SIGINT handlers, so on
        // a signal the center returned by itself while the daemon's service group (which owns
        // the signals) was still running — "A service has finished unexpectedly", exit 1 after a
        // clean stop, about one `tidings daemon` stop in ten. Run here, the server shuts down
        // with the enclosing group's graceful shutdown (or on cancellation).
        try await app.run()
    }
}

/// Checks every request (`WebAccess`) and adds the headers that keep the page to itself.
struct WebAccessMiddleware<Context: RequestContext>: RouterMiddleware {
    let center: WebCenter

    static var csrfField: HTTPField.Name { HTTPField.Name(WebAccess.csrfHeader)! }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let access = center.access else { return Response(status: .serviceUnavailable) }
        let head = WebAccess.Head(
            method: request.method.rawValue, path: request.uri.path, query: request.uri.query ?? "",
            host: request.head.authority, origin: request.headers[.origin],
            cookie: request.headers[values: .cookie].joined(separator: "; "), csrf: request.headers[Self.csrfField],
            isWebSocketUpgrade: request.headers[.upgrade]?.lowercased() == "websocket")
        var response: Response
        switch access.decide(head) {
        case .allow:
            do {
                response = try await next(request, context)
            } catch let error as HTTPError {
                response = WebResponses.text(error.body ?? "\(error.status.reasonPhrase)", status: error.status)
            }
        case .login(let cookie):
            response = Response(status: .seeOther, headers: [.location: "/", .setCookie: cookie])
        case .refuse(let status, let reason):
            // The reason names no secret; the query (which may hold a wrong key) is not logged.
            center.configuration.logger.notice("web center request refused", metadata: ["path": "\(head.path.prefix(100))", "status": "\(status)"])
            response = WebResponses.text(reason, status: HTTPResponse.Status(code: status))
        }
        // A content extension's frame (opaque origin) keeps its own policy, may be framed by
        // the page, and loads its attachments cross-origin.
        if head.path.hasPrefix("/x/") {
            response.headers[.xContentTypeOptions] = "nosniff"
            response.headers[HTTPField.Name("Referrer-Policy")!] = "no-referrer"
            return response
        }
        WebResponses.secure(&response.headers)
        return response
    }
}

enum WebResponses {
    static func text(_ text: String, status: HTTPResponse.Status = .ok) -> Response {
        Response(status: status, headers: [.contentType: "text/plain; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(string: text + "\n")))
    }

    static func json(_ data: Data, status: HTTPResponse.Status = .ok) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    static func secure(_ headers: inout HTTPFields) {
        headers[.contentSecurityPolicy] = [
            "default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src 'self' data:", "media-src 'self'",
            "connect-src 'self'", "frame-src 'self'", "frame-ancestors 'none'", "base-uri 'none'", "form-action 'none'",
        ].joined(separator: "; ")
        headers[.xContentTypeOptions] = "nosniff"
        headers[HTTPField.Name("Referrer-Policy")!] = "no-referrer"
        headers[HTTPField.Name("X-Frame-Options")!] = "DENY"
        headers[HTTPField.Name("Cross-Origin-Resource-Policy")!] = "same-origin"
        if headers[.cacheControl] == nil { headers[.cacheControl] = "no-store" }
    }
}
