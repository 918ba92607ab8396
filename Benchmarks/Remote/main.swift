//     swift build -c release --scratch-path .build-rel --product RemoteBenchmark
//     swift build -c release --scratch-path .build-rel --product TestServiceExtension
//     .build-rel/release/RemoteBenchmark [N] [--devices M] [--backlog B] [--no-extension]
//     .build-rel/release/RemoteBenchmark --plan N [--kind bench|extension|3]   (payload → plan, and the request's encoding)
//     .build-rel/release/RemoteBenchmark --delivered-store N
//
// Provider → presented, in one process over loopback: a gateway (SQLite, TLS), the
// daemon's gateway link (inbox in SQLite, ack after durable) and engine (SQLite), a
// presenter that notes when each push is shown. Measures the latency of pushes sent one at
// a time (p50/p99) to an app without a service extension and, interleaved, to one whose
// warm no-op service extension (TestServiceExtension "noop") runs for each push; then the
// rate of N pushes sent 64 at a time to one device (with each push's provider → presented
// latency under that load, and the process's CPU time per push, against the same pushes to a
// second device whose channel only acknowledges: the difference is the daemon's side); then
// (`--backlog B`) B pushes stored while the daemon is away, and the time from its reconnect
// until the last is presented; then (`--devices M`) M pushes spread
// over M devices, one each, whose device channels (in a child process: the file
// descriptors of 10,000 connections on both ends do not fit one process's limit) count
// them on receipt and acknowledge.
import Crypto
import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import TidingsCore
import TidingsDaemon
import TidingsDevice
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

func option(_ name: String) -> String? {
    guard let index = CommandLine.arguments.firstIndex(of: name), index + 1 < CommandLine.arguments.count else { return nil }
    return CommandLine.arguments[index + 1]
}
if let devices = option("--device-clients").flatMap(Int.init) {
    try await runDeviceClients(count: devices, port: Int(option("--port")!)!, certificate: option("--cert")!, topic: option("--topic")!,
                               tokensFile: option("--tokens")!)
    exit(0)
}
if let total = option("--delivered-store").flatMap(Int.init) {
    try await measureDeliveredStore(total: total)
    exit(0)
}
if let total = option("--plan").flatMap(Int.init) {
    try measurePlan(total: total)
    exit(0)
}
if let total = option("--inbox").flatMap(Int.init) {
    try await measureInbox(total: total, burst: option("--burst").flatMap(Int.init) ?? 64, lag: option("--lag").flatMap(Int.init) ?? 2_048,
                           oneWrite: !CommandLine.arguments.contains("--two-writes"), readBack: CommandLine.arguments.contains("--read-back"))
    exit(0)
}
let count = CommandLine.arguments.dropFirst().first.flatMap(Int.init) ?? 2000
let deviceCount = option("--devices").flatMap(Int.init) ?? 0
let backlogCount = option("--backlog").flatMap(Int.init) ?? 0
let withExtension = !CommandLine.arguments.contains("--no-extension")
let executableDirectory = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
let extensionExecutable = option("--extension") ?? executableDirectory.appendingPathComponent("TestServiceExtension").path
guard !withExtension || FileManager.default.isExecutableFile(atPath: extensionExecutable) else {
    FileHandle.standardError.write(Data("no extension executable at \(extensionExecutable): build the TestServiceExtension product first\n".utf8))
    exit(2)
}
let extensionBundle = "com.example.bench.ext"
let bundle = "com.example.bench"
let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tidings-remote-bench-\(UUID().uuidString.prefix(8))")
try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
let logger = { var logger = Logger(label: "bench"); logger.logLevel = .critical; return logger }()

var gatewayConfiguration = GatewayConfiguration(dataDirectory: dir.appendingPathComponent("gateway"))
gatewayConfiguration.providerPort = 0
gatewayConfiguration.devicePort = 0
gatewayConfiguration.adminHost = nil
gatewayConfiguration.deviceRateLimitPerSecond = 0
gatewayConfiguration.newDevicesPerSecond = 0  // the idle-device phase makes thousands of identities
gatewayConfiguration.newDevicesPerSourcePerSecond = 0
gatewayConfiguration.logger = logger
let gateway = try buildGateway(gatewayConfiguration)
let group = ServiceGroup(configuration: .init(services: [gateway], logger: logger))
let gatewayTask = Task { try await group.run() }
let addresses = try await gateway.waitUntilReady()
let teamKey = P256.Signing.PrivateKey()
let nowMS = EpochMilliseconds(Date().timeIntervalSince1970 * 1000)
try gateway.store.addKey(ProviderKeyRecord(keyID: "KEY1234567", teamID: "TEAM123456", publicKey: teamKey.publicKey.x963Representation, environment: nil, createdAt: nowMS))
try await gateway.register(app: GatewayAppRecord(bundleID: bundle, teamID: "TEAM123456", storagePolicy: .all, createdAt: nowMS))
try await gateway.register(app: GatewayAppRecord(bundleID: extensionBundle, teamID: "TEAM123456", storagePolicy: .all, createdAt: nowMS))

