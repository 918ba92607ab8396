import Foundation
import Testing
import TidingsCore
@_spi(Tidings) @testable import UserNotifications

/// A process whose daemon is not running: Apple crashes; Tidings reports why.
@Suite("Without a daemon", .timeLimit(.minutes(1)))
struct NoDaemonTests {
    func center() -> UNUserNotificationCenter {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("no-daemon-\(UUID().uuidString).sock").path
        return UNUserNotificationCenter(transport: SocketTransport(path: path, hello: AppHello(bundleIdentifier: "com.example.nodaemon", state: .active)))
    }

    @Test func callsFailWithDaemonUnavailableAndSayWhy() async {
        let center = center()
        await #expect { try await center.requestAuthorization(options: [.alert]) } throws: { error in
            guard let error = error as? UNError else { return false }
            return error.code == .daemonUnavailable && !error.message.isEmpty
        }
        let content = UNMutableNotificationContent()
        content.title = "t"
        let error: (any Error)? = await withCheckedContinuation { continuation in
            center.add(UNNotificationRequest(identifier: "x", content: content, trigger: nil)) { continuation.resume(returning: $0) }
        }
        #expect((error as? UNError)?.code == .daemonUnavailable)
        #expect((error as NSError?)?.domain == UNErrorDomain)
    }

    @Test func callsWithoutAnErrorChannelReportNothing() async {
        let center = center()
        #expect(await center.notificationSettings().authorizationStatus == .notDetermined)
        #expect(await center.pendingNotificationRequests().isEmpty)
        #expect(await center.deliveredNotifications().isEmpty)
        #expect(await center.notificationCategories().isEmpty)
        // Fire-and-forget calls do not crash.
        center.removeAllPendingNotificationRequests()
        center.removeDeliveredNotifications(withIdentifiers: ["x"])
        center.setNotificationCategories([])
    }
}
