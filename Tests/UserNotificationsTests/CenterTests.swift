import Foundation
import Testing
import TidingsCore
@_spi(Tidings) @testable import UserNotifications

@Suite("UNUserNotificationCenter over a scripted daemon", .timeLimit(.minutes(1)))
struct CenterTests {
    @Test func addSendsTheRequestValue() async throws {
        let transport = FakeTransport()
        let center = UNUserNotificationCenter(transport: transport)
        let content = UNMutableNotificationContent()
        content.title = "Hello"
        content.userInfo = ["name": "Adu Test"]
        let request = UNNotificationRequest(identifier: "r1", content: content, trigger: UNTimeIntervalNotificationTrigger(timeInterval: 5, repeats: false))
        try await center.add(request)
        guard case .add(let value)? = transport.calls.last else {
            Issue.record("no add: \(transport.calls)")
            return
        }
        #expect(value.identifier == "r1")
        #expect(value.content.title == "Hello")
        #expect(value.content.userInfo == ["name": .string("Adu Test")])
        #expect(value.trigger == .timeInterval(seconds: 5, repeats: false))
        #expect(request.identifier == "r1") // still usable after the call
    }

    @Test func addWithAnInvalidTriggerFailsWithoutContactingTheDaemon() async {
        let transport = FakeTransport()
        let center = UNUserNotificationCenter(transport: transport)
        let request = UNNotificationRequest(identifier: "bad", content: UNMutableNotificationContent(), trigger: UNTimeIntervalNotificationTrigger(timeInterval: 10, repeats: true))
        await #expect { try await center.add(request) } throws: { ($0 as? UNError)?.code == .invalidTrigger }
        let error: (any Error)? = await withCheckedContinuation { continuation in
            center.add(request) { continuation.resume(returning: $0) }
        }
        #expect((error as? UNError)?.code == .invalidTrigger)
        #expect(transport.calls.isEmpty)
    }

    @Test func completionHandlerFormReportsSuccessAsNil() async {
        let center = UNUserNotificationCenter(transport: FakeTransport())
        let request = UNNotificationRequest(identifier: "ok", content: UNMutableNotificationContent(), trigger: nil)
        let error: (any Error)? = await withCheckedContinuation { continuation in
            center.add(request) { continuation.resume(returning: $0) }
        }
        #expect(error == nil)
    }