let presenter = TimingPresenter()
let store = try SQLiteDeviceStore(path: dir.appendingPathComponent("device.sqlite").path)
let engine = NotificationEngine(configuration: EngineConfiguration(
    store: store, attachments: AttachmentStore(root: dir.appendingPathComponent("attachments")),
    presenters: [presenter],
    serviceExtensions: ServiceExtensionRunner(
        configuration: ServiceExtensionConfiguration(containerRoot: dir.appendingPathComponent("extensions").path),
        clock: SystemWallClock(), attachments: AttachmentStore(root: dir.appendingPathComponent("attachments")), logger: logger),
    logger: logger))
try await engine.recover()
let engineTask = Task { try? await engine.run() }
try await engine.install(AppRecord(bundleIdentifier: bundle, displayName: "Bench", executable: "/usr/bin/true", directory: dir.path, installedAt: Date()))
_ = try await engine.updateSettings(bundle) { $0 = .granted([.alert, .sound, .badge], provisional: false) }
try await engine.install(AppRecord(
    bundleIdentifier: extensionBundle, displayName: "Bench with extension", executable: "/usr/bin/true", directory: dir.path,
    extensions: [AppExtensionRecord(bundleIdentifier: extensionBundle + ".service", point: .service, executable: extensionExecutable)],
    installedAt: Date()))
_ = try await engine.updateSettings(extensionBundle) { $0 = .granted([.alert, .sound, .badge], provisional: false) }
func startLink() async throws -> (GatewayLink, Task<Void, Never>) {
    let link = try GatewayLink(configuration: GatewayLinkConfiguration(host: "127.0.0.1", port: addresses.device.port!, trustRootPaths: [addresses.certificatePath!]),
                               dataDirectory: dir.path, engine: engine, logger: logger)
    await engine.setRemote(link: link)
    let task = Task { await link.run() }
    while await !link.isConnected { try await Task.sleep(for: .milliseconds(10)) }
    return (link, task)
}
var (link, linkTask) = try await startLink()
let token = DeviceToken(bytes: try await link.deviceToken(for: bundle)).hex
let extensionToken = DeviceToken(bytes: try await link.deviceToken(for: extensionBundle)).hex

