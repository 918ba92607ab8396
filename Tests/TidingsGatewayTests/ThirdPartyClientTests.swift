import Crypto
import Foundation
import Testing
import TidingsCore
import TidingsDevice
import TidingsGateway
import TidingsStorage
import TidingsTestSupport
import TidingsTesting

/// Real APNs clients (aioapns, httpx + PyJWT, curl; pyapns-client, apns2, gobiko-apns,
/// kalyke-apns) against the gateway on loopback, each pointed at it as docs/clients.md says.
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
        // Read and wait on threads of their own, not on the cooperative pool (see offThePool).
        async let stdoutData = offThePool { readToEnd(out.fileHandleForReading) }
        async let stderrData = offThePool { readToEnd(err.fileHandleForReading) }
        let (stdout, stderr) = await (stdoutData, stderrData)
        await offThePool { process.waitUntilExit() }
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

    // MARK: PyPI clients with token authentication (Tests/GatewayClients/token_clients.py)

    /// Runs one client of token_clients.py against a fresh gateway with a connected device;
    /// returns its results by case and the pushes the device received (`expected` of them).
    func tokenClient(_ client: String, module: String, expectedPushes expected: Int) async throws -> (results: [String: JSONValue], pushes: [DevicePush])? {
        guard requireTool(await Self.pythonHas(module), "python \(client) (import \(module))") else { return nil }
        let (h, device, token, p8) = try await setUp()
        let collector = await PushCollector.start(device)
        let r = try await Self.run(Self.python!, [Self.scripts.appendingPathComponent("token_clients.py").path, client, "127.0.0.1",
                                                  String(h.providerPort), h.certificatePath, p8, GatewayHarness.keyID, GatewayHarness.teamID,
                                                  GatewayHarness.bundleID, token])
        #expect(r.status == 0, "\(r.stderr)")
        let pushes = await collector.wait(for: expected)
        #expect(pushes.count == expected, "\(r.stdout)")
        await device.close()
        await h.stop()
        return (lines(r.stdout), pushes)
    }

    /// The error cases every client surfaces as its exception for Apple's reason.
    func expectReasons(_ results: [String: JSONValue], _ expected: [String: String], sourceLocation: SourceLocation = #_sourceLocation) {
        for (name, reason) in expected.sorted(by: { $0.key < $1.key }) {
            #expect(results[name]?["reason"]?.stringValue == reason, "\(name): \(String(describing: results[name]))", sourceLocation: sourceLocation)
        }
    }

    /// pyapns-client signs `iat` = `time.time()` (a fraction): 403 InvalidProviderToken on every push before.
    @Test func pyapnsClient() async throws {
        guard let (results, pushes) = try await tokenClient("pyapns-client", module: "pyapns_client", expectedPushes: 1) else { return }
        #expect(results["success"]?["status"] == .integer(200), "\(results)")
        expectReasons(results, ["bad_token": "BadDeviceToken", "too_large": "PayloadTooLarge", "bad_topic": "TopicDisallowed",
                                "bad_collapse_id": "BadCollapseId"])
        // pyapns-client exposes the status of each error.
        #expect(results["bad_token"]?["status"] == .integer(400))
        #expect(results["too_large"]?["status"] == .integer(413))
        #expect(results["bad_topic"]?["status"] == .integer(400))
        #expect(try pushes.first?.parsedPayload().notificationContent().title == "pyapns-client")
    }

    /// apns2 (apns2-up): fractional `iat`, hyper's HTTP/2, and a batch over one connection as
    /// many streams at once as the gateway's SETTINGS allow.
    @Test func apns2Up() async throws {
        guard let (results, pushes) = try await tokenClient("apns2", module: "apns2.client", expectedPushes: 2) else { return }
        #expect(results["success"]?["status"] == .integer(200), "\(results)")
        expectReasons(results, ["bad_token": "BadDeviceToken", "too_large": "PayloadTooLarge", "bad_topic": "TopicDisallowed",
                                "bad_collapse_id": "BadCollapseId"])
        let batch = results["batch"]?["results"]?.objectValue ?? [:]
        #expect(batch.count == 2, "\(results)")
        #expect(batch["cd" + String(repeating: "cd", count: 31)] == "BadDeviceToken")
        #expect(batch.values.filter { $0 == "Success" }.count == 1)
        #expect(try pushes.first?.parsedPayload().notificationContent().title == "apns2")
        #expect(pushes.last?.priority == .considerPower, "the batch was sent with priority 5")
    }

    /// gobiko-apns: fractional `iat`; it refuses a payload over 4096 bytes itself (no request).
    @Test func gobikoAPNs() async throws {
        guard let (results, pushes) = try await tokenClient("gobiko-apns", module: "gobiko.apns", expectedPushes: 1) else { return }
        #expect(results["success"]?["status"] == .integer(200), "\(results)")
        expectReasons(results, ["bad_token": "BadDeviceToken", "too_large": "PayloadTooLarge", "bad_topic": "TopicDisallowed",
                                "bad_priority": "BadPriority", "bad_expiration": "BadExpirationDate"])
        #expect(try pushes.first?.parsedPayload().notificationContent().title == "gobiko-apns")
    }

    /// kalyke-apns: `iat` as a string of digits, httpx2, one connection per push.
    @Test func kalykeAPNs() async throws {
        guard let (results, pushes) = try await tokenClient("kalyke-apns", module: "kalyke", expectedPushes: 1) else { return }
        #expect(results["success"]?["status"] == .integer(200), "\(results)")
        #expect(results["success"]?["apns_id"] == results["sent_id"]?["apns_id"])
        expectReasons(results, ["bad_token": "BadDeviceToken", "too_large": "PayloadTooLarge", "bad_topic": "TopicDisallowed",
                                "bad_collapse_id": "BadCollapseId"])
        #expect(try pushes.first?.parsedPayload().notificationContent().title == "kalyke-apns")
        #expect(pushes.first?.apnsID == results["sent_id"]?["apns_id"]?.stringValue)
    }

    /// Validly signed tokens with `iat` at Int64's ends and beyond, over the wire: each is
    /// answered (−2⁶³ aborted the gateway), and the gateway then serves a push on the same
    /// connection, with `iat` as pyapns-client writes it.
    @Test func extremeIatIsAnsweredAndTheGatewayServesOn() async throws {
        let h = try await GatewayHarness.start()
        let device = try await h.device()
        let token = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development).hex
        let collector = await PushCollector.start(device)
        let connection = try await h.connect()
        func bearer(_ iat: String) throws -> String {
            "bearer " + (try ProviderToken.sign(keyID: GatewayHarness.keyID, teamID: GatewayHarness.teamID, issuedAtJSON: iat, key: h.teamKey))
        }
        for (iat, reason) in [("-9223372036854775808", "ExpiredProviderToken"), ("-9e18", "ExpiredProviderToken"), ("-1e300", "ExpiredProviderToken"),
                              ("9223372036854775807", "InvalidProviderToken"), ("9e18", "InvalidProviderToken"), ("1e300", "InvalidProviderToken")] {
            let response = try await connection.send(h.request(token: token, authorization: try bearer(iat)))
            #expect(response.status == 403, "iat \(iat)")
            #expect(response.reason == reason, "iat \(iat)")
        }
        let ok = try await connection.send(h.request(token: token, authorization: try bearer("\(h.nowSeconds).4812345"),
                                                     body: #"{"aps":{"alert":"fractional iat"}}"#))
        #expect(ok.status == 200)
        #expect(try await collector.wait(for: 1).first?.parsedPayload().notificationContent().body == "fractional iat")
        await device.close()
        await h.stop()
    }

    // MARK: Certificate-based clients (mutual TLS)

    /// aapns pins h2 < 4, which aioapns 4 cannot share: it has its own venv (.ci/run),
    /// `TIDINGS_TEST_PYTHON_AAPNS` or `.ci-work/venv-aapns`, with Python cryptography.
    static var aapnsPython: String? {
        var candidates: [String] = []
        if let p = ProcessInfo.processInfo.environment["TIDINGS_TEST_PYTHON_AAPNS"] { candidates.append(p) }
        candidates.append(BuiltProducts.packageRoot.appendingPathComponent(".ci-work/venv-aapns/bin/python").path)
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    static func aapnsAvailable() async -> Bool {
        guard let python = aapnsPython else { return false }
        return (try? await run(python, ["-c", "import aapns.api, cryptography"]).status) == 0
    }

    /// `tidings certs create` for the harness's app in its data directory: the PEM (certificate
    /// and key) and the `.p12` paths.
    func createCertificate(_ h: GatewayHarness, environment: String = "development", password: String = "") async throws -> (pem: String, p12: String) {
        let output = h.directory.appendingPathComponent("certs-\(UUID().uuidString.prefix(8))")
        let r = try await Self.run(BuiltProducts.tidings, ["certs", "create", "--app", GatewayHarness.bundleID, "--team", GatewayHarness.teamID,
                                                           "--environment", environment, "--output", output.path, "--password", password,
                                                           "--data-dir", h.directory.path])
        #expect(r.status == 0, "\(r.stdout) \(r.stderr)")
        #expect(r.stdout.contains("subject: C=US,O=\(GatewayHarness.teamID),OU=\(GatewayHarness.teamID)"), "\(r.stdout)")
        let name = "\(GatewayHarness.bundleID)-\(environment)"
        return (output.appendingPathComponent(name + ".pem").path, output.appendingPathComponent(name + ".p12").path)
    }

    /// aapns (certificates only) with a certificate from `tidings certs create`: a push without
    /// `apns-topic`, a VoIP push to the certificate's `.voip` topic, a bad device token, and the
    /// team's other app (not in the certificate); Python cryptography reads the `.p12`.
    @Test func aapnsWithCertificate() async throws {
        guard requireTool(await Self.aapnsAvailable(), "python aapns and cryptography (.ci-work/venv-aapns)") else { return }
        let h = try await GatewayHarness.start(store: .sqlite)
        let now = EpochMilliseconds(h.clock.now.timeIntervalSince1970 * 1000)
        try await h.gateway.register(app: GatewayAppRecord(bundleID: "com.example.other", teamID: GatewayHarness.teamID,
                                                           storagePolicy: .apns, createdAt: now))
        let device = try await h.device()
        let token = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development).hex
        let collector = await PushCollector.start(device)
        let (pem, p12) = try await createCertificate(h, password: "pass word")
        let r = try await Self.run(Self.aapnsPython!, [Self.scripts.appendingPathComponent("certificate_clients.py").path, "aapns", "127.0.0.1",
                                                  String(h.providerPort), h.certificatePath, pem, GatewayHarness.bundleID, token,
                                                  "com.example.other"])
        #expect(r.status == 0, "\(r.stderr)")
        let results = lines(r.stdout)
        #expect(results["success"]?["status"] == .integer(200), "\(r.stdout)")
        #expect(results["voip"]?["status"] == .integer(200), "\(r.stdout)")
        #expect(results["bad_token"]?["reason"] == "BadDeviceToken")
        #expect(results["other_topic"]?["reason"] == "TopicDisallowed")
        let got = await collector.wait(for: 2)
        #expect(got.count == 2)
        #expect(got.first?.topic == GatewayHarness.bundleID)
        #expect(try got.first?.parsedPayload().notificationContent().body == "by certificate")
        #expect(got.last?.topic == GatewayHarness.bundleID + ".voip")

        let p = try await Self.run(Self.aapnsPython!, [Self.scripts.appendingPathComponent("certificate_clients.py").path, "pkcs12", p12, "pass word"])
        #expect(p.status == 0, "\(p.stderr)")
        let read = lines(p.stdout)
        #expect(read["pkcs12"]?["key_size"] == .integer(2048))
        #expect(read["pkcs12"]?["uid"] == .string(GatewayHarness.bundleID))
        #expect(read["pkcs12"]?["matches"] == .bool(true))
        #expect(read["wrong_password"]?["refused"] == .bool(true))
        await device.close()
        await h.stop()
    }

    /// aapns with a development certificate against a production gateway: `BadCertificateEnvironment`.
    @Test func aapnsCertificateForTheOtherEnvironment() async throws {
        guard requireTool(await Self.aapnsAvailable(), "python aapns and cryptography (.ci-work/venv-aapns)") else { return }
        let h = try await GatewayHarness.start(store: .sqlite, configure: { $0.environment = .production })
        let device = try await h.device()
        let token = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .production).hex
        let (pem, _) = try await createCertificate(h, environment: "development")
        let r = try await Self.run(Self.aapnsPython!, [Self.scripts.appendingPathComponent("certificate_clients.py").path, "aapns-once", "127.0.0.1",
                                                  String(h.providerPort), h.certificatePath, pem, token])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(lines(r.stdout)["once"]?["reason"] == "BadCertificateEnvironment", "\(r.stdout)")
        await device.close()
        await h.stop()
    }

    /// curl with `--cert`/`--key` and no `authorization`: 200 without `apns-topic`, `TopicDisallowed`
    /// for a topic the certificate does not name, `BadCertificate` for another CA's certificate.
    @Test func curlWithClientCertificate() async throws {
        let curl = "/usr/bin/curl"
        guard requireTool(FileManager.default.isExecutableFile(atPath: curl), "curl") else { return }
        let h = try await GatewayHarness.start(store: .sqlite)
        let device = try await h.device()
        let token = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development).hex
        let (pem, _) = try await createCertificate(h)
        let url = "https://127.0.0.1:\(h.providerPort)/3/device/\(token)"
        func post(_ certificate: String, _ headers: [String] = []) async throws -> Run {
            try await Self.run(curl, ["-s", "--http2", "--cacert", h.certificatePath, "--cert", certificate, "--key", certificate,
                                      "-w", " %{http_code}"] + headers.flatMap { ["-H", $0] } + ["--data", #"{"aps":{"alert":"curl"}}"#, url])
        }
        let ok = try await post(pem)
        #expect(ok.stdout == " 200", "\(ok.stdout) \(ok.stderr)")
        let other = try await post(pem, ["apns-topic: com.example.other"])
        #expect(other.stdout == #"{"reason":"TopicDisallowed"} 400"#)

        let elsewhere = TemporaryDirectories.make(prefix: "tidings-ca-")
        defer { try? FileManager.default.removeItem(at: elsewhere) }
        let foreign = try ProviderCertificateAuthority.ensure(in: elsewhere).authority
            .issue(bundleID: GatewayHarness.bundleID, teamID: GatewayHarness.teamID, environment: .development)
        let foreignPath = elsewhere.appendingPathComponent("foreign.pem").path
        try foreign.pem().write(toFile: foreignPath, atomically: true, encoding: .utf8)
        let refused = try await post(foreignPath)
        #expect(refused.stdout == #"{"reason":"BadCertificate"} 403"#)
        await device.close()
        await h.stop()
    }
}
