import Foundation
import Testing
import TidingsTesting
import UserNotifications

@Suite("UNUserNotificationCenter call order")
struct CenterOrderingTests {
    @Test("add with a completion handler, then remove at once: the removal wins, as on iOS")
    func addThenRemove() async throws {
        let system = try await NotificationTestSystem.start()
        let center = try await system.center(for: "com.example.order")
        _ = try await center.requestAuthorization(options: [.alert])
        for round in 0..<20 {
            let content = UNMutableNotificationContent()
            content.title = "round \(round)"
            let request = UNNotificationRequest(identifier: "r\(round)", content: content,
                                                trigger: UNTimeIntervalNotificationTrigger(timeInterval: 60, repeats: false))
            center.add(request, withCompletionHandler: nil)
            center.removePendingNotificationRequests(withIdentifiers: ["r\(round)"])
        }
        let pending = await center.pendingNotificationRequests()
        #expect(pending.isEmpty, "left pending: \(pending.map(\.identifier))")
        await system.shutdown()
    }
}
