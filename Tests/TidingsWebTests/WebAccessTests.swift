import Foundation
import Testing
@testable import TidingsWeb
import TidingsTesting

/// Who may use the web center (`WebAccess`, pure): Host, Origin, secret, cookie, CSRF.
@Suite struct WebAccessTests {
    let secret = WebSecret(value: String(repeating: "ab", count: 32))
    var access: WebAccess { WebAccess(secret: secret, boundHost: "127.0.0.1", port: 8730) }
    var cookie: String { "\(WebAccess.cookieName)=\(secret.sessionToken)" }

    func head(_ method: String = "GET", _ path: String = "/api/state", path pathLabel: String? = nil, query: String = "", host: String? = "127.0.0.1:8730",
              origin: String? = nil, cookie: String? = nil, csrf: String? = nil, upgrade: Bool = false) -> WebAccess.Head {
        WebAccess.Head(method: method, path: pathLabel ?? path, query: query, host: host, origin: origin, cookie: cookie, csrf: csrf, isWebSocketUpgrade: upgrade)
    }

    func status(_ decision: WebAccess.Decision) -> Int? {
        if case .refuse(let status, _) = decision { return status }
        return nil
    }

    @Test func derivedTokensRevealNotTheSecret() {
        #expect(secret.sessionToken != secret.value && secret.csrfToken != secret.value && secret.sessionToken != secret.csrfToken)
        #expect(secret.sessionToken.count == 64)
        #expect(WebSecret(value: String(repeating: "cd", count: 32)).sessionToken != secret.sessionToken)
    }

    @Test func theSecretInTheAddressSetsAStrictHttpOnlyCookie() {
        guard case .login(let setCookie) = access.decide(head(path: "/", query: "key=\(secret.value)")) else {
            Issue.record("the right key did not log in")
            return
        }
        #expect(setCookie.contains("\(WebAccess.cookieName)=\(secret.sessionToken)"))
        #expect(setCookie.contains("HttpOnly") && setCookie.contains("SameSite=Strict"))
        #expect(!setCookie.contains(secret.value))
        #expect(status(access.decide(head(path: "/", query: "key=\(String(repeating: "ab", count: 31))abac"))) == 403)
        #expect(status(access.decide(head(path: "/", query: "key="))) == 403)
    }

    @Test func withoutTheCookieNothingButAssets() {
        #expect(status(access.decide(head(path: "/"))) == 401)
        #expect(status(access.decide(head())) == 401)
        #expect(status(access.decide(head(cookie: "\(WebAccess.cookieName)=\(secret.csrfToken)"))) == 401)
        #expect(status(access.decide(head(path: "/attachments/com.example.app/a.png"))) == 401)
        #expect(access.decide(head(path: "/assets/app.js")) == .allow)
        #expect(access.decide(head(cookie: "other=1; " + cookie)) == .allow)
    }

    @Test func onlyTheCentersOwnHostNames() {
        #expect(access.decide(head(host: "localhost:8730", cookie: cookie)) == .allow)
        #expect(access.decide(head(host: "[::1]:8730", cookie: cookie)) == .allow)
        // A DNS-rebinding page carries its own name; another port is another center.
        #expect(status(access.decide(head(host: "attacker.example:8730", cookie: cookie))) == 421)
        #expect(status(access.decide(head(host: "127.0.0.1:8731", cookie: cookie))) == 421)
        #expect(status(access.decide(head(host: nil, cookie: cookie))) == 421)
        #expect(status(access.decide(head(path: "/assets/app.js", host: "attacker.example:8730"))) == 421)
    }

    @Test func changesNeedTheCSRFTokenAndTheCentersOrigin() {
        let origin = "http://127.0.0.1:8730"
        #expect(access.decide(head("POST", "/api/respond", origin: origin, cookie: cookie, csrf: secret.csrfToken)) == .allow)
        #expect(status(access.decide(head("POST", "/api/respond", origin: origin, cookie: cookie))) == 403)
        #expect(status(access.decide(head("POST", "/api/respond", origin: origin, cookie: cookie, csrf: secret.sessionToken))) == 403)
        #expect(status(access.decide(head("POST", "/api/respond", cookie: cookie, csrf: secret.csrfToken))) == 403)
        #expect(status(access.decide(head("POST", "/api/respond", origin: "http://evil.example", cookie: cookie, csrf: secret.csrfToken))) == 403)
        #expect(status(access.decide(head("POST", "/api/respond", origin: "null", cookie: cookie, csrf: secret.csrfToken))) == 403)
    }

    @Test func webSocketsOnlyFromTheCentersPage() {
        #expect(access.decide(head(path: "/api/events", origin: "http://localhost:8730", cookie: cookie, upgrade: true)) == .allow)
        #expect(status(access.decide(head(path: "/api/events", cookie: cookie, upgrade: true))) == 403)
        #expect(status(access.decide(head(path: "/api/events", origin: "http://evil.example", cookie: cookie, upgrade: true))) == 403)
        #expect(status(access.decide(head(path: "/api/events", origin: "http://127.0.0.1:8730", upgrade: true))) == 401)
    }

    @Test func theSecretFileIsPrivateAndKept() throws {
        let directory = TemporaryDirectories.make(prefix: "web-secret-").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let first = try WebSecret.loadOrCreate(dataDirectory: directory)
        let mode = try FileManager.default.attributesOfItem(atPath: WebSecret.path(dataDirectory: directory))[.posixPermissions] as? Int
        #expect(mode == 0o600)
        #expect(try WebSecret.loadOrCreate(dataDirectory: directory).value == first.value)
        #expect(WebSecret.load(dataDirectory: directory)?.value == first.value)
        #expect(first.value.count == 64)
    }
}
