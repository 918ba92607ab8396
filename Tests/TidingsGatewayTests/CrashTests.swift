import Crypto
import Foundation
import Synchronization
import Testing
import TidingsTestSupport
import TidingsCore
import TidingsDevice
import TidingsGateway
import TidingsStorage
import TidingsTesting

/// `kill -9` the real `tidings gateway` process again and again while a load generator sends
/// pushes to a connected device: every push that got a 200 is delivered, and with the
/// daemon's dedupe by apns-id none is shown twice.
@Suite("Crash", .serialized)
struct CrashTests {
    /// The `tidings` executable that `swift build --build-tests` puts next to the test bundle.
    static var executable: String? {
        FileManager.default.isExecutableFile(atPath: BuiltProducts.tidings) ? BuiltProducts.tidings : nil
    }

    /// A gateway child process; its ports are read from what it prints.
    final class GatewayProcess: Sendable {
        let process: Process
        let providerPort: Int
        let devicePort: Int

        init(executable: String, dataDirectory: URL) async throws {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = ["gateway", "--data-dir", dataDirectory.path, "--listen", "127.0.0.1:0", "--device-listen", "127.0.0.1:0",
                                 "--admin-listen", "off", "--device-rate-limit", "0", "--log-level", "error", "--threads", "1"]
            let out = Pipe()
            process.standardOutput = out
            process.standardError = FileHandle.nullDevice
            try process.run()
            self.process = process
            let pid = process.processIdentifier
            let watchdog = Task {
                try await Task.sleep(for: .seconds(30))
                kill(pid, SIGKILL)  // never started: fail instead of hanging
            }
            defer { watchdog.cancel() }
            // The blocking reads on a thread of their own (see offThePool).
            let handle = out.fileHandleForReading
            let (provider, device, text) = await offThePool { () -> (Int?, Int?, String) in
                var provider: Int?, device: Int?
                var text = ""
                while provider == nil || device == nil {
                    let chunk = handle.availableData
                    if chunk.isEmpty { break }
                    text += String(decoding: chunk, as: UTF8.self)
                    for line in text.split(separator: "\n") {
                        func port(after marker: String) -> Int? {
                            guard let r = line.range(of: marker) else { return nil }
                            let rest = line[r.upperBound...]
                            let address = rest.split(separator: " ").first ?? ""
                            return address.split(separator: ":").last.flatMap { Int($0) }
                        }
                        if provider == nil { provider = port(after: "provider API on ") }
                        if device == nil { device = port(after: "device channel on ") }
                    }
                }
                return (provider, device, text)
            }
            guard let provider, let device else {
                process.terminate()
                throw APNsClientError("the gateway did not start: \(text)")
            }
            providerPort = provider
            devicePort = device
        }

        func kill9() async {
            kill(process.processIdentifier, SIGKILL)
            await offThePool { self.process.waitUntilExit() }
        }

        func terminate() async {
            kill(process.processIdentifier, SIGTERM)
            await offThePool { self.process.waitUntilExit() }
        }
    }

    /// What the device has seen; "shown" is deduplicated by apns-id, as the daemon does.
    final class DeviceLog: Sendable {
        private let state = Mutex<(received: Int, shown: Set<String>, shownTwice: Int)>((0, [], 0))
        func record(_ push: DevicePush) {
            state.withLock { s in
                s.received += 1
                if !s.shown.insert(push.apnsID).inserted { /* a redelivery: not shown again */ }
            }
        }
        var shown: Set<String> { state.withLock { $0.shown } }
        var received: Int { state.withLock { $0.received } }
    }

    final class AcceptedIDs: Sendable {
        private let state = Mutex<Set<String>>([])
        func insert(_ id: String) { _ = state.withLock { $0.insert(id) } }
        var ids: Set<String> { state.withLock { $0 } }
    }

