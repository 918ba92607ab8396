import Crypto
import Foundation
import Synchronization
import Testing
import TidingsCore
import TidingsDaemon
import TidingsDevice
import TidingsGateway
import TidingsIPC
import TidingsTestSupport
import TidingsTesting

/// Failover through the real path: two `tidings gateway` processes on one PostgreSQL database,
/// a `tidings daemon --gateway A,B` process, providers pushing through both nodes. The node the
/// device is on is killed with `kill -9` (and started again on the same device port, so the
/// next kill can hit it); every push a provider got a 200 for must be presented, none twice.
///
/// `TIDINGS_FAILOVER_KILLS` sets the stress test's number of kills (3 by default, so CI stays
/// fast; docs/benchmarks.md reports a run with 20). Each run prints its counts and the
/// failover times (kill → reconnected, reconnected → first push through the survivor shown).
@Suite("Gateway failover across processes", .serialized)
struct FailoverProcessTests {
    static let team = "TEAM123456"
    static let bundle = "com.example.tidings.failover"

    /// One kill of the node the device is on, while a provider pushes through each node.
    @Test func killNineOfTheDevicesNodeLosesAndDuplicatesNothing() async throws {
        try await FailoverRun.run(kills: 1, label: "failover")
    }

    /// The same, `TIDINGS_FAILOVER_KILLS` times (3 by default), alternating nodes: each kill
    /// hits the node the device moved to at the previous one, restarted meanwhile.
    @Test func repeatedNodeKillsLoseAndDuplicateNothing() async throws {
        let kills = ProcessInfo.processInfo.environment["TIDINGS_FAILOVER_KILLS"].flatMap(Int.init) ?? 3
        try await FailoverRun.run(kills: max(1, kills), label: "failover stress")
    }
}

/// The processes and counts of one failover run.
final class FailoverRun: Sendable {
    /// A gateway node process; `restart` brings it back on the same device port.
    final class Node: Sendable {
        let name: String
        let directory: URL
        let databaseURL: String
        struct Running {
            var child: ChildProcess
            var providerPort: Int
        }
        let running = Mutex<Running?>(nil)
        let devicePort: Int
        let certificatePath: String

        init(name: String, root: URL, databaseURL: String) async throws {
            self.name = name
            directory = root.appendingPathComponent(name)
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            self.databaseURL = databaseURL
            let (child, provider, device) = try await Self.launch(name: name, directory: directory, databaseURL: databaseURL, devicePort: RestartPorts.take())
            running.withLock { $0 = Running(child: child, providerPort: provider) }
            devicePort = device
            certificatePath = directory.appendingPathComponent("tls/gateway-cert.pem").path
        }

        private static func launch(name: String, directory: URL, databaseURL: String, devicePort: Int) async throws -> (ChildProcess, Int, Int) {
            let child = try ChildProcess(BuiltProducts.tidings, [
                "gateway", "--data-dir", directory.path, "--listen", "127.0.0.1:0", "--device-listen", "127.0.0.1:\(devicePort)",
                "--admin-listen", "off", "--database", databaseURL, "--device-rate-limit", "0", "--log-level", "error", "--threads", "1",
            ], directory: directory, name: name)
            guard await child.waitForOutput("self-signed certificate: "),
                  let provider = child.port(after: "provider API on "), let device = child.port(after: "device channel on ") else {
                await child.stop(signal: SIGKILL)
                throw APNsClientError("\(name) did not start: \(child.output)")
            }
            return (child, provider, device)
        }

        var providerPort: Int? { running.withLock { $0?.providerPort } }

        func kill9() async {
            let child = running.withLock { r in defer { r = nil }; return r?.child }
            await child?.stop(signal: SIGKILL)
        }

        /// `kill9` without waiting for the exit, for a `defer`.
        func kill9AtEnd() {
            let child = running.withLock { r in defer { r = nil }; return r?.child }
            child?.stopAtEnd(signal: SIGKILL)
        }

