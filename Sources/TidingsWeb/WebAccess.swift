import Foundation

/// Who may use the web center, decided from a request's head alone (pure; the middleware
/// performs the answer). A request is refused unless:
/// - its `Host` names the center as the person's browser reaches it on loopback (a page of
///   another site that a DNS-rebinding name points at 127.0.0.1 carries its own name);
/// - any `Origin` is the center's own (another site's page may send requests, never with it);
/// - it carries the session cookie (or, on `/`, the secret in `?key=`, which sets the cookie);
/// - a state-changing request (POST) carries the CSRF token in `X-Tidings-CSRF`, and its
///   `Origin` (a WebSocket upgrade too: cross-site WebSocket hijacking).
public struct WebAccess: Sendable {
    public static let cookieName = "tidings_session"
    public static let csrfHeader = "X-Tidings-CSRF"

    public enum Decision: Sendable, Equatable {
        case allow
        /// The secret was right: set the cookie and send the browser to `/` without it.
        case login(setCookie: String)
        case refuse(status: Int, reason: String)
    }

    public struct Head: Sendable {
        public var method: String
        /// The path without the query.
        public var path: String
        public var query: String
        public var host: String?
        public var origin: String?
        public var cookie: String?
        public var csrf: String?
        public var isWebSocketUpgrade: Bool

        public init(method: String, path: String, query: String = "", host: String?, origin: String? = nil, cookie: String? = nil, csrf: String? = nil, isWebSocketUpgrade: Bool = false) {
            self.method = method
            self.path = path
            self.query = query
            self.host = host
            self.origin = origin
            self.cookie = cookie
            self.csrf = csrf
            self.isWebSocketUpgrade = isWebSocketUpgrade
        }
    }

    public let secret: WebSecret
    /// `host:port` forms the center answers to.
    public let authorities: Set<String>

    /// The names a loopback center answers to, on `port`, plus the host it was bound to.
    public init(secret: WebSecret, boundHost: String, port: Int) {
        self.secret = secret
        var names: Set<String> = ["127.0.0.1:\(port)", "localhost:\(port)", "[::1]:\(port)"]
        let host = boundHost.contains(":") && !boundHost.hasPrefix("[") ? "[\(boundHost)]" : boundHost
        if host != "0.0.0.0", host != "[::]" { names.insert("\(host.lowercased()):\(port)") }
        authorities = names
    }

    /// Paths anyone who reaches the center may fetch: the page's static files, no data.
    /// `/x/…`: a content extension frame's capability URLs (an unguessable token per open view).
    public static func isPublic(_ path: String) -> Bool {
        path.hasPrefix("/assets/") || path == "/favicon.ico" || path.hasPrefix("/x/")
    }

    public func decide(_ head: Head) -> Decision {
        guard let host = head.host?.lowercased(), authorities.contains(host) else {
            return .refuse(status: 421, reason: "this web center answers only to \(authorities.sorted().joined(separator: ", ")) (Host: \(head.host.map { String($0.prefix(100)) } ?? "missing"))")
        }
        // A content extension's frame has an opaque origin: its requests may say `null`.
        if let origin = head.origin, !(origin == "null" && head.path.hasPrefix("/x/") && head.method == "GET") {
            guard origin.hasPrefix("http://"), authorities.contains(String(origin.dropFirst(7)).lowercased()) else {
                return .refuse(status: 403, reason: "requests from another origin are refused")
            }
        }
        if Self.isPublic(head.path), head.method == "GET" || head.method == "HEAD" { return .allow }
        if head.method == "GET", head.path == "/", let key = Self.queryValue("key", in: head.query) {
            guard WebSecret.constantTimeEqual(key, secret.value) else {
                return .refuse(status: 403, reason: "the key in the address is not this center's; open the address `tidings open` prints")
            }
            return .login(setCookie: "\(Self.cookieName)=\(secret.sessionToken); Path=/; HttpOnly; SameSite=Strict")
        }
        guard let cookie = head.cookie, let session = Self.cookieValue(Self.cookieName, in: cookie),
              WebSecret.constantTimeEqual(session, secret.sessionToken) else {
            return .refuse(status: 401, reason: "open the address `tidings open` prints (it carries the key once)")
        }
        if head.isWebSocketUpgrade, head.origin == nil {
            return .refuse(status: 403, reason: "a WebSocket upgrade must come from the center's page (no Origin)")
        }
        if head.method != "GET", head.method != "HEAD" {
            guard head.origin != nil else {
                return .refuse(status: 403, reason: "a change must come from the center's page (no Origin)")
            }
            guard let token = head.csrf, WebSecret.constantTimeEqual(token, secret.csrfToken) else {
                return .refuse(status: 403, reason: "missing or wrong CSRF token")
            }
        }
        return .allow
    }

    static func queryValue(_ name: String, in query: String) -> String? {
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            if parts.count == 2, parts[0] == name[...] { return String(parts[1]).removingPercentEncoding }
        }
        return nil
    }

    static func cookieValue(_ name: String, in header: String) -> String? {
        for part in header.split(separator: ";") {
            let pair = part.trimmingCharacters(in: .whitespaces)
            if pair.hasPrefix(name + "=") { return String(pair.dropFirst(name.count + 1)) }
        }
        return nil
    }
}
