// Content extension latency: cold start (spawn the extension, first view rendered) and warm
// (open on the running process; an action's re-render), with the seeds' example
// (PresentItemsContentExtension, two items with images) on an in-process engine. The
// reference in the same run: spawning /bin/true and waiting for its exit. See
// docs/benchmarks.md, "Content extensions".
//
//     swift build --product PresentItemsContentExtension --product ContentExtensionBenchmark
//     .build/debug/ContentExtensionBenchmark [--cold N] [--warm N]
import Foundation
import Logging
import TidingsCore
import TidingsDaemon
import TidingsEngine
import TidingsTesting

func option(_ name: String) -> String? {
    guard let index = CommandLine.arguments.firstIndex(of: name), index + 1 < CommandLine.arguments.count else { return nil }
    return CommandLine.arguments[index + 1]
}

let coldRuns = option("--cold").flatMap(Int.init) ?? 20
let warmRuns = option("--warm").flatMap(Int.init) ?? 500
let executable = option("--extension") ?? URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
    .deletingLastPathComponent().appendingPathComponent("PresentItemsContentExtension").path
guard FileManager.default.isExecutableFile(atPath: executable) else {
    FileHandle.standardError.write(Data("no extension executable at \(executable): build PresentItemsContentExtension first\n".utf8))
    exit(2)
}

let bundle = "com.example.bench"
let system = try await NotificationTestSystem.start()
let appDirectory = system.directory.appendingPathComponent("app")
try FileManager.default.createDirectory(at: appDirectory, withIntermediateDirectories: true)
let record = AppExtensionRecord(bundleIdentifier: bundle + ".content", point: .content, executable: executable,
                                attributes: ["UNNotificationExtensionCategory": .string("customUI")])
try await system.engine.install(AppRecord(bundleIdentifier: bundle, displayName: "Bench", executable: "/usr/bin/true",
                                          directory: appDirectory.path, extensions: [record], installedAt: Date()))
let link = try await system.connect(bundle)
_ = try await link.call(.requestAuthorization(AuthorizationOptionsValue(rawValue: 7)))
_ = try await link.call(.setCategories([CategoryValue(identifier: "customUI", actions: [ActionValue(identifier: "switch", title: "Switch")])]))
let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + Array(repeating: 0, count: 24)
var content = NotificationContentValue()
content.title = "Two items"
content.categoryIdentifier = "customUI"
content.userInfo = ["items": .array([.dictionary(["title": .string("Blue"), "text": .string("The first item")]),
                                     .dictionary(["title": .string("Orange"), "text": .string("The second item")])])]
for name in ["one", "two"] {
    let file = appDirectory.appendingPathComponent("\(name).png")
    try Data(png).write(to: file)
    content.attachments.append(AttachmentValue(identifier: name, path: file.path, type: "public.png"))
}
_ = try await link.call(.add(NotificationRequestValue(identifier: "items", content: content, trigger: nil)))
await link.disconnect()
await system.settle()

var logger = Logger(label: "bench")
logger.logLevel = .error
@MainActor func host() async -> ContentExtensionHost {
    let host = ContentExtensionHost(configuration: ContentExtensionConfiguration(containerRoot: system.directory.appendingPathComponent("extensions").path),
                                    clock: SystemWallClock(), logger: logger)
    await host.attach(engine: system.engine)
    return host
}
let urls: ContentExtensionAttachmentURLs = { session, notification in
    notification.request.content.attachments.indices.map { "http://127.0.0.1/ext/\(session)/\($0)" }
}

func milliseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
}
func summary(_ samples: [Double]) -> String {
    let sorted = samples.sorted()
    func p(_ q: Double) -> Double { sorted[min(sorted.count - 1, Int(Double(sorted.count) * q))] }
    return String(format: "p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms (n=%d)", p(0.5), p(0.9), p(0.99), sorted.last ?? 0, sorted.count)
}
let clock = ContinuousClock()

// Reference: a process that does nothing, spawned and reaped.
var reference: [Double] = []
for _ in 0..<coldRuns {
    let start = clock.now
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/true")
    try process.run()
    process.waitUntilExit()
    reference.append(milliseconds(clock.now - start))
}

// Cold: a new host each time, so the first open spawns the extension.
var cold: [Double] = []
for _ in 0..<coldRuns {
    let h = await host()
    let start = clock.now
    let session = try await h.open(bundleIdentifier: bundle, notificationIdentifier: "items", attachmentURLs: urls)
    cold.append(milliseconds(clock.now - start))
    guard session.view?.html.contains("Blue") == true else {
        print("the extension failed: \(session.failure ?? "no view")")
        exit(1)
    }
    await h.shutdown()
}

// Warm: the process is running; open a view, re-render on "switch", close.
let h = await host()
_ = try await h.open(bundleIdentifier: bundle, notificationIdentifier: "items", attachmentURLs: urls)
let pid = await h.runningProcess(for: record.bundleIdentifier)
var warmOpen: [Double] = []
var warmAction: [Double] = []
for _ in 0..<warmRuns {
    for session in await h.openSessions { await h.close(session: session.id) }
    let start = clock.now
    let session = try await h.open(bundleIdentifier: bundle, notificationIdentifier: "items", attachmentURLs: urls)
    warmOpen.append(milliseconds(clock.now - start))
    let actionStart = clock.now
    guard case .rendered(let switched) = try await h.perform(session: session.id, actionIdentifier: "switch"),
          switched.view?.html.contains("Orange") == true else {
        print("switch did not re-render")
        exit(1)
    }
    warmAction.append(milliseconds(clock.now - actionStart))
}
guard await h.runningProcess(for: record.bundleIdentifier) == pid else {
    print("the warm runs were not served by one process")
    exit(1)
}
await h.shutdown()
await system.shutdown()
print("reference (spawn /bin/true, wait): \(summary(reference))")
print("cold start → rendered view:         \(summary(cold))")
print("warm open → rendered view:          \(summary(warmOpen))")
print("warm action → re-rendered view:     \(summary(warmAction))")
print(String(format: "cold p50 / reference p50: %.1f×", cold.sorted()[cold.count / 2] / reference.sorted()[reference.count / 2]))