var clientConfiguration = APNsClientConfiguration(host: "127.0.0.1", port: addresses.provider.port!, trustRootPaths: [addresses.certificatePath!])
clientConfiguration.authority = "127.0.0.1"
let connection = try await APNsConnection.connect(clientConfiguration)
let bearer = "bearer " + (try ProviderToken.sign(keyID: "KEY1234567", teamID: "TEAM123456", issuedAt: Int64(Date().timeIntervalSince1970), key: teamKey))
func request(_ id: String) -> APNsRequest {
    APNsRequest(deviceToken: token, headers: [("authorization", bearer), ("apns-topic", bundle), ("apns-id", id)],
                body: Array(#"{"aps":{"alert":{"title":"Bench","body":"push \#(id)"}},"k":1}"#.utf8))
}
/// The same push for the app with the service extension: mutable-content, the fixture's no-op.
func extensionRequest(_ id: String) -> APNsRequest {
    APNsRequest(deviceToken: extensionToken, headers: [("authorization", bearer), ("apns-topic", extensionBundle), ("apns-id", id)],
                body: Array(#"{"aps":{"alert":{"title":"Bench","body":"push \#(id)"},"mutable-content":1},"k":1,"fixture":"noop"}"#.utf8))
}
func latency(_ make: (String) -> APNsRequest) async throws -> Duration {
    let id = UUID().uuidString.lowercased()
    let start = ContinuousClock.now
    let response = try await connection.send(make(id))
    guard response.status == 200 else { fatalError("status \(response.status)") }
    await presenter.wait(for: id)
    return presenter.shown(id)! - start
}
func ms(_ d: Duration) -> String { String(format: "%.2f ms", Double(d.components.attoseconds) / 1e15 + Double(d.components.seconds) * 1000) }

func p(_ v: [Duration], _ q: Double) -> Duration { v[min(v.count - 1, Int(Double(v.count) * q))] }
func secondsOf(_ d: Duration) -> Double { Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18 }
/// User + system CPU time of the whole process (gateway, daemon and clients), in seconds.
func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}
func loadAverage() -> String { (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").first.map(String.init) ?? "?" }
/// Sends `requests` with 64 in flight; the time each was sent, by apns-id.
func sendAll(_ requests: [(id: String, request: APNsRequest)]) async throws -> [String: ContinuousClock.Instant] {
    try await withThrowingTaskGroup(of: (String, ContinuousClock.Instant).self) { tasks in
        var sent: [String: ContinuousClock.Instant] = [:]
        var next = 0
        func add() {
            let (id, request) = requests[next]
            next += 1
            tasks.addTask {
                let start = ContinuousClock.now
                let response = try await connection.send(request)
                guard response.status == 200 else { fatalError("status \(response.status)") }
                return (id, start)
            }
        }
        for _ in 0..<min(64, requests.count) { add() }
        while let (id, start) = try await tasks.next() {
            sent[id] = start
            if next < requests.count { add() }
        }
        return sent
    }
}

// Latency: one push at a time, provider send → presenter; without and with the extension,
// interleaved so both see the same machine load. The extension's process is warmed first.
if withExtension { for _ in 0..<20 { _ = try await latency(extensionRequest) } }
var plain: [Duration] = [], extended: [Duration] = [], added: [Duration] = []
for _ in 0..<300 {
    let a = try await latency(request)
    plain.append(a)
    if withExtension {
        let b = try await latency(extensionRequest)
        extended.append(b); added.append(b - a)
    }
}
plain.sort(); extended.sort(); added.sort()
print("provider → presented, one at a time (300): p50 \(ms(p(plain, 0.5))), p99 \(ms(p(plain, 0.99))) (load \(loadAverage()))")
if withExtension {
    print("same with a warm no-op service extension (300, interleaved): p50 \(ms(p(extended, 0.5))), p99 \(ms(p(extended, 0.99)))")
    print("the extension adds: p50 of the pair differences \(ms(p(added, 0.5))), difference of the p50s \(ms(p(extended, 0.5) - p(plain, 0.5)))")
}

// Reference: the same number of pushes to a second device whose channel only acknowledges
// (the gateway's share of the CPU, and the client's receipt).
let ackKey = P256.Signing.PrivateKey()
let ackConnection = try await DeviceConnection.connect(DeviceClientConfiguration(host: "127.0.0.1", port: addresses.device.port!, deviceKey: ackKey,
                                                                                 trustRootPaths: [addresses.certificatePath!]), logger: logger)
let ackToken = try await ackConnection.requestToken(topic: bundle, environment: .development).hex
let ackReceived = Task {
    var received = 0
    do {
        for try await push in ackConnection.pushes {
            ackConnection.acknowledge(push)
            received += 1
            if received == count { break }
        }
    } catch {}
    return received
}
let ackRequests = (0..<count).map { _ -> (id: String, request: APNsRequest) in
    let id = UUID().uuidString.lowercased()
    return (id, APNsRequest(deviceToken: ackToken, headers: [("authorization", bearer), ("apns-topic", bundle), ("apns-id", id)],
                            body: Array(#"{"aps":{"alert":{"title":"Bench","body":"push \#(id)"}},"k":1}"#.utf8)))
}
let ackCPU = cpuSeconds()
let ackStart = ContinuousClock.now
_ = try await sendAll(ackRequests)
guard await ackReceived.value == count else { fatalError("the acknowledging device did not receive every push") }
let ackSeconds = secondsOf(ContinuousClock.now - ackStart)
let ackCPUPerPush = (cpuSeconds() - ackCPU) / Double(count) * 1e6
await ackConnection.close()
print("reference, to a device that only acknowledges: \(count) pushes in \(String(format: "%.2f", ackSeconds)) s = \(Int(Double(count) / ackSeconds)) pushes/s, CPU \(String(format: "%.1f", ackCPUPerPush)) µs per push (load \(loadAverage()))")

// Throughput: N pushes, 64 in flight, each one's provider → presented latency under that load.
let requests = (0..<count).map { _ -> (id: String, request: APNsRequest) in
    let id = UUID().uuidString.lowercased()
    return (id, request(id))
}
let cpuBefore = cpuSeconds()
let start = ContinuousClock.now
let sentAt = try await sendAll(requests)
for (id, _) in requests { await presenter.wait(for: id) }
let elapsed = ContinuousClock.now - start
let cpuPerPush = (cpuSeconds() - cpuBefore) / Double(count) * 1e6
let seconds = secondsOf(elapsed)
let underLoad = requests.map { presenter.shown($0.id)! - sentAt[$0.id]! }.sorted()
print("end to end to one device: \(count) pushes in \(String(format: "%.2f", seconds)) s = \(Int(Double(count) / seconds)) pushes/s (accepted, stored, sent, made durable on the device, acknowledged, presented), load \(loadAverage())")
print("  provider → presented under that load: p50 \(ms(p(underLoad, 0.5))), p99 \(ms(p(underLoad, 0.99)))")
print("  CPU per push (whole process): \(String(format: "%.1f", cpuPerPush)) µs; the daemon's side (minus the acknowledging reference): \(String(format: "%.1f", cpuPerPush - ackCPUPerPush)) µs")

if backlogCount > 0 {
    // Backlog: the daemon goes away, the gateway stores B pushes (storage policy `all`), the
    // daemon comes back; the time from its new link's start until the last one is presented.
    linkTask.cancel()
    await linkTask.value
    let backlog = (0..<backlogCount).map { _ -> (id: String, request: APNsRequest) in
        let id = UUID().uuidString.lowercased()
        return (id, request(id))
    }
    let storeStart = ContinuousClock.now
    _ = try await sendAll(backlog)
    print("backlog: \(backlogCount) pushes stored for the absent device in \(String(format: "%.2f", secondsOf(ContinuousClock.now - storeStart))) s")
    let backlogCPU = cpuSeconds()
    let reconnect = ContinuousClock.now
    (link, linkTask) = try await startLink()
    for (id, _) in backlog { await presenter.wait(for: id) }
    let backlogSeconds = secondsOf(ContinuousClock.now - reconnect)
    print("  presented after the reconnect in \(String(format: "%.2f", backlogSeconds)) s = \(Int(Double(backlogCount) / backlogSeconds)) pushes/s, CPU \(String(format: "%.1f", (cpuSeconds() - backlogCPU) / Double(backlogCount) * 1e6)) µs per push (load \(loadAverage()))")
}

if deviceCount > 0 {
    // Spread: one push to each of deviceCount devices (a child process holds their channels).
    let tokensFile = dir.appendingPathComponent("tokens.txt").path
    let child = Process()
    child.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
    child.arguments = ["--device-clients", String(deviceCount), "--port", String(addresses.device.port!), "--cert", addresses.certificatePath!,
                       "--topic", bundle, "--tokens", tokensFile]
    let pipe = Pipe()
    child.standardOutput = pipe
    try child.run()
    let (lines, linesContinuation) = AsyncStream<String>.makeStream()
    let reading = pipe.fileHandleForReading
    Thread.detachNewThread {
        var buffer: [UInt8] = []
        while true {
            let data = reading.availableData
            if data.isEmpty { break }
            for byte in data {
                if byte == UInt8(ascii: "\n") {
                    linesContinuation.yield(String(decoding: buffer, as: UTF8.self))
                    buffer.removeAll()
                } else {
                    buffer.append(byte)
                }
            }
        }
        linesContinuation.finish()
    }
    var iterator = lines.makeAsyncIterator()
    let connectStart = ContinuousClock.now
    guard await iterator.next() == "ready" else { fatalError("the device clients did not connect") }
    print("connected \(deviceCount) devices (TLS, key proof, token) in \(ms(ContinuousClock.now - connectStart))")
    let tokens = try String(contentsOfFile: tokensFile, encoding: .utf8).split(separator: "\n").map(String.init)
    let spreadStart = ContinuousClock.now
    try await withThrowingTaskGroup(of: Void.self) { tasks in
        func send(_ i: Int) {
            tasks.addTask {
                let response = try await connection.send(APNsRequest(deviceToken: tokens[i], headers: [
                    ("authorization", bearer), ("apns-topic", bundle), ("apns-id", UUID().uuidString.lowercased())],
                    body: Array(#"{"aps":{"alert":{"title":"Bench","body":"spread"}}}"#.utf8)))
                guard response.status == 200 else { fatalError("status \(response.status)") }
            }
        }
        var next = 0
        for _ in 0..<min(64, tokens.count) { send(next); next += 1 }
        while try await tasks.next() != nil, next < tokens.count { send(next); next += 1 }
    }
    guard await iterator.next() == "received" else { fatalError("the device clients did not receive every push") }
    let spread = ContinuousClock.now - spreadStart
    let spreadSeconds = Double(spread.components.seconds) + Double(spread.components.attoseconds) / 1e18
    print("spread over \(tokens.count) devices, one push each, 64 in flight: \(String(format: "%.2f", spreadSeconds)) s = \(Int(Double(tokens.count) / spreadSeconds)) pushes/s (accepted, stored, sent, received and acknowledged by each device's channel)")
    child.waitUntilExit()
}

await connection.close()
linkTask.cancel()
await linkTask.value
engineTask.cancel()
await group.triggerGracefulShutdown()
_ = try? await gatewayTask.value
try? FileManager.default.removeItem(at: dir)

/// The child process of `--devices`: connects `count` device channels (each with its own
/// key) in batches, writes their tokens for `topic`, says "ready"; then acknowledges every
/// push on receipt and says "received" once each device got one.
func runDeviceClients(count: Int, port: Int, certificate: String, topic: String, tokensFile: String) async throws {
    func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }
    var connections: [DeviceConnection] = []
    var tokens: [String] = []
    while connections.count < count {
        let batch = min(50, count - connections.count)
        let made = try await withThrowingTaskGroup(of: (DeviceConnection, String).self) { tasks in
            for _ in 0..<batch {
                tasks.addTask {
                    let configuration = DeviceClientConfiguration(host: "127.0.0.1", port: port, deviceKey: P256.Signing.PrivateKey(),
                                                                  trustRootPaths: [certificate])
                    let connection = try await DeviceConnection.connect(configuration)
                    return (connection, try await connection.requestToken(topic: topic, environment: .development).hex)
                }
            }
            return try await tasks.reduce(into: []) { $0.append($1) }
        }
        connections += made.map(\.0)
        tokens += made.map(\.1)
    }
    try tokens.joined(separator: "\n").write(toFile: tokensFile, atomically: true, encoding: .utf8)
    say("ready")
    await withDiscardingTaskGroup { tasks in
        for connection in connections {
            tasks.addTask {
                do {
                    for try await push in connection.pushes {
                        connection.acknowledge(push)
                        return
                    }
                } catch {}
            }
        }
    }
    say("received")
    for connection in connections { await connection.close() }
}

/// `--delivered-store N`: the device store alone, as the remote path writes it — N delivered
/// notifications with random identifiers (apns-ids) and push keys, the payload of the pushes
/// above, written in bursts of 32 (`deliver`, each burst awaited, i.e. one group commit
/// each), for one app. Prints the process's CPU time (the writer and the WAL checkpointer
/// included) and the wall time per notification for each tenth of the list as it grows.
func measureDeliveredStore(total: Int) async throws {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tidings-delivered-bench-\(UUID().uuidString.prefix(8))")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: dir) }
    let store = try SQLiteDeviceStore(path: dir.appendingPathComponent("device.sqlite").path)
    var notifications: [(DeliveredNotificationValue, String)] = []
    for i in 0..<total {
        let id = UUID().uuidString
        var content = NotificationContentValue()
        content.title = "Bench"
        content.body = "push \(id)"
        content.userInfo = ["k": .integer(1), "aps": .dictionary(["alert": .dictionary(["title": .string("Bench"), "body": .string("push \(id)")])])]
        notifications.append((DeliveredNotificationValue(request: NotificationRequestValue(identifier: id, content: content, trigger: .push), date: Date()), "\(id)#\(i)"))
    }
    let step = max(1, total / 10)
    var windowStart = (cpu: cpuSeconds(), wall: ContinuousClock.now, index: 0)
    var index = 0
    while index < total {
        let burst = notifications[index..<min(total, index + 32)]
        let tickets = burst.map { store.deliver($0.0, for: "com.example.bench", push: $0.1) }
        for ticket in tickets { _ = try await ticket.value }
        index += burst.count
        if index % step < 32 || index == total {
            let n = Double(index - windowStart.index)
            let wall = ContinuousClock.now - windowStart.wall
            print("delivered \(windowStart.index)–\(index): CPU \(String(format: "%.1f", (cpuSeconds() - windowStart.cpu) / n * 1e6)) µs, wall \(String(format: "%.1f", secondsOf(wall) / n * 1e6)) µs per notification (load \(loadAverage()))")
            windowStart = (cpuSeconds(), ContinuousClock.now, index)
        }
    }
    print("WAL checkpoints: \(store.checkpointCounts.background) in the background, \(store.checkpointCounts.writer) on the writer at the WAL's limit, \(store.checkpointCatchUps) catch-ups on the writer")
}

/// `--plan N`: the payload handling of the remote path alone — `RemoteNotificationMapping.plan`
/// (payload bytes → request, flags and `userInfo`) and then `BinaryRequestCodec.encode` of the
/// planned request (how the delivered list stores it), each timed over N pushes of each kind:
/// the two bodies the runs above send, and a 3 KB one with nested custom keys (`--kind` picks the
/// kinds whose name starts with it). Prints wall and CPU nanoseconds per push for each step; the
/// steps run in turn over all N pushes.
func measurePlan(total: Int) throws {
    let large = { (id: String) -> String in
        let attachments = (0..<6).map { i in
            #"{"url":"https://cdn.example.com/media/\#(id)/\#(i).jpg","bytes":\#(100_000 + i * 7_919),"width":1280,"height":960,"ratio":1.3333,"kind":"image/jpeg","alt":"Photo \#(i) of the trip \u00e9t\u00e9 \ud83c\udf04"}"#
        }.joined(separator: ",")
        let participants = (0..<8).map { i in
            #"{"id":"user-\#(i)-\#(id.prefix(8))","name":"Participant Number \#(i)","online":\#(i % 2 == 0),"lastSeen":\#(1_764_000_000 + i),"score":\#(Double(i) * 0.25 + 0.1),"avatar":null}"#
        }.joined(separator: ",")
        return #"{"aps":{"alert":{"title":"Trip photos","subtitle":"Shared album","body":"Anna added 6 photos to \"Summer\" \u2014 tap to see them","loc-args":["Anna",6]},"badge":12,"sound":"default","thread-id":"album-\#(id)","category":"ALBUM","mutable-content":1,"relevance-score":0.8},"message":{"id":"\#(id)","sent":1764150000123,"text":"Line one\nLine two with a tab\there and quotes \"like this\" and unicode \u4f60\u597d","attachments":[\#(attachments)],"reactions":{"like":3,"love":1,"laugh":0},"reply":{"to":"m-1","depth":{"a":{"b":{"c":{"d":[1,2,[3,4,{"e":null}]]}}}}}},"conversation":{"id":"c-\#(id.prefix(8))","participants":[\#(participants)],"muted":false,"tags":["family","travel","2026"]},"k":1}"#
    }
    let kinds: [(name: String, body: (String) -> String)] = [
        ("bench push", { #"{"aps":{"alert":{"title":"Bench","body":"push \#($0)"}},"k":1}"# }),
        ("extension push", { #"{"aps":{"alert":{"title":"Bench","body":"push \#($0)"},"mutable-content":1},"k":1,"fixture":"noop"}"# }),
        ("3 KB nested", large),
    ]
    print("payload → plan and the request's encoding, \(total) pushes of each kind (load \(loadAverage()))")
    for kind in kinds where option("--kind").map({ kind.name.hasPrefix($0) }) ?? true {
        let pushes = (0..<total).map { i -> RemotePush in
            let id = UUID().uuidString.lowercased()
            return RemotePush(apnsID: id, sequence: Int64(i), bundleIdentifier: "com.example.bench", expiresAt: 0, acceptedAt: 0,
                              payload: Array(kind.body(id).utf8))!
        }
        var requests: [NotificationRequestValue] = []
        requests.reserveCapacity(total)
        let planCPU = cpuSeconds()
        let planStart = ContinuousClock.now
        for push in pushes {
            let plan = try RemoteNotificationMapping.plan(push, localizedStrings: [:], languages: [])
            requests.append(plan.request!)
        }
        let planWall = secondsOf(ContinuousClock.now - planStart)
        let planCPUSeconds = cpuSeconds() - planCPU
        var encodedBytes = 0
        let encodeCPU = cpuSeconds()
        let encodeStart = ContinuousClock.now
        for request in requests { encodedBytes += try BinaryRequestCodec.encode(request).count }
        let encodeWall = secondsOf(ContinuousClock.now - encodeStart)
        let encodeCPUSeconds = cpuSeconds() - encodeCPU
        let n = Double(total)
        print("  \(kind.name) (\(pushes[0].payload.count) bytes): plan \(Int(planWall / n * 1e9)) ns wall, \(Int(planCPUSeconds / n * 1e9)) ns CPU per push; encode \(Int(encodeWall / n * 1e9)) ns wall, \(Int(encodeCPUSeconds / n * 1e9)) ns CPU per push (\(encodedBytes / total) bytes)")
    }
}

/// `--inbox N [--burst B] [--lag L] [--two-writes] [--read-back]`: the daemon's inbox
/// (`remote.sqlite`) alone, as the gateway link writes it for N pushes with random apns-ids
/// and the payload above: receipt in bursts of B (64; one FULL commit each), then per burst
/// one app's hand-off — the pushes marked processed with their `presented` events and the
/// events confirmed since the last hand-off forgotten, in one write (`--two-writes`: the
/// events kept first, then the marks, as before session 11) — and the event sender's windows
/// (1,024, the oldest first, as if the gateway confirmed them) whenever more than L (2,048)
/// events wait, taken from memory (`--read-back`: read from the inbox and cleared in a write
/// of their own, as before session 12). Prints the process's CPU time and the wall time per
/// push for each tenth and for all.
func measureInbox(total: Int, burst: Int, lag: Int, oneWrite: Bool, readBack: Bool) async throws {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tidings-inbox-bench-\(UUID().uuidString.prefix(8))")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: dir) }
    let inbox = try SQLiteRemoteInbox(path: dir.appendingPathComponent("remote.sqlite").path)
    let now = Int64(Date().timeIntervalSince1970 * 1000)
    let pushes = (0..<total).map { i in
        let id = UUID().uuidString
        return RemotePush(apnsID: id, sequence: Int64(i + 1), bundleIdentifier: "com.example.bench", expiresAt: now + 3_600_000, acceptedAt: now,
                          payload: Array(#"{"aps":{"alert":{"title":"Bench","body":"push \#(id)"}},"k":1}"#.utf8))!
    }
    let step = max(1, total / 10)
    var windowStart = (cpu: cpuSeconds(), wall: ContinuousClock.now, index: 0)
    let start = windowStart
    var index = 0, waiting = 0
    var outbox: [PendingDeliveryEvent] = [], confirmed: [PendingDeliveryEvent] = []
    while index < total {
        let received = Array(pushes[index..<min(total, index + burst)])
        _ = try await inbox.receive(received, at: Date())
        let events = received.map { PendingDeliveryEvent(event: "presented", apnsID: $0.apnsID, sequence: $0.sequence) }
        if oneWrite {
            try await inbox.markProcessed(received, keeping: events, clearing: confirmed)
            confirmed = []
        } else {
            try await inbox.addPendingEvents(events)
            try await inbox.markProcessed(received)
        }
        outbox += events
        waiting += received.count
        if waiting > lag {
            if readBack || !oneWrite {
                let window = try await inbox.pendingEvents(limit: 1_024)
                try await inbox.clearEvents(window)
                waiting -= window.count
            } else {
                let window = outbox.prefix(1_024)
                confirmed += window
                outbox.removeFirst(window.count)
                waiting -= window.count
            }
        }
        index += received.count
        if index % step < burst || index == total {
            let n = Double(index - windowStart.index)
            let wall = ContinuousClock.now - windowStart.wall
            print("inbox \(windowStart.index)–\(index): CPU \(String(format: "%.1f", (cpuSeconds() - windowStart.cpu) / n * 1e6)) µs, wall \(String(format: "%.1f", secondsOf(wall) / n * 1e6)) µs per push (load \(loadAverage()))")
            windowStart = (cpuSeconds(), ContinuousClock.now, index)
        }
    }
    print("inbox, all \(total): CPU \(String(format: "%.1f", (cpuSeconds() - start.cpu) / Double(total) * 1e6)) µs, wall \(String(format: "%.1f", secondsOf(ContinuousClock.now - start.wall) / Double(total) * 1e6)) µs per push")
}