    @Test func daemonFailuresCarryTheDaemonsExplanation() async {
        let transport = FakeTransport { (request: AppRequest) throws(NotificationError) -> AppReply in
            switch request {
            case .add: return .failure(NotificationError(.attachmentMoveIntoDataStoreFailed, "The app's attachment store is full (quota 100 MB)."))
            default: throw NotificationError(.daemonUnavailable, "No daemon listens on /run/tidings.sock; start it with `tidings serve`.")
            }
        }
        let center = UNUserNotificationCenter(transport: transport)
        let request = UNNotificationRequest(identifier: "r", content: UNMutableNotificationContent(), trigger: nil)
        await #expect { try await center.add(request) } throws: { error in
            guard let error = error as? UNError else { return false }
            return error.code == .attachmentMoveIntoDataStoreFailed && error.localizedDescription.contains("quota")
        }
        await #expect { try await center.requestAuthorization(options: [.alert]) } throws: { error in
            guard let error = error as? UNError else { return false }
            return error.code == .daemonUnavailable && error.message.contains("tidings serve")
        }
        let (granted, error) = await withCheckedContinuation { (continuation: CheckedContinuation<(Bool, (any Error)?), Never>) in
            center.requestAuthorization(options: [.alert]) { continuation.resume(returning: ($0, $1)) }
        }
        #expect(!granted)
        #expect((error as? UNError)?.code == .daemonUnavailable)
        // Calls without an error channel read as empty / not determined.
        #expect(await center.notificationSettings().authorizationStatus == .notDetermined)
        #expect(await center.pendingNotificationRequests().isEmpty)
        #expect(await center.deliveredNotifications().isEmpty)
        #expect(await center.notificationCategories().isEmpty)
    }

    @Test func authorizationAndSettings() async throws {
        let transport = FakeTransport()
        let center = UNUserNotificationCenter(transport: transport)
        #expect(try await center.requestAuthorization(options: [.alert, .sound, .badge]))
        #expect(transport.calls.first == .requestAuthorization([.alert, .sound, .badge]))
        let settings = await center.notificationSettings()
        #expect(settings.authorizationStatus == .authorized)
        #expect(settings.soundSetting == .enabled)
        let viaHandler = await withCheckedContinuation { continuation in
            center.getNotificationSettings { continuation.resume(returning: $0) }
        }
        #expect(viaHandler == settings)
    }

    @Test func negativeBadgeFailsWithoutContactingTheDaemon() async throws {
        let transport = FakeTransport()
        let center = UNUserNotificationCenter(transport: transport)
        await #expect { try await center.setBadgeCount(-1) } throws: { ($0 as? UNError)?.code == .badgeInputInvalid }
        let error: (any Error)? = await withCheckedContinuation { continuation in
            center.setBadgeCount(-3) { continuation.resume(returning: $0) }
        }
        #expect((error as? UNError)?.code == .badgeInputInvalid)
        #expect(transport.calls.isEmpty)
        try await center.setBadgeCount(0)
        #expect(transport.calls == [.setBadge(0)])
    }

    @Test func categoriesPendingAndDeliveredMapToClasses() async {
        let category = CategoryValue(identifier: "saySomethingCategory", actions: [
            ActionValue(identifier: "action.input", title: "输入", options: ActionValue.foreground, textInput: .init(buttonTitle: "发送", placeholder: "你想说什么...")),
            ActionValue(identifier: "action.cancel", title: "取消", options: ActionValue.destructive),
        ], options: CategoryValue.customDismissAction)
        let transport = FakeTransport { (request: AppRequest) throws(NotificationError) -> AppReply in
            switch request {
            case .getCategories: .categories([category])
            case .getPendingScheduled: .pendingRequests([Fixtures.request("p1"), Fixtures.request("p2", trigger: .calendar(DateComponents(hour: 8), repeats: true))]
                .map { PendingRequestValue(request: $0, nextTriggerDate: nil) })
            case .getDelivered: .notifications([Fixtures.delivered("d1")])
            default: .ok
            }
        }
        let center = UNUserNotificationCenter(transport: transport)
        let categories = await center.notificationCategories()
        let saySomething = categories.first
        #expect(categories.count == 1)
        #expect(saySomething?.options == [.customDismissAction])
        #expect((saySomething?.actions.first as? UNTextInputNotificationAction)?.textInputButtonTitle == "发送")
        #expect(saySomething?.actions.last?.options == [.destructive])

        let pending = await center.pendingNotificationRequests()
        #expect(pending.map(\.identifier) == ["p1", "p2"])
        #expect(pending[0].trigger is UNTimeIntervalNotificationTrigger)
        #expect((pending[1].trigger as? UNCalendarNotificationTrigger)?.dateComponents.hour == 8)
        #expect(pending[1].trigger?.repeats == true)

        let delivered = await center.deliveredNotifications()
        #expect(delivered.first?.request.identifier == "d1")
        #expect(delivered.first?.request.content.userInfo["name"] as? String == "Adu Test")

        let viaHandler = await withCheckedContinuation { continuation in
            center.getPendingNotificationRequests { continuation.resume(returning: $0.map(\.identifier)) }
        }
        #expect(viaHandler == ["p1", "p2"])
        let deliveredIDs = await withCheckedContinuation { continuation in
            center.getDeliveredNotifications { continuation.resume(returning: $0.map(\.request.identifier)) }
        }
        #expect(deliveredIDs == ["d1"])
        let categoryIDs = await withCheckedContinuation { continuation in
            center.getNotificationCategories { continuation.resume(returning: $0.map(\.identifier)) }
        }
        #expect(categoryIDs == ["saySomethingCategory"])
    }

    @Test func fireAndForgetCallsAreSentInOrder() {
        let transport = FakeTransport()
        let center = UNUserNotificationCenter(transport: transport)
        let category = UNNotificationCategory(identifier: "c", actions: [UNNotificationAction(identifier: "a", title: "A")], intentIdentifiers: [], options: [])
        center.setNotificationCategories([category])
        center.removePendingNotificationRequests(withIdentifiers: ["a", "b"])
        center.removeAllPendingNotificationRequests()
        center.removeDeliveredNotifications(withIdentifiers: ["c"])
        center.removeAllDeliveredNotifications()
        #expect(transport.sends == [
            .setCategories([CategoryValue(identifier: "c", actions: [ActionValue(identifier: "a", title: "A")])]),
            .removePending(["a", "b"]),
            .removeAllPending,
            .removeDelivered(["c"]),
            .removeAllDelivered,
        ])
        #expect(transport.calls.isEmpty)
        #expect(center.supportsContentExtensions)
    }

    @Test func testingCurrentOverridesCurrent() {
        let center = UNUserNotificationCenter(transport: FakeTransport())
        UNUserNotificationCenter.$testingCurrent.withValue(center) {
            #expect(UNUserNotificationCenter.current() === center)
        }
    }
}
