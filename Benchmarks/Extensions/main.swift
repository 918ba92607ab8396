// The latency a warm no-op notification service extension adds to a push: the time
// `ServiceExtensionRunner.modify` takes for a request that the extension
// (`TestServiceExtension` in its "noop" mode) hands back unchanged. See docs/benchmarks.md.
//
//     swift build -c release --scratch-path .build-rel --product TestServiceExtension
//     swift run -c release --scratch-path .build-rel ExtensionBenchmark [--requests N]
import Foundation
import Logging
import TidingsCore
import TidingsDaemon
import TidingsEngine

func option(_ name: String) -> String? {
    guard let index = CommandLine.arguments.firstIndex(of: name), index + 1 < CommandLine.arguments.count else { return nil }
    return CommandLine.arguments[index + 1]
}

let requests = option("--requests").flatMap(Int.init) ?? 5000
let executable = option("--extension") ?? URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
    .deletingLastPathComponent().appendingPathComponent("TestServiceExtension").path
guard FileManager.default.isExecutableFile(atPath: executable) else {
    FileHandle.standardError.write(Data("no extension executable at \(executable): build the TestServiceExtension product first\n".utf8))
    exit(2)
}

let directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("tidings-extbench-\(UUID().uuidString.prefix(8))")
try FileManager.default.createDirectory(at: directory.appendingPathComponent("app"), withIntermediateDirectories: true)
let record = AppExtensionRecord(bundleIdentifier: "com.example.bench.service", point: .service, executable: executable)
let app = AppRecord(bundleIdentifier: "com.example.bench", displayName: "Bench", executable: "/bin/true",
                    directory: directory.appendingPathComponent("app").path, extensions: [record], installedAt: Date())
var logger = Logger(label: "bench")
logger.logLevel = .error
let runner = ServiceExtensionRunner(
    configuration: ServiceExtensionConfiguration(containerRoot: directory.appendingPathComponent("extensions").path),
    clock: SystemWallClock(),
    attachments: AttachmentStore(root: directory.appendingPathComponent("attachments")),
    logger: logger)

func request(_ index: Int) -> NotificationRequestValue {
    var content = NotificationContentValue()
    content.title = "Push \(index)"
    content.body = "A body of a typical length for a chat message, about eighty characters long."
    content.userInfo = [
        "aps": .dictionary(["alert": .dictionary(["title": .string("Push \(index)"), "body": .string(content.body)]),
                            "mutable-content": .integer(1)]),
        "fixture": .string("noop"),
    ]
    return NotificationRequestValue(identifier: "bench-\(index)", content: content, trigger: .push)
}

func milliseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
}

let clock = ContinuousClock()
let coldStart = clock.now
let first = await runner.modify(request(0), app: app, extension: record)
let cold = milliseconds(clock.now - coldStart)
guard first.failure == nil, let pid = first.processIdentifier else {
    print("the extension failed: \(first.failure ?? "no process")")
    exit(1)
}
for index in 1...200 { _ = await runner.modify(request(index), app: app, extension: record) }

var samples: [Double] = []
samples.reserveCapacity(requests)
let total = clock.now
for index in 0..<requests {
    let start = clock.now
    let outcome = await runner.modify(request(index), app: app, extension: record)
    samples.append(milliseconds(clock.now - start))
    guard outcome.failure == nil, outcome.processIdentifier == pid, outcome.content.title == "Push \(index)" else {
        print("request \(index) was not served by the warm process: \(outcome.failure ?? "pid \(outcome.processIdentifier ?? -1)")")
        exit(1)
    }
}
let elapsed = milliseconds(clock.now - total)
let sorted = samples.sorted()
func percentile(_ p: Double) -> Double { sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))] }
print("warm no-op service extension, \(requests) sequential requests on one process (pid \(pid))")
print(String(format: "cold start (spawn + first request): %.2f ms", cold))
print(String(format: "added latency: p50 %.3f ms, p90 %.3f ms, p99 %.3f ms, max %.3f ms", percentile(0.5), percentile(0.9), percentile(0.99), sorted.last ?? 0))
print(String(format: "throughput: %.0f requests/s", Double(requests) / (elapsed / 1000)))
// The warm extension's memory after all of it (docs/service-extensions.md, "Memory").
let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
let memory = status.split(separator: "\n").filter { ["VmPeak:", "VmSize:", "VmRSS:", "Threads:"].contains(where: $0.hasPrefix) }
print("extension process: " + memory.map { $0.split(whereSeparator: \.isWhitespace).joined(separator: " ") }.joined(separator: ", "))
await runner.shutdown()
try? FileManager.default.removeItem(at: directory)
