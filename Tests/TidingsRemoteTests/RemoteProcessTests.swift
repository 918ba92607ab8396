import Crypto
import Foundation
import Synchronization
import Testing
import TidingsCore
import TidingsDaemon
import TidingsDevice
import TidingsGateway
import TidingsIPC
import TidingsTesting
import TidingsTestSupport

@Suite("Remote notifications across processes", .serialized)
struct RemoteProcessTests {
    static let team = "TEAM123456"
    static let bundle = "com.example.tidings.sample"

    /// `kill -9` of the real daemon again and again while a provider pushes: every push the
    /// gateway accepted ends up in the delivered list, and none is printed twice.
    @Test func daemonKillNineBetweenReceiptAndAckLosesAndDuplicatesNothing() async throws {
        guard requireTool(FileManager.default.isExecutableFile(atPath: BuiltProducts.tidings), "the tidings executable") else { return }
        let dir = URL(fileURLWithPath: "/tmp/trk-\(UUID().uuidString.prefix(8))")
        let gatewayDir = dir.appendingPathComponent("gw"), deviceDir = dir.appendingPathComponent("dev")
        try FileManager.default.createDirectory(at: deviceDir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let registry = try GatewayRegistry(dataDirectory: gatewayDir)
        let (signingKey, keyRecord) = try registry.createKey(teamID: Self.team)
        _ = try registry.registerApp(bundleID: Self.bundle, teamID: Self.team, storagePolicy: .all)

        let gateway = try ChildProcess(BuiltProducts.tidings, ["gateway", "--data-dir", gatewayDir.path, "--listen", "127.0.0.1:0",
                                                           "--device-listen", "127.0.0.1:0", "--admin-listen", "off", "--device-rate-limit", "0",
                                                           "--log-level", "error", "--threads", "1"], directory: dir, name: "gateway")
        defer { gateway.stopAtEnd() }
        #expect(await eventually { gateway.port(after: "device channel on ") != nil && gateway.port(after: "provider API on ") != nil })
        let devicePort = try #require(gateway.port(after: "device channel on "))
        let providerPort = try #require(gateway.port(after: "provider API on "))
        let cert = gatewayDir.appendingPathComponent("tls/gateway-cert.pem").path

        // The daemon's device key, made here so the test can learn the app's token first.
        let deviceKey = P256.Signing.PrivateKey()
        try deviceKey.pemRepresentation.write(toFile: deviceDir.appendingPathComponent("device-key.pem").path, atomically: true, encoding: .utf8)
        let probe = try await DeviceConnection.connect(DeviceClientConfiguration(host: "127.0.0.1", port: devicePort, deviceKey: deviceKey, trustRootPaths: [cert]))
        let token = try await probe.requestToken(topic: Self.bundle, environment: .development).hex
        await probe.close()

        let socket = deviceDir.appendingPathComponent("daemon.sock").path
        func startDaemon() throws -> ChildProcess {
            try ChildProcess(BuiltProducts.tidings, ["daemon", "--data-dir", deviceDir.path, "--consent", "grant", "--development",
                                                 "--gateway", "127.0.0.1:\(devicePort)", "--gateway-cert", cert, "--log-level", "error"],
                            directory: dir, name: "daemon")
        }
        var daemon = try startDaemon()
        defer { daemon.stopAtEnd(signal: SIGKILL) }
        // The app (development mode: named by its hello) and the person's consent.
        let app = Mutex<AppSocketClient?>(nil)
        _ = await eventually {
            let c = try? await AppSocketClient.connect(path: socket)
            app.withLock { $0 = c }
            return c != nil
        }
        let client = try #require(app.withLock { $0 })
        guard case .hello = try await client.call(.hello(AppHello(bundleIdentifier: Self.bundle, state: .background))) else {
            Issue.record("the daemon refused the app")
            return
        }
        #expect(try await client.call(.requestAuthorization(AuthorizationOptionsValue(rawValue: 7))) == .authorization(granted: true))
        client.close()

        var configuration = APNsClientConfiguration(host: "127.0.0.1", port: providerPort, trustRootPaths: [cert])
        configuration.authority = "127.0.0.1"
        let connection = try await APNsConnection.connect(configuration)
        let bearer = "bearer " + (try signingKey.token(keyID: keyRecord.keyID, teamID: Self.team))
        let accepted = Mutex<[String: String]>([:])  // apns-id → body text
        let load = Task {
            var n = 0
            while !Task.isCancelled {
                let id = UUID().uuidString.lowercased()
                let text = "crash-push-\(n)-end"
                n += 1
                let request = APNsRequest(deviceToken: token, headers: [("authorization", bearer), ("apns-topic", Self.bundle), ("apns-id", id)],
                                          body: Array(#"{"aps":{"alert":"\#(text)"}}"#.utf8))
                guard let response = try? await connection.send(request) else { return }
                if response.status == 200 { accepted.withLock { $0[id] = text } }
            }
        }
        var outputs: [ChildProcess] = [daemon]
        for _ in 0..<4 {
            // Let pushes flow, then kill -9 wherever the daemon is (receipt, store, ack, present).
            let before = accepted.withLock { $0.count }
            let current = daemon
            _ = await eventually { accepted.withLock { $0.count } >= before + 25 && current.output.contains("crash-push-") }
            await daemon.stop(signal: SIGKILL)
            daemon = try startDaemon()
            outputs.append(daemon)
        }
        load.cancel()
        _ = await load.value
        await connection.close()
        let all = accepted.withLock { $0 }
        #expect(all.count >= 50)

        // Everything accepted is delivered: in the delivered list, by apns-id.
        let delivered = Mutex(Set<String>())
        let lastFailure = Mutex<String?>(nil)  // why the last query got no list, for the failure message
        let complete = await eventually(within: 60) {
            let admin: AdminClient
            do { admin = try await AdminClient.connect(socketPath: socket) } catch {
                lastFailure.withLock { $0 = "connect: \(error)" }
                return false
            }
            defer { admin.close() }
            let reply: AdminReply
            do { reply = try await admin.send(.delivered(bundleIdentifier: Self.bundle)) } catch {
                lastFailure.withLock { $0 = "query: \(error)" }
                return false
            }
            guard case .notifications(let list) = reply else {
                lastFailure.withLock { $0 = "reply: \(reply)" }
                return false
            }
            let ids = Set(list.map(\.notification.request.identifier))
            delivered.withLock { $0 = ids }
            return Set(all.keys).isSubset(of: ids)
        }
        #expect(complete, """
            \(Set(all.keys).subtracting(delivered.withLock { $0 }).count) of \(all.count) accepted pushes never delivered; \
            last query: \(lastFailure.withLock { $0 } ?? "a list"); the last daemon is \(daemon.state), \
            its output ends: \(daemon.output.suffix(1_500))
            """)
        await daemon.stop()
        // And none was shown twice, across every daemon run.
        let printed = outputs.map(\.output).joined()
        var counts: [String: Int] = [:]
        for line in printed.split(separator: "\n") where line.contains("crash-push-") {
            if let r = line.range(of: "crash-push-") { counts[String(line[r.lowerBound...]), default: 0] += 1 }
        }
        let twice = counts.filter { $0.value > 1 }
        #expect(twice.isEmpty, "shown more than once: \(twice.keys.sorted().prefix(5))")
        print("daemon crash test: \(all.count) pushes accepted across 4 kill -9 of the daemon; \(counts.count) printed, none twice")
    }

    /// `tidings serve` + the sample app (registers, prints its token) + aioapns: the push is
    /// presented, `tidings notifications respond` taps it, the app's delegate gets the
    /// response, and `tidings status` shows presented and answered.
    @Test func serveSampleAppAndAioapns() async throws {
        guard requireTool(FileManager.default.isExecutableFile(atPath: BuiltProducts.sampleApp), "the SampleApp executable") else { return }
        guard let python = BuiltProducts.python,
              requireTool((try? await Self.run(python, ["-c", "import aioapns"]).status) == 0, "python aioapns") else { return }
        let dir = URL(fileURLWithPath: "/tmp/trs-\(UUID().uuidString.prefix(8))")
        let data = dir.appendingPathComponent("data")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let p8 = dir.appendingPathComponent("AuthKey.p8").path
        let keyID: String
        do {
            let registry = try GatewayRegistry(dataDirectory: data)
            let (signingKey, record) = try registry.createKey(teamID: Self.team)
            try signingKey.pem.write(toFile: p8, atomically: true, encoding: .utf8)
            keyID = record.keyID
            _ = try registry.registerApp(bundleID: Self.bundle, teamID: Self.team, storagePolicy: .all)
        }
        let serve = try ChildProcess(BuiltProducts.tidings, ["serve", "--data-dir", data.path, "--consent", "grant", "--listen", "127.0.0.1:0",
                                                         "--device-listen", "127.0.0.1:0", "--admin-listen", "off"], directory: dir, name: "serve")
        defer { serve.stopAtEnd() }
        #expect(await eventually { serve.port(after: "provider API on ") != nil })
        let providerPort = try #require(serve.port(after: "provider API on "))
        let (app, token) = try await Self.startSampleAppForRemote(bundle: Self.bundle, appDirectory: dir, data: data)
        defer { app.stopAtEnd() }
        #expect(token.count == 64)

        let cert = data.appendingPathComponent("tls/gateway-cert.pem").path
        let sent = try await Self.run(python, [BuiltProducts.gatewayClients.appendingPathComponent("remote_push.py").path, "127.0.0.1", String(providerPort),
                                               cert, p8, keyID, Self.team, Self.bundle, token])
        #expect(sent.status == 0, "\(sent.output)")
        let result = try JSONValue(parsing: Array(sent.output.split(separator: "\n").last.map(String.init)?.utf8 ?? "".utf8))
        #expect(result["status"]?.stringValue == "200")
        let apnsID = try #require(result["apns_id"]?.stringValue)

        #expect(await eventually { serve.output.contains("tidings notifications respond \(apnsID)") }, "\(serve.output)")
        let respond = try await runTidings(["notifications", "respond", apnsID, "--app", Self.bundle, "--data-dir", data.path])
        #expect(respond.status == 0, "\(respond.output)")
        #expect(await eventually { app.output.contains("SampleApp: response \(apnsID) action=tap remote") }, "\(app.output)")
        #expect(await eventually {
            let status = (try? await runTidings(["status", apnsID, "--data-dir", data.path]))?.output ?? ""
            return status.contains("presented") && status.contains("answered")
        })

        // The app stops; a silent push launches it in the background (the daemon's launcher,
        // output into serve's), and its UIApplication delegate gets the payload.
        await app.stop()
        let signing = try ProviderSigningKey(p8File: p8)
        var configuration = APNsClientConfiguration(host: "127.0.0.1", port: providerPort, trustRootPaths: [cert])
        configuration.authority = "127.0.0.1"
        let connection = try await APNsConnection.connect(configuration)
        let silent = try await connection.send(APNsRequest(deviceToken: token, headers: [
            ("authorization", "bearer " + (try signing.token(keyID: keyID, teamID: Self.team))), ("apns-topic", Self.bundle),
            ("apns-push-type", "background"), ("apns-priority", "5"),
        ], body: Array(#"{"aps":{"content-available":1},"feed":"new"}"#.utf8)))
        await connection.close()
        #expect(silent.status == 200)
        #expect(await eventually { serve.output.contains("SampleApp: silent push keys=aps,feed") }, "\(serve.output)")
        // Stop the launched app by its pid.
        if let line = serve.output.split(separator: "\n").last(where: { $0.hasPrefix("SampleApp: started pid ") }),
           let pid = Int32(line.dropFirst("SampleApp: started pid ".count)) {
            kill(pid, SIGTERM)
        } else {
            Issue.record("the launched app did not say its pid")
        }
        // SIGTERM: one graceful shutdown for the daemon and the gateway, and a clean exit.
        await serve.stop()
        #expect(serve.process.terminationReason == .exit && serve.process.terminationStatus == 0, "\(serve.output)")
    }

    @Test func daemonRefusesABadGatewayAddress() async throws {
        guard requireTool(FileManager.default.isExecutableFile(atPath: BuiltProducts.tidings), "the tidings executable") else { return }
        let dir = "/tmp/trg-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let bad = try await runTidings(["daemon", "--data-dir", dir, "--consent", "deny", "--gateway", "no-port-here"])
        #expect(bad.status != 0)
        #expect(bad.output.contains("--gateway takes HOST:PORT"), "\(bad.output)")
        let badList = try await runTidings(["daemon", "--data-dir", dir, "--consent", "deny", "--gateway", "127.0.0.1:2196,"])
        #expect(badList.status != 0)
        #expect(badList.output.contains("or several separated by commas"), "\(badList.output)")
        #expect(GatewayLinkConfiguration(address: "[::1]:2196", trustRootPaths: [])?.host == "::1")
        #expect(GatewayLinkConfiguration(address: "127.0.0.1:99999", trustRootPaths: []) == nil)
    }

    /// Installs the sample app from a manifest written to `appDirectory` (with `extensions`,
    /// a JSON array, if given) into the daemon of `data`, and starts it with `--remote`:
    /// the running app and the device token it printed.
    static func startSampleAppForRemote(bundle: String, extensions: String? = nil, appDirectory: URL, data: URL) async throws -> (ChildProcess, String) {
        let manifest = appDirectory.appendingPathComponent("manifest.json").path
        try """
            {"bundleIdentifier": "\(bundle)", "displayName": "Tidings Sample", "executable": "\(BuiltProducts.sampleApp)", "arguments": ["--listen"]\(extensions.map { ", \"extensions\": \($0)" } ?? "")}
            """.write(toFile: manifest, atomically: true, encoding: .utf8)
        let install = try await runTidings(["apps", "install", manifest, "--data-dir", data.path])
        #expect(install.status == 0, "\(install.output)")
        let app = try ChildProcess(BuiltProducts.sampleApp, ["--remote"], environment: ["TIDINGS_SOCKET": data.appendingPathComponent("daemon.sock").path],
                                   directory: appDirectory, name: "app")
        #expect(await eventually { app.value(after: "SampleApp: token ") != nil }, "\(app.output)")
        let token = app.value(after: "SampleApp: token ")
        if token == nil { await app.stop() }
        return (app, try #require(token, "the sample app printed no device token"))
    }

    static func run(_ executable: String, _ arguments: [String]) async throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let pid = process.processIdentifier
        let killer = Task {
            try await Task.sleep(for: .seconds(60))
            kill(pid, SIGKILL)
        }
        let data = await offThePool { readToEnd(pipe.fileHandleForReading) }
        await offThePool { process.waitUntilExit() }
        killer.cancel()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}