        func restart() async throws {
            let (child, provider, _) = try await Self.launch(name: name, directory: directory, databaseURL: databaseURL, devicePort: devicePort)
            running.withLock { $0 = Running(child: child, providerPort: provider) }
        }
    }

    /// A push a provider got a 200 for.
    struct Accepted: Sendable {
        let text: String
        let node: String
        let at: ContinuousClock.Instant
    }

    /// New lines of a growing output file, each with the time it was first seen.
    final class OutputTail: Sendable {
        let path: String
        private struct State {
            var offset: UInt64 = 0
            var partial: [UInt8] = []
            var lines: [(line: String, at: ContinuousClock.Instant)] = []
        }
        private let state = Mutex(State())

        init(path: String) { self.path = path }

        /// Reads what was appended since the last call.
        func poll() {
            guard let handle = FileHandle(forReadingAtPath: path) else { return }
            defer { try? handle.close() }
            let now = ContinuousClock.now
            state.withLock { s in
                try? handle.seek(toOffset: s.offset)
                guard let data = try? handle.readToEnd(), !data.isEmpty else { return }
                s.offset += UInt64(data.count)
                s.partial += data
                while let newline = s.partial.firstIndex(of: 10) {
                    s.lines.append((String(decoding: s.partial[..<newline], as: UTF8.self), now))
                    s.partial.removeSubrange(...newline)
                }
            }
        }

        var lines: [(line: String, at: ContinuousClock.Instant)] { state.withLock { $0.lines } }
    }

    let accepted = Mutex<[String: Accepted]>([:])  // apns-id → push

    /// The push text (`fo-push-<node>-<n>-end`) a line of the daemon's output shows, if any.
    static func pushText(_ line: String) -> String? {
        guard let start = line.range(of: "fo-push-"), let end = line.range(of: "-end", range: start.upperBound..<line.endIndex) else { return nil }
        return String(line[start.lowerBound..<end.upperBound])
    }