    @Test func everyAcceptedPushSurvivesKillNine() async throws {
        guard requireTool(Self.executable != nil, "the tidings executable next to the test bundle") else { return }
        let executable = Self.executable!
        let dir = TemporaryDirectories.make(prefix: "tidings-crash-")
        let registry = try GatewayRegistry(dataDirectory: dir)
        let (signingKey, keyRecord) = try registry.createKey(teamID: "TEAM123456")
        _ = try registry.registerApp(bundleID: "com.example.crash", teamID: "TEAM123456", storagePolicy: .all)
        let deviceKey = P256.Signing.PrivateKey()
        let log = DeviceLog()
        let accepted = AcceptedIDs()
        var token: String?
        let kills = 4

        for round in 0...kills {
            let gateway = try await GatewayProcess(executable: executable, dataDirectory: dir)
            let cert = dir.appendingPathComponent("tls/gateway-cert.pem").path
            let device = try await DeviceConnection.connect(DeviceClientConfiguration(host: "127.0.0.1", port: gateway.devicePort,
                                                                                       deviceKey: deviceKey, trustRootPaths: [cert]))
            if token == nil { token = try await device.requestToken(topic: "com.example.crash", environment: .development).hex }
            let reader = Task {
                do {
                    for try await push in device.pushes {
                        log.record(push)
                        device.acknowledge(push)
                    }
                } catch {}
            }
            if round == kills {
                // Final round: no load, no kill: everything owed must arrive.
                let deadline = ContinuousClock.now + .seconds(30)
                while !accepted.ids.isSubset(of: log.shown), ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(50))
                }
                await device.close()
                _ = await reader.value
                await gateway.terminate()
                break
            }
            var configuration = APNsClientConfiguration(host: "127.0.0.1", port: gateway.providerPort, trustRootPaths: [cert])
            configuration.authority = "127.0.0.1"
            let connection = try await APNsConnection.connect(configuration)
            let bearer = "bearer " + (try signingKey.token(keyID: keyRecord.keyID, teamID: "TEAM123456"))
            let tokenHex = token!
            // The load: 8 senders, each one request at a time, until the connection dies.
            let load = Task {
                await withTaskGroup(of: Void.self) { group in
                    for sender in 0..<8 {
                        group.addTask {
                            var n = 0
                            while !Task.isCancelled {
                                let id = UUID().uuidString.lowercased()
                                let request = APNsRequest(deviceToken: tokenHex, headers: [
                                    (name: "authorization", value: bearer), (name: "apns-topic", value: "com.example.crash"),
                                    (name: "apns-id", value: id),
                                ], body: Array(#"{"aps":{"alert":"r\#(round) s\#(sender) n\#(n)"}}"#.utf8))
                                n += 1
                                guard let response = try? await connection.send(request) else { return }
                                if response.status == 200 { accepted.insert(id) }
                            }
                        }
                    }
                }
            }
            // Kill once this round has had pushes accepted and more are in flight (a count, not a
            // fixed time: on a loaded machine a debug gateway may answer few in 700 ms).
            let before = accepted.ids.count
            let deadline = ContinuousClock.now + .seconds(60)
            while accepted.ids.count < before + 8, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(10))
            }
            try await Task.sleep(for: .milliseconds(Int.random(in: 0...200)))
            await gateway.kill9()
            load.cancel()
            _ = await load.value
            await connection.close()
            await device.close()
            _ = await reader.value
        }
        let acceptedIDs = accepted.ids
        #expect(acceptedIDs.count >= 20, "the load generator got pushes accepted between kills")
        let missing = acceptedIDs.subtracting(log.shown)
        #expect(missing.isEmpty, "\(missing.count) of \(acceptedIDs.count) accepted pushes were never delivered")
        print("crash test: \(acceptedIDs.count) pushes accepted across \(kills) kill -9, \(log.received) deliveries, \(log.shown.count) shown once each")
        try? FileManager.default.removeItem(at: dir)
    }
}
