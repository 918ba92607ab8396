// Daemon benchmark: one daemon holding N pending requests (default 1,000,000).
//
//   swift build -c release --product DaemonBenchmark
//   .build/release/DaemonBenchmark [--count N] [--window W] [--dir DIR]
//
// Measures, on the real paths: add throughput through the app socket (the daemon in this
// process, a client on a Unix socket) and in-process (engine + SQLite store), resident
// memory per pending request, fire lateness p50/p99/max while a million requests are
// pending, and the time a restarted engine takes to recover the schedule.
import Foundation
import Synchronization
import TidingsCore
import TidingsDaemon
import TidingsEngine
import TidingsIPC
import TidingsSQLite
import TidingsStorage
import Logging

struct Options {
    var count = 1_000_000
    var window = 512
    var directory = "/tmp/tidings-bench-\(getpid())"
    var keep = false

    init() {
        var args = CommandLine.arguments.dropFirst().makeIterator()
        while let arg = args.next() {
            switch arg {
            case "--count": count = Int(args.next() ?? "") ?? count
            case "--window": window = Int(args.next() ?? "") ?? window
            case "--dir": directory = args.next() ?? directory
            case "--keep": keep = true
            default: fatalError("unknown argument \(arg)")
            }
        }
    }
}

func residentBytes() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
        let kb = line.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
        return kb * 1024
    }
    return 0
}

/// CPU time (user + system) this process has used, in seconds: on a shared machine the
/// CPU cost of an add varies far less with the load than the rate does.
func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

