// `swift build -c release --scratch-path .build-rel --product RemoteBenchmark && .build-rel/release/RemoteBenchmark [N]`
//
// Provider → presented, in one process over loopback: a gateway (SQLite, TLS), the
// daemon's gateway link (inbox in SQLite, ack after durable) and engine (SQLite), a
// presenter that notes when each push is shown. Measures the latency of pushes sent one at
// a time (p50/p99), then the rate of N pushes sent 64 at a time.
import Crypto
import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import TidingsCore
import TidingsDaemon
import TidingsEngine
import TidingsGateway
import TidingsSQLite
import TidingsStorage

final class TimingPresenter: Presenter {
    private let state = Mutex<(shown: [String: ContinuousClock.Instant], waiters: [String: CheckedContinuation<Void, Never>])>(([:], [:]))

    func present(_ notification: PresentedNotification) async {
        let id = notification.notification.request.identifier
        let now = ContinuousClock.now
        let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
            s.shown[id] = now
            return s.waiters.removeValue(forKey: id)
        }
        waiter?.resume()
    }

    func shown(_ id: String) -> ContinuousClock.Instant? { state.withLock { $0.shown[id] } }
    var count: Int { state.withLock { $0.shown.count } }

    func wait(for id: String) async {
        await withCheckedContinuation { c in
            let done = state.withLock { s -> Bool in
                if s.shown[id] != nil { return true }
                s.waiters[id] = c
                return false
            }
            if done { c.resume() }
        }
    }
}

let count = CommandLine.arguments.dropFirst().first.flatMap(Int.init) ?? 2000
let bundle = "com.example.bench"
let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tidings-remote-bench-\(UUID().uuidString.prefix(8))")
try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
var logger = Logger(label: "bench")
logger.logLevel = .critical

var gatewayConfiguration = GatewayConfiguration(dataDirectory: dir.appendingPathComponent("gateway"))
gatewayConfiguration.providerPort = 0
gatewayConfiguration.devicePort = 0
gatewayConfiguration.adminHost = nil
gatewayConfiguration.deviceRateLimitPerSecond = 0
gatewayConfiguration.logger = logger
let gateway = try buildGateway(gatewayConfiguration)
let group = ServiceGroup(configuration: .init(services: [gateway], logger: logger))
let gatewayTask = Task { try await group.run() }
let addresses = try await gateway.waitUntilReady()
let teamKey = P256.Signing.PrivateKey()
let nowMS = EpochMilliseconds(Date().timeIntervalSince1970 * 1000)
try gateway.store.addKey(ProviderKeyRecord(keyID: "KEY1234567", teamID: "TEAM123456", publicKey: teamKey.publicKey.x963Representation, environment: nil, createdAt: nowMS))
try await gateway.register(app: GatewayAppRecord(bundleID: bundle, teamID: "TEAM123456", storagePolicy: .all, createdAt: nowMS))

let presenter = TimingPresenter()
let store = try SQLiteDeviceStore(path: dir.appendingPathComponent("device.sqlite").path)
let engine = NotificationEngine(configuration: EngineConfiguration(
    store: store, attachments: AttachmentStore(root: dir.appendingPathComponent("attachments")),
    presenters: [presenter], logger: logger))
try await engine.recover()
let engineTask = Task { try? await engine.run() }
try await engine.install(AppRecord(bundleIdentifier: bundle, displayName: "Bench", executable: "/usr/bin/true", directory: dir.path, installedAt: Date()))
_ = try await engine.updateSettings(bundle) { $0 = .granted([.alert, .sound, .badge], provisional: false) }
let link = try GatewayLink(configuration: GatewayLinkConfiguration(host: "127.0.0.1", port: addresses.device.port!, trustRootPaths: [addresses.certificatePath!]),
                           dataDirectory: dir.path, engine: engine, logger: logger)
await engine.setRemote(link: link)
let linkTask = Task { await link.run() }
while await !link.isConnected { try await Task.sleep(for: .milliseconds(10)) }
let token = DeviceToken(bytes: try await link.deviceToken(for: bundle)).hex

var clientConfiguration = APNsClientConfiguration(host: "127.0.0.1", port: addresses.provider.port!, trustRootPaths: [addresses.certificatePath!])
clientConfiguration.authority = "127.0.0.1"
let connection = try await APNsConnection.connect(clientConfiguration)
let bearer = "bearer " + (try ProviderToken.sign(keyID: "KEY1234567", teamID: "TEAM123456", issuedAt: Int64(Date().timeIntervalSince1970), key: teamKey))
func request(_ id: String) -> APNsRequest {
    APNsRequest(deviceToken: token, headers: [("authorization", bearer), ("apns-topic", bundle), ("apns-id", id)],
                body: Array(#"{"aps":{"alert":{"title":"Bench","body":"push \#(id)"}},"k":1}"#.utf8))
}

// Latency: one push at a time, provider send → presenter.
var latencies: [Duration] = []
for _ in 0..<300 {
    let id = UUID().uuidString.lowercased()
    let start = ContinuousClock.now
    let response = try await connection.send(request(id))
    guard response.status == 200 else { fatalError("status \(response.status)") }
    await presenter.wait(for: id)
    latencies.append(presenter.shown(id)! - start)
}
latencies.sort()
func ms(_ d: Duration) -> String { String(format: "%.2f ms", Double(d.components.attoseconds) / 1e15 + Double(d.components.seconds) * 1000) }
print("provider → presented, one at a time (300): p50 \(ms(latencies[latencies.count / 2])), p99 \(ms(latencies[latencies.count * 99 / 100]))")

// Throughput: N pushes, 64 in flight.
let ids = (0..<count).map { _ in UUID().uuidString.lowercased() }
let start = ContinuousClock.now
try await withThrowingTaskGroup(of: Void.self) { tasks in
    var next = 0
    for _ in 0..<64 {
        let mine = next; next += 1
        tasks.addTask { _ = try await connection.send(request(ids[mine])) }
    }
    while try await tasks.next() != nil, next < count {
        let mine = next; next += 1
        tasks.addTask { _ = try await connection.send(request(ids[mine])) }
    }
}
for id in ids { await presenter.wait(for: id) }
let elapsed = ContinuousClock.now - start
let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
print("end to end to one device: \(count) pushes in \(String(format: "%.2f", seconds)) s = \(Int(Double(count) / seconds)) pushes/s (accepted, stored, sent, made durable on the device, acknowledged, presented)")

await connection.close()
linkTask.cancel()
await linkTask.value
engineTask.cancel()
await group.triggerGracefulShutdown()
_ = try? await gatewayTask.value
try? FileManager.default.removeItem(at: dir)
