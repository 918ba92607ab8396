import Crypto
import Foundation
import Testing
import TidingsCore
import TidingsDevice
import TidingsGateway
import TidingsTestSupport

/// Real APNs clients (aioapns, httpx + PyJWT, curl) against the gateway on loopback.
/// CI installs them (.ci/run); elsewhere a missing tool skips with a message.
@Suite("Third-party clients", .serialized)
struct ThirdPartyClientTests {
    static var scripts: URL { BuiltProducts.gatewayClients }
    static var python: String? { BuiltProducts.python }

    struct Run { var status: Int32; var stdout: String; var stderr: String }

    static func run(_ executable: String, _ arguments: [String], timeout: Duration = .seconds(60)) async throws -> Run {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let pid = process.processIdentifier
        let killer = Task {
            try await Task.sleep(for: timeout)
            kill(pid, SIGKILL)
        }
        let stdout = await Task.detached { out.fileHandleForReading.readDataToEndOfFile() }.value
        let stderr = await Task.detached { err.fileHandleForReading.readDataToEndOfFile() }.value
        process.waitUntilExit()
        killer.cancel()
        return Run(status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self), stderr: String(decoding: stderr, as: UTF8.self))
    }

    static func pythonHas(_ module: String) async -> Bool {
        guard let python else { return false }
        return (try? await run(python, ["-c", "import \(module)"]).status) == 0
    }

    func lines(_ text: String) -> [String: JSONValue] {
        var byCase: [String: JSONValue] = [:]
        for line in text.split(separator: "\n") {
            if let v = try? JSONValue(parsing: Array(line.utf8)), let c = v["case"]?.stringValue { byCase[c] = v }
        }
        return byCase
    }

    func setUp() async throws -> (GatewayHarness, DeviceConnection, String, String) {
        let h = try await GatewayHarness.start()  // the test clock starts at the real time: the clients sign with it
        let device = try await h.device()
        let token = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development).hex
        let p8 = h.directory.appendingPathComponent("AuthKey.p8").path
        try (h.teamKey.pemRepresentation + "\n").write(toFile: p8, atomically: true, encoding: .utf8)
        return (h, device, token, p8)
    }

    @Test func aioapnsWithoutALPN() async throws {
        guard requireTool(await Self.pythonHas("aioapns"), "python aioapns") else { return }
        let (h, device, token, p8) = try await setUp()
        let collector = await PushCollector.start(device)
        let r = try await Self.run(Self.python!, [Self.scripts.appendingPathComponent("apns_clients.py").path, "aioapns", "127.0.0.1",
                                                  String(h.providerPort), h.certificatePath, p8, GatewayHarness.keyID, GatewayHarness.teamID,
                                                  GatewayHarness.bundleID, token])
        #expect(r.status == 0, "\(r.stderr)")
        let results = lines(r.stdout)
        #expect(results["success"]?["status"] == "200")
        #expect(results["success"]?["apns_id"] == results["success"]?["sent_id"], "aioapns matches responses by apns-id")
        #expect(results["collapse"]?["status"] == "200")
        #expect(results["bad_token"]?["status"] == "400")
        #expect(results["bad_token"]?["reason"] == "BadDeviceToken")
        #expect(results["too_large"]?["status"] == "413")
        #expect(results["too_large"]?["reason"] == "PayloadTooLarge")
        let got = await collector.wait(for: 2)
        #expect(got.count == 2)
        #expect(try got.first?.parsedPayload().notificationContent().title == "aioapns")
        #expect(got.last?.collapseID == "c1")
        #expect(got.last?.priority == .considerPower)
        await device.close()
        await h.stop()
    }

    @Test func httpxWithPyJWT() async throws {
        guard requireTool(await Self.pythonHas("httpx, h2, jwt"), "python httpx[http2] and PyJWT") else { return }
        let (h, device, token, p8) = try await setUp()
        let r = try await Self.run(Self.python!, [Self.scripts.appendingPathComponent("apns_clients.py").path, "httpx", "127.0.0.1",
                                                  String(h.providerPort), h.certificatePath, p8, GatewayHarness.keyID, GatewayHarness.teamID,
                                                  GatewayHarness.bundleID, token])
        #expect(r.status == 0, "\(r.stderr)")
        let results = lines(r.stdout)
        #expect(results["success"]?["status"] == .integer(200))
        #expect(results["success"]?["http_version"] == "HTTP/2")
        #expect(results["success"]?["apns_id"] == results["sent_id"]?["apns_id"], "upper-case apns-id echoed byte for byte")
        #expect(results["bad_token"]?["reason"] == "BadDeviceToken")
        #expect(results["empty_topic"]?["reason"] == "BadTopic")
        #expect(results["bad_priority"]?["reason"] == "BadPriority")
        #expect(results["payload_empty"]?["reason"] == "PayloadEmpty")
        #expect(results["bad_path"]?["status"] == .integer(404))
        #expect(results["bad_path"]?["reason"] == "BadPath")
        #expect(results["method"]?["status"] == .integer(405))
        #expect(results["method"]?["reason"] == "MethodNotAllowed")
        await device.close()
        await h.stop()
    }

    @Test func curlHTTP2() async throws {
        let curl = "/usr/bin/curl"
        guard requireTool(FileManager.default.isExecutableFile(atPath: curl), "curl") else { return }
        let (h, device, token, _) = try await setUp()
        let bearer = try h.bearer(issuedAt: Int64(Date().timeIntervalSince1970))
        let url = "https://127.0.0.1:\(h.providerPort)/3/device/\(token)"
        let ok = try await Self.run(curl, ["-s", "--http2", "--cacert", h.certificatePath, "-D", "-", "-o", "/dev/null",
                                           "-w", "%{http_version} %{http_code}", "-H", "authorization: \(bearer)",
                                           "-H", "apns-topic: \(GatewayHarness.bundleID)", "-H", "apns-push-type: alert",
                                           "-H", "apns-id: 123e4567-e89b-12d3-a456-4266554400a0",
                                           "--data", #"{"aps":{"alert":"curl"}}"#, url])
        #expect(ok.stdout.hasSuffix("2 200"), "\(ok.stdout) \(ok.stderr)")
        #expect(ok.stdout.contains("apns-id: 123e4567-e89b-12d3-a456-4266554400a0"))
        let bad = try await Self.run(curl, ["-s", "--http2", "--cacert", h.certificatePath, "-w", " %{http_code}",
                                            "-H", "authorization: \(bearer)", "-H", "apns-topic: \(GatewayHarness.bundleID)",
                                            "-H", "apns-expiration: soon", "--data", "{}", url])
        #expect(bad.stdout == #"{"reason":"BadExpirationDate"} 400"#)
        await device.close()
        await h.stop()
    }
}
