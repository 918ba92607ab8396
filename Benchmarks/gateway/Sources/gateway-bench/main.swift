import Crypto
import Foundation
import Synchronization
import TidingsCore
import TidingsDaemon
import TidingsDevice
import UserNotifications

// gateway-bench device HOST PORT CERT TOPIC COUNT [KEYFILE]
//   One device: prints "TOKEN <hex>", then receives and acknowledges COUNT pushes and prints
//   the rate and the accept → receipt latency percentiles (the gateway's acceptedAt vs this
//   machine's clock: same machine, same clock). KEYFILE: the device key (PEM), made there if
//   missing, so that a later run is the same device (and gets what was stored for it).
// gateway-bench token HOST PORT CERT TOPIC KEYFILE
//   Prints "TOKEN <hex>": the device token for TOPIC of the device whose key is KEYFILE (PEM,
//   made there if missing), e.g. `<daemon data dir>/device-key.pem` before that daemon starts.
// gateway-bench idle HOST PORT CERT CONNECTIONS SOURCES
//   Opens CONNECTIONS device connections from the comma-separated SOURCES addresses and holds
//   them; prints "CONNECTED n" and waits for stdin to close.
// gateway-bench app SOCKET BUNDLE_ID RATE SECONDS
//   An app (run with TIDINGS_SOCKET and TIDINGS_BUNDLE_ID, the daemon in development mode,
//   consent granted) that adds RATE local notifications per second (delivered at once) for
//   SECONDS, while a person (the daemon's admin socket, as `tidings notifications respond`)
//   taps each one a second later and the app's delegate counts the responses and removes the
//   answered notifications. Prints "APP …" every minute and at the end.

func nowMs() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

/// This process's CPU time so far (user + system, all threads), in seconds.
func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// Receives and acknowledges `count` pushes: latencies (accept → receipt, ms), when the first
/// arrived, duplicates. Off the main actor: top-level code is main-actor isolated, and hopping
/// to it for every push cost the device a task switch per push.
nonisolated func receive(_ count: Int, from connection: DeviceConnection) async throws -> ([Int64], Int64?, Int) {
    var latencies: [Int64] = []
    latencies.reserveCapacity(count)
    var first: Int64?
    var seen = Set<Int64>()
    var duplicates = 0
    for try await push in connection.pushes {
        let now = nowMs()
        if first == nil { first = now }
        if !seen.insert(push.sequence).inserted { duplicates += 1 }
        latencies.append(now - push.acceptedAt)
        connection.acknowledge(push)
        if latencies.count >= count { break }
    }
    return (latencies, first, duplicates)
}

let args = CommandLine.arguments
guard args.count >= 2 else { fatalError("usage: gateway-bench device|idle …") }

/// The device key in `path` (PEM), made and written there if the file is missing.
func deviceKey(_ path: String) throws -> P256.Signing.PrivateKey {
    if let pem = try? String(contentsOfFile: path, encoding: .utf8) { return try P256.Signing.PrivateKey(pemRepresentation: pem) }
    let key = P256.Signing.PrivateKey()
    try key.pemRepresentation.write(toFile: path, atomically: true, encoding: .utf8)
    return key
}

switch args[1] {
case "token":
    let (host, port, cert, topic) = (args[2], Int(args[3])!, args[4], args[5])
    let connection = try await DeviceConnection.connect(DeviceClientConfiguration(host: host, port: port, deviceKey: try deviceKey(args[6]), trustRootPaths: [cert]))
    print("TOKEN \(try await connection.requestToken(topic: topic, environment: .development).hex)")
    await connection.close()

case "device":
    let (host, port, cert, topic, count) = (args[2], Int(args[3])!, args[4], args[5], Int(args[6])!)
    let key = args.count > 7 ? try deviceKey(args[7]) : P256.Signing.PrivateKey()
    let connection = try await DeviceConnection.connect(DeviceClientConfiguration(host: host, port: port, deviceKey: key, trustRootPaths: [cert]))
    // BENCH_ENVIRONMENT=production: a production token (the gateway then sends no apns-unique-id).
    let environment: APNsEnvironment = ProcessInfo.processInfo.environment["BENCH_ENVIRONMENT"] == "production" ? .production : .development
    let token = try await connection.requestToken(topic: topic, environment: environment)
    print("TOKEN \(token.hex)")
    fflush(nil)
    let (received, first, duplicates) = try await receive(count, from: connection)
    var latencies = received
    let elapsed = Double(nowMs() - (first ?? nowMs())) / 1000
    latencies.sort()
    func pct(_ p: Double) -> Int64 { latencies.isEmpty ? 0 : latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))] }
    print("RECEIVED \(latencies.count) in \(String(format: "%.2f", elapsed)) s = \(String(format: "%.0f", Double(latencies.count) / max(elapsed, 0.001))) pushes/s; latency ms p50 \(pct(0.5)) p99 \(pct(0.99)) max \(latencies.last ?? 0); duplicates \(duplicates); device CPU \(String(format: "%.1f", cpuSeconds() * 1e6 / Double(max(latencies.count, 1)))) µs per push")
    await connection.close()

