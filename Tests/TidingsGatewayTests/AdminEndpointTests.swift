import Foundation
import NIOCore
import Testing
import TidingsCore
@testable import TidingsGateway

/// The admin endpoint's bounds (docs/security.md, "Admin endpoint"): a bearer token off
/// loopback, a request deadline that also ends idle keep-alive connections, a connection cap
/// and a request size cap. Deadlines are tiny configured intervals.
@Suite("Admin endpoint", .serialized)
struct AdminEndpointTests {
    @Test func aTokenIsRequiredOnEveryAddressButLoopback() throws {
        for loopback in ["127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"] {
            #expect(!AdminToken.required(listeningOn: try SocketAddress(ipAddress: loopback, port: 2198)), "\(loopback)")
        }
        for other in ["0.0.0.0", "192.168.1.5", "10.0.0.1", "::", "fe80::1", "2001:db8::1", "::ffff:10.0.0.1"] {
            #expect(AdminToken.required(listeningOn: try SocketAddress(ipAddress: other, port: 2198)), "\(other)")
        }
    }

    @Test func withATokenEveryRequestMustCarryIt() async throws {
        let h = try await GatewayHarness.start { $0.adminTokenRequired = true }
        let port = try #require(h.addresses.admin?.port)
        let path = try #require(h.addresses.adminTokenPath)
        #expect(path == h.directory.appendingPathComponent("admin-token").path)
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let token = try String(contentsOfFile: path, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(token.count == 64)

        for path in ["/healthz", "/metrics", "/status/x"] {
            #expect(try await adminGet(port: port, path: path).status == 401, "\(path) without a token")
            #expect(try await adminGet(port: port, path: path, authorization: "bearer " + String(repeating: "0", count: 64)).status == 401)
        }
        #expect(try await adminGet(port: port, path: "/healthz", authorization: "Bearer \(token)").status == 200)
        #expect(try await adminGet(port: port, path: "/metrics", authorization: "bearer \(token)").status == 200)
        await h.stop()

        // Made once: a restart on the same directory keeps it.
        let again = try await GatewayHarness.start(directory: h.directory) { $0.adminTokenRequired = true }
        #expect(try String(contentsOfFile: path, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines) == token)
        #expect(try await adminGet(port: again.addresses.admin!.port!, path: "/healthz", authorization: "bearer \(token)").status == 200)
        await again.stop()
    }

    @Test func onLoopbackNoTokenIsMadeOrNeeded() async throws {
        let h = try await GatewayHarness.start()
        #expect(h.addresses.adminTokenPath == nil)
        #expect(!FileManager.default.fileExists(atPath: h.directory.appendingPathComponent("admin-token").path))
        #expect(try await adminGet(port: h.addresses.admin!.port!, path: "/healthz").status == 200)
        await h.stop()
    }

    @Test func aSlowRequestAndAnIdleKeepAliveConnectionAreClosed() async throws {
        let h = try await GatewayHarness.start { $0.adminRequestTimeout = .seconds(1) }
        let port = h.addresses.admin!.port!
        // Half a request head, never finished.
        let slow = try await RawClient.connect(port: port)
        try await slow.send("GET /healthz HTTP/1.1\r\nhost: x\r\n")
        #expect(await slow.closed(within: .seconds(5)))
        #expect(slow.bytes.isEmpty)
        // A request in time is answered; the connection, kept alive and then idle, is closed.
        let idle = try await RawClient.connect(port: port)
        try await idle.send("GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        #expect(await idle.wait(for: #"{"status":"ok"}"#))
        // Kept alive: its second request, within the new deadline, is answered too.
        try await idle.send("GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        #expect(await idle.wait(for: #"{"status":"ok"}HTTP/1.1 200 OK"#), "a second response")
        #expect(await idle.closed(within: .seconds(5)))
        #expect(h.metricsText.contains(#"tidings_gateway_connections_closed_early_total{listener="admin",reason="request_timeout"} 2"#))
        await h.stop()
    }

    @Test func connectionsAndRequestSizeAreCapped() async throws {
        let h = try await GatewayHarness.start { c in
            c.maximumAdminConnections = 2
            c.adminMaximumRequestBytes = 1024
        }
        let port = h.addresses.admin!.port!
        let open = [try await RawClient.connect(port: port), try await RawClient.connect(port: port)]
        let refused = try await RawClient.connect(port: port)
        #expect(await refused.closed(within: .seconds(2)))
        #expect(open.allSatisfy { $0.isOpen })
        #expect(h.metricsText.contains(#"tidings_gateway_connections_refused_total{listener="admin",reason="total_cap"} 1"#))
        // At the size cap a request is answered; one byte past it the connection is closed.
        let head = "GET /healthz HTTP/1.1\r\nhost: x\r\nx-pad: "
        let atCap = head + String(repeating: "a", count: 1024 - head.utf8.count - 4) + "\r\n\r\n"
        #expect(atCap.utf8.count == 1024)
        try await open[0].send(atCap)
        #expect(await open[0].wait(for: #"{"status":"ok"}"#))
        let pastCap = head + String(repeating: "a", count: 1025 - head.utf8.count - 4) + "\r\n\r\n"
        try await open[1].send(pastCap)
        #expect(await open[1].closed(within: .seconds(2)))
        #expect(open[1].bytes.isEmpty)
        for c in open { await c.close() }
        await h.stop()
    }
}

/// One admin GET on its own connection (`connection: close`): the status code and body.
func adminGet(port: Int, path: String, authorization: String? = nil) async throws -> (status: Int, body: String) {
    let client = try await RawClient.connect(port: port)
    var request = "GET \(path) HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n"
    if let authorization { request += "authorization: \(authorization)\r\n" }
    try await client.send(request + "\r\n")
    _ = await client.closed(within: .seconds(5))
    let text = client.text
    let status = Int(text.split(separator: " ").dropFirst().first ?? "") ?? 0
    return (status, text.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n"))
}
