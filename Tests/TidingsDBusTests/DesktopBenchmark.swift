import Foundation
import Logging
import Synchronization
import Testing
import TidingsDaemon
import TidingsDBus
import TidingsTesting
import UserNotifications

/// `TIDINGS_DESKTOP_BENCH=1000 swift test --filter DesktopBenchmark` (docs/benchmarks.md,
/// "Desktop notifications"): an app's `add` → the server's reply to `Notify`, one at a time,
/// p50/p99; and, in the same run, a bare `Notify` round trip to the same server as the reference.
@Suite("Desktop benchmark", .enabled(if: ProcessInfo.processInfo.environment["TIDINGS_DESKTOP_BENCH"] != nil))
struct DesktopBenchmark {
    @Test("fire → Notify answered by the server, p50/p99")
    func fireToNotify() async throws {
        let count = Int(ProcessInfo.processInfo.environment["TIDINGS_DESKTOP_BENCH"] ?? "") ?? 1000
        guard let bus = try await PrivateBus.start() else { return }
        defer { bus.stop() }
        guard let mock = try await NotificationMock.start(on: bus) else { return }
        let notified = Mutex<CheckedContinuation<Void, Never>?>(nil)
        var logger = Logger(label: "bench")
        logger.logLevel = .error
        let presenter = DesktopPresenter(configuration: DesktopPresenterConfiguration(environment: bus.environment, stateFile: bus.directory.appendingPathComponent("ids.json").path),
                                         logger: logger, onNotify: { _ in notified.withLock { $0?.resume(); $0 = nil } })
        let system = try await NotificationTestSystem.start(presenters: [presenter])
        presenter.attach(system.engine)
        let runner = Task { await presenter.run() }
        #expect(await eventually { presenter.isOn })
        let center = try await system.center(for: "com.example.bench", state: .background)
        _ = try await center.requestAuthorization(options: [.alert, .sound])

        var fire: [Double] = []
        for i in 0 ..< count {
            let content = UNMutableNotificationContent()
            content.title = "bench \(i)"
            content.body = "body"
            let request = UNNotificationRequest(identifier: "b\(i)", content: content, trigger: nil)
            let start = ContinuousClock.now
            await withCheckedContinuation { continuation in
                notified.withLock { $0 = continuation }
                center.add(request, withCompletionHandler: nil)
            }
            fire.append(Double((ContinuousClock.now - start).components.attoseconds) / 1e15 + Double((ContinuousClock.now - start).components.seconds) * 1000)
        }
        // The engine alone: an app's add until the engine has taken it (no presenter waited for).
        var accepted: [Double] = []
        for i in 0 ..< min(count, 300) {
            let content = UNMutableNotificationContent()
            content.title = "quiet \(i)"
            let request = UNNotificationRequest(identifier: "q\(i)", content: content, trigger: UNTimeIntervalNotificationTrigger(timeInterval: 3600, repeats: false))
            let start = ContinuousClock.now
            try await center.add(request)
            let elapsed = ContinuousClock.now - start
            accepted.append(Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15)
        }
        let connection = try await bus.connect()
        var bare: [Double] = []
        for i in 0 ..< count {
            let start = ContinuousClock.now
            _ = try await connection.call(.methodCall(destination: "org.freedesktop.Notifications", path: "/org/freedesktop/Notifications", interface: "org.freedesktop.Notifications",
                                                      member: "Notify", body: DesktopNotificationArguments.sample(i)))
            let elapsed = ContinuousClock.now - start
            bare.append(Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15)
        }
        func percentile(_ values: [Double], _ p: Double) -> Double { let s = values.sorted(); return s[min(s.count - 1, Int(Double(s.count) * p))] }
        let line = String(format: "desktop bench n=%d: fire→Notify p50 %.2f ms p99 %.2f ms; bare Notify p50 %.2f ms p99 %.2f ms; ratio p50 %.2f; engine add (scheduled) p50 %.2f ms",
                          count, percentile(fire, 0.5), percentile(fire, 0.99), percentile(bare, 0.5), percentile(bare, 0.99), percentile(fire, 0.5) / percentile(bare, 0.5), percentile(accepted, 0.5))
        print(line)
        #expect(percentile(fire, 0.99) <= 20, "\(line)")
        await connection.close()
        runner.cancel()
        await runner.value
        await system.shutdown()
        await mock.stop()
    }
}

enum DesktopNotificationArguments {
    static func sample(_ i: Int) -> [DBusValue] {
        [.string("bench"), .uint32(0), .string(""), .string("bench \(i)"), .string("body"), .strings(["default", "Open"]),
         .dictionary(key: .string, value: .variant, [(.string("urgency"), .variant(.byte(1)))]), .int32(-1)]
    }
}