func loadAverage() -> String {
    (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").prefix(3).joined(separator: " ") ?? "?"
}

func percentile(_ sorted: [Double], _ p: Double) -> Double {
    guard !sorted.isEmpty else { return .nan }
    return sorted[min(sorted.count - 1, Int((Double(sorted.count - 1) * p).rounded()))]
}

func content(_ i: Int) -> NotificationContentValue {
    var content = NotificationContentValue()
    content.title = "Reminder \(i)"
    content.body = "Water the plants in the east greenhouse"
    content.threadIdentifier = "garden"
    content.userInfo = ["plant": .integer(Int64(i % 97))]
    return content
}

/// Records when each notification reached the presenter.
final class LatencyPresenter: Presenter {
    let due = Mutex<[String: Date]>([:])
    let lateness = Mutex<[Double]>([])
    func present(_ notification: PresentedNotification) async {
        let now = Date()
        let id = notification.notification.request.identifier
        if let date = due.withLock({ $0.removeValue(forKey: id) }) {
            lateness.withLock { $0.append(now.timeIntervalSince(date) * 1000) }
        }
    }
}

/// Pipelines `count` requests through `call`, keeping `window` in flight.
func pipelined(count: Int, window: Int, _ call: @escaping @Sendable (Int) async -> Bool) async -> (seconds: Double, failures: Int) {
    let start = ContinuousClock.now
    let failures = await withTaskGroup(of: Bool.self) { group in
        var next = 0
        var failed = 0
        while next < min(window, count) { let i = next; group.addTask { await call(i) }; next += 1 }
        while let ok = await group.next() {
            if !ok { failed += 1 }
            if next < count { let i = next; group.addTask { await call(i) }; next += 1 }
        }
        return failed
    }
    let elapsed = ContinuousClock.now - start
    return (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18, failures)
}

let options = Options()
var logger = Logger(label: "bench")
logger.logLevel = .error
try? FileManager.default.removeItem(atPath: options.directory)
try FileManager.default.createDirectory(atPath: options.directory, withIntermediateDirectories: true)
print("DaemonBenchmark: \(options.count) pending, window \(options.window), data in \(options.directory)")
print("machine: \(ProcessInfo.processInfo.activeProcessorCount) cores, \(ProcessInfo.processInfo.physicalMemory / 1_073_741_824) GiB")

// 1. Through the app socket: the daemon in this process, an app client on its socket.
let latency = LatencyPresenter()
let daemonData = options.directory + "/daemon"
let daemon = try await buildDaemon(DaemonConfiguration(
    dataDirectory: daemonData, consent: .grant, developmentMode: true, terminalPresenter: false,
    presenters: [latency], logger: logger))
let daemonTask = Task { try await daemon.run() }
let client = try await AppSocketClient.connect(path: daemon.socketPath)
_ = try await client.call(.hello(AppHello(bundleIdentifier: "com.example.bench", state: .background)))
_ = try await client.call(.requestAuthorization([.alert]))
let farAway = 86_400.0 * 30
let rssBefore = residentBytes()
let ipcCPU = cpuSeconds()
let ipc = await pipelined(count: options.count, window: options.window) { i in
    let request = NotificationRequestValue(identifier: "r\(i)", content: content(i), trigger: .timeInterval(seconds: farAway + Double(i), repeats: false))
    guard let reply = try? await client.call(.add(request)) else { return false }
    if case .failure = reply { return false }
    return true
}
let rssAfter = residentBytes()
let ipcCPUPerAdd = (cpuSeconds() - ipcCPU) / Double(options.count) * 1e6
print(String(format: "IPC add: %d requests in %.2f s = %.0f adds/s (%d failed); %.1f µs CPU per add (client and daemon)",
             options.count, ipc.seconds, Double(options.count) / ipc.seconds, ipc.failures, ipcCPUPerAdd) + "; load average \(loadAverage())")
print(String(format: "RSS: %.1f MB before, %.1f MB after; %.0f bytes per pending request (daemon and client in one process)",
             Double(rssBefore) / 1e6, Double(rssAfter) / 1e6, Double(rssAfter - rssBefore) / Double(options.count)))

// 2. Fire lateness with the million pending: 2,000 requests due every 5 ms over 10 s, from a
// second app, so that its pending list (with each request's scheduled date) is short to read.
let lateCount = 2_000
let lateClient = try await AppSocketClient.connect(path: daemon.socketPath)
_ = try await lateClient.call(.hello(AppHello(bundleIdentifier: "com.example.bench.late", state: .background)))
_ = try await lateClient.call(.requestAuthorization([.alert]))
let base = Date().addingTimeInterval(3)
_ = await pipelined(count: lateCount, window: 64) { i in
    let fire = base.addingTimeInterval(Double(i) * 0.005)
    let request = NotificationRequestValue(identifier: "late\(i)", content: content(i), trigger: .timeInterval(seconds: fire.timeIntervalSinceNow, repeats: false))
    guard let reply = try? await lateClient.call(.add(request)) else { return false }
    if case .failure = reply { return false }
    return true
}
// Lateness is measured against the date the daemon scheduled (a time-interval trigger counts
// from when the daemon received the add), read back before the first one is due.
guard case .pendingRequests(let scheduled) = try await lateClient.call(.getPendingScheduled), Date() < base else {
    fatalError("could not read the scheduled dates before the first was due")
}
for entry in scheduled {
    if let date = entry.nextTriggerDate { latency.due.withLock { $0[entry.request.identifier] = date } }
}
print("scheduled \(scheduled.count) requests, read back \(String(format: "%.0f", base.timeIntervalSinceNow * 1000)) ms before the first was due")
while latency.lateness.withLock({ $0.count }) < lateCount, Date() < base.addingTimeInterval(40) {
    try await Task.sleep(for: .milliseconds(100))
}
let late = latency.lateness.withLock { $0 }.sorted()
print(String(format: "fire lateness with %d pending: p50 %.2f ms, p99 %.2f ms, max %.2f ms (%d of %d fired)",
             options.count, percentile(late, 0.5), percentile(late, 0.99), late.last ?? .nan, late.count, lateCount) + "; load average \(loadAverage())")

// 2b. A burst: 20,000 requests of the second app due at the same second (a calendar trigger,
// like a 09:00 reminder for everyone), with the million pending: how long until the last is
// presented, and the lateness of each.
let burstCount = 20_000
var calendar = Calendar(identifier: .gregorian)
calendar.timeZone = TimeZone.current
let burstDate = Date(timeIntervalSinceReferenceDate: (Date().timeIntervalSinceReferenceDate + 4).rounded(.up))
let burstComponents = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: burstDate)
latency.lateness.withLock { $0.removeAll() }
latency.due.withLock { due in for i in 0..<burstCount { due["burst\(i)"] = burstDate } }
let burstAdd = await pipelined(count: burstCount, window: 512) { i in
    let request = NotificationRequestValue(identifier: "burst\(i)", content: content(i), trigger: .calendar(burstComponents, repeats: false))
    guard let reply = try? await lateClient.call(.add(request)) else { return false }
    if case .failure = reply { return false }
    return true
}
guard burstAdd.failures == 0, Date() < burstDate else { fatalError("the burst was not scheduled before it was due") }
while latency.lateness.withLock({ $0.count }) < burstCount, Date() < burstDate.addingTimeInterval(60) {
    try await Task.sleep(for: .milliseconds(20))
}
let burst = latency.lateness.withLock { $0 }.sorted()
print(String(format: "burst of %d due at once with %d pending: all presented %.0f ms after the due second (%.0f fires/s); lateness p50 %.0f ms, p99 %.0f ms (%d of %d)",
             burstCount, options.count, burst.last ?? .nan, Double(burst.count) / ((burst.last ?? .nan) / 1000), percentile(burst, 0.5), percentile(burst, 0.99), burst.count, burstCount)
      + "; load average \(loadAverage())")