    static func run(kills: Int, label: String) async throws {
        guard requireTool(FileManager.default.isExecutableFile(atPath: BuiltProducts.tidings), "the tidings executable"),
              let cluster = try await PostgresCluster.shared() else { return }
        let url = try cluster.createDatabase(prefix: "failover")
        let root = URL(fileURLWithPath: "/tmp/tfo-\(UUID().uuidString.prefix(8))")
        let deviceDir = root.appendingPathComponent("device")
        try FileManager.default.createDirectory(at: deviceDir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }

        // The team's key and app, in the shared registry (as an operator would).
        let p8 = root.appendingPathComponent("AuthKey.p8").path
        let created = try await runTool(BuiltProducts.tidings, ["keys", "create", "--team", FailoverProcessTests.team, "--app", FailoverProcessTests.bundle,
                                                          "--storage-policy", "all", "--output", p8], environment: ["TIDINGS_DATABASE_URL": url])
        #expect(created.status == 0, "\(created.output)")
        let keyID = try #require(created.output.split(separator: "\n").first { $0.hasPrefix("key id: ") }.map { String($0.dropFirst("key id: ".count)) })
        let signing = try ProviderSigningKey(p8File: p8)

        let nodes = [try await Node(name: "node-a", root: root, databaseURL: url), try await Node(name: "node-b", root: root, databaseURL: url)]
        defer { for node in nodes { node.kill9AtEnd() } }

        // The daemon's device key, made here so the test can learn the app's token first.
        let deviceKey = P256.Signing.PrivateKey()
        try deviceKey.pemRepresentation.write(toFile: deviceDir.appendingPathComponent("device-key.pem").path, atomically: true, encoding: .utf8)
        let probe = try await DeviceConnection.connect(DeviceClientConfiguration(host: "127.0.0.1", port: nodes[0].devicePort, deviceKey: deviceKey,
                                                                                 trustRootPaths: [nodes[0].certificatePath]))
        let token = try await probe.requestToken(topic: FailoverProcessTests.bundle, environment: .development).hex
        await probe.close()

        let daemon = try ChildProcess(BuiltProducts.tidings, [
            "daemon", "--data-dir", deviceDir.path, "--consent", "grant", "--development",
            "--gateway", nodes.map { "127.0.0.1:\($0.devicePort)" }.joined(separator: ","),
            "--gateway-cert", nodes[0].certificatePath, "--gateway-cert", nodes[1].certificatePath, "--log-level", "info",
        ], directory: root, name: "daemon")
        defer { daemon.stopAtEnd(signal: SIGKILL) }
        let socket = deviceDir.appendingPathComponent("daemon.sock").path
        let app = Mutex<AppSocketClient?>(nil)
        _ = await eventually {
            let c = try? await AppSocketClient.connect(path: socket)
            app.withLock { $0 = c }
            return c != nil
        }
        let client = try #require(app.withLock { $0 }, "the daemon's socket: \(daemon.output)")
        guard case .hello = try await client.call(.hello(AppHello(bundleIdentifier: FailoverProcessTests.bundle, state: .background))) else {
            Issue.record("the daemon refused the app")
            return
        }
        #expect(try await client.call(.requestAuthorization(AuthorizationOptionsValue(rawValue: 7))) == .authorization(granted: true))
        client.close()

        let run = FailoverRun()
        let tail = OutputTail(path: daemon.outputPath)
        /// The node the daemon connected to last (from its log), and when that line was seen.
        @Sendable func lastConnection() -> (port: Int, at: ContinuousClock.Instant)? {
            tail.poll()
            guard let entry = tail.lines.last(where: { $0.line.contains("connected to the push gateway") }),
                  let r = entry.line.range(of: "gateway=127.0.0.1:"),
                  let port = Int(entry.line[r.upperBound...].prefix { $0.isNumber }) else { return nil }
            return (port, entry.at)
        }
        @Sendable func printedCount() -> Int {
            tail.poll()
            return tail.lines.count { $0.line.contains("fo-push-") }
        }

        // A provider per node, pushing one at a time; a node that is down is retried.
        let providers = nodes.map { node in
            Task {
                var n = 0
                // One token for the whole run, as a provider keeps it (a new one per request is
                // refused: TooManyProviderTokenUpdates).
                guard let bearer = try? signing.token(keyID: keyID, teamID: FailoverProcessTests.team) else { return }
                while !Task.isCancelled {
                    guard let port = node.providerPort else {
                        try? await Task.sleep(for: .milliseconds(20))
                        continue
                    }
                    var configuration = APNsClientConfiguration(host: "127.0.0.1", port: port, trustRootPaths: [node.certificatePath])
                    configuration.authority = "127.0.0.1"
                    guard let connection = try? await APNsConnection.connect(configuration) else {
                        try? await Task.sleep(for: .milliseconds(20))
                        continue
                    }
                    while !Task.isCancelled {
                        let id = UUID().uuidString.lowercased()
                        let text = "fo-push-\(node.name)-\(n)-end"
                        n += 1
                        let request = APNsRequest(deviceToken: token, headers: [("authorization", "bearer " + bearer), ("apns-topic", FailoverProcessTests.bundle),
                                                                                ("apns-id", id)],
                                                  body: Array(#"{"aps":{"alert":"\#(text)"}}"#.utf8))
                        guard let response = try? await connection.send(request) else { break }
                        if response.status == 200 {
                            run.accepted.withLock { $0[id] = Accepted(text: text, node: node.name, at: .now) }
                        }
                        // About 100 pushes a second per node: load, not a flood on a shared machine.
                        try? await Task.sleep(for: .milliseconds(10))
                    }
                    await connection.close()
                }
            }
        }

        let started = ContinuousClock.now
        var reconnectTimes: [Duration] = []
        var afterReconnectTimes: [Duration] = []
        for kill in 0..<kills {
            // Pushes flowing and shown, the device on a node.
            let shownBefore = printedCount()
            let ready = await eventually(within: 60) { printedCount() >= shownBefore + 30 && lastConnection() != nil }
            try #require(ready, "kill \(kill): no pushes shown: \(daemon.output.suffix(2000))")
            let (port, _) = try #require(lastConnection())
            let victim = try #require(nodes.first { $0.devicePort == port })
            let survivor = try #require(nodes.first { $0 !== victim })
            let killedAt = ContinuousClock.now
            await victim.kill9()

            // The device reconnects to the survivor…
            let reconnectedAt = Mutex<ContinuousClock.Instant?>(nil)
            let moved = await eventually(within: 60) {
                guard let last = lastConnection(), last.port == survivor.devicePort, last.at > killedAt else { return false }
                reconnectedAt.withLock { $0 = last.at }
                return true
            }
            try #require(moved, "kill \(kill): the daemon did not reconnect to \(survivor.name): \(daemon.output.suffix(2000))")
            // …and shows a push the survivor accepted after the kill.
            let receivedAt = Mutex<ContinuousClock.Instant?>(nil)
            let received = await eventually(within: 60) {
                let texts = Set(run.accepted.withLock { $0.values.filter { $0.node == survivor.name && $0.at > killedAt }.map(\.text) })
                guard !texts.isEmpty else { return false }
                tail.poll()
                guard let line = tail.lines.first(where: { $0.at > killedAt && Self.pushText($0.line).map(texts.contains) == true }) else { return false }
                receivedAt.withLock { $0 = line.at }
                return true
            }
            try #require(received, "kill \(kill): nothing shown through \(survivor.name) after the kill")
            let reconnect = try #require(reconnectedAt.withLock { $0 }), got = try #require(receivedAt.withLock { $0 })
            reconnectTimes.append(reconnect - killedAt)
            afterReconnectTimes.append(max(.zero, got - reconnect))
            try await victim.restart()
        }
        for provider in providers { provider.cancel() }
        for provider in providers { _ = await provider.value }
        let elapsed = ContinuousClock.now - started

        // Every push acknowledged to a provider is delivered: in the daemon's delivered list.
        let all = run.accepted.withLock { $0 }
        let delivered = Mutex(Set<String>())
        let complete = await eventually(within: 60) {
            guard let admin = try? await AdminClient.connect(socketPath: socket) else { return false }
            defer { admin.close() }
            guard case .notifications(let list)? = try? await admin.send(.delivered(bundleIdentifier: FailoverProcessTests.bundle)) else { return false }
            let ids = Set(list.map(\.notification.request.identifier))
            delivered.withLock { $0 = ids }
            return Set(all.keys).isSubset(of: ids)
        }
        let lost = Set(all.keys).subtracting(delivered.withLock { $0 })
        #expect(complete, "\(lost.count) of \(all.count) acknowledged pushes never delivered")
        // And shown once each: the daemon prints every notification it presents.
        tail.poll()
        var shown: [String: Int] = [:]
        for entry in tail.lines {
            if let text = Self.pushText(entry.line) { shown[text, default: 0] += 1 }
        }
        let twice = shown.filter { $0.value > 1 }
        #expect(twice.isEmpty, "shown more than once: \(twice.keys.sorted().prefix(5))")
        let acknowledgedShown = Set(all.values.map(\.text)).intersection(shown.keys).count
        #expect(acknowledgedShown == all.count, "\(all.count - acknowledgedShown) acknowledged pushes never shown")

        func summary(_ times: [Duration]) -> String {
            let ms = times.map { Double($0.components.seconds) * 1000 + Double($0.components.attoseconds) / 1e15 }.sorted()
            guard !ms.isEmpty else { return "-" }
            func at(_ q: Double) -> Double { ms[min(ms.count - 1, Int((Double(ms.count - 1) * q).rounded()))] }
            return String(format: "p50 %.0f ms, p90 %.0f ms, max %.0f ms", at(0.5), at(0.9), ms.last!)
        }
        print("""
            \(label): \(kills) kill -9 of the device's node in \(elapsed.components.seconds) s; acknowledged \(all.count), presented \(acknowledgedShown) \
            (\(shown.count) distinct shown), duplicates \(twice.count), lost \(lost.count); \
            kill → reconnected: \(summary(reconnectTimes)); reconnected → first push through the survivor shown: \(summary(afterReconnectTimes))
            """)
    }
}