case "idle":
    let (host, port, cert, total) = (args[2], Int(args[3])!, args[4], Int(args[5])!)
    let sources = args[6].split(separator: ",").map(String.init)
    let connected = await withTaskGroup(of: [DeviceConnection].self) { group in
        let workers = 32
        for w in 0..<workers {
            group.addTask {
                var mine: [DeviceConnection] = []
                var i = w
                while i < total {
                    var c = DeviceClientConfiguration(host: host, port: port, deviceKey: P256.Signing.PrivateKey(), trustRootPaths: [cert])
                    c.localAddress = sources[i % sources.count]
                    c.connectTimeout = .seconds(60)
                    if let connection = try? await DeviceConnection.connect(c) { mine.append(connection) }
                    i += workers
                }
                return mine
            }
        }
        var all: [DeviceConnection] = []
        for await part in group { all += part }
        return all
    }
    print("CONNECTED \(connected.count)")
    fflush(nil)
    while readLine() != nil {}
    for c in connected { await c.close() }

case "app":
    let (socket, bundleID, rate, seconds) = (args[2], args[3], Double(args[4])!, Double(args[5])!)
    final class Responses: NSObject, UNUserNotificationCenterDelegate, Sendable {
        let count = Atomic<Int>(0)
        func userNotificationCenter(_ center: UNUserNotificationCenter, willPresent notification: UNNotification,
                                    withCompletionHandler completionHandler: @escaping @Sendable (UNNotificationPresentationOptions) -> Void) {
            completionHandler([.banner, .list])
        }
        func userNotificationCenter(_ center: UNUserNotificationCenter, didReceive response: UNNotificationResponse,
                                    withCompletionHandler completionHandler: @escaping @Sendable () -> Void) {
            count.add(1, ordering: .relaxed)
            center.removeDeliveredNotifications(withIdentifiers: [response.notification.request.identifier])
            completionHandler()
        }
    }
    let center = UNUserNotificationCenter.current()
    let responses = Responses()
    center.delegate = responses
    guard try await center.requestAuthorization(options: [.alert, .sound]) else { fatalError("authorization denied (serve --consent grant)") }
    let person = try await AdminClient.connect(socketPath: socket)
    let start = ContinuousClock.now
    var added = 0, answered = 0, failures = 0, lastReport = start
    var waiting: [(String, ContinuousClock.Instant)] = []
    func report() {
        print("APP added \(added) answered \(answered) responses received \(responses.count.load(ordering: .relaxed)) failures \(failures)")
        fflush(nil)
    }
    while ContinuousClock.now - start < .seconds(seconds) {
        let now = ContinuousClock.now
        // Adds due by now at RATE per second.
        let due = Int((now - start) / .seconds(1) * rate)
        while added < due {
            let content = UNMutableNotificationContent()
            content.title = "soak \(added)"
            content.body = "a local notification, answered a second later"
            let id = "soak-\(added)"
            let error: (any Error)? = await withCheckedContinuation { done in
                center.add(UNNotificationRequest(identifier: id, content: content, trigger: nil)) { done.resume(returning: $0) }
            }
            if error != nil { failures += 1 }
            waiting.append((id, ContinuousClock.now))
            added += 1
        }
        // The person taps what has been shown for a second.
        while let (id, at) = waiting.first, ContinuousClock.now - at >= .seconds(1) {
            waiting.removeFirst()
            do {
                _ = try await person.send(.respond(bundleIdentifier: bundleID, identifier: id, actionIdentifier: ActionIdentifier.default, userText: nil))
                answered += 1
            } catch { failures += 1 }
        }
        if ContinuousClock.now - lastReport >= .seconds(60) { report(); lastReport = ContinuousClock.now }
        try await Task.sleep(for: .milliseconds(20))
    }
    try await Task.sleep(for: .seconds(2))
    report()
    person.close()

default:
    fatalError("unknown mode \(args[1])")
}