daemonTask.cancel()
_ = try? await daemonTask.value
client.close()
lateClient.close()

// 3. Restart recovery: a new engine on the same file reads the schedule back.
let recoverStart = ContinuousClock.now
let reopened = try SQLiteDeviceStore(path: daemonData + "/device.sqlite")
let engine = NotificationEngine(configuration: EngineConfiguration(
    store: reopened, attachments: AttachmentStore(root: URL(fileURLWithPath: daemonData + "/attachments")), logger: logger))
try await engine.recover()
let recovered = ContinuousClock.now - recoverStart
print("restart recovery: \(await engine.scheduledCount) scheduled requests in \(recovered)")

// 4. In process: the engine on a fresh SQLite store, no socket.
let inProcessStore = try SQLiteDeviceStore(path: options.directory + "/inprocess.sqlite")
let inProcess = NotificationEngine(configuration: EngineConfiguration(
    store: inProcessStore, attachments: AttachmentStore(root: URL(fileURLWithPath: options.directory + "/att")),
    consent: FixedConsent.autoGrant, logger: logger))
final class Link: AppLink { func send(_ event: DaemonEvent) {} }
let link = Link()
let app = AppRecord(bundleIdentifier: "com.example.bench", displayName: "Bench", executable: "/bin/true", directory: "/tmp", installedAt: Date())
try await inProcess.install(app)
await inProcess.connect(link, app: app, state: .background)
_ = await inProcess.handle(.requestAuthorization([.alert]), from: link).run()
let directCPU = cpuSeconds()
let direct = await pipelined(count: options.count, window: options.window) { i in
    let request = NotificationRequestValue(identifier: "r\(i)", content: content(i), trigger: .timeInterval(seconds: farAway + Double(i), repeats: false))
    if case .failure = await inProcess.handle(.add(request), from: link).run() { return false }
    return true
}
let directCPUPerAdd = (cpuSeconds() - directCPU) / Double(options.count) * 1e6
print(String(format: "in-process add: %d requests in %.2f s = %.0f adds/s (%d failed); %.1f µs CPU per add",
             options.count, direct.seconds, Double(options.count) / direct.seconds, direct.failures, directCPUPerAdd) + "; load average \(loadAverage())")

if !options.keep { try? FileManager.default.removeItem(atPath: options.directory) }
